//! The Linux TCP receive path, as iperf exercises it: NAPI on the IRQ CPU takes completions,
//! reads each packet's header, builds its sk_buff and queues it on the socket; the application
//! (iperf's `recv`) on its own CPU reads the sk_buff and copies the payload into a reused user
//! buffer. Since Linux 5.19 recv does not free the sk_buff itself but hands it back to the CPU
//! that allocated it (`skb_attempt_defer_free`); NAPI frees it at its next poll, recycling the
//! pages straight into its page pool's cache. The two halves run on one CPU (taking turns), on
//! SMT siblings, or on two cores, as in the seeds' placements.
//!
//! With hardware GRO (bnxt's TPA, on by default) the NIC merges consecutive segments of a flow:
//! each queue buffer is one page of an aggregation with its own completion, and the driver builds
//! one sk_buff per `tpa_pages` pages, reading the headers and doing the protocol work once per
//! aggregation, and hands it to the socket when its last page is in. (The traffic is one
//! continuous flow, so aggregations always fill; the NIC's aggregation timeout is not modelled.)

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use crate::cpu::{Next, Program, ProgramCx, UnitKind, STEP};
use crate::devices::ring::{Completion, Poll, RingId, RxRing, RX_QUEUE};
use crate::devices::SystemShape;
use crate::engine::Signal;
use crate::error::{ensure, ConfigResult};
use crate::params::params;
use crate::system::Builder;
use crate::units::Line;
use crate::workloads::WorkloadSpec;

/// Bounds that keep a run's work sane: no kernel structure of one sk_buff spans more than
/// 256 KiB, and a slab holds a few dozen sk_buffs.
const MAX_LINES_PER_SKB: u32 = 4096;
const MAX_SKB_POOL: u32 = 65536;

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
        /// Cycles NAPI spends sending the ACK of each sk_buff: Linux acknowledges at once a
        /// receive of more than one full-sized segment (`__tcp_ack_snd_check`, net/ipv4/tcp_input.c),
        /// so every GRO sk_buff is answered by an ACK that goes down the whole transmit path (an
        /// sk_buff allocated and later freed, TCP and IP headers, the qdisc, the driver's
        /// descriptor and doorbell, the TX completion). Its memory accesses are among
        /// `kernel_lines`. Assumed: 2000 cycles (~0.5 µs at 4 GHz), the order of one small packet's
        /// trip through the kernel's transmit path.
        ack_cycles: f64 = 2000.0,
        /// Cycles the application's CPU spends each time a `recv` that found the socket empty is
        /// woken (the softirq's wake-up of the sleeping thread, the scheduler, the context switch
        /// back into it). Assumed: 4000 cycles (~1 µs at 4 GHz), a thread switch as pipe
        /// ping-pong benchmarks measure it on Linux (about 1-3.5 µs per switch, docs/tcp.md).
        wakeup_cycles: f64 = 4000.0,
        /// Lines of socket state both halves write for each sk_buff: the receive queue and its
        /// lock, receive-memory accounting, TCP's receive sequence state, the deferred-free list,
        /// what the application's side sends (window updates) and NAPI then completes. Calibrated
        /// with `kernel_lines` by `steer fit fits/iperf-rx-kernel.toml` on seed 000's one-queue
        /// DC-fill rows.
        socket_lines: u32 = 48,
        /// Lines of the IRQ CPU's own kernel state NAPI reads per sk_buff besides those above:
        /// IP and TCP receive and GRO, the ACK it sends (its sk_buff and head, route, qdisc, TX
        /// ring entry), per-page driver and page-pool work, per-CPU counters. Calibrated with
        /// `socket_lines` (see there).
        kernel_lines: u32 = 250,
        /// Bytes of that state, read in turn from one sk_buff to the next. Assumed: 256 KiB, more
        /// than an L1D holds, and within an L2 together with what else passes through it between
        /// two reads of a line (with SDCI, the injected pages).
        kernel_state_bytes: u64 = 262144,
    }
}

/// The kind's registration.
#[linkme::distributed_slice(crate::workloads::WORKLOADS)]
pub static KIND: crate::workloads::WorkloadKind = crate::workloads::WorkloadKind::of::<TcpRxSpec>(
    "tcp_rx",
    "the Linux TCP receive path: NAPI on each queue's IRQ CPU, the application's recv copy on `app_offset` CPUs further",
);

impl WorkloadSpec for TcpRxSpec {
    fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        for &irq in system.check_device(path, &self.device, RX_QUEUE)? {
            ensure(irq + self.app_offset < system.cpus, &format!("{path}.app_offset"), || {
                format!("the application of IRQ CPU {irq} would run on CPU {}, out of range", irq + self.app_offset)
            })?;
        }
        // NAPI budgets are tens of packets (64 by default), aggregations tens of pages.
        ensure((1..=65536).contains(&self.napi_budget), &format!("{path}.napi_budget"), || {
            format!("must be 1 to 65536 (got {})", self.napi_budget)
        })?;
        ensure((1..=MAX_SKB_POOL).contains(&self.skb_pool), &format!("{path}.skb_pool"), || {
            format!("must be 1 to {MAX_SKB_POOL} (got {})", self.skb_pool)
        })?;
        for (name, lines) in [
            ("skb_lines", self.skb_lines),
            ("head_lines", self.head_lines),
            ("socket_lines", self.socket_lines),
            ("kernel_lines", self.kernel_lines),
        ] {
            ensure(lines <= MAX_LINES_PER_SKB, &format!("{path}.{name}"), || {
                format!("at most {MAX_LINES_PER_SKB} lines per sk_buff (got {lines})")
            })?;
        }
        ensure((1..=1024).contains(&self.tpa_pages), &format!("{path}.tpa_pages"), || {
            format!("must be 1 to 1024 (got {})", self.tpa_pages)
        })?;
        ensure(self.kernel_state_bytes >= 64, &format!("{path}.kernel_state_bytes"), || "must be at least 64".into())?;
        ensure(self.app_buffer_bytes >= 64, &format!("{path}.app_buffer_bytes"), || "must be at least 64".into())
    }

    /// Each queue's IRQ CPU and its application's CPU.
    fn cpus(&self, system: &SystemShape) -> Vec<u32> {
        let mut cpus: Vec<u32> =
            system.queue_cpus(&self.device).into_iter().flat_map(|irq| [irq, irq + self.app_offset]).collect();
        cpus.sort_unstable();
        cpus.dedup();
        cpus
    }

    fn queues(&self, system: &SystemShape) -> Vec<(String, u32)> {
        (0..system.queue_cpus(&self.device).len() as u32).map(|q| (self.device.clone(), q)).collect()
    }

    fn build(&self, b: &mut Builder) {
        let line_bits = b.platform.line_bits();
        for ring_id in b.queues_of::<RxRing>(&self.device).to_vec() {
            let ring = b.queue(ring_id);
            let irq_cpu = ring.shape.consumer_cpu;
            let app_cpu = irq_cpu + self.app_offset;
            let pool = ring.pool_buffers() as u64;
            // Page metadata lives with the pages, on the NIC's node (the ring's buffers' node).
            let node = b.node_of_addr(ring.buffer_addr(0));
            let shared_lines = self.socket_lines as u64;
            let socket = Rc::new(RefCell::new(Socket {
                queue: VecDeque::new(),
                deferred: Vec::new(),
                deferred_skbs: 0,
                shared: b.alloc(node, (shared_lines << line_bits).max(1)).line(line_bits),
                shared_lines,
                pages: b.alloc(node, pool * PAGE_BYTES).line(line_bits),
                lines_per_page: PAGE_BYTES >> line_bits,
                free_skbs: Vec::new(),
                data: b.signal(),
                kick: b.signal(),
            }));
            let napi_node = b.platform.node_of_cpu(irq_cpu);
            // Whole head buffers only, at least one.
            let head_lines = self.head_lines.max(1) as u64;
            let frag_cache_lines = ((self.frag_cache_bytes >> line_bits) / head_lines).max(1) * head_lines;
            let skb_lines = self.skb_lines.max(1) as u64;
            // Every page can be in flight in an sk_buff of its own: reserve slabs for them all.
            let slabs = pool.div_ceil(self.skb_pool as u64) + 1;
            let reserve = slabs * self.skb_pool as u64 * skb_lines;
            let napi = Napi {
                spec: self.clone(),
                ring: ring_id,
                socket: socket.clone(),
                line_bits,
                slab: SkbSlab {
                    next: b.alloc(napi_node, reserve << line_bits).line(line_bits),
                    left: slabs,
                    lines: skb_lines,
                    per_slab: self.skb_pool as u64,
                },
                frag_cache: b.alloc(napi_node, frag_cache_lines << line_bits).line(line_bits),
                frag_cache_lines,
                frag_cursor: 0,
                kernel_state: b.alloc(napi_node, self.kernel_state_bytes).line(line_bits),
                kernel_state_lines: (self.kernel_state_bytes >> line_bits).max(1),
                kernel_cursor: 0,
                open_aggregation: Vec::new(),
                in_poll: false,
                taken: 0,
                freeing: Vec::new(),
                pending: None,
            };
            let app_node = b.platform.node_of_cpu(app_cpu);
            let recv = Recv {
                spec: self.clone(),
                ring: ring_id,
                socket,
                line_bits,
                app_buffer: b.alloc(app_node, self.app_buffer_bytes).line(line_bits),
                app_lines: (self.app_buffer_bytes >> line_bits).max(1),
                app_cursor: 0,
                in_call: false,
                slept: false,
                copied: 0,
                consuming: None,
            };
            b.run_on(irq_cpu, Box::new(napi));
            b.run_on(app_cpu, Box::new(recv));
        }
    }
}

/// Deferred sk_buffs at which the application's CPU kicks NAPI's to free them: half of
/// `net.core.skb_defer_max` (64).
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
struct Socket {
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
    /// Notified when sk_buffs are queued for the application.
    data: Signal,
    /// Notified when the application has deferred enough sk_buffs for NAPI to free.
    kick: Signal,
}

impl Socket {
    /// Queues the writes of the socket state both halves update.
    fn update_shared(&self, cx: &mut ProgramCx) {
        for line in self.shared.0..self.shared.0 + self.shared_lines {
            cx.store(Line(line));
        }
    }

    fn page(&self, buffer: u32) -> Line {
        // At a scattered line of its block, as pages' frame numbers scatter them over the cache sets.
        let offset = (buffer as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58;
        Line(self.pages.0 + buffer as u64 * self.lines_per_page + offset % self.lines_per_page)
    }
}

/// Where NAPI's sk_buffs come from: slabs of `per_slab` objects of `lines` lines, carved from a
/// reserve big enough for every page of the pool to be in flight in an sk_buff of its own.
#[derive(Debug, Clone, Copy)]
struct SkbSlab {
    next: Line,
    /// Slabs left in the reserve.
    left: u64,
    lines: u64,
    per_slab: u64,
}

impl SkbSlab {
    /// A free sk_buff of the socket, the last freed first; a new slab when none is free.
    fn alloc(&mut self, socket: &mut Socket) -> Option<Line> {
        if socket.free_skbs.is_empty() {
            if self.left == 0 {
                return None;
            }
            self.left -= 1;
            let slab = self.next;
            self.next = Line(slab.0 + self.per_slab * self.lines);
            // Pushed last to first, so the slab hands out its first object first.
            socket.free_skbs.extend((0..self.per_slab).rev().map(|i| Line(slab.0 + i * self.lines)));
        }
        socket.free_skbs.pop()
    }
}

/// Tags of NAPI's calls.
const FREE_DEFERRED: u32 = 0;
const PAGE_DONE: u32 = 1;

/// NAPI on the IRQ CPU: a poll frees what the application deferred, then takes up to a budget of
/// ready completions, each a unit of work.
struct Napi {
    spec: TcpRxSpec,
    ring: RingId,
    socket: Rc<RefCell<Socket>>,
    line_bits: u32,
    slab: SkbSlab,
    frag_cache: Line,
    frag_cache_lines: u64,
    frag_cursor: u64,
    /// The kernel state NAPI reads `kernel_lines` of per sk_buff, the next one at the cursor.
    kernel_state: Line,
    kernel_state_lines: u64,
    kernel_cursor: u64,
    /// The aggregation in progress: its pages so far, which share one sk_buff and reach the
    /// socket together when the last one is in.
    open_aggregation: Vec<SkbPage>,
    in_poll: bool,
    taken: u32,
    /// The deferred pages being freed by the current unit.
    freeing: Vec<SkbPage>,
    /// The page being processed by the current unit.
    pending: Option<SkbPage>,
}

impl Napi {
    /// Queues the frees of the sk_buffs the application handed back: their pages go to the page
    /// pool's cache (last freed, first reused), the sk_buffs to the slab.
    fn free_deferred(&mut self, cx: &mut ProgramCx) {
        let mut socket = self.socket.borrow_mut();
        socket.deferred_skbs = 0;
        self.freeing = std::mem::take(&mut socket.deferred);
        for page in &self.freeing {
            cx.store(socket.page(page.completion.buffer));
            if page.last {
                (page.metadata.0..page.metadata.0 + self.spec.skb_lines as u64).for_each(|line| cx.store(Line(line)));
            }
        }
        cx.call(FREE_DEFERRED);
    }

    /// Queues the processing of one completion (one page of an aggregation); `None` if no sk_buff
    /// could be had.
    fn take_page(&mut self, cx: &mut ProgramCx, completion: Completion, descriptor: Line, header: Line) -> Option<()> {
        cx.load_dependent(completion.entry.line(self.line_bits));
        let mut socket = self.socket.borrow_mut();
        let (metadata, head) = match self.open_aggregation.first() {
            Some(page) => (page.metadata, page.head),
            None => {
                // A new aggregation: protocol processing reads the headers in its first page's
                // first line and builds the sk_buff.
                cx.load_dependent(header);
                let metadata = self.slab.alloc(&mut socket)?;
                let head = Line(self.frag_cache.0 + self.frag_cursor);
                self.frag_cursor = (self.frag_cursor + self.spec.head_lines as u64) % self.frag_cache_lines;
                let skb = metadata.0..metadata.0 + self.spec.skb_lines as u64;
                skb.chain(head.0..head.0 + self.spec.head_lines as u64).for_each(|line| cx.store(Line(line)));
                for _ in 0..self.spec.kernel_lines {
                    cx.load(Line(self.kernel_state.0 + self.kernel_cursor));
                    self.kernel_cursor = (self.kernel_cursor + 1) % self.kernel_state_lines;
                }
                cx.compute(self.spec.napi_cycles_per_packet);
                (metadata, head)
            }
        };
        cx.store(socket.page(completion.buffer));
        cx.compute(self.spec.napi_cycles_per_page);
        // The driver refills the descriptor with a fresh page from the page pool.
        cx.store(descriptor);
        let last = self.open_aggregation.len() + 1 == self.spec.tpa_pages as usize;
        if last {
            // The sk_buff is complete: TCP queues it on the socket and acknowledges it.
            socket.update_shared(cx);
            cx.compute(self.spec.ack_cycles);
        }
        cx.call(PAGE_DONE);
        self.pending = Some(SkbPage { completion, metadata, head, last });
        Some(())
    }

    /// Ends the poll: wait for its accesses.
    fn end_poll(&mut self, cx: &mut ProgramCx) -> Next {
        self.in_poll = false;
        cx.drain();
        cx.count(1);
        Next::Yield
    }
}

impl Program for Napi {
    fn role(&self) -> &'static str {
        "irq"
    }

    fn unit(&self) -> &'static UnitKind {
        &STEP
    }

    fn next(&mut self, cx: &mut ProgramCx) -> Next {
        let now = cx.now();
        if !self.in_poll {
            let deferred = !self.socket.borrow().deferred.is_empty();
            let ring = cx.device_queue(self.ring);
            match ring.poll(now) {
                Poll::Ready(_) => {}
                _ if deferred => {}
                Poll::NotYet(ready) => return Next::At(ready),
                Poll::Empty => {
                    let (ready, kick) = (ring.ready, self.socket.borrow().kick);
                    cx.wait_on(ready);
                    cx.wait_on(kick);
                    return Next::Wait;
                }
            }
            self.in_poll = true;
            self.taken = 0;
            if deferred {
                self.free_deferred(cx);
                return Next::Unit;
            }
        }
        if self.taken == self.spec.napi_budget {
            return self.end_poll(cx);
        }
        let ring: &mut RxRing = cx.device_queue(self.ring);
        let Poll::Ready(_) = ring.poll(now) else { return self.end_poll(cx) };
        let completion = ring.take().expect("a ready completion");
        let descriptor = ring.next_descriptor_addr().line(self.line_bits);
        let header = ring.buffer_addr(completion.buffer).line(self.line_bits);
        self.taken += 1;
        match self.take_page(cx, completion, descriptor, header) {
            Some(()) => Next::Unit,
            None => Next::Stall("the sk_buff reserve is exhausted".into()),
        }
    }

    fn on_call(&mut self, tag: u32, cx: &mut ProgramCx) {
        match tag {
            FREE_DEFERRED => {
                let mut socket = self.socket.borrow_mut();
                for page in std::mem::take(&mut self.freeing) {
                    cx.device_queue(self.ring).recycle(page.completion.buffer);
                    if page.last {
                        socket.free_skbs.push(page.metadata);
                    }
                }
            }
            _ => {
                let page = self.pending.take().expect("a page is being processed");
                let ring = cx.device_queue(self.ring);
                ring.finish(&page.completion);
                ring.refill();
                self.open_aggregation.push(page);
                if page.last {
                    let mut socket = self.socket.borrow_mut();
                    socket.queue.extend(self.open_aggregation.drain(..));
                    let data = socket.data;
                    drop(socket);
                    cx.notify(data);
                }
            }
        }
    }

    fn waiting_for(&self) -> String {
        format!("a packet on {} or sk_buffs to free", self.spec.device)
    }
}

/// Tag of recv's call when a page is copied.
const PAGE_COPIED: u32 = 0;

/// The application: one `recv()` call copies queued pages into the user buffer until it is full
/// or the socket is empty, each page a unit of work.
struct Recv {
    spec: TcpRxSpec,
    ring: RingId,
    socket: Rc<RefCell<Socket>>,
    line_bits: u32,
    app_buffer: Line,
    app_lines: u64,
    app_cursor: u64,
    in_call: bool,
    /// The last call found the socket empty and the thread went to sleep: the next one starts
    /// with its wake-up.
    slept: bool,
    copied: u64,
    /// The page being copied by the current unit.
    consuming: Option<SkbPage>,
}

impl Recv {
    fn copy_page(&mut self, cx: &mut ProgramCx, page: SkbPage, buffer: crate::units::Addr) {
        cx.load_dependent(page.metadata);
        cx.load(page.head);
        let first = buffer.line(self.line_bits).0;
        let last = buffer.offset(page.completion.bytes as u64 - 1).line(self.line_bits).0;
        for line in first..=last {
            cx.load(Line(line));
            cx.store(Line(self.app_buffer.0 + self.app_cursor));
            self.app_cursor = (self.app_cursor + 1) % self.app_lines;
        }
        cx.compute(self.spec.recv_cycles_per_packet);
        if page.last {
            // Unlinked from the socket, the sk_buff goes on the IRQ CPU's deferred-free list (its
            // `next` pointer is the first metadata line).
            self.socket.borrow().update_shared(cx);
            cx.store(page.metadata);
        }
        cx.call(PAGE_COPIED);
        self.copied += page.completion.bytes as u64;
        self.consuming = Some(page);
    }
}

impl Program for Recv {
    fn role(&self) -> &'static str {
        "iperf"
    }

    fn unit(&self) -> &'static UnitKind {
        &STEP
    }

    fn next(&mut self, cx: &mut ProgramCx) -> Next {
        let page = self.socket.borrow_mut().queue.front().copied();
        if !self.in_call {
            if page.is_none() {
                let data = self.socket.borrow().data;
                cx.wait_on(data);
                self.slept = true;
                return Next::Wait;
            }
            self.in_call = true;
            self.copied = 0;
            if std::mem::take(&mut self.slept) {
                cx.compute(self.spec.wakeup_cycles);
            }
        }
        match page {
            Some(page) if self.copied < self.spec.app_buffer_bytes => {
                self.socket.borrow_mut().queue.pop_front();
                let buffer = cx.device_queue(self.ring).buffer_addr(page.completion.buffer);
                self.copy_page(cx, page, buffer);
                Next::Unit
            }
            _ => {
                self.in_call = false;
                cx.drain();
                cx.count(1);
                Next::Yield
            }
        }
    }

    fn on_call(&mut self, _tag: u32, cx: &mut ProgramCx) {
        let page = self.consuming.take().expect("a page is being copied");
        let mut socket = self.socket.borrow_mut();
        socket.deferred.push(page);
        if page.last {
            socket.deferred_skbs += 1;
            // At half of `net.core.skb_defer_max` Linux kicks the IRQ CPU to free them.
            if socket.deferred_skbs == DEFER_KICK {
                let kick = socket.kick;
                drop(socket);
                cx.notify(kick);
            }
        }
    }

    fn waiting_for(&self) -> String {
        format!("data on the socket of a {} queue", self.spec.device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{ask, reach_call, Op};
    use crate::devices::ring::Recycle;
    use crate::devices::ring::Rings;
    use crate::engine::Harness;
    use crate::testing::{deliver, ns, ring_harness, READY};

    const DATA: Signal = Signal(2);
    const KICK: Signal = Signal(3);

    #[test]
    fn sk_buffs_come_from_slabs_until_the_reserve_is_spent_the_last_freed_first() {
        let (_, napi, _) = path();
        let mut socket = napi.socket.borrow_mut();
        let mut slab = SkbSlab { next: Line(0x500), left: 2, lines: 2, per_slab: 3 };
        // Two slabs of three 2-line objects: 0x500, 0x502, 0x504, then 0x506, 0x508, 0x50a; then none.
        let taken: Vec<_> = (0..6).map(|_| slab.alloc(&mut socket)).collect();
        assert_eq!(taken, [0x500, 0x502, 0x504, 0x506, 0x508, 0x50a].map(|l| Some(Line(l))));
        assert_eq!(slab.alloc(&mut socket), None);
        socket.free_skbs.extend([Line(0x502), Line(0x508)]);
        assert_eq!(slab.alloc(&mut socket), Some(Line(0x508)));
    }

    #[test]
    fn stalled_napi_and_recv_say_what_they_wait_for_on_their_device() {
        let (_, napi, recv) = path();
        let device = &napi.spec.device;
        assert!(!device.is_empty());
        assert_eq!(napi.waiting_for(), format!("a packet on {device} or sk_buffs to free"));
        assert_eq!(recv.waiting_for(), format!("data on the socket of a {device} queue"));
    }

    /// NAPI and recv of one queue (8 descriptors, 8 pages), sharing a socket: two pages per
    /// sk_buff, two-line sk_buffs, one-line heads, one line of socket state, budget 3.
    fn path() -> (Harness, Napi, Recv) {
        let (h, ring) = ring_harness(8, 8, Recycle::Lifo);
        let spec = TcpRxSpec {
            napi_budget: 3,
            skb_lines: 2,
            head_lines: 1,
            socket_lines: 1,
            kernel_lines: 2,
            kernel_state_bytes: 192,
            tpa_pages: 2,
            skb_pool: 4,
            app_buffer_bytes: 8192,
            ..TcpRxSpec::default()
        };
        let socket = Rc::new(RefCell::new(Socket {
            queue: VecDeque::new(),
            deferred: Vec::new(),
            deferred_skbs: 0,
            shared: Line(0x700),
            shared_lines: 1,
            pages: Line(0x10000),
            lines_per_page: 64,
            free_skbs: Vec::new(),
            data: DATA,
            kick: KICK,
        }));
        let napi = Napi {
            spec: spec.clone(),
            ring,
            socket: socket.clone(),
            line_bits: 6,
            slab: SkbSlab { next: Line(0x500), left: 3, lines: 2, per_slab: 4 },
            frag_cache: Line(0x600),
            frag_cache_lines: 2,
            frag_cursor: 0,
            kernel_state: Line(0x680),
            kernel_state_lines: 3,
            kernel_cursor: 0,
            open_aggregation: Vec::new(),
            in_poll: false,
            taken: 0,
            freeing: Vec::new(),
            pending: None,
        };
        let recv = Recv {
            spec,
            ring,
            socket,
            line_bits: 6,
            app_buffer: Line(0x800),
            app_lines: 128,
            app_cursor: 0,
            in_call: false,
            slept: false,
            copied: 0,
            consuming: None,
        };
        (h, napi, recv)
    }

    fn page_line(napi: &Napi, buffer: u32) -> Line {
        napi.socket.borrow().page(buffer)
    }

    #[test]
    fn napi_builds_one_sk_buff_from_the_pages_of_an_aggregation_and_queues_it_when_the_last_is_in() {
        let (mut h, mut napi, _) = path();
        let ring = napi.ring;
        deliver(&mut h, ring, 4096, ns(0.0), ns(100.0));
        deliver(&mut h, ring, 4096, ns(1.0), ns(101.0));
        let (next, ops, _) = h.with_cx(ns(101.0), ns(101.0), |cx| ask(&mut napi, cx, ns(101.0)));
        assert_eq!(next, Next::Unit);
        let first = [
            Op::LoadDependent(Line(0x3000 >> 6)),
            Op::LoadDependent(Line(0x4000)),
            Op::Store(Line(0x500)),
            Op::Store(Line(0x501)),
            Op::Store(Line(0x600)),
            Op::Load(Line(0x680)),
            Op::Load(Line(0x681)),
            Op::Compute(1000.0),
            Op::Store(page_line(&napi, 0)),
            Op::Compute(150.0),
            Op::Store(Line(0x1000 >> 6)),
            Op::Call(PAGE_DONE),
        ];
        assert_eq!(ops, first);
        h.with_cx(ns(200.0), ns(200.0), |cx| reach_call(&mut napi, PAGE_DONE, cx, ns(200.0)));
        assert!(napi.socket.borrow().queue.is_empty() && h.notified().is_empty());
        let (_, ops, _) = h.with_cx(ns(200.0), ns(200.0), |cx| ask(&mut napi, cx, ns(200.0)));
        // The second page shares the sk_buff: no header read, no sk_buff writes; the socket
        // state is updated, and the ACK sent, when the aggregation is complete. The descriptor refilled by the
        // first page moved the next slot on.
        let second = [
            Op::LoadDependent(Line(0x3010 >> 6)),
            Op::Store(page_line(&napi, 1)),
            Op::Compute(150.0),
            Op::Store(Line(0x1010 >> 6)),
            Op::Store(Line(0x700)),
            Op::Compute(2000.0),
            Op::Call(PAGE_DONE),
        ];
        assert_eq!(ops, second);
        h.with_cx(ns(300.0), ns(300.0), |cx| reach_call(&mut napi, PAGE_DONE, cx, ns(300.0)));
        let queued: Vec<bool> = napi.socket.borrow().queue.iter().map(|p| p.last).collect();
        assert_eq!(queued, [false, true]);
        assert_eq!(h.notified(), [(DATA, ns(300.0))], "the application is woken when the sk_buff is queued");
        assert_eq!(h.shared.get_mut::<Rings>()[0].stats.consumed_packets, 2);
        // Nothing more is ready: the poll ends with a drain, and the next one waits.
        let (next, ops, units) = h.with_cx(ns(300.0), ns(300.0), |cx| ask(&mut napi, cx, ns(300.0)));
        assert_eq!((next, ops, units), (Next::Yield, vec![Op::Drain], 1));
        assert_eq!(h.with_cx(ns(300.0), ns(300.0), |cx| ask(&mut napi, cx, ns(300.0))).0, Next::Wait);
        assert_eq!(h.waits(), [READY, KICK]);
    }

    #[test]
    fn each_sk_buff_reads_the_next_lines_of_napis_kernel_state_in_turn() {
        let (mut h, mut napi, _) = path();
        let ring = napi.ring;
        let kernel_loads = |ops: &[Op]| -> Vec<Line> {
            ops.iter().filter_map(|op| if let Op::Load(line) = op { Some(*line) } else { None }).collect()
        };
        for k in 0..4 {
            deliver(&mut h, ring, 4096, ns(k as f64), ns(100.0));
        }
        let mut loads = Vec::new();
        for k in 0..3 {
            let now = ns(100.0 + 100.0 * k as f64);
            let (_, ops, _) = h.with_cx(now, now, |cx| ask(&mut napi, cx, now));
            loads.push(kernel_loads(&ops));
            h.with_cx(now, now, |cx| reach_call(&mut napi, PAGE_DONE, cx, now));
        }
        // Two lines per sk_buff from three: the second sk_buff (third page) wraps around.
        assert_eq!(loads, [vec![Line(0x680), Line(0x681)], vec![], vec![Line(0x682), Line(0x680)]]);
    }

    #[test]
    fn a_poll_takes_at_most_its_budget() {
        let (mut h, mut napi, _) = path();
        let ring = napi.ring;
        for i in 0..4 {
            deliver(&mut h, ring, 4096, ns(i as f64), ns(10.0));
        }
        for _ in 0..3 {
            assert_eq!(h.with_cx(ns(10.0), ns(10.0), |cx| ask(&mut napi, cx, ns(10.0))).0, Next::Unit);
            h.with_cx(ns(10.0), ns(10.0), |cx| reach_call(&mut napi, PAGE_DONE, cx, ns(10.0)));
        }
        let (next, ops, _) = h.with_cx(ns(10.0), ns(10.0), |cx| ask(&mut napi, cx, ns(10.0)));
        assert_eq!((next, ops), (Next::Yield, vec![Op::Drain]));
        assert_eq!(h.shared.get_mut::<Rings>()[0].stats.consumed_packets, 3);
    }

    #[test]
    fn recv_copies_pages_defers_the_sk_buff_and_napi_frees_it_at_its_next_poll() {
        let (mut h, mut napi, mut recv) = path();
        let ring = napi.ring;
        assert_eq!(h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut recv, cx, ns(0.0))).0, Next::Wait);
        assert_eq!(h.waits(), [DATA]);
        for i in 0..2 {
            deliver(&mut h, ring, 128, ns(i as f64), ns(10.0));
            h.with_cx(ns(10.0), ns(10.0), |cx| ask(&mut napi, cx, ns(10.0)));
            h.with_cx(ns(10.0), ns(10.0), |cx| reach_call(&mut napi, PAGE_DONE, cx, ns(10.0)));
        }
        // NAPI's poll ends: nothing more is ready.
        assert_eq!(h.with_cx(ns(10.0), ns(10.0), |cx| ask(&mut napi, cx, ns(10.0))).0, Next::Yield);
        h.notified();
        let (next, ops, _) = h.with_cx(ns(20.0), ns(20.0), |cx| ask(&mut recv, cx, ns(20.0)));
        assert_eq!(next, Next::Unit);
        // The call starts with the wake-up of the thread that found the socket empty.
        let first_page = [
            Op::Compute(4000.0),
            Op::LoadDependent(Line(0x500)),
            Op::Load(Line(0x600)),
            Op::Load(Line(0x4000)),
            Op::Store(Line(0x800)),
            Op::Load(Line(0x4001)),
            Op::Store(Line(0x801)),
            Op::Compute(400.0),
            Op::Call(PAGE_COPIED),
        ];
        assert_eq!(ops, first_page);
        h.with_cx(ns(30.0), ns(30.0), |cx| reach_call(&mut recv, PAGE_COPIED, cx, ns(30.0)));
        let (_, ops, _) = h.with_cx(ns(30.0), ns(30.0), |cx| ask(&mut recv, cx, ns(30.0)));
        // The last page of the sk_buff also updates the socket and links the sk_buff into the
        // deferred-free list.
        assert_eq!(
            &ops[ops.len() - 4..],
            [Op::Compute(400.0), Op::Store(Line(0x700)), Op::Store(Line(0x500)), Op::Call(PAGE_COPIED)]
        );
        h.with_cx(ns(40.0), ns(40.0), |cx| reach_call(&mut recv, PAGE_COPIED, cx, ns(40.0)));
        assert_eq!(napi.socket.borrow().deferred_skbs, 1);
        assert!(h.notified().is_empty(), "one deferred sk_buff does not kick NAPI");
        let (next, ops, units) = h.with_cx(ns(40.0), ns(40.0), |cx| ask(&mut recv, cx, ns(40.0)));
        assert_eq!((next, ops, units), (Next::Yield, vec![Op::Drain], 1));
        // NAPI's next poll frees the pages (back to the pool's cache) and the sk_buff.
        let posted_before = h.shared.get_mut::<Rings>()[0].next_descriptor_addr();
        let (next, ops, _) = h.with_cx(ns(50.0), ns(50.0), |cx| ask(&mut napi, cx, ns(50.0)));
        assert_eq!(next, Next::Unit);
        let frees = [
            Op::Store(page_line(&napi, 0)),
            Op::Store(page_line(&napi, 1)),
            Op::Store(Line(0x500)),
            Op::Store(Line(0x501)),
            Op::Call(FREE_DEFERRED),
        ];
        assert_eq!(ops, frees);
        h.with_cx(ns(60.0), ns(60.0), |cx| reach_call(&mut napi, FREE_DEFERRED, cx, ns(60.0)));
        assert_eq!(napi.socket.borrow().free_skbs.last(), Some(&Line(0x500)));
        assert_ne!(
            h.shared.get_mut::<Rings>()[0].next_descriptor_addr(),
            posted_before,
            "the freed pages refilled descriptors"
        );
    }

    #[test]
    fn recv_kicks_napi_at_the_thirty_second_deferred_sk_buff() {
        let (mut h, mut napi, mut recv) = path();
        let ring = napi.ring;
        for i in 0..2 {
            deliver(&mut h, ring, 64, ns(i as f64), ns(10.0));
            h.with_cx(ns(10.0), ns(10.0), |cx| ask(&mut napi, cx, ns(10.0)));
            h.with_cx(ns(10.0), ns(10.0), |cx| reach_call(&mut napi, PAGE_DONE, cx, ns(10.0)));
        }
        napi.socket.borrow_mut().deferred_skbs = DEFER_KICK - 1;
        h.notified();
        for at in [20.0, 30.0] {
            h.with_cx(ns(at), ns(at), |cx| ask(&mut recv, cx, ns(at)));
            h.with_cx(ns(at), ns(at), |cx| reach_call(&mut recv, PAGE_COPIED, cx, ns(at + 5.0)));
        }
        assert_eq!(h.notified(), [(KICK, ns(35.0))]);
    }

    #[test]
    fn a_call_copies_at_most_the_application_buffer() {
        let (mut h, mut napi, mut recv) = path();
        recv.spec.app_buffer_bytes = 4096;
        napi.spec.napi_budget = 64;
        napi_takes_pages(&mut h, &mut napi, 4, 4096, 10.0);
        assert_eq!(h.with_cx(ns(20.0), ns(20.0), |cx| ask(&mut recv, cx, ns(20.0))).0, Next::Unit);
        h.with_cx(ns(20.0), ns(20.0), |cx| reach_call(&mut recv, PAGE_COPIED, cx, ns(20.0)));
        assert_eq!(h.with_cx(ns(20.0), ns(20.0), |cx| ask(&mut recv, cx, ns(20.0))).0, Next::Yield);
        assert_eq!(napi.socket.borrow().queue.len(), 3);
    }

    /// `count` pages of `bytes`, delivered one a nanosecond and taken by NAPI one by one at `at` ns.
    fn napi_takes_pages(h: &mut Harness, napi: &mut Napi, count: u32, bytes: u32, at: f64) {
        for i in 0..count {
            deliver(h, napi.ring, bytes, ns(i as f64), ns(at));
            h.with_cx(ns(at), ns(at), |cx| ask(napi, cx, ns(at)));
            h.with_cx(ns(at), ns(at), |cx| reach_call(napi, PAGE_DONE, cx, ns(at)));
        }
    }

    /// The cycles of `Op::Compute` ops, in order.
    fn computes(ops: &[Op]) -> Vec<f64> {
        ops.iter().filter_map(|op| if let Op::Compute(cycles) = op { Some(*cycles) } else { None }).collect()
    }

    #[test]
    fn napi_sends_one_ack_per_sk_buff_with_its_last_page() {
        let (mut h, mut napi, _) = path();
        napi.spec.ack_cycles = 700.0;
        let ring = napi.ring;
        for i in 0..4 {
            deliver(&mut h, ring, 4096, ns(i as f64), ns(10.0));
        }
        let mut per_page = Vec::new();
        for _ in 0..3 {
            let (_, ops, _) = h.with_cx(ns(10.0), ns(10.0), |cx| ask(&mut napi, cx, ns(10.0)));
            per_page.push(computes(&ops));
            h.with_cx(ns(10.0), ns(10.0), |cx| reach_call(&mut napi, PAGE_DONE, cx, ns(10.0)));
        }
        // Two pages to an sk_buff: the first page of each does the protocol work (1000 cycles)
        // and its own (150); the last adds the ACK (700).
        assert_eq!(per_page, [vec![1000.0, 150.0], vec![150.0, 700.0], vec![1000.0, 150.0]]);
    }

    #[test]
    fn recv_pays_the_wake_up_only_for_a_call_after_it_slept() {
        let (mut h, mut napi, mut recv) = path();
        recv.spec.wakeup_cycles = 3000.0;
        napi.spec.napi_budget = 64;
        // Two sk_buffs of two 64 B pages; the second is held back to arrive later.
        napi_takes_pages(&mut h, &mut napi, 4, 64, 5.0);
        let later: Vec<SkbPage> = napi.socket.borrow_mut().queue.drain(2..).collect();
        let copy_one = |h: &mut Harness, recv: &mut Recv, at: f64| -> Vec<f64> {
            let (next, ops, _) = h.with_cx(ns(at), ns(at), |cx| ask(recv, cx, ns(at)));
            assert_eq!(next, Next::Unit);
            h.with_cx(ns(at), ns(at), |cx| reach_call(recv, PAGE_COPIED, cx, ns(at)));
            computes(&ops)
        };
        // Data is there at the first call: no sleep, no wake-up.
        assert_eq!(copy_one(&mut h, &mut recv, 10.0), [400.0]);
        assert_eq!(copy_one(&mut h, &mut recv, 10.0), [400.0]);
        // The socket is empty: the call ends, the next finds nothing and sleeps (twice: a
        // wake-up without data leaves it asleep).
        assert_eq!(h.with_cx(ns(10.0), ns(10.0), |cx| ask(&mut recv, cx, ns(10.0))).0, Next::Yield);
        assert_eq!(h.with_cx(ns(10.0), ns(10.0), |cx| ask(&mut recv, cx, ns(10.0))).0, Next::Wait);
        assert_eq!(h.with_cx(ns(15.0), ns(15.0), |cx| ask(&mut recv, cx, ns(15.0))).0, Next::Wait);
        napi.socket.borrow_mut().queue.extend(later);
        assert_eq!(copy_one(&mut h, &mut recv, 30.0), [3000.0, 400.0], "woken once, it pays one wake-up");
        assert_eq!(copy_one(&mut h, &mut recv, 30.0), [400.0], "the rest of the call runs without one");
    }
}
