//! A receive loop: poll the completion ring, read the packet, copy it into a reused application
//! buffer, release the RX buffer (re-posting its descriptor).

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
    /// The receive loop's parameters.
    pub struct RxLoopSpec {
        /// Logical CPU the loop runs on.
        cpu: u32 = 0,
        /// Name of the NIC to receive from.
        device: String = "nic0".to_string(),
        /// RX queue index on that NIC.
        queue: u32 = 0,
        /// Bytes of the reused application buffer packets are copied into (cycled through).
        app_buffer_bytes: u64 = 65536,
        /// Copy each packet into the application buffer (false: read it in place).
        copy: bool = true,
        /// Compute cycles per packet besides the memory accesses (protocol and bookkeeping work).
        compute_cycles_per_packet: f64 = 300.0,
    }
}

/// The kind's registration.
#[linkme::distributed_slice(crate::workloads::WORKLOADS)]
pub static KIND: crate::workloads::WorkloadKind = crate::workloads::WorkloadKind::of::<RxLoopSpec>(
    "rx_loop",
    "poll an RX queue's completions, read each packet, copy it to an application buffer, release",
);

impl WorkloadSpec for RxLoopSpec {
    fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_cpu(path, self.cpu)?;
        system.check_queue(path, &self.device, RX_QUEUE, self.queue)?;
        ensure(self.app_buffer_bytes >= 64, &format!("{path}.app_buffer_bytes"), || "must be at least 64".into())?;
        ensure(self.compute_cycles_per_packet >= 0.0, &format!("{path}.compute_cycles_per_packet"), || {
            "must not be negative".into()
        })
    }

    fn cpus(&self, _system: &SystemShape) -> Vec<u32> {
        vec![self.cpu]
    }

    fn queues(&self, _system: &SystemShape) -> Vec<(String, u32)> {
        vec![(self.device.clone(), self.queue)]
    }

    fn build(&self, b: &mut Builder) {
        let line_bits = b.platform.line_bits();
        let node = b.platform.node_of_cpu(self.cpu);
        let app_buffer = b.alloc(node, self.app_buffer_bytes).line(line_bits);
        let program = RxLoop {
            ring: b.queues_of::<RxRing>(&self.device)[self.queue as usize],
            app_buffer,
            app_lines: (self.app_buffer_bytes >> line_bits).max(1),
            app_cursor: 0,
            line_bits,
            bytes: 0,
            taken: None,
            spec: self.clone(),
        };
        b.run_on(self.cpu, Box::new(program));
    }
}

/// Tag of the call that releases the packet at the end of its unit.
const RELEASE: u32 = 0;

stat!(GOODPUT, "goodput_gbps", "Gb/s", "payload received by the loop");

pub struct RxLoop {
    spec: RxLoopSpec,
    ring: RingId,
    app_buffer: Line,
    app_lines: u64,
    app_cursor: u64,
    line_bits: u32,
    bytes: u64,
    /// The packet being processed, released at the end of its unit.
    taken: Option<Completion>,
}

impl Program for RxLoop {
    fn role(&self) -> &'static str {
        "rx_loop"
    }

    fn unit(&self) -> &'static UnitKind {
        &PACKET
    }

    fn next(&mut self, cx: &mut ProgramCx) -> Next {
        let completion = match cx.take_completion(self.ring, Time::ZERO) {
            Ok(completion) => completion,
            Err(next) => return next,
        };
        let ring = cx.device_queue(self.ring);
        let buffer = ring.buffer_addr(completion.buffer);
        let descriptor = ring.next_descriptor_addr().line(self.line_bits);
        // The completion entry says where the packet is: everything after depends on it.
        cx.load_dependent(completion.entry.line(self.line_bits));
        let first = buffer.line(self.line_bits).0;
        let last = buffer.offset(completion.bytes as u64 - 1).line(self.line_bits).0;
        for line in first..=last {
            cx.load(Line(line));
            if self.spec.copy {
                cx.store(Line(self.app_buffer.0 + self.app_cursor));
                self.app_cursor = (self.app_cursor + 1) % self.app_lines;
            }
        }
        cx.drain();
        cx.compute(self.spec.compute_cycles_per_packet);
        // Re-post the buffer: the driver writes its descriptor.
        cx.store(descriptor);
        cx.call(RELEASE);
        self.taken = Some(completion);
        Next::Unit
    }

    fn on_call(&mut self, _tag: u32, cx: &mut ProgramCx) {
        let completion = self.taken.take().expect("a packet is being processed");
        cx.device_queue(self.ring).release(&completion);
        self.bytes += completion.bytes as u64;
        cx.count(1);
    }

    fn waiting_for(&self) -> String {
        format!("a packet on {} queue {}", self.spec.device, self.spec.queue)
    }

    fn reset_stats(&mut self) {
        self.bytes = 0;
    }

    fn report(&self, out: &mut Report, view: &ReportView) {
        out.put(&GOODPUT, self.bytes as f64 * 8.0 / view.window_ns());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{ask, reach_call, Op};
    use crate::devices::ring::Recycle;
    use crate::devices::ring::Rings;
    use crate::testing::{deliver, ns, ring_harness, READY};

    fn program(ring: RingId, copy: bool) -> RxLoop {
        let spec = RxLoopSpec { copy, compute_cycles_per_packet: 300.0, ..RxLoopSpec::default() };
        // A 2-line application buffer at line 0x800.
        RxLoop { spec, ring, app_buffer: Line(0x800), app_lines: 2, app_cursor: 0, line_bits: 6, bytes: 0, taken: None }
    }

    #[test]
    fn a_stalled_loop_says_which_queue_it_waits_on() {
        let p = program(RingId(0), true);
        assert_eq!(p.waiting_for(), format!("a packet on {} queue {}", p.spec.device, p.spec.queue));
        assert!(!p.spec.device.is_empty());
    }

    #[test]
    fn it_waits_for_a_completion_then_until_it_is_visible() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let mut p = program(ring, true);
        let (next, ops, _) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        assert_eq!((next, ops.len()), (Next::Wait, 0));
        assert_eq!(h.waits(), [READY]);
        deliver(&mut h, ring, 150, ns(10.0), ns(300.0));
        let (next, ops, _) = h.with_cx(ns(20.0), ns(20.0), |cx| ask(&mut p, cx, ns(299.0)));
        assert_eq!((next, ops.len()), (Next::At(ns(300.0)), 0));
    }

    #[test]
    fn a_packet_is_read_line_by_line_copied_and_released_at_the_end_of_its_unit() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let mut p = program(ring, true);
        // 150 B at buffer 0 (line 0x4000): lines 0x4000..=0x4002; completion entry at 0x3000.
        let c = deliver(&mut h, ring, 150, ns(10.0), ns(300.0));
        let (next, ops, units) = h.with_cx(ns(300.0), ns(300.0), |cx| ask(&mut p, cx, ns(300.0)));
        assert_eq!((next, units), (Next::Unit, 0));
        let expected = [
            Op::LoadDependent(Line(0x3000 >> 6)),
            Op::Load(Line(0x4000)),
            Op::Store(Line(0x800)),
            Op::Load(Line(0x4001)),
            Op::Store(Line(0x801)),
            Op::Load(Line(0x4002)),
            Op::Store(Line(0x800)),
            Op::Drain,
            Op::Compute(300.0),
            // The descriptor the buffer is re-posted to: slot 0 of the ring at 0x1000.
            Op::Store(Line(0x1000 >> 6)),
            Op::Call(RELEASE),
        ];
        assert_eq!(ops, expected);
        assert_eq!(
            h.shared.get_mut::<Rings>()[0].stats.consumed_packets,
            0,
            "released only when the unit reaches its call"
        );
        let units = h.with_cx(ns(500.0), ns(500.0), |cx| reach_call(&mut p, RELEASE, cx, ns(500.0)));
        assert_eq!(units, 1);
        let r = &h.shared.get::<Rings>()[0];
        assert_eq!((r.stats.consumed_packets, r.stats.consumed_bytes, r.in_flight_bytes), (1, 150, 0));
        assert_eq!(p.bytes, 150);
        // The buffer went back to the ring: four descriptors are posted again, buffer 0 last.
        let rings = &mut h.shared.get_mut::<Rings>()[0];
        let taken: Vec<u32> = (0..4).map(|_| rings.accept(64, true).unwrap()).collect();
        assert_eq!(taken, [1, 2, 3, c.buffer]);
    }

    #[test]
    fn without_copy_the_packet_is_only_read() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let mut p = program(ring, false);
        deliver(&mut h, ring, 64, ns(0.0), ns(0.0));
        let (_, ops, _) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        assert!(!ops.iter().any(|op| matches!(op, Op::Store(Line(0x800)))));
        assert_eq!(ops.iter().filter(|op| matches!(op, Op::Load(_))).count(), 1);
    }

    #[test]
    fn goodput_is_the_bytes_over_the_window() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let mut p = program(ring, true);
        deliver(&mut h, ring, 1000, ns(0.0), ns(0.0));
        h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        h.with_cx(ns(0.0), ns(0.0), |cx| reach_call(&mut p, RELEASE, cx, ns(0.0)));
        let view = ReportView { shared: &h.shared, window_start: ns(0.0), now: ns(8000.0) };
        let mut out = Report::root();
        p.report(&mut out, &view);
        assert_eq!(out.finish().0["goodput_gbps"], 1.0);
        p.reset_stats();
        assert_eq!(p.bytes, 0);
    }
}
