//! DPDK-style run-to-completion forwarding (l2fwd/FastClick): take a burst of received packets,
//! touch only each packet's first line (the MAC swap), and post it back to the NIC for
//! transmission. The NIC DMA-reads the whole packet and returns the buffer to the mempool.

use crate::cpu::{Next, Program, ProgramCx, UnitKind, PACKET};
use crate::devices::ring::{Completion, Poll, RingId, RxRing, RX_QUEUE};
use crate::devices::SystemShape;
use crate::error::{ensure, ConfigResult};
use crate::params::params;
use crate::system::Builder;
use crate::units::Line;
use crate::workloads::WorkloadSpec;

params! {
    /// The forwarding loop's parameters (one loop per queue of the device).
    pub struct L2fwdSpec {
        /// Name of the NIC whose queues are forwarded; each queue's loop runs on its consumer CPU.
        device: String = "nic0".to_string(),
        /// Packets taken per poll (DPDK's RX burst).
        burst: u32 = 32,
        /// Extra compute cycles per packet (the application's work).
        work_cycles: f64 = 0.0,
        /// Cycles of driver work per packet besides its memory accesses (descriptor handling,
        /// mbuf bookkeeping). Assumed: ~100 cycles/packet, the order DPDK drivers publish.
        driver_cycles: f64 = 100.0,
    }
}

/// The kind's registration.
#[linkme::distributed_slice(crate::workloads::WORKLOADS)]
pub static KIND: crate::workloads::WorkloadKind = crate::workloads::WorkloadKind::of::<L2fwdSpec>(
    "l2fwd",
    "DPDK-style forwarding, one loop per queue on its consumer CPU: take a burst, rewrite each packet's first line, post it for TX",
);

impl WorkloadSpec for L2fwdSpec {
    fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_device(path, &self.device, RX_QUEUE)?;
        // DPDK's rx_burst takes a 16-bit count.
        ensure((1..=u16::MAX as u32).contains(&self.burst), &format!("{path}.burst"), || {
            format!("must be 1 to {} (got {})", u16::MAX, self.burst)
        })?;
        ensure(self.work_cycles >= 0.0, &format!("{path}.work_cycles"), || "must not be negative".into())?;
        ensure(self.driver_cycles >= 0.0, &format!("{path}.driver_cycles"), || "must not be negative".into())
    }

    fn cpus(&self, system: &SystemShape) -> Vec<u32> {
        system.queue_cpus(&self.device)
    }

    fn queues(&self, system: &SystemShape) -> Vec<(String, u32)> {
        (0..system.queue_cpus(&self.device).len() as u32).map(|q| (self.device.clone(), q)).collect()
    }

    fn build(&self, b: &mut Builder) {
        for ring in b.queues_of::<RxRing>(&self.device).to_vec() {
            let cpu = b.queue(ring).shape.consumer_cpu;
            let program = L2fwd { spec: self.clone(), ring, line_bits: b.platform.line_bits(), burst: Vec::new() };
            b.run_on(cpu, Box::new(program));
        }
    }
}

pub struct L2fwd {
    spec: L2fwdSpec,
    ring: RingId,
    line_bits: u32,
    /// The burst being forwarded.
    burst: Vec<Completion>,
}

impl Program for L2fwd {
    fn role(&self) -> &'static str {
        "l2fwd"
    }

    fn unit(&self) -> &'static UnitKind {
        &PACKET
    }

    /// One burst: rx_burst takes every ready completion up to the burst size and refills their
    /// descriptors; then each packet's first line is rewritten and the packet posted for TX. A
    /// blocking TX (FastClick's `BLOCKING true`) takes no more than the TX queue has room for,
    /// and with no room waits for the NIC to send.
    fn next(&mut self, cx: &mut ProgramCx) -> Next {
        let now = cx.now();
        let bits = self.line_bits;
        let ring = cx.device_queue(self.ring);
        let room = ring.tx_room();
        if room == 0 {
            let sent = ring.sent;
            cx.wait_on(sent);
            return Next::Wait;
        }
        let mut reposted = Vec::new();
        while self.burst.len() < room.min(self.spec.burst as usize) {
            match ring.poll(now) {
                Poll::Ready(_) => {
                    let completion = ring.take().expect("a ready completion");
                    ring.finish(&completion);
                    reposted.push(ring.next_descriptor_addr().line(bits));
                    ring.refill();
                    self.burst.push(completion);
                }
                Poll::NotYet(ready) if self.burst.is_empty() => return Next::At(ready),
                Poll::Empty if self.burst.is_empty() => {
                    let ready = ring.ready;
                    cx.wait_on(ready);
                    return Next::Wait;
                }
                Poll::NotYet(_) | Poll::Empty => break,
            }
        }
        let headers: Vec<Line> = self.burst.iter().map(|c| ring.buffer_addr(c.buffer).line(bits)).collect();
        let tx_descriptors: Vec<Line> =
            (0..self.burst.len() as u64).map(|k| ring.tx_descriptor_addr_ahead(k).line(bits)).collect();
        for (completion, descriptor) in self.burst.iter().zip(reposted) {
            // Reading the completion says where the packet is.
            cx.load_dependent(completion.entry.line(bits));
            cx.store(descriptor);
        }
        for (i, (header, tx_descriptor)) in headers.into_iter().zip(tx_descriptors).enumerate() {
            // The MAC swap: read and rewrite the first line of the packet only.
            cx.load_dependent(header);
            cx.store(header);
            cx.compute(self.spec.work_cycles + self.spec.driver_cycles);
            cx.store(tx_descriptor);
            cx.call(i as u32);
        }
        cx.drain();
        Next::Unit
    }

    /// Packet `i` of the burst goes to the TX engine.
    fn on_call(&mut self, i: u32, cx: &mut ProgramCx) {
        cx.post_tx(self.ring, &self.burst[i as usize]);
        cx.count(1);
        if i as usize + 1 == self.burst.len() {
            self.burst.clear();
        }
    }

    fn waiting_for(&self) -> String {
        format!("packets on {}", self.spec.device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{ask, reach_call, Op};
    use crate::devices::ring::Recycle;
    use crate::devices::ring::Rings;
    use crate::testing::{deliver, ns, ring_harness, DOORBELL, READY, SENT};

    fn program(ring: RingId, burst: u32) -> L2fwd {
        let spec = L2fwdSpec { burst, work_cycles: 20.0, driver_cycles: 100.0, ..L2fwdSpec::default() };
        L2fwd { spec, ring, line_bits: 6, burst: Vec::new() }
    }

    #[test]
    fn a_stalled_forwarder_says_it_waits_for_packets_of_its_device() {
        let p = program(RingId(0), 2);
        assert_eq!(p.waiting_for(), format!("packets on {}", p.spec.device));
        assert!(!p.spec.device.is_empty());
    }

    #[test]
    fn a_burst_takes_what_is_ready_up_to_its_size_and_posts_each_packet_for_transmission() {
        let (mut h, ring) = ring_harness(4, 8, Recycle::Lifo);
        let mut p = program(ring, 2);
        for i in 0..3 {
            deliver(&mut h, ring, 1500, ns(i as f64), ns(100.0 + i as f64));
        }
        let (next, ops, _) = h.with_cx(ns(101.0), ns(101.0), |cx| ask(&mut p, cx, ns(101.0)));
        assert_eq!(next, Next::Unit);
        // Buffers 0 and 1 (lines 0x4000, 0x4040), entries 0 and 1 of the completion ring, their
        // descriptors refilled from the pool (slots 0 and 1), TX descriptors 0 and 1.
        let expected = [
            Op::LoadDependent(Line(0x3000 >> 6)),
            Op::Store(Line(0x1000 >> 6)),
            Op::LoadDependent(Line(0x3010 >> 6)),
            Op::Store(Line(0x1010 >> 6)),
            Op::LoadDependent(Line(0x4000)),
            Op::Store(Line(0x4000)),
            Op::Compute(120.0),
            Op::Store(Line(0x2000 >> 6)),
            Op::Call(0),
            Op::LoadDependent(Line(0x4040)),
            Op::Store(Line(0x4040)),
            Op::Compute(120.0),
            Op::Store(Line(0x2010 >> 6)),
            Op::Call(1),
            Op::Drain,
        ];
        assert_eq!(ops, expected);
        assert_eq!(h.shared.get_mut::<Rings>()[0].stats.consumed_packets, 2);
        for (tag, at) in [(0, 150.0), (1, 180.0)] {
            let units = h.with_cx(ns(at), ns(at), |cx| reach_call(&mut p, tag, cx, ns(at)));
            assert_eq!(units, 1);
            assert_eq!(h.notified(), [(DOORBELL, ns(at))], "the doorbell rings when the packet is posted");
        }
        let r = &mut h.shared.get_mut::<Rings>()[0];
        assert_eq!((r.pop_tx().unwrap().buffer, r.pop_tx().unwrap().buffer), (0, 1));
        assert!(p.burst.is_empty());
    }

    #[test]
    fn a_burst_takes_no_more_than_the_tx_room_and_with_none_waits_for_the_nic_to_send() {
        let (mut h, ring) = ring_harness(4, 8, Recycle::Lifo);
        h.shared.get_mut::<Rings>()[0].shape.tx_entries = 1;
        let mut p = program(ring, 4);
        for i in 0..2 {
            deliver(&mut h, ring, 64, ns(i as f64), ns(10.0));
        }
        let (next, ops, _) = h.with_cx(ns(20.0), ns(20.0), |cx| ask(&mut p, cx, ns(20.0)));
        assert_eq!(next, Next::Unit);
        assert_eq!(ops.iter().filter(|op| matches!(op, Op::Call(_))).count(), 1, "room for one packet");
        h.with_cx(ns(30.0), ns(30.0), |cx| reach_call(&mut p, 0, cx, ns(30.0)));
        assert_eq!(h.with_cx(ns(40.0), ns(40.0), |cx| ask(&mut p, cx, ns(40.0))).0, Next::Wait);
        assert_eq!(h.waits(), [SENT], "the TX queue is full: it waits for the NIC, not for packets");
        assert_eq!(h.shared.get_mut::<Rings>()[0].stats.consumed_packets, 1, "the second packet stays on the ring");
    }

    #[test]
    fn a_burst_goes_with_what_is_ready_when_the_next_packet_is_not_yet_visible() {
        let (mut h, ring) = ring_harness(4, 8, Recycle::Lifo);
        let mut p = program(ring, 4);
        deliver(&mut h, ring, 1500, ns(0.0), ns(100.0));
        deliver(&mut h, ring, 1500, ns(1.0), ns(500.0));
        let (next, ops, _) = h.with_cx(ns(101.0), ns(101.0), |cx| ask(&mut p, cx, ns(101.0)));
        assert_eq!(next, Next::Unit, "one packet forwarded now rather than two at 500 ns");
        assert_eq!(ops.iter().filter(|op| matches!(op, Op::Call(_))).count(), 1);
    }

    #[test]
    fn an_empty_ring_waits_and_one_not_yet_visible_says_when() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Lifo);
        let mut p = program(ring, 32);
        assert_eq!(h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0))).0, Next::Wait);
        assert_eq!(h.waits(), [READY]);
        deliver(&mut h, ring, 64, ns(0.0), ns(50.0));
        assert_eq!(h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(10.0))).0, Next::At(ns(50.0)));
    }
}
