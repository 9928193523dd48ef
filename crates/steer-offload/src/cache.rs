//! The cache: per destination node, a map from source pointer to entry under a reader-writer lock
//! (shared to look up, exclusive to insert), and a capacity whose pressure flushes unused entries.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

use crate::backend::cpu::CpuBackend;
use crate::backend::dsa::DsaBackend;
use crate::backend::Backend;
use crate::entry::{CacheData, Entry, Part};
use crate::error::{Error, Result};
use crate::memory::NodeBuffer;
use crate::policy::{self, CopyPolicy, Placement, PlacementRequest};
use crate::sync::{Arc, Ordering, RwLock};
use crate::topology::Topology;

/// A node's entries and the bytes they hold.
#[derive(Default)]
struct NodeEntries {
    by_source: HashMap<usize, Arc<Entry>>,
    bytes: usize,
}

struct NodeState {
    entries: RwLock<NodeEntries>,
    capacity: usize,
}

/// Counters of a cache's activity.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub hits: u64,
    pub misses: u64,
    /// Accesses that found no room even after flushing (served from the source).
    pub uncached: u64,
    /// Entries flushed by memory pressure.
    pub evicted: u64,
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    uncached: AtomicU64,
    evicted: AtomicU64,
}

/// The offloading cache (see the crate's documentation).
pub struct Cache {
    topology: Arc<Topology>,
    placement: Box<dyn Placement>,
    copy_policy: Box<dyn CopyPolicy>,
    backend: Arc<dyn Backend>,
    nodes: Vec<NodeState>,
    counters: Counters,
    backend_note: String,
}

/// Builds a [`Cache`]; every choice has a default.
pub struct CacheBuilder {
    topology: Arc<Topology>,
    placement: Box<dyn Placement>,
    copy_policy: Box<dyn CopyPolicy>,
    backend: Option<Arc<dyn Backend>>,
    capacity: Vec<Option<usize>>,
}

/// A node's default capacity: a quarter of its memory, or 1 GiB where its size is unknown.
fn default_capacity(bytes: u64) -> usize {
    if bytes == 0 {
        1 << 30
    } else {
        usize::try_from(bytes / 4).unwrap_or(usize::MAX)
    }
}

impl CacheBuilder {
    /// Where blocks are cached (default: `nearest-hbm`).
    pub fn placement(mut self, placement: impl Placement + 'static) -> Self {
        self.placement = Box::new(placement);
        self
    }

    /// Which engines copy (default: `smart`).
    pub fn copy_policy(mut self, policy: impl CopyPolicy + 'static) -> Self {
        self.copy_policy = Box::new(policy);
        self
    }

    /// What copies (default: DSA where usable, else CPU threads, one per compute node).
    pub fn backend(mut self, backend: Arc<dyn Backend>) -> Self {
        self.backend = Some(backend);
        self
    }

    /// The bytes of entries node `node` may hold before unused ones are flushed.
    pub fn capacity(mut self, node: usize, bytes: usize) -> Self {
        // A node beyond the topology is refused by `build`, which names it.
        if node >= self.capacity.len() {
            self.capacity.resize(node + 1, None);
        }
        self.capacity[node] = Some(bytes);
        self
    }

    pub fn build(self) -> Result<Cache> {
        let node_count = self.topology.nodes().len();
        if self.capacity.len() > node_count {
            return Err(Error::NoSuchNode { node: self.capacity.len() - 1, what: "a capacity" });
        }
        let nodes = self
            .topology
            .nodes()
            .iter()
            .map(|node| {
                let capacity = self.capacity.get(node.id).copied().flatten().unwrap_or(default_capacity(node.bytes));
                (capacity > 0)
                    .then(|| NodeState { entries: RwLock::new(NodeEntries::default()), capacity })
                    .ok_or_else(|| Error::BadConfig(format!("node {}'s capacity is 0 bytes", node.id)))
            })
            .collect::<Result<Vec<_>>>()?;
        let (backend, backend_note) = match self.backend {
            Some(backend) => (backend, String::new()),
            None => match DsaBackend::open(&self.topology) {
                Ok(dsa) => (Arc::new(dsa) as Arc<dyn Backend>, String::new()),
                Err(why) => {
                    (Arc::new(CpuBackend::new(&self.topology, 1)) as Arc<dyn Backend>, format!("{why}; using cpu"))
                }
            },
        };
        Ok(Cache {
            topology: self.topology,
            placement: self.placement,
            copy_policy: self.copy_policy,
            backend,
            nodes,
            counters: Counters::default(),
            backend_note,
        })
    }
}

impl Cache {
    /// A cache of this machine with every default.
    pub fn new() -> Result<Cache> {
        Cache::builder(Arc::new(Topology::host())).build()
    }

    /// A cache of this machine with the built-in placement, copy policy and backend called so
    /// (`None` for the default); the backend is `auto` (DSA where usable, else CPU), `cpu` or `dsa`.
    pub fn from_names(placement: Option<&str>, copy_policy: Option<&str>, backend: Option<&str>) -> Result<Cache> {
        Cache::named_builder(placement, copy_policy, backend)?.build()
    }

    /// [`Cache::from_names`] with `capacity` bytes on every node.
    pub fn from_names_with_capacity(
        placement: Option<&str>,
        copy_policy: Option<&str>,
        backend: Option<&str>,
        capacity: usize,
    ) -> Result<Cache> {
        let mut builder = Cache::named_builder(placement, copy_policy, backend)?;
        for node in 0..builder.topology.nodes().len() {
            builder = builder.capacity(node, capacity);
        }
        builder.build()
    }

    fn named_builder(
        placement: Option<&str>,
        copy_policy: Option<&str>,
        backend: Option<&str>,
    ) -> Result<CacheBuilder> {
        let topology = Arc::new(Topology::host());
        let mut builder = Cache::builder(topology.clone());
        if let Some(name) = placement {
            builder = builder.placement(policy::placement(name)?);
        }
        if let Some(name) = copy_policy {
            builder = builder.copy_policy(policy::copy_policy(name)?);
        }
        match backend.unwrap_or("auto") {
            "auto" => {}
            "cpu" => builder = builder.backend(Arc::new(CpuBackend::new(&topology, 1))),
            "dsa" => builder = builder.backend(Arc::new(DsaBackend::open(&topology)?)),
            other => {
                return Err(Error::UnknownName {
                    what: "backend",
                    name: other.into(),
                    known: vec!["auto", "cpu", "dsa"],
                })
            }
        }
        Ok(builder)
    }

    /// A cache over `topology`; set its policies, backend and capacities on the builder.
    pub fn builder(topology: Arc<Topology>) -> CacheBuilder {
        let capacity = vec![None; topology.nodes().len()];
        CacheBuilder {
            topology,
            placement: Box::new(&policy::PLACEMENTS[0]),
            copy_policy: Box::new(&policy::COPY_POLICIES[0]),
            backend: None,
            capacity,
        }
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The backend's name.
    pub fn backend(&self) -> &'static str {
        self.backend.name()
    }

    /// Why the default backend is not DSA, where it is not (empty otherwise).
    pub fn backend_note(&self) -> &str {
        &self.backend_note
    }

    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        Stats {
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            uncached: c.uncached.load(Ordering::Relaxed),
            evicted: c.evicted.load(Ordering::Relaxed),
        }
    }

    /// The entry for `len` bytes at `src`: on a miss the copy is submitted and this returns at
    /// once; on a hit the existing entry is shared. Where the destination node has no room even
    /// after flushing unused entries, the entry stays at its source.
    ///
    /// # Safety
    /// `src` must be valid for reads of `len` bytes, and unchanged, for as long as any entry of it
    /// lives (in the cache or held); after changing it, call [`Cache::invalidate`].
    pub unsafe fn access(&self, src: *const u8, len: usize) -> Result<CacheData> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.lookup(src, len, None, None) }
    }

    /// [`Cache::access`] for a block known to be on `src_node` (for topologies that are not this
    /// machine's, or to skip the kernel's lookup).
    ///
    /// # Safety
    /// As for [`Cache::access`].
    pub unsafe fn access_from(&self, src: *const u8, len: usize, src_node: usize) -> Result<CacheData> {
        self.check_node(src_node, "the source")?;
        // SAFETY: forwarded from this function's contract.
        unsafe { self.lookup(src, len, Some(src_node), None) }
    }

    /// [`Cache::access_from`] on behalf of a consumer on `consumer_node`, for a topology that is
    /// not this machine's (a simulation), where the CPU the call runs on says nothing.
    ///
    /// # Safety
    /// As for [`Cache::access`].
    pub unsafe fn access_at(
        &self,
        src: *const u8,
        len: usize,
        src_node: usize,
        consumer_node: usize,
    ) -> Result<CacheData> {
        self.check_node(src_node, "the source")?;
        self.check_node(consumer_node, "the consumer")?;
        // SAFETY: forwarded from this function's contract.
        unsafe { self.lookup(src, len, Some(src_node), Some(consumer_node)) }
    }

    /// Fails unless `node` is a node of the topology; `what` names it in the error.
    fn check_node(&self, node: usize, what: &'static str) -> Result<()> {
        self.topology.node(node).map(|_| ()).ok_or(Error::NoSuchNode { node, what })
    }

    /// The node holding `src` as the kernel says, else the consumer's.
    fn source_node(&self, src: *const u8, consumer_node: usize) -> usize {
        self.topology.node_of_address(src).unwrap_or(consumer_node)
    }

    /// # Safety
    /// As for [`Cache::access`].
    unsafe fn lookup(
        &self,
        src: *const u8,
        len: usize,
        src_node: Option<usize>,
        consumer_node: Option<usize>,
    ) -> Result<CacheData> {
        if src.is_null() {
            return Err(Error::NullBlock);
        }
        if len == 0 {
            return Err(Error::EmptyBlock);
        }
        let consumer_node = consumer_node.unwrap_or_else(|| self.topology.current_node());
        // Asked of the kernel at most once: here when the placement needs it, else on a miss.
        let mut located =
            src_node.or_else(|| self.placement.needs_source_node().then(|| self.source_node(src, consumer_node)));
        let placed_from = located.unwrap_or(consumer_node);
        let dst = self.placement.place(&self.topology, PlacementRequest { src_node: placed_from, consumer_node, len });
        let state = self.nodes.get(dst).ok_or(Error::NoSuchNode { node: dst, what: "the placement policy" })?;
        if len > state.capacity {
            return Err(Error::BlockTooLarge { len, node: dst, capacity: state.capacity });
        }
        let key = src as usize;
        if let Some(entry) = read(&state.entries).by_source.get(&key).filter(|e| e.len() == len) {
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(CacheData(entry.clone()));
        }
        let src_node = *located.get_or_insert_with(|| self.source_node(src, consumer_node));
        let parts = self.plan(src_node, dst, len)?;
        let mut entries = write(&state.entries);
        if let Some(entry) = entries.by_source.get(&key).filter(|e| e.len() == len) {
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(CacheData(entry.clone()));
        }
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        if let Some(old) = entries.by_source.remove(&key) {
            entries.bytes -= old.len();
        }
        if entries.bytes + len > state.capacity {
            let evicted = flush_unused(&mut entries);
            self.counters.evicted.fetch_add(evicted, Ordering::Relaxed);
        }
        let buffer = if entries.bytes + len <= state.capacity {
            NodeBuffer::on_node(len, self.topology.is_host().then_some(dst)).ok()
        } else {
            None
        };
        let Some(buffer) = buffer else {
            self.counters.uncached.fetch_add(1, Ordering::Relaxed);
            return Ok(CacheData(Arc::new(Entry::uncached(src, len, dst))));
        };
        let entry = Arc::new(Entry::pending(src, len, dst, buffer, parts, self.backend.clone()));
        entries.by_source.insert(key, entry.clone());
        entries.bytes += len;
        drop(entries);
        entry.submit();
        Ok(CacheData(entry))
    }

    /// A `'static` slice (memory that lives as long as the program: a mapped table, a leaked
    /// buffer); see [`Cache::access`].
    pub fn access_slice(&self, block: &'static [u8]) -> Result<CacheData> {
        // SAFETY: a 'static shared slice stays valid and unchanged.
        unsafe { self.access(block.as_ptr(), block.len()) }
    }

    /// The parts of a copy from `src` to `dst` the copy policy asks for.
    fn plan(&self, src: usize, dst: usize, len: usize) -> Result<Vec<Part>> {
        let engines = self.copy_policy.engines(&self.topology, src, dst);
        if let Some(&bad) = engines.iter().find(|&&e| self.topology.node(e).is_none_or(|n| n.is_memory_only())) {
            return Err(Error::NoSuchNode { node: bad, what: "the copy policy (as a compute node)" });
        }
        if engines.is_empty() {
            return Err(Error::BadConfig("the copy policy chose no copy engine".into()));
        }
        let shares = self.copy_policy.split(&engines, len);
        if shares.iter().sum::<usize>() != len || shares.len() > engines.len() {
            return Err(Error::BadConfig(format!("the copy policy's split {shares:?} does not cover {len} bytes")));
        }
        let mut offset = 0;
        Ok(engines
            .iter()
            .zip(shares)
            .filter(|(_, share)| *share > 0)
            .map(|(&engine, len)| {
                let part = Part { engine, offset, len };
                offset += len;
                part
            })
            .collect())
    }

    /// Drops the cache's reference to every unused entry (no holder, copy finished) of `node`, or
    /// of every node; node by node, so the others progress meanwhile.
    pub fn flush(&self, node: Option<usize>) -> Result<()> {
        for state in self.nodes_of(node)? {
            flush_unused(&mut write(&state.entries));
        }
        Ok(())
    }

    /// Drops the cache's reference to every entry; holders keep theirs.
    pub fn clear(&self) {
        for state in &self.nodes {
            let mut entries = write(&state.entries);
            entries.by_source.clear();
            entries.bytes = 0;
        }
    }

    /// Removes the entries of source pointer `src` from every node.
    pub fn invalidate(&self, src: *const u8) {
        for state in &self.nodes {
            let mut entries = write(&state.entries);
            if let Some(old) = entries.by_source.remove(&(src as usize)) {
                entries.bytes -= old.len();
            }
        }
    }

    /// The bytes of entries `node` may hold.
    pub fn capacity(&self, node: usize) -> Result<usize> {
        Ok(self.nodes_of(Some(node))?.next().expect("one node").capacity)
    }

    /// The entries the cache holds on `node` and their bytes.
    pub fn occupancy(&self, node: usize) -> Result<(usize, usize)> {
        let state = self.nodes_of(Some(node))?.next().expect("one node");
        let entries = read(&state.entries);
        Ok((entries.by_source.len(), entries.bytes))
    }

    fn nodes_of(&self, node: Option<usize>) -> Result<impl Iterator<Item = &NodeState>> {
        let range = match node {
            Some(n) if n >= self.nodes.len() => return Err(Error::NoSuchNode { node: n, what: "flush" }),
            Some(n) => n..n + 1,
            None => 0..self.nodes.len(),
        };
        Ok(self.nodes[range].iter())
    }
}

/// Drops every entry only the cache refers to whose copy has finished; returns how many.
fn flush_unused(entries: &mut NodeEntries) -> u64 {
    let before = entries.by_source.len();
    let mut freed = 0;
    entries.by_source.retain(|_, entry| {
        let keep = Arc::strong_count(entry) > 1 || !entry.is_done();
        if !keep {
            freed += entry.len();
        }
        keep
    });
    entries.bytes -= freed;
    (before - entries.by_source.len()) as u64
}

fn read<T>(lock: &RwLock<T>) -> crate::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> crate::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}
