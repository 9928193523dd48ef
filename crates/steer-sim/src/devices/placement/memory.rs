//! `memory`: every write goes to DRAM, and cached copies are invalidated (no injection).

use super::{any_platform, DmaWrite, PlacementPolicy, PolicyInfo};
use crate::hierarchy::Destination;

/// The kind's registration.
#[linkme::distributed_slice(super::POLICIES)]
pub static KIND: PolicyInfo = PolicyInfo {
    name: "memory",
    description: "write to DRAM and invalidate cached copies (no injection)",
    check: any_platform,
    build: |_, _| Box::new(ToMemory),
};

struct ToMemory;

impl PlacementPolicy for ToMemory {
    fn destination(&self, _write: &DmaWrite) -> Destination {
        Destination::Memory
    }
}
