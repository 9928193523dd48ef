//! A file mapped into memory, read-only: binary trace records sorted straight from the host's
//! page cache, not copied out of it first (`replay_binary_file`).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// The first bytes of a file, mapped read-only (`mmap`). As with any mapping, the file must not
/// shrink while it is mapped: a page past its new end would fault.
pub(super) struct Mapping {
    start: NonNull<u8>,
    length: usize,
}

// SAFETY: the mapping is only read, and stays until `drop`.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the whole of a regular file.
    pub(super) fn of_file(file: &File) -> io::Result<Mapping> {
        let metadata = file.metadata()?;
        if !metadata.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        let length = usize::try_from(metadata.len()).map_err(io::Error::other)?;
        if length == 0 {
            return Ok(Mapping { start: NonNull::dangling(), length });
        }
        let (protection, flags) = (libc::PROT_READ, libc::MAP_PRIVATE);
        // SAFETY: a new mapping of an open file, at an address of the kernel's choosing.
        let start = unsafe { libc::mmap(std::ptr::null_mut(), length, protection, flags, file.as_raw_fd(), 0) };
        if start == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { start: NonNull::new(start.cast()).expect("a mapping is not at address 0"), length })
    }

    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: `length` bytes from `start` are mapped and readable until `drop`.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.length) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.length > 0 {
            // SAFETY: unmaps exactly what `of_file` mapped, no longer borrowed (`bytes` borrows self).
            unsafe { libc::munmap(self.start.as_ptr().cast(), self.length) };
        }
    }
}
