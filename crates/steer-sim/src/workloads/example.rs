//! A template for a new workload kind, kept small and tested: a packet filter that reads the first
//! `lines` lines of each packet of one RX queue (its headers), spends `cycles` deciding, and drops
//! the packet (re-posting its buffer).
//!
//! A workload kind is this one file plus one line in `WORKLOADS` (`workloads/mod.rs`):
//! 1. its parameters, declared with `params!` (each with its meaning and default);
//! 2. a `KIND` constant: the name scenarios use (`kind = "example"`) and a one-line description;
//! 3. `WorkloadSpec`: validation (errors name the key), the CPUs it runs on, the RX queues it
//!    consumes, and `build`, which allocates its memory and puts its program on a CPU;
//! 4. `Program`: `next` decides, at the CPU's current time, what to do next and queues it as
//!    operations (loads, stores, compute, calls back); `on_call` acts at a point of the unit
//!    (here: release the buffer once the packet has been read);
//! 5. its own statistics, declared with `stat!` next to the code, put in `report`.

use crate::cpu::{Next, Program, ProgramCx, UnitKind, PACKET};
use crate::devices::ring::{Completion, RingId, RxRing, RX_QUEUE};
use crate::devices::SystemShape;
use crate::engine::ReportView;
use crate::error::{ensure, ConfigResult};
use crate::params::params;
use crate::stats::{stat, Report};
use crate::system::Builder;
use crate::units::{Line, Time};
use crate::workloads::WorkloadSpec;

params! {
    /// The packet filter's parameters.
    pub struct ExampleSpec {
        /// Logical CPU the filter runs on.
        cpu: u32 = 0,
        /// Name of the NIC to read from.
        device: String = "nic0".to_string(),
        /// RX queue index on that NIC.
        queue: u32 = 0,
        /// Lines read from the start of each packet.
        lines: u32 = 1,
        /// Cycles spent deciding per packet.
        cycles: f64 = 50.0,
    }
}

/// The kind's registration.
#[linkme::distributed_slice(crate::workloads::WORKLOADS)]
pub static KIND: crate::workloads::WorkloadKind = crate::workloads::WorkloadKind::of::<ExampleSpec>(
    "example",
    "a template: a packet filter reading the first `lines` lines of each packet, then dropping it",
);

impl WorkloadSpec for ExampleSpec {
    fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_cpu(path, self.cpu)?;
        system.check_queue(path, &self.device, RX_QUEUE, self.queue)?;
        ensure(self.lines >= 1, &format!("{path}.lines"), || "must be at least 1".into())?;
        ensure(self.cycles >= 0.0, &format!("{path}.cycles"), || "must not be negative".into())
    }

    fn cpus(&self, _system: &SystemShape) -> Vec<u32> {
        vec![self.cpu]
    }

    fn queues(&self, _system: &SystemShape) -> Vec<(String, u32)> {
        vec![(self.device.clone(), self.queue)]
    }

    fn build(&self, b: &mut Builder) {
        let program = Example {
            spec: self.clone(),
            ring: b.queues_of::<RxRing>(&self.device)[self.queue as usize],
            line_bits: b.platform.line_bits(),
            taken: None,
            lines_read: 0,
        };
        b.run_on(self.cpu, Box::new(program));
    }
}

stat!(LINES_READ, "lines_read", "lines", "packet lines the filter read");

pub struct Example {
    spec: ExampleSpec,
    ring: RingId,
    line_bits: u32,
    /// The packet being read; released when its unit reaches the call.
    taken: Option<Completion>,
    lines_read: u64,
}

impl Program for Example {
    fn role(&self) -> &'static str {
        "filter"
    }

    fn unit(&self) -> &'static UnitKind {
        &PACKET
    }

    fn next(&mut self, cx: &mut ProgramCx) -> Next {
        // The next packet, or: come back when one is visible, or sleep until the NIC signals one.
        let completion = match cx.take_completion(self.ring, Time::ZERO) {
            Ok(completion) => completion,
            Err(next) => return next,
        };
        let ring = cx.device_queue(self.ring);
        let first = ring.buffer_addr(completion.buffer).line(self.line_bits).0;
        let packet_lines = (completion.bytes as u64).div_ceil(1 << self.line_bits);
        let lines = packet_lines.min(self.spec.lines as u64);
        // The completion entry says where the packet is; the header lines are read in parallel.
        cx.load_dependent(completion.entry.line(self.line_bits));
        (first..first + lines).for_each(|line| {
            cx.load(Line(line));
        });
        cx.drain();
        cx.compute(self.spec.cycles);
        cx.call(0);
        self.taken = Some(completion);
        self.lines_read += lines;
        Next::Unit
    }

    fn on_call(&mut self, _tag: u32, cx: &mut ProgramCx) {
        let completion = self.taken.take().expect("a packet is being read");
        cx.device_queue(self.ring).release(&completion);
        cx.count(1);
    }

    fn waiting_for(&self) -> String {
        format!("a packet on {} queue {}", self.spec.device, self.spec.queue)
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
    use crate::devices::ring::Recycle;
    use crate::devices::ring::Rings;
    use crate::testing::{deliver, ns, ring_harness, READY};

    #[test]
    fn the_filter_reads_the_first_lines_of_each_packet_and_drops_it() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let spec = ExampleSpec { lines: 2, cycles: 50.0, ..ExampleSpec::default() };
        let mut p = Example { spec, ring, line_bits: 6, taken: None, lines_read: 0 };
        assert_eq!(h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0))).0, Next::Wait);
        assert_eq!(h.waits(), [READY]);
        assert_eq!(p.waiting_for(), "a packet on nic0 queue 0", "what a stall report says it waits for");
        deliver(&mut h, ring, 1500, ns(0.0), ns(10.0));
        assert_eq!(h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(5.0))).0, Next::At(ns(10.0)));
        let (next, ops, _) = h.with_cx(ns(10.0), ns(10.0), |cx| ask(&mut p, cx, ns(10.0)));
        assert_eq!(next, Next::Unit);
        let expected = [
            Op::LoadDependent(Line(0x3000 >> 6)),
            Op::Load(Line(0x4000)),
            Op::Load(Line(0x4001)),
            Op::Drain,
            Op::Compute(50.0),
            Op::Call(0),
        ];
        assert_eq!(ops, expected);
        assert_eq!(h.with_cx(ns(20.0), ns(20.0), |cx| reach_call(&mut p, 0, cx, ns(20.0))), 1);
        assert_eq!((h.shared.get_mut::<Rings>()[0].stats.consumed_packets, p.lines_read), (1, 2));
        let mut out = Report::root();
        p.report(&mut out, &ReportView { shared: &h.shared, window_start: ns(0.0), now: ns(20.0) });
        assert_eq!(out.finish().0["lines_read"].as_u64(), Some(2), "the statistic it declares");
    }
}
