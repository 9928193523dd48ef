//! DPDK-style run-to-completion forwarding (l2fwd/FastClick): poll a burst of received packets,
//! touch only each packet's first line (the MAC swap), and post it back to the NIC for
//! transmission. The NIC DMA-reads the whole packet and returns the buffer to the mempool.

use crate::devices::nic::{Completion, Poll};
use crate::engine::System;
use crate::error::{ensure, ConfigResult};
use crate::params::params;
use crate::units::{Clock, Time};
use crate::workloads::timing::{Activity, CoreTimer};
use crate::workloads::{SystemShape, Workload};

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

impl L2fwdSpec {
    pub fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_device(path, &self.device)?;
        ensure(self.burst >= 1, &format!("{path}.burst"), || "must be at least 1".into())?;
        ensure(self.work_cycles >= 0.0, &format!("{path}.work_cycles"), || "must not be negative".into())?;
        ensure(self.driver_cycles >= 0.0, &format!("{path}.driver_cycles"), || "must not be negative".into())
    }
}

pub struct L2fwd {
    index: usize,
    spec: L2fwdSpec,
    nic: usize,
    queue: usize,
    timer: CoreTimer,
    line_bits: u32,
    activity: Activity,
}

impl L2fwd {
    pub fn new(index: usize, spec: &L2fwdSpec, nic: usize, queue: usize, clock: Clock, system: &System) -> L2fwd {
        let platform = &system.platform;
        let cpu = system.nics[nic].queues[queue].spec.consumer_cpu;
        L2fwd {
            index,
            spec: spec.clone(),
            nic,
            queue,
            timer: CoreTimer::on_cpu(cpu, clock, platform),
            line_bits: platform.line_bits(),
            activity: Activity::default(),
        }
    }
}

impl Workload for L2fwd {
    fn cpu(&self) -> u32 {
        self.timer.cpu
    }

    fn role(&self) -> &str {
        "l2fwd"
    }

    fn step(&mut self, system: &mut System, now: Time) -> Option<Time> {
        self.timer.idle_until(now);
        let start = self.timer.now;
        let System { hierarchy, nics, tx_kicks, .. } = system;
        let queue = &mut nics[self.nic].queues[self.queue];
        let timer = &mut self.timer;
        let mut burst: Vec<Completion> = Vec::with_capacity(self.spec.burst as usize);
        while burst.len() < self.spec.burst as usize {
            match queue.poll(timer.now) {
                Poll::Ready(_) => {
                    let completion = queue.take();
                    // Reading the completion says where the packet is.
                    timer.load_dependent(hierarchy, completion.entry_line);
                    queue.finish(&completion);
                    // rx_burst refills the descriptor with a fresh mbuf from the mempool.
                    timer.issue(hierarchy, queue.next_descriptor_addr().line(self.line_bits), true);
                    queue.refill();
                    burst.push(completion);
                }
                Poll::NotYet(ready) if burst.is_empty() => return Some(ready),
                Poll::Empty if burst.is_empty() => {
                    queue.waiter = Some(self.index);
                    return None;
                }
                Poll::NotYet(_) | Poll::Empty => break,
            }
        }
        for completion in &burst {
            // The MAC swap: read and rewrite the first line of the packet only.
            let header = queue.buffer_addr(completion.buffer).line(self.line_bits);
            timer.load_dependent(hierarchy, header);
            timer.issue(hierarchy, header, true);
            timer.compute(self.spec.work_cycles + self.spec.driver_cycles);
            timer.issue(hierarchy, queue.next_tx_descriptor_addr().line(self.line_bits), true);
            if queue.post_tx(completion) {
                tx_kicks.push((self.nic, self.queue, timer.now));
            }
        }
        timer.drain();
        self.activity.add(burst.len() as u64, timer.now - start);
        Some(timer.now)
    }

    fn reset_stats(&mut self, now: Time) {
        self.activity.reset(now);
    }

    fn report(&self, now: Time) -> serde_json::Value {
        self.activity.report(now, &self.timer, "packet").into()
    }
}
