//! A set-associative cache array: tags, dirty bits and a pluggable replacement policy.
//! It knows nothing about other levels; `hierarchy` composes caches into a coherent system.

pub mod prefetch;
pub mod replacement;

use crate::units::Line;
use replacement::{PolicyOptions, ReplacementPolicy};

const INVALID: u64 = u64::MAX;

/// A line pushed out of a cache to make room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    pub line: Line,
    pub dirty: bool,
    /// Brought in by a prefetch and never used.
    pub unused_prefetch: bool,
}

/// The outcome of a lookup that counts as a use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    Miss,
    /// A hit; `prefetched` if this is the first use of a prefetched line.
    Hit { prefetched: bool },
}

impl Lookup {
    pub fn hit(self) -> bool {
        matches!(self, Lookup::Hit { .. })
    }
}

/// Geometry and policy of one cache array.
#[derive(Debug, Clone)]
pub struct Geometry {
    pub sets: usize,
    pub ways: usize,
    pub policy: &'static str,
    pub options: PolicyOptions,
}

pub struct Cache {
    sets: usize,
    /// `sets - 1` when `sets` is a power of two (a mask instead of a division on every lookup).
    set_mask: Option<u64>,
    ways: usize,
    /// Line index per slot (`set * ways + way`), `INVALID` when empty.
    tags: Vec<u64>,
    dirty: Vec<bool>,
    /// Set when a prefetch installed the line, cleared by its first use.
    prefetched: Vec<bool>,
    policy: Box<dyn ReplacementPolicy>,
    all_ways: u64,
}

impl Cache {
    /// Builds an empty cache. The geometry must have been validated (policy exists, ways fit).
    pub fn new(geometry: &Geometry) -> Cache {
        let info = replacement::find(geometry.policy).expect("validated replacement policy");
        let slots = geometry.sets * geometry.ways;
        Cache {
            sets: geometry.sets,
            set_mask: geometry.sets.is_power_of_two().then(|| geometry.sets as u64 - 1),
            ways: geometry.ways,
            tags: vec![INVALID; slots],
            dirty: vec![false; slots],
            prefetched: vec![false; slots],
            policy: (info.build)(geometry.sets, geometry.ways, geometry.options),
            all_ways: if geometry.ways >= 64 { u64::MAX } else { (1u64 << geometry.ways) - 1 },
        }
    }

    pub fn ways(&self) -> usize {
        self.ways
    }

    pub fn all_ways(&self) -> u64 {
        self.all_ways
    }

    fn set_of(&self, line: Line) -> usize {
        match self.set_mask {
            Some(mask) => (line.0 & mask) as usize,
            None => (line.0 % self.sets as u64) as usize,
        }
    }

    fn slot_of(&self, line: Line) -> Option<(usize, usize)> {
        let set = self.set_of(line);
        let base = set * self.ways;
        self.tags[base..base + self.ways]
            .iter()
            .position(|&tag| tag == line.0)
            .map(|way| (set, way))
    }

    pub fn contains(&self, line: Line) -> bool {
        self.slot_of(line).is_some()
    }

    pub fn is_dirty(&self, line: Line) -> bool {
        self.slot_of(line).is_some_and(|(set, way)| self.dirty[set * self.ways + way])
    }

    /// Looks the line up as a use: on a hit updates recency (and the dirty bit for a write) and
    /// clears the line's prefetch mark.
    pub fn access(&mut self, line: Line, write: bool) -> Lookup {
        match self.slot_of(line) {
            Some((set, way)) => {
                self.policy.on_hit(set, way, write);
                let slot = set * self.ways + way;
                if write {
                    self.dirty[slot] = true;
                }
                Lookup::Hit { prefetched: std::mem::replace(&mut self.prefetched[slot], false) }
            }
            None => Lookup::Miss,
        }
    }

    /// Marks a present line as brought in by a prefetch.
    pub fn mark_prefetched(&mut self, line: Line) {
        if let Some((set, way)) = self.slot_of(line) {
            self.prefetched[set * self.ways + way] = true;
        }
    }

    /// Installs a line that is not present, choosing a victim among the ways in `allowed`
    /// (invalid allowed ways first). Returns the line evicted, if any.
    pub fn insert(&mut self, line: Line, dirty: bool, allowed: u64) -> Option<Evicted> {
        debug_assert!(!self.contains(line), "insert of a present line");
        let allowed = allowed & self.all_ways;
        let set = self.set_of(line);
        let base = set * self.ways;
        let free = (0..self.ways).find(|&w| allowed >> w & 1 == 1 && self.tags[base + w] == INVALID);
        let (way, evicted) = match free {
            Some(way) => (way, None),
            None => {
                let way = self.policy.victim(set, allowed);
                let slot = base + way;
                let evicted = Evicted { line: Line(self.tags[slot]), dirty: self.dirty[slot], unused_prefetch: self.prefetched[slot] };
                (way, Some(evicted))
            }
        };
        self.tags[base + way] = line.0;
        self.dirty[base + way] = dirty;
        self.prefetched[base + way] = false;
        self.policy.on_fill(set, way);
        evicted
    }

    /// Removes the line if present; returns whether it was dirty.
    pub fn remove(&mut self, line: Line) -> Option<bool> {
        let (set, way) = self.slot_of(line)?;
        let slot = set * self.ways + way;
        self.tags[slot] = INVALID;
        self.prefetched[slot] = false;
        self.policy.on_invalidate(set, way);
        Some(std::mem::replace(&mut self.dirty[slot], false))
    }

    /// Marks a present line dirty without counting a use; false if absent.
    pub fn mark_dirty(&mut self, line: Line) -> bool {
        match self.slot_of(line) {
            Some((set, way)) => {
                self.dirty[set * self.ways + way] = true;
                true
            }
            None => false,
        }
    }

    /// Number of valid lines.
    pub fn occupancy(&self) -> usize {
        self.tags.iter().filter(|&&tag| tag != INVALID).count()
    }

    /// Every valid line with its dirty bit (for invariant checks).
    pub fn lines(&self) -> impl Iterator<Item = (Line, bool)> + '_ {
        self.tags
            .iter()
            .zip(&self.dirty)
            .filter(|(&tag, _)| tag != INVALID)
            .map(|(&tag, &dirty)| (Line(tag), dirty))
    }

    /// Checks that every line sits in its own set and appears once.
    pub fn check_invariants(&self) -> Result<(), String> {
        for set in 0..self.sets {
            let tags = &self.tags[set * self.ways..(set + 1) * self.ways];
            for (way, &tag) in tags.iter().enumerate() {
                if tag == INVALID {
                    continue;
                }
                if self.set_of(Line(tag)) != set {
                    return Err(format!("line {tag:#x} stored in set {set}"));
                }
                if tags[way + 1..].contains(&tag) {
                    return Err(format!("line {tag:#x} present twice in set {set}"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(sets: usize, ways: usize) -> Cache {
        Cache::new(&Geometry {
            sets,
            ways,
            policy: "lru",
            options: PolicyOptions { write_hit_updates_recency: true },
        })
    }

    #[test]
    fn hit_miss_and_lru_eviction_by_hand() {
        // 2 sets x 2 ways; lines 0, 2, 4 map to set 0.
        let mut c = cache(2, 2);
        assert!(!c.access(Line(0), false).hit());
        assert_eq!(c.insert(Line(0), false, c.all_ways()), None);
        assert_eq!(c.insert(Line(2), true, c.all_ways()), None);
        assert!(c.access(Line(0), false).hit());
        // Line 2 is least recent and dirty.
        assert_eq!(
            c.insert(Line(4), false, c.all_ways()),
            Some(Evicted { line: Line(2), dirty: true, unused_prefetch: false })
        );
        assert!(c.contains(Line(0)) && c.contains(Line(4)) && !c.contains(Line(2)));
        assert_eq!(c.occupancy(), 2);
        c.check_invariants().unwrap();
    }

    #[test]
    fn way_mask_confines_allocation() {
        let mut c = cache(1, 4);
        for line in 0..4 {
            c.insert(Line(line), false, 0b1111);
        }
        // Only ways 2-3 allowed: the victim must be line 2 (older of the two).
        assert_eq!(c.insert(Line(9), false, 0b1100).map(|e| e.line), Some(Line(2)));
        assert_eq!(c.insert(Line(10), false, 0b1100).map(|e| e.line), Some(Line(3)));
        assert!(c.contains(Line(0)) && c.contains(Line(1)));
    }

    #[test]
    fn a_prefetch_mark_is_cleared_by_the_first_use_or_reported_on_eviction() {
        let mut c = cache(1, 1);
        c.insert(Line(1), false, 1);
        c.mark_prefetched(Line(1));
        assert_eq!(c.access(Line(1), false), Lookup::Hit { prefetched: true });
        assert_eq!(c.access(Line(1), false), Lookup::Hit { prefetched: false });
        c.mark_prefetched(Line(1));
        assert!(c.insert(Line(2), false, 1).unwrap().unused_prefetch);
    }

    #[test]
    fn remove_reports_dirty_and_frees_way() {
        let mut c = cache(1, 1);
        c.insert(Line(5), false, 1);
        assert!(c.access(Line(5), true).hit());
        assert_eq!(c.remove(Line(5)), Some(true));
        assert_eq!(c.remove(Line(5)), None);
        assert_eq!(c.insert(Line(6), false, 1), None);
    }
}
