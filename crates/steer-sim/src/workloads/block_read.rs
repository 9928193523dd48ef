//! A storage reader on one NVMe queue pair, as an SPDK application runs one: it keeps `depth`
//! block reads outstanding, each into its own buffer, and for each completion it sees, uses the
//! block and submits the next read into the same buffer. It uses a block by scanning every line
//! of it (`scan`: a filter over a table's pages) or by looking a key up in it (`get`: the block is a
//! page of sorted records, a key-value store's leaf; the page's header line, then a binary search
//! over the record lines, each read depending on the one before).

use crate::cpu::{Next, Program, ProgramCx, UnitKind, BLOCK};
use crate::devices::nvme::{PairId, QueuePair, QUEUE_PAIR};
use crate::devices::SystemShape;
use crate::engine::ReportView;
use crate::error::{ensure, ConfigResult, Shown};
use crate::params::{choice, params};
use crate::stats::{stat, Report};
use crate::system::Builder;
use crate::units::{stream_seed, Line, Rng, Time};
use crate::workloads::WorkloadSpec;

choice! {
    /// What the reader does with a block.
    pub enum Access {
        /// Read every line of it.
        Scan,
        /// Look a key up in it: its header line, then a binary search over its record lines.
        Get,
    }
}

params! {
    /// The block reader's parameters.
    pub struct BlockReadSpec {
        /// Name of the NVMe device to read from.
        device: String = "nvme0".to_string(),
        /// Queue pair index on that device; the reader runs on the pair's consumer CPU.
        queue: u32 = 0,
        /// What it does with each block: `scan` or `get`.
        access: Access = Access::Scan,
        /// Cycles a scan spends on each line besides reading it (assumed: a comparison or two).
        cycles_per_line: f64 = 4.0,
        /// Cycles a get spends on each line it reads besides reading it (assumed: a key compared).
        cycles_per_probe: f64 = 20.0,
    }
}

/// The kind's registration.
#[linkme::distributed_slice(crate::workloads::WORKLOADS)]
pub static KIND: crate::workloads::WorkloadKind = crate::workloads::WorkloadKind::of::<BlockReadSpec>(
    "block_read",
    "keep an NVMe queue pair's reads outstanding; scan each block, or look a key up in it, and read the next",
);

impl WorkloadSpec for BlockReadSpec {
    fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_queue(path, &self.device, QUEUE_PAIR, self.queue)?;
        for (name, cycles) in [("cycles_per_line", self.cycles_per_line), ("cycles_per_probe", self.cycles_per_probe)] {
            ensure(cycles >= 0.0 && cycles.is_finite(), &format!("{path}.{name}"), || {
                format!("must be a number of cycles, 0 or more (got {})", Shown(cycles))
            })?;
        }
        Ok(())
    }

    fn cpus(&self, system: &SystemShape) -> Vec<u32> {
        system.queue_cpus(&self.device).get(self.queue as usize).copied().into_iter().collect()
    }

    fn queues(&self, _system: &SystemShape) -> Vec<(String, u32)> {
        vec![(self.device.clone(), self.queue)]
    }

    fn build(&self, b: &mut Builder) {
        let pair = b.queues_of::<QueuePair>(&self.device)[self.queue as usize];
        let cpu = b.queue(pair).consumer_cpu;
        let reader = BlockReader {
            spec: self.clone(),
            pair,
            line_bits: b.platform.line_bits(),
            started: false,
            using: None,
            rng: Rng::new(stream_seed(b.seed, 0x6b6579 + cpu as u64)),
            lines_read: 0,
        };
        b.run_on(cpu, Box::new(reader));
    }
}

stat!(LINES_READ, "lines_read", "lines", "block lines the reader read");

/// `Op::Call` tags: the first `depth` reads are submitted, or the next one after a block.
const SUBMIT_ALL: u32 = 0;
const SUBMIT_NEXT: u32 = 1;

pub struct BlockReader {
    spec: BlockReadSpec,
    pair: PairId,
    line_bits: u32,
    /// The first reads were queued.
    started: bool,
    /// The buffer of the block being used: read into again when its unit reaches the call.
    using: Option<u32>,
    /// Chooses the line a get's key is in.
    rng: Rng,
    lines_read: u64,
}

/// The record lines a binary search over lines `1..lines` of a block reads to find a key in line
/// `key`, in order.
fn probes(lines: u64, key: u64) -> Vec<u64> {
    let (mut low, mut high) = (1, lines);
    let mut read = Vec::new();
    loop {
        let middle = low + (high - low) / 2;
        read.push(middle);
        if middle == key {
            return read;
        }
        if key < middle {
            high = middle;
        } else {
            low = middle + 1;
        }
    }
}

impl Program for BlockReader {
    fn role(&self) -> &'static str {
        "block_read"
    }

    fn unit(&self) -> &'static UnitKind {
        &BLOCK
    }

    fn next(&mut self, cx: &mut ProgramCx) -> Next {
        let bits = self.line_bits;
        if !self.started {
            // The first reads: their commands written into the submission queue, one doorbell.
            let pair = cx.device_queue(self.pair);
            let entries: Vec<Line> = (0..pair.depth as u64).map(|k| pair.submission_entry(k).line(bits)).collect();
            entries.into_iter().for_each(|line| cx.store(line));
            cx.call(SUBMIT_ALL);
            self.started = true;
            return Next::Unit;
        }
        let read = match cx.take_completion(self.pair, Time::ZERO) {
            Ok(read) => read,
            Err(next) => return next,
        };
        let pair = cx.device_queue(self.pair);
        let first = pair.buffer_addr(read.buffer).line(bits).0;
        let lines = (pair.block_bytes >> bits) as u64;
        let next_entry = pair.submission_entry(0).line(bits);
        // The completion entry says which command is done and where its block is.
        cx.load_dependent(read.entry.line(bits));
        match self.spec.access {
            Access::Scan => {
                (first..first + lines).for_each(|line| {
                    cx.load(Line(line));
                });
                cx.drain();
                cx.compute(self.spec.cycles_per_line * lines as f64);
                self.lines_read += lines;
            }
            Access::Get => {
                let key = 1 + self.rng.next_u64() % (lines - 1);
                let search = probes(lines, key);
                for line in std::iter::once(0).chain(search.iter().copied()) {
                    cx.load_dependent(Line(first + line));
                    cx.compute(self.spec.cycles_per_probe);
                }
                self.lines_read += 1 + search.len() as u64;
            }
        }
        // The next read, into the buffer just used.
        cx.store(next_entry);
        cx.call(SUBMIT_NEXT);
        self.using = Some(read.buffer);
        Next::Unit
    }

    fn on_call(&mut self, tag: u32, cx: &mut ProgramCx) {
        let now = cx.now();
        let pair = cx.device_queue(self.pair);
        if tag == SUBMIT_ALL {
            (0..pair.depth).for_each(|buffer| pair.submit(buffer, now));
        } else {
            pair.submit(self.using.take().expect("a block is being used"), now);
        }
        let doorbell = pair.doorbell;
        cx.notify(doorbell);
        if tag == SUBMIT_NEXT {
            cx.count(1);
        }
    }

    fn waiting_for(&self) -> String {
        format!("a block read on {} queue {}", self.spec.device, self.spec.queue)
    }

    fn reset_stats(&mut self) {
        self.lines_read = 0;
    }

    fn report(&self, out: &mut Report, _view: &ReportView) {
        out.put(&LINES_READ, self.lines_read);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{ask, reach_call, Op};
    use crate::devices::nvme::{NvmeQueueSpec, NvmeSpec, PairMemory, PairSignals, PairStats, QueuePairs};
    use crate::devices::placement::PlacementSpec;
    use crate::devices::DeviceSpec;
    use crate::engine::{Harness, Shared, Signal};
    use crate::hierarchy::{Hierarchy, Source};
    use crate::params::Name;
    use crate::testing::{ns, tiny_platform};
    use crate::units::{Addr, Time};

    const READY: Signal = Signal(0);
    const DOORBELL: Signal = Signal(1);
    const SEED: u64 = 7;

    /// A harness on the tiny platform with one queue pair of depth 2 and 512 B blocks (8 lines):
    /// buffers at 0x10_0000, submission queue at 0x1000, completion queue at 0x2000.
    fn pair_harness() -> Harness {
        let mut shared = Shared::new(&tiny_platform(), 0);
        let memory =
            PairMemory { buffers: Addr(0x10_0000), submission_queue: Addr(0x1000), completion_queue: Addr(0x2000) };
        let spec = NvmeQueueSpec { depth: 2, ..NvmeQueueSpec::default() };
        let pair = QueuePair::new(
            "nvme0 queue 0".into(),
            &spec,
            512,
            memory,
            PairSignals { ready: READY, doorbell: DOORBELL },
        );
        shared.get_or_default::<QueuePairs>().add("nvme0", pair);
        Harness::new(shared, 2)
    }

    fn reader(access: Access) -> BlockReader {
        let spec = BlockReadSpec { access, cycles_per_line: 4.0, cycles_per_probe: 20.0, ..BlockReadSpec::default() };
        BlockReader {
            spec,
            pair: PairId(0),
            line_bits: 6,
            started: false,
            using: None,
            rng: Rng::new(SEED),
            lines_read: 0,
        }
    }

    fn pair(h: &mut Harness) -> &mut QueuePair {
        &mut h.shared.get_mut::<QueuePairs>()[0]
    }

    /// The reader's first unit and its call: its reads submitted at 10 ns.
    fn started(access: Access) -> (Harness, BlockReader) {
        let (mut h, mut p) = (pair_harness(), reader(access));
        h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        h.with_cx(ns(10.0), ns(10.0), |cx| reach_call(&mut p, SUBMIT_ALL, cx, ns(10.0)));
        h.notified();
        (h, p)
    }

    /// The device's side: fetches the first read and completes it, seen at `seen`.
    fn complete_one(h: &mut Harness, seen: Time) {
        let pair = pair(h);
        let command = pair.fetch(seen).unwrap();
        let entry = pair.completion_entry();
        pair.complete(command.buffer, command.submitted, entry, seen);
    }

    #[test]
    fn a_binary_search_over_the_record_lines_reads_the_middle_until_the_keys_line() {
        assert_eq!(probes(8, 1), [4, 2, 1]);
        assert_eq!(probes(8, 4), [4]);
        assert_eq!(probes(8, 5), [4, 6, 5]);
        assert_eq!(probes(8, 7), [4, 6, 7]);
        assert_eq!(probes(64, 63), [32, 48, 56, 60, 62, 63]);
        // Past a middle with an odd number of lines above it, the search starts above the middle.
        assert_eq!(probes(10, 8), [5, 8]);
    }

    #[test]
    fn the_first_unit_writes_every_command_and_rings_the_doorbell_once() {
        let (mut h, mut p) = (pair_harness(), reader(Access::Scan));
        let (next, ops, units) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        assert_eq!(next, Next::Unit);
        assert_eq!(ops, [Op::Store(Line(0x1000 >> 6)), Op::Store(Line(0x1040 >> 6)), Op::Call(SUBMIT_ALL)]);
        assert_eq!(units, 0, "no block used yet");
        assert_eq!(h.with_cx(ns(10.0), ns(10.0), |cx| reach_call(&mut p, SUBMIT_ALL, cx, ns(10.0))), 0);
        assert_eq!(h.notified(), [(DOORBELL, ns(10.0))]);
        let pair = pair(&mut h);
        let commands = [pair.fetch(ns(10.0)).unwrap(), pair.fetch(ns(10.0)).unwrap()];
        assert_eq!(
            commands.map(|c| (c.buffer, c.submitted, c.entry.0)),
            [(0, ns(10.0), 0x1000), (1, ns(10.0), 0x1040)]
        );
        assert_eq!(pair.fetch(ns(10.0)), None);
    }

    #[test]
    fn without_a_completion_seen_the_reader_waits_for_one() {
        let (mut h, mut p) = started(Access::Scan);
        assert_eq!(h.with_cx(ns(20.0), ns(20.0), |cx| ask(&mut p, cx, ns(20.0))).0, Next::Wait);
        assert_eq!(h.waits(), [READY]);
        assert_eq!(p.waiting_for(), "a block read on nvme0 queue 0");
        assert_eq!((p.role(), p.unit().count.key), ("block_read", "blocks"), "what results call it and count");
        complete_one(&mut h, ns(50.0));
        assert_eq!(h.with_cx(ns(30.0), ns(30.0), |cx| ask(&mut p, cx, ns(30.0))).0, Next::At(ns(50.0)));
    }

    #[test]
    fn a_scan_reads_the_completion_entry_then_every_line_of_the_block_and_submits_the_next_read() {
        let (mut h, mut p) = started(Access::Scan);
        complete_one(&mut h, ns(50.0));
        let (next, ops, _) = h.with_cx(ns(50.0), ns(50.0), |cx| ask(&mut p, cx, ns(50.0)));
        assert_eq!(next, Next::Unit);
        let block = (0x10_0000 >> 6..(0x10_0000 >> 6) + 8).map(|l| Op::Load(Line(l)));
        let expected: Vec<Op> = [Op::LoadDependent(Line(0x2000 >> 6))]
            .into_iter()
            .chain(block)
            .chain([Op::Drain, Op::Compute(32.0), Op::Store(Line(0x1080 >> 6)), Op::Call(SUBMIT_NEXT)])
            .collect();
        assert_eq!(ops, expected, "the third command goes into the third entry");
        assert_eq!(h.with_cx(ns(90.0), ns(90.0), |cx| reach_call(&mut p, SUBMIT_NEXT, cx, ns(90.0))), 1);
        assert_eq!(h.notified(), [(DOORBELL, ns(90.0))]);
        let pair = pair(&mut h);
        pair.fetch(ns(90.0));
        let again = pair.fetch(ns(90.0)).unwrap();
        assert_eq!((again.buffer, again.submitted, again.entry.0), (0, ns(90.0), 0x1080), "into the block's buffer");
        assert_eq!((pair.stats.consumed_reads, pair.stats.consumed_bytes, p.lines_read), (1, 512, 8));
    }

    #[test]
    fn a_get_reads_the_header_line_then_searches_the_records_each_read_after_the_one_before() {
        let (mut h, mut p) = started(Access::Get);
        complete_one(&mut h, ns(50.0));
        let (_, ops, _) = h.with_cx(ns(50.0), ns(50.0), |cx| ask(&mut p, cx, ns(50.0)));
        let key = 1 + Rng::new(SEED).next_u64() % 7;
        let first = 0x10_0000 >> 6;
        let mut expected = vec![Op::LoadDependent(Line(0x2000 >> 6))];
        for line in std::iter::once(0).chain(probes(8, key)) {
            expected.extend([Op::LoadDependent(Line(first + line)), Op::Compute(20.0)]);
        }
        expected.extend([Op::Store(Line(0x1080 >> 6)), Op::Call(SUBMIT_NEXT)]);
        assert_eq!(ops, expected, "key in line {key}");
        assert_eq!(p.lines_read, 1 + probes(8, key).len() as u64);
        let mut out = Report::root();
        p.report(&mut out, &ReportView { shared: &h.shared, window_start: ns(0.0), now: ns(50.0) });
        assert_eq!(out.finish().0["lines_read"].as_u64(), Some(p.lines_read));
        p.reset_stats();
        assert_eq!(p.lines_read, 0);
    }

    #[test]
    fn the_reader_runs_on_its_queue_pairs_cpu_and_refuses_what_is_not_a_number_of_cycles() {
        let platform = tiny_platform();
        let device =
            NvmeSpec { queues: vec![NvmeQueueSpec { count: 2, ..NvmeQueueSpec::default() }], ..NvmeSpec::default() };
        let shape = SystemShape {
            platform: &platform,
            cpus: 2,
            copy_engines: Vec::new(),
            devices: vec![crate::devices::DeviceShape::of(&device)],
        };
        let second = BlockReadSpec { queue: 1, ..BlockReadSpec::default() };
        assert_eq!((second.validate("workloads.0", &shape), second.cpus(&shape)), (Ok(()), vec![1]));
        assert_eq!(BlockReadSpec::default().cpus(&shape), [0]);
        assert_eq!(second.queues(&shape), [("nvme0".to_string(), 1)]);
        let error = |spec: BlockReadSpec| spec.validate("workloads.0", &shape).unwrap_err().to_string();
        assert_eq!(
            error(BlockReadSpec { queue: 2, ..second.clone() }),
            "workloads.0.queue: device `nvme0` has 2 queue(s)"
        );
        for (bad, shown) in [(-1.0, "-1"), (f64::INFINITY, "inf"), (f64::NAN, "NaN")] {
            assert_eq!(
                error(BlockReadSpec { cycles_per_line: bad, ..second.clone() }),
                format!("workloads.0.cycles_per_line: must be a number of cycles, 0 or more (got {shown})")
            );
            assert_eq!(
                error(BlockReadSpec { cycles_per_probe: bad, ..second.clone() }),
                format!("workloads.0.cycles_per_probe: must be a number of cycles, 0 or more (got {shown})")
            );
        }
        let nic = crate::devices::DeviceShape::rx("nvme0", vec![0]);
        let on_a_nic = SystemShape { devices: vec![nic], ..shape };
        assert_eq!(
            BlockReadSpec::default().validate("workloads.0", &on_a_nic).unwrap_err().to_string(),
            "workloads.0.device: device `nvme0` offers RX queues, not the NVMe queue pairs this workload reads"
        );
    }

    /// The device (one queue pair of depth 2 on CPU 1, 512 B blocks read in 1 µs, a million a
    /// second) and the reader on the tiny platform, run for 20 µs: the reader's demand accesses by
    /// source (indexed like `Source::ALL`) and the pair's statistics and bytes in flight.
    fn run(placement: &str, access: Access) -> ([u64; 6], PairStats, u64) {
        let platform = tiny_platform();
        let device = NvmeSpec {
            block_bytes: 512,
            read_latency_us: 1.0,
            max_read_iops: 1e6,
            placement: PlacementSpec { policy: Name::new(placement), ..PlacementSpec::default() },
            queues: vec![NvmeQueueSpec { depth: 2, consumer_cpu: 1, ..NvmeQueueSpec::default() }],
            ..NvmeSpec::default()
        };
        let mut b = crate::system::Builder::new(&platform, 1);
        device.build(&mut b);
        BlockReadSpec { access, ..BlockReadSpec::default() }.build(&mut b);
        let (mut engine, mut shared) = b.finish(Time::ZERO);
        engine.run_until(&mut shared, ns(20_000.0), &mut |_| true);
        let pair = &shared.get::<QueuePairs>()[0];
        (shared.get::<Hierarchy>().stats.fills[1], pair.stats.clone(), pair.in_flight_bytes)
    }

    #[test]
    fn injected_blocks_are_read_from_the_l2_and_blocks_written_to_memory_from_dram() {
        // The IOPS limit paces the two buffers' reads at one a µs, the first seen some 1.2 µs in
        // (its command written to a cold line, fetched from memory in 100 ns, read in 1 µs): 19
        // by 20 µs. Each takes a load of the completion entry and 8 of the block, and a store of
        // the next command: 171 loads and 19 stores, and the 2 stores of the first commands. The
        // three entries of the submission queue are cold lines the first time (from DRAM), and in
        // the L2 after (the blocks' lines pass through the 16-line L1 in between).
        let (injected, stats, in_flight) = run("l2", Access::Scan);
        assert_eq!((stats.completed_reads, stats.consumed_reads, in_flight), (19, 19, 0));
        assert_eq!(injected, [0, 171 + 18, 0, 0, 0, 3]);
        let (to_memory, stats, _) = run("memory", Access::Scan);
        assert_eq!(stats.consumed_reads, 19);
        assert_eq!(to_memory, [0, 18, 0, 0, 0, 171 + 3]);
        assert_eq!(Source::ALL[1], Source::L2);
    }

    #[test]
    fn every_byte_the_device_wrote_is_consumed_or_still_in_flight() {
        for access in [Access::Scan, Access::Get] {
            let (_, stats, in_flight) = run("memory", access);
            assert_eq!(stats.read_bytes + stats.in_flight_bytes_start, stats.consumed_bytes + in_flight);
            assert_eq!(stats.read_bytes, 512 * stats.completed_reads);
        }
    }
}
