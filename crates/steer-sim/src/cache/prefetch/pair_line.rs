//! The adjacent-line (spatial) prefetcher beside a level's own: on a demand miss, fetch the other
//! line of the miss's aligned pair of lines (Intel's L2 spatial prefetcher "strives to complete
//! every cache line fetched to the L2 cache with the pair line that completes it to a 128-byte
//! aligned chunk", Intel 64 and IA-32 Architectures Optimization Reference Manual, Data
//! Prefetching).

use super::{Prefetcher, Trigger};
use crate::units::Line;

/// The level's own prefetcher (if any), and the pair line on every demand miss.
pub(super) struct PairLine {
    pub(super) inner: Option<Box<dyn Prefetcher>>,
}

impl Prefetcher for PairLine {
    fn on_access(&mut self, trigger: Trigger, out: &mut Vec<Line>) {
        if !trigger.hit {
            out.push(Line(trigger.line.0 ^ 1));
        }
        if let Some(inner) = &mut self.inner {
            inner.on_access(trigger, out);
        }
    }
}
