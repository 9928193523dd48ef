//! Copy policies: which copy engines (the DSAs of which compute nodes) take part in a copy from
//! one memory node to another, as seed 001 defines them. The policies are the offloading cache
//! library's (`steer_offload::policy::COPY_POLICIES`), so the simulator and the library choose
//! alike; this module shows them the platform's memory nodes as a NUMA topology. The copy is split
//! evenly among the devices a policy names.

use steer_offload::{Node, Topology};

use crate::params::Registry;
use crate::platform::{MemoryKind, PlatformSpec};

/// The registry `copy_policy` names an entry of.
pub struct CopyPolicies;

impl Registry for CopyPolicies {
    const WHAT: &'static str = "copy policy";
    fn entries() -> Vec<(&'static str, &'static str)> {
        let mut entries: Vec<_> =
            steer_offload::policy::COPY_POLICIES.iter().map(|p| (p.name, p.description)).collect();
        entries.sort_unstable();
        entries
    }
}

/// The platform's memory nodes as a NUMA topology: DDR nodes hold their socket's cores in equal
/// shares, HBM nodes none. Distances only rank nearness (10 itself, 11 its compute node, 20 its
/// socket, 30 another socket): the policies ask of them only which compute node is nearest.
pub fn topology(platform: &PlatformSpec) -> Topology {
    let nodes = platform.memory_nodes();
    let ddr_nodes = nodes.iter().filter(|n| n.kind == MemoryKind::Ddr).count();
    let cores_per_node = platform.topology.cores() as usize / ddr_nodes.max(1);
    let distance = |a: usize, b: usize| match (&nodes[a], &nodes[b]) {
        _ if a == b => 10,
        (x, y) if x.compute_node == y.compute_node => 11,
        (x, y) if x.socket == y.socket => 20,
        _ => 30,
    };
    let topology = (0..nodes.len())
        .map(|id| Node {
            id,
            cpus: match nodes[id].kind {
                MemoryKind::Ddr => (id * cores_per_node..(id + 1) * cores_per_node).collect(),
                MemoryKind::Hbm => Vec::new(),
            },
            bytes: 0,
            socket: nodes[id].socket as usize,
            distances: (0..nodes.len()).map(|other| distance(id, other)).collect(),
        })
        .collect();
    Topology::new(topology).expect("a platform's memory nodes form a topology")
}

/// The compute nodes whose devices policy `name` uses for a copy from `src` to `dst` (memory
/// nodes of `platform`).
pub fn devices_for(name: &str, platform: &PlatformSpec, src: u32, dst: u32) -> Vec<u32> {
    use steer_offload::CopyPolicy;
    let policy = steer_offload::policy::copy_policy(name).expect("a checked policy name");
    policy.engines(&topology(platform), src as usize, dst as usize).into_iter().map(|n| n as u32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_policies_choose_as_seed_001_describes_them() {
        let platform = crate::platform::preset("xeon-max-9468").unwrap();
        let choose = |name, dst| devices_for(name, &platform, 0, dst);
        assert_eq!(choose("local", 8), [0]);
        assert_eq!(choose("brute", 8), [0, 1, 2, 3, 4, 5, 6, 7]);
        // Within a socket: the socket's four devices; across: the source's and destination's.
        assert_eq!(choose("smart", 8), [0, 1, 2, 3]);
        assert_eq!(choose("smart", 11), [0, 1, 2, 3]);
        assert_eq!(choose("smart", 12), [0, 4]);
        assert_eq!(choose("smart", 15), [0, 7]);
        assert_eq!(devices_for("local", &platform, 13, 2), [5]);
    }

    #[test]
    fn ddr_nodes_hold_equal_shares_of_the_cores_in_order_and_hbm_nodes_none() {
        let platform = crate::platform::preset("xeon-max-9468").unwrap();
        let topology = topology(&platform);
        let per_node = platform.topology.cores() as usize / 8;
        let nodes = topology.nodes();
        assert_eq!(nodes[0].cpus, (0..per_node).collect::<Vec<_>>());
        assert_eq!(nodes[1].cpus, (per_node..2 * per_node).collect::<Vec<_>>());
        assert_eq!(nodes[7].cpus, (7 * per_node..8 * per_node).collect::<Vec<_>>());
        assert!(nodes[8..].iter().all(|node| node.cpus.is_empty()));
        // Node 0 from itself, its HBM (node 8), its socket's next DDR node, the other socket's.
        let distances = &nodes[0].distances;
        assert_eq!([distances[0], distances[8], distances[1], distances[4]], [10, 11, 20, 30]);
        // Without HBM every node is a DDR node with its share (Xeon Max has as many of each kind).
        let mut ddr_only = crate::platform::preset("turin-9575f").unwrap();
        ddr_only.memory.nodes_per_socket = 4;
        let nodes = super::topology(&ddr_only).nodes().to_vec();
        assert_eq!(nodes.len(), 4);
        assert_eq!(nodes[3].cpus, (48..64).collect::<Vec<_>>());
    }
}
