//! Workload programs that run on CPUs (see `cpu` for how a CPU runs them). A workload kind is one
//! file with its parameters (`params!`), its program(s) and a `KIND` static registering it in
//! `WORKLOADS`, plus its `mod` line here; `example.rs` is a commented template.

use std::path::Path;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::devices::SystemShape;
use crate::error::ConfigResult;
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
    /// Makes the paths of the files it reads absolute, a relative one taken from `dir` (the
    /// scenario file's directory), so a scenario runs the same from any directory and its resolved
    /// form from anywhere. Kinds that read no file keep the default.
    fn resolve_paths(&mut self, _dir: &Path) {}
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

pub mod block_read;
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
pub mod submissions;
pub mod tcp_rx;
pub mod trace;

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
            devices: vec![crate::devices::DeviceShape::rx("nic0", queue_cpus)],
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
    fn a_workload_consumes_only_the_kind_of_queue_it_reads() {
        let platform = tiny_platform();
        let storage = crate::devices::DeviceShape { name: "ssd0", port: "NVMe queue pair", queue_cpus: vec![0] };
        let with_storage = SystemShape { devices: vec![storage], ..shape(&platform, vec![0]) };
        let spec = rx_loop::RxLoopSpec { device: "ssd0".into(), ..Default::default() };
        let error = spec.validate("workloads.0", &with_storage).unwrap_err().to_string();
        assert_eq!(
            error,
            "workloads.0.device: device `ssd0` offers NVMe queue pairs, not the RX queues this workload reads"
        );
        let spec = l2fwd::L2fwdSpec { device: "ssd0".into(), ..Default::default() };
        assert_eq!(spec.validate("workloads.0", &with_storage).unwrap_err().to_string(), error);
        // A NIC's queues are RX queues without its kind saying so.
        let nic = crate::devices::nic::NicSpec::default();
        assert_eq!(crate::devices::DeviceShape::of(&nic), crate::devices::DeviceShape::rx("nic0", vec![0]));
        let none = crate::devices::DeviceShape::rx("dsa0", Vec::new());
        let without_queues = SystemShape { devices: vec![none], ..shape(&platform, vec![0]) };
        let spec = rx_loop::RxLoopSpec { device: "dsa0".into(), ..Default::default() };
        let error = spec.validate("workloads.0", &without_queues).unwrap_err().to_string();
        assert_eq!(error, "workloads.0.device: device `dsa0` has no RX queues");
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
