//! Workload programs that run on CPUs. Each implements `Workload`; `WorkloadSpec` lists the kinds a
//! scenario can name with `kind = "..."`.

pub mod l2fwd;
pub mod pingpong;
pub mod reduce;
pub mod rx_loop;
pub mod stream;
pub mod tcp_rx;
pub mod timing;

use serde::{Deserialize, Serialize};

use crate::engine::System;
use crate::error::ConfigResult;
use crate::params::{Describe, ParamDoc};
use crate::units::Time;

/// The contract of a workload program.
///
/// `step` runs the program on its CPU from `now` until it has finished one unit of work (then it
/// returns when it can continue) or has nothing to do (then it returns `None` after registering
/// itself as a waiter, and the engine runs it again when woken). A step must not run past times
/// at which other agents could change what it observes by more than one unit of work.
pub trait Workload {
    fn cpu(&self) -> u32;
    /// What the CPU does, as results label it (`rx_loop`, `irq`, `app`, ...).
    fn role(&self) -> &str;
    fn step(&mut self, system: &mut System, now: Time) -> Option<Time>;
    fn reset_stats(&mut self, now: Time);
    /// Workload-specific results for the measured window ending at `now`.
    fn report(&self, now: Time) -> serde_json::Value;
}

/// A workload as a scenario declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkloadSpec {
    /// Poll an RX queue's completions, read each packet, copy it to an application buffer, release.
    RxLoop(rx_loop::RxLoopSpec),
    /// DPDK-style run-to-completion forwarding: one loop per queue of a NIC, on the queue's
    /// consumer CPU; receive a burst, touch each packet's first line, post it for transmission.
    L2fwd(l2fwd::L2fwdSpec),
    /// A cache-hungry co-runner sweeping a working set (confine it with CAT way masks).
    Stream(stream::StreamSpec),
    /// Zero-copy message receive with a linear reduction of each message (Leon & Maccabe).
    Reduce(reduce::ReduceSpec),
    /// The Linux TCP receive path: NAPI on the queue's IRQ CPU and the application's recv copy
    /// on `app_cpu` (the same CPU, its SMT sibling, or another core).
    TcpRx(tcp_rx::TcpRxSpec),
    /// Ping-pong latency (eflatency, sfnt-pingpong): poll, read, reply.
    Pingpong(pingpong::PingPongSpec),
}

impl WorkloadSpec {
    /// The CPUs the workload runs on.
    pub fn cpus(&self, system: &SystemShape) -> Vec<u32> {
        match self {
            WorkloadSpec::RxLoop(spec) => vec![spec.cpu],
            WorkloadSpec::L2fwd(spec) => system.queue_cpus(&spec.device),
            WorkloadSpec::Stream(spec) => vec![spec.cpu],
            WorkloadSpec::Reduce(spec) => vec![spec.cpu],
            WorkloadSpec::Pingpong(spec) => vec![spec.cpu],
            WorkloadSpec::TcpRx(spec) => {
                let mut cpus = spec.cpus(system);
                cpus.dedup();
                cpus
            }
        }
    }

    pub fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        match self {
            WorkloadSpec::RxLoop(spec) => spec.validate(path, system),
            WorkloadSpec::L2fwd(spec) => spec.validate(path, system),
            WorkloadSpec::Stream(spec) => spec.validate(path, system),
            WorkloadSpec::Reduce(spec) => spec.validate(path, system),
            WorkloadSpec::Pingpong(spec) => spec.validate(path, system),
            WorkloadSpec::TcpRx(spec) => spec.validate(path, system),
        }
    }
}

impl Describe for WorkloadSpec {
    fn describe_into(&self, prefix: &str, meaning: &str, out: &mut Vec<ParamDoc>) {
        let (kind, spec): (&str, &dyn Describe) = match self {
            WorkloadSpec::RxLoop(spec) => ("rx_loop", spec),
            WorkloadSpec::L2fwd(spec) => ("l2fwd", spec),
            WorkloadSpec::Stream(spec) => ("stream", spec),
            WorkloadSpec::Reduce(spec) => ("reduce", spec),
            WorkloadSpec::Pingpong(spec) => ("pingpong", spec),
            WorkloadSpec::TcpRx(spec) => ("tcp_rx", spec),
        };
        out.push(ParamDoc {
            key: crate::params::join_key(prefix, "kind"),
            value: format!("\"{kind}\""),
            meaning: "workload kind".into(),
        });
        spec.describe_into(prefix, meaning, out)
    }
}

/// What validation needs to know about the system a workload runs in.
pub struct SystemShape<'a> {
    pub cpus: u32,
    /// (device name, consumer CPU of each queue)
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

    pub fn check_device(&self, path: &str, device: &str) -> ConfigResult<&[u32]> {
        self.devices.iter().find(|(name, _)| *name == device).map(|(_, cpus)| cpus.as_slice()).ok_or_else(|| {
            crate::error::ConfigError::new(format!("{path}.device"), format!("no device named `{device}`"))
        })
    }
}
