//! Copy backends: what moves a block's bytes. Each takes [`CopyJob`]s (one part of a block for one
//! engine) and finishes each exactly once.
//!
//! - [`cpu`]: copy threads pinned to each compute node; always available.
//! - [`dsa`]: Intel DSA work queues through the idxd driver's user portals, where present.

pub mod cpu;
pub mod dsa;

use crate::entry::Completion;

/// Something that copies bytes for the cache.
pub trait Backend: Send + Sync + 'static {
    /// The backend's name (`cpu`, `dsa`, ...).
    fn name(&self) -> &'static str;
    /// Starts one copy job; finishing it (`CopyJob::finish`) may happen on any thread, later.
    fn copy(&self, job: CopyJob);
}

/// One part of a block to copy, with the engine (compute node) that should do it.
pub struct CopyJob {
    pub engine: usize,
    /// The node the block is being cached on.
    pub dst_node: usize,
    pub src: *const u8,
    pub dst: *mut u8,
    pub len: usize,
    done: Completion,
}

// SAFETY: the pointers are the job's own ranges of a source block (only read) and of an entry
// buffer (written by this job alone); the completion keeps the entry alive until it finishes.
unsafe impl Send for CopyJob {}

impl CopyJob {
    pub(crate) fn new(
        engine: usize,
        dst_node: usize,
        src: *const u8,
        dst: *mut u8,
        len: usize,
        done: Completion,
    ) -> CopyJob {
        CopyJob { engine, dst_node, src, dst, len, done }
    }

    /// Reports the job done: `ok = false` leaves the entry at its source. A job dropped without
    /// finishing counts as failed.
    pub fn finish(self, ok: bool) {
        self.done.finish(ok);
    }

    /// Splits the job at `at` bytes into two jobs for the same engine.
    pub fn split_at(self, at: usize) -> (CopyJob, CopyJob) {
        assert!(at > 0 && at < self.len, "a split inside the job");
        let tail_done = self.done.split();
        // SAFETY: `at` lies inside both ranges.
        let (src, dst) = unsafe { (self.src.add(at), self.dst.add(at)) };
        let tail = CopyJob { src, dst, len: self.len - at, done: tail_done, ..self };
        let head = CopyJob { len: at, ..self };
        (head, tail)
    }

    /// Copies the bytes on the calling thread and finishes the job.
    pub fn copy_here(self) {
        self.copy_here_from(0);
    }

    /// Copies the bytes from offset `done` on (an engine did the first `done`) on the calling
    /// thread and finishes the job.
    pub fn copy_here_from(self, done: usize) {
        let done = done.min(self.len);
        // SAFETY: source and destination are valid for `len` bytes (see `CopyJob`) and never
        // overlap: the destination is an entry buffer the cache allocated.
        unsafe { std::ptr::copy_nonoverlapping(self.src.add(done), self.dst.add(done), self.len - done) };
        self.finish(true);
    }
}
