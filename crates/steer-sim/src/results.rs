//! Results of a run, shaped as users of real machines measure them: DRAM bandwidth per channel,
//! where each CPU's demand fills came from, device throughput and drops. Every key is declared
//! (`stat!`) where it is computed; agents write their own parts (`cores.N`, `devices.NAME`).
//!
//! Units: `dram.*_gbps` are GB/s (bytes, as memory-controller counters report them);
//! `devices.*.*_gbps` are Gb/s (bits, as NIC tools report them).

use serde_json::Value;

use crate::engine::{Agent, ReportView, Stall};
use crate::flows::Flows;
use crate::hierarchy::Hierarchy;
use crate::memory::ReadWrite;
use crate::scenario::Scenario;
use crate::stats::{stat, Report, SchemaEntry};
use crate::units::Time;

stat!(SCENARIO, "scenario", "name", "the scenario's name");
stat!(PLATFORM, "platform", "name", "the platform's name");
stat!(
    READ_GBPS,
    "read_gbps",
    "GB/s",
    "DRAM read bandwidth: bytes read over the measured window, by line reads of DDR channels and by bulk transfers (DSA copies, a core's copies and scans) from DDR and HBM nodes"
);
stat!(WRITE_GBPS, "write_gbps", "GB/s", "DRAM write bandwidth: bytes written, counted as read_gbps counts reads");
stat!(TOTAL_GBPS, "total_gbps", "GB/s", "read_gbps plus write_gbps");
stat!(
    CHANNEL_READ_GBPS,
    "read_gbps",
    "GB/s",
    "the channel's read bandwidth: bytes read over the measured window (bulk transfers' bytes by their lines' interleave)"
);
stat!(CHANNEL_WRITE_GBPS, "write_gbps", "GB/s", "the channel's write bandwidth, counted as its read_gbps");
stat!(
    READ_QUEUE_NS,
    "read_queue_ns",
    "ns",
    "mean time a line read waited for the channel (bulk transfers share a node by rate and wait in no queue: not counted)"
);
stat!(HBM_NODE, "node", "node", "the HBM node (flat mode: a memory-only NUMA node)");
stat!(HBM_READ_GBPS, "read_gbps", "GB/s", "bytes bulk transfers read from the HBM node over the measured window");
stat!(HBM_WRITE_GBPS, "write_gbps", "GB/s", "bytes bulk transfers wrote to the HBM node over the measured window");
stat!(WRITE_QUEUE_READS, "write_queue_reads", "lines", "reads answered from a controller's write queue, not DRAM");
stat!(
    DMA_TO_MEMORY,
    "dma_lines_to_memory",
    "lines",
    "device line writes that went to DRAM (a DSA's copy counts the lines it writes)"
);
stat!(L3_RINSES, "rinses", "lines", "dirty lines the L3 wrote back while keeping them, counted as they left it");
stat!(
    DMA_TO_CACHE,
    "dma_lines_to_cache",
    "lines",
    "device line writes placed in a cache (a DSA's copy with cache-control counts the lines it writes)"
);
stat!(
    STEERED_THROUGH_MEMORY,
    "steered_through_memory",
    "lines",
    "device line writes steered into an L2 that found the fabric's queue full: written to DRAM, fetched back by the L2 (counted in dma_lines_to_memory)"
);
stat!(SIMULATED_NS, "simulated_ns", "ns", "simulated time at the end of the run");
stat!(WARMUP_NS, "warmup_ns", "ns", "simulated time before statistics started");
stat!(MEASURED_NS, "measured_ns", "ns", "length of the measured window");
stat!(HOST_SECONDS, "host_seconds", "s", "host time the run took");
stat!(LINE_OPS, "line_ops", "operations", "cache-line operations in the measured window (demand, prefetch, device)");
stat!(SEED, "seed", "seed", "the seed of every random choice");
stat!(
    STALLED_AT,
    "stalled_at_ns",
    "ns",
    "when nothing was left to happen, if the run ran out of events (null: it did not)"
);
stat!(STALL_AGENT, "agent", "name", "the agent that stalled");
stat!(STALL_SINCE, "since_ns", "ns", "when it last made progress");
stat!(STALL_REASON, "reason", "text", "why it cannot go on, or what it was waiting for");

/// The result document of a simulation's measured window (its scenario, its agents and what
/// they share), and its schema.
pub fn collect(
    scenario: &Scenario,
    agents: &[Box<dyn Agent>],
    view: &ReportView,
    stalls: &[Stall],
    ran_dry_at: Option<Time>,
    host_seconds: f64,
) -> (Value, Vec<SchemaEntry>) {
    let window = view.window_ns();
    let hierarchy = view.shared.get::<Hierarchy>();
    let mut root = Report::root();
    root.put(&SCENARIO, scenario.name.clone());
    root.put(&PLATFORM, scenario.platform.name.clone());
    let channels: Vec<_> = hierarchy.memory.stats().collect();
    // What bulk transfers moved, beside the lines: by channel on DDR, by node on HBM (nodes
    // after the DDR ones; the model gives them no channels).
    let bulk = &view.shared.get::<Flows>().traffic;
    let channel_bytes = |i: usize| {
        let flowed = bulk.channels.get(i).copied().unwrap_or_default();
        (channels[i].read_bytes + flowed.read, channels[i].write_bytes + flowed.write)
    };
    let platform = &scenario.platform;
    let hbm: Vec<(usize, ReadWrite)> = (platform.memory.nodes(&platform.topology) as usize
        ..platform.memory_nodes().len())
        .map(|node| (node, bulk.nodes.get(node).copied().unwrap_or_default()))
        .collect();
    let (mut read, mut write) = hbm.iter().fold((0, 0), |(r, w), (_, n)| (r + n.read, w + n.write));
    for i in 0..channels.len() {
        let (r, w) = channel_bytes(i);
        (read, write) = (read + r, write + w);
    }
    root.section("dram", |dram| {
        dram.put(&READ_GBPS, read as f64 / window);
        dram.put(&WRITE_GBPS, write as f64 / window);
        dram.put(&TOTAL_GBPS, (read + write) as f64 / window);
        dram.put(&WRITE_QUEUE_READS, channels.iter().map(|c| c.write_queue_reads).sum::<u64>());
        dram.list("channels", channels.iter().enumerate(), |r, (i, c)| {
            let (read, write) = channel_bytes(i);
            r.put(&CHANNEL_READ_GBPS, read as f64 / window);
            r.put(&CHANNEL_WRITE_GBPS, write as f64 / window);
            r.put(&READ_QUEUE_NS, c.mean_read_queue_ns());
        });
        if !hbm.is_empty() {
            dram.list("hbm", hbm.iter(), |r, (node, bytes)| {
                r.put(&HBM_NODE, *node as u64);
                r.put(&HBM_READ_GBPS, bytes.read as f64 / window);
                r.put(&HBM_WRITE_GBPS, bytes.write as f64 / window);
            });
        }
    });
    // Keys every result has, even without CPUs or devices.
    root.section("cores", |_| {});
    root.section("devices", |_| {});
    for agent in agents {
        agent.report(&mut root, view);
    }
    let stats = &hierarchy.stats;
    root.section("caches", |caches| {
        caches.section("l1d", |r| stats.l1d.report(r));
        caches.section("l2", |r| stats.l2.report(r));
        caches.section("l3", |r| {
            stats.l3.report(r);
            r.put(&L3_RINSES, stats.l3_rinses);
        });
        caches.put(&DMA_TO_MEMORY, stats.dma_lines_to_memory);
        caches.put(&DMA_TO_CACHE, stats.dma_lines_to_cache);
        caches.put(&STEERED_THROUGH_MEMORY, stats.steered_through_memory);
    });
    root.section("sim", |sim| {
        sim.put(&SIMULATED_NS, view.now.as_ns());
        sim.put(&WARMUP_NS, view.window_start.as_ns());
        sim.put(&MEASURED_NS, window);
        sim.put(&HOST_SECONDS, host_seconds);
        sim.put(&LINE_OPS, stats.line_ops);
        sim.put(&SEED, scenario.seed);
        sim.put(&STALLED_AT, ran_dry_at.map(|t| t.as_ns()));
        sim.list("stalls", stalls, |r, stall| {
            r.put(&STALL_AGENT, stall.agent.clone());
            r.put(&STALL_SINCE, stall.since.as_ns());
            r.put(&STALL_REASON, stall.reason.clone());
        });
    });
    root.finish()
}
