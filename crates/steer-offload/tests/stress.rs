//! Many threads doing random access / wait / invalidate / flush / clear over random blocks, on real
//! memory with the CPU backend, for a bounded time: every byte read equals its source, every
//! allocation is freed at the end, and a watchdog fails the test on a deadlock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use steer_offload::{live_allocations, Cache, CpuBackend, Topology};

const THREADS: usize = 8;
const BLOCKS: usize = 48;
const RUN: Duration = Duration::from_millis(1500);
const WATCHDOG: Duration = Duration::from_secs(60);

/// xorshift64*: a deterministic stream per thread.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_operations_from_many_threads_read_the_source_bytes_and_leak_nothing() {
    let topology = Arc::new(Topology::host());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let blocks: Vec<&'static [u8]> = (0..BLOCKS)
        .map(|_| {
            let len = 1 + rng.below(300_000);
            let seed = rng.next() as u8;
            &*Box::leak((0..len).map(|i| (i as u8) ^ seed).collect::<Vec<u8>>().into_boxed_slice())
        })
        .collect();
    // Room for about a sixth of the blocks on each node: flushes and uncached accesses happen.
    let capacity = blocks.iter().map(|b| b.len()).sum::<usize>() / 6;
    let mut builder = Cache::builder(topology.clone()).backend(Arc::new(CpuBackend::new(&topology, 2)));
    for node in 0..topology.nodes().len() {
        builder = builder.capacity(node, capacity);
    }
    let cache = Arc::new(builder.build().unwrap());
    let (stop, checked) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let (done_tx, done_rx) = mpsc::channel();
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (cache, blocks, stop, checked, done) =
                (cache.clone(), blocks.clone(), stop.clone(), checked.clone(), done_tx.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(t as u64 * 7919 + 1);
                let mut held = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let block = blocks[rng.below(BLOCKS)];
                    match rng.below(100) {
                        0..=69 => {
                            let data = cache.access_slice(block).unwrap();
                            if rng.below(2) == 0 {
                                assert_eq!(data.as_slice(), block, "bytes read through the cache");
                                checked.fetch_add(1, Ordering::Relaxed);
                            }
                            held.push(data);
                        }
                        70..=84 => {
                            if let Some(data) = held.pop() {
                                assert_eq!(data.as_slice(), data_source(&data), "bytes of a held entry");
                                checked.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        85..=92 => cache.invalidate(block.as_ptr()),
                        93..=97 => cache.flush(None).unwrap(),
                        _ => cache.clear(),
                    }
                    if held.len() > 4 {
                        held.remove(rng.below(held.len()));
                    }
                }
                drop(held);
                done.send(()).unwrap();
            })
        })
        .collect();
    let start = Instant::now();
    std::thread::sleep(RUN);
    stop.store(true, Ordering::Relaxed);
    for _ in 0..THREADS {
        done_rx.recv_timeout(WATCHDOG.saturating_sub(start.elapsed())).expect("a worker is stuck: deadlock");
    }
    workers.into_iter().for_each(|w| w.join().unwrap());
    let stats = cache.stats();
    assert!(stats.misses > 0 && stats.hits > 0, "{stats:?}");
    assert!(checked.load(Ordering::Relaxed) > 100);
    assert!(live_allocations() > 0, "the cache holds its entries' buffers until dropped");
    drop(cache);
    // Copy threads drop their last references just after finishing; give them a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    while live_allocations() != 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(live_allocations(), 0, "every entry buffer is freed");
    eprintln!("stress: {stats:?}, {} reads checked", checked.load(Ordering::Relaxed));
}

/// The source bytes of an entry.
fn data_source(data: &steer_offload::CacheData) -> &'static [u8] {
    // SAFETY: every source in this test is a leaked block of the entry's length.
    unsafe { std::slice::from_raw_parts(data.source(), data.len()) }
}
