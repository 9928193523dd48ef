//! Trace replay speed: generates a deterministic trace, replays it through the three cache levels of
//! turin-9655 and prints line operations per second, from memory and from din and binary files.
//!
//! `cargo bench -p steer-trace --bench trace_replay [-- ACCESSES [mixed|streaming]]` (default
//! 2,000,000 accesses, both traces).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use steer_sim::platform::{self, PlatformSpec, Relation};
use steer_sim::units::Rng;
use steer_trace::{AccessKind, Replayer, TraceRecord};

/// A mix with some locality: a hot 256 KiB set (L2 hits), a sequential stream through 256 MiB
/// (one miss per line, then hits) and random lines over 4 GiB (misses down to DRAM); 30% writes.
/// Makes `accesses` records of a synthetic trace from a seed.
type Generator = fn(usize, u64) -> Vec<TraceRecord>;

fn generate(accesses: usize, seed: u64) -> Vec<TraceRecord> {
    let mut rng = Rng::new(seed);
    let mut stream = 0u64;
    (0..accesses)
        .map(|_| {
            let pick = rng.next_u64() % 100;
            let addr = if pick < 50 {
                (1 << 40) + ((rng.next_u64() % (256 << 10)) & !7)
            } else if pick < 80 {
                stream = (stream + 8) % (256 << 20);
                (2 << 40) + stream
            } else {
                (3 << 40) + ((rng.next_u64() % (4 << 30)) & !7)
            };
            let kind = if rng.next_u64() % 100 < 30 { AccessKind::Write } else { AccessKind::Read };
            TraceRecord { kind, addr, size: 8 }
        })
        .collect()
}

/// A sequential 8-byte sweep through 64 MiB (7 of 8 accesses hit L1), 30% writes: the shape of
/// the streaming loops steer models.
fn generate_stream(accesses: usize, seed: u64) -> Vec<TraceRecord> {
    let mut rng = Rng::new(seed);
    (0..accesses as u64)
        .map(|i| {
            let kind = if rng.next_u64() % 100 < 30 { AccessKind::Write } else { AccessKind::Read };
            TraceRecord { kind, addr: (1 << 40) + (i * 8) % (64 << 20), size: 8 }
        })
        .collect()
}

/// turin-9655 with every level non-inclusive LRU and write hits not refreshing recency: the
/// hierarchy that counts like a pycachesim chain.
fn pycachesim_like() -> PlatformSpec {
    let mut spec = platform::preset("turin-9655").expect("built-in preset");
    for level in [&mut spec.l1d, &mut spec.l2, &mut spec.l3] {
        level.relation = Relation::NonInclusive;
        level.replacement = "lru".into();
        level.write_hit_updates_recency = false;
    }
    spec
}

fn write_din(path: &PathBuf, records: &[TraceRecord]) -> std::io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    for r in records {
        let label = match r.kind {
            AccessKind::Read => 0,
            AccessKind::Write => 1,
            AccessKind::InstructionFetch => 2,
        };
        writeln!(out, "{label} {:x} {}", r.addr, r.size)?;
    }
    out.flush()
}

struct Row {
    case: &'static str,
    line_ops: u64,
    seconds: f64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo bench` passes `--bench`; the positional arguments are the access count and a trace.
    let positional: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let accesses = match positional.first() {
        Some(n) => n.parse().map_err(|_| format!("`{n}` is not an access count"))?,
        None => 2_000_000,
    };
    let only = positional.get(1).map(String::as_str);
    let preset = platform::preset("turin-9655")?;
    let like = pycachesim_like();
    let traces: [(&str, &str, Generator); 2] = [
        ("mixed", "50% hot 256 KiB, 30% streaming, 20% random over 4 GiB; 30% writes", generate),
        ("streaming", "8-byte sweep over 64 MiB; 30% writes", generate_stream),
    ];
    for (name, description, generator) in traces {
        if only.is_some_and(|only| only != name) {
            continue;
        }
        let records = generator(accesses, 1);
        let mut rows = Vec::new();
        for (case, spec) in [("memory, turin-9655 as published", &preset), ("memory, non-inclusive LRU", &like)] {
            let start = Instant::now();
            let mut replayer = Replayer::new(spec, 0)?;
            replayer.access_all(&records);
            let report = replayer.report(start.elapsed().as_secs_f64());
            rows.push(Row { case, line_ops: report.line_ops, seconds: report.host_seconds });
        }

        let dir = std::env::temp_dir();
        let binary = dir.join(format!("steer-bench-{}.trace", std::process::id()));
        let din = dir.join(format!("steer-bench-{}.din", std::process::id()));
        steer_trace::write_binary(File::create(&binary)?, records.iter().copied())?;
        write_din(&din, &records)?;
        for (case, path) in [("binary file, non-inclusive LRU", &binary), ("din file, non-inclusive LRU", &din)] {
            let report = steer_trace::replay_path(path, &like, 0);
            std::fs::remove_file(path)?;
            let report = report?;
            rows.push(Row { case, line_ops: report.line_ops, seconds: report.host_seconds });
        }

        println!("{accesses} accesses, {name}: {description}\n");
        println!("{:<34} {:>12} {:>10} {:>16}", "replay", "line ops", "seconds", "line ops/s");
        for row in rows {
            let rate = row.line_ops as f64 / row.seconds;
            println!("{:<34} {:>12} {:>10.3} {:>14.2} M", row.case, row.line_ops, row.seconds, rate / 1e6);
        }
        println!();
    }
    Ok(())
}
