//! Hardware prefetchers: small modules that watch one cache level's demand accesses and name
//! lines to fetch ahead. A prefetcher is one file with a `KIND` static registering it in
//! `PREFETCHERS`, plus its `mod` line here; a cache spec picks one with `prefetcher = { kind = "NAME", degree = D,
//! distance = K }`.

use std::ops::Range;

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
        /// Lines prefetched per trigger (at most).
        degree: u32 = 1,
        /// How far ahead the first prefetched line is, in lines (next_line) or strides (stride); how
        /// far beyond the furthest access a stream's head may run, in lines (stream).
        distance: u32 = 1,
        /// On every demand miss, also fetch the other line of its aligned pair (Intel's adjacent-line
        /// or spatial prefetcher, beside the level's own).
        pair_line: bool = false,
        /// A stream's head runs on past the end of its 4 KiB region into the next, and the stream
        /// carries on there (stream); otherwise it stops at the region's end.
        cross_pages: bool = false,
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

/// Lines per region a table-driven prefetcher tracks: 4 KiB of 64 B lines. It prefetches only
/// within the region: the next 4 KiB of addresses is usually another page, which hardware
/// prefetchers do not cross.
const REGION_LINES: u64 = 64;
/// Regions tracked at once.
const REGIONS: usize = 64;

/// A prefetcher's state per region, for a few regions at once; the table restarts when full (a
/// small hardware table forgets too).
///
/// It restarts every `REGIONS` new regions where accesses scatter, so restarting costs nothing
/// per region: the states are kept in the order their regions came, found through an
/// open-addressed array of `SLOTS` slots (half of them used at most, so a lookup mostly reads one)
/// whose slots of an earlier `generation` count as empty.
struct RegionTable<T> {
    slots: Box<[RegionSlot; SLOTS]>,
    generation: u64,
    states: Vec<T>,
}

/// Slots of a `RegionTable`: twice the regions it holds.
const SLOTS: usize = 2 * REGIONS;

#[derive(Clone, Copy, Default)]
struct RegionSlot {
    region: u64,
    /// The table's generation when the slot was filled: an older one is an empty slot.
    generation: u64,
    /// Where the region's state is in `RegionTable::states`.
    state: usize,
}

impl<T> RegionTable<T> {
    fn new() -> RegionTable<T> {
        RegionTable { slots: Box::new([RegionSlot::default(); SLOTS]), generation: 1, states: Vec::new() }
    }

    /// Where `region`'s state is (`Ok`, its index in `states`), or the empty slot it would take.
    fn find(&self, region: u64) -> Result<usize, usize> {
        let mut at = (region.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros())) as usize;
        while self.slots[at].generation == self.generation {
            if self.slots[at].region == region {
                return Ok(self.slots[at].state);
            }
            at = (at + 1) % SLOTS;
        }
        Err(at)
    }

    /// The state of `line`'s region, started by `start` if the region is new.
    fn entry(&mut self, line: Line, start: impl FnOnce() -> T) -> &mut T {
        let region = line.0 / REGION_LINES;
        let at = match self.find(region) {
            Ok(state) => return &mut self.states[state],
            Err(at) => at,
        };
        if self.states.len() >= REGIONS {
            self.generation += 1;
            self.states.clear();
            return self.entry(line, start);
        }
        self.slots[at] = RegionSlot { region, generation: self.generation, state: self.states.len() };
        self.states.push(start());
        self.states.last_mut().expect("just pushed")
    }

    /// The state of `line`'s region, if the table holds it.
    fn get(&self, line: Line) -> Option<&T> {
        self.find(line.0 / REGION_LINES).ok().map(|state| &self.states[state])
    }
}

/// The lines of `line`'s region, as signed line numbers (prefetch targets are computed signed).
fn region_of(line: Line) -> Range<i64> {
    let first = (line.0 / REGION_LINES * REGION_LINES) as i64;
    first..first + REGION_LINES as i64
}

mod next_line;
mod none;
mod pair_line;
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
        let own = PREFETCHERS.iter().find(|p| p.name == self.kind.as_str()).and_then(|p| (p.build)(self));
        if self.pair_line {
            return Some(Box::new(pair_line::PairLine { inner: own }));
        }
        own
    }

    /// Whether the level prefetches at all.
    pub fn any(&self) -> bool {
        self.kind != "none" || self.pair_line
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
        let spec = PrefetcherSpec { kind: Name::new("next_line"), degree: 2, distance: 1, ..Default::default() };
        assert_eq!(run(spec.build().unwrap().as_mut(), &[10]), vec![11, 12]);
        // The distance is where the first prefetched line is; the degree how many follow from it.
        let far = PrefetcherSpec { kind: Name::new("next_line"), degree: 3, distance: 4, ..Default::default() };
        assert_eq!(run(far.build().unwrap().as_mut(), &[10]), vec![14, 15, 16]);
        // A hit that is not the first use of a prefetched line fetches nothing.
        let mut out = Vec::new();
        let hit = Trigger { line: Line(10), hit: true, prefetch_hit: false };
        far.build().unwrap().on_access(hit, &mut out);
        assert!(out.is_empty());
        let first_use = Trigger { prefetch_hit: true, ..hit };
        far.build().unwrap().on_access(first_use, &mut out);
        assert_eq!(out, [Line(14), Line(15), Line(16)]);
    }

    #[test]
    fn stride_needs_the_stride_twice_then_runs_ahead() {
        let spec = PrefetcherSpec { kind: Name::new("stride"), degree: 1, distance: 2, ..Default::default() };
        // Lines 0, 3, 6, 9: stride 3 seen at 3 (first), confirmed at 6 -> 6 + 3*2 = 12; at 9 -> 15.
        assert_eq!(run(spec.build().unwrap().as_mut(), &[0, 3, 6, 9]), vec![12, 15]);
        // Two lines a trigger: the stride's next two steps from the distance on.
        let two = PrefetcherSpec { kind: Name::new("stride"), degree: 2, distance: 2, ..Default::default() };
        assert_eq!(run(two.build().unwrap().as_mut(), &[0, 3, 6]), vec![12, 15]);
        // The distance counts strides: one, then three strides beyond the confirming access.
        let at = |distance| PrefetcherSpec { kind: Name::new("stride"), degree: 1, distance, ..Default::default() };
        assert_eq!(run(at(1).build().unwrap().as_mut(), &[0, 3, 6]), vec![9]);
        assert_eq!(run(at(3).build().unwrap().as_mut(), &[0, 3, 6]), vec![15]);
        // Nothing beyond the 64-line region the stride runs in.
        assert!(run(spec.build().unwrap().as_mut(), &[54, 57, 60, 63]).is_empty());
        assert!(spec.build().is_some());
        assert!(PrefetcherSpec::default().build().is_none());
        assert!(PrefetcherSpec { kind: Name::new("magic"), ..Default::default() }.validate("p").is_err());
    }

    fn stream(degree: u32, distance: u32) -> Box<dyn Prefetcher> {
        PrefetcherSpec { kind: Name::new("stream"), degree, distance, ..Default::default() }.build().unwrap()
    }

    #[test]
    fn stream_ramps_up_by_degree_lines_an_access_to_distance_ahead_then_keeps_pace() {
        // 10, 11 start it (head 12); each access then fetches up to 2 lines while the head is at
        // most 4 beyond it: 11 -> 12, 13; 12 -> 14, 15; 13 -> 16, 17; 14 -> 18 (19 would be 5 ahead).
        assert_eq!(run(stream(2, 4).as_mut(), &[10, 11, 12, 13, 14]), vec![12, 13, 14, 15, 16, 17, 18]);
        // Three lines an access up to six ahead: 12-14 at 11, 15-17 at 12, then only 18-19 at 13.
        assert_eq!(run(stream(3, 6).as_mut(), &[10, 11, 12, 13]), vec![12, 13, 14, 15, 16, 17, 18, 19]);
        // Down, the same way.
        assert_eq!(run(stream(2, 4).as_mut(), &[50, 49, 48, 47, 46]), vec![48, 47, 46, 45, 44, 43, 42]);
    }

    #[test]
    fn stream_stays_within_the_4_kib_region() {
        assert_eq!(run(stream(2, 4).as_mut(), &[66, 65, 64]), vec![64]);
        assert_eq!(run(stream(2, 4).as_mut(), &[60, 61, 62, 63]), vec![62, 63]);
    }

    fn crossing(degree: u32, distance: u32) -> Box<dyn Prefetcher> {
        let spec =
            PrefetcherSpec { kind: Name::new("stream"), degree, distance, cross_pages: true, ..Default::default() };
        spec.build().unwrap()
    }

    #[test]
    fn a_stream_crossing_pages_runs_past_its_region_and_carries_on_in_the_next() {
        // 60, 61 start it; by 63 its head is 4 beyond, at 67, in the next region; 64, there, carries
        // the stream on (no two lines needed to start it again) and fetches 68.
        assert_eq!(run(crossing(2, 4).as_mut(), &[60, 61, 62, 63, 64]), vec![62, 63, 64, 65, 66, 67, 68]);
        // Down across the boundary at 64, the same way.
        assert_eq!(run(crossing(2, 4).as_mut(), &[67, 66, 65, 64, 63]), vec![65, 64, 63, 62, 61, 60, 59]);
        // Nothing below line 0.
        assert_eq!(run(crossing(2, 4).as_mut(), &[3, 2, 1, 0]), vec![1, 0]);
    }

    #[test]
    fn a_stream_carries_on_only_where_its_head_already_ran() {
        // 10, 11 go up but their head (13) is far behind 70: 70 starts nothing.
        assert_eq!(run(crossing(1, 1).as_mut(), &[10, 11, 70]), vec![12]);
        // 61, 62 fetch 63 and stop there (one ahead); 64 is the head's next line, not yet fetched:
        // the stream has not run past it, and 64 starts nothing.
        assert_eq!(run(crossing(1, 1).as_mut(), &[61, 62, 64]), vec![63]);
        // Up from region 1 into region 2 (lines 128 on), as from region 0 into 1.
        assert_eq!(run(crossing(1, 1).as_mut(), &[126, 127, 128]), vec![128, 129]);
    }

    #[test]
    fn stream_moves_on_with_accesses_ahead_and_ignores_those_behind() {
        // 0, 1 start it; 5 (a request the L1's prefetcher sent ahead) moves it on to 6; 2 and 3,
        // behind its furthest line, change nothing; 6 and 7 move it on.
        assert_eq!(run(stream(1, 8).as_mut(), &[0, 1, 5, 2, 6, 3, 7]), vec![2, 6, 7, 8]);
    }

    #[test]
    fn the_pair_line_comes_on_every_demand_miss_beside_the_levels_own_prefetches() {
        let pair = |kind: &str| PrefetcherSpec { kind: Name::new(kind), pair_line: true, ..Default::default() };
        // Alone: 10's pair is 11, 11's is 10, 7's is 6.
        assert_eq!(run(pair("none").build().unwrap().as_mut(), &[10, 11, 7]), vec![11, 10, 6]);
        // With next_line: the pair line first, then the level's own.
        assert_eq!(run(pair("next_line").build().unwrap().as_mut(), &[10]), vec![11, 11]);
        // A hit fetches no pair, even the first use of a prefetched line.
        let mut out = Vec::new();
        let first_use = Trigger { line: Line(10), hit: true, prefetch_hit: true };
        pair("none").build().unwrap().on_access(first_use, &mut out);
        assert!(out.is_empty());
        assert!(pair("none").any() && !PrefetcherSpec::default().any());
    }

    /// Random regions, near and far: the table finds what a map of the regions held since the
    /// last restart holds, and restarts when a new region finds it full.
    #[test]
    fn region_table_holds_what_a_map_restarted_when_full_holds() {
        let mut table = RegionTable::new();
        let mut plain = rustc_hash::FxHashMap::default();
        let mut rng = crate::units::Rng::new(3);
        for step in 0..50_000u64 {
            let region = if rng.next_u64().is_multiple_of(2) { rng.next_u64() % 90 } else { rng.next_u64() >> 8 };
            let line = Line(region * REGION_LINES + rng.next_u64() % REGION_LINES);
            if plain.len() >= REGIONS && !plain.contains_key(&region) {
                plain.clear();
            }
            let expected = *plain.entry(region).or_insert(step);
            let state = table.entry(line, || step);
            assert_eq!(*state, expected, "step {step}");
            assert_eq!(table.states.len(), plain.len());
        }
    }

    #[test]
    fn stream_needs_two_consecutive_lines_to_start() {
        assert!(run(stream(2, 4).as_mut(), &[0, 3, 6, 9]).is_empty());
        assert!(run(stream(2, 4).as_mut(), &[7, 7, 9]).is_empty());
        // The table forgets: 65 regions touched once each restart it, and 0's start is lost.
        let mut many: Vec<u64> = (0..65).map(|r| r * 64).collect();
        many.push(1);
        assert!(run(stream(2, 4).as_mut(), &many).is_empty());
        // 64 regions it holds: 0's start is kept, and 1 goes on from it.
        let mut kept: Vec<u64> = (0..64).map(|r| r * 64).collect();
        kept.push(1);
        assert_eq!(run(stream(2, 4).as_mut(), &kept), vec![2, 3]);
    }
}
