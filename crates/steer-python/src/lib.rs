//! Python bindings: the `steer._core` extension module. Thin by design: it passes scenario text
//! and overrides to the Rust core and returns JSON and TOML strings for the Python layer to shape.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt};
use pyo3::prelude::*;

mod offload;
mod probe;
mod tph;

use steer_sim::error::shortened;
use steer_sim::params::Describe;
use steer_sim::{platform, scenario, ScenarioSource};

create_exception!(_core, SteerError, PyException, "Anything steer could not do.");
create_exception!(_core, ScenarioError, SteerError, "A scenario, platform, override or file that steer cannot accept.");
create_exception!(
    _core,
    TooLargeError,
    ScenarioError,
    "A run that would need more memory or time than the limits allow."
);
create_exception!(_core, InternalError, SteerError, "A broken invariant inside steer: a bug to report.");

/// The Python exception of each kind of error.
fn to_py(error: steer_sim::Error) -> PyErr {
    let message = shortened(&error.to_string());
    match error {
        steer_sim::Error::Input(_) => ScenarioError::new_err(message),
        steer_sim::Error::TooLarge(_) => TooLargeError::new_err(message),
        steer_sim::Error::Stopped => PyKeyboardInterrupt::new_err(message),
        steer_sim::Error::Internal(_) => InternalError::new_err(message),
    }
}

fn load(text: &str, origin: &str, default_name: &str, overrides: &[String]) -> PyResult<steer_sim::Scenario> {
    steer_sim::load(&ScenarioSource { text, origin, default_name }, overrides).map_err(to_py)
}

/// A scenario by name: a file if it is a path to one, else a built-in scenario; returns
/// (text, origin, default name).
#[pyfunction]
fn find_scenario(name: &str) -> PyResult<(String, String, String)> {
    let found = scenario::find(name).map_err(to_py)?;
    Ok((found.text, found.origin, found.default_name))
}

/// Resolves a scenario (defaults filled, parameters substituted) and returns it as TOML.
#[pyfunction]
#[pyo3(signature = (text, origin, default_name, overrides=Vec::new()))]
fn resolve_scenario(text: &str, origin: &str, default_name: &str, overrides: Vec<String>) -> PyResult<String> {
    let scenario = load(text, origin, default_name, &overrides)?;
    scenario.check_size().map_err(|message| to_py(steer_sim::Error::TooLarge(message)))?;
    Ok(scenario.to_toml())
}

/// Runs a scenario; returns (result JSON, resolved scenario TOML). `progress(fraction)` is called
/// now and then; Ctrl-C stops the run with KeyboardInterrupt.
#[pyfunction]
#[pyo3(signature = (text, origin, default_name, overrides=Vec::new(), progress=None))]
fn run_scenario(
    py: Python<'_>,
    text: &str,
    origin: &str,
    default_name: &str,
    overrides: Vec<String>,
    progress: Option<PyObject>,
) -> PyResult<(String, String)> {
    let scenario = load(text, origin, default_name, &overrides)?;
    let resolved = scenario.to_toml();
    let mut failure: Option<PyErr> = None;
    let result = steer_sim::run(scenario, &mut |fraction| {
        let outcome = py.check_signals().and_then(|_| match &progress {
            Some(callback) => callback.call1(py, (fraction,)).map(|_| ()),
            None => Ok(()),
        });
        match outcome {
            Ok(()) => true,
            Err(error) => {
                failure = Some(error);
                false
            }
        }
    });
    match (result, failure) {
        (Ok(result), _) => Ok((result.value.to_string(), resolved)),
        (Err(_), Some(error)) => Err(error),
        (Err(error), None) => Err(to_py(error)),
    }
}

/// Every key the results of a scenario have: (key, unit, meaning), without running it.
#[pyfunction]
#[pyo3(signature = (text, origin, default_name, overrides=Vec::new()))]
fn result_schema(
    text: &str,
    origin: &str,
    default_name: &str,
    overrides: Vec<String>,
) -> PyResult<Vec<(String, String, String)>> {
    let simulation = steer_sim::Simulation::new(load(text, origin, default_name, &overrides)?).map_err(to_py)?;
    Ok(simulation.schema().into_iter().map(|e| (e.key, e.unit.to_string(), e.meaning)).collect())
}

/// A documented parameter: (key, default, meaning).
type Param = (String, String, String);

/// Every entry of every registry: (registry, name, description, [(key, default, meaning)]).
#[pyfunction]
fn catalog() -> Vec<(String, String, String, Vec<Param>)> {
    steer_sim::catalog::catalog()
        .into_iter()
        .map(|e| {
            let params = e.params.into_iter().map(|d| (d.key, d.value, d.meaning)).collect();
            (e.registry.to_string(), e.name.to_string(), e.description, params)
        })
        .collect()
}

/// Built-in scenarios: (name, description, TOML source).
#[pyfunction]
fn builtin_scenarios() -> Vec<(String, String, String)> {
    scenario::BUILTINS.iter().map(|b| (b.name.to_string(), b.description(), b.source.to_string())).collect()
}

/// Platform presets: (name, description, TOML source; empty for `host`, read from this machine,
/// whose description says whether and when it was calibrated).
#[pyfunction]
fn platform_presets() -> Vec<(String, String, String)> {
    let host = steer_sim::host::host_platform_table()
        .ok()
        .and_then(|table| Some(table.get("description")?.as_str()?.to_string()))
        .unwrap_or_else(|| steer_sim::host::HOST_DESCRIPTION.to_string());
    platform::PRESETS
        .iter()
        .map(|p| (p.name.to_string(), p.description(), p.source.to_string()))
        .chain(std::iter::once(("host".to_string(), host, String::new())))
        .collect()
}

/// Every parameter of a preset (after `KEY=VALUE` overrides): (key, value, meaning).
#[pyfunction]
#[pyo3(signature = (name, overrides=Vec::new()))]
fn describe_platform(name: &str, overrides: Vec<String>) -> PyResult<Vec<(String, String, String)>> {
    let platform = resolve_platform(name, &overrides)?;
    Ok(platform.describe().into_iter().map(|d| (d.key, d.value, d.meaning)).collect())
}

/// A preset with `KEY=VALUE` overrides (keys relative to the platform, or with the `platform.`
/// a scenario's `--set` takes: a platform has no key of that name), validated.
fn resolve_platform(name: &str, overrides: &[String]) -> PyResult<platform::PlatformSpec> {
    // Named here: the scenario built below is not the user's, so its line numbers would mislead.
    let known = platform::preset_names();
    if !known.contains(&name) {
        let message = format!("`{name}`: no such platform preset (known: {})", known.join(", "));
        return Err(ScenarioError::new_err(shortened(&message)));
    }
    let text = format!("[platform]\npreset = {}\n", toml_string(name));
    let overrides: Vec<String> = overrides.iter().map(|o| platform_override(o)).collect();
    Ok(load(&text, &format!("platform {name}"), name, &overrides)?.platform)
}

/// `KEY=VALUE` as a scenario's override of its platform's key; anything else (no `=`, or nothing
/// before it) is left as typed, for the error to name it.
fn platform_override(text: &str) -> String {
    match text.split_once('=') {
        Some((key, _)) if !key.trim().is_empty() => {
            format!("platform.{}", text.strip_prefix("platform.").unwrap_or(text))
        }
        _ => text.to_string(),
    }
}

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// Replays a trace file through one CPU's hierarchy of a preset (after `KEY=VALUE` overrides
/// relative to the platform); returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (path, platform, cpu=0, overrides=Vec::new(), progress=None))]
fn replay_trace(
    py: Python<'_>,
    path: &str,
    platform: &str,
    cpu: u32,
    overrides: Vec<String>,
    progress: Option<PyObject>,
) -> PyResult<String> {
    let spec = resolve_platform(platform, &overrides)?;
    // Standard input has no length to take a fraction of: the callback still runs, to check
    // for Ctrl-C, but is told nothing.
    let total = match path {
        steer_trace::STDIN_PATH => None,
        _ => Some(std::fs::metadata(path).map(|m| m.len().max(1)).unwrap_or(1)),
    };
    let mut failure: Option<PyErr> = None;
    let report = py.allow_threads(|| {
        // Once per block read (tens of KiB): taking the GIL that often costs little.
        steer_trace::replay_path_with(path, &spec, cpu, &mut |done| {
            Python::with_gil(|py| {
                let outcome = py.check_signals().and_then(|_| match (&progress, total) {
                    (Some(callback), Some(total)) => callback.call1(py, (done as f64 / total as f64,)).map(|_| ()),
                    _ => Ok(()),
                });
                outcome.map_err(|error| failure = Some(error)).is_ok()
            })
        })
    });
    match (report, failure) {
        (Ok(report), _) => Ok(serde_json::to_string(&report).expect("a report serializes")),
        (Err(_), Some(error)) => Err(error),
        (Err(error), None) => Err(ScenarioError::new_err(shortened(&error.to_string()))),
    }
}

/// Every record of a din or binary trace as (kind, address, bytes), kind 0 read, 1 write, 2
/// instruction fetch (`steer trace-import` cuts them into per-packet traces).
#[pyfunction]
fn trace_records(py: Python<'_>, path: &str) -> PyResult<Vec<(u8, u64, u32)>> {
    let read = py.allow_threads(|| {
        steer_trace::TraceReader::open(path)?
            .map(|record| record.map(|r| (r.kind as u8, r.addr, r.size)))
            .collect::<Result<Vec<_>, _>>()
    });
    read.map_err(|error| ScenarioError::new_err(shortened(&error.to_string())))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SteerError", m.py().get_type::<SteerError>())?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("TooLargeError", m.py().get_type::<TooLargeError>())?;
    m.add("InternalError", m.py().get_type::<InternalError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    let sources: Vec<&str> = steer_sim::hierarchy::Source::ALL.iter().map(|s| s.name()).collect();
    m.add("FILL_SOURCES", sources)?;
    m.add_function(wrap_pyfunction!(find_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(run_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(result_schema, m)?)?;
    m.add_function(wrap_pyfunction!(catalog, m)?)?;
    m.add_function(wrap_pyfunction!(builtin_scenarios, m)?)?;
    m.add_function(wrap_pyfunction!(platform_presets, m)?)?;
    m.add_function(wrap_pyfunction!(describe_platform, m)?)?;
    m.add_function(wrap_pyfunction!(replay_trace, m)?)?;
    m.add_function(wrap_pyfunction!(trace_records, m)?)?;
    probe::register(m)?;
    tph::register(m)?;
    offload::register(m)?;
    Ok(())
}
