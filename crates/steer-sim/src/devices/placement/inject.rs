//! `inject`: every write goes into the consumer's cache at one level (its L2, its CCX's L3) or to
//! memory, so L3 injection (the POWER5 study) and L2 injection (SDCI) are one mechanism.

use super::{any_platform, DmaWrite, InjectLevel, PlacementPolicy, PolicyInfo};
use crate::hierarchy::Destination;

/// The kind's registration.
#[linkme::distributed_slice(super::POLICIES)]
pub static KIND: PolicyInfo = PolicyInfo {
    name: "inject",
    description: "inject every write into the consumer's L2, its CCX's L3, or memory (`level`)",
    check: any_platform,
    build: |spec, _| Box::new(Inject { level: spec.level, cpu: spec.cpu }),
};

/// Injection at `level`, into `cpu`'s caches if given, else the consumer's.
pub struct Inject {
    pub level: InjectLevel,
    pub cpu: Option<u32>,
}

impl PlacementPolicy for Inject {
    fn destination(&self, write: &DmaWrite) -> Destination {
        match self.level {
            InjectLevel::L2 => Destination::L2 { cpu: self.cpu.unwrap_or(write.consumer_cpu) },
            // A CPU named explicitly is honoured by steering to its own CCX.
            InjectLevel::L3 => match self.cpu {
                Some(cpu) => Destination::L3Of { cpu },
                None => Destination::L3 { ccx: write.consumer_ccx },
            },
            InjectLevel::Memory => Destination::Memory,
        }
    }
}
