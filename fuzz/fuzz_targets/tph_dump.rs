//! `steer tph` on any file: a binary config space, lspci hex or lspci text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = steer_tph::report::describe(data);
});
