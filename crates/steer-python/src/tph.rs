//! `steer tph` and `steer doctor`'s reading of config spaces: steer-tph's device reports, as text
//! or JSON.

use pyo3::prelude::*;
use serde_json::{json, Value};
use steer_tph::report::{from_registers, read_named_devices, DeviceReport, Source};

use crate::ScenarioError;

/// The TPH capability of every device in a config-space dump or lspci text, as `steer tph` prints it.
/// A binary config space is labelled `label` (its bus address), else `device`.
#[pyfunction]
#[pyo3(signature = (data, label=None))]
fn describe_tph(data: &[u8], label: Option<&str>) -> PyResult<String> {
    steer_tph::report::describe_named(data, label).map_err(ScenarioError::new_err)
}

/// Every device of a config-space dump or lspci text as JSON (`steer tph --json`).
#[pyfunction]
#[pyo3(signature = (data, label=None))]
fn tph_devices(data: &[u8], label: Option<&str>) -> PyResult<String> {
    let devices = read_named_devices(data, label).map_err(ScenarioError::new_err)?;
    Ok(Value::Array(devices.iter().map(device_json).collect()).to_string())
}

/// What `steer doctor` needs of one device's binary config space, as JSON: the device report
/// plus its IDs and the dump's length. A capability chain that cannot be walked is reported in
/// `problems`, not raised.
#[pyfunction]
fn inspect_tph(data: &[u8]) -> PyResult<String> {
    let space =
        steer_tph::ConfigSpace::from_bytes(data).map_err(|e| ScenarioError::new_err(format!("config space: {e}")))?;
    let word = |at: usize| space.read_u16(at).unwrap_or(0);
    let mut value = device_json(&from_registers(None, &space));
    value["vendor_id"] = json!(word(0));
    value["device_id"] = json!(word(2));
    value["bytes"] = json!(space.len());
    Ok(value.to_string())
}

fn device_json(device: &DeviceReport) -> Value {
    let requester = match (&device.capability, &device.shown) {
        (Some(cap), _) => json!({
            "offset": cap.offset,
            "version": cap.version,
            "no_st": cap.no_st,
            "interrupt_vector": cap.interrupt_vector,
            "device_specific": cap.device_specific,
            "extended_requester": cap.extended_requester,
            "st_table_location": cap.st_table_location.lspci_text(),
            "st_table_size": cap.st_table_size,
            "mode": cap.mode.to_string(),
            "enable": cap.requester_enable.to_string(),
            "raw_capability": cap.raw_capability,
            "raw_control": cap.raw_control,
            "st_table": cap.st_table,
        }),
        // lspci's text shows only these (the rest is not in it, so not in the JSON either).
        (None, Some(shown)) if shown.cap_offset.is_some() => json!({
            "offset": shown.cap_offset,
            "version": shown.version,
            "interrupt_vector": shown.interrupt_vector,
            "device_specific": shown.device_specific,
            "extended_requester": shown.extended_requester,
            "st_table_location": shown.st_table_location.map(|l| l.lspci_text()),
        }),
        _ => Value::Null,
    };
    json!({
        "device": device.label,
        "source": match device.source {
            Source::Registers => "registers",
            Source::LspciText => "lspci_text",
        },
        "root_port": device.root_port,
        "completer": device.completer.map(|c| c.lspci_flags()),
        "requester": requester,
        "list_complete": device.list_complete,
        "problems": device.problems,
        "missing": device.missing,
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(describe_tph, m)?)?;
    m.add_function(wrap_pyfunction!(tph_devices, m)?)?;
    m.add_function(wrap_pyfunction!(inspect_tph, m)?)?;
    Ok(())
}
