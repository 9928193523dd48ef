//! A NIC with RX queues. Each queue is a ring of descriptors pointing at buffers; packets arrive at
//! the offered rate, are DMA-written (header line, payload lines, one completion entry) wherever
//! the placement policy says, and are dropped when no descriptor is posted. The consumer releases
//! buffers, which re-posts them at the ring's tail. With PCIe TPH (`tph`), the driver steers each
//! queue's writes to the first CPU of its IRQ's affinity, and an affinity change restarts the queue.

use std::collections::VecDeque;

use crate::devices::placement::{self, DmaKind, DmaWrite, PlacementPolicy, PlacementSpec};
use crate::devices::tph::{NicTph, NicTphSpec, StMap};
use crate::error::{ensure, ConfigResult};
use crate::hierarchy::Hierarchy;
use crate::params::{choice, params};
use crate::platform::PlatformSpec;
use crate::units::{Addr, Line, Rng, Time};

choice! {
    /// Which free buffer refills an RX descriptor.
    pub enum Recycle {
        /// The buffer freed longest ago: buffers circulate through the whole pool (a fixed ring).
        Fifo,
        /// The buffer freed last, as a per-core mempool cache hands them out (DPDK).
        Lifo,
    }
}

choice! {
    /// Packet inter-arrival process.
    pub enum Arrival {
        /// Evenly spaced packets at the offered rate.
        Constant,
        /// Exponential inter-arrival times (Poisson arrivals) with the offered mean rate.
        Poisson,
        /// No arrivals of its own: a workload delivers each packet (a ping-pong's closed loop).
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
        /// PCIe TPH: the device's capability, the driver's ST mode, which writes carry hints, IRQ
        /// affinity changes. Hints steer writes under `placement.policy = "tph"`.
        tph: NicTphSpec = NicTphSpec::default(),
    }
}

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

    pub fn validate(&self, path: &str, cpus: u32, nodes: u32) -> ConfigResult<()> {
        let key = |k: &str| format!("{path}.{k}");
        ensure(self.link_gbps > 0.0, &key("link_gbps"), || format!("must be positive (got {})", self.link_gbps))?;
        ensure(self.dma_latency_ns >= 0.0, &key("dma_latency_ns"), || "must not be negative".into())?;
        ensure(self.numa_node < nodes, &key("numa_node"), || {
            format!("node {} does not exist (the platform has {nodes})", self.numa_node)
        })?;
        ensure(!self.queues.is_empty(), &key("queues"), || "a NIC needs at least one queue".into())?;
        if let Some(cpu) = self.placement.cpu {
            ensure(cpu < cpus, &key("placement.cpu"), || format!("CPU {cpu} out of range (the platform has {cpus})"))?;
        }
        placement::find(&self.placement, &key("placement"))?;
        self.tph.validate(&key("tph"), self.expanded_queues().len(), cpus)?;
        let mut total = 0.0;
        for (i, q) in self.queues.iter().enumerate() {
            let qkey = |k: &str| format!("{path}.queues.{i}.{k}");
            ensure(q.ring_entries >= 1, &qkey("ring_entries"), || "must be at least 1".into())?;
            ensure(q.packet_bytes >= 1, &qkey("packet_bytes"), || "must be at least 1".into())?;
            ensure(q.buffer_bytes >= q.packet_bytes, &qkey("buffer_bytes"), || {
                format!("{} B buffers cannot hold {} B packets", q.buffer_bytes, q.packet_bytes)
            })?;
            ensure(q.offered_gbps > 0.0, &qkey("offered_gbps"), || {
                format!("must be positive (got {})", q.offered_gbps)
            })?;
            ensure(q.completion_bytes >= 1, &qkey("completion_bytes"), || "must be at least 1".into())?;
            ensure(q.descriptor_bytes >= 1, &qkey("descriptor_bytes"), || "must be at least 1".into())?;
            ensure(q.count >= 1, &qkey("count"), || "must be at least 1".into())?;
            ensure(q.consumer_cpu + q.count <= cpus, &qkey("consumer_cpu"), || {
                format!("CPU {} out of range (the platform has {cpus})", q.consumer_cpu + q.count - 1)
            })?;
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
            format!("offered load {total} Gb/s exceeds the {} Gb/s link", self.link_gbps)
        })
    }
}

/// Byte accounting of one queue. Arrived = dropped + consumed + in flight (end - start).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct QueueStats {
    pub arrived_packets: u64,
    pub arrived_bytes: u64,
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
    pub consumed_packets: u64,
    pub consumed_bytes: u64,
    /// Bytes written but not yet consumed when the stats were last reset.
    pub in_flight_bytes_start: u64,
    pub transmitted_packets: u64,
    pub transmitted_bytes: u64,
    /// Arrival-to-TX-done latency of each transmitted packet (ns).
    #[serde(skip)]
    pub latencies_ns: Vec<f64>,
}

/// A packet written to host memory, waiting for its consumer.
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub buffer: u32,
    pub bytes: u32,
    /// When the data and completion entry are visible to the host.
    pub ready: Time,
    pub entry_line: Line,
    /// When the packet arrived at the NIC.
    pub arrival: Time,
}

/// A packet handed back to the NIC for transmission.
#[derive(Debug, Clone, Copy)]
struct TxPacket {
    buffer: u32,
    bytes: u32,
    arrival: Time,
}

/// What a consumer's poll finds.
pub enum Poll {
    Ready(Completion),
    /// A completion exists but becomes visible only at this time.
    NotYet(Time),
    Empty,
}

pub struct RxQueue {
    pub spec: QueueSpec,
    buffers: Vec<Addr>,
    /// Posted buffers, in ring order.
    posted: VecDeque<u32>,
    /// Free buffers, oldest freed first.
    free: VecDeque<u32>,
    /// Packets waiting for TX DMA, in order.
    tx: VecDeque<TxPacket>,
    tx_descriptor_ring: Addr,
    tx_posted: u64,
    /// When the TX engine is next free (it serializes packets onto the link).
    tx_free_at: Time,
    /// Whether the TX engine is scheduled; a post to an idle engine must kick it.
    pub tx_scheduled: bool,
    completions: VecDeque<Completion>,
    completion_ring: Addr,
    completions_written: u64,
    descriptor_ring: Addr,
    descriptors_posted: u64,
    interarrival_ns: f64,
    rng: Rng,
    pub in_flight_bytes: u64,
    /// Workload index sleeping until this queue has a completion.
    pub waiter: Option<usize>,
    pub stats: QueueStats,
    /// Restarts of the queue since the start (warm-up included).
    pub restarts: u32,
    /// Until when a restart keeps the queue from taking packets.
    stopped_until: Time,
}

impl RxQueue {
    /// Whether the consumer has data: ready now, later, or none.
    pub fn poll(&self, now: Time) -> Poll {
        match self.completions.front() {
            Some(c) if c.ready <= now => Poll::Ready(*c),
            Some(c) => Poll::NotYet(c.ready),
            None => Poll::Empty,
        }
    }

    /// Takes the completion returned by `poll`.
    pub fn take(&mut self) -> Completion {
        self.completions.pop_front().expect("take after a ready poll")
    }

    /// Buffers in the queue's pool (posted or not).
    pub fn pool_buffers(&self) -> usize {
        self.buffers.len()
    }

    pub fn buffer_addr(&self, buffer: u32) -> Addr {
        self.buffers[buffer as usize]
    }

    /// The descriptor line the driver writes when it re-posts a buffer.
    pub fn next_descriptor_addr(&self) -> Addr {
        let slot = self.descriptors_posted % self.spec.ring_entries as u64;
        self.descriptor_ring.offset(slot * self.spec.descriptor_bytes as u64)
    }

    /// The consumer has taken a packet out of the queue: account it as consumed.
    pub fn finish(&mut self, completion: &Completion) {
        self.stats.consumed_packets += 1;
        self.stats.consumed_bytes += completion.bytes as u64;
        self.in_flight_bytes -= completion.bytes as u64;
    }

    /// A buffer returns to the pool; free buffers refill empty descriptors.
    pub fn recycle(&mut self, buffer: u32) {
        self.free.push_back(buffer);
        self.refill();
    }

    /// Posts free buffers to empty descriptors, in the pool's recycle order.
    pub fn refill(&mut self) {
        while self.posted.len() < self.spec.ring_entries as usize {
            let next = match self.spec.recycle {
                Recycle::Fifo => self.free.pop_front(),
                Recycle::Lifo => self.free.pop_back(),
            };
            let Some(buffer) = next else { break };
            self.posted.push_back(buffer);
            self.descriptors_posted += 1;
        }
    }

    /// The consumer is done with a packet and frees its buffer (a receive-and-consume loop).
    pub fn release(&mut self, completion: Completion) {
        self.finish(&completion);
        self.recycle(completion.buffer);
    }

    /// The TX descriptor line the driver writes when it posts a packet for transmission.
    pub fn next_tx_descriptor_addr(&self) -> Addr {
        let slot = self.tx_posted % self.spec.ring_entries as u64;
        self.tx_descriptor_ring.offset(slot * self.spec.descriptor_bytes as u64)
    }

    /// Hands a consumed packet's buffer to the NIC for transmission; the buffer is recycled
    /// when its TX DMA is done. Returns true if the TX engine is idle and must be scheduled.
    pub fn post_tx(&mut self, completion: &Completion) -> bool {
        self.tx.push_back(TxPacket { buffer: completion.buffer, bytes: completion.bytes, arrival: completion.arrival });
        self.tx_posted += 1;
        !std::mem::replace(&mut self.tx_scheduled, true)
    }

    pub fn reset_stats(&mut self) {
        self.stats = QueueStats { in_flight_bytes_start: self.in_flight_bytes, ..Default::default() };
    }

    /// When the TX engine can start on the next packet, given a kick at `now`.
    pub fn tx_start(&self, now: Time) -> Time {
        self.tx_free_at.max(now)
    }

    /// Time to the next open-loop arrival; `None` for a closed queue.
    fn next_gap(&mut self, arrival: Arrival) -> Option<Time> {
        match arrival {
            Arrival::Constant => Some(Time::from_ns(self.interarrival_ns)),
            Arrival::Poisson => Some(Time::from_ns(self.rng.exponential(self.interarrival_ns))),
            Arrival::Closed => None,
        }
    }
}

/// Bump allocator of simulated physical memory, per NUMA node.
pub struct Allocator {
    next: Vec<u64>,
}

impl Allocator {
    pub fn new(nodes: u32) -> Allocator {
        // Leave the first 1 GiB of each node unused so that address 0 is never handed out.
        Allocator { next: (0..nodes as u64).map(|n| n * crate::memory::NODE_SPAN_BYTES + (1 << 30)).collect() }
    }

    /// Allocates `bytes` on `node`, aligned to 4 KiB pages.
    pub fn alloc(&mut self, node: u32, bytes: u64) -> Addr {
        let next = &mut self.next[node as usize];
        let addr = Addr(*next);
        *next += bytes.div_ceil(4096) * 4096;
        addr
    }
}

pub struct Nic {
    pub spec: NicSpec,
    /// The id the hierarchy knows this device by.
    device: u32,
    /// The CCX whose L3 is this device's LLC.
    llc_ccx: u32,
    link_gbps: f64,
    placement: Box<dyn PlacementPolicy>,
    pub queues: Vec<RxQueue>,
    /// The device's TPH capability and its driver's state.
    pub tph: NicTph,
    dma_latency: Time,
    line_bits: u32,
}

impl Nic {
    /// Builds a NIC from a validated spec, allocating its rings and buffers, registering it with
    /// the hierarchy and running its driver's TPH setup.
    pub fn new(
        spec: &NicSpec,
        platform: &PlatformSpec,
        allocator: &mut Allocator,
        hierarchy: &mut Hierarchy,
        seed: u64,
    ) -> Nic {
        let line_bits = hierarchy.line_bits();
        let queues = spec
            .expanded_queues()
            .into_iter()
            .enumerate()
            .map(|(i, q)| {
                let pool = q.pool_buffers.max(q.ring_entries);
                let stride = if q.buffer_stride_bytes == 0 { q.buffer_bytes } else { q.buffer_stride_bytes } as u64;
                let base = allocator.alloc(spec.numa_node, stride * pool as u64);
                let buffers = (0..pool as u64).map(|i| base.offset(i * stride)).collect();
                let ring = |bytes: u32| q.ring_entries as u64 * bytes as u64;
                RxQueue {
                    buffers,
                    posted: (0..q.ring_entries).collect(),
                    free: (q.ring_entries..pool).collect(),
                    tx: VecDeque::new(),
                    tx_descriptor_ring: allocator.alloc(spec.numa_node, ring(q.descriptor_bytes)),
                    tx_posted: 0,
                    tx_free_at: Time::ZERO,
                    tx_scheduled: false,
                    completions: VecDeque::new(),
                    completion_ring: allocator.alloc(spec.numa_node, ring(q.completion_bytes)),
                    completions_written: 0,
                    descriptor_ring: allocator.alloc(spec.numa_node, ring(q.descriptor_bytes)),
                    descriptors_posted: 0,
                    interarrival_ns: q.packet_bytes as f64 * 8.0 / q.offered_gbps,
                    rng: Rng::new(seed ^ (i as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D)),
                    in_flight_bytes: 0,
                    waiter: None,
                    stats: QueueStats::default(),
                    restarts: 0,
                    stopped_until: Time::ZERO,
                    spec: q,
                }
            })
            .collect::<Vec<RxQueue>>();
        let st_map = StMap::new(&platform.tph, &platform.topology);
        // The IRQ of RX queue i starts on the queue's consumer CPU (IRQ n on CPU n).
        let irq_cpus: Vec<u32> = queues.iter().map(|q| q.spec.consumer_cpu).collect();
        let topology = hierarchy.topology();
        // The device's LLC: the first CCX of the socket its NUMA node belongs to.
        let socket = spec.numa_node / hierarchy.memory_nodes_per_socket();
        let llc_ccx = socket * topology.ccx_per_socket;
        Nic {
            llc_ccx,
            link_gbps: spec.link_gbps,
            device: hierarchy.register_device(&spec.name),
            placement: placement::build(&spec.placement, &st_map),
            tph: NicTph::new(&spec.tph, &platform.tph, st_map, &irq_cpus),
            spec: spec.clone(),
            queues,
            dma_latency: Time::from_ns(spec.dma_latency_ns),
            line_bits,
        }
    }

    /// The id the hierarchy knows this device by (its traffic counters are indexed by it).
    pub fn device_id(&self) -> u32 {
        self.device
    }

    /// When queue `q`'s first packet arrives (a deterministic, seed-dependent phase); `None`
    /// for a closed queue.
    pub fn first_arrival(&mut self, q: usize) -> Option<Time> {
        let queue = &mut self.queues[q];
        (queue.spec.arrival != Arrival::Closed).then(|| Time::from_ns(queue.rng.unit() * queue.interarrival_ns))
    }

    /// An open-loop packet arrives on queue `q` at `now`. Returns the next arrival time and the
    /// workload to wake (with when), if one was waiting.
    pub fn arrive(&mut self, q: usize, now: Time, hierarchy: &mut Hierarchy) -> (Option<Time>, Option<(usize, Time)>) {
        let bytes = self.queues[q].spec.packet_bytes;
        let (_, wake) = self.deliver(q, bytes, now, hierarchy);
        let queue = &mut self.queues[q];
        let arrival = queue.spec.arrival;
        (queue.next_gap(arrival).map(|gap| now + gap), wake)
    }

    /// A packet of `bytes` reaches queue `q` at `now`: it is DMA-written with its completion
    /// entry, or dropped if no descriptor is posted. Returns when it becomes visible to the host
    /// (`None` if dropped) and the workload to wake, if one was waiting.
    pub fn deliver(
        &mut self,
        q: usize,
        bytes: u32,
        now: Time,
        hierarchy: &mut Hierarchy,
    ) -> (Option<Time>, Option<(usize, Time)>) {
        let line_bits = self.line_bits;
        let queue = &mut self.queues[q];
        queue.stats.arrived_packets += 1;
        queue.stats.arrived_bytes += bytes as u64;
        let mut wake = None;
        let mut visible = None;
        let posted = if now < queue.stopped_until { None } else { queue.posted.pop_front() };
        match posted {
            None => {
                queue.stats.dropped_packets += 1;
                queue.stats.dropped_bytes += bytes as u64;
            }
            Some(buffer) => {
                let (consumer_cpu, llc_ccx) = (queue.spec.consumer_cpu, self.llc_ccx);
                let consumer_ccx = hierarchy.ccx_of_cpu(consumer_cpu);
                let first = queue.buffers[buffer as usize].line(line_bits);
                let last = queue.buffers[buffer as usize].offset(bytes as u64 - 1).line(line_bits);
                for line in first.0..=last.0 {
                    let kind = if line == first.0 { DmaKind::Header } else { DmaKind::Payload };
                    let hint = self.tph.hint(q, kind);
                    let destination =
                        self.placement.destination(&DmaWrite { kind, consumer_cpu, llc_ccx, consumer_ccx, hint });
                    hierarchy.dma_write(self.device, Line(line), destination, now);
                }
                let slot = queue.completions_written % queue.spec.ring_entries as u64;
                queue.completions_written += 1;
                let entry_line =
                    queue.completion_ring.offset(slot * queue.spec.completion_bytes as u64).line(line_bits);
                let hint = self.tph.hint(q, DmaKind::Completion);
                let write = DmaWrite { kind: DmaKind::Completion, consumer_cpu, llc_ccx, consumer_ccx, hint };
                let destination = self.placement.destination(&write);
                hierarchy.dma_write(self.device, entry_line, destination, now);
                let ready = now + self.dma_latency;
                queue.completions.push_back(Completion { buffer, bytes, ready, entry_line, arrival: now });
                queue.in_flight_bytes += bytes as u64;
                wake = queue.waiter.take().map(|w| (w, ready));
                visible = Some(ready);
            }
        }
        (visible, wake)
    }

    /// When the driver next has timed work (an IRQ affinity change), if ever.
    pub fn next_driver_event(&self) -> Option<Time> {
        self.tph.next_event()
    }

    /// The driver's timed work due at `now`: IRQ affinity changes reprogram their queues' tags and
    /// restart those queues. Returns when to run again.
    pub fn driver_event(&mut self, now: Time, allocator: &mut Allocator) -> Option<Time> {
        for q in self.tph.affinity_changes_due(now) {
            self.restart_queue(q, now, allocator);
        }
        self.tph.next_event()
    }

    /// `netdev_rx_queue_restart` of RX queue `q` as bnxt_en implements it (our reading of Linux
    /// 6.15): the queue stops taking packets (its VNIC's MRU is set to 0) for `tph.restart_us`;
    /// completions NAPI has not yet processed go with the old rings (counted as dropped, their
    /// buffers re-posted); the completion ring is freed and allocated anew, at a new address,
    /// which is when firmware applies the queue's new steering tag.
    fn restart_queue(&mut self, q: usize, now: Time, allocator: &mut Allocator) {
        let queue = &mut self.queues[q];
        for completion in std::mem::take(&mut queue.completions) {
            queue.stats.dropped_packets += 1;
            queue.stats.dropped_bytes += completion.bytes as u64;
            queue.in_flight_bytes -= completion.bytes as u64;
            queue.free.push_back(completion.buffer);
        }
        queue.refill();
        let ring_bytes = queue.spec.ring_entries as u64 * queue.spec.completion_bytes as u64;
        queue.completion_ring = allocator.alloc(self.spec.numa_node, ring_bytes);
        queue.completions_written = 0;
        queue.stopped_until = now + Time::from_us(self.spec.tph.restart_us);
        queue.restarts += 1;
        self.tph.start_queue(q);
    }

    /// The TX engine of queue `q` runs at `now`: it DMA-reads the next packet (the model reads
    /// every line at `now`), returns the buffer to the pool, and counts the packet done when the
    /// read completes. Returns when to run again, if packets wait.
    pub fn transmit(&mut self, q: usize, now: Time, hierarchy: &mut Hierarchy) -> Option<Time> {
        let line_bits = self.line_bits;
        let queue = &mut self.queues[q];
        let Some(packet) = queue.tx.pop_front() else {
            queue.tx_scheduled = false;
            return None;
        };
        let start = queue.buffers[packet.buffer as usize];
        for line in start.line(line_bits).0..=start.offset(packet.bytes as u64 - 1).line(line_bits).0 {
            hierarchy.dma_read(self.device, Line(line), now);
        }
        let done = now + self.dma_latency;
        queue.stats.transmitted_packets += 1;
        queue.stats.transmitted_bytes += packet.bytes as u64;
        queue.stats.latencies_ns.push((done - packet.arrival).as_ns());
        queue.recycle(packet.buffer);
        // The link serializes packets: the next one starts when this one is on the wire.
        queue.tx_free_at = now + Time::from_ns(packet.bytes as f64 * 8.0 / self.link_gbps);
        if queue.tx.is_empty() {
            queue.tx_scheduled = false;
            None
        } else {
            Some(queue.tx_free_at)
        }
    }
}
