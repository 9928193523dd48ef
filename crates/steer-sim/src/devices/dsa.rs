//! Intel Data Streaming Accelerator (device kind `dsa`): one copy engine device per compute NUMA
//! node (Xeon Max: one per tile). Programs submit descriptors to the device's work queue (shared:
//! ENQCMD, non-posted, "retry" when full; dedicated: MOVDIR64B, posted, a full queue drops); an
//! idle engine takes the next descriptor, spends a fixed time on each of its tasks (a batch
//! descriptor carries several), moves each task's bytes as a flow (`flows`) over the device's
//! fabric port, the memory nodes and the links it crosses, and writes a completion record the
//! submitter polls. Throughput is limited where it is on real parts: the device's fabric port (one
//! engine can fill it), its read buffers over the source's latency, and the memory and links that
//! every concurrent copy shares.
//!
//! Values and sources: ../shared/reference/dsa.md. Calibrated by `steer fit` on three points
//! (LightDSA, one SPR server): `fabric_gbs` on the 29.2 GiB/s large-copy ceiling
//! (fits/dsa-port.toml), then `descriptor_ns` and `latency_ns` on the 0.05 µs per descriptor inside
//! a batch of 32 and the 0.75 µs of one synchronous 64 B descriptor (fits/dsa-descriptor.toml,
//! given `enqcmd_ns`, which is assumed).

use std::collections::VecDeque;

use crate::devices::{CopyEngineShape, DeviceSpec};
use crate::engine::{Agent, Cx, ReportView, Signal, Step};
use crate::error::{ensure, ConfigResult, Shown};
use crate::flows::Flows;
use crate::flows::{Network, OwnerId, Region, ResourceId, Transfer};
use crate::hierarchy::Hierarchy;
use crate::params::{choice, params};
use crate::platform::PlatformSpec;
use crate::stats::{stat, stats, Report};
use crate::system::Builder;
use crate::units::Time;

/// Engines, work queue entries and batch size one device has at most ([V] `accel-config list`
/// on SPR, dsa.md).
pub const DEVICE_ENGINES: u32 = 4;
pub const DEVICE_WQ_ENTRIES: u32 = 128;
pub const DEVICE_MAX_BATCH: u32 = 1024;
/// Largest transfer of one descriptor (2 GiB).
pub const MAX_TRANSFER_BYTES: u64 = 2 << 30;
/// Bytes of a page that a fault is taken for.
const PAGE_BYTES: u64 = 4096;

choice! {
    /// How programs submit to the device's work queue.
    pub enum WqMode {
        /// Shared WQ: ENQCMD, non-posted (one in flight per submitting core), "retry" when full.
        Shared,
        /// Dedicated WQ: MOVDIR64B, posted; a full queue drops; one submitter only.
        Dedicated,
    }
}

choice! {
    /// What happens at destination pages that are not yet mapped.
    pub enum Faults {
        /// Every destination page is mapped before the copy.
        None,
        /// Untouched destination; the engine waits for each page fault to be resolved.
        BlockOnFault,
        /// Untouched destination, no block-on-fault: the descriptor completes partially at the
        /// first fault and software finishes the rest on the CPU.
        Partial,
    }
}

params! {
    /// A DSA on every compute NUMA node, named NAME0, NAME1, ... by node.
    pub struct DsaSpec {
        /// Name prefix of the devices (device of node n: NAME + n).
        name: String = "dsa".to_string(),
        /// Engines in the device's one group (at most 4).
        engines: u32 = 4,
        /// Work queue mode: `shared` or `dedicated`.
        wq: WqMode = WqMode::Shared,
        /// Entries of the work queue (the device has 128 in all).
        wq_size: u32 = 128,
        /// Largest batch the work queue accepts (configured per WQ, at most 1024).
        max_batch: u32 = 1024,
        /// Bandwidth of the device's port onto the fabric (GB/s): calibrated on the 29.2 GiB/s
        /// large-copy ceiling (LightDSA; fits/dsa-port.toml).
        fabric_gbs: f64 = 31.35,
        /// Read buffers (reads in flight): 96 ([V] accel-config on SPR).
        read_buffers: u32 = 96,
        /// Source lines an engine reads at once when it starts a task; each round trip of them
        /// doubles the reads it keeps in flight until the fabric port, not the reads, limits the
        /// task (lines): assumed.
        first_reads: u32 = 4,
        /// Engine time per task before its data moves (ns): calibrated on 0.05 µs per descriptor
        /// in a batch of 32 (LightDSA; fits/dsa-descriptor.toml).
        descriptor_ns: f64 = 47.0,
        /// Latency of one submission that holds no engine: descriptor fetch and the completion
        /// record's write into the LLC, before the poller reads it from there (ns): calibrated on
        /// 0.75 µs for one synchronous 64 B copy (LightDSA; fits/dsa-descriptor.toml).
        latency_ns: f64 = 518.0,
        /// Core time of one ENQCMD (non-posted: it waits for accept or retry) (ns): assumed.
        enqcmd_ns: f64 = 150.0,
        /// Core time of one MOVDIR64B (posted) (ns): assumed.
        movdir64b_ns: f64 = 20.0,
        /// One address translation request (ATS) from the device to the IOMMU and its answer,
        /// the IOMMU walking the process's page table (ns): assumed.
        ats_ns: f64 = 1000.0,
        /// A page request (PRS) from the device into the IOMMU's page request queue, and the
        /// interrupt that tells the host (ns): assumed.
        page_request_ns: f64 = 1000.0,
        /// The wake-up of one kernel thread on the host's fault path: the page request queue's
        /// threaded interrupt handler, then the I/O page fault workqueue's worker (ns): assumed.
        fault_wakeup_ns: f64 = 5000.0,
        /// The host's page response through the IOMMU's invalidation queue back to the device
        /// (ns): assumed.
        page_response_ns: f64 = 1000.0,
        /// Core time of the memory manager's work for one untouched destination page (allocate,
        /// zero, map it): a CPU's own page fault, or the fault handler's `handle_mm_fault` for the
        /// device (ns): assumed.
        software_fault_ns: f64 = 500.0,
        /// LLC ways a cache-control write may allocate in (stream-dsa: about 2 of 15).
        llc_ways: u32 = 2,
    }
}

/// The kind's registration.
#[linkme::distributed_slice(crate::devices::DEVICES)]
pub static KIND: crate::devices::DeviceKind = crate::devices::DeviceKind::of::<DsaSpec>(
    "dsa",
    "Intel DSA copy engines, one per compute NUMA node: work queues, batches, completion records",
);

/// Threads the host wakes, one after the other, to serve one device page fault: Linux's page
/// request queue interrupt is threaded (`prq_event_thread`, drivers/iommu/intel/prq.c), and it
/// queues the fault to the I/O page fault workqueue whose worker handles it
/// (`iommu_sva_handle_iopf`, drivers/iommu/iommu-sva.c).
const FAULT_WAKEUPS: f64 = 2.0;

impl DsaSpec {
    /// Engine time one destination page fault costs with block-on-fault, step by step: the
    /// translation request that finds no page, the page request, the host's two wake-ups, its
    /// memory manager's work on the page, the page response, and the translation request
    /// retried (then the access goes on as without a fault).
    pub fn page_fault_ns(&self) -> f64 {
        2.0 * self.ats_ns
            + self.page_request_ns
            + FAULT_WAKEUPS * self.fault_wakeup_ns
            + self.software_fault_ns
            + self.page_response_ns
    }

    /// How much longer than a full pipeline (one read latency, then the bytes at the fabric
    /// port's rate) a task of `bytes` takes because its reads ramp up (ns): round trips of
    /// `latency_ns` each carry `first_reads` lines, then twice as many, and so on, until the
    /// reads in flight cover the port's rate over the latency (or all the read buffers); the
    /// bytes left then stream at the port's rate. A task within the first round trip loses
    /// nothing.
    pub fn read_ramp_ns(&self, bytes: u64, line_bytes: u64, latency_ns: f64) -> f64 {
        let lines = bytes.div_ceil(line_bytes) as f64;
        let streaming = (self.fabric_gbs * latency_ns / line_bytes as f64).min(self.read_buffers as f64);
        let (mut window, mut sent, mut trips) = (self.first_reads as f64, 0.0, 0.0);
        while window < streaming && sent + window < lines {
            sent += window;
            window *= 2.0;
            trips += 1.0;
        }
        let rest = if window < streaming {
            latency_ns
        } else {
            latency_ns + (bytes as f64 - sent * line_bytes as f64) / self.fabric_gbs
        };
        let pipelined = latency_ns + bytes as f64 / self.fabric_gbs;
        (trips * latency_ns + rest - pipelined).max(0.0)
    }

    /// Engine time before a task that writes `new_pages` untouched destination pages moves its
    /// data, and the page faults it served: each such page's fault (block-on-fault) or the one
    /// translation request that finds the first of them missing (partial completion: the task
    /// ends there). The front end has processed the descriptor before (`descriptor_ns`).
    fn setup_ns(&self, faults: Faults, new_pages: u64) -> (f64, u64) {
        match faults {
            Faults::BlockOnFault => (new_pages as f64 * self.page_fault_ns(), new_pages),
            Faults::Partial if new_pages > 0 => (self.ats_ns, 0),
            Faults::None | Faults::Partial => (0.0, 0),
        }
    }
}

/// Pages of a destination buffer, written in order from its (page-aligned) start, that a write of
/// `bytes` at byte `at` of it is the first to touch: those that begin within it.
pub fn pages_first_touched(at: u64, bytes: u64) -> u64 {
    (at + bytes).div_ceil(PAGE_BYTES) - at.div_ceil(PAGE_BYTES)
}

/// A copy job's request: one descriptor (a batch of `tasks` copies of `task_bytes` each, the
/// last `last_bytes`).
#[derive(Debug, Clone, PartialEq)]
pub struct Descriptor {
    /// Index of the submitter's completion records.
    pub submitter: usize,
    pub tag: u64,
    pub tasks: u32,
    pub task_bytes: u64,
    pub last_bytes: u64,
    /// Where its first task reads; each next task reads on from where the one before ended.
    pub src: Region,
    /// The source is read from the LLC that caches its node, not from the node's memory.
    pub src_in_llc: bool,
    /// Where its first task writes, the next ones on from there.
    pub dst: Region,
    pub faults: Faults,
    pub cache_control: bool,
}

impl Descriptor {
    fn bytes_of(&self, task: u32) -> u64 {
        if task + 1 == self.tasks {
            self.last_bytes
        } else {
            self.task_bytes
        }
    }

    /// Destination pages task `task` is the first to write (`pages_first_touched`).
    fn new_pages(&self, task: u32) -> u64 {
        let at = self.dst.skip(task as u64 * self.task_bytes).start;
        pages_first_touched(at, self.bytes_of(task))
    }
}

stats! {
    /// A work queue's counters.
    pub struct WqStats {
        /// Descriptors accepted (a batch counts once) [descriptors]
        accepted: u64 ["descriptors"],
        /// ENQCMD answered "retry": the shared queue was full [submissions]
        retries: u64 ["submissions"],
        /// MOVDIR64B dropped: the dedicated queue was full [submissions]
        drops: u64 ["submissions"],
    }
}

/// A device's work queue: the port programs submit through.
#[derive(Debug)]
pub struct WorkQueue {
    pub mode: WqMode,
    pub size: u32,
    pub max_batch: u32,
    entries: VecDeque<Descriptor>,
    /// Notified when a descriptor is accepted.
    pub doorbell: Signal,
    /// Notified when an entry frees.
    pub space: Signal,
    pub stats: WqStats,
}

/// What a submission got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submit {
    Accepted,
    /// Shared queue full: try again.
    Retry,
    /// Dedicated queue full: the descriptor is lost.
    Dropped,
}

impl WorkQueue {
    pub fn new(mode: WqMode, size: u32, max_batch: u32, doorbell: Signal, space: Signal) -> WorkQueue {
        WorkQueue { mode, size, max_batch, entries: VecDeque::new(), doorbell, space, stats: WqStats::default() }
    }

    /// Offers a descriptor (the caller rings `doorbell` when accepted).
    pub fn submit(&mut self, descriptor: Descriptor) -> Submit {
        if self.is_full() {
            return match self.mode {
                WqMode::Shared => {
                    self.stats.retries += 1;
                    Submit::Retry
                }
                WqMode::Dedicated => {
                    self.stats.drops += 1;
                    Submit::Dropped
                }
            };
        }
        self.stats.accepted += 1;
        self.entries.push_back(descriptor);
        Submit::Accepted
    }

    /// Whether a submission now would find no free entry.
    pub fn is_full(&self) -> bool {
        self.entries.len() as u32 >= self.size
    }

    /// The core time one submission takes.
    pub fn submit_cost(&self, spec: &DsaSpec) -> Time {
        Time::from_ns(match self.mode {
            WqMode::Shared => spec.enqcmd_ns,
            WqMode::Dedicated => spec.movdir64b_ns,
        })
    }
}

/// A completion record as its submitter sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionRecord {
    pub tag: u64,
    /// Bytes the device copied.
    pub copied: u64,
    /// Bytes it left at page faults (partial completion), for software to finish.
    pub left: u64,
    /// When the poller can see it.
    pub visible_at: Time,
}

/// One submitter's completion records and the signal that wakes it (also told of its own flows).
#[derive(Debug)]
pub struct Completions {
    pub records: VecDeque<CompletionRecord>,
    pub signal: Signal,
}

impl Completions {
    /// The first record visible at `now`, taken.
    pub fn take_visible(&mut self, now: Time) -> Option<CompletionRecord> {
        let i = self.records.iter().position(|r| r.visible_at <= now)?;
        self.records.remove(i)
    }
}

/// One DSA as programs find it.
#[derive(Debug)]
pub struct DevicePort {
    pub name: String,
    pub node: u32,
    pub spec: DsaSpec,
    pub queue: WorkQueue,
}

/// The ports between copy engines and programs: each device's work queue and every submitter's
/// completion records.
#[derive(Debug, Default)]
pub struct CopyPorts {
    pub devices: Vec<DevicePort>,
    pub completions: Vec<Completions>,
    /// Copy jobs' tallies (`workloads::dsa_copy`).
    pub jobs: Vec<crate::devices::copy_job::CopyJob>,
}

impl crate::engine::Facility for CopyPorts {}

impl Builder<'_> {
    /// The ports between copy engines and the programs that use them.
    pub fn copy_ports(&mut self) -> &mut CopyPorts {
        self.facility()
    }
}

impl CopyPorts {
    /// The index of the device of compute node `node` among those named `prefix` + node.
    pub fn device_on(&self, prefix: &str, node: u32) -> Option<usize> {
        let name = format!("{prefix}{node}");
        self.devices.iter().position(|d| d.name == name)
    }

    /// Adds a submitter's completion records; returns its index.
    pub fn add_submitter(&mut self, signal: Signal) -> usize {
        self.completions.push(Completions { records: VecDeque::new(), signal });
        self.completions.len() - 1
    }
}

impl DeviceSpec for DsaSpec {
    fn name(&self) -> &str {
        &self.name
    }

    fn validate(&self, path: &str, platform: &PlatformSpec) -> ConfigResult<()> {
        let key = |k: &str| format!("{path}.{k}");
        ensure((1..=DEVICE_ENGINES).contains(&self.engines), &key("engines"), || {
            format!("a DSA has 1 to {DEVICE_ENGINES} engines (got {})", self.engines)
        })?;
        ensure((1..=DEVICE_WQ_ENTRIES).contains(&self.wq_size), &key("wq_size"), || {
            format!("a DSA has 1 to {DEVICE_WQ_ENTRIES} work queue entries (got {})", self.wq_size)
        })?;
        ensure((1..=DEVICE_MAX_BATCH).contains(&self.max_batch), &key("max_batch"), || {
            format!("a work queue's maximum batch is 1 to {DEVICE_MAX_BATCH} (got {})", self.max_batch)
        })?;
        // Sapphire Rapids' DSA has 96.
        ensure((1..=4096).contains(&self.read_buffers), &key("read_buffers"), || {
            format!("must be 1 to 4096 (got {})", self.read_buffers)
        })?;
        ensure((1..=4096).contains(&self.first_reads), &key("first_reads"), || {
            format!("must be 1 to 4096 lines (got {})", self.first_reads)
        })?;
        ensure(self.fabric_gbs > 0.0, &key("fabric_gbs"), || {
            format!("must be positive (got {})", Shown(self.fabric_gbs))
        })?;
        for (name, value) in [
            ("descriptor_ns", self.descriptor_ns),
            ("latency_ns", self.latency_ns),
            ("enqcmd_ns", self.enqcmd_ns),
            ("movdir64b_ns", self.movdir64b_ns),
            ("ats_ns", self.ats_ns),
            ("page_request_ns", self.page_request_ns),
            ("fault_wakeup_ns", self.fault_wakeup_ns),
            ("page_response_ns", self.page_response_ns),
            ("software_fault_ns", self.software_fault_ns),
        ] {
            ensure(value >= 0.0, &key(name), || format!("must not be negative (got {})", Shown(value)))?;
        }
        ensure(self.llc_ways <= platform.l3.ways, &key("llc_ways"), || {
            format!("the L3 has {} ways (got {})", platform.l3.ways, self.llc_ways)
        })
    }

    fn queue_cpus(&self) -> Vec<u32> {
        Vec::new()
    }

    fn copy_engines(&self, platform: &PlatformSpec) -> Option<CopyEngineShape> {
        Some(CopyEngineShape {
            name: self.name.clone(),
            nodes: (0..platform.memory.nodes(&platform.topology)).collect(),
            max_batch: self.max_batch,
            wq: self.wq,
            wq_size: self.wq_size,
        })
    }

    fn host_bytes(&self) -> u64 {
        0
    }

    fn build(&self, b: &mut Builder) {
        let platform = b.platform.clone();
        for node in 0..platform.memory.nodes(&platform.topology) {
            let (doorbell, space, told) = (b.signal(), b.signal(), b.signal());
            let (flows, network) = b.flows();
            let fabric = flows.add_resource(format!("{}{node} fabric", self.name), self.fabric_gbs);
            let owner = flows.add_owner(told);
            let ports = b.copy_ports();
            let queue = WorkQueue::new(self.wq, self.wq_size, self.max_batch, doorbell, space);
            ports.devices.push(DevicePort { name: format!("{}{node}", self.name), node, spec: self.clone(), queue });
            let device = ports.devices.len() - 1;
            let nodes = platform.memory_nodes();
            let socket = nodes[node as usize].socket;
            // The read buffers hold each flow's rate times its source's latency (Little's law).
            let in_flight = self.read_buffers as f64 * platform.line_bytes() as f64;
            let (flows, _) = b.flows();
            let read_buffers = flows.add_resource(format!("{}{node} read buffers", self.name), in_flight);
            let read_latency: Vec<f64> = nodes.iter().map(|n| platform.read_latency_ns(n, socket)).collect();
            let llc_read_latency: Vec<f64> = nodes.iter().map(|n| platform.llc_read_latency_ns(n, socket)).collect();
            let llc_bytes = platform.l3.size_kib * 1024 * self.llc_ways as u64 / platform.l3.ways as u64;
            let dsa = Dsa {
                name: format!("{}{node}", self.name),
                spec: self.clone(),
                device,
                socket,
                owner,
                told,
                fabric,
                network,
                read_buffers,
                read_latency,
                llc_read_latency,
                llc_bytes,
                line_bytes: platform.line_bytes() as u64,
                array_latency_ns: platform.llc_read_latency_ns(&nodes[node as usize], socket),
                engines: vec![EngineState::default(); self.engines as usize],
                front: Front::Idle,
                submissions: std::collections::BTreeMap::new(),
                next_submission: 0,
                undecoded: None,
                stats: DsaStats::default(),
                window_start: Time::ZERO,
                last_completion: Time::ZERO,
            };
            b.add_agent(Box::new(dsa), Some(Time::ZERO));
        }
    }
}

#[derive(Debug, Clone, Default)]
enum Phase {
    #[default]
    Idle,
    /// Serving the current task's page faults until this time.
    Setup(Time),
    /// The current task's bytes are moving.
    Transfer,
}

#[derive(Debug, Clone, Default)]
struct EngineState {
    phase: Phase,
    task: Option<Task>,
    busy_since: Time,
    /// What the ramp of the current task's reads adds to its completion (`read_ramp_ns`).
    ramp: Time,
}

/// One task of a submission the device took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Task {
    submission: u64,
    task: u32,
}

/// A submission the device took from its work queue, until its completion record.
#[derive(Debug, Clone)]
struct Submission {
    descriptor: Descriptor,
    /// Its tasks not yet finished by an engine.
    unfinished: u32,
    copied: u64,
    left: u64,
}

/// The device's front end, shared by its engines (Intel DSA Architecture Specification, section
/// 3.1): the batch processing unit reads a batch's array of work descriptors from memory, and
/// every work descriptor, a batch's or one from the work queue, passes the arbiter to whichever
/// engine is idle. It works on one descriptor at a time while the engines move data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Front {
    #[default]
    Idle,
    /// Reading the array of a batch until this time.
    Fetching(Time),
    /// Processing a work descriptor until this time.
    Decoding(Time, Task),
    /// Holding a processed work descriptor until an engine is idle.
    Ready(Task),
}

/// Bytes of one descriptor in a batch's array.
const DESCRIPTOR_BYTES: u64 = 64;

stats! {
    /// A DSA's counters.
    pub struct DsaStats {
        /// Bytes the engines copied [bytes]
        bytes: u64 ["bytes"],
        /// Work descriptors (tasks) completed, each task of a batch counted [descriptors]
        descriptors: u64 ["descriptors"],
        /// Submissions completed (a batch counts once) [descriptors]
        submissions: u64 ["descriptors"],
        /// Destination page faults the engines waited for [faults]
        page_faults: u64 ["faults"],
        /// Bytes left to software at page faults (partial completions) [bytes]
        partial_bytes: u64 ["bytes"],
        /// Bytes written with the cache-control flag (destination into the LLC) [bytes]
        cache_control_bytes: u64 ["bytes"],
        /// Engine time spent on descriptors, summed over engines [ns]
        engine_busy_ns: f64 ["ns"],
    }
}

stat!(
    BUSY_FRACTION,
    "busy_fraction",
    "fraction",
    "mean fraction of time its engines were busy, from the window's start to its last completion"
);
stat!(LLC_RESIDENT, "llc_resident_bytes", "bytes", "cache-control bytes still in the LLC ways at the end");
stat!(NODE, "node", "node", "the NUMA node it serves");

/// One DSA device: its engines working through its work queue.
pub struct Dsa {
    name: String,
    spec: DsaSpec,
    device: usize,
    socket: u32,
    owner: OwnerId,
    told: Signal,
    fabric: ResourceId,
    network: Network,
    /// Its read buffers: bytes in flight.
    read_buffers: ResourceId,
    /// Per memory node: the latency of a read of it from this device's socket (ns).
    read_latency: Vec<f64>,
    /// Per memory node: the same for a line of it the LLC holds (ns).
    llc_read_latency: Vec<f64>,
    /// Capacity of the LLC ways cache-control writes may use.
    llc_bytes: u64,
    line_bytes: u64,
    /// Latency of the front end's read of a batch's array, which the submitting core wrote:
    /// the LLC of the device's node (ns).
    array_latency_ns: f64,
    engines: Vec<EngineState>,
    front: Front,
    /// Submissions taken from the work queue and not yet complete, by the order taken.
    submissions: std::collections::BTreeMap<u64, Submission>,
    next_submission: u64,
    /// The next task of the batch in progress that the front end has not processed.
    undecoded: Option<Task>,
    stats: DsaStats,
    window_start: Time,
    /// When it last completed a submission.
    last_completion: Time,
}

impl Dsa {
    /// Starts `task` on engine `e` at `now`: its page faults first (`DsaSpec::setup_ns`).
    fn begin_task(&mut self, e: usize, task: Task, now: Time) {
        let descriptor = &self.submissions[&task.submission].descriptor;
        let (ns, faults) = self.spec.setup_ns(descriptor.faults, descriptor.new_pages(task.task));
        self.stats.page_faults += faults;
        let engine = &mut self.engines[e];
        engine.phase = Phase::Setup(now + Time::from_ns(ns));
        engine.task = Some(task);
        engine.busy_since = now;
    }

    /// Engine `e`'s task is done at `now`; the last of its submission writes the completion
    /// record.
    fn end_task(&mut self, cx: &mut Cx, e: usize, now: Time) {
        let engine = &mut self.engines[e];
        let task = engine.task.take().expect("a task in progress");
        engine.phase = Phase::Idle;
        self.stats.engine_busy_ns += (now - engine.busy_since.max(self.window_start)).as_ns();
        self.stats.descriptors += 1;
        let submission = self.submissions.get_mut(&task.submission).expect("a submission in progress");
        submission.unfinished -= 1;
        if submission.unfinished > 0 {
            return;
        }
        let submission = self.submissions.remove(&task.submission).expect("found");
        self.stats.submissions += 1;
        self.last_completion = now;
        // The ramp of the last task's reads holds no engine: the engine has issued them.
        let visible_at = now + Time::from_ns(self.spec.latency_ns) + self.engines[e].ramp;
        let d = &submission.descriptor;
        let submitter = &mut cx.shared.get_mut::<CopyPorts>().completions[d.submitter];
        submitter.records.push_back(CompletionRecord {
            tag: d.tag,
            copied: submission.copied,
            left: submission.left,
            visible_at,
        });
        let signal = submitter.signal;
        cx.notify(signal, visible_at);
    }

    /// Engine `e` has served its task's faults: move its bytes, or (partial completion at an
    /// untouched page) leave them to software.
    fn start_transfer(&mut self, cx: &mut Cx, e: usize, now: Time) {
        let task = self.engines[e].task.expect("a task in progress");
        let submission = self.submissions.get_mut(&task.submission).expect("a submission in progress");
        let d = &submission.descriptor;
        let bytes = d.bytes_of(task.task);
        if d.faults == Faults::Partial && d.new_pages(task.task) > 0 {
            submission.left += bytes;
            self.stats.partial_bytes += bytes;
            self.engines[e].ramp = Time::ZERO;
            self.end_task(cx, e, now);
            return;
        }
        submission.copied += bytes;
        self.stats.bytes += bytes;
        // A device's writes: into the LLC with cache-control, else to memory, a line at a time.
        let lines = bytes.div_ceil(self.line_bytes);
        let hierarchy = &mut cx.shared.get_mut::<Hierarchy>().stats;
        if d.cache_control {
            self.stats.cache_control_bytes += bytes;
            hierarchy.dma_lines_to_cache += lines;
        } else {
            hierarchy.dma_lines_to_memory += lines;
        }
        let (src, dst) = (d.src.node, d.dst.node);
        let mut route = crate::flows::plain(self.network.copy_route(self.socket, src, dst, d.src_in_llc));
        let latencies = if d.src_in_llc { &self.llc_read_latency } else { &self.read_latency };
        route.push((self.fabric, 1.0));
        route.push((self.read_buffers, latencies[src as usize]));
        // The tasks before this one moved `task_bytes` each.
        let before = task.task as u64 * d.task_bytes;
        let transfer = Transfer {
            bytes,
            route,
            cap_gbs: f64::INFINITY,
            reads: (!d.src_in_llc).then(|| d.src.skip(before)),
            writes: Some(d.dst.skip(before)),
        };
        let engine = &mut self.engines[e];
        engine.ramp = Time::from_ns(self.spec.read_ramp_ns(bytes, self.line_bytes, latencies[src as usize]));
        engine.phase = Phase::Transfer;
        let flows = cx.shared.get_mut::<Flows>();
        flows.start(now, transfer, self.owner, e as u64);
        let changed = flows.changed.expect("flows exist");
        cx.notify(changed, now);
    }

    /// Front-end time to read a batch's array of `tasks` descriptors: one read of the lines the
    /// submitting core wrote, then the array over the fabric port.
    fn array_fetch_ns(&self, tasks: u32) -> f64 {
        self.array_latency_ns + (tasks as u64 * DESCRIPTOR_BYTES) as f64 / self.spec.fabric_gbs
    }

    /// Moves the front end on at `now` if it can: hand a processed descriptor to an idle engine,
    /// finish reading an array or processing a descriptor, or start on the next descriptor (of
    /// the batch in progress, else from the work queue). Returns whether it moved.
    fn advance_front(&mut self, cx: &mut Cx, now: Time) -> bool {
        match self.front {
            Front::Ready(task) => {
                let Some(e) = self.engines.iter().position(|e| matches!(e.phase, Phase::Idle)) else {
                    return false;
                };
                self.begin_task(e, task, now);
                self.front = Front::Idle;
            }
            Front::Decoding(at, task) if at <= now => self.front = Front::Ready(task),
            Front::Fetching(at) if at <= now => self.front = Front::Idle,
            Front::Idle => {
                if let Some(task) = self.undecoded {
                    let tasks = self.submissions[&task.submission].descriptor.tasks;
                    self.undecoded = (task.task + 1 < tasks).then_some(Task { task: task.task + 1, ..task });
                    self.front = Front::Decoding(now + Time::from_ns(self.spec.descriptor_ns), task);
                    return true;
                }
                let queue = &mut cx.shared.get_mut::<CopyPorts>().devices[self.device].queue;
                let Some(descriptor) = queue.entries.pop_front() else { return false };
                let space = queue.space;
                cx.notify(space, now);
                let (id, tasks) = (self.next_submission, descriptor.tasks);
                self.next_submission += 1;
                self.submissions.insert(id, Submission { descriptor, unfinished: tasks, copied: 0, left: 0 });
                self.undecoded = Some(Task { submission: id, task: 0 });
                if tasks > 1 {
                    self.front = Front::Fetching(now + Time::from_ns(self.array_fetch_ns(tasks)));
                }
            }
            Front::Decoding(..) | Front::Fetching(_) => return false,
        }
        true
    }
}

impl Agent for Dsa {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn step(&mut self, cx: &mut Cx, now: Time, _limit: Time) -> Step {
        for tag in cx.shared.get_mut::<Flows>().take_finished(self.owner) {
            self.end_task(cx, tag as usize, now);
        }
        loop {
            let mut progressed = false;
            for e in 0..self.engines.len() {
                if matches!(self.engines[e].phase, Phase::Setup(at) if at <= now) {
                    self.start_transfer(cx, e, now);
                    progressed = true;
                }
            }
            progressed |= self.advance_front(cx, now);
            if !progressed {
                break;
            }
        }
        let doorbell = cx.shared.get::<CopyPorts>().devices[self.device].queue.doorbell;
        cx.wait_on(doorbell);
        cx.wait_on(self.told);
        let front = match self.front {
            Front::Fetching(at) | Front::Decoding(at, _) => Some(at),
            Front::Idle | Front::Ready(_) => None,
        };
        let engines = self.engines.iter().filter_map(|e| if let Phase::Setup(at) = e.phase { Some(at) } else { None });
        match engines.chain(front).min() {
            Some(at) => Step::At(at),
            None => Step::Wait,
        }
    }

    fn idles_by_design(&self) -> bool {
        true
    }

    fn reset_stats(&mut self, now: Time) {
        self.stats.reset();
        self.window_start = now;
        self.last_completion = now;
        self.engines.iter_mut().for_each(|e| e.busy_since = e.busy_since.max(now));
    }

    fn report(&self, out: &mut Report, view: &ReportView) {
        let port = &view.shared.get::<CopyPorts>().devices[self.device];
        let busy_now: f64 = self
            .engines
            .iter()
            .filter(|e| !matches!(e.phase, Phase::Idle))
            .map(|e| (view.now - e.busy_since.max(self.window_start)).as_ns())
            .sum();
        let active = if busy_now > 0.0 { view.now } else { self.last_completion.max(self.window_start) };
        let span = (active - self.window_start).as_ns() * self.engines.len() as f64;
        let busy = if span > 0.0 { (self.stats.engine_busy_ns + busy_now) / span } else { 0.0 };
        out.section("devices", |devices| {
            devices.section(&port.name, |d| {
                d.put(&NODE, port.node);
                self.stats.report(d);
                d.put(&BUSY_FRACTION, busy.min(1.0));
                d.put(&LLC_RESIDENT, self.stats.cache_control_bytes.min(self.llc_bytes));
                d.section("wq", |w| port.queue.stats.report(w));
            });
        });
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptor(tag: u64) -> Descriptor {
        Descriptor {
            submitter: 0,
            tag,
            tasks: 1,
            task_bytes: 64,
            last_bytes: 64,
            src: Region::new(0, 0, 64),
            src_in_llc: false,
            dst: Region::new(0, 4096, 64),
            faults: Faults::None,
            cache_control: false,
        }
    }

    #[test]
    fn each_nodes_device_is_named_by_the_spec_and_its_node() {
        let platform = PlatformSpec {
            memory: crate::platform::MemorySpec { nodes_per_socket: 2, ..crate::platform::MemorySpec::default() },
            ..crate::testing::tiny_platform()
        };
        let mut b = Builder::new(&platform, 1);
        DsaSpec { name: "iax".into(), ..DsaSpec::default() }.build(&mut b);
        let (agents, _, _) = b.into_parts();
        let names: Vec<String> = agents.iter().map(|(agent, _)| agent.name()).collect();
        assert_eq!(names, ["flows", "iax0", "iax1"], "after the flow model the devices bring");
    }

    #[test]
    fn a_copy_engine_adds_nothing_to_the_host_memory_estimate() {
        // Its state is a few queues and records per node, whatever the bytes it copies: only
        // cached lines and NIC buffer pools grow with a scenario.
        assert_eq!(DsaSpec::default().host_bytes(), 0);
    }

    #[test]
    fn a_full_queue_answers_retry_when_shared_and_drops_when_dedicated() {
        for (mode, refused) in [(WqMode::Shared, Submit::Retry), (WqMode::Dedicated, Submit::Dropped)] {
            let mut queue = WorkQueue::new(mode, 2, 32, Signal(0), Signal(1));
            assert_eq!(queue.submit(descriptor(1)), Submit::Accepted);
            assert!(!queue.is_full());
            assert_eq!(queue.submit(descriptor(2)), Submit::Accepted);
            assert!(queue.is_full());
            assert_eq!(queue.submit(descriptor(3)), refused);
            let stats = &queue.stats;
            assert_eq!(
                (stats.accepted, stats.retries, stats.drops),
                (2, u64::from(mode == WqMode::Shared), u64::from(mode == WqMode::Dedicated))
            );
            assert_eq!(queue.entries.iter().map(|d| d.tag).collect::<Vec<_>>(), [1, 2]);
        }
    }

    #[test]
    fn a_submission_costs_an_enqcmd_or_a_movdir64b() {
        let spec = DsaSpec::default();
        assert_eq!(WorkQueue::new(WqMode::Shared, 1, 1, Signal(0), Signal(1)).submit_cost(&spec), Time::from_ns(150.0));
        assert_eq!(
            WorkQueue::new(WqMode::Dedicated, 1, 1, Signal(0), Signal(1)).submit_cost(&spec),
            Time::from_ns(20.0)
        );
    }

    #[test]
    fn only_visible_records_are_taken_in_the_order_they_became_visible() {
        let record = |tag, at| CompletionRecord { tag, copied: 64, left: 0, visible_at: Time::from_ns(at) };
        let mut completions = Completions { records: [record(1, 30.0), record(2, 10.0)].into(), signal: Signal(0) };
        assert_eq!(completions.take_visible(Time::from_ns(5.0)), None);
        assert_eq!(completions.take_visible(Time::from_ns(10.0)).map(|r| r.tag), Some(2));
        assert_eq!(completions.take_visible(Time::from_ns(29.0)), None);
        assert_eq!(completions.take_visible(Time::from_ns(30.0)).map(|r| r.tag), Some(1));
    }

    #[test]
    fn impossible_device_values_are_refused_naming_the_key() {
        let platform = crate::platform::preset("xeon-max-9468").unwrap();
        let reject = |spec: DsaSpec| spec.validate("devices.0", &platform).unwrap_err().path;
        let base = DsaSpec::default;
        assert!(base().validate("devices.0", &platform).is_ok());
        assert_eq!(reject(DsaSpec { engines: 0, ..base() }), "devices.0.engines");
        assert_eq!(reject(DsaSpec { wq_size: 129, ..base() }), "devices.0.wq_size");
        assert_eq!(reject(DsaSpec { max_batch: 1025, ..base() }), "devices.0.max_batch");
        assert_eq!(reject(DsaSpec { read_buffers: 0, ..base() }), "devices.0.read_buffers");
        assert_eq!(reject(DsaSpec { first_reads: 0, ..base() }), "devices.0.first_reads");
        assert_eq!(reject(DsaSpec { first_reads: 4097, ..base() }), "devices.0.first_reads");
        assert_eq!(reject(DsaSpec { fabric_gbs: 0.0, ..base() }), "devices.0.fabric_gbs");
        assert_eq!(reject(DsaSpec { latency_ns: -1.0, ..base() }), "devices.0.latency_ns");
        assert_eq!(reject(DsaSpec { fault_wakeup_ns: -1.0, ..base() }), "devices.0.fault_wakeup_ns");
        assert_eq!(reject(DsaSpec { llc_ways: 16, ..base() }), "devices.0.llc_ways");
        assert!(DsaSpec { llc_ways: 15, descriptor_ns: 0.0, ..base() }.validate("devices.0", &platform).is_ok());
    }

    #[test]
    fn a_device_page_fault_costs_each_step_of_its_service_once_and_the_translation_twice() {
        // 2 x 1000 (translation, then its retry) + 1000 (page request) + 2 x 5000 (the PRQ
        // thread, the fault worker) + 500 (the page's allocation) + 1000 (page response).
        assert_eq!(DsaSpec::default().page_fault_ns(), 14_500.0);
        let slower_wakeups = DsaSpec { fault_wakeup_ns: 6000.0, ..DsaSpec::default() };
        assert_eq!(slower_wakeups.page_fault_ns(), 16_500.0);
    }

    #[test]
    fn block_on_fault_serves_every_touched_page_before_the_data_moves() {
        let spec = DsaSpec::default();
        assert_eq!(spec.setup_ns(Faults::None, 2), (0.0, 0));
        assert_eq!(spec.setup_ns(Faults::BlockOnFault, 0), (0.0, 0));
        assert_eq!(spec.setup_ns(Faults::BlockOnFault, 2), (2.0 * 14_500.0, 2));
    }

    #[test]
    fn a_partial_completion_costs_one_translation_that_finds_no_page() {
        assert_eq!(DsaSpec::default().setup_ns(Faults::Partial, 256), (1000.0, 0));
        assert_eq!(DsaSpec::default().setup_ns(Faults::Partial, 0), (0.0, 0));
    }

    /// A port of 32 GB/s and reads of 128 ns: the reads stream once 64 lines are in flight.
    fn ramp_spec() -> DsaSpec {
        DsaSpec { fabric_gbs: 32.0, first_reads: 4, read_buffers: 96, ..DsaSpec::default() }
    }

    #[test]
    fn a_task_within_its_first_reads_loses_nothing_to_the_ramp() {
        // 64 B and 256 B: one round trip, as a full pipeline takes (128 ns + 2 or 8 ns).
        assert_eq!(ramp_spec().read_ramp_ns(64, 64, 128.0), 0.0);
        assert_eq!(ramp_spec().read_ramp_ns(256, 64, 128.0), 0.0);
    }

    #[test]
    fn a_task_inside_the_ramp_takes_a_round_trip_per_doubling_of_its_reads() {
        // 1 KiB, 16 lines: 4, then 8, then the last 4 in a third round trip: 3 x 128 = 384 ns
        // against 128 + 1024 / 32 = 160 ns.
        assert_eq!(ramp_spec().read_ramp_ns(1024, 64, 128.0), 224.0);
        // 257 B, 5 lines: 4, then 1: two round trips against 128 + 257 / 32.
        assert_eq!(ramp_spec().read_ramp_ns(257, 64, 128.0), 256.0 - (128.0 + 257.0 / 32.0));
    }

    #[test]
    fn past_the_ramp_a_task_streams_and_loses_the_same_whatever_its_size() {
        // 4 + 8 + 16 + 32 = 60 lines in four round trips; 64 in flight then cover 32 GB/s x 128
        // ns: the other 4 lines stream (128 + 256 / 32 ns). 648 against 128 + 4096 / 32 = 256.
        assert_eq!(ramp_spec().read_ramp_ns(4096, 64, 128.0), 392.0);
        assert_eq!(ramp_spec().read_ramp_ns(65536, 64, 128.0), 392.0);
        // Starting with the lines that stream, there is no ramp.
        assert_eq!(DsaSpec { first_reads: 64, ..ramp_spec() }.read_ramp_ns(4096, 64, 128.0), 0.0);
        assert_eq!(DsaSpec { first_reads: 63, ..ramp_spec() }.read_ramp_ns(4096, 64, 128.0), 128.0 - 63.0 * 2.0);
    }

    #[test]
    fn the_ramp_ends_where_the_read_buffers_are_all_in_use() {
        // 16 buffers: 4 + 8 lines in two round trips, then the other 52 stream: 256 + 128 + 3328
        // / 32 against 256.
        let spec = DsaSpec { read_buffers: 16, ..ramp_spec() };
        assert_eq!(spec.read_ramp_ns(4096, 64, 128.0), 256.0 + 128.0 + 104.0 - 256.0);
    }

    #[test]
    fn a_page_faults_for_the_write_that_touches_it_first() {
        // Sixteen 256 B writes fill one page: the first faults it.
        assert_eq!(pages_first_touched(0, 256), 1);
        assert_eq!(pages_first_touched(256, 256), 0);
        assert_eq!(pages_first_touched(3840, 256), 0);
        assert_eq!(pages_first_touched(3840, 257), 1);
        assert_eq!(pages_first_touched(0, 4097), 2);
        assert_eq!(pages_first_touched(4096, 4096), 1);
    }

    #[test]
    fn a_batch_task_counts_the_pages_it_writes_first() {
        // Tasks of 2048 B from the buffer's start: the first, third and fifth begin a page.
        let d = Descriptor { tasks: 5, task_bytes: 2048, last_bytes: 2048, ..descriptor(1) };
        let d = Descriptor { dst: Region::new(0, 0, 1 << 20), ..d };
        assert_eq!((0..5).map(|t| d.new_pages(t)).collect::<Vec<_>>(), [1, 0, 1, 0, 1]);
    }

    #[test]
    fn the_last_task_of_a_batch_carries_the_remainder() {
        let d = Descriptor { tasks: 3, task_bytes: 100, last_bytes: 40, ..descriptor(1) };
        assert_eq!((d.bytes_of(0), d.bytes_of(1), d.bytes_of(2)), (100, 100, 40));
    }
}
