//! The cache's behaviour against a manual backend: the test decides when each copy job runs.

use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use steer_offload::policy::{CopyPolicy, Placement, PlacementRequest};
use steer_offload::{Backend, Cache, CacheData, CopyJob, Error, Node, Stats, Topology};

/// Holds every job until the test runs or fails it.
#[derive(Default)]
struct Manual {
    jobs: Mutex<Vec<CopyJob>>,
}

impl Backend for Manual {
    fn name(&self) -> &'static str {
        "manual"
    }
    fn copy(&self, job: CopyJob) {
        self.jobs.lock().unwrap().push(job);
    }
}

impl Manual {
    /// (engine, len) of every job waiting.
    fn waiting(&self) -> Vec<(usize, usize)> {
        self.jobs.lock().unwrap().iter().map(|j| (j.engine, j.len)).collect()
    }
    fn run_all(&self) {
        let jobs: Vec<_> = self.jobs.lock().unwrap().drain(..).collect();
        jobs.into_iter().for_each(CopyJob::copy_here);
    }
    fn fail_first(&self) {
        let job = self.jobs.lock().unwrap().remove(0);
        job.finish(false);
    }
}

/// Two sockets, each a compute node (0, 1) and an HBM node (2, 3).
fn topology() -> Arc<Topology> {
    let node =
        |id: usize, cpus: Vec<usize>, socket, distances: Vec<u32>| Node { id, cpus, bytes: 1 << 30, socket, distances };
    Arc::new(
        Topology::new(vec![
            node(0, vec![0], 0, vec![10, 21, 13, 23]),
            node(1, vec![1], 1, vec![21, 10, 23, 13]),
            node(2, vec![], 0, vec![13, 23, 10, 23]),
            node(3, vec![], 1, vec![23, 13, 23, 10]),
        ])
        .unwrap(),
    )
}

/// A cache placing every block on its source's HBM node, with the manual backend.
fn cache(capacity: usize) -> (Cache, Arc<Manual>) {
    let manual = Arc::new(Manual::default());
    let cache = Cache::builder(topology())
        .placement(|_: &Topology, r: PlacementRequest| 2 + r.src_node)
        .copy_policy(|_: &Topology, _, _| vec![0, 1])
        .backend(manual.clone())
        .capacity(2, capacity)
        .capacity(3, capacity)
        .build()
        .unwrap();
    (cache, manual)
}

fn block(len: usize, seed: u8) -> &'static [u8] {
    Box::leak((0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect::<Vec<_>>().into_boxed_slice())
}

fn access(cache: &Cache, block: &'static [u8]) -> CacheData {
    // SAFETY: a leaked block lives for the whole test.
    unsafe { cache.access_from(block.as_ptr(), block.len(), 0) }.unwrap()
}

#[test]
fn a_miss_submits_one_job_per_engine_and_a_hit_shares_the_entry() {
    let (cache, manual) = cache(1 << 20);
    let src = block(1000, 1);
    let first = access(&cache, src);
    assert_eq!(manual.waiting(), [(0, 512), (1, 488)], "whole lines to the first engine, the rest to the last");
    assert!(!first.is_ready());
    let second = access(&cache, src);
    assert_eq!(manual.waiting().len(), 2, "a hit submits nothing");
    assert_eq!(first.node(), 2);
    manual.run_all();
    assert!(second.is_ready());
    assert_eq!(first.location(), second.location(), "one entry for both holders");
    assert_ne!(first.location(), src.as_ptr());
    assert_eq!(first.as_slice(), src);
    assert_eq!(cache.stats(), Stats { hits: 1, misses: 1, uncached: 0, evicted: 0 });
    assert_eq!(cache.occupancy(2).unwrap(), (1, 1000));
}

#[test]
fn waiting_sleeps_until_the_last_part_finishes() {
    let (cache, manual) = cache(1 << 20);
    let data = access(&cache, block(4096, 2));
    let (tx, rx) = mpsc::channel();
    let waiter = {
        let data = data.clone();
        std::thread::spawn(move || {
            data.wait();
            tx.send(()).unwrap();
        })
    };
    assert!(rx.recv_timeout(Duration::from_millis(50)).is_err(), "no part has finished");
    let job = manual.jobs.lock().unwrap().remove(0);
    job.copy_here();
    assert!(rx.recv_timeout(Duration::from_millis(50)).is_err(), "one part of two has finished");
    manual.run_all();
    rx.recv_timeout(Duration::from_secs(10)).expect("the waiter wakes");
    waiter.join().unwrap();
    assert!(data.is_cached());
}

#[test]
fn a_failed_part_leaves_the_entry_at_its_source() {
    let (cache, manual) = cache(1 << 20);
    let src = block(256, 3);
    let data = access(&cache, src);
    manual.fail_first();
    manual.run_all();
    assert_eq!(data.location(), src.as_ptr());
    assert!(!data.is_cached());
    assert_eq!(data.as_slice(), src);
}

#[test]
fn a_job_the_backend_drops_counts_as_failed_and_wakes_the_waiters() {
    let (cache, manual) = cache(1 << 20);
    let src = block(128, 4);
    let data = access(&cache, src);
    manual.jobs.lock().unwrap().clear();
    assert_eq!(data.location(), src.as_ptr());
}

#[test]
fn memory_pressure_flushes_unused_entries_and_serves_the_rest_from_the_source() {
    let (cache, manual) = cache(2048);
    let (a, b, c) = (block(1024, 5), block(1024, 6), block(1024, 7));
    let held_a = access(&cache, a);
    let held_b = access(&cache, b);
    manual.run_all();
    let c_entry = access(&cache, c);
    assert!(!c_entry.is_cached(), "both entries are held: no room");
    assert_eq!(c_entry.as_slice(), c);
    drop(held_a);
    let c_entry = access(&cache, c);
    manual.run_all();
    assert!(c_entry.is_cached(), "a's entry was unused and flushed");
    assert_eq!(cache.stats().evicted, 1);
    assert_eq!(cache.stats().uncached, 1);
    assert_eq!(cache.occupancy(2).unwrap(), (2, 2048));
    assert!(held_b.is_cached());
}

#[test]
fn flush_keeps_held_entries_and_clear_leaves_holders_their_data() {
    let (cache, manual) = cache(1 << 20);
    let (a, b) = (block(512, 8), block(512, 9));
    let held = access(&cache, a);
    drop(access(&cache, b));
    manual.run_all();
    cache.flush(Some(2)).unwrap();
    assert_eq!(cache.occupancy(2).unwrap(), (1, 512), "b was unused");
    cache.clear();
    assert_eq!(cache.occupancy(2).unwrap(), (0, 0));
    assert_eq!(held.as_slice(), a, "clearing has no effect on a holder");
    assert!(held.is_cached());
    assert!(matches!(cache.flush(Some(9)), Err(Error::NoSuchNode { node: 9, .. })));
}

#[test]
fn invalidation_makes_the_next_access_copy_again() {
    let (cache, manual) = cache(1 << 20);
    let src = block(64, 10);
    let old = access(&cache, src);
    manual.run_all();
    cache.invalidate(src.as_ptr());
    assert_eq!(cache.occupancy(2).unwrap(), (0, 0));
    let new = access(&cache, src);
    assert_eq!(manual.waiting().len(), 1, "a new copy");
    manual.run_all();
    assert_ne!(old.location(), new.location());
    assert_eq!(cache.stats().misses, 2);
}

#[test]
fn the_same_pointer_with_another_length_is_another_entry() {
    let (cache, manual) = cache(1 << 20);
    let src = block(4096, 11);
    let short = access(&cache, &src[..1024]);
    let long = access(&cache, src);
    manual.run_all();
    assert_eq!((short.len(), long.len()), (1024, 4096));
    assert_eq!(long.as_slice(), src);
    assert_eq!(cache.occupancy(2).unwrap(), (1, 4096));
}

#[test]
fn any_holder_submits_a_copy_its_inserter_has_not() {
    // The inserter's `submit` happens inside `access`; a holder that waits on an entry nobody
    // submitted submits it itself: shown at the entry's level by the unit tests of `entry`, and
    // here end to end: waiting from many threads at once completes with one copy.
    let (cache, manual) = cache(1 << 20);
    let src = block(8192, 12);
    let data = access(&cache, src);
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let data = data.clone();
            std::thread::spawn(move || data.as_slice().to_vec())
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    manual.run_all();
    for waiter in waiters {
        assert_eq!(waiter.join().unwrap(), src);
    }
}

#[test]
fn bad_requests_are_errors_not_crashes() {
    let (cache, _) = cache(4096);
    // SAFETY: the null and zero-sized blocks are refused before any read.
    unsafe {
        assert_eq!(cache.access_from(std::ptr::null(), 64, 0).err(), Some(Error::NullBlock));
        assert_eq!(cache.access_from([0u8].as_ptr(), 0, 0).err(), Some(Error::EmptyBlock));
        assert!(matches!(cache.access_from([0u8].as_ptr(), 1, 7), Err(Error::NoSuchNode { node: 7, .. })));
    }
    let big = block(8192, 13);
    // SAFETY: a leaked block.
    let too_big = unsafe { cache.access_from(big.as_ptr(), big.len(), 0) }.err().unwrap();
    assert_eq!(too_big.to_string(), "a block of 8192 bytes exceeds node 2's cache capacity of 4096 bytes");

    let to_nowhere =
        Cache::builder(topology()).placement(|_: &Topology, _| 9).backend(Arc::new(Manual::default())).build().unwrap();
    // SAFETY: a leaked block.
    let err = unsafe { to_nowhere.access_from(big.as_ptr(), 64, 0) }.err().unwrap();
    assert_eq!(err.to_string(), "the placement policy names NUMA node 9, which this machine does not have");

    let hbm_engine = Cache::builder(topology())
        .placement(|_: &Topology, _| 2)
        .copy_policy(|_: &Topology, _, _| vec![3])
        .backend(Arc::new(Manual::default()))
        .build()
        .unwrap();
    // SAFETY: a leaked block.
    assert!(matches!(unsafe { hbm_engine.access_from(big.as_ptr(), 64, 0) }, Err(Error::NoSuchNode { node: 3, .. })));

    let builder = || Cache::builder(topology()).backend(Arc::new(Manual::default()));
    assert!(matches!(builder().capacity(4, 1).build(), Err(Error::NoSuchNode { node: 4, .. })));
    assert!(matches!(builder().capacity(1, 0).build(), Err(Error::BadConfig(_))));
}

#[test]
fn capacities_default_to_a_quarter_of_each_node_or_one_gib_where_unknown() {
    let node = |id: usize, bytes| Node { id, cpus: vec![id], bytes, socket: 0, distances: vec![10, 20] };
    let topology = Arc::new(Topology::new(vec![node(0, 4 << 30), node(1, 0)]).unwrap());
    let cache = Cache::builder(topology).backend(Arc::new(Manual::default())).capacity(1, 5000).build().unwrap();
    assert_eq!(cache.capacity(0).unwrap(), 1 << 30);
    assert_eq!(cache.capacity(1).unwrap(), 5000);
    let unknown =
        Cache::builder(Arc::new(Topology::single_node(1, 0))).backend(Arc::new(Manual::default())).build().unwrap();
    assert_eq!(unknown.capacity(0).unwrap(), 1 << 30);
    assert!(cache.capacity(2).is_err());
}

#[test]
fn the_backend_is_named_and_a_missing_dsa_is_explained() {
    let (cache, _) = cache(4096);
    assert_eq!(cache.backend(), "manual");
    assert_eq!(cache.backend_note(), "");
    let cpu = Cache::from_names(None, None, Some("cpu")).unwrap();
    assert_eq!(cpu.backend(), "cpu");
    let auto = Cache::from_names(None, None, None).unwrap();
    if auto.backend() == "cpu" {
        assert!(auto.backend_note().starts_with("dsa backend unavailable: "), "{}", auto.backend_note());
        assert!(auto.backend_note().ends_with("; using cpu"));
    }
    assert!(matches!(Cache::from_names(None, None, Some("gpu")), Err(Error::UnknownName { what: "backend", .. })));
    assert!(matches!(Cache::from_names(Some("x"), None, None), Err(Error::UnknownName { what: "placement", .. })));
    assert!(matches!(Cache::from_names(None, Some("x"), None), Err(Error::UnknownName { what: "copy policy", .. })));
}

#[test]
fn a_placement_that_reads_the_source_node_gets_the_one_given() {
    let (cache, manual) = cache(1 << 20);
    let src = block(64, 14);
    // SAFETY: a leaked block.
    let data = unsafe { cache.access_from(src.as_ptr(), src.len(), 1) }.unwrap();
    assert_eq!(data.node(), 3, "source node 1's HBM node");
    assert!(data.len() == 64 && !data.is_empty());
    manual.run_all();
}

/// Engines 0 and 1, with a split the test chooses.
struct Split(fn(usize) -> Vec<usize>);
impl CopyPolicy for Split {
    fn engines(&self, _: &Topology, _: usize, _: usize) -> Vec<usize> {
        vec![0, 1]
    }
    fn split(&self, _: &[usize], len: usize) -> Vec<usize> {
        (self.0)(len)
    }
}

#[test]
fn a_copy_policy_split_must_cover_the_block_and_empty_shares_submit_nothing() {
    let with = |split| {
        let manual = Arc::new(Manual::default());
        let cache = Cache::builder(topology())
            .placement(|_: &Topology, _| 2)
            .copy_policy(Split(split))
            .backend(manual.clone())
            .build()
            .unwrap();
        // SAFETY: a leaked block.
        let result = unsafe { cache.access_from(block(1000, 15).as_ptr(), 1000, 0) };
        (result.map(|_| ()), manual.waiting())
    };
    assert_eq!(with(|len| vec![len, 0]), (Ok(()), vec![(0, 1000)]));
    assert_eq!(with(|len| vec![0, len]), (Ok(()), vec![(1, 1000)]));
    let short = with(|len| vec![len - 1]).0.unwrap_err();
    assert_eq!(short.to_string(), "the copy policy's split [999] does not cover 1000 bytes");
    assert!(matches!(with(|len| vec![len, 0, 0]).0, Err(Error::BadConfig(_))), "more shares than engines");
}

#[test]
fn a_consumer_named_by_the_caller_is_placed_for_and_jobs_carry_the_destination() {
    let manual = Arc::new(Manual::default());
    let cache = Cache::builder(topology())
        .placement(|_: &Topology, r: PlacementRequest| 2 + r.consumer_node)
        .copy_policy(|_: &Topology, _, _| vec![0])
        .backend(manual.clone())
        .build()
        .unwrap();
    let src = block(4096, 9);
    // SAFETY: a leaked block lives for the whole test.
    let data = unsafe { cache.access_at(src.as_ptr(), src.len(), 0, 1) }.unwrap();
    assert_eq!(data.node(), 3);
    let nodes: Vec<_> = manual.jobs.lock().unwrap().iter().map(|j| (j.engine, j.dst_node)).collect();
    assert_eq!(nodes, [(0, 3)]);
    for (src_node, consumer) in [(4, 0), (0, 4)] {
        // SAFETY: as above.
        let err = unsafe { cache.access_at(src.as_ptr(), src.len(), src_node, consumer) }.err().unwrap();
        assert!(matches!(err, Error::NoSuchNode { node: 4, .. }), "{err}");
    }
    manual.run_all();
}

#[test]
fn a_source_on_no_known_node_is_placed_as_if_on_the_consumers_and_the_policies_say_whether_they_ask() {
    // The calling thread's CPU is below 4096, so on node 1 whichever CPU it runs on; CPU 4096
    // (node 0's) exists nowhere. A topology not read from the host knows no page's node.
    let node =
        |id: usize, cpus: Vec<usize>, distances: Vec<u32>| Node { id, cpus, bytes: 1 << 30, socket: id % 2, distances };
    let topology = Topology::new(vec![
        node(0, vec![4096], vec![10, 21, 13, 23]),
        node(1, (0..4096).collect(), vec![21, 10, 23, 13]),
        node(2, vec![], vec![13, 23, 10, 23]),
        node(3, vec![], vec![23, 13, 23, 10]),
    ])
    .unwrap();
    let source_hbm = steer_offload::policy::placement("source-hbm").unwrap();
    let manual = Arc::new(Manual::default());
    let cache = Cache::builder(Arc::new(topology))
        .placement(source_hbm)
        .copy_policy(|_: &Topology, _, _| vec![1])
        .backend(manual.clone())
        .build()
        .unwrap();
    let src = block(64, 21);
    // SAFETY: a leaked block lives for the whole test.
    let data = unsafe { cache.access(src.as_ptr(), src.len()) }.unwrap();
    assert_eq!(data.node(), 3, "the HBM node nearest the consumer's node, 1");
    let shown = format!("{data:?}");
    assert!(
        shown.starts_with("CacheData { source: 0x") && shown.ends_with(", len: 64, node: 3, ready: false }"),
        "{shown}"
    );
    manual.run_all();
    assert!(format!("{data:?}").ends_with("ready: true }"));
    let asks = |name| steer_offload::policy::placement(name).unwrap().needs_source_node();
    assert_eq!([asks("nearest-hbm"), asks("consumer-node"), asks("source-hbm")], [false, false, true]);
}
