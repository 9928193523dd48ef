//! `stride`: per 4 KiB region, detect a repeating stride and fetch ahead along it, as the
//! reference-prediction tables of stride prefetchers do.

use rustc_hash::FxHashMap;

use super::{Prefetcher, PrefetcherInfo, Trigger};
use crate::units::Line;

/// The kind's registration.
#[linkme::distributed_slice(super::PREFETCHERS)]
pub static KIND: PrefetcherInfo = PrefetcherInfo {
    name: "stride",
    description: "per 4 KiB region, detect a repeating stride and fetch ahead along it, within the region",
    build: |spec| Some(Box::new(Stride::new(spec.degree as i64, spec.distance as i64, false))),
};

/// The table behind `stride` and, following only consecutive lines, `stream`.
pub(super) struct Stride {
    degree: i64,
    distance: i64,
    /// Follow only strides of one line up or down (a stream prefetcher).
    unit_only: bool,
    /// Region -> (last line, stride, times the stride repeated).
    table: FxHashMap<u64, (u64, i64, u32)>,
}

/// Lines per tracked region (4 KiB of 64 B lines).
const REGION_LINES: u64 = 64;
/// Regions tracked at once; the table restarts when full (a small hardware table forgets too).
const REGIONS: usize = 64;

impl Stride {
    pub(super) fn new(degree: i64, distance: i64, unit_only: bool) -> Stride {
        Stride { degree, distance, unit_only, table: FxHashMap::default() }
    }
}

impl Prefetcher for Stride {
    fn on_access(&mut self, trigger: Trigger, out: &mut Vec<Line>) {
        let line = trigger.line.0;
        let region = line / REGION_LINES;
        if self.table.len() >= REGIONS && !self.table.contains_key(&region) {
            self.table.clear();
        }
        let entry = self.table.entry(region).or_insert((line, 0, 0));
        let delta = line as i64 - entry.0 as i64;
        if delta == 0 {
            return;
        }
        if self.unit_only && delta.abs() != 1 {
            // A jump ends the stream; a new one may start here.
            *entry = (line, 0, 0);
            return;
        }
        if delta == entry.1 {
            entry.2 += 1;
        } else {
            *entry = (line, delta, 0);
            return;
        }
        entry.0 = line;
        if entry.2 >= 1 {
            // Only within the region: the next 4 KiB of addresses is usually another page,
            // which hardware prefetchers do not cross.
            let region_lines = region * REGION_LINES..(region + 1) * REGION_LINES;
            for i in 0..self.degree {
                let target = line as i64 + delta * (self.distance + i);
                if target >= 0 && region_lines.contains(&(target as u64)) {
                    out.push(Line(target as u64));
                }
            }
        }
    }
}
