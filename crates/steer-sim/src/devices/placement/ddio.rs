//! `ddio`: Intel DDIO. A write that finds its line in the device's LLC updates it in place;
//! otherwise it allocates there within the DDIO ways (the platform's `io` section), whose dirty
//! victims leak to DRAM.

use super::{DmaWrite, PlacementPolicy, PolicyInfo};
use crate::hierarchy::Destination;
use crate::platform::{self, PlatformSpec};

/// The kind's registration.
#[linkme::distributed_slice(super::POLICIES)]
pub static KIND: PolicyInfo = PolicyInfo {
    name: "ddio",
    description: "write into the device's LLC: update in place on a hit, else allocate in the DDIO ways",
    check: |platform| {
        if has_ddio_ways(platform) {
            return Ok(());
        }
        // How to get some: a preset that has them, or ways of this platform's own.
        let presets: Vec<_> = platform::preset_names()
            .into_iter()
            .filter(|name| platform::preset(name).is_ok_and(|p| has_ddio_ways(&p)))
            .collect();
        let with = match presets.as_slice() {
            [] => String::new(),
            [first, ..] => format!("platform = \"{first}\" (presets with DDIO ways: {}) or ", presets.join(", ")),
        };
        Err(format!(
            "platform `{}` has no DDIO ways (platform.io.ddio_ways = 0); set {with}platform.io.ddio_ways = 2",
            platform.name
        ))
    },
    build: |_, _| Box::new(Ddio),
};

fn has_ddio_ways(platform: &PlatformSpec) -> bool {
    platform.io.ddio_mask(platform.l3.ways) != 0
}

struct Ddio;

impl PlacementPolicy for Ddio {
    fn destination(&self, write: &DmaWrite) -> Destination {
        Destination::L3 { ccx: write.llc_ccx }
    }
}
