//! Fast paths must count exactly as the straightforward paths they stand for:
//! - a cache tries the way it used last before searching a set, keeps valid, dirty and prefetch
//!   bits per set, and LRU keeps recency ranks (skipping the update of a line already the most
//!   recent) rather than use stamps: checked against a plain cache with per-way stamps;
//! - a trace replay builds one core's caches only, so no other cache is asked for a copy, and
//!   prefetches host memory ahead of the trace: checked against `core_access` on a platform with
//!   other cores and CCXs, with and without a directory.
//! Random operations and traces cover every replacement policy and level relation, with writes.

use steer_sim::cache::replacement::{self, PolicyOptions, ReplacementPolicy};
use steer_sim::cache::{Cache, Evicted, Geometry, Lookup};
use steer_sim::hierarchy::{Hierarchy, LevelStats};
use steer_sim::platform::{CacheSpec, PlatformSpec, Relation, TopologySpec};
use steer_sim::trace::{AccessKind, Replayer, TraceRecord, TraceReport};
use steer_sim::units::{Line, Rng, Time};

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

/// Runs of accesses to one line (as a sequential sweep makes), a hot set that fits the L2, and
/// lines spread over eight times the L3; 35% writes, some accesses spanning two lines.
fn random_trace(seed: u64, accesses: usize) -> Vec<TraceRecord> {
    let mut rng = Rng::new(seed);
    let mut line = 0;
    (0..accesses)
        .map(|_| {
            line = match rng.next_u64() % 10 {
                0..=3 => line,
                4..=6 => rng.next_u64() % 48,
                _ => rng.next_u64() % 2048,
            };
            let kind = if rng.next_u64() % 100 < 35 { AccessKind::Write } else { AccessKind::Read };
            let size = if rng.next_u64() % 10 == 0 { 16 } else { 1 };
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
    let mut hierarchy = Hierarchy::with_directory(platform, directory);
    let mut now = Time::ZERO;
    for record in trace {
        let last = record.addr + record.size as u64 - 1;
        for line in record.addr / LINE_BYTES..=last / LINE_BYTES {
            now = now + Time(1000);
            hierarchy.core_access(0, Line(line), record.kind == AccessKind::Write, now);
        }
    }
    hierarchy.check_invariants().unwrap();
    let stats = &hierarchy.stats;
    let (reads, writes) = hierarchy.memory.stats().fold((0, 0), |(r, w), c| (r + c.read_bytes, w + c.write_bytes));
    ([stats.l1d.clone(), stats.l2.clone(), stats.l3.clone()], (reads / LINE_BYTES, writes / LINE_BYTES))
}

#[test]
fn replay_counts_exactly_as_the_general_coherent_path() {
    let mut seed = 0;
    for policy in POLICIES {
        for l2 in L2_RELATIONS {
            for l3 in L3_RELATIONS {
                for write_hit_updates_recency in [true, false] {
                    seed += 1;
                    let platform = platform(policy, l2, l3, write_hit_updates_recency);
                    let trace = random_trace(seed, 4000);
                    let mut replayer = Replayer::new(&platform, 0).unwrap();
                    replayer.access_all(&trace);
                    let fast = replayed(&replayer.report(0.0));
                    let case = format!("{policy}, L2 {l2:?}, L3 {l3:?}, write hits use: {write_hit_updates_recency}");
                    assert!(fast.0[2].misses > 0 && fast.0[0].write_hits > 0, "{case}: the trace exercises little");
                    for directory in [false, true] {
                        assert_eq!(fast, general_path(&platform, directory, &trace), "{case}, directory: {directory}");
                    }
                }
            }
        }
    }
}

#[test]
fn prefetching_host_memory_ahead_changes_no_count() {
    let platform = platform("drrip", Relation::NonInclusive, Relation::Exclusive, false);
    let trace = random_trace(7, 20_000);
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
        let evicted = self.slots[set * self.ways + way]
            .map(|(line, dirty, unused_prefetch)| Evicted { line: Line(line), dirty, unused_prefetch });
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
            let options = PolicyOptions { write_hit_updates_recency };
            let info = replacement::find(policy).unwrap();
            // The second `lru` round checks the rank-based LRU against use stamps.
            let reference: Box<dyn ReplacementPolicy> = if seed == POLICIES.len() as u64 {
                Box::new(StampLru { ways, stamps: vec![0; sets * ways], clock: 0, options })
            } else {
                Box::new((info.build)(sets, ways, options))
            };
            let mut plain = PlainCache { sets, ways, slots: vec![None; sets * ways], policy: reference };
            let mut cache = Cache::new(&Geometry { sets, ways, policy: info.name, options });
            let mut rng = Rng::new(seed);
            let mut line = 0;
            for step in 0..20_000 {
                // Often the line used last (the way hint), else one of 3 lines per way.
                if rng.next_u64() % 3 != 0 {
                    line = rng.next_u64() % (3 * (sets * ways) as u64);
                }
                let write = rng.next_u64() % 3 == 0;
                let case = format!("{policy} (recency on write hits: {write_hit_updates_recency}), step {step}");
                match rng.next_u64() % 10 {
                    0..=5 => {
                        let lookup = cache.access(Line(line), write);
                        assert_eq!(lookup, plain.access(line, write), "access: {case}");
                        if !lookup.hit() {
                            // Way masks: usually every way, sometimes a few.
                            let allowed = if rng.next_u64() % 4 == 0 { rng.next_u64() | 1 } else { u64::MAX };
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
                        let dirty = plain.slot_of(line).is_some_and(|(set, way)| plain.slots[set * ways + way].unwrap().1);
                        assert_eq!(cache.is_dirty(Line(line)), dirty, "is_dirty: {case}");
                    }
                }
            }
            cache.check_invariants().unwrap();
        }
    }
}
