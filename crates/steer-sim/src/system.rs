//! A scenario assembled into a runnable system: the state agents share (`Shared`: the memory
//! hierarchy and the ports between devices and programs), the `Builder` that device and workload
//! kinds add themselves through, and the `Simulation` that runs them.

use std::collections::BTreeMap;

use crate::cpu::{CoreTimer, Cpu, Program};
use crate::devices::dsa::CopyPorts;
use crate::devices::ring::{RingId, RxRing};
use crate::engine::{Agent, Engine, ReportView, Signal, Starting};
use crate::error::Error;
use crate::flows::{FlowAgent, Flows, Network, Region};
use crate::hierarchy::Hierarchy;
use crate::memory::NODE_SPAN_BYTES;
use crate::platform::PlatformSpec;
use crate::scenario::Scenario;
use crate::stats::{Report, SchemaEntry};
use crate::units::{Addr, Time};

/// What agents share: the memory hierarchy, the host side of every RX queue, bulk transfers in
/// flight, the ports of copy engines (work queues, completion records, copy jobs), and the
/// workloads that end.
pub struct Shared {
    pub hierarchy: Hierarchy,
    pub rings: Vec<RxRing>,
    pub flows: Flows,
    pub copy: CopyPorts,
    pub jobs: Jobs,
}

/// Workloads that end (a copy job, a query): when every workload of a scenario is one, the run
/// ends with the last of them, and the measured window with it (rates are over the jobs' time,
/// not over the longest they may take).
#[derive(Debug, Default)]
pub struct Jobs {
    pub(crate) registered: u32,
    pub(crate) running: u32,
    /// Every workload registered a job.
    pub(crate) end_the_run: bool,
    last_end: Option<Time>,
}

impl Jobs {
    pub(crate) fn register(&mut self) {
        self.registered += 1;
        self.running += 1;
    }

    /// A job ended at `at` (each registered job ends once).
    pub fn end(&mut self, at: Time) {
        self.running -= 1;
        self.last_end = Some(self.last_end.map_or(at, |t| t.max(at)));
    }

    /// When the run ended: the last job's end, once every job has ended, if the jobs end the run.
    pub fn run_ended_at(&self) -> Option<Time> {
        (self.end_the_run && self.running == 0).then_some(self.last_end).flatten()
    }
}

impl Shared {
    /// A small hierarchy and no rings (for tests of agents).
    pub fn empty() -> Shared {
        Shared::new(&PlatformSpec::default(), 0)
    }

    pub(crate) fn new(platform: &PlatformSpec, seed: u64) -> Shared {
        Shared {
            hierarchy: Hierarchy::seeded(platform, seed),
            rings: Vec::new(),
            flows: Flows::default(),
            copy: CopyPorts::default(),
            jobs: Jobs::default(),
        }
    }

    /// Zeroes the statistics at `now`: what flows moved before it belongs to the warm-up.
    fn reset_stats(&mut self, now: Time) {
        self.flows.advance(now);
        self.flows.traffic.reset();
        self.hierarchy.reset_stats();
        for ring in &mut self.rings {
            ring.reset_stats();
        }
    }
}

/// Bump allocator of simulated physical memory, per NUMA node.
pub struct Allocator {
    next: Vec<u64>,
}

impl Allocator {
    pub fn new(nodes: u32) -> Allocator {
        // Leave the first 1 GiB of each node unused so that address 0 is never handed out.
        Allocator { next: (0..nodes as u64).map(|n| n * NODE_SPAN_BYTES + (1 << 30)).collect() }
    }

    /// Allocates `bytes` on `node`, aligned to 4 KiB pages.
    pub fn alloc(&mut self, node: u32, bytes: u64) -> Addr {
        let next = &mut self.next[node as usize];
        let addr = Addr(*next);
        *next += bytes.div_ceil(4096) * 4096;
        addr
    }
}

/// What device and workload kinds build a system with.
pub struct Builder<'a> {
    pub platform: &'a PlatformSpec,
    /// The scenario's seed (each kind derives its own random streams from it).
    pub seed: u64,
    allocator: Allocator,
    shared: Shared,
    agents: Vec<Starting>,
    signals: u32,
    /// Each device's RX queues, by device name, in order.
    device_rings: Vec<(String, Vec<RingId>)>,
    /// The programs each CPU runs, in the order they were added.
    programs: BTreeMap<u32, Vec<Box<dyn Program>>>,
}

impl<'a> Builder<'a> {
    pub fn new(platform: &'a PlatformSpec, seed: u64) -> Builder<'a> {
        Builder {
            platform,
            seed,
            // Every memory node, HBM nodes (after the DDR ones) included.
            allocator: Allocator::new(platform.memory_nodes().len() as u32),
            shared: Shared::new(platform, seed),
            agents: Vec::new(),
            signals: 0,
            device_rings: Vec::new(),
            programs: BTreeMap::new(),
        }
    }

    /// Allocates simulated memory on a NUMA node.
    pub fn alloc(&mut self, node: u32, bytes: u64) -> Addr {
        self.allocator.alloc(node, bytes)
    }

    /// Allocates `bytes` on memory node `node` as a region bulk transfers read or write.
    pub fn region(&mut self, node: u32, bytes: u64) -> Region {
        let addr = self.allocator.alloc(node, bytes);
        Region::new(node, addr.0 - node as u64 * NODE_SPAN_BYTES, bytes)
    }

    /// Registers a workload that ends: it calls `Jobs::end` once when it has.
    pub fn job(&mut self) {
        self.shared.jobs.register();
    }

    /// The NUMA node an address belongs to.
    pub fn node_of_addr(&self, addr: Addr) -> u32 {
        (addr.0 / NODE_SPAN_BYTES) as u32
    }

    /// A new signal.
    pub fn signal(&mut self) -> Signal {
        self.signals += 1;
        Signal(self.signals - 1)
    }

    pub fn hierarchy(&mut self) -> &mut Hierarchy {
        &mut self.shared.hierarchy
    }

    /// The bulk-transfer flows and the platform's shared resources (made, with the agent that
    /// settles flows, on first use).
    pub fn flows(&mut self) -> (&mut Flows, Network) {
        if self.shared.flows.changed.is_none() {
            let changed = self.signal();
            let flows = &mut self.shared.flows;
            flows.changed = Some(changed);
            flows.network = Some(Network::new(self.platform, flows));
            self.agents.push((Box::new(FlowAgent), Some(Time::ZERO)));
        }
        let network = self.shared.flows.network.clone().expect("made above");
        (&mut self.shared.flows, network)
    }

    /// The ports between copy engines and the programs that use them.
    pub fn copy_ports(&mut self) -> &mut CopyPorts {
        &mut self.shared.copy
    }

    /// Adds an agent that first runs at `start` (`None`: when a signal it waits on is notified).
    pub fn add_agent(&mut self, agent: Box<dyn Agent>, start: Option<Time>) {
        self.agents.push((agent, start));
    }

    /// Adds an RX queue of device `device`.
    pub fn add_ring(&mut self, device: &str, ring: RxRing) -> RingId {
        let id = RingId(self.shared.rings.len() as u32);
        self.shared.rings.push(ring);
        match self.device_rings.iter_mut().find(|(name, _)| name == device) {
            Some((_, rings)) => rings.push(id),
            None => self.device_rings.push((device.to_string(), vec![id])),
        }
        id
    }

    /// The RX queues of device `device` (validation has checked that it exists).
    pub fn rings_of(&self, device: &str) -> &[RingId] {
        self.device_rings.iter().find(|(name, _)| name == device).map(|(_, rings)| rings.as_slice()).unwrap_or(&[])
    }

    pub fn ring(&self, id: RingId) -> &RxRing {
        &self.shared.rings[id.0 as usize]
    }

    pub fn rings(&self) -> &[RxRing] {
        &self.shared.rings
    }

    /// Runs `program` on logical CPU `cpu` (programs on one CPU take turns).
    pub fn run_on(&mut self, cpu: u32, program: Box<dyn Program>) {
        self.programs.entry(cpu).or_default().push(program);
    }

    /// The engine and the shared state: one CPU agent for each CPU with programs.
    pub fn finish(self, max_runahead: Time) -> (Engine, Shared) {
        let (agents, shared, signals) = self.into_parts();
        (Engine::new(agents, signals, max_runahead), shared)
    }

    /// The agents with their start times (a CPU agent for each CPU with programs), the shared
    /// state and the number of signals: what an engine runs, or a test drives by hand.
    pub fn into_parts(mut self) -> (Vec<Starting>, Shared, u32) {
        for (cpu, programs) in std::mem::take(&mut self.programs) {
            let timer = CoreTimer::on_cpu(cpu, self.platform);
            self.agents.push((Box::new(Cpu::new(timer, programs)), Some(Time::ZERO)));
        }
        (self.agents, self.shared, self.signals)
    }
}

/// The result of a run: the JSON document, and the declaration of every key in it.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub value: serde_json::Value,
    pub schema: Vec<SchemaEntry>,
}

/// A validated scenario assembled into a runnable system.
pub struct Simulation {
    pub scenario: Scenario,
    pub shared: Shared,
    engine: Engine,
    window_start: Time,
}

impl Simulation {
    /// Validates a scenario and builds its system.
    pub fn new(scenario: Scenario) -> Result<Simulation, Error> {
        scenario.validate().map_err(|e| Error::Input(e.to_string()))?;
        scenario.check_size().map_err(Error::TooLarge)?;
        if scenario.devices.is_empty() && scenario.workloads.is_empty() {
            return Err(Error::Input("nothing to simulate: no [[devices]] and no [[workloads]]".into()));
        }
        let max_runahead = Time::from_ns(scenario.sim.max_runahead_ns);
        let (engine, shared) = {
            let mut builder = Builder::new(&scenario.platform, scenario.seed);
            for device in &scenario.devices {
                device.spec.build(&mut builder);
            }
            let mut every_workload_ends = true;
            for workload in &scenario.workloads {
                let jobs = builder.shared.jobs.registered;
                workload.spec.build(&mut builder);
                every_workload_ends &= builder.shared.jobs.registered > jobs;
            }
            builder.shared.jobs.end_the_run = every_workload_ends && !scenario.workloads.is_empty();
            builder.finish(max_runahead)
        };
        Ok(Simulation { scenario, shared, engine, window_start: Time::ZERO })
    }

    /// Runs every event before `until`; `progress` is called with the simulated time now and
    /// then and stops the run by returning false. Returns whether `until` was reached.
    pub fn run_until(&mut self, until: Time, progress: &mut dyn FnMut(Time) -> bool) -> bool {
        self.engine.run_until(&mut self.shared, until, progress)
    }

    /// Zeroes every statistic: the measured window starts now.
    pub fn reset_stats(&mut self) {
        self.shared.reset_stats(self.engine.now());
        self.engine.reset_stats();
        self.window_start = self.engine.now();
    }

    pub fn now(&self) -> Time {
        self.engine.now()
    }

    /// The agents of type `T` (a device, a CPU), in the order they were built.
    pub fn agents_of<T: 'static>(&self) -> impl Iterator<Item = &T> {
        self.engine.agents().iter().filter_map(|a| a.as_any().downcast_ref::<T>())
    }

    /// Warm-up, reset, measured window; the results, or `Error::Stopped` if `progress` (called
    /// with the completed fraction) stopped the run by returning false.
    pub fn run(mut self, progress: &mut dyn FnMut(f64) -> bool) -> Result<RunResult, Error> {
        let started = std::time::Instant::now();
        let warmup = Time::from_us(self.scenario.sim.warmup_us);
        let end = warmup + Time::from_us(self.scenario.sim.measure_us);
        let total = end.0.max(1) as f64;
        if !self.run_until(warmup, &mut |t| progress(t.0 as f64 / total)) {
            return Err(Error::Stopped);
        }
        self.reset_stats();
        if !self.run_until(end, &mut |t| progress(t.0 as f64 / total)) || !progress(1.0) {
            return Err(Error::Stopped);
        }
        // Flows still moving at the window's end count what they moved until then.
        self.shared.flows.advance(self.engine.now());
        Ok(self.report(started.elapsed().as_secs_f64()))
    }

    /// The results of the measured window so far.
    pub fn report(&self, host_seconds: f64) -> RunResult {
        let view = ReportView { shared: &self.shared, window_start: self.window_start, now: self.engine.now() };
        let stalls = self.engine.stalls(self.window_start);
        let (value, schema) = crate::results::collect(self, &view, &stalls, self.engine.ran_dry_at, host_seconds);
        RunResult { value, schema }
    }

    /// The schema of this simulation's results (every key, its unit and meaning), without running.
    pub fn schema(&self) -> Vec<SchemaEntry> {
        self.report(0.0).schema
    }

    pub(crate) fn report_agents(&self, out: &mut Report, view: &ReportView) {
        for agent in self.engine.agents() {
            agent.report(out, view);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::MemorySpec;

    #[test]
    fn memory_allocated_on_a_node_belongs_to_that_node() {
        let platform = PlatformSpec {
            memory: MemorySpec { nodes_per_socket: 2, ..MemorySpec::default() },
            ..PlatformSpec::default()
        };
        let mut b = Builder::new(&platform, 1);
        for node in [1, 0, 1] {
            let addr = b.alloc(node, 5000);
            assert_eq!(b.node_of_addr(addr), node);
            assert_eq!(b.node_of_addr(Addr(addr.0 + 4999)), node);
        }
    }
}
