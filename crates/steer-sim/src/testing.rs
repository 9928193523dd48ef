//! Shared pieces of unit tests: a tiny platform with round latencies, and rings to feed programs.

use crate::devices::ring::{Completion, Recycle, RingId, RingMemory, RingShape, RingSignals, Rings, RxRing};
use crate::engine::Shared;
use crate::engine::{Harness, Signal};
use crate::platform::{CacheSpec, CoreSpec, MemorySpec, PlatformSpec, Relation, TopologySpec};
use crate::units::{Addr, Time};

/// One CCX of two cores at 1 GHz (a cycle is 1 ns), one thread each: L1 1 KiB 2-way (4 cycles),
/// L2 4 KiB 4-way (14 cycles), L3 16 KiB 4-way exclusive (40 cycles), one DRAM channel of
/// 64 GB/s (a line takes 1 ns) with 100 ns idle latency. Issue 1 cycle per line, 4 misses in flight.
pub fn tiny_platform() -> PlatformSpec {
    let cache = |size_kib, ways, latency_cycles, relation| CacheSpec {
        size_kib,
        ways,
        latency_cycles,
        relation,
        ..CacheSpec::default()
    };
    let platform = PlatformSpec {
        topology: TopologySpec { sockets: 1, ccx_per_socket: 1, cores_per_ccx: 2, threads_per_core: 1 },
        core: CoreSpec { freq_ghz: 1.0, outstanding_misses: 4, issue_cycles_per_line: 1.0, ..CoreSpec::default() },
        l1d: cache(1, 2, 4.0, Relation::Inclusive),
        l2: cache(4, 4, 14.0, Relation::Inclusive),
        l3: cache(16, 4, 40.0, Relation::Exclusive),
        memory: MemorySpec { channels_per_node: 1, channel_gbs: 64.0, idle_latency_ns: 100.0, ..MemorySpec::default() },
        ..PlatformSpec::default()
    };
    platform.validate("platform").unwrap();
    platform
}

/// Signals of the ring `ring_harness` makes: completions ready, and the device's doorbell.
pub const READY: Signal = Signal(0);
pub const DOORBELL: Signal = Signal(1);
/// The ring's TX room signal.
pub const SENT: Signal = Signal(5);
/// Signals in all; 2 to 4 are free for a test's own use.
pub const SIGNALS: u32 = 6;

/// A harness on the tiny platform with one ring of `entries` descriptors and `pool` buffers of
/// 4 KiB at 0x10_0000 (buffer i at 0x10_0000 + 4096 i), consumed by CPU 0; descriptor ring at
/// 0x1000 (16 B each), TX descriptor ring at 0x2000, completion ring at 0x3000 (16 B entries).
pub fn ring_harness(entries: u32, pool: u32, recycle: Recycle) -> (Harness, RingId) {
    let mut shared = Shared::new(&tiny_platform(), 0);
    let shape =
        RingShape { entries, descriptor_bytes: 16, completion_bytes: 16, recycle, consumer_cpu: 0, tx_entries: 0 };
    let memory = RingMemory {
        buffers: (0..pool as u64).map(|i| Addr(0x10_0000 + i * 4096)).collect(),
        descriptor_ring: Addr(0x1000),
        tx_descriptor_ring: Addr(0x2000),
        completion_ring: Addr(0x3000),
    };
    let ring =
        RxRing::new("nic0 queue 0".into(), shape, memory, RingSignals { ready: READY, doorbell: DOORBELL, sent: SENT });
    let id = shared.get_or_default::<Rings>().add("nic0", ring);
    (Harness::new(shared, SIGNALS), id)
}

/// Delivers a packet of `bytes` arriving at `arrival`, visible at `ready`, as a NIC would;
/// returns its completion.
pub fn deliver(harness: &mut Harness, ring: RingId, bytes: u32, arrival: Time, ready: Time) -> Completion {
    let ring = &mut harness.shared.get_mut::<Rings>()[ring.0 as usize];
    let buffer = ring.accept(bytes, true).expect("a posted buffer");
    let completion = Completion { buffer, bytes, ready, entry: ring.next_completion_entry(), arrival };
    ring.complete(completion);
    completion
}

pub fn ns(t: f64) -> Time {
    Time::from_ns(t)
}
