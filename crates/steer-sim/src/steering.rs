//! The I/O die's delivery of device writes steered into a core's L2 (PCIe TPH on AMD: SDCI).
//! AMD's "I/O writes with cache steering" (US 10,366,027 B2) has the fabric buffer a steered
//! line and direct its target cache to take it; a fetch that finds the line still buffered is
//! served from the buffer, else from memory. Modelled as a queue of `queue_lines` lines drained
//! into the target caches at a bounded rate: a line that finds the queue full is written to
//! memory instead, and its target cache fetches it from there once the lines queued ahead of it
//! are delivered. Delivered lines are placed at once: the queue decides which lines reach the
//! cache by way of memory, not when delivered ones arrive. The hierarchy keeps one queue per CCX,
//! drained at the rate its L3 takes lines (`io.steer_bytes_per_cycle`).

use crate::units::Time;

/// What became of a steered line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Steered {
    /// Delivered into the target cache from the fabric.
    Delivered,
    /// The queue was full: the line went to memory, and the target cache fetches it from there
    /// at `fetch_at`.
    ToMemory { fetch_at: Time },
}

#[derive(Debug, Clone)]
pub struct SteeringQueue {
    /// Time the queue takes to deliver one line (ps).
    ps_per_line: f64,
    /// Time to deliver a full queue (ps).
    capacity_ps: f64,
    /// Time to deliver what waits, as of `last` (ps).
    backlog_ps: f64,
    last: Time,
}

impl SteeringQueue {
    /// A queue of `queue_lines` lines of `line_bytes` drained at `gbs` GB/s.
    pub fn new(gbs: f64, queue_lines: u32, line_bytes: u32) -> SteeringQueue {
        let ps_per_line = line_bytes as f64 * 1e3 / gbs;
        SteeringQueue { ps_per_line, capacity_ps: queue_lines as f64 * ps_per_line, backlog_ps: 0.0, last: Time::ZERO }
    }

    /// A line steered at `now` (a time before the last seen counts as the last: a device dates
    /// a packet's lines back over its time on the link).
    pub fn steer(&mut self, now: Time) -> Steered {
        if now > self.last {
            self.backlog_ps = (self.backlog_ps - (now.0 - self.last.0) as f64).max(0.0);
            self.last = now;
        }
        if self.backlog_ps + self.ps_per_line <= self.capacity_ps {
            self.backlog_ps += self.ps_per_line;
            Steered::Delivered
        } else {
            Steered::ToMemory { fetch_at: self.last + Time(self.backlog_ps.round() as u64) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(t: f64) -> Time {
        Time::from_ns(t)
    }

    #[test]
    fn a_queue_delivers_up_to_its_size_then_sends_lines_to_memory_until_it_drains() {
        // 1 GB/s of 64 B lines: one line delivered every 64 ns; room for 2.
        let mut q = SteeringQueue::new(1.0, 2, 64);
        assert_eq!(q.steer(ns(0.0)), Steered::Delivered);
        assert_eq!(q.steer(ns(0.0)), Steered::Delivered);
        // Full: the third goes to memory, fetched when the two ahead are delivered, at 128 ns.
        assert_eq!(q.steer(ns(0.0)), Steered::ToMemory { fetch_at: ns(128.0) });
        // 32 ns later half a line has gone: still no room.
        assert_eq!(q.steer(ns(32.0)), Steered::ToMemory { fetch_at: ns(128.0) });
        // At 64 ns one line has gone: room for one.
        assert_eq!(q.steer(ns(64.0)), Steered::Delivered);
        assert_eq!(q.steer(ns(64.0)), Steered::ToMemory { fetch_at: ns(192.0) });
        // Long idle: empty again, never below empty.
        assert_eq!(q.steer(ns(10_000.0)), Steered::Delivered);
        assert_eq!(q.steer(ns(10_000.0)), Steered::Delivered);
    }

    #[test]
    fn a_line_dated_before_the_last_one_counts_at_the_last() {
        let mut q = SteeringQueue::new(1.0, 1, 64);
        assert_eq!(q.steer(ns(100.0)), Steered::Delivered);
        // 36 ns earlier: nothing drains backwards, so the queue is still full.
        assert_eq!(q.steer(ns(64.0)), Steered::ToMemory { fetch_at: ns(164.0) });
        assert_eq!(q.steer(ns(164.0)), Steered::Delivered);
    }

    #[test]
    fn over_its_rate_a_queue_sends_the_excess_to_memory_whatever_its_size() {
        // 3 lines every 64 ns against one delivered: two thirds go to memory once it is full.
        for size in [4, 64] {
            let mut q = SteeringQueue::new(1.0, size, 64);
            let mut to_memory = 0;
            for k in 0..3000 {
                to_memory += matches!(q.steer(ns((k / 3) as f64 * 64.0)), Steered::ToMemory { .. }) as u32;
            }
            assert!((to_memory as f64 - (2000.0 - size as f64)).abs() <= 2.0, "size {size}: {to_memory}");
        }
    }
}
