//! An offloading cache, after seed 001 (chapters 4 and 5): a program asks for a block of memory,
//! the cache copies it asynchronously into faster memory (an HBM node, or the consumer's own node)
//! chosen by a placement policy, with the copy engines a copy policy names; every consumer of the
//! same block shares one entry.
//!
//! ```
//! use steer_offload::{Cache, CpuBackend, Topology};
//! use std::sync::Arc;
//!
//! let topology = Arc::new(Topology::single_node(2, 1 << 30));
//! let cache = Cache::builder(topology.clone()).backend(Arc::new(CpuBackend::new(&topology, 1))).build().unwrap();
//! let block: &'static [u8] = Box::leak(vec![7u8; 1 << 16].into_boxed_slice());
//! let data = cache.access_slice(block).unwrap();
//! data.wait();
//! assert_eq!(data.as_slice(), block);
//! assert!(data.is_cached());
//! ```
//!
//! Semantics kept from the seed:
//! - [`Cache::access`] submits the copy on a miss and returns at once; on a hit it returns the
//!   existing entry. One entry per source pointer per destination node.
//! - [`CacheData::wait`] returns once the copy has completed, sleeping (futex) meanwhile. Any
//!   holder can complete the wait: the copy is submitted by whichever holder gets there first, so a
//!   holder descheduled between inserting the entry and submitting cannot block the others.
//! - An entry's memory is freed when its last holder lets go; [`Cache::clear`] and
//!   [`Cache::flush`] only drop the cache's own reference.
//! - Entries stay until a node's capacity forces unused ones out.
//!
//! Usage restrictions (as in the seed): overlapping blocks are not handled, and invalidation is
//! manual: after changing a source block, call [`Cache::invalidate`]; holders of the old entry keep
//! reading the old copy.

pub mod backend;
mod cache;
mod entry;
mod error;
pub mod ffi;
mod memory;
pub mod policy;
mod sync;
pub mod topology;

pub use backend::cpu::CpuBackend;
pub use backend::dsa::DsaBackend;
pub use backend::{Backend, CopyJob};
pub use cache::{Cache, CacheBuilder, Stats};
pub use entry::CacheData;
pub use error::Error;
pub use memory::live_allocations;
pub use policy::{CopyPolicy, Placement};
pub use topology::{Node, Topology};
