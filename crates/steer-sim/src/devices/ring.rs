//! An RX queue's host side: the port between a device that receives packets and the programs
//! that consume them. A ring of descriptors points at posted buffers; the device takes a posted
//! buffer per packet, writes it and appends a completion; a consumer polls completions, uses the
//! packet and re-posts buffers from the pool's free list; a forwarding consumer hands packets back
//! for transmission instead. `ready` is notified when a completion becomes visible, `doorbell`
//! when the host hands the device work (a packet to transmit, a closed-loop arrival to deliver).

use std::collections::VecDeque;

use crate::devices::queues::{queue_id, CompletionQueue, Queue, Queues};
use crate::engine::Signal;
use crate::params::choice;
use crate::stats::{stats, Distribution};
use crate::units::{Addr, Time};

/// What a device's queues are when they are RX rings of this file (`DeviceSpec::queue_port`).
pub const RX_QUEUE: &str = "RX queue";

/// The host side of every RX queue, shared by devices and the programs that consume them.
pub type Rings = Queues<RxRing>;

impl Queue for RxRing {
    type Id = RingId;
    fn reset_stats(&mut self) {
        RxRing::reset_stats(self);
    }
}

impl CompletionQueue for RxRing {
    type Completion = Completion;
    fn first_visible(&self) -> Option<Time> {
        self.completions.front().map(|c| c.ready)
    }
    fn take_first(&mut self) -> Completion {
        self.take().expect("a ready completion")
    }
    fn ready(&self) -> Signal {
        self.ready
    }
}

queue_id!(
    /// An RX queue's index among the shared rings.
    pub struct RingId for RxRing
);

choice! {
    /// Which free buffer refills an RX descriptor.
    pub enum Recycle {
        /// The buffer freed longest ago: buffers circulate through the whole pool (a fixed ring).
        Fifo,
        /// The buffer freed last, as a per-core mempool cache hands them out (DPDK).
        Lifo,
        /// Linux page_pool: freed pages go to a LIFO cache of `PAGE_POOL_CACHE` pages while it has
        /// room, else to a FIFO ring; refills take from the cache first, then the ring.
        PagePool,
    }
}

/// Pages in page_pool's per-NAPI LIFO cache (`PP_ALLOC_CACHE_SIZE`, include/net/page_pool/types.h).
pub const PAGE_POOL_CACHE: usize = 128;

stats! {
    /// Byte accounting of one queue: arrived = dropped + consumed + (in flight at the end - at
    /// the start).
    pub struct QueueStats {
        /// Packets that reached the queue.
        arrived_packets: u64 ["packets"],
        /// Bytes of the packets that reached the queue.
        arrived_bytes: u64 ["bytes"],
        /// Packets dropped: no posted buffer, the queue restarting, or lost with an old ring.
        dropped_packets: u64 ["packets"],
        /// Bytes of the dropped packets.
        dropped_bytes: u64 ["bytes"],
        /// Packets a consumer took out of the queue.
        consumed_packets: u64 ["packets"],
        /// Bytes of the consumed packets.
        consumed_bytes: u64 ["bytes"],
        /// Bytes written but not yet consumed when the statistics were last reset.
        in_flight_bytes_start: u64 ["bytes"],
        /// Packets whose transmission (TX DMA read) completed.
        transmitted_packets: u64 ["packets"],
        /// Bytes of the transmitted packets.
        transmitted_bytes: u64 ["bytes"],
        /// Packets written into a buffer the device had not written before in the run: no cache
        /// holds their lines yet, so their writes miss. A window with many has not reached the
        /// ring's steady state (at a low rate, a warm-up shorter than a pass over the pool).
        first_use_packets: u64 ["packets"],
    }
}

/// A packet written to host memory, waiting for its consumer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Completion {
    pub buffer: u32,
    pub bytes: u32,
    /// When the data and completion entry are visible to the host.
    pub ready: Time,
    pub entry: Addr,
    /// When the packet arrived at the device.
    pub arrival: Time,
}

/// A packet handed back to the device for transmission.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TxPacket {
    pub buffer: u32,
    pub bytes: u32,
    pub arrival: Time,
}

/// What a consumer's poll finds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Poll {
    Ready(Completion),
    /// A completion exists but becomes visible only at this time.
    NotYet(Time),
    Empty,
}

/// The shape of a ring, as its device's spec gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RingShape {
    pub entries: u32,
    pub descriptor_bytes: u32,
    pub completion_bytes: u32,
    pub recycle: Recycle,
    /// The CPU that consumes the queue (its IRQ's CPU).
    pub consumer_cpu: u32,
    /// Packets the host may have posted for TX that the device has not yet read: the TX
    /// descriptors plus any software queue in front of them (0: no limit).
    pub tx_entries: u32,
}

/// An RX queue's host side.
#[derive(Debug)]
pub struct RxRing {
    /// What results and stall reports call it (`nic0 queue 1`).
    pub name: String,
    pub shape: RingShape,
    buffers: Vec<Addr>,
    /// Posted buffers, in ring order.
    posted: VecDeque<u32>,
    /// Free buffers, oldest freed first (a page pool's ring).
    free: VecDeque<u32>,
    /// A page pool's LIFO cache, last freed at the end.
    cache: Vec<u32>,
    /// Whether the device has written each buffer since the start.
    written: Vec<bool>,
    completions: VecDeque<Completion>,
    /// Packets waiting for TX DMA, in order.
    tx: VecDeque<TxPacket>,
    /// Closed-loop arrivals the host asked for: when, and how many bytes.
    requested: VecDeque<(Time, u32)>,
    descriptor_ring: Addr,
    descriptors_posted: u64,
    tx_descriptor_ring: Addr,
    tx_posted: u64,
    completion_ring: Addr,
    completions_written: u64,
    pub in_flight_bytes: u64,
    pub stats: QueueStats,
    /// Arrival-to-TX-done latency of each transmitted packet (ns).
    pub tx_latency: Distribution,
    /// Notified when a completion becomes visible.
    pub ready: Signal,
    /// Notified when the host hands the device work.
    pub doorbell: Signal,
    /// Notified when the device has read a packet posted for TX (room for another).
    pub sent: Signal,
}

/// The signals a ring's host and device side wake each other with.
#[derive(Debug, Clone, Copy)]
pub struct RingSignals {
    pub ready: Signal,
    pub doorbell: Signal,
    pub sent: Signal,
}

/// Where a ring's memory is.
#[derive(Debug, Clone)]
pub struct RingMemory {
    /// Every buffer of the pool; the first `entries` are posted first.
    pub buffers: Vec<Addr>,
    pub descriptor_ring: Addr,
    pub tx_descriptor_ring: Addr,
    pub completion_ring: Addr,
}

impl RxRing {
    pub fn new(name: String, shape: RingShape, memory: RingMemory, signals: RingSignals) -> RxRing {
        let pool = memory.buffers.len() as u32;
        let posted = shape.entries.min(pool);
        RxRing {
            name,
            shape,
            buffers: memory.buffers,
            posted: (0..posted).collect(),
            free: (posted..pool).collect(),
            cache: Vec::new(),
            written: vec![false; pool as usize],
            completions: VecDeque::new(),
            tx: VecDeque::new(),
            requested: VecDeque::new(),
            descriptor_ring: memory.descriptor_ring,
            descriptors_posted: 0,
            tx_descriptor_ring: memory.tx_descriptor_ring,
            tx_posted: 0,
            completion_ring: memory.completion_ring,
            completions_written: 0,
            in_flight_bytes: 0,
            stats: QueueStats::default(),
            tx_latency: Distribution::default(),
            ready: signals.ready,
            doorbell: signals.doorbell,
            sent: signals.sent,
        }
    }

    // The consumer's side.

    /// Whether the consumer has data at `now`: ready, later, or none.
    pub fn poll(&self, now: Time) -> Poll {
        match self.completions.front() {
            Some(c) if c.ready <= now => Poll::Ready(*c),
            Some(c) => Poll::NotYet(c.ready),
            None => Poll::Empty,
        }
    }

    /// Takes the completion a poll found ready.
    pub fn take(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// Buffers in the queue's pool (posted or not).
    pub fn pool_buffers(&self) -> usize {
        self.buffers.len()
    }

    pub fn buffer_addr(&self, buffer: u32) -> Addr {
        self.buffers[buffer as usize]
    }

    /// Whether a buffer is posted for the device's next packet.
    pub fn has_posted(&self) -> bool {
        !self.posted.is_empty()
    }

    /// The descriptor the driver writes when it next posts a buffer.
    pub fn next_descriptor_addr(&self) -> Addr {
        let slot = self.descriptors_posted % self.shape.entries as u64;
        self.descriptor_ring.offset(slot * self.shape.descriptor_bytes as u64)
    }

    /// The consumer has taken a packet out of the queue: it counts as consumed.
    pub fn finish(&mut self, completion: &Completion) {
        self.stats.consumed_packets += 1;
        self.stats.consumed_bytes += completion.bytes as u64;
        self.in_flight_bytes -= completion.bytes as u64;
    }

    /// A buffer returns to the pool; free buffers refill empty descriptors.
    pub fn recycle(&mut self, buffer: u32) {
        self.free_buffer(buffer);
        self.refill();
    }

    fn free_buffer(&mut self, buffer: u32) {
        if self.shape.recycle == Recycle::PagePool && self.cache.len() < PAGE_POOL_CACHE {
            self.cache.push(buffer);
        } else {
            self.free.push_back(buffer);
        }
    }

    /// Posts free buffers to empty descriptors, in the pool's recycle order. A descriptor the
    /// device has written stays in use until the consumer takes its completion: the driver
    /// refills a slot only once it has processed it, so a full ring of unprocessed packets
    /// leaves no descriptor to post to, however many buffers are free.
    pub fn refill(&mut self) {
        while self.posted.len() + self.completions.len() < self.shape.entries as usize {
            let next = match self.shape.recycle {
                Recycle::Fifo => self.free.pop_front(),
                Recycle::Lifo => self.free.pop_back(),
                Recycle::PagePool => self.cache.pop().or_else(|| self.free.pop_front()),
            };
            let Some(buffer) = next else { break };
            self.posted.push_back(buffer);
            self.descriptors_posted += 1;
        }
    }

    /// The consumer is done with a packet and frees its buffer.
    pub fn release(&mut self, completion: &Completion) {
        self.finish(completion);
        self.recycle(completion.buffer);
    }

    /// The TX descriptor the driver writes when it posts a packet for transmission.
    pub fn next_tx_descriptor_addr(&self) -> Addr {
        self.tx_descriptor_addr_ahead(0)
    }

    /// The TX descriptor of the packet posted `ahead` posts from now.
    pub fn tx_descriptor_addr_ahead(&self, ahead: u64) -> Addr {
        let slot = (self.tx_posted + ahead) % self.shape.entries as u64;
        self.tx_descriptor_ring.offset(slot * self.shape.descriptor_bytes as u64)
    }

    /// Hands a consumed packet's buffer back for transmission; it is recycled when its TX DMA is
    /// done. (The caller rings the doorbell: `ProgramCx::post_tx`.)
    pub fn post_tx(&mut self, completion: &Completion) {
        self.tx.push_back(TxPacket { buffer: completion.buffer, bytes: completion.bytes, arrival: completion.arrival });
        self.tx_posted += 1;
    }

    /// Asks the device for a closed-loop arrival of `bytes` at `at` (the peer's next message).
    /// (The caller rings the doorbell.)
    pub fn request_arrival(&mut self, at: Time, bytes: u32) {
        self.requested.push_back((at, bytes));
    }

    // The device's side.

    /// The next requested closed-loop arrival, if any.
    pub fn next_requested(&self) -> Option<(Time, u32)> {
        self.requested.front().copied()
    }

    pub fn pop_requested(&mut self) -> Option<(Time, u32)> {
        self.requested.pop_front()
    }

    /// A packet of `bytes` arrives: counted, and given the next posted buffer if there is one
    /// (else it is dropped and `None` returned).
    pub fn accept(&mut self, bytes: u32, accepting: bool) -> Option<u32> {
        self.stats.arrived_packets += 1;
        self.stats.arrived_bytes += bytes as u64;
        let buffer = if accepting { self.posted.pop_front() } else { None };
        match buffer {
            Some(b) if !self.written[b as usize] => {
                self.written[b as usize] = true;
                self.stats.first_use_packets += 1;
            }
            Some(_) => {}
            None => {
                self.stats.dropped_packets += 1;
                self.stats.dropped_bytes += bytes as u64;
            }
        }
        buffer
    }

    /// Where the next completion entry is written.
    pub fn next_completion_entry(&self) -> Addr {
        let slot = self.completions_written % self.shape.entries as u64;
        self.completion_ring.offset(slot * self.shape.completion_bytes as u64)
    }

    /// Appends the completion of a written packet.
    pub fn complete(&mut self, completion: Completion) {
        self.completions_written += 1;
        self.in_flight_bytes += completion.bytes as u64;
        self.completions.push_back(completion);
    }

    /// Whether packets wait for TX DMA.
    pub fn has_tx(&self) -> bool {
        !self.tx.is_empty()
    }

    /// How many more packets the host may post for TX now.
    pub fn tx_room(&self) -> usize {
        match self.shape.tx_entries {
            0 => usize::MAX,
            entries => (entries as usize).saturating_sub(self.tx.len()),
        }
    }

    pub fn pop_tx(&mut self) -> Option<TxPacket> {
        self.tx.pop_front()
    }

    /// A packet's TX DMA completed at `done`: count it and recycle its buffer.
    pub fn transmitted(&mut self, packet: &TxPacket, done: Time) {
        self.stats.transmitted_packets += 1;
        self.stats.transmitted_bytes += packet.bytes as u64;
        self.tx_latency.add((done - packet.arrival).as_ns());
        self.recycle(packet.buffer);
    }

    /// The queue restarts with a new completion ring at `completion_ring`: completions not yet
    /// taken go with the old ring (dropped, their buffers re-posted).
    pub fn restart(&mut self, completion_ring: Addr) {
        for completion in std::mem::take(&mut self.completions) {
            self.stats.dropped_packets += 1;
            self.stats.dropped_bytes += completion.bytes as u64;
            self.in_flight_bytes -= completion.bytes as u64;
            self.free_buffer(completion.buffer);
        }
        self.refill();
        self.completion_ring = completion_ring;
        self.completions_written = 0;
    }

    pub fn reset_stats(&mut self) {
        self.stats = QueueStats { in_flight_bytes_start: self.in_flight_bytes, ..QueueStats::default() };
        self.tx_latency.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(entries: u32, pool: u32, recycle: Recycle) -> RxRing {
        let shape =
            RingShape { entries, descriptor_bytes: 16, completion_bytes: 16, recycle, consumer_cpu: 0, tx_entries: 2 };
        let memory = RingMemory {
            buffers: (0..pool as u64).map(|i| Addr(0x10_0000 + i * 4096)).collect(),
            descriptor_ring: Addr(0x1000),
            tx_descriptor_ring: Addr(0x2000),
            completion_ring: Addr(0x3000),
        };
        RxRing::new("q".into(), shape, memory, RingSignals { ready: Signal(0), doorbell: Signal(1), sent: Signal(2) })
    }

    fn completion(ring: &RxRing, buffer: u32, bytes: u32) -> Completion {
        Completion {
            buffer,
            bytes,
            ready: Time::from_ns(10.0),
            entry: ring.next_completion_entry(),
            arrival: Time::ZERO,
        }
    }

    /// The device writes `n` packets of 64 B into posted buffers, completions and all.
    fn write_packets(r: &mut RxRing, n: usize) {
        for _ in 0..n {
            let buffer = r.accept(64, true).unwrap();
            let c = completion(r, buffer, 64);
            r.complete(c);
        }
    }

    #[test]
    fn a_full_ring_drops_and_a_released_buffer_is_posted_again() {
        let mut r = ring(2, 2, Recycle::Fifo);
        assert_eq!(r.accept(100, true), Some(0));
        assert_eq!(r.accept(100, true), Some(1));
        assert_eq!(r.accept(100, true), None);
        assert_eq!((r.stats.arrived_packets, r.stats.dropped_packets, r.stats.dropped_bytes), (3, 1, 100));
        let c = completion(&r, 0, 100);
        r.complete(c);
        assert_eq!(r.poll(Time::from_ns(9.0)), Poll::NotYet(Time::from_ns(10.0)));
        assert_eq!(r.poll(Time::from_ns(10.0)), Poll::Ready(c));
        let taken = r.take().unwrap();
        r.release(&taken);
        assert_eq!((r.stats.consumed_packets, r.in_flight_bytes), (1, 0));
        assert_eq!(r.accept(100, true), Some(0));
        assert_eq!(r.poll(Time::from_ns(100.0)), Poll::Empty);
    }

    #[test]
    fn a_packet_counts_as_a_first_use_only_in_a_buffer_the_device_never_wrote_warm_up_included() {
        // Two descriptors, a pool of three, FIFO: buffers 0, 1, then 2 and 0 again after release.
        let mut r = ring(2, 3, Recycle::Fifo);
        write_packets(&mut r, 2);
        assert_eq!(r.stats.first_use_packets, 2);
        r.reset_stats();
        assert_eq!(r.accept(64, true), None, "a drop uses no buffer");
        for _ in 0..2 {
            let taken = r.take().unwrap();
            r.release(&taken);
        }
        assert_eq!(r.accept(64, true), Some(2));
        assert_eq!(r.stats.first_use_packets, 1, "buffer 2 is new");
        assert_eq!(r.accept(64, true), Some(0));
        assert_eq!(r.stats.first_use_packets, 1, "buffer 0 was written before the reset");
    }

    #[test]
    fn descriptor_and_completion_slots_wrap_around_the_ring() {
        let mut r = ring(2, 4, Recycle::Fifo);
        assert_eq!(r.next_descriptor_addr(), Addr(0x1000));
        assert_eq!(r.next_completion_entry(), Addr(0x3000));
        for buffer in [0, 1, 2] {
            let c = completion(&r, buffer, 64);
            r.complete(c);
            r.take();
        }
        // Three completions written (and processed) in a ring of two: slot 1 next.
        assert_eq!(r.next_completion_entry(), Addr(0x3010));
        r.accept(64, true);
        r.refill();
        // One descriptor emptied and refilled from the free list.
        assert_eq!(r.next_descriptor_addr(), Addr(0x1010));
    }

    #[test]
    fn a_ring_full_of_unprocessed_packets_posts_nothing_however_many_buffers_are_free() {
        let mut r = ring(2, 8, Recycle::Lifo);
        write_packets(&mut r, 2);
        r.refill();
        assert_eq!(r.accept(64, true), None, "both descriptors hold packets not yet processed");
        let taken = r.take().unwrap();
        r.finish(&taken);
        r.refill();
        assert_eq!(r.accept(64, true), Some(7), "the processed slot is posted again, with the last freed buffer");
        assert_eq!(r.accept(64, true), None);
    }

    #[test]
    fn a_page_pool_reuses_its_cache_last_in_first_and_overflows_to_its_ring_in_order() {
        let cache = PAGE_POOL_CACHE as u32;
        let mut r = ring(1, cache + 2, Recycle::PagePool);
        r.posted.clear();
        r.free.clear();
        (0..cache + 2).for_each(|b| r.free_buffer(b));
        // The cache takes the first 128 freed; the last two go to the ring.
        assert_eq!(
            (r.cache.len(), r.free.iter().copied().collect::<Vec<_>>()),
            (PAGE_POOL_CACHE, vec![cache, cache + 1])
        );
        r.refill();
        assert_eq!(r.posted, [cache - 1], "the page the cache took last");
        r.cache.clear();
        r.posted.clear();
        r.refill();
        assert_eq!(r.posted, [cache], "with the cache empty, the ring's oldest");
    }

    #[test]
    fn fifo_pools_circulate_and_lifo_pools_reuse_the_last_freed() {
        for (recycle, expected) in [(Recycle::Fifo, 2), (Recycle::Lifo, 0)] {
            let mut r = ring(2, 4, recycle);
            let first = r.accept(64, true).unwrap();
            r.recycle(first);
            r.accept(64, true);
            // Posted now: [1, x] where x is 2 (oldest free) or 0 (last freed).
            assert_eq!(r.accept(64, true), Some(expected), "{recycle:?}");
        }
    }

    #[test]
    fn a_restart_drops_what_was_not_taken_and_reposts_its_buffers() {
        let mut r = ring(2, 2, Recycle::Fifo);
        write_packets(&mut r, 2);
        // The first is taken and released: only the second goes with the old ring.
        assert!(matches!(r.poll(Time::MAX), Poll::Ready(_)));
        let taken = r.take().unwrap();
        r.release(&taken);
        assert_eq!(r.in_flight_bytes, 64);
        r.restart(Addr(0x9000));
        assert_eq!((r.stats.dropped_packets, r.stats.dropped_bytes, r.in_flight_bytes), (1, 64, 0));
        assert_eq!(r.next_completion_entry(), Addr(0x9000));
        assert_eq!(r.poll(Time::MAX), Poll::Empty);
        assert_eq!(r.accept(64, true), Some(0));
    }

    #[test]
    fn as_a_completion_queue_a_ring_shows_when_its_first_completion_is_visible_and_takes_them_in_order() {
        let mut r = ring(2, 2, Recycle::Fifo);
        r.ready = Signal(4);
        assert_eq!((r.first_visible(), CompletionQueue::ready(&r)), (None, Signal(4)));
        write_packets(&mut r, 2);
        assert_eq!(r.first_visible(), Some(Time::from_ns(10.0)));
        assert_eq!([r.take_first().buffer, r.take_first().buffer], [0, 1]);
        assert_eq!(r.first_visible(), None);
    }

    #[test]
    fn the_registrys_statistics_reset_resets_a_rings_keeping_its_bytes_in_flight() {
        let mut r = ring(2, 2, Recycle::Fifo);
        write_packets(&mut r, 1);
        Queue::reset_stats(&mut r);
        assert_eq!((r.stats.arrived_packets, r.stats.in_flight_bytes_start), (0, 64));
    }

    #[test]
    fn a_transmitted_packet_is_counted_timed_and_recycled() {
        let mut r = ring(1, 1, Recycle::Fifo);
        let buffer = r.accept(64, true).unwrap();
        let c = Completion { buffer, bytes: 64, ready: Time::ZERO, entry: Addr(0), arrival: Time::from_ns(5.0) };
        r.post_tx(&c);
        assert_eq!(r.next_tx_descriptor_addr(), Addr(0x2000));
        let packet = r.pop_tx().unwrap();
        r.transmitted(&packet, Time::from_ns(25.0));
        assert_eq!((r.stats.transmitted_packets, r.stats.transmitted_bytes), (1, 64));
        assert_eq!(r.tx_latency.summary().unwrap().p50, 20.0);
        assert_eq!(r.accept(64, true), Some(0));
    }
}
