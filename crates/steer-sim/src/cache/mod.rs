//! A set-associative cache array: tags, dirty bits and a pluggable replacement policy.
//! It knows nothing about other levels; `hierarchy` composes caches into a coherent system.

pub mod prefetch;
pub mod replacement;
pub mod rinse;
pub mod slice_hash;

use crate::units::Line;
use replacement::{PolicyOptions, Replacement, ReplacementPolicy};
use slice_hash::SliceHash;

const INVALID: u64 = u64::MAX;

/// A line pushed out of a cache to make room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    pub line: Line,
    pub dirty: bool,
    /// Brought in by a prefetch and never used.
    pub unused_prefetch: bool,
    /// The stamp recorded for it (see `Cache::stamp`); 0 where the cache keeps none.
    pub stamp: u64,
}

/// Which invalid way an allocation takes first, where its allowed ways have several.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreeWay {
    Lowest,
    Highest,
}

/// The outcome of a lookup that counts as a use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    Miss,
    /// A hit; `prefetched` if this is the first use of a prefetched line.
    Hit {
        prefetched: bool,
    },
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
    /// Slices the sets are split into (1: none); `sets` is a multiple of it.
    pub slices: usize,
    /// How a line's slice is chosen (read when `slices` > 1).
    pub slice_hash: SliceHash,
    pub policy: &'static str,
    pub options: PolicyOptions,
}

/// Per-set state with one bit per way (ways are validated to be at most 64).
#[derive(Debug, Clone, Copy, Default)]
struct SetBits {
    valid: u64,
    dirty: u64,
    /// Set when a prefetch installed the line, cleared by its first use.
    prefetched: u64,
    /// Set by the hierarchy when no other cache holds the line (MESI's M and E states), so a
    /// write needs no search for copies to invalidate.
    exclusive: u64,
}

pub struct Cache {
    sets: usize,
    /// How a line's set is found.
    index: SetIndex,
    ways: usize,
    /// Line index per slot (`set * ways + way`), `INVALID` when empty.
    tags: Vec<u64>,
    /// Valid, dirty and prefetch bits, one entry per set so a lookup touches one host cache line.
    bits: Vec<SetBits>,
    policy: Replacement,
    /// A value the caller recorded for each slot's line when it was installed: empty unless
    /// `keep_stamps` asked for it (an L3 that rinses needs it, other caches do not).
    stamps: Vec<u64>,
    all_ways: u64,
    /// The slot of the last hit or fill, and its set: where `slot_of` looks first (a line found
    /// there needs no set computed). A hint only.
    last_used: usize,
    last_set: usize,
}

/// How a cache finds a line's set: the line number's low bits, or modulo the set count, or a
/// hashed slice and the low bits (or a modulo) within it.
#[derive(Debug, Clone, Copy)]
enum SetIndex {
    Mask(u64),
    Modulo(u64),
    Sliced { slices: u64, per_slice: u64, mask: Option<u64>, hash: SliceHash },
}

impl SetIndex {
    fn new(sets: u64, slices: u64, hash: SliceHash) -> SetIndex {
        let mask_of = |n: u64| n.is_power_of_two().then(|| n - 1);
        match (slices, mask_of(sets)) {
            (1, Some(mask)) => SetIndex::Mask(mask),
            (1, None) => SetIndex::Modulo(sets),
            _ => SetIndex::Sliced { slices, per_slice: sets / slices, mask: mask_of(sets / slices), hash },
        }
    }

    #[inline]
    fn set_of(self, line: Line) -> usize {
        (match self {
            SetIndex::Mask(mask) => line.0 & mask,
            SetIndex::Modulo(sets) => line.0 % sets,
            SetIndex::Sliced { slices, per_slice, mask, hash } => {
                let within = mask.map_or_else(|| line.0 % per_slice, |mask| line.0 & mask);
                hash.slice_of(line, slices) * per_slice + within
            }
        }) as usize
    }
}

/// Asks the host CPU to start loading the memory of `items` into its caches. A hint only: nothing
/// observable changes. Used to overlap the host cache misses of accesses known in advance.
#[inline]
pub fn host_prefetch<T>(items: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const HOST_LINE: usize = 64;
        let first = items.as_ptr() as usize;
        let last = first + std::mem::size_of_val(items).max(1) - 1;
        let mut addr = first & !(HOST_LINE - 1);
        while addr <= last {
            // SAFETY: a prefetch never faults and has no effect besides the host cache; the
            // addresses lie within (or on the host line of) `items`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(addr as *const i8) };
            addr += HOST_LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = items;
}

impl Cache {
    /// Builds an empty cache. The geometry must have been validated (policy exists, ways fit).
    pub fn new(geometry: &Geometry) -> Cache {
        let info = replacement::find(geometry.policy).expect("validated replacement policy");
        assert!(geometry.ways <= 64, "validated: at most 64 ways");
        Cache {
            sets: geometry.sets,
            index: SetIndex::new(geometry.sets as u64, geometry.slices.max(1) as u64, geometry.slice_hash),
            ways: geometry.ways,
            tags: vec![INVALID; geometry.sets * geometry.ways],
            bits: vec![SetBits::default(); geometry.sets],
            policy: (info.build)(geometry.sets, geometry.ways, geometry.options),
            stamps: Vec::new(),
            all_ways: if geometry.ways >= 64 { u64::MAX } else { (1u64 << geometry.ways) - 1 },
            last_used: 0,
            last_set: 0,
        }
    }

    pub fn all_ways(&self) -> u64 {
        self.all_ways
    }

    /// From now on keeps a stamp for each line (see `stamp`).
    pub fn keep_stamps(&mut self) {
        self.stamps = vec![0; self.tags.len()];
    }

    /// Records `stamp` for a present line, if stamps are kept.
    pub fn stamp(&mut self, line: Line, stamp: u64) {
        if !self.stamps.is_empty() {
            if let Some((set, way)) = self.slot_of(line) {
                self.stamps[set * self.ways + way] = stamp;
            }
        }
    }

    /// The stamp recorded for a present line, if stamps are kept.
    pub fn stamp_of(&self, line: Line) -> Option<u64> {
        let (set, way) = self.slot_of(line)?;
        self.stamps.get(set * self.ways + way).copied()
    }

    fn set_of(&self, line: Line) -> usize {
        self.index.set_of(line)
    }

    #[inline]
    fn slot_of(&self, line: Line) -> Option<(usize, usize)> {
        // Way prediction: accesses cluster on a line, so try the slot used last before computing
        // the set and searching it. A line is stored only in its own set, so a match is the
        // line's slot, in the set recorded with it.
        if self.tags[self.last_used] == line.0 {
            return Some((self.last_set, self.last_used - self.last_set * self.ways));
        }
        let set = self.set_of(line);
        let base = set * self.ways;
        self.tags[base..base + self.ways].iter().position(|&tag| tag == line.0).map(|way| (set, way))
    }

    /// Records the slot of a hit or fill for way prediction.
    fn remember(&mut self, set: usize, way: usize) {
        self.last_set = set;
        self.last_used = set * self.ways + way;
    }

    /// Starts loading the host memory a lookup of `line` reads: its set's tags, bits and
    /// replacement state (see `host_prefetch`).
    pub fn prefetch_set_of(&self, line: Line) {
        let set = self.set_of(line);
        host_prefetch(&self.tags[set * self.ways..(set + 1) * self.ways]);
        host_prefetch(std::slice::from_ref(&self.bits[set]));
        self.policy.prefetch_set(set);
    }

    pub fn contains(&self, line: Line) -> bool {
        self.slot_of(line).is_some()
    }

    pub fn is_dirty(&self, line: Line) -> bool {
        self.slot_of(line).is_some_and(|(set, way)| self.bits[set].dirty >> way & 1 == 1)
    }

    /// Looks the line up as a use: on a hit updates recency (and the dirty bit for a write) and
    /// clears the line's prefetch mark.
    #[inline]
    pub fn access(&mut self, line: Line, write: bool) -> Lookup {
        match self.slot_of(line) {
            Some((set, way)) => {
                self.remember(set, way);
                self.policy.on_hit(set, way, write);
                let bits = &mut self.bits[set];
                let bit = 1u64 << way;
                bits.dirty |= if write { bit } else { 0 };
                let prefetched = bits.prefetched & bit != 0;
                bits.prefetched &= !bit;
                Lookup::Hit { prefetched }
            }
            None => Lookup::Miss,
        }
    }

    /// Moves a present line to where replacement evicts next in its set (see
    /// `ReplacementPolicy::demote`); nothing if absent.
    pub fn demote(&mut self, line: Line) {
        if let Some((set, way)) = self.slot_of(line) {
            self.policy.demote(set, way);
        }
    }

    /// Marks a present line as brought in by a prefetch.
    pub fn mark_prefetched(&mut self, line: Line) {
        if let Some((set, way)) = self.slot_of(line) {
            self.bits[set].prefetched |= 1 << way;
        }
    }

    /// Installs a line that is not present, choosing a victim among the ways in `allowed`
    /// (invalid allowed ways first, lowest way first). Returns the line evicted, if any.
    pub fn insert(&mut self, line: Line, dirty: bool, allowed: u64) -> Option<Evicted> {
        self.insert_filling_from(line, dirty, allowed, FreeWay::Lowest)
    }

    /// As `insert`, taking the invalid allowed way `free_way` names first.
    pub fn insert_filling_from(&mut self, line: Line, dirty: bool, allowed: u64, free_way: FreeWay) -> Option<Evicted> {
        debug_assert!(!self.contains(line), "insert of a present line");
        let allowed = allowed & self.all_ways;
        let set = self.set_of(line);
        let free = allowed & !self.bits[set].valid;
        let (way, evicted) = if free != 0 {
            let way = match free_way {
                FreeWay::Lowest => free.trailing_zeros(),
                FreeWay::Highest => u64::BITS - 1 - free.leading_zeros(),
            };
            (way as usize, None)
        } else {
            let way = self.policy.victim(set, allowed);
            let bits = &self.bits[set];
            let evicted = Evicted {
                line: Line(self.tags[set * self.ways + way]),
                dirty: bits.dirty >> way & 1 == 1,
                unused_prefetch: bits.prefetched >> way & 1 == 1,
                stamp: self.stamps.get(set * self.ways + way).copied().unwrap_or(0),
            };
            (way, Some(evicted))
        };
        self.remember(set, way);
        self.tags[self.last_used] = line.0;
        let bits = &mut self.bits[set];
        let bit = 1u64 << way;
        bits.valid |= bit;
        bits.dirty = if dirty { bits.dirty | bit } else { bits.dirty & !bit };
        bits.prefetched &= !bit;
        bits.exclusive &= !bit;
        self.policy.on_fill(set, way);
        evicted
    }

    /// Removes the line if present; returns whether it was dirty.
    pub fn remove(&mut self, line: Line) -> Option<bool> {
        let (set, way) = self.slot_of(line)?;
        self.tags[set * self.ways + way] = INVALID;
        let bits = &mut self.bits[set];
        let bit = 1u64 << way;
        let dirty = bits.dirty & bit != 0;
        bits.valid &= !bit;
        bits.dirty &= !bit;
        bits.prefetched &= !bit;
        bits.exclusive &= !bit;
        self.policy.on_invalidate(set, way);
        Some(dirty)
    }

    /// Whether a present line is marked as held by no other cache.
    #[inline]
    pub fn is_exclusive(&self, line: Line) -> bool {
        self.slot_of(line).is_some_and(|(set, way)| self.bits[set].exclusive >> way & 1 == 1)
    }

    /// Marks a present line as held by no other cache (or clears the mark); nothing if absent.
    #[inline]
    pub fn set_exclusive(&mut self, line: Line, exclusive: bool) {
        if let Some((set, way)) = self.slot_of(line) {
            let bits = &mut self.bits[set];
            bits.exclusive = if exclusive { bits.exclusive | 1 << way } else { bits.exclusive & !(1 << way) };
        }
    }

    /// Marks a present line dirty without counting a use; false if absent.
    pub fn mark_dirty(&mut self, line: Line) -> bool {
        match self.slot_of(line) {
            Some((set, way)) => {
                self.bits[set].dirty |= 1 << way;
                true
            }
            None => false,
        }
    }

    /// Number of valid lines.
    pub fn occupancy(&self) -> usize {
        self.bits.iter().map(|bits| bits.valid.count_ones() as usize).sum()
    }

    /// Every valid line with its dirty bit (for invariant checks).
    pub fn lines(&self) -> impl Iterator<Item = (Line, bool)> + '_ {
        self.tags
            .iter()
            .enumerate()
            .filter(|(_, &tag)| tag != INVALID)
            .map(|(slot, &tag)| (Line(tag), self.bits[slot / self.ways].dirty >> (slot % self.ways) & 1 == 1))
    }

    /// Clears every valid bit and leaves the tags: a corrupt array, for tests of the invariant
    /// checks that use this one.
    #[cfg(test)]
    pub(crate) fn corrupt_valid_bits(&mut self) {
        self.bits.iter_mut().for_each(|bits| bits.valid = 0);
    }

    /// Checks that every line sits in its own set and appears once, and that the valid bits
    /// agree with the tags.
    pub fn check_invariants(&self) -> Result<(), String> {
        for set in 0..self.sets {
            let bits = self.bits[set];
            let marks = bits.dirty | bits.prefetched | bits.exclusive;
            if marks & !bits.valid != 0 {
                return Err(format!("set {set}: ways {:#x} are marked but hold no line", marks & !bits.valid));
            }
            let tags = &self.tags[set * self.ways..(set + 1) * self.ways];
            for (way, &tag) in tags.iter().enumerate() {
                if (tag != INVALID) != (self.bits[set].valid >> way & 1 == 1) {
                    return Err(format!("set {set} way {way}: valid bit disagrees with tag {tag:#x}"));
                }
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
            slices: 1,
            slice_hash: SliceHash::Uniform,
            policy: "lru",
            options: PolicyOptions { write_hit_updates_recency: true, seed: 0 },
        })
    }

    fn slice_of(line: Line, slices: u64) -> u64 {
        SliceHash::Uniform.slice_of(line, slices)
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
            Some(Evicted { line: Line(2), dirty: true, unused_prefetch: false, stamp: 0 })
        );
        assert!(c.contains(Line(0)) && c.contains(Line(4)) && !c.contains(Line(2)));
        assert_eq!(c.occupancy(), 2);
        c.check_invariants().unwrap();
    }

    #[test]
    fn dirty_and_exclusive_marks_belong_to_their_own_way() {
        // 1 set x 3 ways: lines 0, 1, 2 in ways 0, 1, 2; only the middle one is marked.
        let mut c = cache(1, 3);
        c.insert(Line(0), false, c.all_ways());
        c.insert(Line(1), true, c.all_ways());
        c.insert(Line(2), false, c.all_ways());
        assert_eq!([0, 1, 2].map(|l| c.is_dirty(Line(l))), [false, true, false]);
        c.set_exclusive(Line(1), true);
        c.set_exclusive(Line(1), true);
        assert_eq!([0, 1, 2].map(|l| c.is_exclusive(Line(l))), [false, true, false], "setting twice keeps it");
        c.set_exclusive(Line(2), true);
        c.set_exclusive(Line(1), false);
        assert_eq!([0, 1, 2].map(|l| c.is_exclusive(Line(l))), [false, false, true]);
        // Removing a line takes its marks and no other line's.
        c.set_exclusive(Line(1), true);
        assert_eq!(c.remove(Line(1)), Some(true));
        assert_eq!([0, 2].map(|l| c.is_exclusive(Line(l))), [false, true]);
        c.check_invariants().unwrap();
    }

    #[test]
    fn mark_dirty_marks_the_line_alone_and_lines_lists_each_with_its_dirty_bit() {
        // 4 sets x 2 ways: lines 3 and 7 in set 3, ways 0 and 1; line 2 in set 2. Line 7's
        // slot (7) is set 3's second way, not set 1's.
        let mut c = cache(4, 2);
        for line in [3, 7, 2] {
            c.insert(Line(line), false, c.all_ways());
        }
        assert!(c.mark_dirty(Line(7)));
        assert!(c.mark_dirty(Line(7)), "marking again keeps it");
        assert!(!c.mark_dirty(Line(5)), "absent: nothing to mark");
        let mut lines: Vec<_> = c.lines().collect();
        lines.sort_by_key(|(line, _)| line.0);
        assert_eq!(lines, [(Line(2), false), (Line(3), false), (Line(7), true)]);
        c.check_invariants().unwrap();
    }

    #[test]
    fn a_mark_on_a_way_without_a_line_is_an_invariant_failure_whichever_marks_it_holds() {
        // 2 sets x 2 ways: line 1 in set 1, way 0, carries every non-empty combination of the
        // three marks in turn; once the valid bits are cleared the marks name a way that holds no
        // line (reported before the tags are looked at).
        for marks in 1..8 {
            let [dirty, prefetched, exclusive] = [1, 2, 4].map(|bit| marks & bit != 0);
            let mut c = cache(2, 2);
            c.insert(Line(1), dirty, c.all_ways());
            if prefetched {
                c.mark_prefetched(Line(1));
            }
            c.set_exclusive(Line(1), exclusive);
            c.check_invariants().unwrap();
            c.corrupt_valid_bits();
            let expected = Err("set 1: ways 0x1 are marked but hold no line".to_string());
            assert_eq!(c.check_invariants(), expected, "dirty {dirty}, prefetched {prefetched}, exclusive {exclusive}");
        }
    }

    #[test]
    fn a_sliced_cache_sets_lines_by_slice_and_index_within_it() {
        // 2 slices of 1 set x 1 way: two lines conflict exactly when their slices agree.
        let options = PolicyOptions { write_hit_updates_recency: true, seed: 0 };
        let geometry = Geometry { sets: 2, ways: 1, slices: 2, slice_hash: SliceHash::Uniform, policy: "lru", options };
        let mut c = Cache::new(&geometry);
        let (a, b) = (Line(0), (1..).map(Line).find(|&l| slice_of(l, 2) != slice_of(Line(0), 2)).unwrap());
        let same = (1..).map(Line).find(|&l| slice_of(l, 2) == slice_of(Line(0), 2)).unwrap();
        c.insert(a, false, 1);
        assert_eq!(c.insert(b, false, 1), None, "another slice: no conflict");
        assert_eq!(c.insert(same, false, 1).map(|e| e.line), Some(a), "the same slice and index");
        c.check_invariants().unwrap();
    }

    #[test]
    fn a_lines_set_by_hand() {
        let uniform = SliceHash::Uniform;
        // 2 slices of 3 sets (not a power of two): line 7 is in slice 0, at 7 mod 3 = 1 within it.
        assert_eq!(slice_of(Line(7), 2), 0);
        assert_eq!(SetIndex::new(6, 2, uniform).set_of(Line(7)), 1);
        let other = (8..).map(Line).find(|&l| slice_of(l, 2) == 1).unwrap();
        assert_eq!(SetIndex::new(6, 2, uniform).set_of(other), 3 + (other.0 % 3) as usize);
        // 0x54800 lines is a multiple of 2048: the first set of its slice (17 uniformly); five
        // lines on, the measured Skylake-SP hash puts it in slice 16, at 5 within it.
        assert_eq!(SetIndex::new(36864, 18, uniform).set_of(Line(0x54800)), 17 * 2048);
        assert_eq!(SetIndex::new(36864, 18, SliceHash::SkylakeSp).set_of(Line(0x54805)), 16 * 2048 + 5);
        assert_eq!(SetIndex::new(48, 1, uniform).set_of(Line(100)), 4);
        assert_eq!(SetIndex::new(64, 1, uniform).set_of(Line(100)), 36);
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
    fn an_allocation_takes_the_lowest_or_highest_free_way_it_may_use_and_evicts_as_before() {
        let mut c = cache(1, 4);
        // Ways 1-2 allowed and free: from the top, line 5 goes to way 2 and line 6 to way 1.
        assert_eq!(c.insert_filling_from(Line(5), false, 0b0110, FreeWay::Highest), None);
        assert_eq!(c.insert_filling_from(Line(6), false, 0b0110, FreeWay::Highest), None);
        // From the bottom over all ways, the free ones are 0 then 3.
        assert_eq!(c.insert(Line(7), false, 0b1111), None);
        assert_eq!(c.insert_filling_from(Line(8), false, 0b1111, FreeWay::Lowest), None);
        assert_eq!(c.lines().map(|(line, _)| line.0).collect::<Vec<_>>(), [7, 6, 5, 8]);
        // Full: the order of free ways no longer matters, the policy's victim (LRU: 5) goes.
        assert_eq!(c.insert_filling_from(Line(9), false, 0b0110, FreeWay::Highest).map(|e| e.line), Some(Line(5)));
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
    fn stamps_are_kept_only_when_asked_for_and_leave_with_their_line() {
        let mut c = cache(2, 2);
        c.insert(Line(0), false, c.all_ways());
        c.stamp(Line(0), 7);
        assert_eq!(c.stamp_of(Line(0)), None);
        c.keep_stamps();
        c.stamp(Line(0), 7);
        c.insert(Line(2), true, c.all_ways());
        c.stamp(Line(2), 9);
        c.stamp(Line(4), 11); // absent: nothing recorded
        assert_eq!((c.stamp_of(Line(0)), c.stamp_of(Line(2)), c.stamp_of(Line(4))), (Some(7), Some(9), None));
        // Line 0 is least recent: the victim carries its stamp out.
        let evicted = c.insert(Line(4), false, c.all_ways()).unwrap();
        assert_eq!((evicted.line, evicted.stamp), (Line(0), 7));
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
