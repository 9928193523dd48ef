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
//! by group, then run group by group, by one of two engines (`Engine`): access after access
//! through the levels each reaches (`SingleCore::access`), or, where L2 and L3 are non-inclusive
//! and the host has AVX-512, level after level without a branch on any outcome
//! (`replay_by_level`).
//!
//! An LRU level of up to 16 ways and a power-of-two number of sets keeps each set's lines in
//! recency order (`LruSets`, in `lru_sets`): entries of a tag and a dirty bit, 32 bits wide while
//! the trace's addresses allow (so a set is one host cache line and a 32 MiB L3 stays within a
//! few MiB of host cache), 64 bits after. Other levels are the general `Cache`, whose policies
//! keep per-way state.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use super::crew::Crew;
#[cfg(target_arch = "x86_64")]
use super::lru_sets::avx512::{self, Avx512};
use super::lru_sets::{Entry, LruSets, SetKernel, SET_WAYS};
use super::pass::{Counts, Pass, Victim, PREFETCH_DISTANCE};
use super::{replay_record, replay_records, AccessKind, LineSink, Record};
use steer_sim::cache::{replacement, Cache, Geometry};
use steer_sim::hierarchy::LevelStats;
use steer_sim::platform::{CacheSpec, MaskAgent, PlatformSpec, Relation};
use steer_sim::units::Line;

/// Why `SingleCore` cannot stand for the general path on a platform (which then replays through it).
pub fn unsupported(platform: &PlatformSpec) -> Option<String> {
    for (name, spec) in [("l1d", &platform.l1d), ("l2", &platform.l2), ("l3", &platform.l3)] {
        // Prefetches need the general path's in-flight bookkeeping.
        if spec.prefetcher.any() {
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

/// Records `SetGroups` replays as one batch (sorted by group, then run) per host thread it uses:
/// 1 MiB of binary records per thread, as much sorted, which its host core's L2 holds. On two host
/// cores `scripts/bench.py`'s traces (2M loads) replay as fast in batches of 256K records as of
/// 64K for the mixed one and 9% faster for the streaming one, which waits less between the two
/// steps of a batch; 512K are 10–15% slower. On one host core, 64K and 128K are as fast, 256K
/// 17% slower.
pub(super) const BATCH_PER_THREAD: usize = 1 << 17;

/// Fewest records worth sharing between host threads.
const THREAD_MIN_BATCH: usize = 1 << 12;

/// Most host threads a replay uses (a batch gives each at least 8K records).
const MAX_THREADS: usize = 8;

/// Parts a batch is sorted in per host thread, each taken by whichever thread is free: a host
/// core slowed for a while sorts fewer of them.
const PARTS_PER_THREAD: usize = 4;

/// Into how many independent groups of sets the platform's caches split: the largest power of two,
/// up to `MAX_GROUPS`, that divides every level's set count, if every level's replacement policy
/// keeps its state per set and no level is sliced (a hashed slice ignores residues); else 1.
///
/// Why a group can run apart from the others: a line's set at each level is the line number modulo
/// the level's set count, so when `groups` divides every set count, the lines of one residue modulo
/// `groups` share sets, at every level, only with each other. Everything an access does (lookups,
/// fills, victims, back-invalidations, writebacks) concerns its own line or lines of the same set,
/// so each group's lines meet the same cache contents whether other groups' accesses come between
/// them or not; and the counters are sums.
pub fn set_groups(platform: &PlatformSpec) -> usize {
    let levels = [&platform.l1d, &platform.l2, &platform.l3];
    if levels
        .iter()
        .any(|spec| spec.slices > 1 || !replacement::find(&spec.replacement).is_some_and(|policy| policy.per_set))
    {
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
/// its accesses (each host thread its share of the groups, taking a group's accesses from every
/// part in turn; see `run_groups`), in order or level by level (`Engine`). So a replay counts
/// exactly as one core in trace order, and a group's sets are small enough to stay in the host
/// core's caches while it runs.
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
    /// Records replayed as one batch (see `BATCH_PER_THREAD`).
    batch: usize,
    /// The host threads beside the calling one; started by the first batch shared between
    /// threads.
    crew: Option<Crew>,
    /// L1 hits the sorting passed over (see `Sorter`).
    repeats: Counts,
    engine: Engine,
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
    /// L1 hits passed over, and the writes among them (two sums rather than a count per kind
    /// indexed by it, which the host keeps in memory).
    repeats: u64,
    write_repeats: u64,
}

#[derive(Clone, Copy)]
struct Run {
    line: u64,
    /// Bit 0 set once the run has read the line, bit 1 once it has written it (see `Run::kind`).
    kinds: u8,
}

impl Run {
    /// The bit of `kinds` for a read or a write.
    #[inline(always)]
    fn kind(write: bool) -> u8 {
        1 << write as u8
    }
}

impl Sorter<'_> {
    /// Sorts binary records as `replay_records` would; returns how many were reads or writes, or
    /// where the first record of undefined kind (3) is, sorting stopped there.
    /// A record that reads (or writes) the line of the current run after the run has read (or
    /// written) it is counted as a repeat before it is decoded: the usual case in a run (7 in 8
    /// records of `scripts/bench.py`'s streaming trace).
    pub(super) fn sort_binary(&mut self, records: &[[u8; 8]], line_bits: u32) -> Result<u64, usize> {
        // Bits that agree between records of one kind (bits 63 and 62) to one line.
        let kind_and_line = !((1u64 << line_bits) - 1);
        // What no record compared with it matches: a read compared with a write, a write with
        // a read (others, fetches and undefined records included, are compared with the read).
        const NO_REPEAT: [u64; 2] = [AccessKind::Write.code() << 62, AccessKind::Read.code() << 62];
        // A record (its kind and line) that would repeat the run: a read, then a write.
        let mut repeats = NO_REPEAT;
        // Counted here rather than in `self.tally`, which the host would keep in memory.
        let (mut repeated, mut repeated_writes, mut fetches) = (0, 0, 0);
        for (index, &record) in records.iter().enumerate() {
            let bits = u64::from_le_bytes(record);
            let write = bits >> 62 == AccessKind::Write.code();
            let repeat = std::hint::select_unpredictable(write, repeats[1], repeats[0]);
            if (bits ^ repeat) & kind_and_line == 0 {
                repeated += 1;
                repeated_writes += write as u64;
                continue;
            }
            if bits >> 62 == 3 {
                return Err(index);
            }
            if !replay_record(self, record, line_bits) {
                fetches += 1;
                continue;
            }
            let Run { line, kinds } = self.run;
            let repeat = |write: bool| (write as u64) << 62 | line << line_bits;
            repeats = [false, true].map(|write| {
                if kinds & Run::kind(write) != 0 {
                    repeat(write)
                } else {
                    NO_REPEAT[write as usize]
                }
            });
        }
        self.tally.repeats += repeated;
        self.tally.write_repeats += repeated_writes;
        Ok(records.len() as u64 - fetches)
    }

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
            if self.run.kinds & Run::kind(write) != 0 {
                self.tally.repeats += 1;
                self.tally.write_repeats += write as u64;
                return;
            }
            self.run.kinds |= Run::kind(write);
        } else {
            let kinds = if !write && self.l1_ordered { Run::kind(false) } else { 0 };
            self.run = Run { line, kinds };
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
        let (crew, repeats, engine) = (None, Counts::default(), Engine::for_platform(platform));
        let batch = BATCH_PER_THREAD * threads;
        SetGroups { groups, group_bits, narrow_limit, queues, threads, batch, crew, repeats, engine }
    }

    /// `new`, running the groups with `engine`.
    ///
    /// # Panics
    /// If `engine` would not count right on the platform or cannot run on this host.
    #[cfg(test)]
    pub(super) fn with_engine(platform: &PlatformSpec, engine: Engine) -> SetGroups {
        assert!(engine == Engine::InOrder || Engine::by_level_applies(platform), "{engine:?} on this platform");
        #[cfg(target_arch = "x86_64")]
        assert!(engine != Engine::ByLevelAvx512 || avx512::available(), "AVX-512 on this host");
        SetGroups { engine, ..SetGroups::new(platform) }
    }

    /// Records replayed as one batch.
    pub(super) fn batch(&self) -> usize {
        self.batch
    }

    /// How many parts a batch of `records` records is best sorted in: `PARTS_PER_THREAD` per
    /// host thread, or one on a single host thread or if it is too small to share.
    pub(super) fn parts_for(&self, records: usize) -> usize {
        if records < THREAD_MIN_BATCH || self.threads == 1 {
            1
        } else {
            self.queues.len()
        }
    }

    /// Replays the reads and writes among `records` (see `replay_records`); returns how many.
    pub(super) fn replay(&mut self, records: &[impl Record], line_bits: u32) -> u64 {
        let mut replayed = 0;
        for batch in records.chunks(self.batch) {
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
                    let run = Run { line: u64::MAX, kinds: 0 };
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
            self.repeats.requests[0][1] += tally.repeats - tally.write_repeats;
            self.repeats.requests[1][1] += tally.write_repeats;
        }
        if max_line >> group_bits > self.narrow_limit {
            widen(&mut self.groups);
            self.narrow_limit = u64::MAX;
        }
        let (engine, queues) = (self.engine, &mut self.queues[..count]);
        on_groups!(&mut self.groups, cores => run_groups(crew, threads, engine, cores, queues));
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

/// Runs the sorted accesses of a batch with `engine`, `parts` holding each part's sorting (and
/// left empty): every group takes its accesses from the parts in order, and the groups are shared
/// between `threads` host threads, `LOCKSTEP` at a time (see `replay_by_level`).
///
/// Each thread owns a consecutive range of groups and runs it from the front, so that a group's
/// sets stay in one host core's caches from batch to batch; a thread done with its own range
/// takes groups from the back of the others'. On a virtual machine one host core often ran some
/// 30% slower than the other for a whole replay.
fn run_groups<A: Array + Send>(
    crew: Option<&Crew>,
    threads: usize,
    engine: Engine,
    cores: &mut [SingleCore<A>],
    parts: &mut [Vec<Vec<u64>>],
) {
    let units: Vec<_> = cores.chunks_mut(LOCKSTEP).map(Mutex::new).collect();
    let ranges = Ranges::new(units.len(), threads);
    let sorted: &[Vec<Vec<u64>>] = parts;
    let runs = (0..threads).map(|thread| {
        let (units, ranges) = (&units, &ranges);
        move || {
            while let Some(index) = ranges.next(thread) {
                let mut cores = units[index].lock().unwrap_or_else(PoisonError::into_inner);
                let groups = index * LOCKSTEP..index * LOCKSTEP + cores.len();
                for queues in sorted {
                    let accesses: Vec<&[u64]> = queues[groups.clone()].iter().map(Vec::as_slice).collect();
                    replay_unit(engine, &mut cores, &accesses);
                }
            }
        }
    });
    on_threads(crew, runs.collect());
    parts.iter_mut().flatten().for_each(Vec::clear);
}

/// Runs a few groups' accesses (a slice each) with `engine`.
fn replay_unit<A: Array>(engine: Engine, cores: &mut [SingleCore<A>], accesses: &[&[u64]]) {
    match engine {
        Engine::InOrder => cores.iter_mut().zip(accesses).for_each(|(core, accesses)| core.replay(accesses)),
        #[cfg(test)]
        Engine::ByLevel => replay_by_level::<A, super::lru_sets::Portable>(cores, accesses),
        // SAFETY: `SetGroups` takes this engine only where the host has AVX-512.
        #[cfg(target_arch = "x86_64")]
        Engine::ByLevelAvx512 => unsafe { replay_by_level_avx512(cores, accesses) },
    }
}

/// `replay_by_level` with AVX-512 (`Avx512`), compiled for it.
///
/// # Safety
/// The host must have AVX-512 (`avx512::available`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn replay_by_level_avx512<A: Array>(cores: &mut [SingleCore<A>], accesses: &[&[u64]]) {
    replay_by_level::<A, Avx512>(cores, accesses);
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
    /// Starts loading the host memory of the line's set.
    fn prefetch_set_of(&self, line: u64);
    /// Carries out `requests` in order on a level that sees nothing but its requests, recording
    /// each outcome in `pass`: a hit is a use (as `access`), a miss fills the line, dirty if
    /// written. `K` searches and rewrites narrow LRU sets; with `PREFETCH`, starts loading the
    /// host memory of each request's set some requests ahead.
    /// With `CLEAN`, the caller knows that the level holds no dirty line and `requests` has no
    /// write.
    fn run_pass<K: SetKernel, const PREFETCH: bool, const CLEAN: bool>(&mut self, requests: &[u64], pass: &mut Pass);
    /// The level's only set, if it is one set of 32-bit LRU entries (see `LruSets::lone_set`).
    fn lone_set(&mut self) -> Option<(&mut [u32; SET_WAYS], usize, bool)>;
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
            fn prefetch_set_of(&self, line: u64) {
                <$t>::prefetch_set_of(self, line)
            }
            #[inline(always)]
            fn run_pass<K: SetKernel, const PREFETCH: bool, const CLEAN: bool>(
                &mut self,
                requests: &[u64],
                pass: &mut Pass,
            ) {
                <$t>::run_pass::<K, PREFETCH, CLEAN>(self, requests, pass)
            }
            fn lone_set(&mut self) -> Option<(&mut [u32; SET_WAYS], usize, bool)> {
                <$t>::lone_set(self)
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

    #[inline(always)]
    fn prefetch_set_of(&self, line: u64) {
        on_array!(self, sets => sets.prefetch_set_of(line), cache => cache.prefetch_set_of(Line(line)))
    }

    #[inline(always)]
    fn run_pass<K: SetKernel, const PREFETCH: bool, const CLEAN: bool>(&mut self, requests: &[u64], pass: &mut Pass) {
        let cache = match self {
            Level::Lru(sets) => return sets.run_pass::<K, PREFETCH, CLEAN>(requests, pass),
            Level::WideLru(sets) => return sets.run_pass::<K, PREFETCH, CLEAN>(requests, pass),
            Level::General(cache) => cache,
        };
        for &request in requests {
            let (line, write) = Pass::decode(request);
            let hit = cache.access(Line(line), write).hit();
            let evicted = if hit { None } else { cache.insert(Line(line), write, u64::MAX) };
            let victim = evicted.map_or(Victim { line: 0, dirty: false }, |evicted| Victim {
                line: evicted.line.0,
                dirty: evicted.dirty,
            });
            pass.record::<false>(line, write, hit, victim);
        }
    }

    fn lone_set(&mut self) -> Option<(&mut [u32; SET_WAYS], usize, bool)> {
        on_array!(self, sets => sets.lone_set(), _cache => None)
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
    /// What L1 and L2 passed down in a replay by level (see `replay_by_level`), kept for their
    /// capacity.
    passed_down: [Vec<u64>; 2],
    /// Whether a replay by level has carried out a write (until then, no line is dirty).
    written: bool,
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
            passed_down: Default::default(),
            written: false,
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
            passed_down: self.passed_down,
            written: self.written,
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
        // A clean victim whose L1 copy was dirty carries that data down: a writeback as a chain of
        // caches counts it (`ChainWrites`), and a write request to the L3 as every dirty victim.
        if dirty {
            self.counts[1].writebacks += 1;
        }
        match self.l3_relation {
            // A line leaves an exclusive L3 when the L2 takes it, and one core's L2 is the only
            // way in, so the victim has no copy there.
            Relation::Exclusive => {
                if dirty {
                    self.counts[2].request(true, false);
                }
                self.install_l3(victim.line, dirty)
            }
            Relation::Inclusive => {
                if dirty {
                    let hit = self.l3.mark_dirty(victim.line);
                    self.counts[2].request(true, hit);
                    if !hit {
                        self.install_l3(victim.line, true);
                    }
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

/// How `SetGroups` runs each group's accesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Engine {
    /// Access after access, each through every level it reaches (`SingleCore::access`).
    InOrder,
    /// Level after level (see `replay_by_level`), sets searched with the portable operations:
    /// the algorithm without AVX-512, for tests on any host (it is no faster than in order).
    #[cfg(test)]
    ByLevel,
    /// Level after level, sets searched and rewritten with AVX-512.
    #[cfg(target_arch = "x86_64")]
    ByLevelAvx512,
}

impl Engine {
    /// The faster engine that counts exactly for the platform on this host: level after level
    /// where that applies and the host has AVX-512, else in order. With AVX-512, on two host
    /// cores, level after level replays `scripts/bench.py`'s traces of 2M loads in 40% less time
    /// than in order (mixed 22.5 -> 13.6 ms, streaming 6.0 -> 3.9), its mixed trace with writes
    /// in 25% less (28.7 -> 21.1) and its streaming one with writes about as fast (9.6). With the
    /// portable operations it was no faster on the loads, and up to twice as slow with writes.
    pub(super) fn for_platform(platform: &PlatformSpec) -> Engine {
        #[cfg(target_arch = "x86_64")]
        if Engine::by_level_applies(platform) && avx512::available() {
            return Engine::ByLevelAvx512;
        }
        Engine::InOrder
    }

    /// Whether a replay level after level counts as one in order: when L2 and L3 are both
    /// non-inclusive, no level removes or marks lines of another, so each level sees exactly
    /// the requests the level above passes down (its misses, then its dirty victims), in order.
    pub(super) fn by_level_applies(platform: &PlatformSpec) -> bool {
        platform.l2.relation == Relation::NonInclusive && platform.l3.relation == Relation::NonInclusive
    }
}

/// Groups a host thread runs at once, level after level: their L1s in step (see `replay_by_level`).
const LOCKSTEP: usize = 4;

/// Replays the accesses of `cores` (one slice each) level after level (where
/// `Engine::by_level_applies`): all the accesses through L1, then what L1 passed down through
/// L2, then what L2 passed down through L3. Each request is carried out without a branch on its
/// outcome (`Array::run_pass`): with nothing later waiting on the outcome of a level's
/// request, the host core runs on through outcomes it cannot predict, where a replay in order
/// stalls on each one it mispredicts. `LOCKSTEP` cores whose L1 is one set each (the usual
/// case: 64 groups of 64 L1 sets) run their L1s in step, an access of each in turn, their sets
/// in registers: a single set's requests depend on each other, the four cores' do not.
#[inline(always)]
fn replay_by_level<A: Array, K: SetKernel>(cores: &mut [SingleCore<A>], accesses: &[&[u64]]) {
    // Until a group sees a write, none of its lines is dirty: its requests then take the
    // `CLEAN` path, which leaves out dirty bits and victims.
    for (core, accesses) in cores.iter_mut().zip(accesses) {
        core.written |= accesses.iter().fold(0, |bits, access| bits | access) & 1 == 1;
    }
    if cores.iter().any(|core| core.written) {
        replay_by_level_as::<A, K, false>(cores, accesses);
    } else {
        replay_by_level_as::<A, K, true>(cores, accesses);
    }
}

/// `replay_by_level`, knowing (`CLEAN`) or not that no line is dirty nor any access a write.
#[inline(always)]
fn replay_by_level_as<A: Array, K: SetKernel, const CLEAN: bool>(cores: &mut [SingleCore<A>], accesses: &[&[u64]]) {
    let (mut l1s, mut passes, mut l1_counts) = (Vec::new(), Vec::new(), Vec::new());
    for (core, accesses) in cores.iter_mut().zip(accesses) {
        let SingleCore { l1, passed_down: [to_l2, _], counts: [counts, ..], .. } = core;
        l1s.push(l1);
        passes.push(Pass::new(to_l2, accesses.len()));
        l1_counts.push(counts);
    }
    let mut in_step = 0;
    if let (Ok(l1s), Ok(passes), Ok(&accesses)) = (
        <&mut [&mut A; LOCKSTEP]>::try_from(&mut l1s[..]),
        <&mut [Pass; LOCKSTEP]>::try_from(&mut passes[..]),
        <&[&[u64]; LOCKSTEP]>::try_from(accesses),
    ) {
        // Every L1 one set of 32-bit entries, all alike in ways and write hits.
        let sets = l1s.each_mut().map(|l1| l1.lone_set());
        let shapes = sets.each_ref().map(|set| set.as_ref().map(|&(_, ways, use_on_write)| (ways, use_on_write)));
        let alike = |&first: &(usize, bool)| shapes.iter().all(|&shape| shape == Some(first));
        if let Some((ways, use_on_write)) = shapes[0].filter(alike) {
            let sets = sets.map(|set| set.expect("every L1 has a lone set").0);
            in_step = run_lone_sets_in_step::<K, CLEAN>(sets, ways, use_on_write, accesses, passes);
        }
    }
    for ((l1, pass), accesses) in l1s.iter_mut().zip(&mut passes).zip(accesses) {
        l1.run_pass::<K, false, CLEAN>(&accesses[in_step..], pass);
    }
    for (pass, counts) in passes.into_iter().zip(l1_counts) {
        pass.finish(counts);
    }
    for core in cores {
        let [to_l2, to_l3] = &mut core.passed_down;
        run_level::<_, K, false, CLEAN>(&mut core.l2, to_l2, to_l3, &mut core.counts[1]);
        // What L3 passes down goes to memory; only the count of reads (its misses) is kept.
        core.memory_reads += run_level::<_, K, true, CLEAN>(&mut core.l3, to_l3, to_l2, &mut core.counts[2]);
    }
}

/// Runs `requests` through `level` (see `Array::run_pass`), passing down into `below`; with
/// `PREFETCH`, starts loading the host memory of each request's set some requests ahead (for
/// L3, whose sets need not stay in the host's caches). Returns the misses.
#[inline(always)]
fn run_level<A: Array, K: SetKernel, const PREFETCH: bool, const CLEAN: bool>(
    level: &mut A,
    requests: &[u64],
    below: &mut Vec<u64>,
    counts: &mut Counts,
) -> u64 {
    let mut pass = Pass::new(below, requests.len());
    level.run_pass::<K, PREFETCH, CLEAN>(requests, &mut pass);
    pass.finish(counts)
}

/// Runs `LOCKSTEP` single-set L1s in step (see `replay_by_level`), an access of each in turn
/// while every one has some, each set in a `K` register; returns how many accesses of each ran.
#[inline(always)]
fn run_lone_sets_in_step<K: SetKernel, const CLEAN: bool>(
    sets: [&mut [u32; SET_WAYS]; LOCKSTEP],
    ways: usize,
    use_on_write: bool,
    accesses: [&[u64]; LOCKSTEP],
    passes: &mut [Pass; LOCKSTEP],
) -> usize {
    let steps = accesses.iter().map(|accesses| accesses.len()).min().unwrap_or(0);
    // No closures over `K`'s operations (`array::map`, say): a closure is compiled without the
    // caller's target features, so AVX-512 operations would not be inlined into it.
    let [s0, s1, s2, s3] = sets;
    let mut registers = [K::load(s0), K::load(s1), K::load(s2), K::load(s3)];
    let [a0, a1, a2, a3] = accesses.map(|accesses| &accesses[..steps]);
    let [p0, p1, p2, p3] = passes.each_mut();
    let [r0, r1, r2, r3] = &mut registers;
    // Written out rather than a loop over the four, so that each set stays in its register.
    for i in 0..steps {
        step_lone_set::<K, CLEAN>(r0, a0[i], ways, use_on_write, p0);
        step_lone_set::<K, CLEAN>(r1, a1[i], ways, use_on_write, p1);
        step_lone_set::<K, CLEAN>(r2, a2[i], ways, use_on_write, p2);
        step_lone_set::<K, CLEAN>(r3, a3[i], ways, use_on_write, p3);
    }
    K::store(s0, *r0);
    K::store(s1, *r1);
    K::store(s2, *r2);
    K::store(s3, *r3);
    steps
}

/// One access to a single-set L1 whose set is in a register (see `run_lone_sets_in_step`).
#[inline(always)]
fn step_lone_set<K: SetKernel, const CLEAN: bool>(
    set: &mut K::Register,
    access: u64,
    ways: usize,
    use_on_write: bool,
    pass: &mut Pass,
) {
    let (line, write) = Pass::decode(access);
    let (after, hit, last) = K::use_or_fill::<CLEAN>(*set, u32::key(line), write, ways, use_on_write);
    *set = after;
    // A lone set's tags are its lines.
    pass.record::<CLEAN>(line, write, hit, Victim::of_last_way(hit, last, |tag| tag));
}

#[cfg(test)]
mod tests {
    use std::fmt::Debug;

    use super::*;
    use steer_sim::platform::preset;

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
        let mut sliced = turin.clone();
        sliced.l3.slices = 8;
        assert_eq!(set_groups(&sliced), 1, "a hashed slice ignores residues");
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
        let (line_ops, stats, memory, repeats) = replay(&mut trace.chunks(BATCH_PER_THREAD));
        // Runs of read, read, write, write in LRU sets: the second read and write are passed over.
        assert_eq!(repeats, [[0, 20_000], [0, 20_000]]);
        // One access per batch merges nothing.
        let (one_line_ops, one_stats, one_memory, one_repeats) = replay(&mut trace.chunks(1));
        assert_eq!(one_repeats, [[0; 2]; 2]);
        assert_eq!((line_ops, stats, memory), (one_line_ops, one_stats, one_memory));
    }

    /// turin-9655 with both L2 and L3 non-inclusive (where the engines by level apply), then
    /// `change` made.
    fn non_inclusive_turin(change: impl FnOnce(&mut PlatformSpec)) -> PlatformSpec {
        let mut platform = preset("turin-9655").unwrap();
        (platform.l2.relation, platform.l3.relation) = (Relation::NonInclusive, Relation::NonInclusive);
        change(&mut platform);
        platform.validate("platform").unwrap();
        platform
    }

    /// Binary records: runs of one line (as a sweep makes), a hot set and lines spread over
    /// `spread` lines, from byte `base`; `writes` in 100 of them writes, some fetches.
    fn binary_trace(seed: u64, records: usize, spread: u64, base: u64, writes: u64) -> Vec<[u8; 8]> {
        let mut rng = steer_sim::units::Rng::new(seed);
        let mut line = 0;
        (0..records)
            .map(|_| {
                line = match rng.next_u64() % 10 {
                    0..=3 => line,
                    4..=6 => rng.next_u64() % 3000,
                    _ => rng.next_u64() % spread,
                };
                let kind = match rng.next_u64() % 100 {
                    pick if pick < writes => AccessKind::Write,
                    99 => AccessKind::InstructionFetch,
                    _ => AccessKind::Read,
                };
                (kind.code() << 62 | (base + line * 64 + rng.next_u64() % 64)).to_le_bytes()
            })
            .collect()
    }

    /// What a replay by `engine` counts, the trace given in batches of `batch` records.
    fn counted(platform: &PlatformSpec, engine: Engine, trace: &[[u8; 8]], batch: usize) -> impl PartialEq + Debug {
        let mut groups = SetGroups::with_engine(platform, engine);
        let replayed: u64 = trace.chunks(batch).map(|batch| groups.replay(batch, 6)).sum();
        (replayed, groups.line_ops(), groups.level_stats(), groups.memory_lines())
    }

    /// The engines by level count exactly as the engine in order, on every kind of array and
    /// path through them: L1s of one set in step and not, a general array, 64-bit entries
    /// after 32-bit ones, and groups that take no write before taking some (`SingleCore::written`).
    #[test]
    fn engines_by_level_count_as_in_order() {
        let mut engines = vec![Engine::ByLevel];
        #[cfg(target_arch = "x86_64")]
        engines.extend(avx512::available().then_some(Engine::ByLevelAvx512));
        let platforms = [
            ("LRU", non_inclusive_turin(|_| ())),
            ("write hits use", non_inclusive_turin(|p| p.l2.write_hit_updates_recency = true)),
            ("tree-PLRU L3", non_inclusive_turin(|p| p.l3.replacement = "tree_plru".into())),
            // 128 L1 sets: two in each of the 64 groups.
            ("L1 of several sets", non_inclusive_turin(|p| (p.l1d.size_kib, p.l1d.ways) = (64, 8))),
            // 2 L1 sets: 2 groups, fewer than run in step.
            ("two groups", non_inclusive_turin(|p| (p.l1d.size_kib, p.l1d.ways) = (1, 8))),
        ];
        let reads = binary_trace(1, 60_000, 1 << 22, 0, 0);
        let later_writes = [reads.clone(), binary_trace(2, 60_000, 1 << 22, 0, 30)].concat();
        let high = [binary_trace(3, 30_000, 1 << 22, 0, 30), binary_trace(4, 30_000, 1 << 22, 1 << 50, 30)].concat();
        for (name, platform) in &platforms {
            for (trace_name, trace) in [("reads", &reads), ("writes later", &later_writes), ("high", &high)] {
                for batch in [BATCH_PER_THREAD, 5000] {
                    let in_order = counted(platform, Engine::InOrder, trace, batch);
                    for &engine in &engines {
                        let case = format!("{name}, {trace_name}, batches of {batch}, {engine:?}");
                        assert_eq!(counted(platform, engine, trace, batch), in_order, "{case}");
                    }
                }
            }
        }
    }

    /// The engine picked: by level with AVX-512 where it applies and the host has it.
    #[test]
    fn engine_by_level_where_it_applies_and_the_host_has_avx512() {
        let inclusive = preset("turin-9655").unwrap();
        assert_eq!(Engine::for_platform(&inclusive), Engine::InOrder);
        #[cfg(target_arch = "x86_64")]
        let by_level = if avx512::available() { Engine::ByLevelAvx512 } else { Engine::InOrder };
        #[cfg(not(target_arch = "x86_64"))]
        let by_level = Engine::InOrder;
        assert_eq!(Engine::for_platform(&non_inclusive_turin(|_| ())), by_level);
        assert!(!Engine::by_level_applies(&non_inclusive_turin(|p| p.l3.relation = Relation::Exclusive)));
        assert!(!Engine::by_level_applies(&non_inclusive_turin(|p| p.l2.relation = Relation::Inclusive)));
    }

    /// Binary records sorted by `Sorter::sort_binary` (which passes over repeats before decoding
    /// them) count as sorted by `replay_records`, runs of mixed kinds and fetches included.
    #[test]
    fn binary_records_sort_alike() {
        let platform = preset("turin-9655").unwrap();
        let trace = binary_trace(5, 100_000, 1 << 20, 0, 30);
        let sorted = |binary: bool| {
            let mut groups = SetGroups::new(&platform);
            let mut replayed = 0;
            for batch in trace.chunks(groups.batch()) {
                let parts = batch.chunks(batch.len().div_ceil(groups.parts_for(batch.len()))).collect();
                let sort = |part: &[[u8; 8]], sorter: &mut Sorter<'_>| {
                    if binary {
                        sorter.sort_binary(part, 6).unwrap()
                    } else {
                        replay_records(sorter, part, 6)
                    }
                };
                replayed += groups.replay_parts(parts, sort).iter().sum::<u64>();
            }
            (replayed, groups.line_ops(), groups.level_stats(), groups.memory_lines(), groups.repeats.requests)
        };
        let by_records = sorted(false);
        assert!(by_records.4.iter().all(|kind| kind[1] > 1000), "runs of both kinds: {:?}", by_records.4);
        assert_eq!(sorted(true), by_records);
    }
}
