//! A replay's counters add up as docs/trace-format.md defines them: below L1, a level's reads are
//! requests the level above missed (or prefetched) and its writes are the dirty lines the level
//! above evicted; memory reads are the L3's read misses, a non-inclusive L3's write misses and
//! the L3's own prefetches, and memory writes are the L3's writebacks. Checked on every platform
//! preset (with its L3 made small enough for a short trace to evict from it) with its own
//! prefetchers, with none and with stream prefetchers at L1D and L2, whatever relation its levels
//! have (a victim L3 included).

use steer_sim::cache::prefetch::PrefetcherSpec;
use steer_sim::platform::{preset, PlatformSpec, Relation, PRESETS};
use steer_sim::units::Rng;
use steer_trace::{AccessKind, LevelReport, ReplayEngine, Replayer, TraceRecord, TraceReport};

/// Sequential runs (which prefetchers follow), a hot set the size of half the L2 and lines spread
/// over sixteen times the L3; 35% writes.
fn trace(platform: &PlatformSpec, seed: u64, accesses: usize) -> Vec<TraceRecord> {
    let line_bytes = u64::from(platform.line_bytes());
    let lines = |size_kib: u64| size_kib * 1024 / line_bytes;
    let (hot, spread) = (lines(platform.l2.size_kib) / 2, 16 * lines(platform.l3.size_kib));
    let mut rng = Rng::new(seed);
    let mut line = 0;
    (0..accesses)
        .map(|_| {
            line = match rng.next_u64() % 10 {
                0..=3 => line + 1,
                4..=6 => rng.next_u64() % hot,
                _ => rng.next_u64() % spread,
            };
            let kind = if rng.next_u64() % 100 < 35 { AccessKind::Write } else { AccessKind::Read };
            TraceRecord { kind, addr: line * line_bytes, size: 8 }
        })
        .collect()
}

fn replay(platform: &PlatformSpec, trace: &[TraceRecord]) -> (TraceReport, ReplayEngine) {
    let mut replayer = Replayer::new(platform, 0).unwrap();
    replayer.access_all(trace);
    (replayer.report(0.0), replayer.engine())
}

fn write_misses(level: &LevelReport) -> u64 {
    level.counts.writes - level.counts.write_hits
}

fn read_misses(level: &LevelReport) -> u64 {
    level.counts.reads - level.counts.read_hits
}

#[test]
fn every_level_counts_what_the_level_above_passes_down_and_memory_what_the_l3_does() {
    let stream = PrefetcherSpec { kind: "stream".into(), ..PrefetcherSpec::default() };
    for (seed, preset_entry) in (1..).zip(PRESETS) {
        let mut base = preset(preset_entry.name).unwrap();
        // Some twice the L2's sets, as many in each slice: a short trace then evicts from the L3
        // (a multiple of 16 sets of 64-byte lines is whole KiB whatever the ways).
        let sets_per_slice =
            (2 * base.l2.geometry().sets as u64).div_ceil(u64::from(base.l3.slices)).next_multiple_of(16);
        let sets = sets_per_slice * u64::from(base.l3.slices);
        base.l3.size_kib = sets * u64::from(base.l3.ways) * u64::from(base.line_bytes()) / 1024;
        let own = base.clone();
        let mut none = base.clone();
        let mut streams = base.clone();
        for platform in [&mut none, &mut streams] {
            platform.l1d.prefetcher = PrefetcherSpec::default();
            platform.l2.prefetcher = PrefetcherSpec::default();
            platform.l3.prefetcher = PrefetcherSpec::default();
        }
        streams.l1d.prefetcher = stream.clone();
        // The L2's stream with the pair line beside it, as Intel's L2 has both.
        streams.l2.prefetcher = PrefetcherSpec { pair_line: true, ..stream.clone() };
        for (setting, platform) in [("its prefetchers", own), ("no prefetcher", none), ("stream prefetchers", streams)]
        {
            platform.validate("platform").unwrap();
            let case = format!("{} ({:?} L3), {setting}", preset_entry.name, platform.l3.relation);
            let l3_lines = platform.l3.size_kib * 1024 / u64::from(platform.line_bytes());
            let (report, engine) = replay(&platform, &trace(&platform, seed, 3 * l3_lines as usize));
            let (l1d, l2, l3) = (&report.l1d, &report.l2, &report.l3);
            assert!(l3.counts.writebacks > 1000 && l2.counts.writebacks > 1000, "{case}: the trace exercises little");
            if setting == "stream prefetchers" {
                assert!(l2.counts.prefetch.issued > 1000, "{case}: no prefetch");
            }
            if engine == ReplayEngine::SingleCore {
                assert_eq!(l2.counts.reads, l1d.counts.misses, "{case}: L2 reads");
            }
            assert_eq!(l2.counts.writes, l1d.counts.writebacks, "{case}: L2 writes");
            assert_eq!(l3.counts.writes, l2.counts.writebacks, "{case}: L3 writes");
            let write_allocations = if platform.l3.relation == Relation::NonInclusive { write_misses(l3) } else { 0 };
            assert_eq!(
                report.memory.reads,
                read_misses(l3) + write_allocations + l3.counts.prefetch.issued,
                "{case}: memory reads"
            );
            assert_eq!(report.memory.writes, l3.counts.writebacks, "{case}: memory writes");
        }
    }
}
