//! Intel DDIO on small hand-computed cases: an LLC of 64 sets x 4 ways whose two highest ways
//! (mask 0b1100, capacity 128 lines) take inbound writes.

use steer_sim::hierarchy::{Destination, Hierarchy, Source};
use steer_sim::platform::{CacheSpec, IoSpec, PartialWrite, PlatformSpec, Relation, TopologySpec};
use steer_sim::units::{Line, Time};

fn platform(ddio_ways: u32, replacement: &str) -> PlatformSpec {
    let cache = |size_kib, ways, relation| CacheSpec { size_kib, ways, relation, ..CacheSpec::default() };
    let platform = PlatformSpec {
        topology: TopologySpec { sockets: 1, ccx_per_socket: 1, cores_per_ccx: 2, threads_per_core: 1 },
        l1d: cache(1, 2, Relation::Inclusive),
        l2: cache(4, 4, Relation::Inclusive),
        l3: CacheSpec { replacement: replacement.into(), ..cache(16, 4, Relation::Exclusive) },
        io: IoSpec { ddio_ways, ..IoSpec::default() },
        ..PlatformSpec::default()
    };
    platform.validate("platform").unwrap();
    platform
}

/// Write hit rate of a device writing `footprint` consecutive lines cyclically: `warmup` rounds,
/// then `rounds` measured rounds.
fn cyclic_write_hit_rate(platform: &PlatformSpec, footprint: u64, warmup: u32, rounds: u32) -> f64 {
    let mut h = Hierarchy::new(platform);
    let nic = h.register_device("nic0");
    let mut now = Time::ZERO;
    for round in 0..warmup + rounds {
        if round == warmup {
            h.reset_stats();
        }
        for line in 0..footprint {
            now += Time(1000);
            h.dma_write(nic, Line(line), Destination::L3 { ccx: 0 }, now);
        }
    }
    h.check_invariants().unwrap();
    let traffic = &h.stats.devices[nic as usize];
    traffic.write_llc_hits as f64 / traffic.writes as f64
}

#[test]
fn a_footprint_that_fits_the_ddio_ways_always_hits_after_warm_up() {
    for replacement in ["lru", "drrip"] {
        // 128 lines: exactly two per set, the two DDIO ways.
        assert_eq!(cyclic_write_hit_rate(&platform(2, replacement), 128, 1, 5), 1.0, "{replacement}");
    }
}

#[test]
fn a_footprint_beyond_the_ddio_ways_hits_about_the_fraction_that_fits() {
    // 512 lines, 4x the 128 the DDIO ways hold. LRU keeps nothing of a cyclic scan; the
    // adaptive RRIP of Intel LLCs keeps part of it.
    assert_eq!(cyclic_write_hit_rate(&platform(2, "lru"), 512, 3, 10), 0.0);
    let rate = cyclic_write_hit_rate(&platform(2, "drrip"), 512, 3, 10);
    assert!((0.08..=0.25).contains(&rate), "drrip keeps {rate} of a 4x footprint (a quarter fits)");
}

#[test]
fn more_ddio_ways_never_lower_the_write_hit_rate() {
    for footprint in [96, 160, 224, 300] {
        let rates: Vec<f64> =
            (1..=4).map(|ways| cyclic_write_hit_rate(&platform(ways, "lru"), footprint, 2, 4)).collect();
        assert!(rates.windows(2).all(|w| w[0] <= w[1]), "footprint {footprint}: {rates:?}");
    }
}

#[test]
fn a_write_hit_updates_in_place_and_never_allocates() {
    let mut h = Hierarchy::new(&platform(2, "lru"));
    let nic = h.register_device("nic0");
    // Fill LLC set 0 (lines 0, 64, 128, 192) through the device: two DDIO ways hold 128 and 192.
    for line in [0, 64, 128, 192] {
        h.dma_write(nic, Line(line), Destination::L3 { ccx: 0 }, Time::ZERO);
    }
    assert!(!h.is_cached(Line(0)) && !h.is_cached(Line(64)));
    // A core brings 0 and 64 into its L2, and pushes them into the LLC's other ways as victims
    // (L2 set 0 of 16 sets x 4 ways: lines 0, 64 and four more conflicting lines).
    for line in [0, 64, 16, 32, 48, 80] {
        h.core_access(0, Line(line), false, Time::ZERO);
    }
    let cached = |h: &Hierarchy| [0, 64, 128, 192].map(|l| h.is_cached(Line(l)));
    assert_eq!(cached(&h), [true; 4]);
    let before = h.stats.devices[nic as usize].write_llc_hits;
    let written = |h: &Hierarchy| h.memory.stats().map(|c| c.write_bytes).sum::<u64>();
    // Setting up leaked 0 and 64 to memory once (dirty victims of the DDIO ways).
    let written_before = written(&h);
    assert_eq!(written_before, 128);
    // Rewriting any of them hits and evicts nothing.
    for line in [128, 192, 128] {
        h.dma_write(nic, Line(line), Destination::L3 { ccx: 0 }, Time::ZERO);
        assert_eq!(cached(&h), [true; 4]);
    }
    assert_eq!(h.stats.devices[nic as usize].write_llc_hits - before, 3);
    assert_eq!(written(&h), written_before, "no writeback: nothing was evicted");
    h.check_invariants().unwrap();
}

/// Two DDIO ways, LRU everywhere.
fn lru() -> PlatformSpec {
    platform(2, "lru")
}

/// An empty hierarchy of `platform` and its one device.
fn with_nic(platform: &PlatformSpec) -> (Hierarchy, u32) {
    let mut h = Hierarchy::new(platform);
    let nic = h.register_device("nic0");
    (h, nic)
}

/// The LLC set 0 lines 128 and 192 hold the DDIO ways of (written by the device, used by no core),
/// and line 0, which core 0 has read and written: the state in which the device writes line 0.
fn line_used_by_a_core_beside_two_ddio_lines(platform: &PlatformSpec) -> (Hierarchy, u32) {
    let (mut h, nic) = with_nic(platform);
    for line in [128, 192] {
        h.dma_write(nic, Line(line), Destination::L3 { ccx: 0 }, Time::ZERO);
    }
    h.core_access(0, Line(0), false, Time::ZERO);
    h.core_access(0, Line(0), true, Time::ZERO);
    assert!(h.in_l2(0, Line(0)));
    (h, nic)
}

#[test]
fn a_device_write_moves_a_line_a_core_used_into_the_inclusive_ways_not_ddios() {
    let mut platform = platform(2, "lru");
    platform.io.inclusive_ways = 2;
    let (mut h, nic) = line_used_by_a_core_beside_two_ddio_lines(&platform);
    h.dma_write(nic, Line(0), Destination::L3 { ccx: 0 }, Time::ZERO);
    // Out of the core's caches into ways 0-1 of the LLC: both DDIO lines stay.
    assert!(!h.in_l2(0, Line(0)) && h.in_l3(0, Line(0)));
    assert_eq!([0, 128, 192].map(|l| h.is_cached(Line(l))), [true; 3]);
    let traffic = &h.stats.devices[nic as usize];
    assert_eq!((traffic.writes, traffic.write_llc_hits, traffic.write_private_hits), (3, 0, 1));
    // The core's next read finds it in the LLC.
    assert_eq!(h.core_access(0, Line(0), false, Time::ZERO).source, Source::L3);
    h.check_invariants().unwrap();
}

#[test]
fn where_ddio_reaches_into_the_inclusive_ways_device_lines_fill_from_the_top_and_leave_them_room() {
    // DDIO may take ways 1-3 of 4 (mask 0b1110), overlapping way 1 of the inclusive ways 0-1.
    let mut platform = platform(3, "lru");
    platform.io.inclusive_ways = 2;
    let (mut h, nic) = with_nic(&platform);
    // The device's lines take ways 3 and 2 of LLC set 0, not 1 and 2.
    for line in [128, 192] {
        h.dma_write(nic, Line(line), Destination::L3 { ccx: 0 }, Time::ZERO);
    }
    // The core pushes line 64 out of its L2 set 0 (lines 64, 16, 32, 48, 80) into LLC set 0,
    // from the bottom: way 0. Then it reads and writes line 0.
    for line in [64, 16, 32, 48, 80] {
        h.core_access(0, Line(line), false, Time::ZERO);
    }
    h.core_access(0, Line(0), true, Time::ZERO);
    assert!(h.in_l3(0, Line(64)) && h.in_l2(0, Line(0)));
    // The device writes line 0: the inclusive ways still have way 1 free, so nothing goes (filling
    // from the bottom, the device's 128 would have sat in way 1 and been evicted).
    h.dma_write(nic, Line(0), Destination::L3 { ccx: 0 }, Time::ZERO);
    assert_eq!([0, 64, 128, 192].map(|l| h.in_l3(0, Line(l))), [true; 4]);
    h.check_invariants().unwrap();
}

#[test]
fn without_inclusive_ways_a_line_a_core_used_takes_a_ddio_way() {
    let (mut h, nic) = line_used_by_a_core_beside_two_ddio_lines(&platform(2, "lru"));
    h.dma_write(nic, Line(0), Destination::L3 { ccx: 0 }, Time::ZERO);
    // The least recent DDIO line (128) makes room.
    assert_eq!([0, 128, 192].map(|l| h.is_cached(Line(l))), [true, false, true]);
}

#[test]
fn a_partial_write_of_an_uncached_line_reads_it_from_memory_first_where_the_platform_says_so() {
    let read = |h: &Hierarchy| h.memory.stats().map(|c| c.read_bytes).sum::<u64>();
    let written = |h: &Hierarchy| h.memory.stats().map(|c| c.write_bytes).sum::<u64>();
    // (policy, memory reads, memory writes, cached after two partial writes)
    for (policy, reads, writes, cached) in
        [(PartialWrite::Merge, 0, 0, true), (PartialWrite::Rfo, 1, 0, true), (PartialWrite::Memory, 2, 2, false)]
    {
        let (mut h, nic) = with_nic(&PlatformSpec { io: IoSpec { partial_write: policy, ..lru().io }, ..lru() });
        h.dma_write_partial(nic, Line(7), Destination::L3 { ccx: 0 }, Time::ZERO);
        // Cached unless written to memory: a second partial write then merges in the LLC, or
        // (to memory) needs the line from memory again.
        h.dma_write_partial(nic, Line(7), Destination::L3 { ccx: 0 }, Time::ZERO);
        let traffic = &h.stats.devices[nic as usize];
        assert_eq!((traffic.partial_writes, traffic.partial_write_reads, traffic.writes), (2, reads, 0), "{policy:?}");
        assert_eq!((read(&h), written(&h)), (64 * reads, 64 * writes), "{policy:?}");
        assert_eq!(h.is_cached(Line(7)), cached, "{policy:?}");
    }
}

#[test]
fn a_partial_write_to_memory_merges_a_cached_copy_and_drops_it() {
    let platform = PlatformSpec { io: IoSpec { partial_write: PartialWrite::Memory, ..lru().io }, ..lru() };
    let (mut h, nic) = with_nic(&platform);
    h.core_access(0, Line(7), true, Time::ZERO);
    h.dma_write_partial(nic, Line(7), Destination::L2 { cpu: 0 }, Time::ZERO);
    // No read: the core's dirty copy supplies the rest of the line, written once with it.
    assert_eq!(h.stats.devices[nic as usize].partial_write_reads, 0);
    assert_eq!(
        h.memory.stats().map(|c| (c.read_bytes, c.write_bytes)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)),
        (64, 64)
    );
    assert!(!h.is_cached(Line(7)));
    h.check_invariants().unwrap();
}

#[test]
fn a_line_a_second_core_reads_keeps_an_llc_copy_where_the_llc_keeps_shared_lines() {
    for keeps_shared in [true, false] {
        let (mut h, nic) = with_nic(&PlatformSpec { l3: CacheSpec { keeps_shared, ..lru().l3 }, ..lru() });
        h.dma_write(nic, Line(0), Destination::L3 { ccx: 0 }, Time::ZERO);
        // The first reader takes the line out of the LLC; the second is served by the first.
        assert_eq!(h.core_access(0, Line(0), false, Time::ZERO).source, Source::L3);
        assert_eq!(h.core_access(1, Line(0), false, Time::ZERO).source, Source::PeerL2);
        assert_eq!(h.in_l3(0, Line(0)), keeps_shared, "keeps_shared = {keeps_shared}");
        assert!(h.in_l2(0, Line(0)) && h.in_l2(1, Line(0)));
        // A write by either core leaves it the only copy.
        h.core_access(1, Line(0), true, Time::ZERO);
        assert!(!h.in_l3(0, Line(0)) && !h.in_l2(0, Line(0)));
        h.check_invariants().unwrap();
    }
}

#[test]
fn a_line_only_another_llc_holds_is_not_one_cores_used_and_takes_a_ddio_way() {
    let mut platform = platform(2, "lru");
    platform.topology = TopologySpec { sockets: 1, ccx_per_socket: 2, cores_per_ccx: 1, threads_per_core: 1 };
    platform.io.inclusive_ways = 2;
    let (mut h, nic) = with_nic(&platform);
    h.dma_write(nic, Line(0), Destination::L3 { ccx: 0 }, Time::ZERO);
    for line in [128, 192, 0] {
        h.dma_write(nic, Line(line), Destination::L3 { ccx: 1 }, Time::ZERO);
    }
    // Moved from CCX 0's LLC into CCX 1's DDIO ways, where it evicts the older DDIO line.
    assert!(!h.in_l3(0, Line(0)) && h.in_l3(1, Line(0)));
    assert_eq!([128, 192].map(|l| h.in_l3(1, Line(l))), [false, true]);
    h.check_invariants().unwrap();
}

#[test]
fn an_llc_that_drops_clean_victims_keeps_only_the_dirty_lines_an_l2_evicts() {
    for clean_victims in [true, false] {
        let (mut h, _) = with_nic(&PlatformSpec { l3: CacheSpec { clean_victims, ..lru().l3 }, ..lru() });
        // The L2 has 16 sets of 4 ways: lines 0, 16, 32, .. share set 0. Line 0 is read (clean),
        // line 16 written (dirty); six more lines of the set push both out of the L2 (the L1's
        // write-back of line 16 refreshes it in the L2 once).
        h.core_access(0, Line(0), false, Time::ZERO);
        h.core_access(0, Line(16), true, Time::ZERO);
        for line in [32, 48, 64, 80, 96, 112] {
            h.core_access(0, Line(line), false, Time::ZERO);
        }
        assert!(!h.in_l2(0, Line(0)) && !h.in_l2(0, Line(16)));
        assert!(h.in_l3(0, Line(16)), "a dirty victim is always installed");
        assert_eq!(h.in_l3(0, Line(0)), clean_victims, "clean_victims = {clean_victims}");
        let again = h.core_access(0, Line(0), false, Time::ZERO).source;
        assert_eq!(again, if clean_victims { Source::L3 } else { Source::Dram });
        h.check_invariants().unwrap();
    }
}
