//! A receive loop: poll the completion ring, read the packet, copy it into a reused application
//! buffer, release the RX buffer (re-posting its descriptor).

use crate::devices::nic::Poll;
use crate::engine::System;
use crate::error::{ensure, ConfigResult};
use crate::params::params;
use crate::units::{Addr, Clock, Line, Time};
use crate::workloads::timing::{Activity, CoreTimer};
use crate::workloads::{SystemShape, Workload};

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

impl RxLoopSpec {
    pub fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_cpu(path, self.cpu)?;
        system.check_queue(path, &self.device, self.queue)?;
        ensure(self.app_buffer_bytes >= 64, &format!("{path}.app_buffer_bytes"), || "must be at least 64".into())?;
        ensure(self.compute_cycles_per_packet >= 0.0, &format!("{path}.compute_cycles_per_packet"), || {
            "must not be negative".into()
        })
    }
}

pub struct RxLoop {
    index: usize,
    spec: RxLoopSpec,
    nic: usize,
    timer: CoreTimer,
    app_buffer: Addr,
    app_lines: u64,
    app_cursor: u64,
    line_bits: u32,
    bytes: u64,
    activity: Activity,
}

impl RxLoop {
    pub fn new(index: usize, spec: &RxLoopSpec, nic: usize, clock: Clock, system: &mut System) -> RxLoop {
        let platform = &system.platform;
        let line_bits = platform.line_bits();
        let node = system.node_of_cpu(spec.cpu);
        RxLoop {
            index,
            nic,
            timer: CoreTimer::on_cpu(spec.cpu, clock, platform),
            app_buffer: system.allocator.alloc(node, spec.app_buffer_bytes),
            app_lines: (spec.app_buffer_bytes >> line_bits).max(1),
            app_cursor: 0,
            line_bits,
            spec: spec.clone(),
            bytes: 0,
            activity: Activity::default(),
        }
    }
}

impl Workload for RxLoop {
    fn cpu(&self) -> u32 {
        self.spec.cpu
    }

    fn role(&self) -> &str {
        "rx_loop"
    }

    fn step(&mut self, system: &mut System, now: Time) -> Option<Time> {
        self.timer.idle_until(now);
        let start = self.timer.now;
        let System { hierarchy, nics, .. } = system;
        let queue = &mut nics[self.nic].queues[self.spec.queue as usize];
        let completion = match queue.poll(self.timer.now) {
            Poll::Ready(_) => queue.take(),
            Poll::NotYet(ready) => return Some(ready),
            Poll::Empty => {
                queue.waiter = Some(self.index);
                return None;
            }
        };
        let timer = &mut self.timer;
        // The completion entry tells where the packet is: everything after depends on it.
        timer.load_dependent(hierarchy, completion.entry_line);
        let buffer = queue.buffer_addr(completion.buffer);
        let first = buffer.line(self.line_bits).0;
        let last = buffer.offset(completion.bytes as u64 - 1).line(self.line_bits).0;
        for line in first..=last {
            timer.issue(hierarchy, Line(line), false);
            if self.spec.copy {
                let dst = self.app_buffer.line(self.line_bits).0 + self.app_cursor;
                self.app_cursor = (self.app_cursor + 1) % self.app_lines;
                timer.issue(hierarchy, Line(dst), true);
            }
        }
        timer.drain();
        timer.compute(self.spec.compute_cycles_per_packet);
        // Re-post the buffer: the driver writes its descriptor.
        timer.issue(hierarchy, queue.next_descriptor_addr().line(self.line_bits), true);
        queue.release(completion);
        self.bytes += completion.bytes as u64;
        self.activity.add(1, timer.now - start);
        Some(timer.now)
    }

    fn reset_stats(&mut self, now: Time) {
        self.bytes = 0;
        self.activity.reset(now);
    }

    fn report(&self, now: Time) -> serde_json::Value {
        let mut report = self.activity.report(now, &self.timer, "packet");
        let window = (now - self.activity.window_start()).as_ns().max(1e-9);
        report.insert("goodput_gbps".into(), (self.bytes as f64 * 8.0 / window).into());
        report.into()
    }
}
