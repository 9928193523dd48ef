//! What `steer tph FILE` prints: the TPH capability of every device in a file, in lspci's words
//! plus the fields lspci hides. The file may be a binary config-space dump, `lspci -x`/`-xxx`/
//! `-xxxx` hex, or `lspci -vv` text, also as an e-mail quotes it (`> ` prefixes, quoted-printable,
//! lines wrapped by the mailer). Each device is read on its own: a damaged capability list is
//! reported on that device and the others are still read.

use std::borrow::Cow;
use std::fmt::Write;

use crate::caps::{ext_caps, std_caps, CapError};
use crate::config::{is_pci_address, ConfigSpace, CONFIG_SPACE_SIZE};
use crate::error::TphError;
use crate::lspci::{format_lspci_like, parse_lspci_devices, LspciTph};
use crate::pcie::{find_pcie, TphCompleter};
use crate::tph::{decode_at, TphCapability, TPH_CAP_ID};

/// Where a device's report was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Configuration-space registers (a binary dump or lspci hex).
    Registers,
    /// lspci's decoded text.
    LspciText,
}

/// One device of a `steer tph` input.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceReport {
    /// The device's header line (`01:00.0 Ethernet controller: ...`), or `device`.
    pub label: String,
    /// Whether registers or lspci text were read.
    pub source: Source,
    /// Whether the device is a PCI Express root port; `None` when the input does not say.
    pub root_port: Option<bool>,
    /// The TPH Completer field of the device's own DevCap2. Only a root port's decides whether
    /// the hints its devices send are honoured.
    pub completer: Option<TphCompleter>,
    /// The TPH Requester capability decoded from registers.
    pub capability: Option<TphCapability>,
    /// The TPH Requester capability as lspci's text shows it (offset `None`: lspci shows none).
    pub shown: Option<LspciTph>,
    /// Where a TPH Requester capability is whose registers could not be decoded (`problems`
    /// says why).
    pub unreadable_requester: Option<u16>,
    /// Whether the whole capability list was read, so that no capability means none.
    pub list_complete: bool,
    /// Damage found: a broken capability list, an unreadable capability (one line each).
    pub problems: Vec<String>,
    /// What the input does not hold: a dump too short, capabilities lspci could not read.
    pub missing: Option<String>,
}

impl DeviceReport {
    fn new(label: &str, source: Source) -> DeviceReport {
        DeviceReport {
            label: label.to_string(),
            source,
            root_port: None,
            completer: None,
            capability: None,
            shown: None,
            unreadable_requester: None,
            list_complete: true,
            problems: Vec::new(),
            missing: None,
        }
    }
}

/// Every device in `bytes`; the error is one line.
pub fn read_devices(bytes: &[u8]) -> Result<Vec<DeviceReport>, String> {
    read_named_devices(bytes, None)
}

/// Every device in `bytes`, a binary config space labelled `binary_label` (its bus address,
/// from the sysfs path it was read from) rather than `device`; the error is one line.
pub fn read_named_devices(bytes: &[u8], binary_label: Option<&str>) -> Result<Vec<DeviceReport>, String> {
    let Some(text) = as_text(bytes) else {
        return Ok(vec![from_registers(binary_label, &binary(bytes)?)]);
    };
    let text = normalized(&text);
    // A hex dump that reaches the extended space (`-xxxx`) holds every register; lspci's decoded
    // text says more than the 64 or 256 bytes an `-x`/`-xxx` adds to it, so the text wins then.
    let has_hex = text.lines().any(is_dump_line);
    let hex_text = if has_hex { without_prose(&text) } else { String::new() };
    let hex = if has_hex { ConfigSpace::parse_lspci_hex(&hex_text).ok() } else { None };
    let hex_is_complete = hex.as_ref().is_some_and(|d| !d.is_empty() && d.iter().all(|(_, s)| s.len() > 0x100));
    let has_text = text.contains("Capabilities:") || text.contains("DevCap2:");
    let devices: Vec<DeviceReport> = if has_text && !hex_is_complete {
        parse_lspci_devices(&text).map_err(|e| e.to_string())?.into_iter().map(from_text).collect()
    } else if has_hex {
        let devices = match hex {
            Some(devices) => devices,
            None => ConfigSpace::parse_lspci_hex(&hex_text).map_err(|e| e.to_string())?,
        };
        devices.iter().map(|(label, space)| from_registers(label.as_deref(), space)).collect()
    } else {
        Vec::new()
    };
    if devices.is_empty() {
        return Err("no PCI device found (expected lspci -vv text, an lspci -x/-xxx/-xxxx dump or a binary config \
                    space)"
            .into());
    }
    Ok(devices)
}

/// Describes every device in `bytes`; the error is one line.
pub fn describe(bytes: &[u8]) -> Result<String, String> {
    describe_named(bytes, None)
}

/// Describes every device in `bytes`, a binary config space labelled `binary_label`.
pub fn describe_named(bytes: &[u8], binary_label: Option<&str>) -> Result<String, String> {
    Ok(read_named_devices(bytes, binary_label)?.iter().map(describe_device).collect())
}

/// Share of printable ASCII and white space from which bytes are text. A config space is mostly
/// zeros and register values; text is nearly all printable, though a mailer or an editor may
/// have left a stray byte (a Latin-1 letter, NUL padding) in it.
const TEXT_SHARE: f64 = 0.9;

/// `bytes` as text, or `None` for a binary config space. Text need not be clean UTF-8: NULs
/// are dropped, and invalid UTF-8 and other control characters become U+FFFD, so that the line
/// they are on, if it matters, is the one an error names.
fn as_text(bytes: &[u8]) -> Option<Cow<'_, str>> {
    let clean = |t: &str| !t.chars().any(|c| c.is_control() && !matches!(c, '\t' | '\r' | '\n'));
    if let Ok(text) = std::str::from_utf8(bytes) {
        if clean(text) {
            return Some(Cow::Borrowed(text));
        }
    }
    let printable = bytes.iter().filter(|&&b| b.is_ascii_graphic() || b.is_ascii_whitespace()).count();
    if bytes.is_empty() || (printable as f64) < TEXT_SHARE * bytes.len() as f64 {
        return None;
    }
    let lenient = String::from_utf8_lossy(bytes);
    let text = lenient
        .chars()
        .filter(|&c| c != '\0')
        .map(|c| if c.is_control() && !matches!(c, '\t' | '\r' | '\n') { char::REPLACEMENT_CHARACTER } else { c })
        .collect();
    Some(Cow::Owned(text))
}

/// Text as lspci printed it: quoted-printable decoded, e-mail quoting (`> `, `>`, at any depth)
/// removed, and lines a mailer wrapped joined back onto the device line they belong to.
fn normalized(text: &str) -> Cow<'_, str> {
    let text = match quoted_printable(text) {
        Some(decoded) => Cow::Owned(decoded),
        None => Cow::Borrowed(text),
    };
    let mut out = String::with_capacity(text.len());
    let mut in_device = false;
    let mut after_hex = false;
    for line in text.lines().map(unquoted) {
        let column_zero = !line.is_empty() && !line.starts_with(char::is_whitespace);
        let header = column_zero && line.split_whitespace().next().is_some_and(is_pci_address);
        let hex = column_zero && is_hex_line(line);
        // A hex line is far shorter than a mailer's wrap: what follows one is a line of its own.
        let wrapped = in_device && column_zero && !header && !hex && !line.starts_with('#') && !after_hex;
        after_hex = hex;
        if wrapped {
            // lspci indents every line of a device but its header and hex: a mailer wrapped this.
            out.pop();
            if !line.starts_with(']') {
                out.push(' ');
            }
            out.push_str(line.trim_end());
            out.push('\n');
            continue;
        }
        in_device = header || (in_device && !line.trim().is_empty());
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if out == text {
        text
    } else {
        Cow::Owned(out)
    }
}

/// `00: 86 80 ...` or `100: ...`: an lspci hex line.
fn is_hex_line(line: &str) -> bool {
    line.split_once(": ")
        .is_some_and(|(offset, _)| (2..=3).contains(&offset.len()) && offset.chars().all(|c| c.is_ascii_hexdigit()))
}

/// A line at column 0 that is meant as a line of a hex dump, well formed or not: an lspci hex
/// line, or a hex label of any length followed by a byte (`ffff0: 00 ...`, a dump gone wrong).
fn is_dump_line(line: &str) -> bool {
    let mut tokens = line.split_whitespace();
    let label = tokens.next().filter(|_| !line.starts_with(char::is_whitespace)).and_then(|t| t.strip_suffix(':'));
    let is_hex = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_hexdigit());
    label.is_some_and(|label| {
        is_hex(label) && (is_hex_line(line) || tokens.next().is_some_and(|t| t.len() == 2 && is_hex(t)))
    })
}

/// A line of lspci's own at column 0: a device header, a hex line, a comment or a blank line.
/// Everything else lspci indents.
fn is_lspci_line(line: &str) -> bool {
    line.trim().is_empty()
        || line.starts_with(char::is_whitespace)
        || line.starts_with('#')
        || is_dump_line(line)
        || line.split_whitespace().next().is_some_and(is_pci_address)
}

/// The text with what surrounds a hex dump blanked (keeping the line numbers): the e-mail
/// headers it opens with (up to the first blank line), and the prose around and between the
/// dumps (a greeting, `On ... wrote:`, a signature). A line that is not lspci's between two hex
/// lines is kept: it is damage inside a dump, for the parser to name.
fn without_prose(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let header = |line: &str| {
        line.split_once(": ").is_some_and(|(name, _)| {
            name.starts_with(|c: char| c.is_ascii_alphabetic())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
    };
    let mail_headers = match lines.first() {
        Some(first) if first.starts_with("From ") || (header(first) && !is_dump_line(first)) => {
            lines.iter().position(|line| line.trim().is_empty()).unwrap_or(lines.len())
        }
        _ => 0,
    };
    let mut out = String::with_capacity(text.len());
    for (i, line) in lines.iter().enumerate() {
        let inside_dump = i > 0
            && lines.get(i - 1).is_some_and(|l| is_dump_line(l))
            && lines.get(i + 1).is_some_and(|l| is_dump_line(l));
        if i >= mail_headers && (is_lspci_line(line) || inside_dump) {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// A line without its e-mail quote marks.
fn unquoted(line: &str) -> &str {
    let mut rest = line;
    loop {
        let trimmed = rest.trim_start_matches(' ');
        match trimmed.strip_prefix('>') {
            Some(r) => rest = r.strip_prefix(' ').unwrap_or(r),
            None => return rest,
        }
    }
}

/// Decodes a quoted-printable body (RFC 2045: `=XX` bytes, `=` ending a soft-broken line) when
/// the text says it is one or carries its marks; `None` otherwise.
fn quoted_printable(text: &str) -> Option<String> {
    let declared = text.lines().any(|l| l.eq_ignore_ascii_case("content-transfer-encoding: quoted-printable"));
    let marked = text.contains("=3D") && text.lines().any(|l| l.ends_with('='));
    if !declared && !marked {
        return None;
    }
    let mut bytes = Vec::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let content = line.trim_end_matches(['\r', '\n']);
        let (content, soft_break) = match content.strip_suffix('=') {
            Some(rest) => (rest, true),
            None => (content, false),
        };
        let raw = content.as_bytes();
        let mut i = 0;
        while i < raw.len() {
            let escaped = (raw[i] == b'=')
                .then(|| raw.get(i + 1..i + 3))
                .flatten()
                .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
            match escaped {
                Some(byte) => {
                    bytes.push(byte);
                    i += 3;
                }
                None => {
                    bytes.push(raw[i]);
                    i += 1;
                }
            }
        }
        if !soft_break && line.ends_with('\n') {
            bytes.push(b'\n');
        }
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The 64-byte header every PCI function has: a binary dump holds at least that (an
/// unprivileged read of sysfs `config` gives exactly it).
const HEADER_BYTES: usize = 64;

fn binary(bytes: &[u8]) -> Result<ConfigSpace, String> {
    if bytes.len() > CONFIG_SPACE_SIZE {
        return Err(format!(
            "neither text nor a config-space dump: {} bytes of binary data (a config space has at most \
             {CONFIG_SPACE_SIZE})",
            bytes.len()
        ));
    }
    if bytes.len() < HEADER_BYTES {
        return Err(format!(
            "not a config-space dump: {} bytes, fewer than the {HEADER_BYTES}-byte header of every PCI function",
            bytes.len()
        ));
    }
    ConfigSpace::from_bytes(bytes).map_err(|e| format!("not a config-space dump: {e}"))
}

/// Reads a device's registers: its PCI Express capability, then the extended list up to the TPH
/// capability or the first break in the list.
pub fn from_registers(label: Option<&str>, space: &ConfigSpace) -> DeviceReport {
    let mut report = DeviceReport::new(label.unwrap_or("device"), Source::Registers);
    // The whole standard list is walked: damage after the PCI Express capability (one pointing
    // to itself, say) is damage all the same. A dump cut short is the PCIe capability's concern.
    let std_broken = std_caps(space).find_map(Result::err).filter(|e| !matches!(e, CapError::Truncated { .. }));
    match find_pcie(space) {
        Ok(Some(pcie)) => {
            report.root_port = Some(pcie.is_root_port());
            report.completer = Some(pcie.tph_completer());
        }
        Ok(None) => report.root_port = Some(false),
        Err(TphError::Walk(_)) if std_broken.is_some() => {}
        Err(error) => report.problems.push(format!("PCI Express capability unreadable: {error}")),
    }
    if let Some(error) = std_broken {
        report.problems.push(format!("standard capability list broken: {error}; nothing past it is read"));
    }
    // A 256-byte dump has no extended capabilities to decode; say so rather than fail.
    if space.len() <= 0x100 {
        report.missing = Some("no extended configuration space in this dump (lspci -xxxx, as root, shows it)".into());
        report.list_complete = false;
        return report;
    }
    // Walked to its end past the TPH capability, so that a list that loops there is reported.
    let mut tph_at = None;
    for header in ext_caps(space) {
        match header {
            Ok(header) if header.id == TPH_CAP_ID => {
                tph_at = tph_at.or(Some(header.offset));
            }
            Ok(_) => {}
            Err(error @ CapError::Truncated { .. }) => {
                report.missing = Some(format!("the dump ends inside the extended capability list: {error}"));
                report.list_complete = false;
                break;
            }
            Err(error) => {
                report.problems.push(format!("extended capability list broken: {error}; nothing past it is read"));
                report.list_complete = false;
                break;
            }
        }
    }
    if let Some(offset) = tph_at {
        match decode_at(space, offset) {
            Ok(capability) => report.capability = Some(capability),
            Err(error) => {
                report.unreadable_requester = Some(offset);
                report.problems.push(format!("TPH Requester capability at {offset:#x} unreadable: {error}"));
            }
        }
    }
    report
}

fn from_text(shown: LspciTph) -> DeviceReport {
    let mut report = DeviceReport::new(&shown.device, Source::LspciText);
    report.root_port = shown.port_type.as_deref().map(|t| t == "Root Port");
    report.completer = shown.completer;
    if shown.access_denied {
        report.missing = Some("lspci could not read the capabilities (run it as root)".into());
        report.list_complete = false;
    }
    report.shown = Some(shown);
    report
}

/// The DevCap2 flags with what they mean for this device.
fn completer_line(report: &DeviceReport, completer: TphCompleter) -> String {
    let meaning = match report.root_port {
        Some(true) => "this root port's completer support: whether hints of the devices below it are honoured",
        Some(false) => "the device's own completer support; its root port's decides whether its hints are honoured",
        None => "the device's completer support",
    };
    format!("\tDevCap2: {} ({meaning})\n", completer.lspci_flags())
}

fn describe_device(report: &DeviceReport) -> String {
    let mut out = format!("{}\n", report.label);
    if let Some(completer) = report.completer {
        out.push_str(&completer_line(report, completer));
    }
    let root_completer = report.completer.filter(|_| report.root_port == Some(true));
    if let Some(capability) = &report.capability {
        out.push_str(&format_lspci_like(capability, root_completer));
    } else if let Some(shown) = report.shown.as_ref().filter(|s| s.cap_offset.is_some()) {
        out.push_str(&describe_shown(shown));
    } else if let Some(offset) = report.unreadable_requester {
        let _ = writeln!(out, "\tTPH Requester capability at {offset:#x}: present but unreadable");
    } else if report.list_complete {
        out.push_str("\tno TPH Requester capability\n");
    } else {
        out.push_str("\tTPH Requester capability: unknown (not in what could be read)\n");
    }
    for note in report.problems.iter().chain(&report.missing) {
        let _ = writeln!(out, "\tnote: {note}");
    }
    out
}

fn describe_shown(device: &LspciTph) -> String {
    let mut out = String::new();
    let offset = device.cap_offset.unwrap_or_default();
    let version = device.version.map(|v| format!(" v{v}")).unwrap_or_default();
    let _ = writeln!(out, "\tCapabilities: [{offset:03x}{version}] Transaction Processing Hints");
    for (shown, text) in [
        (device.interrupt_vector, "Interrupt vector mode supported"),
        (device.device_specific, "Device specific mode supported"),
        (device.extended_requester, "Extended requester support"),
    ] {
        if shown {
            let _ = writeln!(out, "\t\t{text}");
        }
    }
    if let Some(location) = device.st_table_location {
        let _ = writeln!(out, "\t\t{}", location.lspci_text());
    }
    out.push_str("\t(lspci text does not show the No-ST bit, table size, control or entries)\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_every_input_form() {
        let hex = include_str!("../tests/data/lspci-xxxx-tph.txt");
        let from_hex = describe(hex.as_bytes()).unwrap();
        assert!(from_hex.contains("Transaction Processing Hints"), "{from_hex}");
        // The 256-byte root port: its completer bits labelled as a root port's, no extended space.
        let root_port = from_hex.split_inclusive('\n').skip_while(|l| !l.starts_with("40:01.1")).collect::<String>();
        assert!(
            root_port.contains("\tDevCap2: TPHComp+ ExtTPHComp- (this root port's completer support"),
            "{root_port}"
        );
        assert!(root_port.contains("\tTPH Requester capability: unknown (not in what could be read)\n"), "{root_port}");
        assert!(root_port.contains("\tnote: no extended configuration space in this dump"), "{root_port}");
        let vv = include_str!("../tests/data/lspci-vv-tph.txt");
        let from_text = describe(vv.as_bytes()).unwrap();
        assert!(from_text.contains("[260 v1] Transaction Processing Hints"), "{from_text}");
        assert!(from_text.contains("TPHComp+"), "{from_text}");
        let (_, space) = ConfigSpace::parse_lspci_hex(hex).unwrap().remove(0);
        let from_binary = describe(&space.to_bytes()).unwrap();
        assert!(from_binary.contains("Not shown by lspci"), "{from_binary}");
        assert!(describe(b"").is_err());
    }

    #[test]
    fn a_verbose_dump_with_the_extended_space_is_decoded_from_its_hex() {
        // `lspci -vvxxxx`: lspci's text, then every register. The hex shows what the text hides.
        let hex = include_str!("../tests/data/lspci-xxxx-tph.txt");
        let device: String = hex.lines().skip_while(|l| !l.starts_with("41:00.0")).take_while(|l| !l.is_empty()).fold(
            String::new(),
            |mut out, line| {
                out.push_str(line);
                out.push('\n');
                if line.starts_with("41:00.0") {
                    out.push_str("\tCapabilities: [260 v1] Transaction Processing Hints\n");
                }
                out
            },
        );
        let out = describe(device.as_bytes()).unwrap();
        assert!(out.contains("Not shown by lspci"), "{out}");
        // With only the first 256 bytes in hex, the text says more and is used.
        let extended = |l: &str| {
            l.split_once(": ").is_some_and(|(off, _)| off.len() > 2 && off.chars().all(|c| c.is_ascii_hexdigit()))
        };
        let short: String = device.lines().filter(|l| !extended(l)).map(|l| format!("{l}\n")).collect();
        assert_eq!(read_devices(short.as_bytes()).unwrap()[0].source, Source::LspciText);
        assert_eq!(read_devices(device.as_bytes()).unwrap()[0].source, Source::Registers);
        let out = describe(short.as_bytes()).unwrap();
        assert!(!out.contains("Not shown by lspci"), "{out}");
        assert!(out.contains("[260 v1] Transaction Processing Hints"), "{out}");
    }

    #[test]
    fn every_device_of_the_text_is_named_with_or_without_tph() {
        let text = "01:00.0 NIC\n\tCapabilities: [40] Power Management version 3\n\n02:00.0 Disk\n\tCapabilities: <access denied>\n";
        assert_eq!(
            describe(text.as_bytes()).unwrap(),
            "01:00.0 NIC\n\tno TPH Requester capability\n\
             02:00.0 Disk\n\tTPH Requester capability: unknown (not in what could be read)\n\
             \tnote: lspci could not read the capabilities (run it as root)\n"
        );
    }

    #[test]
    fn a_root_ports_devcap2_is_labelled_as_the_root_ports() {
        let text = "00:01.1 PCI bridge: Root\n\tCapabilities: [58] Express (v2) Root Port (Slot+), MSI 00\n\
                    \t\tDevCap2: Completion Timeout: Range ABCD, TimeoutDis+ TPHComp+ ExtTPHComp-\n";
        let out = describe(text.as_bytes()).unwrap();
        assert_eq!(
            out,
            "00:01.1 PCI bridge: Root\n\tDevCap2: TPHComp+ ExtTPHComp- (this root port's completer support: whether \
             hints of the devices below it are honoured)\n\tno TPH Requester capability\n"
        );
        let devices = read_devices(text.replace("Root Port (Slot+)", "Endpoint").as_bytes()).unwrap();
        assert_eq!(devices[0].root_port, Some(false));
        let devices =
            read_devices(text.replace("\tCapabilities: [58] Express (v2) Root Port (Slot+), MSI 00\n", "").as_bytes())
                .unwrap();
        assert_eq!(devices[0].root_port, None);
    }

    #[test]
    fn mail_quoting_encoding_and_wrapping_are_undone() {
        let mail =
            "Content-Transfer-Encoding: quoted-printable\n\n> > 41:00.0 Ethernet controller: Broadcom =\nBCM57416\n\
                    > > NetXtreme-E\n> >\tCapabilities: [260 v1] Transaction Processing Hints\n\
                    > >\t\tInterrupt vector mode supported\n> >\t\tSteering table in MSI-X tab=\nle\n\
                    > >\tStatus: DEVSEL=3Dfast\n";
        let devices = read_devices(mail.as_bytes()).unwrap();
        assert_eq!(devices.len(), 1);
        let shown = devices[0].shown.as_ref().unwrap();
        assert_eq!(shown.device, "41:00.0 Ethernet controller: Broadcom BCM57416 NetXtreme-E");
        assert_eq!(shown.cap_offset, Some(0x260));
        assert!(shown.interrupt_vector);
        assert_eq!(shown.st_table_location, Some(crate::tph::StTableLocation::MsixTable));
        // Without the header, `=3D` and soft breaks still mark quoted-printable text.
        let unmarked = mail.replace("Content-Transfer-Encoding: quoted-printable\n", "");
        assert_eq!(read_devices(unmarked.as_bytes()).unwrap(), devices);
        // Plain lspci output is left as it is.
        assert_eq!(normalized("01:00.0 NIC\n\tStatus: DEVSEL=fast\n"), "01:00.0 NIC\n\tStatus: DEVSEL=fast\n");
        assert!(matches!(normalized("01:00.0 NIC\n\tStatus: x\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn quoted_printable_bytes_and_soft_breaks() {
        assert_eq!(quoted_printable("a=3Db=\nc\nd=E2=80=AFe\n").as_deref(), Some("a=bc\nd\u{202f}e\n"));
        assert_eq!(quoted_printable("size=3D2=\nM\n=ZZ\n").as_deref(), Some("size=2M\n=ZZ\n"));
        assert_eq!(quoted_printable("no marks here=\n"), None);
        assert_eq!(unquoted("> > >\tx"), "\tx");
        assert_eq!(unquoted(">>x"), "x");
        assert_eq!(unquoted("\tx > y"), "\tx > y");
    }

    #[test]
    fn quoting_alone_and_wrapping_alone_are_each_undone() {
        let quoted = "> 01:00.0 NIC\n>\tCapabilities: [100 v1] Transaction Processing Hints\n";
        assert_eq!(normalized(quoted), "01:00.0 NIC\n\tCapabilities: [100 v1] Transaction Processing Hints\n");
        let wrapped = "01:00.0 Ethernet controller: Example\nNIC (rev 01)\n\tStatus: x\nDEVSEL=fast\n\n# note\n";
        assert_eq!(
            normalized(wrapped),
            "01:00.0 Ethernet controller: Example NIC (rev 01)\n\tStatus: x DEVSEL=fast\n\n# note\n"
        );
        // Hex lines and comments at column 0 are lspci's own, not wrapped text.
        let hex = "01:00.0 NIC\n00: 86 80 33 15\n# cut here\n";
        assert!(matches!(normalized(hex), Cow::Borrowed(_)));
        // A blank line ends the device: prose after it is left alone.
        let prose = "01:00.0 NIC\n\tStatus: x\n\nHi Jeff,\nthanks\n";
        assert!(matches!(normalized(prose), Cow::Borrowed(_)));
    }

    #[test]
    fn hex_lines_are_two_or_three_hex_digits_and_a_colon() {
        for line in ["00: 86 80", "1f0: 00 00", "fff: 00"] {
            assert!(is_hex_line(line), "{line}");
        }
        for line in ["Max: 5", "0: 00", "abcd: 00", "0g: 00", "00:86"] {
            assert!(!is_hex_line(line), "{line}");
        }
    }

    #[test]
    fn a_binary_config_space_that_happens_to_be_utf8_is_read_as_registers() {
        // Vendor 0x1234, device 0x5678 and zeros: valid UTF-8, but with control characters.
        let mut space = vec![0u8; 256];
        space[..4].copy_from_slice(&[0x34, 0x12, 0x78, 0x56]);
        let devices = read_devices(&space).unwrap();
        assert_eq!((devices.len(), devices[0].source), (1, Source::Registers));
    }
}
