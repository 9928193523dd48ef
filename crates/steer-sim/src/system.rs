//! A system being assembled from a scenario: the `Builder` that device and workload kinds add
//! their agents, signals, memory and facilities through, over a platform's memory hierarchy. It
//! names no device or workload: each kind registers what it shares in `Shared` by type.

use crate::engine::{Agent, Engine, Facility, Shared, Signal, Starting};
use crate::flows::{FlowAgent, Flows, Network, Region};
use crate::hierarchy::Hierarchy;
use crate::memory::NODE_SPAN_BYTES;
use crate::platform::PlatformSpec;
use crate::units::{Addr, Time};

impl Shared {
    /// A small hierarchy and nothing else (for tests of agents).
    pub fn empty() -> Shared {
        Shared::new(&PlatformSpec::default(), 0)
    }

    /// The platform's memory hierarchy (first, as the most used) and its bulk-transfer flows.
    pub fn new(platform: &PlatformSpec, seed: u64) -> Shared {
        let mut shared = Shared::default();
        shared.insert(Hierarchy::seeded(platform, seed));
        shared.insert(Flows::default());
        shared
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
    pub(crate) shared: Shared,
    agents: Vec<Starting>,
    signals: u32,
    /// What adds agents once every kind is built (a CPU for each CPU with programs), in the order
    /// they were registered.
    finishers: Vec<fn(&mut Builder)>,
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
            finishers: Vec::new(),
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
        self.shared.get_mut()
    }

    /// The facility of type `T` that agents will share, registered with its default on first use.
    pub fn facility<T: Facility + Default>(&mut self) -> &mut T {
        self.shared.get_or_default()
    }

    /// The facility of type `T`, if a kind registered one.
    pub fn try_facility<T: Facility>(&self) -> Option<&T> {
        self.shared.try_get()
    }

    /// Runs `finish` once every kind is built, before the engine starts (once however often it
    /// is asked for).
    pub fn on_finish(&mut self, finish: fn(&mut Builder)) {
        if !self.finishers.contains(&finish) {
            self.finishers.push(finish);
        }
    }

    /// The bulk-transfer flows and the platform's shared resources (made, with the agent that
    /// settles flows, on first use).
    pub fn flows(&mut self) -> (&mut Flows, Network) {
        if self.shared.get::<Flows>().changed.is_none() {
            let changed = self.signal();
            let flows = self.shared.get_mut::<Flows>();
            flows.changed = Some(changed);
            flows.network = Some(Network::new(self.platform, flows));
            self.agents.push((Box::new(FlowAgent), Some(Time::ZERO)));
        }
        let flows = self.shared.get_mut::<Flows>();
        let network = flows.network.clone().expect("made above");
        (flows, network)
    }

    /// Adds an agent that first runs at `start` (`None`: when a signal it waits on is notified).
    pub fn add_agent(&mut self, agent: Box<dyn Agent>, start: Option<Time>) {
        self.agents.push((agent, start));
    }

    /// The engine and the shared state.
    pub fn finish(self, max_runahead: Time) -> (Engine, Shared) {
        let (agents, shared, signals) = self.into_parts();
        (Engine::new(agents, signals, max_runahead), shared)
    }

    /// The agents with their start times (those the finishers add last), the shared state and
    /// the number of signals: what an engine runs, or a test drives by hand.
    pub fn into_parts(mut self) -> (Vec<Starting>, Shared, u32) {
        for finish in std::mem::take(&mut self.finishers) {
            finish(&mut self);
        }
        (self.agents, self.shared, self.signals)
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

    #[test]
    fn a_finisher_runs_once_after_every_kind_however_often_it_is_asked_for() {
        fn add_one(b: &mut Builder) {
            let signal = b.signal();
            b.add_agent(Box::new(crate::flows::FlowAgent), None);
            assert_eq!(signal, Signal(1), "after the kinds' own signals");
        }
        let platform = PlatformSpec::default();
        let mut b = Builder::new(&platform, 1);
        b.on_finish(add_one);
        b.on_finish(add_one);
        b.signal();
        let (agents, _, signals) = b.into_parts();
        assert_eq!((agents.len(), signals), (1, 2));
    }
}
