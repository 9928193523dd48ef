//! `steer tph` on the hex fixture as it arrives in practice (tests/data/damaged, each made from
//! tests/data/lspci-xxxx-tph.txt): with a stray byte a mailer or an editor left in it, or with the
//! e-mail or the prose around it. Each reads as the clean dump does.

use steer_tph::report::{describe, read_named_devices, Source};
use steer_tph::ConfigSpace;

fn data(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn stray_bytes_and_the_text_around_a_dump_change_nothing() {
    let clean = describe(&data("lspci-xxxx-tph.txt")).unwrap();
    assert!(clean.starts_with("41:00.0 Ethernet controller: Broadcom Inc. and subsidiaries"), "{clean}");
    for name in ["latin1-line.txt", "nul-bytes.txt", "mail-quoted-hex.eml", "prose-around-hex.txt"] {
        assert_eq!(describe(&data(&format!("damaged/{name}"))), Ok(clean.clone()), "{name}");
    }
    // A byte that is not UTF-8 in a device's name shows as U+FFFD there, and nowhere else.
    let renamed = describe(&data("damaged/latin1-in-name.txt")).unwrap();
    assert_eq!(renamed, clean.replace("Broadcom Inc.", "Broadc\u{fffd}m Inc."));
}

#[test]
fn a_stray_byte_inside_a_hex_line_is_named_by_its_line() {
    let mut dump = data("lspci-xxxx-tph.txt");
    let at = dump.windows(4).position(|w| w == b"10: ").unwrap() + 4;
    dump[at] = 0xe9;
    let line = dump[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    assert_eq!(describe(&dump), Err(format!("line {line}: bad hex byte \"\u{fffd}c\"")));
    // Prose between two lines of one dump is damage too, not something to pass over.
    let text = String::from_utf8(data("lspci-xxxx-tph.txt")).unwrap().replacen("\n10: ", "\nsee below\n10: ", 1);
    let line = text.lines().position(|l| l == "see below").unwrap() + 1;
    assert_eq!(describe(text.as_bytes()), Err(format!("line {line}: unrecognised line \"see below\"")));
}

#[test]
fn binary_data_is_a_config_space_only_if_it_can_be_one() {
    assert_eq!(
        describe(&[0x86, 0x80, 0x10, 0x15, 0, 0, 0, 0, 0, 0]),
        Err("not a config-space dump: 10 bytes, fewer than the 64-byte header of every PCI function".into())
    );
    let mut large = vec![0u8; 14841];
    large[..4].copy_from_slice(&[0x86, 0x80, 0x10, 0x15]);
    assert_eq!(
        describe(&large),
        Err("neither text nor a config-space dump: 14841 bytes of binary data (a config space has at most 4096)".into())
    );
    // A dump's offset past 4 KiB is out of range, not a dump unrecognised.
    assert_eq!(
        describe(b"ffff0: 00 11 22 33\n"),
        Err("line 1: offset ffff0 out of range (configuration space ends at 0xfff)".into())
    );
}

#[test]
fn a_sysfs_config_file_is_labelled_with_its_bus_address() {
    let space = nic_with(|_| {});
    let devices = read_named_devices(&space, Some("0000:41:00.0")).unwrap();
    assert_eq!((devices[0].label.as_str(), devices[0].source), ("0000:41:00.0", Source::Registers));
    assert!(describe(&space).unwrap().starts_with("device\n"));
}

/// The fixture's NIC with its TPH capability (at 0x260) changed by `damage`.
fn nic_with(damage: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let text = String::from_utf8(data("lspci-xxxx-tph.txt")).unwrap();
    let mut bytes = ConfigSpace::parse_lspci_hex(&text).unwrap().remove(0).1.to_bytes();
    damage(&mut bytes);
    bytes
}

#[test]
fn a_capability_pointing_to_itself_breaks_its_list() {
    // The TPH capability's next pointer (bits 31:20 of its header) back to 0x260.
    let looped = nic_with(|b| b[0x262..0x264].copy_from_slice(&((0x260u16 << 4) | 1).to_le_bytes()));
    let out = describe(&looped).unwrap();
    assert!(out.contains("Transaction Processing Hints"), "{out}");
    assert!(
        out.ends_with(
            "\tnote: extended capability list broken: capability list loops: pointer at 0x260 returns to 0x260; \
             nothing past it is read\n"
        ),
        "{out}"
    );
    // The PCI Express capability (at 0xa0) pointing to itself.
    let looped = nic_with(|b| b[0xa1] = 0xa0);
    let out = describe(&looped).unwrap();
    assert!(
        out.contains(
            "\tnote: standard capability list broken: capability list loops: pointer at 0xa0 returns to 0xa0; \
             nothing past it is read\n"
        ),
        "{out}"
    );
}

#[test]
fn an_unreadable_tph_capability_is_said_to_be_there_once() {
    // A steering table of 2048 entries in the capability: more than the config space holds.
    let huge = nic_with(|b| b[0x266..0x268].copy_from_slice(&0x07ffu16.to_le_bytes()));
    let out = describe(&huge).unwrap();
    let body: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(body[body.len() - 2], "\tTPH Requester capability at 0x260: present but unreadable");
    assert!(body[body.len() - 1].starts_with("\tnote: TPH Requester capability at 0x260 unreadable: "), "{out}");
    assert!(!out.contains("no TPH Requester capability"), "{out}");
}
