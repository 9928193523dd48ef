//! `tph`: PCIe TPH as AMD SDCI handles it. The I/O die decodes each write's steering tag with
//! the platform's map and places the line in the L2 of the CPU it names. What carries a hint is
//! the device's choice (its `tph.hints`); a write without one, or with a tag naming no CPU, goes
//! to memory; a No-ST hint updates a cached line in place.

use super::{any_platform, DmaWrite, Hint, PlacementPolicy, PolicyInfo};
use crate::devices::tph::StMap;
use crate::hierarchy::Destination;

/// The kind's registration.
#[linkme::distributed_slice(super::POLICIES)]
pub static KIND: PolicyInfo = PolicyInfo {
    name: "tph",
    description: "PCIe TPH as AMD SDCI handles it: a tagged write goes to the L2 of the CPU its tag names, \
                  a No-ST hint updates a cached line in place, a write without a hint goes to memory",
    check: any_platform,
    build: |_, st_map| Box::new(Tph { st_map: st_map.clone() }),
};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::dma::DmaKind;
    use crate::platform::{TopologySpec, TphHostSpec};

    fn write(hint: Option<Hint>) -> DmaWrite {
        DmaWrite { kind: DmaKind::Payload, consumer_cpu: 0, llc_ccx: 0, consumer_ccx: 0, hint }
    }

    #[test]
    fn each_hint_has_its_own_destination() {
        let topology = TopologySpec { sockets: 1, ccx_per_socket: 1, cores_per_ccx: 4, threads_per_core: 1 };
        let spec = TphHostSpec::default();
        let tph = Tph { st_map: StMap::new(&spec, &topology) };
        // CPU 3's 8-bit tag is the base plus its APIC-style id.
        let st = (spec.st_base + topology.apic_id(3)) as u16;
        assert_eq!(tph.destination(&write(Some(Hint::Tag { st, extended: false }))), Destination::L2 { cpu: 3 });
        assert_eq!(tph.destination(&write(Some(Hint::NoSt))), Destination::UpdateIfCached);
        assert_eq!(tph.destination(&write(None)), Destination::Memory);
        // A tag no CPU has: memory.
        let unknown = Hint::Tag { st: st + 100, extended: false };
        assert_eq!(tph.destination(&write(Some(unknown))), Destination::Memory);
    }
}
