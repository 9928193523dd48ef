//! `local`: the device of the source's compute node (DML's choice for a thread pinned there).

use super::{CopyPolicy, CopyRequest};

/// The kind's registration.
#[linkme::distributed_slice(super::COPY_POLICIES)]
pub static KIND: CopyPolicy = CopyPolicy {
    name: "local",
    description: "the copy engine of the source's node only",
    devices: |r: &CopyRequest| vec![r.src_node().compute_node],
};
