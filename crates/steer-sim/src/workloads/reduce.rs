//! Zero-copy, OS-bypass message receive with a reduction (Leon & Maccabe): messages arrive in
//! pre-posted buffers; after an optional delay the application traverses each message linearly
//! and reduces its elements, then re-posts the buffer. Optionally it also walks a working set of
//! its own per message, which injected data may evict (cache pollution).

use std::collections::VecDeque;

use crate::devices::nic::Poll;
use crate::engine::System;
use crate::error::{ensure, ConfigResult};
use crate::hierarchy::Level;
use crate::params::{choice, params};
use crate::units::{Addr, Clock, Line, Time};
use crate::workloads::timing::{Activity, CoreTimer};
use crate::workloads::{SystemShape, Workload};

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
        /// Compute cycles per element (the reduction's arithmetic).
        cycles_per_element: f64 = 1.0,
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

impl ReduceSpec {
    pub fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        system.check_cpu(path, self.cpu)?;
        system.check_queue(path, &self.device, self.queue)?;
        ensure(self.element_bytes >= 1, &format!("{path}.element_bytes"), || "must be at least 1".into())?;
        ensure(self.cycles_per_element >= 0.0, &format!("{path}.cycles_per_element"), || {
            "must not be negative".into()
        })?;
        ensure(self.delay_ns >= 0.0, &format!("{path}.delay_ns"), || "must not be negative".into())
    }
}

pub struct Reduce {
    index: usize,
    spec: ReduceSpec,
    nic: usize,
    timer: CoreTimer,
    line_bits: u32,
    working_set: Line,
    working_lines: u64,
    delay: Time,
    activity: Activity,
}

impl Reduce {
    pub fn new(index: usize, spec: &ReduceSpec, nic: usize, clock: Clock, system: &mut System) -> Reduce {
        let platform = &system.platform;
        let line_bits = platform.line_bits();
        let node = system.node_of_cpu(spec.cpu);
        let working_set: Addr = system.allocator.alloc(node, spec.working_set_bytes.max(1));
        Reduce {
            index,
            nic,
            timer: CoreTimer::on_cpu(spec.cpu, clock, platform),
            line_bits,
            working_set: working_set.line(line_bits),
            working_lines: spec.working_set_bytes >> line_bits,
            delay: Time::from_ns(spec.delay_ns),
            spec: spec.clone(),
            activity: Activity::default(),
        }
    }

    /// Traverses lines `first..=last` and reduces them: loads run ahead of the arithmetic by at
    /// most the core's outstanding-miss window (an out-of-order core's lookahead), prefetches
    /// `prefetch_distance` lines further ahead, and each line's arithmetic waits for its data.
    fn traverse(&mut self, system: &mut System, first: u64, last: u64, prefetch: bool) {
        let window = self.timer.window();
        let per_line = ((1u64 << self.line_bits) / self.spec.element_bytes as u64).max(1) as f64;
        let target = match self.spec.prefetch_target {
            PrefetchTarget::L1 => Level::L1,
            PrefetchTarget::L2 => Level::L2,
        };
        let mut in_flight: VecDeque<Time> = VecDeque::new();
        let mut next_load = first;
        for line in first..=last {
            while next_load <= last && next_load < line + window as u64 {
                if prefetch && self.spec.prefetch_distance > 0 {
                    let ahead = next_load + self.spec.prefetch_distance as u64;
                    if ahead <= last {
                        self.timer.prefetch(&mut system.hierarchy, Line(ahead), target);
                    }
                }
                in_flight.push_back(self.timer.issue(&mut system.hierarchy, Line(next_load), false));
                next_load += 1;
            }
            let ready = in_flight.pop_front().expect("the line's load was issued");
            self.timer.idle_until(ready);
            self.timer.compute(per_line * self.spec.cycles_per_element);
        }
    }
}

impl Workload for Reduce {
    fn cpu(&self) -> u32 {
        self.spec.cpu
    }

    fn role(&self) -> &str {
        "reduce"
    }

    fn step(&mut self, system: &mut System, now: Time) -> Option<Time> {
        self.timer.idle_until(now);
        let queue = &mut system.nics[self.nic].queues[self.spec.queue as usize];
        // The application uses a message `delay` after it becomes visible.
        let completion = match queue.poll(self.timer.now.saturating_sub(self.delay)) {
            Poll::Ready(_) => queue.take(),
            Poll::NotYet(ready) => return Some(ready + self.delay),
            Poll::Empty => {
                queue.waiter = Some(self.index);
                return None;
            }
        };
        let start = self.timer.now;
        self.timer.load_dependent(&mut system.hierarchy, completion.entry_line);
        let buffer = system.nics[self.nic].queues[self.spec.queue as usize].buffer_addr(completion.buffer);
        let first = buffer.line(self.line_bits).0;
        let last = buffer.offset(completion.bytes as u64 - 1).line(self.line_bits).0;
        self.traverse(system, first, last, true);
        if self.working_lines > 0 {
            let first = self.working_set.0;
            self.traverse(system, first, first + self.working_lines - 1, false);
        }
        self.timer.drain();
        let queue = &mut system.nics[self.nic].queues[self.spec.queue as usize];
        self.timer.issue(&mut system.hierarchy, queue.next_descriptor_addr().line(self.line_bits), true);
        queue.release(completion);
        self.activity.add(1, self.timer.now - start);
        Some(self.timer.now)
    }

    fn reset_stats(&mut self, now: Time) {
        self.activity.reset(now);
    }

    fn report(&self, now: Time) -> serde_json::Value {
        self.activity.report(now, &self.timer, "message").into()
    }
}
