//! Every ST mode x table location x extended-TPH combination, built from
//! hand-written register bytes (not via `encode`), decoded, re-encoded
//! byte-exactly, printed lspci-style and read back.

use steer_tph::{
    decode, encode, format_lspci_like, list_ext_caps, parse_lspci_vv, ConfigSpace, MsixTable, RequesterEnable, StMode,
    StTableLocation,
};

const TPH_AT: usize = 0x1A0;
const TABLE_SIZE: u16 = 4;

struct Case {
    mode: u32,
    location: u32,
    extended: bool,
}

fn all_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for mode in 0..3 {
        for location in 0..4 {
            for extended in [false, true] {
                cases.push(Case { mode, location, extended });
            }
        }
    }
    cases
}

fn cap_word(case: &Case) -> u32 {
    let supported = match case.mode {
        0 => 0,
        1 => 1 << 1,
        _ => 1 << 2,
    };
    let extended = if case.extended { 1 << 8 } else { 0 };
    1 | supported | extended | (case.location << 9) | (u32::from(TABLE_SIZE - 1) << 16)
}

fn control_word(case: &Case) -> u32 {
    let enable = if case.extended { 3 } else { 1 };
    case.mode | (enable << 8)
}

fn entries(case: &Case) -> Vec<u16> {
    // 16-bit tags only make sense with extended TPH.
    let upper = if case.extended { 0x8000 } else { 0 };
    (0..TABLE_SIZE).map(|i| upper | (0x10 + i)).collect()
}

/// AER at 0x100 -> TPH at 0x1A0 -> DSN at 0x300, with `reserved` OR-ed
/// into the two TPH words.
fn build_space(case: &Case, reserved: (u32, u32)) -> ConfigSpace {
    let mut cs = ConfigSpace::zeroed(4096).unwrap();
    cs.write_u32(0x100, 0x0001 | (2 << 16) | ((TPH_AT as u32) << 20)).unwrap();
    cs.write_u32(TPH_AT, 0x0017 | (1 << 16) | (0x300 << 20)).unwrap();
    cs.write_u32(TPH_AT + 4, cap_word(case) | reserved.0).unwrap();
    cs.write_u32(TPH_AT + 8, control_word(case) | reserved.1).unwrap();
    if case.location == 1 {
        for (i, e) in entries(case).into_iter().enumerate() {
            cs.write_u16(TPH_AT + 0x0C + 2 * i, e).unwrap();
        }
    }
    cs.write_u32(0x300, 0x0003 | (1 << 16)).unwrap();
    cs
}

fn expected_location(location: u32) -> StTableLocation {
    [StTableLocation::None, StTableLocation::InCapability, StTableLocation::MsixTable, StTableLocation::Reserved]
        [location as usize]
}

#[test]
fn decode_every_combination() {
    for case in all_cases() {
        let cs = build_space(&case, (0, 0));
        let cap = decode(&cs).unwrap().expect("TPH present");
        let label = format!("mode {} loc {} ext {}", case.mode, case.location, case.extended);
        assert_eq!(cap.offset as usize, TPH_AT, "{label}");
        assert_eq!(cap.version, 1, "{label}");
        assert_eq!(cap.next, 0x300, "{label}");
        assert!(cap.no_st, "{label}");
        assert_eq!(cap.interrupt_vector, case.mode == 1, "{label}");
        assert_eq!(cap.device_specific, case.mode == 2, "{label}");
        assert_eq!(cap.extended_requester, case.extended, "{label}");
        assert_eq!(cap.st_table_location, expected_location(case.location), "{label}");
        assert_eq!(cap.st_table_size, TABLE_SIZE, "{label}");
        assert_eq!(
            cap.mode,
            [StMode::NoSt, StMode::InterruptVector, StMode::DeviceSpecific][case.mode as usize],
            "{label}"
        );
        assert_eq!(
            cap.requester_enable,
            if case.extended { RequesterEnable::TphAndExtended } else { RequesterEnable::TphOnly },
            "{label}"
        );
        if case.location == 1 {
            assert_eq!(cap.st_table, entries(&case), "{label}");
            assert_eq!(cap.byte_len(), 0x0C + 2 * usize::from(TABLE_SIZE));
        } else {
            assert!(cap.st_table.is_empty(), "{label}");
            assert_eq!(cap.byte_len(), 0x0C);
        }
        // The rest of the list is intact around it.
        let ids: Vec<u16> = list_ext_caps(&cs).unwrap().iter().map(|h| h.id).collect();
        assert_eq!(ids, vec![0x0001, 0x0017, 0x0003]);
    }
}

/// Re-encodes onto a copy whose TPH bytes were wiped, and compares.
fn assert_round_trip(cs: &ConfigSpace, label: &str) {
    let cap = decode(cs).unwrap().unwrap();
    let mut copy = cs.clone();
    for i in 0..cap.byte_len() {
        copy.write_u8(usize::from(cap.offset) + i, 0).unwrap();
    }
    assert_ne!(&copy, cs, "{label}: wipe changed nothing");
    encode(&cap, &mut copy).unwrap();
    assert_eq!(copy.as_bytes(), cs.as_bytes(), "{label}");
}

#[test]
fn round_trip_every_combination() {
    for case in all_cases() {
        let label = format!("mode {} loc {} ext {}", case.mode, case.location, case.extended);
        assert_round_trip(&build_space(&case, (0, 0)), &label);
    }
}

#[test]
fn round_trip_with_reserved_bits_set() {
    const CAP_RESERVED: u32 = 0xF800_F8F8;
    const CONTROL_RESERVED: u32 = 0xFFFF_FCF8;
    let patterns = [
        (CAP_RESERVED, CONTROL_RESERVED),
        (0x0800_0008, 0x0000_0400),
        (0x8000_8000, 0x8000_0008),
        (0x5000_A858, 0xA5A5_A4A8),
    ];
    for case in all_cases() {
        for (cap_bits, control_bits) in patterns {
            let reserved = (cap_bits & CAP_RESERVED, control_bits & CONTROL_RESERVED);
            let cs = build_space(&case, reserved);
            let cap = decode(&cs).unwrap().unwrap();
            // Reserved bits do not leak into the decoded fields.
            assert_eq!(cap.st_table_size, TABLE_SIZE);
            assert_eq!(cap.st_table_location, expected_location(case.location));
            let label = format!(
                "mode {} loc {} ext {} reserved {:08x}/{:08x}",
                case.mode, case.location, case.extended, reserved.0, reserved.1
            );
            assert_round_trip(&cs, &label);
        }
    }
}

#[test]
fn lspci_view_of_every_combination() {
    for case in all_cases() {
        let cs = build_space(&case, (0, 0));
        let cap = decode(&cs).unwrap().unwrap();
        let text = format_lspci_like(&cap, None);
        let label = format!("mode {} loc {} ext {}", case.mode, case.location, case.extended);

        assert!(text.starts_with("\tCapabilities: [1a0 v1] Transaction Processing Hints\n"), "{label}: {text}");
        assert_eq!(text.contains("\t\tInterrupt vector mode supported\n"), case.mode == 1, "{label}");
        assert_eq!(text.contains("\t\tDevice specific mode supported\n"), case.mode == 2, "{label}");
        assert_eq!(text.contains("\t\tExtended requester support\n"), case.extended, "{label}");
        let location_line = format!("\t\t{}\n", expected_location(case.location).lspci_text());
        assert!(text.contains(&location_line), "{label}");
        assert!(text.contains("\t\tNo ST mode supported: yes\n"), "{label}");
        assert!(text.contains("\t\tST table size: 4\n"), "{label}");
        assert_eq!(text.contains("ST[3] = 0x"), case.location == 1, "{label}");

        let parsed = parse_lspci_vv(&format!("01:00.0 NIC\n{text}")).unwrap();
        assert_eq!(parsed.len(), 1);
        let view = &parsed[0];
        assert_eq!(view.cap_offset, Some(cap.offset));
        assert_eq!(view.version, Some(cap.version));
        assert_eq!(view.interrupt_vector, cap.interrupt_vector);
        assert_eq!(view.device_specific, cap.device_specific);
        assert_eq!(view.extended_requester, cap.extended_requester);
        assert_eq!(view.st_table_location, Some(cap.st_table_location));
    }
}

#[test]
fn msix_located_tags_follow_vectors() {
    // With the table in MSI-X, the tags for the capability's vectors live in
    // the (separately captured) MSI-X table.
    let case = Case { mode: 1, location: 2, extended: true };
    let cap = decode(&build_space(&case, (0, 0))).unwrap().unwrap();
    let mut table = MsixTable::zeroed(usize::from(cap.st_table_size));
    for i in 0..table.entries() {
        table.set_vector_control(i, 1).unwrap(); // masked at reset
        table.set_st(i, entries(&case)[i]).unwrap();
    }
    assert_eq!(table.st_table(), entries(&case));
    assert_eq!(table.vector_control(3), Ok(0x8013_0001));
}
