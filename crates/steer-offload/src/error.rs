//! What can go wrong, as one typed error.

use std::fmt;

/// An error of the offloading cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// `access` was given a null pointer.
    NullBlock,
    /// `access` was given a zero-sized block.
    EmptyBlock,
    /// A policy named a NUMA node the machine does not have.
    NoSuchNode { node: usize, what: &'static str },
    /// A block larger than its destination node's capacity.
    BlockTooLarge { len: usize, node: usize, capacity: usize },
    /// A capacity or thread count that cannot work.
    BadConfig(String),
    /// A name no registry holds.
    UnknownName { what: &'static str, name: String, known: Vec<&'static str> },
    /// A backend that cannot run here, and why.
    Unavailable { backend: &'static str, why: String },
    /// The operating system refused (call and errno text).
    Os(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NullBlock => write!(f, "block is a null pointer"),
            Error::EmptyBlock => write!(f, "block has zero size"),
            Error::NoSuchNode { node, what } => {
                write!(f, "{what} names NUMA node {node}, which this machine does not have")
            }
            Error::BlockTooLarge { len, node, capacity } => {
                write!(f, "a block of {len} bytes exceeds node {node}'s cache capacity of {capacity} bytes")
            }
            Error::BadConfig(why) => write!(f, "{why}"),
            Error::UnknownName { what, name, known } => {
                write!(f, "unknown {what} {name:?} (known: {})", known.join(", "))
            }
            Error::Unavailable { backend, why } => write!(f, "{backend} backend unavailable: {why}"),
            Error::Os(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// The last OS error, named after the call that failed.
pub(crate) fn os_error(call: &str) -> Error {
    Error::Os(format!("{call}: {}", std::io::Error::last_os_error()))
}
