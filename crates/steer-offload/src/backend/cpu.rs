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

/// Where a job of `len` bytes is cut for `threads` copy threads: the offset of each piece after
/// the first, ascending. As many pieces as threads, but none under `MIN_PIECE`; each later piece
/// a whole number of lines, so that pieces of nearly equal length start on line boundaries.
/// `threads` is at least 1.
fn cut_points(len: usize, threads: usize) -> Vec<usize> {
    let pieces = (len / MIN_PIECE).clamp(1, threads);
    let mut points = Vec::with_capacity(pieces - 1);
    let mut end = len;
    for left in (1..pieces).rev() {
        end -= end / (left + 1) / 64 * 64;
        points.push(end);
    }
    points.reverse();
    points
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
        let mut rest = job;
        for at in cut_points(rest.len, self.threads_per_node).into_iter().rev() {
            let (head, tail) = rest.split_at(at);
            // A send fails only when the threads are gone; the dropped job then counts as failed.
            let _ = queue.send(tail);
            rest = head;
        }
        let _ = queue.send(rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_cut_into_one_piece_a_thread_of_at_least_256_kib_on_line_boundaries() {
        const MIB: usize = 1 << 20;
        // Below two pieces' worth, or one thread: one piece.
        assert_eq!(cut_points(0, 4), []);
        assert_eq!(cut_points(2 * MIN_PIECE - 1, 4), []);
        assert_eq!(cut_points(MIB, 1), []);
        // 1 MiB holds four pieces of 256 KiB: as many as threads up to four.
        assert_eq!(cut_points(MIB, 2), [MIB / 2]);
        assert_eq!(cut_points(MIB, 4), [MIB / 4, MIB / 2, 3 * MIB / 4]);
        assert_eq!(cut_points(MIB, 8), [MIB / 4, MIB / 2, 3 * MIB / 4]);
        // 600,000 B: two pieces; the second is 299,968 B (4,687 lines), the first the rest.
        assert_eq!(cut_points(600_000, 4), [300_032]);
        // 800,000 B in three: pieces of 266,688, 266,688 and 266,624 B.
        assert_eq!(cut_points(800_000, 3), [266_688, 533_376]);
    }
}
