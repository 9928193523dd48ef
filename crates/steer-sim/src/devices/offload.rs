//! The offloading cache in the simulation: steer-offload's own [`Cache`], with its placement and
//! copy policies, over the platform's memory nodes, whose copy jobs become descriptors on the
//! simulated DSAs. The cache decides exactly as it does on a real host (hit, miss, which node,
//! which engines, which entries a flush drops); the simulated backend only moves no bytes: a job
//! finishes when its descriptor's completion record is seen, the entry's buffer left as mapped.
//!
//! As the library's DSA backend does, the thread that calls `access` submits one memmove
//! descriptor per job to the shared work queue of the job's engine (retrying while it is full),
//! and a poller reaps the completion records and finishes the jobs. The poller's core is not one
//! of the workload's (assumed: the library runs it as its own thread).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use steer_offload::{Backend, Cache, CacheData, CopyJob};

use crate::devices::dsa::CopyPorts;
use crate::devices::dsa::{Descriptor, Faults};
use crate::engine::{Agent, Cx, Signal, Step};
use crate::error::{ConfigError, ConfigResult};
use crate::flows::Region;
use crate::platform::PlatformSpec;
use crate::system::Builder;
use crate::units::Time;

/// Copy jobs the cache handed over, waiting for the program that caused them to submit them.
#[derive(Default)]
struct SimulatedBackend {
    jobs: Mutex<Vec<CopyJob>>,
}

impl Backend for SimulatedBackend {
    fn name(&self) -> &'static str {
        "simulated"
    }
    fn copy(&self, job: CopyJob) {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).push(job);
    }
}

/// The cache's side of the simulation: the cache, its jobs in flight and the signal told when one
/// finishes. Shared by the programs of one workload.
pub struct Offload {
    cache: Cache,
    /// The source blocks' address space (dropped after the cache that points into it).
    source: Reservation,
    /// Where the source lies in simulated memory.
    source_region: Region,
    /// Per memory node, where its entries lie in simulated memory: each block's entry at the
    /// block's offset in the source.
    entry_regions: Vec<Region>,
    backend: Arc<SimulatedBackend>,
    /// DSA device name prefix (device of compute node n: prefix + n).
    device: String,
    /// Completion records' owner (the poller).
    records: usize,
    in_flight: HashMap<u64, CopyJob>,
    next_tag: u64,
    /// Notified whenever a job finishes.
    pub finished: Signal,
}

/// What an access found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// The copy had completed.
    Ready,
    /// The entry existed, its copy in flight.
    InFlight,
    /// No entry: this access caused the copy (or found no room).
    Miss,
}

impl Offload {
    /// A cache over `platform`'s memory nodes with the named policies and `capacity` bytes per
    /// node, copying through the devices named `device` + node, and its poller; the blocks it is
    /// asked for lie in `source` (simulated memory).
    pub fn build(
        b: &mut Builder,
        placement: &str,
        copy_policy: &str,
        capacity: u64,
        device: &str,
        source: Region,
    ) -> Rc<RefCell<Offload>> {
        let topology = Arc::new(crate::devices::copy_policy::topology(b.platform));
        let backend = Arc::new(SimulatedBackend::default());
        let mut builder = steer_offload::Cache::builder(topology.clone())
            .placement(steer_offload::policy::placement(placement).expect("a checked placement name"))
            .copy_policy(steer_offload::policy::copy_policy(copy_policy).expect("a checked copy policy name"))
            .backend(backend.clone());
        let bytes = usize::try_from(capacity).unwrap_or(usize::MAX);
        for node in topology.nodes() {
            builder = builder.capacity(node.id, bytes);
        }
        let cache = builder.build().expect("a capacity per node of the platform");
        let nodes = b.platform.memory_nodes().len() as u32;
        let entry_regions = (0..nodes).map(|node| b.region(node, source.len)).collect();
        let (told, finished) = (b.signal(), b.signal());
        let records = b.copy_ports().add_submitter(told);
        let offload = Rc::new(RefCell::new(Offload {
            cache,
            source: Reservation::new(source.len as usize),
            source_region: source,
            entry_regions,
            backend,
            device: device.to_string(),
            records,
            in_flight: HashMap::new(),
            next_tag: 0,
            finished,
        }));
        let memory = b.platform.memory_nodes();
        let home = &memory[source.node as usize];
        let record_read = Time::from_ns(b.platform.llc_read_latency_ns(home, home.socket));
        b.add_agent(Box::new(Poller { offload: offload.clone(), told, record_read }), Some(Time::ZERO));
        offload
    }

    /// Accesses the `len` bytes at `offset` of the source for a consumer on `consumer_node`; the
    /// copies a miss causes are returned as descriptors for the caller to submit, each with the
    /// device it goes to.
    pub fn access(
        &mut self,
        offset: u64,
        len: u64,
        consumer_node: u32,
        ports: &crate::devices::dsa::CopyPorts,
    ) -> (CacheData, Found, Vec<(usize, Descriptor)>) {
        let src = self.source.at(offset, len);
        // SAFETY: `src` lies in the reservation, which outlives the cache and is never written.
        let src_node = self.source_region.node as usize;
        let data = unsafe { self.cache.access_at(src, len as usize, src_node, consumer_node as usize) }
            .expect("validated: nodes of the platform, blocks within capacity");
        let jobs: Vec<CopyJob> = std::mem::take(&mut *self.backend.jobs.lock().unwrap_or_else(|e| e.into_inner()));
        let found = match (data.is_ready(), jobs.is_empty()) {
            (_, false) => Found::Miss,
            (true, true) if data.is_cached() => Found::Ready,
            (true, true) => Found::Miss,
            (false, true) => Found::InFlight,
        };
        let descriptors = jobs
            .into_iter()
            .map(|job| {
                self.next_tag += 1;
                let device = ports.device_on(&self.device, job.engine as u32).expect("validated: every node has a DSA");
                // A part of a block: at its offset in the source, and in the entry at the same.
                let offset = job.src as u64 - self.source.ptr as u64;
                let descriptor = Descriptor {
                    submitter: self.records,
                    tag: self.next_tag,
                    tasks: 1,
                    task_bytes: job.len as u64,
                    last_bytes: job.len as u64,
                    src: self.source_region.skip(offset),
                    // The column was never written: nothing of it is cached.
                    src_in_llc: false,
                    dst: self.entry_regions[job.dst_node].skip(offset),
                    faults: Faults::None,
                    cache_control: false,
                };
                self.in_flight.insert(self.next_tag, job);
                (device, descriptor)
            })
            .collect();
        (data, found, descriptors)
    }

    pub fn stats(&self) -> steer_offload::Stats {
        self.cache.stats()
    }

    /// Where the block at `offset` of the source lies as `data` holds it: its entry's copy if it
    /// was cached, else the source.
    pub fn region_of(&self, data: &CacheData, offset: u64) -> Region {
        let buffer = if data.is_cached() { self.entry_regions[data.node()] } else { self.source_region };
        buffer.skip(offset)
    }
}

/// Address space for the source blocks: readable zero pages never touched, so that the cache is
/// handed valid pointers while the simulation moves no bytes.
struct Reservation {
    ptr: *mut u8,
    len: usize,
}

impl Reservation {
    fn new(len: usize) -> Reservation {
        // SAFETY: a fresh anonymous mapping; MAP_NORESERVE commits no memory until touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(1),
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert!(ptr != libc::MAP_FAILED, "reserving {len} bytes of address space");
        Reservation { ptr: ptr.cast(), len: len.max(1) }
    }

    /// The address of `len` bytes at `offset`.
    fn at(&self, offset: u64, len: u64) -> *const u8 {
        assert!(offset.saturating_add(len) <= self.len as u64, "a block inside the source");
        // SAFETY: in bounds, checked above.
        unsafe { self.ptr.add(offset as usize) }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Reaps completion records and finishes their jobs: it sees a record once it has read it from
/// the LLC, where the device's write of it allocated (as `dsa_copy`'s threads do).
struct Poller {
    offload: Rc<RefCell<Offload>>,
    told: Signal,
    /// Its read of a record from the LLC of the source's socket.
    record_read: Time,
}

impl Agent for Poller {
    fn name(&self) -> String {
        "offload poller".into()
    }

    fn step(&mut self, cx: &mut Cx, now: Time, _limit: Time) -> Step {
        let mut offload = self.offload.borrow_mut();
        let records = &mut cx.shared.get_mut::<CopyPorts>().completions[offload.records];
        let mut finished = false;
        while let Some(record) = records.take_visible(now.saturating_sub(self.record_read)) {
            let job = offload.in_flight.remove(&record.tag).expect("a record of a job in flight");
            job.finish(true);
            finished = true;
        }
        let next = records.records.iter().map(|r| r.visible_at + self.record_read).min();
        if finished {
            cx.notify(offload.finished, now);
        }
        cx.wait_on(self.told);
        next.map_or(Step::Wait, Step::At)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The registry a workload's `placement` of cache entries names an entry of (the library's).
pub struct CachePlacements;

impl crate::params::Registry for CachePlacements {
    const WHAT: &'static str = "cache placement";
    fn entries() -> Vec<(&'static str, &'static str)> {
        steer_offload::policy::PLACEMENTS.iter().map(|p| (p.name, p.description)).collect()
    }
}

/// The node placement `name` chooses for a block of `src_node` read on `consumer_node`.
pub fn place(name: &str, platform: &PlatformSpec, src_node: u32, consumer_node: u32) -> u32 {
    use steer_offload::policy::{Placement, PlacementRequest};
    let placement = steer_offload::policy::placement(name).expect("a checked placement name");
    let request = PlacementRequest { src_node: src_node as usize, consumer_node: consumer_node as usize, len: 0 };
    placement.place(&crate::devices::copy_policy::topology(platform), request) as u32
}

/// Checks that the devices named `device` exist and take shared submissions.
pub fn check_devices(shape: &crate::devices::SystemShape, device: &str, key: &str) -> ConfigResult<()> {
    let engines = shape.copy_engines.iter().find(|e| e.name == device).ok_or_else(|| {
        ConfigError::new(key, format!("no copy engine device named `{device}` (add [[devices]] kind = \"dsa\")"))
    })?;
    crate::error::ensure(engines.wq == crate::devices::dsa::WqMode::Shared, key, || {
        "the offloading cache's threads share the work queues: the DSA's `wq` must be `shared`".into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_poller_is_named_in_stall_reports_and_the_cache_its_backend() {
        let platform = crate::testing::tiny_platform();
        let mut b = Builder::new(&platform, 1);
        let source = b.region(0, 1 << 20);
        let offload = Offload::build(&mut b, "consumer-node", "local", 1 << 20, "dsa", source);
        assert_eq!(offload.borrow().cache.backend(), "simulated");
        let (agents, _, _) = b.into_parts();
        assert_eq!(agents[0].0.name(), "offload poller");
    }

    #[test]
    fn a_dropped_reservation_gives_its_address_space_back() {
        let reservation = Reservation::new(3 << 20);
        let start = reservation.ptr as usize;
        // Its line of /proc/self/maps, by its exact range.
        let range = format!("{start:x}-{:x} ", start + (3 << 20));
        let mapped = || std::fs::read_to_string("/proc/self/maps").unwrap().lines().any(|l| l.starts_with(&range));
        assert!(mapped());
        drop(reservation);
        assert!(!mapped());
    }
}
