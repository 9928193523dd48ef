//! The lspci readers on any text: `-vv` capability text and `-x`/`-xxx`/`-xxxx` hex.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = steer_tph::parse_lspci_vv(text);
    if let Ok(devices) = steer_tph::ConfigSpace::parse_lspci_hex(text) {
        for (_, space) in devices {
            let _ = steer_tph::decode(&space);
            let _ = steer_tph::tph_completer(&space);
        }
    }
});
