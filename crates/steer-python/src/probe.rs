//! The host probes (`steer-probe`) for `steer calibrate` and `steer validate`. Each releases the
//! GIL while it measures; an argument steer-probe refuses is a ScenarioError, anything else the
//! machine would not do (mapping memory, pinning a thread) a SteerError.

use std::io;

use pyo3::prelude::*;

use crate::{ScenarioError, SteerError};

fn to_py(error: io::Error) -> PyErr {
    match error.kind() {
        io::ErrorKind::InvalidInput => ScenarioError::new_err(error.to_string()),
        _ => SteerError::new_err(error.to_string()),
    }
}

/// Runs a measurement without the GIL.
fn measure<T: Send>(py: Python<'_>, f: impl FnOnce() -> io::Result<T> + Send) -> PyResult<T> {
    py.allow_threads(f).map_err(to_py)
}

/// ns per dependent load around a random cycle through `working_set` bytes, `chains` at a time.
#[pyfunction]
#[pyo3(signature = (cpu, working_set, min_ns, chains=1))]
fn probe_chase_ns(py: Python<'_>, cpu: u32, working_set: u64, min_ns: u64, chains: u32) -> PyResult<f64> {
    measure(py, || steer_probe::chase_ns(cpu, working_set, chains, min_ns))
}

/// GB/s of `access` (read, write, copy) by every CPU of `cpus` on a working set each.
#[pyfunction]
fn probe_bandwidth_gbs(py: Python<'_>, access: &str, working_set: u64, cpus: Vec<u32>, min_ns: u64) -> PyResult<f64> {
    let access: steer_probe::Access = access.parse().map_err(to_py)?;
    measure(py, || steer_probe::bandwidth_gbs(access, working_set, &cpus, min_ns))
}

/// The core clock as observed on `cpu`, GHz (None where it cannot be measured).
#[pyfunction]
fn probe_clock_ghz(py: Python<'_>, cpu: u32, min_ns: u64) -> PyResult<Option<f64>> {
    measure(py, || steer_probe::clock_ghz(cpu, min_ns))
}

/// ns per buffer copied from a ring of `buffers` buffers of `buffer_bytes`.
#[pyfunction]
fn probe_ring_copy_ns(py: Python<'_>, cpu: u32, buffers: u64, buffer_bytes: u64, min_ns: u64) -> PyResult<f64> {
    measure(py, || steer_probe::ring_copy_ns(cpu, buffers, buffer_bytes, min_ns))
}

/// ns per independent load of a random line of `working_set` bytes.
#[pyfunction]
fn probe_random_reads_ns(py: Python<'_>, cpu: u32, working_set: u64, min_ns: u64) -> PyResult<f64> {
    measure(py, || steer_probe::random_reads_ns(cpu, working_set, min_ns))
}

/// ns per word read every `stride` bytes, prefetching `prefetch_distance` strides ahead.
#[pyfunction]
fn probe_strided_scan_ns(
    py: Python<'_>,
    cpu: u32,
    working_set: u64,
    stride: u64,
    prefetch_distance: u64,
    min_ns: u64,
) -> PyResult<f64> {
    measure(py, || steer_probe::strided_scan_ns(cpu, working_set, stride, prefetch_distance, min_ns))
}

/// ns per round trip of a line passed between `cpu_a` and `cpu_b`.
#[pyfunction]
fn probe_handoff_ns(py: Python<'_>, cpu_a: u32, cpu_b: u32, min_ns: u64) -> PyResult<f64> {
    measure(py, || steer_probe::handoff_ns(cpu_a, cpu_b, min_ns))
}

/// ns per buffer of `buffer_bytes` written by `producer_cpu`, handed to and summed by `consumer_cpu`.
#[pyfunction]
fn probe_producer_consumer_ns(
    py: Python<'_>,
    producer_cpu: u32,
    consumer_cpu: u32,
    buffer_bytes: u64,
    min_ns: u64,
) -> PyResult<f64> {
    measure(py, || steer_probe::producer_consumer_ns(producer_cpu, consumer_cpu, buffer_bytes, min_ns))
}

/// ns per read of a line `writer_cpu` just wrote, by `reader_cpu` (the core-to-core transfer).
#[pyfunction]
fn probe_peer_read_ns(py: Python<'_>, reader_cpu: u32, writer_cpu: u32, min_ns: u64) -> PyResult<f64> {
    measure(py, || steer_probe::peer_read_ns(reader_cpu, writer_cpu, min_ns))
}

/// The CPUs this process may run on.
#[pyfunction]
fn probe_allowed_cpus() -> Vec<u32> {
    steer_probe::allowed_cpus()
}

/// Entries and ways of the last-level data TLB for 4 KiB pages, as CPUID describes it (None where
/// it does not).
#[pyfunction]
fn probe_data_tlb() -> Option<(u32, u32)> {
    steer_probe::data_tlb()
}

/// The kernel's transparent huge page mode.
#[pyfunction]
fn probe_huge_pages() -> String {
    steer_probe::huge_pages()
}

/// Where `steer calibrate` keeps this machine's calibration (None without HOME or the variables).
#[pyfunction]
fn host_calibration_path() -> Option<String> {
    steer_sim::host::calibration_path().map(|p| p.display().to_string())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(probe_chase_ns, m)?)?;
    m.add_function(wrap_pyfunction!(probe_bandwidth_gbs, m)?)?;
    m.add_function(wrap_pyfunction!(probe_clock_ghz, m)?)?;
    m.add_function(wrap_pyfunction!(probe_ring_copy_ns, m)?)?;
    m.add_function(wrap_pyfunction!(probe_random_reads_ns, m)?)?;
    m.add_function(wrap_pyfunction!(probe_strided_scan_ns, m)?)?;
    m.add_function(wrap_pyfunction!(probe_handoff_ns, m)?)?;
    m.add_function(wrap_pyfunction!(probe_peer_read_ns, m)?)?;
    m.add_function(wrap_pyfunction!(probe_data_tlb, m)?)?;
    m.add_function(wrap_pyfunction!(probe_producer_consumer_ns, m)?)?;
    m.add_function(wrap_pyfunction!(probe_allowed_cpus, m)?)?;
    m.add_function(wrap_pyfunction!(probe_huge_pages, m)?)?;
    m.add_function(wrap_pyfunction!(host_calibration_path, m)?)?;
    Ok(())
}
