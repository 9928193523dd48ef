//! `smart` (seed 001): within a socket, the socket's devices; across sockets, the devices of the
//! source's and the destination's compute nodes, which leaves the others free.

use super::{CopyPolicy, CopyRequest};

/// The kind's registration.
#[linkme::distributed_slice(super::COPY_POLICIES)]
pub static KIND: CopyPolicy = CopyPolicy {
    name: "smart",
    description: "within a socket its copy engines; across sockets those of the source's and destination's nodes",
    devices: |r: &CopyRequest| {
        let (src, dst) = (r.src_node(), r.dst_node());
        if src.socket == dst.socket {
            r.socket_nodes(src.socket)
        } else {
            vec![src.compute_node, dst.compute_node]
        }
    },
};
