//! Reading TPH information out of `lspci -vv` text, and printing a decoded
//! capability the way lspci would (plus what lspci leaves out).
//!
//! lspci prints the TPH Requester capability as (indented with one tab,
//! detail lines with two)
//!
//! ```text
//!     Capabilities: [260 v1] Transaction Processing Hints
//!         Interrupt vector mode supported
//!         Device specific mode supported
//!         Steering table in MSI-X table
//! ```
//!
//! (the ` v1` only at `-vv`, the detail lines only at `-vv` and as root).
//! It never prints the No-ST bit, the table size, the control register or
//! the table entries. The root port's completer support appears among the
//! DevCap2 lines as `TPHComp+ ExtTPHComp-`; older pciutils releases
//! separated the flags with commas (`TPHComp+, ExtTPHComp-`).

use std::fmt::{self, Write as _};

use crate::config::is_pci_address;
use crate::pcie::TphCompleter;
use crate::tph::{StTableLocation, TphCapability};

/// Capability name lspci prints for the TPH Requester capability.
pub const LSPCI_TPH_NAME: &str = "Transaction Processing Hints";

/// Error from [`parse_lspci_vv`]: a TPH `Capabilities:` line whose
/// `[offset vN]` part cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LspciError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for LspciError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for LspciError {}

/// TPH information lspci shows for one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LspciTph {
    /// The device's header line, e.g.
    /// `01:00.0 Ethernet controller: Broadcom Inc. ...`.
    pub device: String,
    /// Offset of the TPH Requester capability, `None` if the device has none.
    pub cap_offset: Option<u16>,
    /// Capability version; `None` when absent (lspci `-v` omits it).
    pub version: Option<u8>,
    /// `Interrupt vector mode supported` was printed.
    pub interrupt_vector: bool,
    /// `Device specific mode supported` was printed.
    pub device_specific: bool,
    /// `Extended requester support` was printed.
    pub extended_requester: bool,
    /// The steering table line, `None` if lspci printed no detail lines
    /// (at `-v`, or without permission). When `None`, the three flags
    /// above carry no information.
    pub st_table_location: Option<StTableLocation>,
    /// From the DevCap2 `TPHComp`/`ExtTPHComp` flags; `None` when they are
    /// absent (no PCI Express capability, not shown, or the reserved value,
    /// which lspci prints as nothing).
    pub completer: Option<TphCompleter>,
    /// The PCI Express device/port type as lspci names it (`Endpoint`, `Root Port`, ...);
    /// `None` without an `Express` capability line.
    pub port_type: Option<String>,
    /// lspci printed `Capabilities: <access denied>` (it was not run as root).
    pub access_denied: bool,
}

impl LspciTph {
    fn new(device: String) -> Self {
        Self {
            device,
            cap_offset: None,
            version: None,
            interrupt_vector: false,
            device_specific: false,
            extended_requester: false,
            st_table_location: None,
            completer: None,
            port_type: None,
            access_denied: false,
        }
    }

    /// The PCI address at the start of the header line (`01:00.0`).
    pub fn slot(&self) -> &str {
        self.device.split_whitespace().next().unwrap_or("")
    }

    fn has_tph_info(&self) -> bool {
        self.cap_offset.is_some() || self.completer.is_some()
    }
}

/// Which part of a device block the parser is in.
#[derive(PartialEq)]
enum Section {
    Other,
    TphCapability,
    DevCap2,
}

/// Extracts TPH information from `lspci -vv` output (also `-v`, `-vvv`, or
/// combined with `-x`).
///
/// A device block starts at a line beginning at column 0 with a PCI address
/// (`01:00.0 ...` or `0000:01:00.0 ...`); text before the first block is
/// ignored. Within a block the parser reads the `Transaction Processing
/// Hints` capability and its detail lines (until the next `Capabilities:`
/// line), and the `TPHComp`/`ExtTPHComp` flags within the `DevCap2:`
/// lines (until `DevCtl2:` or the next `Capabilities:` line), accepting
/// both the spaced and the comma-separated spelling.
///
/// Returns one entry per device that has a TPH capability or shows the
/// completer flags, in file order. Errors only for a TPH capability line
/// whose `[offset vN]` cannot be parsed.
pub fn parse_lspci_vv(text: &str) -> Result<Vec<LspciTph>, LspciError> {
    Ok(parse_lspci_devices(text)?.into_iter().filter(LspciTph::has_tph_info).collect())
}

/// Like [`parse_lspci_vv`], but returns every device block, with or without TPH information.
pub fn parse_lspci_devices(text: &str) -> Result<Vec<LspciTph>, LspciError> {
    let mut found = Vec::new();
    let mut current: Option<LspciTph> = None;
    let mut section = Section::Other;
    // TPHComp and ExtTPHComp flags, gathered separately because they may be
    // split across lines.
    let mut comp_flags: (Option<bool>, Option<bool>) = (None, None);

    fn finish(found: &mut Vec<LspciTph>, current: Option<LspciTph>, comp_flags: (Option<bool>, Option<bool>)) {
        if let Some(mut device) = current {
            if let (Some(tph), ext) = comp_flags {
                device.completer = Some(completer_from_flags(tph, ext.unwrap_or(false)));
            }
            found.push(device);
        }
    }

    for (index, raw_line) in text.lines().enumerate() {
        let line = raw_line.trim_end();
        let first = line.split_whitespace().next().unwrap_or("");
        if !line.starts_with(char::is_whitespace) && is_pci_address(first) {
            finish(&mut found, current.take(), comp_flags);
            current = Some(LspciTph::new(line.to_string()));
            section = Section::Other;
            comp_flags = (None, None);
            continue;
        }
        let Some(device) = current.as_mut() else {
            continue;
        };
        let trimmed = line.trim();

        if let Some(rest) = trimmed.strip_prefix("Capabilities:") {
            section = Section::Other;
            let rest = rest.trim_start();
            device.access_denied |= rest.starts_with("<access denied>");
            if let Some(port_type) = express_port_type(rest) {
                device.port_type.get_or_insert(port_type);
            }
            if let Some((offset, version)) = parse_tph_cap_line(rest, index + 1)? {
                // Only the first TPH capability counts, as for `decode`.
                if device.cap_offset.is_none() {
                    device.cap_offset = Some(offset);
                    device.version = version;
                    section = Section::TphCapability;
                }
            }
            continue;
        }
        if trimmed.starts_with("DevCap2:") {
            section = Section::DevCap2;
        } else if trimmed.starts_with("DevCtl2:") {
            section = Section::Other;
        }

        match section {
            Section::TphCapability => match trimmed {
                "Interrupt vector mode supported" => device.interrupt_vector = true,
                "Device specific mode supported" => device.device_specific = true,
                "Extended requester support" => device.extended_requester = true,
                other => {
                    if let Some(location) = location_from_text(other) {
                        device.st_table_location = Some(location);
                    }
                }
            },
            Section::DevCap2 => {
                for token in trimmed.split_whitespace() {
                    match token.trim_end_matches(',') {
                        "TPHComp+" => comp_flags.0 = Some(true),
                        "TPHComp-" => comp_flags.0 = Some(false),
                        "ExtTPHComp+" => comp_flags.1 = Some(true),
                        "ExtTPHComp-" => comp_flags.1 = Some(false),
                        _ => {}
                    }
                }
            }
            Section::Other => {}
        }
    }
    finish(&mut found, current, comp_flags);
    Ok(found)
}

/// Reads `[OFF vN] Transaction Processing Hints` or `[OFF] ...`.
/// `Ok(None)` for any other capability, or text not in that shape
/// (`<access denied>`).
fn parse_tph_cap_line(rest: &str, line: usize) -> Result<Option<(u16, Option<u8>)>, LspciError> {
    let Some(inner_and_name) = rest.strip_prefix('[') else {
        return Ok(None);
    };
    let Some((inner, name)) = inner_and_name.split_once(']') else {
        return Ok(None);
    };
    if !name.trim_start().starts_with(LSPCI_TPH_NAME) {
        return Ok(None);
    }
    let err = |message: String| LspciError { line, message };
    let mut parts = inner.split_whitespace();
    let offset_text = parts.next().unwrap_or("");
    let offset = u16::from_str_radix(offset_text, 16)
        .ok()
        .filter(|&o| o < 0x1000)
        .ok_or_else(|| err(format!("bad capability offset {offset_text:?}")))?;
    let version = match parts.next() {
        None => None,
        Some(v) => Some(
            v.strip_prefix('v')
                .and_then(|n| n.parse::<u8>().ok())
                .ok_or_else(|| err(format!("bad capability version {v:?}")))?,
        ),
    };
    if let Some(extra) = parts.next() {
        return Err(err(format!("unexpected {extra:?} in capability offset")));
    }
    Ok(Some((offset, version)))
}

/// `[a0] Express (v2) Root Port (Slot+), MSI 00` -> `Root Port`.
fn express_port_type(rest: &str) -> Option<String> {
    let (_, name) = rest.strip_prefix('[')?.split_once(']')?;
    let after = name.trim_start().strip_prefix("Express")?.trim_start();
    let after = match after.strip_prefix('(') {
        Some(versioned) => versioned.split_once(')')?.1.trim_start(),
        None => after,
    };
    let port_type = after.split([',', '(']).next()?.trim();
    (!port_type.is_empty()).then(|| port_type.to_string())
}

fn location_from_text(text: &str) -> Option<StTableLocation> {
    [StTableLocation::None, StTableLocation::InCapability, StTableLocation::MsixTable, StTableLocation::Reserved]
        .into_iter()
        .find(|location| location.lspci_text() == text)
}

fn completer_from_flags(tph: bool, extended: bool) -> TphCompleter {
    // DevCap2 bit 12 is TPHComp and bit 13 ExtTPHComp.
    TphCompleter::from_bits(u8::from(tph) | (u8::from(extended) << 1))
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// Prints `cap` as `lspci -vv` would, then the fields lspci does not show.
///
/// The first part is byte-for-byte lspci's format: a tab, `Capabilities:
/// [OFF vN] Transaction Processing Hints`, then the supported-mode and
/// steering-table lines indented by two tabs. The second part starts with
/// the line `\tNot shown by lspci:` and lists, indented by two tabs, the
/// No-ST bit, the table size, the control register's mode and requester
/// enable, the raw register words, the root port completer when
/// `completer` is given, and each in-capability table entry as
/// `ST[i] = 0xXXXX`. Every line ends with a newline.
pub fn format_lspci_like(cap: &TphCapability, completer: Option<TphCompleter>) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_lspci_like(&mut out, cap, completer);
    out
}

fn write_lspci_like(out: &mut String, cap: &TphCapability, completer: Option<TphCompleter>) -> fmt::Result {
    writeln!(out, "\tCapabilities: [{:03x} v{}] {LSPCI_TPH_NAME}", cap.offset, cap.version)?;
    if cap.interrupt_vector {
        writeln!(out, "\t\tInterrupt vector mode supported")?;
    }
    if cap.device_specific {
        writeln!(out, "\t\tDevice specific mode supported")?;
    }
    if cap.extended_requester {
        writeln!(out, "\t\tExtended requester support")?;
    }
    writeln!(out, "\t\t{}", cap.st_table_location.lspci_text())?;

    writeln!(out, "\tNot shown by lspci:")?;
    let no_st_note = if cap.no_st { "" } else { " (required by the spec)" };
    writeln!(out, "\t\tNo ST mode supported: {}{no_st_note}", yes_no(cap.no_st))?;
    writeln!(out, "\t\tST table size: {}", cap.st_table_size)?;
    writeln!(out, "\t\tControl: ST mode {}, requester enable {}", cap.mode, cap.requester_enable)?;
    writeln!(out, "\t\tRaw: capability {:#010x}, control {:#010x}", cap.raw_capability, cap.raw_control)?;
    if let Some(completer) = completer {
        let flags = match completer {
            TphCompleter::Reserved => "reserved encoding 2".to_string(),
            other => other.lspci_flags().to_string(),
        };
        writeln!(out, "\t\tRoot port completer: {flags}")?;
    }
    for (i, st) in cap.st_table.iter().enumerate() {
        writeln!(out, "\t\tST[{i}] = {st:#06x}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tph::{RequesterEnable, StMode};

    const NEW_SPELLING: &str = "\
00:01.1 PCI bridge: Example root port
\tCapabilities: [58] Express (v2) Root Port (Slot+), MSI 00
\t\tDevCap2: Completion Timeout: Range ABCD, TimeoutDis+ NROPrPrP- LTR+
\t\t\t 10BitTagComp+ 10BitTagReq+ OBFF Not Supported, ExtFmt+ EETLPPrefix+, MaxEETLPPrefixes 1
\t\t\t EmergencyPowerReduction Not Supported, EmergencyPowerReductionInit-
\t\t\t FRS- LN System CLS Not Supported, TPHComp+ ExtTPHComp- ARIFwd+
\t\t\t AtomicOpsCap: Routing+ 32bit+ 64bit+ 128bitCAS-
\t\tDevCtl2: Completion Timeout: 65ms to 210ms, TimeoutDis- LTR+ 10BitTagReq+ OBFF Disabled, ARIFwd-
";

    #[test]
    fn completer_new_and_old_spellings() {
        let parsed = parse_lspci_vv(NEW_SPELLING).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].slot(), "00:01.1");
        assert_eq!(parsed[0].completer, Some(TphCompleter::TphOnly));
        assert_eq!(parsed[0].cap_offset, None);

        let old = NEW_SPELLING.replace("TPHComp+ ExtTPHComp-", "TPHComp+, ExtTPHComp-");
        assert_eq!(parse_lspci_vv(&old).unwrap(), parsed);
        let older = NEW_SPELLING.replace("TPHComp+ ExtTPHComp- ARIFwd+", "TPHComp+, ExtTPHComp-,");
        assert_eq!(parse_lspci_vv(&older).unwrap(), parsed);

        let both = NEW_SPELLING.replace("TPHComp+ ExtTPHComp-", "TPHComp+ ExtTPHComp+");
        assert_eq!(parse_lspci_vv(&both).unwrap()[0].completer, Some(TphCompleter::TphAndExtended));
        let none = NEW_SPELLING.replace("TPHComp+ ExtTPHComp-", "TPHComp-, ExtTPHComp-");
        assert_eq!(parse_lspci_vv(&none).unwrap()[0].completer, Some(TphCompleter::None));
        // The reserved value prints nothing, so the device has no TPH info.
        let reserved = NEW_SPELLING.replace("TPHComp+ ExtTPHComp- ", "");
        assert_eq!(parse_lspci_vv(&reserved).unwrap(), vec![]);
    }

    #[test]
    fn completer_flags_outside_devcap2_are_ignored() {
        let text = "\
00:02.0 Example
\t\tDevCtl2: TPHComp+ ExtTPHComp+
\tCapabilities: [100 v1] Vendor Specific TPHComp+
";
        assert_eq!(parse_lspci_vv(text).unwrap(), vec![]);
    }

    #[test]
    fn requester_capability_lines() {
        let text = "\
41:00.0 Ethernet controller: Example NIC
\tCapabilities: [100 v2] Advanced Error Reporting
\t\tUESta:\tDLP- SDES- TLP-
\tCapabilities: [260 v1] Transaction Processing Hints
\t\tInterrupt vector mode supported
\t\tDevice specific mode supported
\t\tExtended requester support
\t\tSteering table in MSI-X table
\tCapabilities: [300 v1] Secondary PCI Express
\t\tNo steering table available
\tKernel driver in use: bnxt_en
";
        let parsed = parse_lspci_vv(text).unwrap();
        assert_eq!(
            parsed,
            vec![LspciTph {
                device: "41:00.0 Ethernet controller: Example NIC".into(),
                cap_offset: Some(0x260),
                version: Some(1),
                interrupt_vector: true,
                device_specific: true,
                extended_requester: true,
                st_table_location: Some(StTableLocation::MsixTable),
                completer: None,
                port_type: None,
                access_denied: false,
            }]
        );
    }

    #[test]
    fn single_v_output_has_no_version_or_details() {
        let text = "0000:41:00.1 Ethernet controller: NIC\n\tCapabilities: [260] Transaction Processing Hints\n";
        let parsed = parse_lspci_vv(text).unwrap();
        assert_eq!(parsed[0].cap_offset, Some(0x260));
        assert_eq!(parsed[0].version, None);
        assert_eq!(parsed[0].st_table_location, None);
        assert_eq!(parsed[0].slot(), "0000:41:00.1");
    }

    #[test]
    fn malformed_capability_line() {
        let text = "01:00.0 NIC\n\tCapabilities: [2z0 v1] Transaction Processing Hints\n";
        let err = parse_lspci_vv(text).unwrap_err();
        assert_eq!(err.line, 2);
        let text = "01:00.0 NIC\n\tCapabilities: [260 x1] Transaction Processing Hints\n";
        assert_eq!(parse_lspci_vv(text).unwrap_err().line, 2);
        // Extended capabilities lie below 0x1000.
        let text = "01:00.0 NIC\n\tCapabilities: [1000 v1] Transaction Processing Hints\n";
        assert_eq!(parse_lspci_vv(text).unwrap_err().to_string(), "line 2: bad capability offset \"1000\"");
        let text = "01:00.0 NIC\n\tCapabilities: [ffc v1] Transaction Processing Hints\n";
        assert_eq!(parse_lspci_vv(text).unwrap()[0].cap_offset, Some(0xFFC));
        assert_eq!(parse_lspci_vv("").unwrap(), vec![]);
        // Not a TPH line: ignored even if odd.
        let text = "01:00.0 NIC\n\tCapabilities: <access denied>\n";
        assert_eq!(parse_lspci_vv(text).unwrap(), vec![]);
    }

    #[test]
    fn format_matches_lspci_then_extras() {
        let mut cap = TphCapability::new(0x200, StTableLocation::InCapability, 2);
        cap.interrupt_vector = true;
        cap.st_table = vec![0x0001, 0x0102];
        cap.mode = StMode::InterruptVector;
        cap.requester_enable = RequesterEnable::TphOnly;
        cap.raw_capability = cap.capability_word().unwrap();
        cap.raw_control = cap.control_word().unwrap();
        let text = format_lspci_like(&cap, Some(TphCompleter::TphOnly));
        let expected = "\
\tCapabilities: [200 v1] Transaction Processing Hints
\t\tInterrupt vector mode supported
\t\tSteering table in TPH capability structure
\tNot shown by lspci:
\t\tNo ST mode supported: yes
\t\tST table size: 2
\t\tControl: ST mode Interrupt vector, requester enable TPH only
\t\tRaw: capability 0x00010203, control 0x00000101
\t\tRoot port completer: TPHComp+ ExtTPHComp-
\t\tST[0] = 0x0001
\t\tST[1] = 0x0102
";
        assert_eq!(text, expected);

        // The lspci part parses back.
        let parsed = parse_lspci_vv(&format!("01:00.0 NIC\n{text}")).unwrap();
        assert_eq!(parsed[0].cap_offset, Some(0x200));
        assert_eq!(parsed[0].version, Some(1));
        assert!(parsed[0].interrupt_vector && !parsed[0].device_specific);
        assert_eq!(parsed[0].st_table_location, Some(StTableLocation::InCapability));
        // The completer line is not a DevCap2 line.
        assert_eq!(parsed[0].completer, None);
    }

    #[test]
    fn format_flags_missing_no_st() {
        let mut cap = TphCapability::new(0x260, StTableLocation::MsixTable, 64);
        cap.no_st = false;
        let text = format_lspci_like(&cap, None);
        assert!(text.contains("\t\tNo ST mode supported: no (required by the spec)\n"));
        assert!(!text.contains("completer"));
        assert!(!text.contains("ST["));
    }
}
