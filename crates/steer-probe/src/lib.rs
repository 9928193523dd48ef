//! Small native kernels that time this machine's memory hierarchy, for `steer calibrate` (the
//! model's parameters) and `steer validate` (loops the simulator also runs). Every kernel runs
//! one untimed pass over its data, then repeats its loop, doubling the count, until the timed
//! loop lasted at least `min_ns`; results are per element of the loop.

mod buffer;
mod cpuid;
mod kernels;
mod pin;

pub use buffer::{huge_pages, Buffer};
pub use cpuid::data_tlb;
pub use kernels::{
    bandwidth_gbs, chase_ns, clock_ghz, handoff_ns, peer_read_ns, producer_consumer_ns, random_reads_ns, ring_copy_ns,
    sizes, strided_scan_ns, Access, XorShift64, MAX_HANDOFF_BUFFER, PEER_LINES, RANDOM_SEED,
};
pub use pin::{allowed_cpus, pin_current_thread};

use std::io;

/// Largest working set a kernel accepts.
pub const MAX_BYTES: u64 = 64 << 30;
/// Longest a single timing may be asked to last.
pub const MAX_MIN_NS: u64 = 60_000_000_000;

/// An `InvalidInput` error naming the argument.
pub(crate) fn invalid(what: &str, message: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{what}: {message}"))
}

pub(crate) fn check_bytes(what: &str, bytes: u64) -> io::Result<()> {
    if (64..=MAX_BYTES).contains(&bytes) {
        Ok(())
    } else {
        Err(invalid(what, format!("must be 64 B to {} GiB (got {bytes})", MAX_BYTES >> 30)))
    }
}

pub(crate) fn check_min_ns(min_ns: u64) -> io::Result<()> {
    if min_ns <= MAX_MIN_NS {
        Ok(())
    } else {
        Err(invalid("min_ns", format!("must be at most 60 s (got {min_ns} ns)")))
    }
}
