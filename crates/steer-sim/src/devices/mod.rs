//! Devices: what moves data into and out of host memory (`nic`, `dsa`), how copies are split
//! among copy engines (`copy_policy`), the ports they share with
//! programs (`ring`), where their writes land (`placement`) and PCIe TPH (`tph`). A device kind is
//! one file with its parameters, its agent and a `KIND` static registering it in `DEVICES`, plus
//! its `mod` line here.

use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::error::ConfigResult;
use crate::kinds::{defaults_of, deserialize_at, Kind, SpecBase};
use crate::params::Describe;
use crate::platform::PlatformSpec;
use crate::system::Builder;

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
