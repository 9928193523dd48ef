//! `ddio`: Intel DDIO. A write that finds its line in the device's LLC updates it in place;
//! otherwise it allocates there within the DDIO ways (the platform's `io` section), whose dirty
//! victims leak to DRAM.

use super::{DmaWrite, PlacementPolicy, PolicyInfo};
use crate::hierarchy::Destination;

/// The kind's registration.
#[linkme::distributed_slice(super::POLICIES)]
pub static KIND: PolicyInfo = PolicyInfo {
    name: "ddio",
    description: "write into the device's LLC: update in place on a hit, else allocate in the DDIO ways",
    check: |platform| {
        if platform.io.ddio_mask(platform.l3.ways) == 0 {
            Err(format!("platform `{}` has no DDIO ways (platform.io.ddio_ways = 0)", platform.name))
        } else {
            Ok(())
        }
    },
    build: |_, _| Box::new(Ddio),
};

struct Ddio;

impl PlacementPolicy for Ddio {
    fn destination(&self, write: &DmaWrite) -> Destination {
        Destination::L3 { ccx: write.llc_ccx }
    }
}
