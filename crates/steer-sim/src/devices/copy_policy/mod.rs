//! Copy policies: which copy engines (the DSAs of which compute nodes) take part in a copy from
//! one memory node to another, as seed 001 defines them. A policy is one file with a `KIND`
//! static registering it in `COPY_POLICIES`, plus its `mod` line here; the copy is split evenly among
//! the devices a policy names.

use crate::params::Registry;
use crate::platform::{MemoryKind, MemoryNode, PlatformSpec};

/// What a policy decides from: the platform's memory nodes and the copy's ends.
pub struct CopyRequest<'a> {
    pub nodes: &'a [MemoryNode],
    /// Compute nodes per socket (each has one copy engine device).
    pub nodes_per_socket: u32,
    pub src: u32,
    pub dst: u32,
}

impl CopyRequest<'_> {
    pub fn src_node(&self) -> &MemoryNode {
        &self.nodes[self.src as usize]
    }
    pub fn dst_node(&self) -> &MemoryNode {
        &self.nodes[self.dst as usize]
    }
    /// Every compute node of `socket`.
    pub fn socket_nodes(&self, socket: u32) -> Vec<u32> {
        (socket * self.nodes_per_socket..(socket + 1) * self.nodes_per_socket).collect()
    }
    /// Every compute node.
    pub fn all_nodes(&self) -> Vec<u32> {
        self.nodes.iter().filter(|n| n.kind == MemoryKind::Ddr).map(|n| n.compute_node).collect()
    }
}

/// A registered copy policy: its name, description and choice of compute nodes.
pub struct CopyPolicy {
    pub name: &'static str,
    pub description: &'static str,
    pub devices: fn(&CopyRequest) -> Vec<u32>,
}

/// Every copy policy, by the name `copy_policy` gives; each adds its `KIND` here.
#[linkme::distributed_slice]
pub static COPY_POLICIES: [CopyPolicy];

mod brute;
mod local;
mod smart;

/// The registry `copy_policy` names an entry of.
pub struct CopyPolicies;

impl Registry for CopyPolicies {
    const WHAT: &'static str = "copy policy";
    fn entries() -> Vec<(&'static str, &'static str)> {
        let mut entries: Vec<_> = COPY_POLICIES.iter().map(|p| (p.name, p.description)).collect();
        entries.sort_unstable();
        entries
    }
}

/// The compute nodes whose devices policy `name` uses for a copy from `src` to `dst` (memory
/// nodes of `platform`).
pub fn devices_for(name: &str, platform: &PlatformSpec, src: u32, dst: u32) -> Vec<u32> {
    let nodes = platform.memory_nodes();
    let request = CopyRequest { nodes: &nodes, nodes_per_socket: platform.memory.nodes_per_socket, src, dst };
    let policy = COPY_POLICIES.iter().find(|p| p.name == name).expect("a checked policy name");
    (policy.devices)(&request)
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
}
