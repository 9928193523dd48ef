//! Ping-pong latency (eflatency, sfnt-pingpong over Onload): the application busy-polls an event
//! queue, optionally reads the message (and copies it, as Onload does), and replies at once. The
//! peer behaves the same, so each message arrives one host turnaround and two one-way paths after
//! the previous reply. Reports the half round-trip latency.

use crate::engine::System;
use crate::error::{ensure, ConfigResult};
use crate::params::params;
use crate::units::{Clock, Line, Time};
use crate::workloads::timing::{Activity, CoreTimer};
use crate::workloads::{SystemShape, Workload};

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

impl PingPongSpec {
    pub fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_cpu(path, self.cpu)?;
        system.check_queue(path, &self.device, self.queue)?;
        ensure(self.header_bytes + self.payload_bytes >= 1, &format!("{path}.payload_bytes"), || {
            "a message needs at least one byte".into()
        })?;
        ensure(self.tx_ns >= 0.0 && self.one_way_ns >= 0.0, &format!("{path}.one_way_ns"), || {
            "must not be negative".into()
        })
    }
}

pub struct PingPong {
    spec: PingPongSpec,
    nic: usize,
    timer: CoreTimer,
    line_bits: u32,
    app_buffer: Line,
    /// Half round-trip latencies in the measured window (ns).
    samples: Vec<f64>,
    activity: Activity,
}

impl PingPong {
    pub fn new(spec: &PingPongSpec, nic: usize, clock: Clock, system: &mut System) -> PingPong {
        let platform = &system.platform;
        let line_bits = platform.line_bits();
        let node = system.node_of_cpu(spec.cpu);
        let app_buffer = system.allocator.alloc(node, (spec.header_bytes + spec.payload_bytes) as u64).line(line_bits);
        PingPong {
            spec: spec.clone(),
            nic,
            timer: CoreTimer::on_cpu(spec.cpu, clock, platform),
            line_bits,
            app_buffer,
            samples: Vec::new(),
            activity: Activity::default(),
        }
    }
}

impl Workload for PingPong {
    fn cpu(&self) -> u32 {
        self.spec.cpu
    }

    fn role(&self) -> &str {
        "pingpong"
    }

    /// Runs at a message's arrival at the NIC; returns the next message's arrival.
    fn step(&mut self, system: &mut System, arrival: Time) -> Option<Time> {
        let System { hierarchy, nics, .. } = system;
        let bytes = self.spec.header_bytes + self.spec.payload_bytes;
        let queue_index = self.spec.queue as usize;
        let (visible, _) = nics[self.nic].deliver(queue_index, bytes, arrival, hierarchy);
        let queue = &mut nics[self.nic].queues[queue_index];
        let Some(visible) = visible else {
            // Every buffer is still posted again after each message, so this is a misconfiguration.
            return None;
        };
        // The busy-polling application sees the event as soon as it is visible.
        let timer = &mut self.timer;
        timer.idle_until(visible);
        let start = timer.now;
        let completion = queue.take();
        timer.load_dependent(hierarchy, completion.entry_line);
        let buffer = queue.buffer_addr(completion.buffer).line(self.line_bits).0;
        let lines = (bytes as u64).div_ceil(1 << self.line_bits);
        if self.spec.read_data || self.spec.copy {
            for i in 0..lines {
                timer.issue(hierarchy, Line(buffer + i), false);
                if self.spec.copy {
                    timer.issue(hierarchy, Line(self.app_buffer.0 + i), true);
                }
            }
            timer.drain();
        }
        timer.compute(self.spec.stack_cycles);
        timer.issue(hierarchy, queue.next_descriptor_addr().line(self.line_bits), true);
        queue.release(completion);
        let sent = timer.now + Time::from_ns(self.spec.tx_ns);
        let host = sent - arrival;
        self.samples.push(host.as_ns() + self.spec.one_way_ns);
        self.activity.add(1, sent - start);
        let one_way = Time::from_ns(self.spec.one_way_ns);
        Some(sent + one_way + host + one_way)
    }

    fn reset_stats(&mut self, now: Time) {
        self.samples.clear();
        self.activity.reset(now);
    }

    fn report(&self, now: Time) -> serde_json::Value {
        let mut report = self.activity.report(now, &self.timer, "message");
        let mut sorted = self.samples.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
        let mean = if sorted.is_empty() { 0.0 } else { sorted.iter().sum::<f64>() / sorted.len() as f64 };
        report.insert("half_rtt_ns".into(), serde_json::json!({ "p50": median, "mean": mean, "count": sorted.len() }));
        report.into()
    }
}
