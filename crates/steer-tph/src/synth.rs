//! Synthesizing device configuration spaces with a TPH capability, for
//! tests and for giving simulated devices a config space.
//!
//! ```
//! use steer_tph::synth::DeviceBuilder;
//! use steer_tph::{decode, MsixCapability, StTableLocation, TphCapability};
//!
//! let mut tph = TphCapability::new(0x260, StTableLocation::MsixTable, 64);
//! tph.interrupt_vector = true;
//! let cs = DeviceBuilder::endpoint(0x14e4, 0x1750)
//!     .msix(MsixCapability::new(0xA0, 64, 4))
//!     .tph(tph)
//!     .build()
//!     .unwrap();
//! let decoded = decode(&cs).unwrap().unwrap();
//! assert_eq!(decoded.offset, 0x260);
//! assert!(decoded.interrupt_vector);
//! ```

use std::fmt;

use crate::caps::{CAP_POINTER, EXT_CAP_START, HEADER_TYPE, STATUS, STATUS_CAP_LIST, STD_CAP_MIN};
use crate::config::{ConfigError, ConfigSpace, CONFIG_SPACE_SIZE, LEGACY_CONFIG_SIZE};
use crate::error::TphError;
use crate::msix::{encode_msix, MsixCapability, MSIX_CAP_LEN};
use crate::pcie::{
    TphCompleter, PCIE_CAPABILITIES, PCIE_CAP_ID, PCIE_CAP_V2_LEN, PCIE_DEVCAP2, PORT_TYPE_ENDPOINT,
    PORT_TYPE_ROOT_PORT,
};
use crate::tph::{encode, TphCapability};

/// Extended capability ID of a Vendor-Specific Extended Capability, used
/// as a filler at 0x100 when nothing else is placed there.
pub const VSEC_CAP_ID: u16 = 0x000B;

/// Error from [`DeviceBuilder::build`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SynthError {
    /// The requested config space size is not 1..=4096 bytes.
    Size(ConfigError),
    /// A structure sits outside its region or is not dword aligned.
    BadOffset {
        /// Which structure.
        what: &'static str,
        /// Its offset.
        offset: u16,
    },
    /// Two structures overlap.
    Overlap {
        /// Offset of the first structure.
        first: u16,
        /// Offset of the structure overlapping it.
        second: u16,
    },
    /// A structure ends past its region (0x100 for standard capabilities)
    /// or past the config space size.
    DoesNotFit {
        /// Which structure.
        what: &'static str,
        /// Its offset.
        offset: u16,
        /// One past its last byte.
        end: usize,
    },
    /// Encoding a capability failed (a field does not fit its register).
    Encode(TphError),
}

impl fmt::Display for SynthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SynthError::Size(e) => write!(f, "{e}"),
            SynthError::BadOffset { what, offset } => {
                write!(f, "{what} at {offset:#x}: offset outside its region or unaligned")
            }
            SynthError::Overlap { first, second } => {
                write!(f, "structures at {first:#x} and {second:#x} overlap")
            }
            SynthError::DoesNotFit { what, offset, end } => {
                write!(f, "{what} at {offset:#x} ends at {end:#x}, past the space available")
            }
            SynthError::Encode(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SynthError {}

impl From<TphError> for SynthError {
    fn from(e: TphError) -> Self {
        SynthError::Encode(e)
    }
}

/// Where and what the PCI Express capability says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcieSpec {
    /// Config-space offset (0x40..=0xC4, dword aligned).
    pub offset: u8,
    /// Device/port type, e.g. [`PORT_TYPE_ENDPOINT`] or [`PORT_TYPE_ROOT_PORT`].
    pub port_type: u8,
    /// TPH Completer support to put in DevCap2.
    pub completer: TphCompleter,
}

/// An extended capability that only needs to exist (header, plus the
/// VSEC length dword for [`VSEC_CAP_ID`]), occupying `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtPlaceholder {
    /// Offset (0x100..=0xFFC, dword aligned).
    pub offset: u16,
    /// Capability ID.
    pub id: u16,
    /// Capability version (0..=15).
    pub version: u8,
    /// Bytes reserved for it (at least 4).
    pub len: u16,
}

/// Builds a config space: a type 0 or type 1 header, a standard
/// capability list holding an optional PCI Express and an optional MSI-X
/// capability, and an extended list holding an optional TPH capability and
/// any placeholders.
///
/// Capabilities are linked in ascending offset order; the `next` fields of
/// the given structs are ignored. If extended capabilities are present and
/// none sits at 0x100, a VSEC placeholder of 8 bytes is put there, since
/// the extended list must start at 0x100. Everything not written is zero.
#[derive(Debug, Clone)]
pub struct DeviceBuilder {
    vendor_id: u16,
    device_id: u16,
    revision: u8,
    class_code: u32,
    header_type: u8,
    size: usize,
    pcie: Option<PcieSpec>,
    msix: Option<MsixCapability>,
    tph: Option<TphCapability>,
    placeholders: Vec<ExtPlaceholder>,
}

impl DeviceBuilder {
    /// A 4 KiB PCI Express endpoint (header type 0, class 0x020000
    /// Ethernet) with the PCI Express capability at 0x40 and no TPH
    /// completer support.
    pub fn endpoint(vendor_id: u16, device_id: u16) -> Self {
        Self {
            vendor_id,
            device_id,
            revision: 0,
            class_code: 0x02_00_00,
            header_type: 0,
            size: CONFIG_SPACE_SIZE,
            pcie: Some(PcieSpec { offset: 0x40, port_type: PORT_TYPE_ENDPOINT, completer: TphCompleter::None }),
            msix: None,
            tph: None,
            placeholders: Vec::new(),
        }
    }

    /// A 4 KiB root port (header type 1, class 0x060400 PCI bridge) with the
    /// PCI Express capability at 0x40 advertising `completer`.
    pub fn root_port(vendor_id: u16, device_id: u16, completer: TphCompleter) -> Self {
        Self {
            class_code: 0x06_04_00,
            header_type: 1,
            pcie: Some(PcieSpec { offset: 0x40, port_type: PORT_TYPE_ROOT_PORT, completer }),
            ..Self::endpoint(vendor_id, device_id)
        }
    }

    /// Sets the revision ID (offset 0x08).
    pub fn revision(mut self, revision: u8) -> Self {
        self.revision = revision;
        self
    }

    /// Sets the 24-bit class code (base class, subclass, programming
    /// interface), e.g. 0x020000.
    pub fn class_code(mut self, class_code: u32) -> Self {
        self.class_code = class_code & 0xFF_FFFF;
        self
    }

    /// Sets the config space size in bytes (default 4096). Sizes of 256 or
    /// less leave no room for extended capabilities.
    pub fn size(mut self, size: usize) -> Self {
        self.size = size;
        self
    }

    /// Replaces the PCI Express capability.
    pub fn pcie(mut self, pcie: PcieSpec) -> Self {
        self.pcie = Some(pcie);
        self
    }

    /// Removes the PCI Express capability (a conventional PCI device).
    pub fn without_pcie(mut self) -> Self {
        self.pcie = None;
        self
    }

    /// Adds an MSI-X capability at `msix.offset`.
    pub fn msix(mut self, msix: MsixCapability) -> Self {
        self.msix = Some(msix);
        self
    }

    /// Adds a TPH Requester capability at `tph.offset`, encoded with
    /// [`encode`] (so reserved bits in its raw words are kept).
    pub fn tph(mut self, tph: TphCapability) -> Self {
        self.tph = Some(tph);
        self
    }

    /// Adds a placeholder extended capability.
    pub fn ext_placeholder(mut self, offset: u16, id: u16, version: u8, len: u16) -> Self {
        self.placeholders.push(ExtPlaceholder { offset, id, version, len });
        self
    }

    /// Writes the config space. Fails if a structure is misplaced,
    /// overlaps another or does not fit, or a field does not fit its
    /// register.
    pub fn build(&self) -> Result<ConfigSpace, SynthError> {
        let mut cs = ConfigSpace::zeroed(self.size).map_err(SynthError::Size)?;
        self.write_header(&mut cs)?;
        self.write_std_caps(&mut cs)?;
        self.write_ext_caps(&mut cs)?;
        Ok(cs)
    }

    fn write_header(&self, cs: &mut ConfigSpace) -> Result<(), SynthError> {
        // The header must be complete before a capability list can be read.
        if self.size < usize::from(STD_CAP_MIN) {
            return Err(SynthError::DoesNotFit { what: "header", offset: 0, end: STD_CAP_MIN.into() });
        }
        let ok = "size checked above";
        cs.write_u16(0x00, self.vendor_id).expect(ok);
        cs.write_u16(0x02, self.device_id).expect(ok);
        // Memory space and bus master enabled, as for a working DMA device.
        cs.write_u16(0x04, 0x0006).expect(ok);
        let has_std_caps = self.pcie.is_some() || self.msix.is_some();
        let status = if has_std_caps { STATUS_CAP_LIST } else { 0 };
        cs.write_u16(STATUS.into(), status).expect(ok);
        cs.write_u8(0x08, self.revision).expect(ok);
        let class = self.class_code.to_le_bytes();
        for (i, &b) in class[..3].iter().enumerate() {
            cs.write_u8(0x09 + i, b).expect(ok);
        }
        cs.write_u8(HEADER_TYPE.into(), self.header_type).expect(ok);
        Ok(())
    }

    fn write_std_caps(&self, cs: &mut ConfigSpace) -> Result<(), SynthError> {
        let mut layout = Vec::new();
        if let Some(pcie) = &self.pcie {
            layout.push(Region::new("PCI Express capability", pcie.offset.into(), PCIE_CAP_V2_LEN));
        }
        if let Some(msix) = &self.msix {
            layout.push(Region::new("MSI-X capability", msix.offset.into(), MSIX_CAP_LEN));
        }
        let limit = LEGACY_CONFIG_SIZE.min(self.size);
        check_layout(&mut layout, STD_CAP_MIN.into(), limit)?;

        let mut first = 0u8;
        for (i, region) in layout.iter().enumerate().rev() {
            let next = layout.get(i + 1).map_or(0, |r| r.offset as u8);
            let offset = region.offset as u8;
            if self.pcie.is_some_and(|p| p.offset == offset) {
                let pcie = self.pcie.expect("checked");
                let base = usize::from(offset);
                let ok = "layout checked";
                cs.write_u8(base, PCIE_CAP_ID).expect(ok);
                cs.write_u8(base + 1, next).expect(ok);
                // Capability version 2, so DevCap2 exists.
                let caps = 2 | (u16::from(pcie.port_type & 0xF) << 4);
                cs.write_u16(base + PCIE_CAPABILITIES, caps).expect(ok);
                cs.write_u32(base + PCIE_DEVCAP2, pcie.completer.apply_to_devcap2(0)).expect(ok);
            } else {
                let mut msix = self.msix.clone().expect("region is MSI-X");
                msix.next = next;
                encode_msix(&msix, cs)?;
            }
            first = offset;
        }
        cs.write_u8(CAP_POINTER.into(), first).expect("the header, which holds it, fits (write_header)");
        Ok(())
    }

    fn write_ext_caps(&self, cs: &mut ConfigSpace) -> Result<(), SynthError> {
        let mut placeholders = self.placeholders.clone();
        let mut layout: Vec<Region> =
            placeholders.iter().map(|p| Region::new("extended capability", p.offset, p.len.max(4).into())).collect();
        if let Some(tph) = &self.tph {
            layout.push(Region::new("TPH capability", tph.offset, tph.byte_len()));
        }
        if layout.is_empty() {
            return Ok(());
        }
        if !layout.iter().any(|r| r.offset == EXT_CAP_START) {
            placeholders.push(ExtPlaceholder { offset: EXT_CAP_START, id: VSEC_CAP_ID, version: 1, len: 8 });
            layout.push(Region::new("VSEC filler", EXT_CAP_START, 8));
        }
        check_layout(&mut layout, EXT_CAP_START.into(), self.size)?;

        for (i, region) in layout.iter().enumerate() {
            let next = layout.get(i + 1).map_or(0, |r| r.offset);
            match self.tph.as_ref().filter(|t| t.offset == region.offset) {
                Some(tph) => {
                    let mut tph = tph.clone();
                    tph.next = next;
                    encode(&tph, cs)?;
                }
                None => {
                    let p = placeholders.iter().find(|p| p.offset == region.offset).expect("region is a placeholder");
                    write_placeholder(cs, p, next)?;
                }
            }
        }
        Ok(())
    }
}

fn write_placeholder(cs: &mut ConfigSpace, p: &ExtPlaceholder, next: u16) -> Result<(), SynthError> {
    if p.version > 0xF {
        return Err(TphError::InvalidField { field: "version", value: p.version.into() }.into());
    }
    let header = crate::caps::ExtCapHeader { offset: p.offset, id: p.id, version: p.version, next };
    let base = usize::from(p.offset);
    let ok = "layout checked";
    cs.write_u32(base, header.to_raw()).expect(ok);
    if p.id == VSEC_CAP_ID && p.len >= 8 {
        // VSEC header: ID 0, revision 0, length in bits 31:20.
        cs.write_u32(base + 4, u32::from(p.len & 0xFFF) << 20).expect(ok);
    }
    Ok(())
}

/// A structure's byte range, for overlap checks.
struct Region {
    what: &'static str,
    offset: u16,
    len: usize,
}

impl Region {
    fn new(what: &'static str, offset: u16, len: usize) -> Self {
        Self { what, offset, len }
    }
}

/// Sorts `layout` by offset and checks every region is aligned, starts at
/// or above `low`, ends at or below `high`, and overlaps no other.
fn check_layout(layout: &mut [Region], low: usize, high: usize) -> Result<(), SynthError> {
    layout.sort_by_key(|r| r.offset);
    for r in layout.iter() {
        if usize::from(r.offset) < low || r.offset & 3 != 0 {
            return Err(SynthError::BadOffset { what: r.what, offset: r.offset });
        }
        let end = usize::from(r.offset) + r.len;
        if end > high {
            return Err(SynthError::DoesNotFit { what: r.what, offset: r.offset, end });
        }
    }
    for pair in layout.windows(2) {
        if usize::from(pair[0].offset) + pair[0].len > usize::from(pair[1].offset) {
            return Err(SynthError::Overlap { first: pair[0].offset, second: pair[1].offset });
        }
    }
    Ok(())
}

/// A 4 KiB NIC-like endpoint for simulation: PCI Express endpoint
/// capability at 0x40, an MSI-X capability at 0xA0 with `msix_vectors`
/// entries (table in BAR 4) when `msix_vectors > 0`, and `tph` at
/// `tph.offset` (with the VSEC filler at 0x100 if `tph` is elsewhere).
pub fn nic(vendor_id: u16, device_id: u16, msix_vectors: u16, tph: TphCapability) -> Result<ConfigSpace, SynthError> {
    let mut builder = DeviceBuilder::endpoint(vendor_id, device_id).tph(tph);
    if msix_vectors > 0 {
        builder = builder.msix(MsixCapability::new(0xA0, msix_vectors, 4));
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::{list_ext_caps, list_std_caps};
    use crate::msix::find_msix;
    use crate::pcie::{find_pcie, tph_completer};
    use crate::tph::{decode, StTableLocation};

    #[test]
    fn nic_has_everything_linked() {
        let mut tph = TphCapability::new(0x260, StTableLocation::InCapability, 4);
        tph.st_table = vec![10, 11, 12, 13];
        let cs = nic(0x14e4, 0x1750, 16, tph.clone()).unwrap();
        assert_eq!(cs.len(), 4096);
        assert_eq!(cs.read_u16(0), Ok(0x14e4));
        assert_eq!(cs.read_u16(2), Ok(0x1750));
        let std: Vec<_> = list_std_caps(&cs).unwrap().iter().map(|h| (h.offset, h.id)).collect();
        assert_eq!(std, vec![(0x40, 0x10), (0xA0, 0x11)]);
        let ext: Vec<_> = list_ext_caps(&cs).unwrap().iter().map(|h| (h.offset, h.id)).collect();
        assert_eq!(ext, vec![(0x100, VSEC_CAP_ID), (0x260, 0x17)]);
        assert_eq!(decode(&cs).unwrap().unwrap(), tph);
        assert_eq!(find_msix(&cs).unwrap().unwrap().table_size, 16);
        assert_eq!(tph_completer(&cs), Ok(Some(TphCompleter::None)));
    }

    #[test]
    fn tph_at_0x100_needs_no_filler() {
        let tph = TphCapability::new(0x100, StTableLocation::None, 1);
        let cs = nic(1, 2, 0, tph).unwrap();
        let ext = list_ext_caps(&cs).unwrap();
        assert_eq!(ext.len(), 1);
        assert_eq!(ext[0].id, 0x17);
        assert!(find_msix(&cs).unwrap().is_none());
    }

    #[test]
    fn root_port_without_ext_caps() {
        let cs = DeviceBuilder::root_port(0x1022, 0x14ab, TphCompleter::TphOnly).size(256).build().unwrap();
        assert_eq!(cs.len(), 256);
        assert_eq!(cs.read_u8(0x0E), Ok(1));
        assert_eq!(tph_completer(&cs), Ok(Some(TphCompleter::TphOnly)));
        assert!(find_pcie(&cs).unwrap().unwrap().is_root_port());
    }

    #[test]
    fn placeholders_link_in_order() {
        let tph = TphCapability::new(0x1c0, StTableLocation::MsixTable, 8);
        let cs = DeviceBuilder::endpoint(1, 2)
            .ext_placeholder(0x100, 0x0001, 2, 0x48)
            .ext_placeholder(0x300, 0x0003, 1, 12)
            .tph(tph)
            .build()
            .unwrap();
        let ext: Vec<_> = list_ext_caps(&cs).unwrap().iter().map(|h| (h.offset, h.id, h.version)).collect();
        assert_eq!(ext, vec![(0x100, 1, 2), (0x1c0, 0x17, 1), (0x300, 3, 1)]);
    }

    #[test]
    fn header_fields_and_the_smallest_size() {
        let cs = DeviceBuilder::endpoint(1, 2).without_pcie().class_code(0x7F_02_00_01).size(64).build().unwrap();
        assert_eq!(cs.len(), 64);
        assert_eq!(cs.as_bytes()[0x09..0x0D], [0x01, 0x00, 0x02, 0x00]);
        let err = DeviceBuilder::endpoint(1, 2).without_pcie().size(63).build().unwrap_err();
        assert_eq!(err, SynthError::DoesNotFit { what: "header", offset: 0, end: 0x40 });
        assert_eq!(err.to_string(), "header at 0x0 ends at 0x40, past the space available");
        // A root port is a PCI-to-PCI bridge: class 06 04 00.
        let port = DeviceBuilder::root_port(1, 2, TphCompleter::TphOnly).size(256).build().unwrap();
        assert_eq!(port.as_bytes()[0x09..0x0C], [0x00, 0x04, 0x06]);
    }

    #[test]
    fn a_vendor_specific_placeholder_gets_its_length_and_others_only_a_header() {
        let cs = DeviceBuilder::endpoint(1, 2)
            .ext_placeholder(0x100, VSEC_CAP_ID, 1, 0x18)
            .ext_placeholder(0x200, 0x0001, 2, 0x48)
            .build()
            .unwrap();
        assert_eq!(cs.read_u32(0x104), Ok(0x018 << 20));
        assert_eq!(cs.read_u32(0x204), Ok(0));
        // Version 15 fits its four bits; regions may touch.
        let cs = DeviceBuilder::endpoint(1, 2)
            .ext_placeholder(0x100, 0x0001, 0xF, 0x48)
            .ext_placeholder(0x148, 0x0003, 1, 12)
            .build()
            .unwrap();
        let ext: Vec<_> = list_ext_caps(&cs).unwrap().iter().map(|h| (h.offset, h.version)).collect();
        assert_eq!(ext, vec![(0x100, 0xF), (0x148, 1)]);
    }

    #[test]
    fn a_capability_may_end_at_the_end_of_the_space() {
        let tph = TphCapability::new(0xFF4, StTableLocation::None, 1);
        let cs = DeviceBuilder::endpoint(1, 2).tph(tph.clone()).build().unwrap();
        assert_eq!(decode(&cs).unwrap().unwrap(), tph);
    }

    #[test]
    fn layout_errors() {
        let tph = TphCapability::new(0x120, StTableLocation::None, 1);
        let err =
            DeviceBuilder::endpoint(1, 2).ext_placeholder(0x100, 0x0001, 2, 0x48).tph(tph.clone()).build().unwrap_err();
        assert_eq!(err, SynthError::Overlap { first: 0x100, second: 0x120 });

        let err = DeviceBuilder::endpoint(1, 2).size(256).tph(tph).build().unwrap_err();
        assert!(matches!(err, SynthError::BadOffset { .. } | SynthError::DoesNotFit { .. }));

        let big = TphCapability::new(0xF00, StTableLocation::InCapability, 2048);
        let err = DeviceBuilder::endpoint(1, 2).tph(big).build().unwrap_err();
        assert!(matches!(err, SynthError::DoesNotFit { offset: 0xF00, .. }));

        let err = DeviceBuilder::endpoint(1, 2).msix(MsixCapability::new(0x70, 4, 0)).build().unwrap_err();
        assert_eq!(err, SynthError::Overlap { first: 0x40, second: 0x70 });

        let err = DeviceBuilder::endpoint(1, 2).msix(MsixCapability::new(0xF8, 4, 0)).build().unwrap_err();
        assert!(matches!(err, SynthError::DoesNotFit { offset: 0xF8, .. }));

        let err = DeviceBuilder::endpoint(1, 2).ext_placeholder(0x102, 0x0001, 1, 8).build().unwrap_err();
        assert_eq!(err, SynthError::BadOffset { what: "extended capability", offset: 0x102 });
        let low = TphCapability::new(0x0FC, StTableLocation::None, 1);
        let err = DeviceBuilder::endpoint(1, 2).tph(low).build().unwrap_err();
        assert!(matches!(err, SynthError::BadOffset { offset: 0x0FC, .. }), "{err:?}");
        let err = DeviceBuilder::endpoint(1, 2).ext_placeholder(0x100, 0x0001, 0x10, 8).build().unwrap_err();
        assert_eq!(err, SynthError::Encode(TphError::InvalidField { field: "version", value: 0x10 }));

        let err = DeviceBuilder::endpoint(1, 2).size(0).build().unwrap_err();
        assert_eq!(err, SynthError::Size(ConfigError::Empty));
    }
}
