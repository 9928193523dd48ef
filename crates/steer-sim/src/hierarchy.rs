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
use crate::cache::{Cache, Evicted, FreeWay, Geometry, Lookup};
use crate::directory::{Directory, Holders};
use crate::memory::Memory;
use crate::platform::{CacheSpec, InjectedInsertion, MaskAgent, PartialWrite, PlatformSpec, Relation, TopologySpec};
use crate::steering::{Steered, SteeringQueue};
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

/// What became of the prefetches into one level.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct PrefetchStats {
    /// Prefetches that fetched a line (those for lines already present are not issued).
    pub issued: u64,
    /// Prefetched lines later used by a demand access.
    pub useful: u64,
    /// Useful prefetches whose data arrived after the demand access asked for it.
    pub late: u64,
    /// Prefetched lines evicted before any use.
    pub useless: u64,
}

/// Per-level request counters, defined as pycachesim defines them so trace replays compare
/// one-to-one: a write miss counts a miss and is then filled like a read.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct LevelStats {
    pub reads: u64,
    pub writes: u64,
    pub read_hits: u64,
    pub write_hits: u64,
    pub misses: u64,
    /// Dirty lines evicted from this level.
    pub writebacks: u64,
    pub prefetch: PrefetchStats,
}

crate::stats::stat!(
    LEVEL_READS,
    "reads",
    "requests",
    "read requests to this level (demand, prefetch, fills from above)"
);
crate::stats::stat!(
    LEVEL_WRITES,
    "writes",
    "requests",
    "write requests to this level (stores, write-backs from above)"
);
crate::stats::stat!(LEVEL_READ_HITS, "read_hits", "requests", "read requests that hit");
crate::stats::stat!(LEVEL_WRITE_HITS, "write_hits", "requests", "write requests that hit");
crate::stats::stat!(LEVEL_MISSES, "misses", "requests", "requests that missed");
crate::stats::stat!(LEVEL_WRITEBACKS, "writebacks", "lines", "dirty lines evicted from this level");
crate::stats::stat!(PREFETCH_ISSUED, "issued", "prefetches", "prefetches that fetched a line into this level");
crate::stats::stat!(PREFETCH_USEFUL, "useful", "prefetches", "prefetched lines later used by a demand access");
crate::stats::stat!(
    PREFETCH_LATE,
    "late",
    "prefetches",
    "useful prefetches whose data arrived after the demand asked for it"
);
crate::stats::stat!(PREFETCH_USELESS, "useless", "prefetches", "prefetched lines evicted before any use");

impl LevelStats {
    /// Puts every counter, prefetches in a `prefetch` section.
    pub fn report(&self, out: &mut crate::stats::Report) {
        out.put(&LEVEL_READS, self.reads);
        out.put(&LEVEL_WRITES, self.writes);
        out.put(&LEVEL_READ_HITS, self.read_hits);
        out.put(&LEVEL_WRITE_HITS, self.write_hits);
        out.put(&LEVEL_MISSES, self.misses);
        out.put(&LEVEL_WRITEBACKS, self.writebacks);
        out.section("prefetch", |r| {
            r.put(&PREFETCH_ISSUED, self.prefetch.issued);
            r.put(&PREFETCH_USEFUL, self.prefetch.useful);
            r.put(&PREFETCH_LATE, self.prefetch.late);
            r.put(&PREFETCH_USELESS, self.prefetch.useless);
        });
    }

    fn request(&mut self, write: bool, hit: bool) {
        if write {
            self.writes += 1;
            self.write_hits += hit as u64;
        } else {
            self.reads += 1;
            self.read_hits += hit as u64;
        }
        self.misses += !hit as u64;
    }
}

crate::stats::stats! {
    /// Line transfers of one device (reset after warm-up).
    pub struct DeviceTraffic {
        /// Lines written by the device.
        writes: u64 ["lines"],
        /// Writes that found their line in an L3 (an LLC write hit, whatever the placement).
        write_llc_hits: u64 ["lines"],
        /// Writes that found their line only in cores' private caches, in no L3.
        write_private_hits: u64 ["lines"],
        /// Lines written in part (not counted in `writes`).
        partial_writes: u64 ["lines"],
        /// Partial writes that read their line from memory first (on an Intel I/O stack, a read for
        /// ownership of a line in no cache).
        partial_write_reads: u64 ["lines"],
        /// Lines read by the device.
        reads: u64 ["lines"],
        /// Reads served by a cache rather than memory.
        read_cache_hits: u64 ["lines"],
        /// Reads served by a core's private caches, the line in no L3 (a snoop): part of
        /// `read_cache_hits`.
        read_private_hits: u64 ["lines"],
    }
}

/// What the first demand use of a prefetched line found: how long its data is still in flight
/// and, if it is (a late prefetch), where the prefetch reads it from. A demand that waits for a
/// prefetch is filled from there, as a core's fill counters report it.
#[derive(Debug, Clone, Copy, Default)]
struct FirstUse {
    wait: Time,
    late_source: Option<Source>,
}

impl FirstUse {
    /// The fill's source for an access that found the line at `level`.
    fn source(self, level: Source) -> Source {
        self.late_source.unwrap_or(level)
    }
}

/// Counters of the whole hierarchy (reset after warm-up).
#[derive(Debug, Clone, Default, Serialize)]
pub struct HierarchyStats {
    pub l1d: LevelStats,
    pub l2: LevelStats,
    pub l3: LevelStats,
    /// Demand accesses per logical CPU by source, indexed like `Source::ALL`.
    #[serde(skip)]
    pub fills: Vec<[u64; 6]>,
    /// L1D fills per logical CPU by source, a demand miss's or an L1D prefetch's (a demand that
    /// finds a prefetched line fills nothing more), as a core's "any data cache fills" counters.
    #[serde(skip)]
    pub dc_fills: Vec<[u64; 6]>,
    pub dma_lines_to_memory: u64,
    pub dma_lines_to_cache: u64,
    pub dma_reads_from_cache: u64,
    pub dma_reads_from_memory: u64,
    /// Dirty lines the L3 wrote back while keeping them (`cache::rinse`), counted when they left it.
    pub l3_rinses: u64,
    /// What a chain of caches counts as writes that the level counters above leave out (they are
    /// not in scenario results; `steer trace` adds them, docs/trace-format.md): clean L2 victims
    /// that carried a dirty L1 copy down (an inclusive L2's back-invalidation), and the dirty L2
    /// victims an inclusive or exclusive L3 took in, as write requests there.
    pub chain_writes: ChainWrites,
    /// Lines steered into an L2 that found the fabric's queue full and went by way of memory.
    pub steered_through_memory: u64,
    /// Per registered device, by device id.
    #[serde(skip)]
    pub devices: Vec<DeviceTraffic>,
    /// Cache-line operations simulated (demand accesses plus device line reads and writes).
    pub line_ops: u64,
}

impl HierarchyStats {
    /// All counters at zero, with a row per logical CPU and per device.
    fn zeroed(cpus: usize, devices: usize) -> HierarchyStats {
        HierarchyStats {
            fills: vec![[0; 6]; cpus],
            dc_fills: vec![[0; 6]; cpus],
            devices: vec![DeviceTraffic::default(); devices],
            ..Default::default()
        }
    }
}

/// Writes to the level below that `LevelStats` leaves out; see `HierarchyStats::chain_writes`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChainWrites {
    /// Clean L2 victims whose L1 copy, dropped with them, was dirty.
    pub l2_dirty_l1_copies: u64,
    /// Dirty L2 victims an inclusive or exclusive L3 took in that it held already.
    pub l3_write_hits: u64,
    /// Dirty L2 victims an inclusive or exclusive L3 took in that it did not hold.
    pub l3_write_misses: u64,
}

/// Ids of the hierarchy's random streams (`units::stream_seed`): each cache's replacement draws
/// its own (the level's id plus the core's or CCX's index), and rinsing one more.
const L1_STREAMS: u64 = 1 << 32;
const L2_STREAMS: u64 = 2 << 32;
const L3_STREAMS: u64 = 3 << 32;
const RINSE_STREAM: u64 = 4 << 32;

/// A cache array allocated when it is first filled: a platform has far more cores than a
/// scenario uses, and a cache never filled answers every lookup with a miss.
struct LazyCache {
    geometry: Geometry,
    /// Whether the cache keeps a stamp for each line.
    stamped: bool,
    cache: Option<Box<Cache>>,
}

impl LazyCache {
    /// The cache of `geometry` whose random choices follow stream `stream` of the run's `seed`.
    fn new(geometry: &Geometry, seed: u64, stream: u64) -> LazyCache {
        let mut geometry = geometry.clone();
        geometry.options.seed = stream_seed(seed, stream);
        LazyCache { geometry, stamped: false, cache: None }
    }

    fn stamped(self, stamped: bool) -> LazyCache {
        LazyCache { stamped, ..self }
    }

    #[inline]
    fn contains(&self, line: Line) -> bool {
        self.cache.as_ref().is_some_and(|c| c.contains(line))
    }

    #[inline]
    fn access(&mut self, line: Line, write: bool) -> Lookup {
        self.cache.as_mut().map_or(Lookup::Miss, |c| c.access(line, write))
    }

    fn insert(&mut self, line: Line, dirty: bool, allowed: u64) -> Option<Evicted> {
        self.insert_filling_from(line, dirty, allowed, FreeWay::Lowest)
    }

    fn insert_filling_from(&mut self, line: Line, dirty: bool, allowed: u64, free_way: FreeWay) -> Option<Evicted> {
        let (geometry, stamped) = (&self.geometry, self.stamped);
        self.cache
            .get_or_insert_with(|| {
                let mut cache = Box::new(Cache::new(geometry));
                if stamped {
                    cache.keep_stamps();
                }
                cache
            })
            .insert_filling_from(line, dirty, allowed, free_way)
    }

    fn stamp(&mut self, line: Line, stamp: u64) {
        if let Some(c) = self.cache.as_mut() {
            c.stamp(line, stamp);
        }
    }

    fn stamp_of(&self, line: Line) -> Option<u64> {
        self.cache.as_ref().and_then(|c| c.stamp_of(line))
    }

    fn remove(&mut self, line: Line) -> Option<bool> {
        self.cache.as_mut().and_then(|c| c.remove(line))
    }

    fn mark_dirty(&mut self, line: Line) -> bool {
        self.cache.as_mut().is_some_and(|c| c.mark_dirty(line))
    }

    fn is_dirty(&self, line: Line) -> bool {
        self.cache.as_ref().is_some_and(|c| c.is_dirty(line))
    }

    #[inline]
    fn is_exclusive(&self, line: Line) -> bool {
        self.cache.as_ref().is_some_and(|c| c.is_exclusive(line))
    }

    fn set_exclusive(&mut self, line: Line, exclusive: bool) {
        if let Some(c) = self.cache.as_mut() {
            c.set_exclusive(line, exclusive);
        }
    }

    fn demote(&mut self, line: Line) {
        if let Some(c) = self.cache.as_mut() {
            c.demote(line);
        }
    }

    fn mark_prefetched(&mut self, line: Line) {
        if let Some(c) = self.cache.as_mut() {
            c.mark_prefetched(line);
        }
    }

    fn prefetch_set_of(&self, line: Line) {
        if let Some(c) = self.cache.as_ref() {
            c.prefetch_set_of(line);
        }
    }

    fn lines(&self) -> impl Iterator<Item = (Line, bool)> + '_ {
        self.cache.iter().flat_map(|c| c.lines())
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.cache.as_ref().map_or(Ok(()), |c| c.check_invariants())
    }
}

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
    /// The request being carried out (see `Requester`).
    requester: Requester,
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
            requester: Requester::Cpu(0),
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

    fn l3_id(&self, ccx: u32) -> u32 {
        self.topology.cores() + ccx
    }

    fn ccx_of(&self, core: u32) -> u32 {
        self.ccx_of_core[core as usize]
    }

    /// The id of `core`'s CCX's L3 if that L3 is inclusive (it holds a copy of every line the
    /// CCX's L2s hold).
    fn inclusive_l3_of(&self, core: u32) -> Option<u32> {
        (self.l3_relation == Relation::Inclusive).then(|| self.l3_id(self.ccx_of(core)))
    }

    fn dir_add(&mut self, line: Line, id: u32) {
        if let Some(directory) = &mut self.directory {
            directory.add(line.0, id);
        }
    }

    fn dir_remove(&mut self, line: Line, id: u32) {
        if let Some(directory) = &mut self.directory {
            directory.remove(line.0, id);
        }
    }

    /// Drops `core` from the line's holders once neither of its private caches has the line
    /// (without a directory there is nothing to update, so the caches are not even asked).
    fn dir_forget_if_gone(&mut self, core: u32, line: Line) {
        let (l1, l2) = (&self.l1[core as usize], &self.l2[core as usize]);
        if self.directory.is_some() && !l1.contains(line) && !l2.contains(line) {
            self.dir_remove(line, core);
        }
    }

    fn holders(&self, line: Line) -> Holders {
        match &self.directory {
            Some(directory) => self.with_l3_holders(directory.holders(line.0), line, None),
            None => self.probe_holders(line, None, None),
        }
    }

    /// Adds the L3s holding `line` to `holders`, but `skip_ccx`'s: the directory lists only
    /// private caches, since the L3s are few and most have never been filled, so asking those
    /// that have is cheaper than indexing every L3 fill and eviction.
    fn with_l3_holders(&self, mut holders: Holders, line: Line, skip_ccx: Option<u32>) -> Holders {
        for &ccx in &self.filled_l3s {
            if Some(ccx) != skip_ccx && self.l3[ccx as usize].contains(line) {
                holders.add(self.l3_id(ccx));
            }
        }
        holders
    }

    /// Whether a core's private caches and its L3 are the only caches (a trace replay's one core):
    /// then there is no other copy to find or invalidate.
    fn only_own_caches(&self) -> bool {
        self.l1.len() == 1 && self.l3.len() == 1
    }

    /// Holders other than `core`'s own private caches (which the caller has just looked at) and,
    /// if `skip_own_l3`, other than its CCX's L3.
    fn other_holders(&self, line: Line, core: u32, skip_own_l3: bool) -> Holders {
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
    fn probe_holders(&self, line: Line, skip_core: Option<u32>, skip_ccx: Option<u32>) -> Holders {
        let mut holders = Holders::default();
        for &core in &self.filled_cores {
            let (l1, l2) = (&self.l1[core as usize], &self.l2[core as usize]);
            if Some(core) != skip_core && (l1.contains(line) || l2.contains(line)) {
                holders.add(core);
            }
        }
        self.with_l3_holders(holders, line, skip_ccx)
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
        self.requester = Requester::Cpu(cpu);
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
            let (source, dirty, latency) = self.fetch_below_l2(core, line, write, now);
            self.fill_l2(core, line, dirty, now);
            (source, latency)
        };
        if write {
            // Every other copy is gone: later writes need not look for any.
            self.l2[core as usize].set_exclusive(line, true);
        }
        self.fill_l1(core, line, write, write, now);
        self.stats.dc_fills[cpu as usize][source as usize] += 1;
        self.train(
            cpu,
            Level::L2,
            Trigger { line, hit: l2.hit(), prefetch_hit: l2 == Lookup::Hit { prefetched: true } },
            now,
        );
        (source, latency + first.wait)
    }

    fn level_stats(&mut self, level: Level) -> &mut LevelStats {
        match level {
            Level::L1 => &mut self.stats.l1d,
            Level::L2 => &mut self.stats.l2,
            Level::L3 => &mut self.stats.l3,
        }
    }

    /// Accounts the first demand use of a prefetched line: what it waits for a prefetch still in
    /// flight (a late one) and where that prefetch reads the line from.
    #[inline]
    fn first_use(&mut self, level: Level, lookup: Lookup, line: Line, now: Time) -> FirstUse {
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

    fn evicted_unused(&mut self, level: Level, victim: &Evicted) {
        if victim.unused_prefetch {
            self.prefetch_ready.remove(&victim.line.0);
            self.level_stats(level).prefetch.useless += 1;
        }
    }

    /// Lets `cpu`'s prefetcher at `level` observe a demand access, and issues what it asks for.
    /// Many platforms have none: that check is inlined, the training is not.
    #[inline(always)]
    fn train(&mut self, cpu: u32, level: Level, trigger: Trigger, now: Time) {
        let core = self.core_of_cpu[cpu as usize] as usize;
        if self.prefetchers[level as usize][core].is_some() {
            self.run_prefetcher(cpu, level, trigger, now);
        }
    }

    fn run_prefetcher(&mut self, cpu: u32, level: Level, trigger: Trigger, now: Time) {
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
        self.requester = Requester::Cpu(cpu);
        self.stats.line_ops += 1;
        let in_l1 = self.l1[core as usize].contains(line);
        let in_l2 = self.l2[core as usize].contains(line);
        let (latency, source) = match level {
            Level::L1 | Level::L2 if in_l1 || (level == Level::L2 && in_l2) => return None,
            // The L1D's prefetch asks the L2 as its demand miss would: it waits for a line the
            // L2's prefetcher is still fetching, and trains that prefetcher.
            Level::L1 => {
                let (source, latency) = self.serve_l1_miss(cpu, core, line, false, now);
                self.l1[core as usize].mark_prefetched(line);
                (latency, source)
            }
            Level::L2 => {
                let (source, dirty, latency) = self.fetch_below_l2(core, line, false, now);
                self.fill_l2(core, line, dirty, now);
                self.l2[core as usize].mark_prefetched(line);
                (latency, source)
            }
            Level::L3 => {
                if !self.holders(line).is_empty() {
                    return None;
                }
                let ccx = self.ccx_of(core);
                let latency = self.memory.read(line, now);
                self.l3_install(ccx, line, false, now);
                self.l3[ccx as usize].mark_prefetched(line);
                (latency, Source::Dram)
            }
        };
        self.level_stats(level).prefetch.issued += 1;
        self.prefetch_ready.insert(line.0, (now + latency, source));
        Some(latency)
    }

    /// Finds a line missing from `core`'s private caches: own L3, a peer in the CCX, another
    /// CCX, or memory. Returns the source, whether dirty ownership moved to the requester, and
    /// the load-to-use latency.
    fn fetch_below_l2(&mut self, core: u32, line: Line, write: bool, now: Time) -> (Source, bool, Time) {
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
                self.l3_install(ccx, line, false, now);
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
                self.l3_install(ccx, line, false, now);
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

    /// Marks (or unmarks) `core`'s private copies of `line` as the only copies besides its own
    /// CCX's L3 (when the L3 keeps copies of what the L2s hold): exactly what `invalidate_others`
    /// leaves. A mark is cleared whenever another cache may take a copy.
    fn mark_exclusive(&mut self, core: u32, line: Line, exclusive: bool) {
        self.l1[core as usize].set_exclusive(line, exclusive);
        self.l2[core as usize].set_exclusive(line, exclusive);
    }

    /// Invalidates the other caches' copies of `line` `core` holds shared (as `invalidate_others`),
    /// and returns how long that takes: its request reaches them and their invalidations come back,
    /// as a transfer from the farthest would (a peer's in the CCX, a remote cache's beyond it);
    /// nothing when no other core's cache and no other CCX's L3 holds it.
    fn take_ownership(&mut self, core: u32, line: Line, now: Time) -> Time {
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
    fn invalidate_others(&mut self, core: u32, line: Line, now: Time) -> bool {
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
    fn drop_copy(&mut self, holder: u32, line: Line, now: Time) -> bool {
        let cores = self.topology.cores();
        if holder >= cores {
            return self.l3_remove(holder - cores, line, now);
        }
        let l1 = self.l1[holder as usize].remove(line).unwrap_or(false);
        let l2 = self.l2[holder as usize].remove(line).unwrap_or(false);
        self.dir_remove(line, holder);
        l1 || l2
    }

    /// Installs a line in a core's L1. The core is already among its holders: every L1 fill
    /// follows an L2 hit or an L2 fill.
    fn fill_l1(&mut self, core: u32, line: Line, dirty: bool, exclusive: bool, now: Time) {
        let l1 = &mut self.l1[core as usize];
        let victim = l1.insert(line, dirty, self.masks[0].of(self.requester));
        if exclusive {
            // Before the victim goes down: that may push this line out of the L2 into the L3,
            // which clears the mark again.
            l1.set_exclusive(line, true);
        }
        if let Some(victim) = victim {
            self.l1_victim(core, victim, now);
        }
    }

    fn l1_victim(&mut self, core: u32, victim: Evicted, now: Time) {
        self.evicted_unused(Level::L1, &victim);
        if victim.dirty {
            self.stats.l1d.writebacks += 1;
            let hit = self.l2[core as usize].access(victim.line, true).hit();
            self.stats.l2.request(true, hit);
            if !hit {
                // Only a non-inclusive L2 can miss here: write-allocate fetches the line first.
                let (_, _, _) = self.fetch_below_l2(core, victim.line, false, now);
                self.fill_l2(core, victim.line, true, now);
            }
        } else if self.l2_relation != Relation::Inclusive {
            // An inclusive L2 still holds the line: the core remains a holder.
            self.dir_forget_if_gone(core, victim.line);
        }
    }

    fn fill_l2(&mut self, core: u32, line: Line, dirty: bool, now: Time) {
        if self.l2[core as usize].cache.is_none() {
            self.first_fill_of(core);
        }
        if let Some(victim) = self.l2[core as usize].insert(line, dirty, self.masks[1].of(self.requester)) {
            self.l2_victim(core, victim, now);
        }
        self.dir_add(line, core);
    }

    /// `core`'s caches are about to be filled for the first time: one more to ask for copies, and
    /// once there are more than `PROBE_LIMIT` (adaptively) a directory of what they hold.
    fn first_fill_of(&mut self, core: u32) {
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

    fn l2_victim(&mut self, core: u32, victim: Evicted, now: Time) {
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
                    self.l3_install(ccx, victim.line, dirty, now);
                }
            }
            Relation::Inclusive => {
                if dirty && !l3.mark_dirty(victim.line) {
                    self.l3_install(ccx, victim.line, true, now);
                }
            }
            Relation::NonInclusive => {
                if dirty {
                    let hit = l3.access(victim.line, true).hit();
                    self.stats.l3.request(true, hit);
                    if !hit {
                        // Write-allocate: fetch from memory, then install dirty.
                        self.memory.read(victim.line, now);
                        self.l3_install(ccx, victim.line, true, now);
                    }
                }
            }
        }
    }

    fn l3_install(&mut self, ccx: u32, line: Line, dirty: bool, now: Time) {
        self.l3_install_in(ccx, line, dirty, self.masks[2].of(self.requester), now);
    }

    /// Installs a line in the L3 of `ccx` within the ways `allowed`.
    fn l3_install_in(&mut self, ccx: u32, line: Line, dirty: bool, allowed: u64, now: Time) {
        let l3 = &mut self.l3[ccx as usize];
        if l3.cache.is_none() {
            let at = self.filled_l3s.partition_point(|&c| c < ccx);
            self.filled_l3s.insert(at, ccx);
        }
        // A device's allocations fill its ways from the highest, a core's from the lowest: DDIO's
        // ways are the highest and those of lines cores used the lowest, so where a DDIO mask
        // reaches into those, each still fills from its own end (assumed; docs/ddio.md).
        let free_way = match self.requester {
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
    fn l3_remove(&mut self, ccx: u32, line: Line, now: Time) -> bool {
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

    fn l3_victim(&mut self, ccx: u32, victim: Evicted, now: Time) {
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

    /// Device `device` writes a whole line; `destination` comes from its placement policy.
    ///
    /// Way masks (SDCIAE, resctrl `io_alloc`): every allocation this write causes uses the
    /// device's mask, so an L3 injection allocates in the device's L3 ways, and so do the victims
    /// an L2 injection pushes into the L3. The sources do not say how `io_alloc` treats
    /// L2-injected lines; the model assumes that a line injected into an L2 and evicted later by
    /// the core's own activity is allocated in the L3 under the core's mask: only evictions
    /// caused by the injecting write itself use the device's mask.
    pub fn dma_write(&mut self, device: u32, line: Line, destination: Destination, now: Time) {
        let cores = self.topology.cores();
        let holders = self.holders(line);
        let traffic = &mut self.stats.devices[device as usize];
        traffic.writes += 1;
        if holders.iter().any(|h| h >= cores) {
            traffic.write_llc_hits += 1;
        } else if !holders.is_empty() {
            traffic.write_private_hits += 1;
        }
        self.place_write(device, line, holders, destination, now);
    }

    /// Device `device` writes part of a line (the end of a packet or of a segment, a completion
    /// entry smaller than a line), as the platform's I/O stack treats such writes
    /// (`io.partial_write`): a line in no cache is read from memory first under `rfo` and
    /// `memory`, and `memory` writes the merged line there whatever `destination` says.
    pub fn dma_write_partial(&mut self, device: u32, line: Line, destination: Destination, now: Time) {
        let holders = self.holders(line);
        let traffic = &mut self.stats.devices[device as usize];
        traffic.partial_writes += 1;
        if self.partial_write != PartialWrite::Merge && holders.is_empty() {
            traffic.partial_write_reads += 1;
            self.memory.read(line, now);
        }
        let destination = if self.partial_write == PartialWrite::Memory { Destination::Memory } else { destination };
        self.place_write(device, line, holders, destination, now);
    }

    /// Carries out a device's write of a line that `holders` hold.
    fn place_write(&mut self, device: u32, line: Line, holders: Holders, destination: Destination, now: Time) {
        self.requester = Requester::Device(device);
        self.stats.line_ops += 1;
        let cores = self.topology.cores();
        let destination = match destination {
            Destination::L3Of { cpu } => Destination::L3 { ccx: self.ccx_of_cpu(cpu) },
            other => other,
        };
        match destination {
            Destination::Memory => self.write_to_memory(line, holders, now),
            Destination::L2 { cpu } => {
                let core = self.core_of_cpu[cpu as usize];
                if !self.steering.is_empty() {
                    let ccx = self.ccx_of(core);
                    if let Steered::ToMemory { fetch_at } = self.steering[ccx as usize].steer(now) {
                        self.steer_through_memory(core, line, holders, now, fetch_at);
                        return;
                    }
                }
                // An inclusive L3 keeps a copy of what its CCX's L2s hold, an injected line too.
                let own_l3 = self.inclusive_l3_of(core);
                for holder in holders.iter().filter(|&h| h != core && Some(h) != own_l3) {
                    self.drop_copy(holder, line, now);
                }
                let ccx = self.ccx_of(core);
                if own_l3.is_some() && !self.l3[ccx as usize].contains(line) {
                    self.l3_install(ccx, line, false, now);
                }
                // The core's L1 copy is stale; the next load refills it from L2.
                self.l1[core as usize].remove(line);
                // A write to a present line updates it in place. Injected lines entering as
                // most recently used, it is a use; entering where replacement evicts next, it
                // leaves the line where it is: only a core's use moves it (a line written in
                // two parts, at a segment boundary, is not promoted by the second).
                let present = match self.l2_injected_insertion {
                    InjectedInsertion::Mru => self.l2[core as usize].access(line, true).hit(),
                    InjectedInsertion::Lru => self.l2[core as usize].mark_dirty(line),
                };
                if !present {
                    self.fill_l2_injected(core, line, true, now);
                }
                self.dir_add(line, core);
                self.stats.dma_lines_to_cache += 1;
            }
            Destination::L3 { ccx } => {
                let id = self.l3_id(ccx);
                let used_by_cores = holders.iter().any(|h| h < cores);
                for holder in holders.iter().filter(|&h| h != id) {
                    self.drop_copy(holder, line, now);
                }
                // A write hit updates in place (a use) and never allocates. A line taken from a
                // core's caches goes to the ways of lines cores use, where there are such.
                if !self.l3[ccx as usize].access(line, true).hit() {
                    if used_by_cores && self.inclusive_mask != 0 {
                        self.l3_install_in(ccx, line, true, self.inclusive_mask, now);
                    } else {
                        self.l3_install(ccx, line, true, now);
                    }
                }
                self.stats.dma_lines_to_cache += 1;
            }
            Destination::UpdateIfCached => {
                // The copy kept is the first holder: a core's private caches before any L3.
                let Some(keep) = holders.iter().next() else {
                    return self.write_to_memory(line, holders, now);
                };
                // A core's copy keeps its CCX's inclusive L3 copy with it.
                let keep_l3 = if keep < cores { self.inclusive_l3_of(keep) } else { None };
                for holder in holders.iter().filter(|&h| h != keep && Some(h) != keep_l3) {
                    self.drop_copy(holder, line, now);
                }
                if keep >= cores {
                    self.l3[(keep - cores) as usize].access(line, true);
                } else if self.l2[keep as usize].access(line, true).hit() {
                    // As for an L2 injection, the L1 copy is stale and the next load refills it.
                    self.l1[keep as usize].remove(line);
                } else {
                    // Only in the L1 of a core whose L2 is not inclusive: update it there.
                    self.l1[keep as usize].access(line, true);
                }
                self.stats.dma_lines_to_cache += 1;
            }
            Destination::L3Of { .. } => unreachable!("resolved to L3 above"),
        }
    }

    /// A line steered into `core`'s L2 that found the fabric's queue full: it is written to
    /// memory, cached copies dropped, and the L2 fetches it from there at `fetch_at`, clean, where
    /// an injected line would have entered its replacement order.
    fn steer_through_memory(&mut self, core: u32, line: Line, holders: Holders, now: Time, fetch_at: Time) {
        self.write_to_memory(line, holders, now);
        self.memory.read(line, fetch_at);
        if self.inclusive_l3_of(core).is_some() {
            self.l3_install(self.ccx_of(core), line, false, now);
        }
        self.fill_l2_injected(core, line, false, now);
        self.stats.steered_through_memory += 1;
    }

    /// A device's write of a whole line to memory: cached copies are dropped, dirty or not.
    fn write_to_memory(&mut self, line: Line, holders: Holders, now: Time) {
        for holder in holders.iter() {
            self.drop_copy(holder, line, now);
        }
        self.memory.write(line, now);
        self.stats.dma_lines_to_memory += 1;
    }

    /// Fills `core`'s L2 with a line a device placed there, where injected lines enter its
    /// replacement order.
    fn fill_l2_injected(&mut self, core: u32, line: Line, dirty: bool, now: Time) {
        self.fill_l2(core, line, dirty, now);
        if self.l2_injected_insertion == InjectedInsertion::Lru {
            self.l2[core as usize].demote(line);
        }
    }

    /// The CCX of logical CPU `cpu`.
    pub fn ccx_of_cpu(&self, cpu: u32) -> u32 {
        self.ccx_of(self.core_of_cpu[cpu as usize])
    }

    /// Device `device` reads a line (TX DMA, descriptor fetch): served by any cache holding it
    /// (without allocating), else by memory. Returns how long the host takes to supply it: the
    /// L3's latency from an L3, the memory's idle latency from a core's private caches, the
    /// memory's (queueing included) from memory.
    pub fn dma_read(&mut self, device: u32, line: Line, now: Time) -> Time {
        self.stats.line_ops += 1;
        self.stats.devices[device as usize].reads += 1;
        let holders = self.holders(line);
        if !holders.is_empty() {
            self.stats.dma_reads_from_cache += 1;
            self.stats.devices[device as usize].read_cache_hits += 1;
            // A line only a core's private caches hold is taken from there by a snoop, which
            // costs about what the memory's latency does (Double Trouble, on Skylake-SP).
            let cores = self.topology.cores();
            if holders.iter().any(|id| id >= cores) {
                self.latency.l3
            } else {
                self.stats.devices[device as usize].read_private_hits += 1;
                self.memory.idle_latency()
            }
        } else {
            self.stats.dma_reads_from_memory += 1;
            self.memory.read(line, now)
        }
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

    /// Checks that a line a core's private caches mark as exclusive has no other copy but its own
    /// CCX's L3 (where the L3 keeps copies of the L2s' lines).
    fn check_exclusive_marks(&self) -> Result<(), String> {
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
