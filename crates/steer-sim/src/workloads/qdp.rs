//! Query-driven prefetching (workload kind `qdp`, seed 001): the query "filter on column a, sum
//! column b where it matched" over two columns in the DDR of compute node `node`, cut into blocks
//! dealt round-robin to `groups` groups of threads. In each group, SCAN_a threads read their
//! blocks of a and publish each block's filter result; SCAN_b threads only prefetch: they ask the
//! offloading cache for each block of b, which has a DSA copy it into HBM; AGGREGATE threads take
//! each block once its filter result is out, ask the cache for b's block, wait for its copy and
//! read it where it is. The cache is steer-offload's own, with its placement and copy policies
//! (`devices::offload`). `column_b` compares against b read from DDR (no prefetching) and b
//! already in HBM.
//!
//! A scan is bound by memory: a core streams at its outstanding misses per round trip to the node
//! it reads (Little's law), and every scan, copy and read shares the nodes, meshes and links it
//! crosses (`flows`). The filter's and the sum's arithmetic is not modelled (assumed hidden under
//! the misses).

use std::cell::RefCell;
use std::rc::Rc;

use steer_offload::CacheData;

use crate::cpu::{Next, Program, ProgramCx, UnitKind, BLOCK};
use crate::devices::copy_policy::CopyPolicies;
use crate::devices::dsa::CopyPorts;
use crate::devices::dsa::Submit;
use crate::devices::offload::{self, CachePlacements, Found, Offload};
use crate::devices::SystemShape;
use crate::engine::{Agent, Cx, ReportView, Signal, Step};
use crate::error::{ensure, ConfigResult, Shown};
use crate::flows::Flows;
use crate::flows::{plain, OwnerId, Region, Transfer, Use};
use crate::params::{choice, params, Name};
use crate::stats::{stat, Report};
use crate::system::Builder;
use crate::units::Time;
use crate::workloads::submissions::Submissions;
use crate::workloads::WorkloadSpec;

/// Most blocks a column may be cut into (a run beyond it is refused: raise `block_bytes`).
pub const MAX_BLOCKS: u64 = 1 << 20;
/// Largest block: one copy job of the library moves at most this.
pub const MAX_BLOCK_BYTES: u64 = 1 << 30;
/// Largest column (address space reserved for it, never touched).
pub const MAX_COLUMN_BYTES: u64 = 1 << 40;

choice! {
    /// Where AGGREGATE reads column b.
    pub enum ColumnB {
        /// Prefetched into HBM by DSA through the offloading cache (SCAN_b threads run).
        Prefetch,
        /// From DDR, where it lies: no prefetching (no SCAN_b threads).
        Ddr,
        /// Already in the HBM node the cache's placement chooses (no SCAN_b threads).
        Hbm,
    }
}

params! {
    /// The query's parameters.
    pub struct QdpSpec {
        /// Where AGGREGATE reads column b: `prefetch`, `ddr` or `hbm`.
        column_b: ColumnB = ColumnB::Prefetch,
        /// Bytes of each column.
        column_bytes: u64 = 1 << 30,
        /// Bytes of a block (one cache entry of b).
        block_bytes: u64 = 4 << 20,
        /// Groups of threads; block i goes to group i mod groups.
        groups: u32 = 4,
        /// SCAN_a threads per group.
        scan_a_threads: u32 = 1,
        /// SCAN_b threads per group (prefetch only).
        scan_b_threads: u32 = 1,
        /// AGGREGATE threads per group.
        aggregate_threads: u32 = 1,
        /// Compute node the threads run on; both columns lie in its DDR.
        node: u32 = 0,
        /// Where the cache places a block: a placement of the library (`nearest-hbm`, ...).
        placement: Name<CachePlacements> = Name::new("nearest-hbm"),
        /// Which DSAs copy a block: a copy policy of the library (`local`, `brute`, `smart`).
        copy_policy: Name<CopyPolicies> = Name::new("smart"),
        /// Bytes of entries the cache may hold per node (default: one 16 GiB HBM stack).
        capacity_bytes: u64 = 16 << 30,
        /// Name prefix of the DSA devices (`[[devices]] kind = "dsa"`).
        device: String = "dsa".to_string(),
        /// Core time of a cache access that finds its entry (ns): measured, steer-offload's bench
        /// (access + location, one thread) on a Zen 4 server.
        hit_ns: f64 = 60.0,
        /// Core time of a cache access that inserts an entry: its buffer's mapping and the copy's
        /// split (ns): assumed.
        miss_ns: f64 = 3000.0,
    }
}

/// The kind's registration.
#[linkme::distributed_slice(crate::workloads::WORKLOADS)]
pub static KIND: crate::workloads::WorkloadKind = crate::workloads::WorkloadKind::of::<QdpSpec>(
    "qdp",
    "query-driven prefetching: scan a, prefetch b into HBM through the offloading cache, aggregate",
);

/// The three pipelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pipeline {
    ScanA,
    ScanB,
    Aggregate,
}

impl QdpSpec {
    fn blocks(&self) -> u64 {
        self.column_bytes.div_ceil(self.block_bytes.max(1))
    }

    fn block_len(&self, block: usize) -> u64 {
        (self.column_bytes - block as u64 * self.block_bytes).min(self.block_bytes)
    }

    /// Each pipeline's threads per group, in the order they take the node's CPUs.
    fn pipelines(&self) -> Vec<(Pipeline, u32)> {
        let scan_b = if self.column_b == ColumnB::Prefetch { self.scan_b_threads } else { 0 };
        vec![
            (Pipeline::ScanA, self.scan_a_threads),
            (Pipeline::ScanB, scan_b),
            (Pipeline::Aggregate, self.aggregate_threads),
        ]
    }

    /// In u64: absurd counts must not wrap round to a number of threads the node has.
    fn threads(&self) -> u64 {
        let per_group: u64 = self.pipelines().iter().map(|&(_, n)| n as u64).sum();
        (self.groups as u64).saturating_mul(per_group)
    }

    /// The node's CPUs, as many as there are threads.
    fn cpus_of(&self, platform: &crate::platform::PlatformSpec) -> Vec<u32> {
        let cpus = platform.topology.cpus();
        (0..cpus).filter(|&c| platform.node_of_cpu(c) == self.node).take(self.threads() as usize).collect()
    }
}

impl WorkloadSpec for QdpSpec {
    fn validate(&self, path: &str, system: &SystemShape) -> ConfigResult<()> {
        let key = |k: &str| format!("{path}.{k}");
        let platform = system.platform;
        let compute_nodes = platform.memory.nodes(&platform.topology);
        ensure(self.node < compute_nodes, &key("node"), || {
            format!("compute node {} does not exist (the platform has {compute_nodes})", self.node)
        })?;
        ensure((1..=MAX_COLUMN_BYTES).contains(&self.column_bytes), &key("column_bytes"), || {
            format!("a column has 1 byte to 1 TiB (got {})", self.column_bytes)
        })?;
        ensure((1..=MAX_BLOCK_BYTES).contains(&self.block_bytes), &key("block_bytes"), || {
            format!("a block has 1 byte to 1 GiB (got {})", self.block_bytes)
        })?;
        ensure(self.blocks() <= MAX_BLOCKS, &key("block_bytes"), || {
            format!("{} blocks: more than {MAX_BLOCKS}; raise block_bytes", self.blocks())
        })?;
        ensure(self.groups >= 1, &key("groups"), || "must be at least 1".into())?;
        for (name, threads) in [
            ("scan_a_threads", self.scan_a_threads),
            ("scan_b_threads", self.scan_b_threads),
            ("aggregate_threads", self.aggregate_threads),
        ] {
            ensure(threads >= 1, &key(name), || "must be at least 1".into())?;
        }
        let per_node = platform.topology.cpus() / compute_nodes;
        ensure(self.threads() <= per_node as u64, &key("groups"), || {
            format!("{} threads: more than the {per_node} CPUs of node {}", self.threads(), self.node)
        })?;
        for (name, value) in [("hit_ns", self.hit_ns), ("miss_ns", self.miss_ns)] {
            ensure(value.is_finite() && value >= 0.0, &key(name), || {
                format!("must be a finite time (got {})", Shown(value))
            })?;
        }
        self.placement.check(&key("placement"))?;
        self.copy_policy.check(&key("copy_policy"))?;
        ensure(self.capacity_bytes >= self.block_bytes, &key("capacity_bytes"), || {
            format!("smaller than one block of {} bytes", self.block_bytes)
        })?;
        if self.column_b == ColumnB::Prefetch {
            offload::check_devices(system, &self.device, &key("device"))?;
        }
        Ok(())
    }

    fn cpus(&self, system: &SystemShape) -> Vec<u32> {
        self.cpus_of(system.platform)
    }

    fn build(&self, b: &mut Builder) {
        let platform = b.platform.clone();
        let hbm_node = offload::place(&self.placement, &platform, self.node, self.node);
        let column_a = b.region(self.node, self.column_bytes);
        let column_b = b.region(self.node, self.column_bytes);
        let column_b_in_hbm = b.region(hbm_node, self.column_bytes);
        let offload = (self.column_b == ColumnB::Prefetch).then(|| {
            Offload::build(b, &self.placement, &self.copy_policy, self.capacity_bytes, &self.device, column_b)
        });
        b.job();
        let (filtered, done) = (b.signal(), b.signal());
        let (_, network) = b.flows();
        let memory = platform.memory_nodes();
        let socket = memory[self.node as usize].socket;
        let reads = memory
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let cap = platform.core_stream_gbs(platform.read_latency_ns(m, socket));
                (plain(network.read_route(socket, i as u32)), cap)
            })
            .collect();
        let blocks = self.blocks() as usize;
        let query = Rc::new(RefCell::new(Query {
            spec: self.clone(),
            filtered: vec![false; blocks],
            filtered_signal: filtered,
            offload,
            hbm_node,
            column_a,
            column_b,
            column_b_in_hbm,
            reads,
            done,
            workers_left: self.threads() as u32,
            ends: [None; 3],
            found: [0; 3],
            copy_wait_ns: 0.0,
        }));
        let mut cpus = self.cpus_of(&platform).into_iter();
        for group in 0..self.groups as usize {
            let of_group: Vec<usize> = (group..blocks).step_by(self.groups as usize).collect();
            for (pipeline, threads) in self.pipelines() {
                for thread in 0..threads as usize {
                    let cpu = cpus.next().expect("validated: enough CPUs");
                    let signal = b.signal();
                    let (flows, _) = b.flows();
                    let owner = flows.add_owner(signal);
                    let worker = Worker {
                        pipeline,
                        query: query.clone(),
                        blocks: of_group.iter().copied().skip(thread).step_by(threads as usize).collect(),
                        next: 0,
                        owner,
                        signal,
                        phase: Phase::Idle,
                        reading_since: Time::ZERO,
                        submissions: Submissions::default(),
                        done: false,
                    };
                    b.run_on(cpu, Box::new(worker));
                }
            }
        }
        b.add_agent(Box::new(QueryAgent { query }), Some(Time::ZERO));
    }
}

/// The query's state, shared by its threads.
struct Query {
    spec: QdpSpec,
    /// The cache, holding column b's source pages (prefetch only).
    offload: Option<Rc<RefCell<Offload>>>,
    /// Per block: its filter result is out.
    filtered: Vec<bool>,
    filtered_signal: Signal,
    /// Where b lies when it is already in HBM.
    hbm_node: u32,
    /// Where the columns lie: a and b in the node's DDR, b's copy already in HBM.
    column_a: Region,
    column_b: Region,
    column_b_in_hbm: Region,
    /// Threads that have not finished.
    workers_left: u32,
    /// Per memory node: the route and the rate of one core's read of it.
    reads: Vec<(Vec<Use>, f64)>,
    /// Notified by each thread that finishes.
    done: Signal,
    /// When each pipeline's last thread finished.
    ends: [Option<Time>; 3],
    /// AGGREGATE's accesses by what they found: ready, in flight, miss.
    found: [u64; 3],
    /// Time AGGREGATE threads spent waiting for copies, summed.
    copy_wait_ns: f64,
}

#[derive(Debug)]
enum Phase {
    Idle,
    /// Reading a block (a flow), holding b's entry meanwhile if it came from the cache.
    Reading(Option<CacheData>),
    /// Holding b's entry until its copy completes (since when it waits, if it does).
    Holding(CacheData, Option<Time>),
}

/// One thread of a pipeline.
struct Worker {
    pipeline: Pipeline,
    query: Rc<RefCell<Query>>,
    /// Its blocks, in order.
    blocks: Vec<usize>,
    next: usize,
    owner: OwnerId,
    signal: Signal,
    phase: Phase,
    /// When its current read began.
    reading_since: Time,
    submissions: Submissions,
    done: bool,
}

const SUBMIT: u32 = 0;

impl Worker {
    /// Starts reading `bytes` of `region` and sleeps until they are in.
    fn read(&mut self, cx: &mut ProgramCx, region: Region, bytes: u64, held: Option<CacheData>) -> Next {
        let (route, cap) = self.query.borrow().reads[region.node as usize].clone();
        let now = cx.now();
        self.reading_since = now;
        let transfer = Transfer { bytes, route, cap_gbs: cap, reads: Some(region), writes: None };
        let flows = cx.shared().get_mut::<Flows>();
        flows.start(now, transfer, self.owner, 0);
        let changed = flows.changed.expect("flows exist");
        cx.notify(changed);
        self.phase = Phase::Reading(held);
        cx.wait_on(self.signal);
        Next::Wait
    }

    /// Accesses b's block through the cache; the copies a miss causes are this thread's to submit.
    fn access(&mut self, cx: &mut ProgramCx, block: usize) -> (CacheData, Found) {
        let query = self.query.borrow();
        let spec = &query.spec;
        let offload = query.offload.as_ref().expect("prefetching has a cache");
        let (offset, len) = (block as u64 * spec.block_bytes, spec.block_len(block));
        let (data, found, descriptors) =
            offload.borrow_mut().access(offset, len, spec.node, cx.shared().get::<CopyPorts>());
        self.submissions.extend(descriptors);
        let cost = if found == Found::Miss { spec.miss_ns } else { spec.hit_ns };
        cx.hold(Time::from_ns(cost));
        (data, found)
    }

    /// Where a held entry's block is to be read from once its copy is done, and how long this
    /// thread waited for it; `None` while the copy is under way.
    fn held_block(&mut self, cx: &mut ProgramCx) -> Option<(CacheData, Region)> {
        let now = cx.now();
        let Phase::Holding(data, since) = &mut self.phase else { return None };
        if !data.is_ready() {
            since.get_or_insert(now);
            return None;
        }
        let mut query = self.query.borrow_mut();
        if let Some(since) = since {
            query.copy_wait_ns += (now - *since).as_ns();
        }
        let offset = self.blocks[self.next] as u64 * query.spec.block_bytes;
        let region = query.offload.as_ref().expect("a cache").borrow().region_of(data, offset);
        Some((data.clone(), region))
    }

    fn finish(&mut self, cx: &mut ProgramCx) -> Next {
        if !self.done {
            self.done = true;
            let now = cx.now();
            let mut query = self.query.borrow_mut();
            let end = &mut query.ends[self.pipeline as usize];
            *end = Some(end.map_or(now, |e| e.max(now)));
            query.workers_left -= 1;
            if query.workers_left == 0 {
                cx.shared().jobs.end(now);
            }
            cx.notify(query.done);
        }
        Next::Wait
    }
}

impl Program for Worker {
    fn role(&self) -> &'static str {
        match self.pipeline {
            Pipeline::ScanA => "scan_a",
            Pipeline::ScanB => "scan_b",
            Pipeline::Aggregate => "aggregate",
        }
    }

    fn unit(&self) -> &'static UnitKind {
        &BLOCK
    }

    fn next(&mut self, cx: &mut ProgramCx) -> Next {
        if let Phase::Reading(_) = self.phase {
            if cx.shared().get_mut::<Flows>().take_finished(self.owner).is_empty() {
                cx.wait_on(self.signal);
                return Next::Wait;
            }
            // Its core streamed the block meanwhile, stalled on the misses it kept in flight.
            let streaming = cx.now() - self.reading_since;
            cx.busy_for(streaming);
            self.phase = Phase::Idle;
            if self.pipeline == Pipeline::ScanA {
                let mut query = self.query.borrow_mut();
                query.filtered[self.blocks[self.next]] = true;
                cx.notify(query.filtered_signal);
            }
            self.next += 1;
            cx.count(1);
        }
        if let Some(next) = self.submissions.next(cx, SUBMIT) {
            return next;
        }
        if let Phase::Holding(..) = self.phase {
            let Some((data, region)) = self.held_block(cx) else {
                let finished = self.query.borrow().offload.as_ref().expect("a cache").borrow().finished;
                cx.wait_on(finished);
                return Next::Wait;
            };
            let bytes = data.len() as u64;
            return self.read(cx, region, bytes, Some(data));
        }
        let Some(&block) = self.blocks.get(self.next) else {
            return self.finish(cx);
        };
        let (column_b, bytes, offset) = {
            let query = self.query.borrow();
            (query.spec.column_b, query.spec.block_len(block), block as u64 * query.spec.block_bytes)
        };
        let column = |pick: fn(&Query) -> Region| pick(&self.query.borrow()).skip(offset);
        match self.pipeline {
            Pipeline::ScanA => self.read(cx, column(|q| q.column_a), bytes, None),
            Pipeline::ScanB => {
                self.access(cx, block);
                self.next += 1;
                cx.count(1);
                Next::Unit
            }
            Pipeline::Aggregate => {
                if !self.query.borrow().filtered[block] {
                    cx.wait_on(self.query.borrow().filtered_signal);
                    return Next::Wait;
                }
                match column_b {
                    ColumnB::Ddr => self.read(cx, column(|q| q.column_b), bytes, None),
                    ColumnB::Hbm => self.read(cx, column(|q| q.column_b_in_hbm), bytes, None),
                    ColumnB::Prefetch => {
                        let (data, found) = self.access(cx, block);
                        self.query.borrow_mut().found[found as usize] += 1;
                        self.phase = Phase::Holding(data, None);
                        Next::Unit
                    }
                }
            }
        }
    }

    fn on_call(&mut self, _tag: u32, cx: &mut ProgramCx) {
        let (answer, _) = self.submissions.on_call(cx);
        assert_ne!(answer, Submit::Dropped, "the cache submits to shared work queues only");
    }

    fn waiting_for(&self) -> String {
        match &self.phase {
            Phase::Idle => format!("block {} of {}", self.next, self.blocks.len()),
            Phase::Reading(Some(data)) => format!("a read of a cached block on node {}", data.node()),
            Phase::Reading(None) => "a read of a block".into(),
            Phase::Holding(..) => "a copy into the cache".into(),
        }
    }
}

stat!(TOTAL_US, "total_us", "µs", "the query's time: from its start to its last thread's end (null: not finished)");
stat!(SCAN_A_US, "scan_a_us", "µs", "time until the last SCAN_a thread finished");
stat!(SCAN_B_US, "scan_b_us", "µs", "time until the last SCAN_b thread finished (null: no prefetching)");
stat!(AGGREGATE_US, "aggregate_us", "µs", "time until the last AGGREGATE thread finished");
stat!(HIT_RATE, "hit_rate", "fraction", "AGGREGATE's accesses whose block was already copied (null: no cache)");
stat!(READY_BLOCKS, "ready_blocks", "blocks", "AGGREGATE's accesses that found the copy complete");
stat!(IN_FLIGHT_BLOCKS, "in_flight_blocks", "blocks", "AGGREGATE's accesses that found the copy under way");
stat!(MISSED_BLOCKS, "missed_blocks", "blocks", "AGGREGATE's accesses that found no entry (they copied, or read DDR)");
stat!(COPY_WAIT_US, "copy_wait_us", "µs", "time AGGREGATE threads waited for copies, summed over threads");
stat!(CACHE_HITS, "cache_hits", "accesses", "the cache's hits, over every thread's accesses");
stat!(CACHE_MISSES, "cache_misses", "accesses", "the cache's misses (copies submitted)");
stat!(CACHE_UNCACHED, "cache_uncached", "accesses", "accesses that found no room (served from DDR)");
stat!(CACHE_EVICTED, "cache_evicted", "entries", "entries flushed by memory pressure");
stat!(B_NODE, "b_node", "node", "the node AGGREGATE reads b from when it is cached or already in HBM");
stat!(BLOCKS, "blocks", "blocks", "blocks per column");

/// Waits for the query's threads and reports the query.
struct QueryAgent {
    query: Rc<RefCell<Query>>,
}

impl Agent for QueryAgent {
    fn name(&self) -> String {
        "query".into()
    }

    fn step(&mut self, cx: &mut Cx, _now: Time, _limit: Time) -> Step {
        cx.wait_on(self.query.borrow().done);
        Step::Wait
    }

    fn report(&self, out: &mut Report, _view: &ReportView) {
        let query = self.query.borrow();
        let us = |t: Option<Time>| t.map(|t| t.as_ns() / 1e3);
        let [scan_a, scan_b, aggregate] = query.ends.map(us);
        let total = [scan_a, scan_b, aggregate]
            .into_iter()
            .flatten()
            .reduce(f64::max)
            .filter(|_| scan_a.is_some() && aggregate.is_some() && (scan_b.is_some() || query.offload.is_none()));
        let stats = query.offload.as_ref().map(|o| o.borrow().stats());
        let [ready, in_flight, missed] = query.found;
        out.section("query", |r| {
            r.put(&TOTAL_US, total);
            r.put(&SCAN_A_US, scan_a);
            r.put(&SCAN_B_US, scan_b);
            r.put(&AGGREGATE_US, aggregate);
            r.put(&HIT_RATE, stats.map(|_| ready as f64 / query.filtered.len() as f64));
            r.put(&READY_BLOCKS, ready);
            r.put(&IN_FLIGHT_BLOCKS, in_flight);
            r.put(&MISSED_BLOCKS, missed);
            r.put(&COPY_WAIT_US, query.copy_wait_ns / 1e3);
            r.put(&CACHE_HITS, stats.map(|s| s.hits));
            r.put(&CACHE_MISSES, stats.map(|s| s.misses));
            r.put(&CACHE_UNCACHED, stats.map(|s| s.uncached));
            r.put(&CACHE_EVICTED, stats.map(|s| s.evicted));
            r.put(&B_NODE, query.hbm_node);
            r.put(&BLOCKS, query.filtered.len() as u64);
        });
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_stall_reports_the_query_is_named_query_and_each_thread_names_its_next_block() {
        let platform = crate::platform::preset("xeon-max-9468").unwrap();
        let mut b = Builder::new(&platform, 1);
        QdpSpec { column_b: ColumnB::Ddr, ..QdpSpec::default() }.build(&mut b);
        let (agents, _, _) = b.into_parts();
        let names: Vec<String> = agents.iter().map(|(a, _)| a.name()).collect();
        assert!(names.iter().any(|n| n == "query"), "{names:?}");
        // Before anything ran, each thread (one a CPU) is at the first of its 64 blocks.
        let waits: Vec<String> = agents.iter().map(|(a, _)| a.waiting_for()).filter(|w| !w.is_empty()).collect();
        assert_eq!(waits, vec!["block 0 of 64"; 8]);
    }
}
