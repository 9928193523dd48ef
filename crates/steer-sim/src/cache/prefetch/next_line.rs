//! `next_line`: on a miss, or the first use of a line it prefetched, fetch the lines after it.

use super::{Prefetcher, PrefetcherInfo, Trigger};
use crate::units::Line;

/// The kind's registration.
#[linkme::distributed_slice(super::PREFETCHERS)]
pub static KIND: PrefetcherInfo = PrefetcherInfo {
    name: "next_line",
    description: "on a miss (or first use of a prefetched line), fetch the following lines",
    build: |spec| Some(Box::new(NextLine { degree: spec.degree as u64, distance: spec.distance as u64 })),
};

struct NextLine {
    degree: u64,
    distance: u64,
}

impl Prefetcher for NextLine {
    fn on_access(&mut self, trigger: Trigger, out: &mut Vec<Line>) {
        if !trigger.hit || trigger.prefetch_hit {
            let first = trigger.line.0 + self.distance;
            out.extend((first..first + self.degree).map(Line));
        }
    }
}
