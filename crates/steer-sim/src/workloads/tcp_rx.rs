//! The Linux TCP receive path, as iperf exercises it: NAPI on the IRQ CPU takes completions,
//! reads each packet's header, builds its sk_buff and queues it on the socket; the application
//! (iperf's `recv`) on its own CPU reads the sk_buff and copies the payload into a reused user
//! buffer, then frees the page back to the queue's page pool. The two run on one CPU, on SMT
//! siblings, or on two cores, as in the seeds' placements.

use std::collections::VecDeque;

use crate::devices::nic::{Completion, Poll};
use crate::engine::System;
use crate::error::{ensure, ConfigResult};
use crate::params::params;
use crate::units::{Clock, Line, Time};
use crate::workloads::timing::{Activity, CoreTimer};
use crate::workloads::{SystemShape, Workload};

params! {
    /// The receive path's parameters. Per-packet costs are assumptions (see each).
    pub struct TcpRxSpec {
        /// Name of the NIC.
        device: String = "nic0".to_string(),
        /// Each queue's application runs on the queue's IRQ CPU (its consumer CPU) plus this:
        /// 0 = the IRQ CPU itself, the platform's core count = its SMT sibling, else another core.
        app_offset: u32 = 0,
        /// Bytes of the application's reused receive buffer (iperf 2 reads 128 KiB at a time).
        app_buffer_bytes: u64 = 131072,
        /// Packets NAPI takes per poll (Linux's NAPI weight).
        napi_budget: u32 = 64,
        /// Lines of sk_buff metadata written per packet: struct sk_buff (~256 B) and
        /// skb_shared_info (~320 B), about 9 lines.
        skb_lines: u32 = 9,
        /// sk_buffs cycling through the IRQ CPU's slab (its footprint is skb_pool x skb_lines lines).
        skb_pool: u32 = 512,
        /// Cycles of protocol work per packet in NAPI (IP/TCP receive, GRO), besides memory
        /// accesses. Assumed: ~1000 cycles, the order of published per-packet costs of Linux's stack.
        napi_cycles_per_packet: f64 = 1000.0,
        /// Cycles of work per packet in recv (syscall, socket bookkeeping), besides the copy. Assumed.
        recv_cycles_per_packet: f64 = 400.0,
    }
}

impl TcpRxSpec {
    pub fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        for &irq in system.check_device(path, &self.device)? {
            ensure(irq + self.app_offset < system.cpus, &format!("{path}.app_offset"), || {
                format!("the application of IRQ CPU {irq} would run on CPU {}, out of range", irq + self.app_offset)
            })?;
        }
        ensure(self.napi_budget >= 1, &format!("{path}.napi_budget"), || "must be at least 1".into())?;
        ensure(self.skb_pool >= 1, &format!("{path}.skb_pool"), || "must be at least 1".into())?;
        ensure(self.app_buffer_bytes >= 64, &format!("{path}.app_buffer_bytes"), || "must be at least 64".into())
    }

    /// The CPUs the path runs on: each queue's IRQ CPU and its application's CPU.
    pub fn cpus(&self, system: &SystemShape) -> Vec<u32> {
        let mut cpus: Vec<u32> = system
            .queue_cpus(&self.device)
            .into_iter()
            .flat_map(|irq| [irq, irq + self.app_offset])
            .collect();
        cpus.sort_unstable();
        cpus.dedup();
        cpus
    }
}

/// A received packet waiting on the socket for the application.
#[derive(Debug, Clone, Copy)]
struct Skb {
    completion: Completion,
    metadata: Line,
}

/// The socket between NAPI and the application, shared by the two halves.
#[derive(Debug, Default)]
pub struct Socket {
    queue: VecDeque<Skb>,
    /// The application's workload index while it sleeps on an empty socket.
    waiter: Option<usize>,
}

/// One half of the path. `Napi` and `Recv` share a socket by index in `System::sockets`.
pub struct TcpRx {
    index: usize,
    spec: TcpRxSpec,
    role: Role,
    nic: usize,
    queue: usize,
    socket: usize,
    timer: CoreTimer,
    line_bits: u32,
    skb_slab: Line,
    skb_next: u64,
    app_buffer: Line,
    app_lines: u64,
    app_cursor: u64,
    activity: Activity,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Napi,
    Recv,
}

impl TcpRx {
    /// Builds one half for queue `queue`; `socket` indexes `System::sockets` (the caller
    /// creates it once per queue).
    pub fn new(
        index: usize,
        spec: &TcpRxSpec,
        role: Role,
        (nic, queue): (usize, usize),
        socket: usize,
        clock: Clock,
        system: &mut System,
    ) -> TcpRx {
        let platform = &system.platform;
        let line_bits = platform.line_bits();
        let irq_cpu = system.nics[nic].queues[queue].spec.consumer_cpu;
        let cpu = match role {
            Role::Napi => irq_cpu,
            Role::Recv => irq_cpu + spec.app_offset,
        };
        let node = system.node_of_cpu(cpu);
        let slab_bytes = spec.skb_pool as u64 * spec.skb_lines.max(1) as u64 * (1 << line_bits);
        let skb_slab = system.allocator.alloc(node, slab_bytes).line(line_bits);
        let app_buffer = system.allocator.alloc(node, spec.app_buffer_bytes).line(line_bits);
        TcpRx {
            index,
            spec: spec.clone(),
            role,
            nic,
            queue,
            socket,
            timer: CoreTimer::on_cpu(cpu, clock, platform),
            line_bits,
            skb_slab,
            skb_next: 0,
            app_buffer,
            app_lines: (spec.app_buffer_bytes >> line_bits).max(1),
            app_cursor: 0,
            activity: Activity::default(),
        }
    }

    /// NAPI: up to a budget of ready completions become sk_buffs on the socket.
    fn napi(&mut self, system: &mut System) -> Option<Time> {
        let System { hierarchy, nics, sockets, wakes, .. } = system;
        let queue = &mut nics[self.nic].queues[self.queue];
        let timer = &mut self.timer;
        let mut taken = 0;
        while taken < self.spec.napi_budget {
            match queue.poll(timer.now) {
                Poll::Ready(_) => {}
                Poll::NotYet(ready) if taken == 0 => return Some(ready),
                Poll::Empty if taken == 0 => {
                    queue.waiter = Some(self.index);
                    return None;
                }
                Poll::NotYet(_) | Poll::Empty => break,
            }
            let completion = queue.take();
            timer.load_dependent(hierarchy, completion.entry_line);
            // Protocol processing reads the headers in the packet's first line.
            timer.load_dependent(hierarchy, queue.buffer_addr(completion.buffer).line(self.line_bits));
            let metadata = Line(self.skb_slab.0 + (self.skb_next % self.spec.skb_pool as u64) * self.spec.skb_lines as u64);
            self.skb_next += 1;
            for i in 0..self.spec.skb_lines as u64 {
                timer.issue(hierarchy, Line(metadata.0 + i), true);
            }
            timer.compute(self.spec.napi_cycles_per_packet);
            queue.finish(&completion);
            // The driver refills the descriptor with a fresh page from the page pool.
            timer.issue(hierarchy, queue.next_descriptor_addr().line(self.line_bits), true);
            queue.refill();
            let socket = &mut sockets[self.socket];
            socket.queue.push_back(Skb { completion, metadata });
            if let Some(app) = socket.waiter.take() {
                wakes.push((app, timer.now));
            }
            taken += 1;
        }
        timer.drain();
        Some(timer.now)
    }

    /// One recv() call: copies queued packets into the user buffer until it is full (or the
    /// socket is empty), freeing each packet's page.
    fn recv(&mut self, system: &mut System) -> Option<Time> {
        let System { hierarchy, nics, sockets, .. } = system;
        let socket = &mut sockets[self.socket];
        if socket.queue.is_empty() {
            socket.waiter = Some(self.index);
            return None;
        }
        let timer = &mut self.timer;
        let queue = &mut nics[self.nic].queues[self.queue];
        let mut copied = 0u64;
        while let Some(skb) = socket.queue.pop_front() {
            timer.load_dependent(hierarchy, skb.metadata);
            let buffer = queue.buffer_addr(skb.completion.buffer);
            let first = buffer.line(self.line_bits).0;
            let last = buffer.offset(skb.completion.bytes as u64 - 1).line(self.line_bits).0;
            for line in first..=last {
                timer.issue(hierarchy, Line(line), false);
                let destination = Line(self.app_buffer.0 + self.app_cursor);
                self.app_cursor = (self.app_cursor + 1) % self.app_lines;
                timer.issue(hierarchy, destination, true);
            }
            timer.compute(self.spec.recv_cycles_per_packet);
            // Freeing the skb returns its page to the pool, which refills the ring.
            queue.recycle(skb.completion.buffer);
            copied += skb.completion.bytes as u64;
            if copied >= self.spec.app_buffer_bytes {
                break;
            }
        }
        timer.drain();
        Some(timer.now)
    }
}

impl Workload for TcpRx {
    fn cpu(&self) -> u32 {
        self.timer.cpu
    }

    fn role(&self) -> &str {
        match self.role {
            Role::Napi => "irq",
            Role::Recv => "iperf",
        }
    }

    fn step(&mut self, system: &mut System, now: Time) -> Option<Time> {
        // Two halves on one CPU take turns: start when the CPU is free.
        let cpu = self.timer.cpu;
        self.timer.idle_until(now.max(system.cpu_free_at[cpu as usize]));
        let start = self.timer.now;
        let next = match self.role {
            Role::Napi => self.napi(system),
            Role::Recv => self.recv(system),
        };
        if self.timer.now > start {
            self.activity.add(1, self.timer.now - start);
        }
        system.cpu_free_at[cpu as usize] = self.timer.now;
        next
    }

    fn reset_stats(&mut self, now: Time) {
        self.activity.reset(now);
    }

    fn report(&self, now: Time) -> serde_json::Value {
        self.activity.report(now, &self.timer, "step").into()
    }
}
