//! Ping-pong latency (eflatency, sfnt-pingpong over Onload): the application busy-polls an event
//! queue, optionally reads the message (and copies it, as Onload does), and replies at once. The
//! peer behaves the same, so each message arrives one host turnaround and two one-way paths after
//! the previous reply: the program asks its NIC's closed queue for that arrival. Reports the half
//! round-trip latency.

use crate::cpu::{Next, Program, ProgramCx, UnitKind, MESSAGE};
use crate::devices::ring::{Completion, RingId, RxRing, RX_QUEUE};
use crate::devices::SystemShape;
use crate::engine::ReportView;
use crate::error::{ensure, ConfigResult};
use crate::params::params;
use crate::stats::{stat, Distribution, Report};
use crate::system::Builder;
use crate::units::{Line, Time};
use crate::workloads::WorkloadSpec;

/// The largest message: an IP datagram's 64 KiB.
const MAX_MESSAGE_BYTES: u64 = 65536;

params! {
    /// The ping-pong's parameters; the NIC queue it uses must have `arrival = "closed"`.
    pub struct PingPongSpec {
        /// Logical CPU the application runs on (and polls from).
        cpu: u32 = 0,
        /// Name of the NIC.
        device: String = "nic0".to_string(),
        /// RX queue index on that NIC.
        queue: u32 = 0,
        /// Payload bytes per message.
        payload_bytes: u32 = 64,
        /// Protocol headers before the payload (Ethernet 14 + IPv4 20 + UDP 8).
        header_bytes: u32 = 42,
        /// Read the message after its event (eflatency "ReadData"); false: events only.
        read_data: bool = true,
        /// The event is a word written with the frame, inside its first line (X4 express
        /// datapath, Onload `efct`): the poll that finds it reads that line, fetched together with
        /// the frame's other lines.
        /// false: a separate event-queue entry is polled, then the data read.
        poll_in_payload: bool = false,
        /// Copy the payload into the application's buffer (Onload delivering to the socket user).
        copy: bool = false,
        /// Cycles of protocol processing per message (Onload's stack); 0 for raw ef_vi.
        stack_cycles: f64 = 0.0,
        /// Time to hand the reply to the NIC (CTPIO writes the frame straight to the NIC).
        /// Assumed: ~250 ns for a small frame over PCIe.
        tx_ns: f64 = 250.0,
        /// One-way time outside the hosts' memory systems: both NICs' pipelines and the wire.
        /// Assumed: ~500 ns for a 10 GbE link with cut-through NICs.
        one_way_ns: f64 = 500.0,
    }
}

/// The kind's registration.
#[linkme::distributed_slice(crate::workloads::WORKLOADS)]
pub static KIND: crate::workloads::WorkloadKind = crate::workloads::WorkloadKind::of::<PingPongSpec>(
    "pingpong",
    "ping-pong latency (eflatency, sfnt-pingpong): poll, read, reply; needs a closed NIC queue",
);

impl WorkloadSpec for PingPongSpec {
    fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_cpu(path, self.cpu)?;
        system.check_queue(path, &self.device, RX_QUEUE, self.queue)?;
        let bytes = self.header_bytes as u64 + self.payload_bytes as u64;
        ensure((1..=MAX_MESSAGE_BYTES).contains(&bytes), &format!("{path}.payload_bytes"), || {
            format!("a message has 1 B to 64 KiB, headers included (got {bytes})")
        })?;
        ensure(self.tx_ns >= 0.0, &format!("{path}.tx_ns"), || "must not be negative".into())?;
        ensure(self.one_way_ns >= 0.0, &format!("{path}.one_way_ns"), || "must not be negative".into())
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
        let bytes = self.header_bytes + self.payload_bytes;
        let app_buffer = b.alloc(node, bytes as u64).line(line_bits);
        let program = PingPong {
            ring: b.queues_of::<RxRing>(&self.device)[self.queue as usize],
            line_bits,
            app_buffer,
            started: false,
            taken: None,
            half_rtt: Distribution::default(),
            spec: self.clone(),
        };
        b.run_on(self.cpu, Box::new(program));
    }
}

stat!(HALF_RTT, "half_rtt_ns", "ns", "half round-trip latency of the messages in the measured window");

pub struct PingPong {
    spec: PingPongSpec,
    ring: RingId,
    line_bits: u32,
    app_buffer: Line,
    /// Whether the first message was asked for.
    started: bool,
    taken: Option<Completion>,
    /// Half round trips (ns).
    half_rtt: Distribution,
}

impl PingPong {
    fn message_bytes(&self) -> u32 {
        self.spec.header_bytes + self.spec.payload_bytes
    }

    /// Asks the NIC for the peer's message arriving at `at`.
    fn expect_message(&self, cx: &mut ProgramCx, at: Time) {
        let bytes = self.message_bytes();
        let ring = cx.device_queue(self.ring);
        ring.request_arrival(at, bytes);
        let doorbell = ring.doorbell;
        cx.notify(doorbell);
    }
}

impl Program for PingPong {
    fn role(&self) -> &'static str {
        "pingpong"
    }

    fn unit(&self) -> &'static UnitKind {
        &MESSAGE
    }

    /// The busy-polling application sees each event as soon as it is visible.
    fn next(&mut self, cx: &mut ProgramCx) -> Next {
        let now = cx.now();
        if !self.started {
            self.started = true;
            self.expect_message(cx, now);
        }
        let completion = match cx.take_completion(self.ring, Time::ZERO) {
            Ok(completion) => completion,
            Err(next) => return next,
        };
        let ring = cx.device_queue(self.ring);
        let buffer = ring.buffer_addr(completion.buffer).line(self.line_bits).0;
        let descriptor = ring.next_descriptor_addr().line(self.line_bits);
        let lines = (self.message_bytes() as u64).div_ceil(1 << self.line_bits);
        let mut data_lines = if self.spec.read_data || self.spec.copy { lines } else { 0 };
        if self.spec.poll_in_payload {
            // The poll that finds the event reads the first line; the others are fetched with it.
            data_lines = data_lines.max(1);
        } else {
            cx.load_dependent(completion.entry.line(self.line_bits));
        }
        for i in 0..data_lines {
            cx.load(Line(buffer + i));
            if self.spec.copy {
                cx.store(Line(self.app_buffer.0 + i));
            }
        }
        if data_lines > 0 {
            cx.drain();
        }
        cx.compute(self.spec.stack_cycles);
        cx.store(descriptor);
        cx.hold(Time::from_ns(self.spec.tx_ns));
        cx.call(0);
        self.taken = Some(completion);
        Next::Unit
    }

    /// The reply is sent: the peer answers one round trip later.
    fn on_call(&mut self, _tag: u32, cx: &mut ProgramCx) {
        let completion = self.taken.take().expect("a message is being answered");
        cx.device_queue(self.ring).release(&completion);
        let sent = cx.now();
        let host = sent - completion.arrival;
        let one_way = Time::from_ns(self.spec.one_way_ns);
        self.half_rtt.add((host + one_way).as_ns());
        cx.count(1);
        self.expect_message(cx, sent + one_way + host + one_way);
    }

    fn waiting_for(&self) -> String {
        format!("the next message on {} queue {}", self.spec.device, self.spec.queue)
    }

    fn reset_stats(&mut self) {
        self.half_rtt.clear();
    }

    fn report(&self, out: &mut Report, _view: &ReportView) {
        self.half_rtt.report(out, &HALF_RTT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{ask, reach_call, Op};
    use crate::devices::ring::Recycle;
    use crate::devices::ring::Rings;
    use crate::testing::{deliver, ns, ring_harness, DOORBELL, READY};

    fn program(ring: RingId, read_data: bool, copy: bool) -> PingPong {
        let spec = PingPongSpec {
            payload_bytes: 86,
            header_bytes: 42,
            read_data,
            copy,
            stack_cycles: 70.0,
            ..PingPongSpec::default()
        };
        PingPong {
            spec,
            ring,
            line_bits: 6,
            app_buffer: Line(0x800),
            started: false,
            taken: None,
            half_rtt: Distribution::default(),
        }
    }

    #[test]
    fn the_application_buffer_holds_one_message_header_and_payload() {
        use crate::devices::{nic::NicSpec, DeviceSpec};
        let platform = crate::testing::tiny_platform();
        let mut b = Builder::new(&platform, 1);
        NicSpec::default().build(&mut b);
        let before = b.alloc(0, 0);
        // 42 + 8192 B: three pages of the page-granular allocator.
        PingPongSpec { header_bytes: 42, payload_bytes: 8192, ..PingPongSpec::default() }.build(&mut b);
        assert_eq!(b.alloc(0, 0).0 - before.0, 3 * 4096);
    }

    #[test]
    fn the_first_message_is_asked_for_at_once_and_each_reply_asks_for_the_next_a_round_trip_later() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let mut p = program(ring, true, true);
        assert_eq!(h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0))).0, Next::Wait);
        assert_eq!(h.notified(), [(DOORBELL, ns(0.0))]);
        assert_eq!(h.waits(), [READY]);
        assert_eq!(h.shared.get_mut::<Rings>()[0].next_requested(), Some((ns(0.0), 128)));
        h.shared.get_mut::<Rings>()[0].pop_requested();
        // The NIC delivers it: arrival 0, visible at 400 ns.
        deliver(&mut h, ring, 128, ns(0.0), ns(400.0));
        let (next, ops, _) = h.with_cx(ns(400.0), ns(400.0), |cx| ask(&mut p, cx, ns(400.0)));
        assert_eq!(next, Next::Unit);
        let expected = [
            Op::LoadDependent(Line(0x3000 >> 6)),
            Op::Load(Line(0x4000)),
            Op::Store(Line(0x800)),
            Op::Load(Line(0x4001)),
            Op::Store(Line(0x801)),
            Op::Drain,
            Op::Compute(70.0),
            Op::Store(Line(0x1000 >> 6)),
            Op::Hold(ns(250.0)),
            Op::Call(0),
        ];
        assert_eq!(ops, expected);
        // The reply leaves at 700 ns: 700 ns in the host, so a half round trip of 700 + 500 ns,
        // and the peer's answer arrives after two one-way paths and its own 700 ns.
        let units = h.with_cx(ns(700.0), ns(700.0), |cx| reach_call(&mut p, 0, cx, ns(700.0)));
        assert_eq!(units, 1);
        assert_eq!(p.half_rtt.summary().unwrap().p50, 1200.0);
        assert_eq!(h.shared.get_mut::<Rings>()[0].next_requested(), Some((ns(700.0 + 500.0 + 700.0 + 500.0), 128)));
        assert_eq!(h.notified(), [(DOORBELL, ns(700.0))]);
        assert_eq!(h.shared.get_mut::<Rings>()[0].stats.consumed_packets, 1);
    }

    #[test]
    fn an_event_inside_the_payload_is_read_with_the_rest_of_the_frame_in_one_round() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let mut p = program(ring, true, false);
        p.spec.poll_in_payload = true;
        p.started = true;
        deliver(&mut h, ring, 128, ns(0.0), ns(0.0));
        let (_, ops, _) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        assert_eq!(ops[..3], [Op::Load(Line(0x4000)), Op::Load(Line(0x4001)), Op::Drain]);
    }

    #[test]
    fn events_only_reads_nothing_but_the_event() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let mut p = program(ring, false, false);
        p.started = true;
        deliver(&mut h, ring, 128, ns(0.0), ns(0.0));
        let (_, ops, _) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        assert_eq!(ops.iter().filter(|op| matches!(op, Op::Load(_) | Op::Store(_) | Op::Drain)).count(), 1, "{ops:?}");
    }

    #[test]
    fn the_report_summarises_half_round_trips_of_the_window() {
        let mut p = program(RingId(0), true, false);
        p.half_rtt.add(1000.0);
        p.half_rtt.add(3000.0);
        let (h, _) = ring_harness(1, 1, Recycle::Fifo);
        let view = ReportView { shared: &h.shared, window_start: ns(0.0), now: ns(1.0) };
        let mut out = Report::root();
        p.report(&mut out, &view);
        let value = out.finish().0;
        assert_eq!(
            (value["half_rtt_ns"]["p50"].as_f64(), value["half_rtt_ns"]["mean"].as_f64()),
            (Some(1000.0), Some(2000.0))
        );
        p.reset_stats();
        assert!(p.half_rtt.is_empty());
    }
}
