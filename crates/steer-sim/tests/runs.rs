//! Whole-scenario behaviour: placement effects, byte conservation, determinism, bad input.

use serde_json::Value;
use steer_sim::params::Describe;
use steer_sim::{load, run, ScenarioSource};

fn run_builtin(name: &str, overrides: &[&str]) -> Value {
    let source = steer_sim::scenario::builtin(name).unwrap().source;
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let scenario = load(&ScenarioSource { text: source, origin: name, default_name: name }, &overrides).unwrap();
    run(scenario, &mut |_| true).unwrap().value
}

/// `text` loaded as `s.toml` with `overrides`.
fn load_s(text: &str, overrides: &[&str]) -> Result<steer_sim::Scenario, steer_sim::Error> {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    load(&ScenarioSource { text, origin: "s.toml", default_name: "s" }, &overrides)
}

fn loaded(text: &str, overrides: &[&str]) -> steer_sim::Scenario {
    load_s(text, overrides).unwrap()
}

fn load_error(text: &str, overrides: &[&str]) -> String {
    load_s(text, overrides).unwrap_err().to_string()
}

fn f(value: &Value) -> f64 {
    value.as_f64().unwrap()
}

#[test]
fn reads_answered_by_the_write_queue_are_reads_dram_did_not_serve() {
    let run = |lines: &str| run_builtin("rx-default", &["placement=\"memory\"", lines]);
    let (without, with) = (run("platform.memory.write_queue_ns=0"), run("platform.memory.write_queue_ns=1000"));
    let window_ns = f(&with["sim"]["measured_ns"]);
    let lines_read = |r: &Value| f(&r["dram"]["read_gbps"]) * window_ns / 64.0;
    let answered = f(&with["dram"]["write_queue_reads"]);
    assert!(answered > 0.0 && without["dram"]["write_queue_reads"] == 0);
    // The rx loop reads each packet just after the NIC wrote it: the same reads, fewer from DRAM.
    let total = lines_read(&with) + answered;
    assert!((total / lines_read(&without) - 1.0).abs() < 0.02, "{total} vs {}", lines_read(&without));
}

#[test]
fn memory_placement_sends_payload_through_dram() {
    // Without the controllers' write queue, which would answer reads of lines just written, and
    // without the L2 prefetcher, whose timely prefetches would count as fills from the L2.
    let r = run_builtin(
        "rx-default",
        &["placement=\"memory\"", "platform.memory.write_queue_ns=0", "platform.l2.prefetcher.kind=\"none\""],
    );
    let rx_gbs = f(&r["devices"]["nic0"]["rx_gbps"]) / 8.0;
    let written = f(&r["dram"]["write_gbps"]);
    let read = f(&r["dram"]["read_gbps"]);
    // Payload plus one completion line per 1500 B packet (24 lines): ~1/24 extra.
    assert!((written / rx_gbs - 1.0).abs() < 0.1, "DRAM write {written} GB/s vs rx {rx_gbs} GB/s");
    assert!((read / rx_gbs - 1.0).abs() < 0.1, "DRAM read {read} GB/s vs rx {rx_gbs} GB/s");
    let fills = &r["cores"]["1"]["fill_counts"];
    let packets = r["cores"]["1"]["workload"]["packets"].as_u64().unwrap();
    // Every payload line (24 per packet) and each new completion line comes from DRAM.
    let dram = fills["dram"].as_u64().unwrap();
    assert!(dram >= packets * 24, "{dram} DRAM fills for {packets} packets");
}

#[test]
fn l2_placement_keeps_payload_out_of_dram_while_the_ring_fits() {
    let r = run_builtin("rx-default", &["placement=\"l2\""]);
    assert!(f(&r["dram"]["read_gbps"]) < 0.05, "{}", r["dram"]);
    assert!(f(&r["dram"]["write_gbps"]) < 0.05, "{}", r["dram"]);
    let fills = &r["cores"]["1"]["fill_counts"];
    let packets = r["cores"]["1"]["workload"]["packets"].as_u64().unwrap();
    assert!(fills["l2"].as_u64().unwrap() >= packets * 24);
    assert_eq!(fills["dram"].as_u64().unwrap(), 0);
}

#[test]
fn bytes_are_conserved_with_and_without_drops() {
    for overrides in [
        vec!["placement=\"memory\""],
        vec!["placement=\"l2\"", "offered_gbps=100.0", "ring=16", "devices.0.queues.0.arrival=\"poisson\""],
        vec!["offered_gbps=100.0", "ring=32"],
    ] {
        let r = run_builtin("rx-default", &overrides);
        for q in r["devices"]["nic0"]["queues"].as_array().unwrap() {
            let u = |k: &str| q[k].as_u64().unwrap();
            assert_eq!(
                u("arrived_bytes") + u("in_flight_bytes_start"),
                u("dropped_bytes") + u("consumed_bytes") + u("in_flight_bytes_end"),
                "{overrides:?}: {q}"
            );
        }
    }
    let overloaded = run_builtin("rx-default", &["offered_gbps=100.0", "ring=32"]);
    assert!(overloaded["devices"]["nic0"]["drops"].as_u64().unwrap() > 0, "the overload case must drop");
}

#[test]
fn same_scenario_and_seed_give_identical_results() {
    let strip = |mut r: Value| {
        r["sim"]["host_seconds"] = Value::Null;
        r.to_string()
    };
    let args = ["devices.0.queues.0.arrival=\"poisson\"", "sim.measure_us=300"];
    let a = strip(run_builtin("rx-default", &args));
    let b = strip(run_builtin("rx-default", &args));
    assert_eq!(a, b);
    let c = strip(run_builtin("rx-default", &[args[0], args[1], "seed=2"]));
    assert_ne!(a, c, "another seed gives other Poisson arrivals");
}

#[test]
fn the_scenario_seed_reaches_the_hierarchy_random_choices() {
    // iperf-rx with SDCI on: its arrivals are constant, so only the Turin L3's rinsing draws.
    let rinses = |overrides: &[&str]| {
        let base = ["tph_mode=\"iv\"", "sim.warmup_us=2000", "sim.measure_us=500"];
        let result = run_builtin("iperf-rx", &[&base[..], overrides].concat());
        (result["caches"]["l3"]["rinses"].as_u64().unwrap(), result["dram"]["write_gbps"].as_f64().unwrap())
    };
    let (one, two) = (rinses(&["seed=1"]), rinses(&["seed=2"]));
    assert!(one.0 > 0 && two.0 > 0);
    assert_ne!(one, two, "another seed, other lines rinsed");
    let unrinsed = |seed| rinses(&["platform.l3.rinse_gbs=\"none\"", seed]);
    assert_eq!(unrinsed("seed=1"), unrinsed("seed=2"), "nothing else in the run draws");
}

const MINIMAL: &str = r#"
[platform]
preset = "turin-9655"

[[devices]]
name = "nic0"

[[devices.queues]]
consumer_cpu = 1

[[workloads]]
kind = "rx_loop"
cpu = 1
"#;

#[test]
fn the_example_workload_consumes_the_queue_it_names() {
    let example = MINIMAL.replace("kind = \"rx_loop\"", "kind = \"example\"");
    assert!(load(&ScenarioSource { text: &example, origin: "s.toml", default_name: "s" }, &[]).is_ok());
    let two = load_error(&example, &["devices.0.queues.0.count=2"]);
    assert!(two.contains("queue 1 of `nic0` has no workload consuming it"), "{two}");
}

#[test]
fn a_nic_that_received_nothing_reports_no_hit_rates_rather_than_zero_over_zero() {
    let r = run_builtin("rx-default", &["offered_gbps=0.001", "sim.measure_us=50", "sim.warmup_us=0"]);
    let nic = &r["devices"]["nic0"];
    assert_eq!(nic["rx_gbps"], 0.0);
    assert!(nic["dma_write_hit_rate"].is_null() && nic["dma_read_hit_rate"].is_null(), "{nic}");
}

#[test]
fn the_example_workload_runs_as_a_filter() {
    let example = MINIMAL.replace("kind = \"rx_loop\"", "kind = \"example\"");
    let overrides = ["sim.measure_us=20".to_string(), "sim.warmup_us=0".to_string()];
    let scenario = load(&ScenarioSource { text: &example, origin: "s.toml", default_name: "s" }, &overrides).unwrap();
    let r = run(scenario, &mut |_| true).unwrap().value;
    assert_eq!(r["cores"]["1"]["role"], "filter");
}

#[test]
fn tcp_rx_claims_each_queue_s_irq_cpu_and_its_application_s_cpu() {
    // The IRQ CPU of queue 0 is CPU 0 and its application, app_offset 2 later, CPU 2.
    for (cpu, taken) in [(0, true), (1, false), (2, true)] {
        match stream_beside("iperf-rx", cpu, &["app_offset=2"]) {
            Err(error) if taken => {
                assert!(error.ends_with(&format!(": workloads.1.cpu: CPU {cpu} already runs workloads.0")))
            }
            Ok(()) if !taken => {}
            other => panic!("CPU {cpu}: {other:?}"),
        }
    }
}

/// A built-in scenario with a `stream` workload added on `cpu`: whether it loads.
fn stream_beside(name: &str, cpu: u32, overrides: &[&str]) -> Result<(), String> {
    let builtin = steer_sim::scenario::builtin(name).unwrap().source;
    let text = format!("{builtin}\n[[workloads]]\nkind = \"stream\"\ncpu = {cpu}\n");
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    load(&ScenarioSource { text: &text, origin: "s.toml", default_name: "s" }, &overrides)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn a_nic_link_must_be_faster_than_nothing() {
    let zero = load_error(MINIMAL, &["devices.0.link_gbps=0"]);
    assert!(zero.ends_with("devices.0.link_gbps: must be positive (got 0)"), "{zero}");
    let idle = load_error(MINIMAL, &["devices.0.queues.0.offered_gbps=0"]);
    assert!(idle.ends_with("devices.0.queues.0.offered_gbps: must be positive (got 0)"), "{idle}");
}

#[test]
fn progress_rises_from_0_to_1_through_warm_up_and_measurement() {
    let source = steer_sim::scenario::builtin("rx-default").unwrap().source;
    let overrides = ["sim.warmup_us=100".to_string(), "sim.measure_us=200".to_string()];
    let scenario = load(&ScenarioSource { text: source, origin: "rx", default_name: "rx" }, &overrides).unwrap();
    let mut seen = Vec::new();
    run(scenario, &mut |fraction| {
        seen.push(fraction);
        true
    })
    .unwrap();
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert!(seen.iter().all(|f| (0.0..=1.0).contains(f)), "{seen:?}");
    assert_eq!(seen.last(), Some(&1.0));
    assert!(seen.iter().any(|&f| f > 0.3 && f < 0.9), "reports during the run: {seen:?}");
}

#[test]
fn the_schema_is_known_before_running_and_names_every_key_with_its_unit() {
    let source = steer_sim::scenario::builtin("rx-default").unwrap().source;
    let scenario = load(&ScenarioSource { text: source, origin: "rx", default_name: "rx" }, &[]).unwrap();
    let schema = steer_sim::Simulation::new(scenario).unwrap().schema();
    let unit = |key: &str| schema.iter().find(|e| e.key == key).map(|e| e.unit);
    assert_eq!(unit("dram.read_gbps"), Some("GB/s"));
    assert_eq!(unit("devices.nic0.rx_gbps"), Some("Gb/s"));
    assert!(schema.iter().all(|e| !e.meaning.is_empty()), "every key says what it means");
}

#[test]
fn l2fwd_claims_each_of_its_queues_cpus() {
    // Four queues from consumer CPU 0: CPUs 0-3 forward.
    let error = stream_beside("ddio-l2fwd", 3, &[]).unwrap_err();
    assert!(error.ends_with(": workloads.1.cpu: CPU 3 already runs workloads.0"), "{error}");
    stream_beside("ddio-l2fwd", 4, &[]).unwrap();
}

#[test]
fn a_reduction_claims_its_cpu() {
    let error = stream_beside("leon-reduce", 0, &[]).unwrap_err();
    assert!(error.ends_with(": workloads.1.cpu: CPU 0 already runs workloads.0"), "{error}");
}

#[test]
fn a_workload_names_a_queue_its_device_has() {
    // Queues are numbered from 0: a device with one queue has no queue 1.
    let beyond = load_error(MINIMAL, &["workloads.0.queue=1"]);
    assert_eq!(beyond, "--set workloads.0.queue: device `nic0` has 1 queue(s)");
}

#[test]
fn a_minimal_scenario_loads() {
    let scenario = load(&ScenarioSource { text: MINIMAL, origin: "s.toml", default_name: "s" }, &[]).unwrap();
    assert_eq!(scenario.name, "s");
    assert_eq!(scenario.platform.topology.cores(), 96);
    // The resolved scenario loads again to the same thing.
    let resolved = scenario.to_toml();
    let again = load(&ScenarioSource { text: &resolved, origin: "r.toml", default_name: "s" }, &[]).unwrap();
    assert_eq!(again, scenario);
}

#[test]
fn scenarios_differing_in_one_device_or_workload_value_or_kind_are_unequal() {
    let base = loaded(MINIMAL, &[]);
    assert_eq!(loaded(MINIMAL, &[]), base);
    assert_ne!(loaded(MINIMAL, &["workloads.0.copy=false"]), base);
    assert_ne!(loaded(&MINIMAL.replace("kind = \"rx_loop\"", "kind = \"example\""), &[]), base);
    assert_ne!(loaded(MINIMAL, &["devices.0.link_gbps=25.0"]), base);
    // Shown as its kind, then its parameters.
    assert!(format!("{:?}", base.workloads[0]).starts_with("rx_loop RxLoopSpec { cpu: 1, "), "{:?}", base.workloads[0]);
}

#[test]
fn a_scenario_describes_its_declared_parameters_devices_and_workloads() {
    let text = format!("[params]\nrate = 40.0\nlabel = \"x\"\n{MINIMAL}");
    let described = loaded(&text, &[]).describe();
    let find = |key: &str| described.iter().find(|p| p.key == key).unwrap_or_else(|| panic!("no {key}"));
    assert_eq!(
        (find("params.rate").value.as_str(), find("params.rate").meaning.as_str()),
        ("40.0", "a declared parameter")
    );
    assert_eq!(find("params.label").value, "\"x\"");
    assert_eq!(find("devices.0.kind").value, "\"nic\"");
    assert_eq!(find("workloads.0.kind").value, "\"rx_loop\"");
    assert_eq!(find("workloads.0.cpu").value, "1");
}

#[test]
fn bad_input_names_the_key_and_the_position() {
    let unknown = load_error(&MINIMAL.replace("consumer_cpu = 1", "consumer_cpu = 1\nwayz = 3"), &[]);
    assert_eq!(unknown.lines().count(), 1);
    assert!(unknown.starts_with("s.toml:10:1: devices.0.queues.0.wayz: unknown field `wayz`"), "{unknown}");

    let wrong_type = load_error(&MINIMAL.replace("consumer_cpu = 1", "consumer_cpu = \"one\""), &[]);
    assert!(wrong_type.starts_with("s.toml:9:1: devices.0.queues.0.consumer_cpu: invalid type"), "{wrong_type}");

    let zero_ways =
        load_error(&MINIMAL.replace("preset = \"turin-9655\"", "preset = \"turin-9655\"\nl2 = { ways = 0 }"), &[]);
    // At the key inside the inline table.
    assert!(zero_ways.starts_with("s.toml:4:8: platform.l2.ways: must be at least 1"), "{zero_ways}");

    let sets = load_error(MINIMAL, &["platform.l1d.size_kib=47"]);
    assert!(sets.starts_with("--set platform.l1d.size_kib: 47 KiB does not divide"), "{sets}");

    let cpu = load_error(&MINIMAL.replace("\ncpu = 1\n", "\ncpu = 400\n"), &[]);
    assert!(cpu.starts_with("s.toml:13:1: workloads.0.cpu: CPU 400 out of range"), "{cpu}");

    let negative = load_error(&MINIMAL.replace("consumer_cpu = 1", "consumer_cpu = 1\noffered_gbps = -5.0"), &[]);
    assert!(negative.starts_with("s.toml:10:1: devices.0.queues.0.offered_gbps: must be positive"), "{negative}");

    // turin-9655 has one memory node (NPS1): node 1 is the first that does not exist.
    let node = load_error(MINIMAL, &["devices.0.numa_node=1"]);
    assert!(node.contains("devices.0.numa_node: node 1 does not exist (the platform has 1)"), "{node}");
    // Queues from CPU 0 on, one CPU more than the platform has.
    let queues = load_error(MINIMAL, &["devices.0.queues.0.consumer_cpu=0", "devices.0.queues.0.count=193"]);
    assert!(
        queues.ends_with(
            "--set devices.0.queues.0.count: 193 queues from consumer_cpu 0 need CPUs up to 192, \
             out of range (the platform has 192)"
        ),
        "{queues}"
    );
    // A file's count past the last CPU is named at its own line, not at consumer_cpu's.
    let counted = load_error(&MINIMAL.replace("consumer_cpu = 1", "consumer_cpu = 1\ncount = 100000"), &[]);
    assert!(
        counted.starts_with("s.toml:10:1: devices.0.queues.0.count: 100000 queues from consumer_cpu 1"),
        "{counted}"
    );
    let cpu = load_error(MINIMAL, &["devices.0.queues.0.consumer_cpu=192"]);
    assert!(
        cpu.ends_with("--set devices.0.queues.0.consumer_cpu: CPU 192 out of range (the platform has 192)"),
        "{cpu}"
    );

    let negative_int = load_error(MINIMAL, &["seed=-3"]);
    assert!(negative_int.starts_with("--set seed: invalid value"), "{negative_int}");

    let newline = load_error(MINIMAL, &["a\nb=1"]);
    assert!(newline.starts_with("--set a\\nb: not a parameter"), "{newline}");
    // A bare word is a string (TOML would need quotes); only a number too large is refused.
    let bare = load(
        &ScenarioSource { text: MINIMAL, origin: "s.toml", default_name: "s" },
        &["platform.preset=turin-9655".into()],
    );
    assert!(bare.is_ok(), "{bare:?}");
    // An error in a value the overridden parameter does not reach stays the file's.
    let elsewhere = load_error(
        &format!(
            "[params]\nring = 64\n{}",
            MINIMAL
                .replace("name = \"nic0\"", "name = \"nic0\"\nplacement = { policy = \"nonsense\" }")
                .replace("consumer_cpu = 1", "consumer_cpu = 1\nring_entries = \"${ring}\"")
        ),
        &["ring=32"],
    );
    assert!(elsewhere.starts_with("s.toml:"), "{elsewhere}");
    let huge = load_error(MINIMAL, &["sim.measure_us=1e400"]);
    assert_eq!(huge, "--set sim.measure_us: 1e400 is beyond the range of a number");
    for whole in ["9223372036854775808", "-9223372036854775809", "+18446744073709551616"] {
        let error = load_error(MINIMAL, &[&format!("seed={whole}")]);
        assert_eq!(error, format!("--set seed: {whole} is beyond the range of a whole number (64-bit, signed)"));
    }
    // Not digits alone, or no digits: a bare word, a string.
    for word in ["12abc", "-", "+", "1-2"] {
        let error = load_error(MINIMAL, &[&format!("seed={word}")]);
        assert!(error.contains(&format!("invalid type: string \"{word}\"")), "{error}");
    }
    // A window must measure something: at least a nanosecond.
    let tiny = load_error(MINIMAL, &["sim.measure_us=0.00099"]);
    assert!(tiny.ends_with("sim.measure_us: must be at least 0.001 µs (got 0.00099)"), "{tiny}");
    load(&ScenarioSource { text: MINIMAL, origin: "s.toml", default_name: "s" }, &["sim.measure_us=0.001".into()])
        .unwrap();
    // A value written as "${rate}" whose parameter was set on the command line is blamed on --set.
    let via_param = load_error(
        &format!(
            "[params]\nring = 64\n{}",
            MINIMAL.replace("consumer_cpu = 1", "consumer_cpu = 1\nring_entries = \"${ring}\"")
        ),
        &["ring=-5"],
    );
    assert!(via_param.starts_with("--set ring: devices.0.queues.0.ring_entries: invalid value"), "{via_param}");

    let unconsumed = load_error(MINIMAL, &["devices.0.queues.0.count=2"]);
    assert_eq!(
        unconsumed,
        "--set devices.0.queues.0.count: devices.0.queues: queue 1 of `nic0` has no workload consuming it (its \
         packets would only be dropped); add one with device = \"nic0\" and queue = 1, or lower the queue count"
    );

    // An override needs a key before its `=`.
    for bare in ["nonsense", "=5", " = 5"] {
        assert_eq!(load_error(MINIMAL, &[bare]), format!("--set {bare}: expected KEY=VALUE"));
    }
    for key in ["sim..measure_us", "sim.", ".", "platform.l2.ways."] {
        let error = load_error(MINIMAL, &[&format!("{key}=3")]);
        assert_eq!(
            error,
            format!("--set {key}: a key's parts are joined by single dots, none empty (e.g. sim.measure_us)")
        );
    }

    let mistyped = load_error("[params]\nrate = 1\nsize = 2\n", &["rat=3"]);
    assert_eq!(
        mistyped,
        "--set rat: not a parameter (declared: rate, size); other keys are set by their path, e.g. sim.measure_us"
    );
    let undeclared = load_error(MINIMAL, &["rate=3"]);
    assert!(undeclared.starts_with("--set rate: not a parameter (this scenario declares none)"), "{undeclared}");

    // A choice is a string: another type is named as given, an unknown name with the known ones.
    let number = load_error(MINIMAL, &["platform.l1d.relation=0"]);
    assert_eq!(number, "--set platform.l1d.relation: invalid type: integer `0`, expected a string");
    let unknown = load_error(MINIMAL, &["platform.l3.slice_hash=\"nope\""]);
    assert_eq!(unknown, "--set platform.l3.slice_hash: unknown value `nope` (known: uniform, skylake_sp)");
    let hashed = loaded(MINIMAL, &["platform.l3.slice_hash=\"skylake_sp\""]);
    assert_eq!(format!("{:?}", hashed.platform.l3.slice_hash), "SkylakeSp");

    let preset = load_error(&MINIMAL.replace("turin-9655", "pentium"), &[]);
    assert!(preset.starts_with("s.toml:3:1: platform.preset: unknown preset `pentium`"), "{preset}");

    let param = load_error("[params]\nx = 1\n[sim]\nmeasure_us = \"${y}\"\n", &[]);
    assert!(param.starts_with("s.toml:4:1: sim.measure_us: unknown parameter `y`"), "{param}");

    let no_ways = load_error(MINIMAL, &["platform.l3.way_masks=[{agent = \"cpu:1\", mask = 0}]"]);
    assert!(no_ways.contains("platform.l3.way_masks.0.mask: must allow at least one way"), "{no_ways}");
    let too_wide = load_error(MINIMAL, &["platform.l1d.way_masks=[{agent = \"cpu:1\", mask = 0x1000}]"]);
    assert!(too_wide.contains("platform.l1d.way_masks.0.mask: 0x1000 names ways beyond the 12"), "{too_wide}");
    let agent = load_error(MINIMAL, &["platform.l3.way_masks=[{agent = \"core1\", mask = 3}]"]);
    assert!(agent.contains("platform.l3.way_masks.0.agent: `core1`: expected cpu:N or device:NAME"), "{agent}");
    let far_cpu = load_error(MINIMAL, &["platform.l3.way_masks=[{agent = \"cpu:192\", mask = 3}]"]);
    assert!(far_cpu.contains("platform.l3.way_masks.0.agent: CPU 192 out of range"), "{far_cpu}");
    let device = load_error(MINIMAL, &["platform.l3.way_masks=[{agent = \"device:nic9\", mask = 3}]"]);
    assert!(device.contains("platform.l3.way_masks.0.agent: no device named `nic9`"), "{device}");

    let syntax = load_error("[sim\n", &[]);
    assert!(syntax.starts_with("s.toml:1:5: invalid TOML"), "{syntax}");
    assert!(!syntax.contains('\n') && syntax.contains("header; expected"), "one line: {syntax}");
}

#[test]
fn parameters_substitute_with_their_types() {
    let text = "[params]\nus = 250.0\nname = \"x\"\n[sim]\nmeasure_us = \"${us}\"\n[[workloads]]\nkind = \"stream\"\n";
    let source = ScenarioSource { text, origin: "s.toml", default_name: "s" };
    let scenario = load(&source, &[]).unwrap();
    assert_eq!(scenario.sim.measure_us, 250.0);
    let scenario = load(&source, &["us=75.5".to_string()]).unwrap();
    assert_eq!(scenario.sim.measure_us, 75.5);
    let scenario = load(&source, &["sim.warmup_us=3.0".to_string()]).unwrap();
    assert_eq!(scenario.sim.warmup_us, 3.0);
}

#[test]
fn a_parameter_is_set_by_its_name_or_as_the_resolved_scenario_lists_it() {
    let text = "[params]\nus = 250.0\nunused = 1\n[sim]\nmeasure_us = \"${us}\"\n[[workloads]]\nkind = \"stream\"\n";
    assert_eq!(loaded(text, &["params.us=75.5"]).sim.measure_us, 75.5);
    // Its two spellings are one key: the last given wins.
    assert_eq!(loaded(text, &["params.us=75.5", "us=80"]).sim.measure_us, 80.0);
    assert_eq!(loaded(text, &["us=80", "params.us=75.5"]).sim.measure_us, 75.5);
    assert_eq!(
        load_error(text, &["params.u=1"]),
        "--set params.u: not a parameter (declared: unused, us); other keys are set by their path, e.g. sim.measure_us"
    );
    assert_eq!(
        load_error(text, &["params=1"]),
        "--set params: set a parameter by its name: NAME=VALUE or params.NAME=VALUE"
    );
    // A parameter no value uses would change nothing: a resolved scenario's are all such.
    let unused = "no value of this scenario uses parameter `unused` (a resolved scenario's parameters are \
                  substituted already: set what they became by its path)";
    assert_eq!(load_error(text, &["unused=2"]), format!("--set unused: {unused}"));
    assert_eq!(load_error(text, &["params.unused=2"]), format!("--set params.unused: {unused}"));
    let resolved = loaded(text, &[]).to_toml();
    let recorded = "\n# The values the parameters had, substituted below already: to change one, change what it \
                    became.\n[params]\nunused = 1\nus = 250.0\n";
    assert!(resolved.contains(recorded), "{resolved}");
    assert_eq!(loaded(&resolved, &[]).sim.measure_us, 250.0);
    assert_eq!(load_error(&resolved, &["us=80"]), format!("--set us: {}", unused.replace("`unused`", "`us`")));
}

#[test]
fn a_platform_is_a_table_or_the_name_of_a_preset_alone() {
    let power5 = loaded(MINIMAL, &["platform=power5"]);
    assert_eq!((power5.platform.name.as_str(), power5.platform.l2.line_bytes), ("power5", 128));
    // Keys set beside it override the preset it names, before it or after (a sweep's order is its file's).
    let changed = loaded(MINIMAL, &["platform.l2.ways=4", "platform=power5", "platform.l3.ways=6"]);
    assert_eq!((changed.platform.name.as_str(), changed.platform.l2.ways, changed.platform.l3.ways), ("power5", 4, 6));
    assert_eq!(loaded(MINIMAL, &["platform=power5", "platform=turin-9845"]).platform.name, "turin-9845");
    // So does any table: its keys set beside it, in either order, change the table it gives.
    let placement = ["devices.0.placement.level=\"l3\"", "devices.0.placement={ policy = \"inject\" }"];
    for order in [placement, [placement[1], placement[0]]] {
        let scenario = loaded(MINIMAL, &order);
        assert_eq!(
            scenario.devices[0].spec.to_table()["placement"].to_string(),
            "{ level = \"l3\", policy = \"inject\" }"
        );
    }
    let file = MINIMAL.replace("[platform]\npreset = \"turin-9655\"", "platform = \"power5\"");
    assert_eq!(loaded(&file, &[]).platform.name, "power5");
    assert_eq!(loaded(&file, &["platform.l3.ways=6"]).platform.l3.ways, 6);
    let named = file.replace("platform = \"power5\"", "platform = \"${machine}\"\n[params]\nmachine = \"power5\"");
    assert_eq!(loaded(&named, &["machine=turin-9845"]).platform.name, "turin-9845");
    assert_eq!(load_error(MINIMAL, &["platform=5"]), "--set platform: must be a table or the name of a preset");
    assert_eq!(
        load_error(MINIMAL, &["platform=nonesuch"]).split(" (known:").next().unwrap(),
        "--set platform: platform.preset: unknown preset `nonesuch`"
    );
    // A resolved scenario's platform is complete: a preset beside it would change nothing.
    let resolved = loaded(MINIMAL, &[]).to_toml();
    assert_eq!(loaded(&resolved, &["platform=power5"]).platform.name, "power5");
    assert_eq!(
        load_error(&resolved, &["platform.preset=power5"]),
        "--set platform.preset: every value of preset `power5` is given beside it, so it would \
         change nothing (a resolved scenario's platform is complete): set platform = \"power5\" to start from the \
         preset alone"
    );
}

#[test]
fn parameters_inside_longer_strings_substitute_as_text() {
    let text = "description = \"${name}: ${us} us, ${q} queues, ${name}\"\n\
                [params]\nus = 250.0\nname = \"rx\"\nq = 2\n[[workloads]]\nkind = \"stream\"\n";
    assert_eq!(loaded(text, &[]).description, "rx: 250.0 us, 2 queues, rx");
    let error = |text: &str| load_error(text, &[]);
    let open = text.replace("${q} queues", "${q queues");
    assert_eq!(error(&open), "s.toml:1:1: description: unknown parameter `q queues, ${name` (declared: name, q, us)");
    assert_eq!(error(&text.replace(", ${name}\"", ", ${name\"")), "s.toml:1:1: description: unterminated `${`");
}

#[test]
fn l2fwd_forwards_every_packet_and_ddio_keeps_a_small_ring_out_of_dram() {
    let short = ["sim.warmup_us=300", "sim.measure_us=300", "rx_ring=256"];
    let ddio = run_builtin("ddio-l2fwd", &short);
    let nic = &ddio["devices"]["nic0"];
    assert_eq!(nic["drops"], 0);
    for q in nic["queues"].as_array().unwrap() {
        let u = |k: &str| q[k].as_u64().unwrap();
        assert_eq!(
            u("arrived_bytes") + u("in_flight_bytes_start"),
            u("dropped_bytes") + u("consumed_bytes") + u("in_flight_bytes_end")
        );
        // Everything forwarded is sent, but for the packets of the last burst still on the link.
        assert!(u("consumed_packets") - u("transmitted_packets") <= 32, "{q}");
    }
    assert!(f(&nic["dma_write_hit_rate"]) > 0.9, "{nic}");
    // 12.2 Mpps of 1024 B packets load the Gen3 x16 link's read completions to about 98%: with
    // Poisson arrivals TX reads queue for microseconds, and some lines leave the DDIO ways before
    // the NIC reads them.
    assert!(f(&nic["dma_read_hit_rate"]) > 0.99, "{nic}");
    // Set conflicts in the hashed LLC leak a few lines of the DDIO ways; the rest stays out of DRAM.
    let total = |r: &Value| f(&r["dram"]["total_gbps"]);
    let latency = &nic["latency_ns"];
    assert!(f(&latency["p50"]) <= f(&latency["p99"]) && f(&latency["mean"]) > 0.0);
    assert_eq!(ddio["cores"].as_object().unwrap().len(), 4, "one forwarding loop per queue");

    let memory = run_builtin("ddio-l2fwd", &[short[0], short[1], short[2], "placement=\"memory\""]);
    assert!(f(&memory["dram"]["write_gbps"]) > 10.0 && f(&memory["dram"]["read_gbps"]) > 10.0, "{}", memory["dram"]);
    assert!(total(&ddio) < 0.05 * total(&memory), "{} against {}", ddio["dram"], memory["dram"]);
}

#[test]
fn an_overloaded_forwarder_holds_one_ring_of_packets_and_finds_its_lines_as_often_reading_as_writing() {
    // One core cannot forward 99 Gb/s of 1024 B packets: its ring fills and the NIC drops.
    let overloaded =
        ["cores=1", "packet_bytes=1024", "rx_ring=256", "offered_gbps=99.0", "sim.warmup_us=500", "sim.measure_us=300"];
    let result = run_builtin("ddio-l2fwd", &overloaded);
    let nic = &result["devices"]["nic0"];
    assert!(nic["drops"].as_u64().unwrap() > 0, "{nic}");
    let waiting = nic["queues"][0]["in_flight_bytes_end"].as_u64().unwrap();
    assert!((200 * 1024..=256 * 1024).contains(&waiting), "a ring's worth waits, no more: {waiting} B");
    // A buffer waits a ring after the NIC writes it, is read for TX and is rewritten at once, so
    // both accesses find it only if it survived the same traffic since the write.
    let (write, read) = (f(&nic["dma_write_hit_rate"]), f(&nic["dma_read_hit_rate"]));
    assert!((write - read).abs() < 0.01, "write {write}, read {read}");
}

#[test]
fn ddio_needs_a_platform_with_ddio_ways() {
    let text = steer_sim::scenario::builtin("sdci-l2fwd").unwrap().source;
    let error =
        load(&ScenarioSource { text, origin: "s.toml", default_name: "s" }, &["placement=\"ddio\"".to_string()])
            .unwrap_err()
            .to_string();
    assert!(error.contains("devices.0.placement.policy: platform `turin-9655` has no DDIO ways"), "{error}");
}

#[test]
fn a_stream_co_runner_is_served_by_the_llc_while_its_working_set_fits() {
    let corunner = |ws: u64| {
        format!("workloads=[{{kind=\"l2fwd\", device=\"nic0\"}}, {{kind=\"stream\", cpu=8, working_set_bytes={ws}}}]")
    };
    let fits =
        run_builtin("ddio-l2fwd", &["sim.warmup_us=3000", "sim.measure_us=300", "rx_ring=256", &corunner(8 << 20)]);
    let fills = &fits["cores"]["8"]["fills"];
    assert_eq!(fits["cores"]["8"]["role"], "stream");
    // A few of its lines meet set conflicts in the hashed LLC.
    assert!(f(&fills["l3"]) > 0.95 && f(&fills["dram"]) < 0.05, "{fills}");
    let error = load_error(
        steer_sim::scenario::builtin("ddio-l2fwd").unwrap().source,
        &["workloads=[{kind=\"l2fwd\", device=\"nic0\"}, {kind=\"stream\", cpu=0}]"],
    );
    assert!(error.contains("workloads.1.cpu: CPU 0 already runs workloads.0"), "{error}");
}

#[test]
fn leon_injection_removes_memory_reads_and_prefetching_keeps_them() {
    let size = "message_bytes=65536";
    let base = run_builtin("leon-reduce", &[size]);
    let prefetch = run_builtin("leon-reduce", &[size, "prefetch_distance=32"]);
    let inject = run_builtin("leon-reduce", &[size, "policy=\"inject\"", "level=\"l3\""]);
    let reads = |r: &Value| f(&r["dram"]["read_gbps"]);
    let exec = |r: &Value| f(&r["cores"]["0"]["workload"]["exec_ns_per_message"]);
    // Prefetching still reads every line from memory; injection reads none.
    assert!((reads(&prefetch) / reads(&base) - 1.0).abs() < 0.01);
    assert!(reads(&inject) < 0.01 * reads(&base));
    // Both save time, prefetching more (as the seed found): its lines come from the L2, the
    // injected ones from the slower L3. The prefetches are useful and mostly on time.
    assert!(exec(&inject) < exec(&base) && exec(&prefetch) < exec(&inject));
    let l2 = &prefetch["caches"]["l2"]["prefetch"];
    assert!(l2["useful"].as_u64().unwrap() > 0);
    assert!(l2["late"].as_u64().unwrap() < l2["useful"].as_u64().unwrap() / 2, "{l2}");
}

#[test]
fn late_use_of_l2_injected_data_evicts_the_working_set() {
    let memory = run_builtin("leon-pollution", &["policy=\"memory\""]);
    let promptly = run_builtin("leon-pollution", &["delay_ns=0.0"]);
    let late = run_builtin("leon-pollution", &[]);
    let fills = |r: &Value, source: &str| r["cores"]["0"]["fill_counts"][source].as_u64().unwrap();
    let exec = |r: &Value| f(&r["cores"]["0"]["workload"]["exec_ns_per_message"]);
    // Used late, injected messages push the working set from L2 to L3, and injection loses to
    // no injection; used promptly, it wins by far.
    assert!(fills(&late, "l3") > 10 * fills(&memory, "l3").max(1));
    assert!(exec(&late) > exec(&memory), "late {} vs memory {}", exec(&late), exec(&memory));
    assert!(exec(&promptly) < 0.7 * exec(&memory));
}

#[test]
fn tcp_receive_path_conserves_bytes_and_sdci_moves_payload_core_to_core() {
    let short =
        ["sim.warmup_us=300", "sim.measure_us=300", "platform=\"turin-9575f\"", "offered_gbps=40.0", "app_offset=1"];
    let mut dram_reads = Vec::new();
    // SDCI off and on through the TPH stack (bnxt_en's IV mode), as the reproduce rows run it.
    let mut on = serde_json::Value::Null;
    for tph_mode in ["off", "iv"] {
        let r = run_builtin("iperf-rx", &[&short[..], &[&format!("tph_mode=\"{tph_mode}\"")]].concat());
        let q = &r["devices"]["nic0"]["queues"][0];
        let u = |k: &str| q[k].as_u64().unwrap();
        assert_eq!(
            u("arrived_bytes") + u("in_flight_bytes_start"),
            u("dropped_bytes") + u("consumed_bytes") + u("in_flight_bytes_end")
        );
        assert_eq!(r["cores"]["0"]["role"], "irq");
        assert_eq!(r["cores"]["1"]["role"], "iperf");
        let iperf = &r["cores"]["1"]["dc_fills"];
        if tph_mode == "off" {
            assert!(f(&iperf["dram"]) > 0.3, "{iperf}");
        } else {
            // Injected into the IRQ core's L2, the payload reaches iperf from the peer core.
            assert!(f(&iperf["peer_l2"]) > 0.3 && f(&iperf["dram"]) < 0.05, "{iperf}");
        }
        dram_reads.push(f(&r["dram"]["read_gbps"]));
        on = r;
    }
    assert!(dram_reads[1] < 0.2 * dram_reads[0], "SDCI off/on DRAM reads {dram_reads:?}");
    // Every write tagged with the IRQ CPU's steering tag lands where plain L2 injection puts it.
    let l2 = run_builtin("iperf-rx", &[&short[..], &["placement=\"l2\""]].concat());
    for key in ["dram", "cores"] {
        assert_eq!(on[key], l2[key], "{key}: TPH IV mode vs placement l2");
    }
    // NAPI and iperf on one CPU take turns and do not stall even when overloaded.
    let shared = run_builtin("iperf-rx", &["sim.warmup_us=300", "sim.measure_us=300", "queues=2", "offered_gbps=94.0"]);
    assert_eq!(shared["cores"]["0"]["role"], "irq+iperf");
    assert!(f(&shared["devices"]["nic0"]["rx_gbps"]) > 10.0, "{}", shared["devices"]["nic0"]);
}

#[test]
fn sdci_shortens_the_ping_pong_by_the_memory_reads_it_saves() {
    let run = |placement: &str, extra: &str| {
        let r = run_builtin("eflatency", &["sim.measure_us=500", &format!("placement=\"{placement}\""), extra]);
        let w = r["cores"]["2"]["workload"].clone();
        (
            f(&w["half_rtt_ns"]["p50"]),
            r["cores"]["2"]["fill_counts"]["dram"].as_u64().unwrap(),
            w["messages"].as_u64().unwrap(),
        )
    };
    let (events_off, ..) = run("memory", "read_data=false");
    let (data_off, dram_off, messages) = run("memory", "read_data=true");
    let (data_on, dram_on, _) = run("l2", "read_data=true");
    // Reading the data adds a DRAM access after the event without SDCI; SDCI removes both.
    assert!(data_off > events_off && data_on < events_off, "{events_off} {data_off} {data_on}");
    assert!(dram_off >= 2 * messages && dram_on < messages / 2, "{dram_off} {dram_on} for {messages}");
}

/// Seed 000's one-queue iperf-rx (IRQ on CPU 0, iperf on CPU 1), briefly, with a ring that cycles
/// within the short warm-up: for where lines come from, not for the footprint.
fn short_one_queue_iperf(extra: &[&str]) -> Value {
    let mut overrides = vec![
        "sim.warmup_us=300",
        "sim.measure_us=300",
        "platform=\"turin-9575f\"",
        "offered_gbps=70.0",
        "app_offset=1",
        "devices.0.queues.0.ring_entries=511",
        "devices.0.queues.0.pool_buffers=1022",
    ];
    overrides.extend_from_slice(extra);
    run_builtin("iperf-rx", &overrides)
}

#[test]
fn napi_keeps_its_working_set_in_l2_under_sdci_and_socket_state_moves_between_cores() {
    let irq_fills = |extra: &[&str]| {
        let mut overrides = vec![
            "tph_mode=\"iv\"",
            // Enough kernel lines per sk_buff to read a 768 KiB working set within the warm-up,
            // and no L2 prefetcher, which would fetch evicted kernel lines back from the L3
            // ahead of use: the fills show where NAPI's lines stay.
            "workloads.0.kernel_lines=500",
            "platform.l2.prefetcher.kind=\"none\"",
        ];
        overrides.extend_from_slice(extra);
        short_one_queue_iperf(&overrides)["cores"]["0"]["dc_fills"].clone()
    };
    let irq = irq_fills(&[]);
    assert!(f(&irq["l2"]) > 0.8, "{irq}");
    // The socket state the application's core wrote last comes from there.
    assert!(f(&irq["peer_l2"]) + f(&irq["l3"]) > 0.05, "{irq}");
    // A kernel working set of 768 KiB: injected lines entering the L2 where it evicts next
    // (turin's `injected_insertion = "lru"`) leave it there; entering as most recently used, the
    // injected pages between two uses of a line push it out to the L3.
    let large = "workloads.0.kernel_state_bytes=786432";
    let lru = irq_fills(&[large]);
    assert!(f(&lru["l2"]) > 0.75, "{lru}");
    let mru = irq_fills(&[large, "platform.l2.injected_insertion=\"mru\""]);
    assert!(f(&mru["l2"]) < 0.1 && f(&mru["l3"]) > 0.8, "{mru}");
}

#[test]
fn the_l2_stream_prefetcher_takes_payload_ahead_of_the_copy_from_a_peers_l2_not_from_dram() {
    let app_fills = |tph: &str, prefetcher: &str| {
        // The L1D's prefetcher off and the L2's degree and distance fixed: this is about the L2's
        // timing, not the calibrated values.
        let r = short_one_queue_iperf(&[
            &format!("tph_mode=\"{tph}\""),
            &format!("platform.l2.prefetcher.kind=\"{prefetcher}\""),
            "platform.l2.prefetcher.degree=3",
            "platform.l2.prefetcher.distance=24",
            "platform.l1d.prefetcher.kind=\"none\"",
        ]);
        (f(&r["cores"]["1"]["dc_fills"]["l2"]), f(&r["cores"]["1"]["dc_fills"]["dram"]))
    };
    // Without a prefetcher the copy's fills are half payload (from DRAM or the IRQ core's L2),
    // half its own user buffer (L2).
    let (l2_plain, _) = app_fills("iv", "none");
    assert!((l2_plain - 0.5).abs() < 0.02, "{l2_plain}");
    // With SDCI the payload sits in the IRQ core's L2, 20 ns away: up to 24 lines ahead, most
    // prefetches arrive before the copy asks.
    let (l2_sdci, _) = app_fills("iv", "stream");
    assert!(l2_sdci > l2_plain + 0.1, "{l2_sdci} vs {l2_plain}");
    // From DRAM (130 ns) the same prefetches are mostly late: the fills still count DRAM.
    let (l2_off, dram_off) = app_fills("off", "stream");
    assert!(l2_off < l2_plain + 0.07 && dram_off > 0.4, "{l2_off} {dram_off}");
}

#[test]
fn lightly_loaded_channels_do_not_queue_reads_behind_other_cores_future() {
    // Four iperf cores run ahead of each other in simulated time; at ~1 GB/s per channel the
    // channels are nearly idle, and reads must see almost no queueing.
    let r = run_builtin(
        "iperf-rx",
        &[
            "sim.warmup_us=300",
            "sim.measure_us=300",
            "platform=\"turin-9575f\"",
            "queues=4",
            "offered_gbps=94.0",
            "app_offset=4",
        ],
    );
    for channel in r["dram"]["channels"].as_array().unwrap() {
        assert!(f(&channel["read_queue_ns"]) < 10.0, "{channel}");
    }
    assert_eq!(r["devices"]["nic0"]["drops"], 0, "{}", r["devices"]["nic0"]);
}

#[test]
fn a_ping_pong_whose_message_is_dropped_is_reported_as_stalled_not_silently_short() {
    // The queue restarts at 1 ms for 50 µs: the message arriving then is dropped, so neither
    // side ever sends again.
    let r = run_builtin(
        "eflatency",
        &[
            "tph_mode=\"iv\"",
            "devices.0.tph.affinity_changes=[{ queue = 0, at_us = 1000.0, cpu = 3 }]",
            "devices.0.tph.restart_us=50.0",
        ],
    );
    let sim = &r["sim"];
    assert_eq!(f(&sim["measured_ns"]), 5_000_000.0, "the window is not cut short");
    let stalled_at = f(&sim["stalled_at_ns"]);
    assert!((1_000_000.0..1_060_000.0).contains(&stalled_at), "{stalled_at}");
    let stalls = sim["stalls"].as_array().unwrap();
    let cpu = stalls.iter().find(|s| s["agent"] == "cpu 2 (pingpong)").expect("the ping-pong's CPU");
    assert!(cpu["reason"].as_str().unwrap().contains("the next message on nic0 queue 0"), "{cpu}");
    assert_eq!(r["devices"]["nic0"]["queues"][0]["dropped_packets"], 1);
}

#[test]
fn a_busy_run_reports_no_stall() {
    let r = run_builtin("iperf-rx", &["sim.measure_us=200"]);
    assert_eq!(r["sim"]["stalls"], serde_json::json!([]));
    assert_eq!(r["sim"]["stalled_at_ns"], Value::Null);
}

#[test]
fn infinities_and_nan_are_refused_where_they_are_written() {
    let text = "[platform]\npreset = \"turin-9655\"\n[sim]\nmeasure_us = inf\n[[workloads]]\nkind = \"stream\"\n";
    assert_eq!(load_error(text, &[]), "s.toml:4:1: sim.measure_us: must be a finite number (got inf)");
    let base = "[platform]\npreset = \"turin-9655\"\n[[workloads]]\nkind = \"stream\"\n";
    assert_eq!(load_error(base, &["sim.warmup_us=nan"]), "--set sim.warmup_us: must be a finite number (got NaN)");
    assert!(
        load_error(base, &["workloads.0.bytes=-inf"]).contains("workloads.0.bytes: must be a finite number (got -inf)")
    );
}

#[test]
fn a_scenario_with_nothing_in_it_is_refused() {
    let empty = load(&ScenarioSource { text: "", origin: "s.toml", default_name: "s" }, &[]).unwrap();
    let error = steer_sim::Simulation::new(empty).err().unwrap();
    assert_eq!(error.to_string(), "nothing to simulate: no [[devices]] and no [[workloads]]");
}

#[test]
fn runs_beyond_the_limits_are_refused_before_anything_is_allocated_unless_allowed() {
    let too_large = |overrides: &[&str]| {
        let source = steer_sim::scenario::builtin("rx-default").unwrap().source;
        let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        let scenario = load(&ScenarioSource { text: source, origin: "rx", default_name: "rx" }, &overrides).unwrap();
        match steer_sim::Simulation::new(scenario) {
            Err(steer_sim::Error::TooLarge(message)) => message,
            other => panic!("not refused: {:?}", other.err()),
        }
    };
    assert!(too_large(&["sim.measure_us=2e6"]).starts_with("sim: 2000300 µs of simulated time is more than 1000000 µs"));
    assert!(too_large(&["sim.measure_us=999700.001"]).starts_with("sim: 1000000.001 µs of simulated time is more"));
    let ring = too_large(&["devices.0.queues.0.ring_entries=4000000000"]);
    assert!(ring.starts_with("the caches and devices would need 119.3 GiB of host memory"), "{ring}");
    // Allowed, the check passes (the run itself is not made here).
    let source = steer_sim::scenario::builtin("rx-default").unwrap().source;
    let allowed = ["sim.measure_us=2e6".to_string(), "sim.allow_large=true".to_string()];
    let scenario = load(&ScenarioSource { text: source, origin: "rx", default_name: "rx" }, &allowed).unwrap();
    assert_eq!(scenario.check_size(), Ok(()));
    // One second exactly is within the limit.
    assert_eq!(loaded(source, &["sim.measure_us=999700"]).check_size(), Ok(()));
    // Beyond what the clock runs, allowed or not (up to it, allowed).
    let beyond = ["sim.measure_us=1e12", "sim.allow_large=true"];
    assert_eq!(
        load_error(source, &beyond),
        "--set sim.measure_us: 300 µs of warm-up and 1e12 µs measured are more than steer's clock runs (1e12 µs)"
    );
    // The override named is the part to change, whatever else was set.
    let warmup = ["sim.measure_us=100", "sim.warmup_us=1e12", "sim.allow_large=true"];
    assert_eq!(
        load_error(source, &warmup),
        "--set sim.warmup_us: 1e12 µs of warm-up and 100 µs measured are more than steer's clock runs (1e12 µs)"
    );
    let _ = loaded(source, &["sim.measure_us=999999999700", "sim.allow_large=true"]);
}

#[test]
fn the_host_memory_limit_counts_every_core_s_private_caches_and_every_l3() {
    // One core: 2^26 lines of L1D, 2^26 of L2 and 2^27 of L3 at 16 B a line are 4 GiB exactly,
    // which is allowed; a second core of the CCX adds its L1D and L2 (6 GiB).
    let text = r#"
        [platform]
        preset = "turin-9575f"
        topology = { ccx_per_socket = 1, cores_per_ccx = 1 }
        l1d = { size_kib = 4194304, ways = 16 }
        l2 = { size_kib = 4194304, ways = 16 }
        l3 = { size_kib = 8388608, ways = 16 }
        [[workloads]]
        kind = "stream"
        cpu = 0
    "#;
    let size = |overrides: &[&str]| loaded(text, overrides).check_size();
    assert_eq!(size(&[]), Ok(()));
    assert_eq!(
        size(&["platform.topology.cores_per_ccx=2"]),
        Err("the caches and devices would need 6.0 GiB of host memory, more than 4 GiB; set sim.allow_large = true \
             (or --allow-large) to run it anyway"
            .into())
    );
    assert_eq!(
        size(&["platform.topology.ccx_per_socket=2"]),
        Err("the caches and devices would need 8.0 GiB of host memory, more than 4 GiB; set sim.allow_large = true \
             (or --allow-large) to run it anyway"
            .into())
    );
}

#[test]
fn a_prefetcher_degree_beyond_a_page_is_refused() {
    let base = "[platform]\npreset = \"turin-9655\"\n[[workloads]]\nkind = \"stream\"\n";
    let error =
        load_error(base, &["platform.l2.prefetcher.kind=\"next_line\"", "platform.l2.prefetcher.degree=1000000"]);
    assert!(
        error.ends_with("platform.l2.prefetcher.degree: must be 1 to 64 lines per trigger (got 1000000)"),
        "{error}"
    );
}

#[test]
fn a_ping_pong_message_has_one_byte_to_64_kib_of_header_and_payload() {
    let eflatency = steer_sim::scenario::builtin("eflatency").unwrap().source;
    let loads = |overrides: &[&str]| {
        let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        load(&ScenarioSource { text: eflatency, origin: "e.toml", default_name: "e" }, &overrides).map(|_| ())
    };
    loads(&["workloads.0.header_bytes=0", "payload_bytes=1"]).unwrap();
    loads(&["workloads.0.header_bytes=1", "payload_bytes=0"]).unwrap();
    let error = loads(&["workloads.0.header_bytes=0", "payload_bytes=0"]).unwrap_err().to_string();
    assert!(
        error.ends_with("workloads.0.payload_bytes: a message has 1 B to 64 KiB, headers included (got 0)"),
        "{error}"
    );
    loads(&["workloads.0.header_bytes=42", "payload_bytes=65494"]).unwrap();
    let error = loads(&["workloads.0.header_bytes=42", "payload_bytes=65495"]).unwrap_err().to_string();
    assert!(error.ends_with("(got 65537)"), "{error}");
    // Summed without wrapping round to a small message.
    let error = loads(&["workloads.0.header_bytes=4294967295", "payload_bytes=1"]).unwrap_err().to_string();
    assert!(error.ends_with("(got 4294967296)"), "{error}");
}

#[test]
fn a_number_named_with_a_unit_is_refused_outside_what_a_machine_has() {
    let iperf = steer_sim::scenario::builtin("iperf-rx").unwrap().source;
    for (set, message) in [
        ("platform.core.freq_ghz=1e12", "platform.core.freq_ghz: must be 0.01 to 100 GHz (got 1e12)"),
        ("platform.fabric.peer_l2_latency_ns=2e9", "platform.fabric.peer_l2_latency_ns: must be 0 to 1e9 ns (got 2e9)"),
        (
            "devices.0.queues.0.offered_gbps=1e-9",
            "devices.0.queues.0.offered_gbps: must be 0.001 to 1000000 Gb/s (got 1e-9)",
        ),
        (
            "workloads.0.napi_cycles_per_page=1e10",
            "workloads.0.napi_cycles_per_page: must be 0 to 1e9 cycles (got 1e10)",
        ),
    ] {
        let error = load_error(iperf, &[set]);
        assert!(error.ends_with(message), "{set}: {error}");
    }
}

#[test]
fn queue_counts_and_per_sk_buff_structures_are_refused_past_their_bound_not_run() {
    let iperf = steer_sim::scenario::builtin("iperf-rx").unwrap().source;
    let error = load_error(iperf, &["devices.0.queues.0.count=4000000000"]);
    assert!(
        error.ends_with(
            "--set devices.0.queues.0.count: 4000000000 queues from consumer_cpu 0 need CPUs up to 3999999999, \
             out of range (the platform has 192)"
        ),
        "{error}"
    );
    let accepted = |set: &str| {
        load(&ScenarioSource { text: iperf, origin: "s.toml", default_name: "s" }, &[set.to_string()]).is_ok()
    };
    for name in ["skb_lines", "head_lines", "socket_lines", "kernel_lines"] {
        assert!(accepted(&format!("workloads.0.{name}=4096")), "{name}");
        let error = load_error(iperf, &[&format!("workloads.0.{name}=4097")]);
        assert!(error.ends_with(&format!("workloads.0.{name}: at most 4096 lines per sk_buff (got 4097)")), "{error}");
    }
    assert!(accepted("workloads.0.skb_pool=65536"));
    let error = load_error(iperf, &["workloads.0.skb_pool=65537"]);
    assert!(error.ends_with("workloads.0.skb_pool: must be 1 to 65536 (got 65537)"), "{error}");
}

#[test]
fn sizes_and_counts_past_what_a_nic_or_a_core_has_are_refused_at_their_bound() {
    let sdci = steer_sim::scenario::builtin("sdci-l2fwd").unwrap().source;
    let accepted = |set: &str| {
        load(&ScenarioSource { text: sdci, origin: "s.toml", default_name: "s" }, &[set.to_string()]).is_ok()
    };
    for (key, most, message) in [
        ("devices.0.queues.0.completion_bytes", 4096, "must be 1 to 4096 B: an entry is tens of bytes (got 4097)"),
        ("devices.0.queues.0.descriptor_bytes", 4096, "must be 1 to 4096 B: an entry is tens of bytes (got 4097)"),
        ("devices.0.queues.0.buffer_stride_bytes", 1 << 30, "must be at most 1073741824 B (got 1073741825)"),
        ("devices.0.queues.0.segment_bytes", 65535, "a segment is at most an IP packet's 65535 B (got 65536)"),
        ("devices.0.queues.0.tx_entries", 1 << 20, "must be at most 1048576 (got 1048577)"),
        ("devices.0.tx_read_requests", 16384, "PCIe's 14-bit tags allow at most 16384 (got 16385)"),
        ("workloads.0.burst", 65535, "must be 1 to 65535 (got 65536)"),
        ("platform.core.window_instructions", 8192, "must be 1 to 8192: a reorder buffer holds hundreds (got 8193)"),
    ] {
        assert!(accepted(&format!("{key}={most}")), "{key}");
        let error = load_error(sdci, &[&format!("{key}={}", most + 1)]);
        assert!(error.ends_with(&format!("{key}: {message}")), "{error}");
    }
    // A buffer as large as its stride allows.
    let big = ["devices.0.queues.0.buffer_stride_bytes=0", "devices.0.queues.0.buffer_bytes=1073741824"];
    assert!(load(&ScenarioSource { text: sdci, origin: "s.toml", default_name: "s" }, &big.map(String::from)).is_ok());
    let error = load_error(sdci, &["devices.0.queues.0.buffer_bytes=1073741825"]);
    assert!(
        error.ends_with("devices.0.queues.0.buffer_bytes: must be at most 1073741824 B (got 1073741825)"),
        "{error}"
    );
}

#[test]
fn workload_and_copy_engine_counts_past_what_software_or_a_dsa_has_are_refused() {
    for (scenario, key, most, message) in [
        (
            "leon-reduce",
            "workloads.0.element_bytes",
            "4096",
            "must be 1 to 4096: an element is a number, not a page (got 4097)",
        ),
        ("leon-reduce", "workloads.0.prefetch_distance", "1048576", "must be at most 1048576 lines (got 1048577)"),
        (
            "leon-reduce",
            "workloads.0.instructions_per_element",
            "1000000",
            "must be more than 0 and at most 1000000 (got 1000001)",
        ),
        ("iperf-rx", "workloads.0.napi_budget", "65536", "must be 1 to 65536 (got 65537)"),
        ("iperf-rx", "workloads.0.tpa_pages", "1024", "must be 1 to 1024 (got 1025)"),
        ("dsa-copy", "devices.0.read_buffers", "4096", "must be 1 to 4096 (got 4097)"),
        ("dsa-copy", "workloads.0.queue_depth", "", "must be 1 to 65536 submissions in flight (got 65537)"),
    ] {
        let text = steer_sim::scenario::builtin(scenario).unwrap().source;
        if !most.is_empty() {
            let set = vec![format!("{key}={most}")];
            assert!(load(&ScenarioSource { text, origin: "s.toml", default_name: "s" }, &set).is_ok(), "{key}");
        }
        let past = message.rsplit("(got ").next().unwrap().trim_end_matches(')');
        let error = load_error(text, &[&format!("{key}={past}")]);
        assert!(error.ends_with(&format!("{key}: {message}")), "{error}");
    }
}

#[test]
fn the_example_workload_claims_its_cpu() {
    let example = MINIMAL.replace("kind = \"rx_loop\"", "kind = \"example\"");
    let error = load_error(&format!("{example}\n[[workloads]]\nkind = \"stream\"\ncpu = 1\n"), &[]);
    assert!(error.ends_with(": workloads.1.cpu: CPU 1 already runs workloads.0"), "{error}");
}

#[test]
fn a_reduction_needs_instructions_and_tcp_rx_a_kernel_state_of_a_line_or_more() {
    let leon = steer_sim::scenario::builtin("leon-reduce").unwrap().source;
    let error = load_error(leon, &["workloads.0.instructions_per_element=0"]);
    assert!(error.contains("workloads.0.instructions_per_element: must be more than 0"), "{error}");
    let iperf = steer_sim::scenario::builtin("iperf-rx").unwrap().source;
    let error = load_error(iperf, &["workloads.0.kernel_state_bytes=63"]);
    assert!(error.contains("workloads.0.kernel_state_bytes: must be at least 64"), "{error}");
    let error = load_error(leon, &["platform.core.window_instructions=0"]);
    assert!(error.contains("platform.core.window_instructions: must be 1 to 8192"), "{error}");
    let accepted = |text: &str, set: &str| {
        load(&ScenarioSource { text, origin: "s.toml", default_name: "s" }, &[set.to_string()]).is_ok()
    };
    assert!(accepted(iperf, "workloads.0.kernel_state_bytes=64"));
    assert!(accepted(leon, "workloads.0.instructions_per_element=0.5"));
    assert!(accepted(leon, "platform.core.window_instructions=1"));
}

#[test]
fn each_queue_reports_the_passes_over_its_ring_its_window_saw() {
    let passes = |q: &Value, entries: f64| {
        let accepted = q["arrived_packets"].as_u64().unwrap() - q["dropped_packets"].as_u64().unwrap();
        assert_eq!(f(&q["ring_passes"]), accepted as f64 / entries, "{q}");
        f(&q["ring_passes"])
    };
    // 1500 B at 9.75 Gb/s over two queues: 406,250 packets a second each, 812 in 2 ms, a fifth of
    // a 4096-entry ring.
    let slow = ["packet_bytes=1500", "rx_ring=4096", "cores=2", "offered_gbps=9.75", "sim.measure_us=2000"];
    for q in run_builtin("ddio-l2fwd", &slow)["devices"]["nic0"]["queues"].as_array().unwrap() {
        assert!((0.17..0.23).contains(&passes(q, 4096.0)), "{q}");
    }
    // One core cannot forward 64 B packets at 100 Gb/s: dropped packets pass no descriptor.
    let r = run_builtin("ddio-l2fwd", &["packet_bytes=64", "rx_ring=256", "cores=1", "sim.measure_us=200"]);
    let q = &r["devices"]["nic0"]["queues"][0];
    assert!(q["dropped_packets"].as_u64().unwrap() > 0, "{q}");
    assert!(passes(q, 256.0) > 1.0);
}

#[test]
fn a_window_inside_the_first_pass_over_a_pool_sees_only_first_uses_and_their_writes_all_miss() {
    // 1500 B at 9.6 Gb/s over two queues of 4096 descriptors: a pass over both takes 10.2 ms, so
    // the scenario's 4 ms of warm-up and 2 ms measured write only buffers never written before.
    let slow = ["packet_bytes=1500", "rx_ring=4096", "cores=2", "offered_gbps=9.6"];
    let nic = &run_builtin("ddio-l2fwd", &slow)["devices"]["nic0"];
    for q in nic["queues"].as_array().unwrap() {
        let accepted = q["arrived_packets"].as_u64().unwrap() - q["dropped_packets"].as_u64().unwrap();
        assert_eq!(q["first_use_packets"].as_u64().unwrap(), accepted, "{q}");
    }
    assert_eq!(f(&nic["dma_write_hit_rate"]), 0.0, "{nic}");
    // Warmed up for three passes, the window writes only buffers used before, and some hit.
    let passes = [&slow[..], &["sim.warmup_us=31000", "sim.measure_us=3000"]].concat();
    let nic = &run_builtin("ddio-l2fwd", &passes)["devices"]["nic0"];
    for q in nic["queues"].as_array().unwrap() {
        assert_eq!(q["first_use_packets"], 0, "{q}");
    }
    assert!(f(&nic["dma_write_hit_rate"]) > 0.1, "{nic}");
}

#[test]
fn each_builtin_scenario_says_what_it_shows_in_its_description_line() {
    let ddio = steer_sim::scenario::builtin("ddio-l2fwd").unwrap();
    let line = ddio.source.lines().find(|l| l.starts_with("description = ")).unwrap();
    assert_eq!(format!("description = {:?}", ddio.description()), line);
    for builtin in steer_sim::scenario::BUILTINS {
        assert!(builtin.description().len() > 20, "{}: {:?}", builtin.name, builtin.description());
    }
}

#[test]
fn a_name_is_a_file_if_it_exists_ends_in_toml_or_has_a_slash_else_a_builtin() {
    use steer_sim::scenario::find;
    let dir = std::env::temp_dir().join(format!("steer-find-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("plain");
    std::fs::write(&plain, MINIMAL).unwrap();
    let found = find(plain.to_str().unwrap()).unwrap();
    assert_eq!((found.text.as_str(), found.default_name.as_str()), (MINIMAL, "plain"));
    // A name that exists is a file, with no slash or `.toml` (tests run in the crate's folder).
    assert_eq!(find("src").err().unwrap().to_string(), "src: cannot read scenario: Is a directory");
    // A name that only exists as a built-in is the built-in.
    let builtin = find("rx-default").unwrap();
    assert_eq!((builtin.origin.as_str(), builtin.default_name.as_str()), ("builtin:rx-default", "rx-default"));
    // Missing files are said to be missing, whichever rule made the name a file.
    for name in ["rx-default.toml", "scenarios/rx-default"] {
        assert_eq!(
            find(name).err().unwrap().to_string(),
            format!("{name}: cannot read scenario: No such file or directory")
        );
    }
    let unknown = find("rx-defualt").err().unwrap().to_string();
    assert!(unknown.starts_with("rx-defualt: no such scenario file or built-in scenario (built-in: rx-default, "));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_ssds_blocks_go_through_dram_under_memory_and_stay_in_the_readers_l2_under_sdci() {
    for placement in ["memory", "l2"] {
        let r = run_builtin("nvme-read", &[&format!("placement=\"{placement}\""), "sim.measure_us=200"]);
        let device = &r["devices"]["nvme0"];
        let read_gbytes = f(&device["rx_gbps"]) / 8.0;
        // Each 4 KiB block and its completion entry's line: 4160 B of DRAM writes per 4096 read.
        let expected = if placement == "memory" { 4160.0 / 4096.0 } else { 0.0 };
        let written = f(&r["dram"]["write_gbps"]) / read_gbytes;
        assert!((written - expected).abs() < 0.01, "{placement}: {written} B written per B read");
        let queue = &device["queues"][0];
        let in_flight = |key: &str| queue[key].as_u64().unwrap();
        assert_eq!(
            in_flight("read_bytes") + in_flight("in_flight_bytes_start"),
            in_flight("consumed_bytes") + in_flight("in_flight_bytes_end"),
            "{placement}: every byte read is consumed or still in flight"
        );
        let source = if placement == "memory" { "dram" } else { "l2" };
        assert!(f(&r["cores"]["0"]["fills"][source]) > 0.98, "{placement}: the reader's fills from {source}");
    }
}

#[test]
fn the_ssd_scenario_refuses_impossible_values_with_their_key() {
    let text = steer_sim::scenario::builtin("nvme-read").unwrap().source;
    let cases = [
        ("depth=0", "--set depth: devices.0.queues.0.depth: must be 1 to 65535 (a queue of at most 65536 entries keeps one empty; got 0)"),
        ("devices.0.block_bytes=1000", "--set devices.0.block_bytes: must be a whole number of 512 B sectors, at most 1073741824 B (got 1000)"),
        ("completions=\"sometimes\"", "--set completions: devices.0.queues.0.completions: unknown value `sometimes` (known: polled, interrupt)"),
        ("workloads.0.queue=1", "--set workloads.0.queue: device `nvme0` has 1 queue(s)"),
    ];
    for (set, expected) in cases {
        assert_eq!(load_error(text, &[set]), expected);
    }
}
