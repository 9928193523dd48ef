//! A logical CPU: the agent that runs workload programs. A program decides what to do next at the
//! CPU's current time and queues it as a unit of operations (loads, stores, compute, calls back
//! into the program); the CPU executes those operations one by one with the core timing model
//! (`CoreTimer`) against the hierarchy, stopping whenever it reaches the engine's run-ahead limit,
//! so a program's memory accesses interleave in time with other agents' at the granularity of
//! single accesses. Several programs on one CPU (NAPI and the application on the same core) take
//! turns: a program keeps the CPU for a burst of units, then the next runnable one goes.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use crate::devices::queues::{CompletionQueue, QueueId, Queues};
use crate::devices::ring::{Completion, RingId};
use crate::engine::{Agent, Cx, Facility, ReportView, Shared, Signal, Step};
use crate::hierarchy::{Hierarchy, Level, Source};
use crate::platform::{CoreSpec, PlatformSpec};
use crate::stats::{stat, Report, Stat};
use crate::system::Builder;
use crate::tlb::Tlb;
use crate::units::{Clock, Line, Time};

/// One operation of a unit of work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// Issue a load without waiting for it.
    Load(Line),
    /// Issue a store.
    Store(Line),
    /// A load whose value the next instruction needs: issue it and wait for the data.
    LoadDependent(Line),
    /// A software prefetch into a level.
    Prefetch(Line, Level),
    /// Wait for every outstanding access.
    Drain,
    /// Compute for this many core cycles.
    Compute(f64),
    /// Wait until the data of a load of this unit has arrived.
    WaitFor(LoadId),
    /// Call the program back (`Program::on_call`) with this tag, at this point of the unit.
    Call(u32),
    /// Stay idle until a time.
    IdleUntil(Time),
    /// Stay busy for a duration (work that is neither memory access nor counted in cycles, such
    /// as writing a frame to a device).
    Hold(Time),
}

/// A load of the current unit, in issue order, for `Op::WaitFor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadId(pub u32);

/// The core timing model: loads issue at a fixed cost per line and stores on a port of their own;
/// misses overlap up to the core's outstanding-miss limit; a dependent use waits for its data;
/// compute adds cycles. A store waits in the store buffer until it commits (its line is in the L1D
/// and every older store has committed); the core stalls on a store only when the buffer is full.
#[derive(Debug, Clone)]
pub struct CoreTimer {
    pub cpu: u32,
    clock: Clock,
    issue: Time,
    store_issue: Time,
    fill: Time,
    /// When the L1D's fill path takes its next miss.
    fill_path_free: Time,
    /// Completion time of each outstanding-miss slot, earliest first out.
    slots: BinaryHeap<Reverse<Time>>,
    /// When the store port takes its next store.
    store_port_free: Time,
    /// Commit times of the stores in the store buffer, oldest first (non-decreasing: stores commit
    /// in program order).
    store_buffer: VecDeque<Time>,
    store_buffer_lines: usize,
    /// The TLB and its walkers, when translation is modelled.
    tlb: Option<Tlb>,
    /// The core's own time: when its next instruction can issue.
    pub now: Time,
}

impl CoreTimer {
    /// A core of lines of `line_bytes`.
    pub fn new(cpu: u32, clock: Clock, core: &CoreSpec, line_bytes: u32) -> CoreTimer {
        CoreTimer {
            cpu,
            clock,
            issue: clock.cycles(core.issue_cycles_per_line),
            store_issue: clock.cycles(core.store_issue_cycles_per_line),
            fill: clock.cycles(core.fill_cycles_per_line),
            fill_path_free: Time::ZERO,
            slots: (0..core.outstanding_misses).map(|_| Reverse(Time::ZERO)).collect(),
            store_port_free: Time::ZERO,
            store_buffer: VecDeque::new(),
            store_buffer_lines: core.store_buffer_lines as usize,
            tlb: Tlb::new(&core.tlb, line_bytes),
            now: Time::ZERO,
        }
    }

    /// A timer for `cpu` with the platform's core parameters.
    pub fn on_cpu(cpu: u32, platform: &PlatformSpec) -> CoreTimer {
        CoreTimer::new(cpu, Clock::new(platform.core.freq_ghz), &platform.core, platform.line_bytes())
    }

    /// Issues one line load without waiting for it; returns when its data is available.
    pub fn issue(&mut self, hierarchy: &mut Hierarchy, line: Line) -> Time {
        self.now += self.issue;
        let (walk, at) = self.translate(hierarchy, line, self.now);
        let access = hierarchy.core_access(self.cpu, line, false, at);
        if access.source == Source::L1 {
            return at + access.latency;
        }
        let (start, done) = self.take_slot(at, access.latency);
        // The core waits for a miss slot as it would without the walk.
        self.now = self.now.max(start - (at - walk));
        done
    }

    /// Translates `line` for an access asked for at `at`: the core waits as long as the walk waits
    /// for a free page walker (a store's `at` is its port's time, which the core does not wait
    /// for); returns when the walk started and when the access can go (both `at` when the TLB
    /// holds the page or translation is not modelled).
    fn translate(&mut self, hierarchy: &mut Hierarchy, line: Line, at: Time) -> (Time, Time) {
        let Some(tlb) = &mut self.tlb else { return (at, at) };
        let (start, done) = tlb.translate(hierarchy, self.cpu, line, at);
        self.now += start - at;
        (start, done)
    }

    /// Page walks since the last reset, when translation is modelled.
    pub fn walks(&self) -> Option<u64> {
        self.tlb.as_ref().map(|tlb| tlb.walks)
    }

    /// Issues one line store on the store port; returns when it commits. The core goes on at once
    /// unless the store buffer is full, when it waits for the oldest store to commit.
    pub fn store(&mut self, hierarchy: &mut Hierarchy, line: Line) -> Time {
        while self.store_buffer.front().is_some_and(|&commit| commit <= self.now) {
            self.store_buffer.pop_front();
        }
        if self.store_buffer.len() == self.store_buffer_lines {
            let oldest = self.store_buffer.pop_front().expect("a full store buffer");
            self.now = self.now.max(oldest);
        }
        let at = self.now.max(self.store_port_free) + self.store_issue;
        self.store_port_free = at;
        let at = self.translate(hierarchy, line, at).1;
        let access = hierarchy.core_access(self.cpu, line, true, at);
        let ready = match access.source {
            Source::L1 if access.ownership == Time::ZERO => at,
            // A hit on a line other caches share: the ownership request holds a miss slot.
            Source::L1 => self.take_slot(at, access.ownership).1,
            _ => self.take_slot(at, access.latency).1,
        };
        let commit = ready.max(self.store_buffer.back().copied().unwrap_or(Time::ZERO));
        self.store_buffer.push_back(commit);
        commit
    }

    /// A miss asked for at `at` needs the L1D's fill path and a free miss slot: it starts when the
    /// path takes it and the earliest slot frees, and holds the slot `latency`; returns (start, done).
    fn take_slot(&mut self, at: Time, latency: Time) -> (Time, Time) {
        let at = at.max(self.fill_path_free);
        self.fill_path_free = at + self.fill;
        let Reverse(free_at) = self.slots.pop().expect("at least one slot");
        let start = free_at.max(at);
        let done = start + latency;
        self.slots.push(Reverse(done));
        (start, done)
    }

    /// A software prefetch into `level`: costs an issue slot and, when it fills the L1D, one of
    /// the L1D's miss slots until the data arrives (prefetches into L2 or L3 queue there, not in
    /// the core). The core does not wait for the data.
    pub fn prefetch(&mut self, hierarchy: &mut Hierarchy, line: Line, level: Level) {
        self.now += self.issue;
        let (walk, at) = self.translate(hierarchy, line, self.now);
        if let Some(latency) = hierarchy.prefetch(self.cpu, line, level, at) {
            if level == Level::L1 {
                let start = self.take_slot(at, latency).0;
                self.now = self.now.max(start - (at - walk));
            }
        }
    }

    /// A load whose value the next instruction needs: issue and wait.
    pub fn load_dependent(&mut self, hierarchy: &mut Hierarchy, line: Line) {
        let done = self.issue(hierarchy, line);
        self.now = self.now.max(done);
    }

    /// Waits for every outstanding access, stores included.
    pub fn drain(&mut self) {
        let last = self.slots.iter().map(|Reverse(t)| *t).max().unwrap_or(Time::ZERO);
        let last_store = self.store_buffer.back().copied().unwrap_or(Time::ZERO);
        self.now = self.now.max(last).max(last_store);
        self.store_buffer.clear();
    }

    pub fn compute(&mut self, cycles: f64) {
        self.now += self.clock.cycles(cycles);
    }

    /// A duration in this core's cycles.
    pub fn cycles(&self, t: Time) -> f64 {
        self.clock.to_cycles(t)
    }

    /// Moves the core's time forward to `t` (idle until then).
    pub fn idle_until(&mut self, t: Time) {
        self.now = self.now.max(t);
    }
}

/// How a core's bulk copy takes its destination lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorePath {
    /// Ordinary stores: each destination line is first read for ownership from where it lies.
    ReadForOwnership,
    /// Whole lines taken without their data: a fast-string `rep movsb` invalidates each
    /// destination line it will fill entirely instead of reading it (Intel SDM vol. 3, "Out-of-Order
    /// Stores For String Operations"), and a non-temporal store writes a combined line; either
    /// request is answered by the line's home agent, not by its memory.
    WholeLine,
}

/// What one core copies in bulk (GB/s) by the core model's timing (`CoreTimer`): every line
/// copied holds one of the L1D's miss slots for the source's round trip `src_ns` and one for its
/// destination's, `dst_ns` (a read for ownership, or a whole-line claim: `StorePath`); it also
/// takes the load port, the store port and two of the fill path's fills (source and destination).
pub fn copy_stream_gbs(core: &CoreSpec, line_bytes: u32, src_ns: f64, dst_ns: f64) -> f64 {
    let line = line_bytes as f64;
    let by_misses = core.outstanding_misses as f64 * line / (src_ns + dst_ns);
    let cycles_per_line =
        core.issue_cycles_per_line.max(core.store_issue_cycles_per_line).max(2.0 * core.fill_cycles_per_line);
    let by_ports = line * core.freq_ghz / cycles_per_line;
    by_misses.min(by_ports)
}

/// What a program does after queuing (or not) a unit of work.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// It queued a unit and goes on after it: it keeps the CPU.
    Unit,
    /// It queued the last unit of a burst (a NAPI poll, a `recv` call): after it, the other
    /// programs on the CPU have their turn before it is asked again.
    Yield,
    /// Nothing to do before this time (or a signal it waits on).
    At(Time),
    /// Nothing to do until a signal it waits on (`ProgramCx::wait_on`) is notified.
    Wait,
    /// It cannot go on.
    Stall(String),
}

/// The contract of a workload program running on a CPU.
pub trait Program {
    /// What the CPU does, as results label it (`rx_loop`, `irq`, `iperf`, ...).
    fn role(&self) -> &'static str;
    /// What its work is counted in.
    fn unit(&self) -> &'static UnitKind;
    /// Called at the CPU's current time when the program may run: queue the next unit of work
    /// and say what follows, or say when there will be work.
    fn next(&mut self, cx: &mut ProgramCx) -> Next;
    /// An `Op::Call(tag)` of its unit was reached: act at that time (release a buffer, post a
    /// packet, notify a peer).
    fn on_call(&mut self, _tag: u32, _cx: &mut ProgramCx) {}
    /// What it waits for, for stall reports.
    fn waiting_for(&self) -> String {
        String::new()
    }
    fn reset_stats(&mut self) {}
    /// Its own statistics, beside the CPU's activity counters.
    fn report(&self, _out: &mut Report, _view: &ReportView) {}
}

/// What a program can do: read the CPU's time, use the shared ports, signal, and queue the
/// operations of its unit.
pub struct ProgramCx<'a, 'b> {
    cx: &'a mut Cx<'b>,
    now: Time,
    ops: &'a mut Ops,
    units: &'a mut u64,
    /// Time the CPU worked for the program outside its units' operations.
    busy: &'a mut Time,
}

impl ProgramCx<'_, '_> {
    /// The CPU's time.
    pub fn now(&self) -> Time {
        self.now
    }

    /// The state agents share (copy engine ports, flows).
    pub fn shared(&mut self) -> &mut Shared {
        self.cx.shared
    }

    /// A device queue's host side (an RX ring, an NVMe queue pair).
    pub fn device_queue<I: QueueId>(&mut self, id: I) -> &mut I::Queue {
        &mut self.cx.shared.get_mut::<Queues<I::Queue>>()[id.index()]
    }

    /// Takes the next completion of a queue that has been visible for `delay` (the time the
    /// program takes to notice one); else what `next` answers: come back when one will be, or
    /// sleep until the device signals one.
    pub fn take_completion<I: QueueId>(
        &mut self,
        id: I,
        delay: Time,
    ) -> Result<<I::Queue as CompletionQueue>::Completion, Next>
    where
        I::Queue: CompletionQueue,
    {
        let now = self.now;
        let queue = self.device_queue(id);
        match queue.first_visible() {
            Some(visible) if visible <= now.saturating_sub(delay) => Ok(queue.take_first()),
            Some(visible) => Err(Next::At(visible + delay)),
            None => {
                let ready = queue.ready();
                self.wait_on(ready);
                Err(Next::Wait)
            }
        }
    }

    /// Wakes the waiters of `signal` at the CPU's time.
    pub fn notify(&mut self, signal: Signal) {
        self.cx.notify(signal, self.now);
    }

    /// The program sleeps on `signal` (returned with `Next::Wait` or `Next::At`).
    pub fn wait_on(&mut self, signal: Signal) {
        self.cx.wait_on(signal);
    }

    /// Hands a consumed packet to the device for transmission and rings its doorbell.
    pub fn post_tx(&mut self, ring: RingId, completion: &Completion) {
        let ring = self.device_queue(ring);
        ring.post_tx(completion);
        let doorbell = ring.doorbell;
        self.notify(doorbell);
    }

    /// Counts units of work done (packets, messages, lines), for the CPU's report.
    pub fn count(&mut self, units: u64) {
        *self.units += units;
    }

    /// Counts `duration` the program waited as time the CPU worked for it: a core streaming a
    /// bulk transfer (a flow) is busy with its misses while the program sleeps until it ends.
    pub fn busy_for(&mut self, duration: Time) {
        *self.busy += duration;
    }

    pub fn load(&mut self, line: Line) -> LoadId {
        self.queue(Op::Load(line));
        LoadId(self.ops.loads_queued - 1)
    }

    pub fn store(&mut self, line: Line) {
        self.ops.queue.push_back(Op::Store(line));
    }

    pub fn load_dependent(&mut self, line: Line) {
        self.ops.queue.push_back(Op::LoadDependent(line));
    }

    pub fn prefetch(&mut self, line: Line, level: Level) {
        self.ops.queue.push_back(Op::Prefetch(line, level));
    }

    pub fn compute(&mut self, cycles: f64) {
        self.ops.queue.push_back(Op::Compute(cycles));
    }

    pub fn drain(&mut self) {
        self.ops.queue.push_back(Op::Drain);
    }

    pub fn wait_for(&mut self, load: LoadId) {
        self.ops.queue.push_back(Op::WaitFor(load));
    }

    pub fn call(&mut self, tag: u32) {
        self.ops.queue.push_back(Op::Call(tag));
    }

    pub fn hold(&mut self, duration: Time) {
        self.ops.queue.push_back(Op::Hold(duration));
    }

    /// Queues any operation.
    pub fn queue(&mut self, op: Op) {
        if let Op::Load(_) = op {
            self.ops.loads_queued += 1;
        }
        self.ops.queue.push_back(op);
    }
}

/// Asks `program` for its next unit at `now` outside any CPU, as a CPU would: what it answered,
/// the operations it queued, and the units it counted (for tests of programs).
pub fn ask(program: &mut dyn Program, cx: &mut Cx, now: Time) -> (Next, Vec<Op>, u64) {
    let (mut ops, mut units, mut busy) = (Ops::default(), 0, Time::ZERO);
    let next = program.next(&mut ProgramCx { cx, now, ops: &mut ops, units: &mut units, busy: &mut busy });
    (next, ops.queue.into_iter().collect(), units)
}

/// Reaches `Op::Call(tag)` of `program`'s unit at `now`, outside any CPU; returns the units it
/// counted.
pub fn reach_call(program: &mut dyn Program, tag: u32, cx: &mut Cx, now: Time) -> u64 {
    let (mut ops, mut units, mut busy) = (Ops::default(), 0, Time::ZERO);
    program.on_call(tag, &mut ProgramCx { cx, now, ops: &mut ops, units: &mut units, busy: &mut busy });
    units
}

/// The current unit's operations and when each of its loads completes.
#[derive(Debug, Default)]
struct Ops {
    queue: VecDeque<Op>,
    loads_queued: u32,
    loads_done: Vec<Time>,
}

impl Ops {
    fn start_unit(&mut self) {
        debug_assert!(self.queue.is_empty());
        self.loads_queued = 0;
        self.loads_done.clear();
    }
}

/// The names a program's unit of work is reported under.
#[derive(Debug)]
pub struct UnitKind {
    /// How many were done.
    pub count: Stat,
    pub exec_ns_per: Stat,
    pub cycles_per: Stat,
}

macro_rules! unit_kind {
    ($name:ident, $unit:literal, $units:literal) => {
        pub const $name: UnitKind = UnitKind {
            count: Stat { key: $units, unit: $units, meaning: concat!($units, " processed in the measured window") },
            exec_ns_per: Stat {
                key: concat!("exec_ns_per_", $unit),
                unit: "ns",
                meaning: concat!("CPU time spent per ", $unit),
            },
            cycles_per: Stat {
                key: concat!("cycles_per_", $unit),
                unit: "cycles",
                meaning: concat!("core cycles spent per ", $unit),
            },
        };
    };
}
unit_kind!(PACKET, "packet", "packets");
unit_kind!(MESSAGE, "message", "messages");
unit_kind!(LINE, "line", "lines");
unit_kind!(STEP, "step", "steps");
unit_kind!(DESCRIPTOR, "descriptor", "descriptors");
unit_kind!(BLOCK, "block", "blocks");
unit_kind!(LOAD, "load", "loads");
unit_kind!(BUFFER, "buffer", "buffers");
unit_kind!(ROUND_TRIP, "round_trip", "round_trips");

stat!(ROLE, "role", "name", "what the CPU runs (roles of programs sharing it joined with +)");
stat!(BUSY, "busy", "fraction", "fraction of the measured window the CPU worked for this program");
stat!(EXEC_NS, "exec_ns", "ns", "CPU time spent working for this program");
stat!(CYCLES, "cycles", "cycles", "core cycles spent working for this program");
stat!(FILLS, "fills", "fraction", "fraction of the CPU's demand accesses satisfied at each source (l1 = hit)");
stat!(DC_FILLS, "dc_fills", "fraction", "fraction of the CPU's L1D fills by source, as AMD's DC-fill counters");
stat!(FILL_COUNTS, "fill_counts", "accesses", "the CPU's demand accesses by where they were satisfied");
stat!(DC_FILL_COUNTS, "dc_fill_counts", "fills", "the CPU's L1D fills (demand and prefetch) by source");
stat!(FILL_SOURCE, "source", "fraction", "share of the accesses satisfied at this source");
stat!(PAGE_WALKS, "page_walks", "walks", "page walks the CPU's accesses waited for (with core.tlb modelled)");
stat!(FILL_COUNT, "source", "accesses", "accesses satisfied at this source");
stat!(DC_FILL_COUNT, "source", "fills", "L1D fills from this source");

/// A program the CPU hosts, its state and its activity.
struct Hosted {
    program: Box<dyn Program>,
    state: State,
    units: u64,
    busy: Time,
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Asked again right after its unit: it is in the middle of a burst.
    Continue,
    /// Runnable at this time (or when woken).
    At(Time),
    /// Runnable when woken.
    Waiting,
    Stalled(String),
}

/// The programs each CPU runs, in the order they were added, until the system is finished.
#[derive(Default)]
struct Programs(BTreeMap<u32, Vec<Box<dyn Program>>>);

impl Facility for Programs {}

impl Builder<'_> {
    /// Runs `program` on logical CPU `cpu` (programs on one CPU take turns).
    pub fn run_on(&mut self, cpu: u32, program: Box<dyn Program>) {
        self.facility::<Programs>().0.entry(cpu).or_default().push(program);
        self.on_finish(add_cpus);
    }
}

/// One CPU agent for each CPU with programs, in CPU order.
fn add_cpus(b: &mut Builder) {
    let Some(Programs(programs)) = b.shared.take::<Programs>() else { return };
    for (cpu, programs) in programs {
        let timer = CoreTimer::on_cpu(cpu, b.platform);
        b.add_agent(Box::new(Cpu::new(timer, programs)), Some(Time::ZERO));
    }
}

/// A logical CPU running one or more programs.
pub struct Cpu {
    timer: CoreTimer,
    hosted: Vec<Hosted>,
    /// The program whose unit is being executed.
    current: Option<usize>,
    unit_start: Time,
    ops: Ops,
    /// Where the next round of turns starts.
    turn: usize,
    window_start: Time,
}

impl Cpu {
    pub fn new(timer: CoreTimer, programs: Vec<Box<dyn Program>>) -> Cpu {
        let hosted = programs
            .into_iter()
            .map(|program| Hosted { program, state: State::At(Time::ZERO), units: 0, busy: Time::ZERO })
            .collect();
        Cpu {
            timer,
            hosted,
            current: None,
            unit_start: Time::ZERO,
            ops: Ops::default(),
            turn: 0,
            window_start: Time::ZERO,
        }
    }

    /// The roles of its programs, joined with `+`.
    pub fn role(&self) -> String {
        self.hosted.iter().map(|h| h.program.role()).collect::<Vec<_>>().join("+")
    }

    fn program_cx<'a, 'b>(&'a mut self, cx: &'a mut Cx<'b>, p: usize) -> (ProgramCx<'a, 'b>, &'a mut Box<dyn Program>) {
        let hosted = &mut self.hosted[p];
        let pcx =
            ProgramCx { cx, now: self.timer.now, ops: &mut self.ops, units: &mut hosted.units, busy: &mut hosted.busy };
        (pcx, &mut hosted.program)
    }

    /// Executes the current unit's operations until they are done (true) or the CPU reaches the
    /// run-ahead limit (false).
    fn run_unit(&mut self, cx: &mut Cx, p: usize) -> bool {
        while let Some(&op) = self.ops.queue.front() {
            if self.timer.now > cx.limit() {
                return false;
            }
            self.ops.queue.pop_front();
            let hierarchy = cx.shared.get_mut::<Hierarchy>();
            match op {
                Op::Load(line) => {
                    let done = self.timer.issue(hierarchy, line);
                    self.ops.loads_done.push(done);
                }
                Op::Store(line) => {
                    self.timer.store(hierarchy, line);
                }
                Op::LoadDependent(line) => self.timer.load_dependent(hierarchy, line),
                Op::Prefetch(line, level) => self.timer.prefetch(hierarchy, line, level),
                Op::Drain => self.timer.drain(),
                Op::Compute(cycles) => self.timer.compute(cycles),
                Op::WaitFor(load) => self.timer.idle_until(self.ops.loads_done[load.0 as usize]),
                Op::IdleUntil(t) => self.timer.idle_until(t),
                Op::Hold(duration) => self.timer.now += duration,
                Op::Call(tag) => {
                    let (mut pcx, program) = self.program_cx(cx, p);
                    program.on_call(tag, &mut pcx);
                }
            }
        }
        self.hosted[p].busy += self.timer.now - self.unit_start;
        true
    }

    /// Asks program `p` for work at the CPU's time; returns whether it queued a unit.
    fn ask(&mut self, cx: &mut Cx, p: usize) -> bool {
        self.ops.start_unit();
        self.unit_start = self.timer.now;
        let (mut pcx, program) = self.program_cx(cx, p);
        let next = program.next(&mut pcx);
        let queued = !self.ops.queue.is_empty();
        let now = self.timer.now;
        self.hosted[p].state = match next {
            Next::Unit | Next::Yield if !queued => State::Stalled("it returned a unit with no work".into()),
            Next::Unit => State::Continue,
            Next::Yield => State::At(now),
            Next::At(t) => State::At(t),
            Next::Wait => State::Waiting,
            Next::Stall(reason) => State::Stalled(reason),
        };
        queued
    }

    /// The program to run a unit of next: the one in the middle of a burst, else the first
    /// runnable one with work, in turns.
    fn choose(&mut self, cx: &mut Cx) -> Option<usize> {
        if let Some(p) = self.hosted.iter().position(|h| h.state == State::Continue) {
            if self.ask(cx, p) {
                return Some(p);
            }
        }
        let count = self.hosted.len();
        for k in 0..count {
            let p = (self.turn + k) % count;
            if self.runnable(p) && self.ask(cx, p) {
                self.turn = (p + 1) % count;
                return Some(p);
            }
        }
        None
    }

    /// Whether program `p` may be asked for work at the CPU's time.
    fn runnable(&self, p: usize) -> bool {
        match &self.hosted[p].state {
            State::Continue | State::Waiting => true,
            State::At(t) => *t <= self.timer.now,
            State::Stalled(_) => false,
        }
    }

    /// What the CPU does when none of its programs has a unit to run now.
    fn idle_step(&self) -> Step {
        let next = self.hosted.iter().filter_map(|h| match h.state {
            State::At(t) => Some(t),
            _ => None,
        });
        if let Some(at) = next.min() {
            return Step::At(at);
        }
        if self.hosted.iter().any(|h| h.state == State::Waiting) {
            return Step::Wait;
        }
        let reasons: Vec<String> = self
            .hosted
            .iter()
            .filter_map(|h| match &h.state {
                State::Stalled(reason) => Some(format!("{}: {reason}", h.program.role())),
                _ => None,
            })
            .collect();
        Step::Stall(reasons.join("; "))
    }
}

impl Agent for Cpu {
    fn name(&self) -> String {
        format!("cpu {} ({})", self.timer.cpu, self.role())
    }

    fn step(&mut self, cx: &mut Cx, now: Time, _limit: Time) -> Step {
        self.timer.idle_until(now);
        loop {
            if let Some(p) = self.current {
                if !self.run_unit(cx, p) {
                    return Step::At(self.timer.now);
                }
                self.current = None;
            }
            // Programs decide only at times within the run-ahead limit.
            if self.timer.now > cx.limit() {
                return Step::At(self.timer.now);
            }
            match self.choose(cx) {
                Some(p) => self.current = Some(p),
                None => return self.idle_step(),
            }
        }
    }

    fn waiting_for(&self) -> String {
        let waits: Vec<String> =
            self.hosted.iter().map(|h| h.program.waiting_for()).filter(|w| !w.is_empty()).collect();
        waits.join("; ")
    }

    fn reset_stats(&mut self, now: Time) {
        self.window_start = now;
        if let Some(tlb) = &mut self.timer.tlb {
            tlb.walks = 0;
        }
        for hosted in &mut self.hosted {
            hosted.units = 0;
            hosted.busy = Time::ZERO;
            hosted.program.reset_stats();
        }
    }

    fn report(&self, out: &mut Report, view: &ReportView) {
        let cpu = self.timer.cpu;
        let counts = &view.shared.get::<Hierarchy>().stats.fills[cpu as usize];
        let dc_counts = &view.shared.get::<Hierarchy>().stats.dc_fills[cpu as usize];
        out.section("cores", |cores| {
            cores.section(&cpu.to_string(), |core| {
                core.put(&ROLE, self.role());
                if let Some(walks) = self.timer.walks() {
                    core.put(&PAGE_WALKS, walks);
                }
                core.section(FILLS.key, |r| fractions(r, counts, false));
                core.section(DC_FILLS.key, |r| fractions(r, dc_counts, true));
                core.section(FILL_COUNTS.key, |r| {
                    for source in Source::ALL {
                        r.put_named(source.name(), &FILL_COUNT, counts[source as usize]);
                    }
                });
                core.section(DC_FILL_COUNTS.key, |r| {
                    for source in Source::ALL.iter().filter(|&&s| s != Source::L1) {
                        r.put_named(source.name(), &DC_FILL_COUNT, dc_counts[*source as usize]);
                    }
                });
                for (i, hosted) in self.hosted.iter().enumerate() {
                    let key =
                        if i == 0 { "workload".to_string() } else { format!("workload_{}", hosted.program.role()) };
                    core.section(&key, |r| self.report_activity(r, hosted, view));
                }
            });
        });
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Cpu {
    /// A program's units, the time the CPU spent on them, and both per unit.
    fn report_activity(&self, out: &mut Report, hosted: &Hosted, view: &ReportView) {
        let unit = hosted.program.unit();
        let window = view.window_ns();
        let exec_ns = hosted.busy.as_ns();
        let per_unit = if hosted.units > 0 { exec_ns / hosted.units as f64 } else { 0.0 };
        out.put(&unit.count, hosted.units);
        out.put(&BUSY, (exec_ns / window).min(1.0));
        out.put(&EXEC_NS, exec_ns);
        out.put(&CYCLES, self.timer.cycles(hosted.busy));
        out.put(&unit.exec_ns_per, per_unit);
        out.put(&unit.cycles_per, self.timer.cycles(Time::from_ns(per_unit)));
        hosted.program.report(out, view);
    }
}

/// Fractions of `counts` by source (`skip_l1`: without an `l1` entry, as for L1D fills).
fn fractions(out: &mut Report, counts: &[u64; 6], skip_l1: bool) {
    let counted = |source: &Source| !(skip_l1 && *source == Source::L1);
    let total: u64 = Source::ALL.iter().filter(|s| counted(s)).map(|s| counts[*s as usize]).sum();
    for source in Source::ALL.iter().filter(|s| counted(s)) {
        let count = counts[*source as usize];
        out.put_named(source.name(), &FILL_SOURCE, if total > 0 { count as f64 / total as f64 } else { 0.0 });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::ring::Recycle;
    use crate::engine::Harness;
    use crate::engine::Shared;
    use crate::testing::{deliver, ns, ring_harness, tiny_platform, READY};

    #[test]
    fn a_copy_holds_a_miss_slot_per_line_for_the_source_and_one_for_the_destination() {
        // 16 slots x 64 B over a source and a destination round trip of 110 ns each; a
        // destination claimed at the home agent (70 cycles at 2.1 GHz) holds its slot 100/3 ns.
        let core = CoreSpec { freq_ghz: 2.1, outstanding_misses: 16, ..CoreSpec::default() };
        assert_eq!(copy_stream_gbs(&core, 64, 110.0, 110.0), 1024.0 / 220.0);
        assert_eq!(copy_stream_gbs(&core, 64, 110.0, 100.0 / 3.0), 1024.0 / (110.0 + 100.0 / 3.0));
    }

    #[test]
    fn a_copy_from_near_lines_is_held_by_the_slowest_port() {
        // 1024 slots over 20 ns would move 3276.8 GB/s; two fills a line at one cycle each at
        // 2 GHz allow 64 GB/s, a store port of 3 cycles a line 42.67 GB/s.
        let core = CoreSpec { freq_ghz: 2.0, outstanding_misses: 1024, ..CoreSpec::default() };
        assert_eq!(copy_stream_gbs(&core, 64, 10.0, 10.0), 64.0);
        let slow_stores = CoreSpec { store_issue_cycles_per_line: 3.0, ..core };
        assert_eq!(copy_stream_gbs(&slow_stores, 64, 10.0, 10.0), 128.0 / 3.0);
    }

    /// What a program taking a completion of `ring` that has been visible for `delay` finds at `now`.
    fn take_at(h: &mut Harness, ring: RingId, now: Time, delay: Time) -> Result<Completion, Next> {
        h.with_cx(now, now, |cx| {
            let (mut ops, mut units, mut busy) = (Ops::default(), 0, Time::ZERO);
            ProgramCx { cx, now, ops: &mut ops, units: &mut units, busy: &mut busy }.take_completion(ring, delay)
        })
    }

    #[test]
    fn a_completion_is_taken_once_it_has_been_visible_for_the_delay_and_else_waited_for() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let packet = deliver(&mut h, ring, 64, ns(0.0), ns(100.0));
        let delay = ns(30.0);
        assert_eq!(take_at(&mut h, ring, ns(129.0), delay), Err(Next::At(ns(130.0))), "visible at 100, noticed at 130");
        assert!(h.waits().is_empty(), "a program coming back at a time sleeps on no signal");
        assert_eq!(take_at(&mut h, ring, ns(130.0), delay), Ok(packet));
        assert_eq!(take_at(&mut h, ring, ns(130.0), delay), Err(Next::Wait), "none left");
        assert_eq!(h.waits(), [READY]);
    }

    /// A program that plays back units of operations, recording when each of its calls happens.
    struct Script {
        units: VecDeque<(Vec<Op>, Next)>,
        calls: Calls,
        role: &'static str,
    }

    /// Units a script plays back: operations and what `next` answers.
    type Units = Vec<(Vec<Op>, Next)>;

    impl Program for Script {
        fn role(&self) -> &'static str {
            self.role
        }
        fn unit(&self) -> &'static UnitKind {
            &STEP
        }
        fn next(&mut self, cx: &mut ProgramCx) -> Next {
            let Some((ops, next)) = self.units.pop_front() else { return Next::Wait };
            ops.into_iter().for_each(|op| cx.queue(op));
            cx.count(1);
            next
        }
        fn on_call(&mut self, tag: u32, cx: &mut ProgramCx) {
            self.calls.borrow_mut().push((self.role, tag, cx.now()));
        }
    }

    type Calls = std::rc::Rc<std::cell::RefCell<Vec<(&'static str, u32, Time)>>>;

    fn cpu_of(scripts: Vec<(&'static str, Units)>) -> (Cpu, Harness, Calls) {
        let platform = tiny_platform();
        let calls: Calls = Default::default();
        let programs = scripts
            .into_iter()
            .map(|(role, units)| {
                Box::new(Script { units: units.into(), calls: calls.clone(), role }) as Box<dyn Program>
            })
            .collect();
        let shared = Shared::new(&platform, 0);
        (Cpu::new(CoreTimer::on_cpu(0, &platform), programs), Harness::new(shared, 1), calls)
    }

    const A: Line = Line(0x1000);

    #[test]
    fn a_dependent_miss_then_a_hit_then_compute_take_their_exact_times() {
        let (mut cpu, mut h, calls) = cpu_of(vec![(
            "p",
            vec![(vec![Op::LoadDependent(A), Op::LoadDependent(A), Op::Compute(10.0), Op::Call(7)], Next::Unit)],
        )]);
        // Issue at 1 ns, DRAM's 100 ns: data at 101; issue at 102, L1 hit (4 ns): 106; +10 cycles.
        assert_eq!(h.step(&mut cpu, Time::ZERO, Time::MAX), Step::Wait);
        assert_eq!(*calls.borrow(), [("p", 7, ns(116.0))]);
    }

    #[test]
    fn misses_overlap_up_to_the_outstanding_miss_slots_and_a_drain_waits_for_all() {
        let lines: Vec<Op> = (0..5).map(|i| Op::Load(Line(0x1000 + i * 64))).collect();
        let unit = [lines, vec![Op::Drain, Op::Call(0)]].concat();
        let (mut cpu, mut h, calls) = cpu_of(vec![("p", vec![(unit, Next::Unit)])]);
        h.step(&mut cpu, Time::ZERO, Time::MAX);
        // Four loads issue at 1..4 ns and complete 100 ns later; the fifth waits for the first
        // slot (101 ns) and completes at 201 ns.
        assert_eq!(*calls.borrow(), [("p", 0, ns(201.0))]);
    }

    /// A timer on the tiny platform (1 GHz, a cycle a line for loads and stores, four miss slots,
    /// DRAM 100 ns, L1D hit 4 ns) with a store buffer of `store_buffer_lines`, and its hierarchy.
    fn timer_with_store_buffer(store_buffer_lines: u32) -> (CoreTimer, Hierarchy) {
        let mut platform = tiny_platform();
        platform.core.store_buffer_lines = store_buffer_lines;
        (CoreTimer::on_cpu(0, &platform), Hierarchy::new(&platform))
    }

    #[test]
    fn a_copy_issues_its_loads_and_stores_on_ports_of_their_own() {
        let unit = vec![Op::LoadDependent(A), Op::LoadDependent(Line(0x2000)), Op::Call(0)];
        let copy = vec![
            Op::Load(A),
            Op::Store(Line(0x2000)),
            Op::Load(A),
            Op::Store(Line(0x2000)),
            Op::Call(1),
            Op::Drain,
            Op::Call(2),
        ];
        let (mut cpu, mut h, calls) = cpu_of(vec![("p", vec![(unit, Next::Unit), (copy, Next::Unit)])]);
        h.step(&mut cpu, Time::ZERO, Time::MAX);
        // Both lines miss to DRAM (data at 101 and 202 ns). The loads then issue at 203 and 204;
        // each store takes the store port a cycle after the load before it (204, 205) and commits
        // at once (an L1D hit): the core reaches the call at 204, a drain waits for the last store.
        assert_eq!(*calls.borrow(), [("p", 0, ns(202.0)), ("p", 1, ns(204.0)), ("p", 2, ns(205.0))]);
    }

    #[test]
    fn a_store_commits_after_every_older_store_and_the_core_waits_only_when_the_buffer_is_full() {
        let (mut timer, mut h) = timer_with_store_buffer(2);
        let hit = Line(0x2000);
        timer.load_dependent(&mut h, hit);
        assert_eq!(timer.now, ns(101.0));
        // A store miss takes the port at 102 and a miss slot: it commits when its line comes, 202.
        assert_eq!(timer.store(&mut h, Line(0x3000)), ns(202.0));
        // A store hit after it takes the port at 103 but commits only after it.
        assert_eq!(timer.store(&mut h, hit), ns(202.0));
        assert_eq!(timer.now, ns(101.0));
        // The buffer is full: the third store waits for the oldest to commit, then takes the port.
        assert_eq!(timer.store(&mut h, hit), ns(203.0));
        assert_eq!(timer.now, ns(202.0));
        timer.drain();
        assert_eq!(timer.now, ns(203.0));
    }

    #[test]
    fn a_store_miss_waits_for_a_miss_slot_without_holding_the_core() {
        let (mut timer, mut h) = timer_with_store_buffer(64);
        // Four loads of DRAM lines hold the four miss slots until 101..104 ns.
        for i in 0..4 {
            timer.issue(&mut h, Line(0x1000 + 64 * i));
        }
        assert_eq!(timer.now, ns(4.0));
        // A fifth line stored: its miss starts when the first slot frees, 101, and ends at 201.
        assert_eq!(timer.store(&mut h, Line(0x9000)), ns(201.0));
        assert_eq!(timer.now, ns(4.0));
    }

    #[test]
    fn a_store_to_a_line_another_core_shares_commits_once_that_copy_is_invalidated() {
        let (mut timer, mut h) = timer_with_store_buffer(64);
        let line = Line(0x5000);
        h.core_access(1, line, false, Time::ZERO);
        // CPU 1 holds the line: CPU 0's read takes it from there (issue at 1 ns, peer 25 ns).
        timer.load_dependent(&mut h, line);
        assert_eq!(timer.now, ns(26.0));
        // The store takes the port at 27 ns and waits 25 ns for CPU 1's copy to go, in a miss slot.
        assert_eq!(timer.store(&mut h, line), ns(52.0));
        assert_eq!(timer.slots.iter().map(|r| r.0).max(), Some(ns(52.0)));
        // Now the only copy: the next store waits for nothing of its own (port at 28 ns) but commits
        // after the one before it.
        assert_eq!(timer.store(&mut h, line), ns(52.0));
        assert_eq!(timer.slots.iter().map(|r| r.0).max(), Some(ns(52.0)), "and took no miss slot");
    }

    /// A timer on the tiny platform whose TLB holds 4 pages of 4 KiB (one set), with `walkers`
    /// walkers of one read each.
    fn timer_with_tlb(walkers: u32) -> (CoreTimer, Hierarchy) {
        let mut platform = tiny_platform();
        platform.core.tlb = crate::platform::TlbSpec { entries: 4, ways: 4, page_kib: 4, walk_reads: 1, walkers };
        (CoreTimer::on_cpu(0, &platform), Hierarchy::new(&platform))
    }

    #[test]
    fn a_load_waits_for_its_walk_and_the_core_only_for_a_free_walker() {
        let (mut timer, mut h) = timer_with_tlb(2);
        // Lines of pages 0, 16 and 32 (in L1D sets of their own): their entries are on lines of
        // their own, all in DRAM.
        let [a, b, c] = [0, 16, 32].map(|page| Line(0x10_0000 + 64 * page + page / 16));
        // Issued at 1 ns, walked until 101 (its entry from DRAM), its data at 201; the core goes on.
        assert_eq!(timer.issue(&mut h, a), ns(201.0));
        assert_eq!(timer.now, ns(1.0));
        assert_eq!(timer.issue(&mut h, b), ns(202.0));
        assert_eq!(timer.now, ns(2.0));
        // Both walkers are busy: the third load waits for the first free one (101 ns), and so does
        // the core; entry at 201, data at 301.
        assert_eq!(timer.issue(&mut h, c), ns(301.0));
        assert_eq!(timer.now, ns(101.0));
        // A line of a page the TLB holds goes at once: an L1D hit 4 ns after its issue at 102.
        assert_eq!(timer.issue(&mut h, a), ns(106.0));
        assert_eq!(timer.walks(), Some(3));
    }

    #[test]
    fn a_store_commits_after_its_walk_and_a_software_prefetch_walks_too() {
        let (mut timer, mut h) = timer_with_tlb(1);
        // The store takes the port at 1 ns; its walk ends at 101, its line comes from DRAM at 201.
        // The core waits for neither the port nor the walk.
        assert_eq!(timer.store(&mut h, Line(0x10_0000)), ns(201.0));
        assert_eq!(timer.now, ns(0.0));
        // A prefetch of another page's line at 1 ns waits for the walker (101), walks until 201.
        timer.prefetch(&mut h, Line(0x10_0000 + 64 * 16), Level::L1);
        assert_eq!(timer.now, ns(101.0));
        // A store to the first page waits for no walker: the core stays where it was though the
        // port's next slot is later than it.
        timer.store_port_free = ns(150.0);
        timer.store(&mut h, Line(0x10_0000 + 1));
        assert_eq!(timer.now, ns(101.0));
        assert_eq!(timer.walks(), Some(2));
        assert_eq!(CoreTimer::on_cpu(0, &tiny_platform()).walks(), None, "no TLB, no walks");
    }

    #[test]
    fn the_l1d_fill_path_takes_one_miss_per_its_cycles_per_line() {
        let mut platform = tiny_platform();
        platform.core.fill_cycles_per_line = 10.0;
        let (mut timer, mut h) = (CoreTimer::on_cpu(0, &platform), Hierarchy::new(&platform));
        // Three DRAM loads issue at 1, 2 and 3 ns; the fill path takes them at 1, 11 and 21 ns, and
        // the core waits for it as for a miss slot.
        let done: Vec<Time> = (0..3).map(|i| timer.issue(&mut h, Line(0x1000 + 64 * i))).collect();
        assert_eq!(done, [ns(101.0), ns(111.0), ns(121.0)]);
        assert_eq!(timer.now, ns(21.0));
        // A store miss takes the path too: its port slot is at 22 ns, the path's at 31.
        assert_eq!(timer.store(&mut h, Line(0x9000)), ns(131.0));
        // Later, with the path free since 41 ns, a miss waits for nothing: the line, evicted from the
        // 2-way L1D set all four lines share, comes from the L2 in its 14 ns.
        timer.idle_until(ns(200.0));
        assert_eq!(timer.issue(&mut h, Line(0x1000)), ns(215.0));
    }

    #[test]
    fn a_wait_for_a_load_waits_for_that_load_only() {
        let unit = vec![Op::Load(A), Op::Load(Line(0x2000)), Op::WaitFor(LoadId(0)), Op::Call(0)];
        let (mut cpu, mut h, calls) = cpu_of(vec![("p", vec![(unit, Next::Unit)])]);
        h.step(&mut cpu, Time::ZERO, Time::MAX);
        assert_eq!(*calls.borrow(), [("p", 0, ns(101.0))]);
    }

    #[test]
    fn load_ids_count_from_zero_in_each_unit() {
        let unit = |line: Line, tag: u32| (vec![Op::Load(line), Op::WaitFor(LoadId(0)), Op::Call(tag)], Next::Unit);
        let (mut cpu, mut h, calls) = cpu_of(vec![("p", vec![unit(A, 0), unit(Line(0x2000), 1)])]);
        h.step(&mut cpu, Time::ZERO, Time::MAX);
        // The second unit's load 0 is its own (issued at 102 ns, data at 202), not the first's.
        assert_eq!(*calls.borrow(), [("p", 0, ns(101.0)), ("p", 1, ns(202.0))]);
    }

    #[test]
    fn the_cpu_stops_at_the_run_ahead_limit_between_operations_and_goes_on_from_there() {
        let unit = vec![Op::LoadDependent(A), Op::Compute(10.0), Op::Call(0)];
        let (mut cpu, mut h, calls) = cpu_of(vec![("p", vec![(unit, Next::Unit)])]);
        assert_eq!(h.step(&mut cpu, Time::ZERO, ns(50.0)), Step::At(ns(101.0)));
        assert!(calls.borrow().is_empty());
        assert_eq!(h.step(&mut cpu, ns(101.0), ns(105.0)), Step::At(ns(111.0)));
        assert_eq!(h.step(&mut cpu, ns(111.0), ns(200.0)), Step::Wait);
        assert_eq!(*calls.borrow(), [("p", 0, ns(111.0))]);
    }

    #[test]
    fn programs_sharing_a_cpu_take_turns_at_the_end_of_each_burst() {
        let burst = |cycles: f64, next: Next| (vec![Op::Compute(cycles), Op::Call(0)], next);
        let a = vec![burst(10.0, Next::Unit), burst(10.0, Next::Yield), burst(10.0, Next::Yield)];
        let b = vec![burst(20.0, Next::Yield), burst(20.0, Next::Yield)];
        let (mut cpu, mut h, calls) = cpu_of(vec![("a", a), ("b", b)]);
        assert_eq!(h.step(&mut cpu, Time::ZERO, Time::MAX), Step::Wait);
        let order: Vec<(&str, f64)> = calls.borrow().iter().map(|&(role, _, t)| (role, t.as_ns())).collect();
        // a keeps the CPU for its two-unit burst, then b, a, b.
        assert_eq!(order, [("a", 10.0), ("a", 20.0), ("b", 40.0), ("a", 50.0), ("b", 70.0)]);
        assert_eq!(cpu.role(), "a+b");
    }

    #[test]
    fn a_program_with_nothing_to_do_until_later_is_asked_again_then() {
        let (mut cpu, mut h, calls) =
            cpu_of(vec![("p", vec![(vec![Op::Call(1)], Next::At(ns(500.0))), (vec![Op::Call(2)], Next::Unit)])]);
        assert_eq!(h.step(&mut cpu, Time::ZERO, Time::MAX), Step::At(ns(500.0)));
        assert_eq!(h.step(&mut cpu, ns(500.0), Time::MAX), Step::Wait);
        assert_eq!(*calls.borrow(), [("p", 1, Time::ZERO), ("p", 2, ns(500.0))]);
    }

    #[test]
    fn a_program_that_cannot_go_on_stalls_its_cpu_with_the_reason() {
        let (mut cpu, mut h, _) = cpu_of(vec![("p", vec![(vec![], Next::Stall("out of buffers".into()))])]);
        assert_eq!(h.step(&mut cpu, Time::ZERO, Time::MAX), Step::Stall("p: out of buffers".into()));
        let (mut cpu, mut h, _) = cpu_of(vec![("q", vec![(vec![], Next::Unit)])]);
        assert_eq!(h.step(&mut cpu, Time::ZERO, Time::MAX), Step::Stall("q: it returned a unit with no work".into()));
    }

    #[test]
    fn an_operation_exactly_at_the_limit_still_runs() {
        let unit = vec![Op::LoadDependent(A), Op::Compute(10.0), Op::Call(0)];
        let (mut cpu, mut h, calls) = cpu_of(vec![("p", vec![(unit, Next::Unit), (vec![Op::Call(1)], Next::Unit)])]);
        assert_eq!(h.step(&mut cpu, Time::ZERO, Time::ZERO), Step::At(ns(101.0)));
        assert_eq!(h.step(&mut cpu, ns(101.0), ns(101.0)), Step::At(ns(111.0)));
        // At the limit the program is asked for its next unit too.
        assert_eq!(h.step(&mut cpu, ns(111.0), ns(111.0)), Step::Wait);
        assert_eq!(*calls.borrow(), [("p", 0, ns(111.0)), ("p", 1, ns(111.0))]);
    }

    #[test]
    fn a_cpu_whose_programs_name_nothing_they_wait_for_names_nothing() {
        let (cpu, _, _) = cpu_of(vec![("p", vec![]), ("q", vec![])]);
        assert_eq!(cpu.waiting_for(), "");
    }

    #[test]
    fn activity_is_reported_per_program_with_time_per_unit() {
        let (mut cpu, mut h, _) =
            cpu_of(vec![("p", vec![(vec![Op::Compute(100.0)], Next::Unit), (vec![Op::Compute(300.0)], Next::Unit)])]);
        h.step(&mut cpu, Time::ZERO, Time::MAX);
        let view = ReportView { shared: &h.shared, window_start: Time::ZERO, now: ns(1000.0) };
        let mut out = Report::root();
        cpu.report(&mut out, &view);
        let workload = &out.finish().0["cores"]["0"]["workload"];
        assert_eq!(workload["steps"], 2);
        assert_eq!((workload["busy"].as_f64(), workload["exec_ns"].as_f64()), (Some(0.4), Some(400.0)));
        assert_eq!(
            (workload["exec_ns_per_step"].as_f64(), workload["cycles_per_step"].as_f64()),
            (Some(200.0), Some(200.0))
        );
        cpu.reset_stats(ns(1000.0));
        let mut out = Report::root();
        cpu.report(&mut out, &ReportView { shared: &h.shared, window_start: ns(1000.0), now: ns(2000.0) });
        let report = out.finish().0;
        let workload = &report["cores"]["0"]["workload"];
        assert_eq!((workload["steps"].as_u64(), workload["exec_ns_per_step"].as_f64()), (Some(0), Some(0.0)));
        // No fills in the window: every source's fraction is 0, not 0/0.
        for key in ["fills", "dc_fills"] {
            assert!(report["cores"]["0"][key].as_object().unwrap().values().all(|v| v.as_f64() == Some(0.0)), "{key}");
        }
    }
}
