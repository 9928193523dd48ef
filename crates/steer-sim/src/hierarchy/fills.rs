//! Fills and victims: installing a line in an L1D, L2 or L3, and where each level's victims go
//! by the relation of the level below.

use super::{Hierarchy, Holding, Level, Requester, PROBE_LIMIT};
use crate::cache::{Evicted, FreeWay};
use crate::directory::Directory;
use crate::platform::Relation;
use crate::units::{Line, Time};

impl Hierarchy {
    /// Installs a line in a core's L1. The core is already among its holders: every L1 fill
    /// follows an L2 hit or an L2 fill.
    pub(super) fn fill_l1(&mut self, by: Requester, core: u32, line: Line, dirty: bool, exclusive: bool, now: Time) {
        let l1 = &mut self.l1[core as usize];
        let victim = l1.insert(line, dirty, self.masks[0].of(by));
        if exclusive {
            // Before the victim goes down: that may push this line out of the L2 into the L3,
            // which clears the mark again.
            l1.set_exclusive(line, true);
        }
        if let Some(victim) = victim {
            self.l1_victim(by, core, victim, now);
        }
    }

    pub(super) fn l1_victim(&mut self, by: Requester, core: u32, victim: Evicted, now: Time) {
        self.evicted_unused(Level::L1, &victim);
        if victim.dirty {
            self.stats.l1d.writebacks += 1;
            let hit = self.l2[core as usize].access(victim.line, true).hit();
            self.stats.l2.request(true, hit);
            if !hit {
                // Only a non-inclusive L2 can miss here: write-allocate fetches the line first.
                let (_, _, _) = self.fetch_below_l2(by, core, victim.line, false, now);
                self.fill_l2(by, core, victim.line, true, now);
            }
        } else if self.l2_relation != Relation::Inclusive {
            // An inclusive L2 still holds the line: the core remains a holder.
            self.dir_forget_if_gone(core, victim.line);
        }
    }

    pub(super) fn fill_l2(&mut self, by: Requester, core: u32, line: Line, dirty: bool, now: Time) {
        if self.l2[core as usize].cache.is_none() {
            self.first_fill_of(core);
        }
        if let Some(victim) = self.l2[core as usize].insert(line, dirty, self.masks[1].of(by)) {
            self.l2_victim(by, core, victim, now);
        }
        self.dir_add(line, core);
    }

    /// `core`'s caches are about to be filled for the first time: one more to ask for copies, and
    /// once there are more than `PROBE_LIMIT` (adaptively) a directory of what they hold.
    pub(super) fn first_fill_of(&mut self, core: u32) {
        let at = self.filled_cores.partition_point(|&c| c < core);
        self.filled_cores.insert(at, core);
        if self.holding == Holding::Adaptive && self.directory.is_none() && self.filled_cores.len() > PROBE_LIMIT {
            let mut directory = Directory::default();
            for &filled in &self.filled_cores {
                let (l1, l2) = (&self.l1[filled as usize], &self.l2[filled as usize]);
                l1.lines().chain(l2.lines()).for_each(|(line, _)| directory.add(line.0, filled));
            }
            self.directory = Some(directory);
        }
    }

    pub(super) fn l2_victim(&mut self, by: Requester, core: u32, victim: Evicted, now: Time) {
        self.evicted_unused(Level::L2, &victim);
        let mut dirty = victim.dirty;
        if self.l2_relation == Relation::Inclusive {
            dirty |= self.l1[core as usize].remove(victim.line).unwrap_or(false);
            self.dir_remove(victim.line, core);
        } else {
            // An L1 copy stays, and the victim may now be copied into the L3.
            self.l1[core as usize].set_exclusive(victim.line, false);
            self.dir_forget_if_gone(core, victim.line);
        }
        if victim.dirty {
            self.stats.l2.writebacks += 1;
        } else if dirty {
            self.stats.chain_writes.l2_dirty_l1_copies += 1;
        }
        let ccx = self.ccx_of(core);
        let l3 = &mut self.l3[ccx as usize];
        if dirty && self.l3_relation != Relation::NonInclusive {
            let chain = &mut self.stats.chain_writes;
            if l3.contains(victim.line) {
                chain.l3_write_hits += 1;
            } else {
                chain.l3_write_misses += 1;
            }
        }
        match self.l3_relation {
            Relation::Exclusive => {
                if l3.contains(victim.line) {
                    if dirty {
                        l3.mark_dirty(victim.line);
                    }
                } else if dirty || self.l3_clean_victims {
                    self.l3_install(by, ccx, victim.line, dirty, now);
                }
            }
            Relation::Inclusive => {
                if dirty && !l3.mark_dirty(victim.line) {
                    self.l3_install(by, ccx, victim.line, true, now);
                }
            }
            Relation::NonInclusive => {
                if dirty {
                    let hit = l3.access(victim.line, true).hit();
                    self.stats.l3.request(true, hit);
                    if !hit {
                        // Write-allocate: fetch from memory, then install dirty.
                        self.memory.read(victim.line, now);
                        self.l3_install(by, ccx, victim.line, true, now);
                    }
                }
            }
        }
    }

    pub(super) fn l3_install(&mut self, by: Requester, ccx: u32, line: Line, dirty: bool, now: Time) {
        self.l3_install_in(by, ccx, line, dirty, self.masks[2].of(by), now);
    }

    /// Installs a line in the L3 of `ccx` within the ways `allowed`.
    pub(super) fn l3_install_in(&mut self, by: Requester, ccx: u32, line: Line, dirty: bool, allowed: u64, now: Time) {
        let l3 = &mut self.l3[ccx as usize];
        if l3.cache.is_none() {
            let at = self.filled_l3s.partition_point(|&c| c < ccx);
            self.filled_l3s.insert(at, ccx);
        }
        // A device's allocations fill its ways from the highest, a core's from the lowest: DDIO's
        // ways are the highest and those of lines cores used the lowest, so where a DDIO mask
        // reaches into those, each still fills from its own end (assumed; docs/ddio.md).
        let free_way = match by {
            Requester::Device(_) => FreeWay::Highest,
            Requester::Cpu(_) => FreeWay::Lowest,
        };
        let victim = l3.insert_filling_from(line, dirty, allowed, free_way);
        if let Some(rinse) = &mut self.rinse {
            l3.stamp(line, rinse.entered(ccx, dirty, now));
        }
        if let Some(victim) = victim {
            self.l3_victim(ccx, victim, now);
        }
    }

    /// Takes `line` out of the L3 of `ccx` other than by eviction (a core takes it, or a write
    /// invalidates it); returns whether it was dirty. A dirty line the L3 rinsed during its stay
    /// was written to memory then and leaves clean: the write is counted now.
    pub(super) fn l3_remove(&mut self, ccx: u32, line: Line, now: Time) -> bool {
        let l3 = &mut self.l3[ccx as usize];
        // Looked up only where the L3 rinses: the lookup searches the line's set.
        let stamp = self.rinse.as_ref().and_then(|_| l3.stamp_of(line));
        let dirty = l3.remove(line).unwrap_or(false);
        let rinsed = match (&mut self.rinse, stamp) {
            (Some(rinse), Some(stamp)) => rinse.left(ccx, stamp, now),
            _ => false,
        };
        if rinsed {
            self.stats.l3_rinses += 1;
            self.memory.write(line, now);
        }
        dirty && !rinsed
    }

    pub(super) fn l3_victim(&mut self, ccx: u32, victim: Evicted, now: Time) {
        self.evicted_unused(Level::L3, &victim);
        if let Some(rinse) = &mut self.rinse {
            rinse.evicted(ccx, victim.stamp, now);
        }
        let mut dirty = victim.dirty;
        if self.l3_relation == Relation::Inclusive {
            let cores_in_ccx: Vec<u32> = self
                .holders(victim.line)
                .iter()
                .filter(|&h| h < self.topology.cores() && self.ccx_of(h) == ccx)
                .collect();
            for core in cores_in_ccx {
                dirty |= self.drop_copy(core, victim.line, now);
            }
        }
        if dirty {
            self.stats.l3.writebacks += 1;
            self.memory.write(victim.line, now);
        }
    }
}
