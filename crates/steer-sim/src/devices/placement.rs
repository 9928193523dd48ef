//! DMA write placement: where an inbound device write lands. A policy only decides (returns a
//! `Destination`); the hierarchy carries the decision out. Policies register by name in `POLICIES`.

use crate::devices::tph::StMap;
use crate::error::{ConfigError, ConfigResult};
use crate::hierarchy::Destination;
use crate::params::{choice, params};
use crate::platform::PlatformSpec;

choice! {
    /// What a DMA write carries, so a policy (or a driver choosing hints) can treat kinds apart.
    pub enum DmaKind {
        /// The first line of a packet (protocol headers).
        Header,
        /// The rest of the packet.
        Payload,
        /// A completion (event) entry telling the driver a packet arrived.
        Completion,
    }
}

/// The TLP Processing Hint a write carries (PCIe TPH), as the device's TPH state sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    /// A hint without a steering tag (No-ST mode).
    NoSt,
    /// A steering tag: 8 bits, or 16 with extended TPH.
    Tag { st: u16, extended: bool },
}

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
        /// Policy name: `memory` (write DRAM, invalidate cached copies), `inject` (into the
        /// consumer's cache at `level`), `l2` (= inject at L2: SDCI), `ddio` (Intel DDIO) or `tph`
        /// (the I/O die decodes each write's TPH steering tag; see the device's `tph` section).
        policy: String = "memory".to_string(),
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
fn any_platform(_: &PlatformSpec) -> Result<(), String> {
    Ok(())
}

pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "memory",
        description: "write to DRAM and invalidate cached copies (no injection)",
        check: any_platform,
        build: |_, _| Box::new(ToMemory),
    },
    PolicyInfo {
        name: "inject",
        description: "inject every write into the consumer's L2, its CCX's L3, or memory (`level`)",
        check: any_platform,
        build: |spec, _| Box::new(Inject { level: spec.level, cpu: spec.cpu }),
    },
    PolicyInfo {
        name: "l2",
        description: "inject every write into one core's L2 (the SDCI mechanism; inject at level l2)",
        check: any_platform,
        build: |spec, _| Box::new(Inject { level: InjectLevel::L2, cpu: spec.cpu }),
    },
    PolicyInfo {
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
    },
    PolicyInfo {
        name: "tph",
        description: "PCIe TPH as AMD SDCI handles it: a tagged write goes to the L2 of the CPU its tag names, \
                      a No-ST hint updates a cached line in place, a write without a hint goes to memory",
        check: any_platform,
        build: |_, st_map| Box::new(Tph { st_map: st_map.clone() }),
    },
];

/// The registered policy `spec` names; the error names `path.policy`.
pub fn find(spec: &PlacementSpec, path: &str) -> ConfigResult<&'static PolicyInfo> {
    POLICIES.iter().find(|p| p.name == spec.policy).ok_or_else(|| {
        let known: Vec<_> = POLICIES.iter().map(|p| p.name).collect();
        ConfigError::new(
            format!("{path}.policy"),
            format!("unknown placement policy `{}` (known: {})", spec.policy, known.join(", ")),
        )
    })
}

/// Builds the policy of a validated spec.
pub fn build(spec: &PlacementSpec, st_map: &StMap) -> Box<dyn PlacementPolicy> {
    (find(spec, "placement").expect("validated placement").build)(spec, st_map)
}

struct ToMemory;

impl PlacementPolicy for ToMemory {
    fn destination(&self, _write: &DmaWrite) -> Destination {
        Destination::Memory
    }
}

struct Inject {
    level: InjectLevel,
    cpu: Option<u32>,
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

struct Ddio;

impl PlacementPolicy for Ddio {
    fn destination(&self, write: &DmaWrite) -> Destination {
        Destination::L3 { ccx: write.llc_ccx }
    }
}

/// PCIe TPH: the I/O die decodes each write's steering tag with the platform's map and places the
/// line in the L2 of the CPU it names (AMD SDCI). What carries a hint is the device's choice (its
/// `tph.hints`); a write without one, or with a tag naming no CPU, goes to memory.
struct Tph {
    st_map: StMap,
}

impl PlacementPolicy for Tph {
    fn destination(&self, write: &DmaWrite) -> Destination {
        match write.hint {
            None => Destination::Memory,
            Some(Hint::NoSt) => Destination::UpdateIfCached,
            Some(Hint::Tag { st, extended }) => {
                self.st_map.cpu_of(st, extended).map_or(Destination::Memory, |cpu| Destination::L2 { cpu })
            }
        }
    }
}
