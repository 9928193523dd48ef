//! Query-driven prefetching on the `qdp` scenario: hand-worked times of the scans, what the
//! offloading cache does (one copy per block, split by the copy policy, flushes under pressure),
//! and bad input.

mod common;

use common::{f, node_bytes};
use serde_json::Value;
use steer_sim::{load, run, ScenarioSource};

fn scenario(overrides: &[&str]) -> Result<steer_sim::Scenario, steer_sim::Error> {
    let source = steer_sim::scenario::builtin("qdp").unwrap().source;
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    load(&ScenarioSource { text: source, origin: "qdp", default_name: "qdp" }, &overrides)
}

fn query(overrides: &[&str]) -> Value {
    run(scenario(overrides).unwrap(), &mut |_| true).unwrap().value
}

fn error(overrides: &[&str]) -> String {
    match scenario(overrides) {
        Err(e) => e.to_string(),
        Ok(s) => steer_sim::Simulation::new(s).err().expect("an error").to_string(),
    }
}

/// A small query: one group, one thread per pipeline, `blocks` blocks of 1 MiB.
fn small(column_b: &str, blocks: u64) -> Vec<String> {
    vec![
        format!("column_b={column_b}"),
        format!("column_bytes={}", blocks << 20),
        "block_bytes=1048576".into(),
        "groups=1".into(),
    ]
}

fn with<'a>(base: &'a [String], more: &[&'a str]) -> Vec<&'a str> {
    base.iter().map(String::as_str).chain(more.iter().copied()).collect()
}

#[test]
fn a_lone_scan_streams_at_its_outstanding_misses_per_round_trip() {
    // One core keeps 16 misses of 64 B in flight: 1024 B per 110 ns from DDR, per 130 ns from HBM.
    // SCAN_a reads its 1 MiB block in 1048576 x 110 / 1024 = 112640 ns; AGGREGATE then reads b's
    // from HBM in 1048576 x 130 / 1024 = 133120 ns.
    let r = query(&with(&small("hbm", 1), &[]));
    let q = &r["query"];
    assert!((f(&q["scan_a_us"]) - 112.64).abs() < 1e-6, "{q}");
    assert!((f(&q["aggregate_us"]) - 245.76).abs() < 1e-6, "{q}");
    assert_eq!(
        (f(&q["total_us"]), &q["scan_b_us"], &q["hit_rate"]),
        (f(&q["aggregate_us"]), &Value::Null, &Value::Null)
    );
    assert_eq!(q["b_node"], 8);
    // From DDR, b takes as long as a.
    let ddr = query(&with(&small("ddr", 1), &[]));
    assert!((f(&ddr["query"]["aggregate_us"]) - 225.28).abs() < 1e-6, "{}", ddr["query"]);
}

#[test]
fn a_short_last_block_is_read_for_its_own_bytes() {
    // 2.5 MiB in blocks of 1 MiB: SCAN_a reads 1 + 1 + 0.5 MiB at 1024 B per 110 ns.
    let mut args = small("hbm", 1);
    args[1] = "column_bytes=2621440".into();
    let r = query(&with(&args, &[]));
    assert!((f(&r["query"]["scan_a_us"]) - 281.6).abs() < 1e-6, "{}", r["query"]);
    assert_eq!(r["query"]["blocks"], 3);
}

#[test]
fn a_query_cut_short_has_no_total_time() {
    // SCAN_a ends at 112.64 µs, AGGREGATE would at 245.76 µs: a 200 µs window sees only the first.
    let r = query(&with(&small("hbm", 1), &["sim.measure_us=200"]));
    let q = &r["query"];
    assert_eq!((f(&q["scan_a_us"]), &q["aggregate_us"], &q["total_us"]), (112.64, &Value::Null, &Value::Null), "{q}");
}

#[test]
fn every_block_is_copied_once_split_by_the_copy_policy() {
    let base = small("prefetch", 8);
    let r = query(&with(&base, &[]));
    let q = &r["query"];
    // SCAN_b's accesses miss; AGGREGATE's find the entries (ready or in flight).
    assert_eq!((q["cache_misses"].as_u64(), q["cache_hits"].as_u64()), (Some(8), Some(8)), "{q}");
    assert_eq!(q["ready_blocks"].as_u64().unwrap() + q["in_flight_blocks"].as_u64().unwrap(), 8);
    assert_eq!(q["missed_blocks"], 0);
    // Smart within a socket: the four devices of node 0's socket, a quarter of each block each.
    for node in 0..8 {
        let want = if node < 4 { 2 << 20 } else { 0 };
        assert_eq!(r["devices"][format!("dsa{node}")]["bytes"], want, "dsa{node}");
    }
    let local = query(&with(&base, &["copy_policy=local"]));
    assert_eq!(local["devices"]["dsa0"]["bytes"], 8 << 20);
    assert_eq!(local["devices"]["dsa0"]["descriptors"], 8);
}

#[test]
fn a_prefetched_block_is_read_from_hbm_after_its_copy() {
    // With a single block SCAN_b's copy (a quarter on each of four devices) finishes before
    // SCAN_a does, so AGGREGATE finds it ready and reads it from node 8 as in the `hbm` case,
    // after its 60 ns access that hits.
    let r = query(&with(&small("prefetch", 1), &[]));
    let q = &r["query"];
    assert_eq!((q["ready_blocks"].as_u64(), f(&q["hit_rate"])), (Some(1), 1.0), "{q}");
    assert_eq!(f(&q["copy_wait_us"]), 0.0);
    let hbm = query(&with(&small("hbm", 1), &[]));
    let read_b = |v: &Value| f(&v["query"]["aggregate_us"]) - f(&v["query"]["scan_a_us"]);
    assert!((read_b(&r) - read_b(&hbm) - 0.06).abs() < 1e-6, "{q} against {}", hbm["query"]);
}

#[test]
fn an_aggregate_ahead_of_the_copies_waits_for_them() {
    // Local copies by one device and a single SCAN_b thread: the copies lag the scans.
    let r = query(&with(&small("prefetch", 16), &["copy_policy=local"]));
    let q = &r["query"];
    assert!(q["in_flight_blocks"].as_u64().unwrap() > 0, "{q}");
    // One block's copy was still under way; AGGREGATE waited 11.51 µs for it (as simulated: its
    // ENQCMD, the engine, 1 MiB through node 0's channels shared with SCAN_a, the 0.318 µs ramp
    // of its reads before the record, and the poller's read of the record from the LLC).
    assert_eq!((q["ready_blocks"].as_u64(), q["in_flight_blocks"].as_u64()), (Some(15), Some(1)), "{q}");
    assert!((f(&q["copy_wait_us"]) - 11.505446).abs() < 1e-6, "{q}");
    assert!(f(&q["hit_rate"]) < 1.0);
}

#[test]
fn memory_pressure_flushes_used_entries_and_the_query_still_reads_every_block() {
    let r = query(&with(&small("prefetch", 16), &["workloads.0.capacity_bytes=4194304"]));
    let q = &r["query"];
    // SCAN_b runs ahead and fills the four blocks of room; AGGREGATE's first four accesses find
    // their copies, the other twelve find no room (their entries are held or in flight) and read DDR.
    let counts: Vec<_> =
        ["ready_blocks", "missed_blocks", "cache_misses", "cache_uncached", "cache_evicted"].map(|k| &q[k]).into();
    assert_eq!(counts, [4, 12, 28, 12, 12], "{q}");
    assert!(q["total_us"].is_number(), "the query finished: {q}");
    let blocks: u64 = r["cores"]
        .as_object()
        .unwrap()
        .values()
        .filter(|c| c["role"] == "aggregate")
        .map(|c| c["workload"]["blocks"].as_u64().unwrap())
        .sum();
    assert_eq!(blocks, 16);
}

#[test]
fn a_full_shared_queue_makes_the_prefetcher_retry_then_wait_for_room() {
    // 256 blocks of 64 KiB to one device whose queue holds 128, inserted at no cost: SCAN_b's
    // ENQCMD is refused once each time the queue fills, then it sleeps until an entry frees.
    let r = query(&[
        "column_bytes=16777216",
        "block_bytes=65536",
        "groups=1",
        "copy_policy=local",
        "workloads.0.miss_ns=0",
    ]);
    let wq = &r["devices"]["dsa0"]["wq"];
    let retries = wq["retries"].as_u64().unwrap();
    assert!(retries > 0 && retries < 256, "{wq}");
    assert_eq!(wq["accepted"], 256);
}

#[test]
fn an_access_that_finds_no_room_counts_as_a_miss() {
    // Room for one block and two AGGREGATE threads: while one holds its block, the other's
    // access finds the room taken and reads DDR; that access found no copy.
    let mut args = small("prefetch", 4);
    args.extend(["aggregate_threads=2".into(), "workloads.0.capacity_bytes=1048576".into()]);
    let q = &query(&with(&args, &[]))["query"];
    let counts: Vec<_> = ["ready_blocks", "missed_blocks", "cache_uncached"].map(|k| &q[k]).into();
    assert_eq!(counts, [1, 3, 5], "{q}");
}

#[test]
fn blocks_are_dealt_round_robin_to_groups_and_threads() {
    let r = query(&["column_bytes=41943040", "block_bytes=1048576", "groups=2", "aggregate_threads=2"]);
    let blocks = |role: &str| -> Vec<u64> {
        let mut cores: Vec<_> = r["cores"].as_object().unwrap().iter().filter(|(_, c)| c["role"] == role).collect();
        cores.sort_by_key(|(cpu, _)| cpu.parse::<u32>().unwrap());
        cores.iter().map(|(_, c)| c["workload"]["blocks"].as_u64().unwrap()).collect()
    };
    assert_eq!(blocks("scan_a"), [20, 20]);
    assert_eq!(blocks("scan_b"), [20, 20]);
    assert_eq!(blocks("aggregate"), [10, 10, 10, 10]);
}

#[test]
fn the_threads_take_their_nodes_cpus_and_two_queries_may_not_share_them() {
    let r = query(&["node=1", "groups=2"]);
    let mut cpus: Vec<u32> = r["cores"].as_object().unwrap().keys().map(|c| c.parse().unwrap()).collect();
    cpus.sort();
    assert_eq!(cpus, (12..18).collect::<Vec<_>>());
    let text = steer_sim::scenario::builtin("qdp").unwrap().source;
    let second = |node: u32| format!("{text}\n[[workloads]]\nkind = \"qdp\"\ncolumn_b = \"ddr\"\nnode = {node}\n");
    let load_two = |node| load(&ScenarioSource { text: &second(node), origin: "qdp", default_name: "qdp" }, &[]);
    let message = load_two(0).expect_err("two queries on node 0").to_string();
    assert!(message.contains("workloads.1.cpu") && message.contains("CPU 0 already runs workloads.0"), "{message}");
    assert!(load_two(1).is_ok());
}

#[test]
fn results_are_deterministic() {
    let args = small("prefetch", 32);
    let one = |_| {
        let mut v = query(&with(&args, &[]));
        v["sim"].as_object_mut().unwrap().remove("host_seconds");
        v
    };
    assert_eq!(one(0), one(1));
}

#[test]
fn impossible_queries_are_refused_naming_the_key() {
    for (args, key, words) in [
        (vec!["groups=9"], "workloads.0.groups", "27 threads: more than the 24 CPUs"),
        // Counted without wrapping round to a small number (4 groups of 2^32 + 1).
        (vec!["workloads.0.scan_a_threads=4294967295"], "workloads.0.groups", "17179869188 threads: more than"),
        (vec!["node=8"], "workloads.0.node", "does not exist"),
        (vec!["block_bytes=0"], "workloads.0.block_bytes", "1 byte to 1 GiB"),
        (vec!["column_bytes=2097152", "block_bytes=1"], "workloads.0.block_bytes", "raise block_bytes"),
        (vec!["placement=far"], "workloads.0.placement", "unknown cache placement"),
        (vec!["copy_policy=fast"], "workloads.0.copy_policy", "unknown copy policy"),
        (vec!["workloads.0.hit_ns=-1"], "workloads.0.hit_ns", "must be a finite time"),
        (vec!["workloads.0.capacity_bytes=1024"], "workloads.0.capacity_bytes", "smaller than one block"),
    ] {
        let message = error(&args);
        assert!(message.contains(key) && message.contains(words), "{args:?}: {message}");
    }
}

#[test]
fn the_cache_needs_shared_work_queues_and_a_dsa() {
    let text = steer_sim::scenario::builtin("qdp").unwrap().source;
    let dedicated = text.replace("kind = \"dsa\"\n", "kind = \"dsa\"\nwq = \"dedicated\"\n");
    let none = text.replace("[[devices]]\nkind = \"dsa\"\n", "");
    for (text, words) in [(dedicated, "must be `shared`"), (none, "no copy engine device named `dsa`")] {
        let scenario = load(&ScenarioSource { text: &text, origin: "qdp", default_name: "qdp" }, &[]);
        let message = match scenario {
            Err(e) => e.to_string(),
            Ok(s) => steer_sim::Simulation::new(s).err().expect("an error").to_string(),
        };
        assert!(message.contains("workloads.0.device") && message.contains(words), "{message}");
    }
    // Without prefetching no device is needed.
    let ddr = text.replace("[[devices]]\nkind = \"dsa\"\n", "");
    let scenario = load(&ScenarioSource { text: &ddr, origin: "qdp", default_name: "qdp" }, &["column_b=ddr".into()]);
    assert!(scenario.is_ok());
}

#[test]
fn the_query_moves_each_column_through_memory_where_the_model_says() {
    // 8 blocks of 1 MiB. Prefetching: a scanned and b copied out of node 0's DDR, b written to and
    // read from node 8 (its HBM). From DDR: both columns read there. Already in HBM: a from DDR,
    // b from HBM.
    let column = 8.0 * 1048576.0;
    for (column_b, ddr, hbm) in
        [("prefetch", (2.0, 0.0), (1.0, 1.0)), ("ddr", (2.0, 0.0), (0.0, 0.0)), ("hbm", (1.0, 0.0), (1.0, 0.0))]
    {
        let r = query(&with(&small(column_b, 8), &[]));
        let (node0, node8) = (node_bytes(&r, 0), node_bytes(&r, 8));
        let expected = |(read, write): (f64, f64)| (read * column, write * column);
        let same = |a: (f64, f64), b: (f64, f64)| (a.0 - b.0).abs() < 1e-3 && (a.1 - b.1).abs() < 1e-3;
        assert!(same(node0, expected(ddr)) && same(node8, expected(hbm)), "{column_b}: {node0:?} {node8:?}");
        let window = f(&r["sim"]["measured_ns"]);
        let total = f(&r["dram"]["total_gbps"]) * window;
        assert!((total - (ddr.0 + ddr.1 + hbm.0 + hbm.1) * column).abs() < 1e-3, "{column_b}: nothing elsewhere");
    }
}

#[test]
fn the_measured_window_is_the_querys_time_and_a_finished_query_leaves_nothing_stalled() {
    let r = query(&with(&small("prefetch", 8), &[]));
    assert!((f(&r["sim"]["measured_ns"]) - f(&r["query"]["total_us"]) * 1e3).abs() < 1e-6, "{}", r["sim"]);
    assert_eq!((&r["sim"]["stalled_at_ns"], &r["sim"]["stalls"]), (&Value::Null, &Value::Array(Vec::new())));
}

#[test]
fn a_scanning_core_is_busy_for_as_long_as_its_block_streams_in() {
    // SCAN_a streams its one 1 MiB block in 112640 ns (above): 236544 cycles at 2.1 GHz.
    let r = query(&with(&small("hbm", 1), &[]));
    let scan_a = &r["cores"]["0"]["workload"];
    assert_eq!(r["cores"]["0"]["role"], "scan_a");
    assert!((f(&scan_a["exec_ns_per_block"]) - 112640.0).abs() < 1e-6, "{scan_a}");
    assert!((f(&scan_a["cycles_per_block"]) - 236544.0).abs() < 1e-3, "{scan_a}");
    // It finished before AGGREGATE: busy 112.64 of the query's 245.76 us.
    assert!((f(&scan_a["busy"]) - 112.64 / 245.76).abs() < 1e-9, "{scan_a}");
}
