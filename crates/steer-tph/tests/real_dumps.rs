//! `steer tph` on dumps and lspci output captured on real machines (tests/data/real, with
//! their provenance in PROVENANCE.md): each decoded as lspci describes it.

use steer_tph::report::{describe, read_devices, Source};
use steer_tph::{RequesterEnable, StMode, StTableLocation, TphCompleter};

fn real(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/data/real/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

const ENDPOINT_DEVCAP2: &str =
    "(the device's own completer support; its root port's decides whether its hints are honoured)";

#[test]
fn intel_e810_lspci_text() {
    let out = describe(real("e810-lspci-vv.txt").as_bytes()).unwrap();
    assert_eq!(
        out,
        format!(
            "01:00.0 Ethernet controller: Intel Corporation Ethernet Controller E810-XXV for SFP (rev 02)\n\
             \tDevCap2: TPHComp- ExtTPHComp- {ENDPOINT_DEVCAP2}\n\
             \tCapabilities: [1a0 v1] Transaction Processing Hints\n\
             \t\tDevice specific mode supported\n\
             \t\tNo steering table available\n\
             \t(lspci text does not show the No-ST bit, table size, control or entries)\n"
        )
    );
}

#[test]
fn an_endpoints_own_completer_bits_are_not_called_the_root_ports() {
    // The WCN785x, quoted twice in a quoted-printable e-mail, lines wrapped by the mailer: its
    // own DevCap2 says TPHComp+, which is no statement about its root port.
    let out = describe(real("wcn785x-email-quoted-printable.eml").as_bytes()).unwrap();
    assert_eq!(
        out,
        format!(
            "63:00.0 Network controller: Qualcomm Technologies, Inc WCN785x Wi-Fi 7(802.11be) 320MHz 2x2 \
             [FastConnect 7800] (rev 01)\n\
             \tDevCap2: TPHComp+ ExtTPHComp- {ENDPOINT_DEVCAP2}\n\
             \tCapabilities: [158 v1] Transaction Processing Hints\n\
             \t\tNo steering table available\n\
             \t(lspci text does not show the No-ST bit, table size, control or entries)\n"
        )
    );
    let device = read_devices(real("wcn785x-email-quoted-printable.eml").as_bytes()).unwrap().remove(0);
    assert_eq!((device.source, device.root_port), (Source::LspciText, Some(false)));
    assert!(!out.contains("Root port completer"), "{out}");
}

#[test]
fn intel_dsa_registers() {
    let devices = read_devices(real("pciutils-pri-pasid.txt").as_bytes()).unwrap();
    assert_eq!(devices.len(), 1);
    let dsa = &devices[0];
    assert_eq!(dsa.label, "6a:01.0 Class 0880: Device 8086:0b25");
    assert_eq!((dsa.source, dsa.root_port, dsa.completer), (Source::Registers, Some(false), Some(TphCompleter::None)));
    let cap = dsa.capability.as_ref().unwrap();
    assert_eq!((cap.offset, cap.version, cap.raw_capability, cap.raw_control), (0x160, 1, 0x0001_0205, 0x0000_0102));
    assert!(cap.no_st && cap.device_specific && !cap.interrupt_vector && !cap.extended_requester);
    assert_eq!((cap.st_table_location, cap.st_table_size), (StTableLocation::InCapability, 2));
    assert_eq!((cap.mode, cap.requester_enable), (StMode::DeviceSpecific, RequesterEnable::TphOnly));
    assert_eq!(cap.st_table, vec![0x0000, 0x000a]);
    assert!(dsa.problems.is_empty() && dsa.missing.is_none());
    // An endpoint's own completer bits are not printed as its root port's.
    let out = describe(real("pciutils-pri-pasid.txt").as_bytes()).unwrap();
    assert!(out.contains(ENDPOINT_DEVCAP2) && !out.contains("Root port completer"), "{out}");
}

#[test]
fn intel_cxl_device_without_the_no_st_bit() {
    let devices = read_devices(real("pciutils-cap-dvsec-cxl.txt").as_bytes()).unwrap();
    assert_eq!(devices.len(), 2);
    let cap = devices[0].capability.as_ref().unwrap();
    assert_eq!((cap.offset, cap.raw_capability, cap.raw_control), (0x5b0, 0x000f_0300, 0));
    assert!(!cap.no_st && cap.extended_requester);
    assert_eq!((cap.st_table_size, cap.st_table.len()), (16, 16));
    let out = describe(real("pciutils-cap-dvsec-cxl.txt").as_bytes()).unwrap();
    assert!(out.contains("\t\tNo ST mode supported: no (required by the spec)\n"), "{out}");
    assert!(
        out.ends_with(&format!("\tDevCap2: TPHComp- ExtTPHComp- {ENDPOINT_DEVCAP2}\n\tno TPH Requester capability\n"))
    );
}

#[test]
fn a_broken_capability_chain_is_reported_on_its_device_and_the_rest_still_read() {
    let broken = real("pciutils-broken-ecaps.txt");
    assert_eq!(
        describe(broken.as_bytes()).unwrap(),
        "00:00.0 Host bridge: ATI Technologies Inc RS690 Host Bridge\n\
         \tTPH Requester capability: unknown (not in what could be read)\n\
         \tnote: extended capability list broken: capability pointer 0x791 read at 0x100 is not dword aligned; \
         nothing past it is read\n"
    );
    let both = format!("{broken}\n{}", real("pciutils-pri-pasid.txt"));
    let devices = read_devices(both.as_bytes()).unwrap();
    assert_eq!(devices.len(), 2);
    assert!(!devices[0].list_complete && devices[0].capability.is_none());
    assert_eq!(devices[0].problems.len(), 1);
    assert_eq!(devices[1].capability.as_ref().unwrap().offset, 0x160);
}

#[test]
fn a_dump_cut_short_says_where_it_stops() {
    // The DSA's hex up to 0x15f: the list reaches the TPH capability's header past the end.
    let text = real("pciutils-pri-pasid.txt");
    let cut: String = text.lines().take_while(|l| !l.starts_with("160:")).map(|l| format!("{l}\n")).collect();
    let device = read_devices(cut.as_bytes()).unwrap().remove(0);
    assert!(device.capability.is_none() && !device.list_complete);
    assert_eq!(
        device.missing.as_deref(),
        Some("the dump ends inside the extended capability list: capability data at 0x160 is past the end of the 352-byte dump")
    );
    assert!(describe(cut.as_bytes()).unwrap().contains("\tTPH Requester capability: unknown"));
}
