//! The platform: sockets -> CCXs (core complexes sharing an L3) -> cores, their caches, the fabric
//! between them, and memory. Presets are commented TOML files under `presets/`; `host` is read from
//! this machine's sysfs.

use crate::cache::prefetch::PrefetcherSpec;
use crate::cache::replacement::{self, PolicyOptions, ReplacementPolicies};
use crate::cache::slice_hash::SliceHash;
use crate::cache::Geometry;
use crate::error::{ensure, ConfigError, ConfigResult, Shown};
use crate::params::{choice, params, Describe, Name, OrNone};

choice! {
    /// How a cache level relates to the level above it (closer to the core).
    pub enum Relation {
        /// Holds everything above it: fills allocate here; evicting here invalidates above.
        Inclusive,
        /// Victim cache: fills bypass it; lines evicted above (clean or dirty) are installed here;
        /// a hit moves the line up and removes it here.
        Exclusive,
        /// Fills allocate here; evictions here leave copies above; dirty lines evicted above are
        /// written here with write-allocate (fetched from below if absent).
        NonInclusive,
    }
}

params! {
    /// The ways one allocating agent may fill at a cache level (a CAT class of service, DDIO's
    /// ways, resctrl io_alloc).
    pub struct WayMaskSpec {
        /// `cpu:N` (fills caused by logical CPU N) or `device:NAME` (a device's DMA writes).
        agent: String = String::new(),
        /// Bit i set: the agent may allocate into way i (reads and updates in place are not limited).
        mask: u64 = 0,
    }
}

/// The longest a line may occupy a memory channel: well inside the window of a channel's calendar
/// (`memory`), so that a booking always finds room in it (a slower channel is refused here).
pub const MAX_LINE_SERVICE_NS: f64 = 100_000.0;

/// Who a way mask is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaskAgent {
    Cpu(u32),
    Device(String),
}

impl WayMaskSpec {
    pub fn parsed_agent(&self) -> Result<MaskAgent, String> {
        match self.agent.split_once(':') {
            Some(("cpu", n)) => n
                .parse()
                .map(MaskAgent::Cpu)
                .map_err(|_| format!("`{}`: expected cpu:N with N a CPU number", self.agent)),
            Some(("device", name)) if !name.is_empty() => Ok(MaskAgent::Device(name.to_string())),
            _ => Err(format!("`{}`: expected cpu:N or device:NAME", self.agent)),
        }
    }
}

choice! {
    /// What the I/O stack does with a device's write of part of a line.
    pub enum PartialWrite {
        /// Places it as a whole line is, merging with whatever the line held.
        Merge,
        /// A read for ownership (Intel's I/O stack): a line in no cache is read from memory
        /// first, then the write is placed as a whole line is.
        Rfo,
        /// Writes it to memory, never into a cache: a cached copy is merged and dropped, and a
        /// line in no cache costs the memory controller a read before the write (ECC covers
        /// whole lines).
        Memory,
    }
}

choice! {
    /// Where a line a device writes into a cache (cache injection) enters its set's replacement
    /// order.
    pub enum InjectedInsertion {
        /// Where a core's fill goes: most recently used.
        Mru,
        /// Where replacement evicts next: the line displaces only lines colder than it, until a
        /// core uses it.
        Lru,
    }
}

params! {
    /// One cache level.
    pub struct CacheSpec {
        /// Capacity in KiB.
        size_kib: u64 = 32,
        /// Associativity (ways per set).
        ways: u32 = 8,
        /// Line size in bytes (a power of two, the same at every level).
        line_bytes: u32 = 64,
        /// Load-to-use latency of a hit at this level, in core cycles.
        latency_cycles: f64 = 4.0,
        /// Replacement policy: the name of a registered one.
        replacement: Name<ReplacementPolicies> = Name::new("lru"),
        /// Relation to the level above (ignored for L1).
        relation: Relation = Relation::Inclusive,
        /// Whether a write hit counts as a use for replacement (false reproduces pycachesim).
        write_hit_updates_recency: bool = true,
        /// Ways each listed agent may allocate into; agents not listed may use every way.
        way_masks: Vec<WayMaskSpec> = Vec::new(),
        /// Hardware prefetcher training on this level's demand accesses (L1D and L2 only).
        prefetcher: PrefetcherSpec = PrefetcherSpec::default(),
        /// Where lines a device injects into this level enter replacement, `mru` or `lru`
        /// (read at L2, SDCI's target).
        injected_insertion: InjectedInsertion = InjectedInsertion::Mru,
        /// Slices the sets are split into (Intel's LLC: one per CHA). A line's slice comes from a
        /// hash of its address, its set within the slice from the address bits above the line
        /// offset; 1: one array indexed by the address bits alone.
        slices: u32 = 1,
        /// With slices: how a line's slice is chosen, `uniform` (pseudo-random) or `skylake_sp`
        /// (McCalpin's measurement of Skylake-SP's hash for 18 slices; model addresses taken as
        /// physical).
        slice_hash: SliceHash = SliceHash::Uniform,
        /// For an exclusive L3: whether it keeps a copy of a line one core of its CCX reads from
        /// another's private caches (Skylake-SP's non-inclusive LLC keeps lines two cores share).
        keeps_shared: bool = false,
        /// For an exclusive L3: whether a clean line an L2 evicts is installed (true) or dropped
        /// (false: only dirty victims are written into the L3).
        clean_victims: bool = true,
        /// For the L3: how fast it writes dirty lines back to memory in idle time, keeping them
        /// clean ("rinsing", AMD US 12,399,839 B2), in GB/s per L3, shared evenly by the lines
        /// that entered it dirty (`cache::rinse`); none: never (only eviction writes back).
        rinse_gbs: OrNone = OrNone(None),
    }
}

impl CacheSpec {
    pub fn lines(&self) -> u64 {
        self.size_kib * 1024 / self.line_bytes as u64
    }

    pub fn geometry(&self) -> Geometry {
        Geometry {
            sets: (self.lines() / self.ways as u64) as usize,
            ways: self.ways as usize,
            slices: self.slices as usize,
            slice_hash: self.slice_hash,
            policy: replacement::find(&self.replacement).map(|p| p.name).unwrap_or("lru"),
            options: PolicyOptions { write_hit_updates_recency: self.write_hit_updates_recency, seed: 0 },
        }
    }

    fn validate(&self, path: &str) -> ConfigResult<()> {
        let key = |k: &str| format!("{path}.{k}");
        ensure(self.ways >= 1, &key("ways"), || format!("must be at least 1 (got {})", self.ways))?;
        ensure(self.ways <= 64, &key("ways"), || format!("at most 64 ways are modelled (got {})", self.ways))?;
        ensure(self.line_bytes.is_power_of_two() && self.line_bytes >= 8, &key("line_bytes"), || {
            format!("must be a power of two of at least 8 (got {})", self.line_bytes)
        })?;
        ensure(self.size_kib >= 1, &key("size_kib"), || "must be at least 1".into())?;
        let bytes = self.size_kib * 1024;
        let set_bytes = self.ways as u64 * self.line_bytes as u64;
        ensure(bytes.is_multiple_of(set_bytes), &key("size_kib"), || {
            format!(
                "{} KiB does not divide into sets of {} ways x {} B lines",
                self.size_kib, self.ways, self.line_bytes
            )
        })?;
        let sets = bytes / set_bytes;
        ensure(self.slices >= 1 && sets.is_multiple_of(self.slices as u64), &key("slices"), || {
            format!("{sets} sets do not divide into {} slices", self.slices)
        })?;
        self.slice_hash.check(self.slices, self.line_bytes).map_err(|m| ConfigError::new(key("slice_hash"), m))?;
        ensure(self.latency_cycles >= 0.0, &key("latency_cycles"), || "must not be negative".into())?;
        self.replacement.check(&key("replacement"))?;
        let policy = replacement::find(&self.replacement).expect("a checked name");
        (policy.check_ways)(self.ways as usize).map_err(|m| ConfigError::new(key("replacement"), m))?;
        self.prefetcher.validate(&key("prefetcher"))?;
        let all_ways = if self.ways >= 64 { u64::MAX } else { (1u64 << self.ways) - 1 };
        for (i, mask) in self.way_masks.iter().enumerate() {
            let key = |k: &str| format!("{path}.way_masks.{i}.{k}");
            mask.parsed_agent().map_err(|m| ConfigError::new(key("agent"), m))?;
            ensure(mask.mask != 0, &key("mask"), || "must allow at least one way".into())?;
            ensure(mask.mask & !all_ways == 0, &key("mask"), || {
                format!("{:#x} names ways beyond the {} this cache has", mask.mask, self.ways)
            })?;
        }
        Ok(())
    }
}

params! {
    /// Sockets, core complexes and cores.
    pub struct TopologySpec {
        /// Number of sockets.
        sockets: u32 = 1,
        /// Core complexes (CCX: cores sharing one L3) per socket.
        ccx_per_socket: u32 = 1,
        /// Cores per CCX.
        cores_per_ccx: u32 = 8,
        /// Hardware threads per core (SMT); CPU n and n + cores are siblings, as Linux numbers them.
        threads_per_core: u32 = 1,
    }
}

impl TopologySpec {
    pub fn cores(&self) -> u32 {
        self.sockets * self.ccx_per_socket * self.cores_per_ccx
    }
    pub fn ccx_count(&self) -> u32 {
        self.sockets * self.ccx_per_socket
    }
    pub fn cpus(&self) -> u32 {
        self.cores() * self.threads_per_core
    }
    /// Physical core of a logical CPU.
    pub fn core_of_cpu(&self, cpu: u32) -> u32 {
        cpu % self.cores()
    }
    pub fn ccx_of_core(&self, core: u32) -> u32 {
        core / self.cores_per_ccx
    }
    pub fn socket_of_ccx(&self, ccx: u32) -> u32 {
        ccx / self.ccx_per_socket
    }
    /// An APIC-style id of a logical CPU: its physical core shifted left by the SMT bits, or'ed
    /// with its thread number (CPU n and n + cores are threads 0 and 1 of core n).
    pub fn apic_id(&self, cpu: u32) -> u32 {
        let smt_bits = self.threads_per_core.next_power_of_two().trailing_zeros();
        (self.core_of_cpu(cpu) << smt_bits) | (cpu / self.cores())
    }
}

/// Bounds of a socket's memory: real parts have up to four NUMA nodes a socket and a dozen
/// channels a node.
pub const MAX_NODES_PER_SOCKET: u32 = 16;
pub const MAX_CHANNELS_PER_NODE: u32 = 64;

/// The most hardware threads a core may have (POWER's SMT8).
pub const MAX_THREADS_PER_CORE: u32 = 8;

/// The most misses a core may keep in flight: real cores track tens.
pub const MAX_OUTSTANDING_MISSES: u32 = 1024;

/// The largest instruction window a core may have: real reorder buffers hold hundreds.
pub const MAX_WINDOW_INSTRUCTIONS: u32 = 8192;
/// The most lines a store buffer may hold: real ones hold tens to a hundred-odd stores.
pub const MAX_STORE_BUFFER_LINES: u32 = 4096;
/// Bounds of a core's TLB: real last-level TLBs hold a few thousand entries, pages are 4 KiB to
/// 1 GiB, a walk reads at most one entry per level of two four-level tables, and cores have a few
/// walkers.
pub const MAX_TLB_ENTRIES: u32 = 1 << 16;
pub const MAX_PAGE_KIB: u32 = 1 << 20;
pub const MAX_WALK_READS: u32 = 8;
pub const MAX_WALKERS: u32 = 64;
/// The most lines a fabric's steering queue may hold (64 MiB of 64 B lines).
pub const MAX_STEER_QUEUE_LINES: u32 = 1 << 20;

params! {
    /// Core timing.
    pub struct CoreSpec {
        /// Core clock in GHz while running the workload.
        freq_ghz: f64 = 3.0,
        /// Outstanding L1D misses a core can have in flight (memory-level parallelism).
        outstanding_misses: u32 = 16,
        /// Cycles to issue one cache-line load that hits (the load ports' throughput).
        issue_cycles_per_line: f64 = 1.0,
        /// Cycles the store port takes per cache line stored: stores issue on their own port, beside
        /// the loads, and wait in the store buffer until they commit to the L1D in program order.
        store_issue_cycles_per_line: f64 = 1.0,
        /// Cycles the L1D's fill path takes per line it brings in from the L2 or beyond (the L2-to-L1D
        /// bandwidth): a core's L1D misses are taken at most one a this many cycles.
        fill_cycles_per_line: f64 = 1.0,
        /// Lines of stores the store buffer holds between issue and commit: a core stalls on a store
        /// only when it is full (the oldest store still waits for its line, or for the port).
        store_buffer_lines: u32 = 64,
        /// Instructions in flight past the oldest unfinished one (reorder buffer; completion table):
        /// how far a core runs ahead of a load whose data it waits for.
        window_instructions: u32 = 256,
        /// Address translation: the last-level TLB and its page walkers.
        tlb: TlbSpec = TlbSpec::default(),
    }
}

params! {
    /// A core's address translation.
    pub struct TlbSpec {
        /// Entries of the last-level (second-level) data TLB; 0: translation is not modelled
        /// (every access finds its translation).
        entries: u32 = 0,
        /// Its associativity: `entries` is a whole number of sets of this many ways.
        ways: u32 = 8,
        /// KiB one entry maps: the page size the workload's memory is mapped with (inside a
        /// virtual machine, the smaller of the guest's page and the host's page backing it).
        page_kib: u32 = 4,
        /// Dependent page-table reads of a walk that misses the TLB (1 on a bare machine, 2 under
        /// nested paging: the guest's entry, then the host's).
        walk_reads: u32 = 1,
        /// Walks a core runs at once.
        walkers: u32 = 1,
    }
}

params! {
    /// The on-chip fabric between core complexes, memory and I/O.
    pub struct FabricSpec {
        /// Load-to-use latency of a line supplied by another core's private cache in the same CCX (ns).
        peer_l2_latency_ns: f64 = 25.0,
        /// Load-to-use latency of a line supplied by a cache in another CCX (ns).
        remote_cache_latency_ns: f64 = 100.0,
        /// Bandwidth of one socket's on-chip mesh for bulk copies (GB/s); every copy touching the
        /// socket's memory or copy engines shares it.
        mesh_gbs: f64 = 1000.0,
        /// Bandwidth of the socket interconnect (UPI, xGMI) in each direction (GB/s).
        socket_link_gbs: f64 = 64.0,
        /// Latency a socket crossing adds to a memory read (ns).
        socket_link_latency_ns: f64 = 60.0,
    }
}

params! {
    /// High-bandwidth memory in flat mode (Xeon Max): memory-only NUMA nodes, one per compute
    /// node, numbered after every DDR node (with 8 DDR nodes, node k's HBM is node k + 8).
    pub struct HbmSpec {
        /// HBM nodes per socket (0: no HBM); when present, one per DDR node.
        nodes_per_socket: u32 = 0,
        /// Capacity of one HBM node (GiB).
        gib_per_node: u32 = 16,
        /// Sustainable bandwidth of one HBM node (GB/s; reads and writes share it).
        gbs_per_node: f64 = 100.0,
        /// Idle load-to-use latency of an HBM read from a core of the same socket (ns).
        idle_latency_ns: f64 = 130.0,
    }
}

/// What a memory node is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    Ddr,
    Hbm,
}

/// One NUMA memory node as bulk copies see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryNode {
    pub kind: MemoryKind,
    pub socket: u32,
    /// The compute node it belongs to (itself for DDR nodes).
    pub compute_node: u32,
    /// Sustainable bandwidth, reads and writes together (GB/s).
    pub gbs: f64,
    /// Idle read latency from a core of its own socket (ns).
    pub latency_ns: f64,
}

params! {
    /// DRAM: NUMA nodes, each with interleaved channels.
    pub struct MemorySpec {
        /// NUMA nodes per socket.
        nodes_per_socket: u32 = 1,
        /// Memory channels per NUMA node.
        channels_per_node: u32 = 2,
        /// Sustainable bandwidth of one channel in GB/s (reads and writes share it).
        channel_gbs: f64 = 20.0,
        /// Idle load-to-use latency of a DRAM read from a core, fabric included (ns).
        idle_latency_ns: f64 = 100.0,
        /// Bytes mapped to one channel before moving to the next.
        interleave_bytes: u32 = 256,
        /// How long a controller holds a written line in its write queue before it reaches DRAM
        /// (ns); a read of it meanwhile is answered from the queue. 0: none modelled.
        write_queue_ns: f64 = 0.0,
        /// Load-to-use latency of a read answered from a controller's write queue, fabric hops
        /// included (ns).
        write_queue_latency_ns: f64 = 0.0,
    }
}

impl MemorySpec {
    pub fn nodes(&self, topology: &TopologySpec) -> u32 {
        self.nodes_per_socket * topology.sockets
    }
}

params! {
    /// How inbound device writes reach the caches: the LLC ways they may allocate in (Intel DDIO),
    /// partial-line writes, and the path of writes steered into a core's L2 (AMD SDCI).
    pub struct IoSpec {
        /// LLC ways inbound writes may allocate into (DDIO), the highest ways; 0 = no DDIO.
        ddio_ways: u32 = 0,
        /// Explicit DDIO way mask (the IIO LLC WAYS register), overriding `ddio_ways` when non-zero.
        ddio_mask: u64 = 0,
        /// LLC ways (the lowest) a device write allocates into when it finds its line in a core's
        /// private caches, that is, a line cores have used: Skylake-SP moves such lines into a
        /// second region of two ways (mask 0x003) whatever DDIO's ways. 0: the device's own ways.
        inclusive_ways: u32 = 0,
        /// What the I/O stack does with a device's write of part of a line.
        partial_write: PartialWrite = PartialWrite::Merge,
        /// How fast a CCX takes device writes steered into its cores' L2s: bytes per cycle of
        /// the cores' clock (`core.freq_ghz`) and per core of the CCX, since a CCX takes lines
        /// from the fabric through its L3, which on Zen has one slice per core and runs at the
        /// cores' clock (none: as fast as they come). Past it, steered lines queue
        /// (`steer_queue_lines`).
        steer_bytes_per_cycle: OrNone = OrNone(None),
        /// Steered lines the fabric holds for each CCX while they wait for delivery. A line that
        /// finds them all taken is written to memory, and its target L2 fetches it from there
        /// once the lines ahead of it are delivered (`steering`).
        steer_queue_lines: u32 = 1024,
    }
}

impl IoSpec {
    /// The DDIO way mask of an LLC with `ways` ways; 0 when the platform has no DDIO.
    pub fn ddio_mask(&self, ways: u32) -> u64 {
        if self.ddio_mask != 0 {
            self.ddio_mask
        } else {
            let all = if ways >= 64 { u64::MAX } else { (1u64 << ways) - 1 };
            let low = if self.ddio_ways >= ways { 0 } else { (1u64 << (ways - self.ddio_ways)) - 1 };
            all & !low
        }
    }

    /// The mask of `inclusive_ways`; 0 when there are none.
    pub fn inclusive_mask(&self) -> u64 {
        if self.inclusive_ways >= 64 {
            u64::MAX
        } else {
            (1u64 << self.inclusive_ways) - 1
        }
    }
}

choice! {
    /// TPH Completer support of the root ports (PCIe Device Capabilities 2 bits 13:12).
    pub enum Completer {
        /// TPH requests with 8-bit and extended (16-bit) steering tags.
        TphAndExtended,
        /// TPH requests with 8-bit steering tags only.
        TphOnly,
        /// No TPH completer: no device below the root ports can enable TPH.
        None,
    }
}

params! {
    /// PCIe TPH on the host side (AMD SDCI): what the root ports complete, the steering-tag map
    /// firmware publishes through the host bridge's ACPI `_DSM`, and Linux's `pci=notph`.
    pub struct TphHostSpec {
        /// TPH Completer support of the root ports: `tph_and_extended`, `tph_only` or `none`.
        completer: Completer = Completer::TphAndExtended,
        /// Linux booted with `pci=notph`: drivers cannot enable TPH (capabilities are still found).
        notph: bool = false,
        /// The `_DSM` steering tag of CPU n (volatile memory) is `st_base` plus its APIC-style id
        /// (core << SMT bits | thread). A stand-in: a real BIOS publishes an arbitrary table.
        st_base: u32 = 0,
        /// The `_DSM` publishes 8-bit tags (each only where the tag is below 256).
        st_8bit: bool = true,
        /// The `_DSM` publishes extended (16-bit) tags.
        st_16bit: bool = true,
    }
}

params! {
    /// A complete platform.
    pub struct PlatformSpec {
        /// Preset name, or a free name for a full spec.
        name: String = "custom".to_string(),
        /// One line saying what this platform is.
        description: String = String::new(),
        /// Topology.
        topology: TopologySpec = TopologySpec::default(),
        /// Core timing.
        core: CoreSpec = CoreSpec::default(),
        /// Private L1 data cache, per core.
        l1d: CacheSpec = CacheSpec::default(),
        /// Private L2, per core.
        l2: CacheSpec = CacheSpec { size_kib: 1024, ways: 16, latency_cycles: 14.0, ..CacheSpec::default() },
        /// L3, shared by the cores of one CCX.
        l3: CacheSpec = CacheSpec { size_kib: 32768, ways: 16, latency_cycles: 50.0, relation: Relation::Exclusive, ..CacheSpec::default() },
        /// Fabric latencies.
        fabric: FabricSpec = FabricSpec::default(),
        /// Memory.
        memory: MemorySpec = MemorySpec::default(),
        /// High-bandwidth memory (HBM) nodes.
        hbm: HbmSpec = HbmSpec::default(),
        /// Device writes into the LLC.
        io: IoSpec = IoSpec::default(),
        /// PCIe TPH steering on the host side (the `tph` placement). For SDCIAE (resctrl
        /// `io_alloc`), give the device an L3 way mask: `l3.way_masks = [{ agent = "device:NAME", mask = ... }]`.
        tph: TphHostSpec = TphHostSpec::default(),
    }
}

/// Most caches the coherence directory can track: one private hierarchy per core plus one L3 per CCX.
pub const MAX_TRACKED_CACHES: u32 = 384;

impl PlatformSpec {
    /// The NUMA node closest to a CPU (memory nodes split a socket's CCXs evenly).
    pub fn node_of_cpu(&self, cpu: u32) -> u32 {
        let t = &self.topology;
        let ccx = t.ccx_of_core(t.core_of_cpu(cpu));
        let nodes_per_socket = self.memory.nodes_per_socket;
        let ccx_in_socket = ccx % t.ccx_per_socket;
        t.socket_of_ccx(ccx) * nodes_per_socket + ccx_in_socket * nodes_per_socket / t.ccx_per_socket
    }

    pub fn line_bytes(&self) -> u32 {
        self.l1d.line_bytes
    }

    /// Every NUMA memory node: the DDR nodes (with cores), then the HBM nodes.
    pub fn memory_nodes(&self) -> Vec<MemoryNode> {
        let m = &self.memory;
        let ddr_nodes = m.nodes(&self.topology);
        let ddr = (0..ddr_nodes).map(|n| MemoryNode {
            kind: MemoryKind::Ddr,
            socket: n / m.nodes_per_socket,
            compute_node: n,
            gbs: m.channels_per_node as f64 * m.channel_gbs,
            latency_ns: m.idle_latency_ns,
        });
        let hbm_nodes = if self.hbm.nodes_per_socket == 0 { 0 } else { ddr_nodes };
        let hbm = (0..hbm_nodes).map(|n| MemoryNode {
            kind: MemoryKind::Hbm,
            socket: n / m.nodes_per_socket,
            compute_node: n,
            gbs: self.hbm.gbs_per_node,
            latency_ns: self.hbm.idle_latency_ns,
        });
        ddr.chain(hbm).collect()
    }

    /// What one core moves when each of its misses takes `round_trip_ns` (GB/s): its outstanding
    /// misses, a line each, per round trip (Little's law).
    pub fn core_stream_gbs(&self, round_trip_ns: f64) -> f64 {
        self.core.outstanding_misses as f64 * self.line_bytes() as f64 / round_trip_ns
    }

    /// Idle latency of a read of memory node `node` from socket `socket` (ns).
    pub fn read_latency_ns(&self, node: &MemoryNode, socket: u32) -> f64 {
        node.latency_ns + self.crossing_ns(node, socket)
    }

    /// Latency of a read from socket `socket` of a line of `node` that the LLC holds (ns).
    pub fn llc_read_latency_ns(&self, node: &MemoryNode, socket: u32) -> f64 {
        self.l3.latency_cycles / self.core.freq_ghz + self.crossing_ns(node, socket)
    }

    fn crossing_ns(&self, node: &MemoryNode, socket: u32) -> f64 {
        if node.socket == socket {
            0.0
        } else {
            self.fabric.socket_link_latency_ns
        }
    }

    /// Bytes of LLC that cache one NUMA node's lines: the L3s of its compute node (in SNC, a
    /// node's memory is cached in its own tile's slices).
    pub fn llc_bytes_per_node(&self) -> u64 {
        let ccx_per_node = (self.topology.ccx_per_socket / self.memory.nodes_per_socket).max(1);
        self.l3.size_kib * 1024 * ccx_per_node as u64
    }

    pub fn line_bits(&self) -> u32 {
        self.line_bytes().trailing_zeros()
    }

    /// Checks every value; errors name the offending key below `path`.
    pub fn validate(&self, path: &str) -> ConfigResult<()> {
        let key = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
        // First: clocks, latencies and bandwidths the checks below take as sane (positive, finite).
        self.check_magnitudes(path)?;
        let t = &self.topology;
        for (name, value) in [
            ("sockets", t.sockets),
            ("ccx_per_socket", t.ccx_per_socket),
            ("cores_per_ccx", t.cores_per_ccx),
            ("threads_per_core", t.threads_per_core),
        ] {
            ensure(value >= 1, &key(&format!("topology.{name}")), || format!("must be at least 1 (got {value})"))?;
        }
        ensure(t.threads_per_core <= MAX_THREADS_PER_CORE, &key("topology.threads_per_core"), || {
            format!("at most {MAX_THREADS_PER_CORE} (got {})", t.threads_per_core)
        })?;
        // In u64: a product of absurd counts must not wrap round to a small one.
        let ccxs = t.sockets as u64 * t.ccx_per_socket as u64;
        let cores = ccxs.saturating_mul(t.cores_per_ccx as u64);
        ensure(cores + ccxs <= MAX_TRACKED_CACHES as u64, &key("topology"), || {
            format!("{cores} cores in {ccxs} CCXs exceed the {MAX_TRACKED_CACHES} caches the directory tracks")
        })?;
        self.l1d.validate(&key("l1d"))?;
        self.l2.validate(&key("l2"))?;
        self.l3.validate(&key("l3"))?;
        for (level, spec) in [("l1d", &self.l1d), ("l2", &self.l2)] {
            ensure(spec.rinse_gbs.0.is_none(), &key(&format!("{level}.rinse_gbs")), || {
                "only the L3 rinses: leave it out".into()
            })?;
        }
        for (level, spec) in [("l2", &self.l2), ("l3", &self.l3)] {
            ensure(spec.line_bytes == self.l1d.line_bytes, &key(&format!("{level}.line_bytes")), || {
                format!("must equal l1d.line_bytes ({})", self.l1d.line_bytes)
            })?;
        }
        for (level, spec) in [("l1d", &self.l1d), ("l2", &self.l2), ("l3", &self.l3)] {
            for (i, mask) in spec.way_masks.iter().enumerate() {
                if let Ok(MaskAgent::Cpu(cpu)) = mask.parsed_agent() {
                    ensure(cpu < t.cpus(), &key(&format!("{level}.way_masks.{i}.agent")), || {
                        format!("CPU {cpu} out of range (the platform has {})", t.cpus())
                    })?;
                }
            }
        }
        ensure(!self.l3.prefetcher.any(), &key("l3.prefetcher.kind"), || {
            "an L3 prefetcher is not modelled (use the L1D or L2 one)".into()
        })?;
        ensure(self.l2.relation != Relation::Exclusive, &key("l2.relation"), || {
            "an exclusive L2 is not modelled (use inclusive or non_inclusive)".into()
        })?;
        ensure(
            (1..=MAX_OUTSTANDING_MISSES).contains(&self.core.outstanding_misses),
            &key("core.outstanding_misses"),
            || {
                format!(
                    "must be 1 to {MAX_OUTSTANDING_MISSES}: a core tracks tens of misses (got {})",
                    self.core.outstanding_misses
                )
            },
        )?;
        ensure(
            (1..=MAX_WINDOW_INSTRUCTIONS).contains(&self.core.window_instructions),
            &key("core.window_instructions"),
            || {
                format!(
                    "must be 1 to {MAX_WINDOW_INSTRUCTIONS}: a reorder buffer holds hundreds (got {})",
                    self.core.window_instructions
                )
            },
        )?;
        ensure(
            (1..=MAX_STORE_BUFFER_LINES).contains(&self.core.store_buffer_lines),
            &key("core.store_buffer_lines"),
            || {
                format!(
                    "must be 1 to {MAX_STORE_BUFFER_LINES}: a store buffer holds tens of stores (got {})",
                    self.core.store_buffer_lines
                )
            },
        )?;
        let tlb = &self.core.tlb;
        ensure(tlb.entries <= MAX_TLB_ENTRIES, &key("core.tlb.entries"), || {
            format!("must be at most {MAX_TLB_ENTRIES}: a TLB holds thousands of entries (got {})", tlb.entries)
        })?;
        ensure(tlb.ways >= 1 && tlb.entries.is_multiple_of(tlb.ways), &key("core.tlb.ways"), || {
            format!("must be at least 1 and divide core.tlb.entries ({}) (got {})", tlb.entries, tlb.ways)
        })?;
        ensure(
            tlb.page_kib.is_power_of_two() && (4..=MAX_PAGE_KIB).contains(&tlb.page_kib),
            &key("core.tlb.page_kib"),
            || format!("must be a power of two from 4 to {MAX_PAGE_KIB} (1 GiB) (got {})", tlb.page_kib),
        )?;
        ensure((1..=MAX_WALK_READS).contains(&tlb.walk_reads), &key("core.tlb.walk_reads"), || {
            format!("must be 1 to {MAX_WALK_READS}: a walk reads a page-table entry per level (got {})", tlb.walk_reads)
        })?;
        ensure((1..=MAX_WALKERS).contains(&tlb.walkers), &key("core.tlb.walkers"), || {
            format!("must be 1 to {MAX_WALKERS}: a core has a few page walkers (got {})", tlb.walkers)
        })?;
        ensure(self.io.ddio_ways <= self.l3.ways, &key("io.ddio_ways"), || {
            format!("the L3 has {} ways (got {})", self.l3.ways, self.io.ddio_ways)
        })?;
        if let Some(bytes) = self.io.steer_bytes_per_cycle.0 {
            ensure(bytes > 0.0 && bytes <= self.line_bytes() as f64, &key("io.steer_bytes_per_cycle"), || {
                format!("must be above 0 and at most a line, {} B (got {})", self.line_bytes(), Shown(bytes))
            })?;
        }
        ensure((1..=MAX_STEER_QUEUE_LINES).contains(&self.io.steer_queue_lines), &key("io.steer_queue_lines"), || {
            format!(
                "must be 1 to {MAX_STEER_QUEUE_LINES}: a fabric buffers lines, not megabytes (got {})",
                self.io.steer_queue_lines
            )
        })?;
        ensure(self.io.inclusive_ways <= self.l3.ways, &key("io.inclusive_ways"), || {
            format!("the L3 has {} ways (got {})", self.l3.ways, self.io.inclusive_ways)
        })?;
        let l3_ways = if self.l3.ways >= 64 { u64::MAX } else { (1u64 << self.l3.ways) - 1 };
        ensure(self.io.ddio_mask & !l3_ways == 0, &key("io.ddio_mask"), || {
            format!("{:#x} names ways beyond the {} the L3 has", self.io.ddio_mask, self.l3.ways)
        })?;
        let last_tag = self.tph.st_base as u64 + t.apic_id(t.cpus() - 1) as u64;
        ensure(last_tag <= u16::MAX as u64, &key("tph.st_base"), || {
            format!("the tag of CPU {} would be {last_tag}, beyond 16 bits", t.cpus() - 1)
        })?;
        ensure(
            self.hbm.nodes_per_socket == 0 || self.hbm.nodes_per_socket == self.memory.nodes_per_socket,
            &key("hbm.nodes_per_socket"),
            || format!("0, or one per DDR node: {} (got {})", self.memory.nodes_per_socket, self.hbm.nodes_per_socket),
        )?;
        let m = &self.memory;
        for (name, value, most) in [
            ("memory.nodes_per_socket", m.nodes_per_socket, MAX_NODES_PER_SOCKET),
            ("memory.channels_per_node", m.channels_per_node, MAX_CHANNELS_PER_NODE),
        ] {
            ensure((1..=most).contains(&value), &key(name), || format!("must be 1 to {most} (got {value})"))?;
        }
        let slowest = self.line_bytes() as f64 / MAX_LINE_SERVICE_NS;
        ensure(m.channel_gbs >= slowest, &key("memory.channel_gbs"), || {
            format!(
                "must be at least {} GB/s: a channel moves a {} B line in at most {} µs (got {})",
                Shown(slowest),
                self.line_bytes(),
                MAX_LINE_SERVICE_NS / 1000.0,
                Shown(m.channel_gbs)
            )
        })?;
        ensure(m.write_queue_ns <= 1e6, &key("memory.write_queue_ns"), || {
            format!("at most 1 ms: a controller drains its writes (got {})", Shown(m.write_queue_ns))
        })?;
        ensure(m.write_queue_latency_ns <= m.idle_latency_ns, &key("memory.write_queue_latency_ns"), || {
            format!("must not exceed memory.idle_latency_ns ({})", m.idle_latency_ns)
        })?;
        ensure(
            m.interleave_bytes.is_power_of_two() && m.interleave_bytes >= self.line_bytes(),
            &key("memory.interleave_bytes"),
            || format!("must be a power of two of at least one line (got {})", m.interleave_bytes),
        )
    }
}

/// A built-in platform preset: a commented TOML file under `presets/`, registered by name.
pub struct Preset {
    pub name: &'static str,
    pub source: &'static str,
}

impl Preset {
    /// The `description` line of the preset file.
    pub fn description(&self) -> String {
        let table: toml::Table = self.source.parse().expect("built-in preset parses");
        table.get("description").and_then(|d| d.as_str()).unwrap_or_default().to_string()
    }
}

/// Registers a preset file by name: `presets/NAME.toml`.
macro_rules! preset {
    ($name:literal) => {
        Preset { name: $name, source: include_str!(concat!("../presets/", $name, ".toml")) }
    };
}

/// Every built-in platform preset (one line each).
pub const PRESETS: &[Preset] = &[
    preset!("turin-9655"),
    preset!("turin-9845"),
    preset!("turin-9575f"),
    preset!("skylake-sp-6140"),
    preset!("icelake-sp-6354"),
    preset!("power5"),
    preset!("xeon-max-9468"),
];

/// A preset read rather than built in (`host`, from the running machine): the module that reads
/// it registers it here, so a platform description knows no reader.
pub struct ReadPreset {
    pub name: &'static str,
    pub description: &'static str,
    pub read: fn() -> ConfigResult<toml::Table>,
}

/// Every preset read rather than built in (one registration each, next to its reader).
#[linkme::distributed_slice]
pub static READ_PRESETS: [ReadPreset];

/// The names `platform.preset` accepts, `host` included.
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).chain(READ_PRESETS.iter().map(|p| p.name)).collect()
}

/// The TOML table of a preset (before any user override).
pub fn preset_table(name: &str) -> ConfigResult<toml::Table> {
    if let Some(read) = READ_PRESETS.iter().find(|p| p.name == name) {
        return (read.read)();
    }
    let preset = PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
        ConfigError::new("platform.preset", format!("unknown preset `{name}` (known: {})", preset_names().join(", ")))
    })?;
    Ok(preset.source.parse::<toml::Table>().expect("built-in preset parses"))
}

/// A preset resolved to a validated spec.
pub fn preset(name: &str) -> ConfigResult<PlatformSpec> {
    let table = preset_table(name)?;
    let spec: PlatformSpec = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError::new("platform", format!("preset `{name}`: {e}")))?;
    spec.validate("platform")?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Describe;

    #[test]
    fn every_preset_is_valid_and_documented() {
        for name in preset_names() {
            let spec = preset(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            let docs = spec.describe();
            assert!(docs.iter().any(|d| d.key == "l2.size_kib"));
            assert!(docs.iter().all(|d| !d.meaning.is_empty()), "{name}: undocumented parameter");
        }
    }

    #[test]
    fn every_preset_file_names_itself_and_describes_itself() {
        for preset in PRESETS {
            let table: toml::Table = preset.source.parse().unwrap();
            assert_eq!(table["name"].as_str(), Some(preset.name));
            assert_eq!(Some(preset.description().as_str()), table["description"].as_str(), "{}", preset.name);
        }
        let names = preset_names();
        assert_eq!(names.len(), PRESETS.len() + 1);
        assert!(names.contains(&"turin-9655") && names.last() == Some(&"host"), "{names:?}");
    }

    #[test]
    fn ddio_mask_counts_from_the_highest_way() {
        let io = IoSpec { ddio_ways: 2, ..IoSpec::default() };
        assert_eq!(io.ddio_mask(11), 0x600);
        assert_eq!(IoSpec { ddio_ways: 11, ..IoSpec::default() }.ddio_mask(11), 0x7ff);
        assert_eq!(IoSpec::default().ddio_mask(11), 0);
        assert_eq!(IoSpec { ddio_ways: 2, ddio_mask: 0x003, ..IoSpec::default() }.ddio_mask(11), 0x003);
    }

    #[test]
    fn turin_topologies_match_published_core_counts() {
        assert_eq!(preset("turin-9655").unwrap().topology.cores(), 96);
        assert_eq!(preset("turin-9845").unwrap().topology.cores(), 160);
        assert_eq!(preset("turin-9575f").unwrap().topology.cores(), 64);
    }

    #[test]
    fn a_cpus_core_ccx_socket_and_apic_id_by_hand() {
        // 2 sockets x 3 CCXs x 4 cores, 2 threads: 24 cores, 48 CPUs; CPU 29 is core 5's second
        // thread, in CCX 1 of socket 0; CCX 4 is in socket 1.
        let t = TopologySpec { sockets: 2, ccx_per_socket: 3, cores_per_ccx: 4, threads_per_core: 2 };
        assert_eq!((t.cores(), t.ccx_count(), t.cpus()), (24, 6, 48));
        assert_eq!((t.core_of_cpu(29), t.ccx_of_core(5), t.socket_of_ccx(1), t.socket_of_ccx(4)), (5, 1, 0, 1));
        assert_eq!((t.apic_id(29), t.apic_id(5)), (11, 10));
    }

    #[test]
    fn a_cpus_numa_node_by_hand() {
        // Xeon Max in SNC4: 2 sockets x 4 nodes of 12 cores, 96 cores. CPU 61 is core 61 in node 5
        // (socket 1's second); CPU 96 + 61 is its sibling; two nodes per socket would put core 61
        // in node 2 (socket 1's first half) and one in node 1.
        let mut p = preset("xeon-max-9468").unwrap();
        assert_eq!([0, 11, 12, 47, 48, 61, 95, 157].map(|cpu| p.node_of_cpu(cpu)), [0, 0, 1, 3, 4, 5, 7, 5]);
        p.memory.nodes_per_socket = 2;
        assert_eq!([0, 23, 24, 61, 95].map(|cpu| p.node_of_cpu(cpu)), [0, 0, 1, 2, 3]);
        p.memory.nodes_per_socket = 1;
        assert_eq!(p.node_of_cpu(61), 1);
    }

    #[test]
    fn memory_nodes_list_ddr_then_hbm_with_their_sockets_and_latencies() {
        let spec = preset("xeon-max-9468").unwrap();
        let nodes = spec.memory_nodes();
        assert_eq!(nodes.len(), 16);
        assert_eq!((nodes[3].kind, nodes[3].socket, nodes[3].compute_node), (MemoryKind::Ddr, 0, 3));
        assert_eq!((nodes[12].kind, nodes[12].socket, nodes[12].compute_node), (MemoryKind::Hbm, 1, 4));
        assert!((nodes[0].gbs - 58.8).abs() < 1e-9);
        assert_eq!(spec.read_latency_ns(&nodes[12], 1), 130.0);
        assert_eq!(spec.read_latency_ns(&nodes[12], 0), 200.0);
        assert_eq!(preset("turin-9655").unwrap().memory_nodes().len(), 1);
    }

    #[test]
    fn a_nodes_lines_in_the_llc_are_an_l3_hit_away_and_share_its_tiles_l3s() {
        let spec = preset("xeon-max-9468").unwrap();
        let nodes = spec.memory_nodes();
        // 70 cycles at 2.1 GHz, and the socket link's 70 ns from the other socket.
        assert!((spec.llc_read_latency_ns(&nodes[12], 1) - 100.0 / 3.0).abs() < 1e-9);
        assert!((spec.llc_read_latency_ns(&nodes[12], 0) - (100.0 / 3.0 + 70.0)).abs() < 1e-9);
        // SNC4: one tile's L3 per node; Turin in NPS1: a socket's 8 CCXs of 32 MiB.
        assert_eq!(spec.llc_bytes_per_node(), 26880 * 1024);
        assert_eq!(preset("turin-9575f").unwrap().llc_bytes_per_node(), 8 * 32768 * 1024);
    }

    #[test]
    fn impossible_copy_fabric_and_hbm_values_are_rejected_with_their_key() {
        let reject = |change: fn(&mut PlatformSpec)| {
            let mut spec = preset("xeon-max-9468").unwrap();
            change(&mut spec);
            spec.validate("platform").unwrap_err().path
        };
        assert_eq!(reject(|s| s.fabric.socket_link_gbs = 0.0), "platform.fabric.socket_link_gbs");
        assert_eq!(reject(|s| s.fabric.mesh_gbs = -1.0), "platform.fabric.mesh_gbs");
        assert_eq!(reject(|s| s.hbm.gbs_per_node = 0.0), "platform.hbm.gbs_per_node");
        assert_eq!(reject(|s| s.hbm.nodes_per_socket = 2), "platform.hbm.nodes_per_socket");
        assert_eq!(reject(|s| s.hbm.idle_latency_ns = -1.0), "platform.hbm.idle_latency_ns");
        assert_eq!(reject(|s| s.fabric.socket_link_latency_ns = -1.0), "platform.fabric.socket_link_latency_ns");
    }

    #[test]
    fn a_tlb_is_refused_past_its_bounds_with_the_key_named() {
        let path_of = |set: &dyn Fn(&mut TlbSpec)| {
            let mut p = preset("skylake-sp-6140").unwrap();
            p.core.tlb = TlbSpec { entries: 1536, ways: 12, page_kib: 4, walk_reads: 2, walkers: 2 };
            set(&mut p.core.tlb);
            p.validate("platform").err().map(|e| e.path)
        };
        assert_eq!(path_of(&|_| ()), None);
        assert_eq!(path_of(&|t| (t.entries, t.ways) = (1 << 16, 16)), None);
        type Change<'a> = &'a dyn Fn(&mut TlbSpec);
        let refused: [(&str, Change); 9] = [
            ("entries", &|t| (t.entries, t.ways) = ((1 << 16) + 1, 1)),
            ("ways", &|t| t.ways = 0),
            ("ways", &|t| t.ways = 7),
            ("page_kib", &|t| t.page_kib = 2),
            ("page_kib", &|t| t.page_kib = 12),
            ("page_kib", &|t| t.page_kib = 1 << 21),
            ("walk_reads", &|t| t.walk_reads = 0),
            ("walk_reads", &|t| t.walk_reads = 9),
            ("walkers", &|t| t.walkers = 65),
        ];
        for (key, set) in refused {
            assert_eq!(path_of(set), Some(format!("platform.core.tlb.{key}")));
        }
        assert_eq!(path_of(&|t| t.walkers = 0), Some("platform.core.tlb.walkers".into()));
        assert_eq!(path_of(&|t| (t.page_kib, t.walk_reads, t.walkers) = (1 << 20, 8, 64)), None);
    }

    #[test]
    fn impossible_topologies_cores_and_masks_are_rejected_at_their_bound() {
        let error_path = |p: &PlatformSpec| p.validate("platform").err().map(|e| e.path);
        // The directory tracks 384 caches: a private hierarchy per core and an L3 per CCX.
        let mut p = preset("turin-9655").unwrap();
        (p.topology.ccx_per_socket, p.topology.cores_per_ccx) = (8, 47);
        assert_eq!(error_path(&p), None, "376 cores + 8 CCXs = 384");
        p.topology.cores_per_ccx = 48;
        assert_eq!(error_path(&p).as_deref(), Some("platform.topology"), "384 cores + 8 CCXs");
        // A way mask's CPU must exist: 192 CPUs on the 9655.
        let mut p = preset("turin-9655").unwrap();
        p.l3.way_masks = vec![WayMaskSpec { agent: "cpu:191".into(), mask: 1 }];
        assert_eq!(error_path(&p), None);
        p.l3.way_masks[0].agent = "cpu:192".into();
        assert_eq!(error_path(&p).as_deref(), Some("platform.l3.way_masks.0.agent"));
        // Counts are bounded where real parts are, and their product does not wrap round: 2^30
        // sockets of four one-core CCXs are 2^32 cores, not none.
        for (bound, set) in [
            (8, (|p: &mut PlatformSpec, v| p.topology.threads_per_core = v) as fn(&mut PlatformSpec, u32)),
            (16, |p, v| p.memory.nodes_per_socket = v),
            (64, |p, v| p.memory.channels_per_node = v),
            (1024, |p, v| p.core.outstanding_misses = v),
        ] {
            let mut p = preset("skylake-sp-6140").unwrap();
            set(&mut p, bound);
            assert_eq!(error_path(&p), None, "{bound}");
            set(&mut p, bound + 1);
            assert!(error_path(&p).is_some(), "{bound} + 1");
        }
        let mut p = preset("skylake-sp-6140").unwrap();
        (p.topology.sockets, p.topology.ccx_per_socket, p.topology.cores_per_ccx) = (1 << 30, 4, 1);
        assert_eq!(error_path(&p).as_deref(), Some("platform.topology"));
        // A clock must be positive.
        let mut p = preset("turin-9655").unwrap();
        p.core.freq_ghz = 0.0;
        assert_eq!(error_path(&p).as_deref(), Some("platform.core.freq_ghz"));
        // A CCX takes steered lines at some rate, and at most a line per core and cycle.
        let mut p = preset("turin-9655").unwrap();
        for (bytes, valid) in [(0.0, false), (64.0, true), (64.5, false)] {
            p.io.steer_bytes_per_cycle = crate::params::OrNone(Some(bytes));
            assert_eq!(error_path(&p).is_none(), valid, "{bytes} B");
        }
        assert_eq!(error_path(&p).as_deref(), Some("platform.io.steer_bytes_per_cycle"));
        // Steering tags are 16 bits: the last CPU's (APIC id 191 on the 9655) plus the base.
        let mut p = preset("turin-9655").unwrap();
        p.tph.st_base = 65535 - 191;
        assert_eq!(error_path(&p), None);
        p.tph.st_base += 1;
        assert_eq!(error_path(&p).as_deref(), Some("platform.tph.st_base"));
        // Memory channels carry something; interleaving is a power of two of at least a line.
        let mut p = preset("turin-9655").unwrap();
        p.memory.channel_gbs = 0.0;
        assert_eq!(error_path(&p).as_deref(), Some("platform.memory.channel_gbs"));
        // A channel moves a line in at most 100 us: POWER5's 128 B need 0.00128 GB/s.
        let mut p = preset("power5").unwrap();
        p.memory.channel_gbs = 0.00128;
        assert_eq!(error_path(&p), None);
        p.memory.channel_gbs = 0.00127;
        assert_eq!(error_path(&p).as_deref(), Some("platform.memory.channel_gbs"));
        let mut p = preset("turin-9655").unwrap();
        p.memory.interleave_bytes = 32;
        assert_eq!(error_path(&p).as_deref(), Some("platform.memory.interleave_bytes"));
        p.memory.interleave_bytes = 64;
        assert_eq!(error_path(&p), None);
        // A DDIO mask names ways the 11-way L3 has: 0x7ff, not 0x800.
        let mut p = preset("skylake-sp-6140").unwrap();
        p.io.ddio_mask = 0x7ff;
        assert_eq!(error_path(&p), None);
        p.io.ddio_mask = 0x800;
        assert_eq!(error_path(&p).as_deref(), Some("platform.io.ddio_mask"));
    }

    #[test]
    fn impossible_caches_are_rejected_with_their_key() {
        let mut spec = preset("turin-9655").unwrap();
        spec.l2.ways = 0;
        assert_eq!(spec.validate("platform").unwrap_err().path, "platform.l2.ways");
        let mut spec = preset("turin-9655").unwrap();
        spec.l1d.size_kib = 47;
        assert_eq!(spec.validate("platform").unwrap_err().path, "platform.l1d.size_kib");
        let mut spec = preset("turin-9655").unwrap();
        // 12-way L1D cannot be managed by a binary tree.
        spec.l1d.replacement = "tree_plru".into();
        assert_eq!(spec.validate("platform").unwrap_err().path, "platform.l1d.replacement");
        let mut spec = preset("skylake-sp-6140").unwrap();
        // 36864 sets: 18 slices of 2048, not 5 of anything.
        spec.l3.slices = 5;
        let err = spec.validate("platform").unwrap_err();
        assert_eq!(
            (err.path.as_str(), err.message.as_str()),
            ("platform.l3.slices", "36864 sets do not divide into 5 slices")
        );
        spec.l3.slices = 0;
        assert_eq!(spec.validate("platform").unwrap_err().path, "platform.l3.slices");
        // The measured Skylake-SP hash exists for its 18 slices only; without slices it is unused.
        let mut spec = preset("skylake-sp-6140").unwrap();
        spec.l3.slice_hash = SliceHash::SkylakeSp;
        assert!(spec.validate("platform").is_ok());
        spec.l3.slices = 36;
        let err = spec.validate("platform").unwrap_err();
        assert_eq!(err.path, "platform.l3.slice_hash");
        assert!(err.message.contains("got 36 slices of 64 B"), "{}", err.message);
        spec.l3.slices = 1;
        assert!(spec.validate("platform").is_ok());
        // Lines are a power of two of at least 8 bytes.
        for bytes in [4, 48] {
            let mut spec = preset("turin-9655").unwrap();
            spec.l1d.line_bytes = bytes;
            assert_eq!(spec.validate("platform").unwrap_err().path, "platform.l1d.line_bytes", "{bytes} B");
        }
        // A way mask names a CPU or a device by name.
        let agent = |agent: &str| WayMaskSpec { agent: agent.into(), mask: 1 }.parsed_agent();
        assert_eq!(agent("device:nic0"), Ok(MaskAgent::Device("nic0".into())));
        assert_eq!(agent("cpu:3"), Ok(MaskAgent::Cpu(3)));
        assert!(agent("device:").is_err() && agent("cpu:x").is_err() && agent("nic0").is_err());
        let mut spec = preset("skylake-sp-6140").unwrap();
        spec.io.inclusive_ways = 12;
        assert_eq!(spec.validate("platform").unwrap_err().path, "platform.io.inclusive_ways");
    }

    #[test]
    fn only_the_l3_rinses_and_only_at_a_rate_a_machine_has() {
        let mut spec = preset("skylake-sp-6140").unwrap();
        spec.l3.rinse_gbs = OrNone(Some(2.0));
        assert!(spec.validate("platform").is_ok());
        spec.l2.rinse_gbs = OrNone(Some(2.0));
        let err = spec.validate("platform").unwrap_err();
        assert_eq!(
            (err.path.as_str(), err.message.as_str()),
            ("platform.l2.rinse_gbs", "only the L3 rinses: leave it out")
        );
        let mut spec = preset("skylake-sp-6140").unwrap();
        spec.l1d.rinse_gbs = OrNone(Some(1.0));
        assert_eq!(spec.validate("platform").unwrap_err().path, "platform.l1d.rinse_gbs");
        spec.l1d.rinse_gbs = OrNone(None);
        spec.l3.rinse_gbs = OrNone(Some(0.0));
        let err = spec.validate("platform").unwrap_err();
        assert_eq!(
            (err.path.as_str(), err.message.as_str()),
            ("platform.l3.rinse_gbs", "must be 0.001 to 1000000 GB/s (got 0)")
        );
    }
}
