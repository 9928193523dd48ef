//! The host probes (`probe`, `handoff`) as `steer validate` runs them: hand-worked times on the
//! turin-9655 preset (4.1 GHz, issue 1 cycle per line, L1 5 cycles, L2 14, same-CCX peer 20 ns,
//! cross-CCX 110 ns, DRAM 130 ns idle, 24 misses in flight), and bad input.

use serde_json::Value;
use steer_sim::{load, run, ScenarioSource};

/// A 4.1 GHz cycle in the simulator's picosecond time: 243.9 ps, rounded.
const CYCLE_NS: f64 = 0.244;

fn scenario(workload: &str) -> String {
    format!(
        "[platform]\npreset = \"turin-9655\"\n[sim]\nwarmup_us = 100\nmeasure_us = 200\n[[workloads]]\n{workload}\n"
    )
}

fn result_with(workload: &str, overrides: &[String]) -> Value {
    let text = scenario(workload);
    let source = ScenarioSource { text: &text, origin: "p.toml", default_name: "p" };
    run(load(&source, overrides).unwrap(), &mut |_| true).unwrap().value
}

fn result(workload: &str) -> Value {
    result_with(workload, &[])
}

fn per(workload: &str, cpu: &str, key: &str) -> f64 {
    result(workload)["cores"][cpu]["workload"][key].as_f64().unwrap()
}

fn error(workload: &str) -> String {
    let text = scenario(workload);
    let source = ScenarioSource { text: &text, origin: "p.toml", default_name: "p" };
    load(&source, &[]).map(|_| ()).expect_err("an error").to_string()
}

/// Equal but for the unit in progress when the window closes (64 loads in a 200 µs window).
fn close(actual: f64, expected: f64) {
    assert!((actual / expected - 1.0).abs() < 1e-3, "{actual} != {expected}");
}

#[test]
fn a_chase_costs_an_issue_cycle_plus_the_latency_of_the_level_it_fits_in() {
    // A first pass over 512 KiB is 8192 misses of 130 ns, 1.06 ms: the warm-up must outlast it.
    // Without the prefetchers: a random cycle has consecutive lines now and then, which the L1's
    // stream prefetcher, fetching two lines an access, follows.
    let chase = |bytes: u64| {
        let workload = format!("kind = \"probe\"\nworking_set_bytes = {bytes}");
        let quiet =
            ["sim.warmup_us=1500", "platform.l1d.prefetcher.kind=\"none\"", "platform.l2.prefetcher.kind=\"none\""];
        let value = result_with(&workload, &quiet.map(String::from));
        value["cores"]["0"]["workload"]["exec_ns_per_load"].as_f64().unwrap()
    };
    close(chase(16 << 10), (1.0 + 5.0) * CYCLE_NS);
    close(chase(512 << 10), (1.0 + 14.0) * CYCLE_NS);
}

#[test]
fn random_loads_in_the_l1_cost_their_index_computation_and_an_issue_cycle() {
    let ns = per("kind = \"probe\"\npattern = \"random\"\nworking_set_bytes = 16384", "0", "exec_ns_per_load");
    close(ns, 1.463 + CYCLE_NS); // 6 cycles are 1463 ps
}

#[test]
fn random_loads_in_dram_are_bound_by_the_misses_in_flight() {
    // 24 misses of 130 ns in flight: one every 5.42 ns, slower than the 7 cycles (1.7 ns) to issue
    // one; the channels (12 x 38.4 GB/s) are far from busy. A few loads hit lines still cached.
    let ns = per("kind = \"probe\"\npattern = \"random\"\nworking_set_bytes = 1073741824", "0", "exec_ns_per_load");
    assert!((130.0 / 24.0 * 0.97..=130.0 / 24.0 * 1.03).contains(&ns), "{ns}");
}

#[test]
fn a_prefetching_strided_scan_in_the_l1_issues_two_accesses_per_element() {
    let strided = |distance: u32| {
        let workload = format!(
            "kind = \"probe\"\npattern = \"strided\"\nworking_set_bytes = 16384\nprefetch_distance = {distance}"
        );
        per(&workload, "0", "exec_ns_per_load")
    };
    close(strided(0), CYCLE_NS);
    close(strided(8), 2.0 * CYCLE_NS);
}

#[test]
fn a_ring_copy_in_the_l1_issues_loads_and_stores_side_by_side_and_reads_the_copy_without_waiting() {
    // A 2 KiB buffer is 32 lines: 32 loads of one cycle each, the 32 stores on their own port
    // beside them, then the read of the copy (one more issue cycle; nothing waits for its data).
    let ns = per("kind = \"probe\"\npattern = \"ring_copy\"\nworking_set_bytes = 8192", "0", "exec_ns_per_buffer");
    close(ns, 33.0 * CYCLE_NS);
}

#[test]
fn a_handoff_round_trip_is_two_transfers_between_the_cores_caches() {
    // Each side: the read of the line the other wrote (issue + transfer), then its own store, which
    // waits until the other side's copy is invalidated (as long as a transfer) and commits.
    let round_trip =
        |peer: u32| per(&format!("kind = \"handoff\"\ncpu = 0\npeer_cpu = {peer}"), "0", "ns_per_round_trip");
    let same_ccx = 2.0 * (2.0 * 20.0 + 2.0 * CYCLE_NS);
    let other_ccx = 2.0 * (2.0 * 110.0 + 2.0 * CYCLE_NS);
    assert!((round_trip(1) - same_ccx).abs() < 0.05, "{} vs {same_ccx}", round_trip(1));
    // The round trip in progress when the 200 µs window closes is 1 ns of this figure.
    assert!((round_trip(8) - other_ccx).abs() < 1.0, "{} vs {other_ccx}", round_trip(8));
    let both = result("kind = \"handoff\"\ncpu = 0\npeer_cpu = 1");
    assert_eq!(both["cores"]["0"]["role"], "handoff");
    assert_eq!(both["cores"]["1"]["role"], "handoff-peer");
    let trips = |cpu: &str| both["cores"][cpu]["workload"]["round_trips"].as_u64().unwrap();
    assert!(trips("0").abs_diff(trips("1")) <= 1, "the sides take turns");
}

#[test]
fn a_probe_or_a_pair_holds_its_cpus_against_other_workloads() {
    let twice = |first: &str, second: &str| error(&format!("{first}\n[[workloads]]\n{second}"));
    let taken = twice("kind = \"probe\"\ncpu = 2", "kind = \"stream\"\ncpu = 2");
    assert!(taken.contains("workloads.1.cpu: CPU 2 already runs workloads.0"), "{taken}");
    let answerer = twice("kind = \"handoff\"\ncpu = 0\npeer_cpu = 1", "kind = \"stream\"\ncpu = 1");
    assert!(answerer.contains("CPU 1 already runs workloads.0"), "{answerer}");
    let starter = twice("kind = \"handoff\"\ncpu = 0\npeer_cpu = 1", "kind = \"stream\"\ncpu = 0");
    assert!(starter.contains("CPU 0 already runs workloads.0"), "{starter}");
}

#[test]
fn bad_probes_are_refused_naming_the_key() {
    assert!(error("kind = \"probe\"\nworking_set_bytes = 8").contains("workloads.0.working_set_bytes: must be 64 B"));
    assert!(error("kind = \"probe\"\nworking_set_bytes = 17179869185").contains("to 16 GiB"));
    assert!(error("kind = \"probe\"\nstride_bytes = 12").contains("workloads.0.stride_bytes: must be a multiple of 8"));
    assert!(error("kind = \"probe\"\nbuffer_bytes = 0").contains("workloads.0.buffer_bytes"));
    assert!(error("kind = \"probe\"\npattern = \"zigzag\"").contains("zigzag"));
    assert!(
        error("kind = \"handoff\"\ncpu = 3\npeer_cpu = 3").contains("workloads.0.peer_cpu: must differ from cpu (3)")
    );
    assert!(error("kind = \"handoff\"\npeer_cpu = 999").contains("CPU 999 out of range"));
}
