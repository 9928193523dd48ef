//! Raw configuration space bytes, plus reading and writing `lspci -x` hex dumps.

use std::fmt;

/// Size of a complete PCIe configuration space (4 KiB).
pub const CONFIG_SPACE_SIZE: usize = 4096;

/// Size of the PCI-compatible region. Extended capabilities start at this
/// offset, so a dump of this size or less has none.
pub const LEGACY_CONFIG_SIZE: usize = 256;

/// Bytes printed per line by `lspci -x`.
const HEX_BYTES_PER_LINE: usize = 16;

/// Error from reading, writing or building a [`ConfigSpace`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// No bytes were given; a config space holds at least one byte.
    Empty,
    /// More than [`CONFIG_SPACE_SIZE`] bytes were given.
    TooLong {
        /// Number of bytes given.
        len: usize,
    },
    /// An access of `width` bytes at `offset` reaches past the `len` bytes
    /// held (either a truncated dump or an offset beyond 4 KiB).
    OutOfBounds {
        /// First byte of the access.
        offset: usize,
        /// Access width in bytes.
        width: usize,
        /// Number of bytes held.
        len: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Empty => write!(f, "config space is empty"),
            ConfigError::TooLong { len } => {
                write!(f, "config space of {len} bytes exceeds the {CONFIG_SPACE_SIZE}-byte maximum")
            }
            ConfigError::OutOfBounds { offset, width, len } => {
                write!(f, "{width}-byte access at {offset:#x} is past the end of the {len}-byte config space")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// What is wrong with one line of an `lspci -x` hex dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HexLineError {
    /// The offset label before the colon is not a hexadecimal number.
    BadOffset(String),
    /// The offset label is a hexadecimal number past the end of configuration space.
    OffsetOutOfRange(String),
    /// The line's offset does not continue the current device's dump
    /// (lines must be contiguous and in order, starting at 0).
    OutOfOrder {
        /// Offset the next line should have had.
        expected: usize,
        /// Offset the line has.
        found: usize,
    },
    /// A byte token is not exactly two hexadecimal digits.
    BadByte(String),
    /// The line has an offset label but no bytes.
    NoBytes,
    /// The line has more than 16 bytes.
    TooManyBytes(usize),
    /// The line would take the dump past 4096 bytes.
    PastEnd,
    /// A line at column 0 that is neither a hex line, a device header line
    /// (`01:00.0 ...`), a comment (`#`) nor blank.
    Unrecognised(String),
}

/// Error from [`ConfigSpace::parse_lspci_hex`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HexError {
    /// The text holds no hex dump lines at all (for example an empty file).
    NoData,
    /// Line `line` (1-based) is malformed.
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        kind: HexLineError,
    },
}

impl fmt::Display for HexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HexError::NoData => write!(f, "no lspci hex dump lines found"),
            HexError::Line { line, kind } => {
                write!(f, "line {line}: ")?;
                match kind {
                    HexLineError::BadOffset(s) => write!(f, "bad offset label {s:?}"),
                    HexLineError::OffsetOutOfRange(s) => {
                        write!(f, "offset {s} out of range (configuration space ends at {:#x})", CONFIG_SPACE_SIZE - 1)
                    }
                    HexLineError::OutOfOrder { expected, found } => {
                        write!(f, "offset {found:#x} out of order, expected {expected:#x}")
                    }
                    HexLineError::BadByte(s) => write!(f, "bad hex byte {s:?}"),
                    HexLineError::NoBytes => write!(f, "no bytes after the offset label"),
                    HexLineError::TooManyBytes(n) => {
                        write!(f, "{n} bytes on one line, at most {HEX_BYTES_PER_LINE} allowed")
                    }
                    HexLineError::PastEnd => {
                        write!(f, "dump runs past {CONFIG_SPACE_SIZE} bytes")
                    }
                    HexLineError::Unrecognised(s) => write!(f, "unrecognised line {s:?}"),
                }
            }
        }
    }
}

impl std::error::Error for HexError {}

/// A device's configuration space: between 1 and 4096 bytes starting at
/// offset 0.
///
/// Dumps shorter than 4096 bytes are *truncated*: `lspci -xxx` gives 256
/// bytes, unprivileged reads give 64. Every read or write past the held
/// bytes is an error, never a silent zero, so code walking a truncated dump
/// learns that the data it wanted is missing.
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigSpace {
    bytes: Vec<u8>,
}

impl fmt::Debug for ConfigSpace {
    // Printing thousands of bytes helps nobody; show the size only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigSpace").field("len", &self.bytes.len()).finish()
    }
}

impl ConfigSpace {
    /// An all-zero config space of `len` bytes (1..=4096).
    pub fn zeroed(len: usize) -> Result<Self, ConfigError> {
        check_len(len)?;
        Ok(Self { bytes: vec![0; len] })
    }

    /// Copies a binary dump (such as `/sys/bus/pci/devices/*/config`).
    /// Accepts 1..=4096 bytes; anything shorter than 4096 is truncated.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ConfigError> {
        check_len(bytes.len())?;
        Ok(Self { bytes: bytes.to_vec() })
    }

    /// Number of bytes held (1..=4096).
    #[allow(clippy::len_without_is_empty)] // never empty by construction
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True when fewer than 4096 bytes are held.
    pub fn is_truncated(&self) -> bool {
        self.bytes.len() < CONFIG_SPACE_SIZE
    }

    /// The held bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// A copy of the held bytes, suitable for writing a binary dump.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.bytes.clone()
    }

    fn range(&self, offset: usize, width: usize) -> Result<std::ops::Range<usize>, ConfigError> {
        let len = self.bytes.len();
        match offset.checked_add(width) {
            Some(end) if end <= len => Ok(offset..end),
            _ => Err(ConfigError::OutOfBounds { offset, width, len }),
        }
    }

    /// Reads the byte at `offset`; errors past the held bytes.
    pub fn read_u8(&self, offset: usize) -> Result<u8, ConfigError> {
        let r = self.range(offset, 1)?;
        Ok(self.bytes[r.start])
    }

    /// Reads the little-endian u16 at `offset`; errors past the held bytes.
    /// No alignment is required.
    pub fn read_u16(&self, offset: usize) -> Result<u16, ConfigError> {
        let r = self.range(offset, 2)?;
        Ok(u16::from_le_bytes(self.bytes[r].try_into().expect("2 bytes")))
    }

    /// Reads the little-endian u32 at `offset`; errors past the held bytes.
    /// No alignment is required.
    pub fn read_u32(&self, offset: usize) -> Result<u32, ConfigError> {
        let r = self.range(offset, 4)?;
        Ok(u32::from_le_bytes(self.bytes[r].try_into().expect("4 bytes")))
    }

    /// Writes one byte at `offset`; errors (writing nothing) past the held bytes.
    pub fn write_u8(&mut self, offset: usize, value: u8) -> Result<(), ConfigError> {
        let r = self.range(offset, 1)?;
        self.bytes[r.start] = value;
        Ok(())
    }

    /// Writes a little-endian u16 at `offset`; errors (writing nothing)
    /// past the held bytes.
    pub fn write_u16(&mut self, offset: usize, value: u16) -> Result<(), ConfigError> {
        let r = self.range(offset, 2)?;
        self.bytes[r].copy_from_slice(&value.to_le_bytes());
        Ok(())
    }

    /// Writes a little-endian u32 at `offset`; errors (writing nothing)
    /// past the held bytes.
    pub fn write_u32(&mut self, offset: usize, value: u32) -> Result<(), ConfigError> {
        let r = self.range(offset, 4)?;
        self.bytes[r].copy_from_slice(&value.to_le_bytes());
        Ok(())
    }

    /// Parses `lspci -x`/`-xxx`/`-xxxx` output into one config space per
    /// device, in file order.
    ///
    /// Accepted lines:
    /// * hex lines `OFF: b0 b1 ... b15` at column 0 (offset in hex, up to 16
    ///   two-digit bytes); a device's lines must be contiguous from offset 0;
    /// * a device header line at column 0 starting with a PCI address
    ///   (`01:00.0 Ethernet ...` or `0000:01:00.0 ...`), which labels the
    ///   dump that follows (the label is the whole line, trailing space
    ///   removed);
    /// * blank lines, which end a device's dump;
    /// * indented lines (the `-v` detail lines) and `#` comments, ignored.
    ///
    /// A new device also starts when a hex line at offset 0 follows data.
    /// A header line with no hex lines after it is dropped. Any other
    /// line, or a malformed hex line, is an error naming the 1-based line;
    /// text with no hex lines at all is [`HexError::NoData`].
    pub fn parse_lspci_hex(text: &str) -> Result<Vec<(Option<String>, ConfigSpace)>, HexError> {
        let mut devices = Vec::new();
        let mut label: Option<String> = None;
        let mut data: Vec<u8> = Vec::new();

        // Moves the dump collected so far (if any) into `devices`.
        fn finish(devices: &mut Vec<(Option<String>, ConfigSpace)>, label: &mut Option<String>, data: &mut Vec<u8>) {
            if !data.is_empty() {
                let bytes = std::mem::take(data);
                devices.push((label.take(), ConfigSpace { bytes }));
            }
        }

        for (index, raw_line) in text.lines().enumerate() {
            let line_no = index + 1;
            let line = raw_line.trim_end();
            let err = |kind| HexError::Line { line: line_no, kind };

            if line.is_empty() {
                finish(&mut devices, &mut label, &mut data);
                continue;
            }
            if line.starts_with(char::is_whitespace) || line.starts_with('#') {
                continue;
            }

            let first = line.split_whitespace().next().unwrap_or("");
            if let Some(offset_text) = first.strip_suffix(':') {
                let is_hex = !offset_text.is_empty() && offset_text.bytes().all(|b| b.is_ascii_hexdigit());
                let offset = match parse_hex_offset(offset_text) {
                    Some(offset) if offset < CONFIG_SPACE_SIZE => offset,
                    _ if is_hex => return Err(err(HexLineError::OffsetOutOfRange(offset_text.to_string()))),
                    _ => return Err(err(HexLineError::BadOffset(offset_text.to_string()))),
                };
                if offset == 0 && !data.is_empty() {
                    finish(&mut devices, &mut label, &mut data);
                }
                if offset != data.len() {
                    return Err(err(HexLineError::OutOfOrder { expected: data.len(), found: offset }));
                }
                let line_bytes = parse_hex_bytes(&line[first.len()..]).map_err(err)?;
                if data.len() + line_bytes.len() > CONFIG_SPACE_SIZE {
                    return Err(err(HexLineError::PastEnd));
                }
                data.extend_from_slice(&line_bytes);
            } else if is_pci_address(first) {
                finish(&mut devices, &mut label, &mut data);
                label = Some(line.to_string());
            } else {
                return Err(err(HexLineError::Unrecognised(line.to_string())));
            }
        }
        finish(&mut devices, &mut label, &mut data);

        if devices.is_empty() {
            Err(HexError::NoData)
        } else {
            Ok(devices)
        }
    }

    /// Formats the held bytes as `lspci -x` does: 16 bytes per line,
    /// `OFF:` label in lowercase hex (at least two digits), each byte as
    /// ` xx`, newline-terminated. No device header line is written.
    /// [`ConfigSpace::parse_lspci_hex`] reads the result back unchanged.
    pub fn to_lspci_hex(&self) -> String {
        let mut out = String::with_capacity(self.bytes.len() * 3 + self.bytes.len() / 4);
        for (line, chunk) in self.bytes.chunks(HEX_BYTES_PER_LINE).enumerate() {
            out.push_str(&format!("{:02x}:", line * HEX_BYTES_PER_LINE));
            for b in chunk {
                out.push_str(&format!(" {b:02x}"));
            }
            out.push('\n');
        }
        out
    }
}

fn check_len(len: usize) -> Result<(), ConfigError> {
    if len == 0 {
        Err(ConfigError::Empty)
    } else if len > CONFIG_SPACE_SIZE {
        Err(ConfigError::TooLong { len })
    } else {
        Ok(())
    }
}

fn parse_hex_offset(text: &str) -> Option<usize> {
    // Bounded length keeps absurd labels from overflowing; real ones are 2-3 digits.
    if text.is_empty() || text.len() > 4 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    usize::from_str_radix(text, 16).ok()
}

fn parse_hex_bytes(text: &str) -> Result<Vec<u8>, HexLineError> {
    let mut bytes = Vec::with_capacity(HEX_BYTES_PER_LINE);
    for token in text.split_whitespace() {
        if token.len() != 2 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(HexLineError::BadByte(token.to_string()));
        }
        bytes.push(u8::from_str_radix(token, 16).expect("validated hex"));
    }
    match bytes.len() {
        0 => Err(HexLineError::NoBytes),
        n if n > HEX_BYTES_PER_LINE => Err(HexLineError::TooManyBytes(n)),
        _ => Ok(bytes),
    }
}

/// True for `bb:dd.f` or `dddd:bb:dd.f` (hex bus/device, function 0-7),
/// the form lspci starts each device's header line with.
pub(crate) fn is_pci_address(token: &str) -> bool {
    let is_hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let Some((rest, function)) = token.rsplit_once('.') else {
        return false;
    };
    if !(function.len() == 1 && matches!(function.as_bytes()[0], b'0'..=b'7')) {
        return false;
    }
    let parts: Vec<&str> = rest.split(':').collect();
    match parts.as_slice() {
        [bus, dev] => is_hex(bus, 2) && is_hex(dev, 2),
        [domain, bus, dev] => is_hex(domain, 4) && is_hex(bus, 2) && is_hex(dev, 2),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_bytes_accepts_1_to_4096() {
        assert_eq!(ConfigSpace::from_bytes(&[]), Err(ConfigError::Empty));
        assert_eq!(ConfigSpace::from_bytes(&[0; 4097]), Err(ConfigError::TooLong { len: 4097 }));
        let short = ConfigSpace::from_bytes(&[0; 256]).unwrap();
        assert!(short.is_truncated());
        let full = ConfigSpace::from_bytes(&[0; 4096]).unwrap();
        assert!(!full.is_truncated());
    }

    #[test]
    fn reads_are_little_endian_and_bounds_checked() {
        let cs = ConfigSpace::from_bytes(&[0x86, 0x80, 0x34, 0x12, 0xff]).unwrap();
        assert_eq!(cs.read_u16(0), Ok(0x8086));
        assert_eq!(cs.read_u32(0), Ok(0x1234_8086));
        assert_eq!(cs.read_u32(1), Ok(0xff12_3480));
        assert_eq!(cs.read_u8(4), Ok(0xff));
        assert_eq!(cs.read_u32(2), Err(ConfigError::OutOfBounds { offset: 2, width: 4, len: 5 }));
        assert!(cs.read_u8(5).is_err());
        assert!(cs.read_u16(usize::MAX).is_err());
    }

    #[test]
    fn writes_are_bounds_checked_and_atomic() {
        let mut cs = ConfigSpace::zeroed(6).unwrap();
        cs.write_u32(0, 0xdead_beef).unwrap();
        assert_eq!(cs.as_bytes(), &[0xef, 0xbe, 0xad, 0xde, 0, 0]);
        assert!(cs.write_u32(4, 1).is_err());
        // A failed write leaves the bytes untouched.
        assert_eq!(cs.as_bytes()[4..], [0, 0]);
        cs.write_u16(4, 0x0102).unwrap();
        cs.write_u8(0, 0x11).unwrap();
        assert_eq!(cs.to_bytes(), vec![0x11, 0xbe, 0xad, 0xde, 0x02, 0x01]);
    }

    #[test]
    fn hex_dump_round_trips() {
        let bytes: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        let cs = ConfigSpace::from_bytes(&bytes).unwrap();
        let text = cs.to_lspci_hex();
        assert!(text.starts_with("00: 03 0a 11"));
        assert!(text.contains("\n100: "));
        assert!(text.contains("\nff0: "));
        let parsed = ConfigSpace::parse_lspci_hex(&text).unwrap();
        assert_eq!(parsed, vec![(None, cs)]);
    }

    #[test]
    fn hex_dump_multiple_devices_with_labels() {
        let text = "\
01:00.0 Ethernet controller: Example NIC
00: e4 14 50 17 06 04 10 00 11 00 00 02 10 00 00 00
10: 0c 00 41 fe ff 2b 00 00

0000:00:01.1 PCI bridge: Example root port
\tControl: I/O+ Mem+ BusMaster+
00: 22 10 83 14 07 04 10 00 00 00 04 06 10 00 81 00
00: aa bb
";
        let devices = ConfigSpace::parse_lspci_hex(text).unwrap();
        assert_eq!(devices.len(), 3);
        assert_eq!(devices[0].0.as_deref(), Some("01:00.0 Ethernet controller: Example NIC"));
        assert_eq!(devices[0].1.len(), 24);
        assert_eq!(devices[0].1.read_u16(0), Ok(0x14e4));
        assert_eq!(devices[1].0.as_deref(), Some("0000:00:01.1 PCI bridge: Example root port"));
        assert_eq!(devices[1].1.len(), 16);
        // Offset 0 after data starts an unlabelled device.
        assert_eq!(devices[2].0, None);
        assert_eq!(devices[2].1.as_bytes(), &[0xaa, 0xbb]);
    }

    #[test]
    fn hex_dump_errors_carry_line_numbers() {
        let cases: &[(&str, HexError)] = &[
            ("", HexError::NoData),
            ("\n\n# nothing here\n", HexError::NoData),
            ("01:00.0 NIC\n00: 00 11 2g\n", HexError::Line { line: 2, kind: HexLineError::BadByte("2g".into()) }),
            ("00: 00 11 222\n", HexError::Line { line: 1, kind: HexLineError::BadByte("222".into()) }),
            (
                "00: 00\n20: 11\n",
                HexError::Line { line: 2, kind: HexLineError::OutOfOrder { expected: 1, found: 0x20 } },
            ),
            ("10: 00\n", HexError::Line { line: 1, kind: HexLineError::OutOfOrder { expected: 0, found: 0x10 } }),
            ("zz: 00\n", HexError::Line { line: 1, kind: HexLineError::BadOffset("zz".into()) }),
            ("00:\n", HexError::Line { line: 1, kind: HexLineError::NoBytes }),
            (
                "00: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n",
                HexError::Line { line: 1, kind: HexLineError::TooManyBytes(17) },
            ),
            ("garbage here\n", HexError::Line { line: 1, kind: HexLineError::Unrecognised("garbage here".into()) }),
        ];
        for (text, expected) in cases {
            assert_eq!(ConfigSpace::parse_lspci_hex(text).as_ref().err(), Some(expected), "input {text:?}");
        }
        // Past 4096 bytes.
        let mut text = ConfigSpace::zeroed(4096).unwrap().to_lspci_hex();
        text.push_str("1000: 00\n");
        let past = HexError::Line { line: 257, kind: HexLineError::OffsetOutOfRange("1000".into()) };
        assert_eq!(ConfigSpace::parse_lspci_hex(&text), Err(past));
        assert_eq!(
            ConfigSpace::parse_lspci_hex("ffff0: 00\n").unwrap_err().to_string(),
            "line 1: offset ffff0 out of range (configuration space ends at 0xfff)"
        );
        let mut text = ConfigSpace::zeroed(4088).unwrap().to_lspci_hex();
        text.push_str("ff8: 00 00 00 00 00 00 00 00 00\n");
        assert_eq!(ConfigSpace::parse_lspci_hex(&text), Err(HexError::Line { line: 257, kind: HexLineError::PastEnd }));
    }

    #[test]
    fn pci_address_forms() {
        assert!(is_pci_address("01:00.0"));
        assert!(is_pci_address("0000:c1:1f.7"));
        assert!(!is_pci_address("01:00.8"));
        assert!(!is_pci_address("00:"));
        assert!(!is_pci_address("1:00.0"));
        assert!(!is_pci_address("Capabilities:"));
        // Each part of a domain-qualified address is checked.
        assert!(!is_pci_address("000g:c1:1f.7"));
        assert!(!is_pci_address("0000:c:1f.7"));
    }

    #[test]
    fn hex_offsets_are_one_to_four_hex_digits() {
        assert_eq!(parse_hex_offset("ff0"), Some(0xFF0));
        assert_eq!(parse_hex_offset("fff0"), Some(0xFFF0));
        assert_eq!(parse_hex_offset("10000"), None);
        assert_eq!(parse_hex_offset(""), None);
        assert_eq!(parse_hex_offset("+10"), None);
    }

    #[test]
    fn hex_errors_name_their_line() {
        let err = HexError::Line { line: 3, kind: HexLineError::BadByte("zz".into()) };
        assert_eq!(err.to_string(), "line 3: bad hex byte \"zz\"");
        assert_eq!(HexError::NoData.to_string(), "no lspci hex dump lines found");
        let past = ConfigSpace::zeroed(256).unwrap().read_u32(0xFE).unwrap_err();
        assert_eq!(past.to_string(), "4-byte access at 0xfe is past the end of the 256-byte config space");
    }

    #[test]
    fn debug_shows_the_length_not_the_bytes() {
        assert_eq!(format!("{:?}", ConfigSpace::zeroed(256).unwrap()), "ConfigSpace { len: 256 }");
    }
}
