//! Memory for cache entries: anonymous pages bound to the destination node.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{os_error, Result};

/// Entry buffers alive now, across every cache of the process.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// How many entry buffers are allocated now (for leak checks: zero once every cache and every
/// `CacheData` is gone and copies in flight have finished).
pub fn live_allocations() -> usize {
    LIVE.load(Ordering::SeqCst)
}

/// `len` bytes of pages bound to one NUMA node, unmapped on drop.
pub(crate) struct NodeBuffer {
    ptr: NonNull<u8>,
    mapped: usize,
}

// SAFETY: a NodeBuffer owns its mapping exclusively; the bytes are written only by the copy jobs
// of its entry before the entry is published as complete (a release store the readers acquire).
unsafe impl Send for NodeBuffer {}
unsafe impl Sync for NodeBuffer {}

impl NodeBuffer {
    /// Pages for `len` bytes on `node` (`MPOL_BIND`: the kernel allocates them there or fails), or
    /// wherever the kernel likes for `None`.
    pub(crate) fn on_node(len: usize, node: Option<usize>) -> Result<NodeBuffer> {
        let page = 4096;
        let mapped = len.div_ceil(page) * page;
        // SAFETY: a fresh anonymous private mapping; no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(os_error("mmap"));
        }
        let buffer = NodeBuffer { ptr: NonNull::new(ptr.cast()).expect("mmap returned a mapping"), mapped };
        LIVE.fetch_add(1, Ordering::SeqCst);
        // Huge pages cut the page faults the copy takes on a fresh buffer 512-fold; advice only.
        // (Miri, which checks the unsafe code in tests, knows neither advice nor NUMA policy.)
        if mapped >= 2 << 20 && !cfg!(miri) {
            // SAFETY: advice on this buffer's own mapping.
            unsafe { libc::madvise(ptr, mapped, libc::MADV_HUGEPAGE) };
        }
        if let Some(node) = node.filter(|_| !cfg!(miri)) {
            buffer.bind(node)?;
        }
        Ok(buffer)
    }

    fn bind(&self, node: usize) -> Result<()> {
        const MPOL_BIND: libc::c_int = 2;
        let bits = libc::c_ulong::BITS as usize;
        let mut mask = vec![0 as libc::c_ulong; node / bits + 1];
        mask[node / bits] |= 1 << (node % bits);
        // SAFETY: binds this buffer's own, not yet touched pages; the mask outlives the call and
        // maxnode counts its bits.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mbind,
                self.ptr.as_ptr(),
                self.mapped,
                MPOL_BIND,
                mask.as_ptr(),
                (mask.len() * bits) as libc::c_ulong,
                0 as libc::c_uint,
            )
        };
        // A kernel without NUMA support has one node and nothing to bind.
        let unsupported = rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS);
        if rc != 0 && !(unsupported && node == 0) {
            return Err(os_error(&format!("mbind to node {node}")));
        }
        Ok(())
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for NodeBuffer {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `on_node` with this length and nothing refers to it once
        // its owner drops it.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.mapped) };
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "Miri has no NUMA policy to refuse a node")]
    fn buffers_are_writable_and_counted_while_alive() {
        let buffer = NodeBuffer::on_node(5000, Some(0)).unwrap();
        // SAFETY: 5000 bytes were mapped for this buffer.
        unsafe { std::ptr::write_bytes(buffer.as_ptr(), 0xab, 5000) };
        drop(buffer);
        assert!(NodeBuffer::on_node(64, Some(1 << 20)).is_err(), "a node that does not exist");
    }
}
