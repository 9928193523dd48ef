//! Devices: what moves data into and out of host memory (`nic`, `dsa`), how copies are split
//! among copy engines (`copy_policy`), the ports they share with
//! programs (`ring`), where their writes land (`placement`) and PCIe TPH (`tph`). A device kind is
//! one file with its parameters, its agent and a `KIND` static registering it in `DEVICES`, plus
//! its `mod` line here.

use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::error::{ConfigError, ConfigResult};
use crate::kinds::{defaults_of, deserialize_at, Kind, SpecBase};
use crate::params::Describe;
use crate::platform::PlatformSpec;
use crate::system::Builder;

pub mod copy_job;
pub mod copy_policy;
pub mod dma;
pub mod offload;
pub mod pcie;
pub mod placement;
pub mod ring;
pub mod tph;

/// A device's parameters, whatever its kind.
pub trait DeviceSpec: SpecBase {
    /// The device's name, by which workloads and way masks refer to it.
    fn name(&self) -> &str;
    /// Checks every value that types alone cannot; errors name keys below `path`.
    fn validate(&self, path: &str, platform: &PlatformSpec) -> ConfigResult<()>;
    /// The consumer CPU of each RX queue it offers workloads (none for devices without queues).
    fn queue_cpus(&self) -> Vec<u32>;
    /// What copy jobs need to know of it, if it is a copy engine.
    fn copy_engines(&self, _platform: &PlatformSpec) -> Option<CopyEngineShape> {
        None
    }
    /// Host memory its model will hold (bytes), for the limit on runs that would need too much.
    fn host_bytes(&self) -> u64;
    /// Adds the device to a system being built: its agents, rings and signals.
    fn build(&self, builder: &mut Builder);
}

/// A copy engine device as copy jobs see it before it is built.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyEngineShape {
    pub name: String,
    /// The compute nodes with one of its devices.
    pub nodes: Vec<u32>,
    pub max_batch: u32,
    pub wq: dsa::WqMode,
    pub wq_size: u32,
}

/// What validation needs to know about the system a workload runs in.
pub struct SystemShape<'a> {
    pub platform: &'a crate::platform::PlatformSpec,
    pub cpus: u32,
    /// Copy engine devices.
    pub copy_engines: Vec<CopyEngineShape>,
    /// (device name, consumer CPU of each RX queue)
    pub devices: Vec<(&'a str, Vec<u32>)>,
}

impl SystemShape<'_> {
    /// Consumer CPUs of a device's queues (empty if there is no such device).
    pub fn queue_cpus(&self, device: &str) -> Vec<u32> {
        self.devices.iter().find(|(name, _)| *name == device).map(|(_, cpus)| cpus.clone()).unwrap_or_default()
    }

    /// Fails at `{path}.cpu` unless `cpu` exists.
    pub fn check_cpu(&self, path: &str, cpu: u32) -> ConfigResult<()> {
        crate::error::ensure(cpu < self.cpus, &format!("{path}.cpu"), || {
            format!("CPU {cpu} out of range (the platform has {})", self.cpus)
        })
    }

    /// Fails at `{path}.device` or `{path}.queue` unless the device has queue `queue`.
    pub fn check_queue(&self, path: &str, device: &str, queue: u32) -> ConfigResult<()> {
        let queues = self.check_device(path, device)?.len();
        crate::error::ensure((queue as usize) < queues, &format!("{path}.queue"), || {
            format!("device `{device}` has {queues} queue(s)")
        })
    }

    /// The consumer CPUs of `device`'s queues; fails at `{path}.device` if there is no such device
    /// or it has no queues.
    pub fn check_device(&self, path: &str, device: &str) -> ConfigResult<&[u32]> {
        let cpus = self
            .devices
            .iter()
            .find(|(name, _)| *name == device)
            .map(|(_, cpus)| cpus.as_slice())
            .ok_or_else(|| ConfigError::new(format!("{path}.device"), format!("no device named `{device}`")))?;
        crate::error::ensure(!cpus.is_empty(), &format!("{path}.device"), || {
            format!("device `{device}` has no RX queues")
        })?;
        Ok(cpus)
    }
}

/// A registered device kind.
pub type DeviceKind = Kind<dyn DeviceSpec>;

impl Kind<dyn DeviceSpec> {
    /// The registry entry of a device kind whose parameters are `T`.
    pub const fn of<T: DeviceSpec + DeserializeOwned + Default + Describe>(
        name: &'static str,
        description: &'static str,
    ) -> DeviceKind {
        Kind { name, description, parse: parse::<T>, defaults: defaults_of::<T> }
    }
}

fn parse<T: DeviceSpec + DeserializeOwned>(value: toml::Value, path: &str) -> ConfigResult<Arc<dyn DeviceSpec>> {
    Ok(Arc::new(deserialize_at::<T>(value, path)?))
}

/// Every device kind a scenario can name with `kind = "..."` under `[[devices]]`; each kind adds
/// its `KIND` here.
#[linkme::distributed_slice]
pub static DEVICES: [DeviceKind];

pub mod dsa;
pub mod nic;
