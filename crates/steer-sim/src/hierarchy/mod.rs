//! The coherent cache hierarchy: a private L1D and L2 per core, an L3 per CCX, and memory.
//!
//! The holders of a line (which private hierarchies, L1 or L2 of a core, and which L3s have it) let
//! a miss find a peer core's copy, a copy in another CCX, or go to memory, and let a DMA write
//! invalidate every stale copy. Large systems keep a directory (a hash index of holders); systems
//! of a few caches ask the caches themselves, which is cheaper than maintaining the index. The relation of each level to the one above
//! (inclusive, exclusive, non-inclusive) decides where fills and victims go; see `Relation`.

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::cache::prefetch::{Prefetcher, Trigger};
use crate::cache::rinse::RinseEngine;
use crate::cache::{Geometry, Lookup};
use crate::directory::Directory;
use crate::memory::Memory;
use crate::platform::{CacheSpec, InjectedInsertion, MaskAgent, PartialWrite, PlatformSpec, Relation, TopologySpec};
use crate::steering::SteeringQueue;
use crate::units::{stream_seed, Clock, Line, Time};

/// Where a core's demand access was satisfied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    L1,
    L2,
    /// Another core's private cache in the same CCX.
    PeerL2,
    /// The L3 of the core's own CCX.
    L3,
    /// Any cache of another CCX.
    RemoteCache,
    Dram,
}

impl Source {
    pub const ALL: [Source; 6] =
        [Source::L1, Source::L2, Source::PeerL2, Source::L3, Source::RemoteCache, Source::Dram];

    pub fn name(self) -> &'static str {
        match self {
            Source::L1 => "l1",
            Source::L2 => "l2",
            Source::PeerL2 => "peer_l2",
            Source::L3 => "l3",
            Source::RemoteCache => "remote_cache",
            Source::Dram => "dram",
        }
    }
}

/// Where a DMA write is placed; decided by a placement policy, carried out here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// Write to DRAM and invalidate every cached copy.
    Memory,
    /// Install (dirty) in the L2 of the core running `cpu`, invalidating other copies.
    L2 { cpu: u32 },
    /// Write into the L3 of `ccx` (Intel DDIO, L3 injection): update the line in place if that L3
    /// holds it, else allocate it there within the device's LLC ways; other copies are invalidated.
    L3 { ccx: u32 },
    /// As `L3`, into the L3 of the CCX of `cpu`.
    L3Of { cpu: u32 },
    /// A TPH hint without a steering tag (No-ST mode): a cache holding the line is updated in
    /// place (a write hit, made dirty, nothing allocated); otherwise the line goes to memory.
    UpdateIfCached,
}

/// Whom a request is carried out for. Its way masks apply to every allocation the request causes,
/// victims pushed into lower levels included (as a CAT class of service does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requester {
    Cpu(u32),
    /// A device registered with `Hierarchy::register_device`.
    Device(u32),
}

/// Allocation masks of one cache level, per CPU and per registered device.
struct LevelMasks {
    spec: Vec<(MaskAgent, u64)>,
    cpu: Vec<u64>,
    device: Vec<u64>,
}

impl LevelMasks {
    fn new(spec: &CacheSpec, cpus: u32) -> LevelMasks {
        let spec: Vec<(MaskAgent, u64)> =
            spec.way_masks.iter().filter_map(|m| m.parsed_agent().ok().map(|a| (a, m.mask))).collect();
        let cpu = (0..cpus)
            .map(|cpu| spec.iter().rev().find(|(a, _)| *a == MaskAgent::Cpu(cpu)).map_or(u64::MAX, |(_, m)| *m))
            .collect();
        LevelMasks { spec, cpu, device: Vec::new() }
    }

    /// Adds a device whose mask is its listed one, else `default`.
    fn register(&mut self, name: &str, default: u64) {
        let agent = MaskAgent::Device(name.to_string());
        let mask = self.spec.iter().rev().find(|(a, _)| *a == agent).map_or(default, |(_, m)| *m);
        self.device.push(mask);
    }

    fn of(&self, requester: Requester) -> u64 {
        match requester {
            Requester::Cpu(cpu) => self.cpu[cpu as usize],
            Requester::Device(device) => self.device[device as usize],
        }
    }
}

/// A demand access's outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Access {
    pub source: Source,
    pub latency: Time,
    /// How long a write that hit the L1D waits for other caches' copies of its line to be
    /// invalidated before it owns the line (zero for a read, or when no other cache holds it).
    pub ownership: Time,
}

/// A cache level, as a prefetch target or an injection target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    L1,
    L2,
    L3,
}

mod coherence;
mod fills;
mod io;
mod lazy_cache;
mod prefetching;
mod stats;

use lazy_cache::LazyCache;
pub use stats::{ChainWrites, DeviceTraffic, HierarchyStats, LevelStats, PrefetchStats};

/// Ids of the hierarchy's random streams (`units::stream_seed`): each cache's replacement draws
/// its own (the level's id plus the core's or CCX's index), and rinsing one more.
const L1_STREAMS: u64 = 1 << 32;
const L2_STREAMS: u64 = 2 << 32;
const L3_STREAMS: u64 = 3 << 32;
const RINSE_STREAM: u64 = 4 << 32;
/// Most cores with filled caches for which asking each of them beats keeping a directory
/// (measured with scripts/bench.py; see docs/engine.md).
pub const PROBE_LIMIT: usize = 1;

/// How the holders of a line are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holding {
    /// Ask the filled caches while few cores have filled any; keep a directory from then on.
    Adaptive,
    /// Always keep a directory of the private caches.
    Directory,
    /// Always ask the filled caches.
    Probe,
}

/// The load-to-use latency of a hit at each place a line can be found.
#[derive(Debug, Clone, Copy)]
struct Latencies {
    l1: Time,
    l2: Time,
    /// Another core's L2 in the same CCX.
    peer_l2: Time,
    l3: Time,
    /// A cache of another CCX.
    remote_cache: Time,
}

impl crate::engine::Facility for Hierarchy {
    fn reset_stats(&mut self, _now: Time) {
        Hierarchy::reset_stats(self);
    }
}

pub struct Hierarchy {
    topology: TopologySpec,
    l1: Vec<LazyCache>,
    l2: Vec<LazyCache>,
    l3: Vec<LazyCache>,
    l2_relation: Relation,
    l3_relation: Relation,
    /// `l3.keeps_shared`.
    l3_keeps_shared: bool,
    /// `l3.clean_victims`.
    l3_clean_victims: bool,
    /// Where a line injected into an L2 enters its replacement order.
    l2_injected_insertion: InjectedInsertion,
    /// The L3s' rinsing of dirty lines (`l3.rinse_gbs`), if they rinse.
    rinse: Option<RinseEngine>,
    latency: Latencies,
    pub memory: Memory,
    /// Private-cache holders per line; `None` when the caches are few enough to be asked directly.
    directory: Option<Directory>,
    holding: Holding,
    /// The cores whose caches have been filled, in increasing order (the only ones that can hold
    /// a line).
    filled_cores: Vec<u32>,
    /// The CCXs whose L3 has been filled, in increasing order.
    filled_l3s: Vec<u32>,
    /// Way masks of L1D, L2 and L3.
    masks: [LevelMasks; 3],
    /// Hardware prefetchers of each core's L1D and L2, indexed by `Level as usize` (`None`: no prefetcher).
    prefetchers: [Vec<Option<Box<dyn Prefetcher>>>; 2],
    /// When each prefetched line's data arrives and where it is read from (removed at first use
    /// or useless eviction).
    prefetch_ready: FxHashMap<u64, (Time, Source)>,
    /// The lines a prefetcher asks for on one access (kept to reuse its allocation).
    prefetch_wanted: Vec<Line>,
    /// Physical core of each logical CPU and CCX of each core, precomputed: they are needed on
    /// every access.
    core_of_cpu: Vec<u32>,
    ccx_of_core: Vec<u32>,
    /// LLC ways of Intel DDIO; 0 when the platform has none.
    ddio_mask: u64,
    /// LLC ways a device write allocates a line cores have used into (`io.inclusive_ways`).
    inclusive_mask: u64,
    /// `io.partial_write`.
    partial_write: PartialWrite,
    /// Each CCX's queue of writes steered into its L2s (`io.steer_bytes_per_cycle`); empty: no
    /// limit.
    steering: Vec<SteeringQueue>,
    pub stats: HierarchyStats,
}

impl Hierarchy {
    /// Builds an empty hierarchy for a validated platform, finding holders adaptively, its random
    /// choices (replacement, rinsing) seeded with 0.
    pub fn new(platform: &PlatformSpec) -> Hierarchy {
        Hierarchy::with_holding(platform, Holding::Adaptive)
    }

    /// Builds an empty hierarchy whose random choices follow a run's `seed`.
    pub fn seeded(platform: &PlatformSpec, seed: u64) -> Hierarchy {
        Hierarchy::build(platform, Holding::Adaptive, seed)
    }

    /// Builds an empty hierarchy, choosing how holders are found (results are identical).
    pub fn with_holding(platform: &PlatformSpec, holding: Holding) -> Hierarchy {
        Hierarchy::build(platform, holding, 0)
    }

    fn build(platform: &PlatformSpec, holding: Holding, seed: u64) -> Hierarchy {
        let t = platform.topology.clone();
        let clock = Clock::new(platform.core.freq_ghz);
        let (l1, l2, l3) = (platform.l1d.geometry(), platform.l2.geometry(), platform.l3.geometry());
        let rinse =
            platform.l3.rinse_gbs.0.map(|gbs| {
                RinseEngine::new(gbs, platform.line_bytes(), t.ccx_count(), stream_seed(seed, RINSE_STREAM))
            });
        let caches = |geometry: &Geometry, count: u32, streams: u64, stamped: bool| -> Vec<LazyCache> {
            (0..count).map(|i| LazyCache::new(geometry, seed, streams + i as u64).stamped(stamped)).collect()
        };
        Hierarchy {
            l1: caches(&l1, t.cores(), L1_STREAMS, false),
            l2: caches(&l2, t.cores(), L2_STREAMS, false),
            // Only the L3 rinses, so only it keeps stamps.
            l3: caches(&l3, t.ccx_count(), L3_STREAMS, rinse.is_some()),
            l2_relation: platform.l2.relation,
            l3_relation: platform.l3.relation,
            l3_keeps_shared: platform.l3.keeps_shared && platform.l3.relation == Relation::Exclusive,
            l3_clean_victims: platform.l3.clean_victims,
            l2_injected_insertion: platform.l2.injected_insertion,
            rinse,
            latency: Latencies {
                l1: clock.cycles(platform.l1d.latency_cycles),
                l2: clock.cycles(platform.l2.latency_cycles),
                peer_l2: Time::from_ns(platform.fabric.peer_l2_latency_ns),
                l3: clock.cycles(platform.l3.latency_cycles),
                remote_cache: Time::from_ns(platform.fabric.remote_cache_latency_ns),
            },
            memory: Memory::new(&platform.memory, &t, platform.line_bytes()),
            directory: (holding == Holding::Directory).then(Directory::default),
            holding,
            filled_cores: Vec::new(),
            filled_l3s: Vec::new(),
            masks: [
                LevelMasks::new(&platform.l1d, t.cpus()),
                LevelMasks::new(&platform.l2, t.cpus()),
                LevelMasks::new(&platform.l3, t.cpus()),
            ],
            prefetchers: [
                (0..t.cores()).map(|_| platform.l1d.prefetcher.build()).collect(),
                (0..t.cores()).map(|_| platform.l2.prefetcher.build()).collect(),
            ],
            prefetch_ready: FxHashMap::default(),
            prefetch_wanted: Vec::new(),
            core_of_cpu: (0..t.cpus()).map(|cpu| t.core_of_cpu(cpu)).collect(),
            ccx_of_core: (0..t.cores()).map(|core| t.ccx_of_core(core)).collect(),
            ddio_mask: platform.io.ddio_mask(platform.l3.ways),
            inclusive_mask: platform.io.inclusive_mask(),
            partial_write: platform.io.partial_write,
            steering: platform.io.steer_bytes_per_cycle.0.map_or_else(Vec::new, |bytes| {
                let gbs = bytes * t.cores_per_ccx as f64 * platform.core.freq_ghz;
                let queue = SteeringQueue::new(gbs, platform.io.steer_queue_lines, platform.line_bytes());
                vec![queue; t.ccx_count() as usize]
            }),
            stats: HierarchyStats::zeroed(t.cpus() as usize, 0),
            topology: t,
        }
    }

    /// Registers a device by name (for its way masks); returns its id for `dma_write`.
    /// On a platform with DDIO, a device's LLC allocations default to the DDIO ways.
    pub fn register_device(&mut self, name: &str) -> u32 {
        let [l1, l2, l3] = &mut self.masks;
        l1.register(name, u64::MAX);
        l2.register(name, u64::MAX);
        l3.register(name, if self.ddio_mask != 0 { self.ddio_mask } else { u64::MAX });
        self.stats.devices.push(DeviceTraffic::default());
        self.masks[0].device.len() as u32 - 1
    }

    pub fn reset_stats(&mut self) {
        self.stats = HierarchyStats::zeroed(self.stats.fills.len(), self.stats.devices.len());
        self.memory.reset_stats();
    }

    /// Starts loading the host memory that a later `core_access(cpu, line, ..)` is likely to read
    /// but the host is unlikely to have cached: the line's L3 set (the L1 and L2 are small enough
    /// to stay in the host's caches). A replay that knows its next accesses calls this ahead of
    /// them so their host cache misses overlap. Changes nothing.
    pub fn prefetch_host(&self, cpu: u32, line: Line) {
        self.l3[self.ccx_of_cpu(cpu) as usize].prefetch_set_of(line);
    }

    /// A demand load (`write = false`) or store by logical CPU `cpu`.
    pub fn core_access(&mut self, cpu: u32, line: Line, write: bool, now: Time) -> Access {
        let core = self.core_of_cpu[cpu as usize];
        self.stats.line_ops += 1;
        let l1 = self.l1[core as usize].access(line, write);
        self.stats.l1d.request(write, l1.hit());
        let mut ownership = Time::ZERO;
        let (source, latency) = if l1.hit() {
            let first = self.first_use(Level::L1, l1, line, now);
            if write && !self.l1[core as usize].is_exclusive(line) {
                ownership = self.take_ownership(core, line, now);
                self.mark_exclusive(core, line, true);
            }
            (first.source(Source::L1), self.latency.l1 + first.wait)
        } else {
            self.serve_l1_miss(cpu, core, line, write, now)
        };
        self.train(
            cpu,
            Level::L1,
            Trigger { line, hit: l1.hit(), prefetch_hit: l1 == Lookup::Hit { prefetched: true } },
            now,
        );
        self.stats.fills[cpu as usize][source as usize] += 1;
        Access { source, latency, ownership }
    }

    /// The part of `core_access` after an L1 miss (kept out of line: most accesses hit the L1),
    /// and an L1D prefetch's request: fills the L1D, counted by source as a DC fill.
    #[inline(never)]
    fn serve_l1_miss(&mut self, cpu: u32, core: u32, line: Line, write: bool, now: Time) -> (Source, Time) {
        let by = Requester::Cpu(cpu);
        let l2 = self.l2[core as usize].access(line, false);
        self.stats.l2.request(false, l2.hit());
        let first = self.first_use(Level::L2, l2, line, now);
        let (source, latency) = if l2.hit() {
            let mut ownership = Time::ZERO;
            if write && !self.l2[core as usize].is_exclusive(line) {
                ownership = self.take_ownership(core, line, now);
            }
            (first.source(Source::L2), self.latency.l2.max(ownership))
        } else {
            let (source, dirty, latency) = self.fetch_below_l2(by, core, line, write, now);
            self.fill_l2(by, core, line, dirty, now);
            (source, latency)
        };
        if write {
            // Every other copy is gone: later writes need not look for any.
            self.l2[core as usize].set_exclusive(line, true);
        }
        self.fill_l1(by, core, line, write, write, now);
        self.stats.dc_fills[cpu as usize][source as usize] += 1;
        self.train(
            cpu,
            Level::L2,
            Trigger { line, hit: l2.hit(), prefetch_hit: l2 == Lookup::Hit { prefetched: true } },
            now,
        );
        (source, latency + first.wait)
    }

    /// Finds a line missing from `core`'s private caches: own L3, a peer in the CCX, another
    /// CCX, or memory. Returns the source, whether dirty ownership moved to the requester, and
    /// the load-to-use latency.
    fn fetch_below_l2(&mut self, by: Requester, core: u32, line: Line, write: bool, now: Time) -> (Source, bool, Time) {
        let ccx = self.ccx_of(core);
        // The requester's own private caches missed; its CCX's L3 is asked first, directly (a miss
        // changes nothing in it).
        let lookup = self.l3[ccx as usize].access(line, false);
        let in_l3 = lookup.hit();
        let first = self.first_use(Level::L3, lookup, line, now);
        self.stats.l3.request(false, in_l3);
        if in_l3 {
            let mut dirty =
                if self.l3_relation == Relation::Exclusive { self.l3_remove(ccx, line, now) } else { false };
            if write {
                dirty |= self.invalidate_others(core, line, now);
            } else if self.l3_relation != Relation::Exclusive {
                // An L3 that keeps copies of the L2s' lines may hold one a core of the CCX
                // marked as its own: that core's copy is no longer the only one. If that copy
                // was written since, the L3's is stale and the core's caches answer (a snoop
                // that hits a modified line).
                let cores = self.ccx_of_core.iter().enumerate().filter(|&(_, &c)| c == ccx).map(|(core, _)| core);
                let mut modified_in_peer = false;
                for other in cores.collect::<Vec<_>>() {
                    let (l1, l2) = (&self.l1[other], &self.l2[other]);
                    modified_in_peer |= l1.is_dirty(line) || l2.is_dirty(line);
                    self.mark_exclusive(other as u32, line, false);
                }
                if modified_in_peer {
                    // Not a prefetch's first use: a peer takes a line from the L3 only through
                    // this lookup, which uses the prefetch up, and an injection drops the L3's copy.
                    return (Source::PeerL2, false, self.latency.peer_l2);
                }
            }
            return (first.source(Source::L3), dirty, self.latency.l3 + first.wait);
        }
        // The copies other than the requester's own: whom a read is served by and a write
        // invalidates (an L3 copy filled from memory below is the requester's own).
        let holders = self.other_holders(line, core, true);
        let (source, latency) = if holders.iter().any(|h| h < self.topology.cores() && self.ccx_of(h) == ccx) {
            if self.l3_keeps_shared && !write {
                self.l3_install(by, ccx, line, false, now);
            }
            (Source::PeerL2, self.latency.peer_l2)
        } else {
            let (source, latency) = if holders.is_empty() {
                (Source::Dram, self.memory.read(line, now))
            } else {
                (Source::RemoteCache, self.latency.remote_cache)
            };
            // An L3 that is not a victim cache takes the line however it came to the CCX.
            if self.l3_relation != Relation::Exclusive {
                self.l3_install(by, ccx, line, false, now);
            }
            (source, latency)
        };
        let mut dirty = false;
        for holder in holders.iter() {
            if write {
                dirty |= self.drop_copy(holder, line, now);
            } else if holder < self.topology.cores() {
                self.mark_exclusive(holder, line, false);
            }
        }
        (source, dirty, latency)
    }

    /// The CCX of logical CPU `cpu`.
    pub fn ccx_of_cpu(&self, cpu: u32) -> u32 {
        self.ccx_of(self.core_of_cpu[cpu as usize])
    }

    /// Whether any cache holds the line.
    pub fn is_cached(&self, line: Line) -> bool {
        !self.holders(line).is_empty()
    }

    /// Whether `cpu`'s L2 holds the line.
    pub fn in_l2(&self, cpu: u32, line: Line) -> bool {
        self.l2[self.core_of_cpu[cpu as usize] as usize].contains(line)
    }

    /// Whether the L3 of `ccx` holds the line.
    pub fn in_l3(&self, ccx: u32, line: Line) -> bool {
        self.l3[ccx as usize].contains(line)
    }
}

#[cfg(test)]
mod tests {
    //! The invariant checks the hierarchy's tests rely on, each shown a state that breaks it.

    use super::*;
    use crate::testing::tiny_platform;
    use crate::units::Rng;

    /// One CCX of two cores; inclusive L1s and L2s, an exclusive L3; tiny caches.
    fn hierarchy() -> Hierarchy {
        Hierarchy::new(&tiny_platform())
    }

    fn read(h: &mut Hierarchy, cpu: u32, line: Line) {
        h.core_access(cpu, line, false, Time::ZERO);
        h.check_invariants().unwrap();
    }

    #[test]
    fn every_cache_and_the_rinsing_draw_streams_of_their_own_from_the_run_seed() {
        let mut platform = tiny_platform();
        platform.topology.ccx_per_socket = 2;
        platform.l3.rinse_gbs = crate::params::OrNone(Some(1.0));
        // Each stream's first draw: one per cache (its replacement's seed), then the rinsing's.
        let first_draws = |seed| {
            let mut h = Hierarchy::seeded(&platform, seed);
            let caches = h.l1.iter().chain(&h.l2).chain(&h.l3);
            let mut draws: Vec<u64> = caches.map(|c| Rng::new(c.geometry.options.seed).next_u64()).collect();
            draws.push(h.rinse.as_mut().unwrap().next_draw());
            draws
        };
        let (one, two) = (first_draws(1), first_draws(2));
        assert_eq!(one.len(), 4 + 4 + 2 + 1);
        let distinct: std::collections::HashSet<u64> = one.iter().chain(&two).copied().collect();
        assert_eq!(distinct.len(), 2 * one.len(), "no two streams alike, in a run or across seeds");
        // Nor alike what the rest of a run draws: a probe's walk (stream 0), NIC queues' arrivals (1, 2, ...).
        let others: std::collections::HashSet<u64> =
            (0..64).map(|id| Rng::new(stream_seed(1, id)).next_u64()).collect();
        assert!(one.iter().all(|draw| !others.contains(draw)), "the hierarchy's streams are its own");
    }

    #[test]
    fn a_line_marked_exclusive_that_another_core_holds_is_reported() {
        let mut h = hierarchy();
        read(&mut h, 0, Line(5));
        read(&mut h, 1, Line(5));
        h.l1[0].set_exclusive(Line(5), true);
        let error = h.check_invariants().unwrap_err();
        assert!(error.starts_with("core 0 marks line 0x5 exclusive"), "{error}");
    }

    #[test]
    fn a_device_read_takes_the_l3_latency_from_an_l3_and_the_memorys_from_a_core_or_memory() {
        // Tiny platform: L3 40 cycles at 1 GHz; memory 100 ns idle, 1 ns a line on its channel.
        let mut h = hierarchy();
        let device = h.register_device("nic0");
        h.dma_write(device, Line(3), Destination::L3 { ccx: 0 }, Time::ZERO);
        assert_eq!(h.dma_read(device, Line(3), Time::ZERO), Time::from_ns(40.0), "in the L3");
        read(&mut h, 0, Line(5));
        assert!(!h.in_l3(0, Line(5)), "the exclusive L3 gave it up to the core");
        // Long after core 0's miss has left the channel: a snoop of its L2 takes the memory's idle
        // latency, a miss the same, and only the miss occupies the channel.
        let later = Time::from_ns(1000.0);
        assert_eq!(h.dma_read(device, Line(5), later), Time::from_ns(100.0), "only in core 0's L2");
        assert_eq!(h.dma_read(device, Line(9), later), Time::from_ns(100.0));
        assert_eq!(h.dma_read(device, Line(10), later), Time::from_ns(100.0), "the channel's slice has room for both");
        assert_eq!((h.stats.dma_reads_from_cache, h.stats.dma_reads_from_memory), (2, 2));
    }

    #[test]
    fn a_device_read_of_a_line_only_a_cores_l2_holds_is_a_cache_hit_counted_apart_as_private() {
        let mut h = hierarchy();
        let device = h.register_device("nic0");
        h.dma_write(device, Line(3), Destination::L3 { ccx: 0 }, Time::ZERO);
        read(&mut h, 0, Line(5));
        for line in [3, 5, 9] {
            h.dma_read(device, Line(line), Time::ZERO);
        }
        let traffic = &h.stats.devices[device as usize];
        assert_eq!((traffic.reads, traffic.read_cache_hits, traffic.read_private_hits), (3, 2, 1));
    }

    #[test]
    fn an_l2_line_missing_from_its_ccx_inclusive_l3_is_reported() {
        let mut platform = tiny_platform();
        platform.l3.relation = Relation::Inclusive;
        let mut h = Hierarchy::new(&platform);
        read(&mut h, 1, Line(5));
        h.l3[0].remove(Line(5));
        assert_eq!(h.check_invariants().unwrap_err(), "core 1: L2 line 0x5 missing from its CCX's inclusive L3");
    }

    #[test]
    fn an_l1_line_missing_from_its_inclusive_l2_is_reported() {
        let mut h = hierarchy();
        read(&mut h, 0, Line(5));
        h.l2[0].remove(Line(5));
        assert_eq!(h.check_invariants().unwrap_err(), "core 0: L1 line 0x5 missing from inclusive L2");
    }

    #[test]
    fn a_corrupt_cache_array_is_reported_with_its_cache() {
        let mut h = hierarchy();
        read(&mut h, 0, Line(5));
        h.l2[0].cache.as_mut().unwrap().corrupt_valid_bits();
        let error = h.check_invariants().unwrap_err();
        // Caches are numbered L1s first, then L2s: core 0's L2 is cache 2.
        assert!(error.starts_with("cache 2: set 5 way 0: valid bit disagrees"), "{error}");
    }

    #[test]
    fn a_filled_cache_list_out_of_step_with_the_caches_is_reported() {
        // Either list alone is enough: core 0's L2 is filled, the L3 not yet (it takes victims).
        let forget_core: fn(&mut Hierarchy) = |h| h.filled_cores.clear();
        let invent_l3: fn(&mut Hierarchy) = |h| h.filled_l3s.push(0);
        for (corrupt, listed) in [(forget_core, "cores [], L3s []"), (invent_l3, "cores [0], L3s [0]")] {
            let mut h = hierarchy();
            read(&mut h, 0, Line(5));
            h.check_invariants().unwrap();
            corrupt(&mut h);
            let expected = format!("the lists of filled caches ({listed}) disagree with the caches");
            assert_eq!(h.check_invariants().unwrap_err(), expected);
        }
    }

    #[test]
    fn a_directory_entry_no_cache_backs_is_reported_with_its_line() {
        let mut h = Hierarchy::with_holding(&tiny_platform(), Holding::Directory);
        read(&mut h, 0, Line(5));
        h.dir_add(Line(9), 1);
        assert_eq!(h.check_invariants().unwrap_err(), "directory disagrees with the caches at line 0x9");
    }

    #[test]
    fn each_cpu_belongs_to_the_ccx_of_its_core() {
        // Two CCXs of two cores, two threads each: CPUs 0-3 are the cores' first threads, 4-7
        // their second.
        let mut platform = tiny_platform();
        platform.topology.ccx_per_socket = 2;
        platform.topology.threads_per_core = 2;
        let h = Hierarchy::new(&platform);
        let ccxs: Vec<u32> = (0..8).map(|cpu| h.ccx_of_cpu(cpu)).collect();
        assert_eq!(ccxs, [0, 0, 1, 1, 0, 0, 1, 1]);
    }

    #[test]
    fn adaptive_holding_keeps_a_directory_once_a_second_cores_caches_fill() {
        let mut h = hierarchy();
        read(&mut h, 0, Line(5));
        assert!(h.directory.is_none(), "one core's caches are asked directly");
        read(&mut h, 1, Line(9));
        let directory = h.directory.as_ref().expect("built at the second core's first fill");
        let holders = |line| directory.holders(line).iter().collect::<Vec<_>>();
        assert_eq!((holders(5), holders(9)), (vec![0], vec![1]), "both cores' lines, each listed once");
    }
}
