//! The text fixtures under tests/data, plus damage done to them.

use steer_tph::synth::DeviceBuilder;
use steer_tph::{
    decode, encode, find_msix, format_lspci_like, list_ext_caps, parse_lspci_vv, tph_completer, CapError, ConfigSpace,
    HexError, HexLineError, LspciTph, MsixCapability, RequesterEnable, StMode, StTableLocation, TphCompleter, TphError,
};

const LSPCI_VV: &str = include_str!("data/lspci-vv-tph.txt");
const LSPCI_HEX: &str = include_str!("data/lspci-xxxx-tph.txt");

fn hex_devices() -> Vec<(Option<String>, ConfigSpace)> {
    ConfigSpace::parse_lspci_hex(LSPCI_HEX).unwrap()
}

fn fixture_nic() -> ConfigSpace {
    hex_devices().remove(0).1
}

#[test]
fn lspci_vv_fixture() {
    let devices = parse_lspci_vv(LSPCI_VV).unwrap();
    assert_eq!(devices.len(), 3);

    let new_root_port = &devices[0];
    assert_eq!(new_root_port.slot(), "c0:01.1");
    assert_eq!(new_root_port.cap_offset, None);
    assert_eq!(new_root_port.completer, Some(TphCompleter::TphOnly));

    let nic = &devices[1];
    assert_eq!(
        nic,
        &LspciTph {
            device: "c1:00.0 Ethernet controller: Broadcom Inc. and subsidiaries BCM57508 \
                     NetXtreme-E 10Gb/25Gb/40Gb/50Gb/100Gb/200Gb Ethernet (rev 11)"
                .to_string(),
            cap_offset: Some(0x260),
            version: Some(1),
            interrupt_vector: true,
            device_specific: true,
            extended_requester: false,
            st_table_location: Some(StTableLocation::MsixTable),
            // The NIC's own DevCap2: it is no completer.
            completer: Some(TphCompleter::None),
            port_type: Some("Endpoint".into()),
            access_denied: false,
        }
    );

    let old_root_port = &devices[2];
    assert_eq!(old_root_port.slot(), "00:03.1");
    assert_eq!(old_root_port.completer, Some(TphCompleter::TphOnly));
    assert_eq!(old_root_port.cap_offset, None);
}

#[test]
fn synthesized_nic_reads_like_the_lspci_fixture() {
    // A simulated NIC configured like the fixture prints the same lspci view.
    let seen = &parse_lspci_vv(LSPCI_VV).unwrap()[1];
    let mut tph = steer_tph::TphCapability::new(seen.cap_offset.unwrap(), seen.st_table_location.unwrap(), 74);
    tph.interrupt_vector = seen.interrupt_vector;
    tph.device_specific = seen.device_specific;
    tph.extended_requester = seen.extended_requester;
    let cs = DeviceBuilder::endpoint(0x14e4, 0x1750).msix(MsixCapability::new(0xA0, 74, 4)).tph(tph).build().unwrap();
    let decoded = decode(&cs).unwrap().unwrap();
    let text = format!("{}\n{}", seen.device, format_lspci_like(&decoded, None));
    let mut reparsed = parse_lspci_vv(&text).unwrap().remove(0);
    // The Express capability and its DevCap2 are not part of the TPH view.
    reparsed.completer = seen.completer;
    reparsed.port_type = seen.port_type.clone();
    assert_eq!(&reparsed, seen);
}

#[test]
fn hex_fixture_devices_and_labels() {
    let devices = hex_devices();
    assert_eq!(devices.len(), 2);
    assert_eq!(
        devices[0].0.as_deref(),
        Some("41:00.0 Ethernet controller: Broadcom Inc. and subsidiaries Device 1750 (rev 11)")
    );
    assert_eq!(devices[0].1.len(), 4096);
    assert_eq!(devices[1].0.as_deref(), Some("40:01.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Device 14ab"));
    assert_eq!(devices[1].1.len(), 256);
}

#[test]
fn hex_fixture_nic_decodes() {
    let cs = fixture_nic();
    let ext: Vec<(u16, u16)> = list_ext_caps(&cs).unwrap().iter().map(|h| (h.offset, h.id)).collect();
    assert_eq!(ext, vec![(0x100, 0x0001), (0x13c, 0x0003), (0x260, 0x0017), (0x300, 0x0019)]);

    let cap = decode(&cs).unwrap().unwrap();
    assert_eq!(cap.offset, 0x260);
    assert_eq!(cap.next, 0x300);
    assert!(cap.no_st && cap.interrupt_vector && cap.device_specific);
    assert!(!cap.extended_requester);
    assert_eq!(cap.st_table_location, StTableLocation::InCapability);
    assert_eq!(cap.st_table_size, 8);
    assert_eq!(cap.mode, StMode::InterruptVector);
    assert_eq!(cap.requester_enable, RequesterEnable::TphOnly);
    assert_eq!(cap.st_table, vec![0x00, 0x01, 0x02, 0x03, 0x10, 0x11, 0x12, 0x13]);

    let msix = find_msix(&cs).unwrap().unwrap();
    assert_eq!((msix.offset, msix.table_size, msix.enabled), (0xA0, 74, true));
    assert_eq!((msix.table_bir, msix.table_offset), (4, 0));
    assert_eq!((msix.pba_bir, msix.pba_offset), (4, 0x1000));
    assert_eq!(tph_completer(&cs), Ok(Some(TphCompleter::None)));

    let text = format_lspci_like(&cap, None);
    assert!(text.contains("\t\tSteering table in TPH capability structure\n"));
    assert!(text.contains("\t\tST[7] = 0x0013\n"));
}

#[test]
fn hex_fixture_round_trips() {
    let cs = fixture_nic();
    let cap = decode(&cs).unwrap().unwrap();
    let mut copy = cs.clone();
    for i in 0..cap.byte_len() {
        copy.write_u8(0x260 + i, 0xEE).unwrap();
    }
    encode(&cap, &mut copy).unwrap();
    assert_eq!(copy, cs);

    // Text round trip: formatting reproduces the fixture's hex lines.
    let nic_lines: String =
        LSPCI_HEX.lines().skip_while(|l| !l.starts_with("00:")).take(256).map(|l| format!("{l}\n")).collect();
    assert_eq!(cs.to_lspci_hex(), nic_lines);
}

#[test]
fn hex_fixture_root_port() {
    let root_port = hex_devices().remove(1).1;
    assert_eq!(tph_completer(&root_port), Ok(Some(TphCompleter::TphOnly)));
    // A 256-byte dump cannot show extended capabilities.
    assert_eq!(decode(&root_port), Err(TphError::Walk(CapError::Truncated { offset: 0x100, len: 256 })));
}

#[test]
fn damaged_fixture_lists() {
    let nic = fixture_nic();
    let set_next = |at: usize, next: u32| {
        let mut cs = nic.clone();
        let header = cs.read_u32(at).unwrap();
        cs.write_u32(at, (header & 0xF_FFFF) | (next << 20)).unwrap();
        cs
    };
    // DSN points back to AER: the walk never reaches TPH.
    assert_eq!(decode(&set_next(0x13c, 0x100)), Err(TphError::Walk(CapError::Loop { from: 0x13c, pointer: 0x100 })));
    assert_eq!(
        decode(&set_next(0x100, 0x0A0)),
        Err(TphError::Walk(CapError::PointerBelowBase { from: 0x100, pointer: 0x0A0 }))
    );
    assert_eq!(
        decode(&set_next(0x13c, 0x262)),
        Err(TphError::Walk(CapError::Unaligned { from: 0x13c, pointer: 0x262 }))
    );
    // Damage after the TPH capability does not hide it.
    let cap = decode(&set_next(0x260, 0x100)).unwrap().unwrap();
    assert_eq!(cap.next, 0x100);
    assert!(list_ext_caps(&set_next(0x260, 0x100)).is_err());
}

#[test]
fn truncated_fixture_dumps() {
    let nic = fixture_nic();
    let cut = |len: usize| ConfigSpace::from_bytes(&nic.as_bytes()[..len]).unwrap();
    // Cut inside the steering table: 2 of 8 entries remain.
    assert_eq!(decode(&cut(0x270)), Err(TphError::StTableTruncated { offset: 0x260, table_size: 8, available: 2 }));
    // Cut inside the control register.
    assert_eq!(decode(&cut(0x26A)), Err(TphError::Truncated { offset: 0x260, end: 0x26C, len: 0x26A }));
    // Cut before the TPH header.
    assert_eq!(decode(&cut(0x200)), Err(TphError::Walk(CapError::Truncated { offset: 0x260, len: 0x200 })));
    // The same through the hex parser: a dump that simply stops early.
    let short_text: String = LSPCI_HEX.lines().take(5 + 1 + 0x27).map(|l| format!("{l}\n")).collect();
    let devices = ConfigSpace::parse_lspci_hex(&short_text).unwrap();
    assert_eq!(devices[0].1.len(), 0x270);
    assert!(matches!(decode(&devices[0].1), Err(TphError::StTableTruncated { .. })));
}

#[test]
fn damaged_hex_text() {
    // Corrupt one byte on the fixture's line 10 (offset 0x30 of the NIC).
    let broken: String = LSPCI_HEX
        .lines()
        .enumerate()
        .map(|(i, l)| if i + 1 == 10 { format!("{}\n", l.replacen(" 48", " 4x", 1)) } else { format!("{l}\n") })
        .collect();
    assert_eq!(
        ConfigSpace::parse_lspci_hex(&broken),
        Err(HexError::Line { line: 10, kind: HexLineError::BadByte("4x".into()) })
    );
    assert_eq!(ConfigSpace::parse_lspci_hex(""), Err(HexError::NoData));
    assert_eq!(parse_lspci_vv("").unwrap(), vec![]);
}
