//! The C API as a C program calls it: statuses, outputs, messages and the progress callback.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;

use steer::{
    steer_sim_free, steer_sim_last_error, steer_sim_resolve, steer_sim_run, steer_sim_version, SteerSimStatus,
};

/// A short run of the smallest built-in scenario.
const SHORT: [&str; 2] = ["sim.warmup_us=5", "sim.measure_us=20"];

struct Call {
    status: SteerSimStatus,
    /// The output on success, the last error's message otherwise.
    text: String,
}

fn strings(texts: &[&str]) -> Vec<CString> {
    texts.iter().map(|t| CString::new(*t).unwrap()).collect()
}

fn finish(status: SteerSimStatus, out: *mut c_char) -> Call {
    let text = if status == SteerSimStatus::Ok {
        // SAFETY: steer set `out` to a string of its own, freed here once read.
        let text = unsafe { CStr::from_ptr(out) }.to_str().unwrap().to_string();
        unsafe { steer_sim_free(out) };
        text
    } else {
        assert!(out.is_null(), "no output on failure");
        // SAFETY: steer's last error is a NUL-terminated string.
        unsafe { CStr::from_ptr(steer_sim_last_error()) }.to_str().unwrap().to_string()
    };
    Call { status, text }
}

fn run_with(scenario: &str, overrides: &[&str], progress: steer::SteerSimProgress, user: *mut c_void) -> Call {
    let (scenario, overrides) = (CString::new(scenario).unwrap(), strings(overrides));
    let pointers: Vec<*const c_char> = overrides.iter().map(|o| o.as_ptr()).collect();
    let mut out = ptr::null_mut();
    // SAFETY: every pointer is a live NUL-terminated string; `out` is writable.
    let status =
        unsafe { steer_sim_run(scenario.as_ptr(), pointers.as_ptr(), pointers.len(), progress, user, &mut out) };
    finish(status, out)
}

fn run(scenario: &str, overrides: &[&str]) -> Call {
    run_with(scenario, overrides, None, ptr::null_mut())
}

fn resolve(scenario: &str, overrides: &[&str]) -> Call {
    let (scenario, overrides) = (CString::new(scenario).unwrap(), strings(overrides));
    let pointers: Vec<*const c_char> = overrides.iter().map(|o| o.as_ptr()).collect();
    let mut out = ptr::null_mut();
    // SAFETY: as in `run_with`.
    let status = unsafe { steer_sim_resolve(scenario.as_ptr(), pointers.as_ptr(), pointers.len(), &mut out) };
    finish(status, out)
}

/// A result without the one figure that changes from run to run, the host's time.
fn without_host_time(mut result: serde_json::Value) -> serde_json::Value {
    result["sim"].as_object_mut().unwrap().remove("host_seconds").unwrap();
    result
}

/// What the Rust core gives for the same built-in run.
fn core_result(name: &str, overrides: &[&str]) -> serde_json::Value {
    let builtin = steer_sim::scenario::builtin(name).unwrap();
    let source =
        steer_sim::ScenarioSource { text: builtin.source, origin: &format!("builtin:{name}"), default_name: name };
    let overrides: Vec<String> = overrides.iter().map(|o| o.to_string()).collect();
    without_host_time(steer_sim::run(steer_sim::load(&source, &overrides).unwrap(), &mut |_| true).unwrap().value)
}

#[test]
fn a_run_gives_the_cores_results_as_json() {
    let call = run("rx-default", &SHORT);
    assert_eq!(call.status, SteerSimStatus::Ok);
    let result = without_host_time(serde_json::from_str(&call.text).unwrap());
    assert_eq!(result, core_result("rx-default", &SHORT));
    assert!(result["dram"]["read_gbps"].is_number(), "{result}");
}

#[test]
fn a_scenario_file_runs_as_the_built_in_it_copies() {
    let dir = std::env::temp_dir().join(format!("steer-capi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mine.toml");
    std::fs::write(&path, steer_sim::scenario::builtin("rx-default").unwrap().source).unwrap();
    let call = run(path.to_str().unwrap(), &SHORT);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(call.status, SteerSimStatus::Ok, "{}", call.text);
    let mut result = without_host_time(serde_json::from_str(&call.text).unwrap());
    let mut builtin = core_result("rx-default", &SHORT);
    assert_eq!(result["scenario"], "mine", "named after the file");
    for value in [&mut result, &mut builtin] {
        value.as_object_mut().unwrap().remove("scenario");
    }
    assert_eq!(result, builtin);
}

#[test]
fn resolving_fills_in_defaults_and_applies_overrides() {
    let call = resolve("rx-default", &["sim.measure_us=20"]);
    assert_eq!(call.status, SteerSimStatus::Ok);
    assert!(call.text.contains("measure_us = 20.0"), "{}", call.text);
    assert!(call.text.contains("[platform"), "the platform is spelled out: {}", call.text);
}

#[test]
fn bad_input_is_an_input_error_naming_what_and_where() {
    let known: Vec<&str> = steer_sim::scenario::BUILTINS.iter().map(|b| b.name).collect();
    for (scenario, overrides, message) in [
        (
            "rx-default",
            &["sim.nope=1"][..],
            "--set sim.nope: unknown field `nope`, expected one of `warmup_us`, `measure_us`, `max_runahead_ns`, \
             `allow_large`"
                .to_string(),
        ),
        ("nosuch", &[], format!("nosuch: no such scenario file or built-in scenario (built-in: {})", known.join(", "))),
        ("missing.toml", &[], "missing.toml: cannot read scenario: No such file or directory".into()),
    ] {
        let call = run(scenario, overrides);
        assert_eq!(call.status, SteerSimStatus::InputError, "{scenario}");
        assert_eq!(call.text, message, "{scenario}");
    }
}

#[test]
fn a_scenario_file_that_is_not_utf8_is_refused() {
    let path = std::env::temp_dir().join(format!("steer-capi-latin-{}.toml", std::process::id()));
    std::fs::write(&path, b"description = \"caf\xe9\"\n").unwrap();
    let call = run(path.to_str().unwrap(), &[]);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(call.status, SteerSimStatus::InputError);
    assert_eq!(call.text, format!("{}: cannot read scenario: not UTF-8 text", path.display()));
}

#[test]
fn a_run_past_the_limits_is_too_large() {
    let call = run("rx-default", &["sim.measure_us=2000000"]);
    assert_eq!(call.status, SteerSimStatus::TooLarge);
    assert!(call.text.contains("sim.allow_large"), "{}", call.text);
    assert_eq!(resolve("rx-default", &["sim.measure_us=2000000"]).status, SteerSimStatus::TooLarge);
}

unsafe extern "C" fn count_then_stop(fraction: f64, user: *mut c_void) -> c_int {
    // SAFETY: the tests pass a pointer to a live (calls, stop_after) pair.
    let state = unsafe { &mut *user.cast::<(u32, u32, f64)>() };
    assert!((0.0..=1.0).contains(&fraction) && fraction >= state.2, "fractions grow within [0, 1]");
    state.0 += 1;
    state.2 = fraction;
    c_int::from(state.0 == state.1)
}

#[test]
fn the_progress_callback_sees_the_run_and_can_stop_it() {
    let mut state = (0u32, u32::MAX, 0.0f64);
    let call = run_with("rx-default", &SHORT, Some(count_then_stop), ptr::addr_of_mut!(state).cast());
    assert_eq!(call.status, SteerSimStatus::Ok);
    assert!(state.0 >= 2 && state.2 == 1.0, "called {} times, last at {}", state.0, state.2);

    let mut state = (0u32, 1u32, 0.0f64);
    let call = run_with("rx-default", &SHORT, Some(count_then_stop), ptr::addr_of_mut!(state).cast());
    assert_eq!((call.status, call.text.as_str()), (SteerSimStatus::Stopped, "the run was stopped"));
    assert_eq!(state.0, 1, "not called after it asked to stop");
}

#[test]
fn null_or_non_utf8_arguments_are_input_errors() {
    let scenario = CString::new("rx-default").unwrap();
    let mut out = ptr::null_mut();
    // SAFETY: NULL is what is being tested; every other pointer is valid.
    let status = unsafe { steer_sim_run(ptr::null(), ptr::null(), 0, None, ptr::null_mut(), &mut out) };
    assert_eq!(finish(status, out).text, "scenario: NULL");
    // SAFETY: as above.
    let status = unsafe { steer_sim_run(scenario.as_ptr(), ptr::null(), 2, None, ptr::null_mut(), &mut out) };
    assert_eq!(finish(status, out).text, "overrides: NULL with a count of 2");
    let overrides = [ptr::null()];
    // SAFETY: as above.
    let status = unsafe { steer_sim_run(scenario.as_ptr(), overrides.as_ptr(), 1, None, ptr::null_mut(), &mut out) };
    assert_eq!(finish(status, out).text, "override: NULL");
    let latin = CString::new(b"placement=caf\xe9".to_vec()).unwrap();
    let overrides = [latin.as_ptr()];
    // SAFETY: as above.
    let status = unsafe { steer_sim_run(scenario.as_ptr(), overrides.as_ptr(), 1, None, ptr::null_mut(), &mut out) };
    assert_eq!(finish(status, out).text, "override: not UTF-8");
    // SAFETY: as above.
    let status = unsafe { steer_sim_resolve(scenario.as_ptr(), ptr::null(), 0, ptr::null_mut()) };
    assert_eq!((status, finish(status, out).text.as_str()), (SteerSimStatus::InputError, "output: NULL"));
    // SAFETY: freeing NULL does nothing.
    unsafe { steer_sim_free(ptr::null_mut()) };
}

#[test]
fn the_version_is_the_crates() {
    // SAFETY: a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(steer_sim_version()) };
    assert_eq!(version.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}
