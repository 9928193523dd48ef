//! The error type shared by the register decoders and encoders.

use std::fmt;

use crate::caps::CapError;

/// Result with [`TphError`] as the default error.
pub type Result<T, E = TphError> = std::result::Result<T, E>;

/// Error from decoding or encoding TPH, MSI-X or PCI Express capability
/// registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TphError {
    /// The capability list could not be walked safely.
    Walk(CapError),
    /// The registers of the capability at `offset` span bytes
    /// `offset..end`, but the config space holds only `len` bytes.
    Truncated {
        /// Capability offset.
        offset: u16,
        /// One past the last byte needed.
        end: usize,
        /// Bytes held by the config space.
        len: usize,
    },
    /// The TPH capability at `offset` declares a steering table of
    /// `table_size` entries in the capability, but only `available` whole
    /// entries fit in the held bytes.
    StTableTruncated {
        /// TPH capability offset.
        offset: u16,
        /// Declared number of entries.
        table_size: u16,
        /// Whole entries present in the data.
        available: u16,
    },
    /// The extended capability at `offset` has ID `id`, not TPH Requester.
    NotTph {
        /// Capability offset.
        offset: u16,
        /// The ID found there.
        id: u16,
    },
    /// A capability offset is not usable for this structure (outside its
    /// region of config space or not dword aligned).
    BadOffset {
        /// The offending offset.
        offset: u16,
    },
    /// A field value does not fit its register field.
    InvalidField {
        /// Field name as in the Rust struct.
        field: &'static str,
        /// The value that does not fit.
        value: u32,
    },
    /// The steering table entries do not match the declared table: with
    /// the table in the capability there must be exactly `table_size`
    /// entries, otherwise none.
    StTableLength {
        /// Declared number of entries.
        table_size: u16,
        /// Entries supplied.
        entries: usize,
    },
    /// A raw MSI-X table must be a whole number of 16-byte entries.
    MsixTableLength {
        /// Length given, in bytes.
        len: usize,
    },
    /// MSI-X table entry `index` does not exist; the table has `entries`.
    MsixEntryOutOfRange {
        /// Requested entry.
        index: usize,
        /// Number of entries in the table.
        entries: usize,
    },
}

impl fmt::Display for TphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TphError::Walk(e) => write!(f, "{e}"),
            TphError::Truncated { offset, end, len } => write!(
                f,
                "capability at {offset:#x} needs bytes up to {end:#x}, but the config space holds only {len:#x}"
            ),
            TphError::StTableTruncated {
                offset,
                table_size,
                available,
            } => write!(
                f,
                "TPH capability at {offset:#x} declares {table_size} steering table entries, but only {available} are present"
            ),
            TphError::NotTph { offset, id } => write!(
                f,
                "extended capability at {offset:#x} has ID {id:#06x}, not TPH Requester (0x0017)"
            ),
            TphError::BadOffset { offset } => {
                write!(f, "capability offset {offset:#x} is not valid here")
            }
            TphError::InvalidField { field, value } => {
                write!(f, "value {value:#x} does not fit field {field}")
            }
            TphError::StTableLength {
                table_size,
                entries,
            } => write!(
                f,
                "{entries} steering table entries given for a declared table of {table_size}"
            ),
            TphError::MsixTableLength { len } => {
                write!(f, "MSI-X table of {len} bytes is not a multiple of 16")
            }
            TphError::MsixEntryOutOfRange { index, entries } => write!(
                f,
                "MSI-X table entry {index} out of range (table has {entries})"
            ),
        }
    }
}

impl std::error::Error for TphError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TphError::Walk(e) => Some(e),
            _ => None,
        }
    }
}

impl From<CapError> for TphError {
    fn from(e: CapError) -> Self {
        TphError::Walk(e)
    }
}
