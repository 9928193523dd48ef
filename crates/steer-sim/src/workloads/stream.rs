//! A cache-hungry co-runner: sweeps a working set line by line, forever, with independent
//! accesses (as a STREAM-like kernel does), so it competes with I/O for cache capacity.

use crate::cpu::{Next, Program, ProgramCx, UnitKind, LINE};
use crate::devices::SystemShape;
use crate::error::{ensure, ConfigResult};
use crate::params::params;
use crate::system::Builder;
use crate::units::Line;
use crate::workloads::WorkloadSpec;

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

/// The kind's registration.
#[linkme::distributed_slice(crate::workloads::WORKLOADS)]
pub static KIND: crate::workloads::WorkloadKind = crate::workloads::WorkloadKind::of::<StreamSpec>(
    "stream",
    "a cache-hungry co-runner sweeping a working set (confine it with CAT way masks)",
);

/// Lines swept per unit of work.
const LINES_PER_UNIT: u64 = 64;

impl WorkloadSpec for StreamSpec {
    fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_cpu(path, self.cpu)?;
        ensure(self.working_set_bytes >= 64, &format!("{path}.working_set_bytes"), || "must be at least 64".into())?;
        ensure(self.cycles_per_line >= 0.0, &format!("{path}.cycles_per_line"), || "must not be negative".into())
    }

    fn cpus(&self, _system: &SystemShape) -> Vec<u32> {
        vec![self.cpu]
    }

    fn build(&self, b: &mut Builder) {
        let line_bits = b.platform.line_bits();
        let node = b.platform.node_of_cpu(self.cpu);
        let base = b.alloc(node, self.working_set_bytes).line(line_bits);
        let lines = (self.working_set_bytes >> line_bits).max(1);
        b.run_on(self.cpu, Box::new(Stream { spec: self.clone(), base, lines, cursor: 0 }));
    }
}

pub struct Stream {
    spec: StreamSpec,
    base: Line,
    lines: u64,
    cursor: u64,
}

impl Program for Stream {
    fn role(&self) -> &'static str {
        "stream"
    }

    fn unit(&self) -> &'static UnitKind {
        &LINE
    }

    fn next(&mut self, cx: &mut ProgramCx) -> Next {
        for _ in 0..LINES_PER_UNIT {
            let line = Line(self.base.0 + self.cursor);
            cx.load(line);
            if self.spec.write_every > 0 && self.cursor.is_multiple_of(self.spec.write_every as u64) {
                cx.store(line);
            }
            cx.compute(self.spec.cycles_per_line);
            self.cursor = (self.cursor + 1) % self.lines;
        }
        cx.count(LINES_PER_UNIT);
        Next::Unit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{ask, Op};
    use crate::testing::{ns, ring_harness};

    #[test]
    fn a_unit_sweeps_sixty_four_lines_writing_every_nth_and_wraps_around() {
        let (mut h, _) = ring_harness(1, 1, crate::devices::ring::Recycle::Fifo);
        let spec = StreamSpec { write_every: 3, cycles_per_line: 2.0, ..StreamSpec::default() };
        let mut p = Stream { spec, base: Line(0x100), lines: 40, cursor: 0 };
        let (next, ops, units) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        assert_eq!((next, units), (Next::Unit, 64));
        assert_eq!(
            &ops[..5],
            [Op::Load(Line(0x100)), Op::Store(Line(0x100)), Op::Compute(2.0), Op::Load(Line(0x101)), Op::Compute(2.0)]
        );
        let loads: Vec<u64> =
            ops.iter().filter_map(|op| if let Op::Load(l) = op { Some(l.0 - 0x100) } else { None }).collect();
        assert_eq!(loads, (0..64).map(|i| i % 40).collect::<Vec<_>>());
        // Lines 0, 3, ..., 39 and then (after the wrap) 0 (cursor 40 -> 0), 3, ..., 21 are written.
        let stores = ops.iter().filter(|op| matches!(op, Op::Store(_))).count();
        assert_eq!(stores, 14 + 8);
        assert_eq!(p.cursor, 24);
    }
}
