//! The Intel DSA backend, through the idxd driver's user-space portals (`/dev/dsa/wqX.Y`).
//!
//! Descriptors (64 bytes) and completion records (32 bytes) are laid out as the DSA architecture
//! specification and Linux's `uapi/linux/idxd.h` define them. A copy is one memory-move descriptor
//! per job, submitted with ENQCMD to a shared work queue (retried while the queue refuses) or
//! MOVDIR64B to a dedicated one. Descriptors run without block-on-fault: a page fault ends the
//! descriptor with partial completion, and the rest is copied on the CPU. A poller thread watches
//! the completion records and finishes the jobs.
//!
//! Submission needs a machine with DSA and the idxd driver; everywhere else [`DsaBackend::open`]
//! says why not, and the cache uses the CPU backend.

use std::collections::VecDeque;
use std::fs;
use std::path::{Path, PathBuf};
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

/// A 32-byte completion record, written by the engine.
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug, Default)]
pub struct CompletionRecord([u8; 32]);

impl CompletionRecord {
    /// Reads the status byte as the engine wrote it.
    pub fn status(&self) -> Status {
        // SAFETY: reading a byte of our own record; volatile because the engine writes it behind
        // the compiler's back.
        let raw = unsafe { std::ptr::read_volatile(self.0.as_ptr()) };
        match raw & 0x7f {
            0 => Status::Pending,
            1 => Status::Success,
            3 => Status::PageFault { write: raw & 0x80 != 0 },
            code => Status::Error(code),
        }
    }

    /// Bytes the descriptor completed before a partial completion.
    pub fn bytes_completed(&self) -> u32 {
        u32::from_le_bytes(self.0[4..8].try_into().expect("four bytes"))
    }

    /// The faulting address of a partial completion.
    pub fn fault_addr(&self) -> u64 {
        u64::from_le_bytes(self.0[8..16].try_into().expect("eight bytes"))
    }

    /// A record with raw bytes, as an engine would leave it (for tests and for replay).
    pub fn from_bytes(bytes: [u8; 32]) -> CompletionRecord {
        CompletionRecord(bytes)
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
    /// The user portal, `/dev/dsa/wq0.1`.
    pub portal: PathBuf,
}

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
            numa_node,
            name,
        });
    }
    queues.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(queues)
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

/// A job on an engine with its completion record (boxed: its address is handed to the device;
/// the descriptor itself is read by the submitting instruction and need not outlive it).
struct InFlight {
    job: CopyJob,
    record: Box<CompletionRecord>,
}

type Watched = Arc<(Mutex<VecDeque<InFlight>>, Condvar)>;

/// DSA work queues, one per compute node where the machine has one there.
pub struct DsaBackend {
    /// Per node id: the portal of the queue serving it.
    portals: Vec<Option<Arc<Portal>>>,
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
            opened.push((queue.numa_node, Arc::new(Portal::open(queue)?)));
        }
        let portals = topology
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
        let in_flight: Watched = Arc::new((Mutex::new(VecDeque::new()), Condvar::new()));
        let watched = in_flight.clone();
        std::thread::Builder::new()
            .name("steer-dsa-poll".into())
            .spawn(move || poll(watched))
            .map_err(|e| Error::Os(format!("spawning the DSA poller: {e}")))?;
        Ok(DsaBackend { portals, in_flight })
    }
}

/// Finishes jobs as their completion records fill in; partial completions and errors are finished
/// on the CPU. Ends once the backend is gone and nothing is in flight.
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
            match flight.record.status() {
                Status::Pending => waiting.push_back(flight),
                Status::Success => flight.job.finish(true),
                Status::PageFault { .. } => {
                    let done = flight.record.bytes_completed() as usize;
                    flight.job.copy_here_from(done);
                }
                Status::Error(_) => flight.job.copy_here(),
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
        let Some(Some(portal)) = self.portals.get(job.engine) else { return job.finish(false) };
        let Ok(len) = u32::try_from(job.len) else { return job.copy_here() };
        let record = Box::<CompletionRecord>::default();
        let descriptor = Descriptor::memmove(
            job.src as u64,
            job.dst as u64,
            len,
            &*record as *const CompletionRecord as u64,
            false,
            false,
        );
        portal.submit(&descriptor);
        let (queue, ready) = &*self.in_flight;
        queue.lock().unwrap_or_else(|e| e.into_inner()).push_back(InFlight { job, record });
        ready.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let queues = work_queues(&root).unwrap();
        assert_eq!(queues.iter().map(|q| q.name.as_str()).collect::<Vec<_>>(), ["wq0.0", "wq2.0"]);
        assert_eq!((queues[0].dedicated, queues[0].numa_node, queues[0].size), (false, 0, 32));
        assert_eq!((queues[1].dedicated, queues[1].numa_node), (true, 1));
        assert_eq!(queues[1].portal, root.join("dev/dsa/wq2.0"));
        fs::remove_dir_all(&root).unwrap();
        let missing = work_queues(Path::new("/nonexistent")).unwrap_err();
        assert!(missing.to_string().starts_with("dsa backend unavailable: "), "{missing}");
    }
}
