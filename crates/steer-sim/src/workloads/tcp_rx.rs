//! The Linux TCP receive path, as iperf exercises it: NAPI on the IRQ CPU takes completions,
//! reads each packet's header, builds its sk_buff and queues it on the socket; the application
//! (iperf's `recv`) on its own CPU reads the sk_buff and copies the payload into a reused user
//! buffer. Since Linux 5.19 recv does not free the sk_buff itself but hands it back to the CPU
//! that allocated it (`skb_attempt_defer_free`); NAPI frees it at its next poll, recycling the
//! pages straight into its page pool's cache. The two halves run on one CPU, on SMT siblings, or
//! on two cores, as in the seeds' placements.
//!
//! With hardware GRO (bnxt's TPA, on by default) the NIC merges consecutive segments of a flow:
//! each queue buffer is one page of an aggregation with its own completion, and the driver builds
//! one sk_buff per `tpa_pages` pages, reading the headers and doing the protocol work once per
//! aggregation, and hands it to the socket when its last page is in. (The traffic is one
//! continuous flow, so aggregations always fill; the NIC's aggregation timeout is not modelled.)

use std::collections::VecDeque;

use crate::devices::nic::{Allocator, Completion, Poll, RxQueue};
use crate::engine::System;
use crate::error::{ensure, ConfigResult};
use crate::hierarchy::Hierarchy;
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
        /// Lines of struct sk_buff (~256 B) written per packet.
        skb_lines: u32 = 4,
        /// Lines of the packet's head buffer written per packet: headroom and skb_shared_info
        /// (~320 B), carved from the IRQ CPU's page-fragment cache.
        head_lines: u32 = 5,
        /// Bytes the page-fragment cache walks through before reusing its oldest fragment:
        /// Linux carves head buffers one after another from 32 KiB pages, and a page freed by
        /// its last fragment is the next one handed back (two pages in use).
        frag_cache_bytes: u64 = 65536,
        /// sk_buffs per slab the IRQ CPU's cache allocates at a time. Freed sk_buffs are reused
        /// last-freed first, as SLUB's freelists hand them out, so the slab's footprint is what is
        /// in flight; it grows by this many when every sk_buff is.
        skb_pool: u32 = 64,
        /// Pages hardware GRO merges into one sk_buff: bnxt aggregates up to 64 KiB of a flow.
        /// 1: no aggregation (every page is a packet of its own).
        tpa_pages: u32 = 16,
        /// Cycles of protocol work per sk_buff in NAPI (IP/TCP receive, GRO), besides memory
        /// accesses. Assumed: ~1000 cycles, the order of published per-packet costs of Linux's stack.
        napi_cycles_per_packet: f64 = 1000.0,
        /// Cycles per aggregation page in NAPI (its completion, attaching the page to the
        /// sk_buff). Assumed: ~150 cycles.
        napi_cycles_per_page: f64 = 150.0,
        /// Cycles of work per packet in recv (syscall, socket bookkeeping), besides the copy. Assumed.
        recv_cycles_per_packet: f64 = 400.0,
        /// Lines of socket state both halves write for each sk_buff: the receive queue and its
        /// lock, receive-memory accounting, TCP's receive sequence state, the deferred-free list.
        /// Assumed: 4.
        socket_lines: u32 = 4,
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
        ensure(self.tpa_pages >= 1, &format!("{path}.tpa_pages"), || "must be at least 1".into())?;
        ensure(self.app_buffer_bytes >= 64, &format!("{path}.app_buffer_bytes"), || "must be at least 64".into())
    }

    /// The CPUs the path runs on: each queue's IRQ CPU and its application's CPU.
    pub fn cpus(&self, system: &SystemShape) -> Vec<u32> {
        let mut cpus: Vec<u32> =
            system.queue_cpus(&self.device).into_iter().flat_map(|irq| [irq, irq + self.app_offset]).collect();
        cpus.sort_unstable();
        cpus.dedup();
        cpus
    }
}

/// Deferred sk_buffs at which the application's CPU kicks NAPI's to free them.
const DEFER_KICK: u32 = 32;

/// Bytes of a memory page (the block each `struct page` is placed in).
const PAGE_BYTES: u64 = 4096;

/// One page of a received sk_buff, as the socket queues it for the application.
#[derive(Debug, Clone, Copy)]
struct SkbPage {
    completion: Completion,
    metadata: Line,
    head: Line,
    /// The last page of its sk_buff: consuming it frees the sk_buff.
    last: bool,
}

/// The socket between NAPI and the application, shared by the two halves, with the queue's page
/// metadata.
#[derive(Debug)]
pub struct Socket {
    queue: VecDeque<SkbPage>,
    /// Pages of sk_buffs the application has consumed, waiting for NAPI to free them, and how
    /// many sk_buffs they make.
    deferred: Vec<SkbPage>,
    deferred_skbs: u32,
    /// The socket state both halves write (`socket_lines` lines).
    shared: Line,
    shared_lines: u64,
    /// The `struct page` (one line) of each buffer of the queue's page pool, by buffer index,
    /// which NAPI updates when it attaches the page to an sk_buff and when it recycles it. A
    /// pool's pages come from all over memory, so their `struct page`s are not neighbours: each
    /// sits in a 4 KiB block of its own (no prefetcher streams through them).
    pages: Line,
    lines_per_page: u64,
    /// Free sk_buffs (their first metadata line), the last freed on top: NAPI allocates from
    /// here and frees here.
    free_skbs: Vec<Line>,
    /// The application's workload index while it sleeps on an empty socket.
    waiter: Option<usize>,
}

impl Socket {
    /// The socket of RX queue `queue` for a path with `spec`, with the page metadata of its pool.
    pub fn for_queue(
        spec: &TcpRxSpec,
        queue: &RxQueue,
        allocator: &mut Allocator,
        node: u32,
        line_bits: u32,
    ) -> Socket {
        let shared_lines = spec.socket_lines as u64;
        Socket {
            queue: VecDeque::new(),
            deferred: Vec::new(),
            deferred_skbs: 0,
            shared: allocator.alloc(node, (shared_lines << line_bits).max(1)).line(line_bits),
            shared_lines,
            pages: allocator.alloc(node, queue.pool_buffers() as u64 * PAGE_BYTES).line(line_bits),
            lines_per_page: PAGE_BYTES >> line_bits,
            free_skbs: Vec::new(),
            waiter: None,
        }
    }

    /// Writes the socket state both halves update.
    fn update_shared(&self, timer: &mut CoreTimer, hierarchy: &mut Hierarchy) {
        for line in self.shared.0..self.shared.0 + self.shared_lines {
            timer.issue(hierarchy, Line(line), true);
        }
    }

    fn page(&self, buffer: u32) -> Line {
        // At a scattered line of its block, as pages' frame numbers scatter them over the cache sets.
        let offset = (buffer as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58;
        Line(self.pages.0 + buffer as u64 * self.lines_per_page + offset % self.lines_per_page)
    }
}

/// Where NAPI's sk_buffs come from: slabs of `per_slab` objects of `lines` lines on `node`.
#[derive(Debug, Clone, Copy)]
struct SkbSlab {
    node: u32,
    lines: u64,
    per_slab: u64,
    line_bits: u32,
}

impl SkbSlab {
    /// A free sk_buff of the socket, the last freed first; a new slab when none is free.
    fn alloc(&self, socket: &mut Socket, allocator: &mut Allocator) -> Line {
        if socket.free_skbs.is_empty() {
            let slab = allocator.alloc(self.node, (self.per_slab * self.lines) << self.line_bits).line(self.line_bits);
            // Pushed last to first, so the slab hands out its first object first.
            socket.free_skbs.extend((0..self.per_slab).rev().map(|i| Line(slab.0 + i * self.lines)));
        }
        socket.free_skbs.pop().expect("a slab was just added")
    }
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
    slab: SkbSlab,
    frag_cache: Line,
    frag_cache_lines: u64,
    frag_cursor: u64,
    /// NAPI's aggregation in progress: its pages so far, which share one sk_buff and reach the
    /// socket together when the last one is in.
    open_aggregation: Vec<SkbPage>,
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
        let app_buffer = system.allocator.alloc(node, spec.app_buffer_bytes).line(line_bits);
        // Whole head buffers only, at least one.
        let head_lines = spec.head_lines.max(1) as u64;
        let frag_cache_lines = ((spec.frag_cache_bytes >> line_bits) / head_lines).max(1) * head_lines;
        let frag_cache = system.allocator.alloc(node, frag_cache_lines << line_bits).line(line_bits);
        TcpRx {
            index,
            spec: spec.clone(),
            role,
            nic,
            queue,
            socket,
            timer: CoreTimer::on_cpu(cpu, clock, platform),
            line_bits,
            slab: SkbSlab { node, lines: spec.skb_lines.max(1) as u64, per_slab: spec.skb_pool as u64, line_bits },
            frag_cache,
            frag_cache_lines,
            frag_cursor: 0,
            open_aggregation: Vec::new(),
            app_buffer,
            app_lines: (spec.app_buffer_bytes >> line_bits).max(1),
            app_cursor: 0,
            activity: Activity::default(),
        }
    }

    /// NAPI: up to a budget of ready completions become sk_buffs on the socket.
    fn napi(&mut self, system: &mut System) -> Option<Time> {
        let System { hierarchy, nics, sockets, wakes, allocator, .. } = system;
        let queue = &mut nics[self.nic].queues[self.queue];
        let timer = &mut self.timer;
        // First the sk_buffs the application handed back: their pages go to the page pool's
        // cache (last freed, first reused) and refill the ring, the sk_buffs to the slab.
        let socket = &mut sockets[self.socket];
        socket.deferred_skbs = 0;
        for page in std::mem::take(&mut socket.deferred) {
            timer.issue(hierarchy, socket.page(page.completion.buffer), true);
            queue.recycle(page.completion.buffer);
            if page.last {
                for line in page.metadata.0..page.metadata.0 + self.spec.skb_lines as u64 {
                    timer.issue(hierarchy, Line(line), true);
                }
                socket.free_skbs.push(page.metadata);
            }
        }
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
            let socket = &mut sockets[self.socket];
            let (metadata, head) = match self.open_aggregation.first() {
                Some(page) => (page.metadata, page.head),
                None => {
                    // A new aggregation: protocol processing reads the headers in its first
                    // page's first line and builds the sk_buff.
                    timer.load_dependent(hierarchy, queue.buffer_addr(completion.buffer).line(self.line_bits));
                    let metadata = self.slab.alloc(socket, allocator);
                    let head = Line(self.frag_cache.0 + self.frag_cursor);
                    self.frag_cursor = (self.frag_cursor + self.spec.head_lines as u64) % self.frag_cache_lines;
                    let skb_lines = metadata.0..metadata.0 + self.spec.skb_lines as u64;
                    for line in skb_lines.chain(head.0..head.0 + self.spec.head_lines as u64) {
                        timer.issue(hierarchy, Line(line), true);
                    }
                    timer.compute(self.spec.napi_cycles_per_packet);
                    (metadata, head)
                }
            };
            timer.issue(hierarchy, socket.page(completion.buffer), true);
            timer.compute(self.spec.napi_cycles_per_page);
            let last = self.open_aggregation.len() + 1 == self.spec.tpa_pages as usize;
            queue.finish(&completion);
            // The driver refills the descriptor with a fresh page from the page pool.
            timer.issue(hierarchy, queue.next_descriptor_addr().line(self.line_bits), true);
            queue.refill();
            self.open_aggregation.push(SkbPage { completion, metadata, head, last });
            if last {
                socket.update_shared(timer, hierarchy);
                socket.queue.extend(self.open_aggregation.drain(..));
                if let Some(app) = socket.waiter.take() {
                    wakes.push((app, timer.now));
                }
            }
            taken += 1;
        }
        timer.drain();
        Some(timer.now)
    }

    /// One recv() call: copies queued packets into the user buffer until it is full (or the
    /// socket is empty), freeing each packet's page.
    fn recv(&mut self, system: &mut System) -> Option<Time> {
        let System { hierarchy, nics, sockets, wakes, .. } = system;
        let socket = &mut sockets[self.socket];
        if socket.queue.is_empty() {
            socket.waiter = Some(self.index);
            return None;
        }
        let timer = &mut self.timer;
        let queue = &mut nics[self.nic].queues[self.queue];
        let mut copied = 0u64;
        while let Some(page) = socket.queue.pop_front() {
            timer.load_dependent(hierarchy, page.metadata);
            timer.issue(hierarchy, page.head, false);
            let buffer = queue.buffer_addr(page.completion.buffer);
            let first = buffer.line(self.line_bits).0;
            let last = buffer.offset(page.completion.bytes as u64 - 1).line(self.line_bits).0;
            for line in first..=last {
                timer.issue(hierarchy, Line(line), false);
                let destination = Line(self.app_buffer.0 + self.app_cursor);
                self.app_cursor = (self.app_cursor + 1) % self.app_lines;
                timer.issue(hierarchy, destination, true);
            }
            timer.compute(self.spec.recv_cycles_per_packet);
            if page.last {
                // Unlinked from the socket, the sk_buff goes on the IRQ CPU's deferred-free
                // list (its `next` pointer is the first metadata line).
                socket.update_shared(timer, hierarchy);
                timer.issue(hierarchy, page.metadata, true);
                socket.deferred_skbs += 1;
                // At half of `net.core.skb_defer_max` (64) Linux kicks the IRQ CPU to free them.
                if socket.deferred_skbs == DEFER_KICK {
                    if let Some(napi) = queue.waiter.take() {
                        wakes.push((napi, timer.now));
                    }
                }
            }
            socket.deferred.push(page);
            copied += page.completion.bytes as u64;
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
