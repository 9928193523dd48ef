//! An NVMe-style SSD (device kind `nvme`) reading blocks into host buffers. Each I/O queue pair
//! is a submission queue the host writes 64 B commands into and a completion queue the device
//! writes 16 B entries into, both in host memory, with one data buffer per outstanding command.
//! A command's life: the host writes its entry and rings the doorbell; the device fetches the
//! entry (a DMA read of that line); the flash read takes `read_latency_us`, the controller
//! starting at most `max_read_iops` reads a second; then the block is DMA-written into the
//! command's buffer and the completion entry after it, wherever the placement policy says, across
//! the PCIe link (`pcie`) when it is modelled. The host sees the completion at once when it polls
//! the queue (SPDK) or after `interrupt_latency_ns` when the queue raises an interrupt. With PCIe
//! TPH (`tph`), each queue's writes carry the steering tag of its consumer CPU, set up as the NIC
//! does (`devices/tph.rs`).
//!
//! Sources: the NVM Express Base Specification 2.0 (queues in host memory, a queue of N entries
//! holding N - 1 commands since a full queue keeps one empty, at most 65,536 entries: CAP.MQES is a
//! 16-bit 0's based value); Linux's include/linux/nvme.h (`NVME_NVM_IOSQES` 6 and
//! `NVME_NVM_IOCQES` 4: 64 B commands and 16 B completion entries on I/O queues); the NVM Command
//! Set Specification (an LBA format's data size is 2^LBADS bytes, LBADS at least 9: 512 B).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::devices::dma::DmaKind;
use crate::devices::pcie::{PcieLink, PcieSpec};
use crate::devices::placement::{self, DmaWrite, PlacementPolicy, PlacementSpec};
use crate::devices::queues::{queue_id, CompletionQueue, Queue, QueueHost, Queues};
use crate::devices::tph::{NicTph, NicTphSpec, StMap};
use crate::devices::DeviceSpec;
use crate::engine::{Agent, Cx, ReportView, Signal, Step};
use crate::error::{ensure, ConfigResult, Shown};
use crate::hierarchy::Hierarchy;
use crate::params::{choice, params};
use crate::platform::PlatformSpec;
use crate::stats::{stat, stats, Distribution, Report};
use crate::system::Builder;
use crate::units::{Addr, Line, Time};

/// What an NVMe device's queues are (`DeviceSpec::queue_port`): a workload reading RX queues
/// cannot consume them, nor one reading these a NIC's.
pub const QUEUE_PAIR: &str = "NVMe queue pair";
/// Bytes of a submission queue entry (a command) on an I/O queue (IOSQES = 6).
pub const COMMAND_BYTES: u64 = 64;
/// Bytes of a completion queue entry on an I/O queue (IOCQES = 4).
pub const COMPLETION_BYTES: u32 = 16;
/// The smallest LBA data size (LBADS = 9): a read transfers whole sectors of it.
pub const SECTOR_BYTES: u32 = 512;
/// Entries a queue may have at most (CAP.MQES + 1); a full queue keeps one empty.
pub const MAX_QUEUE_ENTRIES: u32 = 65_536;
/// Past this a block is a slip, not a read (the NIC's bound on a buffer).
const MAX_BLOCK_BYTES: u32 = 1 << 30;
/// Bounds past which a latency is a slip: a second for a flash read, a millisecond for an
/// interrupt.
const MAX_READ_LATENCY_US: f64 = 1e6;
const MAX_INTERRUPT_LATENCY_NS: f64 = 1e6;

choice! {
    /// How the host learns that a queue's reads completed.
    pub enum Completions {
        /// The host polls the completion queue (SPDK's user-space driver): it sees an entry as
        /// soon as it is written.
        Polled,
        /// The queue raises an MSI-X interrupt (Linux's nvme driver): the host sees the entry
        /// `interrupt_latency_ns` after it is written.
        Interrupt,
    }
}

params! {
    /// One I/O queue pair (a submission and a completion queue).
    pub struct NvmeQueueSpec {
        /// Read commands the host keeps outstanding (SPDK perf's `-q`), each with its own buffer;
        /// the queues have one entry more, since a full queue keeps one empty.
        depth: u32 = 32,
        /// How the host learns of completions: `polled` (SPDK) or `interrupt`.
        completions: Completions = Completions::Polled,
        /// The CPU that submits to and consumes the queue pair (target of steering).
        consumer_cpu: u32 = 0,
        /// Queue pairs this entry stands for: pair i is consumed by `consumer_cpu + i`.
        count: u32 = 1,
    }
}

params! {
    /// An NVMe SSD read through I/O queue pairs.
    pub struct NvmeSpec {
        /// Device name, used in results and by workloads.
        name: String = "nvme0".to_string(),
        /// NUMA node holding the device's queues and buffers.
        numa_node: u32 = 0,
        /// Bytes each read command transfers into its buffer: whole 512 B sectors (4 KiB: the
        /// block size datasheets give random-read figures at).
        block_bytes: u32 = 4096,
        /// From a command's fetch to its data leaving the device: the flash read (µs). Intel SSD
        /// DC P4500 2 TB: 85 µs random read access latency (Lenovo's product guide, table 2).
        read_latency_us: f64 = 85.0,
        /// Reads the controller starts per second at most (4 KiB random reads; the P4500 2 TB:
        /// 490,000 IOPS, same table). With larger blocks the link (`pcie`) may bind first.
        max_read_iops: f64 = 490_000.0,
        /// From a completion entry's write until the host's handler sees it, on an interrupt-driven
        /// queue (ns): MSI-X delivery and the handler's entry. Assumed.
        interrupt_latency_ns: f64 = 2000.0,
        /// Where DMA writes land.
        placement: PlacementSpec = PlacementSpec::default(),
        /// I/O queue pairs.
        queues: Vec<NvmeQueueSpec> = vec![NvmeQueueSpec::default()],
        /// The PCIe link to the root complex (not modelled by default; a P4500 has Gen3 x4). An SSD
        /// holds what it read until the link takes it: `rx_buffer_kib` drops nothing here.
        pcie: PcieSpec = PcieSpec::default(),
        /// PCIe TPH, as for a NIC: one steering tag per queue pair, for its consumer CPU. IRQ
        /// affinity changes are not modelled for this device.
        tph: NicTphSpec = NicTphSpec::default(),
    }
}

/// The kind's registration.
#[linkme::distributed_slice(crate::devices::DEVICES)]
pub static KIND: crate::devices::DeviceKind = crate::devices::DeviceKind::of::<NvmeSpec>(
    "nvme",
    "an NVMe SSD: block reads through submission and completion queues, DMA placement and PCIe TPH",
);

/// How checks name the device and its queues.
const HOST: QueueHost = QueueHost { device: "an NVMe device", queue: "queue pair" };

impl NvmeSpec {
    /// The queue pairs, one per entry of `count` (expanded).
    pub fn expanded_queues(&self) -> Vec<NvmeQueueSpec> {
        self.queues
            .iter()
            .flat_map(|q| {
                (0..q.count).map(move |i| NvmeQueueSpec { consumer_cpu: q.consumer_cpu + i, count: 1, ..q.clone() })
            })
            .collect()
    }
}

impl DeviceSpec for NvmeSpec {
    fn name(&self) -> &str {
        &self.name
    }

    fn queue_cpus(&self) -> Vec<u32> {
        self.expanded_queues().iter().map(|q| q.consumer_cpu).collect()
    }

    fn queue_port(&self) -> &'static str {
        QUEUE_PAIR
    }

    /// Per outstanding command: its place in flight and in its queues.
    fn host_bytes(&self) -> u64 {
        self.queues.iter().map(|q| q.count as u64 * 64 * q.depth as u64).sum()
    }

    fn validate(&self, path: &str, platform: &PlatformSpec) -> ConfigResult<()> {
        let cpus = platform.topology.cpus();
        let key = |k: &str| format!("{path}.{k}");
        ensure(
            self.block_bytes >= SECTOR_BYTES
                && self.block_bytes.is_multiple_of(SECTOR_BYTES)
                && self.block_bytes <= MAX_BLOCK_BYTES,
            &key("block_bytes"),
            || {
                format!(
                    "must be a whole number of {SECTOR_BYTES} B sectors, at most {MAX_BLOCK_BYTES} B (got {})",
                    self.block_bytes
                )
            },
        )?;
        ensure(
            self.read_latency_us > 0.0 && self.read_latency_us <= MAX_READ_LATENCY_US,
            &key("read_latency_us"),
            || {
                format!(
                    "must be above 0 and at most {} µs (got {})",
                    Shown(MAX_READ_LATENCY_US),
                    Shown(self.read_latency_us)
                )
            },
        )?;
        ensure(self.max_read_iops > 0.0 && self.max_read_iops.is_finite(), &key("max_read_iops"), || {
            format!("must be positive (got {})", Shown(self.max_read_iops))
        })?;
        ensure(
            (0.0..=MAX_INTERRUPT_LATENCY_NS).contains(&self.interrupt_latency_ns),
            &key("interrupt_latency_ns"),
            || {
                format!(
                    "must be between 0 and {} ns (got {})",
                    Shown(MAX_INTERRUPT_LATENCY_NS),
                    Shown(self.interrupt_latency_ns)
                )
            },
        )?;
        HOST.check_device(path, platform, self.numa_node, self.queues.len(), &self.placement, &self.pcie)?;
        for (i, q) in self.queues.iter().enumerate() {
            let qkey = |k: &str| format!("{path}.queues.{i}.{k}");
            ensure((1..MAX_QUEUE_ENTRIES).contains(&q.depth), &qkey("depth"), || {
                format!(
                    "must be 1 to {} (a queue of at most {MAX_QUEUE_ENTRIES} entries keeps one empty; got {})",
                    MAX_QUEUE_ENTRIES - 1,
                    q.depth
                )
            })?;
            HOST.check_entry(&format!("{path}.queues.{i}"), q.consumer_cpu, q.count, cpus)?;
        }
        ensure(self.tph.affinity_changes.is_empty(), &key("tph.affinity_changes"), || {
            "IRQ affinity changes are modelled for the NIC only".into()
        })?;
        self.tph.validate(&key("tph"), self.queues.iter().map(|q| q.count as usize).sum(), cpus)
    }

    fn build(&self, b: &mut Builder) {
        let doorbell = b.signal();
        let queues = self.expanded_queues();
        let mut pairs = Vec::new();
        for (i, q) in queues.iter().enumerate() {
            let node = self.numa_node;
            let entries = q.depth as u64 + 1;
            let memory = PairMemory {
                buffers: b.alloc(node, q.depth as u64 * self.block_bytes as u64),
                submission_queue: b.alloc(node, entries * COMMAND_BYTES),
                completion_queue: b.alloc(node, entries * COMPLETION_BYTES as u64),
            };
            let signals = PairSignals { ready: b.signal(), doorbell };
            let pair = QueuePair::new(format!("{} queue {i}", self.name), q, self.block_bytes, memory, signals);
            pairs.push((b.add_queue(&self.name, pair), q.completions));
        }
        let platform = b.platform;
        let st_map = StMap::new(&platform.tph, &platform.topology);
        let consumer_cpus: Vec<u32> = queues.iter().map(|q| q.consumer_cpu).collect();
        let socket = self.numa_node / platform.memory.nodes_per_socket;
        let nvme = Nvme {
            llc_ccx: socket * platform.topology.ccx_per_socket,
            device: b.hierarchy().register_device(&self.name),
            placement: placement::build(&self.placement, &st_map),
            tph: NicTph::new(&self.tph, &platform.tph, st_map, &consumer_cpus),
            // What it reads waits on the device for the link: never dropped.
            pcie: PcieLink::new(&PcieSpec { rx_buffer_kib: f64::INFINITY, ..self.pcie.clone() }),
            line_bits: platform.line_bits(),
            read_latency: Time::from_us(self.read_latency_us),
            read_interval: Time::from_ns(1e9 / self.max_read_iops),
            interrupt_latency: Time::from_ns(self.interrupt_latency_ns),
            pairs,
            next_start: Time::ZERO,
            reading: BinaryHeap::new(),
            doorbell,
            spec: self.clone(),
        };
        b.add_agent(Box::new(nvme), Some(Time::ZERO));
    }
}

queue_id!(
    /// A queue pair's index among the shared ones.
    pub struct PairId for QueuePair
);

/// The host side of every NVMe queue pair, shared by the devices and the programs that submit to
/// them.
pub type QueuePairs = Queues<QueuePair>;

impl Queue for QueuePair {
    type Id = PairId;
    fn reset_stats(&mut self) {
        self.stats = PairStats { in_flight_bytes_start: self.in_flight_bytes, ..PairStats::default() };
        self.latency.clear();
    }
}

/// The host consumes a pair's completions in order: the entries are read one after the other.
impl CompletionQueue for QueuePair {
    type Completion = BlockRead;
    /// When the host sees the first completion written: when it is written (polled), or its
    /// interrupt is handled.
    fn first_visible(&self) -> Option<Time> {
        self.done.front().map(|read| read.seen)
    }
    fn take_first(&mut self) -> BlockRead {
        self.consume()
    }
    fn ready(&self) -> Signal {
        self.ready
    }
}

stats! {
    /// Byte accounting of one queue pair: read = consumed + (in flight at the end - at the start).
    pub struct PairStats {
        /// Reads whose block and completion entry the device wrote.
        completed_reads: u64 ["reads"],
        /// Bytes of the blocks the device wrote.
        read_bytes: u64 ["bytes"],
        /// Reads whose block the host consumed.
        consumed_reads: u64 ["reads"],
        /// Bytes of the consumed blocks.
        consumed_bytes: u64 ["bytes"],
        /// Bytes written but not yet consumed when the statistics were last reset.
        in_flight_bytes_start: u64 ["bytes"],
    }
}

/// A read the host submitted: the buffer its block goes into and when the doorbell rang.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Command {
    pub buffer: u32,
    pub submitted: Time,
    /// Its submission queue entry.
    pub entry: Addr,
}

/// A read whose block and completion entry are written, waiting for the host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockRead {
    pub buffer: u32,
    pub submitted: Time,
    /// Its completion queue entry.
    pub entry: Addr,
    /// When the host sees it: when the entry is written (polled), or its interrupt is handled.
    pub seen: Time,
}

/// Where a queue pair's memory is.
#[derive(Debug, Clone, Copy)]
pub struct PairMemory {
    /// The first of the `depth` buffers, one after another.
    pub buffers: Addr,
    pub submission_queue: Addr,
    pub completion_queue: Addr,
}

/// The signals a queue pair's host and device wake each other with.
#[derive(Debug, Clone, Copy)]
pub struct PairSignals {
    /// Notified when the host sees a completion.
    pub ready: Signal,
    /// Notified when the host rings a submission queue's doorbell.
    pub doorbell: Signal,
}

/// An I/O queue pair's host side.
#[derive(Debug)]
pub struct QueuePair {
    /// What results and stall reports call it (`nvme0 queue 1`).
    pub name: String,
    /// Commands the host keeps outstanding; the queues have `depth + 1` entries.
    pub depth: u32,
    pub block_bytes: u32,
    pub consumer_cpu: u32,
    memory: PairMemory,
    /// Commands submitted since the start (the submission queue's tail, unwrapped).
    submitted: u64,
    /// Completion entries written since the start (the completion queue's tail, unwrapped).
    completed: u64,
    /// Submitted commands the device has not fetched, in order.
    waiting: VecDeque<Command>,
    /// Written completions the host has not consumed, in the order written.
    done: VecDeque<BlockRead>,
    pub in_flight_bytes: u64,
    pub stats: PairStats,
    /// A read's submission to the host seeing its completion (ns).
    pub latency: Distribution,
    pub ready: Signal,
    pub doorbell: Signal,
}

impl QueuePair {
    pub fn new(
        name: String,
        spec: &NvmeQueueSpec,
        block_bytes: u32,
        memory: PairMemory,
        signals: PairSignals,
    ) -> QueuePair {
        QueuePair {
            name,
            depth: spec.depth,
            block_bytes,
            consumer_cpu: spec.consumer_cpu,
            memory,
            submitted: 0,
            completed: 0,
            waiting: VecDeque::new(),
            done: VecDeque::new(),
            in_flight_bytes: 0,
            stats: PairStats::default(),
            latency: Distribution::default(),
            ready: signals.ready,
            doorbell: signals.doorbell,
        }
    }

    fn entries(&self) -> u64 {
        self.depth as u64 + 1
    }

    // The host's side.

    pub fn buffer_addr(&self, buffer: u32) -> Addr {
        self.memory.buffers.offset(buffer as u64 * self.block_bytes as u64)
    }

    /// The submission queue entry the `ahead`-th next command goes into (0: the next).
    pub fn submission_entry(&self, ahead: u64) -> Addr {
        let slot = (self.submitted + ahead) % self.entries();
        self.memory.submission_queue.offset(slot * COMMAND_BYTES)
    }

    /// The host has written a read into `buffer` at the queue's tail and rings the doorbell at
    /// `now`. It keeps at most `depth` outstanding.
    pub fn submit(&mut self, buffer: u32, now: Time) {
        debug_assert!(self.waiting.len() + self.done.len() < self.depth as usize, "more than depth outstanding");
        let entry = self.submission_entry(0);
        self.waiting.push_back(Command { buffer, submitted: now, entry });
        self.submitted += 1;
    }

    /// The host has consumed the first completion (the first visible): its buffer is free for
    /// the next read.
    pub fn consume(&mut self) -> BlockRead {
        let read = self.done.pop_front().expect("a completion the host has seen");
        self.stats.consumed_reads += 1;
        self.stats.consumed_bytes += self.block_bytes as u64;
        self.in_flight_bytes -= self.block_bytes as u64;
        self.latency.add((read.seen - read.submitted).as_ns());
        read
    }

    // The device's side.

    /// The next command the host submitted by `now`, which the device fetches.
    pub fn fetch(&mut self, now: Time) -> Option<Command> {
        self.waiting.front().filter(|c| c.submitted <= now)?;
        self.waiting.pop_front()
    }

    /// When the host next submits a command the device has not fetched, if it has.
    fn next_submission(&self) -> Option<Time> {
        self.waiting.front().map(|c| c.submitted)
    }

    /// The completion entry the device writes next.
    pub fn completion_entry(&self) -> Addr {
        self.memory.completion_queue.offset(self.completed % self.entries() * COMPLETION_BYTES as u64)
    }

    /// The device has written the block of a read into `buffer` submitted at `submitted`, and its
    /// completion `entry`, which the host sees at `seen`.
    pub fn complete(&mut self, buffer: u32, submitted: Time, entry: Addr, seen: Time) {
        self.done.push_back(BlockRead { buffer, submitted, entry, seen });
        self.completed += 1;
        self.in_flight_bytes += self.block_bytes as u64;
        self.stats.completed_reads += 1;
        self.stats.read_bytes += self.block_bytes as u64;
    }
}

/// A read the flash is working on: when its data leaves the device, its queue pair (the index
/// among the device's) and the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Reading {
    data_at: Time,
    pair: usize,
    buffer: u32,
    submitted: Time,
}

/// An NVMe SSD: the agent that fetches commands, reads and writes blocks and completions.
pub struct Nvme {
    spec: NvmeSpec,
    /// The id the hierarchy knows this device by.
    device: u32,
    /// The CCX whose L3 is this device's LLC.
    llc_ccx: u32,
    placement: Box<dyn PlacementPolicy>,
    /// The device's TPH capability and its driver's state: one tag per queue pair.
    pub tph: NicTph,
    pcie: PcieLink,
    line_bits: u32,
    read_latency: Time,
    /// The least time between the starts of two reads (1 / `max_read_iops`).
    read_interval: Time,
    interrupt_latency: Time,
    /// Each pair and how its host learns of completions.
    pairs: Vec<(PairId, Completions)>,
    /// When the controller may start its next read.
    next_start: Time,
    reading: BinaryHeap<Reverse<Reading>>,
    doorbell: Signal,
}

stat!(PLACEMENT, "placement", "name", "the device's placement policy");
stat!(RX_GBPS, "rx_gbps", "Gb/s", "block data the device DMA-wrote into host memory");
stat!(IOPS, "iops", "reads/s", "reads completed per second");
stat!(
    WRITE_HIT_RATE,
    "dma_write_hit_rate",
    "fraction",
    "full-line DMA writes (blocks) that found their line cached: in an L3, or in a core's private caches"
);
stat!(READ_HIT_RATE, "dma_read_hit_rate", "fraction", "DMA line reads (command fetches) served by a cache");
stat!(LATENCY, "latency_ns", "ns", "a read's submission to the host seeing its completion");
stat!(IN_FLIGHT_END, "in_flight_bytes_end", "bytes", "blocks written but not yet consumed at the end");
stat!(STEERING_CPU, "steering_cpu", "cpu", "the CPU the queue pair's steering tag names (null: none)");
stat!(
    RING_PASSES,
    "ring_passes",
    "passes",
    "reads the pair completed in the window over its buffers (under 1: the window saw a part of them)"
);
stat!(COMPLETIONS, "completions", "name", "how the host learns of completions (polled or interrupt)");

impl Nvme {
    /// The earliest time the device has something to do, if any.
    fn next_event(&self, pairs: &QueuePairs) -> Option<Time> {
        let submissions = self.pairs.iter().filter_map(|(id, _)| pairs[id.0 as usize].next_submission());
        submissions.chain(self.reading.peek().map(|r| r.0.data_at)).min()
    }

    /// Fetches every command submitted by `now`: a DMA read of its entry, then the flash read,
    /// started when the controller has room for it.
    fn fetch(&mut self, cx: &mut Cx, now: Time) {
        let line_bits = self.line_bits;
        for (index, (id, _)) in self.pairs.iter().enumerate() {
            let (pairs, hierarchy) = cx.shared.pair_mut::<QueuePairs, Hierarchy>();
            while let Some(command) = pairs[id.0 as usize].fetch(now) {
                let fetched = now + hierarchy.dma_read(self.device, command.entry.line(line_bits), now);
                let start = fetched.max(self.next_start);
                self.next_start = start + self.read_interval;
                self.reading.push(Reverse(Reading {
                    data_at: start + self.read_latency,
                    pair: index,
                    buffer: command.buffer,
                    submitted: command.submitted,
                }));
            }
        }
    }

    /// Writes a read's block into its buffer and its completion entry after it, when its data
    /// leaves the device.
    fn write_back(&mut self, cx: &mut Cx, read: Reading) {
        let (id, completions) = self.pairs[read.pair];
        let (pairs, hierarchy) = cx.shared.pair_mut::<QueuePairs, Hierarchy>();
        let pair = &mut pairs[id.0 as usize];
        let consumer_cpu = pair.consumer_cpu;
        let consumer_ccx = hierarchy.ccx_of_cpu(consumer_cpu);
        let first = pair.buffer_addr(read.buffer).line(self.line_bits).0;
        let lines = (self.spec.block_bytes >> self.line_bits) as u64;
        let entry = pair.completion_entry();
        let at = read.data_at;
        let write = |kind| DmaWrite {
            kind,
            consumer_cpu,
            llc_ccx: self.llc_ccx,
            consumer_ccx,
            hint: self.tph.hint(read.pair, kind),
        };
        let payload = self.placement.destination(&write(DmaKind::Payload));
        for line in first..first + lines {
            hierarchy.dma_write(self.device, Line(line), payload, at);
        }
        let completion = self.placement.destination(&write(DmaKind::Completion));
        hierarchy.dma_write_partial(self.device, entry.line(self.line_bits), completion, at);
        let wait = self
            .pcie
            .receive(at, COMMAND_BYTES as u32, &[self.spec.block_bytes, COMPLETION_BYTES])
            .expect("the device's buffer is unbounded");
        let interrupt = if completions == Completions::Interrupt { self.interrupt_latency } else { Time::ZERO };
        let seen = at + wait + interrupt;
        pair.complete(read.buffer, read.submitted, entry, seen);
        let ready = pair.ready;
        cx.notify(ready, seen);
    }
}

impl Agent for Nvme {
    fn name(&self) -> String {
        self.spec.name.clone()
    }

    fn step(&mut self, cx: &mut Cx, now: Time, _limit: Time) -> Step {
        self.fetch(cx, now);
        while let Some(&Reverse(read)) = self.reading.peek().filter(|r| r.0.data_at <= now) {
            self.reading.pop();
            self.write_back(cx, read);
        }
        cx.wait_on(self.doorbell);
        match self.next_event(cx.shared.get::<QueuePairs>()) {
            Some(at) => Step::At(at.max(now)),
            None => Step::Wait,
        }
    }

    fn waiting_for(&self) -> String {
        format!("{}: read commands", self.spec.name)
    }

    fn report(&self, out: &mut Report, view: &ReportView) {
        let pairs: Vec<&QueuePair> =
            self.pairs.iter().map(|(id, _)| &view.shared.get::<QueuePairs>()[id.0 as usize]).collect();
        let window = view.window_ns();
        let traffic = &view.shared.get::<Hierarchy>().stats.devices[self.device as usize];
        let ratio = |part: u64, whole: u64| (whole > 0).then(|| part as f64 / whole as f64);
        let mut latency = Distribution::default();
        pairs.iter().for_each(|p| latency.merge(&p.latency));
        let read_bytes: u64 = pairs.iter().map(|p| p.stats.read_bytes).sum();
        let reads: u64 = pairs.iter().map(|p| p.stats.completed_reads).sum();
        out.section("devices", |devices| {
            devices.section(&self.spec.name, |d| {
                d.put(&PLACEMENT, self.spec.placement.policy.as_str());
                d.put(&RX_GBPS, read_bytes as f64 * 8.0 / window);
                d.put(&IOPS, reads as f64 / window * 1e9);
                d.put(&WRITE_HIT_RATE, ratio(traffic.write_llc_hits + traffic.write_private_hits, traffic.writes));
                d.put(&READ_HIT_RATE, ratio(traffic.read_cache_hits, traffic.reads));
                d.section("dma", |r| traffic.report(r));
                latency.report(d, &LATENCY);
                d.section("tph", |r| self.tph.report(r));
                d.list("queues", pairs.iter().zip(&self.pairs).enumerate(), |r, (i, (pair, (_, completions)))| {
                    pair.stats.report(r);
                    r.put(&IN_FLIGHT_END, pair.in_flight_bytes);
                    r.put(&COMPLETIONS, if *completions == Completions::Polled { "polled" } else { "interrupt" });
                    r.put(&STEERING_CPU, self.tph.steering_cpu(i));
                    r.put(&RING_PASSES, pair.stats.completed_reads as f64 / pair.depth as f64);
                });
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
    use crate::engine::Harness;
    use crate::testing::{ns, tiny_platform};

    /// One queue pair of depth 2 consumed by CPU 1, 512 B blocks (8 lines), reads of 1 µs, at most
    /// a million a second (one start per µs), interrupts handled 500 ns after their entry.
    fn spec() -> NvmeSpec {
        NvmeSpec {
            block_bytes: 512,
            read_latency_us: 1.0,
            max_read_iops: 1e6,
            interrupt_latency_ns: 500.0,
            queues: vec![NvmeQueueSpec { depth: 2, consumer_cpu: 1, ..NvmeQueueSpec::default() }],
            ..NvmeSpec::default()
        }
    }

    /// A device of `spec` on the tiny platform, driven by hand.
    fn nvme(spec: NvmeSpec) -> (Harness, Box<dyn Agent>) {
        let platform = tiny_platform();
        spec.validate("devices.0", &platform).unwrap();
        let mut b = Builder::new(&platform, 1);
        spec.build(&mut b);
        let (mut agents, shared, signals) = b.into_parts();
        let (agent, start) = agents.pop().unwrap();
        assert_eq!(start, Some(Time::ZERO));
        (Harness::new(shared, signals), agent)
    }

    fn step_at(h: &mut Harness, nvme: &mut Box<dyn Agent>, at: Time) -> Step {
        h.step(nvme.as_mut(), at, at)
    }

    fn pair(h: &mut Harness) -> &mut QueuePair {
        &mut h.shared.get_mut::<QueuePairs>()[0]
    }

    /// Submits reads into buffers 0 and 1 at time 0 and steps the device then.
    fn two_reads(spec: NvmeSpec) -> (Harness, Box<dyn Agent>) {
        let (mut h, mut device) = nvme(spec);
        pair(&mut h).submit(0, Time::ZERO);
        pair(&mut h).submit(1, Time::ZERO);
        step_at(&mut h, &mut device, Time::ZERO);
        (h, device)
    }

    #[test]
    fn a_read_is_fetched_read_from_flash_written_and_completed_one_read_latency_after_its_fetch() {
        let (mut h, mut device) = nvme(spec());
        assert_eq!(device.name(), "nvme0");
        assert_eq!(device.waiting_for(), "nvme0: read commands");
        assert_eq!(step_at(&mut h, &mut device, Time::ZERO), Step::Wait, "nothing submitted");
        let doorbell = pair(&mut h).doorbell;
        assert_eq!(h.waits(), [doorbell]);
        pair(&mut h).submit(0, Time::ZERO);
        pair(&mut h).submit(1, Time::ZERO);
        // Each command's entry is fetched from memory (100 ns idle, the second a line behind the
        // first on the one channel); the first read starts at 100 ns, the second a µs later, when
        // the controller has room: data at 1100 and 2100 ns.
        assert_eq!(step_at(&mut h, &mut device, Time::ZERO), Step::At(ns(1100.0)));
        assert_eq!(h.shared.get::<Hierarchy>().stats.devices[0].reads, 2, "two entries fetched");
        assert_eq!(pair(&mut h).first_visible(), None, "nothing written before its time");
        assert_eq!(step_at(&mut h, &mut device, ns(1100.0)), Step::At(ns(2100.0)));
        let ready = pair(&mut h).ready;
        assert_eq!(h.notified(), [(ready, ns(1100.0))]);
        assert_eq!(pair(&mut h).ready(), ready, "the signal a program waiting for a completion sleeps on");
        assert_eq!(pair(&mut h).first_visible(), Some(ns(1100.0)));
        let read = pair(&mut h).done[0];
        assert_eq!((read.buffer, read.submitted, read.seen), (0, Time::ZERO, ns(1100.0)));
        assert_eq!(read.entry, pair(&mut h).memory.completion_queue, "the first completion entry");
        // 8 whole lines of block and a 16 B completion entry, all to memory.
        let traffic = &h.shared.get::<Hierarchy>().stats.devices[0];
        assert_eq!((traffic.writes, traffic.partial_writes), (8, 1));
        step_at(&mut h, &mut device, ns(2100.0));
        let pair = pair(&mut h);
        assert_eq!(pair.consume(), read);
        let second = pair.consume();
        assert_eq!((second.buffer, second.seen), (1, ns(2100.0)));
        assert_eq!(second.entry, pair.memory.completion_queue.offset(16), "the next entry, 16 B on");
        assert_eq!(pair.latency.summary().unwrap().mean, 1600.0);
    }

    #[test]
    fn a_command_submitted_later_is_fetched_when_its_doorbell_rings() {
        let (mut h, mut device) = nvme(spec());
        pair(&mut h).submit(0, ns(300.0));
        assert_eq!(step_at(&mut h, &mut device, Time::ZERO), Step::At(ns(300.0)), "the doorbell's time");
        assert_eq!(step_at(&mut h, &mut device, ns(300.0)), Step::At(ns(1400.0)));
        step_at(&mut h, &mut device, ns(1400.0));
        pair(&mut h).consume();
        assert_eq!(pair(&mut h).latency.summary().unwrap().mean, 1100.0, "from its submission at 300 ns");
    }

    #[test]
    fn an_interrupt_driven_queue_is_seen_the_interrupt_latency_after_its_entry_is_written() {
        let mut spec = spec();
        spec.queues[0].completions = Completions::Interrupt;
        let (mut h, mut device) = two_reads(spec);
        step_at(&mut h, &mut device, ns(1100.0));
        let ready = pair(&mut h).ready;
        assert_eq!(h.notified(), [(ready, ns(1600.0))]);
        assert_eq!(pair(&mut h).first_visible(), Some(ns(1600.0)));
    }

    #[test]
    fn reads_wait_for_a_slow_pcie_link() {
        // 2.5 GT/s x1: 0.25 B/ns. Each read takes 24 B of command request, 512 B in two 256 B
        // writes and the 16 B entry, 24 B each beside their data: 624 B, 2496 ns. However small
        // the device's buffer, nothing is dropped: what it read waits.
        let spec =
            NvmeSpec { pcie: PcieSpec { gts: 2.5, lanes: 1, rx_buffer_kib: 0.0, ..PcieSpec::default() }, ..spec() };
        let (mut h, mut device) = two_reads(spec);
        step_at(&mut h, &mut device, ns(1100.0));
        step_at(&mut h, &mut device, ns(2100.0));
        let pair = pair(&mut h);
        assert_eq!(pair.consume().seen, ns(1100.0));
        assert_eq!(pair.consume().seen, ns(1100.0 + 2496.0), "behind the first's 2496 ns on the link");
    }

    #[test]
    fn an_injecting_placement_writes_the_block_into_the_consumers_l2() {
        let spec = NvmeSpec {
            placement: PlacementSpec { policy: crate::params::Name::new("l2"), ..Default::default() },
            ..spec()
        };
        let (mut h, mut device) = two_reads(spec);
        step_at(&mut h, &mut device, ns(1100.0));
        let first = pair(&mut h).buffer_addr(0).line(6);
        let hierarchy = h.shared.get::<Hierarchy>();
        assert!((0..8).all(|k| hierarchy.in_l2(1, Line(first.0 + k))), "every line of the block");
        assert!(!hierarchy.in_l2(0, first), "not another core's");
        assert_eq!(h.shared.get::<Hierarchy>().stats.dma_lines_to_memory, 0);
    }

    #[test]
    fn with_tph_each_queue_pairs_writes_carry_its_consumers_tag() {
        let mut spec = NvmeSpec {
            placement: PlacementSpec { policy: crate::params::Name::new("tph"), ..Default::default() },
            ..spec()
        };
        spec.tph.mode = crate::devices::tph::TphMode::Iv;
        spec.queues[0].count = 2;
        spec.queues[0].consumer_cpu = 0;
        let (mut h, mut device) = nvme(spec);
        let nvme = device.as_any().downcast_ref::<Nvme>().unwrap();
        assert_eq!((nvme.tph.steering_cpu(0), nvme.tph.steering_cpu(1)), (Some(0), Some(1)));
        // The second pair's read lands in CPU 1's L2.
        h.shared.get_mut::<QueuePairs>()[1].submit(0, Time::ZERO);
        step_at(&mut h, &mut device, Time::ZERO);
        step_at(&mut h, &mut device, ns(1100.0));
        let block = h.shared.get::<QueuePairs>()[1].buffer_addr(0).line(6);
        assert!(h.shared.get::<Hierarchy>().in_l2(1, block));
    }

    #[test]
    fn the_report_gives_rates_over_the_window_hit_rates_and_each_pairs_accounting() {
        let (mut h, mut device) = two_reads(spec());
        step_at(&mut h, &mut device, ns(1100.0));
        step_at(&mut h, &mut device, ns(2100.0));
        pair(&mut h).consume();
        let mut out = Report::root();
        device.report(&mut out, &ReportView { shared: &h.shared, window_start: Time::ZERO, now: ns(4000.0) });
        let result = out.finish().0;
        let d = &result["devices"]["nvme0"];
        // 1024 B in 4 µs; two reads; no line cached for a write, none for a command fetch.
        assert_eq!((d["rx_gbps"].as_f64(), d["iops"].as_f64()), (Some(2.048), Some(500_000.0)));
        assert_eq!((d["dma_write_hit_rate"].as_f64(), d["dma_read_hit_rate"].as_f64()), (Some(0.0), Some(0.0)));
        assert_eq!((d["placement"].as_str(), d["latency_ns"]["p50"].as_f64()), (Some("memory"), Some(1100.0)));
        assert_eq!(d["dma"]["writes"].as_u64(), Some(16));
        assert_eq!(d["tph"]["enabled"].as_bool(), Some(false));
        let q = &d["queues"][0];
        assert_eq!(
            (q["completed_reads"].as_u64(), q["consumed_reads"].as_u64(), q["in_flight_bytes_end"].as_u64()),
            (Some(2), Some(1), Some(512))
        );
        assert_eq!(
            (q["ring_passes"].as_f64(), q["completions"].as_str(), q["steering_cpu"].is_null()),
            (Some(1.0), Some("polled"), true)
        );
        let mut spec = spec();
        spec.queues[0].completions = Completions::Interrupt;
        let (h, device) = nvme(spec);
        let mut out = Report::root();
        device.report(&mut out, &ReportView { shared: &h.shared, window_start: Time::ZERO, now: ns(4000.0) });
        let d = &out.finish().0["devices"]["nvme0"];
        assert!(d["dma_write_hit_rate"].is_null() && d["latency_ns"].is_null(), "nothing written: no rate");
        assert_eq!(d["queues"][0]["completions"].as_str(), Some("interrupt"));
    }

    #[test]
    fn a_pairs_buffers_and_queues_are_allocated_whole_one_after_the_other() {
        // 256 buffers of 4 KiB, 257 commands of 64 B (5 pages) and 257 entries of 16 B (2 pages).
        let spec = NvmeSpec {
            block_bytes: 4096,
            queues: vec![NvmeQueueSpec { depth: 256, ..NvmeQueueSpec::default() }],
            ..spec()
        };
        let platform = tiny_platform();
        let mut b = Builder::new(&platform, 1);
        spec.build(&mut b);
        let next = b.alloc(0, 1);
        let memory = b.facility::<QueuePairs>()[0].memory;
        assert_eq!(memory.submission_queue.0 - memory.buffers.0, 256 * 4096);
        assert_eq!(memory.completion_queue.0 - memory.submission_queue.0, 5 * 4096);
        assert_eq!(next.0 - memory.completion_queue.0, 2 * 4096);
    }

    #[test]
    fn workloads_find_a_devices_queue_pairs_by_its_name() {
        let platform = tiny_platform();
        let mut b = Builder::new(&platform, 1);
        assert_eq!(b.queues_of::<QueuePair>("nvme0"), [], "none before a device is built");
        let two = NvmeQueueSpec { count: 2, consumer_cpu: 0, ..NvmeQueueSpec::default() };
        NvmeSpec { queues: vec![two], ..spec() }.build(&mut b);
        NvmeSpec { name: "nvme1".into(), ..spec() }.build(&mut b);
        assert_eq!(b.queues_of::<QueuePair>("nvme0"), [PairId(0), PairId(1)]);
        assert_eq!(b.queues_of::<QueuePair>("nvme1"), [PairId(2)]);
        assert_eq!(b.queues_of::<QueuePair>("nic0"), []);
        assert_eq!(b.facility::<QueuePairs>()[1].name, "nvme0 queue 1");
    }

    #[test]
    fn a_device_on_the_second_sockets_node_has_that_sockets_llc() {
        // Two nodes a socket: node 2 is the second socket's first.
        let tiny = tiny_platform();
        let platform = PlatformSpec {
            topology: crate::platform::TopologySpec { sockets: 2, ccx_per_socket: 3, ..tiny.topology },
            memory: crate::platform::MemorySpec { nodes_per_socket: 2, ..tiny.memory.clone() },
            ..tiny_platform()
        };
        let mut b = Builder::new(&platform, 1);
        NvmeSpec { numa_node: 2, ..spec() }.build(&mut b);
        let (agents, _, _) = b.into_parts();
        assert_eq!(agents[0].0.as_any().downcast_ref::<Nvme>().unwrap().llc_ccx, 3, "the first CCX of socket 1");
    }

    #[test]
    fn a_block_read_into_a_buffer_the_consumers_cache_holds_is_a_write_hit() {
        let l2 = PlacementSpec { policy: crate::params::Name::new("l2"), ..Default::default() };
        let (mut h, mut device) = two_reads(NvmeSpec { placement: l2, ..spec() });
        step_at(&mut h, &mut device, ns(1100.0));
        step_at(&mut h, &mut device, ns(2100.0));
        pair(&mut h).consume();
        pair(&mut h).submit(0, ns(2200.0));
        let Step::At(third) = step_at(&mut h, &mut device, ns(2200.0)) else { panic!("a read in flight") };
        step_at(&mut h, &mut device, third);
        let mut out = Report::root();
        device.report(&mut out, &ReportView { shared: &h.shared, window_start: Time::ZERO, now: ns(4000.0) });
        // Three blocks of 8 lines; the third finds buffer 0's lines in CPU 1's L2, where the first put them.
        let d = &out.finish().0["devices"]["nvme0"];
        assert_eq!((d["dma"]["writes"].as_u64(), d["dma"]["write_private_hits"].as_u64()), (Some(24), Some(8)));
        assert_eq!(d["dma_write_hit_rate"].as_f64(), Some(8.0 / 24.0));
    }

    #[test]
    fn queue_pairs_wrap_their_entries_after_depth_plus_one() {
        let (mut h, _) = nvme(spec());
        let pair = pair(&mut h);
        let queue = pair.memory.submission_queue;
        assert_eq!([0, 1, 2, 3].map(|k| pair.submission_entry(k)), [0, 64, 128, 0].map(|b| queue.offset(b)));
        pair.submit(0, Time::ZERO);
        assert_eq!(pair.submission_entry(0), queue.offset(64));
        assert_eq!(pair.buffer_addr(1), pair.memory.buffers.offset(512));
    }

    #[test]
    fn the_statistics_reset_keeps_the_bytes_in_flight_for_conservation() {
        let (mut h, mut device) = two_reads(spec());
        step_at(&mut h, &mut device, ns(1100.0));
        h.shared.reset_stats(ns(1100.0));
        step_at(&mut h, &mut device, ns(2100.0));
        pair(&mut h).consume();
        let pair = pair(&mut h);
        let s = &pair.stats;
        assert_eq!(
            (s.in_flight_bytes_start, s.read_bytes, s.consumed_bytes, pair.in_flight_bytes),
            (512, 512, 512, 512)
        );
        assert_eq!(s.read_bytes + s.in_flight_bytes_start, s.consumed_bytes + pair.in_flight_bytes);
        assert_eq!(pair.latency.summary().unwrap().count, 1, "the latency before the reset is gone");
    }

    #[test]
    fn impossible_values_are_refused_by_key() {
        let platform = tiny_platform();
        let error = |spec: NvmeSpec| spec.validate("devices.0", &platform).unwrap_err().to_string();
        let queue = |q: NvmeQueueSpec| NvmeSpec { queues: vec![q], ..spec() };
        let cases = [
            (NvmeSpec { block_bytes: 1000, ..spec() }, "devices.0.block_bytes: must be a whole number of 512 B sectors, at most 1073741824 B (got 1000)"),
            (NvmeSpec { block_bytes: 0, ..spec() }, "devices.0.block_bytes: must be a whole number of 512 B sectors, at most 1073741824 B (got 0)"),
            (NvmeSpec { block_bytes: (1 << 30) + 512, ..spec() }, "devices.0.block_bytes: must be a whole number of 512 B sectors, at most 1073741824 B (got 1073742336)"),
            (NvmeSpec { read_latency_us: 0.0, ..spec() }, "devices.0.read_latency_us: must be above 0 and at most 1000000 µs (got 0)"),
            (NvmeSpec { read_latency_us: 1e6 + 1.0, ..spec() }, "devices.0.read_latency_us: must be above 0 and at most 1000000 µs (got 1000001)"),
            (NvmeSpec { max_read_iops: 0.0, ..spec() }, "devices.0.max_read_iops: must be positive (got 0)"),
            (NvmeSpec { max_read_iops: f64::INFINITY, ..spec() }, "devices.0.max_read_iops: must be positive (got inf)"),
            (NvmeSpec { interrupt_latency_ns: -1.0, ..spec() }, "devices.0.interrupt_latency_ns: must be between 0 and 1000000 ns (got -1)"),
            (NvmeSpec { interrupt_latency_ns: 1e6 + 1.0, ..spec() }, "devices.0.interrupt_latency_ns: must be between 0 and 1000000 ns (got 1000001)"),
            (NvmeSpec { numa_node: 1, ..spec() }, "devices.0.numa_node: node 1 does not exist (the platform has 1)"),
            (NvmeSpec { queues: Vec::new(), ..spec() }, "devices.0.queues: an NVMe device needs at least one queue pair"),
            (queue(NvmeQueueSpec { depth: 0, ..spec().queues[0].clone() }), "devices.0.queues.0.depth: must be 1 to 65535 (a queue of at most 65536 entries keeps one empty; got 0)"),
            (queue(NvmeQueueSpec { depth: 65_536, ..spec().queues[0].clone() }), "devices.0.queues.0.depth: must be 1 to 65535 (a queue of at most 65536 entries keeps one empty; got 65536)"),
            (queue(NvmeQueueSpec { count: 0, ..spec().queues[0].clone() }), "devices.0.queues.0.count: must be at least 1"),
            (queue(NvmeQueueSpec { count: 2, ..spec().queues[0].clone() }), "devices.0.queues.0.count: 2 queue pairs from consumer_cpu 1 need CPUs up to 2, out of range (the platform has 2)"),
            (queue(NvmeQueueSpec { consumer_cpu: 2, ..spec().queues[0].clone() }), "devices.0.queues.0.consumer_cpu: CPU 2 out of range (the platform has 2)"),
        ];
        for (bad, expected) in cases {
            assert_eq!(error(bad), expected);
        }
        let mut moving = spec();
        moving.tph.affinity_changes = vec![crate::devices::tph::AffinityChange::default()];
        assert_eq!(error(moving), "devices.0.tph.affinity_changes: IRQ affinity changes are modelled for the NIC only");
        let on_cpu_2 = NvmeSpec { placement: PlacementSpec { cpu: Some(2), ..Default::default() }, ..spec() };
        assert_eq!(error(on_cpu_2), "devices.0.placement.cpu: CPU 2 out of range (the platform has 2)");
        for fine in [
            spec(),
            NvmeSpec { block_bytes: 512, read_latency_us: 1e6, interrupt_latency_ns: 0.0, ..spec() },
            queue(NvmeQueueSpec { depth: 65_535, consumer_cpu: 0, count: 2, ..spec().queues[0].clone() }),
            NvmeSpec { placement: PlacementSpec { cpu: Some(1), ..Default::default() }, ..spec() },
        ] {
            assert_eq!(fine.validate("devices.0", &platform), Ok(()));
        }
    }

    #[test]
    fn its_queues_are_nvme_queue_pairs_on_their_consumer_cpus_and_their_model_memory_counted() {
        let spec = NvmeSpec {
            queues: vec![NvmeQueueSpec { depth: 8, count: 2, consumer_cpu: 0, ..NvmeQueueSpec::default() }],
            ..spec()
        };
        assert_eq!((spec.queue_port(), spec.queue_cpus()), (QUEUE_PAIR, vec![0, 1]));
        let pairs = spec.expanded_queues();
        assert_eq!(
            pairs.iter().map(|q| (q.count, q.consumer_cpu, q.depth)).collect::<Vec<_>>(),
            [(1, 0, 8), (1, 1, 8)]
        );
        assert_eq!(spec.host_bytes(), 2 * 64 * 8);
    }
}
