//! PCIe TPH end to end: the driver model programs steering tags through the codec, the I/O die
//! decodes them, an IRQ affinity change moves a queue's data and restarts only that queue; No-ST
//! updates in place; hints follow the device's choice; SDCIAE confines injection victims.

use serde_json::Value;
use steer_sim::devices::nic::Nic;
use steer_sim::devices::ring::Rings;
use steer_sim::devices::ring::{Completion, Poll};
use steer_sim::hierarchy::{Destination, Hierarchy, Source};
use steer_sim::platform::{CacheSpec, PlatformSpec, Relation, TopologySpec, WayMaskSpec};
use steer_sim::units::{Line, Time};
use steer_sim::{load, Scenario, ScenarioSource, Simulation};

/// Two RX queues consumed by CPUs 1 and 2 of an EPYC 9655, no workload: completions wait until
/// the test takes them. The ring of 64 buffers fills in about 80 µs.
const TWO_QUEUES: &str = r#"
[platform]
preset = "turin-9655"

[sim]
warmup_us = 0.0
measure_us = 300.0

[[devices]]
name = "nic0"
placement = { policy = "tph" }

[devices.tph]
mode = "iv"

[[devices.queues]]
count = 2
consumer_cpu = 1
offered_gbps = 20.0
ring_entries = 64
"#;

fn scenario(text: &str, overrides: &[&str]) -> Result<Scenario, steer_sim::Error> {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    load(&ScenarioSource { text, origin: "s.toml", default_name: "s" }, &overrides)
}

fn simulation(overrides: &[&str]) -> Simulation {
    Simulation::new(scenario(TWO_QUEUES, overrides).unwrap()).unwrap()
}

fn nic_agent(sim: &Simulation) -> &Nic {
    sim.agents_of::<Nic>().next().unwrap()
}

fn run_to(sim: &mut Simulation, us: f64) {
    assert!(sim.run_until(Time::from_us(us), &mut |_| true));
}

/// Takes every completion visible on a queue, as a consumer would, re-posting the buffers.
fn drain(sim: &mut Simulation, queue: usize) -> Vec<Completion> {
    let now = sim.now();
    let queue = &mut sim.shared.get_mut::<Rings>()[queue];
    let mut taken = Vec::new();
    while let Poll::Ready(completion) = queue.poll(now) {
        taken.push(queue.take().unwrap());
        queue.release(&completion);
    }
    taken
}

/// The lines of a packet: its first (header) line and the rest (payload).
fn packet_lines(sim: &Simulation, queue: usize, completion: &Completion) -> (Line, Vec<Line>) {
    let line_bits = sim.scenario.platform.line_bits();
    let start = sim.shared.get::<Rings>()[queue].buffer_addr(completion.buffer);
    let first = start.line(line_bits);
    let last = start.offset(completion.bytes as u64 - 1).line(line_bits);
    (first, (first.0 + 1..=last.0).map(Line).collect())
}

fn report(sim: &Simulation) -> Value {
    sim.report(0.0).value
}

#[test]
fn an_affinity_change_moves_the_queue_payload_to_the_new_core_and_restarts_only_that_queue() {
    let (a, b) = (1, 5);
    let mut sim = simulation(&["devices.0.tph.affinity_changes=[{ queue = 0, at_us = 100.0, cpu = 5 }]"]);
    run_to(&mut sim, 90.0);
    let before = drain(&mut sim, 0);
    assert!(before.len() > 30, "{} packets", before.len());
    for completion in &before {
        let (header, payload) = packet_lines(&sim, 0, completion);
        for line in payload.iter().chain([&header]) {
            assert!(
                sim.shared.get_mut::<Hierarchy>().in_l2(a, *line) && !sim.shared.get_mut::<Hierarchy>().in_l2(b, *line)
            );
        }
        assert!(sim.shared.get_mut::<Hierarchy>().in_l2(a, completion.entry.line(6)));
    }
    let before_report = report(&sim);
    assert_eq!(before_report["devices"]["nic0"]["queues"][0]["steering_cpu"], a);
    assert_eq!(before_report["devices"]["nic0"]["queues"][0]["restarts"], 0);

    run_to(&mut sim, 300.0);
    let after = drain(&mut sim, 0);
    assert!(after.len() > 30, "{} packets", after.len());
    for completion in &after {
        assert!(completion.arrival >= Time::from_us(100.0), "a completion from before the restart survived it");
        let (header, payload) = packet_lines(&sim, 0, completion);
        for line in payload.iter().chain([&header]) {
            assert!(
                sim.shared.get_mut::<Hierarchy>().in_l2(b, *line) && !sim.shared.get_mut::<Hierarchy>().in_l2(a, *line)
            );
        }
        // The completion ring was allocated anew.
        assert!(sim.shared.get_mut::<Hierarchy>().in_l2(b, completion.entry.line(6)));
        assert!(before.iter().all(|c| c.entry != completion.entry));
    }
    // Queue 1 kept its IRQ, its tag and its ring.
    for completion in drain(&mut sim, 1) {
        let (_, payload) = packet_lines(&sim, 1, &completion);
        assert!(payload.iter().all(|&line| sim.shared.get_mut::<Hierarchy>().in_l2(2, line)));
    }

    let r = report(&sim);
    let nic = &r["devices"]["nic0"];
    assert_eq!(nic["tph"]["enabled"], true);
    assert_eq!(nic["tph"]["mode"], "iv");
    assert_eq!(nic["tph"]["request_type"], "tph_and_extended");
    assert_eq!(nic["tph"]["reason_disabled"], Value::Null);
    let queue = |i: usize, key: &str| nic["queues"][i][key].clone();
    assert_eq!((queue(0, "restarts"), queue(0, "irq_cpu"), queue(0, "steering_cpu")), (1.into(), b.into(), b.into()));
    assert_eq!((queue(1, "restarts"), queue(1, "irq_cpu"), queue(1, "steering_cpu")), (0.into(), 2.into(), 2.into()));
    // Completions pending at the restart went with the old ring, counted as drops.
    assert!(queue(0, "dropped_packets").as_u64().unwrap() > 0);
    // The entry was rewritten through the codec with the requester disabled around the write.
    let tph = &nic_agent(&sim).tph;
    let rewrite = tph.st_writes.last().unwrap();
    assert_eq!((rewrite.index, rewrite.tag), (0, tph.get_cpu_st(b).unwrap()));
    assert_eq!(tph.msix.st(0), Ok(rewrite.tag));
    assert_eq!(rewrite.enable_during, steer_tph::RequesterEnable::Disabled);
    assert_eq!(tph.requester_enable(), steer_tph::RequesterEnable::TphAndExtended);
}

#[test]
fn a_restart_stops_the_queue_for_restart_us() {
    let mut sim = simulation(&[
        "devices.0.tph.affinity_changes=[{ queue = 1, at_us = 20.0, cpu = 9 }]",
        "devices.0.tph.restart_us=50.0",
    ]);
    run_to(&mut sim, 70.0);
    // The completions pending at 20 µs went with the old ring; arrivals until 70 µs were dropped.
    assert!(drain(&mut sim, 1).is_empty());
    assert!(drain(&mut sim, 0).len() > 50);
    run_to(&mut sim, 100.0);
    let taken = drain(&mut sim, 1);
    assert!(!taken.is_empty() && taken.iter().all(|c| c.arrival >= Time::from_us(70.0)));
    assert!(sim.shared.get_mut::<Rings>()[1].stats.dropped_packets > 50);
    assert_eq!(sim.shared.get_mut::<Rings>()[0].stats.dropped_packets, 0);
}

#[test]
fn when_enabling_fails_tph_stays_off_and_writes_go_to_memory() {
    for (overrides, reason) in [
        (vec!["platform.tph.notph=true"], "pci=notph"),
        (vec!["platform.tph.completer=\"none\""], "not a TPH completer"),
        (vec!["devices.0.tph.supported_modes=[\"no_st\", \"ds\"]"], "does not support ST mode `iv`"),
        (vec!["devices.0.tph.capability=false"], "no TPH Requester capability"),
        (vec!["devices.0.tph.mode=\"off\""], "tph.mode = off"),
    ] {
        let mut sim = simulation(&overrides);
        run_to(&mut sim, 50.0);
        let stats = &sim.shared.get::<Hierarchy>().stats;
        assert_eq!(stats.dma_lines_to_cache, 0, "{reason}");
        assert!(stats.dma_lines_to_memory > 500, "{reason}");
        let tph = &report(&sim)["devices"]["nic0"]["tph"];
        assert_eq!(tph["enabled"], false);
        assert_eq!(tph["request_type"], Value::Null);
        assert!(tph["reason_disabled"].as_str().unwrap().contains(reason), "{tph}");
        assert_eq!(report(&sim)["devices"]["nic0"]["queues"][0]["steering_cpu"], Value::Null);
    }
}

#[test]
fn eight_bit_tags_steer_as_well_when_the_root_port_completes_tph_only() {
    let mut sim = simulation(&["platform.tph.completer=\"tph_only\"", "devices.0.tph.st_table=\"capability\""]);
    run_to(&mut sim, 50.0);
    let r = report(&sim);
    assert_eq!(r["devices"]["nic0"]["tph"]["request_type"], "tph_only");
    for (queue, cpu) in [(0, 1), (1, 2)] {
        assert_eq!(r["devices"]["nic0"]["queues"][queue]["steering_cpu"], cpu);
        for completion in drain(&mut sim, queue) {
            let (_, payload) = packet_lines(&sim, queue, &completion);
            assert!(payload.iter().all(|&line| sim.shared.get_mut::<Hierarchy>().in_l2(cpu, line)));
        }
    }
}

#[test]
fn header_hints_inject_only_the_first_line_of_each_packet() {
    let mut sim = simulation(&["devices.0.tph.hints=[\"header\"]"]);
    run_to(&mut sim, 50.0);
    let taken = drain(&mut sim, 0);
    assert!(!taken.is_empty());
    for completion in &taken {
        let (header, payload) = packet_lines(&sim, 0, completion);
        assert!(sim.shared.get_mut::<Hierarchy>().in_l2(1, header));
        assert!(payload.iter().all(|&line| !sim.shared.get_mut::<Hierarchy>().is_cached(line)));
        assert!(!sim.shared.get_mut::<Hierarchy>().is_cached(completion.entry.line(6)));
    }
    let stats = &sim.shared.get::<Hierarchy>().stats;
    let packets: u64 =
        sim.shared.get::<Rings>().iter().map(|q| q.stats.arrived_packets - q.stats.dropped_packets).sum();
    assert_eq!(stats.dma_lines_to_cache, packets);
}

#[test]
fn no_st_hints_reach_memory_for_lines_no_cache_holds() {
    let mut sim = simulation(&["devices.0.tph.mode=\"no_st\""]);
    run_to(&mut sim, 50.0);
    assert!(nic_agent(&sim).tph.status.enabled);
    assert_eq!(sim.shared.get_mut::<Hierarchy>().stats.dma_lines_to_cache, 0);
    assert_eq!(report(&sim)["devices"]["nic0"]["queues"][0]["steering_cpu"], Value::Null);
}

/// One CCX of two cores (CPUs 0, 1), tiny caches: L1 1 KiB 2-way (8 sets), L2 4 KiB 4-way
/// (16 sets), L3 16 KiB 4-way (64 sets), exclusive. Lines 64 apart share an L2 and an L3 set.
fn tiny(l3_masks: Vec<WayMaskSpec>) -> Hierarchy {
    let cache = |size_kib, ways, relation| CacheSpec { size_kib, ways, relation, ..CacheSpec::default() };
    let platform = PlatformSpec {
        topology: TopologySpec { sockets: 1, ccx_per_socket: 1, cores_per_ccx: 2, threads_per_core: 1 },
        l1d: cache(1, 2, Relation::Inclusive),
        l2: cache(4, 4, Relation::Inclusive),
        l3: CacheSpec { way_masks: l3_masks, ..cache(16, 4, Relation::Exclusive) },
        ..PlatformSpec::default()
    };
    platform.validate("platform").unwrap();
    let mut h = Hierarchy::new(&platform);
    assert_eq!(h.register_device("nic0"), 0);
    h
}

fn memory_writes(h: &Hierarchy) -> u64 {
    h.memory.stats().map(|c| c.write_bytes).sum()
}

#[test]
fn no_st_updates_a_cached_line_in_place_and_writes_memory_otherwise() {
    let mut h = tiny(Vec::new());
    // Not cached: to memory, nothing allocated.
    h.dma_write(0, Line(100), Destination::UpdateIfCached, Time::ZERO);
    assert!(!h.is_cached(Line(100)));
    assert_eq!(memory_writes(&h), 64);
    // In CPU 0's L1 and L2: updated in its L2, the stale L1 copy dropped, no memory traffic.
    h.core_access(0, Line(200), false, Time::ZERO);
    h.dma_write(0, Line(200), Destination::UpdateIfCached, Time::ZERO);
    assert!(h.in_l2(0, Line(200)) && !h.in_l2(1, Line(200)));
    assert_eq!(memory_writes(&h), 64);
    assert_eq!(h.core_access(0, Line(200), false, Time::ZERO).source, Source::L2);
    // Only in the L3 (pushed out of CPU 0's L2 by four conflicting lines): updated there.
    for i in 1..=4 {
        h.core_access(0, Line(200 + 64 * i), false, Time::ZERO);
    }
    assert!(!h.in_l2(0, Line(200)) && h.is_cached(Line(200)));
    h.dma_write(0, Line(200), Destination::UpdateIfCached, Time::ZERO);
    assert_eq!(h.core_access(1, Line(200), false, Time::ZERO).source, Source::L3);
    assert_eq!(memory_writes(&h), 64);
    assert_eq!((h.stats.dma_lines_to_cache, h.stats.dma_lines_to_memory), (2, 1));
    h.check_invariants().unwrap();
}

/// Lines of one L2 and L3 set (0, 64, 128, ...) still cached somewhere.
fn cached(h: &Hierarchy, lines: &[u64]) -> usize {
    lines.iter().filter(|&&l| h.is_cached(Line(l))).count()
}

#[test]
fn sdciae_victims_of_l2_injection_land_only_in_the_io_alloc_ways() {
    let injected: Vec<u64> = (0..8).map(|i| i * 64).collect();
    for (mask, l3_survivors) in [(None, 4), (Some(0b1000), 1), (Some(0b1100), 2)] {
        let masks = mask.map(|m| vec![WayMaskSpec { agent: "device:nic0".into(), mask: m }]).unwrap_or_default();
        let mut h = tiny(masks);
        // Eight injections into one L2 set of 4 ways push four victims into one L3 set; with
        // io_alloc they may allocate only in the device's ways, so only that many survive.
        for &line in &injected {
            h.dma_write(0, Line(line), Destination::L2 { cpu: 0 }, Time::ZERO);
        }
        h.check_invariants().unwrap();
        assert_eq!(injected[4..].iter().filter(|&&l| h.in_l2(0, Line(l))).count(), 4);
        assert_eq!(cached(&h, &injected[..4]), l3_survivors, "mask {mask:?}");
    }
}

#[test]
fn lines_evicted_by_the_cores_own_activity_use_the_cores_mask() {
    let mut h = tiny(vec![WayMaskSpec { agent: "device:nic0".into(), mask: 0b1000 }]);
    let injected: Vec<u64> = (0..4).map(|i| i * 64).collect();
    for &line in &injected {
        h.dma_write(0, Line(line), Destination::L2 { cpu: 0 }, Time::ZERO);
    }
    // CPU 0 reads four other lines of the set: the injected lines leave its L2 by the core's
    // activity and are allocated in the L3 under CPU 0's mask (every way): all four stay cached.
    for i in 4..8 {
        h.core_access(0, Line(i * 64), false, Time::ZERO);
    }
    assert!(injected.iter().all(|&l| !h.in_l2(0, Line(l))));
    assert_eq!(cached(&h, &injected), 4);
    h.check_invariants().unwrap();
}

#[test]
fn bad_tph_input_names_the_key() {
    let error = |overrides: &[&str]| scenario(TWO_QUEUES, overrides).unwrap_err().to_string();
    let e = error(&["devices.0.tph.mode=\"fast\""]);
    assert!(e.contains("devices.0.tph.mode") && e.contains("unknown value `fast` (known: off, no_st, iv, ds)"), "{e}");
    let e = error(&["devices.0.tph.hints=[\"payload\", \"trailer\"]"]);
    assert!(e.contains("devices.0.tph.hints") && e.contains("trailer"), "{e}");
    let e = error(&["devices.0.tph.affinity_changes=[{ queue = 2, at_us = 1.0, cpu = 3 }]"]);
    assert!(e.contains("devices.0.tph.affinity_changes.0.queue: queue 2 out of range (the device has 2)"), "{e}");
    let e = error(&["devices.0.tph.affinity_changes=[{ queue = 0, at_us = 1.0, cpu = 192 }]"]);
    assert!(e.contains("devices.0.tph.affinity_changes.0.cpu: CPU 192 out of range"), "{e}");
    let e = error(&["devices.0.tph.affinity_changes=[{ queue = 0, at_us = -1.0, cpu = 3 }]"]);
    assert!(e.contains("devices.0.tph.affinity_changes.0.at_us"), "{e}");
    let e = error(&["devices.0.tph.supported_modes=[\"iv\", \"off\"]"]);
    assert!(e.contains("devices.0.tph.supported_modes.1: `off` is not an ST mode"), "{e}");
    let e = error(&["platform.tph.completer=\"partial\""]);
    assert!(e.contains("platform.tph.completer"), "{e}");
    let e = error(&["platform.tph.st_base=65500"]);
    assert!(e.contains("platform.tph.st_base: the tag of CPU 191 would be"), "{e}");
    // Inside a file, the position is the key's.
    let text = TWO_QUEUES.replace("mode = \"iv\"", "mode = \"iv\"\nhints = [\"payload\", \"tail\"]");
    let e = scenario(&text, &[]).unwrap_err().to_string();
    assert!(e.starts_with("s.toml:15:21: devices.0.tph.hints.1: unknown value `tail` (known: "), "{e}");
}

#[test]
fn the_sdci_affinity_scenario_moves_the_consumers_fills_from_l2_to_peer_l2() {
    let source = steer_sim::scenario::builtin("sdci-affinity").unwrap().source;
    // Without the hardware prefetchers, which would take part of the payload from the new IRQ
    // core's L2 before the consumer asks (fills counted as its own L2): this is about steering.
    let no_prefetch =
        ["platform.l1d.prefetcher.kind=\"none\"", "platform.l2.prefetcher.kind=\"none\""].map(String::from);
    let scenario =
        load(&ScenarioSource { text: source, origin: "sdci-affinity", default_name: "sdci-affinity" }, &no_prefetch)
            .unwrap();
    let r = steer_sim::run(scenario, &mut |_| true).unwrap().value;
    let queue = &r["devices"]["nic0"]["queues"][0];
    assert_eq!((queue["restarts"].as_u64(), queue["steering_cpu"].as_u64()), (Some(1), Some(2)));
    let fills = &r["cores"]["1"]["dc_fills"];
    let (l2, peer) = (fills["l2"].as_f64().unwrap(), fills["peer_l2"].as_f64().unwrap());
    assert!(l2 > 0.5 && peer > 0.15, "{fills}");
    assert!(fills["dram"].as_f64().unwrap() < 0.05, "{fills}");
}

#[test]
fn a_resolved_tph_scenario_loads_back_unchanged() {
    let first = scenario(
        TWO_QUEUES,
        &["devices.0.tph.affinity_changes=[{ queue = 0, at_us = 100.0, cpu = 5 }]", "devices.0.tph.hints=[\"header\"]"],
    )
    .unwrap();
    assert_eq!(scenario(&first.to_toml(), &[]).unwrap(), first);
}
