//! The host probes of `steer calibrate` and `steer validate`, as the simulator runs them: the same
//! loops the native kernels (crate `steer-probe`) time on a real machine, one pattern per run, so
//! a measured figure and a simulated one describe the same work.

use crate::cpu::{Next, Program, ProgramCx, UnitKind, BUFFER, LOAD};
use crate::devices::SystemShape;
use crate::error::{ensure, ConfigResult};
use crate::hierarchy::Level;
use crate::params::{choice, params};
use crate::system::Builder;
use crate::units::{Line, Rng};
use crate::workloads::WorkloadSpec;

choice! {
    /// The loop a probe runs.
    pub enum Pattern {
        /// Dependent loads around one random cycle through the working set's lines.
        Chase,
        /// Copy each buffer of a ring of `working_set_bytes / buffer_bytes` into one reused buffer,
        /// in ring order.
        RingCopy,
        /// Independent loads of random lines of the working set.
        Random,
        /// Read one word every `stride_bytes` through the working set, software-prefetching
        /// `prefetch_distance` strides ahead.
        Strided,
    }
}

params! {
    /// The probe's parameters.
    pub struct ProbeSpec {
        /// Logical CPU the probe runs on.
        cpu: u32 = 0,
        /// Which loop.
        pattern: Pattern = Pattern::Chase,
        /// Bytes the loop goes through (the ring's bytes for `ring_copy`).
        working_set_bytes: u64 = 1 << 20,
        /// Bytes of one ring buffer and of the buffer it is copied into (`ring_copy`).
        buffer_bytes: u64 = 2048,
        /// Bytes between two reads (`strided`): a multiple of 8.
        stride_bytes: u64 = 256,
        /// Software prefetch this many strides ahead (`strided`; 0: none).
        prefetch_distance: u32 = 0,
    }
}

/// The kind's registration.
#[linkme::distributed_slice(crate::workloads::WORKLOADS)]
pub static KIND: crate::workloads::WorkloadKind = crate::workloads::WorkloadKind::of::<ProbeSpec>(
    "probe",
    "a host probe of steer calibrate / validate: pointer chase, ring copy, random or strided reads",
);

/// Most bytes a probe may go through: the chase keeps 4 bytes per line of the working set.
const MAX_WORKING_SET: u64 = 16 << 30;
/// Elements per unit of work.
const PER_UNIT: u64 = 64;
/// Core cycles of the random loop's own instructions per load: the xorshift64 step that makes the
/// next index is three dependent shift-xor pairs of two 1-cycle operations each, and the next
/// index waits for it (the loads themselves overlap).
const RANDOM_INDEX_CYCLES: f64 = 6.0;

impl WorkloadSpec for ProbeSpec {
    fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_cpu(path, self.cpu)?;
        let line = system.platform.line_bytes() as u64;
        ensure(
            (line..=MAX_WORKING_SET).contains(&self.working_set_bytes),
            &format!("{path}.working_set_bytes"),
            || format!("must be {line} B to {} GiB (got {})", MAX_WORKING_SET >> 30, self.working_set_bytes),
        )?;
        ensure(
            self.buffer_bytes >= 1 && self.buffer_bytes <= self.working_set_bytes,
            &format!("{path}.buffer_bytes"),
            || format!("must be 1 B to working_set_bytes ({})", self.working_set_bytes),
        )?;
        ensure(
            self.stride_bytes >= 8
                && self.stride_bytes.is_multiple_of(8)
                && self.stride_bytes <= self.working_set_bytes,
            &format!("{path}.stride_bytes"),
            || format!("must be a multiple of 8 from 8 to working_set_bytes (got {})", self.stride_bytes),
        )
    }

    fn cpus(&self, _system: &SystemShape) -> Vec<u32> {
        vec![self.cpu]
    }

    fn build(&self, b: &mut Builder) {
        let node = b.platform.node_of_cpu(self.cpu);
        let base = b.alloc(node, self.working_set_bytes).line(b.platform.line_bits());
        let loop_ = self.loop_of(b, node);
        b.run_on(self.cpu, Box::new(Probe { base, loop_ }));
    }
}

impl ProbeSpec {
    /// The loop of this spec's pattern at its start (a ring copy's reused buffer is allocated on
    /// `node`).
    fn loop_of(&self, b: &mut Builder, node: u32) -> Loop {
        let line_bits = b.platform.line_bits();
        let lines = (self.working_set_bytes >> line_bits).max(1);
        let mut rng = Rng::new(b.seed);
        match self.pattern {
            Pattern::Chase => Loop::Chase { next: random_cycle(lines, &mut rng), at: 0 },
            Pattern::Random => Loop::Random { lines, rng },
            Pattern::RingCopy => {
                let buffer_lines = self.buffer_bytes.div_ceil(1 << line_bits);
                let app = b.alloc(node, self.buffer_bytes).line(line_bits);
                Loop::RingCopy {
                    buffers: (self.working_set_bytes / self.buffer_bytes).max(1),
                    buffer_lines,
                    app,
                    at: 0,
                }
            }
            Pattern::Strided => Loop::Strided {
                elements: self.working_set_bytes / self.stride_bytes,
                stride: self.stride_bytes,
                prefetch: self.prefetch_distance as u64,
                line_bits,
                at: 0,
            },
        }
    }
}

/// Sattolo's shuffle: `next[i]` is the line after line `i` on one cycle through all `lines`.
fn random_cycle(lines: u64, rng: &mut Rng) -> Vec<u32> {
    let mut order: Vec<u32> = (0..lines as u32).collect();
    for i in (1..order.len()).rev() {
        let j = (rng.next_u64() % i as u64) as usize;
        order.swap(i, j);
    }
    let mut next = vec![0; order.len()];
    for (k, &line) in order.iter().enumerate() {
        next[line as usize] = order[(k + 1) % order.len()];
    }
    next
}

/// A probe's loop and where it is.
enum Loop {
    Chase { next: Vec<u32>, at: u32 },
    RingCopy { buffers: u64, buffer_lines: u64, app: Line, at: u64 },
    Random { lines: u64, rng: Rng },
    Strided { elements: u64, stride: u64, prefetch: u64, line_bits: u32, at: u64 },
}

pub struct Probe {
    /// First line of the working set.
    base: Line,
    loop_: Loop,
}

impl Program for Probe {
    fn role(&self) -> &'static str {
        "probe"
    }

    fn unit(&self) -> &'static UnitKind {
        match self.loop_ {
            Loop::RingCopy { .. } => &BUFFER,
            _ => &LOAD,
        }
    }

    fn next(&mut self, cx: &mut ProgramCx) -> Next {
        let base = self.base.0;
        match &mut self.loop_ {
            Loop::Chase { next, at } => {
                for _ in 0..PER_UNIT {
                    cx.load_dependent(Line(base + *at as u64));
                    *at = next[*at as usize];
                }
                cx.count(PER_UNIT);
            }
            Loop::Random { lines, rng } => {
                for _ in 0..PER_UNIT {
                    cx.compute(RANDOM_INDEX_CYCLES);
                    cx.load(Line(base + rng.next_u64() % *lines));
                }
                cx.count(PER_UNIT);
            }
            Loop::Strided { elements, stride, prefetch, line_bits, at } => {
                for _ in 0..PER_UNIT {
                    if *prefetch > 0 {
                        let ahead = (*at + *prefetch) % *elements;
                        cx.prefetch(Line(base + ((ahead * *stride) >> *line_bits)), Level::L1);
                    }
                    cx.load(Line(base + ((*at * *stride) >> *line_bits)));
                    *at = (*at + 1) % *elements;
                }
                cx.count(PER_UNIT);
            }
            Loop::RingCopy { buffers, buffer_lines, app, at } => {
                let first = *at * *buffer_lines;
                for k in 0..*buffer_lines {
                    cx.load(Line(base + first + k));
                    cx.store(Line(app.0 + k));
                }
                // The native loop reads a word of the copy; nothing waits for that word, so the
                // next copy's loads go on beside it.
                cx.load(*app);
                *at = (*at + 1) % *buffers;
                cx.count(1);
            }
        }
        Next::Unit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{ask, Op};
    use crate::devices::ring::Recycle;
    use crate::testing::{ns, ring_harness};

    fn ops_of(loop_: Loop) -> (Vec<Op>, u64, Probe) {
        let (mut h, _) = ring_harness(1, 1, Recycle::Fifo);
        let mut p = Probe { base: Line(0x100), loop_ };
        let (next, ops, units) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        assert_eq!(next, Next::Unit);
        (ops, units, p)
    }

    #[test]
    fn a_ring_copy_takes_as_many_whole_buffers_as_the_working_set_holds() {
        let platform = crate::testing::tiny_platform();
        let mut b = crate::system::Builder::new(&platform, 1);
        let spec = ProbeSpec {
            pattern: Pattern::RingCopy,
            working_set_bytes: 8192,
            buffer_bytes: 1000,
            ..ProbeSpec::default()
        };
        // 8 buffers of 1000 B, each 16 lines of 64 B (the last partly used).
        match spec.loop_of(&mut b, 0) {
            Loop::RingCopy { buffers, buffer_lines, at, .. } => assert_eq!((buffers, buffer_lines, at), (8, 16, 0)),
            _ => panic!("a ring copy"),
        }
    }

    #[test]
    fn a_random_cycle_visits_every_line_once_before_returning() {
        for lines in [1, 2, 3, 64, 1000] {
            let next = random_cycle(lines, &mut Rng::new(7));
            let mut at = 0u32;
            let mut seen = vec![false; lines as usize];
            for _ in 0..lines {
                assert!(!seen[at as usize], "line {at} seen twice of {lines}");
                seen[at as usize] = true;
                at = next[at as usize];
            }
            assert_eq!(at, 0, "back at the start after {lines} steps");
        }
    }

    #[test]
    fn the_chase_follows_its_cycle_with_dependent_loads() {
        let next = vec![2, 0, 3, 1];
        let (ops, units, p) = ops_of(Loop::Chase { next, at: 0 });
        assert_eq!(units, 64);
        let lines: Vec<u64> =
            ops.iter().map(|op| if let Op::LoadDependent(l) = op { l.0 - 0x100 } else { panic!("{op:?}") }).collect();
        assert_eq!(&lines[..5], [0, 2, 3, 1, 0]);
        assert_eq!(lines.len(), 64);
        assert!(matches!(p.loop_, Loop::Chase { at: 0, .. }), "64 steps on a 4-cycle end where they began");
    }

    #[test]
    fn random_loads_are_independent_each_after_its_index_computation() {
        let (ops, units, _) = ops_of(Loop::Random { lines: 10, rng: Rng::new(3) });
        assert_eq!(units, 64);
        let mut expected = Rng::new(3);
        assert_eq!(ops[0], Op::Compute(RANDOM_INDEX_CYCLES));
        assert_eq!(ops[1], Op::Load(Line(0x100 + expected.next_u64() % 10)));
        assert_eq!(ops[3], Op::Load(Line(0x100 + expected.next_u64() % 10)));
        assert_eq!(ops.len(), 128);
    }

    #[test]
    fn the_strided_scan_prefetches_its_distance_ahead_and_wraps() {
        let strided = |prefetch| Loop::Strided { elements: 10, stride: 128, prefetch, line_bits: 6, at: 8 };
        let (ops, units, p) = ops_of(strided(3));
        assert_eq!(units, 64);
        // Element 8 is at byte 1024 (line 16); 3 strides ahead is element 1 (wrapped), line 2.
        assert_eq!(
            &ops[..4],
            [
                Op::Prefetch(Line(0x102), Level::L1),
                Op::Load(Line(0x110)),
                Op::Prefetch(Line(0x104), Level::L1),
                Op::Load(Line(0x112))
            ]
        );
        assert_eq!(ops[5], Op::Load(Line(0x100)), "element 10 wraps to 0");
        assert!(matches!(p.loop_, Loop::Strided { at: 2, .. }), "(8 + 64) % 10");
        let (ops, _, _) = ops_of(strided(0));
        assert!(ops.iter().all(|op| matches!(op, Op::Load(_))), "no prefetch at distance 0");
    }

    #[test]
    fn a_ring_copy_unit_copies_one_buffer_and_reads_the_copy() {
        let (ops, units, p) = ops_of(Loop::RingCopy { buffers: 3, buffer_lines: 3, app: Line(0x900), at: 2 });
        assert_eq!(units, 1);
        assert_eq!(p.role(), "probe");
        // Buffer 2 of 3 lines begins at line 6.
        assert_eq!(
            ops,
            [
                Op::Load(Line(0x106)),
                Op::Store(Line(0x900)),
                Op::Load(Line(0x107)),
                Op::Store(Line(0x901)),
                Op::Load(Line(0x108)),
                Op::Store(Line(0x902)),
                Op::Load(Line(0x900))
            ]
        );
        assert!(matches!(p.loop_, Loop::RingCopy { at: 0, .. }), "the ring wraps");
    }
}
