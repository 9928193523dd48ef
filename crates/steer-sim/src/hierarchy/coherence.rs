//! Who holds a line (the directory or the caches asked), ownership and invalidation, and the
//! checks of the holders' invariants.

use rustc_hash::FxHashMap;

use super::{Hierarchy, LazyCache};
use crate::directory::Holders;
use crate::platform::Relation;
use crate::units::{Line, Time};

impl Hierarchy {
    pub(super) fn l3_id(&self, ccx: u32) -> u32 {
        self.topology.cores() + ccx
    }

    pub(super) fn ccx_of(&self, core: u32) -> u32 {
        self.ccx_of_core[core as usize]
    }

    /// The id of `core`'s CCX's L3 if that L3 is inclusive (it holds a copy of every line the
    /// CCX's L2s hold).
    pub(super) fn inclusive_l3_of(&self, core: u32) -> Option<u32> {
        (self.l3_relation == Relation::Inclusive).then(|| self.l3_id(self.ccx_of(core)))
    }

    pub(super) fn dir_add(&mut self, line: Line, id: u32) {
        if let Some(directory) = &mut self.directory {
            directory.add(line.0, id);
        }
    }

    pub(super) fn dir_remove(&mut self, line: Line, id: u32) {
        if let Some(directory) = &mut self.directory {
            directory.remove(line.0, id);
        }
    }

    /// Drops `core` from the line's holders once neither of its private caches has the line
    /// (without a directory there is nothing to update, so the caches are not even asked).
    pub(super) fn dir_forget_if_gone(&mut self, core: u32, line: Line) {
        if self.directory.is_some() && !self.in_private_caches(core, line) {
            self.dir_remove(line, core);
        }
    }

    /// Whether `core`'s L1D or L2 holds `line`. An inclusive L2 holds every line of the L1D
    /// (`check_invariants`), so then the L2 alone is searched: half the set searches of the
    /// probes and prefetches that ask.
    #[inline]
    pub(super) fn in_private_caches(&self, core: u32, line: Line) -> bool {
        self.l2[core as usize].contains(line)
            || (self.l2_relation != Relation::Inclusive && self.l1[core as usize].contains(line))
    }

    pub(super) fn holders(&self, line: Line) -> Holders {
        match &self.directory {
            Some(directory) => self.with_l3_holders(directory.holders(line.0), line, None),
            None => self.probe_holders(line, None, None),
        }
    }

    /// Adds the L3s holding `line` to `holders`, but `skip_ccx`'s: the directory lists only
    /// private caches, since the L3s are few and most have never been filled, so asking those
    /// that have is cheaper than indexing every L3 fill and eviction.
    pub(super) fn with_l3_holders(&self, mut holders: Holders, line: Line, skip_ccx: Option<u32>) -> Holders {
        for &ccx in &self.filled_l3s {
            if Some(ccx) != skip_ccx && self.l3[ccx as usize].contains(line) {
                holders.add(self.l3_id(ccx));
            }
        }
        holders
    }

    /// Whether a core's private caches and its L3 are the only caches (a trace replay's one core):
    /// then there is no other copy to find or invalidate.
    pub(super) fn only_own_caches(&self) -> bool {
        self.l1.len() == 1 && self.l3.len() == 1
    }

    /// Holders other than `core`'s own private caches (which the caller has just looked at) and,
    /// if `skip_own_l3`, other than its CCX's L3.
    pub(super) fn other_holders(&self, line: Line, core: u32, skip_own_l3: bool) -> Holders {
        if skip_own_l3 && self.only_own_caches() {
            return Holders::default();
        }
        let own_l3 = skip_own_l3.then(|| self.ccx_of(core));
        match &self.directory {
            Some(directory) => {
                let mut holders = directory.holders(line.0);
                holders.remove(core);
                self.with_l3_holders(holders, line, own_l3)
            }
            None => self.probe_holders(line, Some(core), own_l3),
        }
    }

    /// Holders found by asking every cache except `skip_core`'s private ones and `skip_ccx`'s L3.
    pub(super) fn probe_holders(&self, line: Line, skip_core: Option<u32>, skip_ccx: Option<u32>) -> Holders {
        let mut holders = Holders::default();
        for &core in &self.filled_cores {
            if Some(core) != skip_core && self.in_private_caches(core, line) {
                holders.add(core);
            }
        }
        self.with_l3_holders(holders, line, skip_ccx)
    }

    /// Marks (or unmarks) `core`'s private copies of `line` as the only copies besides its own
    /// CCX's L3 (when the L3 keeps copies of what the L2s hold): exactly what `invalidate_others`
    /// leaves. A mark is cleared whenever another cache may take a copy.
    pub(super) fn mark_exclusive(&mut self, core: u32, line: Line, exclusive: bool) {
        self.l1[core as usize].set_exclusive(line, exclusive);
        self.l2[core as usize].set_exclusive(line, exclusive);
    }

    /// Invalidates the other caches' copies of `line` `core` holds shared (as `invalidate_others`),
    /// and returns how long that takes: its request reaches them and their invalidations come back,
    /// as a transfer from the farthest would (a peer's in the CCX, a remote cache's beyond it);
    /// nothing when no other core's cache and no other CCX's L3 holds it.
    pub(super) fn take_ownership(&mut self, core: u32, line: Line, now: Time) -> Time {
        let keep_own_l3 = self.l3_relation != Relation::Exclusive;
        let (cores, ccx) = (self.topology.cores(), self.ccx_of(core));
        let holders = self.other_holders(line, core, keep_own_l3);
        let mut wait = Time::ZERO;
        for holder in holders.iter() {
            let holder_ccx = if holder < cores { self.ccx_of(holder) } else { holder - cores };
            wait = wait.max(if holder_ccx == ccx { self.latency.peer_l2 } else { self.latency.remote_cache });
            self.drop_copy(holder, line, now);
        }
        wait
    }

    /// Invalidates every copy not in `core`'s private caches (keeping its own CCX's L3 copy unless
    /// the L3 is a victim cache). Returns whether any invalidated copy was dirty.
    pub(super) fn invalidate_others(&mut self, core: u32, line: Line, now: Time) -> bool {
        let keep_own_l3 = self.l3_relation != Relation::Exclusive;
        if keep_own_l3 && self.only_own_caches() {
            return false;
        }
        let holders = self.other_holders(line, core, keep_own_l3);
        let mut dirty = false;
        for holder in holders.iter() {
            dirty |= self.drop_copy(holder, line, now);
        }
        dirty
    }

    /// Removes `line` from cache id `holder` (a core's L1+L2, or an L3); returns whether it was dirty.
    pub(super) fn drop_copy(&mut self, holder: u32, line: Line, now: Time) -> bool {
        let cores = self.topology.cores();
        if holder >= cores {
            return self.l3_remove(holder - cores, line, now);
        }
        let l1 = self.l1[holder as usize].remove(line).unwrap_or(false);
        let l2 = self.l2[holder as usize].remove(line).unwrap_or(false);
        self.dir_remove(line, holder);
        l1 || l2
    }

    /// Checks that a line a core's private caches mark as exclusive has no other copy but its own
    /// CCX's L3 (where the L3 keeps copies of the L2s' lines).
    pub(super) fn check_exclusive_marks(&self) -> Result<(), String> {
        for core in 0..self.topology.cores() {
            let private = [&self.l1[core as usize], &self.l2[core as usize]];
            for line in private.iter().flat_map(|c| c.lines().map(|(l, _)| l).filter(|&l| c.is_exclusive(l))) {
                let mut others = self.probe_holders(line, Some(core), None);
                if self.l3_relation != Relation::Exclusive {
                    others.remove(self.l3_id(self.ccx_of(core)));
                }
                if !others.is_empty() {
                    return Err(format!("core {core} marks line {:#x} exclusive, but {others:?} hold it", line.0));
                }
            }
        }
        Ok(())
    }

    /// Checks cache and directory invariants: every line in a core's private caches is in its
    /// directory entry and vice versa, an inclusive L2 holds every line of its L1, exclusive marks
    /// hold, and the filled L3s are listed.
    pub fn check_invariants(&self) -> Result<(), String> {
        let cores = self.topology.cores();
        for (i, cache) in self.l1.iter().chain(&self.l2).chain(&self.l3).enumerate() {
            cache.check_invariants().map_err(|e| format!("cache {i}: {e}"))?;
        }
        let mut expected: FxHashMap<u64, Holders> = FxHashMap::default();
        self.check_exclusive_marks()?;
        for core in 0..cores {
            for (line, _) in self.l1[core as usize].lines() {
                if self.l2_relation == Relation::Inclusive && !self.l2[core as usize].contains(line) {
                    return Err(format!("core {core}: L1 line {:#x} missing from inclusive L2", line.0));
                }
                expected.entry(line.0).or_default().add(core);
            }
            for (line, _) in self.l2[core as usize].lines() {
                if self.l3_relation == Relation::Inclusive && !self.l3[self.ccx_of(core) as usize].contains(line) {
                    return Err(format!("core {core}: L2 line {:#x} missing from its CCX's inclusive L3", line.0));
                }
                expected.entry(line.0).or_default().add(core);
            }
        }
        fn filled(caches: &[LazyCache]) -> Vec<u32> {
            (0..caches.len() as u32).filter(|&c| caches[c as usize].cache.is_some()).collect()
        }
        if filled(&self.l3) != self.filled_l3s || filled(&self.l2) != self.filled_cores {
            return Err(format!(
                "the lists of filled caches (cores {:?}, L3s {:?}) disagree with the caches",
                self.filled_cores, self.filled_l3s
            ));
        }
        let Some(directory) = &self.directory else { return Ok(()) };
        let listed: FxHashMap<u64, Holders> = directory.entries().collect();
        if expected != listed {
            let wrong = expected
                .iter()
                .find(|(line, holders)| listed.get(line) != Some(holders))
                .map(|(line, _)| *line)
                .or_else(|| listed.keys().find(|line| !expected.contains_key(line)).copied())
                .expect("maps that differ have a line where they differ");
            return Err(format!("directory disagrees with the caches at line {wrong:#x}"));
        }
        Ok(())
    }
}
