//! Hardware prefetchers: small modules that watch one cache level's demand accesses and name
//! lines to fetch ahead. Each registers by name in `PREFETCHERS`; a cache spec picks one with
//! `prefetcher = { kind = "NAME", degree = D, distance = K }`.

use rustc_hash::FxHashMap;

use crate::error::{ensure, ConfigError, ConfigResult};
use crate::params::params;
use crate::units::Line;

/// A demand access as a prefetcher sees it.
#[derive(Debug, Clone, Copy)]
pub struct Trigger {
    pub line: Line,
    pub hit: bool,
    /// The access was the first use of a line a prefetch brought in (keeps streams going).
    pub prefetch_hit: bool,
}

/// The contract: observe each demand access at the prefetcher's level, append the lines to
/// prefetch (the hierarchy drops those already present). Must be deterministic.
pub trait Prefetcher: Send {
    fn on_access(&mut self, trigger: Trigger, out: &mut Vec<Line>);
}

params! {
    /// A cache level's hardware prefetcher.
    pub struct PrefetcherSpec {
        /// `none`, `next_line` (the lines after a miss) or `stride` (a repeating stride within a page).
        kind: String = "none".to_string(),
        /// Lines prefetched per trigger.
        degree: u32 = 1,
        /// How far ahead the first prefetched line is, in lines (next_line) or strides (stride).
        distance: u32 = 1,
    }
}

/// A registered prefetcher: name, description, constructor (`None` for no prefetcher).
pub struct PrefetcherInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub build: fn(&PrefetcherSpec) -> Option<Box<dyn Prefetcher>>,
}

pub const PREFETCHERS: &[PrefetcherInfo] = &[
    PrefetcherInfo { name: "none", description: "no hardware prefetching", build: |_| None },
    PrefetcherInfo {
        name: "next_line",
        description: "on a miss (or first use of a prefetched line), fetch the following lines",
        build: |spec| Some(Box::new(NextLine { degree: spec.degree as u64, distance: spec.distance as u64 })),
    },
    PrefetcherInfo {
        name: "stride",
        description: "per 4 KiB region, detect a repeating stride and fetch ahead along it, within the region",
        build: |spec| Some(Box::new(Stride::new(spec.degree as i64, spec.distance as i64))),
    },
];

impl PrefetcherSpec {
    pub fn validate(&self, path: &str) -> ConfigResult<()> {
        if !PREFETCHERS.iter().any(|p| p.name == self.kind) {
            let known: Vec<_> = PREFETCHERS.iter().map(|p| p.name).collect();
            return Err(ConfigError::new(
                format!("{path}.kind"),
                format!("unknown prefetcher `{}` (known: {})", self.kind, known.join(", ")),
            ));
        }
        ensure(self.degree >= 1, &format!("{path}.degree"), || "must be at least 1".into())?;
        ensure(self.distance >= 1, &format!("{path}.distance"), || "must be at least 1".into())
    }

    pub fn build(&self) -> Option<Box<dyn Prefetcher>> {
        PREFETCHERS.iter().find(|p| p.name == self.kind).and_then(|p| (p.build)(self))
    }
}

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

/// Per-region stride detection, as in the reference-prediction tables of stride prefetchers.
struct Stride {
    degree: i64,
    distance: i64,
    /// Region -> (last line, stride, times the stride repeated).
    table: FxHashMap<u64, (u64, i64, u32)>,
}

/// Lines per tracked region (4 KiB of 64 B lines).
const REGION_LINES: u64 = 64;
/// Regions tracked at once; the table restarts when full (a small hardware table forgets too).
const REGIONS: usize = 64;

impl Stride {
    fn new(degree: i64, distance: i64) -> Stride {
        Stride { degree, distance, table: FxHashMap::default() }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(prefetcher: &mut dyn Prefetcher, lines: &[u64]) -> Vec<u64> {
        let mut out = Vec::new();
        for &line in lines {
            prefetcher.on_access(Trigger { line: Line(line), hit: false, prefetch_hit: false }, &mut out);
        }
        out.into_iter().map(|l| l.0).collect()
    }

    #[test]
    fn next_line_fetches_the_following_lines() {
        let spec = PrefetcherSpec { kind: "next_line".into(), degree: 2, distance: 1 };
        assert_eq!(run(spec.build().unwrap().as_mut(), &[10]), vec![11, 12]);
    }

    #[test]
    fn stride_needs_the_stride_twice_then_runs_ahead() {
        let spec = PrefetcherSpec { kind: "stride".into(), degree: 1, distance: 2 };
        // Lines 0, 3, 6, 9: stride 3 seen at 3 (first), confirmed at 6 -> 6 + 3*2 = 12; at 9 -> 15.
        assert_eq!(run(spec.build().unwrap().as_mut(), &[0, 3, 6, 9]), vec![12, 15]);
        // Nothing beyond the 64-line region the stride runs in.
        assert!(run(spec.build().unwrap().as_mut(), &[54, 57, 60, 63]).is_empty());
        assert!(spec.build().is_some());
        assert!(PrefetcherSpec::default().build().is_none());
        assert!(PrefetcherSpec { kind: "magic".into(), ..Default::default() }.validate("p").is_err());
    }
}
