//! Results of a run, shaped as users of real machines measure them: DRAM bandwidth per channel,
//! where each CPU's demand fills came from, device throughput and drops.
//!
//! Units: `dram.*_gbps` are GB/s (bytes, as memory-controller counters report them);
//! `devices.*.*_gbps` are Gb/s (bits, as NIC tools report them).

use serde_json::{json, Map, Value};

use crate::engine::Simulation;
use crate::hierarchy::Source;
use crate::units::Time;

/// The JSON document of one run.
pub type RunResult = Value;

fn fractions(counts: &[u64; 6], skip_l1: bool) -> Value {
    let total: u64 = counts.iter().enumerate().filter(|(i, _)| !(skip_l1 && *i == 0)).map(|(_, c)| c).sum();
    let mut map = Map::new();
    for source in Source::ALL {
        if skip_l1 && source == Source::L1 {
            continue;
        }
        let count = counts[source as usize];
        map.insert(source.name().into(), json!(if total > 0 { count as f64 / total as f64 } else { 0.0 }));
    }
    Value::Object(map)
}

/// p50, p99 and mean of packet latencies (nearest-rank percentiles), or null without packets.
fn latency_summary(samples: &mut [f64]) -> Value {
    if samples.is_empty() {
        return Value::Null;
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    let rank = |p: f64| samples[((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1];
    json!({
        "p50": rank(0.50),
        "p99": rank(0.99),
        "mean": samples.iter().sum::<f64>() / samples.len() as f64,
        "count": samples.len(),
    })
}

pub fn collect(simulation: &Simulation, warmup: Time, host_seconds: f64) -> RunResult {
    let system = &simulation.system;
    let window_ns = (simulation.now() - warmup).as_ns().max(1e-9);
    let hierarchy = &system.hierarchy;

    let channels: Vec<Value> = hierarchy
        .memory
        .stats()
        .map(|c| {
            json!({
                "read_gbps": c.read_bytes as f64 / window_ns,
                "write_gbps": c.write_bytes as f64 / window_ns,
                "read_queue_ns": c.mean_read_queue_ns(),
            })
        })
        .collect();
    let (read, write) = hierarchy.memory.stats().fold((0u64, 0u64), |(r, w), c| (r + c.read_bytes, w + c.write_bytes));

    let mut cores = Map::new();
    for workload in simulation.workloads() {
        let cpu = workload.cpu();
        // Workloads sharing a CPU share its counters: one entry, roles joined with `+`.
        if let Some(Value::Object(entry)) = cores.get_mut(&cpu.to_string()) {
            let role = format!("{}+{}", entry["role"].as_str().unwrap_or_default(), workload.role());
            entry.insert("role".into(), json!(role));
            entry.insert(format!("workload_{}", workload.role()), workload.report(simulation.now()));
            continue;
        }
        let counts = &hierarchy.stats.fills[cpu as usize];
        let mut fill_counts = Map::new();
        for source in Source::ALL {
            fill_counts.insert(source.name().into(), json!(counts[source as usize]));
        }
        cores.insert(
            cpu.to_string(),
            json!({
                "role": workload.role(),
                "fills": fractions(counts, false),
                "dc_fills": fractions(counts, true),
                "fill_counts": fill_counts,
                "workload": workload.report(simulation.now()),
            }),
        );
    }

    let mut devices = Map::new();
    for nic in &system.nics {
        let queues: Vec<Value> = nic
            .queues
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let mut stats = serde_json::to_value(&q.stats).expect("plain counters");
                stats["in_flight_bytes_end"] = json!(q.in_flight_bytes);
                stats["irq_cpu"] = json!(nic.tph.irq_cpu[i]);
                stats["steering_cpu"] = json!(nic.tph.steering_cpu(i));
                stats["restarts"] = json!(q.restarts);
                stats["rx_gbps"] = json!((q.stats.arrived_bytes - q.stats.dropped_bytes) as f64 * 8.0 / window_ns);
                stats
            })
            .collect();
        let sum = |f: fn(&crate::devices::nic::QueueStats) -> u64| nic.queues.iter().map(|q| f(&q.stats)).sum::<u64>();
        let accepted = sum(|s| s.arrived_bytes) - sum(|s| s.dropped_bytes);
        let traffic = &hierarchy.stats.devices[nic.device_id() as usize];
        let ratio = |part: u64, whole: u64| if whole > 0 { json!(part as f64 / whole as f64) } else { Value::Null };
        let mut latencies: Vec<f64> = nic.queues.iter().flat_map(|q| q.stats.latencies_ns.iter().copied()).collect();
        devices.insert(
            nic.spec.name.clone(),
            json!({
                "rx_gbps": accepted as f64 * 8.0 / window_ns,
                "tx_gbps": sum(|s| s.transmitted_bytes) as f64 * 8.0 / window_ns,
                "offered_gbps": sum(|s| s.arrived_bytes) as f64 * 8.0 / window_ns,
                "drops": sum(|s| s.dropped_packets),
                "placement": nic.spec.placement.policy,
                "dma_write_hit_rate": ratio(traffic.write_llc_hits, traffic.writes),
                "dma_read_hit_rate": ratio(traffic.read_cache_hits, traffic.reads),
                "dma": traffic,
                "latency_ns": latency_summary(&mut latencies),
                "tph": nic.tph.report(),
                "queues": queues,
            }),
        );
    }

    let stats = &hierarchy.stats;
    json!({
        "scenario": simulation.scenario.name,
        "platform": system.platform.name,
        "dram": {
            "read_gbps": read as f64 / window_ns,
            "write_gbps": write as f64 / window_ns,
            "total_gbps": (read + write) as f64 / window_ns,
            "channels": channels,
        },
        "cores": cores,
        "devices": devices,
        "caches": {
            "l1d": stats.l1d,
            "l2": stats.l2,
            "l3": stats.l3,
            "dma_lines_to_memory": stats.dma_lines_to_memory,
            "dma_lines_to_cache": stats.dma_lines_to_cache,
        },
        "sim": {
            "simulated_ns": simulation.now().as_ns(),
            "warmup_ns": warmup.as_ns(),
            "measured_ns": window_ns,
            "host_seconds": host_seconds,
            "line_ops": stats.line_ops,
            "seed": simulation.scenario.seed,
        },
    })
}
