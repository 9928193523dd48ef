//! `brute`: every device of the machine (seed 001's brute force).

use super::{CopyPolicy, CopyRequest};

/// The kind's registration.
#[linkme::distributed_slice(super::COPY_POLICIES)]
pub static KIND: CopyPolicy = CopyPolicy {
    name: "brute",
    description: "every copy engine of the machine (seed 001's brute force)",
    devices: |r: &CopyRequest| r.all_nodes(),
};
