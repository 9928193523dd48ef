//! A copy job's tally, shared by its submitting threads (`workloads::dsa_copy`) and kept beside the
//! copy engines' ports (`devices::dsa::CopyPorts`).

use crate::engine::Signal;
use crate::units::Time;

/// The tally of one copy job, shared by its threads.
#[derive(Debug)]
pub struct CopyJob {
    /// Notified by each thread that has finished its share.
    pub done: Signal,
    pub end: Option<Time>,
    pub devices: Vec<String>,
    pub bytes: u64,
    pub descriptors: u64,
    pub operations: u64,
    pub latency_ns: f64,
    pub software_bytes: u64,
    pub submit_ns: f64,
    pub poll_ns: f64,
    pub cpu_copy_ns: f64,
    pub src_in_llc: bool,
    /// Its threads that have not finished their share.
    pub threads_left: u32,
}
