//! The synchronisation primitives of the entry protocol and the cache state: std's, or loom's when
//! model checking (`RUSTFLAGS="--cfg loom"`). `Arc` is always std's (loom's cannot hold a `dyn`
//! backend); the reference count it keeps is std's to get right, and the cache reads it only under
//! its node's write lock, where no new reference can be made.

pub(crate) use std::sync::Arc;

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicU32, AtomicUsize, Ordering},
    Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicU32, AtomicUsize, Ordering},
    Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
