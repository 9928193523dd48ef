//! A producer/consumer pair on two cores passing one cache line back and forth (the handoff and
//! producer/consumer probes of `steer validate`): each side waits until the line holds the value
//! that makes it its turn, reads it, writes the next value and so hands the line to the other
//! core. A round trip is two transfers of a written line between the cores' caches. With a buffer,
//! the starting side (the producer) writes every line of it before handing over, and the answering
//! side (the consumer) reads every line of it before answering: the pattern of a receive path.

use std::cell::Cell;
use std::rc::Rc;

use crate::cpu::{Next, Program, ProgramCx, UnitKind, ROUND_TRIP};
use crate::devices::SystemShape;
use crate::engine::{ReportView, Signal};
use crate::error::{ensure, ConfigResult};
use crate::params::params;
use crate::stats::{stat, Report};
use crate::system::Builder;
use crate::units::Line;
use crate::workloads::WorkloadSpec;

params! {
    /// The pair's parameters.
    pub struct HandoffSpec {
        /// Logical CPU that starts each round trip.
        cpu: u32 = 0,
        /// Logical CPU that answers.
        peer_cpu: u32 = 1,
        /// Bytes of the buffer the starting CPU writes and the answering one reads each round trip
        /// (0: the line of the flag alone).
        buffer_bytes: u64 = 0,
    }
}

/// The largest buffer a pair may pass.
const MAX_BUFFER: u64 = 1 << 30;

/// The kind's registration.
#[linkme::distributed_slice(crate::workloads::WORKLOADS)]
pub static KIND: crate::workloads::WorkloadKind = crate::workloads::WorkloadKind::of::<HandoffSpec>(
    "handoff",
    "two cores passing one written cache line back and forth (core-to-core round trip)",
);

stat!(NS_PER_ROUND_TRIP, "ns_per_round_trip", "ns", "measured window divided by the round trips completed in it");

impl WorkloadSpec for HandoffSpec {
    fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_cpu(path, self.cpu)?;
        system.check_cpu(&format!("{path}.peer"), self.peer_cpu)?;
        ensure(self.peer_cpu != self.cpu, &format!("{path}.peer_cpu"), || {
            format!("must differ from cpu ({}): the line passes between two CPUs", self.cpu)
        })?;
        ensure(self.buffer_bytes <= MAX_BUFFER, &format!("{path}.buffer_bytes"), || {
            format!("must be at most 1 GiB (got {})", self.buffer_bytes)
        })
    }

    fn cpus(&self, _system: &SystemShape) -> Vec<u32> {
        vec![self.cpu, self.peer_cpu]
    }

    fn build(&self, b: &mut Builder) {
        let line_bits = b.platform.line_bits();
        let node = b.platform.node_of_cpu(self.cpu);
        let flag = b.alloc(node, 1 << line_bits).line(line_bits);
        let buffer_lines = self.buffer_bytes.div_ceil(1 << line_bits);
        // No buffer takes no memory.
        let buffer = b.alloc(node, self.buffer_bytes).line(line_bits);
        let value = Rc::new(Cell::new(0));
        let (starter, answerer) = (b.signal(), b.signal());
        let side = |parity, me, peer| Side {
            flag,
            buffer: (buffer, buffer_lines),
            value: value.clone(),
            parity,
            me,
            peer,
            round_trips: 0,
        };
        b.run_on(self.cpu, Box::new(side(0, starter, answerer)));
        b.run_on(self.peer_cpu, Box::new(side(1, answerer, starter)));
    }
}

/// One side of the pair.
pub struct Side {
    flag: Line,
    /// The buffer's first line and its lines.
    buffer: (Line, u64),
    /// The value the line holds.
    value: Rc<Cell<u64>>,
    /// It is this side's turn while the value has this parity.
    parity: u64,
    /// Notified when the other side hands the line over.
    me: Signal,
    peer: Signal,
    round_trips: u64,
}

/// The `Op::Call` tag: the new value is written.
const HANDED: u32 = 0;

impl Program for Side {
    fn role(&self) -> &'static str {
        if self.parity == 0 {
            "handoff"
        } else {
            "handoff-peer"
        }
    }

    fn unit(&self) -> &'static UnitKind {
        &ROUND_TRIP
    }

    fn next(&mut self, cx: &mut ProgramCx) -> Next {
        if self.value.get() % 2 != self.parity {
            cx.wait_on(self.me);
            return Next::Wait;
        }
        cx.load_dependent(self.flag);
        let (first, lines) = self.buffer;
        for k in 0..lines {
            let line = Line(first.0 + k);
            if self.parity == 0 {
                cx.store(line);
            } else {
                cx.load(line);
            }
        }
        // The consumer answers once it has read the buffer.
        if self.parity == 1 && lines > 0 {
            cx.drain();
        }
        cx.store(self.flag);
        // The other core sees the new value once the store has left the store buffer.
        cx.drain();
        cx.call(HANDED);
        Next::Unit
    }

    fn on_call(&mut self, _tag: u32, cx: &mut ProgramCx) {
        self.value.set(self.value.get() + 1);
        self.round_trips += 1;
        cx.count(1);
        cx.notify(self.peer);
    }

    fn waiting_for(&self) -> String {
        "the other core to hand the line back".into()
    }

    fn reset_stats(&mut self) {
        self.round_trips = 0;
    }

    fn report(&self, out: &mut Report, view: &ReportView) {
        if self.round_trips > 0 {
            out.put(&NS_PER_ROUND_TRIP, view.window_ns() / self.round_trips as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{ask, reach_call, Op};
    use crate::devices::ring::Recycle;
    use crate::testing::{ns, ring_harness};

    fn pair() -> (Side, Side) {
        let value = Rc::new(Cell::new(0));
        let side = |parity, me, peer| Side {
            flag: Line(0x40),
            buffer: (Line(0x80), 0),
            value: value.clone(),
            parity,
            me,
            peer,
            round_trips: 0,
        };
        (side(0, Signal(2), Signal(3)), side(1, Signal(3), Signal(2)))
    }

    #[test]
    fn with_a_buffer_the_producer_writes_it_and_the_consumer_reads_it_before_handing_over() {
        let (mut h, _) = ring_harness(1, 1, Recycle::Fifo);
        let (mut a, mut b) = pair();
        a.buffer = (Line(0x80), 2);
        b.buffer = (Line(0x80), 2);
        let (_, ops, _) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut a, cx, ns(0.0)));
        let flag = Line(0x40);
        let (first, second) = (Line(0x80), Line(0x81));
        assert_eq!(
            ops,
            [
                Op::LoadDependent(flag),
                Op::Store(first),
                Op::Store(second),
                Op::Store(flag),
                Op::Drain,
                Op::Call(HANDED)
            ]
        );
        h.with_cx(ns(7.0), ns(7.0), |cx| reach_call(&mut a, HANDED, cx, ns(7.0)));
        let (_, ops, _) = h.with_cx(ns(7.0), ns(7.0), |cx| ask(&mut b, cx, ns(7.0)));
        assert_eq!(
            ops,
            [
                Op::LoadDependent(flag),
                Op::Load(first),
                Op::Load(second),
                Op::Drain,
                Op::Store(flag),
                Op::Drain,
                Op::Call(HANDED)
            ]
        );
    }

    #[test]
    fn a_buffer_up_to_1_gib_is_accepted() {
        let platform = crate::testing::tiny_platform();
        let shape = SystemShape { platform: &platform, cpus: 2, copy_engines: Vec::new(), devices: Vec::new() };
        let spec = |buffer_bytes| HandoffSpec { buffer_bytes, ..HandoffSpec::default() };
        assert!(spec(64 << 10).validate("w", &shape).is_ok());
        assert!(spec(1 << 30).validate("w", &shape).is_ok());
        let refused = spec((1 << 30) + 1).validate("w", &shape).unwrap_err().to_string();
        assert!(refused.contains("w.buffer_bytes: must be at most 1 GiB"), "{refused}");
    }

    #[test]
    fn a_buffer_takes_lines_after_the_flags() {
        let platform = crate::testing::tiny_platform();
        let mut b = Builder::new(&platform, 1);
        HandoffSpec { buffer_bytes: 100, ..HandoffSpec::default() }.build(&mut b);
        // The flag's page, then the buffer's: the next allocation starts on the third page.
        assert_eq!(b.alloc(0, 64).0, (1 << 30) + 2 * 4096);
    }

    #[test]
    fn the_flag_takes_a_line_of_its_own() {
        let platform = crate::testing::tiny_platform();
        let mut b = Builder::new(&platform, 1);
        HandoffSpec::default().build(&mut b);
        // Node 0's memory begins at 1 GiB; the flag's line took its first 4 KiB page.
        assert_eq!(b.alloc(0, 64).0, (1 << 30) + 4096);
    }

    #[test]
    fn a_stalled_side_says_it_waits_for_the_line() {
        assert_eq!(pair().0.waiting_for(), "the other core to hand the line back");
    }

    #[test]
    fn each_side_reads_writes_and_hands_over_in_turn() {
        let (mut h, _) = ring_harness(1, 1, Recycle::Fifo);
        let (mut a, mut b) = pair();
        let (next, ops, _) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut b, cx, ns(0.0)));
        assert_eq!((next, ops), (Next::Wait, vec![]), "the answerer waits for the first handoff");
        assert_eq!(h.waits(), [Signal(3)]);
        let (next, ops, _) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut a, cx, ns(0.0)));
        assert_eq!(next, Next::Unit);
        assert_eq!(ops, [Op::LoadDependent(Line(0x40)), Op::Store(Line(0x40)), Op::Drain, Op::Call(HANDED)]);
        let units = h.with_cx(ns(7.0), ns(7.0), |cx| reach_call(&mut a, HANDED, cx, ns(7.0)));
        assert_eq!(units, 1);
        assert_eq!(h.notified(), [(Signal(3), ns(7.0))], "the answerer is woken when the value is written");
        let (next, _, _) = h.with_cx(ns(7.0), ns(7.0), |cx| ask(&mut a, cx, ns(7.0)));
        assert_eq!(next, Next::Wait, "then the starter waits");
        let (next, ops, _) = h.with_cx(ns(7.0), ns(7.0), |cx| ask(&mut b, cx, ns(7.0)));
        assert_eq!(next, Next::Unit, "and it is the answerer's turn");
        // Without a buffer it has nothing to wait for before it writes.
        assert_eq!(ops, [Op::LoadDependent(Line(0x40)), Op::Store(Line(0x40)), Op::Drain, Op::Call(HANDED)]);
    }

    #[test]
    fn the_round_trip_time_is_the_window_over_the_round_trips() {
        let (mut a, _) = pair();
        a.round_trips = 4;
        let shared = crate::engine::Shared::empty();
        let view = ReportView { shared: &shared, window_start: ns(100.0), now: ns(1100.0) };
        let mut out = Report::root();
        a.report(&mut out, &view);
        assert_eq!(out.finish().0["ns_per_round_trip"], 250.0);
        a.reset_stats();
        let mut out = Report::root();
        a.report(&mut out, &view);
        assert!(out.finish().0.get("ns_per_round_trip").is_none(), "nothing measured, nothing reported");
    }
}
