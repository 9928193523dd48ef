//! The trace reader and replayer on any bytes: din text, or binary records after the magic (the
//! seeds hold both, so the fuzzer explores each).
#![no_main]

use libfuzzer_sys::fuzz_target;
use steer_sim::platform::PlatformSpec;
use steer_trace::{replay, TraceReader};

/// Turin's hierarchy with small L2 and L3 (the same rules, far less to allocate per input).
fn small_platform() -> PlatformSpec {
    let mut platform = steer_sim::platform::preset("turin-9655").expect("a built-in preset");
    platform.l2.size_kib = 64;
    platform.l3.size_kib = 512;
    platform.validate("platform").expect("a valid platform");
    platform
}

fuzz_target!(|data: &[u8]| {
    let reader = TraceReader::new(data, "fuzz.trace").expect("reading from memory does not fail");
    let _ = replay(reader, &small_platform(), 0);
});
