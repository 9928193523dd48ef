//! Prefetches: training each level's prefetcher on demand accesses, issuing what it asks for,
//! and accounting a prefetched line's first use.

use super::{Hierarchy, Level, LevelStats, Requester, Source};
use crate::cache::prefetch::Trigger;
use crate::cache::{Evicted, Lookup};
use crate::units::{Line, Time};

/// What the first demand use of a prefetched line found: how long its data is still in flight
/// and, if it is (a late prefetch), where the prefetch reads it from. A demand that waits for a
/// prefetch is filled from there, as a core's fill counters report it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct FirstUse {
    pub(super) wait: Time,
    late_source: Option<Source>,
}

impl FirstUse {
    /// The fill's source for an access that found the line at `level`.
    pub(super) fn source(self, level: Source) -> Source {
        self.late_source.unwrap_or(level)
    }
}

impl Hierarchy {
    pub(super) fn level_stats(&mut self, level: Level) -> &mut LevelStats {
        match level {
            Level::L1 => &mut self.stats.l1d,
            Level::L2 => &mut self.stats.l2,
            Level::L3 => &mut self.stats.l3,
        }
    }

    /// Accounts the first demand use of a prefetched line: what it waits for a prefetch still in
    /// flight (a late one) and where that prefetch reads the line from.
    #[inline]
    pub(super) fn first_use(&mut self, level: Level, lookup: Lookup, line: Line, now: Time) -> FirstUse {
        if lookup != (Lookup::Hit { prefetched: true }) {
            return FirstUse::default();
        }
        let Some((ready, source)) = self.prefetch_ready.remove(&line.0) else { return FirstUse::default() };
        let stats = &mut self.level_stats(level).prefetch;
        stats.useful += 1;
        if ready <= now {
            return FirstUse::default();
        }
        stats.late += 1;
        FirstUse { wait: ready - now, late_source: Some(source) }
    }

    pub(super) fn evicted_unused(&mut self, level: Level, victim: &Evicted) {
        if victim.unused_prefetch {
            self.prefetch_ready.remove(&victim.line.0);
            self.level_stats(level).prefetch.useless += 1;
        }
    }

    /// Lets `cpu`'s prefetcher at `level` observe a demand access, and issues what it asks for.
    /// Many platforms have none: that check is inlined, the training is not.
    #[inline(always)]
    pub(super) fn train(&mut self, cpu: u32, level: Level, trigger: Trigger, now: Time) {
        let core = self.core_of_cpu[cpu as usize] as usize;
        if self.prefetchers[level as usize][core].is_some() {
            self.run_prefetcher(cpu, level, trigger, now);
        }
    }

    pub(super) fn run_prefetcher(&mut self, cpu: u32, level: Level, trigger: Trigger, now: Time) {
        let core = self.core_of_cpu[cpu as usize] as usize;
        let Some(prefetcher) = self.prefetchers[level as usize][core].as_mut() else { return };
        let mut wanted = std::mem::take(&mut self.prefetch_wanted);
        prefetcher.on_access(trigger, &mut wanted);
        for &line in &wanted {
            self.prefetch(cpu, line, level, now);
        }
        wanted.clear();
        self.prefetch_wanted = wanted;
    }

    /// Prefetches a line for `cpu` into `level` (a software or hardware prefetch). Returns the
    /// time until its data arrives, or `None` if the line was already there and nothing was
    /// issued. Prefetches count no demand fills; the levels below see them as reads.
    pub fn prefetch(&mut self, cpu: u32, line: Line, level: Level, now: Time) -> Option<Time> {
        let core = self.core_of_cpu[cpu as usize];
        let by = Requester::Cpu(cpu);
        self.stats.line_ops += 1;
        // The L2 is searched only for an L2 prefetch: an L1D prefetch of a line in the L2 goes on
        // to take it from there.
        let present = match level {
            Level::L1 => self.l1[core as usize].contains(line),
            Level::L2 => self.in_private_caches(core, line),
            Level::L3 => false,
        };
        let (latency, source) = match level {
            Level::L1 | Level::L2 if present => return None,
            // The L1D's prefetch asks the L2 as its demand miss would: it waits for a line the
            // L2's prefetcher is still fetching, and trains that prefetcher.
            Level::L1 => {
                let (source, latency) = self.serve_l1_miss(cpu, core, line, false, now);
                self.l1[core as usize].mark_prefetched(line);
                (latency, source)
            }
            Level::L2 => {
                let (source, dirty, latency) = self.fetch_below_l2(by, core, line, false, now);
                self.fill_l2(by, core, line, dirty, now);
                self.l2[core as usize].mark_prefetched(line);
                (latency, source)
            }
            Level::L3 => {
                if !self.holders(line).is_empty() {
                    return None;
                }
                let ccx = self.ccx_of(core);
                let latency = self.memory.read(line, now);
                self.l3_install(by, ccx, line, false, now);
                self.l3[ccx as usize].mark_prefetched(line);
                (latency, Source::Dram)
            }
        };
        self.level_stats(level).prefetch.issued += 1;
        self.prefetch_ready.insert(line.0, (now + latency, source));
        Some(latency)
    }
}
