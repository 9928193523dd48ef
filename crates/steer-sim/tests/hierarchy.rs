//! Exact hit/miss and coherence behaviour of the hierarchy on small hand-computed cases.

use steer_sim::hierarchy::{Destination, Hierarchy, Holding, Source};
use steer_sim::params::OrNone;
use steer_sim::platform::{
    CacheSpec, CoreSpec, InjectedInsertion, IoSpec, PlatformSpec, Relation, TopologySpec, WayMaskSpec,
};
use steer_sim::units::{Line, Time};

/// One CCX of two cores (CPUs 0, 1) plus a second CCX (CPU 2); tiny caches.
/// L1: 1 KiB 2-way = 8 sets; L2: 4 KiB 4-way = 16 sets; L3: 16 KiB 4-way = 64 sets.
fn tiny(l3_relation: Relation) -> PlatformSpec {
    let cache = |size_kib, ways, relation| CacheSpec { size_kib, ways, relation, ..CacheSpec::default() };
    let platform = PlatformSpec {
        topology: TopologySpec { sockets: 1, ccx_per_socket: 2, cores_per_ccx: 2, threads_per_core: 1 },
        l1d: cache(1, 2, Relation::Inclusive),
        l2: cache(4, 4, Relation::Inclusive),
        l3: cache(16, 4, l3_relation),
        ..PlatformSpec::default()
    };
    platform.validate("platform").unwrap();
    platform
}

/// A hierarchy with one registered device (id 0, named `nic0`).
fn with_nic(platform: &PlatformSpec) -> Hierarchy {
    let mut h = Hierarchy::new(platform);
    assert_eq!(h.register_device("nic0"), 0);
    h
}

fn mask(agent: &str, mask: u64) -> WayMaskSpec {
    WayMaskSpec { agent: agent.into(), mask }
}

fn read(h: &mut Hierarchy, cpu: u32, line: u64) -> Source {
    let source = h.core_access(cpu, Line(line), false, Time::ZERO).source;
    h.check_invariants().unwrap();
    source
}

fn write(h: &mut Hierarchy, cpu: u32, line: u64) -> Source {
    let source = h.core_access(cpu, Line(line), true, Time::ZERO).source;
    h.check_invariants().unwrap();
    source
}

#[test]
fn sources_follow_the_line_through_the_system() {
    let mut h = Hierarchy::new(&tiny(Relation::Exclusive));
    assert_eq!(read(&mut h, 0, 100), Source::Dram);
    assert_eq!(read(&mut h, 0, 100), Source::L1);
    assert_eq!(read(&mut h, 1, 100), Source::PeerL2);
    assert_eq!(read(&mut h, 2, 100), Source::RemoteCache);
    // A write by CPU 0 invalidates the other copies.
    assert_eq!(write(&mut h, 0, 100), Source::L1);
    assert_eq!(read(&mut h, 1, 100), Source::PeerL2);
    assert_eq!(h.memory.stats().map(|c| c.read_bytes).sum::<u64>(), 64);
}

#[test]
fn a_write_to_a_line_other_caches_share_waits_for_their_copies_to_be_invalidated() {
    let platform = tiny(Relation::Exclusive);
    let (peer, remote) =
        (Time::from_ns(platform.fabric.peer_l2_latency_ns), Time::from_ns(platform.fabric.remote_cache_latency_ns));
    let mut h = Hierarchy::new(&platform);
    let ownership = |h: &mut Hierarchy, cpu: u32, line: u64| {
        let access = h.core_access(cpu, Line(line), true, Time::ZERO);
        h.check_invariants().unwrap();
        (access.source, access.ownership)
    };
    // Alone in its caches, a line is owned at once.
    read(&mut h, 0, 100);
    assert_eq!(ownership(&mut h, 0, 100), (Source::L1, Time::ZERO));
    // Shared with the other core of its CCX: a peer's time; then it is the only copy again.
    read(&mut h, 1, 100);
    assert_eq!(ownership(&mut h, 0, 100), (Source::L1, peer));
    assert_eq!(ownership(&mut h, 0, 100), (Source::L1, Time::ZERO));
    // Shared with a core of the other CCX too: the farthest copy decides.
    read(&mut h, 1, 100);
    read(&mut h, 2, 100);
    assert_eq!(ownership(&mut h, 0, 100), (Source::L1, remote));
    // A read never waits for ownership.
    read(&mut h, 1, 100);
    assert_eq!(h.core_access(0, Line(100), false, Time::ZERO).ownership, Time::ZERO);
    // Out of the L1D (lines 108 and 116 take its set's two ways) but in the L2, shared: the
    // write's L2 hit takes the peer's time, longer than the L2's own.
    read(&mut h, 1, 100);
    read(&mut h, 0, 108);
    read(&mut h, 0, 116);
    let access = h.core_access(0, Line(100), true, Time::ZERO);
    assert_eq!((access.source, access.latency, access.ownership), (Source::L2, peer, Time::ZERO));
    // An L3 that keeps copies of its CCX's lines is not another cache to wait for.
    let mut h = Hierarchy::new(&tiny(Relation::Inclusive));
    read(&mut h, 0, 100);
    assert_eq!(ownership(&mut h, 0, 100), (Source::L1, Time::ZERO));
    // A victim L3 that keeps a copy of what two of its cores read: with the other core's copy gone
    // (four more lines of its L2's set), the own L3's copy is invalidated in the peer's time.
    let mut keeps = tiny(Relation::Exclusive);
    keeps.l3.keeps_shared = true;
    let mut h = Hierarchy::new(&keeps);
    read(&mut h, 0, 100);
    read(&mut h, 1, 100);
    for line in [116, 132, 148, 164] {
        read(&mut h, 1, line);
    }
    assert_eq!(ownership(&mut h, 0, 100), (Source::L1, peer));
}

#[test]
fn l1_conflicts_refill_from_l2_and_l2_victims_go_to_the_exclusive_l3() {
    let mut h = Hierarchy::new(&tiny(Relation::Exclusive));
    // Lines 0, 8, 16 share L1 set 0 (8 sets, 2 ways): the third evicts line 0 from L1 only.
    for line in [0, 8, 16] {
        assert_eq!(read(&mut h, 0, line), Source::Dram);
    }
    assert_eq!(read(&mut h, 0, 0), Source::L2);
    // Lines 0, 16, 32, 48, 64 share L2 set 0 (16 sets, 4 ways): 64 evicts the LRU one (8 is in
    // set 8, so set 0 holds 0, 16, 32, 48 with 16 least recent after 0 was re-read).
    for line in [32, 48, 64] {
        assert_eq!(read(&mut h, 0, line), Source::Dram);
    }
    assert_eq!(read(&mut h, 0, 16), Source::L3);
    // Exclusive: the hit moved the line out of L3, so a second core finds it in the peer.
    assert_eq!(read(&mut h, 1, 16), Source::PeerL2);
    assert_eq!(h.stats.l1d.reads, 9);
    assert_eq!(h.stats.l1d.read_hits, 0);
    assert_eq!(h.stats.l2.read_hits, 1);
    assert_eq!(h.stats.l3.read_hits, 1);
}

#[test]
fn dirty_lines_are_written_back_once() {
    let mut h = Hierarchy::new(&tiny(Relation::Exclusive));
    write(&mut h, 0, 0);
    // Push line 0 out of L2 (set 0 of 16: lines 16, 32, 48, 64) and then out of L3 (set 0 of 64:
    // lines 64*k, 4 ways) by streaming many conflicting lines.
    for k in 1..=40 {
        read(&mut h, 0, 16 * k);
    }
    let written: u64 = h.memory.stats().map(|c| c.write_bytes).sum();
    assert_eq!(written, 64, "exactly the one dirty line reaches memory");
    assert_eq!(h.stats.l3.writebacks, 1);
}

#[test]
fn dma_to_memory_invalidates_and_dma_to_l2_injects() {
    let mut h = with_nic(&tiny(Relation::Exclusive));
    read(&mut h, 0, 7);
    read(&mut h, 2, 7);
    h.dma_write(0, Line(7), Destination::Memory, Time::ZERO);
    h.check_invariants().unwrap();
    assert!(!h.is_cached(Line(7)));
    assert_eq!(read(&mut h, 0, 7), Source::Dram);
    h.dma_write(0, Line(7), Destination::L2 { cpu: 1 }, Time::ZERO);
    h.check_invariants().unwrap();
    assert!(h.in_l2(1, Line(7)) && !h.in_l2(0, Line(7)));
    assert_eq!(read(&mut h, 1, 7), Source::L2);
    assert_eq!(read(&mut h, 0, 7), Source::PeerL2);
    // The injected line is dirty: no DRAM write happened for it yet.
    assert_eq!(h.memory.stats().map(|c| c.write_bytes).sum::<u64>(), 64);
}

#[test]
fn a_ccx_takes_steered_lines_at_its_cores_rate_and_the_excess_goes_by_way_of_memory() {
    // 0.25 B per cycle and core, 2 cores at 2 GHz: 1 GB/s, one 64 B line every 64 ns; room for 2.
    let platform = tiny(Relation::Exclusive);
    let mut h = with_nic(&PlatformSpec {
        core: CoreSpec { freq_ghz: 2.0, ..platform.core.clone() },
        io: IoSpec { steer_bytes_per_cycle: OrNone(Some(0.25)), steer_queue_lines: 2, ..platform.io.clone() },
        ..platform
    });
    let memory = |h: &Hierarchy| h.memory.stats().fold((0, 0), |(r, w), c| (r + c.read_bytes, w + c.write_bytes));
    let steer = |h: &mut Hierarchy, line: u64, cpu: u32, ns: f64| {
        h.dma_write(0, Line(line), Destination::L2 { cpu }, Time::from_ns(ns));
        h.check_invariants().unwrap();
    };
    steer(&mut h, 0, 0, 0.0);
    steer(&mut h, 1, 0, 0.0);
    assert_eq!((memory(&h), h.stats.steered_through_memory), ((0, 0), 0));
    // CCX 0's queue is full: the third line is written to memory and the L2 reads it back.
    steer(&mut h, 2, 0, 0.0);
    assert_eq!((memory(&h), h.stats.steered_through_memory), ((64, 64), 1));
    assert!(h.in_l2(0, Line(2)));
    // CCX 1 (CPU 2) has a queue of its own.
    steer(&mut h, 3, 2, 0.0);
    assert_eq!(h.stats.steered_through_memory, 1);
    // 64 ns later one line has been delivered: room for one more, not two.
    steer(&mut h, 4, 1, 64.0);
    assert_eq!(h.stats.steered_through_memory, 1);
    steer(&mut h, 5, 1, 64.0);
    assert_eq!((memory(&h), h.stats.steered_through_memory), ((128, 128), 2));
}

#[test]
fn a_device_write_to_an_l2_line_is_a_use_only_where_injected_lines_enter_as_most_recent() {
    // L2 set 0 holds lines 0, 16, 32 and 48; 64 is a fifth line of the set.
    for (insertion, kept) in [(InjectedInsertion::Mru, true), (InjectedInsertion::Lru, false)] {
        let platform = tiny(Relation::Exclusive);
        let mut h =
            with_nic(&PlatformSpec { l2: CacheSpec { injected_insertion: insertion, ..platform.l2 }, ..platform });
        h.dma_write(0, Line(0), Destination::L2 { cpu: 0 }, Time::ZERO);
        for line in [16, 32, 48] {
            read(&mut h, 0, line);
        }
        // Line 0 is now the least recent; the device writes it again, then the core needs room.
        h.dma_write(0, Line(0), Destination::L2 { cpu: 0 }, Time::ZERO);
        read(&mut h, 0, 64);
        assert_eq!(h.in_l2(0, Line(0)), kept, "{insertion:?}");
        assert_eq!(h.in_l2(0, Line(16)), !kept, "{insertion:?}");
    }
}

#[test]
fn inclusive_l3_back_invalidates_private_copies() {
    let mut h = Hierarchy::new(&tiny(Relation::Inclusive));
    read(&mut h, 0, 0);
    // L3 set 0 (64 sets, 4 ways) takes lines 0, 64, 128, 192; the fifth evicts line 0 everywhere.
    for line in [64, 128, 192, 256] {
        read(&mut h, 1, line);
    }
    assert!(!h.is_cached(Line(0)));
    assert_eq!(read(&mut h, 0, 0), Source::Dram);
}

#[test]
fn an_inclusive_l3_back_invalidates_the_copies_of_its_own_ccx_only() {
    let mut h = Hierarchy::new(&tiny(Relation::Inclusive));
    read(&mut h, 0, 0);
    // CPU 2 is in the other CCX: its caches and its CCX's L3 take a copy too.
    read(&mut h, 2, 0);
    for line in [64, 128, 192, 256] {
        read(&mut h, 1, line);
    }
    assert!(!h.in_l2(0, Line(0)) && !h.in_l3(0, Line(0)), "the evicting CCX keeps no copy");
    assert!(h.in_l2(2, Line(0)) && h.in_l3(1, Line(0)), "the other CCX keeps its own");
    assert_eq!(read(&mut h, 2, 0), Source::L1);
}

#[test]
fn an_inclusive_l3_holds_every_line_its_ccx_l2s_take_however_it_came() {
    let mut h = with_nic(&tiny(Relation::Inclusive));
    // Injected into CPU 1's L2: CCX 0's L3 takes it too.
    h.dma_write(0, Line(7), Destination::L2 { cpu: 1 }, Time::ZERO);
    h.check_invariants().unwrap();
    assert!(h.in_l2(1, Line(7)) && h.in_l3(0, Line(7)));
    // Read by CPU 2, of the other CCX, from CCX 0's caches: CCX 1's L3 takes it too.
    assert_eq!(read(&mut h, 2, 7), Source::RemoteCache);
    assert!(h.in_l2(2, Line(7)) && h.in_l3(1, Line(7)));
    // Updated in place (a write with a No-ST hint): the first holder, CPU 1, keeps its copy and
    // so does its CCX's L3; the other CCX's copies go.
    h.dma_write(0, Line(7), Destination::UpdateIfCached, Time::ZERO);
    h.check_invariants().unwrap();
    assert!(h.in_l2(1, Line(7)) && h.in_l3(0, Line(7)));
    assert!(!h.in_l2(2, Line(7)) && !h.in_l3(1, Line(7)));
}

#[test]
fn an_update_in_place_of_a_line_only_an_inclusive_l3_holds_updates_it_there() {
    let mut h = with_nic(&tiny(Relation::Inclusive));
    read(&mut h, 0, 0);
    // Lines of L2 set 0 (16 k) outside L3 set 0 (64 k) push line 0 out of CPU 0's L2 only.
    for line in [16, 32, 48, 80] {
        read(&mut h, 0, line);
    }
    assert!(h.in_l3(0, Line(0)) && !h.in_l2(0, Line(0)));
    h.dma_write(0, Line(0), Destination::UpdateIfCached, Time::ZERO);
    h.check_invariants().unwrap();
    assert!(h.in_l3(0, Line(0)) && !h.in_l2(0, Line(0)));
    assert_eq!(h.memory.stats().map(|c| c.write_bytes).sum::<u64>(), 0, "updated in the L3, not written to memory");
}

#[test]
fn an_update_in_place_leaves_the_core_copy_alone_where_the_l3_is_not_inclusive() {
    let mut h = with_nic(&tiny(Relation::NonInclusive));
    // From memory, a non-inclusive L3 takes a copy beside CPU 1's.
    assert_eq!(read(&mut h, 1, 7), Source::Dram);
    assert!(h.in_l2(1, Line(7)) && h.in_l3(0, Line(7)));
    h.dma_write(0, Line(7), Destination::UpdateIfCached, Time::ZERO);
    h.check_invariants().unwrap();
    assert!(h.in_l2(1, Line(7)) && !h.in_l3(0, Line(7)), "the L3's copy would be stale");
}

#[test]
fn an_inclusive_l3_writes_back_a_dirty_private_copy_it_back_invalidates() {
    let mut h = Hierarchy::new(&tiny(Relation::Inclusive));
    write(&mut h, 0, 0);
    for line in [64, 128, 192, 256] {
        read(&mut h, 1, line);
    }
    assert!(!h.is_cached(Line(0)));
    let written: u64 = h.memory.stats().map(|c| c.write_bytes).sum();
    assert_eq!(written, 64, "CPU 0's data reached memory");
}

#[test]
fn random_traffic_keeps_every_invariant() {
    for relation in [Relation::Inclusive, Relation::Exclusive, Relation::NonInclusive] {
        let mut platform = tiny(relation);
        platform.l2.relation =
            if relation == Relation::NonInclusive { Relation::NonInclusive } else { Relation::Inclusive };
        let mut h = with_nic(&platform);
        let mut rng = steer_sim::units::Rng::new(3);
        for step in 0..20_000u64 {
            let line = Line(rng.next_u64() % 600);
            match rng.next_u64() % 5 {
                0 => h.dma_write(0, line, Destination::Memory, Time(step)),
                1 => h.dma_write(0, line, Destination::L2 { cpu: (rng.next_u64() % 4) as u32 }, Time(step)),
                kind => {
                    h.core_access((rng.next_u64() % 4) as u32, line, kind == 2, Time(step));
                }
            }
            if step % 997 == 0 {
                h.check_invariants().unwrap_or_else(|e| panic!("{relation:?} step {step}: {e}"));
            }
        }
        h.check_invariants().unwrap();
    }
}

#[test]
fn asking_the_caches_keeping_a_directory_and_switching_to_one_agree() {
    for relation in [Relation::Inclusive, Relation::Exclusive, Relation::NonInclusive] {
        let mut platform = tiny(relation);
        // Three CCXs of two cores: six cores, so the adaptive hierarchy starts keeping a
        // directory when the second fills its caches.
        platform.topology.ccx_per_socket = 3;
        platform.l2.relation =
            if relation == Relation::NonInclusive { Relation::NonInclusive } else { Relation::Inclusive };
        let mut hierarchies: Vec<Hierarchy> = [Holding::Directory, Holding::Probe, Holding::Adaptive]
            .map(|h| Hierarchy::with_holding(&platform, h))
            .into();
        hierarchies.iter_mut().for_each(|h| assert_eq!(h.register_device("nic0"), 0));
        let mut rng = steer_sim::units::Rng::new(11);
        for step in 0..30_000u64 {
            let line = Line(rng.next_u64() % 600);
            // CPUs join one after another, so the adaptive one switches midway.
            let cpu = (rng.next_u64() % (1 + step / 4000).min(6)) as u32;
            let kind = rng.next_u64() % 5;
            let outcomes: Vec<_> = hierarchies
                .iter_mut()
                .map(|h| match kind {
                    0 => {
                        h.dma_write(0, line, Destination::Memory, Time(step));
                        None
                    }
                    1 => {
                        h.dma_write(0, line, Destination::L2 { cpu }, Time(step));
                        None
                    }
                    _ => Some(h.core_access(cpu, line, kind == 2, Time(step))),
                })
                .collect();
            assert!(outcomes.windows(2).all(|w| w[0] == w[1]), "{relation:?} step {step}: {outcomes:?}");
            if step % 5000 == 0 {
                hierarchies.iter().for_each(|h| h.check_invariants().unwrap());
            }
        }
        for h in &hierarchies[1..] {
            assert_eq!(
                (&h.stats.l1d, &h.stats.l2, &h.stats.l3),
                (&hierarchies[0].stats.l1d, &hierarchies[0].stats.l2, &hierarchies[0].stats.l3)
            );
            assert_eq!(h.stats.fills, hierarchies[0].stats.fills);
            assert_eq!(h.stats.dc_fills, hierarchies[0].stats.dc_fills);
            h.check_invariants().unwrap();
        }
    }
}

#[test]
fn a_cpu_way_mask_confines_its_allocations() {
    let mut platform = tiny(Relation::Exclusive);
    platform.l1d.way_masks = vec![mask("cpu:0", 0b01)];
    let mut h = Hierarchy::new(&platform);
    // Lines 0 and 8 share L1 set 0 (8 sets, 2 ways). CPU 0 may use one way: they evict each other.
    for line in [0, 8] {
        assert_eq!(read(&mut h, 0, line), Source::Dram);
    }
    assert_eq!(read(&mut h, 0, 0), Source::L2);
    // CPU 1 has no mask: both lines fit.
    for line in [1000, 1008] {
        assert_eq!(read(&mut h, 1, line), Source::Dram);
    }
    assert_eq!(read(&mut h, 1, 1000), Source::L1);
}

#[test]
fn a_device_way_mask_confines_injection_and_victims_keep_their_place() {
    let mut platform = tiny(Relation::Exclusive);
    platform.l2.way_masks = vec![mask("device:nic0", 0b0001)];
    let mut h = with_nic(&platform);
    // Lines 0, 16, 32 share L2 set 0 (16 sets, 4 ways); the NIC may inject into way 0 only.
    for line in [0, 16, 32] {
        h.dma_write(0, Line(line), Destination::L2 { cpu: 1 }, Time::ZERO);
        h.check_invariants().unwrap();
    }
    assert!(h.in_l2(1, Line(32)) && !h.in_l2(1, Line(16)) && !h.in_l2(1, Line(0)));
    // The displaced injected lines went to the victim L3, dirty: no DRAM traffic yet.
    assert_eq!(read(&mut h, 1, 16), Source::L3);
    assert_eq!(h.memory.stats().map(|c| c.write_bytes + c.read_bytes).sum::<u64>(), 0);
    // Injection skips L1; the CPU's own fill of 16 was not limited by the device's mask, so
    // 16 and 32 now share the set.
    assert_eq!(read(&mut h, 1, 32), Source::L2);
    assert!(h.in_l2(1, Line(16)) && h.in_l2(1, Line(32)));
}

/// Evicts line 100 from CPU 0's L1 (set 4 of 8, 2 ways) with two lines of the same L1 set that
/// fall in other L2 sets, so 100 stays in its L2.
fn push_100_out_of_cpu0_l1(h: &mut Hierarchy) {
    for line in [108, 124] {
        read(h, 0, line);
    }
}

#[test]
fn an_l2_read_hit_on_a_shared_line_leaves_the_other_copies_alone() {
    let mut h = Hierarchy::new(&tiny(Relation::Exclusive));
    read(&mut h, 0, 100);
    assert_eq!(read(&mut h, 1, 100), Source::PeerL2);
    push_100_out_of_cpu0_l1(&mut h);
    assert_eq!(read(&mut h, 0, 100), Source::L2);
    assert_eq!(read(&mut h, 1, 100), Source::L1, "CPU 1 keeps its copy");
    // A write hit in the L2 does take the line from CPU 1.
    push_100_out_of_cpu0_l1(&mut h);
    assert_eq!(write(&mut h, 0, 100), Source::L2);
    assert_eq!(read(&mut h, 1, 100), Source::PeerL2);
}

#[test]
fn a_software_prefetch_to_l1_of_a_line_in_l2_brings_it_up() {
    let mut h = Hierarchy::new(&tiny(Relation::Exclusive));
    read(&mut h, 0, 100);
    push_100_out_of_cpu0_l1(&mut h);
    assert!(h.prefetch(0, Line(100), steer_sim::hierarchy::Level::L1, Time::ZERO).is_some());
    // Long after the prefetch, the read hits the L1.
    assert_eq!(h.core_access(0, Line(100), false, Time::from_ns(1000.0)).source, Source::L1);
}

#[test]
fn with_one_ccx_a_write_still_takes_the_line_from_the_other_core() {
    let mut platform = tiny(Relation::Exclusive);
    platform.topology.ccx_per_socket = 1;
    let mut h = Hierarchy::new(&platform);
    read(&mut h, 0, 100);
    assert_eq!(read(&mut h, 1, 100), Source::PeerL2);
    assert_eq!(write(&mut h, 0, 100), Source::L1);
    assert_eq!(read(&mut h, 1, 100), Source::PeerL2, "CPU 1's copy was invalidated");
}

/// A prefetcher of the next line, one at a time.
fn next_line() -> steer_sim::cache::prefetch::PrefetcherSpec {
    steer_sim::cache::prefetch::PrefetcherSpec {
        kind: steer_sim::params::Name::new("next_line"),
        degree: 1,
        distance: 1,
        pair_line: false,
        cross_pages: false,
    }
}

#[test]
fn an_l1_prefetcher_trains_on_misses_and_first_uses_not_on_plain_hits() {
    let mut platform = tiny(Relation::Exclusive);
    platform.l1d.prefetcher = next_line();
    let mut h = Hierarchy::new(&platform);
    read(&mut h, 0, 100); // a miss: prefetches 101
    read(&mut h, 0, 109); // L1 set 5 again: 109 and 117 push 101 out, prefetching 110 and 118
    read(&mut h, 0, 117);
    assert_eq!(h.stats.l1d.prefetch.issued, 3);
    assert_eq!(read(&mut h, 0, 100), Source::L1);
    assert_eq!(h.stats.l1d.prefetch.issued, 3, "a plain hit trains nothing");
}

#[test]
fn an_l2_prefetcher_trains_on_misses_and_first_uses_not_on_plain_hits() {
    let mut platform = tiny(Relation::Exclusive);
    platform.l2.prefetcher = next_line();
    let mut h = with_nic(&platform);
    read(&mut h, 0, 100); // an L2 miss: prefetches 101
    read(&mut h, 0, 101); // the first use of a prefetched line: prefetches 102
    assert_eq!(h.stats.l2.prefetch.issued, 2);
    // An injected line is in the L2 but not by a prefetch: its use is a plain hit.
    h.dma_write(0, Line(200), Destination::L2 { cpu: 0 }, Time::ZERO);
    assert_eq!(read(&mut h, 0, 200), Source::L2);
    assert_eq!(h.stats.l2.prefetch.issued, 2, "a plain hit trains nothing");
}

#[test]
fn with_an_l3_keeping_copies_a_write_invalidates_copies_in_other_ccxs() {
    let mut h = Hierarchy::new(&tiny(Relation::NonInclusive));
    read(&mut h, 1, 100);
    read(&mut h, 2, 100);
    write(&mut h, 0, 100);
    // The L3 keeps its copy, stale now: CPU 0's caches answer CPU 1.
    assert_eq!(read(&mut h, 1, 100), Source::PeerL2, "CPU 1's copy was invalidated");
    assert_eq!(read(&mut h, 2, 100), Source::RemoteCache, "so was CPU 2's, in the other CCX");
}

#[test]
fn with_an_l3_keeping_copies_a_clean_line_a_peer_also_holds_comes_from_the_l3() {
    let mut h = Hierarchy::new(&tiny(Relation::NonInclusive));
    read(&mut h, 0, 100);
    assert_eq!(read(&mut h, 1, 100), Source::L3, "CPU 0's copy is clean: the L3's is current");
}

#[test]
fn a_write_that_hits_its_l3_takes_over_the_dirty_copy_it_invalidates() {
    let mut h = Hierarchy::new(&tiny(Relation::NonInclusive));
    // CPU 0 reads line 0, then streams lines of its L1 and L2 sets: line 0 is left in the L3 only.
    read(&mut h, 0, 0);
    for k in 1..=4 {
        read(&mut h, 0, 16 * k);
    }
    assert!(!h.in_l2(0, Line(0)));
    // CPU 1 dirties it (an L3 hit; the L3 keeps its copy); CPU 0 writes it from the L3, dropping
    // CPU 1's dirty copy: the data CPU 1 wrote is now CPU 0's to write back.
    assert_eq!(write(&mut h, 1, 0), Source::L3);
    assert_eq!(write(&mut h, 0, 0), Source::L3);
    for k in 5..=40 {
        read(&mut h, 0, 16 * k);
    }
    assert!(!h.is_cached(Line(0)));
    let written: u64 = h.memory.stats().map(|c| c.write_bytes).sum();
    assert_eq!(written, 64, "the line reaches memory once, dirty");
}

#[test]
fn a_load_of_a_line_still_on_its_way_into_the_l3_waits_for_the_rest_of_its_prefetch() {
    use steer_sim::hierarchy::Level;
    let load_at = |at: Time| {
        let mut h = Hierarchy::new(&tiny(Relation::Exclusive));
        let arrives = h.prefetch(0, Line(100), Level::L3, Time::ZERO).unwrap();
        (arrives, h.core_access(0, Line(100), false, at))
    };
    let (arrives, on_time) = load_at(Time::from_ns(1e6));
    assert_eq!(on_time.source, Source::L3);
    let early = Time::from_ns(10.0);
    let (_, late) = load_at(early);
    assert_eq!(late.latency, on_time.latency + (arrives - early), "an L3 hit plus the prefetch's remaining time");
    assert_eq!(late.source, Source::Dram, "the data came from where the prefetch took it");
}

/// `tiny` with an exclusive L3 that rinses dirty lines at `gbs` GB/s.
fn rinsing(gbs: f64) -> Hierarchy {
    let platform = tiny(Relation::Exclusive);
    let platform = PlatformSpec { l3: CacheSpec { rinse_gbs: OrNone(Some(gbs)), ..platform.l3 }, ..platform };
    platform.validate("platform").unwrap();
    with_nic(&platform)
}

fn access_at(h: &mut Hierarchy, cpu: u32, line: u64, write: bool, ns: f64) -> Source {
    let source = h.core_access(cpu, Line(line), write, Time::from_ns(ns)).source;
    h.check_invariants().unwrap();
    source
}

fn memory_writes(h: &Hierarchy) -> u64 {
    h.memory.stats().map(|c| c.write_bytes).sum::<u64>() / 64
}

/// CPU 0 writes line 0 and, at `ns`, pushes it out of its L2 into the L3, dirty: lines of L2 set
/// 0 (16 k) outside L3 set 0 (64 k). The L1 gives it back to the L2 dirty, a use, after two.
fn dirty_line_0_into_l3(h: &mut Hierarchy, ns: f64) {
    access_at(h, 0, 0, true, ns);
    for line in [16, 32, 48, 80, 96, 112] {
        access_at(h, 0, line, false, ns);
    }
    assert!(h.in_l3(0, Line(0)) && !h.in_l2(0, Line(0)));
}

#[test]
fn a_dirty_l3_line_taken_back_after_a_long_stay_was_rinsed_and_comes_back_clean() {
    // The only dirty line of its L3 for 1 ms, at 64 GB/s (a line a nanosecond): a million rinses
    // owed, rinsed for certain (exp(-1e6) is 0).
    let mut h = rinsing(64.0);
    dirty_line_0_into_l3(&mut h, 0.0);
    assert_eq!(access_at(&mut h, 0, 0, false, 1e6), Source::L3);
    assert_eq!((memory_writes(&h), h.stats.l3_rinses, h.stats.l3.writebacks), (1, 1, 0));
    // Clean now: pushed out of the L2 and the L3 again, it is written no more.
    for k in 1..=40 {
        access_at(&mut h, 0, 16 * k, false, 1e6);
    }
    assert!(!h.is_cached(Line(0)));
    assert_eq!((memory_writes(&h), h.stats.l3.writebacks), (1, 0));
}

#[test]
fn a_dirty_l3_line_taken_back_at_once_was_not_rinsed_and_is_written_back_on_eviction() {
    // A stay of zero: nothing owed, never rinsed (exp(0) is 1), whatever the rate.
    let mut h = rinsing(64.0);
    dirty_line_0_into_l3(&mut h, 5.0);
    assert_eq!(access_at(&mut h, 0, 0, false, 5.0), Source::L3);
    assert_eq!((memory_writes(&h), h.stats.l3_rinses), (0, 0));
    for k in 1..=40 {
        access_at(&mut h, 0, 16 * k, false, 5.0);
    }
    assert_eq!((memory_writes(&h), h.stats.l3.writebacks), (1, 1));
}

#[test]
fn a_device_write_over_a_rinsed_l3_line_costs_the_rinse_and_nothing_else() {
    let mut h = rinsing(64.0);
    dirty_line_0_into_l3(&mut h, 0.0);
    // Injected into CPU 1's L2: the L3 copy is dropped; it had been rinsed during its stay.
    h.dma_write(0, Line(0), Destination::L2 { cpu: 1 }, Time::from_ns(1e6));
    h.check_invariants().unwrap();
    assert!(!h.in_l3(0, Line(0)) && h.in_l2(1, Line(0)));
    assert_eq!((memory_writes(&h), h.stats.l3_rinses), (1, 1));
}

#[test]
fn an_evicted_dirty_line_is_written_once_however_long_it_stayed() {
    let mut h = rinsing(64.0);
    dirty_line_0_into_l3(&mut h, 0.0);
    // L3 set 0 (64 sets, 4 ways) takes lines 64 k: streaming them at 1 ms evicts line 0.
    for k in 1..=40 {
        access_at(&mut h, 0, 16 * k, false, 1e6);
    }
    assert!(!h.is_cached(Line(0)));
    assert_eq!((memory_writes(&h), h.stats.l3.writebacks, h.stats.l3_rinses), (1, 1, 0));
}

#[test]
fn a_clean_l3_line_is_never_rinsed() {
    let mut h = rinsing(64.0);
    for line in [0, 16, 32, 48, 80] {
        access_at(&mut h, 0, line, false, 0.0);
    }
    assert!(h.in_l3(0, Line(0)));
    assert_eq!(access_at(&mut h, 0, 0, false, 1e6), Source::L3);
    assert_eq!((memory_writes(&h), h.stats.l3_rinses), (0, 0));
}

/// 2,000 lines, each into the L3 dirty at 0 and taken back by CPU 1 at 1 µs, in a hierarchy whose
/// random choices follow `seed`: whether each of the 256 lines left in the L3 was rinsed. Its
/// engine rinses 256 lines a microsecond (16.384 GB/s), so each line is owed one rinse.
fn rinsed_after_one_owed(seed: u64) -> Vec<bool> {
    let platform = tiny(Relation::Exclusive);
    let platform = PlatformSpec { l3: CacheSpec { rinse_gbs: OrNone(Some(16.384)), ..platform.l3 }, ..platform };
    let mut h = Hierarchy::seeded(&platform, seed);
    let lines = 2000;
    for line in 0..lines {
        access_at(&mut h, 0, line, true, 0.0);
    }
    // CPU 0's L2 holds 64 lines: all but its last 64 are in the L3 (256 lines) or gone.
    let in_l3: Vec<u64> = (0..lines).filter(|&line| h.in_l3(0, Line(line))).collect();
    assert_eq!(in_l3.len(), 256);
    in_l3
        .iter()
        .map(|&line| {
            let rinses = h.stats.l3_rinses;
            access_at(&mut h, 1, line, false, 1000.0);
            h.stats.l3_rinses > rinses
        })
        .collect()
}

#[test]
fn lines_owed_one_rinse_each_are_rinsed_with_probability_one_minus_1_over_e() {
    let expected = 256.0 * (1.0 - (-1.0f64).exp());
    for seed in [0, 1, 2] {
        let rinsed = rinsed_after_one_owed(seed).iter().filter(|&&r| r).count() as f64;
        assert!(
            (rinsed - expected).abs() < 0.1 * expected,
            "seed {seed}: {rinsed} rinsed, about {expected:.0} expected"
        );
    }
}

#[test]
fn which_lines_are_rinsed_follows_the_seed() {
    assert_eq!(rinsed_after_one_owed(7), rinsed_after_one_owed(7));
    assert_ne!(rinsed_after_one_owed(7), rinsed_after_one_owed(8));
}

/// `tiny` with a randomly replaced L2 (4 ways of 16 sets) in a hierarchy whose random choices
/// follow `seed`: after each of 40 reads by `cpu` of lines of its L2 set 0, which of them the L2
/// holds (each read past the fourth evicts one, drawn from the cache's own stream).
fn random_l2_holdings(seed: u64, cpu: u32) -> Vec<Vec<bool>> {
    let platform = tiny(Relation::Exclusive);
    let platform = PlatformSpec { l2: CacheSpec { replacement: "random".into(), ..platform.l2 }, ..platform };
    platform.validate("platform").unwrap();
    let mut h = Hierarchy::seeded(&platform, seed);
    let set_0: Vec<u64> = (0..40).map(|k| 16 * k).collect();
    set_0
        .iter()
        .map(|&line| {
            access_at(&mut h, cpu, line, false, 0.0);
            set_0.iter().map(|&l| h.in_l2(cpu, Line(l))).collect()
        })
        .collect()
}

#[test]
fn random_replacement_draws_a_stream_per_cache_that_follows_the_seed() {
    let holdings = random_l2_holdings(7, 0);
    assert!(holdings.iter().all(|held| held.iter().filter(|&&h| h).count() <= 4));
    assert_eq!(holdings, random_l2_holdings(7, 0), "the same seed, the same victims");
    assert_ne!(holdings, random_l2_holdings(8, 0), "another seed, other victims");
    assert_ne!(holdings, random_l2_holdings(7, 1), "another core's L2, another stream");
}
