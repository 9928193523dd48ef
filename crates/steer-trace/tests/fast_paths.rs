//! Fast paths must count exactly as the straightforward paths they stand for:
//! - a cache tries the way it used last before searching a set, keeps valid, dirty and prefetch
//!   bits per set, and LRU keeps recency ranks (skipping the update of a line already the most
//!   recent) rather than use stamps: checked against a plain cache with per-way stamps;
//! - a trace replay runs through `SetGroups`, one core's caches alone (no other cache to ask for
//!   a copy) split into independent groups of sets, sorted and run on every host core a batch at
//!   a time, with LRU sets kept in recency order in 32-bit entries until an address needs 64,
//!   and prefetches host memory ahead of the trace: checked against `core_access` on a platform
//!   with other cores and CCXs, with and without a directory, on small caches and on
//!   turin-9655's; platforms it cannot replay exactly keep the general path.
//!
//! Random operations and traces cover every replacement policy and level relation, with writes.

use steer_sim::cache::prefetch::PrefetcherSpec;
use steer_sim::cache::replacement::{self, PolicyOptions, ReplacementPolicy};
use steer_sim::cache::slice_hash::SliceHash;
use steer_sim::cache::{Cache, Evicted, Geometry, Lookup};
use steer_sim::hierarchy::{Hierarchy, Holding, LevelStats};
use steer_sim::platform::{CacheSpec, PlatformSpec, Relation, TopologySpec, WayMaskSpec};
use steer_sim::units::{Line, Rng, Time};
use steer_trace::{chain_counts, AccessKind, ReplayEngine, Replayer, TraceRecord, TraceReport};

const POLICIES: [&str; 5] = ["lru", "tree_plru", "srrip", "brrip", "drrip"];
const L2_RELATIONS: [Relation; 2] = [Relation::Inclusive, Relation::NonInclusive];
const L3_RELATIONS: [Relation; 3] = [Relation::Inclusive, Relation::NonInclusive, Relation::Exclusive];
const LINE_BYTES: u64 = 64;

/// Two CCXs of two cores, so that the general path has other caches to ask (or a directory to
/// keep). L1: 1 KiB 4-way = 4 sets; L2: 4 KiB 8-way = 8 sets; L3: 16 KiB 8-way = 32 sets.
fn platform(policy: &str, l2: Relation, l3: Relation, write_hit_updates_recency: bool) -> PlatformSpec {
    let cache = |size_kib, ways, relation| CacheSpec {
        size_kib,
        ways,
        relation,
        replacement: policy.into(),
        write_hit_updates_recency,
        ..CacheSpec::default()
    };
    let platform = PlatformSpec {
        topology: TopologySpec { sockets: 1, ccx_per_socket: 2, cores_per_ccx: 2, threads_per_core: 1 },
        l1d: cache(1, 4, Relation::Inclusive),
        l2: cache(4, 8, l2),
        l3: cache(16, 8, l3),
        ..PlatformSpec::default()
    };
    platform.validate("platform").unwrap();
    platform
}

/// The lines a random trace draws from: line `to_line(n)` for `n` in `0..hot` (the hot set) or
/// `0..spread` (the rest).
struct Footprint {
    hot: u64,
    spread: u64,
    to_line: fn(u64) -> u64,
}

/// A hot set that fits the L2 of `platform` and lines spread over eight times its L3.
const SMALL: Footprint = Footprint { hot: 48, spread: 2048, to_line: |n| n };

/// As `SMALL`, a third of the lines far up the address space (64-bit entries in every level).
const SMALL_AND_HIGH: Footprint =
    Footprint { hot: 48, spread: 2048, to_line: |n| if n % 3 == 0 { n | 1 << 50 } else { n } };

/// Runs of accesses to one line (as a sequential sweep makes), a hot set and a spread set of
/// lines; 35% writes, some accesses spanning two lines.
fn random_trace(seed: u64, accesses: usize, footprint: &Footprint) -> Vec<TraceRecord> {
    let mut rng = Rng::new(seed);
    let mut line = 0;
    (0..accesses)
        .map(|_| {
            line = match rng.next_u64() % 10 {
                0..=3 => line,
                4..=6 => (footprint.to_line)(rng.next_u64() % footprint.hot),
                _ => (footprint.to_line)(rng.next_u64() % footprint.spread),
            };
            let kind = if rng.next_u64() % 100 < 35 { AccessKind::Write } else { AccessKind::Read };
            let size = if rng.next_u64().is_multiple_of(10) { 16 } else { 1 };
            TraceRecord { kind, addr: line * LINE_BYTES + LINE_BYTES - 1 - rng.next_u64() % 32, size }
        })
        .collect()
}

/// The counters a replay reports, as the hierarchy keeps them.
fn replayed(report: &TraceReport) -> ([LevelStats; 3], (u64, u64)) {
    let levels = [&report.l1d, &report.l2, &report.l3].map(|level| level.counts.clone());
    (levels, (report.memory.reads, report.memory.writes))
}

/// Replays `trace` through the whole platform by `core_access` on CPU 0, and checks the
/// hierarchy's invariants at the end.
fn general_path(platform: &PlatformSpec, directory: bool, trace: &[TraceRecord]) -> ([LevelStats; 3], (u64, u64)) {
    let mut hierarchy = Hierarchy::with_holding(platform, if directory { Holding::Directory } else { Holding::Probe });
    let mut now = Time::ZERO;
    for record in trace {
        let last = record.addr + record.size as u64 - 1;
        for line in record.addr / LINE_BYTES..=last / LINE_BYTES {
            now += Time(1000);
            hierarchy.core_access(0, Line(line), record.kind == AccessKind::Write, now);
        }
    }
    hierarchy.check_invariants().unwrap();
    let (levels, memory) = chain_counts(&hierarchy, LINE_BYTES);
    (levels, (memory.reads, memory.writes))
}

/// Replays `trace` with a `Replayer`, which must pick `engine`, in two calls (so that a batch
/// widening 32-bit entries may follow one that filled them), and requires the counts of the
/// general path (with and without a directory, if `both_holder_modes`). Calls of 4096 records
/// or more share their batch between host threads on a host with more than one core.
fn assert_replay_counts_as_general_path(
    platform: &PlatformSpec,
    trace: &[TraceRecord],
    engine: ReplayEngine,
    both_holder_modes: bool,
    case: &str,
) {
    let mut replayer = Replayer::new(platform, 0).unwrap();
    assert_eq!(replayer.engine(), engine, "{case}");
    let (first, second) = trace.split_at(trace.len() / 2);
    replayer.access_all(first);
    replayer.access_all(second);
    let fast = replayed(&replayer.report(0.0));
    let exercised = fast.0[2].misses > 0 && fast.0[0].write_hits > 0 && fast.0[2].writebacks > 0;
    assert!(exercised, "{case}: the trace exercises little");
    for directory in [false, true].into_iter().take(1 + both_holder_modes as usize) {
        assert_eq!(fast, general_path(platform, directory, trace), "{case}, directory: {directory}");
    }
}

/// Every replacement policy, L2 and L3 relation and write-hit setting.
fn every_configuration() -> impl Iterator<Item = (&'static str, Relation, Relation, bool)> {
    POLICIES.into_iter().flat_map(|policy| {
        L2_RELATIONS.into_iter().flat_map(move |l2| {
            L3_RELATIONS.into_iter().flat_map(move |l3| [true, false].map(|write_hit| (policy, l2, l3, write_hit)))
        })
    })
}

#[test]
fn replay_counts_exactly_as_the_general_coherent_path() {
    for (seed, (policy, l2, l3, write_hit_updates_recency)) in (1..).zip(every_configuration()) {
        let platform = platform(policy, l2, l3, write_hit_updates_recency);
        let case = format!("{policy}, L2 {l2:?}, L3 {l3:?}, write hits use: {write_hit_updates_recency}");
        for (name, footprint) in [("low addresses", &SMALL), ("high addresses too", &SMALL_AND_HIGH)] {
            // Low addresses first, so that 32-bit entries are widened halfway through.
            let mut trace = random_trace(seed, 4500, &SMALL);
            trace.extend(random_trace(seed + 1000, 4500, footprint));
            let case = format!("{case}, {name}");
            assert_replay_counts_as_general_path(&platform, &trace, ReplayEngine::SingleCore, true, &case);
        }
    }
}

/// turin-9655's cache geometry (48 KiB 12-way L1D, 1 MiB 16-way L2, 32 MiB 16-way L3) on one CCX
/// of two cores, under every configuration; the L1D keeps LRU under `tree_plru`, which needs a
/// power-of-two way count. Traces use 8 sets of every level, so that they fill them quickly.
#[test]
fn replay_counts_exactly_as_the_general_path_on_turin_geometry() {
    let turin = steer_sim::platform::preset("turin-9655").unwrap();
    let sets = [&turin.l1d, &turin.l2, &turin.l3].map(|level| level.geometry().sets);
    assert_eq!(sets, [64, 1024, 32768]);
    // Set k of 8: k * 4097 keeps the 8 sets apart in every level.
    let eight_sets = Footprint { hot: 8 * 20, spread: 8 * 400, to_line: |n| n % 8 * 4097 + n / 8 * 32768 };
    for (seed, (policy, l2, l3, write_hit_updates_recency)) in (100..).zip(every_configuration()) {
        let mut platform = platform(policy, l2, l3, write_hit_updates_recency);
        platform.topology = TopologySpec { sockets: 1, ccx_per_socket: 1, cores_per_ccx: 2, threads_per_core: 1 };
        let levels = [(&mut platform.l1d, &turin.l1d), (&mut platform.l2, &turin.l2), (&mut platform.l3, &turin.l3)];
        for (level, published) in levels {
            (level.size_kib, level.ways) = (published.size_kib, published.ways);
        }
        if policy == "tree_plru" {
            platform.l1d.replacement = "lru".into();
        }
        platform.validate("platform").unwrap();
        let trace = random_trace(seed, 9000, &eight_sets);
        let case =
            format!("turin geometry, {policy}, L2 {l2:?}, L3 {l3:?}, write hits use: {write_hit_updates_recency}");
        assert_replay_counts_as_general_path(&platform, &trace, ReplayEngine::SingleCore, false, &case);
    }
}

/// A hardware prefetcher, or a way mask confining CPU 0 (the replaying core) is replayed by the
/// general path; a mask for another CPU, or one allowing every way, is not.
#[test]
fn platforms_the_single_core_engine_cannot_replay_keep_the_general_path() {
    let base = platform("lru", Relation::Inclusive, Relation::Exclusive, true);
    let trace = random_trace(5, 4000, &SMALL);
    let mask = |agent: &str, mask| vec![WayMaskSpec { agent: agent.into(), mask }];

    let mut prefetching = base.clone();
    prefetching.l2.prefetcher = PrefetcherSpec { kind: "next_line".into(), ..PrefetcherSpec::default() };
    let mut confined = base.clone();
    confined.l3.way_masks = mask("cpu:0", 0b11);
    for (name, platform) in [("prefetcher", &prefetching), ("cpu:0 way mask", &confined)] {
        assert_replay_counts_as_general_path(platform, &trace, ReplayEngine::General, false, name);
    }

    let mut other_cpu = base.clone();
    other_cpu.l3.way_masks = mask("cpu:1", 0b11);
    let mut every_way = base.clone();
    every_way.l2.way_masks = mask("cpu:0", 0xff);
    for (name, platform) in [("cpu:1 way mask", &other_cpu), ("cpu:0 mask of every way", &every_way)] {
        assert_replay_counts_as_general_path(platform, &trace, ReplayEngine::SingleCore, false, name);
    }
}

#[test]
fn prefetching_host_memory_ahead_changes_no_count() {
    let platform = platform("drrip", Relation::NonInclusive, Relation::Exclusive, false);
    let trace = random_trace(7, 20_000, &SMALL);
    let mut one_by_one = Replayer::new(&platform, 0).unwrap();
    for record in &trace {
        one_by_one.access(record);
    }
    let mut ahead = Replayer::new(&platform, 0).unwrap();
    ahead.access_all(&trace);
    assert_eq!(replayed(&one_by_one.report(0.0)), replayed(&ahead.report(0.0)));
}

/// True LRU as use stamps (the textbook form), the reference for the rank-based `lru`.
struct StampLru {
    ways: usize,
    stamps: Vec<u64>,
    clock: u64,
    options: PolicyOptions,
}

impl ReplacementPolicy for StampLru {
    /// A fill is a use; so is a hit, unless it is a write hit and those are not uses.
    fn on_fill(&mut self, set: usize, way: usize) {
        self.clock += 1;
        self.stamps[set * self.ways + way] = self.clock;
    }
    fn on_hit(&mut self, set: usize, way: usize, write: bool) {
        if self.options.hit_is_use(write) {
            self.on_fill(set, way);
        }
    }
    fn demote(&mut self, set: usize, way: usize) {
        self.stamps[set * self.ways + way] = 0;
    }
    fn victim(&mut self, set: usize, allowed: u64) -> usize {
        let allowed_ways = (0..self.ways).filter(|way| allowed >> way & 1 == 1);
        allowed_ways.min_by_key(|way| self.stamps[set * self.ways + way]).unwrap()
    }
    fn prefetch_set(&self, _set: usize) {}
}

/// A set-associative cache written plainly: a linear search of every set, a flag per slot.
struct PlainCache {
    sets: usize,
    ways: usize,
    /// Per slot: the line, whether dirty, whether prefetched and not used since.
    slots: Vec<Option<(u64, bool, bool)>>,
    policy: Box<dyn ReplacementPolicy>,
}

impl PlainCache {
    fn slot_of(&self, line: u64) -> Option<(usize, usize)> {
        let set = (line % self.sets as u64) as usize;
        let holds = |way: &usize| matches!(self.slots[set * self.ways + way], Some((l, _, _)) if l == line);
        (0..self.ways).find(holds).map(|way| (set, way))
    }

    fn access(&mut self, line: u64, write: bool) -> Lookup {
        let Some((set, way)) = self.slot_of(line) else { return Lookup::Miss };
        self.policy.on_hit(set, way, write);
        let (_, dirty, prefetched) = self.slots[set * self.ways + way].as_mut().unwrap();
        *dirty |= write;
        Lookup::Hit { prefetched: std::mem::replace(prefetched, false) }
    }

    fn insert(&mut self, line: u64, dirty: bool, allowed: u64) -> Option<Evicted> {
        let set = (line % self.sets as u64) as usize;
        let allowed = allowed & (u64::MAX >> (64 - self.ways));
        let free = (0..self.ways).find(|way| allowed >> way & 1 == 1 && self.slots[set * self.ways + way].is_none());
        let way = free.unwrap_or_else(|| self.policy.victim(set, allowed));
        let evicted = self.slots[set * self.ways + way].map(|(line, dirty, unused_prefetch)| Evicted {
            line: Line(line),
            dirty,
            unused_prefetch,
            stamp: 0,
        });
        self.slots[set * self.ways + way] = Some((line, dirty, false));
        self.policy.on_fill(set, way);
        evicted
    }

    fn remove(&mut self, line: u64) -> Option<bool> {
        let (set, way) = self.slot_of(line)?;
        let (_, dirty, _) = self.slots[set * self.ways + way].take().unwrap();
        self.policy.on_invalidate(set, way);
        Some(dirty)
    }

    fn mark(&mut self, line: u64, dirty: bool, prefetched: bool) -> bool {
        let Some((set, way)) = self.slot_of(line) else { return false };
        let slot = self.slots[set * self.ways + way].as_mut().unwrap();
        slot.1 |= dirty;
        slot.2 |= prefetched;
        true
    }
}

#[test]
fn caches_behave_as_a_plain_cache_under_random_operations() {
    let (sets, ways) = (4, 8);
    for (seed, policy) in (0..).zip(POLICIES.iter().chain(&["lru"])) {
        for write_hit_updates_recency in [true, false] {
            let options = PolicyOptions { write_hit_updates_recency, seed: 0 };
            let info = replacement::find(policy).unwrap();
            // The second `lru` round checks the rank-based LRU against use stamps.
            let reference: Box<dyn ReplacementPolicy> = if seed == POLICIES.len() as u64 {
                Box::new(StampLru { ways, stamps: vec![0; sets * ways], clock: 0, options })
            } else {
                Box::new((info.build)(sets, ways, options))
            };
            let mut plain = PlainCache { sets, ways, slots: vec![None; sets * ways], policy: reference };
            let mut cache = Cache::new(&Geometry {
                sets,
                ways,
                slices: 1,
                slice_hash: SliceHash::Uniform,
                policy: info.name,
                options,
            });
            let mut rng = Rng::new(seed);
            let mut line = 0;
            for step in 0..20_000 {
                // Often the line used last (the way hint), else one of 3 lines per way.
                if !rng.next_u64().is_multiple_of(3) {
                    line = rng.next_u64() % (3 * (sets * ways) as u64);
                }
                let write = rng.next_u64().is_multiple_of(3);
                let case = format!("{policy} (recency on write hits: {write_hit_updates_recency}), step {step}");
                match rng.next_u64() % 10 {
                    0..=5 => {
                        let lookup = cache.access(Line(line), write);
                        assert_eq!(lookup, plain.access(line, write), "access: {case}");
                        if !lookup.hit() {
                            // Way masks: usually every way, sometimes a few.
                            let allowed = if rng.next_u64().is_multiple_of(4) { rng.next_u64() | 1 } else { u64::MAX };
                            let evicted = cache.insert(Line(line), write, allowed);
                            assert_eq!(evicted, plain.insert(line, write, allowed), "insert: {case}");
                        }
                    }
                    6 => assert_eq!(cache.remove(Line(line)), plain.remove(line), "remove: {case}"),
                    7 => assert_eq!(cache.mark_dirty(Line(line)), plain.mark(line, true, false), "mark_dirty: {case}"),
                    8 => {
                        cache.mark_prefetched(Line(line));
                        plain.mark(line, false, true);
                    }
                    _ => {
                        let dirty =
                            plain.slot_of(line).is_some_and(|(set, way)| plain.slots[set * ways + way].unwrap().1);
                        assert_eq!(cache.is_dirty(Line(line)), dirty, "is_dirty: {case}");
                    }
                }
            }
            cache.check_invariants().unwrap();
        }
    }
}
