//! DRAM: NUMA nodes, each with channels that lines are interleaved across. A channel serves one
//! line at a time at its bandwidth; a request that finds it busy waits, so latency rises as the
//! channel saturates. Reads and writes share the channel, as they share a DDR bus.
//!
//! A controller holds a written line in its write queue for `write_queue_ns` before it reaches
//! DRAM; a read of it meanwhile is answered from there.
//!
//! Agents run ahead of each other in simulated time by up to the engine's run-ahead bound and one
//! operation, so requests reach a channel out of time order. A channel
//! therefore books its time in a calendar of fixed slices rather than with one "busy until"
//! mark: a request takes service time in the slice of its own time, or the next slice with room,
//! and a request dated earlier than others is not queued behind them.

use std::collections::VecDeque;

use crate::platform::{MemorySpec, TopologySpec};
use crate::units::{Line, Time};

/// Each NUMA node owns one contiguous 1 TiB slice of the simulated physical address space.
pub const NODE_SPAN_BYTES: u64 = 1 << 40;

#[derive(Debug, Clone, Default)]
pub struct ChannelStats {
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Sum of queueing delays seen by reads (ps), for the mean.
    pub read_queue_ps: u64,
    pub reads: u64,
    /// Reads answered from the write queue (not in `reads`: no DRAM access).
    pub write_queue_reads: u64,
}

impl ChannelStats {
    /// Mean time a read waited for the channel (ns); 0 without reads.
    pub fn mean_read_queue_ns(&self) -> f64 {
        if self.reads == 0 {
            0.0
        } else {
            self.read_queue_ps as f64 / self.reads as f64 / 1000.0
        }
    }
}

/// Width of a calendar slice. Short against DRAM latency, long against one line's service.
const SLICE: Time = Time(64_000);
/// Slices a channel remembers (a 262 µs window); a request dated before the window is not
/// queued (it counts, but books nothing).
const SLICES: u64 = 4096;

struct Channel {
    /// Service time booked in each slice of the window, indexed by slice number mod `SLICES`.
    booked: Vec<Time>,
    /// Number of the window's first slice.
    first: u64,
    /// Lines written and not yet drained to DRAM, with when they were written, oldest first.
    write_queue: VecDeque<(Line, Time)>,
    /// How many entries of `write_queue` fall in each bucket of `bucket_of`: a read whose bucket
    /// is empty needs no search of the queue (most reads: the queue holds few of all lines).
    queued: Box<[u32; BUCKETS]>,
    stats: ChannelStats,
}

const BUCKETS: usize = 256;

fn bucket_of(line: Line) -> usize {
    (line.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize
}

impl Channel {
    fn new() -> Channel {
        Channel {
            booked: vec![Time::ZERO; SLICES as usize],
            first: 0,
            write_queue: VecDeque::new(),
            queued: Box::new([0; BUCKETS]),
            stats: ChannelStats::default(),
        }
    }

    /// Whether `line` is in the write queue, written at or before `now` and not yet drained. The
    /// bucket count only spares the scan when no queued write can be the line.
    fn in_write_queue(&self, line: Line, now: Time, residency: Time) -> bool {
        self.queued[bucket_of(line)] > 0
            && self.write_queue.iter().any(|&(l, at)| l == line && at <= now && now < at + residency)
    }

    fn push_write(&mut self, line: Line, now: Time, horizon: Time) {
        while let Some(&(old, at)) = self.write_queue.front() {
            if at >= horizon {
                break;
            }
            self.queued[bucket_of(old)] -= 1;
            self.write_queue.pop_front();
        }
        self.queued[bucket_of(line)] += 1;
        self.write_queue.push_back((line, now));
    }

    /// Books `service` for a request at `now`; returns how long the request waits. It takes the
    /// first slice from `now`'s with room for it, or, if longer than a slice (a slow channel), the
    /// first run of empty slices that holds it, its rest in the slice after.
    fn book(&mut self, now: Time, service: Time) -> Time {
        let mut slice = now.0 / SLICE.0;
        if slice < self.first {
            return Time::ZERO;
        }
        let index = |s: u64| (s % SLICES) as usize;
        let whole = service.0 / SLICE.0;
        let rest = Time(service.0 % SLICE.0);
        loop {
            self.reach(slice + whole);
            let run_empty = (slice..slice + whole).all(|s| self.booked[index(s)] == Time::ZERO);
            if run_empty && self.booked[index(slice + whole)] + rest <= SLICE {
                let start = Time(slice * SLICE.0) + self.booked[index(slice)];
                for s in slice..slice + whole {
                    self.booked[index(s)] = SLICE;
                }
                self.booked[index(slice + whole)] += rest;
                return start.saturating_sub(now);
            }
            slice += 1;
        }
    }

    /// Slides the window forward so that it holds `slice`, clearing the slices it leaves behind.
    fn reach(&mut self, slice: u64) {
        if slice < self.first + SLICES {
            return;
        }
        let first = slice + 1 - SLICES;
        for old in self.first..first.min(self.first + SLICES) {
            self.booked[(old % SLICES) as usize] = Time::ZERO;
        }
        self.first = first;
    }
}

/// How lines map to channels: its node's slice of the address space, then an XOR-folded
/// interleave so that power-of-two strides still spread across channels (as address hashing does
/// on real parts).
#[derive(Debug, Clone, Copy)]
pub struct Interleave {
    channels_per_node: u64,
    /// log2 of the lines mapped to one channel before the next (a power of two, validated).
    interleave_bits: u32,
    line_bits: u32,
    /// log2 of the lines in one node's slice of the address space.
    node_span_bits: u32,
    last_node: u64,
}

impl Interleave {
    pub fn new(spec: &MemorySpec, topology: &TopologySpec, line_bytes: u32) -> Interleave {
        Interleave {
            channels_per_node: spec.channels_per_node as u64,
            interleave_bits: (spec.interleave_bytes / line_bytes).max(1).trailing_zeros(),
            line_bits: line_bytes.trailing_zeros(),
            node_span_bits: (NODE_SPAN_BYTES / line_bytes as u64).trailing_zeros(),
            last_node: spec.nodes(topology) as u64 - 1,
        }
    }

    /// The channel a line maps to.
    pub fn channel_of(&self, line: Line) -> usize {
        let node = (line.0 >> self.node_span_bits).min(self.last_node);
        let granule = line.0 >> self.interleave_bits;
        let folded = granule ^ (granule >> 7) ^ (granule >> 17);
        (node * self.channels_per_node + folded % self.channels_per_node) as usize
    }

    /// Splits `len` bytes from byte `offset` of channelled node `node` into runs that each lie on
    /// one channel: `each(channel, bytes)` per run, in address order. Offsets past the node's
    /// slice of the address space wrap within it.
    pub fn split(&self, node: u32, offset: u64, len: u64, mut each: impl FnMut(usize, u64)) {
        let granule_bits = self.interleave_bits + self.line_bits;
        let span_mask = (NODE_SPAN_BYTES - 1) as u128;
        let base = (node as u128) << (self.node_span_bits + self.line_bits);
        let (mut at, end) = (offset as u128, offset as u128 + len as u128);
        while at < end {
            let run = ((at >> granule_bits) + 1) << granule_bits;
            let bytes = run.min(end) - at;
            let line = (base | (at & span_mask)) >> self.line_bits;
            each(self.channel_of(Line(line as u64)), bytes as u64);
            at += bytes;
        }
    }
}

/// Bytes read and written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadWrite {
    pub read: u64,
    pub write: u64,
}

impl ReadWrite {
    fn add(&mut self, bytes: u64, write: bool) {
        if write {
            self.write += bytes;
        } else {
            self.read += bytes;
        }
    }
}

/// What bulk transfers (`flows`: DSA copies, a core's copies and scans) read and wrote in memory:
/// per memory node (DDR, then HBM), and per channel of each DDR node by the interleave its lines
/// have (HBM nodes have no channels in the model). Bulk transfers share a node's bandwidth by
/// rate (`flows`) and book no time on the channels of `Memory`, so they neither wait for line
/// requests nor delay them.
#[derive(Debug, Clone, Default)]
pub struct BulkTraffic {
    interleave: Option<Interleave>,
    channels_per_node: u32,
    pub channels: Vec<ReadWrite>,
    pub nodes: Vec<ReadWrite>,
}

impl BulkTraffic {
    pub fn new(platform: &crate::platform::PlatformSpec) -> BulkTraffic {
        let (memory, topology) = (&platform.memory, &platform.topology);
        BulkTraffic {
            interleave: Some(Interleave::new(memory, topology, platform.line_bytes())),
            channels_per_node: memory.channels_per_node,
            channels: vec![ReadWrite::default(); (memory.nodes(topology) * memory.channels_per_node) as usize],
            nodes: vec![ReadWrite::default(); platform.memory_nodes().len()],
        }
    }

    /// `len` bytes from byte `offset` of memory node `node`, read or written (`write`).
    pub fn carry(&mut self, node: u32, offset: u64, len: u64, write: bool) {
        self.nodes[node as usize].add(len, write);
        let channelled = self.channels.len() as u32 / self.channels_per_node.max(1);
        if let Some(interleave) = self.interleave.filter(|_| node < channelled) {
            interleave.split(node, offset, len, |channel, bytes| self.channels[channel].add(bytes, write));
        }
    }

    pub fn reset(&mut self) {
        self.channels.iter_mut().chain(&mut self.nodes).for_each(|c| *c = ReadWrite::default());
    }
}

pub struct Memory {
    channels: Vec<Channel>,
    interleave: Interleave,
    line_bytes: u64,
    /// Time one line occupies a channel.
    service: Time,
    /// Idle read latency minus the channel's own service time.
    base_latency: Time,
    write_queue_residency: Time,
    write_queue_latency: Time,
}

impl Memory {
    pub fn new(spec: &MemorySpec, topology: &TopologySpec, line_bytes: u32) -> Memory {
        let nodes = spec.nodes(topology) as u64;
        let count = nodes * spec.channels_per_node as u64;
        // GB/s = bytes per ns, so a line takes line_bytes / channel_gbs ns.
        let service = Time::from_ns(line_bytes as f64 / spec.channel_gbs);
        Memory {
            channels: (0..count).map(|_| Channel::new()).collect(),
            interleave: Interleave::new(spec, topology, line_bytes),
            line_bytes: line_bytes as u64,
            service,
            base_latency: Time::from_ns(spec.idle_latency_ns).saturating_sub(service),
            write_queue_residency: Time::from_ns(spec.write_queue_ns),
            write_queue_latency: Time::from_ns(spec.write_queue_latency_ns),
        }
    }

    /// The channel a line maps to (`Interleave`).
    pub fn channel_of(&self, line: Line) -> usize {
        self.interleave.channel_of(line)
    }

    fn occupy(&mut self, channel: usize, now: Time) -> Time {
        self.channels[channel].book(now, self.service)
    }

    /// Reads a line; returns its load-to-use latency: from the controller's write queue if the
    /// line is still there (no DRAM access), else idle latency plus queueing.
    pub fn read(&mut self, line: Line, now: Time) -> Time {
        let channel = self.channel_of(line);
        let residency = self.write_queue_residency;
        if self.channels[channel].in_write_queue(line, now, residency) {
            self.channels[channel].stats.write_queue_reads += 1;
            return self.write_queue_latency;
        }
        let wait = self.occupy(channel, now);
        let stats = &mut self.channels[channel].stats;
        stats.read_bytes += self.line_bytes;
        stats.reads += 1;
        stats.read_queue_ps += wait.0;
        self.idle_latency() + wait
    }

    /// The load-to-use latency of a read that finds its channel idle.
    pub fn idle_latency(&self) -> Time {
        self.base_latency + self.service
    }

    /// Writes a line (posted: nobody waits for it, but it occupies the channel).
    pub fn write(&mut self, line: Line, now: Time) {
        let channel = self.channel_of(line);
        self.occupy(channel, now);
        let channel = &mut self.channels[channel];
        channel.stats.write_bytes += self.line_bytes;
        if self.write_queue_residency > Time::ZERO {
            // Requests arrive out of time order by up to the run-ahead bound: drop only lines
            // drained well before this write.
            let horizon = now.saturating_sub(self.write_queue_residency + self.write_queue_residency);
            channel.push_write(line, now, horizon);
        }
    }

    pub fn stats(&self) -> impl Iterator<Item = &ChannelStats> {
        self.channels.iter().map(|c| &c.stats)
    }

    pub fn reset_stats(&mut self) {
        for channel in &mut self.channels {
            channel.stats = ChannelStats::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(channels: u32) -> Memory {
        let spec = MemorySpec {
            channels_per_node: channels,
            channel_gbs: 64.0,
            idle_latency_ns: 100.0,
            interleave_bytes: 256,
            ..MemorySpec::default()
        };
        Memory::new(&spec, &TopologySpec::default(), 64)
    }

    #[test]
    fn idle_read_has_idle_latency_and_queueing_adds_service_time() {
        let mut m = memory(1);
        assert_eq!(m.read(Line(0), Time::ZERO), Time::from_ns(100.0));
        // 64 B at 64 GB/s = 1 ns of service; the second read waits for the first.
        assert_eq!(m.read(Line(1), Time::ZERO), Time::from_ns(101.0));
        m.write(Line(2), Time::ZERO);
        assert_eq!(m.read(Line(3), Time::ZERO), Time::from_ns(103.0));
        let stats: Vec<_> = m.stats().collect();
        assert_eq!((stats[0].read_bytes, stats[0].write_bytes), (192, 64));
    }

    #[test]
    fn a_written_line_answers_reads_until_just_before_its_residency_ends() {
        let spec = MemorySpec {
            channels_per_node: 1,
            write_queue_ns: 500.0,
            write_queue_latency_ns: 40.0,
            ..MemorySpec::default()
        };
        let read_at = |at: f64| {
            let mut m = Memory::new(&spec, &TopologySpec::default(), 64);
            m.write(Line(7), Time::from_ns(200.0));
            m.read(Line(7), Time::from_ns(at))
        };
        assert_eq!(read_at(699.0), Time::from_ns(40.0));
        assert!(read_at(700.0) > Time::from_ns(40.0), "drained at 200 + 500 ns");
    }

    #[test]
    fn a_read_of_a_line_still_in_the_write_queue_is_answered_from_it() {
        let spec = MemorySpec {
            channels_per_node: 1,
            channel_gbs: 64.0,
            idle_latency_ns: 100.0,
            write_queue_ns: 500.0,
            write_queue_latency_ns: 40.0,
            ..MemorySpec::default()
        };
        let mut m = Memory::new(&spec, &TopologySpec::default(), 64);
        m.write(Line(1), Time::ZERO);
        m.write(Line(2), Time::from_ns(200.0));
        // At 499 ns both are queued: answered in 40 ns, no DRAM read. At 600 ns line 1 has been
        // drained: from DRAM. A read dated before the write is not answered by it.
        assert_eq!(m.read(Line(1), Time::from_ns(499.0)), Time::from_ns(40.0));
        assert_eq!(m.read(Line(2), Time::from_ns(600.0)), Time::from_ns(40.0));
        assert_eq!(m.read(Line(1), Time::from_ns(600.0)), Time::from_ns(100.0));
        assert_eq!(m.read(Line(2), Time::from_ns(100.0)), Time::from_ns(100.0));
        let stats: Vec<_> = m.stats().collect();
        assert_eq!((stats[0].reads, stats[0].write_queue_reads, stats[0].read_bytes), (2, 2, 128));
    }

    #[test]
    fn a_request_dated_earlier_is_not_queued_behind_later_ones() {
        let mut m = memory(1);
        for _ in 0..10 {
            m.read(Line(0), Time::from_ns(5120.0));
        }
        assert_eq!(m.read(Line(0), Time::from_ns(100.0)), Time::from_ns(100.0));
        // The 11th request in the same slice waits for the ten before it.
        assert_eq!(m.read(Line(0), Time::from_ns(5120.0)), Time::from_ns(110.0));
    }

    #[test]
    fn a_sliding_window_keeps_what_was_booked_in_the_slices_it_still_holds_and_clears_the_rest() {
        let mut m = memory(1);
        // Ten reads in slice 2 (at 150 ns) and ten in slice 4000 (at 256 us), then one in slice
        // 4100: the 4096-slice window slides to start at slice 5, so slice 4000 and its bookings
        // stay in it, and slice 4098, which takes slice 2's place, starts empty.
        for at in [150.0, 256_000.0] {
            for _ in 0..10 {
                m.read(Line(0), Time::from_ns(at));
            }
        }
        m.read(Line(0), Time::from_ns(262_400.0));
        assert_eq!(m.read(Line(0), Time::from_ns(256_000.0)), Time::from_ns(110.0));
        assert_eq!(m.read(Line(0), Time::from_ns(4098.0 * 64.0)), Time::from_ns(100.0));
    }

    #[test]
    fn an_overloaded_channel_serves_at_its_bandwidth() {
        // 64 B at 64 GB/s = 1 ns each: 1000 reads issued at once finish over ~1000 ns.
        let mut m = memory(1);
        let last = (0..1000).map(|_| m.read(Line(0), Time::ZERO)).last().unwrap();
        assert_eq!(last, Time::from_ns(100.0 + 999.0));
        // Far later, the window has moved on and the channel is idle again.
        assert_eq!(m.read(Line(0), Time::from_ns(1e7)), Time::from_ns(100.0));
        // A request dated before the window is not queued at all.
        assert_eq!(m.read(Line(0), Time::from_ns(10.0)), Time::from_ns(100.0));
    }

    #[test]
    fn a_line_longer_than_a_slice_to_serve_takes_a_run_of_empty_slices() {
        // 64 B at 0.4 GB/s = 160 ns: two whole 64 ns slices and 32 ns of the next.
        let spec =
            MemorySpec { channels_per_node: 1, channel_gbs: 0.4, idle_latency_ns: 200.0, ..MemorySpec::default() };
        let mut m = Memory::new(&spec, &TopologySpec::default(), 64);
        assert_eq!(m.read(Line(0), Time::from_ns(10.0)), Time::from_ns(200.0), "slices 0-2: no wait");
        // Slices 0-2 are taken: the next starts at slice 3 (192 ns), 182 ns after it asked.
        assert_eq!(m.read(Line(0), Time::from_ns(10.0)), Time::from_ns(200.0 + 182.0));
        let channel = &mut m.channels[0];
        // Asked at 128 ns, with slices 2-5 taken in part or whole: from slice 6 (384 ns).
        assert_eq!(channel.book(Time::from_ns(128.0), Time::from_ns(160.0)), Time::from_ns(256.0));
        // A short request still fits the 32 ns left in slice 2.
        assert_eq!(channel.book(Time::from_ns(130.0), Time::from_ns(32.0)), Time::from_ns(30.0));
        let booked: Vec<f64> = channel.booked[..10].iter().map(|t| t.as_ns()).collect();
        assert_eq!(booked, [64.0, 64.0, 64.0, 64.0, 64.0, 32.0, 64.0, 64.0, 32.0, 0.0]);
        // Its rest shares a slice with what is booked there if it fits: 10 + 32 ns in slice 11.
        channel.book(Time::from_ns(704.0), Time::from_ns(10.0));
        assert_eq!(channel.book(Time::from_ns(576.0), Time::from_ns(160.0)), Time::ZERO);
        assert_eq!(channel.booked[11], Time::from_ns(42.0));
        // And not if it does not: with 40 ns in slice 5, a run from slice 3 has no room for its
        // rest, nor one from 4 or 5; it starts at slice 6.
        let channel = &mut Memory::new(&spec, &TopologySpec::default(), 64).channels[0];
        channel.book(Time::from_ns(320.0), Time::from_ns(40.0));
        assert_eq!(channel.book(Time::from_ns(192.0), Time::from_ns(160.0)), Time::from_ns(192.0));
    }

    #[test]
    fn a_line_maps_to_a_channel_of_its_own_node() {
        let spec = MemorySpec { channels_per_node: 4, nodes_per_socket: 1, ..MemorySpec::default() };
        let m = Memory::new(&spec, &TopologySpec { sockets: 3, ..TopologySpec::default() }, 64);
        let node_lines = NODE_SPAN_BYTES / 64;
        for node in 0..3u64 {
            let channels: Vec<usize> = (0..64).map(|i| m.channel_of(Line(node * node_lines + i))).collect();
            assert!(channels.iter().all(|&c| c / 4 == node as usize), "node {node}: {channels:?}");
        }
    }

    #[test]
    fn a_range_splits_over_channels_by_the_interleave_of_its_lines() {
        // 256 B granules over 2 channels: granule g on channel (g ^ g >> 7 ^ g >> 17) % 2.
        // Bytes 128..728 of node 0: 128 B of granule 0 (channel 0), 256 of granule 1 (1), 216 of
        // granule 2 (0).
        let m = memory(2);
        let mut runs = Vec::new();
        m.interleave.split(0, 128, 600, |channel, bytes| runs.push((channel, bytes)));
        assert_eq!(runs, [(0, 128), (1, 256), (0, 216)]);
        // Granule 128 folds bit 7 onto bit 0: channel 1, where a plain modulo would give 0. And
        // node 1's bytes go to its own channels, 2 and 3.
        let two_nodes = Memory::new(
            &MemorySpec { channels_per_node: 2, interleave_bytes: 256, ..MemorySpec::default() },
            &TopologySpec { sockets: 2, ..TopologySpec::default() },
            64,
        );
        runs.clear();
        two_nodes.interleave.split(1, 128 * 256, 512, |channel, bytes| runs.push((channel, bytes)));
        assert_eq!(runs, [(3, 256), (2, 256)]);
        // Every line of a range lies where `channel_of` puts it.
        let mut per_channel = [0u64; 2];
        m.interleave.split(0, 64 * 1000, 64 * 5000, |channel, bytes| per_channel[channel] += bytes);
        let mut by_line = [0u64; 2];
        (1000..6000).for_each(|line| by_line[m.channel_of(Line(line))] += 64);
        assert_eq!(per_channel, by_line);
    }

    #[test]
    fn bulk_traffic_counts_ddr_bytes_per_channel_and_hbm_bytes_per_node() {
        let platform = crate::platform::preset("xeon-max-9468").unwrap();
        let mut traffic = BulkTraffic::new(&platform);
        // 1000 B read at the start of node 0 (granules 0-3: channels 0, 1, 0, 1), written to
        // node 8 (node 0's HBM: no channels).
        traffic.carry(0, 0, 1000, false);
        traffic.carry(8, 0, 1000, true);
        assert_eq!(traffic.channels[..2], [ReadWrite { read: 512, write: 0 }, ReadWrite { read: 488, write: 0 }]);
        assert_eq!(
            (traffic.nodes[0], traffic.nodes[8]),
            (ReadWrite { read: 1000, write: 0 }, ReadWrite { read: 0, write: 1000 })
        );
        assert_eq!(traffic.channels.iter().map(|c| c.read + c.write).sum::<u64>(), 1000);
        traffic.reset();
        assert!(traffic.nodes.iter().chain(&traffic.channels).all(|n| *n == ReadWrite::default()));
    }

    #[test]
    fn sequential_lines_spread_over_channels() {
        let m = memory(4);
        let mut per_channel = [0; 4];
        for line in 0..4096 {
            per_channel[m.channel_of(Line(line))] += 1;
        }
        assert!(per_channel.iter().all(|&n| n == 1024), "{per_channel:?}");
    }
}
