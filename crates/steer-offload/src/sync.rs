//! The synchronisation primitives the entry protocol uses: std's, or loom's when model checking
//! (`RUSTFLAGS="--cfg loom"`).

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicU32, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicU32, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
