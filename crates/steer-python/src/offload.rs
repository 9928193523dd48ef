//! `steer.offload`: the offloading cache (crate steer-offload) for Python. `Cache.access` takes any
//! object with the buffer protocol; `CacheData.location()` is a zero-copy read-only `memoryview`.

use std::os::raw::{c_int, c_void};

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyMemoryView};

use steer_offload::{policy, Cache, CacheData, Error};

fn to_py(error: Error) -> PyErr {
    PyValueError::new_err(error.to_string())
}

/// The bytes of `block` (bytes, bytearray, a contiguous numpy array of any item type, a
/// memoryview): arrays of other item types are seen as their bytes, at the same address, so that
/// `access` and `invalidate` of one block name the same source.
fn contiguous_bytes(block: &Bound<'_, PyAny>) -> PyResult<PyBuffer<u8>> {
    let source = PyBuffer::<u8>::get(block).or_else(|_| {
        let view = PyMemoryView::from(block)?;
        if !view.getattr("c_contiguous")?.is_truthy()? {
            return Err(PyValueError::new_err("block is not contiguous"));
        }
        PyBuffer::<u8>::get(&view.call_method1("cast", ("B",))?)
    })?;
    if !source.is_c_contiguous() {
        return Err(PyValueError::new_err("block is not contiguous"));
    }
    Ok(source)
}

/// Argument `name` as a count (an integer from 0 to the largest `usize`); anything else that is
/// an integer is a `ValueError` naming the argument, not an `OverflowError` of the conversion.
fn count_arg(name: &str, value: &Bound<'_, PyAny>) -> PyResult<usize> {
    value.extract::<usize>().or_else(|error| {
        // An integer of any kind (numpy's included) gives itself as a Python int.
        let Ok(int) = value.call_method0("__index__") else { return Err(error) };
        if !int.is_instance_of::<PyInt>() {
            return Err(error);
        }
        let problem = if int.lt(0)? { "must not be negative" } else { "is too large" };
        Err(PyValueError::new_err(format!("{name} {problem}: 0 to {} (got {int})", usize::MAX)))
    })
}

/// An offloading cache of this machine (seed 001): `access(buf)` starts copying a block into
/// faster memory (the nearest HBM node, else the consumer's node) and returns at once; every
/// consumer of the same block shares one entry.
#[pyclass(name = "Cache", module = "steer.offload", frozen)]
pub struct PyCache {
    cache: Cache,
}

#[pymethods]
impl PyCache {
    /// `placement`: nearest-hbm (default), consumer-node, source-hbm; `copy_policy`: smart
    /// (default), local, brute; `backend`: auto (DSA where usable, else CPU threads), cpu, dsa;
    /// `capacity`: bytes each node may hold (default a quarter of the node's memory).
    #[new]
    #[pyo3(signature = (*, placement=None, copy_policy=None, backend=None, capacity=None))]
    fn new(
        placement: Option<&str>,
        copy_policy: Option<&str>,
        backend: Option<&str>,
        capacity: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let cache = match capacity {
            None => Cache::from_names(placement, copy_policy, backend),
            Some(bytes) => {
                let bytes = count_arg("capacity", bytes)?;
                Cache::from_names_with_capacity(placement, copy_policy, backend, bytes)
            }
        };
        cache.map(|cache| PyCache { cache }).map_err(to_py)
    }

    /// The entry for the bytes of `block` (bytes, bytearray, a contiguous numpy array, ...). The
    /// block must not change while entries of it live; call `invalidate(block)` after changing it.
    fn access(&self, block: &Bound<'_, PyAny>) -> PyResult<PyCacheData> {
        let source = contiguous_bytes(block)?;
        // SAFETY: the buffer export held in `source` keeps the exporter's memory alive (and not
        // resized) as long as the returned CacheData lives; unchanged contents are the caller's
        // promise, as the docstring says.
        let data = unsafe { self.cache.access(source.buf_ptr().cast(), source.len_bytes()) }.map_err(to_py)?;
        Ok(PyCacheData { data, _source: source })
    }

    /// Drops the cache's reference to unused entries of `node` (default: every node).
    #[pyo3(signature = (node=None))]
    fn flush(&self, node: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let node = node.map(|n| count_arg("node", n)).transpose()?;
        self.cache.flush(node).map_err(to_py)
    }

    /// Drops the cache's reference to every entry; holders keep theirs.
    fn clear(&self) {
        self.cache.clear();
    }

    /// Removes the entries of `block` (any buffer `access` takes).
    fn invalidate(&self, block: &Bound<'_, PyAny>) -> PyResult<()> {
        let source = contiguous_bytes(block)?;
        self.cache.invalidate(source.buf_ptr().cast());
        Ok(())
    }

    /// `cpu` or `dsa`.
    #[getter]
    fn backend(&self) -> &'static str {
        self.cache.backend()
    }

    /// Why the backend is not DSA, where it is not.
    #[getter]
    fn backend_note(&self) -> &str {
        self.cache.backend_note()
    }

    /// Counters: hits, misses, uncached, evicted.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.cache.stats();
        let dict = PyDict::new(py);
        dict.set_item("hits", s.hits)?;
        dict.set_item("misses", s.misses)?;
        dict.set_item("uncached", s.uncached)?;
        dict.set_item("evicted", s.evicted)?;
        Ok(dict)
    }
}

/// A consumer's handle on a cache entry.
#[pyclass(name = "CacheData", module = "steer.offload", frozen)]
pub struct PyCacheData {
    data: CacheData,
    _source: PyBuffer<u8>,
}

#[pymethods]
impl PyCacheData {
    /// Returns once the copy has completed (the GIL released meanwhile).
    fn wait(&self, py: Python<'_>) {
        py.allow_threads(|| self.data.wait());
    }

    /// Whether the copy has finished, without waiting.
    fn is_ready(&self) -> bool {
        self.data.is_ready()
    }

    /// Whether the block was copied (after waiting); False means `location()` is the source.
    fn is_cached(&self, py: Python<'_>) -> bool {
        self.wait(py);
        self.data.is_cached()
    }

    /// The node the entry was placed on.
    #[getter]
    fn node(&self) -> usize {
        self.data.node()
    }

    /// The cached bytes as a read-only memoryview without copying (the source's bytes if the copy
    /// failed); waits for the copy first.
    fn location<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyMemoryView>> {
        slf.get().wait(slf.py());
        PyMemoryView::from(slf.as_any())
    }

    fn __len__(&self) -> usize {
        self.data.len()
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no view to fill"));
        }
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("cached bytes are read-only"));
        }
        let data = &slf.get().data;
        slf.py().allow_threads(|| data.wait());
        let location = data.location();
        // SAFETY: `view` is the caller's Py_buffer to fill; the bytes stay valid while the view
        // holds its reference to this object (set in `obj`), which holds the entry.
        unsafe {
            (*view).buf = location as *mut c_void;
            (*view).len = data.len() as isize;
            (*view).readonly = 1;
            (*view).itemsize = 1;
            (*view).format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
                c"B".as_ptr() as *mut _
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = 1;
            (*view).shape =
                if flags & ffi::PyBUF_ND == ffi::PyBUF_ND { &mut (*view).len } else { std::ptr::null_mut() };
            (*view).strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
                &mut (*view).itemsize
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
            (*view).obj = slf.into_any().into_ptr();
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
}

/// The built-in placements and copy policies: {"placement": [(name, description)], "copy_policy": [...]}.
#[pyfunction]
pub fn offload_policies(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("placement", policy::PLACEMENTS.iter().map(|p| (p.name, p.description)).collect::<Vec<_>>())?;
    dict.set_item("copy_policy", policy::COPY_POLICIES.iter().map(|p| (p.name, p.description)).collect::<Vec<_>>())?;
    Ok(dict)
}

/// Entry buffers alive in this process.
#[pyfunction]
pub fn offload_live_allocations() -> usize {
    steer_offload::live_allocations()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("OffloadCache", m.py().get_type::<PyCache>())?;
    m.add("OffloadCacheData", m.py().get_type::<PyCacheData>())?;
    m.add_function(wrap_pyfunction!(offload_policies, m)?)?;
    m.add_function(wrap_pyfunction!(offload_live_allocations, m)?)?;
    Ok(())
}
