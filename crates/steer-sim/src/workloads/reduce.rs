//! Zero-copy, OS-bypass message receive with a reduction (Leon & Maccabe): messages arrive in
//! pre-posted buffers; after an optional delay the application traverses each message linearly,
//! then (optionally) reduces it in a second pass over the lines the traversal left in its
//! caches, and re-posts the buffer. Optionally it also walks a working set of its own per
//! message, which injected data may evict (cache pollution).

use crate::cpu::{Next, Program, ProgramCx, UnitKind, MESSAGE};
use crate::devices::ring::{Completion, RingId, RxRing, RX_QUEUE};
use crate::devices::SystemShape;
use crate::error::{ensure, ConfigResult, Shown};
use crate::hierarchy::Level;
use crate::params::{choice, params};
use crate::system::Builder;
use crate::units::{Line, Time};
use crate::workloads::WorkloadSpec;

choice! {
    /// Where software prefetches put the data.
    pub enum PrefetchTarget {
        L1,
        L2,
    }
}

params! {
    /// The reduction loop's parameters.
    pub struct ReduceSpec {
        /// Logical CPU the application runs on.
        cpu: u32 = 0,
        /// Name of the NIC whose queue delivers the messages.
        device: String = "nic0".to_string(),
        /// RX queue index on that NIC.
        queue: u32 = 0,
        /// Bytes per element reduced.
        element_bytes: u32 = 8,
        /// Compute cycles per element of the traversal.
        cycles_per_element: f64 = 1.0,
        /// Cycles per element of the reduction that follows the traversal, a second pass over
        /// the message (0: none; the traversal is then the whole of the work). A reduction whose
        /// adds depend on each other runs at the adder's latency per element.
        reduction_cycles_per_element: f64 = 0.0,
        /// Instructions per element: its load and its add (assumed), what the core's instruction
        /// window is counted in.
        instructions_per_element: f64 = 2.0,
        /// Time between a message becoming visible and the application using it (ns).
        delay_ns: f64 = 0.0,
        /// Software prefetch this many lines ahead of the traversal (0: no prefetching).
        prefetch_distance: u32 = 0,
        /// Level software prefetches fill.
        prefetch_target: PrefetchTarget = PrefetchTarget::L1,
        /// Bytes of the application's own data walked once per message (0: none).
        working_set_bytes: u64 = 0,
    }
}

/// The kind's registration.
#[linkme::distributed_slice(crate::workloads::WORKLOADS)]
pub static KIND: crate::workloads::WorkloadKind = crate::workloads::WorkloadKind::of::<ReduceSpec>(
    "reduce",
    "zero-copy message receive with a linear reduction of each message (Leon & Maccabe)",
);

impl WorkloadSpec for ReduceSpec {
    fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_cpu(path, self.cpu)?;
        system.check_queue(path, &self.device, RX_QUEUE, self.queue)?;
        ensure((1..=4096).contains(&self.element_bytes), &format!("{path}.element_bytes"), || {
            format!("must be 1 to 4096: an element is a number, not a page (got {})", self.element_bytes)
        })?;
        ensure(self.prefetch_distance <= 1 << 20, &format!("{path}.prefetch_distance"), || {
            format!("must be at most 1048576 lines (got {})", self.prefetch_distance)
        })?;
        for (name, cycles) in [
            ("cycles_per_element", self.cycles_per_element),
            ("reduction_cycles_per_element", self.reduction_cycles_per_element),
        ] {
            ensure(cycles >= 0.0, &format!("{path}.{name}"), || "must not be negative".into())?;
        }
        ensure(self.delay_ns >= 0.0, &format!("{path}.delay_ns"), || "must not be negative".into())?;
        ensure(
            self.instructions_per_element > 0.0 && self.instructions_per_element <= 1e6,
            &format!("{path}.instructions_per_element"),
            || format!("must be more than 0 and at most 1000000 (got {})", Shown(self.instructions_per_element)),
        )
    }

    fn cpus(&self, _system: &SystemShape) -> Vec<u32> {
        vec![self.cpu]
    }

    fn queues(&self, _system: &SystemShape) -> Vec<(String, u32)> {
        vec![(self.device.clone(), self.queue)]
    }

    fn build(&self, b: &mut Builder) {
        let line_bits = b.platform.line_bits();
        let node = b.platform.node_of_cpu(self.cpu);
        let working_set = b.alloc(node, self.working_set_bytes.max(1)).line(line_bits);
        let program = Reduce {
            ring: b.queues_of::<RxRing>(&self.device)[self.queue as usize],
            window: self.lookahead_lines(&b.platform.core, line_bits),
            line_bits,
            working_set,
            working_lines: self.working_set_bytes >> line_bits,
            delay: Time::from_ns(self.delay_ns),
            taken: None,
            spec: self.clone(),
        };
        b.run_on(self.cpu, Box::new(program));
    }
}

impl ReduceSpec {
    /// How many lines the traversal's loads run ahead of its arithmetic: as many as the core's
    /// instruction window holds past the line being reduced (at least that one), and no more than
    /// it has miss slots.
    fn lookahead_lines(&self, core: &crate::platform::CoreSpec, line_bits: u32) -> u64 {
        let elements_per_line = ((1u64 << line_bits) / self.element_bytes as u64).max(1) as f64;
        let in_window = (core.window_instructions as f64 / (elements_per_line * self.instructions_per_element)) as u64;
        in_window.clamp(1, core.outstanding_misses as u64)
    }
}

pub struct Reduce {
    spec: ReduceSpec,
    ring: RingId,
    /// How far loads run ahead of the arithmetic, in lines (`ReduceSpec::lookahead_lines`).
    window: u64,
    line_bits: u32,
    working_set: Line,
    working_lines: u64,
    delay: Time,
    taken: Option<Completion>,
}

impl Reduce {
    /// Queues a pass over lines `first..=last` at `cycles` per element: loads run ahead of the
    /// arithmetic by at most the window, prefetches `prefetch_distance` lines further ahead, and
    /// each line's arithmetic waits for its data.
    fn traverse(&self, cx: &mut ProgramCx, first: u64, last: u64, cycles: f64, prefetch: bool) {
        let per_line = ((1u64 << self.line_bits) / self.spec.element_bytes as u64).max(1) as f64;
        let target = match self.spec.prefetch_target {
            PrefetchTarget::L1 => Level::L1,
            PrefetchTarget::L2 => Level::L2,
        };
        let mut loads = std::collections::VecDeque::new();
        let mut next_load = first;
        for line in first..=last {
            while next_load <= last && next_load < line + self.window {
                let ahead = next_load + self.spec.prefetch_distance as u64;
                if prefetch && self.spec.prefetch_distance > 0 && ahead <= last {
                    cx.prefetch(Line(ahead), target);
                }
                loads.push_back(cx.load(Line(next_load)));
                next_load += 1;
            }
            cx.wait_for(loads.pop_front().expect("the line's load was queued"));
            cx.compute(per_line * cycles);
        }
    }
}

impl Program for Reduce {
    fn role(&self) -> &'static str {
        "reduce"
    }

    fn unit(&self) -> &'static UnitKind {
        &MESSAGE
    }

    fn next(&mut self, cx: &mut ProgramCx) -> Next {
        // The application uses a message `delay` after it becomes visible.
        let completion = match cx.take_completion(self.ring, self.delay) {
            Ok(completion) => completion,
            Err(next) => return next,
        };
        let ring = cx.device_queue(self.ring);
        let buffer = ring.buffer_addr(completion.buffer);
        let descriptor = ring.next_descriptor_addr().line(self.line_bits);
        cx.load_dependent(completion.entry.line(self.line_bits));
        let first = buffer.line(self.line_bits).0;
        let last = buffer.offset(completion.bytes as u64 - 1).line(self.line_bits).0;
        self.traverse(cx, first, last, self.spec.cycles_per_element, true);
        if self.spec.reduction_cycles_per_element > 0.0 {
            self.traverse(cx, first, last, self.spec.reduction_cycles_per_element, false);
        }
        if self.working_lines > 0 {
            let first = self.working_set.0;
            self.traverse(cx, first, first + self.working_lines - 1, self.spec.cycles_per_element, false);
        }
        cx.drain();
        cx.store(descriptor);
        cx.call(0);
        self.taken = Some(completion);
        Next::Unit
    }

    fn on_call(&mut self, _tag: u32, cx: &mut ProgramCx) {
        let completion = self.taken.take().expect("a message is being reduced");
        cx.device_queue(self.ring).release(&completion);
        cx.count(1);
    }

    fn waiting_for(&self) -> String {
        format!("a message on {} queue {}", self.spec.device, self.spec.queue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{ask, reach_call, Op};
    use crate::devices::ring::Recycle;
    use crate::devices::ring::Rings;
    use crate::testing::{deliver, ns, ring_harness, READY};

    fn program(ring: RingId, window: u64, prefetch_distance: u32, delay_ns: f64, working_lines: u64) -> Reduce {
        let spec = ReduceSpec {
            element_bytes: 8,
            cycles_per_element: 1.0,
            prefetch_distance,
            delay_ns,
            ..ReduceSpec::default()
        };
        Reduce {
            spec,
            ring,
            window,
            line_bits: 6,
            working_set: Line(0x900),
            working_lines,
            delay: Time::from_ns(delay_ns),
            taken: None,
        }
    }

    #[test]
    fn loads_run_ahead_as_far_as_the_instruction_window_and_the_miss_slots_allow() {
        let spec = ReduceSpec::default();
        let core = |window_instructions, outstanding_misses| crate::platform::CoreSpec {
            window_instructions,
            outstanding_misses,
            ..Default::default()
        };
        // POWER5: 100 instructions, 128 B lines of 16 elements of 2 instructions: 3 lines.
        assert_eq!(spec.lookahead_lines(&core(100, 8), 7), 3);
        // Zen 5: 448 instructions, 64 B lines of 8 elements: 28 lines, of which 24 miss slots allow.
        assert_eq!(spec.lookahead_lines(&core(448, 24), 6), 24);
        // A window shorter than one line still reduces the line it waits for.
        assert_eq!(spec.lookahead_lines(&core(10, 8), 7), 1);
        let heavier = ReduceSpec { instructions_per_element: 4.0, element_bytes: 16, ..spec };
        assert_eq!(heavier.lookahead_lines(&core(100, 8), 7), 3);
    }

    #[test]
    fn a_stalled_reduction_says_which_queue_it_waits_on() {
        let p = program(RingId(0), 2, 0, 0.0, 0);
        assert_eq!(p.waiting_for(), format!("a message on {} queue {}", p.spec.device, p.spec.queue));
        assert!(!p.spec.device.is_empty());
    }

    #[test]
    fn loads_run_ahead_by_the_window_and_each_line_is_reduced_when_its_data_is_in() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        // 3 lines, a window of 2, prefetching 1 line ahead into the L1.
        let mut p = program(ring, 2, 1, 0.0, 0);
        deliver(&mut h, ring, 192, ns(0.0), ns(0.0));
        let (next, ops, _) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        assert_eq!(next, Next::Unit);
        let (a, b, c) = (Line(0x4000), Line(0x4001), Line(0x4002));
        let expected = [
            Op::LoadDependent(Line(0x3000 >> 6)),
            Op::Prefetch(b, Level::L1),
            Op::Load(a),
            Op::Prefetch(c, Level::L1),
            Op::Load(b),
            Op::WaitFor(crate::cpu::LoadId(0)),
            Op::Compute(8.0),
            Op::Load(c),
            Op::WaitFor(crate::cpu::LoadId(1)),
            Op::Compute(8.0),
            Op::WaitFor(crate::cpu::LoadId(2)),
            Op::Compute(8.0),
            Op::Drain,
            Op::Store(Line(0x1000 >> 6)),
            Op::Call(0),
        ];
        assert_eq!(ops, expected);
        assert_eq!(h.with_cx(ns(0.0), ns(0.0), |cx| reach_call(&mut p, 0, cx, ns(90.0))), 1);
        assert_eq!(h.shared.get_mut::<Rings>()[0].stats.consumed_packets, 1);
    }

    #[test]
    fn the_reduction_is_a_second_pass_over_the_message_at_its_own_cost_and_without_prefetches() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let mut p = program(ring, 2, 1, 0.0, 0);
        p.spec.reduction_cycles_per_element = 6.0;
        deliver(&mut h, ring, 128, ns(0.0), ns(0.0));
        let (next, ops, _) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0)));
        assert_eq!(next, Next::Unit);
        let (a, b) = (Line(0x4000), Line(0x4001));
        let expected = [
            Op::LoadDependent(Line(0x3000 >> 6)),
            Op::Prefetch(b, Level::L1),
            Op::Load(a),
            Op::Load(b),
            Op::WaitFor(crate::cpu::LoadId(0)),
            Op::Compute(8.0),
            Op::WaitFor(crate::cpu::LoadId(1)),
            Op::Compute(8.0),
            // The reduction: the same two lines again, 8 elements of 6 cycles each.
            Op::Load(a),
            Op::Load(b),
            Op::WaitFor(crate::cpu::LoadId(2)),
            Op::Compute(48.0),
            Op::WaitFor(crate::cpu::LoadId(3)),
            Op::Compute(48.0),
            Op::Drain,
            Op::Store(Line(0x1000 >> 6)),
            Op::Call(0),
        ];
        assert_eq!(ops, expected);
    }

    #[test]
    fn a_negative_reduction_cost_is_refused_by_name() {
        let platform = crate::testing::tiny_platform();
        let shape = SystemShape {
            platform: &platform,
            cpus: platform.topology.cpus(),
            copy_engines: Vec::new(),
            devices: vec![crate::devices::DeviceShape::rx("nic0", vec![0])],
        };
        let spec = ReduceSpec { reduction_cycles_per_element: -1.0, ..ReduceSpec::default() };
        let error = spec.validate("workloads.0", &shape).unwrap_err().to_string();
        assert_eq!(error, "workloads.0.reduction_cycles_per_element: must not be negative");
        assert_eq!(ReduceSpec::default().validate("workloads.0", &shape), Ok(()));
    }

    #[test]
    fn a_message_is_used_a_delay_after_it_is_visible_and_the_working_set_is_walked_too() {
        let (mut h, ring) = ring_harness(4, 4, Recycle::Fifo);
        let mut p = program(ring, 4, 0, 50.0, 2);
        assert_eq!(h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(0.0))).0, Next::Wait);
        assert_eq!(h.waits(), [READY]);
        deliver(&mut h, ring, 64, ns(0.0), ns(100.0));
        assert_eq!(h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(120.0))).0, Next::At(ns(150.0)));
        let (next, ops, _) = h.with_cx(ns(0.0), ns(0.0), |cx| ask(&mut p, cx, ns(150.0)));
        assert_eq!(next, Next::Unit);
        let loads: Vec<Line> = ops.iter().filter_map(|op| if let Op::Load(l) = op { Some(*l) } else { None }).collect();
        assert_eq!(loads, [Line(0x4000), Line(0x900), Line(0x901)]);
        assert!(!ops.iter().any(|op| matches!(op, Op::Prefetch(..))), "no prefetching at distance 0");
    }
}
