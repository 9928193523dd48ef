//! One level's pass over a batch of requests and what a level counts: shared by the by-level
//! replay (`single_core`) and the sets it passes through (`lru_sets`).

use steer_sim::hierarchy::LevelStats;

/// How many accesses ahead a group's replay starts loading the host memory of a line's L3 set.
pub(super) const PREFETCH_DISTANCE: usize = 16;

/// A line pushed out of a level, and whether it was dirty.
#[derive(Debug, Clone, Copy)]
pub(super) struct Victim {
    pub(super) line: u64,
    pub(super) dirty: bool,
}

/// What one level counted: requests by kind and outcome (`[write][hit]`, one addition per
/// request) and dirty lines evicted.
#[derive(Debug, Clone, Default)]
pub(super) struct Counts {
    pub(super) requests: [[u64; 2]; 2],
    pub(super) writebacks: u64,
}

impl Counts {
    #[inline(always)]
    pub(super) fn request(&mut self, write: bool, hit: bool) {
        self.requests[write as usize][hit as usize] += 1;
    }

    pub(super) fn add(&mut self, other: &Counts) {
        for (sum, count) in self.requests.iter_mut().flatten().zip(other.requests.iter().flatten()) {
            *sum += count;
        }
        self.writebacks += other.writebacks;
    }

    /// As `Hierarchy` keeps them (`LevelStats` has pycachesim's definitions).
    pub(super) fn stats(&self) -> LevelStats {
        let [[read_misses, read_hits], [write_misses, write_hits]] = self.requests;
        LevelStats {
            reads: read_misses + read_hits,
            writes: write_misses + write_hits,
            read_hits,
            write_hits,
            misses: read_misses + write_misses,
            writebacks: self.writebacks,
            prefetch: Default::default(),
        }
    }
}

/// One level's pass over a stream of requests (lines shifted left by one, the write bit in bit
/// 0): what it passes down to the level below, and what it counted, in plain sums that the host
/// keeps in registers.
pub(super) struct Pass<'a> {
    below: &'a mut Vec<u64>,
    /// The start of `below`'s spare capacity, with room for two requests per request of the pass.
    spare: *mut u64,
    passed: usize,
    requests: u64,
    writes: u64,
    write_misses: u64,
    writebacks: u64,
}

impl Pass<'_> {
    /// A pass of `requests` requests, passing down into `below` (emptied first).
    pub(super) fn new(below: &mut Vec<u64>, requests: usize) -> Pass<'_> {
        below.clear();
        below.reserve(2 * requests);
        let spare = below.spare_capacity_mut().as_mut_ptr().cast();
        Pass { below, spare, passed: 0, requests: requests as u64, writes: 0, write_misses: 0, writebacks: 0 }
    }

    /// The line of a request and whether it writes.
    #[inline(always)]
    pub(super) fn decode(request: u64) -> (u64, bool) {
        (request >> 1, request & 1 == 1)
    }

    /// Counts a request to `line`, and passes down a read of the line if it missed, then a write
    /// of `victim` if that is dirty. Both are written whatever the outcome, so that no branch is
    /// needed; only what counts is kept.
    #[inline(always)]
    pub(super) fn record<const CLEAN: bool>(&mut self, line: u64, write: bool, hit: bool, victim: Victim) {
        // SAFETY: a request passes down at most two, and `new` made room for two per request
        // (and at most `requests` are recorded), so both writes stay within the spare capacity;
        // `below` is not touched before `finish`.
        unsafe {
            self.spare.add(self.passed).write(line << 1);
            self.passed += !hit as usize;
            if CLEAN {
                // Nothing is written or dirty.
                return;
            }
            self.spare.add(self.passed).write(victim.line << 1 | 1);
        }
        self.passed += victim.dirty as usize;
        self.writes += write as u64;
        self.write_misses += (write & !hit) as u64;
        self.writebacks += victim.dirty as u64;
    }

    /// Adds the counts to `counts` and keeps the requests passed down; returns the misses.
    pub(super) fn finish(self, counts: &mut Counts) -> u64 {
        let misses = self.passed as u64 - self.writebacks;
        let read_misses = misses - self.write_misses;
        counts.requests[0][0] += read_misses;
        counts.requests[0][1] += self.requests - self.writes - read_misses;
        counts.requests[1][0] += self.write_misses;
        counts.requests[1][1] += self.writes - self.write_misses;
        counts.writebacks += self.writebacks;
        // SAFETY: `record` wrote every place before `passed`.
        unsafe { self.below.set_len(self.passed) };
        misses
    }
}
