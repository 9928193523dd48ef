//! Workload programs that run on CPUs (see `cpu` for how a CPU runs them). A workload kind is one
//! file with its parameters (`params!`), its program(s) and a `KIND` static registering it in
//! `WORKLOADS`, plus its `mod` line here; `example.rs` is a commented template.

use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::error::{ConfigError, ConfigResult};
use crate::kinds::{defaults_of, deserialize_at, Kind, SpecBase};
use crate::params::Describe;
use crate::system::Builder;

/// A workload's parameters, whatever its kind.
pub trait WorkloadSpec: SpecBase {
    /// Checks every value that types alone cannot; errors name keys below `path`.
    fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()>;
    /// The CPUs it runs on.
    fn cpus(&self, system: &SystemShape) -> Vec<u32>;
    /// The RX queues it consumes, as (device, queue index); every queue needs a consumer.
    fn queues(&self, _system: &SystemShape) -> Vec<(String, u32)> {
        Vec::new()
    }
    /// Adds its programs to the system being built (`Builder::run_on`).
    fn build(&self, builder: &mut Builder);
}

/// A registered workload kind.
pub type WorkloadKind = Kind<dyn WorkloadSpec>;

impl Kind<dyn WorkloadSpec> {
    /// The registry entry of a workload kind whose parameters are `T`.
    pub const fn of<T: WorkloadSpec + DeserializeOwned + Default + Describe>(
        name: &'static str,
        description: &'static str,
    ) -> WorkloadKind {
        Kind { name, description, parse: parse::<T>, defaults: defaults_of::<T> }
    }
}

fn parse<T: WorkloadSpec + DeserializeOwned>(value: toml::Value, path: &str) -> ConfigResult<Arc<dyn WorkloadSpec>> {
    Ok(Arc::new(deserialize_at::<T>(value, path)?))
}

/// Every workload kind a scenario can name with `kind = "..."` under `[[workloads]]`; each kind
/// adds its `KIND` here.
#[linkme::distributed_slice]
pub static WORKLOADS: [WorkloadKind];

pub mod dsa_copy;
pub mod example;
pub mod handoff;
pub mod l2fwd;
pub mod pingpong;
pub mod probe;
pub mod qdp;
pub mod reduce;
pub mod rx_loop;
pub mod stream;
pub mod tcp_rx;

/// What validation needs to know about the system a workload runs in.
pub struct SystemShape<'a> {
    pub platform: &'a crate::platform::PlatformSpec,
    pub cpus: u32,
    /// Copy engine devices.
    pub copy_engines: Vec<crate::devices::CopyEngineShape>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::PlatformSpec;
    use crate::testing::tiny_platform;

    /// The tiny platform's CPUs with a NIC `nic0` whose queues are consumed on `queue_cpus`.
    fn shape(platform: &PlatformSpec, queue_cpus: Vec<u32>) -> SystemShape<'_> {
        SystemShape {
            platform,
            cpus: platform.topology.cpus(),
            copy_engines: Vec::new(),
            devices: vec![("nic0", queue_cpus)],
        }
    }

    #[test]
    fn a_workload_that_reads_no_device_claims_no_queue_of_any() {
        let platform = tiny_platform();
        // The stream kind keeps the trait's default.
        assert_eq!(stream::StreamSpec::default().queues(&shape(&platform, vec![0])), Vec::<(String, u32)>::new());
    }

    #[test]
    fn tcp_receive_runs_each_application_app_offset_cpus_after_its_irq_cpu_within_the_platform() {
        let platform = tiny_platform();
        let (shape, cpus) = (shape(&platform, vec![0]), platform.topology.cpus());
        let spec = |app_offset| tcp_rx::TcpRxSpec { app_offset, ..tcp_rx::TcpRxSpec::default() };
        assert_eq!(spec(cpus - 1).validate("workloads.0", &shape), Ok(()));
        assert_eq!(spec(cpus - 1).cpus(&shape), [0, cpus - 1]);
        let error = spec(cpus).validate("workloads.0", &shape).unwrap_err().to_string();
        assert_eq!(
            error,
            format!("workloads.0.app_offset: the application of IRQ CPU 0 would run on CPU {cpus}, out of range")
        );
    }

    #[test]
    fn a_cpu_number_must_be_below_the_platforms_cpu_count() {
        let platform = tiny_platform();
        let (shape, cpus) = (shape(&platform, vec![0]), platform.topology.cpus());
        assert_eq!(shape.check_cpu("workloads.0", cpus - 1), Ok(()));
        let error = shape.check_cpu("workloads.0", cpus).unwrap_err().to_string();
        assert_eq!(error, format!("workloads.0.cpu: CPU {cpus} out of range (the platform has {cpus})"));
    }

    #[test]
    fn the_ping_pong_the_example_filter_the_rx_loop_and_the_reduction_run_on_their_cpu_and_consume_their_queue() {
        let platform = tiny_platform();
        let shape = shape(&platform, vec![0, 2, 3]);
        let specs: [(&dyn WorkloadSpec, u32, u32); 4] = [
            (&pingpong::PingPongSpec { cpu: 3, queue: 2, ..Default::default() }, 3, 2),
            (&example::ExampleSpec { cpu: 2, queue: 1, ..Default::default() }, 2, 1),
            (&rx_loop::RxLoopSpec { cpu: 3, queue: 1, ..Default::default() }, 3, 1),
            (&reduce::ReduceSpec { cpu: 2, queue: 2, ..Default::default() }, 2, 2),
        ];
        for (spec, cpu, queue) in specs {
            let expected = (vec![cpu], vec![("nic0".to_string(), queue)]);
            assert_eq!((spec.cpus(&shape), spec.queues(&shape)), expected, "the spec for CPU {cpu}, queue {queue}");
        }
    }
}
