//! Placement policies (where a block is cached) and copy policies (which copy engines take part and
//! how the block is split among them). Built-in ones are listed by name in [`PLACEMENTS`] and
//! [`COPY_POLICIES`]; any closure of the right shape is a policy too.

use crate::error::{Error, Result};
use crate::topology::Topology;

/// What a placement decides from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacementRequest {
    /// The node holding the source block (the consumer's node where the placement does not
    /// need it and the kernel was not asked).
    pub src_node: usize,
    /// The node of the CPU asking for the block.
    pub consumer_node: usize,
    pub len: usize,
}

/// Where a block is cached: a node of the topology.
pub trait Placement: Send + Sync {
    fn place(&self, topology: &Topology, request: PlacementRequest) -> usize;
    /// Whether `place` reads `request.src_node`; where it does not, a hit skips asking the kernel
    /// which node holds the source (a system call).
    fn needs_source_node(&self) -> bool {
        true
    }
}

impl<F: Fn(&Topology, PlacementRequest) -> usize + Send + Sync> Placement for F {
    fn place(&self, topology: &Topology, request: PlacementRequest) -> usize {
        self(topology, request)
    }
}

/// Which copy engines (compute nodes) copy a block from `src` to `dst`, and how many bytes each.
pub trait CopyPolicy: Send + Sync {
    /// The compute nodes whose engines take part.
    fn engines(&self, topology: &Topology, src: usize, dst: usize) -> Vec<usize>;
    /// The bytes of a `len`-byte block each engine copies, in the order of `engines`; by default
    /// even shares of whole 64-byte lines, the remainder to the first engines.
    fn split(&self, engines: &[usize], len: usize) -> Vec<usize> {
        even_split(engines.len(), len)
    }
}

impl<F: Fn(&Topology, usize, usize) -> Vec<usize> + Send + Sync> CopyPolicy for F {
    fn engines(&self, topology: &Topology, src: usize, dst: usize) -> Vec<usize> {
        self(topology, src, dst)
    }
}

/// `len` bytes in `parts` shares of whole 64-byte lines (the last line may be partial); shares
/// that would be empty are dropped, so a small block goes to fewer engines.
pub fn even_split(parts: usize, len: usize) -> Vec<usize> {
    const LINE: usize = 64;
    let lines = len.div_ceil(LINE);
    let parts = parts.clamp(1, lines.max(1));
    let mut shares: Vec<usize> = (0..parts).map(|i| (lines / parts + usize::from(i < lines % parts)) * LINE).collect();
    let excess = shares.iter().sum::<usize>() - len;
    *shares.last_mut().expect("at least one share") -= excess;
    shares.retain(|&s| s > 0);
    shares
}

/// A registered placement policy.
pub struct NamedPlacement {
    pub name: &'static str,
    pub description: &'static str,
    pub place: fn(&Topology, PlacementRequest) -> usize,
    pub needs_source_node: bool,
}

impl Placement for &NamedPlacement {
    fn place(&self, topology: &Topology, request: PlacementRequest) -> usize {
        (self.place)(topology, request)
    }
    fn needs_source_node(&self) -> bool {
        self.needs_source_node
    }
}

/// A registered copy policy.
pub struct NamedCopyPolicy {
    pub name: &'static str,
    pub description: &'static str,
    pub engines: fn(&Topology, usize, usize) -> Vec<usize>,
}

impl CopyPolicy for &NamedCopyPolicy {
    fn engines(&self, topology: &Topology, src: usize, dst: usize) -> Vec<usize> {
        (self.engines)(topology, src, dst)
    }
}

/// The built-in placements; the first is the default.
pub static PLACEMENTS: &[NamedPlacement] = &[
    NamedPlacement {
        name: "nearest-hbm",
        description: "the memory-only (HBM) node nearest the consumer, else the consumer's own node",
        place: |t, r| t.nearest_memory_only(r.consumer_node).unwrap_or(r.consumer_node),
        needs_source_node: false,
    },
    NamedPlacement {
        name: "consumer-node",
        description: "the node of the CPU asking for the block",
        place: |_, r| r.consumer_node,
        needs_source_node: false,
    },
    NamedPlacement {
        name: "source-hbm",
        description: "the memory-only (HBM) node nearest the source block, else the source's node",
        place: |t, r| t.nearest_memory_only(r.src_node).unwrap_or(r.src_node),
        needs_source_node: true,
    },
];

/// The built-in copy policies (seed 001's three); the first is the default.
pub static COPY_POLICIES: &[NamedCopyPolicy] = &[
    NamedCopyPolicy {
        name: "smart",
        description: "within a socket its copy engines; across sockets those of the source's and destination's nodes",
        engines: |t, src, dst| {
            let (src_node, dst_node) = (&t.nodes()[src], &t.nodes()[dst]);
            if src_node.socket == dst_node.socket {
                t.compute_nodes().into_iter().filter(|&n| t.nodes()[n].socket == src_node.socket).collect()
            } else {
                let mut engines = vec![t.compute_node(src), t.compute_node(dst)];
                engines.dedup();
                engines
            }
        },
    },
    NamedCopyPolicy {
        name: "local",
        description: "the copy engine of the source's node only",
        engines: |t, src, _| vec![t.compute_node(src)],
    },
    NamedCopyPolicy {
        name: "brute",
        description: "every copy engine of the machine (seed 001's brute force)",
        engines: |t, _, _| t.compute_nodes(),
    },
];

fn find<'a, T>(list: &'a [T], name_of: fn(&T) -> &'static str, what: &'static str, name: &str) -> Result<&'a T> {
    list.iter().find(|p| name_of(p) == name).ok_or_else(|| Error::UnknownName {
        what,
        name: name.to_string(),
        known: list.iter().map(name_of).collect(),
    })
}

/// The built-in placement called `name`.
pub fn placement(name: &str) -> Result<&'static NamedPlacement> {
    find(PLACEMENTS, |p| p.name, "placement", name)
}

/// The built-in copy policy called `name`.
pub fn copy_policy(name: &str) -> Result<&'static NamedCopyPolicy> {
    find(COPY_POLICIES, |p| p.name, "copy policy", name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Node;

    /// Xeon Max 9468 in flat SNC-4 mode: per socket 4 DDR nodes with CPUs, then 8 HBM nodes.
    pub(crate) fn xeon_max_snc4() -> Topology {
        let socket = |n: usize| if n < 8 { n / 4 } else { (n - 8) / 4 };
        let compute = |n: usize| if n < 8 { n } else { n - 8 };
        let nodes = (0..16)
            .map(|id| {
                // The SLIT such a machine reports: HBM is 13 from its own DDR node, 14 from the
                // socket's others.
                let hbm = |n: usize| n >= 8;
                let distances = (0..16)
                    .map(|other| match (compute(id) == compute(other), socket(id) == socket(other)) {
                        _ if id == other => 10,
                        (true, _) => 13,
                        (false, true) if !hbm(id) && !hbm(other) => 12,
                        (false, true) => 14,
                        (false, false) if !hbm(id) && !hbm(other) => 21,
                        (false, false) => 23,
                    })
                    .collect();
                let cpus = if id < 8 { (id * 12..id * 12 + 12).collect() } else { vec![] };
                Node { id, cpus, bytes: 16 << 30, socket: socket(id), distances }
            })
            .collect();
        Topology::new(nodes).unwrap()
    }

    #[test]
    fn seed_policies_choose_engines_as_the_seed_describes() {
        let t = xeon_max_snc4();
        let engines = |name, src, dst| copy_policy(name).unwrap().engines(&t, src, dst);
        assert_eq!(engines("local", 0, 8), [0]);
        assert_eq!(engines("brute", 0, 15), [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(engines("smart", 0, 11), [0, 1, 2, 3]);
        assert_eq!(engines("smart", 0, 15), [0, 7]);
        assert_eq!(engines("smart", 9, 8), [0, 1, 2, 3], "HBM to HBM of one socket");
    }

    #[test]
    fn placements_pick_the_nearest_hbm_node_or_the_consumer() {
        let t = xeon_max_snc4();
        let request = PlacementRequest { src_node: 1, consumer_node: 5, len: 4096 };
        assert_eq!(placement("nearest-hbm").unwrap().place(&t, request), 13);
        assert_eq!(placement("source-hbm").unwrap().place(&t, request), 9);
        assert_eq!(placement("consumer-node").unwrap().place(&t, request), 5);
        let ddr_only = Topology::single_node(2, 0);
        let request = PlacementRequest { src_node: 0, consumer_node: 0, len: 64 };
        assert_eq!(placement("nearest-hbm").unwrap().place(&ddr_only, request), 0);
    }

    #[test]
    fn even_split_gives_whole_lines_and_keeps_every_byte() {
        assert_eq!(even_split(4, 4096), [1024; 4]);
        assert_eq!(even_split(3, 640), [256, 192, 192]);
        assert_eq!(even_split(8, 100), [64, 36]);
        assert_eq!(even_split(2, 1), [1]);
        assert_eq!(even_split(2, 0), []);
        for (parts, len) in [(1, 1), (3, 1000), (7, 1 << 20), (8, 65)] {
            assert_eq!(even_split(parts, len).iter().sum::<usize>(), len);
        }
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let err = copy_policy("fast").err().unwrap().to_string();
        assert_eq!(err, "unknown copy policy \"fast\" (known: smart, local, brute)");
        assert!(placement("nearest-hbm").is_ok());
    }
}
