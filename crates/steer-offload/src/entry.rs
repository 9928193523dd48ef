//! One cache entry and its holders' handle, [`CacheData`].
//!
//! An entry goes `PENDING` (in the cache, copy not yet submitted) -> `COPYING` -> `READY` or
//! `FAILED`. Any holder may move it out of `PENDING` by submitting the copy (a compare-and-swap
//! picks exactly one), so the holder that inserted it cannot block the others by being
//! descheduled before it submits (seed 001, section 5.1.2). Copy jobs each hold a reference; the
//! last job to finish publishes the outcome and wakes every sleeper.

use crate::backend::{Backend, CopyJob};
use crate::memory::NodeBuffer;
use crate::sync::{Arc, AtomicU32, AtomicUsize, Condvar, Mutex, Ordering};

const PENDING: u32 = 0;
const COPYING: u32 = 1;
const READY: u32 = 2;
const FAILED: u32 = 3;

/// One part of the copy: the engine (compute node) and the byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Part {
    pub engine: usize,
    pub offset: usize,
    pub len: usize,
}

pub(crate) struct Entry {
    src: *const u8,
    len: usize,
    node: usize,
    /// Where the copy goes; `None` for an entry that stays at its source (no room).
    buffer: Option<NodeBuffer>,
    parts: Vec<Part>,
    backend: Option<Arc<dyn Backend>>,
    state: AtomicU32,
    /// Parts not yet finished.
    left: AtomicUsize,
    /// Parts that failed.
    failed: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
}

// SAFETY: `src` is only read (by copy jobs, and by holders after completion), under the contract
// of `Cache::access`: the source stays valid and unchanged while entries of it live.
unsafe impl Send for Entry {}
unsafe impl Sync for Entry {}

impl Entry {
    /// An entry whose copy of `src` into `buffer` is done in `parts` by `backend`, not yet submitted.
    pub(crate) fn pending(
        src: *const u8,
        len: usize,
        node: usize,
        buffer: NodeBuffer,
        parts: Vec<Part>,
        backend: Arc<dyn Backend>,
    ) -> Entry {
        debug_assert_eq!(parts.iter().map(|p| p.len).sum::<usize>(), len);
        Entry::new(src, len, node, Some((buffer, parts, backend)))
    }

    /// An entry that is not cached: its location is the source.
    pub(crate) fn uncached(src: *const u8, len: usize, node: usize) -> Entry {
        Entry::new(src, len, node, None)
    }

    /// A pending entry with its copy, or a finished uncached one without.
    fn new(src: *const u8, len: usize, node: usize, copy: Option<(NodeBuffer, Vec<Part>, Arc<dyn Backend>)>) -> Entry {
        let (state, (buffer, parts, backend)) = match copy {
            Some((buffer, parts, backend)) => (PENDING, (Some(buffer), parts, Some(backend))),
            None => (FAILED, (None, Vec::new(), None)),
        };
        Entry {
            src,
            len,
            node,
            buffer,
            state: AtomicU32::new(state),
            left: AtomicUsize::new(parts.len()),
            parts,
            backend,
            failed: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether the copy has finished, well or not.
    pub(crate) fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) >= READY
    }

    /// Submits the copy unless some holder already has.
    pub(crate) fn submit(self: &Arc<Self>) {
        if self.state.compare_exchange(PENDING, COPYING, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return;
        }
        let backend = self.backend.as_ref().expect("a pending entry has a backend");
        let dst = self.buffer.as_ref().expect("a pending entry has a buffer").as_ptr();
        for part in &self.parts {
            // SAFETY: every part lies inside the block (the offsets partition `0..len`).
            let (src, dst) = unsafe { (self.src.add(part.offset), dst.add(part.offset)) };
            backend.copy(CopyJob::new(part.engine, self.node, src, dst, part.len, Completion(Some(self.clone()))));
        }
    }

    /// Waits until the copy has finished, submitting it first if nobody has.
    pub(crate) fn wait(self: &Arc<Self>) {
        loop {
            match self.state.load(Ordering::Acquire) {
                PENDING => self.submit(),
                COPYING => {
                    let mut guard = self.sleep.lock().unwrap_or_else(|e| e.into_inner());
                    while self.state.load(Ordering::Acquire) == COPYING {
                        guard = self.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
                    }
                }
                _ => return,
            }
        }
    }

    /// One part finished; the last publishes the outcome and wakes the sleepers.
    fn part_done(&self, ok: bool) {
        if !ok {
            self.failed.fetch_add(1, Ordering::AcqRel);
        }
        if self.left.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let outcome = if self.failed.load(Ordering::Acquire) == 0 { READY } else { FAILED };
        // Taking the lock orders this store after any sleeper's check of the state.
        let _guard = self.sleep.lock().unwrap_or_else(|e| e.into_inner());
        self.state.store(outcome, Ordering::Release);
        self.wake.notify_all();
    }

    /// The cached copy once ready; the source if the copy failed or there was no room.
    pub(crate) fn location(self: &Arc<Self>) -> *const u8 {
        self.wait();
        match (&self.buffer, self.state.load(Ordering::Acquire)) {
            (Some(buffer), READY) => buffer.as_ptr(),
            _ => self.src,
        }
    }
}

/// A job's hold on its entry: finishing it (or dropping it unfinished, which counts as a failure)
/// reports the part done exactly once.
pub struct Completion(Option<Arc<Entry>>);

impl Completion {
    pub(crate) fn finish(mut self, ok: bool) {
        if let Some(entry) = self.0.take() {
            entry.part_done(ok);
        }
    }

    /// A second hold on the same entry, for a job split in two: the entry now waits for one more part.
    pub(crate) fn split(&self) -> Completion {
        let entry = self.0.as_ref().expect("an unfinished completion");
        entry.left.fetch_add(1, Ordering::AcqRel);
        Completion(Some(entry.clone()))
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if let Some(entry) = self.0.take() {
            entry.part_done(false);
        }
    }
}

/// A holder's handle on a cache entry: clones share the entry, whose memory is freed when the last
/// clone (and the cache's own reference) is gone.
#[derive(Clone)]
pub struct CacheData(pub(crate) Arc<Entry>);

impl std::fmt::Debug for CacheData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheData")
            .field("source", &self.0.src)
            .field("len", &self.0.len)
            .field("node", &self.0.node)
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl CacheData {
    /// Returns once the copy has completed (sleeping meanwhile); any holder may be the one that
    /// submits it, and none waits on another holder's progress.
    pub fn wait(&self) {
        self.0.wait();
    }

    /// Whether the copy has finished, without waiting.
    pub fn is_ready(&self) -> bool {
        self.0.is_done()
    }

    /// The block's bytes: the cached copy, or the source if the copy failed or found no room.
    /// Waits for the copy.
    pub fn location(&self) -> *const u8 {
        self.0.location()
    }

    /// The block's bytes as a slice (see [`CacheData::location`]).
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `location` is either this entry's own buffer of `len` bytes, complete and alive
        // while `self` is, or the source, valid for `len` bytes under `Cache::access`'s contract.
        unsafe { std::slice::from_raw_parts(self.location(), self.0.len) }
    }

    /// Whether the block was copied (after waiting); `false` means the location is the source.
    pub fn is_cached(&self) -> bool {
        self.wait();
        self.0.buffer.is_some() && self.0.state.load(Ordering::Acquire) == READY
    }

    /// The node the entry was placed on.
    pub fn node(&self) -> usize {
        self.0.node
    }

    pub fn len(&self) -> usize {
        self.0.len
    }

    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }

    /// The source pointer the entry caches.
    pub fn source(&self) -> *const u8 {
        self.0.src
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Copies on the thread that submits.
    struct Inline;
    impl Backend for Inline {
        fn name(&self) -> &'static str {
            "inline"
        }
        fn copy(&self, job: CopyJob) {
            job.copy_here();
        }
    }

    /// An entry being copied from its source (returned: the test keeps it while the entry lives).
    fn pending(len: usize, backend: Arc<dyn Backend>) -> (Arc<Entry>, Vec<u8>) {
        let src: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let buffer = NodeBuffer::on_node(len, None).unwrap();
        let parts =
            vec![Part { engine: 0, offset: 0, len: len / 2 }, Part { engine: 1, offset: len / 2, len: len - len / 2 }];
        (Arc::new(Entry::pending(src.as_ptr(), len, 0, buffer, parts, backend)), src)
    }

    fn read(entry: &Arc<Entry>) -> Vec<u8> {
        let data = CacheData(entry.clone());
        data.as_slice().to_vec()
    }

    #[cfg(not(loom))]
    #[test]
    fn holders_complete_the_wait_though_the_inserter_never_submits() {
        // Seed 001, section 5.1.2: T1 inserted the entry and was descheduled before submitting.
        let (entry, src) = pending(4096, Arc::new(Inline));
        let _t1 = entry.clone();
        let holders: Vec<_> = (0..2)
            .map(|_| {
                let entry = entry.clone();
                std::thread::spawn(move || read(&entry))
            })
            .collect();
        for holder in holders {
            assert_eq!(holder.join().unwrap(), src);
        }
        assert_eq!(entry.state.load(Ordering::Acquire), READY);
        assert_ne!(entry.location(), src.as_ptr());
    }

    #[cfg(not(loom))]
    #[test]
    fn a_second_submit_submits_nothing() {
        let counted = Arc::new(Counting::default());
        let (entry, _src) = pending(256, counted.clone());
        entry.submit();
        entry.submit();
        entry.wait();
        assert_eq!(counted.jobs.load(Ordering::SeqCst), 2, "two parts, once");
    }

    /// Keeps every job for the test to run.
    #[cfg(not(loom))]
    #[derive(Default)]
    struct Kept(std::sync::Mutex<Vec<CopyJob>>);
    #[cfg(not(loom))]
    impl Backend for Kept {
        fn name(&self) -> &'static str {
            "kept"
        }
        fn copy(&self, job: CopyJob) {
            self.0.lock().unwrap().push(job);
        }
    }

    #[cfg(not(loom))]
    #[test]
    fn a_split_job_covers_its_range_in_two_and_the_entry_waits_for_both() {
        let kept = Arc::new(Kept::default());
        let (entry, src) = pending(1024, kept.clone());
        entry.submit();
        let first = kept.0.lock().unwrap().remove(0);
        assert_eq!((first.len, first.src), (512, src.as_ptr()));
        let (head, tail) = first.split_at(100);
        assert_eq!((head.len, head.src, head.dst), (100, src.as_ptr(), first_dst(&entry)));
        // SAFETY: offsets inside the block and its buffer.
        unsafe {
            assert_eq!((tail.len, tail.src, tail.dst), (412, src.as_ptr().add(100), first_dst(&entry).add(100)));
        }
        head.copy_here();
        kept.0.lock().unwrap().remove(0).copy_here();
        assert!(!entry.is_done(), "the split's tail is still out");
        tail.copy_here();
        assert!(entry.is_done());
        assert_eq!(read(&entry), src);
    }

    #[cfg(not(loom))]
    fn first_dst(entry: &Arc<Entry>) -> *mut u8 {
        entry.buffer.as_ref().unwrap().as_ptr()
    }

    #[cfg(not(loom))]
    #[test]
    fn finishing_a_partial_copy_writes_only_the_rest() {
        // A source inside a larger block of 0xff, so copying past the end would show.
        let padded = vec![0xffu8; 4096];
        let buffer = NodeBuffer::on_node(128, None).unwrap();
        let kept = Arc::new(Kept::default());
        let parts = vec![Part { engine: 0, offset: 0, len: 128 }];
        let entry = Arc::new(Entry::pending(padded.as_ptr(), 128, 0, buffer, parts, kept.clone()));
        entry.submit();
        kept.0.lock().unwrap().remove(0).copy_here_from(64);
        // SAFETY: the buffer maps a whole page.
        let page = unsafe { std::slice::from_raw_parts(first_dst(&entry), 4096) };
        assert_eq!(page[..64], [0; 64], "the engine's part is not rewritten");
        assert_eq!(page[64..128], [0xff; 64]);
        assert_eq!(page[128..], [0; 4096 - 128], "nothing past the block");
    }

    #[cfg(not(loom))]
    #[derive(Default)]
    struct Counting {
        jobs: AtomicUsize,
    }
    #[cfg(not(loom))]
    impl Backend for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        fn copy(&self, job: CopyJob) {
            self.jobs.fetch_add(1, Ordering::SeqCst);
            job.copy_here();
        }
    }

    /// Every interleaving of three holders: one submits, two wait (one of them may submit first).
    #[cfg(loom)]
    #[test]
    fn loom_any_holder_completes_the_wait() {
        loom::model(|| {
            let (entry, src) = pending(128, Arc::new(Inline));
            let t1 = {
                let entry = entry.clone();
                loom::thread::spawn(move || entry.submit())
            };
            let t2 = {
                let (entry, expected) = (entry.clone(), src.clone());
                loom::thread::spawn(move || assert_eq!(read(&entry), expected))
            };
            assert_eq!(read(&entry), src);
            t1.join().unwrap();
            t2.join().unwrap();
        });
    }

    /// Jobs queued to an engine thread that runs them later: waiters sleep and are all woken.
    #[cfg(loom)]
    #[test]
    fn loom_waiters_wake_when_an_engine_finishes() {
        #[derive(Default)]
        struct Queued(Mutex<Vec<CopyJob>>);
        impl Backend for Queued {
            fn name(&self) -> &'static str {
                "queued"
            }
            fn copy(&self, job: CopyJob) {
                self.0.lock().unwrap().push(job);
            }
        }
        // Three preemptions reach every ordering of the protocol's steps here (loom's advice).
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(3);
        model.check(|| {
            let queued = Arc::new(Queued::default());
            let (entry, src) = pending(128, queued.clone());
            let engine = loom::thread::spawn(move || {
                let mut done = 0;
                while done < 2 {
                    let job = queued.0.lock().unwrap().pop();
                    match job {
                        Some(job) => {
                            job.copy_here();
                            done += 1;
                        }
                        None => loom::thread::yield_now(),
                    }
                }
            });
            let waiter = {
                let (entry, expected) = (entry.clone(), src.clone());
                loom::thread::spawn(move || assert_eq!(read(&entry), expected))
            };
            assert_eq!(read(&entry), src);
            waiter.join().unwrap();
            engine.join().unwrap();
        });
    }
}
