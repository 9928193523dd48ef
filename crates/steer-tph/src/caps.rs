//! Walking the standard (0x40-0xFF) and extended (0x100-0xFFF) capability
//! lists without trusting them.
//!
//! Dumps from real or broken devices can hold lists that loop, point into
//! the header, point at unaligned offsets or run off the end of a truncated
//! dump. The walkers yield each capability header in list order and stop at
//! the first such problem with a [`CapError`] naming the offsets involved.
//! Each dword offset is visited at most once, so a walk always ends.
//!
//! The spec asks software to mask the two reserved low bits of capability
//! pointers. In a captured dump a set low bit is far more likely to mean
//! corruption than a future extension, so both walkers report it as
//! [`CapError::Unaligned`] instead of masking it.

use std::fmt;

use crate::config::ConfigSpace;

/// Offset of the first extended capability header.
pub const EXT_CAP_START: u16 = 0x100;
/// One past the last byte of configuration space.
pub const CONFIG_SPACE_END: u16 = 0x1000;
/// Lowest offset a standard capability may occupy (end of the 64-byte header).
pub const STD_CAP_MIN: u8 = 0x40;
/// Register holding the first standard capability pointer (header types 0 and 1).
pub const CAP_POINTER: u16 = 0x34;
/// Register holding the first standard capability pointer for CardBus
/// bridges (header type 2).
pub const CARDBUS_CAP_POINTER: u16 = 0x14;
/// Status register; bit 4 says whether a capability list exists.
pub const STATUS: u16 = 0x06;
/// Status register bit: capabilities list present.
pub const STATUS_CAP_LIST: u16 = 1 << 4;
/// Header type register; bits 6:0 give the layout.
pub const HEADER_TYPE: u16 = 0x0E;

/// Why a capability list walk stopped early.
///
/// `from` is the config-space offset of the register the bad pointer was
/// read from: the previous capability's header, or the capabilities pointer
/// register (0x34) for the first standard capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapError {
    /// A non-zero pointer lies below the list's region: under 0x100 for
    /// extended capabilities, under 0x40 (inside the header) for standard ones.
    PointerBelowBase {
        /// Where the pointer was read.
        from: u16,
        /// The pointer value.
        pointer: u16,
    },
    /// A pointer is not dword aligned.
    Unaligned {
        /// Where the pointer was read.
        from: u16,
        /// The pointer value.
        pointer: u16,
    },
    /// A pointer leads back to a capability already visited.
    Loop {
        /// Where the pointer was read.
        from: u16,
        /// The already-visited offset it points to.
        pointer: u16,
    },
    /// The register at `offset` lies past the `len` bytes of a truncated dump.
    Truncated {
        /// Offset that could not be read.
        offset: u16,
        /// Bytes held.
        len: usize,
    },
}

impl fmt::Display for CapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapError::PointerBelowBase { from, pointer } => {
                write!(f, "capability pointer {pointer:#x} read at {from:#x} is below the capability region")
            }
            CapError::Unaligned { from, pointer } => {
                write!(f, "capability pointer {pointer:#x} read at {from:#x} is not dword aligned")
            }
            CapError::Loop { from, pointer } => {
                write!(f, "capability list loops: pointer at {from:#x} returns to {pointer:#x}")
            }
            CapError::Truncated { offset, len } => {
                write!(f, "capability data at {offset:#x} is past the end of the {len}-byte dump")
            }
        }
    }
}

impl std::error::Error for CapError {}

/// One extended capability header as found in the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtCapHeader {
    /// Where the header sits (0x100..=0xFFC).
    pub offset: u16,
    /// Capability ID, bits 15:0.
    pub id: u16,
    /// Capability version, bits 19:16.
    pub version: u8,
    /// Next capability offset, bits 31:20; 0 ends the list.
    pub next: u16,
}

impl ExtCapHeader {
    /// Splits the raw header dword read at `offset` into its fields.
    pub fn from_raw(offset: u16, raw: u32) -> Self {
        Self { offset, id: (raw & 0xFFFF) as u16, version: ((raw >> 16) & 0xF) as u8, next: (raw >> 20) as u16 }
    }

    /// The header dword for these fields. `version` and `next` are masked to
    /// their 4 and 12 bits.
    pub fn to_raw(&self) -> u32 {
        u32::from(self.id) | (u32::from(self.version & 0xF) << 16) | (u32::from(self.next & 0xFFF) << 20)
    }
}

/// One standard capability header as found in the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdCapHeader {
    /// Where the header sits (0x40..=0xFC).
    pub offset: u8,
    /// Capability ID (byte 0).
    pub id: u8,
    /// Next capability pointer (byte 1); 0 ends the list.
    pub next: u8,
}

/// Set of dword offsets already visited, so every walk terminates.
struct Visited([u64; 16]);

impl Visited {
    fn new() -> Self {
        Self([0; 16])
    }
    /// Marks `offset`.
    fn insert(&mut self, offset: u16) {
        let dword = usize::from(offset / 4) % 1024;
        self.0[dword / 64] |= 1 << (dword % 64);
    }
    fn contains(&self, offset: u16) -> bool {
        let dword = usize::from(offset / 4) % 1024;
        self.0[dword / 64] & (1 << (dword % 64)) != 0
    }
}

enum Walk {
    Start,
    At(u16),
    Failed(CapError),
    Done,
}

/// Iterator over the extended capability list; see [`ext_caps`].
pub struct ExtCaps<'a> {
    cs: &'a ConfigSpace,
    state: Walk,
    visited: Visited,
}

/// Walks the extended capability list from 0x100.
///
/// Yields `Ok(header)` for each capability in list order, then ends; or
/// yields one `Err` and ends. A header of 0 or 0xFFFFFFFF at 0x100 means
/// no extended capabilities (empty walk). A dump too short to hold the
/// header at 0x100 (such as a 256-byte `lspci -xxx` dump) yields
/// [`CapError::Truncated`], because the list cannot be known to be empty.
pub fn ext_caps(cs: &ConfigSpace) -> ExtCaps<'_> {
    ExtCaps { cs, state: Walk::Start, visited: Visited::new() }
}

impl Iterator for ExtCaps<'_> {
    type Item = Result<ExtCapHeader, CapError>;

    fn next(&mut self) -> Option<Self::Item> {
        let offset = match std::mem::replace(&mut self.state, Walk::Done) {
            Walk::Done => return None,
            Walk::Failed(e) => return Some(Err(e)),
            Walk::Start => EXT_CAP_START,
            Walk::At(offset) => offset,
        };
        let raw = match self.cs.read_u32(usize::from(offset)) {
            Ok(raw) => raw,
            Err(_) => return Some(Err(CapError::Truncated { offset, len: self.cs.len() })),
        };
        if offset == EXT_CAP_START && (raw == 0 || raw == u32::MAX) {
            return None;
        }
        self.visited.insert(offset);
        let header = ExtCapHeader::from_raw(offset, raw);
        self.state = match header.next {
            0 => Walk::Done,
            next => match check_pointer(offset, next, EXT_CAP_START, &self.visited) {
                Ok(()) => Walk::At(next),
                Err(e) => Walk::Failed(e),
            },
        };
        Some(Ok(header))
    }
}

/// Iterator over the standard capability list; see [`std_caps`].
pub struct StdCaps<'a> {
    cs: &'a ConfigSpace,
    state: Walk,
    visited: Visited,
}

/// Walks the standard capability list.
///
/// The list exists only if Status bit 4 is set; it starts at the pointer in
/// register 0x34 (0x14 for CardBus header type 2). Yields `Ok(header)` for
/// each capability in list order, then ends; or yields one `Err` and ends.
/// Pointers must be dword aligned and at least 0x40.
pub fn std_caps(cs: &ConfigSpace) -> StdCaps<'_> {
    StdCaps { cs, state: Walk::Start, visited: Visited::new() }
}

impl StdCaps<'_> {
    fn truncated(&self, offset: u16) -> CapError {
        CapError::Truncated { offset, len: self.cs.len() }
    }

    /// Reads the first pointer, or `None` when there is no list.
    fn first_pointer(&self) -> Result<Option<(u16, u16)>, CapError> {
        let status = self.cs.read_u16(usize::from(STATUS)).map_err(|_| self.truncated(STATUS))?;
        if status & STATUS_CAP_LIST == 0 {
            return Ok(None);
        }
        let header_type = self.cs.read_u8(usize::from(HEADER_TYPE)).map_err(|_| self.truncated(HEADER_TYPE))?;
        let register = if header_type & 0x7F == 2 { CARDBUS_CAP_POINTER } else { CAP_POINTER };
        let pointer = self.cs.read_u8(usize::from(register)).map_err(|_| self.truncated(register))?;
        Ok(Some((register, u16::from(pointer))))
    }
}

impl Iterator for StdCaps<'_> {
    type Item = Result<StdCapHeader, CapError>;

    fn next(&mut self) -> Option<Self::Item> {
        let offset = match std::mem::replace(&mut self.state, Walk::Done) {
            Walk::Done => return None,
            Walk::Failed(e) => return Some(Err(e)),
            Walk::At(offset) => offset,
            Walk::Start => match self.first_pointer() {
                Err(e) => return Some(Err(e)),
                Ok(None) | Ok(Some((_, 0))) => return None,
                Ok(Some((register, pointer))) => {
                    if let Err(e) = check_pointer(register, pointer, u16::from(STD_CAP_MIN), &self.visited) {
                        return Some(Err(e));
                    }
                    pointer
                }
            },
        };
        let (id, next) = match (self.cs.read_u8(usize::from(offset)), self.cs.read_u8(usize::from(offset) + 1)) {
            (Ok(id), Ok(next)) => (id, next),
            _ => return Some(Err(self.truncated(offset))),
        };
        self.visited.insert(offset);
        self.state = match next {
            0 => Walk::Done,
            next => match check_pointer(offset, u16::from(next), u16::from(STD_CAP_MIN), &self.visited) {
                Ok(()) => Walk::At(u16::from(next)),
                Err(e) => Walk::Failed(e),
            },
        };
        Some(Ok(StdCapHeader { offset: offset as u8, id, next }))
    }
}

/// Validates a non-zero pointer read at `from`.
fn check_pointer(from: u16, pointer: u16, base: u16, visited: &Visited) -> Result<(), CapError> {
    if pointer < base {
        Err(CapError::PointerBelowBase { from, pointer })
    } else if pointer & 3 != 0 {
        Err(CapError::Unaligned { from, pointer })
    } else if visited.contains(pointer) {
        Err(CapError::Loop { from, pointer })
    } else {
        Ok(())
    }
}

/// All extended capability headers, or the first walk error.
pub fn list_ext_caps(cs: &ConfigSpace) -> Result<Vec<ExtCapHeader>, CapError> {
    ext_caps(cs).collect()
}

/// All standard capability headers, or the first walk error.
pub fn list_std_caps(cs: &ConfigSpace) -> Result<Vec<StdCapHeader>, CapError> {
    std_caps(cs).collect()
}

/// The first extended capability with ID `id`, `Ok(None)` if the list ends
/// without one. The walk stops at the match, so damage later in the list
/// is not reported.
pub fn find_ext_cap(cs: &ConfigSpace, id: u16) -> Result<Option<ExtCapHeader>, CapError> {
    for header in ext_caps(cs) {
        let header = header?;
        if header.id == id {
            return Ok(Some(header));
        }
    }
    Ok(None)
}

/// The first standard capability with ID `id`, `Ok(None)` if the list ends
/// (or is absent) without one. The walk stops at the match.
pub fn find_std_cap(cs: &ConfigSpace, id: u8) -> Result<Option<StdCapHeader>, CapError> {
    for header in std_caps(cs) {
        let header = header?;
        if header.id == id {
            return Ok(Some(header));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext_header(id: u16, version: u8, next: u16) -> u32 {
        ExtCapHeader { offset: 0, id, version, next }.to_raw()
    }

    fn space_with_ext(headers: &[(u16, u32)]) -> ConfigSpace {
        let mut cs = ConfigSpace::zeroed(4096).unwrap();
        for &(offset, raw) in headers {
            cs.write_u32(usize::from(offset), raw).unwrap();
        }
        cs
    }

    /// Standard-list config space: status bit set, pointer at 0x34, and
    /// (offset, id, next) entries.
    fn space_with_std(first: u8, entries: &[(u8, u8, u8)]) -> ConfigSpace {
        let mut cs = ConfigSpace::zeroed(256).unwrap();
        cs.write_u16(0x06, STATUS_CAP_LIST).unwrap();
        cs.write_u8(0x34, first).unwrap();
        for &(offset, id, next) in entries {
            cs.write_u8(usize::from(offset), id).unwrap();
            cs.write_u8(usize::from(offset) + 1, next).unwrap();
        }
        cs
    }

    #[test]
    fn header_raw_round_trip() {
        let h = ExtCapHeader::from_raw(0x260, 0x2A01_0017);
        assert_eq!((h.id, h.version, h.next), (0x17, 1, 0x2A0));
        assert_eq!(h.to_raw(), 0x2A01_0017);
    }

    #[test]
    fn walks_extended_list_in_order() {
        let cs = space_with_ext(&[
            (0x100, ext_header(0x0001, 2, 0x260)),
            (0x260, ext_header(0x0017, 1, 0x148)),
            (0x148, ext_header(0x0003, 1, 0)),
        ]);
        let caps = list_ext_caps(&cs).unwrap();
        let summary: Vec<_> = caps.iter().map(|h| (h.offset, h.id, h.version)).collect();
        assert_eq!(summary, vec![(0x100, 0x0001, 2), (0x260, 0x0017, 1), (0x148, 0x0003, 1)]);
        assert_eq!(find_ext_cap(&cs, 0x17).unwrap().unwrap().offset, 0x260);
        assert_eq!(find_ext_cap(&cs, 0x0B).unwrap(), None);
    }

    #[test]
    fn empty_extended_list() {
        assert_eq!(list_ext_caps(&space_with_ext(&[])).unwrap(), vec![]);
        let all_ones = space_with_ext(&[(0x100, u32::MAX)]);
        assert_eq!(list_ext_caps(&all_ones).unwrap(), vec![]);
    }

    #[test]
    fn extended_list_loop_is_reported() {
        let cs = space_with_ext(&[(0x100, ext_header(0x0001, 2, 0x200)), (0x200, ext_header(0x0017, 1, 0x100))]);
        let items: Vec<_> = ext_caps(&cs).collect();
        assert_eq!(items.len(), 3);
        assert!(items[0].is_ok() && items[1].is_ok());
        assert_eq!(items[2], Err(CapError::Loop { from: 0x200, pointer: 0x100 }));
        // A capability pointing at itself.
        let cs = space_with_ext(&[(0x100, ext_header(0x0001, 1, 0x100))]);
        assert_eq!(list_ext_caps(&cs), Err(CapError::Loop { from: 0x100, pointer: 0x100 }));
    }

    #[test]
    fn extended_pointer_below_base_and_unaligned() {
        let cs = space_with_ext(&[(0x100, ext_header(0x0001, 1, 0x0FC))]);
        assert_eq!(list_ext_caps(&cs), Err(CapError::PointerBelowBase { from: 0x100, pointer: 0x0FC }));
        let cs = space_with_ext(&[(0x100, ext_header(0x0001, 1, 0x202))]);
        assert_eq!(list_ext_caps(&cs), Err(CapError::Unaligned { from: 0x100, pointer: 0x202 }));
    }

    #[test]
    fn extended_walk_on_truncated_dump() {
        let cs = ConfigSpace::zeroed(256).unwrap();
        assert_eq!(list_ext_caps(&cs), Err(CapError::Truncated { offset: 0x100, len: 256 }));
        // The list points past the end of a 1 KiB dump.
        let mut cs = ConfigSpace::zeroed(0x400).unwrap();
        cs.write_u32(0x100, ext_header(1, 1, 0x800)).unwrap();
        assert_eq!(list_ext_caps(&cs), Err(CapError::Truncated { offset: 0x800, len: 0x400 }));
    }

    #[test]
    fn walks_standard_list() {
        let cs = space_with_std(0x40, &[(0x40, 0x10, 0xA0), (0xA0, 0x11, 0)]);
        let caps = list_std_caps(&cs).unwrap();
        assert_eq!(
            caps,
            vec![StdCapHeader { offset: 0x40, id: 0x10, next: 0xA0 }, StdCapHeader { offset: 0xA0, id: 0x11, next: 0 }]
        );
        assert_eq!(find_std_cap(&cs, 0x11).unwrap().unwrap().offset, 0xA0);
        assert_eq!(find_std_cap(&cs, 0x05).unwrap(), None);
    }

    #[test]
    fn standard_list_absent_without_status_bit() {
        let mut cs = space_with_std(0x40, &[(0x40, 0x10, 0)]);
        cs.write_u16(0x06, 0).unwrap();
        assert_eq!(list_std_caps(&cs).unwrap(), vec![]);
    }

    #[test]
    fn standard_list_cardbus_pointer() {
        let mut cs = space_with_std(0, &[(0x80, 0x01, 0)]);
        cs.write_u8(0x0E, 0x02).unwrap();
        cs.write_u8(0x14, 0x80).unwrap();
        assert_eq!(list_std_caps(&cs).unwrap().len(), 1);
    }

    #[test]
    fn standard_list_errors() {
        let cs = space_with_std(0x20, &[]);
        assert_eq!(list_std_caps(&cs), Err(CapError::PointerBelowBase { from: 0x34, pointer: 0x20 }));
        let cs = space_with_std(0x41, &[]);
        assert_eq!(list_std_caps(&cs), Err(CapError::Unaligned { from: 0x34, pointer: 0x41 }));
        let cs = space_with_std(0x40, &[(0x40, 0x10, 0x50), (0x50, 0x11, 0x40)]);
        assert_eq!(list_std_caps(&cs), Err(CapError::Loop { from: 0x50, pointer: 0x40 }));
        let cs = space_with_std(0x40, &[(0x40, 0x10, 0x3C)]);
        assert_eq!(list_std_caps(&cs), Err(CapError::PointerBelowBase { from: 0x40, pointer: 0x3C }));
        // A 64-byte unprivileged dump: the pointer leads past the end.
        let mut cs = ConfigSpace::zeroed(64).unwrap();
        cs.write_u16(0x06, STATUS_CAP_LIST).unwrap();
        cs.write_u8(0x34, 0x40).unwrap();
        assert_eq!(list_std_caps(&cs), Err(CapError::Truncated { offset: 0x40, len: 64 }));
        let cs = ConfigSpace::zeroed(4).unwrap();
        assert_eq!(list_std_caps(&cs), Err(CapError::Truncated { offset: 6, len: 4 }));
    }

    #[test]
    fn every_walk_terminates_on_arbitrary_bytes() {
        // A deterministic pseudo-random fill exercises odd pointer patterns.
        let mut seed = 0x1234_5678u32;
        for _ in 0..200 {
            let bytes: Vec<u8> = (0..4096)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    (seed >> 8) as u8
                })
                .collect();
            let cs = ConfigSpace::from_bytes(&bytes).unwrap();
            assert!(ext_caps(&cs).count() <= 1025);
            assert!(std_caps(&cs).count() <= 65);

            // Force every extended pointer to be valid-looking, so only
            // loop detection can end the walk.
            let mut cs = cs;
            for offset in (0x100..0x1000).step_by(4) {
                let raw = cs.read_u32(offset).unwrap();
                let next = ((raw >> 20) & 0xFFC).max(0x100);
                cs.write_u32(offset, (raw & 0xF_FFFF) | (next << 20) | 1).unwrap();
            }
            let last = ext_caps(&cs).last().unwrap();
            assert!(matches!(last, Err(CapError::Loop { .. })), "{last:?}");
        }
    }
}
