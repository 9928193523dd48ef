//! A user's own packet handler, replayed from its memory trace: for each packet of one RX queue
//! the core replays the accesses the handler made for one packet (recorded with Valgrind's lackey
//! or as din, cut per packet by `steer trace-import`), with the compute between them. A region
//! map (TOML) says which address ranges were the packet's buffer and which the program's own
//! state; the packet's accesses go to the buffer the NIC wrote the packet into, the state's to
//! memory the workload allocates once, so tables and counters persist across packets.
//! `docs/your-code.md` describes both files.

use std::fs;
use std::path::{self, Path};

use serde::Deserialize;

use crate::cpu::{Next, Program, ProgramCx, UnitKind, PACKET};
use crate::devices::ring::{Completion, RingId, RxRing, RX_QUEUE};
use crate::devices::SystemShape;
use crate::engine::ReportView;
use crate::error::{ensure, io_reason, ConfigError, ConfigResult};
use crate::params::{choice, params};
use crate::stats::{stat, Report};
use crate::system::Builder;
use crate::units::{Addr, Line, Time};
use crate::workloads::WorkloadSpec;

choice! {
    /// Which per-packet trace handles a packet.
    pub enum TraceChoice {
        /// The traces in turn, packet after packet.
        RoundRobin,
        /// The trace recorded with the largest packet no larger than the one received (the
        /// smallest trace when every one is larger).
        BySize,
    }
}

params! {
    /// The traced handler's parameters.
    pub struct TraceSpec {
        /// Logical CPU the handler runs on.
        cpu: u32 = 0,
        /// Name of the NIC to receive from.
        device: String = "nic0".to_string(),
        /// RX queue index on that NIC.
        queue: u32 = 0,
        /// Per-packet trace files, their traces in order (a relative path is from the scenario
        /// file's directory).
        traces: Vec<String> = Vec::new(),
        /// The region map: which address ranges of the traces are the packet and which the state
        /// (a relative path is from the scenario file's directory).
        regions: String = String::new(),
        /// How a packet's trace is chosen.
        choose: TraceChoice = TraceChoice::RoundRobin,
        /// Each load waits for its data before the next operation, as in a pointer chase (an upper
        /// bound: a trace does not say which loads depend on which); false: loads overlap up to
        /// the core's miss slots, as an out-of-order core's independent loads do, and the packet
        /// waits for them at its end.
        dependent_loads: bool = false,
    }
}

/// The kind's registration.
#[linkme::distributed_slice(crate::workloads::WORKLOADS)]
pub static KIND: crate::workloads::WorkloadKind = crate::workloads::WorkloadKind::of::<TraceSpec>(
    "trace",
    "replay a user's per-packet memory trace for each packet of an RX queue: packet accesses into its buffer, state persisting",
);

/// What a region of the traced program's address space was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RegionKind {
    /// The buffer the packet was received into: replayed on the buffer the NIC wrote.
    Packet,
    /// The program's own memory (tables, counters, per-flow state), kept across packets.
    State,
}

/// One entry of the region map.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Region {
    name: String,
    kind: RegionKind,
    /// First byte address in the traced run.
    start: u64,
    bytes: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegionMap {
    regions: Vec<Region>,
}

/// What an access of a trace does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AccessKind {
    Load,
    Store,
    /// A load then a store of the same bytes (`x += 1`).
    Modify,
}

/// One operation of a per-packet trace, its address relative to its region.
#[derive(Debug, Clone, Copy, PartialEq)]
enum TraceOp {
    Access { kind: AccessKind, region: usize, offset: u64, bytes: u64 },
    Compute(f64),
}

/// The handling of one packet.
#[derive(Debug, Clone, PartialEq)]
struct PacketTrace {
    /// Bytes of the packet it was recorded with.
    packet_bytes: u32,
    ops: Vec<TraceOp>,
}

/// Largest access one trace line may describe (lackey's are at most a vector register).
const MAX_ACCESS_BYTES: u64 = 4096;

/// The region map and every per-packet trace of `spec`, read and checked; errors name the key
/// below `path`, the file and its line.
fn load(spec: &TraceSpec, path: &str) -> ConfigResult<(Vec<Region>, Vec<PacketTrace>)> {
    let regions_key = format!("{path}.regions");
    ensure(!spec.regions.is_empty(), &regions_key, || "names no region map (a TOML file of [[regions]])".into())?;
    let text = fs::read_to_string(&spec.regions)
        .map_err(|e| ConfigError::new(&regions_key, format!("{}: cannot read: {}", spec.regions, io_reason(&e))))?;
    let map: RegionMap = toml::from_str(&text)
        .map_err(|e| ConfigError::new(&regions_key, format!("{}: {}", spec.regions, e.message())))?;
    check_regions(&map.regions)
        .map_err(|message| ConfigError::new(&regions_key, format!("{}: {message}", spec.regions)))?;
    let traces_key = format!("{path}.traces");
    ensure(!spec.traces.is_empty(), &traces_key, || "names no trace file".into())?;
    let mut traces = Vec::new();
    for file in &spec.traces {
        let text = fs::read_to_string(file)
            .map_err(|e| ConfigError::new(&traces_key, format!("{file}: cannot read: {}", io_reason(&e))))?;
        let parsed = parse_traces(&text, &map.regions)
            .map_err(|(line, message)| ConfigError::new(&traces_key, format!("{file}:{line}: {message}")))?;
        traces.extend(parsed);
    }
    Ok((map.regions, traces))
}

/// Regions must be non-empty, inside 64-bit addresses and disjoint.
fn check_regions(regions: &[Region]) -> Result<(), String> {
    if regions.is_empty() {
        return Err("no [[regions]]".into());
    }
    for (i, r) in regions.iter().enumerate() {
        if r.bytes == 0 || r.start.checked_add(r.bytes).is_none() {
            return Err(format!("region `{}`: bytes must be at least 1 and the range inside 64-bit addresses", r.name));
        }
        if let Some(other) = regions[..i].iter().find(|o| r.start < o.start + o.bytes && o.start < r.start + r.bytes) {
            return Err(format!("regions `{}` and `{}` overlap", other.name, r.name));
        }
    }
    Ok(())
}

/// The per-packet traces of one file (see `docs/your-code.md`); an error is (line, message).
fn parse_traces(text: &str, regions: &[Region]) -> Result<Vec<PacketTrace>, (usize, String)> {
    let mut traces: Vec<(usize, PacketTrace)> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let fields: Vec<&str> = raw.split('#').next().unwrap_or_default().split_whitespace().collect();
        let fail = |message: String| (line, message);
        match fields.as_slice() {
            [] => {}
            ["packet", bytes] => {
                let packet_bytes = bytes
                    .parse()
                    .ok()
                    .filter(|&b| b > 0)
                    .ok_or_else(|| fail(format!("packet size `{bytes}` is not a whole number of bytes above 0")))?;
                traces.push((line, PacketTrace { packet_bytes, ops: Vec::new() }));
            }
            [op, rest @ ..] => {
                let (_, trace) =
                    traces.last_mut().ok_or_else(|| fail("an operation before the first `packet` line".into()))?;
                trace.ops.push(parse_op(op, rest, regions).map_err(fail)?);
            }
        }
    }
    if let Some((line, _)) = traces.iter().find(|(_, t)| !t.ops.iter().any(|op| matches!(op, TraceOp::Access { .. }))) {
        return Err((*line, "this packet's trace is empty (no access)".into()));
    }
    if traces.is_empty() {
        return Err((1, "no per-packet trace (a trace starts with a `packet BYTES` line)".into()));
    }
    Ok(traces.into_iter().map(|(_, t)| t).collect())
}

/// One operation line: `L|S|M ADDRESS BYTES` or `C CYCLES`.
fn parse_op(op: &str, rest: &[&str], regions: &[Region]) -> Result<TraceOp, String> {
    let kind = match (op, rest) {
        ("C", [cycles]) => {
            let cycles: f64 = cycles.parse().map_err(|_| format!("compute cycles `{cycles}` is not a number"))?;
            return if cycles.is_finite() && cycles >= 0.0 {
                Ok(TraceOp::Compute(cycles))
            } else {
                Err(format!("compute cycles `{cycles}` must be a number at least 0"))
            };
        }
        ("L", [_, _]) => AccessKind::Load,
        ("S", [_, _]) => AccessKind::Store,
        ("M", [_, _]) => AccessKind::Modify,
        _ => return Err(format!("expected `L|S|M ADDRESS BYTES`, `C CYCLES` or `packet BYTES` (got `{op}`)")),
    };
    let [address, bytes] = rest else { unreachable!("matched two fields") };
    let addr = u64::from_str_radix(address.trim_start_matches("0x"), 16)
        .map_err(|_| format!("address `{address}` is not hexadecimal"))?;
    let bytes: u64 = bytes
        .parse()
        .ok()
        .filter(|b| (1..=MAX_ACCESS_BYTES).contains(b))
        .ok_or_else(|| format!("access size `{bytes}` must be 1 to {MAX_ACCESS_BYTES} bytes"))?;
    let region = regions
        .iter()
        .position(|r| addr >= r.start && bytes <= r.bytes && addr - r.start <= r.bytes - bytes)
        .ok_or_else(|| format!("access of {bytes} B at 0x{addr:x} is outside every mapped region"))?;
    Ok(TraceOp::Access { kind, region, offset: addr - regions[region].start, bytes })
}

impl WorkloadSpec for TraceSpec {
    fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_cpu(path, self.cpu)?;
        system.check_queue(path, &self.device, RX_QUEUE, self.queue)?;
        load(self, path).map(|_| ())
    }

    fn cpus(&self, _system: &SystemShape) -> Vec<u32> {
        vec![self.cpu]
    }

    fn queues(&self, _system: &SystemShape) -> Vec<(String, u32)> {
        vec![(self.device.clone(), self.queue)]
    }

    fn resolve_paths(&mut self, dir: &Path) {
        for file in self.traces.iter_mut().chain([&mut self.regions]) {
            *file = absolute_from(dir, file);
        }
    }

    fn build(&self, b: &mut Builder) {
        let (regions, traces) = load(self, "").expect("validated");
        let bases = state_bases(b, b.platform.node_of_cpu(self.cpu), &regions);
        let program = TraceReplay::new(
            self.clone(),
            b.queues_of::<RxRing>(&self.device)[self.queue as usize],
            b.platform.line_bits(),
            bases,
            traces,
        );
        b.run_on(self.cpu, Box::new(program));
    }
}

/// `file` as an absolute path, a relative one taken from `dir`; an empty one (no file named) as it is.
fn absolute_from(dir: &Path, file: &str) -> String {
    if file.is_empty() {
        return String::new();
    }
    let joined = dir.join(file);
    path::absolute(&joined).unwrap_or(joined).to_string_lossy().into_owned()
}

/// Where each region lives: a state region in memory of its own on `node`, at the offset in a page
/// it had (so its accesses split into lines as they did); the packet (`None`) in each packet's buffer.
fn state_bases(b: &mut Builder, node: u32, regions: &[Region]) -> Vec<Option<Addr>> {
    regions
        .iter()
        .map(|r| match r.kind {
            RegionKind::Packet => None,
            RegionKind::State => Some(b.alloc(node, r.bytes + 4096).offset(r.start % 4096)),
        })
        .collect()
}

/// Tag of the call that releases the packet at the end of its unit.
const RELEASE: u32 = 0;

stat!(PACKET_LINES, "packet_lines", "lines", "line accesses to the packet's buffer the traces made");
stat!(STATE_LINES, "state_lines", "lines", "line accesses to the program's state the traces made");

pub struct TraceReplay {
    spec: TraceSpec,
    ring: RingId,
    line_bits: u32,
    /// Where each region lives in the simulated system: state at its allocation, the packet
    /// (`None`) in the buffer of the packet being handled.
    bases: Vec<Option<Addr>>,
    traces: Vec<PacketTrace>,
    /// Packets handled, for the round robin.
    handled: u64,
    taken: Option<Completion>,
    packet_lines: u64,
    state_lines: u64,
}

impl TraceReplay {
    fn new(spec: TraceSpec, ring: RingId, line_bits: u32, bases: Vec<Option<Addr>>, traces: Vec<PacketTrace>) -> Self {
        TraceReplay { spec, ring, line_bits, bases, traces, handled: 0, taken: None, packet_lines: 0, state_lines: 0 }
    }

    /// The trace that handles the next packet, of `bytes`.
    fn trace_for(&self, bytes: u32) -> usize {
        match self.spec.choose {
            TraceChoice::RoundRobin => (self.handled % self.traces.len() as u64) as usize,
            TraceChoice::BySize => {
                let fitting = (0..self.traces.len()).filter(|&i| self.traces[i].packet_bytes <= bytes);
                let by_size = |&i: &usize| self.traces[i].packet_bytes;
                // The first of equal sizes: `max_by_key` keeps the last, so look from the end.
                fitting
                    .rev()
                    .max_by_key(by_size)
                    .unwrap_or_else(|| (0..self.traces.len()).min_by_key(by_size).expect("a trace"))
            }
        }
    }
}

impl Program for TraceReplay {
    fn role(&self) -> &'static str {
        "trace"
    }

    fn unit(&self) -> &'static UnitKind {
        &PACKET
    }

    fn next(&mut self, cx: &mut ProgramCx) -> Next {
        let completion = match cx.take_completion(self.ring, Time::ZERO) {
            Ok(completion) => completion,
            Err(next) => return next,
        };
        let bits = self.line_bits;
        let ring = cx.device_queue(self.ring);
        let buffer = ring.buffer_addr(completion.buffer);
        let descriptor = ring.next_descriptor_addr().line(bits);
        // The completion entry says where the packet is: everything after depends on it.
        cx.load_dependent(completion.entry.line(bits));
        let trace = self.trace_for(completion.bytes);
        for op in &self.traces[trace].ops {
            let (kind, region, offset, bytes) = match *op {
                TraceOp::Compute(cycles) => {
                    cx.compute(cycles);
                    continue;
                }
                TraceOp::Access { kind, region, offset, bytes } => (kind, region, offset, bytes),
            };
            let start = self.bases[region].unwrap_or(buffer).offset(offset);
            let (first, last) = (start.line(bits).0, start.offset(bytes - 1).line(bits).0);
            match self.bases[region] {
                None => self.packet_lines += last - first + 1,
                Some(_) => self.state_lines += last - first + 1,
            }
            for line in (first..=last).map(Line) {
                if kind != AccessKind::Store && self.spec.dependent_loads {
                    cx.load_dependent(line);
                } else if kind != AccessKind::Store {
                    cx.load(line);
                }
                if kind != AccessKind::Load {
                    cx.store(line);
                }
            }
        }
        cx.drain();
        // Re-post the buffer: the driver writes its descriptor.
        cx.store(descriptor);
        cx.call(RELEASE);
        self.handled += 1;
        self.taken = Some(completion);
        Next::Unit
    }

    fn on_call(&mut self, _tag: u32, cx: &mut ProgramCx) {
        let completion = self.taken.take().expect("a packet is being handled");
        cx.device_queue(self.ring).release(&completion);
        cx.count(1);
    }

    fn waiting_for(&self) -> String {
        format!("a packet on {} queue {}", self.spec.device, self.spec.queue)
    }

    fn reset_stats(&mut self) {
        self.packet_lines = 0;
        self.state_lines = 0;
    }

    fn report(&self, out: &mut Report, _view: &ReportView) {
        out.put(&PACKET_LINES, self.packet_lines);
        out.put(&STATE_LINES, self.state_lines);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{ask, reach_call, CoreTimer, Cpu, Op};
    use crate::devices::ring::{Recycle, Rings};
    use crate::engine::Agent;
    use crate::hierarchy::{Destination, Hierarchy, Source};
    use crate::testing::{deliver, ns, ring_harness, tiny_platform};

    /// A 2 KiB packet buffer at 0x1000 and a 4 KiB table at 0x8000 in the traced run.
    fn regions() -> Vec<Region> {
        vec![
            Region { name: "buf".into(), kind: RegionKind::Packet, start: 0x1000, bytes: 2048 },
            Region { name: "table".into(), kind: RegionKind::State, start: 0x8000, bytes: 4096 },
        ]
    }

    /// The handling of one packet: read its header, compute, bump a counter, write the header.
    const HANDLER: &str = "packet 64\nL 1000 8\nC 10\nM 0x8040 4 # the counter\nS 1010 2\n";

    /// The replay of `text` with the table at 0x20_0000, on the harness's ring.
    fn program(ring: RingId, text: &str, choose: TraceChoice) -> TraceReplay {
        let spec = TraceSpec { choose, dependent_loads: true, ..TraceSpec::default() };
        let traces = parse_traces(text, &regions()).unwrap();
        TraceReplay::new(spec, ring, 6, vec![None, Some(Addr(0x20_0000))], traces)
    }

    #[test]
    fn a_trace_line_is_an_access_relative_to_its_region_or_compute() {
        let traces = parse_traces(HANDLER, &regions()).unwrap();
        let access = |kind, region, offset, bytes| TraceOp::Access { kind, region, offset, bytes };
        let expected = vec![
            access(AccessKind::Load, 0, 0, 8),
            TraceOp::Compute(10.0),
            access(AccessKind::Modify, 1, 0x40, 4),
            access(AccessKind::Store, 0, 0x10, 2),
        ];
        assert_eq!(traces, [PacketTrace { packet_bytes: 64, ops: expected }]);
    }

    #[test]
    fn each_packet_replays_its_trace_on_its_own_buffer_and_the_one_table() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let mut p = program(ring, HANDLER, TraceChoice::RoundRobin);
        deliver(&mut h, ring, 64, ns(0.0), ns(0.0));
        let (next, ops, _) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        assert_eq!(next, Next::Unit);
        // Buffer 0 at line 0x4000, the counter at 0x20_0040 (line 0x8001), descriptor at 0x1000.
        let expected = [
            Op::LoadDependent(Line(0x3000 >> 6)),
            Op::LoadDependent(Line(0x4000)),
            Op::Compute(10.0),
            Op::LoadDependent(Line(0x8001)),
            Op::Store(Line(0x8001)),
            Op::Store(Line(0x4000)),
            Op::Drain,
            Op::Store(Line(0x1000 >> 6)),
            Op::Call(RELEASE),
        ];
        assert_eq!(ops, expected);
        assert_eq!(h.shared.get_mut::<Rings>()[0].stats.consumed_packets, 0, "released at the end of its unit");
        assert_eq!(h.with_cx(ns(9.0), ns(9.0), |cx| reach_call(&mut p, RELEASE, cx, ns(9.0))), 1);
        assert_eq!(h.shared.get_mut::<Rings>()[0].stats.consumed_packets, 1);
        // The next packet, in buffer 1, touches its own buffer and the same counter.
        deliver(&mut h, ring, 64, ns(10.0), ns(10.0));
        let (_, ops, _) = h.with_cx(ns(10.0), ns(10.0), |cx| ask(&mut p, cx, ns(10.0)));
        assert_eq!((ops[1], ops[3]), (Op::LoadDependent(Line(0x4040)), Op::LoadDependent(Line(0x8001))));
        assert_eq!((p.packet_lines, p.state_lines), (4, 2));
        assert_eq!(p.handled, 2, "each packet moves the round robin on");
    }

    #[test]
    fn an_access_across_a_line_boundary_touches_both_lines() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let mut p = program(ring, "packet 64\nL 103c 8\n", TraceChoice::RoundRobin);
        deliver(&mut h, ring, 64, ns(0.0), ns(0.0));
        let (_, ops, _) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        assert_eq!(ops[1..3], [Op::LoadDependent(Line(0x4000)), Op::LoadDependent(Line(0x4001))]);
    }

    #[test]
    fn an_access_ending_on_a_line_s_last_byte_touches_that_line_only() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let mut p = program(ring, "packet 64\nL 1038 8\n", TraceChoice::RoundRobin);
        deliver(&mut h, ring, 64, ns(0.0), ns(0.0));
        let (_, ops, _) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        assert_eq!(ops[1..3], [Op::LoadDependent(Line(0x4000)), Op::Drain]);
        assert_eq!(p.packet_lines, 1);
    }

    #[test]
    fn without_dependent_loads_the_loads_overlap_until_the_drain() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let mut p = program(ring, HANDLER, TraceChoice::RoundRobin);
        p.spec.dependent_loads = false;
        deliver(&mut h, ring, 64, ns(0.0), ns(0.0));
        let (_, ops, _) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        assert_eq!((ops[1], ops[3]), (Op::Load(Line(0x4000)), Op::Load(Line(0x8001))));
    }

    /// Per-packet traces of packets of 64, 1500 and 512 bytes (a load of line 0, 1 or 2).
    const SIZES: &str = "packet 64\nL 1000 1\npacket 1500\nL 1040 1\npacket 512\nL 1080 1\n";

    #[test]
    fn round_robin_takes_the_traces_in_turn() {
        let mut p = program(RingId(0), SIZES, TraceChoice::RoundRobin);
        let chosen: Vec<usize> = (0..4)
            .map(|_| {
                let t = p.trace_for(64);
                p.handled += 1;
                t
            })
            .collect();
        assert_eq!(chosen, [0, 1, 2, 0]);
    }

    #[test]
    fn by_size_takes_the_largest_trace_no_larger_than_the_packet_else_the_smallest() {
        let p = program(RingId(0), SIZES, TraceChoice::BySize);
        let chosen: Vec<usize> = [64, 511, 512, 1499, 1500, 9000].map(|b| p.trace_for(b)).to_vec();
        assert_eq!(chosen, [0, 0, 2, 2, 1, 1]);
        let small = program(RingId(0), "packet 128\nL 1000 1\npacket 100\nL 1000 1\n", TraceChoice::BySize);
        assert_eq!(small.trace_for(64), 1, "every trace is larger: the smallest");
        let equal = program(RingId(0), "packet 64\nL 1000 1\npacket 64\nL 1000 1\n", TraceChoice::BySize);
        assert_eq!(equal.trace_for(64), 0, "of equal sizes, the first");
    }

    /// A hand-worked packet on the tiny platform (1 GHz, DRAM 100 ns, L2 14 ns, L1 4 ns, a cycle
    /// to issue a line): the NIC injected the packet into the L2, the table is in DRAM.
    #[test]
    fn a_packet_injected_into_the_l2_takes_its_exact_time_and_fills_by_source() {
        let platform = tiny_platform();
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let hierarchy = h.shared.get_mut::<Hierarchy>();
        let nic = hierarchy.register_device("nic0");
        hierarchy.dma_write(nic, Line(0x4000), Destination::L2 { cpu: 0 }, Time::ZERO);
        deliver(&mut h, ring, 64, ns(0.0), ns(0.0));
        let p = program(ring, HANDLER, TraceChoice::RoundRobin);
        let mut cpu = Cpu::new(CoreTimer::on_cpu(0, &platform), vec![Box::new(p)]);
        h.step(&mut cpu, Time::ZERO, Time::MAX);
        // Completion entry from DRAM: issued at 1 ns, data at 101. Header from the L2: 102 + 14 =
        // 116; 10 cycles: 126. Counter from DRAM: 127 + 100 = 227; its store commits on the
        // store port at 228 (an L1 hit), the header's at 229; the drain waits for it: 229. The
        // descriptor's store misses but the core does not wait for it.
        let view = ReportView { shared: &h.shared, window_start: ns(0.0), now: ns(1000.0) };
        let mut out = Report::root();
        cpu.report(&mut out, &view);
        let core = &out.finish().0["cores"]["0"];
        assert_eq!(core["workload"]["exec_ns"].as_f64(), Some(229.0));
        assert_eq!(core["workload"]["packets"].as_u64(), Some(1));
        let fills = &h.shared.get::<Hierarchy>().stats.fills[0];
        // Loads: entry and counter from DRAM, header from the L2; stores: counter and header hit
        // the L1, the descriptor from DRAM.
        assert_eq!((fills[Source::Dram as usize], fills[Source::L2 as usize], fills[Source::L1 as usize]), (3, 1, 2));
        assert_eq!(
            (core["workload"]["state_lines"].as_u64(), core["workload"]["packet_lines"].as_u64()),
            (Some(1), Some(2))
        );
        cpu.reset_stats(ns(1000.0));
        let mut out = Report::root();
        cpu.report(&mut out, &view);
        assert_eq!(out.finish().0["cores"]["0"]["workload"]["packet_lines"].as_u64(), Some(0), "counted per window");
    }

    #[test]
    fn the_table_stays_in_the_core_s_caches_for_the_next_packet() {
        let platform = tiny_platform();
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        deliver(&mut h, ring, 64, ns(0.0), ns(0.0));
        deliver(&mut h, ring, 64, ns(0.0), ns(0.0));
        let p = program(ring, HANDLER, TraceChoice::RoundRobin);
        let mut cpu = Cpu::new(CoreTimer::on_cpu(0, &platform), vec![Box::new(p)]);
        h.step(&mut cpu, Time::ZERO, Time::MAX);
        h.shared.get_mut::<Hierarchy>().reset_stats();
        deliver(&mut h, ring, 64, ns(0.0), ns(0.0));
        h.step(&mut cpu, ns(2000.0), Time::MAX);
        // The third packet: its own buffer from DRAM; the counter and the completion line in L1.
        let fills = &h.shared.get::<Hierarchy>().stats.fills[0];
        assert_eq!(fills[Source::Dram as usize], 1, "only the new buffer's line: {fills:?}");
    }

    #[test]
    fn a_state_region_gets_memory_of_its_own_at_its_offset_in_a_page() {
        let platform = tiny_platform();
        let mut b = Builder::new(&platform, 1);
        let mut map = regions();
        map.push(Region { name: "counter".into(), kind: RegionKind::State, start: 0x9fc8, bytes: 8 });
        // Node 0's memory begins at 1 GiB: the table's two pages (4 KiB at offset 0 in its page,
        // plus a page for the offset), then the counter's, at 0xfc8 in its first page.
        let bases = state_bases(&mut b, 0, &map);
        let gib = 1 << 30;
        assert_eq!(bases, [None, Some(Addr(gib)), Some(Addr(gib + 2 * 4096 + 0xfc8))]);
        assert_eq!(b.alloc(0, 0).0, gib + 4 * 4096);
    }

    /// Runs `scenario` (a TOML text) and returns its result.
    fn run(scenario: &str) -> serde_json::Value {
        let source = crate::ScenarioSource { text: scenario, origin: "test.toml", default_name: "test" };
        crate::run(crate::load(&source, &[]).unwrap(), &mut |_| true).unwrap().value
    }

    #[test]
    fn a_scenario_replays_the_traces_for_each_packet_of_its_queue_under_each_placement() {
        let spec = spec_of("packet 64\nL 1000 8\nC 20\nM 1800 8\n", &format!("{REGIONS}{STATE}"), "scenario");
        let scenario = |policy: &str| {
            format!(
                "platform = \"skylake-sp-6140\"\n[sim]\nwarmup_us = 10.0\nmeasure_us = 50.0\n\
                 [[devices]]\nname = \"nic0\"\nplacement = {{ policy = \"{policy}\" }}\n\
                 [[devices.queues]]\npacket_bytes = 64\noffered_gbps = 1.0\nconsumer_cpu = 1\n\
                 [[workloads]]\nkind = \"trace\"\ncpu = 1\ntraces = [\"{}\"]\nregions = \"{}\"\n",
                spec.traces[0], spec.regions
            )
        };
        for (policy, source) in [("memory", "dram"), ("l2", "l2")] {
            let result = run(&scenario(policy));
            let core = &result["cores"]["1"];
            assert_eq!(core["role"], "trace");
            let packets = core["workload"]["packets"].as_u64().unwrap();
            // 1 Gb/s of 64 B packets for 50 µs: 97 or 98 of them.
            assert!((97..=98).contains(&packets), "{packets}");
            // One state line a packet, counted when its unit starts, the packet when it ends: a
            // unit across either end of the window counts in one of them only.
            let state_lines = core["workload"]["state_lines"].as_u64().unwrap();
            assert!((packets - 1..=packets + 1).contains(&state_lines), "{state_lines} for {packets} packets");
            // Each packet's line comes from where the placement put it, beside its completion
            // entry (four to a line) and its descriptor's line (four to a line).
            let fills = core["fill_counts"][source].as_u64().unwrap();
            assert!(fills >= packets, "{policy}: {fills} fills from {source} for {packets} packets");
        }
    }

    const STATE: &str = "[[regions]]\nname = \"count\"\nkind = \"state\"\nstart = 0x1800\nbytes = 8\n";

    /// Writes `text` to a file of this test's own and returns its path.
    fn file(name: &str, text: &str) -> String {
        let path = std::env::temp_dir().join(format!("steer-trace-{}-{name}", std::process::id()));
        fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    fn spec_of(traces: &str, regions: &str, name: &str) -> TraceSpec {
        TraceSpec {
            traces: vec![file(&format!("{name}.ptrace"), traces)],
            regions: file(&format!("{name}.toml"), regions),
            ..TraceSpec::default()
        }
    }

    const REGIONS: &str = "[[regions]]\nname = \"buf\"\nkind = \"packet\"\nstart = 0x1000\nbytes = 2048\n";

    fn error_of(spec: &TraceSpec) -> String {
        load(spec, "workloads.0").unwrap_err().to_string()
    }

    #[test]
    fn the_files_load_as_regions_and_traces() {
        let spec = spec_of("packet 64\nL 1000 8\n", REGIONS, "good");
        let (regions, traces) = load(&spec, "workloads.0").unwrap();
        assert_eq!((regions.len(), regions[0].kind, traces.len()), (1, RegionKind::Packet, 1));
    }

    #[test]
    fn an_access_outside_every_region_names_the_file_and_line() {
        let spec = spec_of("packet 64\nL 1000 8\nS dead0000 4\n", REGIONS, "outside");
        let file = &spec.traces[0];
        assert_eq!(
            error_of(&spec),
            format!("workloads.0.traces: {file}:3: access of 4 B at 0xdead0000 is outside every mapped region")
        );
        // An access running past its region's end is outside too, however far.
        let spec = spec_of("packet 64\nL ffffffffffffffff 8\n", REGIONS, "far");
        assert!(error_of(&spec).contains(":2: access of 8 B at 0xffffffffffffffff is outside"), "{}", error_of(&spec));
        let spec = spec_of("packet 64\nL 17f8 8\n", REGIONS, "last");
        assert!(load(&spec, "w").is_ok(), "the region's last 8 bytes are inside it");
        let spec = spec_of("packet 64\nL 17fc 8\n", REGIONS, "past");
        assert!(error_of(&spec).contains(":2: access of 8 B at 0x17fc is outside"), "{}", error_of(&spec));
    }

    #[test]
    fn an_empty_per_packet_trace_is_an_error_at_its_packet_line() {
        let spec = spec_of("packet 64\nL 1000 8\npacket 128\nC 100\n", REGIONS, "empty");
        let file = &spec.traces[0];
        assert_eq!(error_of(&spec), format!("workloads.0.traces: {file}:3: this packet's trace is empty (no access)"));
        let spec = spec_of("# nothing\n", REGIONS, "none");
        assert!(error_of(&spec).ends_with(":1: no per-packet trace (a trace starts with a `packet BYTES` line)"));
    }

    #[test]
    fn malformed_lines_are_errors_naming_what_is_wrong() {
        let cases = [
            ("L 1000 8\n", "an operation before the first `packet` line"),
            ("packet 0\n", "packet size `0` is not a whole number of bytes above 0"),
            ("packet 64\nL zz 8\n", "address `zz` is not hexadecimal"),
            ("packet 64\nL 1000 0\n", "access size `0` must be 1 to 4096 bytes"),
            ("packet 64\nL 1000 4097\n", "access size `4097` must be 1 to 4096 bytes"),
            ("packet 64\nC -1\n", "compute cycles `-1` must be a number at least 0"),
            ("packet 64\nC x\n", "compute cycles `x` is not a number"),
            ("packet 64\nX 1000 8\n", "expected `L|S|M ADDRESS BYTES`, `C CYCLES` or `packet BYTES` (got `X`)"),
        ];
        for (text, message) in cases {
            let error = parse_traces(text, &regions()).unwrap_err().1;
            assert_eq!(error, message, "{text:?}");
        }
        assert_eq!(parse_traces("packet 64\n\nC 5\n\nL 1000 1\n", &regions()).unwrap()[0].ops.len(), 2);
    }

    #[test]
    fn a_region_map_must_name_disjoint_non_empty_regions() {
        let traces = "packet 64\nL 1000 8\n";
        let overlap = format!("{REGIONS}[[regions]]\nname = \"t\"\nkind = \"state\"\nstart = 0x17ff\nbytes = 8\n");
        assert!(error_of(&spec_of(traces, &overlap, "overlap")).ends_with("regions `buf` and `t` overlap"));
        let region = |start: u64, bytes: u64| {
            format!("{REGIONS}[[regions]]\nname = \"t\"\nkind = \"state\"\nstart = {start}\nbytes = {bytes}\n")
        };
        assert!(load(&spec_of(traces, &region(0x800, 0x800), "before"), "w").is_ok(), "ends where `buf` starts");
        assert!(load(&spec_of(traces, &region(0x1800, 8), "after"), "w").is_ok(), "starts where `buf` ends");
        assert!(error_of(&spec_of(traces, &region(0xff8, 16), "across")).ends_with("regions `buf` and `t` overlap"));
        let empty = REGIONS.replace("2048", "0");
        assert!(error_of(&spec_of(traces, &empty, "zero")).contains("region `buf`: bytes must be at least 1"));
        assert!(error_of(&spec_of(traces, "regions = []\n", "noregions")).ends_with(": no [[regions]]"));
        let unknown = REGIONS.replace("packet\"", "heap\"");
        assert!(error_of(&spec_of(traces, &unknown, "kind")).starts_with("workloads.0.regions: "));
        let missing = TraceSpec { regions: "/nonexistent/regions.toml".into(), ..spec_of(traces, REGIONS, "gone") };
        assert!(error_of(&missing).starts_with("workloads.0.regions: /nonexistent/regions.toml: cannot read"));
        let unset = TraceSpec { regions: String::new(), ..TraceSpec::default() };
        assert_eq!(error_of(&unset), "workloads.0.regions: names no region map (a TOML file of [[regions]])");
        let no_traces = TraceSpec { traces: Vec::new(), ..spec_of(traces, REGIONS, "notraces") };
        assert_eq!(error_of(&no_traces), "workloads.0.traces: names no trace file");
    }

    #[test]
    fn a_relative_path_is_taken_from_the_directory_given_an_absolute_or_empty_one_kept() {
        let mut spec = TraceSpec {
            traces: vec!["t/a.ptrace".into(), "/data/b.ptrace".into()],
            regions: "r.toml".into(),
            ..TraceSpec::default()
        };
        spec.resolve_paths(Path::new("/scenarios/mine"));
        assert_eq!(spec.traces, ["/scenarios/mine/t/a.ptrace", "/data/b.ptrace"]);
        assert_eq!(spec.regions, "/scenarios/mine/r.toml");
        let mut unset = TraceSpec::default();
        unset.resolve_paths(Path::new("/scenarios"));
        assert_eq!(unset.regions, "", "no region map named: still none");
        let mut here = TraceSpec { regions: "r.toml".into(), ..TraceSpec::default() };
        here.resolve_paths(Path::new(""));
        assert_eq!(Path::new(&here.regions), std::env::current_dir().unwrap().join("r.toml"));
    }

    /// A scenario file in a directory of this test's own, naming its traces relative to itself.
    fn scenario_dir(name: &str, traces: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("steer-trace-{}-{name}", std::process::id()));
        fs::create_dir_all(dir.join("traces")).unwrap();
        fs::write(dir.join("traces/regions.toml"), REGIONS).unwrap();
        fs::write(dir.join("traces/one.ptrace"), "packet 64\nL 1000 8\n").unwrap();
        let scenario = format!(
            "[[devices]]\nname = \"nic0\"\n[[devices.queues]]\nconsumer_cpu = 1\n\
             [[workloads]]\nkind = \"trace\"\ncpu = 1\ntraces = [\"{traces}\"]\nregions = \"traces/regions.toml\"\n"
        );
        fs::write(dir.join("s.toml"), scenario).unwrap();
        dir
    }

    fn load_file(path: &Path) -> Result<crate::Scenario, crate::Error> {
        let text = fs::read_to_string(path).unwrap();
        let origin = path.display().to_string();
        crate::load(&crate::ScenarioSource { text: &text, origin: &origin, default_name: "s" }, &[])
    }

    #[test]
    fn a_scenario_file_s_trace_paths_are_from_its_own_directory() {
        let dir = scenario_dir("relative", "traces/one.ptrace");
        let scenario = load_file(&dir.join("s.toml")).unwrap();
        let resolved = scenario.to_toml();
        let file = dir.join("traces/one.ptrace").display().to_string();
        assert!(resolved.contains(&format!("traces = [\"{file}\"]")), "{resolved}");
        let regions = dir.join("traces/regions.toml").display().to_string();
        assert!(resolved.contains(&format!("regions = \"{regions}\"")), "{resolved}");
    }

    #[test]
    fn a_scenario_from_no_file_takes_its_paths_from_the_directory_steer_runs_in() {
        // A pipe's path (`steer run <(...)`) or a built-in's name is no file to start from.
        let text = fs::read_to_string(scenario_dir("piped", "traces/one.ptrace").join("s.toml")).unwrap();
        let source = crate::ScenarioSource { text: &text, origin: "/dev/fd/63", default_name: "s" };
        let Err(error) = crate::load(&source, &[]) else { panic!("no traces/ here") };
        let message = error.to_string();
        let cwd = std::env::current_dir().unwrap();
        assert!(
            message.contains(&format!(": {}: cannot read", cwd.join("traces/regions.toml").display())),
            "{message}"
        );
    }

    #[test]
    fn a_missing_trace_file_is_one_line_naming_the_key_and_the_file() {
        let dir = scenario_dir("missing", "traces/gone.ptrace");
        let origin = dir.join("s.toml").display().to_string();
        let Err(error) = load_file(&dir.join("s.toml")) else { panic!("refused") };
        let message = error.to_string();
        let file = dir.join("traces/gone.ptrace").display().to_string();
        assert_eq!(
            message,
            format!("{origin}:8:1: workloads.0.traces: {file}: cannot read: No such file or directory")
        );
    }

    #[test]
    fn it_runs_on_its_cpu_and_consumes_its_queue() {
        let platform = tiny_platform();
        let shape = SystemShape {
            platform: &platform,
            cpus: 4,
            copy_engines: Vec::new(),
            devices: vec![crate::devices::DeviceShape::rx("nic0", vec![0; 3])],
        };
        let spec = TraceSpec { cpu: 3, queue: 2, ..TraceSpec::default() };
        assert_eq!((spec.cpus(&shape), spec.queues(&shape)), (vec![3], vec![("nic0".to_string(), 2)]));
    }

    #[test]
    fn a_stalled_replay_says_which_queue_it_waits_on() {
        assert_eq!(program(RingId(0), HANDLER, TraceChoice::RoundRobin).waiting_for(), "a packet on nic0 queue 0");
    }
}
