//! Core timing for workload programs: accesses issue at a fixed cost per line; misses overlap up
//! to the core's outstanding-miss limit; a dependent use waits for its data; compute adds cycles.

use crate::hierarchy::{Hierarchy, Level, Source};
use crate::platform::PlatformSpec;
use crate::units::{Clock, Line, Time};

pub struct CoreTimer {
    pub cpu: u32,
    clock: Clock,
    issue: Time,
    /// Completion time of each outstanding-miss slot.
    slots: Vec<Time>,
    /// The core's own time: when its next instruction can issue.
    pub now: Time,
}

impl CoreTimer {
    pub fn new(cpu: u32, clock: Clock, issue_cycles_per_line: f64, outstanding_misses: u32) -> CoreTimer {
        CoreTimer {
            cpu,
            clock,
            issue: clock.cycles(issue_cycles_per_line),
            slots: vec![Time::ZERO; outstanding_misses as usize],
            now: Time::ZERO,
        }
    }

    /// A timer for `cpu` with the platform's core parameters.
    pub fn on_cpu(cpu: u32, clock: Clock, platform: &PlatformSpec) -> CoreTimer {
        CoreTimer::new(cpu, clock, platform.core.issue_cycles_per_line, platform.core.outstanding_misses)
    }

    /// Issues one line access without waiting for it; returns when its data is available.
    pub fn issue(&mut self, hierarchy: &mut Hierarchy, line: Line, write: bool) -> Time {
        self.now += self.issue;
        let access = hierarchy.core_access(self.cpu, line, write, self.now);
        if access.source == Source::L1 {
            return self.now + access.latency;
        }
        self.occupy_slot(access.latency)
    }

    /// A miss needs a free miss slot: stall until the earliest one frees, hold it `latency`.
    fn occupy_slot(&mut self, latency: Time) -> Time {
        let (slot, &free_at) = self.slots.iter().enumerate().min_by_key(|(_, t)| **t).expect("at least one slot");
        let start = free_at.max(self.now);
        self.now = start;
        let done = start + latency;
        self.slots[slot] = done;
        done
    }

    /// A software prefetch into `level`: costs an issue slot and, when it fills the L1D, one of
    /// the L1D's miss slots until the data arrives (prefetches into L2 or L3 queue there, not in
    /// the core). The core does not wait for the data.
    pub fn prefetch(&mut self, hierarchy: &mut Hierarchy, line: Line, level: Level) {
        self.now += self.issue;
        if let Some(latency) = hierarchy.prefetch(self.cpu, line, level, self.now) {
            if level == Level::L1 {
                self.occupy_slot(latency);
            }
        }
    }

    /// A load whose value the next instruction needs: issue and wait.
    pub fn load_dependent(&mut self, hierarchy: &mut Hierarchy, line: Line) {
        let done = self.issue(hierarchy, line, false);
        self.now = self.now.max(done);
    }

    /// Waits for every outstanding access.
    pub fn drain(&mut self) {
        let last = self.slots.iter().copied().max().unwrap_or(Time::ZERO);
        self.now = self.now.max(last);
    }

    pub fn compute(&mut self, cycles: f64) {
        self.now += self.clock.cycles(cycles);
    }

    /// How many misses the core can have in flight: also how far it can run loads ahead.
    pub fn window(&self) -> usize {
        self.slots.len()
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

/// What a workload did in the measured window: units of work (packets, messages, lines) and the
/// time its CPU was busy with them. Every workload reports it the same way.
#[derive(Debug, Clone, Default)]
pub struct Activity {
    units: u64,
    busy: Time,
    window_start: Time,
}

impl Activity {
    pub fn add(&mut self, units: u64, busy: Time) {
        self.units += units;
        self.busy += busy;
    }

    pub fn reset(&mut self, now: Time) {
        *self = Activity { window_start: now, ..Activity::default() };
    }

    pub fn window_start(&self) -> Time {
        self.window_start
    }

    /// `{unit}s`, `busy` (fraction of the window), `exec_ns` and `cycles` (time and core cycles
    /// spent working), and both per unit.
    pub fn report(&self, now: Time, timer: &CoreTimer, unit: &str) -> serde_json::Map<String, serde_json::Value> {
        let window = (now - self.window_start).as_ns().max(1e-9);
        let exec_ns = self.busy.as_ns();
        let per_unit = if self.units > 0 { exec_ns / self.units as f64 } else { 0.0 };
        let mut out = serde_json::Map::new();
        out.insert(format!("{unit}s"), self.units.into());
        out.insert("busy".into(), (exec_ns / window).min(1.0).into());
        out.insert("exec_ns".into(), exec_ns.into());
        out.insert("cycles".into(), timer.cycles(self.busy).into());
        out.insert(format!("exec_ns_per_{unit}"), per_unit.into());
        out.insert(format!("cycles_per_{unit}"), timer.cycles(Time::from_ns(per_unit)).into());
        out
    }
}
