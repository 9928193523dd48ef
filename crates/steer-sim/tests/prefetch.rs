//! Prefetching on small hand-computed cases: what turns misses into hits, what is late, and how
//! the core's timing overlaps independent misses but not dependent ones.

use steer_sim::cache::prefetch::PrefetcherSpec;
use steer_sim::cpu::CoreTimer;
use steer_sim::hierarchy::{Hierarchy, Level, Source};
use steer_sim::platform::{CacheSpec, CoreSpec, PlatformSpec, Relation, TopologySpec};
use steer_sim::units::{Clock, Line, Time};

fn platform(l1_prefetcher: PrefetcherSpec) -> PlatformSpec {
    let cache = |size_kib, ways, relation| CacheSpec { size_kib, ways, relation, ..CacheSpec::default() };
    let platform = PlatformSpec {
        topology: TopologySpec { sockets: 1, ccx_per_socket: 1, cores_per_ccx: 1, threads_per_core: 1 },
        l1d: CacheSpec { prefetcher: l1_prefetcher, ..cache(4, 4, Relation::Inclusive) },
        l2: cache(16, 4, Relation::Inclusive),
        l3: cache(64, 4, Relation::Exclusive),
        ..PlatformSpec::default()
    };
    platform.validate("platform").unwrap();
    platform
}

fn stride(degree: u32, distance: u32) -> PrefetcherSpec {
    PrefetcherSpec { kind: "stride".into(), degree, distance, pair_line: false, cross_pages: false }
}

/// Walks lines 0, 3, 6, ..., 18 with `gap` between accesses; returns the sources.
fn strided_walk(h: &mut Hierarchy, gap: Time) -> Vec<Source> {
    let mut now = Time::ZERO;
    (0..7)
        .map(|i| {
            now += gap;
            h.core_access(0, Line(3 * i), false, now).source
        })
        .collect()
}

#[test]
fn a_stride_prefetcher_turns_demand_misses_into_prefetch_hits() {
    let mut h = Hierarchy::new(&platform(stride(1, 1)));
    let sources = strided_walk(&mut h, Time::from_us(1.0));
    // 0 trains, 3 sets stride 3, 6 confirms it and prefetches 9; from then on each prefetched
    // line hits in L1 and prefetches the next one (9 -> 12, ..., 18 -> 21).
    assert_eq!(&sources[..3], &[Source::Dram; 3]);
    assert_eq!(&sources[3..], &[Source::L1; 4]);
    let stats = &h.stats.l1d;
    assert_eq!((stats.misses, stats.read_hits), (3, 4));
    assert_eq!(stats.prefetch.issued, 5);
    assert_eq!(stats.prefetch.useful, 4);
    assert_eq!(stats.prefetch.late, 0);
    // The L1D was filled 8 times, all from DRAM: 3 demand misses and 5 prefetches (the 4 demand
    // accesses that found a prefetched line filled nothing), as a core's DC-fill counters count.
    let dram = Source::Dram as usize;
    assert_eq!(h.stats.dc_fills[0][dram], 8);
    assert_eq!(h.stats.dc_fills[0].iter().sum::<u64>(), 8);
    assert_eq!(h.stats.fills[0][Source::L1 as usize], 4);
    h.check_invariants().unwrap();
}

#[test]
fn a_prefetch_used_before_its_data_arrives_is_late_and_waits() {
    let mut h = Hierarchy::new(&platform(stride(1, 1)));
    let mut now = Time::ZERO;
    for line in [0, 3, 6] {
        now += Time::from_us(1.0);
        h.core_access(0, Line(line), false, now);
    }
    // Line 9 was prefetched at `now` from DRAM (100 ns idle); ask for it 10 ns later.
    // It waits for the prefetch and, like a core's fill counters, reports the prefetch's source.
    let access = h.core_access(0, Line(9), false, now + Time::from_ns(10.0));
    assert_eq!(access.source, Source::Dram);
    assert_eq!(h.stats.l1d.prefetch.late, 1);
    assert!(access.latency >= Time::from_ns(90.0), "waited only {}", access.latency);
    // 3 demand misses and 2 prefetches (9 and 12) filled the L1D; the late use of 9 filled nothing.
    assert_eq!(h.stats.dc_fills[0][Source::Dram as usize], 5);
    // Without a prefetcher the same line is a plain DRAM miss.
    let mut plain = Hierarchy::new(&platform(PrefetcherSpec::default()));
    assert_eq!(strided_walk(&mut plain, Time::from_us(1.0)), vec![Source::Dram; 7]);
    assert_eq!(plain.stats.l1d.prefetch.issued, 0);
}

#[test]
fn unused_prefetches_are_counted_useless_when_evicted() {
    let mut h = Hierarchy::new(&platform(PrefetcherSpec {
        kind: "next_line".into(),
        degree: 1,
        distance: 1,
        pair_line: false,
        cross_pages: false,
    }));
    // Each miss on an even line prefetches the odd line after it; only even lines are used.
    // L1 (16 sets x 4 ways) overflows after 64 lines, evicting the unused odd ones.
    let mut now = Time::ZERO;
    for line in (0..512).step_by(2) {
        now += Time::from_us(1.0);
        h.core_access(0, Line(line), false, now);
    }
    let stats = &h.stats.l1d.prefetch;
    assert_eq!(stats.issued, 256);
    assert_eq!(stats.useful, 0);
    assert!(stats.useless >= 256 - 32, "{stats:?}");
}

/// A core issuing a line a cycle with `outstanding_misses` miss slots.
fn core(outstanding_misses: u32) -> CoreSpec {
    CoreSpec { issue_cycles_per_line: 1.0, outstanding_misses, ..CoreSpec::default() }
}

#[test]
fn dependent_loads_serialise_and_independent_ones_overlap() {
    let spec = platform(PrefetcherSpec::default());
    let clock = Clock::new(spec.core.freq_ghz);
    let run = |dependent: bool| {
        let mut h = Hierarchy::new(&spec);
        let mut timer = CoreTimer::new(0, clock, &core(16), 64);
        for i in 0..8 {
            // Lines 256 apart land on different sets and channels' rows: all DRAM misses.
            let line = Line(1000 + 256 * i);
            if dependent {
                timer.load_dependent(&mut h, line);
            } else {
                timer.issue(&mut h, line);
            }
        }
        timer.drain();
        timer.now
    };
    let serial = run(true);
    let overlapped = run(false);
    assert!(serial >= Time::from_ns(8.0 * 100.0), "8 dependent misses took {serial}");
    assert!(overlapped < Time::from_ns(2.0 * 100.0), "8 independent misses took {overlapped}");

    // A software prefetch does not stall the core; the later load finds the line in L1.
    let mut h = Hierarchy::new(&spec);
    let mut timer = CoreTimer::new(0, clock, &core(16), 64);
    timer.prefetch(&mut h, Line(77), Level::L1);
    assert!(timer.now < Time::from_ns(10.0));
    timer.idle_until(Time::from_us(1.0));
    assert_eq!(h.core_access(0, Line(77), false, timer.now).source, Source::L1);
    assert_eq!(h.stats.l1d.prefetch.useful, 1);
}

#[test]
fn a_software_prefetch_into_the_l1d_holds_a_miss_slot_and_one_into_the_l2_does_not() {
    let spec = platform(PrefetcherSpec::default());
    let clock = Clock::new(spec.core.freq_ghz);
    // One miss slot: a load of another DRAM line after a prefetch of line 77.
    let load_after_prefetch = |level: Option<Level>| {
        let mut h = Hierarchy::new(&spec);
        let mut timer = CoreTimer::new(0, clock, &core(1), 64);
        if let Some(level) = level {
            timer.prefetch(&mut h, Line(77), level);
        }
        timer.issue(&mut h, Line(5000))
    };
    let alone = load_after_prefetch(None);
    assert!(alone > Time::from_ns(50.0), "a DRAM load took {alone}");
    // The L1D prefetch waits for its data in the one slot: the load starts after it.
    let after_l1 = load_after_prefetch(Some(Level::L1));
    assert!(after_l1.as_ns() > 1.5 * alone.as_ns(), "after an L1D prefetch: {after_l1}, alone {alone}");
    // A prefetch into the L2 queues there: the load only pays the prefetch's issue.
    let after_l2 = load_after_prefetch(Some(Level::L2));
    assert!(after_l2 < alone + Time::from_ns(5.0), "after an L2 prefetch: {after_l2}, alone {alone}");
}

/// Two cores of one CCX, the second core's L2 with a `stream` prefetcher of degree 2, distance 4.
fn two_cores_with_an_l2_stream() -> PlatformSpec {
    let mut platform = platform(PrefetcherSpec::default());
    platform.topology.cores_per_ccx = 2;
    platform.l2.prefetcher =
        PrefetcherSpec { kind: "stream".into(), degree: 2, distance: 4, pair_line: false, cross_pages: false };
    platform.validate("platform").unwrap();
    platform
}

/// Core 0 writes lines 0..12 (they sit dirty in its L2); core 1 then reads them in order, `gap`
/// apart. Returns where each of core 1's reads was filled from.
fn read_a_peers_lines(gap: Time) -> Vec<Source> {
    let mut h = Hierarchy::new(&two_cores_with_an_l2_stream());
    let mut now = Time::ZERO;
    for line in 0..12 {
        h.core_access(0, Line(line), true, now);
    }
    let sources = (0..12)
        .map(|line| {
            now += gap;
            h.core_access(1, Line(line), false, now).source
        })
        .collect();
    h.check_invariants().unwrap();
    sources
}

#[test]
fn an_l2_stream_fills_from_the_own_l2_only_what_arrives_before_the_core_asks() {
    // 0 and 1 start the stream and 1 prefetches 2 and 3, 2 prefetches 4 and 5, 3 6 and 7, then one
    // line an access, 4 ahead. Asked for a microsecond later, lines 2..12 are in the L2 already:
    // fills from the own L2.
    let slow = read_a_peers_lines(Time::from_us(1.0));
    assert_eq!(&slow[..2], &[Source::PeerL2; 2]);
    assert_eq!(&slow[2..], &[Source::L2; 10]);
    // Asked for 1 ns apart, each prefetch is at most 4 ns ahead of its use, less than the 25 ns a
    // peer's L2 takes: the core waits for it, and the fill counts where the prefetch read it from.
    assert_eq!(read_a_peers_lines(Time::from_ns(1.0)), vec![Source::PeerL2; 12]);
}

#[test]
fn an_l1_prefetch_of_a_line_the_l2_is_still_fetching_waits_for_it_and_reports_its_source() {
    let spec = platform(PrefetcherSpec::default());
    let mut h = Hierarchy::new(&spec);
    let start = Time::from_us(1.0);
    // A line already in the L2 is an L2 hit for an L1 prefetch.
    h.core_access(0, Line(500), false, start);
    // Four more lines of its L1 set (16 sets of 4 ways) push it out of the L1, not the L2.
    for i in 1..=4 {
        h.core_access(0, Line(500 + 16 * i), false, start);
    }
    let l2_hit = h.prefetch(0, Line(500), Level::L1, start).unwrap();
    assert_eq!(l2_hit, Clock::new(spec.core.freq_ghz).cycles(spec.l2.latency_cycles));
    // Line 9 is prefetched into the L2 from DRAM, and into the L1 10 ns later: the L1's copy
    // arrives an L2 hit after the L2's.
    let from_dram = h.prefetch(0, Line(9), Level::L2, start).unwrap();
    let ten_ns = Time::from_ns(10.0);
    let into_l1 = h.prefetch(0, Line(9), Level::L1, start + ten_ns).unwrap();
    assert_eq!(into_l1, from_dram - ten_ns + l2_hit);
    assert_eq!((h.stats.l2.prefetch.useful, h.stats.l2.prefetch.late), (1, 1));
    // The core asking 10 ns later still waits, and its fill counts DRAM, where the data came from.
    let access = h.core_access(0, Line(9), false, start + ten_ns + ten_ns);
    assert_eq!(access.source, Source::Dram);
    assert_eq!(h.stats.l1d.prefetch.late, 1);
    h.check_invariants().unwrap();
}

#[test]
fn the_l2_prefetcher_trains_on_the_l1_prefetchers_requests() {
    // Software prefetches into the L1D of lines 0 and 1 miss the L2 as demand misses would: the
    // L2's stream (degree 2, distance 4) starts on them and fetches 2 and 3.
    let mut h = Hierarchy::new(&two_cores_with_an_l2_stream());
    let mut now = Time::ZERO;
    for line in 0..2 {
        now += Time::from_us(1.0);
        h.prefetch(1, Line(line), Level::L1, now);
    }
    assert_eq!(h.stats.l2.prefetch.issued, 2);
    assert_eq!(h.stats.l2.misses, 2);
    now += Time::from_us(1.0);
    assert_eq!(h.core_access(1, Line(3), false, now).source, Source::L2);
    assert_eq!(h.stats.l2.prefetch.useful, 1);
}

#[test]
fn an_l1_prefetch_using_a_line_the_l2_prefetched_keeps_the_l2_prefetcher_going() {
    // The L2's next_line prefetcher fetches the line after each miss and after each first use of
    // a line it prefetched. L1 prefetches of 0 (a miss: 1 follows) and of 1 (the first use of
    // prefetched 1: 2 follows) drive it as the L1D's own misses would.
    let mut spec = platform(PrefetcherSpec::default());
    spec.l2.prefetcher =
        PrefetcherSpec { kind: "next_line".into(), degree: 1, distance: 1, pair_line: false, cross_pages: false };
    let mut h = Hierarchy::new(&spec);
    h.prefetch(0, Line(0), Level::L1, Time::from_us(1.0));
    h.prefetch(0, Line(1), Level::L1, Time::from_us(2.0));
    assert_eq!(h.stats.l2.prefetch.issued, 2);
    assert_eq!(h.core_access(0, Line(2), false, Time::from_us(3.0)).source, Source::L2);
}

#[test]
fn the_l2s_pair_line_prefetcher_brings_the_other_line_of_each_missed_pair_into_the_l2() {
    let mut spec = platform(PrefetcherSpec::default());
    spec.l2.prefetcher = PrefetcherSpec { pair_line: true, ..PrefetcherSpec::default() };
    let mut h = Hierarchy::new(&spec);
    let at = |us| Time::from_us(us);
    // Line 10 misses to DRAM; its pair, 11, comes into the L2 (not the L1D) with it.
    assert_eq!(h.core_access(0, Line(10), false, at(1.0)).source, Source::Dram);
    assert_eq!(h.core_access(0, Line(11), false, at(2.0)).source, Source::L2);
    // An L2 hit brings no pair: 11's L1D miss found the L2's copy, so 10 stays the only other line.
    assert_eq!(h.stats.l2.prefetch.issued, 1);
    // Line 7's pair is 6, below it.
    h.core_access(0, Line(7), false, at(3.0));
    assert_eq!(h.core_access(0, Line(6), false, at(4.0)).source, Source::L2);
    assert_eq!(h.stats.l2.prefetch.issued, 2);
    h.check_invariants().unwrap();
}
