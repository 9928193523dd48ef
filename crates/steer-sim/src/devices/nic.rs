//! A NIC with RX queues (device kind `nic`). Packets arrive at each queue's offered rate (or, for a
//! closed queue, when the host's program asks for the peer's next message), are DMA-written
//! (header line, payload lines, one completion entry) wherever the placement policy says, each
//! line as its bytes come off the link, and are dropped when no descriptor is posted. A queue's TX
//! engine DMA-reads packets the host posts for transmission, one at a time at the link's rate.
//! Both directions cross the device's PCIe link (`pcie`), which may hold them back or, for received
//! packets, drop them. With PCIe TPH (`tph`), the driver steers each queue's writes to the first
//! CPU of its IRQ's affinity, and an affinity change restarts the queue.

use crate::devices::dma::DmaKind;
use crate::devices::pcie::{PcieLink, PcieSpec};
use crate::devices::placement::{self, DmaWrite, PlacementPolicy, PlacementSpec};
use crate::devices::queues::QueueHost;
use crate::devices::ring::Rings;
use crate::devices::ring::{Completion, Recycle, RingId, RingMemory, RingShape, RingSignals, RxRing};
use crate::devices::tph::{NicTph, NicTphSpec, StMap};
use crate::devices::DeviceSpec;
use crate::engine::{Agent, Cx, ReportView, Signal, Step};
use crate::error::{ensure, ConfigResult, Shown};
use crate::hierarchy::Hierarchy;
use crate::params::{choice, params};
use crate::platform::PlatformSpec;
use crate::stats::{stat, Report};
use crate::system::Builder;
use crate::units::{stream_seed, Addr, Line, Rng, Time};
use std::collections::VecDeque;

choice! {
    /// Packet inter-arrival process.
    pub enum Arrival {
        /// Evenly spaced packets at the offered rate.
        Constant,
        /// Exponential inter-arrival times (Poisson arrivals) with the offered mean rate.
        Poisson,
        /// No arrivals of its own: the host's program asks for each message (a ping-pong's peer).
        Closed,
    }
}

params! {
    /// One RX queue.
    pub struct QueueSpec {
        /// Descriptors in the RX ring (each with one posted buffer).
        ring_entries: u32 = 256,
        /// Bytes per RX buffer.
        buffer_bytes: u32 = 2048,
        /// Bytes per packet written by the NIC (headers included).
        packet_bytes: u32 = 1500,
        /// Offered load on this queue in Gb/s of packet bytes.
        offered_gbps: f64 = 25.0,
        /// Inter-arrival process.
        arrival: Arrival = Arrival::Constant,
        /// Bytes of payload per TCP segment where the NIC merges segments into its buffers (hardware
        /// GRO): it writes each segment as it arrives, back to back with the one before, so a line
        /// a segment boundary falls inside is written in two parts. 0: each packet in one piece.
        segment_bytes: u32 = 0,
        /// Bytes per completion entry (several share a cache line).
        completion_bytes: u32 = 16,
        /// Bytes per RX descriptor the driver writes when it re-posts a buffer.
        descriptor_bytes: u32 = 16,
        /// The CPU that consumes this queue (target of steering by default).
        consumer_cpu: u32 = 0,
        /// Queues this entry stands for: RSS spreads `offered_gbps` evenly; queue i is consumed
        /// by `consumer_cpu + i`.
        count: u32 = 1,
        /// Buffers in the queue's pool (0: one per descriptor).
        pool_buffers: u32 = 0,
        /// Distance between consecutive buffers of the pool, which is allocated contiguously
        /// (0: `buffer_bytes`). A DPDK mbuf with 2 KiB of data room is a 2368 B element.
        buffer_stride_bytes: u32 = 0,
        /// Which free buffer refills a descriptor.
        recycle: Recycle = Recycle::Fifo,
        /// Packets the host may have posted for TX and the NIC not yet read: TX descriptors plus
        /// any software queue in front of them; a forwarder waits for room (0: no limit).
        tx_entries: u32 = 0,
    }
}

params! {
    /// A network interface card.
    pub struct NicSpec {
        /// Device name, used in results and by workloads.
        name: String = "nic0".to_string(),
        /// Line rate in Gb/s; the sum of the queues' offered load may not exceed it.
        link_gbps: f64 = 100.0,
        /// Time from a packet's arrival until its data and completion are visible to the host (ns).
        dma_latency_ns: f64 = 1000.0,
        /// NUMA node holding the device's rings and buffers.
        numa_node: u32 = 0,
        /// Where DMA writes land.
        placement: PlacementSpec = PlacementSpec::default(),
        /// RX queues.
        queues: Vec<QueueSpec> = vec![QueueSpec::default()],
        /// The PCIe link to the root complex (not modelled by default).
        pcie: PcieSpec = PcieSpec::default(),
        /// Read requests (of at most `pcie.max_read_request_bytes`) each TX queue's DMA engine
        /// keeps outstanding: a queue sends its next packet only when the requests of its
        /// earlier ones leave room for the new one's (0: no limit).
        tx_read_requests: u32 = 0,
        /// A TX read's round trip besides the host's access to the line: the request's and the
        /// completions' way across PCIe and the root complex (ns); the host adds the L3's latency
        /// for a cached line, the memory's for the others. Only with `tx_read_requests`.
        tx_read_round_trip_ns: f64 = 0.0,
        /// PCIe TPH: the device's capability, the driver's ST mode, which writes carry hints, IRQ
        /// affinity changes. Hints steer writes under `placement.policy = "tph"`.
        tph: NicTphSpec = NicTphSpec::default(),
    }
}

/// Bounds past which a queue's sizes are slips, not a NIC: completion and descriptor entries are
/// tens of bytes, buffers at most megabytes (1 MiB on the X4), TX queues thousands of entries.
const MAX_ENTRY_BYTES: u32 = 4096;
const MAX_BUFFER_BYTES: u32 = 1 << 30;
const MAX_TX_ENTRIES: u32 = 1 << 20;
/// Outstanding non-posted requests a PCIe function can tag (14-bit tags).
const MAX_TX_READ_REQUESTS: u32 = 1 << 14;

/// The kind's registration.
#[linkme::distributed_slice(crate::devices::DEVICES)]
pub static KIND: crate::devices::DeviceKind =
    crate::devices::DeviceKind::of::<NicSpec>("nic", "a NIC with RX queues, TX engines, DMA placement and PCIe TPH");

/// How checks name the device and its queues.
const HOST: QueueHost = QueueHost { device: "a NIC", queue: "queue" };

impl NicSpec {
    /// The queues, one per RSS queue (`count` expanded).
    pub fn expanded_queues(&self) -> Vec<QueueSpec> {
        self.queues
            .iter()
            .flat_map(|q| {
                (0..q.count).map(move |i| QueueSpec {
                    consumer_cpu: q.consumer_cpu + i,
                    offered_gbps: q.offered_gbps / q.count as f64,
                    count: 1,
                    ..q.clone()
                })
            })
            .collect()
    }

    /// How long `bytes` take on the link.
    fn wire_time(&self, bytes: u32) -> Time {
        Time::from_ns(bytes as f64 * 8.0 / self.link_gbps)
    }
}

impl DeviceSpec for NicSpec {
    fn name(&self) -> &str {
        &self.name
    }

    fn queue_cpus(&self) -> Vec<u32> {
        self.expanded_queues().iter().map(|q| q.consumer_cpu).collect()
    }

    /// Per buffer of a pool: its address and its place in the free list or on the ring.
    fn host_bytes(&self) -> u64 {
        let per_queue = |q: &QueueSpec| 16 * (q.pool_buffers.max(q.ring_entries) as u64 + q.ring_entries as u64);
        self.queues.iter().map(|q| q.count as u64 * per_queue(q)).sum()
    }

    fn validate(&self, path: &str, platform: &PlatformSpec) -> ConfigResult<()> {
        let cpus = platform.topology.cpus();
        let key = |k: &str| format!("{path}.{k}");
        ensure(self.link_gbps > 0.0, &key("link_gbps"), || {
            format!("must be positive (got {})", Shown(self.link_gbps))
        })?;
        ensure(self.dma_latency_ns >= 0.0, &key("dma_latency_ns"), || "must not be negative".into())?;
        ensure((0.0..=1e6).contains(&self.tx_read_round_trip_ns), &key("tx_read_round_trip_ns"), || {
            format!("must be between 0 and 1000000 ns (got {})", Shown(self.tx_read_round_trip_ns))
        })?;
        ensure(self.tx_read_requests <= MAX_TX_READ_REQUESTS, &key("tx_read_requests"), || {
            format!("PCIe's 14-bit tags allow at most {MAX_TX_READ_REQUESTS} (got {})", self.tx_read_requests)
        })?;
        HOST.check_device(path, platform, self.numa_node, self.queues.len(), &self.placement, &self.pcie)?;
        let mut total = 0.0;
        for (i, q) in self.queues.iter().enumerate() {
            let qkey = |k: &str| format!("{path}.queues.{i}.{k}");
            ensure(q.ring_entries >= 1, &qkey("ring_entries"), || "must be at least 1".into())?;
            ensure(q.packet_bytes >= 1, &qkey("packet_bytes"), || "must be at least 1".into())?;
            ensure(q.buffer_bytes >= q.packet_bytes, &qkey("buffer_bytes"), || {
                format!("{} B buffers cannot hold {} B packets", q.buffer_bytes, q.packet_bytes)
            })?;
            ensure(q.offered_gbps > 0.0, &qkey("offered_gbps"), || {
                format!("must be positive (got {})", Shown(q.offered_gbps))
            })?;
            for (name, bytes) in [("completion_bytes", q.completion_bytes), ("descriptor_bytes", q.descriptor_bytes)] {
                ensure((1..=MAX_ENTRY_BYTES).contains(&bytes), &qkey(name), || {
                    format!("must be 1 to {MAX_ENTRY_BYTES} B: an entry is tens of bytes (got {bytes})")
                })?;
            }
            for (name, bytes) in [("buffer_bytes", q.buffer_bytes), ("buffer_stride_bytes", q.buffer_stride_bytes)] {
                ensure(bytes <= MAX_BUFFER_BYTES, &qkey(name), || {
                    format!("must be at most {MAX_BUFFER_BYTES} B (got {bytes})")
                })?;
            }
            ensure(q.segment_bytes <= u16::MAX as u32, &qkey("segment_bytes"), || {
                format!("a segment is at most an IP packet's {} B (got {})", u16::MAX, q.segment_bytes)
            })?;
            ensure(q.tx_entries <= MAX_TX_ENTRIES, &qkey("tx_entries"), || {
                format!("must be at most {MAX_TX_ENTRIES} (got {})", q.tx_entries)
            })?;
            HOST.check_entry(&format!("{path}.queues.{i}"), q.consumer_cpu, q.count, cpus)?;
            ensure(
                q.buffer_stride_bytes == 0 || q.buffer_stride_bytes >= q.buffer_bytes,
                &qkey("buffer_stride_bytes"),
                || format!("a stride of {} B cannot hold {} B buffers", q.buffer_stride_bytes, q.buffer_bytes),
            )?;
            ensure(q.pool_buffers == 0 || q.pool_buffers >= q.ring_entries, &qkey("pool_buffers"), || {
                format!("a pool of {} cannot fill {} descriptors", q.pool_buffers, q.ring_entries)
            })?;
            total += q.offered_gbps;
        }
        ensure(total <= self.link_gbps * (1.0 + 1e-9), &key("queues"), || {
            format!("offered load {} Gb/s exceeds the {} Gb/s link", Shown(total), Shown(self.link_gbps))
        })?;
        // After the queues: their counts are checked before anything expands them.
        self.tph.validate(&key("tph"), self.queues.iter().map(|q| q.count as usize).sum(), cpus)
    }

    fn build(&self, b: &mut Builder) {
        let doorbell = b.signal();
        let queues = self.expanded_queues();
        let restarts_planned = |q: usize| self.tph.affinity_changes.iter().filter(|c| c.queue as usize == q).count();
        let mut states = Vec::new();
        for (i, q) in queues.iter().enumerate() {
            let node = self.numa_node;
            let pool = q.pool_buffers.max(q.ring_entries) as u64;
            let stride = if q.buffer_stride_bytes == 0 { q.buffer_bytes } else { q.buffer_stride_bytes } as u64;
            let base = b.alloc(node, stride * pool);
            let ring_bytes = |bytes: u32| q.ring_entries as u64 * bytes as u64;
            let memory = RingMemory {
                buffers: (0..pool).map(|k| base.offset(k * stride)).collect(),
                tx_descriptor_ring: b.alloc(node, ring_bytes(q.descriptor_bytes)),
                completion_ring: b.alloc(node, ring_bytes(q.completion_bytes)),
                descriptor_ring: b.alloc(node, ring_bytes(q.descriptor_bytes)),
            };
            // A restart allocates the completion ring anew: one per planned affinity change.
            let spare_completion_rings =
                (0..restarts_planned(i)).map(|_| b.alloc(node, ring_bytes(q.completion_bytes))).collect();
            let shape = RingShape {
                entries: q.ring_entries,
                descriptor_bytes: q.descriptor_bytes,
                completion_bytes: q.completion_bytes,
                recycle: q.recycle,
                consumer_cpu: q.consumer_cpu,
                tx_entries: q.tx_entries,
            };
            let signals = RingSignals { ready: b.signal(), doorbell, sent: b.signal() };
            let ring = b.add_queue(&self.name, RxRing::new(format!("{} queue {i}", self.name), shape, memory, signals));
            let mut rng = Rng::new(stream_seed(b.seed, i as u64 + 1));
            let interarrival_ns = q.packet_bytes as f64 * 8.0 / q.offered_gbps;
            // Each open queue starts at a deterministic, seed-dependent phase.
            let next_arrival = (q.arrival != Arrival::Closed).then(|| Time::from_ns(rng.unit() * interarrival_ns));
            states.push(QueueState {
                ring,
                arrival: q.arrival,
                packet_bytes: q.packet_bytes,
                segment_bytes: q.segment_bytes as u64,
                stream_bytes: 0,
                interarrival_ns,
                rng,
                next_arrival,
                tx_free_at: Time::ZERO,
                tx_reads: VecDeque::new(),
                stopped_until: Time::ZERO,
                restarts: 0,
                spare_completion_rings,
            });
        }
        let platform = b.platform;
        let st_map = StMap::new(&platform.tph, &platform.topology);
        // The IRQ of RX queue i starts on the queue's consumer CPU (IRQ n on CPU n).
        let irq_cpus: Vec<u32> = queues.iter().map(|q| q.consumer_cpu).collect();
        // The device's LLC: the first CCX of the socket its NUMA node belongs to.
        let socket = self.numa_node / platform.memory.nodes_per_socket;
        let nic = Nic {
            llc_ccx: socket * platform.topology.ccx_per_socket,
            device: b.hierarchy().register_device(&self.name),
            placement: placement::build(&self.placement, &st_map),
            tph: NicTph::new(&self.tph, &platform.tph, st_map, &irq_cpus),
            dma_latency: Time::from_ns(self.dma_latency_ns),
            pcie: PcieLink::new(&self.pcie),
            line_bits: platform.line_bits(),
            queues: states,
            doorbell,
            spec: self.clone(),
        };
        let start = nic.next_event(b.queues::<RxRing>()).unwrap_or(Time::ZERO);
        b.add_agent(Box::new(nic), Some(start));
    }
}

/// The line writes of a packet of `bytes` at `start`, `stream_offset` bytes into its queue's
/// stream, as `(line, partial)` in address order. Its first and last lines are written in part
/// when it does not start or end on a line boundary; with segments of `segment_bytes` (0: none),
/// a line a boundary between two falls inside is written twice, in part each time.
fn packet_writes(start: Addr, bytes: u64, stream_offset: u64, segment_bytes: u64, line_mask: u64) -> Vec<(Line, bool)> {
    let line_bits = line_mask.count_ones();
    let end = start.0 + bytes;
    let mut writes: Vec<(Line, bool)> = (start.0 >> line_bits..=(end - 1) >> line_bits)
        .map(|line| {
            // The line the end falls in is past the packet when the end is line-aligned.
            let partial = (line == start.0 >> line_bits && start.0 & line_mask != 0) || line == end >> line_bits;
            (Line(line), partial)
        })
        .collect();
    if let Some(segments_before) = stream_offset.checked_div(segment_bytes) {
        // Boundaries strictly inside the packet, at multiples of the segment size in the stream.
        let mut boundary = (segments_before + 1) * segment_bytes;
        let mut split = 0;
        while boundary < stream_offset + bytes {
            let addr = start.0 + (boundary - stream_offset);
            if addr & line_mask != 0 {
                let at = ((addr >> line_bits) - (start.0 >> line_bits)) as usize + split;
                writes[at].1 = true;
                writes.insert(at, (Line(addr >> line_bits), true));
                split += 1;
            }
            boundary += segment_bytes;
        }
    }
    writes
}

/// When the `k`-th of a packet's `lines` line writes is made, the packet having crossed the link
/// in `wire` and arrived whole at `end`: each line once its bytes are in, so the last (and the
/// completion entry after it, `k = lines`) at `end`. A packet larger than a frame (a message
/// delivered whole) then reaches the memory controllers at the link's pace, not in one burst.
fn line_written_at(end: Time, wire: Time, k: u64, lines: u64) -> Time {
    let still_to_come = lines - (k + 1).min(lines);
    end.saturating_sub(Time((wire.0 as u128 * still_to_come as u128 / lines as u128) as u64))
}

/// The device side of one RX queue.
struct QueueState {
    ring: RingId,
    arrival: Arrival,
    packet_bytes: u32,
    /// `segment_bytes`, and the bytes of the queue's stream written so far (where its segment
    /// boundaries fall).
    segment_bytes: u64,
    stream_bytes: u64,
    interarrival_ns: f64,
    rng: Rng,
    /// The next open-loop arrival (`None` for a closed queue).
    next_arrival: Option<Time>,
    /// When the TX engine is next free (it serialises packets onto the link).
    tx_free_at: Time,
    /// When each outstanding TX read request completes, earliest first.
    tx_reads: VecDeque<Time>,
    /// Until when a restart keeps the queue from taking packets.
    stopped_until: Time,
    /// Restarts since the start (warm-up included).
    restarts: u32,
    /// Completion rings for the restarts to come.
    spare_completion_rings: std::collections::VecDeque<Addr>,
}

impl QueueState {
    /// Time to the next open-loop arrival.
    fn next_gap(&mut self) -> Time {
        match self.arrival {
            Arrival::Poisson => Time::from_ns(self.rng.exponential(self.interarrival_ns)),
            Arrival::Constant | Arrival::Closed => Time::from_ns(self.interarrival_ns),
        }
    }
}

/// Adds a packet of `bytes` whose read requests complete at `done` to a queue's outstanding
/// requests (`reads`, earliest first) and returns when the next packet of that size finds room
/// for its requests under the device's limit (`now` if at once). Every packet's requests are
/// taken to complete together, when its slowest line does.
fn outstanding_reads(reads: &mut VecDeque<Time>, now: Time, done: Time, bytes: u32, spec: &NicSpec) -> Time {
    while reads.front().is_some_and(|&t| t <= now) {
        reads.pop_front();
    }
    let requests = spec.pcie.read_requests(bytes) as usize;
    let at = reads.partition_point(|&t| t <= done);
    for _ in 0..requests {
        reads.insert(at, done);
    }
    // The next packet needs `requests` of the `limit` slots: the earliest completions free them.
    let must_complete = (reads.len() + requests).saturating_sub(spec.tx_read_requests as usize);
    if must_complete == 0 {
        now
    } else {
        reads[must_complete.min(reads.len()) - 1]
    }
}

/// A NIC: the agent that delivers packets into its rings and transmits what the host posts.
pub struct Nic {
    spec: NicSpec,
    /// The id the hierarchy knows this device by.
    device: u32,
    /// The CCX whose L3 is this device's LLC.
    llc_ccx: u32,
    placement: Box<dyn PlacementPolicy>,
    /// The device's TPH capability and its driver's state.
    pub tph: NicTph,
    dma_latency: Time,
    pcie: PcieLink,
    line_bits: u32,
    queues: Vec<QueueState>,
    doorbell: Signal,
}

stat!(RX_GBPS, "rx_gbps", "Gb/s", "accepted receive throughput (arrived minus dropped)");
stat!(TX_GBPS, "tx_gbps", "Gb/s", "transmitted throughput");
stat!(OFFERED_GBPS, "offered_gbps", "Gb/s", "offered load that arrived at the device");
stat!(DROPS, "drops", "packets", "packets dropped by every queue");
stat!(PLACEMENT, "placement", "name", "the device's placement policy");
stat!(
    WRITE_HIT_RATE,
    "dma_write_hit_rate",
    "fraction",
    "full-line DMA writes that found their line cached: in an L3, or in a core's private caches (dma.write_llc_hits and dma.write_private_hits split them)"
);
stat!(READ_HIT_RATE, "dma_read_hit_rate", "fraction", "DMA line reads served by a cache");
stat!(LATENCY, "latency_ns", "ns", "arrival at the NIC to TX DMA done, of transmitted packets");
stat!(IN_FLIGHT_END, "in_flight_bytes_end", "bytes", "bytes written but not yet consumed at the end");
stat!(IRQ_CPU, "irq_cpu", "cpu", "first CPU of the queue's IRQ affinity");
stat!(STEERING_CPU, "steering_cpu", "cpu", "the CPU the queue's steering tag names (null: none)");
stat!(RESTARTS, "restarts", "restarts", "restarts of the queue since the start of the run");
stat!(QUEUE_RX_GBPS, "rx_gbps", "Gb/s", "the queue's accepted receive throughput");
stat!(
    RING_PASSES,
    "ring_passes",
    "passes",
    "packets the queue accepted in the window over its ring's entries (under 1: the window saw a part of the ring, and hit rates can depend on which part)"
);

impl Nic {
    /// The earliest time the NIC has something to do, if any.
    fn next_event(&self, rings: &[RxRing]) -> Option<Time> {
        let queues = self.queues.iter().flat_map(|q| {
            let ring = &rings[q.ring.0 as usize];
            let requested = ring.next_requested().map(|(at, _)| at);
            let tx = ring.has_tx().then_some(q.tx_free_at);
            [q.next_arrival, requested, tx]
        });
        queues.chain([self.tph.next_event()]).flatten().min()
    }

    /// A packet of `bytes` reaches queue `q` at `now`: DMA-written with its completion entry, or
    /// dropped if no descriptor is posted (or the queue is restarting).
    fn deliver(&mut self, cx: &mut Cx, q: usize, bytes: u32, now: Time) {
        let state = &self.queues[q];
        let (rings, hierarchy) = cx.shared.pair_mut::<Rings, Hierarchy>();
        let ring = &mut rings[state.ring.0 as usize];
        let entry = ring.next_completion_entry();
        let link_wait = if ring.has_posted() && now >= state.stopped_until {
            self.pcie.receive(now, ring.shape.descriptor_bytes, &[bytes, ring.shape.completion_bytes])
        } else {
            None
        };
        let Some(buffer) = ring.accept(bytes, link_wait.is_some()) else { return };
        let consumer_cpu = ring.shape.consumer_cpu;
        let start = ring.buffer_addr(buffer);
        let ready = now + self.dma_latency + link_wait.unwrap_or(Time::ZERO);
        ring.complete(Completion { buffer, bytes, ready, entry, arrival: now });
        let signal = ring.ready;
        let consumer_ccx = hierarchy.ccx_of_cpu(consumer_cpu);
        let state = &mut self.queues[q];
        let line_mask = (1u64 << self.line_bits) - 1;
        let writes = packet_writes(start, bytes as u64, state.stream_bytes, state.segment_bytes, line_mask);
        state.stream_bytes += bytes as u64;
        let completion_partial = ring.shape.completion_bytes < 1 << self.line_bits;
        let first = start.line(self.line_bits);
        let lines = writes.len() as u64;
        let wire = self.spec.wire_time(bytes);
        let writes = writes.into_iter().map(|(line, partial)| {
            let kind = if line == first { DmaKind::Header } else { DmaKind::Payload };
            (line, kind, partial)
        });
        for (k, (line, kind, partial)) in
            writes.chain([(entry.line(self.line_bits), DmaKind::Completion, completion_partial)]).enumerate()
        {
            let at = line_written_at(now, wire, k as u64, lines);
            let hint = self.tph.hint(q, kind);
            let write = DmaWrite { kind, consumer_cpu, llc_ccx: self.llc_ccx, consumer_ccx, hint };
            let destination = self.placement.destination(&write);
            if partial {
                hierarchy.dma_write_partial(self.device, line, destination, at);
            } else {
                hierarchy.dma_write(self.device, line, destination, at);
            }
        }
        cx.notify(signal, ready);
    }

    /// Queue `q`'s TX engine sends its next packet at `now`: it DMA-reads it (every line at
    /// `now`), returns the buffer to the pool, and the packet is done when the read completes.
    fn transmit(&mut self, cx: &mut Cx, q: usize, now: Time) {
        let state = &mut self.queues[q];
        let ring = &mut cx.shared.get_mut::<Rings>()[state.ring.0 as usize];
        let Some(packet) = ring.pop_tx() else { return };
        let start = ring.buffer_addr(packet.buffer);
        // The Ethernet link serialises packets, and the PCIe link their reads: the next one
        // starts when this one is on the wire and its data has come across.
        let read = self.pcie.transmit(now, ring.shape.descriptor_bytes, start, packet.bytes);
        ring.transmitted(&packet, read.max(now + self.dma_latency));
        let sent = ring.sent;
        cx.notify(sent, now);
        let wire = now + self.spec.wire_time(packet.bytes);
        state.tx_free_at = wire.max(read);
        let (first, last) = (start.line(self.line_bits), start.offset(packet.bytes as u64 - 1).line(self.line_bits));
        let mut slowest = Time::ZERO;
        for line in first.0..=last.0 {
            slowest = slowest.max(cx.shared.get_mut::<Hierarchy>().dma_read(self.device, Line(line), now));
        }
        if self.spec.tx_read_requests > 0 {
            let done = now + Time::from_ns(self.spec.tx_read_round_trip_ns) + slowest;
            let room = outstanding_reads(&mut state.tx_reads, now, done, packet.bytes, &self.spec);
            state.tx_free_at = state.tx_free_at.max(room);
        }
    }

    /// `netdev_rx_queue_restart` of RX queue `q` as bnxt_en implements it (our reading of Linux
    /// 6.15): the queue stops taking packets (its VNIC's MRU is set to 0) for `tph.restart_us`;
    /// completions NAPI has not yet processed go with the old rings (counted as dropped, their
    /// buffers re-posted); the completion ring is allocated anew, at a new address, which is when
    /// firmware applies the queue's new steering tag.
    fn restart_queue(&mut self, cx: &mut Cx, q: usize, now: Time) {
        let state = &mut self.queues[q];
        let completion_ring = state.spare_completion_rings.pop_front().expect("one spare ring per planned restart");
        cx.shared.get_mut::<Rings>()[state.ring.0 as usize].restart(completion_ring);
        state.stopped_until = now + Time::from_us(self.spec.tph.restart_us);
        state.restarts += 1;
        self.tph.start_queue(q);
    }
}

impl Agent for Nic {
    fn name(&self) -> String {
        self.spec.name.clone()
    }

    fn step(&mut self, cx: &mut Cx, now: Time, _limit: Time) -> Step {
        for q in self.tph.affinity_changes_due(now) {
            self.restart_queue(cx, q, now);
        }
        for q in 0..self.queues.len() {
            if self.queues[q].next_arrival.is_some_and(|at| at <= now) {
                let bytes = self.queues[q].packet_bytes;
                self.deliver(cx, q, bytes, now);
                let gap = self.queues[q].next_gap();
                self.queues[q].next_arrival = Some(now + gap);
            }
            let ring = self.queues[q].ring.0 as usize;
            while let Some((_, bytes)) =
                cx.shared.get_mut::<Rings>()[ring].next_requested().filter(|(at, _)| *at <= now)
            {
                cx.shared.get_mut::<Rings>()[ring].pop_requested();
                self.deliver(cx, q, bytes, now);
            }
            if self.queues[q].tx_free_at <= now {
                self.transmit(cx, q, now);
            }
        }
        cx.wait_on(self.doorbell);
        match self.next_event(cx.shared.get::<Rings>()) {
            Some(at) => Step::At(at.max(now)),
            None => Step::Wait,
        }
    }

    fn waiting_for(&self) -> String {
        format!("{}: packets to transmit or closed-loop messages to deliver", self.spec.name)
    }

    fn reset_stats(&mut self, _now: Time) {}

    fn report(&self, out: &mut Report, view: &ReportView) {
        let rings: Vec<&RxRing> = self.queues.iter().map(|q| &view.shared.get::<Rings>()[q.ring.0 as usize]).collect();
        let window = view.window_ns();
        let sum = |f: fn(&RxRing) -> u64| rings.iter().map(|r| f(r)).sum::<u64>();
        let traffic = &view.shared.get::<Hierarchy>().stats.devices[self.device as usize];
        let ratio = |part: u64, whole: u64| if whole > 0 { Some(part as f64 / whole as f64) } else { None };
        let mut latency = crate::stats::Distribution::default();
        rings.iter().for_each(|r| latency.merge(&r.tx_latency));
        out.section("devices", |devices| {
            devices.section(&self.spec.name, |d| {
                let accepted = sum(|r| r.stats.arrived_bytes) - sum(|r| r.stats.dropped_bytes);
                d.put(&RX_GBPS, accepted as f64 * 8.0 / window);
                d.put(&TX_GBPS, sum(|r| r.stats.transmitted_bytes) as f64 * 8.0 / window);
                d.put(&OFFERED_GBPS, sum(|r| r.stats.arrived_bytes) as f64 * 8.0 / window);
                d.put(&DROPS, sum(|r| r.stats.dropped_packets));
                d.put(&PLACEMENT, self.spec.placement.policy.as_str());
                d.put(&WRITE_HIT_RATE, ratio(traffic.write_llc_hits + traffic.write_private_hits, traffic.writes));
                d.put(&READ_HIT_RATE, ratio(traffic.read_cache_hits, traffic.reads));
                d.section("dma", |r| traffic.report(r));
                latency.report(d, &LATENCY);
                d.section("tph", |r| self.tph.report(r));
                d.list("queues", self.queues.iter().zip(&rings).enumerate(), |r, (i, (q, ring))| {
                    ring.stats.report(r);
                    r.put(&IN_FLIGHT_END, ring.in_flight_bytes);
                    r.put(&IRQ_CPU, self.tph.irq_cpu[i]);
                    r.put(&STEERING_CPU, self.tph.steering_cpu(i));
                    r.put(&RESTARTS, q.restarts);
                    let accepted = ring.stats.arrived_bytes - ring.stats.dropped_bytes;
                    r.put(&QUEUE_RX_GBPS, accepted as f64 * 8.0 / window);
                    let packets = ring.stats.arrived_packets - ring.stats.dropped_packets;
                    r.put(&RING_PASSES, packets as f64 / ring.shape.entries as f64);
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
    use crate::devices::tph::AffinityChange;
    use crate::engine::Harness;
    use crate::platform::TopologySpec;
    use crate::testing::{ns, tiny_platform};

    /// A NIC of `spec` on the tiny platform, driven by hand; its first step's time.
    fn nic(spec: NicSpec) -> (Harness, Box<dyn Agent>, Time) {
        let platform = tiny_platform();
        spec.validate("devices.0", &platform).unwrap();
        let mut b = Builder::new(&platform, 1);
        spec.build(&mut b);
        let (mut agents, shared, signals) = b.into_parts();
        let (agent, start) = agents.pop().unwrap();
        (Harness::new(shared, signals), agent, start.unwrap())
    }

    /// One constant-rate queue of 1000 B packets at 8 Gb/s (one per µs), 2 descriptors, 1 µs
    /// visibility, a 10 Gb/s link.
    fn spec() -> NicSpec {
        NicSpec {
            link_gbps: 10.0,
            dma_latency_ns: 1000.0,
            queues: vec![QueueSpec {
                ring_entries: 2,
                packet_bytes: 1000,
                buffer_bytes: 2048,
                offered_gbps: 8.0,
                ..QueueSpec::default()
            }],
            ..NicSpec::default()
        }
    }

    fn step_at(h: &mut Harness, nic: &mut Box<dyn Agent>, at: Time) -> Step {
        h.step(nic.as_mut(), at, at)
    }

    #[test]
    fn a_packet_is_written_made_visible_after_the_dma_latency_and_the_next_follows_at_the_rate() {
        let (mut h, mut nic, first) = nic(spec());
        assert_eq!(nic.name(), "nic0", "stall reports name the NIC as its scenario does");
        assert_eq!(nic.waiting_for(), "nic0: packets to transmit or closed-loop messages to deliver");
        assert!(first < ns(1000.0), "the first arrival is within one inter-arrival time");
        assert_eq!(step_at(&mut h, &mut nic, first), Step::At(first + ns(1000.0)));
        let ring = &h.shared.get::<Rings>()[0];
        assert_eq!(ring.poll(first + ns(999.0)), crate::devices::ring::Poll::NotYet(first + ns(1000.0)));
        let (ready, doorbell) = (ring.ready, ring.doorbell);
        // 1000 B: 16 payload lines (the first a header) and one completion line, all to memory.
        assert_eq!(h.shared.get_mut::<Hierarchy>().stats.dma_lines_to_memory, 16 + 1);
        assert_eq!(h.notified(), [(ready, first + ns(1000.0))]);
        assert_eq!(h.waits(), [doorbell]);
    }

    #[test]
    fn a_packets_lines_are_written_as_they_cross_the_link_and_its_completion_with_the_last() {
        // 4 lines over 800 ps, the packet whole at 10,000 ps: 200 ps a line.
        let at = |k| line_written_at(Time(10_000), Time(800), k, 4);
        assert_eq!([at(0), at(1), at(2), at(3), at(4)], [9_400, 9_600, 9_800, 10_000, 10_000].map(Time));
        assert_eq!(line_written_at(Time(100), Time(800), 0, 4), Time::ZERO, "not before the simulation");
        assert_eq!(line_written_at(Time(100), Time(800), 3, 4), Time(100));
    }

    #[test]
    fn a_message_larger_than_a_frame_reaches_memory_at_the_links_pace_not_in_one_burst() {
        // 64 KiB at 10 Gb/s: 1024 lines over 52.4 µs, 1 ns each on the tiny platform's channel.
        let queue = QueueSpec { packet_bytes: 65536, buffer_bytes: 65536, ..spec().queues[0].clone() };
        let (mut h, mut nic, first) = nic(NicSpec { queues: vec![queue], dma_latency_ns: 100.0, ..spec() });
        let Step::At(second) = step_at(&mut h, &mut nic, first) else { panic!("a next arrival") };
        step_at(&mut h, &mut nic, second);
        // When the second message becomes visible, its reader finds the channel idle: a line of
        // another buffer is read in the idle latency (in one burst it would wait behind most of the
        // 1024 lines).
        let elsewhere = Line(1 << 20);
        assert_eq!(h.shared.get_mut::<Hierarchy>().memory.read(elsewhere, second + ns(100.0)), ns(100.0));
    }

    #[test]
    fn a_packets_unaligned_end_and_a_completion_smaller_than_a_line_are_partial_writes() {
        let (mut h, mut agent, first) = nic(spec());
        step_at(&mut h, &mut agent, first);
        // 1000 B = 15 whole lines and 40 B of a 16th; the 16 B completion entry is part of a line.
        let traffic = &h.shared.get::<Hierarchy>().stats.devices[0];
        assert_eq!((traffic.writes, traffic.partial_writes), (15, 2));
        let whole = NicSpec {
            queues: vec![QueueSpec { packet_bytes: 1024, completion_bytes: 64, ..spec().queues[0].clone() }],
            ..spec()
        };
        let (mut h, mut agent, first) = nic(whole);
        step_at(&mut h, &mut agent, first);
        let traffic = &h.shared.get::<Hierarchy>().stats.devices[0];
        assert_eq!((traffic.writes, traffic.partial_writes), (17, 0));
        // Buffers 1000 B apart: the second starts 40 B into a line, so both its ends are partial
        // (bytes 1000-1999 of the pool: lines 15-31, 17 lines).
        let packed = NicSpec {
            queues: vec![QueueSpec {
                buffer_bytes: 1000,
                buffer_stride_bytes: 1000,
                completion_bytes: 64,
                ..spec().queues[0].clone()
            }],
            ..spec()
        };
        let (mut h, mut agent, first) = nic(packed);
        step_at(&mut h, &mut agent, first);
        step_at(&mut h, &mut agent, first + ns(1000.0));
        let traffic = &h.shared.get::<Hierarchy>().stats.devices[0];
        assert_eq!((traffic.writes, traffic.partial_writes), (15 + 1 + 15 + 1, 1 + 2));
    }

    #[test]
    fn a_line_a_segment_boundary_falls_inside_is_written_twice_in_part() {
        let lines = |start: u64, bytes: u64, offset: u64, segment: u64| {
            packet_writes(Addr(start), bytes, offset, segment, 63)
                .into_iter()
                .map(|(l, p)| (l.0, p))
                .collect::<Vec<_>>()
        };
        let whole = |range: std::ops::Range<u64>| range.map(|l| (l, false)).collect::<Vec<_>>();
        // A page at the start of the stream: boundaries at 1448 (line 22, 40 B in) and 2896
        // (line 45, 16 B in).
        let first_page =
            [whole(0..22), vec![(22, true); 2], whole(23..45), vec![(45, true); 2], whole(46..64)].concat();
        assert_eq!(lines(0, 4096, 0, 1448), first_page);
        // The next page continues the stream: 4344, 5792, 7240 fall 248, 1696, 3144 B into it.
        let second_page = [whole(0..3), vec![(3, true); 2], whole(4..26), vec![(26, true); 2], whole(27..49)].concat();
        assert_eq!(lines(0, 4096, 4096, 1448), [second_page, vec![(49, true); 2], whole(50..64)].concat());
        // Boundaries on line boundaries, or at the packet's start or end, split no line.
        assert_eq!(lines(0, 4096, 0, 1024), whole(0..64));
        assert_eq!(lines(0, 2048, 2048, 2048), whole(0..32));
        assert_eq!(lines(0, 4096, 0, 0), whole(0..64));
        // A packet ending a byte short of a line ends in part of it.
        assert_eq!(lines(0, 127, 0, 0), [(0, false), (1, true)]);
        // With unaligned ends as well: bytes 40-139, boundaries at 90 (line 1) and 140 (the end).
        assert_eq!(lines(40, 100, 0, 50), [(0, true), (1, true), (1, true), (2, true)]);
    }

    #[test]
    fn a_queues_segments_run_on_from_one_packet_to_the_next() {
        let segmented = NicSpec {
            queues: vec![QueueSpec {
                packet_bytes: 1024,
                completion_bytes: 64,
                segment_bytes: 1448,
                ..spec().queues[0].clone()
            }],
            ..spec()
        };
        let (mut h, mut agent, first) = nic(segmented);
        step_at(&mut h, &mut agent, first);
        // Bytes 0-1023 of the stream: no boundary; 1024-2047: one at 1448, 424 B into the packet.
        assert_eq!(h.shared.get_mut::<Hierarchy>().stats.devices[0].partial_writes, 0);
        // 1024 B at 8 Gb/s: the next packet arrives 1024 ns later.
        step_at(&mut h, &mut agent, first + ns(1024.0));
        let traffic = &h.shared.get::<Hierarchy>().stats.devices[0];
        assert_eq!((traffic.writes, traffic.partial_writes), (17 + 15 + 1, 2));
    }

    #[test]
    fn rss_queues_expand_to_one_queue_each_on_consecutive_cpus_sharing_the_load() {
        let spec =
            NicSpec { queues: vec![QueueSpec { count: 3, consumer_cpu: 1, ..spec().queues[0].clone() }], ..spec() };
        let expanded = spec.expanded_queues();
        let shape: Vec<(u32, u32, f64)> = expanded.iter().map(|q| (q.count, q.consumer_cpu, q.offered_gbps)).collect();
        assert_eq!(shape, [(1, 1, 8.0 / 3.0), (1, 2, 8.0 / 3.0), (1, 3, 8.0 / 3.0)]);
    }

    #[test]
    fn arrivals_without_a_posted_descriptor_are_dropped_and_counted() {
        let (mut h, mut nic, first) = nic(spec());
        for k in 0..3 {
            step_at(&mut h, &mut nic, first + ns(1000.0 * k as f64));
        }
        let stats = &h.shared.get::<Rings>()[0].stats;
        assert_eq!((stats.arrived_packets, stats.dropped_packets, stats.dropped_bytes), (3, 1, 1000));
        assert_eq!(h.shared.get_mut::<Rings>()[0].in_flight_bytes, 2000);
    }

    /// `spec()` with its queue changed by `queue`, on a PCIe link of 2.5 GT/s x1 (8b/10b: 0.25 B/ns
    /// each way) whose NIC buffer holds `rx_buffer_kib`.
    fn on_slow_link(queue: QueueSpec, rx_buffer_kib: f64) -> NicSpec {
        NicSpec {
            pcie: PcieSpec { gts: 2.5, lanes: 1, rx_buffer_kib, ..PcieSpec::default() },
            queues: vec![queue],
            ..spec()
        }
    }

    #[test]
    fn a_pcie_link_slower_than_the_wire_paces_transmission_and_each_send_makes_room() {
        // One 1000 B packet every 10 µs.
        let spec = on_slow_link(QueueSpec { offered_gbps: 0.8, ..spec().queues[0].clone() }, 256.0);
        let (mut h, mut nic, first) = nic(spec);
        step_at(&mut h, &mut nic, first);
        step_at(&mut h, &mut nic, first + ns(10_000.0));
        let at = first + ns(15_000.0);
        let ring = &mut h.shared.get_mut::<Rings>()[0];
        assert_eq!(ring.buffer_addr(0).0 % 64, 0);
        let packets: Vec<_> = (0..2).map(|_| ring.take().unwrap()).collect();
        packets.iter().for_each(|c| {
            ring.finish(c);
            ring.post_tx(c)
        });
        let sent = ring.sent;
        assert_eq!(step_at(&mut h, &mut nic, at), Step::At(at + ns(5000.0)), "the next arrival comes first");
        assert!(h.notified().contains(&(sent, at)), "a send makes room for the host's next packet");
        // The read's completions: 16 B of descriptor and 1000 B in 16 of 64 B, 20 B each besides
        // their data: 1356 B at 0.25 B/ns, 5424 ns; the wire would take 800.
        assert_eq!(step_at(&mut h, &mut nic, at + ns(5000.0)), Step::At(at + ns(5424.0)));
        let ring = &h.shared.get::<Rings>()[0];
        assert_eq!(ring.stats.transmitted_packets, 1);
        let done = ring.tx_latency.summary().unwrap().p50;
        assert_eq!(
            done,
            (at + ns(5424.0) - packets[0].arrival).as_ns(),
            "done when its data is across, past the 1 µs DMA"
        );
        step_at(&mut h, &mut nic, at + ns(5424.0));
        assert_eq!(h.shared.get_mut::<Rings>()[0].stats.transmitted_packets, 2);
    }

    #[test]
    fn a_received_packet_waits_for_the_pcie_link_and_is_dropped_when_the_nic_buffer_is_full() {
        // 0.25 B/ns up; each 1000 B packet takes 1160 B of TLPs (descriptor request, four 256 B
        // writes, the completion entry): 4640 ns, against one packet per µs.
        let spec = on_slow_link(QueueSpec { ring_entries: 4, ..spec().queues[0].clone() }, 1.0);
        let (mut h, mut nic, first) = nic(spec);
        for k in 0..3 {
            step_at(&mut h, &mut nic, first + ns(1000.0 * k as f64));
        }
        let ring = &mut h.shared.get_mut::<Rings>()[0];
        assert_eq!(ring.take().unwrap().ready, first + ns(1000.0));
        // The second waits 3640 ns behind the first (910 B, within the 1 KiB buffer).
        assert_eq!(ring.take().unwrap().ready, first + ns(1000.0 + 1000.0 + 3640.0));
        // The third finds 1820 B waiting: dropped at the NIC, with descriptors to spare.
        assert!(ring.take().is_none());
        assert_eq!((ring.stats.arrived_packets, ring.stats.dropped_packets), (3, 1));
    }

    #[test]
    fn a_packet_dropped_for_want_of_a_descriptor_does_not_use_the_pcie_link() {
        // One descriptor; 1000 B packets every µs take 4640 ns each of a 0.25 B/ns link.
        let spec = on_slow_link(QueueSpec { ring_entries: 1, ..spec().queues[0].clone() }, 256.0);
        let (mut h, mut nic, first) = nic(spec);
        step_at(&mut h, &mut nic, first);
        step_at(&mut h, &mut nic, first + ns(1000.0));
        let ring = &mut h.shared.get_mut::<Rings>()[0];
        assert_eq!(ring.stats.dropped_packets, 1);
        let taken = ring.take().unwrap();
        ring.release(&taken);
        step_at(&mut h, &mut nic, first + ns(2000.0));
        // The third waits only for the first's 4640 ns, not for the dropped one's too.
        let third = h.shared.get_mut::<Rings>()[0].take().unwrap();
        assert_eq!(third.ready, first + ns(2000.0 + 1000.0 + 2640.0));
    }

    #[test]
    fn the_tx_engine_serialises_packets_onto_the_link() {
        let (mut h, mut nic, first) = nic(spec());
        step_at(&mut h, &mut nic, first);
        step_at(&mut h, &mut nic, first + ns(1000.0));
        // The host forwards both packets at `at` and rings the doorbell.
        let at = first + ns(1500.0);
        let ring = &mut h.shared.get_mut::<Rings>()[0];
        let packets: Vec<_> = (0..2).map(|_| ring.take().unwrap()).collect();
        packets.iter().for_each(|c| {
            ring.finish(c);
            ring.post_tx(c)
        });
        // The first goes out at once; 1000 B at 10 Gb/s keep the link 800 ns.
        assert_eq!(step_at(&mut h, &mut nic, at), Step::At(at + ns(500.0)), "the next arrival comes first");
        let ring = &h.shared.get::<Rings>()[0];
        assert_eq!(ring.stats.transmitted_packets, 1);
        assert_eq!(ring.tx_latency.summary().unwrap().p50, (at + ns(1000.0) - packets[0].arrival).as_ns());
        assert_eq!(h.shared.get_mut::<Hierarchy>().stats.devices[0].reads, 16);
        // The arrival at +2 µs finds the buffer the first packet freed.
        assert_eq!(step_at(&mut h, &mut nic, at + ns(500.0)), Step::At(at + ns(800.0)));
        assert_eq!(h.shared.get_mut::<Rings>()[0].stats.dropped_packets, 0);
        assert_eq!(step_at(&mut h, &mut nic, at + ns(800.0)), Step::At(first + ns(3000.0)));
        let ring = &h.shared.get::<Rings>()[0];
        assert_eq!(ring.stats.transmitted_packets, 2);
        assert_eq!(
            ring.tx_latency.summary().unwrap().mean,
            ((at + ns(1000.0) - packets[0].arrival).as_ns() + (at + ns(1800.0) - packets[1].arrival).as_ns()) / 2.0
        );
    }

    #[test]
    fn outstanding_read_requests_leave_room_for_the_next_packet_by_hand() {
        // 6 requests of 512 B outstanding; a 1500 B packet takes 3.
        let spec = NicSpec { tx_read_requests: 6, ..spec() };
        let mut reads = VecDeque::new();
        assert_eq!(outstanding_reads(&mut reads, ns(0.0), ns(500.0), 1500, &spec), ns(0.0), "room for one more");
        assert_eq!(
            outstanding_reads(&mut reads, ns(100.0), ns(600.0), 1500, &spec),
            ns(500.0),
            "the first must finish"
        );
        assert_eq!(reads, [ns(500.0); 3].into_iter().chain([ns(600.0); 3]).collect::<VecDeque<_>>());
        // At 500 the first's requests are done and leave; the second's now decide.
        assert_eq!(outstanding_reads(&mut reads, ns(500.0), ns(1000.0), 1500, &spec), ns(600.0));
        assert_eq!(reads.len(), 6);
        // A read that completes sooner (a cache hit behind a miss) frees its slots sooner.
        let mut reads = VecDeque::new();
        outstanding_reads(&mut reads, ns(0.0), ns(700.0), 1500, &spec);
        assert_eq!(outstanding_reads(&mut reads, ns(10.0), ns(510.0), 1500, &spec), ns(510.0));
        // A packet of more requests than the limit waits for every earlier one.
        let narrow = NicSpec { tx_read_requests: 2, ..spec.clone() };
        let mut reads = VecDeque::new();
        assert_eq!(outstanding_reads(&mut reads, ns(0.0), ns(500.0), 1500, &narrow), ns(500.0));
        // A packet of one request (at most 512 B) takes one slot.
        let mut reads = VecDeque::new();
        for k in 0..5 {
            assert_eq!(outstanding_reads(&mut reads, ns(k as f64), ns(900.0 + k as f64), 512, &spec), ns(k as f64));
        }
        assert_eq!(outstanding_reads(&mut reads, ns(5.0), ns(905.0), 512, &spec), ns(900.0));
    }

    /// When queue 0's TX engine is next free after sending the first of two packets posted
    /// together, under the TX read settings of `spec` (the two-packet case below).
    fn tx_free_after_first_send(spec: NicSpec) -> Time {
        let (mut h, mut nic, first) = nic(spec);
        step_at(&mut h, &mut nic, first);
        step_at(&mut h, &mut nic, first + ns(1000.0));
        let ring = &mut h.shared.get_mut::<Rings>()[0];
        for _ in 0..2 {
            let packet = ring.take().unwrap();
            ring.finish(&packet);
            ring.post_tx(&packet);
        }
        step_at(&mut h, &mut nic, first + ns(1500.0));
        nic.as_any().downcast_ref::<Nic>().unwrap().queues[0].tx_free_at - (first + ns(1500.0))
    }

    #[test]
    fn a_tx_queue_at_its_read_request_limit_waits_one_round_trip_and_the_hosts_access() {
        // 1000 B packets take two 512 B requests: a limit of 2 lets one packet's reads out at a time.
        assert_eq!(tx_free_after_first_send(spec()), ns(800.0), "no limit: the wire alone");
        let limited = |round_trip| NicSpec { tx_read_requests: 2, tx_read_round_trip_ns: round_trip, ..spec() };
        let (slow, slower) = (tx_free_after_first_send(limited(5000.0)), tx_free_after_first_send(limited(6000.0)));
        assert!(slow > ns(5000.0), "the round trip and the memory's latency: {slow:?}");
        assert_eq!(slower - slow, ns(1000.0), "the round trip adds as it is");
        let roomy = NicSpec { tx_read_requests: 4, ..limited(5000.0) };
        assert_eq!(tx_free_after_first_send(roomy), ns(800.0), "room for the second: the wire again");
    }

    #[test]
    fn a_closed_queue_delivers_exactly_the_arrivals_asked_for() {
        let mut spec = spec();
        spec.queues[0].arrival = Arrival::Closed;
        let (mut h, mut nic, first) = nic(spec);
        assert_eq!(first, Time::ZERO);
        assert_eq!(step_at(&mut h, &mut nic, Time::ZERO), Step::Wait);
        h.shared.get_mut::<Rings>()[0].request_arrival(ns(500.0), 100);
        assert_eq!(step_at(&mut h, &mut nic, ns(100.0)), Step::At(ns(500.0)));
        step_at(&mut h, &mut nic, ns(500.0));
        let ring = &mut h.shared.get_mut::<Rings>()[0];
        let completion = ring.take().unwrap();
        assert_eq!((completion.bytes, completion.arrival, completion.ready), (100, ns(500.0), ns(1500.0)));
    }

    #[test]
    fn an_affinity_change_restarts_the_queue_dropping_what_was_pending_and_arrivals_until_it_is_back() {
        let mut spec = spec();
        spec.placement.policy = "tph".into();
        spec.tph.mode = crate::devices::tph::TphMode::Iv;
        spec.tph.affinity_changes = vec![AffinityChange { queue: 0, at_us: 2.5, cpu: 1 }];
        spec.tph.restart_us = 1.0;
        let (mut h, mut nic, first) = nic(spec);
        step_at(&mut h, &mut nic, first);
        step_at(&mut h, &mut nic, first + ns(1000.0));
        assert_eq!(h.shared.get_mut::<Rings>()[0].in_flight_bytes, 2000);
        let old_entry = h.shared.get_mut::<Rings>()[0].next_completion_entry();
        // The change is due at 2.5 µs: the NIC wakes then, the two pending completions go with
        // the old ring, and the arrival due at first + 2 µs (< 2.5) finds the queue stopped.
        assert!(first < ns(500.0), "the seed's phase puts the third arrival before the change");
        assert_eq!(step_at(&mut h, &mut nic, first + ns(2000.0)), Step::At(ns(2500.0)));
        let ring = &h.shared.get::<Rings>()[0];
        assert_eq!((ring.stats.dropped_packets, ring.in_flight_bytes), (1, 2000), "the ring was full");
        step_at(&mut h, &mut nic, ns(2500.0));
        let ring = &h.shared.get::<Rings>()[0];
        assert_eq!((ring.stats.dropped_packets, ring.in_flight_bytes), (3, 0));
        assert_ne!(ring.next_completion_entry(), old_entry);
        // Stopped until 3.5 µs: the arrival at first + 3 µs is dropped, the one at + 4 µs is not.
        step_at(&mut h, &mut nic, first + ns(3000.0));
        assert_eq!(h.shared.get_mut::<Rings>()[0].stats.dropped_packets, 4);
        step_at(&mut h, &mut nic, first + ns(4000.0));
        assert_eq!(
            (h.shared.get_mut::<Rings>()[0].stats.dropped_packets, h.shared.get_mut::<Rings>()[0].in_flight_bytes),
            (4, 1000)
        );
        let nic = nic.as_any().downcast_ref::<Nic>().unwrap();
        assert_eq!((nic.queues[0].restarts, nic.tph.irq_cpu[0], nic.tph.steering_cpu(0)), (1, 1, Some(1)));
    }

    #[test]
    fn a_placement_cpu_must_be_one_of_the_platforms() {
        let platform = tiny_platform();
        let with_cpu =
            |cpu| NicSpec { placement: PlacementSpec { cpu: Some(cpu), ..PlacementSpec::default() }, ..spec() };
        with_cpu(1).validate("devices.0", &platform).unwrap();
        let error = with_cpu(2).validate("devices.0", &platform).unwrap_err();
        assert_eq!(error.to_string(), "devices.0.placement.cpu: CPU 2 out of range (the platform has 2)");
    }

    #[test]
    fn a_tx_read_round_trip_must_be_between_0_and_1_ms() {
        let platform = tiny_platform();
        let with = |ns| NicSpec { tx_read_requests: 8, tx_read_round_trip_ns: ns, ..spec() };
        for fine in [0.0, 1e6] {
            with(fine).validate("devices.0", &platform).unwrap();
        }
        for bad in [-1.0, 1e6 + 1.0, f64::NAN] {
            let error = with(bad).validate("devices.0", &platform).unwrap_err().to_string();
            assert!(error.starts_with("devices.0.tx_read_round_trip_ns: must be between 0 and 1000000 ns"), "{error}");
        }
    }

    #[test]
    fn the_queues_offered_loads_together_must_fit_the_link() {
        let platform = tiny_platform();
        let offering = |gbps: [f64; 2]| NicSpec {
            queues: gbps
                .iter()
                .enumerate()
                .map(|(cpu, &offered_gbps)| QueueSpec {
                    offered_gbps,
                    consumer_cpu: cpu as u32,
                    ..spec().queues[0].clone()
                })
                .collect(),
            ..spec()
        };
        offering([6.0, 4.0]).validate("devices.0", &platform).unwrap();
        let error = offering([6.0, 4.5]).validate("devices.0", &platform).unwrap_err().to_string();
        assert_eq!(error, "devices.0.queues: offered load 10.5 Gb/s exceeds the 10 Gb/s link");
    }

    #[test]
    fn a_nic_on_the_second_sockets_node_has_that_sockets_llc() {
        let platform = PlatformSpec {
            topology: TopologySpec { sockets: 2, ccx_per_socket: 3, ..tiny_platform().topology },
            ..tiny_platform()
        };
        let mut b = Builder::new(&platform, 1);
        NicSpec { numa_node: 1, ..spec() }.build(&mut b);
        let (agents, _, _) = b.into_parts();
        let nic = agents[0].0.as_any().downcast_ref::<Nic>().unwrap();
        assert_eq!(nic.llc_ccx, 3, "the first CCX of socket 1");
    }

    #[test]
    fn host_memory_is_16_bytes_per_buffer_and_per_ring_slot_of_every_queue() {
        let queue = QueueSpec { ring_entries: 4, pool_buffers: 10, count: 3, ..spec().queues[0].clone() };
        let two = NicSpec { queues: vec![queue, spec().queues[0].clone()], ..spec() };
        // 3 queues of 10 buffers and 4 slots, and one of 2 slots (at least as many buffers).
        assert_eq!(two.host_bytes(), 3 * 16 * (10 + 4) + 16 * (2 + 2));
    }
}
