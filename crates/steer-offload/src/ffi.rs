//! The C API; `include/steer_offload.h` is generated from this file by cbindgen (a test keeps it
//! current) and `include/steer_offload.hpp` wraps it in RAII classes for C++.
//!
//! Functions that can fail return NULL or -1 and leave a one-line message for
//! [`steer_last_error`] on the calling thread.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};

use crate::{Cache, CacheData, Error};

/// An offloading cache.
pub struct SteerCache(Cache);

/// A holder's handle on a cache entry.
pub struct SteerCacheData(CacheData);

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn fail(error: Error) {
    let text = CString::new(error.to_string().replace('\0', " ")).expect("no NUL left");
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// The message of the last failed call on this thread ("" if none); valid until the next failure.
#[no_mangle]
pub extern "C" fn steer_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// # Safety
/// `name` is NULL or a NUL-terminated string.
unsafe fn name<'a>(name: *const c_char, what: &'static str) -> Result<Option<&'a str>, Error> {
    if name.is_null() {
        return Ok(None);
    }
    // SAFETY: per this function's contract.
    let text = unsafe { CStr::from_ptr(name) };
    text.to_str().map(Some).map_err(|_| Error::BadConfig(format!("{what} name is not UTF-8")))
}

/// A cache of this machine. Each name may be NULL for the default: placement `nearest-hbm`
/// (`consumer-node`, `source-hbm`), copy policy `smart` (`local`, `brute`), backend `auto`
/// (`cpu`, `dsa`). Returns NULL on error.
///
/// # Safety
/// Each argument is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn steer_cache_new(
    placement: *const c_char,
    copy_policy: *const c_char,
    backend: *const c_char,
) -> *mut SteerCache {
    // SAFETY: per this function's contract.
    let names = unsafe { (name(placement, "placement"), name(copy_policy, "copy policy"), name(backend, "backend")) };
    let cache = match names {
        (Ok(p), Ok(c), Ok(b)) => Cache::from_names(p, c, b),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Err(e),
    };
    match cache {
        Ok(cache) => Box::into_raw(Box::new(SteerCache(cache))),
        Err(e) => {
            fail(e);
            std::ptr::null_mut()
        }
    }
}

/// Frees a cache; entries still held stay valid until their last holder frees them.
///
/// # Safety
/// `cache` is NULL or came from `steer_cache_new` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn steer_cache_free(cache: *mut SteerCache) {
    if !cache.is_null() {
        // SAFETY: per this function's contract.
        drop(unsafe { Box::from_raw(cache) });
    }
}

/// The name of the backend copying for `cache` (`cpu` or `dsa`), a static string.
///
/// # Safety
/// `cache` came from `steer_cache_new`.
#[no_mangle]
pub unsafe extern "C" fn steer_cache_backend(cache: *const SteerCache) -> *const c_char {
    // SAFETY: per this function's contract.
    match unsafe { &*cache }.0.backend() {
        "dsa" => c"dsa".as_ptr(),
        _ => c"cpu".as_ptr(),
    }
}

/// The entry for `len` bytes at `src`: submits the copy on a miss and returns at once. Returns
/// NULL on error (null or empty block, block larger than the node's capacity, ...).
///
/// # Safety
/// `cache` came from `steer_cache_new`; `src` is readable for `len` bytes and unchanged while any
/// entry of it lives (call `steer_cache_invalidate` after changing it).
#[no_mangle]
pub unsafe extern "C" fn steer_cache_access(
    cache: *const SteerCache,
    src: *const c_void,
    len: usize,
) -> *mut SteerCacheData {
    // SAFETY: per this function's contract.
    match unsafe { (*cache).0.access(src.cast(), len) } {
        Ok(data) => Box::into_raw(Box::new(SteerCacheData(data))),
        Err(e) => {
            fail(e);
            std::ptr::null_mut()
        }
    }
}

/// Drops the cache's reference to unused entries of `node`, or of every node for -1. Returns 0,
/// or -1 for a node that does not exist.
///
/// # Safety
/// `cache` came from `steer_cache_new`.
#[no_mangle]
pub unsafe extern "C" fn steer_cache_flush(cache: *const SteerCache, node: c_int) -> c_int {
    let node = if node < 0 { None } else { Some(node as usize) };
    // SAFETY: per this function's contract.
    match unsafe { &*cache }.0.flush(node) {
        Ok(()) => 0,
        Err(e) => {
            fail(e);
            -1
        }
    }
}

/// Drops the cache's reference to every entry.
///
/// # Safety
/// `cache` came from `steer_cache_new`.
#[no_mangle]
pub unsafe extern "C" fn steer_cache_clear(cache: *const SteerCache) {
    // SAFETY: per this function's contract.
    unsafe { &*cache }.0.clear();
}

/// Removes every entry of source pointer `src`.
///
/// # Safety
/// `cache` came from `steer_cache_new`.
#[no_mangle]
pub unsafe extern "C" fn steer_cache_invalidate(cache: *const SteerCache, src: *const c_void) {
    // SAFETY: per this function's contract.
    unsafe { &*cache }.0.invalidate(src.cast());
}

/// Waits (sleeping) until the entry's copy has completed.
///
/// # Safety
/// `data` came from `steer_cache_access` or `steer_cache_data_clone` and is not yet freed.
#[no_mangle]
pub unsafe extern "C" fn steer_cache_data_wait(data: *const SteerCacheData) {
    // SAFETY: per this function's contract.
    unsafe { &*data }.0.wait();
}

/// The cached bytes after waiting; the source if the copy failed or found no room.
///
/// # Safety
/// As for `steer_cache_data_wait`.
#[no_mangle]
pub unsafe extern "C" fn steer_cache_data_location(data: *const SteerCacheData) -> *const c_void {
    // SAFETY: per this function's contract.
    unsafe { &*data }.0.location().cast()
}

/// Whether the block was copied (after waiting): 1, or 0 when the location is the source.
///
/// # Safety
/// As for `steer_cache_data_wait`.
#[no_mangle]
pub unsafe extern "C" fn steer_cache_data_is_cached(data: *const SteerCacheData) -> c_int {
    // SAFETY: per this function's contract.
    c_int::from(unsafe { &*data }.0.is_cached())
}

/// Another handle on the same entry (for another consumer); free each with `steer_cache_data_free`.
///
/// # Safety
/// As for `steer_cache_data_wait`.
#[no_mangle]
pub unsafe extern "C" fn steer_cache_data_clone(data: *const SteerCacheData) -> *mut SteerCacheData {
    // SAFETY: per this function's contract.
    Box::into_raw(Box::new(SteerCacheData(unsafe { &*data }.0.clone())))
}

/// Lets go of a handle; the entry's memory is freed with its last handle.
///
/// # Safety
/// `data` is NULL or a handle not yet freed, and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn steer_cache_data_free(data: *mut SteerCacheData) {
    if !data.is_null() {
        // SAFETY: per this function's contract.
        drop(unsafe { Box::from_raw(data) });
    }
}

/// Entry buffers alive in this process (0 once everything is freed).
#[no_mangle]
pub extern "C" fn steer_live_allocations() -> usize {
    crate::live_allocations()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's last error, as text.
    fn last_error() -> String {
        // SAFETY: steer_last_error returns a NUL-terminated string that lives until the next failure.
        unsafe { CStr::from_ptr(steer_last_error()) }.to_string_lossy().into_owned()
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot read the host's topology or bind memory to a node")]
    fn failures_leave_their_message_and_a_held_entry_is_a_live_allocation() {
        // SAFETY: the names are NUL-terminated; the block is leaked, so it outlives its entries;
        // each handle is freed once and not used afterwards.
        unsafe {
            assert!(steer_cache_new(c"no-such-placement".as_ptr(), std::ptr::null(), std::ptr::null()).is_null());
            assert!(last_error().contains("no-such-placement"), "{}", last_error());
            let cache = steer_cache_new(c"consumer-node".as_ptr(), std::ptr::null(), c"cpu".as_ptr());
            assert!(!cache.is_null(), "{}", last_error());
            let block: &'static [u8] = Box::leak(vec![7u8; 4096].into_boxed_slice());
            assert!(steer_cache_access(cache, block.as_ptr().cast(), 0).is_null());
            assert_eq!(last_error(), "block has zero size");
            let data = steer_cache_access(cache, block.as_ptr().cast(), block.len());
            assert!(!data.is_null(), "{}", last_error());
            steer_cache_data_wait(data);
            assert_eq!(steer_cache_data_is_cached(data), 1);
            assert!(steer_live_allocations() >= 1, "the entry's buffer is alive while held");
            steer_cache_data_free(data);
            steer_cache_free(cache);
        }
    }
}
