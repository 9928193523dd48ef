//! The event-driven engine. Everything that acts (a CPU running programs, a NIC, a copy engine) is
//! an `Agent`: the engine runs agents in time order and each `step` says when to run it again
//! (`Step::At`) or that it sleeps until a signal it waits on is notified (`Step::Wait`). Ties
//! break by scheduling order, so a scenario and seed always give the same run.
//!
//! Bounded run-ahead: an agent may simulate past the time of the next pending event (its
//! *horizon*: nothing else can act before it) by at most `sim.max_runahead_ns`; the engine hands
//! it that limit, and a notification it sends lowers the limit to the notified time plus the same
//! allowance, since the woken agent may act from then on. With a limit of 0 agents interleave
//! exactly in time at the granularity they step at.
//!
//! The engine knows no kind of agent: devices and workloads register themselves (`devices`,
//! `workloads`), and agents meet only through signals and the facilities in `Shared`, a store
//! keyed by type that each kind fills at build time (the hierarchy, a device's rings or ports).

use std::any::{Any, TypeId};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::units::Time;

/// State agents share, registered in `Shared` by type: the memory hierarchy, a device kind's ports.
pub trait Facility: Any {
    /// Zeroes its statistics at `now` (the end of the warm-up).
    fn reset_stats(&mut self, _now: Time) {}
}

/// What agents share: the facilities kinds registered, one of each type, and the workloads that
/// end. Few facilities exist (a handful per scenario) and the first registered (the hierarchy,
/// used on every memory access) is found first, so a lookup is a comparison or two.
#[derive(Default)]
pub struct Shared {
    facilities: Vec<(TypeId, Box<dyn Facility>)>,
    pub jobs: Jobs,
}

impl Shared {
    fn index_of<T: Facility>(&self) -> Option<usize> {
        let id = TypeId::of::<T>();
        self.facilities.iter().position(|(t, _)| *t == id)
    }

    /// Registers `facility` (replacing one of its type).
    pub fn insert<T: Facility>(&mut self, facility: T) {
        match self.index_of::<T>() {
            Some(i) => self.facilities[i].1 = Box::new(facility),
            None => self.facilities.push((TypeId::of::<T>(), Box::new(facility))),
        }
    }

    /// The facility of type `T`, if one was registered.
    pub fn try_get<T: Facility>(&self) -> Option<&T> {
        let i = self.index_of::<T>()?;
        (&*self.facilities[i].1 as &dyn Any).downcast_ref()
    }

    /// The facility of type `T`, mutable, if one was registered.
    pub fn try_get_mut<T: Facility>(&mut self) -> Option<&mut T> {
        let i = self.index_of::<T>()?;
        (&mut *self.facilities[i].1 as &mut dyn Any).downcast_mut()
    }

    /// The facility of type `T` (its kind registered it when the system was built).
    #[inline]
    pub fn get<T: Facility>(&self) -> &T {
        self.try_get().unwrap_or_else(|| panic!("no {} registered", std::any::type_name::<T>()))
    }

    /// The facility of type `T`, mutable.
    #[inline]
    pub fn get_mut<T: Facility>(&mut self) -> &mut T {
        self.try_get_mut().unwrap_or_else(|| panic!("no {} registered", std::any::type_name::<T>()))
    }

    /// The facility of type `T`, registered with its default first if there is none.
    pub fn get_or_default<T: Facility + Default>(&mut self) -> &mut T {
        if self.index_of::<T>().is_none() {
            self.insert(T::default());
        }
        self.get_mut()
    }

    /// Two facilities of different types at once (a device's rings and the hierarchy it writes).
    pub fn pair_mut<A: Facility, B: Facility>(&mut self) -> (&mut A, &mut B) {
        let missing = |name: &str| panic!("no {name} registered");
        let a = self.index_of::<A>().unwrap_or_else(|| missing(std::any::type_name::<A>()));
        let b = self.index_of::<B>().unwrap_or_else(|| missing(std::any::type_name::<B>()));
        assert_ne!(a, b, "two facilities of one type");
        let (low, high) = self.facilities.split_at_mut(a.max(b));
        let (first, second) = (&mut *low[a.min(b)].1, &mut *high[0].1);
        let (a_box, b_box) = if a < b { (first, second) } else { (second, first) };
        let a_ref = (a_box as &mut dyn Any).downcast_mut().expect("registered by type");
        let b_ref = (b_box as &mut dyn Any).downcast_mut().expect("registered by type");
        (a_ref, b_ref)
    }

    /// Takes the facility of type `T` out of the store.
    pub fn take<T: Facility>(&mut self) -> Option<T> {
        let i = self.index_of::<T>()?;
        let (_, boxed) = self.facilities.remove(i);
        (boxed as Box<dyn Any>).downcast().ok().map(|b| *b)
    }

    /// Zeroes every facility's statistics at `now`.
    pub fn reset_stats(&mut self, now: Time) {
        for (_, facility) in &mut self.facilities {
            facility.reset_stats(now);
        }
    }
}

/// Workloads that end (a copy job, a query): when every workload of a scenario is one, the run
/// ends with the last of them, and the measured window with it (rates are over the jobs' time,
/// not over the longest they may take).
#[derive(Debug, Default)]
pub struct Jobs {
    pub(crate) registered: u32,
    pub(crate) running: u32,
    /// Every workload registered a job.
    pub(crate) end_the_run: bool,
    last_end: Option<Time>,
}

impl Jobs {
    pub(crate) fn register(&mut self) {
        self.registered += 1;
        self.running += 1;
    }

    /// A job ended at `at` (each registered job ends once).
    pub fn end(&mut self, at: Time) {
        self.running -= 1;
        self.last_end = Some(self.last_end.map_or(at, |t| t.max(at)));
    }

    /// When the run ended: the last job's end, once every job has ended, if the jobs end the run.
    pub fn run_ended_at(&self) -> Option<Time> {
        (self.end_the_run && self.running == 0).then_some(self.last_end).flatten()
    }
}

/// An agent's index in the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentId(pub u32);

/// Something agents wait on and others notify: a queue got a completion, a socket got data, a
/// device was handed work. Made by `Builder::signal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Signal(pub u32);

/// What an agent does after a step.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Run again at this time, or earlier if a signal it waits on is notified first.
    At(Time),
    /// Sleep until a signal it waits on (`Cx::wait_on`) is notified.
    Wait,
    /// It cannot go on: reported as a stall, with the reason, and never run again.
    Stall(String),
}

/// The contract of everything that acts in a simulation.
pub trait Agent: Any {
    /// What the agent is, as stall reports name it (`cpu 3 (irq)`, `nic0`).
    fn name(&self) -> String;
    /// Runs from `now`. `limit` is the latest time it may simulate to before it returns (the
    /// next event that could interact, plus the run-ahead allowance); `Cx::limit` gives the
    /// current value, which notifications can lower.
    fn step(&mut self, cx: &mut Cx, now: Time, limit: Time) -> Step;
    /// What it is waiting for, for stall reports (empty if nothing in particular).
    fn waiting_for(&self) -> String {
        String::new()
    }
    /// Whether it waits for work as a matter of course (a copy engine nobody gives work to), so
    /// that waiting through the whole measured window is not a stall.
    fn idles_by_design(&self) -> bool {
        false
    }
    /// Zeroes its statistics at `now` (the end of the warm-up).
    fn reset_stats(&mut self, _now: Time) {}
    /// Writes its statistics into the result (`cores.N`, `devices.NAME`, ...).
    fn report(&self, _out: &mut crate::stats::Report, _view: &ReportView) {}
    fn as_any(&self) -> &dyn Any;
}

/// What an agent's report may read: the shared state and the measured window.
pub struct ReportView<'a> {
    pub shared: &'a Shared,
    /// Start of the measured window.
    pub window_start: Time,
    /// End of the measured window.
    pub now: Time,
}

impl ReportView<'_> {
    /// Length of the measured window in ns (never zero, so rates are finite).
    pub fn window_ns(&self) -> f64 {
        (self.now - self.window_start).as_ns().max(1e-9)
    }
}

/// An agent and when it first runs (`None`: when a signal it waits on is notified).
pub type Starting = (Box<dyn Agent>, Option<Time>);

/// An agent that could not go on, or waited through the whole measured window with nothing to
/// wake it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stall {
    pub agent: String,
    /// When it last ran.
    pub since: Time,
    pub reason: String,
}

/// The engine's scheduling state, which `Cx` lets the running agent use.
struct Schedule {
    events: BinaryHeap<Reverse<(Time, u64, AgentId, u32)>>,
    /// Per agent: its current epoch. Events and waits made in an older epoch are stale: an
    /// agent's epoch advances each time it runs.
    epoch: Vec<u32>,
    /// Per agent: the earliest time it is scheduled at in its current epoch.
    pending: Vec<Option<Time>>,
    /// Per signal: the agents waiting on it, with the epoch they waited in.
    waiters: Vec<Vec<(AgentId, u32)>>,
    sequence: u64,
    /// Every notification, when a `Harness` records them.
    notified: Option<Vec<(Signal, Time)>>,
}

impl Schedule {
    fn wake(&mut self, agent: AgentId, at: Time) {
        let i = agent.0 as usize;
        if self.pending[i].is_some_and(|t| t <= at) {
            return;
        }
        self.pending[i] = Some(at);
        self.sequence += 1;
        self.events.push(Reverse((at, self.sequence, agent, self.epoch[i])));
    }

    /// The time of the next event that is not stale, dropping stale ones from the top.
    fn horizon(&mut self) -> Option<Time> {
        while let Some(&Reverse((time, _, agent, epoch))) = self.events.peek() {
            if epoch == self.epoch[agent.0 as usize] {
                return Some(time);
            }
            self.events.pop();
        }
        None
    }
}

/// What a running agent may do besides its own work: use the shared ports, notify signals and
/// wait on them.
pub struct Cx<'a> {
    pub shared: &'a mut Shared,
    schedule: &'a mut Schedule,
    me: AgentId,
    now: Time,
    limit: Time,
    max_runahead: Time,
}

impl Cx<'_> {
    /// The latest time the running agent may simulate to.
    pub fn limit(&self) -> Time {
        self.limit
    }

    /// Wakes every agent waiting on `signal` at `at` (not before the step's start). The running
    /// agent may then not run past `at` by more than the run-ahead allowance.
    pub fn notify(&mut self, signal: Signal, at: Time) {
        let at = at.max(self.now);
        if let Some(notified) = &mut self.schedule.notified {
            notified.push((signal, at));
        }
        let waiters = &mut self.schedule.waiters[signal.0 as usize];
        let current = &self.schedule.epoch;
        waiters.retain(|&(agent, epoch)| epoch == current[agent.0 as usize]);
        if waiters.is_empty() {
            return;
        }
        for (agent, _) in std::mem::take(waiters) {
            if agent != self.me {
                self.limit = self.limit.min(at + self.max_runahead);
            }
            self.schedule.wake(agent, at);
        }
    }

    /// The running agent sleeps on `signal` too: a notification wakes it (until it runs again).
    pub fn wait_on(&mut self, signal: Signal) {
        let epoch = self.schedule.epoch[self.me.0 as usize];
        let waiters = &mut self.schedule.waiters[signal.0 as usize];
        // One entry per agent: a wait renews the agent's entry of an earlier step.
        match waiters.iter_mut().find(|(agent, _)| *agent == self.me) {
            Some(entry) => entry.1 = epoch,
            None => waiters.push((self.me, epoch)),
        }
    }
}

/// Runs agents in time order.
pub struct Engine {
    agents: Vec<Box<dyn Agent>>,
    schedule: Schedule,
    /// When each agent last ran.
    last_run: Vec<Time>,
    /// Agents that said they cannot go on.
    stalled: Vec<Option<Stall>>,
    max_runahead: Time,
    now: Time,
    /// When the engine ran out of events before the time it was asked to reach, if it did.
    pub ran_dry_at: Option<Time>,
    /// The run ended with its last job: agents still waiting are done, not stalled.
    ended: bool,
}

impl Engine {
    /// An engine for `agents` over `signals` signals; each agent first runs at its start time
    /// (`None`: it waits to be notified).
    pub fn new(agents: Vec<Starting>, signals: u32, max_runahead: Time) -> Engine {
        let count = agents.len();
        let mut engine = Engine {
            agents: Vec::with_capacity(count),
            schedule: Schedule {
                events: BinaryHeap::new(),
                epoch: vec![0; count],
                pending: vec![None; count],
                waiters: vec![Vec::new(); signals as usize],
                sequence: 0,
                notified: None,
            },
            last_run: vec![Time::ZERO; count],
            stalled: vec![None; count],
            max_runahead,
            now: Time::ZERO,
            ran_dry_at: None,
            ended: false,
        };
        for (i, (agent, start)) in agents.into_iter().enumerate() {
            engine.agents.push(agent);
            if let Some(at) = start {
                engine.schedule.wake(AgentId(i as u32), at);
            }
        }
        engine
    }

    pub fn now(&self) -> Time {
        self.now
    }

    pub fn agents(&self) -> &[Box<dyn Agent>] {
        &self.agents
    }

    /// Runs every event before `until`; `progress` is called with the simulated time now and
    /// then and stops the run by returning false. Returns whether `until` was reached.
    /// A run whose workloads all end stops with the last of them (`Jobs`), `now` then its end.
    pub fn run_until(&mut self, shared: &mut Shared, until: Time, progress: &mut dyn FnMut(Time) -> bool) -> bool {
        let mut next_report = self.now;
        while let Some(time) = self.schedule.horizon() {
            if self.ended_with_jobs(shared, until) {
                return true;
            }
            if time >= until {
                break;
            }
            let Reverse((_, _, agent, _)) = self.schedule.events.pop().expect("the horizon is an event");
            let i = agent.0 as usize;
            self.now = time;
            if time >= next_report {
                if !progress(time) {
                    return false;
                }
                next_report = time + Time::from_us(50.0);
            }
            self.schedule.epoch[i] += 1;
            self.schedule.pending[i] = None;
            let horizon = self.schedule.horizon().unwrap_or(until).min(until);
            let limit = horizon + self.max_runahead;
            let mut cx = Cx {
                shared,
                schedule: &mut self.schedule,
                me: agent,
                now: time,
                limit,
                max_runahead: self.max_runahead,
            };
            let step = self.agents[i].step(&mut cx, time, limit);
            self.last_run[i] = time;
            match step {
                Step::At(at) => self.schedule.wake(agent, at.max(time)),
                Step::Wait => {}
                Step::Stall(reason) => {
                    self.stalled[i] = Some(Stall { agent: self.agents[i].name(), since: time, reason });
                    self.schedule.epoch[i] += 1;
                }
            }
        }
        if self.ended_with_jobs(shared, until) {
            return true;
        }
        if self.schedule.horizon().is_none() && self.ran_dry_at.is_none() {
            // Nothing is scheduled and nobody can be woken: nothing will ever happen again.
            self.ran_dry_at = Some(self.now);
        }
        self.now = until;
        true
    }

    /// Whether the run ended with its last job (nothing left to happen, as it should be); `now`
    /// is then that job's end.
    fn ended_with_jobs(&mut self, shared: &Shared, until: Time) -> bool {
        let Some(end) = shared.jobs.run_ended_at() else { return false };
        self.now = end.min(until);
        self.ended = true;
        true
    }

    /// Zeroes every agent's statistics.
    pub fn reset_stats(&mut self) {
        let now = self.now;
        for agent in &mut self.agents {
            agent.reset_stats(now);
        }
    }

    /// Agents that stalled: those that said so, and those that are waiting and have not run since
    /// before `window_start` (nothing woke them for the whole measured window).
    pub fn stalls(&self, window_start: Time) -> Vec<Stall> {
        let mut stalls = Vec::new();
        for (i, agent) in self.agents.iter().enumerate() {
            if let Some(stall) = &self.stalled[i] {
                stalls.push(stall.clone());
            } else if !self.ended
                && self.schedule.pending[i].is_none()
                && self.last_run[i] < window_start
                && !agent.idles_by_design()
            {
                let waiting = agent.waiting_for();
                let reason = if waiting.is_empty() { "waiting, and nothing woke it".to_string() } else { waiting };
                stalls.push(Stall { agent: agent.name(), since: self.last_run[i], reason });
            }
        }
        stalls
    }
}

/// Steps one agent by hand with no other agent around: how a kind's unit tests drive it and probe
/// what it does at the boundary (each step's result, the signals it notifies and when, the
/// signals it waits on).
pub struct Harness {
    pub shared: Shared,
    schedule: Schedule,
}

impl Harness {
    /// A harness over `shared` with `signals` signals.
    pub fn new(shared: Shared, signals: u32) -> Harness {
        let engine = Engine::new(Vec::new(), signals, Time::ZERO);
        let mut schedule = engine.schedule;
        schedule.epoch = vec![0];
        schedule.pending = vec![None];
        schedule.notified = Some(Vec::new());
        Harness { shared, schedule }
    }

    /// Runs `f` with a `Cx` as the agent's step at `now` with run-ahead limit `limit` would have.
    pub fn with_cx<T>(&mut self, now: Time, limit: Time, f: impl FnOnce(&mut Cx) -> T) -> T {
        self.schedule.epoch[0] += 1;
        let mut cx = Cx {
            shared: &mut self.shared,
            schedule: &mut self.schedule,
            me: AgentId(0),
            now,
            limit,
            max_runahead: Time::ZERO,
        };
        f(&mut cx)
    }

    /// Steps `agent` at `now` with run-ahead limit `limit`.
    pub fn step(&mut self, agent: &mut dyn Agent, now: Time, limit: Time) -> Step {
        self.with_cx(now, limit, |cx| agent.step(cx, now, limit))
    }

    /// The notifications since the last call: (signal, time), in order.
    pub fn notified(&mut self) -> Vec<(Signal, Time)> {
        std::mem::take(self.schedule.notified.as_mut().expect("a harness records notifications"))
    }

    /// The signals the agent waits on after its last step.
    pub fn waits(&self) -> Vec<Signal> {
        let epoch = self.schedule.epoch[0];
        (0..self.schedule.waiters.len() as u32)
            .map(Signal)
            .filter(|s| self.schedule.waiters[s.0 as usize].iter().any(|&(a, e)| a == AgentId(0) && e == epoch))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records when it runs; runs again after `period` until `times` runs, notifying `signal`
    /// each time; or waits on `signal` when `period` is None.
    struct Probe {
        period: Option<Time>,
        signal: Signal,
        notify_at: Option<Time>,
        runs: Vec<(Time, Time)>,
        stall_after: Option<usize>,
    }

    impl Agent for Probe {
        fn name(&self) -> String {
            "probe".into()
        }
        fn step(&mut self, cx: &mut Cx, now: Time, limit: Time) -> Step {
            self.runs.push((now, limit));
            if let Some(at) = self.notify_at {
                cx.notify(self.signal, at);
            }
            if self.stall_after == Some(self.runs.len()) {
                return Step::Stall("gave up".into());
            }
            match self.period {
                Some(period) => Step::At(now + period),
                None => {
                    cx.wait_on(self.signal);
                    Step::Wait
                }
            }
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    fn probe(period: Option<f64>, notify_at: Option<f64>) -> Box<dyn Agent> {
        Box::new(Probe {
            period: period.map(Time::from_ns),
            signal: Signal(0),
            notify_at: notify_at.map(Time::from_ns),
            runs: Vec::new(),
            stall_after: None,
        })
    }

    fn runs(engine: &Engine, agent: usize) -> Vec<(f64, f64)> {
        let probe = engine.agents()[agent].as_any().downcast_ref::<Probe>().unwrap();
        probe.runs.iter().map(|(t, l)| (t.as_ns(), l.as_ns())).collect()
    }

    /// A facility that counts its resets, with the time of the last.
    #[derive(Debug, Default, PartialEq)]
    struct Counter {
        resets: u32,
        at: Option<Time>,
    }

    impl Facility for Counter {
        fn reset_stats(&mut self, now: Time) {
            self.resets += 1;
            self.at = Some(now);
        }
    }

    #[derive(Debug, Default, PartialEq)]
    struct Other(u32);

    impl Facility for Other {}

    #[test]
    fn a_facility_is_found_by_its_type_and_replaced_by_one_of_the_same_type() {
        let mut shared = Shared::default();
        assert!(shared.try_get::<Counter>().is_none() && shared.try_get_mut::<Other>().is_none());
        shared.insert(Other(1));
        shared.insert(Counter::default());
        assert_eq!(shared.get::<Other>(), &Other(1));
        shared.insert(Other(2));
        assert_eq!(shared.get::<Other>(), &Other(2));
        shared.get_mut::<Counter>().resets = 5;
        assert_eq!(shared.get::<Counter>().resets, 5);
        assert_eq!(shared.facilities.len(), 2);
    }

    #[test]
    #[should_panic(expected = "no steer_sim::engine::tests::Other registered")]
    fn a_facility_nobody_registered_is_a_panic_naming_its_type() {
        Shared::default().get::<Other>();
    }

    #[test]
    fn get_or_default_registers_the_default_once() {
        let mut shared = Shared::default();
        shared.get_or_default::<Other>().0 = 7;
        assert_eq!(shared.get_or_default::<Other>(), &Other(7));
        assert_eq!(shared.facilities.len(), 1);
    }

    #[test]
    fn two_facilities_are_borrowed_at_once_in_either_order() {
        let mut shared = Shared::default();
        shared.insert(Counter::default());
        shared.insert(Other(3));
        let (other, counter) = shared.pair_mut::<Other, Counter>();
        (other.0, counter.resets) = (4, 9);
        let (counter, other) = shared.pair_mut::<Counter, Other>();
        assert_eq!((counter.resets, other.0), (9, 4));
    }

    #[test]
    fn taking_a_facility_leaves_the_others() {
        let mut shared = Shared::default();
        shared.insert(Other(1));
        shared.insert(Counter { resets: 2, at: None });
        assert_eq!(shared.take::<Other>(), Some(Other(1)));
        assert_eq!(shared.take::<Other>(), None);
        assert_eq!(shared.get::<Counter>().resets, 2);
    }

    #[test]
    fn a_reset_reaches_every_facility_with_the_time() {
        let mut shared = Shared::default();
        shared.insert(Other(1));
        shared.insert(Counter::default());
        shared.reset_stats(ns(40.0));
        assert_eq!(shared.get::<Counter>(), &Counter { resets: 1, at: Some(ns(40.0)) });
    }

    fn ns(t: f64) -> Time {
        Time::from_ns(t)
    }

    #[test]
    fn agents_run_in_time_order_and_see_the_next_event_plus_the_allowance_as_their_limit() {
        let agents = vec![(probe(Some(100.0), None), Some(ns(0.0))), (probe(Some(30.0), None), Some(ns(10.0)))];
        let mut engine = Engine::new(agents, 1, ns(5.0));
        let mut shared = Shared::default();
        assert!(engine.run_until(&mut shared, ns(75.0), &mut |_| true));
        // Agent 0 at 0 (next event: agent 1 at 10), then agent 1 at 10, 40, 70 (next event of
        // another agent: agent 0 at 100, capped by the end at 75).
        assert_eq!(runs(&engine, 0), [(0.0, 15.0)]);
        assert_eq!(runs(&engine, 1), [(10.0, 80.0), (40.0, 80.0), (70.0, 80.0)]);
        assert_eq!(engine.now(), ns(75.0));
    }

    #[test]
    fn a_notification_wakes_waiters_at_its_time_and_lowers_the_notifiers_limit() {
        // Agent 0 waits; agent 1 runs at 50 and notifies at 70.
        let agents = vec![(probe(None, None), Some(ns(0.0))), (probe(Some(1000.0), Some(70.0)), Some(ns(50.0)))];
        let mut engine = Engine::new(agents, 1, ns(5.0));
        let mut shared = Shared::default();
        engine.run_until(&mut shared, ns(500.0), &mut |_| true);
        assert_eq!(runs(&engine, 0), [(0.0, 55.0), (70.0, 505.0)]);
        let probe = engine.agents()[1].as_any().downcast_ref::<Probe>().unwrap();
        assert_eq!(probe.runs[0], (ns(50.0), ns(505.0)));
    }

    #[test]
    fn a_wake_earlier_than_a_scheduled_one_wins_and_the_later_one_is_dropped() {
        // Agent 0 runs every 100 ns and waits on signal 0 as well.
        struct Both(Vec<Time>);
        impl Agent for Both {
            fn name(&self) -> String {
                "both".into()
            }
            fn step(&mut self, cx: &mut Cx, now: Time, _limit: Time) -> Step {
                self.0.push(now);
                cx.wait_on(Signal(0));
                Step::At(now + Time::from_ns(100.0))
            }
            fn as_any(&self) -> &dyn Any {
                self
            }
        }
        let agents: Vec<Starting> =
            vec![(Box::new(Both(Vec::new())), Some(ns(0.0))), (probe(Some(1000.0), Some(30.0)), Some(ns(20.0)))];
        let mut engine = Engine::new(agents, 1, Time::ZERO);
        engine.run_until(&mut Shared::default(), ns(250.0), &mut |_| true);
        let both = engine.agents()[0].as_any().downcast_ref::<Both>().unwrap();
        assert_eq!(both.0, [ns(0.0), ns(30.0), ns(130.0), ns(230.0)]);
    }

    #[test]
    fn stalls_are_reported_whether_said_or_seen() {
        let mut gives_up = Probe {
            period: Some(ns(10.0)),
            signal: Signal(0),
            notify_at: None,
            runs: Vec::new(),
            stall_after: Some(2),
        };
        gives_up.runs.clear();
        let agents: Vec<Starting> = vec![(Box::new(gives_up), Some(ns(0.0))), (probe(None, None), Some(ns(0.0)))];
        let mut engine = Engine::new(agents, 1, Time::ZERO);
        engine.run_until(&mut Shared::default(), ns(100.0), &mut |_| true);
        assert_eq!(engine.ran_dry_at, Some(ns(10.0)));
        let stalls = engine.stalls(ns(50.0));
        assert_eq!(stalls.len(), 2);
        assert_eq!((stalls[0].since, stalls[0].reason.as_str()), (ns(10.0), "gave up"));
        assert_eq!((stalls[1].since, stalls[1].reason.as_str()), (ns(0.0), "waiting, and nothing woke it"));
        // A waiter that ran inside the window is not stalled.
        assert_eq!(engine.stalls(Time::ZERO).len(), 1);
    }

    #[test]
    fn a_run_whose_jobs_all_ended_stops_at_the_last_end_without_running_dry() {
        // Ends its job at its second step (10 ns; its clock then at 12 ns), then polls on.
        struct Job(u32);
        impl Agent for Job {
            fn name(&self) -> String {
                "job".into()
            }
            fn step(&mut self, cx: &mut Cx, now: Time, _limit: Time) -> Step {
                self.0 += 1;
                if self.0 == 2 {
                    cx.shared.jobs.end(now + ns(2.0));
                }
                Step::At(now + ns(10.0))
            }
            fn as_any(&self) -> &dyn Any {
                self
            }
        }
        let run = |end_the_run: bool| {
            let agents: Vec<Starting> = vec![(Box::new(Job(0)), Some(ns(0.0))), (probe(None, None), Some(ns(0.0)))];
            let mut engine = Engine::new(agents, 1, Time::ZERO);
            let mut shared = Shared::default();
            shared.jobs.register();
            shared.jobs.end_the_run = end_the_run;
            assert!(engine.run_until(&mut shared, ns(100.0), &mut |_| true));
            engine
        };
        let ended = run(true);
        assert_eq!((ended.now(), ended.ran_dry_at), (ns(12.0), None));
        // The agent still waiting is done, not stalled.
        assert_eq!(ended.stalls(ns(5.0)), []);
        // Beside a workload that does not end, the run goes on to the window's end.
        let going_on = run(false);
        assert_eq!(going_on.now(), ns(100.0));
        assert_eq!(going_on.stalls(ns(5.0)).len(), 1);
    }

    #[test]
    fn waiting_again_on_a_signal_keeps_one_entry_per_agent() {
        struct Waits;
        impl Agent for Waits {
            fn name(&self) -> String {
                "waits".into()
            }
            fn step(&mut self, cx: &mut Cx, now: Time, _limit: Time) -> Step {
                cx.wait_on(Signal(0));
                cx.wait_on(Signal(0));
                Step::At(now + Time::from_ns(1.0))
            }
            fn as_any(&self) -> &dyn Any {
                self
            }
        }
        let mut engine = Engine::new(vec![(Box::new(Waits), Some(Time::ZERO))], 1, Time::ZERO);
        engine.run_until(&mut Shared::default(), ns(100.0), &mut |_| true);
        assert_eq!(engine.schedule.waiters[0].len(), 1);
    }

    #[test]
    fn a_stopped_run_says_so() {
        let mut engine = Engine::new(vec![(probe(Some(10.0), None), Some(ns(0.0)))], 1, Time::ZERO);
        assert!(!engine.run_until(&mut Shared::default(), ns(1e6), &mut |t| t < ns(60.0)));
    }

    /// Runs at the times given, one step each, waiting on `wait` and notifying `notify` as told;
    /// records when it ran and the limit it saw after notifying (once).
    struct Scripted {
        name: &'static str,
        at: Vec<Time>,
        wait: Option<Signal>,
        notify: Option<(Signal, Time)>,
        /// Stalls when run at or after this time.
        stall_from: Option<Time>,
        runs: Log,
    }

    impl Agent for Scripted {
        fn name(&self) -> String {
            self.name.into()
        }
        fn step(&mut self, cx: &mut Cx, now: Time, _limit: Time) -> Step {
            if let Some(signal) = self.wait {
                cx.wait_on(signal);
            }
            if let Some((signal, at)) = self.notify.take() {
                cx.notify(signal, at);
            }
            self.runs.borrow_mut().push((self.name, now, cx.limit()));
            if self.stall_from.is_some_and(|from| now >= from) {
                return Step::Stall("gave up".into());
            }
            match self.at.iter().find(|&&t| t > now) {
                Some(&t) => Step::At(t),
                None => Step::Wait,
            }
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    type Log = std::rc::Rc<std::cell::RefCell<Vec<(&'static str, Time, Time)>>>;

    fn scripted(name: &'static str, log: &Log) -> Scripted {
        Scripted { name, at: Vec::new(), wait: None, notify: None, stall_from: None, runs: log.clone() }
    }

    #[test]
    fn agents_woken_for_the_same_time_run_in_the_order_they_were_woken() {
        let log = Log::default();
        // Agent 1 schedules itself for 100 at 10; agent 0, waiting, is woken for 100 by agent 2 at 50.
        let late = Scripted { wait: Some(Signal(0)), ..scripted("late", &log) };
        let early = Scripted { at: vec![ns(100.0)], ..scripted("early", &log) };
        let notifier = Scripted { notify: Some((Signal(0), ns(100.0))), ..scripted("notifier", &log) };
        let agents: Vec<Starting> = vec![
            (Box::new(late), Some(ns(0.0))),
            (Box::new(early), Some(ns(10.0))),
            (Box::new(notifier), Some(ns(50.0))),
        ];
        let mut engine = Engine::new(agents, 1, Time::ZERO);
        engine.run_until(&mut Shared::default(), ns(200.0), &mut |_| true);
        let order: Vec<(&str, f64)> = log.borrow().iter().map(|&(n, t, _)| (n, t.as_ns())).collect();
        assert_eq!(order, [("late", 0.0), ("early", 10.0), ("notifier", 50.0), ("early", 100.0), ("late", 100.0)]);
    }

    #[test]
    fn notifying_a_signal_only_the_notifier_waits_on_leaves_its_limit_alone() {
        let log = Log::default();
        let own = Scripted { wait: Some(Signal(0)), notify: Some((Signal(0), ns(10.0))), ..scripted("own", &log) };
        let other = Scripted { wait: Some(Signal(1)), ..scripted("other", &log) };
        let notifier = Scripted { notify: Some((Signal(1), ns(120.0))), ..scripted("notifier", &log) };
        let agents: Vec<Starting> = vec![
            (Box::new(own), Some(ns(0.0))),
            (Box::new(other), Some(ns(100.0))),
            (Box::new(notifier), Some(ns(100.0))),
        ];
        let mut engine = Engine::new(agents, 2, ns(5.0));
        engine.run_until(&mut Shared::default(), ns(1000.0), &mut |_| true);
        // Waking itself at 10 leaves its limit at the notifier's 100 plus 5; a notification
        // another agent waits on lowers the notifier's limit from the end (1005) to 120 + 5.
        let seen: Vec<_> = log.borrow().iter().filter(|r| r.0 != "other").copied().collect();
        assert_eq!(
            seen,
            [("own", ns(0.0), ns(105.0)), ("own", ns(10.0), ns(105.0)), ("notifier", ns(100.0), ns(125.0))]
        );
    }

    #[test]
    fn a_stalled_agent_is_never_woken_again_by_what_it_waited_on() {
        let log = Log::default();
        let quitter = Scripted { wait: Some(Signal(0)), stall_from: Some(Time::ZERO), ..scripted("quitter", &log) };
        let notifier = Scripted { notify: Some((Signal(0), ns(60.0))), ..scripted("notifier", &log) };
        let agents: Vec<Starting> = vec![(Box::new(quitter), Some(ns(0.0))), (Box::new(notifier), Some(ns(50.0)))];
        let mut engine = Engine::new(agents, 1, Time::ZERO);
        engine.run_until(&mut Shared::default(), ns(200.0), &mut |_| true);
        let names: Vec<&str> = log.borrow().iter().map(|r| r.0).collect();
        assert_eq!(names, ["quitter", "notifier"]);
        assert_eq!(engine.stalls(Time::ZERO)[0].reason, "gave up");
    }

    #[test]
    fn an_agent_that_stalls_when_woken_early_does_not_run_at_the_time_it_had_asked_for() {
        let log = Log::default();
        // Asks for 100 and waits on signal 0; woken at 60 by the notifier, it stalls there.
        let quitter = Scripted {
            wait: Some(Signal(0)),
            at: vec![ns(100.0)],
            stall_from: Some(ns(60.0)),
            ..scripted("quitter", &log)
        };
        let notifier = Scripted { notify: Some((Signal(0), ns(60.0))), ..scripted("notifier", &log) };
        // An event of another agent between them keeps the quitter's event for 100 in the queue.
        let bystander = scripted("bystander", &log);
        let agents: Vec<Starting> = vec![
            (Box::new(quitter), Some(ns(0.0))),
            (Box::new(notifier), Some(ns(50.0))),
            (Box::new(bystander), Some(ns(80.0))),
        ];
        let mut engine = Engine::new(agents, 1, Time::ZERO);
        engine.run_until(&mut Shared::default(), ns(200.0), &mut |_| true);
        let runs: Vec<(&str, f64)> = log.borrow().iter().map(|&(n, t, _)| (n, t.as_ns())).collect();
        assert_eq!(runs, [("quitter", 0.0), ("notifier", 50.0), ("quitter", 60.0), ("bystander", 80.0)]);
    }

    #[test]
    fn a_harness_reports_the_waits_of_the_last_step_only() {
        let log = Log::default();
        let mut h = Harness::new(Shared::default(), 2);
        let mut first = Scripted { wait: Some(Signal(0)), ..scripted("a", &log) };
        h.step(&mut first, Time::ZERO, Time::MAX);
        assert_eq!(h.waits(), [Signal(0)]);
        let mut second = Scripted { wait: Some(Signal(1)), ..scripted("a", &log) };
        h.step(&mut second, ns(1.0), Time::MAX);
        assert_eq!(h.waits(), [Signal(1)]);
        h.step(&mut scripted("a", &log), ns(2.0), Time::MAX);
        assert!(h.waits().is_empty());
    }
}
