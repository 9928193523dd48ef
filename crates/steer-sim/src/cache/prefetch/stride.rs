//! `stride`: per 4 KiB region, detect a repeating stride and fetch ahead along it, as the
//! reference-prediction tables of stride prefetchers do.

use super::{region_of, Prefetcher, PrefetcherInfo, RegionTable, Trigger};
use crate::units::Line;

/// The kind's registration.
#[linkme::distributed_slice(super::PREFETCHERS)]
pub static KIND: PrefetcherInfo = PrefetcherInfo {
    name: "stride",
    description: "per 4 KiB region, detect a repeating stride and fetch ahead along it, within the region",
    build: |spec| {
        Some(Box::new(Stride { degree: spec.degree as i64, distance: spec.distance as i64, table: RegionTable::new() }))
    },
};

struct Stride {
    degree: i64,
    distance: i64,
    /// Region -> (last line, stride, times the stride repeated).
    table: RegionTable<(i64, i64, u32)>,
}

impl Prefetcher for Stride {
    fn on_access(&mut self, trigger: Trigger, out: &mut Vec<Line>) {
        let line = trigger.line.0 as i64;
        let entry = self.table.entry(trigger.line, || (line, 0, 0));
        let delta = line - entry.0;
        if delta == 0 {
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
            let lines = region_of(trigger.line);
            for i in 0..self.degree {
                let target = line + delta * (self.distance + i);
                if lines.contains(&target) {
                    out.push(Line(target as u64));
                }
            }
        }
    }
}
