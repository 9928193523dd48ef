//! `none`: no hardware prefetching.

use super::PrefetcherInfo;

pub const KIND: PrefetcherInfo = PrefetcherInfo { name: "none", description: "no hardware prefetching", build: |_| None };
