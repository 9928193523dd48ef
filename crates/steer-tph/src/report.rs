//! What `steer tph FILE` prints: the TPH capability of every device in a file, in lspci's words
//! plus the fields lspci hides. The file may be a binary config-space dump, `lspci -xxx`/`-xxxx`
//! hex, or `lspci -vv` text.

use std::fmt::Write;

use crate::config::ConfigSpace;
use crate::lspci::{format_lspci_like, parse_lspci_vv, LspciTph};
use crate::pcie::tph_completer;
use crate::tph::decode;

/// Describes every device in `bytes`; the error is one line.
pub fn describe(bytes: &[u8]) -> Result<String, String> {
    // Text is UTF-8 without control characters but tabs and line ends; anything else is a
    // binary config space (which has zero bytes).
    let is_text = |t: &str| !t.chars().any(|c| c.is_control() && !matches!(c, '\t' | '\r' | '\n'));
    let text = match std::str::from_utf8(bytes) {
        Ok(text) if is_text(text) => unquoted(text),
        _ => return describe_space(None, &binary(bytes)?),
    };
    // A hex dump that reaches the extended space (`-xxxx`) holds every register; lspci's decoded
    // text says more than the 64 or 256 bytes an `-x`/`-xxx` adds to it, so the text wins then.
    let has_hex = text.lines().any(|l| l.len() > 3 && l.starts_with("00: "));
    let hex = if has_hex { ConfigSpace::parse_lspci_hex(&text).ok() } else { None };
    let hex_is_complete = hex.as_ref().is_some_and(|d| !d.is_empty() && d.iter().all(|(_, s)| s.len() > 0x100));
    let has_text = text.contains("Capabilities:") || text.contains("DevCap2:");
    let out = if has_text && !hex_is_complete {
        let devices = parse_lspci_vv(&text).map_err(|e| e.to_string())?;
        devices.iter().map(describe_lspci).collect()
    } else if has_hex {
        let devices = match hex {
            Some(devices) => devices,
            None => ConfigSpace::parse_lspci_hex(&text).map_err(|e| e.to_string())?,
        };
        let mut out = String::new();
        for (label, space) in devices {
            out.push_str(&describe_space(label.as_deref(), &space)?);
        }
        out
    } else {
        String::new()
    };
    if out.is_empty() {
        return Err("no PCI device found (expected lspci -vv text, an lspci -x/-xxx/-xxxx dump or a binary config \
                    space)"
            .into());
    }
    Ok(out)
}

/// The text without e-mail quoting (`> ` or `>` before every line, at any depth), when every
/// non-blank line is quoted.
fn unquoted(text: &str) -> std::borrow::Cow<'_, str> {
    let quoted = |l: &str| l.trim_start().starts_with('>');
    if !text.lines().filter(|l| !l.trim().is_empty()).all(quoted) || text.trim().is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let strip = |l: &str| {
        let mut rest = l.trim_start();
        while let Some(r) = rest.strip_prefix('>') {
            rest = r.strip_prefix(' ').unwrap_or(r);
        }
        rest.to_string()
    };
    std::borrow::Cow::Owned(text.lines().map(strip).collect::<Vec<_>>().join("\n"))
}

fn binary(bytes: &[u8]) -> Result<ConfigSpace, String> {
    ConfigSpace::from_bytes(bytes).map_err(|e| format!("not a config-space dump: {e}"))
}

fn describe_space(label: Option<&str>, space: &ConfigSpace) -> Result<String, String> {
    let mut out = String::new();
    let _ = writeln!(out, "{}", label.unwrap_or("device"));
    let completer = tph_completer(space).map_err(|e| e.to_string())?;
    if let Some(completer) = completer {
        let _ = writeln!(out, "\tDevCap2: {}", completer.lspci_flags());
    }
    // A 256-byte dump has no extended capabilities to decode; say so rather than fail.
    if space.len() <= 0x100 {
        let _ = writeln!(out, "\t(no extended configuration space in this dump)");
        return Ok(out);
    }
    match decode(space).map_err(|e| e.to_string())? {
        Some(cap) => out.push_str(&format_lspci_like(&cap, completer)),
        None => out.push_str("\tno TPH Requester capability\n"),
    }
    Ok(out)
}

fn describe_lspci(device: &LspciTph) -> String {
    let mut out = format!("{}\n", device.device);
    if let Some(completer) = device.completer {
        let _ = writeln!(out, "\tDevCap2: {}", completer.lspci_flags());
    }
    match device.cap_offset {
        Some(offset) => {
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
        }
        None => out.push_str("\tno TPH Requester capability\n"),
    }
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
        let out = describe(short.as_bytes()).unwrap();
        assert!(!out.contains("Not shown by lspci"), "{out}");
        assert!(out.contains("[260 v1] Transaction Processing Hints"), "{out}");
    }
}
