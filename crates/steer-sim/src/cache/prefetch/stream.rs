//! `stream`: per 4 KiB region, follow consecutive lines up or down and fetch ahead along them,
//! as the stream prefetchers of AMD's Zen L2 ("additional sequential lines in ascending or
//! descending directions", Zen 5 software optimization guide) do. The `stride` table, unit
//! strides only.

use super::stride::Stride;
use super::PrefetcherInfo;

/// The kind's registration.
#[linkme::distributed_slice(super::PREFETCHERS)]
pub static KIND: PrefetcherInfo = PrefetcherInfo {
    name: "stream",
    description: "per 4 KiB region, follow consecutive lines up or down and fetch ahead along them, within the region",
    build: |spec| Some(Box::new(Stride::new(spec.degree as i64, spec.distance as i64, true))),
};
