//! One core's caches as trace replay needs them: L1D -> L2 -> L3 -> memory, with no other agent.
//!
//! Why a second engine next to `Hierarchy`: the coherent hierarchy serves many cores and devices,
//! so every access pays for what a single trace never exercises (holders of a line in other
//! caches, way masks per agent, prefetch bookkeeping, time, memory channels). `SingleCore` keeps
//! only what one core's reads and writes can change, in compact arrays, and does per access what
//! `Hierarchy::core_access` does for one core with no other cache: the same lookups, fills,
//! victims and counters, in the same order. `tests/fast_paths.rs` checks that the two count
//! identically for every replacement policy, level relation and write-hit setting.
//!
//! `SetGroups` splits the caches into independent groups of sets (see `set_groups`), each a
//! `SingleCore` of its own, and replays a batch of records at a time on every host core: sorted
//! by group, then run group by group.
//!
//! An LRU level of up to 16 ways and a power-of-two number of sets keeps each set's lines in
//! recency order (`LruSets`): entries of a tag and a dirty bit, 32 bits wide while the trace's
//! addresses allow (so a set is one host cache line and a 32 MiB L3 stays within a few MiB of host
//! cache), 64 bits after. Other levels are the general `Cache`, whose policies keep per-way state.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::cache::{replacement, Cache, Geometry};
use crate::hierarchy::LevelStats;
use crate::platform::{CacheSpec, MaskAgent, PlatformSpec, Relation};
use super::crew::Crew;
use super::{replay_records, LineSink, Record};
use crate::units::Line;

/// Why `SingleCore` cannot stand for the general path on a platform (which then replays through it).
pub fn unsupported(platform: &PlatformSpec) -> Option<String> {
    for (name, spec) in [("l1d", &platform.l1d), ("l2", &platform.l2), ("l3", &platform.l3)] {
        // Prefetches need the general path's in-flight bookkeeping.
        if spec.prefetcher.kind != "none" {
            return Some(format!("{name} has a hardware prefetcher"));
        }
        // A replay runs as CPU 0 of a one-core platform, so a mask for `cpu:0` confines its fills.
        let geometry = spec.geometry();
        let all_ways = u64::MAX >> (64 - geometry.ways);
        let mask = spec.way_masks.iter().rev().find(|m| m.parsed_agent() == Ok(MaskAgent::Cpu(0)));
        if mask.is_some_and(|m| m.mask & all_ways != all_ways) {
            return Some(format!("{name} has a way mask for cpu:0"));
        }
    }
    None
}

/// Most groups `set_groups` splits a core's caches into: 64 groups of turin-9655's 32 MiB L3 are
/// 32 KiB of sets each, which stay in a host core's L1 and L2 while the group runs.
const MAX_GROUPS: usize = 64;

/// Records `SetGroups` replays as one batch: sorted by group, then run. A batch (512 KiB of binary
/// records, as much sorted) stays within the host cores' L2 beside the groups' sets: 5–7% faster
/// than batches of 256K records on `scripts/bench.py`'s traces, and no slower than 32K.
pub(super) const BATCH: usize = 1 << 16;

/// Fewest records worth sharing between host threads.
const THREAD_MIN_BATCH: usize = 1 << 12;

/// Most host threads a replay uses (a batch gives each at least 8K records).
const MAX_THREADS: usize = 8;

/// Parts a batch is sorted in per host thread, each taken by whichever thread is free: a host
/// core slowed for a while sorts fewer of them.
const PARTS_PER_THREAD: usize = 4;

/// How many accesses ahead a group's replay starts loading the host memory of a line's L3 set.
const PREFETCH_DISTANCE: usize = 16;

/// Into how many independent groups of sets the platform's caches split: the largest power of two,
/// up to `MAX_GROUPS`, that divides every level's set count, if every level's replacement policy
/// keeps its state per set; else 1.
///
/// Why a group can run apart from the others: a line's set at each level is the line number modulo
/// the level's set count, so when `groups` divides every set count, the lines of one residue modulo
/// `groups` share sets, at every level, only with each other. Everything an access does (lookups,
/// fills, victims, back-invalidations, writebacks) concerns its own line or lines of the same set,
/// so each group's lines meet the same cache contents whether other groups' accesses come between
/// them or not; and the counters are sums.
pub fn set_groups(platform: &PlatformSpec) -> usize {
    let levels = [&platform.l1d, &platform.l2, &platform.l3];
    if levels.iter().any(|spec| !replacement::find(&spec.replacement).is_some_and(|policy| policy.per_set)) {
        return 1;
    }
    let common_twos = levels.iter().map(|spec| spec.geometry().sets.trailing_zeros()).min().unwrap_or(0);
    (1 << common_twos).min(MAX_GROUPS)
}

/// A level's geometry for one of `groups` groups of its sets (`groups` divides its set count).
fn group_geometry(spec: &CacheSpec, groups: usize) -> Geometry {
    let mut geometry = spec.geometry();
    geometry.sets /= groups;
    geometry
}

/// One core's caches as `set_groups` independent groups of sets, replayed a batch of records at
/// a time in two steps that each use every host core: the records are sorted by group (the
/// batch cut into consecutive parts, which the host threads take in turn), then each group runs
/// its accesses in order (each host thread its share of the groups, taking a group's accesses
/// from every part in turn; see `run_groups`). So a replay counts exactly as one core in trace order, and a group's sets are small
/// enough to stay in the host core's caches while it runs.
pub struct SetGroups {
    groups: Groups,
    group_bits: u32,
    /// Largest line (of a group) every array holds as it is; a batch with a larger one first
    /// widens them (see `LruSets::widened`).
    narrow_limit: u64,
    /// Per part of a batch, then per group, the accesses sorted from that part: the group's line
    /// shifted left by one, the write bit in bit 0 (kept for their capacity).
    queues: Vec<Vec<Vec<u64>>>,
    /// Host threads a batch is shared between.
    threads: usize,
    /// The host threads beside the calling one; started by the first batch shared between
    /// threads.
    crew: Option<Crew>,
    /// L1 hits the sorting passed over (see `Sorter`).
    repeats: Counts,
}

/// The groups' caches: group `g` holds the sets of the lines `g` modulo the group count, and sees
/// those lines divided by it.
enum Groups {
    /// Every level LRU in 32-bit entries, called without a `Level` to dispatch on (the common
    /// case: some 12% faster on `scripts/bench.py`'s mixed trace).
    Lru(Vec<SingleCore<LruSets<u32>>>),
    /// Any other arrays.
    Mixed(Vec<SingleCore<Level>>),
}

/// Calls `$call` with `$cores` bound to the groups' caches, whichever arrays they have.
macro_rules! on_groups {
    ($groups:expr, $cores:ident => $call:expr) => {
        match $groups {
            Groups::Lru($cores) => $call,
            Groups::Mixed($cores) => $call,
        }
    };
}

/// Sorts one part of a batch by group (see `SetGroups`), passing over the accesses
/// of a run to one line that cannot change what the caches hold.
///
/// Why those are only counted: after an access to a line, the line is in L1 (every miss fills
/// it), so the next accesses to it hit L1. A read hit makes the line the most recently used; a
/// write hit makes it dirty, the most recent if `write_hit_updates_recency`, and drops a victim
/// L3's copy. Doing either again, with only that line touched in between, changes nothing. So of
/// a run, the first access is sorted, then the first read and the first write after it; the others
/// count as L1 hits in `repeats`. A first access that reads already does what a read hit does
/// where L1 keeps its sets in recency order (`SingleCore::l1_ordered`: a fill or hit puts the line
/// first), so there reads after it are only counted too. Otherwise the first access may leave
/// undone what a hit does: an SRRIP fill does not make its line the most recent, and a write miss
/// can leave a copy in a victim L3, pushed there by its own L1 victim.
///
/// On `scripts/bench.py`'s streaming trace (7 accesses in 8 repeat the line before) this made the
/// replay of 2M loads 40% faster (9.0 ms to 5.5), on its mixed one (8% repeat) up to 5% slower:
/// the branch on a repeat is taken unpredictably there.
pub(super) struct Sorter<'a> {
    queues: &'a mut [Vec<u64>],
    group_bits: u32,
    l1_ordered: bool,
    /// The line of the current run, and whether it has read it and written it since its first access.
    run: Run,
    tally: SortTally,
}

/// What sorting a part found.
#[derive(Clone, Copy, Default)]
struct SortTally {
    /// The largest line sorted.
    max_line: u64,
    /// L1 hits passed over, reads then writes.
    repeats: [u64; 2],
}

#[derive(Clone, Copy)]
struct Run {
    line: u64,
    kinds: [bool; 2],
}

impl Sorter<'_> {
    #[inline(always)]
    fn sort(&mut self, line: u64, write: bool) {
        let group = (line & ((1 << self.group_bits) - 1)) as usize;
        self.queues[group].push(line >> self.group_bits << 1 | write as u64);
    }
}

impl LineSink for Sorter<'_> {
    #[inline(always)]
    fn access(&mut self, line: u64, write: bool) {
        if line == self.run.line {
            if self.run.kinds[write as usize] {
                self.tally.repeats[write as usize] += 1;
                return;
            }
            self.run.kinds[write as usize] = true;
        } else {
            self.run = Run { line, kinds: [!write && self.l1_ordered, false] };
            self.tally.max_line = self.tally.max_line.max(line);
        }
        self.sort(line, write);
    }
}

impl SetGroups {
    /// Empty caches of a validated platform that `unsupported` accepts.
    pub fn new(platform: &PlatformSpec) -> SetGroups {
        let count = set_groups(platform);
        let levels = [&platform.l1d, &platform.l2, &platform.l3];
        let groups = if levels.iter().all(|spec| LruSets::<u32>::fit(&group_geometry(spec, count))) {
            let sets = |spec: &CacheSpec| LruSets::new(&group_geometry(spec, count));
            Groups::Lru((0..count).map(|_| SingleCore::new(platform, sets)).collect())
        } else {
            Groups::Mixed((0..count).map(|_| SingleCore::new(platform, |spec| Level::new(spec, count))).collect())
        };
        let narrow_limit = on_groups!(&groups, cores => cores[0].max_line());
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_THREADS).min(count);
        let queues = vec![vec![Vec::new(); count]; threads * PARTS_PER_THREAD];
        let group_bits = count.trailing_zeros();
        SetGroups { groups, group_bits, narrow_limit, queues, threads, crew: None, repeats: Counts::default() }
    }

    /// How many parts a batch of `records` records is best sorted in: `PARTS_PER_THREAD` per
    /// host thread, or one on a single host thread or if it is too small to share.
    pub(super) fn parts_for(&self, records: usize) -> usize {
        if records < THREAD_MIN_BATCH || self.threads == 1 { 1 } else { self.queues.len() }
    }

    /// Replays the reads and writes among `records` (see `replay_records`); returns how many.
    pub(super) fn replay(&mut self, records: &[impl Record], line_bits: u32) -> u64 {
        let mut replayed = 0;
        for batch in records.chunks(BATCH) {
            let parts = batch.chunks(batch.len().div_ceil(self.parts_for(batch.len())).max(1)).collect();
            let sorted = self.replay_parts(parts, |part, sorter| replay_records(sorter, part, line_bits));
            replayed += sorted.iter().sum::<u64>();
        }
        replayed
    }

    /// Replays one batch, given in consecutive parts (at most `parts_for` of them): `sort` feeds
    /// each part's accesses to a `Sorter`, the host threads taking the parts in turn, then the
    /// groups run. Returns what `sort` returned for each part.
    pub(super) fn replay_parts<P: Send, T: Send>(
        &mut self,
        parts: Vec<P>,
        sort: impl Fn(P, &mut Sorter<'_>) -> T + Sync,
    ) -> Vec<T> {
        assert!(parts.len() <= self.queues.len(), "at most `parts_for` parts");
        let (count, threads) = (parts.len(), self.threads.min(parts.len()));
        if threads > 1 && self.crew.is_none() {
            self.crew = Some(Crew::new(self.threads - 1));
        }
        let (group_bits, sort) = (self.group_bits, &sort);
        let l1_ordered = on_groups!(&self.groups, cores => cores[0].l1_ordered);
        // Each part with its queues, and then what sorting it gave.
        let slot = |(part, queues)| Mutex::new((Some(part), queues, None));
        let slots: Vec<_> = parts.into_iter().zip(&mut self.queues).map(slot).collect();
        let next = AtomicUsize::new(0);
        let sorts = (0..threads).map(|_| {
            let (slots, next) = (&slots, &next);
            move || {
                while let Some(slot) = slots.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
                    let (part, queues, sorted) = &mut *slot;
                    let run = Run { line: u64::MAX, kinds: [false; 2] };
                    let mut sorter = Sorter { queues, group_bits, l1_ordered, run, tally: SortTally::default() };
                    let result = sort(part.take().expect("each part is sorted once"), &mut sorter);
                    *sorted = Some((result, sorter.tally));
                }
            }
        });
        let crew = self.crew.as_ref();
        on_threads(crew, sorts.collect());
        let sorted = slots.into_iter().map(|slot| slot.into_inner().unwrap_or_else(PoisonError::into_inner).2);
        let (results, tallies): (Vec<T>, Vec<SortTally>) = sorted.map(|part| part.expect("every part sorted")).unzip();
        let mut max_line = 0;
        for tally in tallies {
            max_line = max_line.max(tally.max_line);
            for (write, count) in tally.repeats.into_iter().enumerate() {
                self.repeats.requests[write][1] += count;
            }
        }
        if max_line >> group_bits > self.narrow_limit {
            widen(&mut self.groups);
            self.narrow_limit = u64::MAX;
        }
        on_groups!(&mut self.groups, cores => run_groups(crew, threads, cores, &mut self.queues[..count]));
        results
    }

    /// Line accesses replayed.
    pub fn line_ops(&self) -> u64 {
        self.total()[0].requests.iter().flatten().sum()
    }

    /// The counters of L1D, L2 and L3.
    pub fn level_stats(&self) -> [LevelStats; 3] {
        self.total().each_ref().map(Counts::stats)
    }

    /// Lines read from and written to memory.
    pub fn memory_lines(&self) -> (u64, u64) {
        (self.tallies().map(|(_, memory_reads)| memory_reads).sum(), self.total()[2].writebacks)
    }

    /// Each group's counters and lines read from memory.
    fn tallies(&self) -> Box<dyn Iterator<Item = (&[Counts; 3], u64)> + '_> {
        on_groups!(&self.groups, cores => Box::new(cores.iter().map(|core| (&core.counts, core.memory_reads))))
    }

    fn total(&self) -> [Counts; 3] {
        let mut total: [Counts; 3] = Default::default();
        total[0].add(&self.repeats);
        for (counts, _) in self.tallies() {
            for (sum, counts) in total.iter_mut().zip(counts) {
                sum.add(counts);
            }
        }
        total
    }
}

/// Moves every array of the groups to 64-bit entries.
#[cold]
fn widen(groups: &mut Groups) {
    *groups = Groups::Mixed(match std::mem::replace(groups, Groups::Mixed(Vec::new())) {
        Groups::Lru(cores) => {
            cores.into_iter().map(|core| core.with_arrays(|sets| Level::Lru(sets).widened())).collect()
        }
        Groups::Mixed(cores) => cores.into_iter().map(|core| core.with_arrays(Level::widened)).collect(),
    });
}

/// Runs the sorted accesses of a batch, `parts` holding each part's sorting: every group takes
/// its accesses from the parts in order, and the groups are shared between `threads` host threads.
///
/// Each thread owns a consecutive range of groups and runs it from the front, so that a group's
/// sets stay in one host core's caches from batch to batch; a thread done with its own range
/// takes groups from the back of the others'. On a virtual machine one host core often ran some
/// 30% slower than the other for a whole replay.
fn run_groups<A: Array + Send>(
    crew: Option<&Crew>,
    threads: usize,
    cores: &mut [SingleCore<A>],
    parts: &mut [Vec<Vec<u64>>],
) {
    // Each group with its queue from every part, taken by one thread at a time.
    let mut groups: Vec<Vec<&mut Vec<u64>>> = cores.iter().map(|_| Vec::with_capacity(parts.len())).collect();
    for queues in parts.iter_mut() {
        for (group, queue) in groups.iter_mut().zip(queues.iter_mut()) {
            group.push(queue);
        }
    }
    let groups: Vec<_> = cores.iter_mut().zip(groups).map(|group| Mutex::new(group)).collect();
    let ranges = Ranges::new(groups.len(), threads);
    let runs = (0..threads).map(|thread| {
        let (groups, ranges) = (&groups, &ranges);
        move || {
            while let Some(index) = ranges.next(thread) {
                let mut group = groups[index].lock().unwrap_or_else(PoisonError::into_inner);
                let (core, queues) = &mut *group;
                for queue in queues.iter_mut() {
                    core.replay(queue);
                    queue.clear();
                }
            }
        }
    });
    on_threads(crew, runs.collect());
}

/// The groups each host thread has yet to run: a consecutive range per thread, taken from the
/// front by its thread and from the back by the others.
struct Ranges(Vec<AtomicU64>);

impl Ranges {
    /// `count` groups shared between `threads` threads.
    fn new(count: usize, threads: usize) -> Ranges {
        let share = count.div_ceil(threads);
        let range = |t: usize| Ranges::pack(count.min(t * share), count.min((t + 1) * share));
        Ranges((0..threads).map(|t| AtomicU64::new(range(t))).collect())
    }

    fn pack(first: usize, end: usize) -> u64 {
        (first as u64) << 32 | end as u64
    }

    /// The next group for `thread`: the first of its own range, else the last of the range with
    /// the most left; `None` once every group is taken.
    fn next(&self, thread: usize) -> Option<usize> {
        self.take(thread, true).or_else(|| {
            let left = |range: &AtomicU64| {
                let packed = range.load(Ordering::Relaxed);
                (packed as u32).saturating_sub((packed >> 32) as u32)
            };
            loop {
                let (fullest, _) = self.0.iter().enumerate().max_by_key(|(_, range)| left(range))?;
                if left(&self.0[fullest]) == 0 {
                    return None;
                }
                if let Some(group) = self.take(fullest, false) {
                    return Some(group);
                }
            }
        })
    }

    /// Takes the first (or last) group left in range `range`, if any.
    fn take(&self, range: usize, first: bool) -> Option<usize> {
        let range = &self.0[range];
        let mut packed = range.load(Ordering::Relaxed);
        loop {
            let (start, end) = ((packed >> 32) as usize, packed as u32 as usize);
            if start >= end {
                return None;
            }
            let (taken, rest) =
                if first { (start, Ranges::pack(start + 1, end)) } else { (end - 1, Ranges::pack(start, end - 1)) };
            match range.compare_exchange_weak(packed, rest, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(taken),
                Err(now) => packed = now,
            }
        }
    }
}

/// Runs each job on a host thread of the crew, or all on the calling thread without one;
/// returns their results in order.
fn on_threads<T: Send>(crew: Option<&Crew>, jobs: Vec<impl FnOnce() -> T + Send>) -> Vec<T> {
    match crew {
        Some(crew) => crew.map(jobs),
        None => jobs.into_iter().map(|job| job()).collect(),
    }
}

/// A line pushed out of a level, and whether it was dirty.
#[derive(Debug, Clone, Copy)]
struct Victim {
    line: u64,
    dirty: bool,
}

/// Most ways an LRU level keeps in `LruSets`.
const SET_WAYS: usize = 16;

/// A set entry: a line's tag shifted left by one, with its dirty bit in bit 0; all ones is empty.
///
/// The operations on a set are plain loops over its entries by default. 32-bit entries on x86-64
/// search a set, and rewrite it on a hit, as four aligned 16-byte quarters (`quarters`), the size
/// and places the next lookup reads it in: a set written in other pieces cannot be forwarded from
/// the store buffer to that lookup, which waits for the stores to reach the host's cache instead,
/// and the accesses of a group of sets meet their few L1 sets back to back (a trace whose
/// accesses all hit L1 replays some 17% faster). A miss's insertion keeps the loop, which is
/// cheaper: the lookup after a miss comes late enough.
trait Entry: Copy + Eq + Into<u64> {
    const EMPTY: Self;
    /// Largest tag an entry holds (the empty pattern is no tag).
    const MAX_TAG: u64;
    /// The entry of a tag, dirty bit set: what an entry matches once its own dirty bit is set.
    fn key(tag: u64) -> Self;
    fn matches(self, key: Self) -> bool;
    fn clean(self) -> Self;
    fn dirty(self) -> Self;

    /// Bit `i` set where `entries[i]` matches `key`.
    #[inline(always)]
    fn matching(entries: &[Self; SET_WAYS], key: Self) -> u32 {
        entries.iter().enumerate().fold(0, |found, (i, entry)| found | (entry.matches(key) as u32) << i)
    }

    /// Puts `entry` first, the entries before `way` one place back, over the one at `way`.
    #[inline(always)]
    fn move_to_front(entries: &mut [Self; SET_WAYS], way: usize, entry: Self) {
        // Every entry is written, so that the loop becomes vector selects rather than branches.
        let old = *entries;
        for i in 1..SET_WAYS {
            entries[i] = if i <= way { old[i - 1] } else { old[i] };
        }
        entries[0] = entry;
    }

    /// Puts `entry` first and every other entry one place back, the entries from `ways` on
    /// empty; returns the entry that was at `ways - 1` (empty while the set had room).
    #[inline(always)]
    fn push_front(entries: &mut [Self; SET_WAYS], ways: usize, entry: Self) -> Self {
        let pushed_out = entries[ways - 1];
        let old = *entries;
        entries[1..].copy_from_slice(&old[..SET_WAYS - 1]);
        entries[0] = entry;
        if ways < SET_WAYS {
            entries[ways] = Self::EMPTY;
        }
        pushed_out
    }

    /// Takes out the entry at `way`, moving the later ones one place forward.
    #[inline(always)]
    fn take(entries: &mut [Self; SET_WAYS], way: usize) -> Self {
        let old = *entries;
        for i in 0..SET_WAYS - 1 {
            entries[i] = if i >= way { old[i + 1] } else { old[i] };
        }
        entries[SET_WAYS - 1] = Self::EMPTY;
        old[way]
    }

    /// Sets the dirty bit of the entry at `way`.
    #[inline(always)]
    fn mark_dirty(entries: &mut [Self; SET_WAYS], way: usize) {
        entries[way] = entries[way].dirty();
    }
}

macro_rules! entry {
    ($t:ty $(, $operation:item)*) => {
        impl Entry for $t {
            const EMPTY: $t = <$t>::MAX;
            const MAX_TAG: u64 = (<$t>::MAX >> 1) as u64 - 1;
            #[inline(always)]
            fn key(tag: u64) -> $t {
                (tag << 1 | 1) as $t
            }
            #[inline(always)]
            fn matches(self, key: $t) -> bool {
                self | 1 == key
            }
            #[inline(always)]
            fn clean(self) -> $t {
                self & !1
            }
            #[inline(always)]
            fn dirty(self) -> $t {
                self | 1
            }
            $($operation)*
        }
    };
}

entry!(u64);
#[cfg(not(target_arch = "x86_64"))]
entry!(u32);
#[cfg(target_arch = "x86_64")]
entry!(
    u32,
    #[inline(always)]
    fn matching(entries: &[u32; SET_WAYS], key: u32) -> u32 {
        quarters::matching(entries, key)
    },
    #[inline(always)]
    fn move_to_front(entries: &mut [u32; SET_WAYS], way: usize, entry: u32) {
        quarters::move_to_front(entries, way, entry);
    },

    #[inline(always)]
    fn mark_dirty(entries: &mut [u32; SET_WAYS], way: usize) {
        quarters::mark_dirty(entries, way);
    }
);

/// Set operations of 32-bit entries with SSE2 (part of every x86-64 CPU), a set as four 16-byte
/// quarters of four entries, read and written whole (see `Entry`).
#[cfg(target_arch = "x86_64")]
mod quarters {
    use std::arch::x86_64::*;

    use super::SET_WAYS;

    /// Sixteen lanes of 32 bits, aligned as a set is.
    #[derive(Clone, Copy)]
    #[repr(C, align(64))]
    struct Lanes([u32; SET_WAYS]);

    /// `BELOW[n]`: all ones in the lanes before `n`.
    static BELOW: [Lanes; SET_WAYS + 1] = {
        let mut below = [Lanes([0; SET_WAYS]); SET_WAYS + 1];
        let mut n = 0;
        while n <= SET_WAYS {
            let mut lane = 0;
            while lane < n {
                below[n].0[lane] = u32::MAX;
                lane += 1;
            }
            n += 1;
        }
        below
    };

    type Quarters = [__m128i; 4];

    // SAFETY (every `unsafe` below): SSE2 is always available on x86-64, and each load or store
    // covers one quarter of the 16 entries of the array it is given.
    #[inline(always)]
    fn load(entries: &[u32; SET_WAYS]) -> Quarters {
        let at = |q: usize| unsafe { _mm_loadu_si128(entries[4 * q..].as_ptr().cast()) };
        [at(0), at(1), at(2), at(3)]
    }

    #[inline(always)]
    fn store(entries: &mut [u32; SET_WAYS], [q0, q1, q2, q3]: Quarters) {
        let pointer = entries.as_mut_ptr();
        unsafe {
            _mm_storeu_si128(pointer.cast(), q0);
            _mm_storeu_si128(pointer.add(4).cast(), q1);
            _mm_storeu_si128(pointer.add(8).cast(), q2);
            _mm_storeu_si128(pointer.add(12).cast(), q3);
        }
    }

    /// Lanes where `mask` is all ones from `a`, the others from `b`.
    #[inline(always)]
    fn select(mask: &Lanes, a: Quarters, b: Quarters) -> Quarters {
        let [m0, m1, m2, m3] = load(&mask.0);
        let pick = |m, a, b| unsafe { _mm_or_si128(_mm_and_si128(m, a), _mm_andnot_si128(m, b)) };
        [pick(m0, a[0], b[0]), pick(m1, a[1], b[1]), pick(m2, a[2], b[2]), pick(m3, a[3], b[3])]
    }

    /// Every entry one lane up, `first` in lane 0.
    #[inline(always)]
    fn shifted_back([q0, q1, q2, q3]: Quarters, first: u32) -> Quarters {
        unsafe {
            [
                _mm_or_si128(_mm_slli_si128::<4>(q0), _mm_cvtsi32_si128(first as i32)),
                _mm_or_si128(_mm_slli_si128::<4>(q1), _mm_srli_si128::<12>(q0)),
                _mm_or_si128(_mm_slli_si128::<4>(q2), _mm_srli_si128::<12>(q1)),
                _mm_or_si128(_mm_slli_si128::<4>(q3), _mm_srli_si128::<12>(q2)),
            ]
        }
    }

    /// Four comparisons of four entries each (the compiler does not vectorise the bit mask).
    #[inline(always)]
    pub fn matching(entries: &[u32; SET_WAYS], key: u32) -> u32 {
        unsafe {
            let (key, dirty_bit) = (_mm_set1_epi32(key as i32), _mm_set1_epi32(1));
            load(entries).into_iter().enumerate().fold(0, |found, (q, quarter)| {
                let equal = _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_or_si128(quarter, dirty_bit), key));
                found | (_mm_movemask_ps(equal) as u32) << (4 * q)
            })
        }
    }

    #[inline(always)]
    pub fn move_to_front(entries: &mut [u32; SET_WAYS], way: usize, entry: u32) {
        let old = load(entries);
        store(entries, select(&BELOW[way + 1], shifted_back(old, entry), old));
    }

    #[inline(always)]
    pub fn mark_dirty(entries: &mut [u32; SET_WAYS], way: usize) {
        // Bit 0 of lane `way`, in the quarter holding it.
        let quarter = &mut entries[way & !3..][..4];
        unsafe {
            let lane = _mm_and_si128(_mm_loadu_si128(BELOW[way % 4 + 1].0.as_ptr().cast()), _mm_set1_epi32(1));
            let above = _mm_loadu_si128(BELOW[way % 4].0.as_ptr().cast());
            let bit = _mm_andnot_si128(above, lane);
            let marked = _mm_or_si128(_mm_loadu_si128(quarter.as_ptr().cast()), bit);
            _mm_storeu_si128(quarter.as_mut_ptr().cast(), marked);
        }
    }
}

/// Where a level's lines go: set and tag of a line, and back (the set count a power of two).
#[derive(Debug, Clone, Copy)]
struct Indexing {
    set_bits: u32,
    /// The set count less one (kept rather than worked out on every access).
    set_mask: u64,
}

impl Indexing {
    fn new(sets: usize) -> Indexing {
        Indexing { set_bits: sets.trailing_zeros(), set_mask: sets as u64 - 1 }
    }

    #[inline(always)]
    fn split(self, line: u64) -> (usize, u64) {
        ((line & self.set_mask) as usize, line >> self.set_bits)
    }

    fn join(self, set: usize, tag: u64) -> u64 {
        tag << self.set_bits | set as u64
    }
}

/// One set of an LRU level: its entries most recently used first, then empty ones (a fixed length
/// lets the loops over a set become vector operations; entries past the way count stay empty).
/// Aligned to the host's cache lines, so a set of 32-bit entries is one host line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Set<E>([E; SET_WAYS]);

impl<E: Entry> Set<E> {
    const EMPTY: Set<E> = Set([E::EMPTY; SET_WAYS]);

    /// Where the key sits; the most recent entry is tried first (a run of accesses to one line
    /// finds it there).
    #[inline(always)]
    fn find(&self, key: E) -> Option<usize> {
        if self.0[0].matches(key) {
            return Some(0);
        }
        let found = E::matching(&self.0, key);
        (found != 0).then(|| found.trailing_zeros() as usize)
    }

    /// See `Entry::move_to_front`.
    #[inline(always)]
    fn move_to_front(&mut self, way: usize, entry: E) {
        E::move_to_front(&mut self.0, way, entry);
    }

    /// See `Entry::push_front`.
    #[inline(always)]
    fn push_front(&mut self, ways: usize, entry: E) -> E {
        E::push_front(&mut self.0, ways, entry)
    }

    /// See `Entry::take`.
    #[inline(always)]
    fn take(&mut self, way: usize) -> E {
        E::take(&mut self.0, way)
    }

    /// See `Entry::mark_dirty`.
    #[inline(always)]
    fn mark_dirty(&mut self, way: usize) {
        E::mark_dirty(&mut self.0, way);
    }
}

/// True LRU over sets kept in recency order. Recency order among the valid lines is all that true
/// LRU's victim choice depends on, and the cache fills empty ways before evicting, so this evicts
/// exactly what `cache::replacement::Lru` evicts, without per-way ranks.
struct LruSets<E> {
    indexing: Indexing,
    ways: usize,
    sets: Vec<Set<E>>,
    write_hit_updates_recency: bool,
}

impl<E: Entry> LruSets<E> {
    /// Whether a level of this geometry is kept in `LruSets`: LRU with at most `SET_WAYS` ways
    /// and a power-of-two number of sets.
    fn fit(geometry: &Geometry) -> bool {
        geometry.policy == "lru" && geometry.ways <= SET_WAYS && geometry.sets.is_power_of_two()
    }

    /// Empty sets of a geometry that `fit`s.
    fn new(geometry: &Geometry) -> LruSets<E> {
        LruSets {
            indexing: Indexing::new(geometry.sets),
            ways: geometry.ways,
            sets: vec![Set::EMPTY; geometry.sets],
            write_hit_updates_recency: geometry.options.write_hit_updates_recency,
        }
    }

    /// Largest line every set can tag.
    fn max_line(&self) -> u64 {
        self.indexing.join(self.sets.len() - 1, E::MAX_TAG)
    }

    fn ordered(&self) -> bool {
        true
    }

    /// The line's set and its key (see `Entry::key`).
    #[inline(always)]
    fn locate(&mut self, line: u64) -> (&mut Set<E>, E) {
        let (set, tag) = self.indexing.split(line);
        (&mut self.sets[set], E::key(tag))
    }

    /// A lookup as a use: refreshes recency (unless a write hit is no use) and marks a write dirty.
    #[inline(always)]
    fn access(&mut self, line: u64, write: bool) -> bool {
        let use_on_write = self.write_hit_updates_recency;
        let (set, key) = self.locate(line);
        let Some(way) = set.find(key) else { return false };
        if way != 0 && (!write || use_on_write) {
            let entry = if write { set.0[way].dirty() } else { set.0[way] };
            set.move_to_front(way, entry);
        } else if write {
            set.mark_dirty(way);
        }
        true
    }

    /// Installs an absent line as the most recent; returns the least recent one if the set was full.
    fn insert(&mut self, line: u64, dirty: bool) -> Option<Victim> {
        let (index, _) = self.indexing.split(line);
        let ways = self.ways;
        let (set, key) = self.locate(line);
        let pushed_out = set.push_front(ways, if dirty { key } else { key.clean() });
        (pushed_out != E::EMPTY).then(|| {
            let entry: u64 = pushed_out.into();
            Victim { line: self.indexing.join(index, entry >> 1), dirty: entry & 1 == 1 }
        })
    }

    /// Removes the line if present; returns whether it was dirty.
    fn remove(&mut self, line: u64) -> Option<bool> {
        let (set, key) = self.locate(line);
        let way = set.find(key)?;
        Some(set.take(way) == key)
    }

    /// Marks a present line dirty without a use; false if absent.
    fn mark_dirty(&mut self, line: u64) -> bool {
        let (set, key) = self.locate(line);
        set.find(key).map(|way| set.mark_dirty(way)).is_some()
    }

    fn contains(&mut self, line: u64) -> bool {
        let (set, key) = self.locate(line);
        set.find(key).is_some()
    }

    #[inline(always)]
    fn prefetch_set_of(&self, line: u64) {
        let (set, _) = self.indexing.split(line);
        crate::cache::host_prefetch(std::slice::from_ref(&self.sets[set]));
    }

    /// The same sets with 64-bit entries.
    fn widened(&self) -> LruSets<u64> {
        let widen = |&entry: &E| if entry == E::EMPTY { u64::EMPTY } else { entry.into() };
        LruSets {
            indexing: self.indexing,
            ways: self.ways,
            sets: self.sets.iter().map(|set| Set(set.0.each_ref().map(widen))).collect(),
            write_hit_updates_recency: self.write_hit_updates_recency,
        }
    }
}

/// What `SingleCore` asks of a level's array (lines are a group's lines, see `SetGroups`).
trait Array {
    /// A lookup as a use: refreshes recency (unless a write hit is no use) and marks a write
    /// dirty; whether the line was present.
    fn access(&mut self, line: u64, write: bool) -> bool;
    /// Installs an absent line; returns the line evicted for it, if any.
    fn insert(&mut self, line: u64, dirty: bool) -> Option<Victim>;
    /// Removes the line if present; returns whether it was dirty.
    fn remove(&mut self, line: u64) -> Option<bool>;
    /// Marks a present line dirty without a use; false if absent.
    fn mark_dirty(&mut self, line: u64) -> bool;
    fn contains(&mut self, line: u64) -> bool;
    /// Starts loading the host memory of the line's set.
    fn prefetch_set_of(&self, line: u64);
    /// Whether a read hit leaves the line the most recent of its set, known without a lookup.
    fn ordered(&self) -> bool;
    /// Largest line the array holds as it is.
    fn max_line(&self) -> u64;
}

/// Implements `Array` by calling the inherent methods of the same names.
macro_rules! array {
    ($t:ty) => {
        impl Array for $t {
            #[inline(always)]
            fn access(&mut self, line: u64, write: bool) -> bool {
                <$t>::access(self, line, write)
            }
            #[inline(always)]
            fn insert(&mut self, line: u64, dirty: bool) -> Option<Victim> {
                <$t>::insert(self, line, dirty)
            }
            #[inline(always)]
            fn remove(&mut self, line: u64) -> Option<bool> {
                <$t>::remove(self, line)
            }
            #[inline(always)]
            fn mark_dirty(&mut self, line: u64) -> bool {
                <$t>::mark_dirty(self, line)
            }
            #[inline(always)]
            fn contains(&mut self, line: u64) -> bool {
                <$t>::contains(self, line)
            }
            #[inline(always)]
            fn prefetch_set_of(&self, line: u64) {
                <$t>::prefetch_set_of(self, line)
            }
            #[inline(always)]
            fn ordered(&self) -> bool {
                <$t>::ordered(self)
            }
            fn max_line(&self) -> u64 {
                <$t>::max_line(self)
            }
        }
    };
}

array!(LruSets<u32>);
array!(Level);

/// One level's array, of whichever kind it needs.
enum Level {
    /// LRU in 32-bit entries.
    Lru(LruSets<u32>),
    /// An LRU level whose tags outgrew 32-bit entries.
    WideLru(LruSets<u64>),
    /// Any other policy, or LRU with more ways or sets not a power of two: the general array.
    General(Cache),
}

/// Calls the same method on whichever array `$level` holds.
macro_rules! on_array {
    ($level:expr, $sets:ident => $call:expr, $cache:ident => $cache_call:expr) => {
        match $level {
            Level::Lru($sets) => $call,
            Level::WideLru($sets) => $call,
            Level::General($cache) => $cache_call,
        }
    };
}

impl Level {
    /// The level's array for one of `groups` groups of its sets (see `set_groups`).
    fn new(spec: &CacheSpec, groups: usize) -> Level {
        let geometry = group_geometry(spec, groups);
        if LruSets::<u32>::fit(&geometry) {
            Level::Lru(LruSets::new(&geometry))
        } else {
            Level::General(Cache::new(&geometry))
        }
    }

    fn ordered(&self) -> bool {
        !matches!(self, Level::General(_))
    }

    /// Largest line the array can hold as it is.
    fn max_line(&self) -> u64 {
        match self {
            Level::Lru(sets) => sets.max_line(),
            Level::WideLru(_) | Level::General(_) => u64::MAX,
        }
    }

    /// The same array, in 64-bit entries if it had 32-bit ones.
    fn widened(self) -> Level {
        match self {
            Level::Lru(sets) => Level::WideLru(sets.widened()),
            other => other,
        }
    }

    #[inline(always)]
    fn access(&mut self, line: u64, write: bool) -> bool {
        on_array!(self, sets => sets.access(line, write), cache => cache.access(Line(line), write).hit())
    }

    fn insert(&mut self, line: u64, dirty: bool) -> Option<Victim> {
        on_array!(self, sets => sets.insert(line, dirty), cache => cache
            .insert(Line(line), dirty, u64::MAX)
            .map(|evicted| Victim { line: evicted.line.0, dirty: evicted.dirty }))
    }

    fn remove(&mut self, line: u64) -> Option<bool> {
        on_array!(self, sets => sets.remove(line), cache => cache.remove(Line(line)))
    }

    fn mark_dirty(&mut self, line: u64) -> bool {
        on_array!(self, sets => sets.mark_dirty(line), cache => cache.mark_dirty(Line(line)))
    }

    fn contains(&mut self, line: u64) -> bool {
        on_array!(self, sets => sets.contains(line), cache => cache.contains(Line(line)))
    }

    #[inline(always)]
    fn prefetch_set_of(&self, line: u64) {
        on_array!(self, sets => sets.prefetch_set_of(line), cache => cache.prefetch_set_of(Line(line)))
    }
}

/// What one level counted: requests by kind and outcome (`[write][hit]`, one addition per
/// request) and dirty lines evicted.
#[derive(Debug, Clone, Default)]
struct Counts {
    requests: [[u64; 2]; 2],
    writebacks: u64,
}

impl Counts {
    #[inline(always)]
    fn request(&mut self, write: bool, hit: bool) {
        self.requests[write as usize][hit as usize] += 1;
    }

    fn add(&mut self, other: &Counts) {
        for (sum, count) in self.requests.iter_mut().flatten().zip(other.requests.iter().flatten()) {
            *sum += count;
        }
        self.writebacks += other.writebacks;
    }

    /// As `Hierarchy` keeps them (`LevelStats` has pycachesim's definitions).
    fn stats(&self) -> LevelStats {
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

/// One core's L1D, L2 and L3 over memory, or one group of their sets, and the counters a replay
/// reports.
struct SingleCore<A> {
    l1: A,
    l2: A,
    l3: A,
    l2_relation: Relation,
    l3_relation: Relation,
    /// L1D, L2 and L3.
    counts: [Counts; 3],
    /// Lines read from memory (lines written to it are the L3's writebacks).
    memory_reads: u64,
    /// A line known to be the most recent of its L1 set (an LRU one), shifted left by one, or all
    /// ones: a read of it is a hit that changes only the L1 counters, and so is a write if bit 0
    /// is set. That bit is set by a write hit, which dropped any copy in a victim L3, and only
    /// accesses to the line follow until it is cleared, so none can have made another.
    l1_first: u64,
    /// Whether L1 keeps its sets in recency order, so that a read hit leaves the line first.
    l1_ordered: bool,
}

impl<A: Array> SingleCore<A> {
    /// Empty caches of a validated platform that `unsupported` accepts, each level's array built
    /// by `array` (one of `SetGroups`'s groups of sets).
    fn new(platform: &PlatformSpec, array: impl Fn(&CacheSpec) -> A) -> SingleCore<A> {
        let (l1, l2, l3) = (array(&platform.l1d), array(&platform.l2), array(&platform.l3));
        SingleCore {
            l1_ordered: l1.ordered(),
            l1,
            l2,
            l3,
            l2_relation: platform.l2.relation,
            l3_relation: platform.l3.relation,
            counts: Default::default(),
            memory_reads: 0,
            // Not a line: lines are addresses shifted right by at least 3 bits.
            l1_first: u64::MAX,
        }
    }

    /// The same caches with other arrays.
    fn with_arrays<B>(self, mut convert: impl FnMut(A) -> B) -> SingleCore<B> {
        SingleCore {
            l1: convert(self.l1),
            l2: convert(self.l2),
            l3: convert(self.l3),
            l2_relation: self.l2_relation,
            l3_relation: self.l3_relation,
            counts: self.counts,
            memory_reads: self.memory_reads,
            l1_first: self.l1_first,
            l1_ordered: self.l1_ordered,
        }
    }

    /// Largest line every level holds as it is.
    fn max_line(&self) -> u64 {
        self.l1.max_line().min(self.l2.max_line()).min(self.l3.max_line())
    }

    /// Carries out accesses sorted by `SetGroups`, in order, starting to load the host memory of
    /// the L3 set of the one `PREFETCH_DISTANCE` places ahead: a group's L3 sets need not stay in
    /// the host's caches between batches (its L1 and L2 sets are a few KiB).
    fn replay(&mut self, accesses: &[u64]) {
        for (i, &access) in accesses.iter().enumerate() {
            if let Some(&ahead) = accesses.get(i + PREFETCH_DISTANCE) {
                self.l3.prefetch_set_of(ahead >> 1);
            }
            self.access(access >> 1, access & 1 == 1);
        }
    }

    /// A demand load or store, as `Hierarchy::core_access` carries it out for one core.
    #[inline(always)]
    fn access(&mut self, line: u64, write: bool) {
        if self.l1_first | !write as u64 == line << 1 | 1 {
            self.counts[0].request(write, true);
            return;
        }
        let hit = self.l1.access(line, write);
        self.counts[0].request(write, hit);
        if !hit {
            self.serve_l1_miss(line, write);
        } else if write {
            // A write hit that moves its line first moves the known one back; one that does not
            // leaves every line in place, and the known one dirty if it is that line.
            self.l1_first = if line == self.l1_first >> 1 { line << 1 | 1 } else { u64::MAX };
            self.invalidate_l3_victim_copy(line);
        } else if self.l1_ordered {
            self.l1_first = line << 1;
        }
    }

    /// A store makes the only valid copy its own: a victim L3's copy is dropped (an inclusive or
    /// non-inclusive L3 keeps its copy, there being no other core to invalidate).
    fn invalidate_l3_victim_copy(&mut self, line: u64) {
        if self.l3_relation == Relation::Exclusive {
            self.l3.remove(line);
        }
    }

    #[inline(never)]
    fn serve_l1_miss(&mut self, line: u64, write: bool) {
        self.l1_first = u64::MAX;
        let hit = self.l2.access(line, false);
        self.counts[1].request(false, hit);
        if hit {
            if write {
                self.invalidate_l3_victim_copy(line);
            }
        } else {
            let dirty = self.fetch_below_l2(line);
            self.fill_l2(line, dirty);
        }
        self.fill_l1(line, write);
    }

    /// Reads a line missing from L1 and L2 from the L3 or memory; returns whether the copy moved
    /// up dirty (out of a victim L3).
    fn fetch_below_l2(&mut self, line: u64) -> bool {
        let hit = self.l3.access(line, false);
        self.counts[2].request(false, hit);
        let exclusive = self.l3_relation == Relation::Exclusive;
        if hit {
            exclusive && self.l3.remove(line).unwrap_or(false)
        } else {
            self.memory_reads += 1;
            if !exclusive {
                self.install_l3(line, false);
            }
            false
        }
    }

    fn fill_l1(&mut self, line: u64, dirty: bool) {
        let Some(victim) = self.l1.insert(line, dirty) else { return };
        if victim.dirty {
            self.counts[0].writebacks += 1;
            let hit = self.l2.access(victim.line, true);
            self.counts[1].request(true, hit);
            if !hit {
                // Only a non-inclusive L2 misses here: write-allocate fetches the line first.
                self.fetch_below_l2(victim.line);
                self.fill_l2(victim.line, true);
            }
        }
    }

    fn fill_l2(&mut self, line: u64, dirty: bool) {
        let Some(victim) = self.l2.insert(line, dirty) else { return };
        let mut dirty = victim.dirty;
        if self.l2_relation == Relation::Inclusive {
            dirty |= self.l1.remove(victim.line).unwrap_or(false);
        }
        if victim.dirty {
            self.counts[1].writebacks += 1;
        }
        match self.l3_relation {
            Relation::Exclusive => {
                let present = if dirty { self.l3.mark_dirty(victim.line) } else { self.l3.contains(victim.line) };
                if !present {
                    self.install_l3(victim.line, dirty);
                }
            }
            Relation::Inclusive => {
                if dirty && !self.l3.mark_dirty(victim.line) {
                    self.install_l3(victim.line, true);
                }
            }
            Relation::NonInclusive => {
                if dirty {
                    let hit = self.l3.access(victim.line, true);
                    self.counts[2].request(true, hit);
                    if !hit {
                        // Write-allocate: fetch from memory, then install dirty.
                        self.memory_reads += 1;
                        self.install_l3(victim.line, true);
                    }
                }
            }
        }
    }

    fn install_l3(&mut self, line: u64, dirty: bool) {
        let Some(victim) = self.l3.insert(line, dirty) else { return };
        let mut dirty = victim.dirty;
        if self.l3_relation == Relation::Inclusive {
            // Back-invalidation: the core's copies go too, and their data with the victim.
            let l1 = self.l1.remove(victim.line).unwrap_or(false);
            let l2 = self.l2.remove(victim.line).unwrap_or(false);
            dirty |= l1 || l2;
        }
        if dirty {
            self.counts[2].writebacks += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::preset;

    /// 32-bit entries (searched and rewritten by `quarters` on x86-64) and 64-bit ones (plain
    /// loops) answer and hold the same under random operations, for every way count.
    #[test]
    fn narrow_and_wide_sets_behave_alike() {
        let mut rng = crate::units::Rng::new(17);
        for ways in 1..=SET_WAYS {
            for write_hit_updates_recency in [false, true] {
                let geometry = Geometry {
                    sets: 4,
                    ways,
                    policy: "lru",
                    options: replacement::PolicyOptions { write_hit_updates_recency },
                };
                let (mut narrow, mut wide) = (LruSets::<u32>::new(&geometry), LruSets::<u64>::new(&geometry));
                for _ in 0..4000 {
                    let line = rng.next_u64() % (8 * ways as u64 + 8);
                    let flag = rng.next_u64() % 2 == 0;
                    let (a, b) = match rng.next_u64() % 5 {
                        0 | 1 => (narrow.access(line, flag) as u64, wide.access(line, flag) as u64),
                        2 if !narrow.contains(line) => {
                            let victim = |v: Option<Victim>| v.map_or(u64::MAX, |v| v.line << 1 | v.dirty as u64);
                            (victim(narrow.insert(line, flag)), victim(wide.insert(line, flag)))
                        }
                        3 => (narrow.mark_dirty(line) as u64, wide.mark_dirty(line) as u64),
                        _ => (narrow.remove(line).map_or(2, u64::from), wide.remove(line).map_or(2, u64::from)),
                    };
                    assert_eq!(a, b, "{ways} ways");
                }
                let widened = narrow.widened();
                let entries = |sets: &LruSets<u64>| sets.sets.iter().map(|set| set.0).collect::<Vec<_>>();
                assert_eq!(entries(&widened), entries(&wide), "{ways} ways");
            }
        }
    }

    /// The groups are the largest power of two dividing every level's set count, up to 64, and
    /// one when a level's policy shares state between sets.
    #[test]
    fn set_groups_divide_every_level_and_need_per_set_policies() {
        let turin = preset("turin-9655").unwrap();
        assert_eq!(set_groups(&turin), MAX_GROUPS, "64, 1024 and 32768 sets");
        let mut few_sets = turin.clone();
        few_sets.l1d.size_kib = 12;
        assert_eq!(set_groups(&few_sets), 16, "12 KiB of 12 ways: 16 sets");
        let mut odd_sets = turin.clone();
        odd_sets.l1d.ways = 16;
        assert_eq!(odd_sets.l1d.geometry().sets, 48);
        assert_eq!(set_groups(&odd_sets), 16, "48 sets: 3 x 16");
        for policy in ["tree_plru", "srrip"] {
            let mut per_set = turin.clone();
            per_set.l3.replacement = policy.into();
            assert_eq!(set_groups(&per_set), MAX_GROUPS, "{policy}");
        }
        for policy in ["brrip", "drrip"] {
            let mut shared = turin.clone();
            shared.l2.replacement = policy.into();
            assert_eq!(set_groups(&shared), 1, "{policy}");
        }
    }

    /// Every group is run once: its owner takes its range from the front, the others from the
    /// back of the fullest range.
    #[test]
    fn ranges_hand_out_every_group_once() {
        let ranges = Ranges::new(10, 3);
        let taken: Vec<_> = std::iter::from_fn(|| ranges.next(1)).collect();
        assert_eq!(taken, [4, 5, 6, 7, 3, 2, 9, 1, 8, 0], "own range 4..8, then 0..4 and 8..10 from the back");
        for threads in [1, 2, 3, 8] {
            let ranges = &Ranges::new(64, threads);
            let mut taken: Vec<usize> = std::thread::scope(|scope| {
                let takers: Vec<_> = (0..threads)
                    .map(|thread| scope.spawn(move || std::iter::from_fn(|| ranges.next(thread)).collect::<Vec<_>>()))
                    .collect();
                takers.into_iter().flat_map(|taker| taker.join().unwrap()).collect()
            });
            taken.sort();
            assert_eq!(taken, (0..64).collect::<Vec<_>>(), "{threads} threads");
        }
    }

    /// Runs of accesses to one line in a part of a batch count alike merged.
    #[test]
    fn merged_runs_count_alike() {
        let platform = preset("turin-9655").unwrap();
        // Lines 0..4095, each accessed `run` times in a row: read in the first half of the run,
        // written in the second; then each line once, written.
        let access = |run: u64, i: u64| ((i % run >= run / 2) as u64) << 62 | (i / run % 4096) << 6;
        let trace: Vec<[u8; 8]> =
            (0..80_000).map(|i| access(4, i)).chain((0..40_000).map(|i| access(1, i))).map(u64::to_le_bytes).collect();
        let replay = |batches: &mut dyn Iterator<Item = &[[u8; 8]]>| {
            let mut groups = SetGroups::new(&platform);
            batches.for_each(|batch| _ = groups.replay(batch, 6));
            (groups.line_ops(), groups.level_stats(), groups.memory_lines(), groups.repeats.requests)
        };
        let (line_ops, stats, memory, repeats) = replay(&mut trace.chunks(BATCH));
        // Runs of read, read, write, write in LRU sets: the second read and write are passed over.
        assert_eq!(repeats, [[0, 20_000], [0, 20_000]]);
        // One access per batch merges nothing.
        let (one_line_ops, one_stats, one_memory, one_repeats) = replay(&mut trace.chunks(1));
        assert_eq!(one_repeats, [[0; 2]; 2]);
        assert_eq!((line_ops, stats, memory), (one_line_ops, one_stats, one_memory));
    }
}
