//! A NIC with RX queues. Each queue is a ring of descriptors pointing at buffers; packets arrive at
//! the offered rate, are DMA-written (header line, payload lines, one completion entry) wherever
//! the placement policy says, and are dropped when no descriptor is posted. The consumer releases
//! buffers, which re-posts them at the ring's tail.

use std::collections::VecDeque;

use crate::devices::placement::{self, DmaKind, DmaWrite, PlacementPolicy, PlacementSpec};
use crate::error::{ensure, ConfigResult};
use crate::hierarchy::Hierarchy;
use crate::params::{choice, params};
use crate::units::{Addr, Line, Rng, Time};

choice! {
    /// Packet inter-arrival process.
    pub enum Arrival {
        /// Evenly spaced packets at the offered rate.
        Constant,
        /// Exponential inter-arrival times (Poisson arrivals) with the offered mean rate.
        Poisson,
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
    }
}

impl NicSpec {
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
        placement::build(&self.placement, &key("placement"))?;
        let mut total = 0.0;
        for (i, q) in self.queues.iter().enumerate() {
            let qkey = |k: &str| format!("{path}.queues.{i}.{k}");
            ensure(q.ring_entries >= 1, &qkey("ring_entries"), || "must be at least 1".into())?;
            ensure(q.packet_bytes >= 1, &qkey("packet_bytes"), || "must be at least 1".into())?;
            ensure(q.buffer_bytes >= q.packet_bytes, &qkey("buffer_bytes"), || {
                format!("{} B buffers cannot hold {} B packets", q.buffer_bytes, q.packet_bytes)
            })?;
            ensure(q.offered_gbps > 0.0, &qkey("offered_gbps"), || format!("must be positive (got {})", q.offered_gbps))?;
            ensure(q.completion_bytes >= 1, &qkey("completion_bytes"), || "must be at least 1".into())?;
            ensure(q.descriptor_bytes >= 1, &qkey("descriptor_bytes"), || "must be at least 1".into())?;
            ensure(q.consumer_cpu < cpus, &qkey("consumer_cpu"), || {
                format!("CPU {} out of range (the platform has {cpus})", q.consumer_cpu)
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
}

/// A packet written to host memory, waiting for its consumer.
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub buffer: u32,
    pub bytes: u32,
    /// When the data and completion entry are visible to the host.
    pub ready: Time,
    pub entry_line: Line,
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

    pub fn buffer_addr(&self, buffer: u32) -> Addr {
        self.buffers[buffer as usize]
    }

    /// The descriptor line the driver writes when it re-posts a buffer.
    pub fn next_descriptor_addr(&self) -> Addr {
        let slot = self.descriptors_posted % self.spec.ring_entries as u64;
        self.descriptor_ring.offset(slot * self.spec.descriptor_bytes as u64)
    }

    /// The consumer is done with a packet: account it and re-post its buffer.
    pub fn release(&mut self, completion: Completion) {
        self.stats.consumed_packets += 1;
        self.stats.consumed_bytes += completion.bytes as u64;
        self.in_flight_bytes -= completion.bytes as u64;
        self.posted.push_back(completion.buffer);
        self.descriptors_posted += 1;
    }

    pub fn reset_stats(&mut self) {
        self.stats = QueueStats { in_flight_bytes_start: self.in_flight_bytes, ..Default::default() };
    }

    fn next_gap(&mut self, arrival: Arrival) -> Time {
        Time::from_ns(match arrival {
            Arrival::Constant => self.interarrival_ns,
            Arrival::Poisson => self.rng.exponential(self.interarrival_ns),
        })
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
    placement: Box<dyn PlacementPolicy>,
    pub queues: Vec<RxQueue>,
    dma_latency: Time,
    line_bits: u32,
}

impl Nic {
    /// Builds a NIC from a validated spec, allocating its rings and buffers and registering it
    /// with the hierarchy.
    pub fn new(spec: &NicSpec, allocator: &mut Allocator, hierarchy: &mut Hierarchy, seed: u64) -> Nic {
        let line_bits = hierarchy.line_bits();
        let queues = spec
            .queues
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let buffers = (0..q.ring_entries)
                    .map(|_| allocator.alloc(spec.numa_node, q.buffer_bytes as u64))
                    .collect();
                RxQueue {
                    spec: q.clone(),
                    buffers,
                    posted: (0..q.ring_entries).collect(),
                    completions: VecDeque::new(),
                    completion_ring: allocator.alloc(spec.numa_node, q.ring_entries as u64 * q.completion_bytes as u64),
                    completions_written: 0,
                    descriptor_ring: allocator.alloc(spec.numa_node, q.ring_entries as u64 * q.descriptor_bytes as u64),
                    descriptors_posted: 0,
                    interarrival_ns: q.packet_bytes as f64 * 8.0 / q.offered_gbps,
                    rng: Rng::new(seed ^ (i as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D)),
                    in_flight_bytes: 0,
                    waiter: None,
                    stats: QueueStats::default(),
                }
            })
            .collect();
        Nic {
            device: hierarchy.register_device(&spec.name),
            placement: placement::build(&spec.placement, "placement").expect("validated placement"),
            spec: spec.clone(),
            queues,
            dma_latency: Time::from_ns(spec.dma_latency_ns),
            line_bits,
        }
    }

    /// When queue `q`'s first packet arrives (a deterministic, seed-dependent phase).
    pub fn first_arrival(&mut self, q: usize) -> Time {
        let queue = &mut self.queues[q];
        Time::from_ns(queue.rng.unit() * queue.interarrival_ns)
    }

    /// A packet arrives on queue `q` at `now`: write it or drop it. Returns the next arrival time
    /// and the workload to wake (with when), if one was waiting.
    pub fn arrive(&mut self, q: usize, now: Time, hierarchy: &mut Hierarchy) -> (Time, Option<(usize, Time)>) {
        let line_bits = self.line_bits;
        let queue = &mut self.queues[q];
        let bytes = queue.spec.packet_bytes;
        queue.stats.arrived_packets += 1;
        queue.stats.arrived_bytes += bytes as u64;
        let mut wake = None;
        match queue.posted.pop_front() {
            None => {
                queue.stats.dropped_packets += 1;
                queue.stats.dropped_bytes += bytes as u64;
            }
            Some(buffer) => {
                let consumer_cpu = queue.spec.consumer_cpu;
                let first = queue.buffers[buffer as usize].line(line_bits);
                let last = queue.buffers[buffer as usize].offset(bytes as u64 - 1).line(line_bits);
                for line in first.0..=last.0 {
                    let kind = if line == first.0 { DmaKind::Header } else { DmaKind::Payload };
                    let destination = self.placement.destination(&DmaWrite { kind, consumer_cpu });
                    hierarchy.dma_write(self.device, Line(line), destination, now);
                }
                let slot = queue.completions_written % queue.spec.ring_entries as u64;
                queue.completions_written += 1;
                let entry_line = queue.completion_ring.offset(slot * queue.spec.completion_bytes as u64).line(line_bits);
                let destination = self.placement.destination(&DmaWrite { kind: DmaKind::Completion, consumer_cpu });
                hierarchy.dma_write(self.device, entry_line, destination, now);
                let ready = now + self.dma_latency;
                queue.completions.push_back(Completion { buffer, bytes, ready, entry_line });
                queue.in_flight_bytes += bytes as u64;
                wake = queue.waiter.take().map(|w| (w, ready));
            }
        }
        let arrival = queue.spec.arrival;
        (now + queue.next_gap(arrival), wake)
    }
}
