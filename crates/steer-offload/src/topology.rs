//! The machine's NUMA nodes as the cache sees them: which have CPUs (compute nodes, each with its
//! copy engine), which hold only memory (HBM in flat mode, or CXL), their sizes and distances.
//! Read from sysfs (`/sys/devices/system/node`), from a captured tree, or built by hand.

use std::fs;
use std::path::Path;

use crate::error::{Error, Result};

/// One NUMA node.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub id: usize,
    /// Its CPUs; empty for a memory-only node.
    pub cpus: Vec<usize>,
    /// Its memory in bytes (0 where unknown).
    pub bytes: u64,
    /// The socket (package) it belongs to.
    pub socket: usize,
    /// ACPI SLIT distance to every node, by node id (10 = local).
    pub distances: Vec<u32>,
}

impl Node {
    /// A node without CPUs: HBM in flat mode (or CXL memory).
    pub fn is_memory_only(&self) -> bool {
        self.cpus.is_empty()
    }
}

/// The nodes of a machine, indexed by id.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    nodes: Vec<Node>,
    /// Whether addresses can be located with `get_mempolicy` (this process's own machine).
    host: bool,
}

impl Topology {
    /// This machine, from sysfs; one node holding every CPU where sysfs has no NUMA nodes.
    pub fn host() -> Topology {
        let mut topology = Topology::from_sysfs(Path::new("/")).unwrap_or_else(|_| {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            Topology::single_node(cpus, 0)
        });
        topology.host = true;
        topology
    }

    /// One node with `cpus` CPUs and `bytes` of memory.
    pub fn single_node(cpus: usize, bytes: u64) -> Topology {
        Topology::new(vec![Node { id: 0, cpus: (0..cpus).collect(), bytes, socket: 0, distances: vec![10] }])
            .expect("one node is a topology")
    }

    /// A topology from nodes numbered 0.. in order, each with a distance to every node.
    pub fn new(nodes: Vec<Node>) -> Result<Topology> {
        for (i, node) in nodes.iter().enumerate() {
            if node.id != i {
                return Err(Error::BadConfig(format!(
                    "node {} listed at position {i}: nodes are numbered 0..",
                    node.id
                )));
            }
            if node.distances.len() != nodes.len() {
                return Err(Error::BadConfig(format!(
                    "node {i} has {} distances for {} nodes",
                    node.distances.len(),
                    nodes.len()
                )));
            }
        }
        if !nodes.iter().any(|n| !n.is_memory_only()) {
            return Err(Error::BadConfig("a topology needs a node with CPUs".into()));
        }
        Ok(Topology { nodes, host: false })
    }

    /// The topology under `root` (a captured tree, or `/`): `sys/devices/system/node/node*` with
    /// `cpulist`, `distance` and `meminfo`, and each CPU's `physical_package_id`.
    pub fn from_sysfs(root: &Path) -> Result<Topology> {
        let dir = root.join("sys/devices/system/node");
        let read = |p: &Path| fs::read_to_string(p).map_err(|e| Error::Os(format!("{}: {e}", p.display())));
        let mut ids: Vec<usize> = fs::read_dir(&dir)
            .map_err(|e| Error::Os(format!("{}: {e}", dir.display())))?
            .filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("node")?.parse().ok())
            .collect();
        ids.sort_unstable();
        let mut nodes = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            if id != i {
                return Err(Error::BadConfig(format!("{}: node ids are not 0..{}", dir.display(), ids.len())));
            }
            let node_dir = dir.join(format!("node{id}"));
            let cpus = parse_cpulist(read(&node_dir.join("cpulist"))?.trim())
                .ok_or_else(|| Error::BadConfig(format!("{}: malformed cpulist", node_dir.display())))?;
            let distances: Vec<u32> = read(&node_dir.join("distance"))?
                .split_whitespace()
                .map(|d| d.parse().map_err(|_| Error::BadConfig(format!("{}: malformed distance", node_dir.display()))))
                .collect::<Result<_>>()?;
            let bytes = fs::read_to_string(node_dir.join("meminfo")).ok().and_then(|m| mem_total(&m)).unwrap_or(0);
            let socket = cpus
                .first()
                .and_then(|cpu| {
                    let path = root.join(format!("sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"));
                    fs::read_to_string(path).ok()?.trim().parse().ok()
                })
                .unwrap_or(0);
            nodes.push(Node { id, cpus, bytes, socket, distances });
        }
        // A memory-only node belongs to the socket of its nearest compute node.
        let mut topology = Topology::new(nodes)?;
        for id in 0..topology.nodes.len() {
            if topology.nodes[id].is_memory_only() {
                topology.nodes[id].socket = topology.nodes[topology.compute_node(id)].socket;
            }
        }
        Ok(topology)
    }

    /// Whether this is the running machine's topology (its node numbers are the kernel's).
    pub fn is_host(&self) -> bool {
        self.host
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn node(&self, id: usize) -> Option<&Node> {
        self.nodes.get(id)
    }

    /// The compute nodes (nodes with CPUs), in id order.
    pub fn compute_nodes(&self) -> Vec<usize> {
        self.nodes.iter().filter(|n| !n.is_memory_only()).map(|n| n.id).collect()
    }

    /// The compute node a node belongs to: itself if it has CPUs, else the nearest node with CPUs.
    pub fn compute_node(&self, id: usize) -> usize {
        if !self.nodes[id].is_memory_only() {
            return id;
        }
        self.nearest(id, |n| !n.is_memory_only()).expect("a topology has a compute node")
    }

    /// The nearest memory-only (HBM) node to `from`, if any; ties go to the lower id.
    pub fn nearest_memory_only(&self, from: usize) -> Option<usize> {
        self.nearest(from, Node::is_memory_only)
    }

    fn nearest(&self, from: usize, wanted: impl Fn(&Node) -> bool) -> Option<usize> {
        let distances = &self.nodes[from].distances;
        self.nodes.iter().filter(|n| wanted(n)).min_by_key(|n| (distances[n.id], n.id)).map(|n| n.id)
    }

    /// The node whose CPUs include `cpu`.
    pub fn node_of_cpu(&self, cpu: usize) -> Option<usize> {
        self.nodes.iter().find(|n| n.cpus.contains(&cpu)).map(|n| n.id)
    }

    /// The node of the CPU the calling thread runs on (node 0 where unknown).
    pub fn current_node(&self) -> usize {
        // SAFETY: sched_getcpu takes no arguments and only returns a number. (Miri, which checks
        // the unsafe code in tests, has no CPUs to ask about.)
        let cpu = if cfg!(miri) { 0 } else { unsafe { libc::sched_getcpu() } };
        usize::try_from(cpu).ok().and_then(|cpu| self.node_of_cpu(cpu)).unwrap_or(0)
    }

    /// The node holding the page at `addr`, on this machine; `None` for a topology not read from
    /// the host, or where the kernel will not say (the page not yet touched, no NUMA support).
    pub fn node_of_address(&self, addr: *const u8) -> Option<usize> {
        let addr = addr as usize;
        if !self.host {
            return None;
        }
        const MPOL_F_NODE: libc::c_ulong = 1;
        const MPOL_F_ADDR: libc::c_ulong = 2;
        let mut node: libc::c_int = -1;
        // SAFETY: get_mempolicy writes one int through the first pointer and only reads the address
        // given (it does not dereference it); the other pointers are null with maxnode 0.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_get_mempolicy,
                &mut node as *mut libc::c_int,
                std::ptr::null_mut::<libc::c_ulong>(),
                0 as libc::c_ulong,
                addr,
                MPOL_F_NODE | MPOL_F_ADDR,
            )
        };
        (rc == 0).then_some(node).and_then(|n| usize::try_from(n).ok()).filter(|&n| n < self.nodes.len())
    }
}

/// `0-3,8,10-11` as a list of CPUs; empty text is no CPU.
pub fn parse_cpulist(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// `Node 0 MemTotal:  16384 kB` from a node's meminfo, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.contains("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().rev().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a sysfs tree: two sockets, each a compute node and an HBM node (Xeon Max in flat
    /// SNC-1 mode: nodes 0-1 DDR with CPUs, 2-3 HBM).
    pub(crate) fn xeon_max_tree(root: &Path) {
        let distances = ["10 21 13 23", "21 10 23 13", "13 23 10 23", "23 13 23 10"];
        let cpus = ["0-3", "4-7", "", ""];
        for id in 0..4 {
            let dir = root.join(format!("sys/devices/system/node/node{id}"));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("cpulist"), format!("{}\n", cpus[id])).unwrap();
            fs::write(dir.join("distance"), format!("{}\n", distances[id])).unwrap();
            fs::write(dir.join("meminfo"), format!("Node {id} MemTotal:       {} kB\n", 16 << 20)).unwrap();
        }
        for cpu in 0..8 {
            let dir = root.join(format!("sys/devices/system/cpu/cpu{cpu}/topology"));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("physical_package_id"), format!("{}\n", cpu / 4)).unwrap();
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe parsing only, and Miri's slowest tests")]
    fn reads_compute_and_memory_only_nodes_from_sysfs() {
        let dir = std::env::temp_dir().join(format!("steer-offload-topo-{}", std::process::id()));
        xeon_max_tree(&dir);
        let t = Topology::from_sysfs(&dir).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(t.compute_nodes(), [0, 1]);
        assert_eq!(t.node(1).unwrap().cpus, [4, 5, 6, 7]);
        assert!(t.node(2).unwrap().is_memory_only());
        assert_eq!(t.node(3).unwrap().socket, 1);
        assert_eq!(t.node(0).unwrap().bytes, 16 << 30);
        assert_eq!(t.compute_node(3), 1);
        assert_eq!(t.nearest_memory_only(0), Some(2));
        assert_eq!(t.nearest_memory_only(1), Some(3));
        assert_eq!(t.node_of_cpu(5), Some(1));
        assert_eq!(t.node_of_address([0u8].as_ptr()), None, "a captured tree is not this machine");
    }

    #[test]
    #[cfg_attr(miri, ignore = "safe parsing only, and Miri's slowest tests")]
    fn cpulists_parse_and_malformed_ones_are_refused() {
        assert_eq!(parse_cpulist("0-2,8,10-11"), Some(vec![0, 1, 2, 8, 10, 11]));
        assert_eq!(parse_cpulist(""), Some(vec![]));
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("3-3"), Some(vec![3]));
        // A range may reach high CPU numbers but not span more than 65,536 of them.
        assert_eq!(parse_cpulist("40000-40001"), Some(vec![40000, 40001]));
        assert_eq!(parse_cpulist("0-65536").map(|cpus| cpus.len()), Some(65537));
        assert_eq!(parse_cpulist("0-65537"), None);
        assert_eq!(parse_cpulist("a"), None);
    }

    #[test]
    fn inconsistent_topologies_are_refused() {
        let node = |id, cpus: Vec<usize>| Node { id, cpus, bytes: 0, socket: 0, distances: vec![10] };
        assert!(Topology::new(vec![node(1, vec![0])]).is_err());
        assert!(Topology::new(vec![node(0, vec![])]).is_err());
        let two = vec![node(0, vec![0]), Node { distances: vec![10, 20], ..node(1, vec![1]) }];
        assert!(Topology::new(two).is_err());
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot ask the kernel where a page is")]
    fn this_machine_has_a_compute_node_and_locates_its_own_pages() {
        let t = Topology::host();
        assert!(!t.compute_nodes().is_empty());
        let page = vec![1u8; 4096];
        // A kernel with NUMA support (it lists node0 in sysfs) says where a touched page is: on
        // one of its nodes; one without says nothing.
        let located = t.node_of_address(page.as_ptr());
        if std::path::Path::new("/sys/devices/system/node/node0").exists() {
            assert!(located.is_some_and(|node| node < t.nodes().len()), "{located:?}");
        } else {
            assert_eq!(located, None);
        }
    }
}
