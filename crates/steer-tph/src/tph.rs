//! The TPH Requester Extended Capability (PCIe Base Spec section 6.17).
//!
//! Layout, relative to the capability offset:
//!
//! | offset        | register                                   |
//! |---------------|--------------------------------------------|
//! | 0x00          | extended capability header (ID 0x0017)     |
//! | 0x04          | TPH Requester Capability                   |
//! | 0x08          | TPH Requester Control                      |
//! | 0x0C + 2*i    | ST table entry i (only if the table is here) |

use std::fmt;

use crate::caps::{find_ext_cap, ExtCapHeader, CONFIG_SPACE_END, EXT_CAP_START};
use crate::config::ConfigSpace;
use crate::error::{Result, TphError};

/// Extended capability ID of the TPH Requester capability.
pub const TPH_CAP_ID: u16 = 0x0017;
/// Capability version defined by the spec.
pub const TPH_CAP_VERSION: u8 = 1;

/// Offset of the TPH Requester Capability register.
pub const TPH_CAPABILITY: u16 = 0x04;
/// Offset of the TPH Requester Control register.
pub const TPH_CONTROL: u16 = 0x08;
/// Offset of the first in-capability ST table entry.
pub const TPH_ST_TABLE: u16 = 0x0C;
/// Largest ST table: the size field is 11 bits holding N-1.
pub const ST_TABLE_MAX: u16 = 2048;

// Capability register fields.
const CAP_NO_ST: u32 = 1 << 0;
const CAP_INT_VEC: u32 = 1 << 1;
const CAP_DEV_SPEC: u32 = 1 << 2;
const CAP_EXT_TPH: u32 = 1 << 8;
const CAP_LOC_SHIFT: u32 = 9;
const CAP_LOC_MASK: u32 = 0b11 << CAP_LOC_SHIFT;
const CAP_SIZE_SHIFT: u32 = 16;
const CAP_SIZE_MASK: u32 = 0x7FF << CAP_SIZE_SHIFT;
const CAP_DECODED: u32 = CAP_NO_ST | CAP_INT_VEC | CAP_DEV_SPEC | CAP_EXT_TPH | CAP_LOC_MASK | CAP_SIZE_MASK;

// Control register fields.
const CTRL_MODE_MASK: u32 = 0b111;
const CTRL_ENABLE_SHIFT: u32 = 8;
const CTRL_ENABLE_MASK: u32 = 0b11 << CTRL_ENABLE_SHIFT;
const CTRL_DECODED: u32 = CTRL_MODE_MASK | CTRL_ENABLE_MASK;

/// Where the steering tags live (capability bits 10:9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StTableLocation {
    /// 0: no table; tags come from elsewhere (device specific) or are unused.
    None,
    /// 1: the table follows the control register inside this capability.
    InCapability,
    /// 2: each tag sits in bits 31:16 of its MSI-X table entry's Vector Control.
    MsixTable,
    /// 3: reserved encoding.
    Reserved,
}

impl StTableLocation {
    /// Decodes the 2-bit field value (only the low 2 bits of `bits` are used).
    pub fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0 => StTableLocation::None,
            1 => StTableLocation::InCapability,
            2 => StTableLocation::MsixTable,
            _ => StTableLocation::Reserved,
        }
    }

    /// The 2-bit field value.
    pub fn bits(self) -> u8 {
        match self {
            StTableLocation::None => 0,
            StTableLocation::InCapability => 1,
            StTableLocation::MsixTable => 2,
            StTableLocation::Reserved => 3,
        }
    }

    /// The line `lspci -vv` prints for this location.
    pub fn lspci_text(self) -> &'static str {
        match self {
            StTableLocation::None => "No steering table available",
            StTableLocation::InCapability => "Steering table in TPH capability structure",
            StTableLocation::MsixTable => "Steering table in MSI-X table",
            StTableLocation::Reserved => "Reserved steering table location",
        }
    }
}

/// ST Mode Select (control bits 2:0): how the device picks a steering tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StMode {
    /// 0: No ST mode; requests carry ST 0.
    NoSt,
    /// 1: Interrupt Vector mode; the tag is looked up by MSI/MSI-X vector.
    InterruptVector,
    /// 2: Device Specific mode; the device chooses tags its own way.
    DeviceSpecific,
    /// 3-7: reserved encodings, value kept.
    Reserved(u8),
}

impl StMode {
    /// Decodes the 3-bit field value (only the low 3 bits of `bits` are used).
    pub fn from_bits(bits: u8) -> Self {
        match bits & 0b111 {
            0 => StMode::NoSt,
            1 => StMode::InterruptVector,
            2 => StMode::DeviceSpecific,
            other => StMode::Reserved(other),
        }
    }

    /// The field value. `Reserved(v)` gives `v` unchanged, which may not fit
    /// 3 bits; [`encode`] rejects such values.
    pub fn bits(self) -> u8 {
        match self {
            StMode::NoSt => 0,
            StMode::InterruptVector => 1,
            StMode::DeviceSpecific => 2,
            StMode::Reserved(v) => v,
        }
    }
}

impl fmt::Display for StMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StMode::NoSt => write!(f, "No ST"),
            StMode::InterruptVector => write!(f, "Interrupt vector"),
            StMode::DeviceSpecific => write!(f, "Device specific"),
            StMode::Reserved(v) => write!(f, "Reserved ({v})"),
        }
    }
}

/// TPH Requester Enable (control bits 9:8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequesterEnable {
    /// 0: the function must not issue requests with TPH.
    Disabled,
    /// 1: TPH allowed, 8-bit steering tags only.
    TphOnly,
    /// 2: reserved encoding.
    Reserved,
    /// 3: TPH and extended TPH (16-bit steering tags) allowed.
    TphAndExtended,
}

impl RequesterEnable {
    /// Decodes the 2-bit field value (only the low 2 bits of `bits` are used).
    pub fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0 => RequesterEnable::Disabled,
            1 => RequesterEnable::TphOnly,
            2 => RequesterEnable::Reserved,
            _ => RequesterEnable::TphAndExtended,
        }
    }

    /// The 2-bit field value.
    pub fn bits(self) -> u8 {
        match self {
            RequesterEnable::Disabled => 0,
            RequesterEnable::TphOnly => 1,
            RequesterEnable::Reserved => 2,
            RequesterEnable::TphAndExtended => 3,
        }
    }
}

impl fmt::Display for RequesterEnable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequesterEnable::Disabled => write!(f, "Disabled"),
            RequesterEnable::TphOnly => write!(f, "TPH only"),
            RequesterEnable::Reserved => write!(f, "Reserved (2)"),
            RequesterEnable::TphAndExtended => write!(f, "TPH and extended TPH"),
        }
    }
}

/// Lower 8 bits of a steering tag word (the tag used without extended TPH).
pub fn st_lower(st: u16) -> u8 {
    st as u8
}

/// Upper 8 bits of a steering tag word (used only with extended TPH).
pub fn st_upper(st: u16) -> u8 {
    (st >> 8) as u8
}

/// Builds a steering tag word from its lower and upper bytes.
pub fn st_word(lower: u8, upper: u8) -> u16 {
    u16::from(lower) | (u16::from(upper) << 8)
}

/// A decoded TPH Requester capability.
///
/// The decoded fields and the raw register words are both kept. Decoding
/// fills both consistently. Encoding takes every decoded field from the
/// struct and every other bit (reserved bits, fields this crate does not
/// interpret) from `raw_capability` / `raw_control`, so a decoded
/// capability re-encodes to the same bytes and an edited field is written
/// without disturbing its neighbours.
///
/// Spec violations seen in shipping devices (such as `no_st == false`, though
/// No-ST support is mandatory) are decoded as found, never rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TphCapability {
    /// Config-space offset of the capability header (0x100..=0xFFC).
    pub offset: u16,
    /// Capability version from the header (1 in the spec; others kept as found).
    pub version: u8,
    /// Next-capability pointer from the header (0 ends the list).
    pub next: u16,
    /// No ST mode supported (bit 0). Required by the spec, but not always set.
    pub no_st: bool,
    /// Interrupt Vector mode supported (bit 1).
    pub interrupt_vector: bool,
    /// Device Specific mode supported (bit 2).
    pub device_specific: bool,
    /// Extended TPH requester supported, i.e. 16-bit tags (bit 8).
    pub extended_requester: bool,
    /// Where the steering table lives (bits 10:9).
    pub st_table_location: StTableLocation,
    /// Number of ST table entries, 1..=2048 (bits 26:16 hold this minus 1).
    pub st_table_size: u16,
    /// ST Mode Select from the control register.
    pub mode: StMode,
    /// TPH Requester Enable from the control register.
    pub requester_enable: RequesterEnable,
    /// The capability register as read (or as to be written for bits not
    /// covered by the decoded fields).
    pub raw_capability: u32,
    /// The control register as read (or as to be written for bits not
    /// covered by the decoded fields).
    pub raw_control: u32,
    /// The in-capability steering table: exactly `st_table_size` entries
    /// when `st_table_location` is `InCapability`, empty otherwise.
    pub st_table: Vec<u16>,
}

impl TphCapability {
    /// A spec-conforming capability at `offset`: version 1, next 0, No-ST
    /// supported, no other modes, TPH disabled in No-ST mode, raw words
    /// zero apart from the decoded fields, and a zero-filled table of
    /// `st_table_size` entries when the table is in the capability.
    /// Adjust the public fields afterwards as needed.
    pub fn new(offset: u16, st_table_location: StTableLocation, st_table_size: u16) -> Self {
        let st_table = if st_table_location == StTableLocation::InCapability {
            vec![0; usize::from(st_table_size)]
        } else {
            Vec::new()
        };
        let mut cap = Self {
            offset,
            version: TPH_CAP_VERSION,
            next: 0,
            no_st: true,
            interrupt_vector: false,
            device_specific: false,
            extended_requester: false,
            st_table_location,
            st_table_size,
            mode: StMode::NoSt,
            requester_enable: RequesterEnable::Disabled,
            raw_capability: 0,
            raw_control: 0,
            st_table,
        };
        // Keep the raw words consistent with the fields where they fit.
        if let Ok(word) = cap.capability_word() {
            cap.raw_capability = word;
        }
        if let Ok(word) = cap.control_word() {
            cap.raw_control = word;
        }
        cap
    }

    /// Bytes the capability occupies: 0x0C, plus 2 per entry when the
    /// table is in the capability.
    pub fn byte_len(&self) -> usize {
        let table = if self.st_table_location == StTableLocation::InCapability {
            2 * usize::from(self.st_table_size)
        } else {
            0
        };
        usize::from(TPH_ST_TABLE) + table
    }

    /// In-capability ST table entry `index`, if the table is here and has it.
    pub fn st_entry(&self, index: usize) -> Option<u16> {
        self.st_table.get(index).copied()
    }

    /// The header dword to write: ID 0x0017, `version`, `next`.
    pub fn header_word(&self) -> Result<u32> {
        if self.version > 0xF {
            return Err(TphError::InvalidField { field: "version", value: self.version.into() });
        }
        if self.next != 0 && !valid_ext_offset(self.next) {
            return Err(TphError::InvalidField { field: "next", value: self.next.into() });
        }
        Ok(ExtCapHeader { offset: self.offset, id: TPH_CAP_ID, version: self.version, next: self.next }.to_raw())
    }

    /// The capability register to write: decoded fields merged over
    /// `raw_capability`. Errors if `st_table_size` is outside 1..=2048.
    pub fn capability_word(&self) -> Result<u32> {
        if !(1..=ST_TABLE_MAX).contains(&self.st_table_size) {
            return Err(TphError::InvalidField { field: "st_table_size", value: self.st_table_size.into() });
        }
        let mut word = self.raw_capability & !CAP_DECODED;
        word |= flag(self.no_st, CAP_NO_ST)
            | flag(self.interrupt_vector, CAP_INT_VEC)
            | flag(self.device_specific, CAP_DEV_SPEC)
            | flag(self.extended_requester, CAP_EXT_TPH);
        word |= u32::from(self.st_table_location.bits()) << CAP_LOC_SHIFT;
        word |= u32::from(self.st_table_size - 1) << CAP_SIZE_SHIFT;
        Ok(word)
    }

    /// The control register to write: decoded fields merged over
    /// `raw_control`. Errors if a `Reserved` mode value exceeds 7.
    pub fn control_word(&self) -> Result<u32> {
        let mode = self.mode.bits();
        if u32::from(mode) > CTRL_MODE_MASK {
            return Err(TphError::InvalidField { field: "mode", value: mode.into() });
        }
        Ok((self.raw_control & !CTRL_DECODED)
            | u32::from(mode)
            | (u32::from(self.requester_enable.bits()) << CTRL_ENABLE_SHIFT))
    }
}

fn flag(set: bool, bit: u32) -> u32 {
    if set {
        bit
    } else {
        0
    }
}

fn valid_ext_offset(offset: u16) -> bool {
    (EXT_CAP_START..CONFIG_SPACE_END).contains(&offset) && offset & 3 == 0
}

/// Finds and decodes the first TPH Requester capability in the extended
/// capability list.
///
/// `Ok(None)` when the list has no TPH capability. Errors when the list
/// cannot be walked up to it (including a dump too short to hold extended
/// capabilities) or when the capability itself is truncated; see
/// [`decode_at`].
pub fn decode(cs: &ConfigSpace) -> Result<Option<TphCapability>> {
    match find_ext_cap(cs, TPH_CAP_ID)? {
        Some(header) => decode_at(cs, header.offset).map(Some),
        None => Ok(None),
    }
}

/// Decodes the TPH Requester capability whose header sits at `offset`,
/// without walking the list.
///
/// Errors: [`TphError::BadOffset`] if `offset` is not a dword-aligned
/// extended offset; [`TphError::Truncated`] if the header, capability or
/// control register is missing from the dump; [`TphError::NotTph`] if the
/// header's ID is not 0x0017; [`TphError::StTableTruncated`] if the table
/// is declared in the capability but its entries run past the data.
/// Any version, and any combination of supported-mode bits, is accepted.
pub fn decode_at(cs: &ConfigSpace, offset: u16) -> Result<TphCapability> {
    if !valid_ext_offset(offset) {
        return Err(TphError::BadOffset { offset });
    }
    let base = usize::from(offset);
    let registers_end = base + usize::from(TPH_ST_TABLE);
    let truncated = TphError::Truncated { offset, end: registers_end, len: cs.len() };
    if registers_end > cs.len() {
        return Err(truncated);
    }
    let read = |reg: u16| cs.read_u32(base + usize::from(reg)).map_err(|_| truncated.clone());
    let header = ExtCapHeader::from_raw(offset, read(0)?);
    if header.id != TPH_CAP_ID {
        return Err(TphError::NotTph { offset, id: header.id });
    }
    let cap_word = read(TPH_CAPABILITY)?;
    let ctrl_word = read(TPH_CONTROL)?;

    let location = StTableLocation::from_bits(((cap_word & CAP_LOC_MASK) >> CAP_LOC_SHIFT) as u8);
    let st_table_size = ((cap_word & CAP_SIZE_MASK) >> CAP_SIZE_SHIFT) as u16 + 1;

    let st_table = if location == StTableLocation::InCapability {
        let available = cs.len().saturating_sub(registers_end) / 2;
        if available < usize::from(st_table_size) {
            return Err(TphError::StTableTruncated { offset, table_size: st_table_size, available: available as u16 });
        }
        (0..usize::from(st_table_size))
            .map(|i| cs.read_u16(registers_end + 2 * i).expect("bounds checked above"))
            .collect()
    } else {
        Vec::new()
    };

    Ok(TphCapability {
        offset,
        version: header.version,
        next: header.next,
        no_st: cap_word & CAP_NO_ST != 0,
        interrupt_vector: cap_word & CAP_INT_VEC != 0,
        device_specific: cap_word & CAP_DEV_SPEC != 0,
        extended_requester: cap_word & CAP_EXT_TPH != 0,
        st_table_location: location,
        st_table_size,
        mode: StMode::from_bits((ctrl_word & CTRL_MODE_MASK) as u8),
        requester_enable: RequesterEnable::from_bits(((ctrl_word & CTRL_ENABLE_MASK) >> CTRL_ENABLE_SHIFT) as u8),
        raw_capability: cap_word,
        raw_control: ctrl_word,
        st_table,
    })
}

/// Writes `cap` into `cs` at `cap.offset`: header, capability register,
/// control register and, when the table is in the capability, every table
/// entry. Nothing else is touched; in particular the capability is not
/// linked into the list (set `next` on it and on its predecessor for that).
///
/// Validates everything before writing, so on error `cs` is unchanged:
/// [`TphError::BadOffset`] for an offset outside 0x100..=0xFFC or unaligned,
/// [`TphError::InvalidField`] for values that do not fit their fields,
/// [`TphError::StTableLength`] if `st_table` disagrees with the declared
/// table, and [`TphError::Truncated`] if the capability does not fit in the
/// held bytes.
pub fn encode(cap: &TphCapability, cs: &mut ConfigSpace) -> Result<()> {
    if !valid_ext_offset(cap.offset) {
        return Err(TphError::BadOffset { offset: cap.offset });
    }
    let header = cap.header_word()?;
    let cap_word = cap.capability_word()?;
    let ctrl_word = cap.control_word()?;
    let expected_entries =
        if cap.st_table_location == StTableLocation::InCapability { usize::from(cap.st_table_size) } else { 0 };
    if cap.st_table.len() != expected_entries {
        return Err(TphError::StTableLength { table_size: cap.st_table_size, entries: cap.st_table.len() });
    }
    let base = usize::from(cap.offset);
    let end = base + cap.byte_len();
    if end > cs.len() {
        return Err(TphError::Truncated { offset: cap.offset, end, len: cs.len() });
    }

    let ok = "bounds checked above";
    cs.write_u32(base, header).expect(ok);
    cs.write_u32(base + usize::from(TPH_CAPABILITY), cap_word).expect(ok);
    cs.write_u32(base + usize::from(TPH_CONTROL), ctrl_word).expect(ok);
    for (i, &entry) in cap.st_table.iter().enumerate() {
        cs.write_u16(base + usize::from(TPH_ST_TABLE) + 2 * i, entry).expect(ok);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::CapError;

    /// A 4 KiB space whose only extended capability is a TPH header at
    /// 0x100 with the given raw registers and table entries.
    fn tph_space(cap_word: u32, ctrl_word: u32, entries: &[u16]) -> ConfigSpace {
        let mut cs = ConfigSpace::zeroed(4096).unwrap();
        cs.write_u32(0x100, 0x0001_0017).unwrap();
        cs.write_u32(0x104, cap_word).unwrap();
        cs.write_u32(0x108, ctrl_word).unwrap();
        for (i, &e) in entries.iter().enumerate() {
            cs.write_u16(0x10C + 2 * i, e).unwrap();
        }
        cs
    }

    #[test]
    fn decodes_fields() {
        // No-ST + IV + DS + extended, table in capability with 4 entries;
        // control: DS mode, TPH + extended enabled.
        let cs = tph_space(0x0003_0307, 0x0000_0302, &[0x0102, 0x0304, 0x0506, 0x0708]);
        let cap = decode(&cs).unwrap().unwrap();
        assert_eq!(cap.offset, 0x100);
        assert_eq!(cap.version, 1);
        assert_eq!(cap.next, 0);
        assert!(cap.no_st && cap.interrupt_vector && cap.device_specific);
        assert!(cap.extended_requester);
        assert_eq!(cap.st_table_location, StTableLocation::InCapability);
        assert_eq!(cap.st_table_size, 4);
        assert_eq!(cap.mode, StMode::DeviceSpecific);
        assert_eq!(cap.requester_enable, RequesterEnable::TphAndExtended);
        assert_eq!(cap.st_table, vec![0x0102, 0x0304, 0x0506, 0x0708]);
        assert_eq!(cap.byte_len(), 0x0C + 8);
        assert_eq!(cap.st_entry(3), Some(0x0708));
        assert_eq!(cap.st_entry(4), None);
    }

    #[test]
    fn no_tph_capability() {
        let mut cs = ConfigSpace::zeroed(4096).unwrap();
        assert_eq!(decode(&cs), Ok(None));
        cs.write_u32(0x100, 0x0001_0001).unwrap(); // AER only
        assert_eq!(decode(&cs), Ok(None));
    }

    #[test]
    fn real_device_without_no_st_bit_decodes() {
        // IV supported, No-ST bit clear, table in MSI-X.
        let cs = tph_space(0x003F_0402, 0x0000_0101, &[]);
        let cap = decode(&cs).unwrap().unwrap();
        assert!(!cap.no_st);
        assert!(cap.interrupt_vector);
        assert_eq!(cap.st_table_location, StTableLocation::MsixTable);
        assert_eq!(cap.st_table_size, 64);
        assert!(cap.st_table.is_empty());
        let mut copy = ConfigSpace::zeroed(4096).unwrap();
        encode(&cap, &mut copy).unwrap();
        assert_eq!(copy, cs);
    }

    #[test]
    fn round_trip_preserves_reserved_bits() {
        let cap_word = 0xF800_F8F8 | 0x0001_0203; // every reserved bit set
        let ctrl_word = 0xFFFF_FCF8 | 0x0000_0101;
        let cs = tph_space(cap_word, ctrl_word, &[0xBEEF, 0x1234]);
        let cap = decode(&cs).unwrap().unwrap();
        assert_eq!(cap.raw_capability, cap_word);
        assert_eq!(cap.raw_control, ctrl_word);
        assert_eq!(cap.capability_word(), Ok(cap_word));
        assert_eq!(cap.control_word(), Ok(ctrl_word));
        let mut copy = ConfigSpace::zeroed(4096).unwrap();
        encode(&cap, &mut copy).unwrap();
        assert_eq!(copy, cs);
    }

    #[test]
    fn edited_fields_keep_reserved_bits() {
        let cs = tph_space(0xF800_0001, 0x8000_0000, &[]);
        let mut cap = decode(&cs).unwrap().unwrap();
        cap.mode = StMode::InterruptVector;
        cap.requester_enable = RequesterEnable::TphOnly;
        cap.interrupt_vector = true;
        assert_eq!(cap.capability_word(), Ok(0xF800_0003));
        assert_eq!(cap.control_word(), Ok(0x8000_0101));
    }

    #[test]
    fn reserved_mode_values_survive() {
        for raw_mode in 3..=7u32 {
            let cs = tph_space(0x0000_0001, raw_mode, &[]);
            let cap = decode(&cs).unwrap().unwrap();
            assert_eq!(cap.mode, StMode::Reserved(raw_mode as u8));
            let mut copy = ConfigSpace::zeroed(4096).unwrap();
            encode(&cap, &mut copy).unwrap();
            assert_eq!(copy, cs);
        }
        let cs = tph_space(0x0000_0001, 0x200, &[]);
        assert_eq!(decode(&cs).unwrap().unwrap().requester_enable, RequesterEnable::Reserved);
    }

    #[test]
    fn truncated_st_table_is_an_error() {
        // Capability at 0x3F0 claims 8 in-capability entries in a 1 KiB dump.
        let mut cs = ConfigSpace::zeroed(0x400).unwrap();
        cs.write_u32(0x100, 0x3F01_0001).unwrap();
        cs.write_u32(0x3F0, 0x0001_0017).unwrap();
        cs.write_u32(0x3F4, 0x0007_0201).unwrap();
        assert_eq!(decode(&cs), Err(TphError::StTableTruncated { offset: 0x3F0, table_size: 8, available: 2 }));
        // Same at the very end of a full 4 KiB space.
        let mut cs = ConfigSpace::zeroed(4096).unwrap();
        cs.write_u32(0x100, 0xFF01_0001).unwrap();
        cs.write_u32(0xFF0, 0x0001_0017).unwrap();
        cs.write_u32(0xFF4, 0x0002_0201).unwrap();
        assert_eq!(decode(&cs), Err(TphError::StTableTruncated { offset: 0xFF0, table_size: 3, available: 2 }));
        // Two entries fill the space to its last byte.
        cs.write_u32(0xFF4, 0x0001_0201).unwrap();
        cs.write_u32(0xFFC, 0xBBBB_AAAA).unwrap();
        assert_eq!(decode(&cs).unwrap().unwrap().st_table, vec![0xAAAA, 0xBBBB]);
    }

    #[test]
    fn truncated_registers_are_an_error() {
        let mut cs = ConfigSpace::zeroed(0x108).unwrap();
        cs.write_u32(0x100, 0x0001_0017).unwrap();
        assert_eq!(decode(&cs), Err(TphError::Truncated { offset: 0x100, end: 0x10C, len: 0x108 }));
        assert_eq!(
            decode(&ConfigSpace::zeroed(256).unwrap()),
            Err(TphError::Walk(CapError::Truncated { offset: 0x100, len: 256 }))
        );
    }

    #[test]
    fn decode_at_checks_offset_and_id() {
        let cs = tph_space(1, 0, &[]);
        assert!(decode_at(&cs, 0x100).is_ok());
        assert_eq!(decode_at(&cs, 0x0FC), Err(TphError::BadOffset { offset: 0x0FC }));
        assert_eq!(decode_at(&cs, 0x102), Err(TphError::BadOffset { offset: 0x102 }));
        assert_eq!(decode_at(&cs, 0x200), Err(TphError::NotTph { offset: 0x200, id: 0 }));
    }

    #[test]
    fn encode_validates_before_writing() {
        let mut cs = ConfigSpace::zeroed(4096).unwrap();
        let mut cap = TphCapability::new(0x200, StTableLocation::InCapability, 4);
        cap.st_table.pop();
        assert_eq!(encode(&cap, &mut cs), Err(TphError::StTableLength { table_size: 4, entries: 3 }));
        let mut cap = TphCapability::new(0x200, StTableLocation::MsixTable, 0);
        assert_eq!(encode(&cap, &mut cs), Err(TphError::InvalidField { field: "st_table_size", value: 0 }));
        cap.st_table_size = 2049;
        assert!(encode(&cap, &mut cs).is_err());
        cap.st_table_size = 2048;
        cap.mode = StMode::Reserved(8);
        assert!(encode(&cap, &mut cs).is_err());
        cap.mode = StMode::NoSt;
        cap.next = 0x0FE;
        assert!(encode(&cap, &mut cs).is_err());
        cap.next = 0;
        cap.offset = 0x1002;
        assert_eq!(encode(&cap, &mut cs), Err(TphError::BadOffset { offset: 0x1002 }));
        let cap = TphCapability::new(0xFF8, StTableLocation::None, 1);
        assert_eq!(encode(&cap, &mut cs), Err(TphError::Truncated { offset: 0xFF8, end: 0x1004, len: 4096 }));
        assert!(cs.as_bytes().iter().all(|&b| b == 0));
    }

    #[test]
    fn cleared_fields_clear_their_bits_whatever_the_raw_words_held() {
        // Every decoded capability and control field set in the raw words.
        let cs = tph_space(0x07FF_0507, 0x0000_0302, &[]);
        let mut cap = decode(&cs).unwrap().unwrap();
        cap.no_st = false;
        cap.interrupt_vector = false;
        cap.device_specific = false;
        cap.extended_requester = false;
        cap.st_table_location = StTableLocation::None;
        cap.st_table_size = 1;
        cap.mode = StMode::NoSt;
        cap.requester_enable = RequesterEnable::Disabled;
        assert_eq!((cap.capability_word(), cap.control_word()), (Ok(0), Ok(0)));
    }

    #[test]
    fn the_version_must_fit_its_four_bits() {
        let mut cap = TphCapability::new(0x100, StTableLocation::None, 1);
        cap.version = 0xF;
        assert_eq!(cap.header_word(), Ok(0x000F_0017));
        cap.version = 0x10;
        assert_eq!(cap.header_word(), Err(TphError::InvalidField { field: "version", value: 0x10 }));
    }

    #[test]
    fn registers_ending_at_the_end_of_the_dump_decode() {
        let mut cs = ConfigSpace::zeroed(4096).unwrap();
        cs.write_u32(0x100, 0xFF41_0001).unwrap();
        cs.write_u32(0xFF4, 0x0001_0017).unwrap();
        cs.write_u32(0xFF8, 0x0000_0401).unwrap();
        let cap = decode(&cs).unwrap().unwrap();
        assert_eq!((cap.offset, cap.st_table_location, cap.byte_len()), (0xFF4, StTableLocation::MsixTable, 0x0C));
    }

    #[test]
    fn a_walk_error_is_the_source_of_the_tph_error() {
        let walk = CapError::Truncated { offset: 0x100, len: 256 };
        let source = std::error::Error::source(&TphError::Walk(walk)).map(|e| e.to_string());
        assert_eq!(source, Some(walk.to_string()));
        assert!(std::error::Error::source(&TphError::BadOffset { offset: 0 }).is_none());
        let truncated = TphError::Truncated { offset: 0x100, end: 0x10C, len: 0x108 };
        assert_eq!(
            truncated.to_string(),
            "capability at 0x100 needs bytes up to 0x10c, but the config space holds only 0x108"
        );
    }

    #[test]
    fn new_is_consistent_with_decode() {
        let mut cap = TphCapability::new(0x100, StTableLocation::InCapability, 3);
        cap.st_table = vec![1, 2, 3];
        let mut cs = ConfigSpace::zeroed(4096).unwrap();
        encode(&cap, &mut cs).unwrap();
        assert_eq!(decode(&cs).unwrap().unwrap(), cap);
    }

    #[test]
    fn st_word_halves() {
        assert_eq!(st_lower(0xA55A), 0x5A);
        assert_eq!(st_upper(0xA55A), 0xA5);
        assert_eq!(st_word(0x5A, 0xA5), 0xA55A);
    }
}
