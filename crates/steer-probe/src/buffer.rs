//! Anonymous memory aligned to 2 MiB, backed by transparent huge pages where the kernel allows it
//! (so large working sets measure the caches and DRAM rather than page walks), and touched before
//! use (so no timing includes first-touch faults).

use std::io;

use crate::check_bytes;

/// Huge page size the memory is aligned and rounded to.
const HUGE: usize = 2 << 20;

/// At least `len` bytes of zeroed, touched memory, unmapped on drop.
pub struct Buffer {
    /// The mapping as the kernel returned it, and its length (for munmap).
    base: *mut libc::c_void,
    mapped: usize,
    /// The 2 MiB-aligned start inside it, and the usable length.
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a Buffer owns its mapping exclusively; moving it to another thread moves that ownership.
unsafe impl Send for Buffer {}

impl Buffer {
    pub fn new(len: u64) -> io::Result<Buffer> {
        check_bytes("buffer length", len)?;
        let len = len as usize;
        let mapped = len.div_ceil(HUGE) * HUGE + HUGE;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing; the result
        // is checked before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let offset = (HUGE - base as usize % HUGE) % HUGE;
        // SAFETY: `offset` < HUGE and the mapping is `len` rounded up to HUGE plus one HUGE, so
        // the aligned range of `len` bytes lies inside it.
        let ptr = unsafe { (base as *mut u8).add(offset) };
        #[cfg(target_os = "linux")]
        // SAFETY: advice on a range of our own mapping; if it fails (no THP) pages are just small.
        unsafe {
            libc::madvise(ptr as *mut libc::c_void, len.div_ceil(HUGE) * HUGE, libc::MADV_HUGEPAGE);
        }
        let mut buffer = Buffer { base, mapped, ptr, len };
        for page in buffer.bytes_mut().chunks_mut(4096) {
            // A volatile write so the touch is not elided (the memory reads as zero anyway).
            // SAFETY: `page` is a valid, exclusive slice of at least one byte.
            unsafe { std::ptr::write_volatile(page.as_mut_ptr(), 0) };
        }
        Ok(buffer)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` is inside the mapping this Buffer owns, initialised (zeroed).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// The memory as 64-bit words (the start is 2 MiB-aligned; a tail under 8 bytes is left out).
    pub fn words(&self) -> &[u64] {
        // SAFETY: aligned for u64 (2 MiB), inside the mapping, any bit pattern is a valid u64.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u64, self.len / 8) }
    }

    pub fn words_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in `words`, exclusive through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u64, self.len / 8) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made; no slice of it outlives `self`.
        unsafe { libc::munmap(self.base, self.mapped) };
    }
}

/// The kernel's transparent huge page mode (`always`, `madvise`, `never`), or `unknown`.
pub fn huge_pages() -> String {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .ok()
        .and_then(|text| Some(text.split('[').nth(1)?.split(']').next()?.to_string()))
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_is_aligned_zeroed_and_as_long_as_asked() {
        let mut buffer = Buffer::new(5000).unwrap();
        assert_eq!(buffer.len(), 5000);
        assert_eq!(buffer.bytes().as_ptr() as usize % HUGE, 0);
        assert!(buffer.bytes().iter().all(|&b| b == 0));
        assert_eq!(buffer.words().len(), 625);
        assert_eq!(buffer.words_mut().len(), 625);
        buffer.words_mut()[624] = u64::MAX;
        assert_eq!(buffer.bytes()[4999], 0xff);
        buffer.bytes_mut()[8] = 1;
        assert_eq!(buffer.bytes_mut().len(), 5000);
        assert_eq!(buffer.words()[1], 1);
        assert!(!buffer.is_empty());
    }

    #[test]
    fn absurd_lengths_are_refused_naming_them() {
        for len in [0, 63, (64 << 30) + 1] {
            let error = Buffer::new(len).err().expect("refused");
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
            assert!(error.to_string().starts_with("buffer length: must be 64 B to 64 GiB"), "{error}");
        }
    }

    #[test]
    fn the_huge_page_mode_is_a_word() {
        let mode = huge_pages();
        assert!(["always", "madvise", "never", "unknown"].contains(&mode.as_str()), "{mode}");
    }
}
