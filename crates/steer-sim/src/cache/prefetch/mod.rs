//! Hardware prefetchers: small modules that watch one cache level's demand accesses and name
//! lines to fetch ahead. A prefetcher is one file with a `KIND` static registering it in
//! `PREFETCHERS`, plus its `mod` line here; a cache spec picks one with `prefetcher = { kind = "NAME", degree = D,
//! distance = K }`.

use crate::error::{ensure, ConfigResult};
use crate::params::{params, Name, Registry};
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

/// Most lines one trigger may prefetch: a 4 KiB page of 64 B lines (hardware stays within one).
pub const MAX_DEGREE: u32 = 64;
/// Farthest ahead a prefetch may start, in lines or strides.
pub const MAX_DISTANCE: u32 = 4096;

params! {
    /// A cache level's hardware prefetcher.
    pub struct PrefetcherSpec {
        /// Which prefetcher: the name of a registered one.
        kind: Name<Prefetchers> = Name::new("none"),
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

/// Every prefetcher, by the name `prefetcher.kind` gives; each adds its `KIND` here.
#[linkme::distributed_slice]
pub static PREFETCHERS: [PrefetcherInfo];

mod next_line;
mod none;
mod stream;
mod stride;

/// The registry `prefetcher.kind` names an entry of.
pub struct Prefetchers;

impl Registry for Prefetchers {
    const WHAT: &'static str = "prefetcher";
    fn entries() -> Vec<(&'static str, &'static str)> {
        PREFETCHERS.iter().map(|p| (p.name, p.description)).collect()
    }
}

impl PrefetcherSpec {
    pub fn validate(&self, path: &str) -> ConfigResult<()> {
        self.kind.check(&format!("{path}.kind"))?;
        ensure((1..=MAX_DEGREE).contains(&self.degree), &format!("{path}.degree"), || {
            format!("must be 1 to {MAX_DEGREE} lines per trigger (got {})", self.degree)
        })?;
        ensure(self.distance <= MAX_DISTANCE, &format!("{path}.distance"), || {
            format!("must be at most {MAX_DISTANCE} (got {})", self.distance)
        })?;
        ensure(self.distance >= 1, &format!("{path}.distance"), || "must be at least 1".into())
    }

    pub fn build(&self) -> Option<Box<dyn Prefetcher>> {
        PREFETCHERS.iter().find(|p| p.name == self.kind.as_str()).and_then(|p| (p.build)(self))
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
        let spec = PrefetcherSpec { kind: Name::new("next_line"), degree: 2, distance: 1 };
        assert_eq!(run(spec.build().unwrap().as_mut(), &[10]), vec![11, 12]);
    }

    #[test]
    fn stride_needs_the_stride_twice_then_runs_ahead() {
        let spec = PrefetcherSpec { kind: Name::new("stride"), degree: 1, distance: 2 };
        // Lines 0, 3, 6, 9: stride 3 seen at 3 (first), confirmed at 6 -> 6 + 3*2 = 12; at 9 -> 15.
        assert_eq!(run(spec.build().unwrap().as_mut(), &[0, 3, 6, 9]), vec![12, 15]);
        // Nothing beyond the 64-line region the stride runs in.
        assert!(run(spec.build().unwrap().as_mut(), &[54, 57, 60, 63]).is_empty());
        assert!(spec.build().is_some());
        assert!(PrefetcherSpec::default().build().is_none());
        assert!(PrefetcherSpec { kind: Name::new("magic"), ..Default::default() }.validate("p").is_err());
    }

    #[test]
    fn stream_follows_consecutive_lines_up_or_down_and_nothing_else() {
        let spec = PrefetcherSpec { kind: Name::new("stream"), degree: 2, distance: 4 };
        // Up: confirmed at 12 -> 16, 17; at 13 -> 17, 18.
        assert_eq!(run(spec.build().unwrap().as_mut(), &[10, 11, 12, 13]), vec![16, 17, 17, 18]);
        // Down: confirmed at 48 -> 44, 43; not below the 4 KiB region (lines 64..128) it runs in.
        assert_eq!(run(spec.build().unwrap().as_mut(), &[50, 49, 48]), vec![44, 43]);
        assert!(run(spec.build().unwrap().as_mut(), &[66, 65, 64]).is_empty());
        // A stride of 3 is not a stream.
        assert!(run(spec.build().unwrap().as_mut(), &[0, 3, 6, 9]).is_empty());
    }
}
