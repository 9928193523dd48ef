//! A cache-hungry co-runner: sweeps a working set line by line, forever, with independent
//! accesses (as a STREAM-like kernel does), so it competes with I/O for cache capacity.

use crate::engine::System;
use crate::error::{ensure, ConfigResult};
use crate::params::params;
use crate::units::{Addr, Clock, Line, Time};
use crate::workloads::timing::{Activity, CoreTimer};
use crate::workloads::{SystemShape, Workload};

params! {
    /// The co-runner's parameters.
    pub struct StreamSpec {
        /// Logical CPU the co-runner runs on.
        cpu: u32 = 0,
        /// Bytes swept cyclically.
        working_set_bytes: u64 = 64 << 20,
        /// Every n-th line is written as well as read (0: read only).
        write_every: u32 = 0,
        /// Compute cycles per line.
        cycles_per_line: f64 = 1.0,
    }
}

/// Lines swept per step: small enough to interleave finely with other agents.
const LINES_PER_STEP: u64 = 64;

impl StreamSpec {
    pub fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_cpu(path, self.cpu)?;
        ensure(self.working_set_bytes >= 64, &format!("{path}.working_set_bytes"), || "must be at least 64".into())?;
        ensure(self.cycles_per_line >= 0.0, &format!("{path}.cycles_per_line"), || "must not be negative".into())
    }
}

pub struct Stream {
    spec: StreamSpec,
    timer: CoreTimer,
    base: Line,
    lines: u64,
    cursor: u64,
    activity: Activity,
}

impl Stream {
    pub fn new(spec: &StreamSpec, clock: Clock, system: &mut System) -> Stream {
        let platform = &system.platform;
        let line_bits = platform.line_bits();
        let node = system.node_of_cpu(spec.cpu);
        let base: Addr = system.allocator.alloc(node, spec.working_set_bytes);
        Stream {
            timer: CoreTimer::on_cpu(spec.cpu, clock, platform),
            base: base.line(line_bits),
            lines: (spec.working_set_bytes >> line_bits).max(1),
            cursor: 0,
            spec: spec.clone(),
            activity: Activity::default(),
        }
    }
}

impl Workload for Stream {
    fn cpu(&self) -> u32 {
        self.spec.cpu
    }

    fn role(&self) -> &str {
        "stream"
    }

    fn step(&mut self, system: &mut System, now: Time) -> Option<Time> {
        self.timer.idle_until(now);
        let start = self.timer.now;
        for _ in 0..LINES_PER_STEP {
            let line = Line(self.base.0 + self.cursor);
            self.timer.issue(&mut system.hierarchy, line, false);
            if self.spec.write_every > 0 && self.cursor.is_multiple_of(self.spec.write_every as u64) {
                self.timer.issue(&mut system.hierarchy, line, true);
            }
            self.timer.compute(self.spec.cycles_per_line);
            self.cursor = (self.cursor + 1) % self.lines;
        }
        self.activity.add(LINES_PER_STEP, self.timer.now - start);
        Some(self.timer.now)
    }

    fn reset_stats(&mut self, now: Time) {
        self.activity.reset(now);
    }

    fn report(&self, now: Time) -> serde_json::Value {
        self.activity.report(now, &self.timer, "line").into()
    }
}
