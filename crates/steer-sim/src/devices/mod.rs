//! Devices: what moves data into and out of host memory (`nic`, `nvme`, `dsa`), how copies are
//! split among copy engines (`copy_policy`), the ports they share with programs (`ring`; every
//! kind's queues kept alike by `queues`), where their writes land (`placement`) and PCIe TPH
//! (`tph`). A device kind is one file with its parameters, its agent and a `KIND` static
//! registering it in `DEVICES`, plus its `mod` line here.

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
pub mod queues;
pub mod ring;
pub mod tph;

/// A device's parameters, whatever its kind.
pub trait DeviceSpec: SpecBase {
    /// The device's name, by which workloads and way masks refer to it.
    fn name(&self) -> &str;
    /// Checks every value that types alone cannot; errors name keys below `path`.
    fn validate(&self, path: &str, platform: &PlatformSpec) -> ConfigResult<()>;
    /// The consumer CPU of each queue it offers workloads (none for devices without queues).
    fn queue_cpus(&self) -> Vec<u32>;
    /// What its queues are, so that a workload consumes only the kind of queue it knows how to
    /// read: `ring::RX_QUEUE` unless the kind says otherwise (a name of its own, declared in its file).
    fn queue_port(&self) -> &'static str {
        ring::RX_QUEUE
    }
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
    pub devices: Vec<DeviceShape<'a>>,
}

/// A device as workloads see it before it is built: its name and its queues.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceShape<'a> {
    pub name: &'a str,
    /// What its queues are (`DeviceSpec::queue_port`).
    pub port: &'static str,
    /// The consumer CPU of each queue.
    pub queue_cpus: Vec<u32>,
}

impl<'a> DeviceShape<'a> {
    /// The shape of a device of `spec`.
    pub fn of(spec: &'a dyn DeviceSpec) -> DeviceShape<'a> {
        DeviceShape { name: spec.name(), port: spec.queue_port(), queue_cpus: spec.queue_cpus() }
    }

    /// A NIC-like device with RX rings consumed on `queue_cpus` (for tests of workloads).
    pub fn rx(name: &'a str, queue_cpus: Vec<u32>) -> DeviceShape<'a> {
        DeviceShape { name, port: ring::RX_QUEUE, queue_cpus }
    }
}

impl SystemShape<'_> {
    /// Consumer CPUs of a device's queues (empty if there is no such device).
    pub fn queue_cpus(&self, device: &str) -> Vec<u32> {
        self.devices.iter().find(|d| d.name == device).map(|d| d.queue_cpus.clone()).unwrap_or_default()
    }

    /// Fails at `{path}.cpu` unless `cpu` exists.
    pub fn check_cpu(&self, path: &str, cpu: u32) -> ConfigResult<()> {
        crate::error::ensure(cpu < self.cpus, &format!("{path}.cpu"), || {
            format!("CPU {cpu} out of range (the platform has {})", self.cpus)
        })
    }

    /// Fails at `{path}.device` or `{path}.queue` unless the device has queue `queue` of `port`.
    pub fn check_queue(&self, path: &str, device: &str, port: &str, queue: u32) -> ConfigResult<()> {
        let queues = self.check_device(path, device, port)?.len();
        crate::error::ensure((queue as usize) < queues, &format!("{path}.queue"), || {
            format!("device `{device}` has {queues} queue(s)")
        })
    }

    /// The consumer CPUs of `device`'s queues, which are of `port` (`ring::RX_QUEUE`, say); fails
    /// at `{path}.device` if there is no such device, its queues are of another port, or it has none.
    pub fn check_device(&self, path: &str, device: &str, port: &str) -> ConfigResult<&[u32]> {
        let key = format!("{path}.device");
        let shape = self
            .devices
            .iter()
            .find(|d| d.name == device)
            .ok_or_else(|| ConfigError::new(&key, format!("no device named `{device}`")))?;
        crate::error::ensure(!shape.queue_cpus.is_empty(), &key, || format!("device `{device}` has no {port}s"))?;
        crate::error::ensure(shape.port == port, &key, || {
            format!("device `{device}` offers {}s, not the {port}s this workload reads", shape.port)
        })?;
        Ok(&shape.queue_cpus)
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
pub mod nvme;
