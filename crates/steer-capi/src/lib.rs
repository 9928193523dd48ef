//! steer's simulator for C: run a scenario (a TOML file or a built-in name, `scenario::find`) with `KEY=VALUE`
//! overrides and get its results as JSON, the same JSON `steer run --json` writes.
//! `include/steer.h` is generated from this file by cbindgen (a test keeps it current).
//!
//! Every function that can fail returns a [`SteerSimStatus`] and leaves a one-line message for
//! [`steer_sim_last_error`] on the calling thread. Strings steer returns are freed with
//! [`steer_sim_free`].

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use steer_sim::{scenario, Error, Scenario, ScenarioSource};

/// What a call came to.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SteerSimStatus {
    /// Done; the output is set.
    Ok = 0,
    /// A scenario, override, platform or file steer cannot accept (the command line's exit 2).
    InputError = 1,
    /// A run that would need more memory or simulated time than the limits allow
    /// (`sim.allow_large = true` lifts them).
    TooLarge = 2,
    /// The progress callback asked to stop.
    Stopped = 3,
    /// A broken invariant inside steer: a bug to report.
    InternalError = 4,
}

/// Called now and then during a run with the fraction done, in [0, 1], and the `user` pointer
/// the run was given; returning non-zero stops the run.
pub type SteerSimProgress = Option<unsafe extern "C" fn(fraction: f64, user: *mut c_void) -> c_int>;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn c_string(text: String) -> CString {
    CString::new(text.replace('\0', " ")).expect("no NUL left")
}

/// Records `error` for `steer_sim_last_error` and returns its status.
fn fail(error: Error) -> SteerSimStatus {
    let status = match error {
        Error::Input(_) => SteerSimStatus::InputError,
        Error::TooLarge(_) => SteerSimStatus::TooLarge,
        Error::Stopped => SteerSimStatus::Stopped,
        Error::Internal(_) => SteerSimStatus::InternalError,
    };
    LAST_ERROR.with(|e| *e.borrow_mut() = c_string(error.to_string()));
    status
}

/// The message of the last failed call on this thread ("" if none); valid until the next failure.
#[no_mangle]
pub extern "C" fn steer_sim_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// steer's version, a static string.
#[no_mangle]
pub extern "C" fn steer_sim_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Frees a string steer returned; NULL is ignored.
///
/// # Safety
/// `text` is NULL or came from a steer function and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn steer_sim_free(text: *mut c_char) {
    if !text.is_null() {
        // SAFETY: per this function's contract, `text` came from `CString::into_raw`.
        drop(unsafe { CString::from_raw(text) });
    }
}

/// # Safety
/// `text` is NULL or a NUL-terminated string.
unsafe fn text_arg<'a>(text: *const c_char, what: &str) -> Result<&'a str, Error> {
    if text.is_null() {
        return Err(Error::Input(format!("{what}: NULL")));
    }
    // SAFETY: per this function's contract.
    unsafe { CStr::from_ptr(text) }.to_str().map_err(|_| Error::Input(format!("{what}: not UTF-8")))
}

/// # Safety
/// `overrides` is NULL (with `count` 0) or points to `count` NUL-terminated strings.
unsafe fn override_args(overrides: *const *const c_char, count: usize) -> Result<Vec<String>, Error> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if overrides.is_null() {
        return Err(Error::Input(format!("overrides: NULL with a count of {count}")));
    }
    // SAFETY: per this function's contract.
    let pointers = unsafe { std::slice::from_raw_parts(overrides, count) };
    pointers
        .iter()
        // SAFETY: per this function's contract.
        .map(|&pointer| unsafe { text_arg(pointer, "override") }.map(String::from))
        .collect()
}

/// # Safety
/// As `steer_sim_run`'s scenario and overrides.
unsafe fn load(name: *const c_char, overrides: *const *const c_char, count: usize) -> Result<Scenario, Error> {
    // SAFETY: per this function's contract.
    let (name, overrides) = unsafe { (text_arg(name, "scenario")?, override_args(overrides, count)?) };
    let found = scenario::find(name)?;
    let source = ScenarioSource { text: &found.text, origin: &found.origin, default_name: &found.default_name };
    steer_sim::load(&source, &overrides)
}

/// Runs `body`, turning a panic into an internal error, and hands its text to `*out`.
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn answer(out: *mut *mut c_char, body: impl FnOnce() -> Result<String, Error>) -> SteerSimStatus {
    if out.is_null() {
        return fail(Error::Input("output: NULL".into()));
    }
    let outcome = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Error::Internal(message))
    });
    match outcome {
        Ok(text) => {
            // SAFETY: `out` is writable, per this function's contract.
            unsafe { *out = c_string(text).into_raw() };
            SteerSimStatus::Ok
        }
        Err(error) => fail(error),
    }
}

/// Runs a scenario with `KEY=VALUE` overrides (as `steer run --set` takes them) and sets
/// `*result_json` to its results, to free with `steer_sim_free`. `progress`, if not NULL, is
/// called now and then with `user`.
///
/// # Safety
/// `scenario` is a NUL-terminated string; `overrides` is NULL (with `override_count` 0) or points
/// to `override_count` NUL-terminated strings; `result_json` is writable; `progress`, if not
/// NULL, may be called with `user` on this thread.
#[no_mangle]
pub unsafe extern "C" fn steer_sim_run(
    scenario: *const c_char,
    overrides: *const *const c_char,
    override_count: usize,
    progress: SteerSimProgress,
    user: *mut c_void,
    result_json: *mut *mut c_char,
) -> SteerSimStatus {
    let body = || {
        // SAFETY: per this function's contract.
        let scenario = unsafe { load(scenario, overrides, override_count) }?;
        let result = steer_sim::run(scenario, &mut |fraction| match progress {
            // SAFETY: per this function's contract.
            Some(callback) => (unsafe { callback(fraction, user) }) == 0,
            None => true,
        })?;
        Ok(result.value.to_string())
    };
    // SAFETY: per this function's contract.
    unsafe { answer(result_json, body) }
}

/// Sets `*resolved_toml` to a scenario as it would run (defaults filled in, parameters and
/// overrides applied), to free with `steer_sim_free`.
///
/// # Safety
/// As `steer_sim_run`'s first three arguments; `resolved_toml` is writable.
#[no_mangle]
pub unsafe extern "C" fn steer_sim_resolve(
    scenario: *const c_char,
    overrides: *const *const c_char,
    override_count: usize,
    resolved_toml: *mut *mut c_char,
) -> SteerSimStatus {
    let body = || {
        // SAFETY: per this function's contract.
        let scenario = unsafe { load(scenario, overrides, override_count) }?;
        scenario.check_size().map_err(Error::TooLarge)?;
        Ok(scenario.to_toml())
    };
    // SAFETY: per this function's contract.
    unsafe { answer(resolved_toml, body) }
}
