//! The PCI Express capability, as far as TPH needs it: the device/port
//! type and the TPH Completer field of Device Capabilities 2.
//!
//! A requester may only use TPH if its root port can complete TPH requests,
//! which the root port advertises in DevCap2 bits 13:12.

use std::fmt;

use crate::caps::find_std_cap;
use crate::config::ConfigSpace;
use crate::error::{Result, TphError};

/// Standard capability ID of the PCI Express capability.
pub const PCIE_CAP_ID: u8 = 0x10;
/// Offset of the PCI Express Capabilities register (version, port type).
pub const PCIE_CAPABILITIES: usize = 0x02;
/// Offset of Device Capabilities 2.
pub const PCIE_DEVCAP2: usize = 0x24;
/// Bytes in a version 2 PCI Express capability.
pub const PCIE_CAP_V2_LEN: usize = 0x3C;
/// Device/port type of a PCI Express Endpoint.
pub const PORT_TYPE_ENDPOINT: u8 = 0x0;
/// Device/port type of a Root Port of a Root Complex.
pub const PORT_TYPE_ROOT_PORT: u8 = 0x4;

const DEVCAP2_TPH_SHIFT: u32 = 12;
const DEVCAP2_TPH_MASK: u32 = 0b11 << DEVCAP2_TPH_SHIFT;

/// TPH Completer Supported (DevCap2 bits 13:12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TphCompleter {
    /// 0: TPH not supported as a completer.
    None,
    /// 1: TPH supported, 8-bit steering tags.
    TphOnly,
    /// 2: reserved encoding.
    Reserved,
    /// 3: TPH and extended TPH (16-bit steering tags) supported.
    TphAndExtended,
}

impl TphCompleter {
    /// Decodes the 2-bit field value (only the low 2 bits of `bits` are used).
    pub fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0 => TphCompleter::None,
            1 => TphCompleter::TphOnly,
            2 => TphCompleter::Reserved,
            _ => TphCompleter::TphAndExtended,
        }
    }

    /// The 2-bit field value.
    pub fn bits(self) -> u8 {
        match self {
            TphCompleter::None => 0,
            TphCompleter::TphOnly => 1,
            TphCompleter::Reserved => 2,
            TphCompleter::TphAndExtended => 3,
        }
    }

    /// Decodes DevCap2 bits 13:12 from the whole register.
    pub fn from_devcap2(devcap2: u32) -> Self {
        Self::from_bits(((devcap2 & DEVCAP2_TPH_MASK) >> DEVCAP2_TPH_SHIFT) as u8)
    }

    /// `devcap2` with bits 13:12 replaced by this value.
    pub fn apply_to_devcap2(self, devcap2: u32) -> u32 {
        (devcap2 & !DEVCAP2_TPH_MASK) | (u32::from(self.bits()) << DEVCAP2_TPH_SHIFT)
    }

    /// The flags current `lspci -vv` prints on the DevCap2 lines, such as
    /// `TPHComp+ ExtTPHComp-`. Like lspci, the reserved value prints as an
    /// empty string.
    pub fn lspci_flags(self) -> &'static str {
        match self {
            TphCompleter::None => "TPHComp- ExtTPHComp-",
            TphCompleter::TphOnly => "TPHComp+ ExtTPHComp-",
            TphCompleter::Reserved => "",
            TphCompleter::TphAndExtended => "TPHComp+ ExtTPHComp+",
        }
    }

    /// Whether a root port with this value completes TPH requests
    /// (8-bit tags), and whether it also completes 16-bit extended tags.
    pub fn supports(self) -> (bool, bool) {
        match self {
            TphCompleter::TphOnly => (true, false),
            TphCompleter::TphAndExtended => (true, true),
            TphCompleter::None | TphCompleter::Reserved => (false, false),
        }
    }
}

impl fmt::Display for TphCompleter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TphCompleter::None => write!(f, "Not supported"),
            TphCompleter::TphOnly => write!(f, "TPH only"),
            TphCompleter::Reserved => write!(f, "Reserved (2)"),
            TphCompleter::TphAndExtended => write!(f, "TPH and extended TPH"),
        }
    }
}

/// The parts of a PCI Express capability this crate reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcieCapability {
    /// Config-space offset of the capability.
    pub offset: u8,
    /// Capability version (PCI Express Capabilities bits 3:0).
    pub version: u8,
    /// Device/port type (bits 7:4), e.g. [`PORT_TYPE_ROOT_PORT`].
    pub port_type: u8,
    /// Device Capabilities 2, absent in version 1 capabilities, which end
    /// before it.
    pub devcap2: Option<u32>,
}

impl PcieCapability {
    /// True for a Root Port of a Root Complex.
    pub fn is_root_port(&self) -> bool {
        self.port_type == PORT_TYPE_ROOT_PORT
    }

    /// The TPH Completer field; [`TphCompleter::None`] when there is no
    /// DevCap2 (a version 1 capability cannot advertise TPH).
    pub fn tph_completer(&self) -> TphCompleter {
        self.devcap2.map(TphCompleter::from_devcap2).unwrap_or(TphCompleter::None)
    }
}

/// Finds and decodes the PCI Express capability in the standard list.
/// `Ok(None)` if there is none (a conventional PCI device); errors if the
/// list cannot be walked or the registers needed run past the dump.
pub fn find_pcie(cs: &ConfigSpace) -> Result<Option<PcieCapability>> {
    let Some(header) = find_std_cap(cs, PCIE_CAP_ID)? else {
        return Ok(None);
    };
    let base = usize::from(header.offset);
    let truncated = |end: usize| TphError::Truncated { offset: header.offset.into(), end, len: cs.len() };
    let caps = cs.read_u16(base + PCIE_CAPABILITIES).map_err(|_| truncated(base + PCIE_CAPABILITIES + 2))?;
    let version = (caps & 0xF) as u8;
    let devcap2 = if version >= 2 {
        let at = base + PCIE_DEVCAP2;
        Some(cs.read_u32(at).map_err(|_| truncated(at + 4))?)
    } else {
        None
    };
    Ok(Some(PcieCapability { offset: header.offset, version, port_type: ((caps >> 4) & 0xF) as u8, devcap2 }))
}

/// The TPH Completer support advertised in DevCap2 of the device's PCI
/// Express capability (meaningful for root ports). `Ok(None)` if the device
/// has no PCI Express capability; see [`find_pcie`] for errors.
pub fn tph_completer(cs: &ConfigSpace) -> Result<Option<TphCompleter>> {
    Ok(find_pcie(cs)?.map(|cap| cap.tph_completer()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::{CapError, STATUS_CAP_LIST};

    /// Root-port style space with a PCIe capability at 0x58.
    fn root_port(version: u8, devcap2: u32) -> ConfigSpace {
        let mut cs = ConfigSpace::zeroed(256).unwrap();
        cs.write_u16(0x06, STATUS_CAP_LIST).unwrap();
        cs.write_u8(0x0E, 0x01).unwrap();
        cs.write_u8(0x34, 0x58).unwrap();
        cs.write_u8(0x58, PCIE_CAP_ID).unwrap();
        cs.write_u16(0x5A, u16::from(version) | (u16::from(PORT_TYPE_ROOT_PORT) << 4)).unwrap();
        cs.write_u32(0x58 + PCIE_DEVCAP2, devcap2).unwrap();
        cs
    }

    #[test]
    fn completer_values() {
        let expected = [
            (0u32, TphCompleter::None),
            (1 << 12, TphCompleter::TphOnly),
            (2 << 12, TphCompleter::Reserved),
            (3 << 12, TphCompleter::TphAndExtended),
        ];
        for (bits, completer) in expected {
            // Surround the field with set bits to check the masking.
            let cs = root_port(2, bits | 0xFFFF_CFFF);
            assert_eq!(tph_completer(&cs), Ok(Some(completer)));
            assert_eq!(completer.apply_to_devcap2(0xFFFF_CFFF), bits | 0xFFFF_CFFF);
        }
        assert_eq!(TphCompleter::TphAndExtended.to_string(), "TPH and extended TPH");
        assert_eq!(TphCompleter::None.to_string(), "Not supported");
        // Only bits 13:12 change, whatever the others hold.
        assert_eq!(TphCompleter::TphOnly.apply_to_devcap2(0x3000), 0x1000);
        assert_eq!(TphCompleter::TphAndExtended.apply_to_devcap2(0x0001), 0x3001);
        let pcie = find_pcie(&root_port(2, 1 << 12)).unwrap().unwrap();
        assert!(pcie.is_root_port());
        assert_eq!(pcie.offset, 0x58);
    }

    #[test]
    fn a_capability_cut_off_by_the_end_of_the_dump_is_an_error() {
        // The list's first capability at 0x40, whose Capabilities register (0x42) the dump lacks.
        let mut cs = ConfigSpace::from_bytes(&[0; 0x42]).unwrap();
        cs.write_u16(0x06, STATUS_CAP_LIST).unwrap();
        cs.write_u8(0x34, 0x40).unwrap();
        cs.write_u8(0x40, PCIE_CAP_ID).unwrap();
        assert_eq!(find_pcie(&cs), Err(TphError::Truncated { offset: 0x40, end: 0x44, len: 0x42 }));
    }

    #[test]
    fn version_1_has_no_devcap2() {
        let cs = root_port(1, 3 << 12);
        let pcie = find_pcie(&cs).unwrap().unwrap();
        assert_eq!(pcie.devcap2, None);
        assert_eq!(tph_completer(&cs), Ok(Some(TphCompleter::None)));
    }

    #[test]
    fn no_pcie_capability() {
        let cs = ConfigSpace::zeroed(256).unwrap();
        assert_eq!(tph_completer(&cs), Ok(None));
    }

    #[test]
    fn walk_errors_propagate() {
        let mut cs = root_port(2, 1 << 12);
        cs.write_u8(0x34, 0x5A).unwrap();
        assert_eq!(tph_completer(&cs), Err(TphError::Walk(CapError::Unaligned { from: 0x34, pointer: 0x5A })));
    }

    #[test]
    fn devcap2_past_truncated_dump() {
        let cs = root_port(2, 1 << 12);
        let short = ConfigSpace::from_bytes(&cs.as_bytes()[..0x70]).unwrap();
        assert_eq!(tph_completer(&short), Err(TphError::Truncated { offset: 0x58, end: 0x80, len: 0x70 }));
    }

    #[test]
    fn lspci_flag_text() {
        assert_eq!(TphCompleter::TphOnly.lspci_flags(), "TPHComp+ ExtTPHComp-");
        assert_eq!(TphCompleter::Reserved.lspci_flags(), "");
        assert_eq!(TphCompleter::TphAndExtended.supports(), (true, true));
        assert_eq!(TphCompleter::Reserved.supports(), (false, false));
    }
}
