//! The DSA copy model on the `dsa-copy` scenario: hand-worked times of single and batched
//! descriptors, where throughput is limited, byte conservation, and bad input.

mod common;

use common::{f, node_bytes};
use serde_json::Value;
use steer_sim::{load, run, ScenarioSource};

fn copy(overrides: &[&str]) -> Value {
    let source = steer_sim::scenario::builtin("dsa-copy").unwrap().source;
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let scenario =
        load(&ScenarioSource { text: source, origin: "dsa-copy", default_name: "dsa-copy" }, &overrides).unwrap();
    run(scenario, &mut |_| true).unwrap().value
}

fn error(overrides: &[&str]) -> String {
    let source = steer_sim::scenario::builtin("dsa-copy").unwrap().source;
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let scenario = load(&ScenarioSource { text: source, origin: "dsa-copy", default_name: "dsa-copy" }, &overrides);
    match scenario {
        Err(e) => e.to_string(),
        Ok(s) => steer_sim::Simulation::new(s).err().expect("an error").to_string(),
    }
}

/// The engine's time for one task before its data moves (the preset's calibrated `descriptor_ns`).
const DESCRIPTOR_NS: f64 = 47.0;
/// The poller's read of a completion record from the LLC (70 cycles at 2.1 GHz).
const RECORD_READ_NS: f64 = 70.0 / 2.1;
/// Descriptor fetch and the completion record's write (the preset's `latency_ns`), then the
/// poller's read of the record.
const LATENCY_NS: f64 = 518.0 + RECORD_READ_NS;

/// Bandwidth of the device's port onto the fabric (the preset's calibrated `fabric_gbs`).
const PORT_GBS: f64 = 31.35;

/// 64 B at the port: 2.0415 ns, rounded up to the picosecond by the flow.
const TRANSFER_64B_NS: f64 = 2.042;

/// What the ramp of its reads adds to a task of 4 KiB or more from DDR (110 ns): 54 lines in
/// flight cover 31.35 GB/s over 110 ns; 4 + 8 + 16 + 32 lines take four round trips, against the
/// 60 lines' time at the port's rate.
const RAMP_DDR_NS: f64 = 4.0 * 110.0 - 60.0 * 64.0 / PORT_GBS;
/// The same from the LLC (70 cycles / 2.1 GHz): 16.3 lines cover the port; 4 + 8 + 16 lines
/// take three round trips.
const RAMP_LLC_NS: f64 = 3.0 * 70.0 / 2.1 - 28.0 * 64.0 / PORT_GBS;

#[test]
fn one_synchronous_64_byte_copy_takes_the_calibrated_0_75_us() {
    let r = copy(&["transfer_bytes=64", "total_bytes=64"]);
    // ENQCMD 150 + the engine's descriptor time + transfer + completion latency.
    let expected = 150.0 + DESCRIPTOR_NS + TRANSFER_64B_NS + LATENCY_NS;
    assert!((f(&r["copy"]["latency_us"]) * 1e3 - expected).abs() < 0.01, "{}", r["copy"]);
    assert!((f(&r["copy"]["seconds"]) * 1e9 - expected).abs() < 0.01);
    assert_eq!(r["copy"]["operations"], 1);
    // The core spends the ENQCMD submitting, polls until the record is written, then reads it.
    assert!((f(&r["copy"]["submit_us"]) - 0.15).abs() < 1e-9);
    assert!((f(&r["copy"]["poll_us"]) * 1e3 - (expected - 150.0 - RECORD_READ_NS)).abs() < 0.01, "{}", r["copy"]);
    assert_eq!((f(&r["copy"]["cpu_copy_us"]), &r["cores"]["0"]["role"]), (0.0, &Value::from("dsa_copy")));
    // Two in turn: each waits the same, the second from its own start.
    let two = copy(&["transfer_bytes=64", "total_bytes=128"]);
    assert!((f(&two["copy"]["latency_us"]) * 1e3 - expected).abs() < 0.01, "{}", two["copy"]);
    assert!((f(&two["copy"]["seconds"]) * 1e9 - 2.0 * expected).abs() < 0.01);
}

#[test]
fn a_thread_reads_each_completion_record_before_it_submits_again() {
    // Four 64 B copies, two in flight, one engine. Each record is written 47 + 2.042 + 518 ns
    // after its ENQCMD ends; the thread reads it (33.3 ns) and only then submits the next.
    let r = copy(&["engines=1", "queue_depth=2", "transfer_bytes=64", "total_bytes=256"]);
    let written = DESCRIPTOR_NS + TRANSFER_64B_NS + LATENCY_NS - RECORD_READ_NS;
    let first_seen = 150.0 + written + RECORD_READ_NS;
    // The second waits for the first's front end no longer (it ended at 197 ns): written at
    // 300 + `written`, read once the third's ENQCMD ends.
    let third_submitted = first_seen + 150.0;
    let second_seen = third_submitted + RECORD_READ_NS;
    let fourth_submitted = second_seen + 150.0;
    let end = fourth_submitted + written + RECORD_READ_NS;
    assert!((f(&r["copy"]["seconds"]) * 1e9 - end).abs() < 0.01, "{}", r["copy"]);
    // Latency from the start of each ENQCMD: the second's includes the wait for the third's.
    let mean = (3.0 * first_seen + second_seen - 150.0) / 4.0;
    assert!((f(&r["copy"]["latency_us"]) * 1e3 - mean).abs() < 0.01, "{}", r["copy"]);
}

#[test]
fn a_synchronous_copy_waits_for_the_ramp_of_its_reads() {
    // 256 B fit in the first reads: the fixed times and the bytes at the port's rate only.
    let small = copy(&["transfer_bytes=256", "total_bytes=256"]);
    let expected = 150.0 + DESCRIPTOR_NS + 256.0 / PORT_GBS + LATENCY_NS;
    assert!((f(&small["copy"]["seconds"]) * 1e9 - expected).abs() < 0.01, "{}", small["copy"]);
    // 2 KiB, 32 lines: 4, 8, 16, then the last 4 in a fourth round trip of 110 ns, against 110 ns
    // and the bytes at the port's rate.
    let r = copy(&["transfer_bytes=2048", "total_bytes=2048"]);
    let ramp = 4.0 * 110.0 - (110.0 + 2048.0 / PORT_GBS);
    let expected = 150.0 + DESCRIPTOR_NS + 2048.0 / PORT_GBS + LATENCY_NS + ramp;
    assert!((f(&r["copy"]["seconds"]) * 1e9 - expected).abs() < 0.01, "{}", r["copy"]);
    // The ramp holds no engine: a batch of two on two engines pays it once, after its last
    // task. The front end hands the second on 47 ns after the first, and the port carries
    // both: they end when it has moved 4 KiB from the first one's start.
    let two = copy(&["transfer_bytes=2048", "total_bytes=4096", "batch=2"]);
    let expected = 150.0 + array_fetch_ns(2.0) + DESCRIPTOR_NS + 4096.0 / PORT_GBS + LATENCY_NS + ramp;
    assert!((f(&two["copy"]["seconds"]) * 1e9 - expected).abs() < 0.01, "{}", two["copy"]);
}

/// The front end's read of a batch's array of `tasks` descriptors: the LLC's 70 cycles at 2.1
/// GHz, then 64 B a descriptor over the 31.35 GB/s port.
fn array_fetch_ns(tasks: f64) -> f64 {
    70.0 / 2.1 + tasks * 64.0 / PORT_GBS
}

#[test]
fn a_batch_costs_one_submission_its_array_and_the_front_ends_time_for_each_descriptor() {
    let r = copy(&["transfer_bytes=64", "total_bytes=2048", "batch=32"]);
    // The front end processes the 32 in turn; the engines move each 64 B meanwhile, the last
    // after the 32nd.
    let expected = 150.0 + array_fetch_ns(32.0) + 32.0 * DESCRIPTOR_NS + TRANSFER_64B_NS + LATENCY_NS;
    assert!((f(&r["copy"]["seconds"]) * 1e9 - expected).abs() < 0.01, "{}", r["copy"]);
    assert_eq!((r["copy"]["descriptors"].as_u64(), r["copy"]["operations"].as_u64()), (Some(32), Some(1)));
    assert_eq!(r["devices"]["dsa0"]["wq"]["accepted"], 1);
    assert!((f(&r["copy"]["per_descriptor_us"]) * 1e3 - expected / 32.0).abs() < 0.01);
    assert_eq!(
        (&r["devices"]["dsa0"]["descriptors"], &r["devices"]["dsa0"]["submissions"]),
        (&Value::from(32), &Value::from(1))
    );
}

#[test]
fn one_engine_moves_a_task_while_the_front_end_processes_the_next() {
    // 2 KiB tasks take 65.3 ns at the port: the engine, not the front end's 47 ns, paces a
    // batch of four; the ramp of the last task's reads (2 KiB from DDR: four round trips of
    // 110 ns against 110 ns and the bytes) comes before its record.
    let r = copy(&["engines=1", "transfer_bytes=2048", "total_bytes=8192", "batch=4"]);
    let transfer = 2048.0 / PORT_GBS;
    let ramp = 4.0 * 110.0 - (110.0 + transfer);
    let expected = 150.0 + array_fetch_ns(4.0) + DESCRIPTOR_NS + 4.0 * transfer + LATENCY_NS + ramp;
    assert!((f(&r["copy"]["seconds"]) * 1e9 - expected).abs() < 0.01, "{}", r["copy"]);
}

#[test]
fn a_batchs_tasks_spread_over_the_engines_and_the_front_end_paces_small_ones() {
    // 1 KiB tasks (32.6 ns at the port) on four engines: one task per 47 ns of the front end,
    // each moved by whichever engine is idle; the last ends 47 ns x 8 after the array is read.
    let one = copy(&["engines=1", "transfer_bytes=1024", "total_bytes=8192", "batch=8"]);
    let four = copy(&["engines=4", "transfer_bytes=1024", "total_bytes=8192", "batch=8"]);
    // 1 KiB from DDR: 4 + 8 lines in two round trips, the last 4 in a third.
    let ramp = 3.0 * 110.0 - (110.0 + 1024.0 / PORT_GBS);
    let expected = 150.0 + array_fetch_ns(8.0) + 8.0 * DESCRIPTOR_NS + 1024.0 / PORT_GBS + LATENCY_NS + ramp;
    for r in [&one, &four] {
        assert!((f(&r["copy"]["seconds"]) * 1e9 - expected).abs() < 0.01, "{}", r["copy"]);
    }
    let tasks = |r: &Value| r["devices"]["dsa0"]["descriptors"].as_u64().unwrap();
    assert_eq!((tasks(&one), tasks(&four)), (8, 8));
    // Four engines share the work: each busy a quarter as long as the one.
    let busy = |r: &Value| f(&r["devices"]["dsa0"]["engine_busy_ns"]);
    assert!((busy(&one) - 8.0 * 1024.0 / PORT_GBS).abs() < 0.01, "{}", busy(&one));
    assert!((busy(&four) - busy(&one)).abs() < 0.01);
    assert!(
        (f(&four["devices"]["dsa0"]["busy_fraction"]) * 4.0 - f(&one["devices"]["dsa0"]["busy_fraction"])).abs() < 1e-9
    );
}

#[test]
fn in_flight_submissions_overlap_the_fixed_latency() {
    let sync = copy(&["transfer_bytes=4096", "total_bytes=1048576"]);
    let deep = copy(&["transfer_bytes=4096", "total_bytes=1048576", "queue_depth=16"]);
    // Synchronous: every 4 KiB pays 0.75 us; 16 in flight keep the one engine busy instead.
    assert!(f(&deep["copy"]["gibps"]) > 3.0 * f(&sync["copy"]["gibps"]));
}

#[test]
fn one_engine_reaches_the_device_ceiling_when_memory_is_not_the_limit() {
    // Node 0's DDR to its HBM: the DDR node (58.8 GB/s) is not the limit; the device port is.
    let one = copy(&["engines=1", "queue_depth=4", "total_bytes=268435456"]);
    let four = copy(&["engines=4", "queue_depth=4", "total_bytes=268435456"]);
    let ceiling_gibps = PORT_GBS / 1.073741824;
    for r in [&one, &four] {
        let gibps = f(&r["copy"]["gibps"]);
        assert!(gibps > 0.97 * ceiling_gibps && gibps <= ceiling_gibps, "{gibps}");
    }
}

#[test]
fn a_copy_within_one_ddr_node_shares_its_bandwidth_between_reads_and_writes() {
    // 2 channels x 29.4 GB/s = 58.8 GB/s for reads and writes: at most 29.4 GB/s of copy.
    let r = copy(&["dst_node=0", "queue_depth=4", "total_bytes=268435456"]);
    let gbs = f(&r["copy"]["gibps"]) * 1.073741824;
    assert!(gbs <= 29.4 && gbs > 0.97 * 29.4, "{gbs}");
}

#[test]
fn a_reused_source_that_fits_is_read_from_the_llc_and_leaves_the_memory_the_writes() {
    // One 1 MiB descriptor within node 0. From memory, the node's 58.8 GB/s carries the reads and
    // the writes (29.4 GB/s of copy); from the LLC, the writes alone, and the device's 31.35 GB/s
    // port is the limit (its read buffers hold 6144 B over 70 cycles / 2.1 GHz: 184 GB/s).
    let one = ["dst_node=0", "transfer_bytes=1048576", "total_bytes=1048576"];
    let seconds = |more: &[&str]| {
        let r = copy(&[&one[..], more].concat());
        (f(&r["copy"]["seconds"]) * 1e9, r["copy"]["source_in_llc"].as_bool().unwrap())
    };
    let fixed = 150.0 + DESCRIPTOR_NS + LATENCY_NS;
    let (ns, in_llc) = seconds(&[]);
    assert!(!in_llc && (ns - (fixed + 1048576.0 / 29.4 + RAMP_DDR_NS)).abs() < 0.05, "{ns}");
    let (ns, in_llc) = seconds(&["buffer_bytes=1048576"]);
    assert!(in_llc && (ns - (fixed + 1048576.0 / PORT_GBS + RAMP_LLC_NS)).abs() < 0.05, "{ns}");
    // The CPU's copy (rep movsb): 16 misses in flight over an LLC hit (33.3 ns) and the
    // destination line's claim at its home agent (33.3 ns), instead of a DDR round trip.
    let cpu = copy(&[&one[..], &["path=\"software\"", "buffer_bytes=1048576"]].concat());
    let gbs = f(&cpu["copy"]["gibps"]) * 1.073741824;
    let expected = 16.0 * 64.0 / (2.0 * 70.0 / 2.1);
    assert!((gbs - expected).abs() < 0.01 * expected, "{gbs} vs {expected}");
}

#[test]
fn a_reused_source_stays_in_the_llc_only_if_every_buffer_the_threads_wrote_fits_there() {
    // Node 0's LLC: 26880 KiB. Twelve threads' sources and destinations within node 0 (or its
    // HBM, node 8, cached by the same LLC) fit at 1120 KiB each; towards node 1 only the
    // sources count, which fit at twice that.
    let in_llc = |dst: u32, kib: u64| {
        let (dst, buffer) = (format!("dst_node={dst}"), format!("buffer_bytes={}", kib * 1024));
        let r = copy(&["threads=12", "transfer_bytes=65536", "total_bytes=3145728", &dst, &buffer]);
        r["copy"]["source_in_llc"].as_bool().unwrap()
    };
    assert_eq!([in_llc(0, 1120), in_llc(0, 1121), in_llc(8, 1120), in_llc(8, 1121)], [true, false, true, false]);
    assert_eq!([in_llc(1, 2240), in_llc(1, 2241)], [true, false]);
    // 24 buffers of the largest size do not wrap round to fit; a larger one is refused.
    assert!(!in_llc(0, 1 << 30));
    assert!(error(&["buffer_bytes=1099511627777"]).ends_with("must be 0 B to 1 TiB (got 1099511627777)"));
    assert!(!copy(&["total_bytes=65536", "transfer_bytes=65536"])["copy"]["source_in_llc"].as_bool().unwrap());
}

#[test]
fn every_byte_is_copied_once_by_the_devices_or_the_cpu() {
    for faults in ["none", "block_on_fault", "partial"] {
        let fault = format!("faults=\"{faults}\"");
        let r = copy(&[&fault, "copy_policy=\"smart\"", "total_bytes=10000000", "transfer_bytes=65536", "batch=4"]);
        let devices: u64 =
            ["dsa0", "dsa1", "dsa2", "dsa3"].iter().map(|d| r["devices"][d]["bytes"].as_u64().unwrap()).sum();
        let software = r["copy"]["software_bytes"].as_u64().unwrap();
        assert_eq!(devices + software, 10_000_000, "{faults}");
        assert_eq!(r["copy"]["bytes"], 10_000_000, "{faults}");
        assert_eq!(software > 0, faults == "partial");
        let partial: u64 =
            ["dsa0", "dsa1", "dsa2", "dsa3"].iter().map(|d| r["devices"][d]["partial_bytes"].as_u64().unwrap()).sum();
        assert_eq!(partial, software, "{faults}");
    }
}

#[test]
fn block_on_fault_waits_for_every_destination_page() {
    let r = copy(&["faults=\"block_on_fault\"", "total_bytes=1048576"]);
    assert_eq!(r["devices"]["dsa0"]["page_faults"], 256);
    // ENQCMD, the descriptor's time + 256 faults of 14.5 us (two translations of 1 us, a page request of 1 us,
    // two wake-ups of 5 us, the page's 0.5 us, a page response of 1 us), 1 MiB at the device's
    // PORT_GBS GB/s, the record's latency after the ramp of the reads.
    let expected = 150.0 + DESCRIPTOR_NS + 256.0 * 14_500.0 + 1048576.0 / PORT_GBS + LATENCY_NS + RAMP_DDR_NS;
    assert!((f(&r["copy"]["seconds"]) * 1e9 - expected).abs() < 0.01, "{}", r["copy"]);
}

#[test]
fn a_page_faults_once_for_the_first_descriptor_that_writes_it() {
    // 64 descriptors of 256 B fill 4 pages; a reused 8 KiB destination faults in its first pass.
    let r = copy(&["faults=\"block_on_fault\"", "transfer_bytes=256", "total_bytes=16384"]);
    assert_eq!(r["devices"]["dsa0"]["page_faults"], 4);
    let reused = ["faults=\"block_on_fault\"", "transfer_bytes=4096", "total_bytes=65536", "buffer_bytes=8192"];
    assert_eq!(copy(&reused)["devices"]["dsa0"]["page_faults"], 2);
}

#[test]
fn a_partial_completion_comes_only_at_a_page_no_descriptor_wrote_before() {
    // 64 descriptors of 256 B over 4 pages: the first of each page completes partially and the
    // CPU copies its 256 B; the other 15 find their page mapped and the device copies them.
    let r = copy(&["faults=\"partial\"", "transfer_bytes=256", "total_bytes=16384"]);
    assert_eq!(r["copy"]["software_bytes"], 4 * 256);
    assert_eq!(r["devices"]["dsa0"]["bytes"], 60 * 256);
}

#[test]
fn a_full_shared_queue_answers_retry() {
    let r = copy(&["threads=4", "queue_depth=4", "transfer_bytes=4096", "total_bytes=1048576", "devices.0.wq_size=8"]);
    let wq = &r["devices"]["dsa0"]["wq"];
    assert!(wq["retries"].as_u64().unwrap() > 0, "{wq}");
    // Every attempt, refused or not, cost its thread an ENQCMD.
    let attempts = (wq["retries"].as_u64().unwrap() + wq["accepted"].as_u64().unwrap()) as f64;
    assert!((f(&r["copy"]["submit_us"]) - attempts * 0.15).abs() < 1e-6, "{}", r["copy"]);
    assert_eq!(r["copy"]["bytes"], 1048576);
}

#[test]
fn the_software_path_is_limited_by_the_misses_a_core_keeps_in_flight() {
    let r = copy(&["path=\"software\"", "total_bytes=104857600"]);
    // 1 MiB pieces by rep movsb: 16 misses x 64 B over a 110 ns DDR read and the HBM line's
    // claim at its home agent (70 cycles / 2.1 GHz) per line copied.
    let expected = 16.0 * 64.0 / (110.0 + 70.0 / 2.1);
    let gbs = f(&r["copy"]["gibps"]) * 1.073741824;
    assert!((gbs - expected).abs() < 0.01 * expected, "{gbs} vs {expected}");
    assert_eq!(r["devices"]["dsa0"]["bytes"], 0);
    assert_eq!(r["copy"]["descriptors"], 100);
    // Nothing was submitted: no submission latency.
    assert_eq!((&r["copy"]["latency_us"], &r["copy"]["operations"]), (&Value::Null, &Value::from(0)));
}

#[test]
fn results_are_deterministic() {
    let args = ["copy_policy=\"brute\"", "dst_node=15", "total_bytes=67108864", "threads=2", "queue_depth=2"];
    let (a, b) = (copy(&args), copy(&args));
    assert_eq!((&a["copy"], &a["devices"]), (&b["copy"], &b["devices"]));
}

#[test]
fn impossible_copies_are_refused_naming_the_key() {
    let cases = [
        (vec!["batch=2000"], "workloads.0.batch"),
        (vec!["transfer_bytes=4294967296"], "workloads.0.transfer_bytes"),
        (vec!["engines=5"], "devices.0.engines"),
        (vec!["dst_node=16"], "workloads.0.dst_node"),
        (vec!["copy_policy=[0, 9]"], "workloads.0.copy_policy"),
        (vec!["copy_policy=\"nearest\""], "workloads.0.copy_policy"),
        (vec!["wq=\"dedicated\"", "threads=2"], "workloads.0.threads"),
        (vec!["wq=\"dedicated\"", "queue_depth=200"], "workloads.0.queue_depth"),
        (vec!["transfer_bytes=1", "total_bytes=1073741824"], "workloads.0.total_bytes"),
        (vec!["threads=25"], "workloads.0.threads"),
        (vec!["transfer_bytes=65536", "buffer_bytes=65535"], "workloads.0.buffer_bytes"),
    ];
    for (overrides, key) in cases {
        let message = error(&overrides);
        assert!(message.contains(key), "{overrides:?}: {message}");
    }
}

#[test]
fn busy_fraction_is_engine_time_over_the_time_to_the_last_completion() {
    let r = copy(&["engines=1", "transfer_bytes=64", "total_bytes=64"]);
    // The engine takes the descriptor after the 150 ns ENQCMD and the front end's 47 ns, and
    // holds it 2.042 ns.
    let expected = TRANSFER_64B_NS / (150.0 + DESCRIPTOR_NS + TRANSFER_64B_NS);
    assert!((f(&r["devices"]["dsa0"]["busy_fraction"]) - expected).abs() < 1e-4, "{}", r["devices"]["dsa0"]);
    assert_eq!(f(&r["devices"]["dsa1"]["busy_fraction"]), 0.0);
    // A run cut short while an engine works: one of two engines busy but for 0.75 us per 34.1 us.
    let cut = copy(&["engines=2", "sim.measure_us=1000"]);
    let busy = f(&cut["devices"]["dsa0"]["busy_fraction"]);
    let expected =
        0.5 * (1048576.0 / PORT_GBS) / (150.0 + DESCRIPTOR_NS + 1048576.0 / PORT_GBS + LATENCY_NS + RAMP_DDR_NS);
    assert!((busy - expected).abs() < 0.005, "{busy} vs {expected}");
    // Cut 10 us into the first 1 MiB transfer, before any completion: busy since 197 ns.
    let first = copy(&["engines=1", "transfer_bytes=1048576", "total_bytes=1048576", "sim.measure_us=10"]);
    let busy = f(&first["devices"]["dsa0"]["busy_fraction"]);
    assert!((busy - (10_000.0 - 150.0 - DESCRIPTOR_NS) / 10_000.0).abs() < 1e-6, "{busy}");
    // After a 5 us warm-up the same transfer fills the 5 us window: busy throughout it.
    let warm =
        copy(&["engines=1", "transfer_bytes=1048576", "total_bytes=1048576", "sim.warmup_us=5", "sim.measure_us=5"]);
    assert_eq!(f(&warm["devices"]["dsa0"]["busy_fraction"]), 1.0);
}

#[test]
fn cache_control_writes_stay_in_the_llc_ways_they_may_use() {
    let r = copy(&["cache_control=true", "total_bytes=67108864"]);
    let dsa = &r["devices"]["dsa0"];
    assert_eq!(dsa["cache_control_bytes"], 67108864);
    // 2 of the 15 ways of a 26880 KiB L3.
    assert_eq!(dsa["llc_resident_bytes"], 26880 * 1024 * 2 / 15);
    let small = copy(&["cache_control=true", "total_bytes=65536", "transfer_bytes=65536"]);
    assert_eq!(small["devices"]["dsa0"]["llc_resident_bytes"], 65536);
    assert_eq!(copy(&["total_bytes=65536"])["devices"]["dsa0"]["cache_control_bytes"], 0);
}

#[test]
fn a_cpu_copy_below_the_rep_movsb_threshold_reads_each_destination_line_for_ownership() {
    // 2048 B pieces: vector stores, each destination line read from node 8's HBM (130 ns).
    let r = copy(&["path=\"software\"", "transfer_bytes=2048", "total_bytes=2048000"]);
    let gbs = f(&r["copy"]["gibps"]) * 1.073741824;
    let expected = 16.0 * 64.0 / (110.0 + 130.0);
    assert!((gbs - expected).abs() < 0.01 * expected, "{gbs} vs {expected}");
}

#[test]
fn a_cross_socket_cpu_copy_pays_the_socket_link_latency_on_the_destination() {
    // Node 0 (DDR, 110 ns) to node 15 (HBM of socket 1: its line claimed at its home agent,
    // 70 cycles / 2.1 GHz + 70 ns): 16 x 64 B per line's round trips.
    let r = copy(&["path=\"software\"", "dst_node=15", "total_bytes=104857600"]);
    let gbs = f(&r["copy"]["gibps"]) * 1.073741824;
    let expected = 16.0 * 64.0 / (110.0 + 70.0 / 2.1 + 70.0);
    assert!((gbs - expected).abs() < 0.01 * expected, "{gbs} vs {expected}");
}

#[test]
fn each_device_of_a_policy_copies_its_even_share() {
    let r = copy(&["copy_policy=\"smart\"", "dst_node=11", "total_bytes=4194304"]);
    for device in ["dsa0", "dsa1", "dsa2", "dsa3"] {
        assert_eq!(r["devices"][device]["bytes"], 1048576, "{device}");
    }
    assert_eq!(r["devices"]["dsa4"]["bytes"], 0);
}

#[test]
fn two_dsa_entries_need_two_names_and_jobs_pick_theirs() {
    let source = steer_sim::scenario::builtin("dsa-copy").unwrap().source;
    let second = "\n[[devices]]\nkind = \"dsa\"\nname = \"spare\"\n";
    let text = format!("{source}{second}");
    let load_with = |extra: &[&str]| {
        let overrides: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        load(&ScenarioSource { text: &text, origin: "s.toml", default_name: "s" }, &overrides)
    };
    let scenario = load_with(&["workloads.0.device=\"spare\"", "total_bytes=65536"]).unwrap();
    let r = run(scenario, &mut |_| true).unwrap().value;
    assert_eq!(
        (&r["devices"]["spare0"]["bytes"], &r["devices"]["dsa0"]["bytes"]),
        (&Value::from(65536), &Value::from(0))
    );
    let same = load_with(&["devices.1.name=\"dsa\""]).map(|s| steer_sim::Simulation::new(s).err().unwrap().to_string());
    let message = match same {
        Ok(message) => message,
        Err(e) => e.to_string(),
    };
    assert!(message.contains("devices.1.name"), "{message}");
}

#[test]
fn a_dsa_offers_no_rx_queue_to_a_receive_loop() {
    let source = steer_sim::scenario::builtin("dsa-copy").unwrap().source;
    let text = format!("{source}\n[[workloads]]\nkind = \"rx_loop\"\ncpu = 50\ndevice = \"dsa\"\n");
    let scenario = load(&ScenarioSource { text: &text, origin: "s.toml", default_name: "s" }, &[]);
    let message = match scenario {
        Err(e) => e.to_string(),
        Ok(s) => steer_sim::Simulation::new(s).err().unwrap().to_string(),
    };
    assert!(message.contains("has no RX queues"), "{message}");
}

#[test]
fn device_counters_start_at_the_warm_up_while_the_job_counts_from_its_start() {
    // 1 MiB descriptors one at a time, every 34.195 us: three start their transfer before 100 us.
    let r = copy(&["total_bytes=16777216", "sim.warmup_us=100", "sim.measure_us=10000"]);
    assert_eq!(r["devices"]["dsa0"]["bytes"], 13 << 20);
    assert_eq!(r["copy"]["bytes"], 16 << 20);
    // The seven devices nobody gave work to waited, as devices do: no stall.
    assert_eq!(r["sim"]["stalls"], Value::Array(Vec::new()));
}

#[test]
fn the_copy_policy_is_documented_as_a_name_or_a_list_of_nodes() {
    use steer_sim::params::Describe;
    use steer_sim::workloads::dsa_copy::CopyChoice;
    let listed = steer_sim::catalog::catalog();
    let job = listed.iter().find(|e| e.name == "dsa_copy").unwrap();
    let policy = job.params.iter().find(|p| p.key == "copy_policy").unwrap();
    assert_eq!(policy.value, "\"local\"");
    assert!(policy.meaning.contains("One of: brute, local, smart."), "{}", policy.meaning);
    let nodes = CopyChoice::Nodes(vec![0, 4]).describe();
    assert_eq!((nodes[0].key.as_str(), nodes[0].value.as_str()), ("", "[0, 4]"));
}

#[test]
fn the_cpu_finishes_each_partial_completion_where_it_faulted() {
    // 1 KiB pieces, four a page: the first of each page leaves its bytes to the CPU, which
    // faults that page in and copies them; the other three find the page mapped. Each page costs
    // the same, the second's fault at its own page included.
    let page = |total: &str| {
        let r = copy(&["faults=\"partial\"", "engines=1", "transfer_bytes=1024", total]);
        (f(&r["copy"]["seconds"]) * 1e9, r["copy"]["software_bytes"].as_u64())
    };
    let (one, one_left) = page("total_bytes=4096");
    let (two, two_left) = page("total_bytes=8192");
    assert_eq!((one_left, two_left), (Some(1024), Some(2048)));
    assert!((two - 2.0 * one).abs() < 0.01, "{two} against twice {one}");
}

#[test]
fn a_partial_completion_is_finished_by_the_cpu_after_faulting_the_pages_in() {
    let r = copy(&["faults=\"partial\"", "total_bytes=1048576"]);
    // The device gives up at the first page, after one translation request (1 us): its record
    // is seen after the ENQCMD, the descriptor's time, 1000 ns and the record's latency; then 256 pages at 500 ns and 1 MiB on the CPU by rep
    // movsb, 16 x 64 B per 110 ns DDR read and 33.3 ns claim of the HBM line.
    let cpu_gbs = 16.0 * 64.0 / (110.0 + 70.0 / 2.1);
    let expected = 150.0 + DESCRIPTOR_NS + 1000.0 + LATENCY_NS + 256.0 * 500.0 + 1048576.0 / cpu_gbs;
    assert!((f(&r["copy"]["seconds"]) * 1e9 - expected).abs() < 0.01, "{}", r["copy"]);
    assert_eq!(r["copy"]["software_bytes"], 1048576);
    assert!((f(&r["copy"]["cpu_copy_us"]) * 1e3 - 1048576.0 / cpu_gbs).abs() < 0.01);
}

#[test]
fn bytes_that_do_not_divide_evenly_are_all_copied() {
    let r = copy(&["copy_policy=\"smart\"", "dst_node=11", "threads=3", "total_bytes=1000003", "transfer_bytes=65536"]);
    assert_eq!(r["copy"]["bytes"], 1000003);
    // 1000003 = 4 x 250000 + 3: the first device gets one byte more.
    assert_eq!(
        (&r["devices"]["dsa0"]["bytes"], &r["devices"]["dsa3"]["bytes"]),
        (&Value::from(250001), &Value::from(250000))
    );
}

#[test]
fn a_copy_thread_cannot_share_its_cpu_with_another_workload() {
    let source = steer_sim::scenario::builtin("dsa-copy").unwrap().source;
    // The smart policy within socket 0 puts a thread on the first CPU of nodes 0 to 3.
    for (cpu, overrides) in [(0, vec![]), (36, vec!["copy_policy=\"smart\"".to_string()])] {
        let text = format!("{source}\n[[workloads]]\nkind = \"stream\"\ncpu = {cpu}\n");
        let scenario = load(&ScenarioSource { text: &text, origin: "s.toml", default_name: "s" }, &overrides);
        let message = match scenario {
            Err(e) => e.to_string(),
            Ok(s) => steer_sim::Simulation::new(s).err().unwrap().to_string(),
        };
        assert!(message.contains(&format!("CPU {cpu} already runs")), "{message}");
    }
}

#[test]
fn a_dsa_reading_another_socket_is_held_by_its_read_buffers() {
    // The DSA of node 0 reads node 15 (HBM of socket 1, 130 + 70 ns): 96 x 64 B / 200 ns =
    // 30.72 GB/s, below its 31.35 GB/s port.
    let r = copy(&["copy_policy=[0]", "src_node=15", "dst_node=8", "queue_depth=4", "total_bytes=268435456"]);
    let gbs = f(&r["copy"]["gibps"]) * 1.073741824;
    assert!(gbs <= 30.72 && gbs > 0.99 * 30.72, "{gbs}");
}

fn same_bytes(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-3
}

#[test]
fn every_byte_copied_is_read_from_the_source_nodes_channels_and_written_to_the_destinations() {
    let cases: [(&[&str], usize, usize); 5] = [
        (&[], 0, 8),
        (&["copy_policy=\"brute\"", "dst_node=15", "threads=2", "queue_depth=2", "total_bytes=67108864"], 0, 15),
        (&["dst_node=0", "total_bytes=67108864"], 0, 0),
        (&["path=\"software\"", "dst_node=15", "total_bytes=10485760"], 0, 15),
        (
            &["faults=\"partial\"", "copy_policy=\"smart\"", "total_bytes=10000000", "transfer_bytes=65536", "batch=4"],
            0,
            8,
        ),
    ];
    for (overrides, src, dst) in cases {
        let r = copy(overrides);
        let bytes = r["copy"]["bytes"].as_u64().unwrap() as f64;
        let window = f(&r["sim"]["measured_ns"]);
        let (read, write) = (f(&r["dram"]["read_gbps"]) * window, f(&r["dram"]["write_gbps"]) * window);
        assert!(same_bytes(read, bytes) && same_bytes(write, bytes), "{overrides:?}: {read} {write} of {bytes}");
        let (from, to) = (node_bytes(&r, src), node_bytes(&r, dst));
        assert!(same_bytes(from.0, bytes) && same_bytes(to.1, bytes), "{overrides:?}: {from:?} {to:?}");
        // The devices wrote their bytes a line at a time, to memory; the CPU's are no device's.
        let cpu = if overrides.contains(&"path=\"software\"") { bytes } else { f(&r["copy"]["software_bytes"]) };
        assert_eq!(f(&r["caches"]["dma_lines_to_memory"]), (bytes - cpu) / 64.0, "{overrides:?}");
    }
}

#[test]
fn a_small_copy_puts_its_bytes_on_the_channels_its_lines_interleave_over() {
    // 1000 B within node 0. The source is its first allocation, at 1 GiB (256 B granule 2^22,
    // channel 0 as its bits 7 and 17 fold in nothing odd); the destination the next page, at
    // granule 2^22 + 16 (channel 0 too). Each covers four granules: 256, 256, 256, 232 B on
    // channels 0, 1, 0, 1.
    let r = copy(&["dst_node=0", "transfer_bytes=1000", "total_bytes=1000"]);
    let window = f(&r["sim"]["measured_ns"]);
    let channel = |i: usize, key: &str| f(&r["dram"]["channels"][i][key]) * window;
    for key in ["read_gbps", "write_gbps"] {
        assert!(same_bytes(channel(0, key), 512.0) && same_bytes(channel(1, key), 488.0), "{key}: {}", r["dram"]);
    }
    assert_eq!(r["caches"]["dma_lines_to_memory"], 16);
}

#[test]
fn a_source_read_from_the_llc_leaves_the_memory_only_the_writes() {
    let r = copy(&["dst_node=0", "buffer_bytes=1048576", "total_bytes=4194304"]);
    assert_eq!(r["copy"]["source_in_llc"], true);
    let (read, write) = node_bytes(&r, 0);
    assert!(read == 0.0 && same_bytes(write, 4194304.0), "{read} {write}");
    // The one 1 MiB destination written four times: each channel carries half of it each time.
    let window = f(&r["sim"]["measured_ns"]);
    assert!(same_bytes(f(&r["dram"]["channels"][0]["write_gbps"]) * window, 2097152.0), "{}", r["dram"]);
}

#[test]
fn the_measured_window_is_the_jobs_time_and_a_finished_job_leaves_nothing_stalled() {
    let r = copy(&["total_bytes=67108864"]);
    let seconds = f(&r["copy"]["seconds"]);
    assert_eq!(f(&r["sim"]["measured_ns"]), f(&r["sim"]["simulated_ns"]));
    assert!((f(&r["sim"]["measured_ns"]) - seconds * 1e9).abs() < 1e-6, "{}", r["sim"]);
    assert_eq!((&r["sim"]["stalled_at_ns"], &r["sim"]["stalls"]), (&Value::Null, &Value::Array(Vec::new())));
    // Rates are over the job's time: the DSA's 64 MiB at the copy's own rate.
    assert!((f(&r["dram"]["read_gbps"]) - f(&r["copy"]["gibps"]) * 1.073741824).abs() < 1e-9);
    // A job that cannot finish in the window leaves it whole.
    let cut = copy(&["total_bytes=67108864", "sim.measure_us=1000"]);
    assert_eq!((&cut["copy"]["seconds"], f(&cut["sim"]["measured_ns"])), (&Value::Null, 1e6));
}
