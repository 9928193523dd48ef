//! What the hierarchy counts: requests and hits per level, prefetches, fills by source, device traffic.

use serde::Serialize;

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

    pub(super) fn request(&mut self, write: bool, hit: bool) {
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
    pub(super) fn zeroed(cpus: usize, devices: usize) -> HierarchyStats {
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
