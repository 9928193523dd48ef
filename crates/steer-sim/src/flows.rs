//! Bulk transfers as flows: copies too large to move line by line (a DSA descriptor, a CPU
//! `memcpy` of megabytes) are flows of bytes over the resources they cross (memory nodes, a
//! socket's mesh, the socket link in one direction, a copy engine's fabric port). Flows share each
//! resource max-min fairly, each also limited by its own cap. A flow may weigh on a resource more
//! than its rate: a copy engine's read buffers hold rate x latency bytes of each flow reading
//! through them (Little's law), so flows from far memory use more of them. Rates change only when a flow starts or ends, so a copy of
//! gigabytes costs a few events per descriptor, not one per line.
//!
//! `Flows` lives in `Shared`; whoever starts a flow notifies `Flows::changed`, and the `FlowAgent`
//! settles the flows at each change and at each completion, notifying each finished flow's owner.

use crate::engine::{Agent, Cx, Signal, Step};
use crate::memory::BulkTraffic;
use crate::platform::PlatformSpec;
use crate::units::Time;

/// A resource flows share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId(pub u32);

/// Who is told when its flows finish: an agent's signal and the tags of its finished flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OwnerId(pub u32);

#[derive(Debug, Clone)]
struct Resource {
    name: String,
    gbs: f64,
    /// Bytes carried so far.
    bytes: f64,
}

/// A resource a flow crosses, and how much of it each byte per ns of the flow uses.
pub type Use = (ResourceId, f64);

/// The uses of a route of plain resources (each byte counted once per listing).
pub fn plain(route: Vec<ResourceId>) -> Vec<Use> {
    route.into_iter().map(|r| (r, 1.0)).collect()
}

/// Where a flow's bytes lie in memory: a buffer of `len` bytes at byte `offset` of memory node
/// `node`, walked from byte `start` of it on, starting over at its beginning once past its end (a
/// buffer copied again and again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub node: u32,
    pub offset: u64,
    pub len: u64,
    pub start: u64,
}

impl Region {
    /// The buffer of `len` bytes at `offset` of `node`, from its first byte.
    pub fn new(node: u32, offset: u64, len: u64) -> Region {
        Region { node, offset, len: len.max(1), start: 0 }
    }

    /// The same buffer, walked from `bytes` further on.
    pub fn skip(self, bytes: u64) -> Region {
        Region { start: ((self.start as u128 + bytes as u128) % self.len as u128) as u64, ..self }
    }

    /// Calls `each(offset, bytes)` for the runs of memory that bytes `from..to` of the walk cover.
    fn runs(&self, from: u64, to: u64, mut each: impl FnMut(u64, u64)) {
        let mut at = ((self.start as u128 + from as u128) % self.len as u128) as u64;
        let mut left = to - from;
        while left > 0 {
            let bytes = left.min(self.len - at);
            each(self.offset + at, bytes);
            left -= bytes;
            at = 0;
        }
    }
}

/// A flow to start: the bytes it moves, the resources it crosses, its own cap, and where in
/// memory it reads and writes them (none: memory the model does not count, as a source in the LLC).
#[derive(Debug, Clone)]
pub struct Transfer {
    pub bytes: u64,
    pub route: Vec<Use>,
    pub cap_gbs: f64,
    pub reads: Option<Region>,
    pub writes: Option<Region>,
}

impl Transfer {
    /// `bytes` over `route` at most `cap_gbs`, counted in no memory.
    pub fn over(route: Vec<Use>, cap_gbs: f64, bytes: u64) -> Transfer {
        Transfer { bytes, route, cap_gbs, reads: None, writes: None }
    }
}

#[derive(Debug, Clone)]
struct Flow {
    route: Vec<Use>,
    cap_gbs: f64,
    bytes: u64,
    /// Bytes already counted in the memory traffic.
    counted: u64,
    reads: Option<Region>,
    writes: Option<Region>,
    remaining: f64,
    /// Current rate, bytes per ns (GB/s).
    rate: f64,
    owner: OwnerId,
    tag: u64,
}

#[derive(Debug, Clone)]
struct Owner {
    signal: Signal,
    finished: Vec<u64>,
}

/// Bytes left below which a flow has finished (rounding of times to picoseconds).
const DONE_BYTES: f64 = 0.5;

/// What flows moved before the end of the warm-up belongs to it.
impl crate::engine::Facility for Flows {
    fn reset_stats(&mut self, now: Time) {
        self.advance(now);
        self.traffic.reset();
    }
}

/// Every flow in progress and the resources they share.
#[derive(Debug, Clone, Default)]
pub struct Flows {
    resources: Vec<Resource>,
    flows: Vec<Flow>,
    owners: Vec<Owner>,
    /// When the flows' remaining bytes were last brought up to date.
    updated: Time,
    /// Notified by whoever starts a flow, so that the rates are shared again.
    pub changed: Option<Signal>,
    /// The shared resources of the platform (memory nodes, meshes, socket links), once made.
    pub network: Option<Network>,
    /// What the flows read and wrote in memory (made with the network).
    pub traffic: BulkTraffic,
}

impl Flows {
    /// A resource of `gbs` GB/s.
    pub fn add_resource(&mut self, name: impl Into<String>, gbs: f64) -> ResourceId {
        self.resources.push(Resource { name: name.into(), gbs, bytes: 0.0 });
        ResourceId(self.resources.len() as u32 - 1)
    }

    /// An owner of flows, told through `signal`.
    pub fn add_owner(&mut self, signal: Signal) -> OwnerId {
        self.owners.push(Owner { signal, finished: Vec::new() });
        OwnerId(self.owners.len() as u32 - 1)
    }

    /// Starts `transfer` at `now`; `tag` comes back to its owner when it finishes. The caller
    /// notifies `changed`.
    pub fn start(&mut self, now: Time, transfer: Transfer, owner: OwnerId, tag: u64) {
        self.advance(now);
        let Transfer { bytes, route, cap_gbs, reads, writes } = transfer;
        let remaining = bytes as f64;
        self.flows.push(Flow { route, cap_gbs, bytes, counted: 0, reads, writes, remaining, rate: 0.0, owner, tag });
        self.share();
    }

    /// Tags of `owner`'s flows that finished since it last asked.
    pub fn take_finished(&mut self, owner: OwnerId) -> Vec<u64> {
        std::mem::take(&mut self.owners[owner.0 as usize].finished)
    }

    /// Each resource's name and the bytes it carried.
    pub fn carried(&self) -> impl Iterator<Item = (&str, f64)> {
        self.resources.iter().map(|r| (r.name.as_str(), r.bytes))
    }

    /// The current rate of the flows of `owner` with `tag` (GB/s), for tests.
    pub fn rate_of(&self, owner: OwnerId, tag: u64) -> Option<f64> {
        self.flows.iter().find(|f| f.owner == owner && f.tag == tag).map(|f| f.rate)
    }

    /// Moves every flow's bytes up to `now`. A flow started by an agent whose clock is behind
    /// the flows' (within the run-ahead bound) starts at the flows' time, never in their past.
    pub fn advance(&mut self, now: Time) {
        if now <= self.updated {
            return;
        }
        let dt = (now - self.updated).as_ns();
        self.updated = now;
        for flow in &mut self.flows {
            let moved = (flow.rate * dt).min(flow.remaining);
            flow.remaining -= moved;
            for (r, _) in &flow.route {
                self.resources[r.0 as usize].bytes += moved;
            }
            // Whole bytes only; a finished flow counts its last fraction (`settle`).
            let done = (flow.bytes as f64 - flow.remaining).floor().clamp(0.0, flow.bytes as f64) as u64;
            count(&mut self.traffic, flow, done);
        }
    }

    /// Max-min fair rates by progressive filling: raise every unfrozen flow's rate together
    /// until a resource is full or a flow reaches its cap; freeze those flows; repeat.
    fn share(&mut self) {
        let mut residual: Vec<f64> = self.resources.iter().map(|r| r.gbs).collect();
        let mut frozen = vec![false; self.flows.len()];
        for flow in &mut self.flows {
            flow.rate = 0.0;
        }
        // Per resource: the summed weight of the unfrozen flows using it.
        let mut users = vec![0.0; residual.len()];
        loop {
            users.iter_mut().for_each(|u| *u = 0.0);
            for (flow, _) in self.flows.iter().zip(&frozen).filter(|(_, f)| !**f) {
                for (r, weight) in &flow.route {
                    users[r.0 as usize] += weight;
                }
            }
            let by_resource = residual
                .iter()
                .zip(&users)
                .filter(|(_, &weight)| weight > 0.0)
                .map(|(left, &weight)| left / weight)
                .fold(f64::INFINITY, f64::min);
            let by_cap = self
                .flows
                .iter()
                .zip(&frozen)
                .filter(|(_, f)| !**f)
                .map(|(flow, _)| flow.cap_gbs - flow.rate)
                .fold(f64::INFINITY, f64::min);
            let step = by_resource.min(by_cap);
            if !step.is_finite() {
                break;
            }
            for (flow, _) in self.flows.iter_mut().zip(&frozen).filter(|(_, f)| !**f) {
                flow.rate += step;
                for (r, weight) in &flow.route {
                    residual[r.0 as usize] -= step * weight;
                }
            }
            let mut any = false;
            for (flow, frozen) in self.flows.iter().zip(frozen.iter_mut()).filter(|(_, f)| !**f) {
                let full =
                    flow.route.iter().any(|(r, _)| residual[r.0 as usize] <= 1e-9 * self.resources[r.0 as usize].gbs);
                if full || flow.rate >= flow.cap_gbs * (1.0 - 1e-9) {
                    *frozen = true;
                    any = true;
                }
            }
            // Once every flow is frozen the next round finds no finite step and ends.
            if !any {
                break;
            }
        }
    }

    /// Brings every flow up to `now`, ends those that are done and shares the rates again;
    /// returns the signals of the owners with newly finished flows.
    pub fn settle(&mut self, now: Time) -> Vec<Signal> {
        self.advance(now);
        let mut told = Vec::new();
        let mut i = 0;
        while i < self.flows.len() {
            if self.flows[i].remaining <= DONE_BYTES {
                let mut flow = self.flows.swap_remove(i);
                let all = flow.bytes;
                count(&mut self.traffic, &mut flow, all);
                let owner = &mut self.owners[flow.owner.0 as usize];
                owner.finished.push(flow.tag);
                if !told.contains(&owner.signal) {
                    told.push(owner.signal);
                }
            } else {
                i += 1;
            }
        }
        self.share();
        told
    }

    /// When the next flow will finish at the current rates.
    pub fn next_finish(&self) -> Option<Time> {
        self.flows
            .iter()
            .filter(|f| f.rate > 0.0)
            .map(|f| self.updated + Time((f.remaining / f.rate * 1000.0).ceil() as u64))
            .min()
    }
}

/// Counts bytes `flow.counted..done` of `flow` in the memory it reads and writes.
fn count(traffic: &mut BulkTraffic, flow: &mut Flow, done: u64) {
    if done <= flow.counted {
        return;
    }
    for (region, write) in [(flow.reads, false), (flow.writes, true)] {
        if let Some(region) = region {
            region.runs(flow.counted, done, |offset, bytes| traffic.carry(region.node, offset, bytes, write));
        }
    }
    flow.counted = done;
}

/// The platform's shared resources: each memory node, each socket's mesh, the socket link in
/// each direction.
#[derive(Debug, Clone)]
pub struct Network {
    memory: Vec<ResourceId>,
    mesh: Vec<ResourceId>,
    /// `links[from][to]`, for `from != to`.
    links: Vec<Vec<Option<ResourceId>>>,
    /// The socket of each memory node.
    node_socket: Vec<u32>,
}

impl Network {
    pub fn new(platform: &PlatformSpec, flows: &mut Flows) -> Network {
        flows.traffic = BulkTraffic::new(platform);
        let nodes = platform.memory_nodes();
        let memory =
            nodes.iter().enumerate().map(|(i, n)| flows.add_resource(format!("memory node {i}"), n.gbs)).collect();
        let sockets = platform.topology.sockets;
        let mesh = (0..sockets).map(|s| flows.add_resource(format!("mesh {s}"), platform.fabric.mesh_gbs)).collect();
        let links = (0..sockets)
            .map(|from| {
                (0..sockets)
                    .map(|to| {
                        (from != to)
                            .then(|| flows.add_resource(format!("link {from}->{to}"), platform.fabric.socket_link_gbs))
                    })
                    .collect()
            })
            .collect();
        Network { memory, mesh, links, node_socket: nodes.iter().map(|n| n.socket).collect() }
    }

    /// The resources a read of memory node `node` by an agent on socket `socket` crosses: the
    /// node, the meshes of both sockets, and the socket link towards the reader.
    pub fn read_route(&self, socket: u32, node: u32) -> Vec<ResourceId> {
        let node_socket = self.node_socket[node as usize];
        let mut route = vec![self.memory[node as usize], self.mesh[node_socket as usize]];
        if let Some(link) = self.links[node_socket as usize][socket as usize] {
            route.extend([self.mesh[socket as usize], link]);
        }
        route
    }

    /// The resources a copy from memory node `src` to `dst` crosses (a resource listed twice
    /// carries the flow's bytes twice) when the agent moving it
    /// sits on socket `socket`: both memory nodes, every mesh it touches, and the socket link
    /// in the direction of each crossing (data read from a remote socket, data written to one).
    /// A source the LLC holds (`src_in_llc`) is read from there, not from its memory node.
    pub fn copy_route(&self, socket: u32, src: u32, dst: u32, src_in_llc: bool) -> Vec<ResourceId> {
        let (src_socket, dst_socket) = (self.node_socket[src as usize], self.node_socket[dst as usize]);
        // A copy within one node reads and writes it: the node appears twice and carries both.
        let mut route = if src_in_llc { vec![] } else { vec![self.memory[src as usize]] };
        route.push(self.memory[dst as usize]);
        for s in [socket, src_socket, dst_socket] {
            let mesh = self.mesh[s as usize];
            if !route.contains(&mesh) {
                route.push(mesh);
            }
        }
        for (from, to) in [(src_socket, socket), (socket, dst_socket)] {
            if let Some(link) = self.links[from as usize][to as usize] {
                route.push(link);
            }
        }
        route
    }
}

/// Settles the flows whenever they change or one finishes.
pub struct FlowAgent;

impl Agent for FlowAgent {
    fn name(&self) -> String {
        "flows".into()
    }

    fn step(&mut self, cx: &mut Cx, now: Time, _limit: Time) -> Step {
        let flows = cx.shared.get_mut::<Flows>();
        let told = flows.settle(now);
        let next = flows.next_finish();
        let changed = flows.changed.expect("the flow agent exists only with flows");
        for signal in told {
            cx.notify(signal, now);
        }
        cx.wait_on(changed);
        match next {
            Some(at) => Step::At(at),
            None => Step::Wait,
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ns;

    fn two_resources() -> (Flows, ResourceId, ResourceId, OwnerId) {
        let mut flows = Flows::default();
        let a = flows.add_resource("a", 10.0);
        let b = flows.add_resource("b", 4.0);
        let owner = flows.add_owner(Signal(0));
        (flows, a, b, owner)
    }

    #[test]
    fn one_flow_runs_at_its_tightest_resource_or_cap() {
        let (mut flows, a, b, owner) = two_resources();
        flows.start(ns(0.0), Transfer::over(plain(vec![a, b]), f64::INFINITY, 400), owner, 1);
        assert_eq!(flows.rate_of(owner, 1), Some(4.0));
        // 400 bytes at 4 bytes/ns: done at 100 ns.
        assert_eq!(flows.next_finish(), Some(Time(100_000)));
        flows.start(ns(0.0), Transfer::over(plain(vec![a]), 3.0, 30), owner, 2);
        assert_eq!(flows.rate_of(owner, 2), Some(3.0));
    }

    #[test]
    fn max_min_gives_the_unconstrained_flow_what_the_constrained_one_leaves() {
        let (mut flows, a, b, owner) = two_resources();
        flows.start(ns(0.0), Transfer::over(plain(vec![a, b]), f64::INFINITY, 1000), owner, 1);
        flows.start(ns(0.0), Transfer::over(plain(vec![a]), f64::INFINITY, 1000), owner, 2);
        // Flow 1 is held to 4 by b; flow 2 gets the 6 left of a.
        assert_eq!(flows.rate_of(owner, 1), Some(4.0));
        assert_eq!(flows.rate_of(owner, 2), Some(6.0));
        flows.start(ns(0.0), Transfer::over(plain(vec![a]), f64::INFINITY, 1000), owner, 3);
        assert_eq!(flows.rate_of(owner, 1), Some(10.0 / 3.0));
        assert_eq!(flows.rate_of(owner, 3), Some(10.0 / 3.0));
    }

    #[test]
    fn a_finished_flow_is_reported_once_to_its_owner_and_frees_its_share() {
        let (mut flows, a, _, owner) = two_resources();
        flows.start(ns(0.0), Transfer::over(plain(vec![a]), f64::INFINITY, 100), owner, 7);
        flows.start(ns(0.0), Transfer::over(plain(vec![a]), f64::INFINITY, 1000), owner, 8);
        // Each at 5 bytes/ns: flow 7 ends at 20 ns; flow 8 has 900 bytes left and gets all 10.
        assert!(flows.settle(ns(19.0)).is_empty());
        assert_eq!(flows.settle(ns(20.0)), vec![Signal(0)]);
        assert_eq!(flows.take_finished(owner), vec![7]);
        assert!(flows.take_finished(owner).is_empty());
        assert_eq!(flows.rate_of(owner, 8), Some(10.0));
        assert_eq!(flows.next_finish(), Some(ns(20.0) + Time(90_000)));
        let carried: Vec<_> = flows.carried().collect();
        assert_eq!(carried[0], ("a", 200.0));
    }

    #[test]
    fn a_flow_held_at_its_cap_leaves_the_rest_of_the_resource_to_the_others() {
        let (mut flows, a, _, owner) = two_resources();
        flows.start(ns(0.0), Transfer::over(plain(vec![a]), 2.0, 1000), owner, 1);
        flows.start(ns(0.0), Transfer::over(plain(vec![a]), f64::INFINITY, 1000), owner, 2);
        assert_eq!((flows.rate_of(owner, 1), flows.rate_of(owner, 2)), (Some(2.0), Some(8.0)));
        // A cap reached only after a first round: b (4) freezes flow 3 at 4; flow 4 then rises
        // from 4 to its cap of 5, not to the 6 a would leave it.
        let (mut flows, a, b, owner) = two_resources();
        flows.start(ns(0.0), Transfer::over(plain(vec![a]), 5.0, 1000), owner, 4);
        flows.start(ns(0.0), Transfer::over(plain(vec![a, b]), f64::INFINITY, 1000), owner, 3);
        assert_eq!((flows.rate_of(owner, 3), flows.rate_of(owner, 4)), (Some(4.0), Some(5.0)));
        assert_eq!(FlowAgent.name(), "flows");
    }

    #[test]
    fn a_weighted_use_shares_a_resource_in_proportion_to_its_weight() {
        // 12 bytes in flight: a flow weighing 2 (far) and one weighing 1 (near) each get 4 per ns.
        let mut flows = Flows::default();
        let buffers = flows.add_resource("read buffers", 12.0);
        let owner = flows.add_owner(Signal(0));
        flows.start(ns(0.0), Transfer::over(vec![(buffers, 2.0)], f64::INFINITY, 100), owner, 1);
        flows.start(ns(0.0), Transfer::over(vec![(buffers, 1.0)], f64::INFINITY, 100), owner, 2);
        assert_eq!((flows.rate_of(owner, 1), flows.rate_of(owner, 2)), (Some(4.0), Some(4.0)));
    }

    #[test]
    fn a_weighted_flow_frozen_first_leaves_the_rest_by_its_weight() {
        // Round 1: the port holds the far flow (weight 2) at 2, using 4 of 12; the near flow
        // then rises to the 8 left.
        let mut flows = Flows::default();
        let buffers = flows.add_resource("read buffers", 12.0);
        let port = flows.add_resource("port", 2.0);
        let owner = flows.add_owner(Signal(0));
        flows.start(ns(0.0), Transfer::over(vec![(buffers, 2.0), (port, 1.0)], f64::INFINITY, 100), owner, 1);
        flows.start(ns(0.0), Transfer::over(vec![(buffers, 1.0)], f64::INFINITY, 100), owner, 2);
        assert_eq!((flows.rate_of(owner, 1), flows.rate_of(owner, 2)), (Some(2.0), Some(8.0)));
    }

    #[test]
    fn a_flow_started_behind_the_flows_clock_starts_at_it() {
        let (mut flows, a, _, owner) = two_resources();
        flows.start(ns(100.0), Transfer::over(plain(vec![a]), f64::INFINITY, 1000), owner, 1);
        flows.start(ns(50.0), Transfer::over(plain(vec![a]), f64::INFINITY, 1000), owner, 2);
        // Both share resource a (10 GB/s) from 100 ns on: the second moved nothing before.
        assert_eq!(flows.settle(ns(150.0)), []);
        assert_eq!(flows.next_finish(), Some(ns(300.0)));
    }

    #[test]
    fn a_resource_listed_twice_carries_the_flow_twice() {
        let (mut flows, a, _, owner) = two_resources();
        flows.start(ns(0.0), Transfer::over(plain(vec![a, a]), f64::INFINITY, 100), owner, 1);
        assert_eq!(flows.rate_of(owner, 1), Some(5.0));
    }

    #[test]
    fn a_buffer_walked_past_its_end_starts_over_at_its_beginning() {
        // 300 B at 1000, from its byte 250 on: 50 B to its end, then from its start again.
        let region = Region::new(3, 1000, 300).skip(250);
        let mut runs = Vec::new();
        region.runs(0, 400, |offset, bytes| runs.push((offset, bytes)));
        assert_eq!(runs, [(1250, 50), (1000, 300), (1000, 50)]);
        assert_eq!(region.skip(350).start, 0);
    }

    #[test]
    fn a_flow_counts_each_byte_once_where_it_reads_and_where_it_writes_as_it_moves() {
        let platform = crate::platform::preset("xeon-max-9468").unwrap();
        let mut flows = Flows::default();
        let network = Network::new(&platform, &mut flows);
        let owner = flows.add_owner(Signal(0));
        // 1000 B from the start of node 0 to node 8 at 10 B/ns (its cap).
        let route = plain(network.copy_route(0, 0, 8, false));
        let transfer = Transfer {
            reads: Some(Region::new(0, 0, 1000)),
            writes: Some(Region::new(8, 0, 1000)),
            ..Transfer::over(route, 10.0, 1000)
        };
        flows.start(ns(0.0), transfer, owner, 1);
        // At 30.05 ns, 300.5 B have moved: 300 whole bytes counted, 256 of them on channel 0.
        flows.advance(ns(30.05));
        let traffic = &flows.traffic;
        assert_eq!((traffic.nodes[0].read, traffic.nodes[8].write), (300, 300));
        assert_eq!((traffic.channels[0].read, traffic.channels[1].read), (256, 44));
        // Done: granules 0-3 of node 0 on channels 0, 1, 0, 1; every byte written to node 8.
        flows.settle(ns(100.0));
        let traffic = &flows.traffic;
        assert_eq!((traffic.channels[0].read, traffic.channels[1].read), (512, 488));
        assert_eq!(
            (traffic.nodes[0], traffic.nodes[8].write),
            (crate::memory::ReadWrite { read: 1000, write: 0 }, 1000)
        );
        assert_eq!(traffic.nodes.iter().map(|n| n.read + n.write).sum::<u64>(), 2000);
    }

    #[test]
    fn a_copy_across_sockets_crosses_the_link_in_the_direction_data_moves() {
        let platform = crate::platform::preset("xeon-max-9468").unwrap();
        let mut flows = Flows::default();
        let network = Network::new(&platform, &mut flows);
        let names = |route: Vec<ResourceId>| -> Vec<String> {
            route.iter().map(|r| flows.resources[r.0 as usize].name.clone()).collect()
        };
        // An engine on socket 1 copying node 0 (socket 0) to node 15 (HBM of node 7, socket 1).
        assert_eq!(
            names(network.copy_route(1, 0, 15, false)),
            ["memory node 0", "memory node 15", "mesh 1", "mesh 0", "link 0->1"]
        );
        // An engine on socket 0 doing the same copy writes across the link instead.
        assert_eq!(
            names(network.copy_route(0, 0, 15, false)),
            ["memory node 0", "memory node 15", "mesh 0", "mesh 1", "link 0->1"]
        );
        assert_eq!(names(network.copy_route(0, 0, 0, false)), ["memory node 0", "memory node 0", "mesh 0"]);
        // A source in the LLC: the node carries the writes only.
        assert_eq!(names(network.copy_route(0, 0, 0, true)), ["memory node 0", "mesh 0"]);
        assert_eq!(names(network.copy_route(0, 0, 15, true)), ["memory node 15", "mesh 0", "mesh 1", "link 0->1"]);
        // A core of socket 1 reading node 8 (HBM of node 0, socket 0); one of socket 0 reading it.
        assert_eq!(names(network.read_route(1, 8)), ["memory node 8", "mesh 0", "mesh 1", "link 0->1"]);
        assert_eq!(names(network.read_route(0, 8)), ["memory node 8", "mesh 0"]);
    }
}
