//! DMA write placement: where an inbound device write lands. A policy only decides (returns a
//! `Destination`); the hierarchy carries the decision out. Policies register by name in `POLICIES`.

use crate::error::{ConfigError, ConfigResult};
use crate::hierarchy::Destination;
use crate::params::{choice, params};

/// What a DMA write carries, so a policy can steer some kinds and not others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaKind {
    /// The first line of a packet (protocol headers).
    Header,
    /// The rest of the packet.
    Payload,
    /// A completion (event) entry telling the driver a packet arrived.
    Completion,
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
        /// consumer's cache at `level`), `l2` (= inject at L2: SDCI) or `ddio` (Intel DDIO).
        policy: String = "memory".to_string(),
        /// For `inject`: the level injected into.
        level: InjectLevel = InjectLevel::L2,
        /// For `inject` and `l2`: the CPU whose cache receives the writes; default: each queue's
        /// consumer CPU.
        cpu: Option<u32> = None,
    }
}

/// A registered policy: name, description, constructor.
pub struct PolicyInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub build: fn(&PlacementSpec) -> Box<dyn PlacementPolicy>,
}

pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "memory",
        description: "write to DRAM and invalidate cached copies (no injection)",
        build: |_| Box::new(ToMemory),
    },
    PolicyInfo {
        name: "inject",
        description: "inject every write into the consumer's L2, its CCX's L3, or memory (`level`)",
        build: |spec| Box::new(Inject { level: spec.level, cpu: spec.cpu }),
    },
    PolicyInfo {
        name: "l2",
        description: "inject every write into one core's L2 (the SDCI mechanism; inject at level l2)",
        build: |spec| Box::new(Inject { level: InjectLevel::L2, cpu: spec.cpu }),
    },
    PolicyInfo {
        name: "ddio",
        description: "write into the device's LLC: update in place on a hit, else allocate in the DDIO ways",
        build: |_| Box::new(Ddio),
    },
];

pub fn build(spec: &PlacementSpec, path: &str) -> ConfigResult<Box<dyn PlacementPolicy>> {
    let info = POLICIES.iter().find(|p| p.name == spec.policy).ok_or_else(|| {
        let known: Vec<_> = POLICIES.iter().map(|p| p.name).collect();
        ConfigError::new(
            format!("{path}.policy"),
            format!("unknown placement policy `{}` (known: {})", spec.policy, known.join(", ")),
        )
    })?;
    Ok((info.build)(spec))
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
