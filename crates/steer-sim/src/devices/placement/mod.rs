//! DMA write placement: where an inbound device write lands. A policy only decides (returns a
//! `Destination`); the hierarchy carries the decision out. A policy is one file with a `KIND`
//! static registering it in `POLICIES`, plus its `mod` line here.

use crate::devices::dma::{DmaKind, Hint};
use crate::devices::tph::StMap;
use crate::error::ConfigResult;
use crate::hierarchy::Destination;
use crate::params::{choice, params, Name, Registry};
use crate::platform::PlatformSpec;

/// One inbound line write as a policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct DmaWrite {
    pub kind: DmaKind,
    /// The CPU that consumes the queue the write belongs to.
    pub consumer_cpu: u32,
    /// The CCX whose L3 is the device's LLC (the first of its socket).
    pub llc_ccx: u32,
    /// The CCX of the consumer CPU.
    pub consumer_ccx: u32,
    /// The TPH hint the write carries, if any (only the `tph` policy reads it).
    pub hint: Option<Hint>,
}

/// The contract: given a write, name its destination. Must be deterministic.
pub trait PlacementPolicy: Send {
    fn destination(&self, write: &DmaWrite) -> Destination;
}

choice! {
    /// Where `inject` places inbound writes.
    pub enum InjectLevel {
        /// The L2 of the consuming core (SDCI).
        L2,
        /// The L3 of the consuming core's CCX (cache injection into the shared cache).
        L3,
        /// DRAM (no injection).
        Memory,
    }
}

params! {
    /// A device's DMA write placement.
    pub struct PlacementSpec {
        /// Where the device's writes land: the name of a placement policy.
        policy: Name<Placements> = Name::new("memory"),
        /// For `inject`: the level injected into.
        level: InjectLevel = InjectLevel::L2,
        /// For `inject` and `l2`: the CPU whose cache receives the writes; default: each queue's
        /// consumer CPU.
        cpu: Option<u32> = None,
    }
}

/// A registered policy: name, description, what it needs of the platform, constructor (given the
/// platform's steering-tag map, which the I/O die decodes tags with).
pub struct PolicyInfo {
    pub name: &'static str,
    pub description: &'static str,
    /// An error message if the platform cannot place writes this way.
    pub check: fn(&PlatformSpec) -> Result<(), String>,
    pub build: fn(&PlacementSpec, &StMap) -> Box<dyn PlacementPolicy>,
}

/// Any platform can place writes this way.
pub fn any_platform(_: &PlatformSpec) -> Result<(), String> {
    Ok(())
}

/// Every placement policy, by the name `placement.policy` gives; each adds its `KIND` here.
#[linkme::distributed_slice]
pub static POLICIES: [PolicyInfo];

mod ddio;
mod inject;
mod l2;
mod memory;
mod tph;

/// The registry `placement.policy` names an entry of.
pub struct Placements;

impl Registry for Placements {
    const WHAT: &'static str = "placement policy";
    // The word users know SDCI by (`steer compare --placement sdci` takes it too).
    const ALIASES: &'static [(&'static str, &'static str)] = &[("sdci", "l2")];
    fn entries() -> Vec<(&'static str, &'static str)> {
        POLICIES.iter().map(|p| (p.name, p.description)).collect()
    }
}

/// The registered policy `spec` names; the error names `path.policy`.
pub fn find(spec: &PlacementSpec, path: &str) -> ConfigResult<&'static PolicyInfo> {
    spec.policy.check(&format!("{path}.policy"))?;
    Ok(POLICIES.iter().find(|p| p.name == spec.policy.as_str()).expect("a checked name"))
}

/// Builds the policy of a validated spec.
pub fn build(spec: &PlacementSpec, st_map: &StMap) -> Box<dyn PlacementPolicy> {
    (find(spec, "placement").expect("validated placement").build)(spec, st_map)
}
