//! Host figures of the offloading cache, printed as a table:
//! (a) the hit path (`access` + `location`) uncontended and with every CPU hammering one entry;
//! (b) the CPU backend's copy throughput (access of a fresh block to the end of its wait) against
//!     one thread's `memcpy` and every CPU's `memcpy` (the machine's copy bandwidth);
//! (c) a QdP-like query (scan a, prefetch b, aggregate) with and without the cache.
//!
//!     cargo run --release -p steer-offload --example bench

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use steer_offload::{Cache, CpuBackend, Topology};

fn leak(len: usize, seed: u8) -> &'static [u8] {
    Box::leak((0..len).map(|i| (i as u8) ^ seed).collect::<Vec<u8>>().into_boxed_slice())
}

fn cache(threads_per_node: usize) -> Cache {
    let topology = Arc::new(Topology::host());
    Cache::builder(topology.clone()).backend(Arc::new(CpuBackend::new(&topology, threads_per_node))).build().unwrap()
}

/// Nanoseconds per hit from `threads` threads at once (the mean over threads).
fn hit_ns(cache: &Arc<Cache>, block: &'static [u8], threads: usize, iterations: u32) -> f64 {
    cache.access_slice(block).unwrap().wait();
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (cache, barrier) = (cache.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let start = Instant::now();
                for _ in 0..iterations {
                    let data = cache.access_slice(block).unwrap();
                    black_box(data.location());
                }
                start.elapsed().as_nanos() as f64 / f64::from(iterations)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).sum::<f64>() / threads as f64
}

/// GB/s of `threads` threads each copying its share of `len` bytes (destination pages touched first).
fn memcpy_gbs(src: &[u8], threads: usize) -> f64 {
    let mut dst = vec![1u8; src.len()];
    let best = (0..3)
        .map(|_| {
            let start = Instant::now();
            std::thread::scope(|s| {
                let chunk = src.len().div_ceil(threads);
                for (d, s_) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
                    s.spawn(move || d.copy_from_slice(s_));
                }
            });
            start.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min);
    black_box(&dst);
    src.len() as f64 / best / 1e9
}

/// GB/s of the cache copying a fresh block: access, wait (page faults of the entry included).
fn cache_copy_gbs(cache: &Cache, src: &'static [u8]) -> f64 {
    let best = (0..3)
        .map(|_| {
            cache.invalidate(src.as_ptr());
            let start = Instant::now();
            cache.access_slice(src).unwrap().wait();
            start.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min);
    src.len() as f64 / best / 1e9
}

fn qdp_ms(a: &[i32], b: &'static [u8], block_rows: usize, cache: Option<&Cache>) -> (f64, i64) {
    let start = Instant::now();
    let mut total = 0i64;
    for (i, a_block) in a.chunks(block_rows).enumerate() {
        let bytes = &b[i * block_rows * 8..(i * block_rows + a_block.len()) * 8];
        let entry = cache.map(|c| c.access_slice(bytes).unwrap());
        let mask: Vec<bool> = a_block.iter().map(|&x| x < 100).collect();
        let b_block = entry.as_ref().map_or(bytes, |e| e.as_slice());
        for (row, keep) in mask.iter().enumerate() {
            if *keep {
                total += i64::from_le_bytes(b_block[row * 8..row * 8 + 8].try_into().unwrap());
            }
        }
    }
    (start.elapsed().as_secs_f64() * 1e3, total)
}

fn main() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let topology = Topology::host();
    println!(
        "machine: {cpus} CPUs, {} NUMA node(s), {} memory-only; backend cpu (no DSA here)",
        topology.nodes().len(),
        topology.nodes().iter().filter(|n| n.is_memory_only()).count()
    );
    let shared = Arc::new(cache(1));
    let hot = leak(4096, 1);
    println!("hit path (access + location), 1 thread:      {:7.1} ns", hit_ns(&shared, hot, 1, 2_000_000));
    println!("hit path, {cpus} threads on one hot entry:      {:7.1} ns", hit_ns(&shared, hot, cpus, 1_000_000));

    println!(
        "\n{:>10} {:>14} {:>14} {:>14} {:>16}",
        "block",
        "cache GB/s",
        "cache x-thr",
        "memcpy 1 thr",
        format!("memcpy {cpus} thr")
    );
    let per_node = cache(cpus);
    for mib in [1usize, 8, 64, 256] {
        let src = leak(mib << 20, mib as u8);
        println!(
            "{:>7} MiB {:>14.2} {:>14.2} {:>14.2} {:>16.2}",
            mib,
            cache_copy_gbs(&shared, src),
            cache_copy_gbs(&per_node, src),
            memcpy_gbs(src, 1),
            memcpy_gbs(src, cpus)
        );
    }

    let rows = 1 << 23;
    let a: Vec<i32> = (0..rows).map(|i| ((i as u64 * 2_654_435_761) % 1000) as i32).collect();
    let b = leak(rows * 8, 3);
    let (without, sum) = qdp_ms(&a, b, 1 << 16, None);
    let qdp_cache = cache(1);
    let (with, sum_cached) = qdp_ms(&a, b, 1 << 16, Some(&qdp_cache));
    assert_eq!(sum, sum_cached);
    println!("\nQdP-like query over {rows} rows: {without:.1} ms without the cache, {with:.1} ms with it");
}
