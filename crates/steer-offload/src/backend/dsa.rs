//! The Intel DSA backend, through the idxd driver's user-space portals (`/dev/dsa/wqX.Y`).
//!
//! Descriptors (64 bytes) and completion records (32 bytes) are laid out as the DSA architecture
//! specification and Linux's `uapi/linux/idxd.h` define them. A job is copied in memory-move
//! descriptors of at most the work queue's `max_transfer_size`; several go in one batch descriptor
//! (up to its `max_batch_size`), submitted with ENQCMD to a shared work queue (retried while the
//! queue refuses) or MOVDIR64B to a dedicated one. Descriptors run without block-on-fault: a page
//! fault ends the descriptor with partial completion, and the rest is copied on the CPU; so is a
//! descriptor that failed or that a failed batch never ran. A poller thread watches the completion
//! records and finishes the jobs.
//!
//! Submission needs a machine with DSA and the idxd driver; everywhere else [`DsaBackend::open`]
//! says why not, and the cache uses the CPU backend.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::fs;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::{Backend, CopyJob};
use crate::error::{Error, Result};
use crate::topology::Topology;

/// Descriptor opcodes used here.
pub const OPCODE_NOOP: u8 = 0;
pub const OPCODE_BATCH: u8 = 1;
pub const OPCODE_MEMMOVE: u8 = 3;

/// Descriptor flags (bits 0..24 of the second dword).
pub const FLAG_FENCE: u32 = 0x0001;
pub const FLAG_BLOCK_ON_FAULT: u32 = 0x0002;
pub const FLAG_COMPLETION_ADDR_VALID: u32 = 0x0004;
pub const FLAG_REQUEST_COMPLETION: u32 = 0x0008;
pub const FLAG_CACHE_CONTROL: u32 = 0x0100;

/// A 64-byte work descriptor.
#[repr(C, align(64))]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Descriptor([u8; 64]);

impl Descriptor {
    /// A descriptor of `opcode` with `flags`, reporting to the completion record at `completion`.
    fn new(opcode: u8, flags: u32, completion: u64) -> Descriptor {
        let mut d = [0u8; 64];
        // Dword 0: PASID (bits 0..20, left 0: the portal supplies it), reserved, privilege (0).
        d[4..8].copy_from_slice(&((flags & 0x00ff_ffff) | (u32::from(opcode) << 24)).to_le_bytes());
        d[8..16].copy_from_slice(&completion.to_le_bytes());
        Descriptor(d)
    }

    /// Copies `len` bytes from `src` to `dst`. `cache_control` asks the engine to allocate the
    /// written lines in the LLC; `block_on_fault` waits for the OS on a page fault instead of
    /// completing partially.
    pub fn memmove(
        src: u64,
        dst: u64,
        len: u32,
        completion: u64,
        block_on_fault: bool,
        cache_control: bool,
    ) -> Descriptor {
        let mut flags = FLAG_COMPLETION_ADDR_VALID | FLAG_REQUEST_COMPLETION;
        if block_on_fault {
            flags |= FLAG_BLOCK_ON_FAULT;
        }
        if cache_control {
            flags |= FLAG_CACHE_CONTROL;
        }
        let mut d = Descriptor::new(OPCODE_MEMMOVE, flags, completion);
        d.0[16..24].copy_from_slice(&src.to_le_bytes());
        d.0[24..32].copy_from_slice(&dst.to_le_bytes());
        d.0[32..36].copy_from_slice(&len.to_le_bytes());
        d
    }

    /// A batch of `count` descriptors stored at `list` (64-byte aligned).
    pub fn batch(list: u64, count: u32, completion: u64) -> Descriptor {
        let mut d = Descriptor::new(OPCODE_BATCH, FLAG_COMPLETION_ADDR_VALID | FLAG_REQUEST_COMPLETION, completion);
        d.0[16..24].copy_from_slice(&list.to_le_bytes());
        d.0[32..36].copy_from_slice(&count.to_le_bytes());
        d
    }

    pub fn bytes(&self) -> &[u8; 64] {
        &self.0
    }

    pub fn opcode(&self) -> u8 {
        self.0[7]
    }

    pub fn flags(&self) -> u32 {
        u32::from_le_bytes([self.0[4], self.0[5], self.0[6], 0])
    }
}

/// What a completion record's status byte says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Not yet written by the engine.
    Pending,
    Success,
    /// A page fault without block-on-fault: `bytes_completed` were done; `write` tells whether the
    /// fault was on the destination.
    PageFault {
        write: bool,
    },
    /// Any other code the specification defines (an error).
    Error(u8),
}

/// A 32-byte completion record, written by the engine behind the compiler's back (hence the
/// cell: the engine may write it while we hold a reference).
#[repr(C, align(32))]
#[derive(Debug, Default)]
pub struct CompletionRecord(UnsafeCell<[u8; 32]>);

impl CompletionRecord {
    /// Reads the status byte as the engine wrote it.
    pub fn status(&self) -> Status {
        // SAFETY: the status byte of the record, read atomically; the engine writes it last, after
        // the rest of the record, so Acquire orders the reads of the other fields after it.
        let raw = unsafe { AtomicU8::from_ptr(self.0.get().cast::<u8>()) }.load(Ordering::Acquire);
        match raw & 0x7f {
            0 => Status::Pending,
            1 => Status::Success,
            3 => Status::PageFault { write: raw & 0x80 != 0 },
            code => Status::Error(code),
        }
    }

    /// `N` bytes at `offset`; read only once `status` has said the engine is done.
    fn field<const N: usize>(&self, offset: usize) -> [u8; N] {
        assert!(offset + N <= 32, "a field of the record");
        // SAFETY: inside the record, and written by the engine before the status read earlier.
        unsafe { self.0.get().cast::<u8>().add(offset).cast::<[u8; N]>().read() }
    }

    /// Bytes the descriptor completed before a partial completion.
    pub fn bytes_completed(&self) -> u32 {
        u32::from_le_bytes(self.field(4))
    }

    /// The faulting address of a partial completion.
    pub fn fault_addr(&self) -> u64 {
        u64::from_le_bytes(self.field(8))
    }

    /// A record with raw bytes, as an engine would leave it (for tests and for replay).
    pub fn from_bytes(bytes: [u8; 32]) -> CompletionRecord {
        CompletionRecord(UnsafeCell::new(bytes))
    }
}

/// Memory the engine reads or writes while we own it (a completion record, a batch's descriptor
/// list), held through a raw pointer: moving a `Box` would claim the memory unique while the
/// engine uses it. Freed on drop, which happens only once the engine is done with it.
struct DeviceMemory<T: ?Sized>(NonNull<T>);

// SAFETY: the memory is owned, like a Box's; the engine's accesses are ordered by the records.
unsafe impl<T: ?Sized + Send> Send for DeviceMemory<T> {}

impl<T: ?Sized> DeviceMemory<T> {
    fn new(value: Box<T>) -> DeviceMemory<T> {
        DeviceMemory(NonNull::from(Box::leak(value)))
    }

    /// The address to give the engine.
    fn address(&self) -> u64 {
        self.0.cast::<u8>().as_ptr() as u64
    }
}

impl DeviceMemory<CompletionRecord> {
    fn record(&self) -> &CompletionRecord {
        // SAFETY: a live record; shared references to it are sound while the engine writes it
        // (its bytes are in a cell).
        unsafe { self.0.as_ref() }
    }
}

impl<T: ?Sized> Drop for DeviceMemory<T> {
    fn drop(&mut self) {
        // SAFETY: made from a Box in `new`, freed once.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// A work queue as idxd's sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkQueue {
    /// `wq0.1`
    pub name: String,
    /// The device's NUMA node (-1 where the firmware does not say).
    pub numa_node: i64,
    pub dedicated: bool,
    pub size: u32,
    /// Largest transfer one descriptor may ask for, in bytes.
    pub max_transfer_size: u64,
    /// Most descriptors one batch may hold.
    pub max_batch_size: u32,
    /// The user portal, `/dev/dsa/wq0.1`.
    pub portal: PathBuf,
}

/// idxd's defaults for a work queue's limits (`WQ_DEFAULT_MAX_XFER`, `WQ_DEFAULT_MAX_BATCH` in
/// `drivers/dma/idxd/idxd.h`), used where sysfs does not show them.
const DEFAULT_MAX_TRANSFER_SIZE: u64 = 2 << 20;
const DEFAULT_MAX_BATCH_SIZE: u32 = 32;

/// The enabled user-type work queues under `root` (`/` or a captured tree).
pub fn work_queues(root: &Path) -> Result<Vec<WorkQueue>> {
    let dir = root.join("sys/bus/dsa/devices");
    let entries = fs::read_dir(&dir).map_err(|e| Error::Unavailable {
        backend: "dsa",
        why: format!("{}: {e} (no idxd driver, or no DSA on this machine)", dir.display()),
    })?;
    let read = |p: PathBuf| fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default();
    let mut queues = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((device, _)) = name.strip_prefix("wq").and_then(|rest| rest.split_once('.')) else { continue };
        let wq = dir.join(&name);
        if read(wq.join("state")) != "enabled" || read(wq.join("type")) != "user" {
            continue;
        }
        let numa_node = read(dir.join(format!("dsa{device}/numa_node"))).parse().unwrap_or(-1);
        queues.push(WorkQueue {
            portal: root.join("dev/dsa").join(&name),
            dedicated: read(wq.join("mode")) == "dedicated",
            size: read(wq.join("size")).parse().unwrap_or(0),
            max_transfer_size: read(wq.join("max_transfer_size")).parse().unwrap_or(DEFAULT_MAX_TRANSFER_SIZE),
            max_batch_size: read(wq.join("max_batch_size")).parse().unwrap_or(DEFAULT_MAX_BATCH_SIZE),
            numa_node,
            name,
        });
    }
    queues.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(queues)
}

/// Where descriptors go: a work queue's portal (or, in tests, a software engine standing in for
/// one). The descriptor and everything it points at must stay valid until its completion record
/// is written.
pub trait Submit: Send + Sync {
    fn submit(&self, descriptor: &Descriptor);
}

/// A work queue to submit to, with its limits.
pub struct Queue {
    submitter: Box<dyn Submit>,
    /// Largest transfer of one descriptor, in bytes (at least 1).
    max_transfer: usize,
    /// Most descriptors in one batch; below 2, no batches.
    max_batch: usize,
}

impl Queue {
    pub fn new(submitter: Box<dyn Submit>, max_transfer_size: u64, max_batch_size: u32) -> Queue {
        Queue {
            submitter,
            max_transfer: usize::try_from(max_transfer_size.clamp(1, u64::from(u32::MAX))).unwrap_or(usize::MAX),
            max_batch: max_batch_size as usize,
        }
    }

    /// Submits the pieces of a job: one memory move each, in batches where there are several.
    fn submit(&self, pieces: Vec<CopyJob>) -> Vec<InFlight> {
        let mut flights = Vec::new();
        let mut pieces = pieces.into_iter().peekable();
        while pieces.peek().is_some() {
            let group: Vec<CopyJob> = pieces.by_ref().take(self.max_batch.max(1)).collect();
            let moves: Vec<Move> = group.into_iter().map(Move::new).collect();
            if moves.len() == 1 {
                let one = moves.into_iter().next().expect("one move");
                self.submitter.submit(&one.descriptor());
                flights.push(InFlight::Move(one));
                continue;
            }
            let count = u32::try_from(moves.len()).expect("a batch of at most max_batch_size");
            let list = DeviceMemory::new(moves.iter().map(Move::descriptor).collect::<Box<[Descriptor]>>());
            let record = DeviceMemory::new(Box::<CompletionRecord>::default());
            self.submitter.submit(&Descriptor::batch(list.address(), count, record.address()));
            flights.push(InFlight::Batch { record, _list: list, moves });
        }
        flights
    }
}

/// A mapped portal of one work queue.
struct Portal {
    page: *mut u8,
    dedicated: bool,
}

// SAFETY: the portal page is only written with whole 64-byte descriptors by single instructions
// (ENQCMD / MOVDIR64B), which the device accepts from any thread.
unsafe impl Send for Portal {}
unsafe impl Sync for Portal {}

impl Portal {
    fn open(queue: &WorkQueue) -> Result<Portal> {
        let path = std::ffi::CString::new(queue.portal.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::BadConfig(format!("{}: not a path", queue.portal.display())))?;
        // SAFETY: open and mmap of the portal file; the fd is closed once mapped.
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_RDWR);
            if fd < 0 {
                return Err(Error::Unavailable {
                    backend: "dsa",
                    why: format!("{}: {}", queue.portal.display(), std::io::Error::last_os_error()),
                });
            }
            let page =
                libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_POPULATE, fd, 0);
            libc::close(fd);
            if page == libc::MAP_FAILED {
                return Err(crate::error::os_error(&format!("mmap {}", queue.portal.display())));
            }
            Ok(Portal { page: page.cast(), dedicated: queue.dedicated })
        }
    }
}

impl Submit for Portal {
    /// Submits one descriptor: MOVDIR64B to a dedicated queue; ENQCMD to a shared one, retried
    /// while the queue is full.
    fn submit(&self, descriptor: &Descriptor) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `page` is a mapped portal and `descriptor` a 64-byte aligned descriptor; both
        // instructions read 64 bytes from it and write them to the portal as one transaction.
        unsafe {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            if self.dedicated {
                std::arch::asm!("movdir64b {0}, [{1}]", in(reg) self.page, in(reg) descriptor.0.as_ptr());
            } else {
                loop {
                    let refused: u8;
                    std::arch::asm!("enqcmd {0}, [{1}]", "setz {2}", in(reg) self.page, in(reg) descriptor.0.as_ptr(), out(reg_byte) refused);
                    if refused == 0 {
                        break;
                    }
                    std::hint::spin_loop();
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (self.dedicated, descriptor);
    }
}

impl Drop for Portal {
    fn drop(&mut self) {
        // SAFETY: unmapping the page `open` mapped.
        unsafe { libc::munmap(self.page.cast(), 4096) };
    }
}

/// One memory move: a piece of a job (at most a transfer's worth) and its completion record.
struct Move {
    job: CopyJob,
    record: DeviceMemory<CompletionRecord>,
}

impl Move {
    fn new(job: CopyJob) -> Move {
        Move { job, record: DeviceMemory::new(Box::default()) }
    }

    fn descriptor(&self) -> Descriptor {
        let len = u32::try_from(self.job.len).expect("a piece of at most max_transfer_size");
        Descriptor::memmove(self.job.src as u64, self.job.dst as u64, len, self.record.address(), false, false)
    }

    /// Finishes the piece as its record says: done, partly done (the rest copied here), or
    /// failed or never run (all copied here).
    fn finish(self) {
        let record = self.record.record();
        match record.status() {
            Status::Success => self.job.finish(true),
            Status::PageFault { .. } => {
                let done = record.bytes_completed() as usize;
                self.job.copy_here_from(done);
            }
            Status::Pending | Status::Error(_) => self.job.copy_here(),
        }
    }
}

/// What the poller watches: a lone move, or a batch whose moves it looks at once the batch's
/// record says the device is done with all of them (and with the descriptor list).
enum InFlight {
    Move(Move),
    Batch { record: DeviceMemory<CompletionRecord>, _list: DeviceMemory<[Descriptor]>, moves: Vec<Move> },
}

impl InFlight {
    fn done(&self) -> bool {
        match self {
            InFlight::Move(one) => one.record.record().status() != Status::Pending,
            InFlight::Batch { record, .. } => record.record().status() != Status::Pending,
        }
    }

    fn finish(self) {
        match self {
            InFlight::Move(one) => one.finish(),
            InFlight::Batch { moves, .. } => moves.into_iter().for_each(Move::finish),
        }
    }
}

type Watched = Arc<(Mutex<VecDeque<InFlight>>, Condvar)>;

/// DSA work queues, one per compute node where the machine has one there.
pub struct DsaBackend {
    /// Per node id: the queue serving it.
    queues: Vec<Option<Arc<Queue>>>,
    in_flight: Watched,
}

impl DsaBackend {
    /// Opens the first enabled user work queue of each compute node's devices (a node without
    /// one uses the nearest that has one), or says why DSA cannot be used here.
    pub fn open(topology: &Topology) -> Result<DsaBackend> {
        if !cfg!(target_arch = "x86_64") {
            return Err(Error::Unavailable { backend: "dsa", why: "DSA exists on x86-64 only".into() });
        }
        let queues = work_queues(Path::new("/"))?;
        if queues.is_empty() {
            return Err(Error::Unavailable {
                backend: "dsa",
                why: "no enabled user work queue (see accel-config)".into(),
            });
        }
        let mut opened = Vec::new();
        for queue in &queues {
            let portal = Box::new(Portal::open(queue)?);
            opened.push((queue.numa_node, Arc::new(Queue::new(portal, queue.max_transfer_size, queue.max_batch_size))));
        }
        let per_node = topology
            .nodes()
            .iter()
            .map(|node| {
                let distance =
                    |q: i64| usize::try_from(q).ok().and_then(|q| node.distances.get(q).copied()).unwrap_or(u32::MAX);
                (!node.is_memory_only())
                    .then(|| opened.iter().min_by_key(|(q, _)| distance(*q)).map(|(_, p)| p.clone()))
                    .flatten()
            })
            .collect();
        DsaBackend::with_queues(per_node)
    }

    /// A backend submitting each node's jobs to the queue at its node id (`None`: jobs for that
    /// node fail, and the entry stays at its source).
    pub fn with_queues(queues: Vec<Option<Arc<Queue>>>) -> Result<DsaBackend> {
        let in_flight: Watched = Arc::new((Mutex::new(VecDeque::new()), Condvar::new()));
        let watched = in_flight.clone();
        std::thread::Builder::new()
            .name("steer-dsa-poll".into())
            .spawn(move || poll(watched))
            .map_err(|e| Error::Os(format!("spawning the DSA poller: {e}")))?;
        Ok(DsaBackend { queues, in_flight })
    }
}

/// Finishes jobs as their completion records fill in. Ends once the backend is gone and nothing
/// is in flight.
fn poll(in_flight: Watched) {
    let (queue, ready) = &*in_flight;
    loop {
        let mut jobs = queue.lock().unwrap_or_else(|e| e.into_inner());
        while jobs.is_empty() {
            if Arc::strong_count(&in_flight) == 1 {
                return;
            }
            jobs = ready.wait_timeout(jobs, std::time::Duration::from_millis(100)).unwrap_or_else(|e| e.into_inner()).0;
        }
        let mut waiting = VecDeque::with_capacity(jobs.len());
        for flight in jobs.drain(..) {
            if flight.done() {
                flight.finish();
            } else {
                waiting.push_back(flight);
            }
        }
        *jobs = waiting;
        drop(jobs);
        std::thread::yield_now();
    }
}

impl Backend for DsaBackend {
    fn name(&self) -> &'static str {
        "dsa"
    }

    fn copy(&self, job: CopyJob) {
        let Some(Some(queue)) = self.queues.get(job.engine) else { return job.finish(false) };
        let mut pieces = Vec::new();
        let mut rest = job;
        while rest.len > queue.max_transfer {
            let (head, tail) = rest.split_at(queue.max_transfer);
            pieces.push(head);
            rest = tail;
        }
        pieces.push(rest);
        let flights = queue.submit(pieces);
        let (waiting, ready) = &*self.in_flight;
        waiting.lock().unwrap_or_else(|e| e.into_inner()).extend(flights);
        ready.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cache, CacheData};
    use std::sync::mpsc;

    /// What a `SoftEngine` ran: (opcode, count or length) per descriptor.
    type Log = Mutex<Vec<(u8, u32)>>;

    /// How a `SoftEngine` departs from a perfect device.
    #[derive(Clone, Copy, PartialEq)]
    enum Trouble {
        None,
        /// The memory move number `index` (counting every move run) faults after `after` bytes.
        FaultMove {
            index: usize,
            after: u32,
        },
        /// Every batch descriptor is refused (an error, none of its moves run).
        RefuseBatches,
    }

    /// A DSA work queue in software, on a thread of its own, doing what the specification says a
    /// device does with a descriptor: reads its fields, copies, and writes the completion record,
    /// status byte last. It logs each descriptor it runs as (opcode, count or length), a batch
    /// before its moves.
    struct SoftEngine {
        submissions: Mutex<mpsc::Sender<Descriptor>>,
    }

    impl SoftEngine {
        fn start(trouble: Trouble) -> (SoftEngine, Arc<Log>) {
            let (sender, receiver) = mpsc::channel::<Descriptor>();
            let log = Arc::new(Mutex::new(Vec::new()));
            let device_log = log.clone();
            std::thread::spawn(move || {
                let mut moves = 0;
                for descriptor in receiver {
                    run(&Fields::of(&descriptor), trouble, &mut moves, &device_log);
                }
            });
            (SoftEngine { submissions: Mutex::new(sender) }, log)
        }
    }

    impl Submit for SoftEngine {
        fn submit(&self, descriptor: &Descriptor) {
            self.submissions.lock().unwrap().send(*descriptor).unwrap();
        }
    }

    /// A descriptor's fields at the specification's offsets.
    struct Fields {
        opcode: u8,
        completion: u64,
        src: u64,
        dst: u64,
        size: u32,
    }

    impl Fields {
        fn of(d: &Descriptor) -> Fields {
            let b = d.bytes();
            let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
            Fields {
                opcode: b[7],
                completion: u64_at(8),
                src: u64_at(16),
                dst: u64_at(24),
                size: u32::from_le_bytes(b[32..36].try_into().unwrap()),
            }
        }
    }

    /// Runs one descriptor, logging it; returns whether it succeeded.
    fn run(f: &Fields, trouble: Trouble, moves: &mut usize, log: &Log) -> bool {
        log.lock().unwrap().push((f.opcode, f.size));
        match f.opcode {
            OPCODE_MEMMOVE => {
                let index = *moves;
                *moves += 1;
                let done = match trouble {
                    Trouble::FaultMove { index: at, after } if at == index => after.min(f.size),
                    _ => f.size,
                };
                // SAFETY: the descriptor names a source and destination of `size` bytes.
                unsafe { std::ptr::copy_nonoverlapping(f.src as *const u8, f.dst as *mut u8, done as usize) };
                let status = if done == f.size { 1 } else { 0x03 };
                complete(f.completion, status, done, f.src + u64::from(done));
                done == f.size
            }
            OPCODE_BATCH if trouble == Trouble::RefuseBatches => {
                complete(f.completion, 0x10, 0, 0);
                false
            }
            OPCODE_BATCH => {
                let mut all = true;
                for i in 0..f.size as usize {
                    // SAFETY: the batch's list holds `size` descriptors.
                    let d = unsafe { *(f.src as *const Descriptor).add(i) };
                    all &= run(&Fields::of(&d), trouble, moves, log);
                }
                complete(f.completion, if all { 1 } else { 0x05 }, 0, 0);
                all
            }
            _ => unreachable!("steer submits memory moves and batches only"),
        }
    }

    fn complete(address: u64, status: u8, bytes: u32, fault: u64) {
        let record = address as *mut u8;
        // SAFETY: the descriptor's completion record, 32 bytes the submitter keeps alive until
        // the status byte is written; the status goes last, with Release (as the device orders it).
        unsafe {
            record.add(4).cast::<[u8; 4]>().write(bytes.to_le_bytes());
            record.add(8).cast::<[u8; 8]>().write_unaligned(fault.to_le_bytes());
            AtomicU8::from_ptr(record).store(status, Ordering::Release);
        }
    }

    /// A cache on one node copying through a software DSA queue with the given limits.
    fn cache_over(engine: SoftEngine, max_transfer: u64, max_batch: u32) -> Cache {
        let topology = Arc::new(Topology::single_node(1, 1 << 30));
        let queue = Arc::new(Queue::new(Box::new(engine), max_transfer, max_batch));
        Cache::builder(topology).backend(Arc::new(DsaBackend::with_queues(vec![Some(queue)]).unwrap())).build().unwrap()
    }

    fn block(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 251) as u8).collect()
    }

    fn copied(cache: &Cache, source: &[u8]) -> CacheData {
        // SAFETY: each test keeps its source, unchanged, until the end, after its cache is done.
        let data = unsafe { cache.access(source.as_ptr(), source.len()) }.unwrap();
        data.wait();
        data
    }

    #[test]
    fn a_job_longer_than_a_transfer_is_copied_in_pieces_of_one_batch() {
        let (engine, log) = SoftEngine::start(Trouble::None);
        let cache = cache_over(engine, 4096, 32);
        let source = block(2 * 4096 + 100);
        let data = copied(&cache, &source);
        assert!(data.is_cached());
        assert_eq!(data.as_slice(), source);
        // One batch of three moves: 4096, 4096 and 100 bytes.
        assert_eq!(
            *log.lock().unwrap(),
            [(OPCODE_BATCH, 3), (OPCODE_MEMMOVE, 4096), (OPCODE_MEMMOVE, 4096), (OPCODE_MEMMOVE, 100)]
        );
    }

    #[test]
    fn batches_hold_at_most_max_batch_size_moves_and_a_lone_move_goes_alone() {
        let (engine, log) = SoftEngine::start(Trouble::None);
        let cache = cache_over(engine, 1000, 2);
        assert_eq!(cache.backend(), "dsa");
        let source = block(2500);
        assert_eq!(copied(&cache, &source).as_slice(), source);
        assert_eq!(
            *log.lock().unwrap(),
            [(OPCODE_BATCH, 2), (OPCODE_MEMMOVE, 1000), (OPCODE_MEMMOVE, 1000), (OPCODE_MEMMOVE, 500)]
        );
        // A job within one transfer is one move, no batch.
        log.lock().unwrap().clear();
        let small = block(64);
        assert_eq!(copied(&cache, &small).as_slice(), small);
        assert_eq!(*log.lock().unwrap(), [(OPCODE_MEMMOVE, 64)]);
    }

    #[test]
    fn a_move_that_faults_part_way_is_finished_on_the_cpu() {
        let (engine, _) = SoftEngine::start(Trouble::FaultMove { index: 1, after: 1000 });
        let cache = cache_over(engine, 4096, 32);
        let source = block(3 * 4096);
        let data = copied(&cache, &source);
        assert!(data.is_cached(), "a partial completion is not a failure");
        assert_eq!(data.as_slice(), source);
    }

    #[test]
    fn a_refused_batch_is_copied_on_the_cpu() {
        let (engine, log) = SoftEngine::start(Trouble::RefuseBatches);
        let cache = cache_over(engine, 4096, 32);
        let source = block(3 * 4096);
        let data = copied(&cache, &source);
        assert!(data.is_cached());
        assert_eq!(data.as_slice(), source);
        assert_eq!(*log.lock().unwrap(), [(OPCODE_BATCH, 3)], "the device ran none of its moves");
    }

    #[test]
    fn a_memmove_descriptor_is_laid_out_as_the_specification_says() {
        let d =
            Descriptor::memmove(0x1122_3344_5566_7788, 0x99aa_bbcc_ddee_ff00, 0x0010_0000, 0x7000_0040, false, true);
        let mut want = [0u8; 64];
        // Dword 1: flags CRAV | RCR | CC = 0x10c, opcode 3 in bits 24..32.
        want[4..8].copy_from_slice(&[0x0c, 0x01, 0x00, 0x03]);
        want[8..16].copy_from_slice(&0x7000_0040u64.to_le_bytes());
        want[16..24].copy_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        want[24..32].copy_from_slice(&0x99aa_bbcc_ddee_ff00u64.to_le_bytes());
        want[32..36].copy_from_slice(&0x0010_0000u32.to_le_bytes());
        assert_eq!(d.bytes(), &want);
        assert_eq!(d.opcode(), OPCODE_MEMMOVE);
        assert_eq!(d.flags(), 0x10c);
        let bof = Descriptor::memmove(0, 0, 64, 0, true, false);
        assert_eq!(bof.flags(), FLAG_COMPLETION_ADDR_VALID | FLAG_REQUEST_COMPLETION | FLAG_BLOCK_ON_FAULT);
        assert_eq!(std::mem::size_of::<Descriptor>(), 64);
        assert_eq!(std::mem::align_of::<Descriptor>(), 64);
    }

    #[test]
    fn a_batch_descriptor_points_at_its_list_and_counts_it() {
        let d = Descriptor::batch(0x4000, 32, 0x8000);
        assert_eq!(d.bytes()[4..8], [0x0c, 0x00, 0x00, 0x01]);
        assert_eq!(d.bytes()[16..24], 0x4000u64.to_le_bytes());
        assert_eq!(d.bytes()[24..32], [0; 8], "no destination");
        assert_eq!(d.bytes()[32..36], 32u32.to_le_bytes());
        assert_eq!(Descriptor::new(OPCODE_NOOP, 0, 0).bytes(), &[0; 64]);
    }

    #[test]
    fn completion_records_decode_status_partial_bytes_and_fault_address() {
        let record = |status: u8, bytes: u32, addr: u64| {
            let mut raw = [0u8; 32];
            raw[0] = status;
            raw[4..8].copy_from_slice(&bytes.to_le_bytes());
            raw[8..16].copy_from_slice(&addr.to_le_bytes());
            CompletionRecord::from_bytes(raw)
        };
        assert_eq!(record(0, 0, 0).status(), Status::Pending);
        assert_eq!(record(1, 0, 0).status(), Status::Success);
        let fault = record(0x83, 8192, 0x7f00_dead_b000);
        assert_eq!(fault.status(), Status::PageFault { write: true });
        assert_eq!(fault.bytes_completed(), 8192);
        assert_eq!(fault.fault_addr(), 0x7f00_dead_b000);
        assert_eq!(record(0x03, 0, 0).status(), Status::PageFault { write: false });
        assert_eq!(record(0x10, 0, 0).status(), Status::Error(0x10), "bad opcode");
        assert_eq!(std::mem::size_of::<CompletionRecord>(), 32);
        assert_eq!(std::mem::align_of::<CompletionRecord>(), 32);
    }

    #[test]
    fn work_queues_are_read_from_idxd_sysfs() {
        let root = std::env::temp_dir().join(format!("steer-offload-dsa-{}", std::process::id()));
        let dev = root.join("sys/bus/dsa/devices");
        let write = |path: &str, text: &str| {
            let p = dev.join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        };
        write("dsa0/numa_node", "0\n");
        write("dsa2/numa_node", "1\n");
        for (wq, mode, state, kind) in [
            ("wq0.0", "shared", "enabled", "user"),
            ("wq0.1", "dedicated", "enabled", "kernel"),
            ("wq2.0", "dedicated", "enabled", "user"),
            ("wq2.1", "shared", "disabled", "user"),
        ] {
            write(&format!("{wq}/mode"), mode);
            write(&format!("{wq}/state"), state);
            write(&format!("{wq}/type"), kind);
            write(&format!("{wq}/size"), "32");
        }
        write("wq2.0/max_transfer_size", "1048576\n");
        write("wq2.0/max_batch_size", "8\n");
        let queues = work_queues(&root).unwrap();
        assert_eq!(queues.iter().map(|q| q.name.as_str()).collect::<Vec<_>>(), ["wq0.0", "wq2.0"]);
        assert_eq!((queues[0].dedicated, queues[0].numa_node, queues[0].size), (false, 0, 32));
        assert_eq!((queues[1].dedicated, queues[1].numa_node), (true, 1));
        assert_eq!((queues[0].max_transfer_size, queues[0].max_batch_size), (2 << 20, 32), "idxd's defaults");
        assert_eq!((queues[1].max_transfer_size, queues[1].max_batch_size), (1 << 20, 8));
        assert_eq!(queues[1].portal, root.join("dev/dsa/wq2.0"));
        fs::remove_dir_all(&root).unwrap();
        let missing = work_queues(Path::new("/nonexistent")).unwrap_err();
        assert!(missing.to_string().starts_with("dsa backend unavailable: "), "{missing}");
    }
}
