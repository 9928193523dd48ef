//! MSI-X capability and steering tags stored in the MSI-X table.
//!
//! When a TPH capability reports `StTableLocation::MsixTable`, the tag for
//! vector i sits in bits 31:16 of the Vector Control dword of MSI-X table
//! entry i. The table itself lives in BAR memory, which a config-space dump
//! does not contain, so [`MsixTable`] works on table bytes obtained
//! separately (or synthesized).

use crate::caps::{find_std_cap, STD_CAP_MIN};
use crate::config::ConfigSpace;
use crate::error::{Result, TphError};

/// Standard capability ID of MSI-X.
pub const MSIX_CAP_ID: u8 = 0x11;
/// Bytes in the MSI-X capability structure.
pub const MSIX_CAP_LEN: usize = 12;
/// Bytes per MSI-X table entry.
pub const MSIX_ENTRY_SIZE: usize = 16;
/// Offset of Vector Control within a table entry.
pub const MSIX_VECTOR_CONTROL: usize = 0x0C;
/// Largest MSI-X table: the size field is 11 bits holding N-1.
pub const MSIX_TABLE_MAX: u16 = 2048;

const MSG_CTRL: usize = 2;
const TABLE_REG: usize = 4;
const PBA_REG: usize = 8;
const CTRL_SIZE_MASK: u16 = 0x07FF;
const CTRL_FUNCTION_MASK: u16 = 1 << 14;
const CTRL_ENABLE: u16 = 1 << 15;
const CTRL_DECODED: u16 = CTRL_SIZE_MASK | CTRL_FUNCTION_MASK | CTRL_ENABLE;
const BIR_MASK: u32 = 0b111;

/// The steering tag held in a Vector Control dword (bits 31:16).
pub fn msix_st(vector_control: u32) -> u16 {
    (vector_control >> 16) as u16
}

/// `vector_control` with its steering tag (bits 31:16) replaced by `st`;
/// the mask bit and other low bits are kept.
pub fn with_msix_st(vector_control: u32, st: u16) -> u32 {
    (vector_control & 0xFFFF) | (u32::from(st) << 16)
}

/// A decoded MSI-X capability.
///
/// Like [`crate::TphCapability`], encoding takes decoded fields from the
/// struct and the remaining Message Control bits from
/// `raw_message_control`, so decode-then-encode is byte-exact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsixCapability {
    /// Config-space offset of the capability (0x40..=0xF4).
    pub offset: u8,
    /// Next standard capability pointer (0 ends the list).
    pub next: u8,
    /// Number of table entries, 1..=2048 (the field holds this minus 1).
    pub table_size: u16,
    /// MSI-X Enable (Message Control bit 15).
    pub enabled: bool,
    /// Function Mask (Message Control bit 14).
    pub function_mask: bool,
    /// BAR indicator register number holding the table (0..=5 in practice).
    pub table_bir: u8,
    /// Byte offset of the table within that BAR (8-byte aligned).
    pub table_offset: u32,
    /// BAR indicator register number holding the Pending Bit Array.
    pub pba_bir: u8,
    /// Byte offset of the PBA within that BAR (8-byte aligned).
    pub pba_offset: u32,
    /// Message Control as read; supplies reserved bits when encoding.
    pub raw_message_control: u16,
}

impl MsixCapability {
    /// An MSI-X capability at `offset` with `table_size` entries, table at
    /// offset 0 and PBA right after the table, both in BAR `bir`; disabled,
    /// unmasked, next 0.
    pub fn new(offset: u8, table_size: u16, bir: u8) -> Self {
        let table_bytes = u32::from(table_size) * MSIX_ENTRY_SIZE as u32;
        Self {
            offset,
            next: 0,
            table_size,
            enabled: false,
            function_mask: false,
            table_bir: bir,
            table_offset: 0,
            pba_bir: bir,
            // Keep the PBA 8-byte aligned as the register requires.
            pba_offset: table_bytes.next_multiple_of(8),
            raw_message_control: table_size.saturating_sub(1) & CTRL_SIZE_MASK,
        }
    }

    /// Message Control to write: decoded fields merged over
    /// `raw_message_control`. Errors if `table_size` is outside 1..=2048.
    pub fn message_control(&self) -> Result<u16> {
        if !(1..=MSIX_TABLE_MAX).contains(&self.table_size) {
            return Err(TphError::InvalidField { field: "table_size", value: self.table_size.into() });
        }
        let mut word = self.raw_message_control & !CTRL_DECODED;
        word |= (self.table_size - 1) & CTRL_SIZE_MASK;
        if self.function_mask {
            word |= CTRL_FUNCTION_MASK;
        }
        if self.enabled {
            word |= CTRL_ENABLE;
        }
        Ok(word)
    }
}

fn offset_bir_word(field_bir: &'static str, bir: u8, field_offset: &'static str, offset: u32) -> Result<u32> {
    if u32::from(bir) > BIR_MASK {
        return Err(TphError::InvalidField { field: field_bir, value: bir.into() });
    }
    if offset & BIR_MASK != 0 {
        return Err(TphError::InvalidField { field: field_offset, value: offset });
    }
    Ok(offset | u32::from(bir))
}

/// Finds and decodes the MSI-X capability in the standard capability list.
/// `Ok(None)` if there is none; errors if the list cannot be walked or the
/// 12-byte structure runs past the dump.
pub fn find_msix(cs: &ConfigSpace) -> Result<Option<MsixCapability>> {
    let Some(header) = find_std_cap(cs, MSIX_CAP_ID)? else {
        return Ok(None);
    };
    let base = usize::from(header.offset);
    let truncated = || TphError::Truncated { offset: header.offset.into(), end: base + MSIX_CAP_LEN, len: cs.len() };
    let control = cs.read_u16(base + MSG_CTRL).map_err(|_| truncated())?;
    let table = cs.read_u32(base + TABLE_REG).map_err(|_| truncated())?;
    let pba = cs.read_u32(base + PBA_REG).map_err(|_| truncated())?;
    Ok(Some(MsixCapability {
        offset: header.offset,
        next: header.next,
        table_size: (control & CTRL_SIZE_MASK) + 1,
        enabled: control & CTRL_ENABLE != 0,
        function_mask: control & CTRL_FUNCTION_MASK != 0,
        table_bir: (table & BIR_MASK) as u8,
        table_offset: table & !BIR_MASK,
        pba_bir: (pba & BIR_MASK) as u8,
        pba_offset: pba & !BIR_MASK,
        raw_message_control: control,
    }))
}

/// Writes the 12-byte MSI-X capability at `cap.offset` (ID, next pointer,
/// Message Control, table and PBA registers). Does not link it into the
/// list. Validates first, so on error `cs` is unchanged: the offset must be
/// dword aligned within 0x40..=0xF4, BIRs must fit 3 bits, BAR offsets must
/// be 8-byte aligned, and the structure must fit in the held bytes.
pub fn encode_msix(cap: &MsixCapability, cs: &mut ConfigSpace) -> Result<()> {
    let base = usize::from(cap.offset);
    if cap.offset < STD_CAP_MIN || cap.offset & 3 != 0 || base + MSIX_CAP_LEN > 0x100 {
        return Err(TphError::BadOffset { offset: cap.offset.into() });
    }
    if cap.next != 0 && (cap.next < STD_CAP_MIN || cap.next & 3 != 0) {
        return Err(TphError::InvalidField { field: "next", value: cap.next.into() });
    }
    let control = cap.message_control()?;
    let table = offset_bir_word("table_bir", cap.table_bir, "table_offset", cap.table_offset)?;
    let pba = offset_bir_word("pba_bir", cap.pba_bir, "pba_offset", cap.pba_offset)?;
    if base + MSIX_CAP_LEN > cs.len() {
        return Err(TphError::Truncated { offset: cap.offset.into(), end: base + MSIX_CAP_LEN, len: cs.len() });
    }
    let ok = "bounds checked above";
    cs.write_u8(base, MSIX_CAP_ID).expect(ok);
    cs.write_u8(base + 1, cap.next).expect(ok);
    cs.write_u16(base + MSG_CTRL, control).expect(ok);
    cs.write_u32(base + TABLE_REG, table).expect(ok);
    cs.write_u32(base + PBA_REG, pba).expect(ok);
    Ok(())
}

/// Raw MSI-X table bytes: 16 bytes per entry (message address low/high,
/// message data, vector control), little-endian.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsixTable {
    bytes: Vec<u8>,
}

impl MsixTable {
    /// A table of `entries` all-zero entries.
    pub fn zeroed(entries: usize) -> Self {
        Self { bytes: vec![0; entries * MSIX_ENTRY_SIZE] }
    }

    /// Copies raw table bytes; the length must be a multiple of 16.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if !bytes.len().is_multiple_of(MSIX_ENTRY_SIZE) {
            return Err(TphError::MsixTableLength { len: bytes.len() });
        }
        Ok(Self { bytes: bytes.to_vec() })
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Number of entries.
    pub fn entries(&self) -> usize {
        self.bytes.len() / MSIX_ENTRY_SIZE
    }

    fn vector_control_at(&self, index: usize) -> Result<usize> {
        if index < self.entries() {
            Ok(index * MSIX_ENTRY_SIZE + MSIX_VECTOR_CONTROL)
        } else {
            Err(TphError::MsixEntryOutOfRange { index, entries: self.entries() })
        }
    }

    /// Vector Control dword of entry `index`.
    pub fn vector_control(&self, index: usize) -> Result<u32> {
        let at = self.vector_control_at(index)?;
        Ok(u32::from_le_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes")))
    }

    /// Replaces the Vector Control dword of entry `index`.
    pub fn set_vector_control(&mut self, index: usize, value: u32) -> Result<()> {
        let at = self.vector_control_at(index)?;
        self.bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
        Ok(())
    }

    /// Steering tag of entry `index` (Vector Control bits 31:16).
    pub fn st(&self, index: usize) -> Result<u16> {
        self.vector_control(index).map(msix_st)
    }

    /// Sets the steering tag of entry `index`, keeping the rest of Vector
    /// Control (notably the mask bit) unchanged.
    pub fn set_st(&mut self, index: usize, st: u16) -> Result<()> {
        let vc = self.vector_control(index)?;
        self.set_vector_control(index, with_msix_st(vc, st))
    }

    /// Steering tags of all entries, in order.
    pub fn st_table(&self) -> Vec<u16> {
        (0..self.entries()).map(|i| self.st(i).expect("index in range")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::STATUS_CAP_LIST;

    #[test]
    fn vector_control_st_helpers() {
        assert_eq!(msix_st(0xABCD_0001), 0xABCD);
        assert_eq!(msix_st(0x0000_FFFF), 0);
        assert_eq!(with_msix_st(0x0000_0001, 0x1234), 0x1234_0001);
        assert_eq!(with_msix_st(0xFFFF_FFFF, 0x0042), 0x0042_FFFF);
        for vc in [0u32, 1, 0xFFFF_FFFF, 0x8000_7FFE] {
            for st in [0u16, 0x00FF, 0xFF00, 0xFFFF] {
                let updated = with_msix_st(vc, st);
                assert_eq!(msix_st(updated), st);
                assert_eq!(updated & 0xFFFF, vc & 0xFFFF);
            }
        }
    }

    #[test]
    fn table_get_and_set() {
        let mut table = MsixTable::zeroed(4);
        assert_eq!(table.entries(), 4);
        table.set_vector_control(2, 1).unwrap(); // masked
        table.set_st(2, 0x0A0B).unwrap();
        assert_eq!(table.vector_control(2), Ok(0x0A0B_0001));
        assert_eq!(table.st(2), Ok(0x0A0B));
        assert_eq!(table.st_table(), vec![0, 0, 0x0A0B, 0]);
        // Little-endian bytes at entry 2 + 0xC.
        assert_eq!(table.as_bytes()[2 * 16 + 12..2 * 16 + 16], [1, 0, 0x0B, 0x0A]);
        assert_eq!(table.st(4), Err(TphError::MsixEntryOutOfRange { index: 4, entries: 4 }));
        assert!(table.set_st(9, 1).is_err());
        assert_eq!(MsixTable::from_bytes(&[0; 17]), Err(TphError::MsixTableLength { len: 17 }));
        let copy = MsixTable::from_bytes(table.as_bytes()).unwrap();
        assert_eq!(copy, table);
    }

    #[test]
    fn capability_round_trip() {
        let mut cs = ConfigSpace::zeroed(256).unwrap();
        cs.write_u16(0x06, STATUS_CAP_LIST).unwrap();
        cs.write_u8(0x34, 0xA0).unwrap();
        cs.write_u8(0xA0, MSIX_CAP_ID).unwrap();
        // Enabled, reserved bit 11 set, 74 entries.
        cs.write_u16(0xA2, 0x8000 | 0x0800 | 73).unwrap();
        cs.write_u32(0xA4, 0x0000_0004).unwrap();
        cs.write_u32(0xA8, 0x0000_1004).unwrap();
        let cap = find_msix(&cs).unwrap().unwrap();
        assert_eq!(cap.offset, 0xA0);
        assert_eq!(cap.table_size, 74);
        assert!(cap.enabled && !cap.function_mask);
        assert_eq!((cap.table_bir, cap.table_offset), (4, 0));
        assert_eq!((cap.pba_bir, cap.pba_offset), (4, 0x1000));
        let mut blank = ConfigSpace::zeroed(256).unwrap();
        blank.write_u16(0x06, STATUS_CAP_LIST).unwrap();
        blank.write_u8(0x34, 0xA0).unwrap();
        encode_msix(&cap, &mut blank).unwrap();
        assert_eq!(blank, cs);
        let mut without_list = cs.clone();
        without_list.write_u8(0x34, 0).unwrap();
        assert_eq!(find_msix(&without_list), Ok(None));
    }

    #[test]
    fn a_masked_disabled_capability_with_a_next_pointer_round_trips() {
        let mut cs = ConfigSpace::zeroed(256).unwrap();
        cs.write_u16(0x06, STATUS_CAP_LIST).unwrap();
        cs.write_u8(0x34, 0x50).unwrap();
        let cap = MsixCapability {
            offset: 0x50,
            next: 0x60,
            table_size: 64,
            enabled: false,
            function_mask: true,
            table_bir: 2,
            table_offset: 0x2000,
            pba_bir: 3,
            pba_offset: 0x3000,
            raw_message_control: 0x0800,
        };
        encode_msix(&cap, &mut cs).unwrap();
        assert_eq!(cs.as_bytes()[0x50..0x5C], [0x11, 0x60, 0x3F, 0x48, 0x02, 0x20, 0, 0, 0x03, 0x30, 0, 0]);
        // Decoded back: the list ends at 0x60, where no capability was written.
        let mut decoded = find_msix(&cs).unwrap().unwrap();
        assert_eq!(decoded.raw_message_control, 0x483F);
        decoded.raw_message_control = 0x0800;
        assert_eq!(decoded, cap);
        // The fields override whatever the raw word held in their bits.
        let stale = MsixCapability { raw_message_control: 0xCFFF, ..cap };
        assert_eq!(stale.message_control(), Ok(0x483F));
    }

    #[test]
    fn encode_checks_the_offset_and_next_pointer() {
        let mut cs = ConfigSpace::zeroed(256).unwrap();
        let at = |offset: u8, next: u8| MsixCapability { next, ..MsixCapability::new(offset, 8, 0) };
        assert_eq!(encode_msix(&at(0x3C, 0), &mut cs), Err(TphError::BadOffset { offset: 0x3C }));
        assert_eq!(encode_msix(&at(0x42, 0), &mut cs), Err(TphError::BadOffset { offset: 0x42 }));
        for next in [0x3C, 0x52] {
            assert_eq!(
                encode_msix(&at(0x40, next), &mut cs),
                Err(TphError::InvalidField { field: "next", value: next.into() })
            );
        }
        assert!(cs.as_bytes().iter().all(|&b| b == 0));
        assert_eq!(encode_msix(&at(0x40, 0x50), &mut cs), Ok(()));
        assert_eq!(encode_msix(&at(0x40, 0), &mut cs), Ok(()));
        // The lowest next pointer, and the highest offset (the structure ends at 0x100).
        assert_eq!(encode_msix(&at(0x50, 0x40), &mut cs), Ok(()));
        assert_eq!(encode_msix(&at(0xF4, 0), &mut cs), Ok(()));
        // BIRs of up to 7 (three bits).
        let last_bir = MsixCapability { table_bir: 7, pba_bir: 7, ..at(0x40, 0) };
        assert_eq!(encode_msix(&last_bir, &mut cs), Ok(()));
        // A structure ending at the dump's end fits; one byte less does not, and is not found
        // either.
        let mut exact = ConfigSpace::zeroed(0x4C).unwrap();
        assert_eq!(encode_msix(&at(0x40, 0), &mut exact), Ok(()));
        exact.write_u16(0x06, STATUS_CAP_LIST).unwrap();
        exact.write_u8(0x34, 0x40).unwrap();
        let cut = ConfigSpace::from_bytes(&exact.as_bytes()[..0x48]).unwrap();
        assert_eq!(find_msix(&cut), Err(TphError::Truncated { offset: 0x40, end: 0x4C, len: 0x48 }));
        // A dump too short for the structure.
        let mut short = ConfigSpace::zeroed(0x48).unwrap();
        assert_eq!(
            encode_msix(&at(0x40, 0), &mut short),
            Err(TphError::Truncated { offset: 0x40, end: 0x4C, len: 0x48 })
        );
    }

    #[test]
    fn encode_rejects_bad_values() {
        let mut cs = ConfigSpace::zeroed(256).unwrap();
        let mut cap = MsixCapability::new(0xF8, 8, 0);
        assert_eq!(encode_msix(&cap, &mut cs), Err(TphError::BadOffset { offset: 0xF8 }));
        cap.offset = 0x40;
        cap.table_offset = 0x1004;
        assert!(encode_msix(&cap, &mut cs).is_err());
        cap.table_offset = 0;
        cap.pba_bir = 8;
        assert!(encode_msix(&cap, &mut cs).is_err());
        cap.pba_bir = 0;
        cap.table_size = 0;
        assert!(encode_msix(&cap, &mut cs).is_err());
        assert!(cs.as_bytes().iter().all(|&b| b == 0));
        cap.table_size = 8;
        encode_msix(&cap, &mut cs).unwrap();
        assert_eq!(cs.read_u16(0x42), Ok(7));
        assert_eq!(cs.read_u32(0x48), Ok(0x80));
    }
}
