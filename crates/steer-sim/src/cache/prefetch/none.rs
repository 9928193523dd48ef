//! `none`: no hardware prefetching.

use super::PrefetcherInfo;

/// The kind's registration.
#[linkme::distributed_slice(super::PREFETCHERS)]
pub static KIND: PrefetcherInfo =
    PrefetcherInfo { name: "none", description: "no hardware prefetching", build: |_| None };
