//! The CPU backend: copy threads pinned to each compute node's CPUs. A job runs on its engine's
//! node; a large job is cut into pieces so each of the node's copy threads takes one.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

use super::{Backend, CopyJob};
use crate::topology::Topology;

/// Pieces smaller than this are not worth another thread's wake-up.
const MIN_PIECE: usize = 256 << 10;

/// Copy threads per compute node.
pub struct CpuBackend {
    /// Per node id: the queue of its threads (`None` for memory-only nodes).
    queues: Vec<Option<Mutex<Sender<CopyJob>>>>,
    threads_per_node: usize,
}

impl CpuBackend {
    /// `threads_per_node` copy threads on every compute node, each pinned to its node's CPUs.
    pub fn new(topology: &Topology, threads_per_node: usize) -> CpuBackend {
        let threads_per_node = threads_per_node.max(1);
        let queues = topology
            .nodes()
            .iter()
            .map(|node| {
                if node.is_memory_only() {
                    return None;
                }
                let (tx, rx) = channel::<CopyJob>();
                let rx = Arc::new(Mutex::new(rx));
                for i in 0..threads_per_node {
                    let (rx, cpus) = (rx.clone(), node.cpus.clone());
                    std::thread::Builder::new()
                        .name(format!("steer-copy-n{}-{i}", node.id))
                        .spawn(move || copy_thread(&rx, &cpus))
                        .expect("spawning a copy thread");
                }
                Some(Mutex::new(tx))
            })
            .collect();
        CpuBackend { queues, threads_per_node }
    }
}

/// Runs jobs until every sender is gone (the backend dropped).
fn copy_thread(jobs: &Mutex<Receiver<CopyJob>>, cpus: &[usize]) {
    pin_to(cpus);
    loop {
        let job = match jobs.lock().unwrap_or_else(|e| e.into_inner()).recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        job.copy_here();
    }
}

/// Pins the calling thread to `cpus`; where the kernel refuses (a container's CPU set), the
/// thread stays where it was, which costs locality, not correctness.
fn pin_to(cpus: &[usize]) {
    if cfg!(miri) {
        return; // Miri, which checks the unsafe code in tests, has no CPUs to pin to.
    }
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside it for CPUs below its
    // capacity, and sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn copy(&self, job: CopyJob) {
        let Some(Some(queue)) = self.queues.get(job.engine) else {
            // No copy threads on that node: the job fails and the entry stays at its source.
            return job.finish(false);
        };
        let queue = queue.lock().unwrap_or_else(|e| e.into_inner());
        let pieces = (job.len / MIN_PIECE).clamp(1, self.threads_per_node);
        let mut rest = job;
        for i in (1..pieces).rev() {
            let at = rest.len - rest.len / (i + 1) / 64 * 64;
            let (head, tail) = rest.split_at(at);
            // A send fails only when the threads are gone; the dropped job then counts as failed.
            let _ = queue.send(tail);
            rest = head;
        }
        let _ = queue.send(rest);
    }
}
