//! The kernels. Each single-core kernel runs on a thread of its own pinned to the CPU it is given
//! (the caller's affinity is left alone), makes an untimed pass over its data, then times its loop.

use std::hint::black_box;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::{check_bytes, check_min_ns, invalid, pin_current_thread, Buffer};

const LINE: u64 = 64;
const WORDS_PER_LINE: usize = 8;

/// The seed of the random kernels' generator.
pub const RANDOM_SEED: u64 = 0x2545_F491_4F6C_DD1D;

/// Marsaglia's xorshift64: three dependent shift-xor pairs per number, the whole index
/// computation of the random kernel (the simulator charges it as such).
#[derive(Debug, Clone)]
pub struct XorShift64(u64);

impl XorShift64 {
    pub fn new(seed: u64) -> XorShift64 {
        XorShift64(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number below `n`, by multiply-shift (no division on the way).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Runs `f` on a new thread pinned to `cpu` and returns its result.
fn on_cpu<T: Send>(cpu: u32, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                pin_current_thread(cpu)?;
                f()
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("a probe thread panicked")))
    })
}

/// Runs `body(count)` for count = 64, 128, ... until one run lasts `min_ns`; ns per element.
fn per_element(min_ns: u64, mut body: impl FnMut(u64)) -> f64 {
    counts_until(min_ns, |count| {
        let start = Instant::now();
        body(count);
        start.elapsed().as_nanos() as u64
    })
}

/// `per_element`'s schedule, given `run(count)`, which does `count` elements and says how many
/// ns they took.
fn counts_until(min_ns: u64, mut run: impl FnMut(u64) -> u64) -> f64 {
    let mut count = 64u64;
    loop {
        let ns = run(count);
        if ns >= min_ns || count >= 1 << 40 {
            return ns.max(1) as f64 / count as f64;
        }
        // Most of the way there in one step once a run is long enough to extrapolate from.
        count = if ns > 1_000_000 { (count as f64 * 1.2 * min_ns as f64 / ns as f64) as u64 } else { count * 2 };
    }
}

/// Sattolo's shuffle: `next[i]` follows line `i` on one cycle through all `lines` lines.
pub(crate) fn random_cycle(lines: usize, rng: &mut XorShift64) -> Vec<u32> {
    let mut order: Vec<u32> = (0..lines as u32).collect();
    for i in (1..lines).rev() {
        order.swap(i, rng.below(i as u64) as usize);
    }
    let mut next = vec![0; lines];
    for (k, &line) in order.iter().enumerate() {
        next[line as usize] = order[(k + 1) % lines];
    }
    next
}

/// Dependent loads around one random cycle through the working set's lines (each line holds the
/// index of the next), followed by `chains` cursors spread evenly along the cycle and advanced in
/// turn; ns per load. One chain measures load-to-use latency; many measure how many misses a
/// core keeps in flight (latency over the time per load) with no prefetcher able to help.
pub fn chase_ns(cpu: u32, working_set: u64, chains: u32, min_ns: u64) -> io::Result<f64> {
    check_bytes("working_set", working_set)?;
    check_min_ns(min_ns)?;
    let lines = (working_set / LINE) as usize;
    if chains == 0 || chains as usize > lines.min(256) {
        return Err(invalid("chains", format!("must be 1 to min(256, lines) = {} (got {chains})", lines.min(256))));
    }
    on_cpu(cpu, || {
        let mut buffer = Buffer::new(working_set)?;
        let next = random_cycle(lines, &mut XorShift64::new(RANDOM_SEED));
        link_lines(buffer.words_mut(), &next);
        let mut cursors = chain_starts(&next, chains as usize);
        drop(next);
        let words = buffer.words();
        let mut chase = |count: u64| {
            for _ in 0..count {
                for cursor in cursors.iter_mut() {
                    *cursor = words[*cursor] as usize;
                }
            }
            black_box(&cursors);
        };
        chase(lines as u64 / chains as u64);
        Ok(per_element(min_ns, chase) / chains as f64)
    })
}

/// Writes into the first word of each line the word index of the line `next` says follows it.
fn link_lines(words: &mut [u64], next: &[u32]) {
    for (line, &following) in next.iter().enumerate() {
        words[line * WORDS_PER_LINE] = following as u64 * WORDS_PER_LINE as u64;
    }
}

/// Word indices of `chains` cursors spread evenly along the cycle `next` from line 0: every
/// (lines / chains)-th line of the cycle.
fn chain_starts(next: &[u32], chains: usize) -> Vec<usize> {
    let cycle = std::iter::successors(Some(0usize), |&at| Some(next[at] as usize));
    cycle.step_by(next.len() / chains).take(chains).map(|line| line * WORDS_PER_LINE).collect()
}

/// What a bandwidth kernel does with its working set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Sum every word.
    Read,
    /// Store a value that varies with the index (so the loop stays ordinary stores: a compiler
    /// would turn a constant fill into memset, which streams large fills past the caches).
    Write,
    /// `copy_from_slice` (libc memcpy, as applications copy) from one half to the other; counted
    /// once, as the bytes copied.
    Copy,
}

impl Access {
    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Copy => "copy",
        }
    }
}

impl std::str::FromStr for Access {
    type Err = io::Error;
    fn from_str(text: &str) -> io::Result<Access> {
        [Access::Read, Access::Write, Access::Copy]
            .into_iter()
            .find(|a| a.name() == text)
            .ok_or_else(|| invalid("access", format!("`{text}` is not read, write or copy")))
    }
}

/// Bytes a thread works through before looking at the clock.
const CHUNK: usize = 64 << 10;

/// One chunk of work; returns the bytes it moved.
fn work(access: Access, words: &mut [u64], chunk: usize, base: u64) -> u64 {
    let words_per_chunk = CHUNK / 8;
    match access {
        Access::Read => {
            let part = &words[chunk * words_per_chunk..((chunk + 1) * words_per_chunk).min(words.len())];
            let mut sums = [0u64; 8];
            for block in part.chunks_exact(8) {
                for (sum, word) in sums.iter_mut().zip(block) {
                    *sum = sum.wrapping_add(*word);
                }
            }
            black_box(sums);
            part.len() as u64 * 8
        }
        Access::Write => {
            let end = ((chunk + 1) * words_per_chunk).min(words.len());
            let part = &mut words[chunk * words_per_chunk..end];
            for (i, word) in part.iter_mut().enumerate() {
                *word = base.wrapping_add(i as u64);
            }
            black_box(part);
            (end - chunk * words_per_chunk) as u64 * 8
        }
        Access::Copy => {
            let (from, to) = words.split_at_mut(words.len() / 2);
            let start = chunk * words_per_chunk;
            let end = ((chunk + 1) * words_per_chunk).min(to.len());
            to[start..end].copy_from_slice(&from[start..end]);
            black_box(&to[start..end]);
            (end - start) as u64 * 8
        }
    }
}

/// Chunks in a pass over a working set of `words` words.
fn chunks(access: Access, words: usize) -> usize {
    let covered = if access == Access::Copy { words / 2 } else { words };
    (covered * 8).div_ceil(CHUNK).max(1)
}

/// Bandwidth of all of `cpus` together, each thread pinned to one and working through a buffer
/// of `working_set` bytes of its own, from a common start until `min_ns` have passed; total
/// bytes over the time to the last thread's end, in GB/s.
pub fn bandwidth_gbs(access: Access, working_set: u64, cpus: &[u32], min_ns: u64) -> io::Result<f64> {
    check_bytes("working_set", working_set)?;
    check_min_ns(min_ns)?;
    if cpus.is_empty() {
        return Err(invalid("cpus", "must name at least one CPU"));
    }
    let start_line = Barrier::new(cpus.len());
    let failed = AtomicBool::new(false);
    let started: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let results: Vec<io::Result<(u64, Instant)>> = std::thread::scope(|scope| {
        let threads: Vec<_> = cpus
            .iter()
            .map(|&cpu| {
                let (start_line, failed, started) = (&start_line, &failed, &started);
                scope.spawn(move || {
                    let mut prepared = pin_current_thread(cpu).and_then(|_| Buffer::new(working_set));
                    match &mut prepared {
                        Ok(memory) => {
                            for chunk in 0..chunks(access, memory.words().len()) {
                                work(access, memory.words_mut(), chunk, 0);
                            }
                        }
                        Err(_) => failed.store(true, Ordering::SeqCst),
                    }
                    // Every thread reaches the start line, so none waits for one that failed.
                    start_line.wait();
                    let mut memory = prepared?;
                    if failed.load(Ordering::SeqCst) {
                        return Err(io::Error::other("another bandwidth thread could not start"));
                    }
                    let begin = *started.get_or_init(Instant::now);
                    let deadline = begin + Duration::from_nanos(min_ns);
                    let per_pass = chunks(access, memory.words().len());
                    let (mut bytes, mut chunk, mut pass) = (0u64, 0usize, 1u64);
                    loop {
                        bytes += work(access, memory.words_mut(), chunk, pass);
                        chunk += 1;
                        if chunk == per_pass {
                            (chunk, pass) = (0, pass + 1);
                        }
                        if Instant::now() >= deadline {
                            return Ok((bytes, Instant::now()));
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap_or_else(|_| Err(io::Error::other("a thread panicked")))).collect()
    });
    let mut total = 0u64;
    let mut end = None::<Instant>;
    for result in results {
        let (bytes, finished) = result?;
        total += bytes;
        end = Some(end.map_or(finished, |e| e.max(finished)));
    }
    let begin = *started.get().expect("the threads started");
    let ns = end.expect("at least one thread").duration_since(begin).as_nanos().max(1) as f64;
    Ok(total as f64 / ns)
}

/// The core clock as observed: chains of four dependent one-cycle adds per iteration, so an
/// iteration takes four cycles whatever the core's width; GHz. None where there is no such loop.
/// The addend is a register: recent Intel cores fold chains of immediate adds at rename (such a
/// loop showed 16 "GHz" on a Sapphire Rapids guest).
pub fn clock_ghz(cpu: u32, min_ns: u64) -> io::Result<Option<f64>> {
    check_min_ns(min_ns)?;
    on_cpu(cpu, || {
        let adds = |count: u64| add_chain(count);
        adds(1 << 16);
        Ok(add_chain_available().then(|| 4.0 / per_element(min_ns, adds)))
    })
}

#[cfg(target_arch = "x86_64")]
fn add_chain(count: u64) {
    let mut x = 0u64;
    // SAFETY: register-only arithmetic and a loop on a counter; no memory is touched.
    unsafe {
        std::arch::asm!(
            "2:",
            "add {x}, {one}",
            "add {x}, {one}",
            "add {x}, {one}",
            "add {x}, {one}",
            "dec {n}",
            "jnz 2b",
            x = inout(reg) x,
            one = in(reg) black_box(1u64),
            n = inout(reg) count.max(1) => _,
            options(nomem, nostack),
        );
    }
    black_box(x);
}

#[cfg(target_arch = "aarch64")]
fn add_chain(count: u64) {
    let mut x = 0u64;
    // SAFETY: register-only arithmetic and a loop on a counter; no memory is touched.
    unsafe {
        std::arch::asm!(
            "2:",
            "add {x}, {x}, {one}",
            "add {x}, {x}, {one}",
            "add {x}, {x}, {one}",
            "add {x}, {x}, {one}",
            "subs {n}, {n}, 1",
            "b.ne 2b",
            x = inout(reg) x,
            one = in(reg) black_box(1u64),
            n = inout(reg) count.max(1) => _,
            options(nomem, nostack),
        );
    }
    black_box(x);
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn add_chain(_count: u64) {}

fn add_chain_available() -> bool {
    cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
}

fn check_count(what: &str, count: u64) -> io::Result<()> {
    if count == 0 {
        return Err(invalid(what, "must be at least 1"));
    }
    Ok(())
}

/// A receive-like loop: a ring of `buffers` buffers of `buffer_bytes`, each copied in ring order
/// into one reused buffer, then a word of the copy read; ns per buffer.
pub fn ring_copy_ns(cpu: u32, buffers: u64, buffer_bytes: u64, min_ns: u64) -> io::Result<f64> {
    check_count("buffers", buffers)?;
    check_bytes("buffer_bytes", buffer_bytes)?;
    check_bytes("ring bytes", buffers.saturating_mul(buffer_bytes))?;
    check_min_ns(min_ns)?;
    on_cpu(cpu, || {
        let ring = Buffer::new(buffers * buffer_bytes)?;
        let mut app = vec![0u8; buffer_bytes as usize];
        let mut at = 0usize;
        let mut copy = |count: u64| {
            for _ in 0..count {
                at = copy_one(ring.bytes(), &mut app, at, buffer_bytes as usize);
            }
        };
        copy(buffers);
        Ok(per_element(min_ns, copy))
    })
}

/// Copies buffer `at` of the ring into `app`, reads a word of the copy; returns the next buffer.
pub(crate) fn copy_one(ring: &[u8], app: &mut [u8], at: usize, size: usize) -> usize {
    app.copy_from_slice(&ring[at * size..(at + 1) * size]);
    black_box(black_box(&*app)[0]);
    if (at + 1) * size + size > ring.len() {
        0
    } else {
        at + 1
    }
}

/// Independent 8-byte loads at random lines of the working set (the next address never waits
/// for a load, so misses overlap); ns per load. The line of load k is `below(lines)` of the k-th
/// number of `XorShift64::new(RANDOM_SEED)`.
pub fn random_reads_ns(cpu: u32, working_set: u64, min_ns: u64) -> io::Result<f64> {
    check_bytes("working_set", working_set)?;
    check_min_ns(min_ns)?;
    on_cpu(cpu, || {
        let buffer = Buffer::new(working_set)?;
        let words = buffer.words();
        let lines = working_set / LINE;
        let mut rng = XorShift64::new(RANDOM_SEED);
        let mut reads = |count: u64| {
            let mut sum = 0u64;
            for _ in 0..count {
                sum = sum.wrapping_add(words[rng.below(lines) as usize * WORDS_PER_LINE]);
            }
            black_box(sum);
        };
        reads(lines);
        Ok(per_element(min_ns, reads))
    })
}

/// Reads one word every `stride` bytes through the working set, wrapping, software-prefetching
/// the word `prefetch_distance` strides ahead when that is not 0; ns per word read.
pub fn strided_scan_ns(
    cpu: u32,
    working_set: u64,
    stride: u64,
    prefetch_distance: u64,
    min_ns: u64,
) -> io::Result<f64> {
    check_bytes("working_set", working_set)?;
    check_min_ns(min_ns)?;
    if stride == 0 || !stride.is_multiple_of(8) || stride > working_set {
        return Err(invalid("stride", format!("must be a multiple of 8 from 8 to the working set (got {stride})")));
    }
    on_cpu(cpu, || {
        let buffer = Buffer::new(working_set)?;
        let words = buffer.words();
        let step = (stride / 8) as usize;
        let elements = (working_set / stride) as usize;
        let distance = prefetch_distance as usize % elements;
        let (mut at, mut ahead) = (0usize, distance);
        let mut scan = |count: u64| {
            let mut sum = 0u64;
            for _ in 0..count {
                if prefetch_distance > 0 {
                    prefetch(&words[ahead * step]);
                    ahead = if ahead + 1 == elements { 0 } else { ahead + 1 };
                }
                sum = sum.wrapping_add(words[at * step]);
                at = if at + 1 == elements { 0 } else { at + 1 };
            }
            black_box(sum);
        };
        scan(elements as u64);
        Ok(per_element(min_ns, scan))
    })
}

/// A software prefetch of the line holding `word` into the L1D.
#[inline(always)]
fn prefetch(word: &u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults and changes no state the program sees.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(word as *const u64 as *const i8)
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above; `prfm` reads nothing into registers and cannot fault.
    unsafe {
        std::arch::asm!("prfm pldl1keep, [{0}]", in(reg) word as *const u64, options(nostack, readonly, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = word;
}

/// The value that tells a partner thread (`with_partner`) to stop.
const STOP: u64 = u64::MAX;

/// A cache line of its own for the value the two threads pass.
#[repr(align(128))]
struct Shared(AtomicU64);

/// Runs `partner` on a thread pinned to `partner_cpu` and `main` on this thread pinned to `cpu`,
/// both starting once both are pinned. When `main` ends, `stop` is set to `STOP`, which `partner`
/// watches for. `role` names the partner thread in errors.
fn with_partner<T>(
    cpu: u32,
    partner_cpu: u32,
    role: &str,
    stop: &AtomicU64,
    partner: impl FnOnce() -> io::Result<()> + Send,
    main: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    let both_pinned = Barrier::new(2);
    let failed = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let helper = scope.spawn(|| {
            let pinned = pin_current_thread(partner_cpu);
            if pinned.is_err() {
                failed.store(true, Ordering::SeqCst);
            }
            both_pinned.wait();
            pinned?;
            partner()
        });
        let pinned = pin_current_thread(cpu);
        if pinned.is_err() {
            failed.store(true, Ordering::SeqCst);
        }
        both_pinned.wait();
        let measured = pinned.and_then(|_| {
            if failed.load(Ordering::SeqCst) {
                return Err(io::Error::other(format!("cpu {partner_cpu}: the {role} thread could not be pinned")));
            }
            main()
        });
        stop.store(STOP, Ordering::Release);
        let helped = helper.join().unwrap_or_else(|_| Err(io::Error::other(format!("the {role} thread panicked"))));
        let value = measured?;
        helped.map(|_| value)
    })
}

/// Two threads pinned to `cpu_a` and `cpu_b` pass one cache line back and forth: A writes an odd
/// value and waits for the next even one, B waits for the odd one and writes the next; ns per
/// round trip (two transfers of a written line between the cores).
pub fn handoff_ns(cpu_a: u32, cpu_b: u32, min_ns: u64) -> io::Result<f64> {
    check_min_ns(min_ns)?;
    if cpu_a == cpu_b {
        return Err(invalid("cpu_b", format!("must differ from cpu_a ({cpu_a})")));
    }
    let line = Shared(AtomicU64::new(0));
    let answer = || {
        let mut expect = 1;
        loop {
            match line.0.load(Ordering::Acquire) {
                STOP => return Ok(()),
                value if value == expect => {
                    line.0.store(value + 1, Ordering::Release);
                    expect += 2;
                }
                _ => std::hint::spin_loop(),
            }
        }
    };
    let measure = || {
        let mut value = 0u64;
        let mut trips = |count: u64| {
            for _ in 0..count {
                line.0.store(value + 1, Ordering::Release);
                while line.0.load(Ordering::Acquire) != value + 2 {
                    std::hint::spin_loop();
                }
                value += 2;
            }
        };
        trips(1000);
        Ok(per_element(min_ns, trips))
    };
    with_partner(cpu_a, cpu_b, "answering", &line.0, answer, measure)
}

/// One 64-byte line of a producer/consumer buffer, aligned to a line.
#[repr(align(64))]
struct BufferLine([AtomicU64; 8]);

/// The most bytes one producer/consumer buffer may have.
pub const MAX_HANDOFF_BUFFER: u64 = 1 << 20;

/// A receive path's pattern between two cores: a thread on `producer_cpu` writes every word of a
/// buffer of `buffer_bytes`, then hands it over by writing a flag; a thread on `consumer_cpu`,
/// spinning on the flag, sums every word of the buffer and hands it back by writing the flag. ns
/// per buffer: the producer's writes, the consumer's reads of lines the producer holds modified,
/// and the two flag transfers.
pub fn producer_consumer_ns(producer_cpu: u32, consumer_cpu: u32, buffer_bytes: u64, min_ns: u64) -> io::Result<f64> {
    check_min_ns(min_ns)?;
    if producer_cpu == consumer_cpu {
        return Err(invalid("consumer_cpu", format!("must differ from producer_cpu ({producer_cpu})")));
    }
    if !(64..=MAX_HANDOFF_BUFFER).contains(&buffer_bytes) || !buffer_bytes.is_multiple_of(64) {
        return Err(invalid("buffer_bytes", format!("must be a multiple of 64 from 64 to 1 MiB (got {buffer_bytes})")));
    }
    let lines: Vec<BufferLine> = (0..buffer_bytes / 64).map(|_| BufferLine(Default::default())).collect();
    let words: Vec<&AtomicU64> = lines.iter().flat_map(|line| &line.0).collect();
    let flag = Shared(AtomicU64::new(0));
    let consume = || {
        let mut expect = 1;
        let mut sum = 0u64;
        loop {
            match flag.0.load(Ordering::Acquire) {
                STOP => {
                    std::hint::black_box(sum);
                    return Ok(());
                }
                value if value == expect => {
                    sum = words.iter().fold(sum, |sum, word| sum.wrapping_add(word.load(Ordering::Relaxed)));
                    flag.0.store(value + 1, Ordering::Release);
                    expect += 2;
                }
                _ => std::hint::spin_loop(),
            }
        }
    };
    let measure = || {
        let mut value = 0u64;
        let mut buffers = |count: u64| {
            for _ in 0..count {
                for word in &words {
                    word.store(value, Ordering::Relaxed);
                }
                flag.0.store(value + 1, Ordering::Release);
                while flag.0.load(Ordering::Acquire) != value + 2 {
                    std::hint::spin_loop();
                }
                value += 2;
            }
        };
        buffers(100);
        Ok(per_element(min_ns, buffers))
    };
    with_partner(producer_cpu, consumer_cpu, "consuming", &flag.0, consume, measure)
}

/// Lines the writer dirties each round of `peer_read_ns`: few enough to stay in its L1.
pub const PEER_LINES: usize = 64;

/// A thread on `writer_cpu` writes `PEER_LINES` lines (128 bytes apart, so no two share an
/// adjacent-line prefetch), then a thread on `reader_cpu` follows them as one dependent chain in a
/// random order; rounds repeat until the reads took `min_ns`. ns per read of a line another core
/// holds modified: the core-to-core transfer a consumer pays, timed on the reader only.
pub fn peer_read_ns(reader_cpu: u32, writer_cpu: u32, min_ns: u64) -> io::Result<f64> {
    check_min_ns(min_ns)?;
    if reader_cpu == writer_cpu {
        return Err(invalid("writer_cpu", format!("must differ from reader_cpu ({reader_cpu})")));
    }
    let next = random_cycle(PEER_LINES, &mut XorShift64::new(RANDOM_SEED));
    let lines: Vec<Shared> = (0..PEER_LINES).map(|_| Shared(AtomicU64::new(0))).collect();
    // Even: the writer's turn to dirty the lines (round = turn / 2); odd: the reader's to read them.
    let turn = Shared(AtomicU64::new(0));
    let write = || {
        let mut round = 0u64;
        loop {
            match turn.0.load(Ordering::Acquire) {
                STOP => return Ok(()),
                t if t == 2 * round => {
                    // The next index, tagged with the round so every store changes the line.
                    for (line, &following) in lines.iter().zip(&next) {
                        line.0.store(u64::from(following) | (round << 32), Ordering::Relaxed);
                    }
                    // The reader may have finished (STOP) meanwhile: then this store must not undo it.
                    if turn.0.compare_exchange(t, t + 1, Ordering::AcqRel, Ordering::Acquire).is_err() {
                        return Ok(());
                    }
                    round += 1;
                }
                _ => std::hint::spin_loop(),
            }
        }
    };
    let read = || {
        let (mut reads, mut spent) = (0u64, 0u64);
        let mut t = 1;
        while spent < min_ns || reads < 64 * PEER_LINES as u64 {
            while turn.0.load(Ordering::Acquire) != t {
                std::hint::spin_loop();
            }
            let start = Instant::now();
            let mut at = 0usize;
            for _ in 0..PEER_LINES {
                at = (lines[at].0.load(Ordering::Relaxed) & 0xffff_ffff) as usize;
            }
            spent += start.elapsed().as_nanos() as u64;
            black_box(at);
            reads += PEER_LINES as u64;
            turn.0.store(t + 1, Ordering::Release);
            t += 2;
        }
        Ok(spent as f64 / reads as f64)
    };
    with_partner(reader_cpu, writer_cpu, "writing", &turn.0, write, read)
}

/// Working sets from `from` to `to` bytes, `per_octave` a doubling, rounded to whole lines.
pub fn sizes(from: u64, to: u64, per_octave: u32) -> Vec<u64> {
    if from == 0 || to < from || per_octave == 0 {
        return Vec::new();
    }
    let steps = ((to as f64 / from as f64).log2() * per_octave as f64).round().max(1.0) as u32;
    let mut found: Vec<u64> = (0..=steps)
        .map(|i| {
            ((from as f64 * (to as f64 / from as f64).powf(i as f64 / steps as f64)) as u64 / LINE * LINE).max(LINE)
        })
        .collect();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn cpu() -> u32 {
        crate::allowed_cpus()[0]
    }

    #[test]
    fn xorshift_gives_marsaglias_sequence() {
        let mut rng = XorShift64::new(1);
        // x = 1: x ^= x << 13 (0x2001); x ^= x >> 7 (0x2041); x ^= x << 17 (0x40822041).
        assert_eq!(rng.next_u64(), 0x4082_2041);
        assert_eq!(XorShift64::new(0).next_u64(), 0x4082_2041, "a zero seed would stay zero: it is 1");
        // Later outputs, where the shifted copies overlap (worked with Python's integers).
        assert_eq!(rng.next_u64(), 0x1000_4106_0c01_1441);
        assert_eq!(rng.next_u64(), 0x9b1e_842f_6e86_2629);
        // below(n) is the high word of the next output times n.
        let mut rng = XorShift64::new(1);
        assert_eq!((0..5).map(|_| rng.below(10)).collect::<Vec<_>>(), [0, 0, 6, 9, 5]);
        let mut rng = XorShift64::new(RANDOM_SEED);
        assert!((0..1000).all(|_| rng.below(10) < 10));
    }

    /// Counts double until a run lasts 1 ms, then jump most of the way (1.2 times the rest) to
    /// `min_ns`; the figure is the last run's ns over its count.
    #[test]
    fn runs_grow_until_one_lasts_min_ns() {
        let mut counts = Vec::new();
        let ns_per = counts_until(10 * MS, |count| {
            counts.push(count);
            3 * count
        });
        assert_eq!(ns_per, 3.0);
        let doubling: Vec<u64> = (0..14).map(|k| 64 << k).collect();
        // 524,288 elements take 1.57 ms: next 524,288 x 1.2 x 10 / 1.572864 = 4,000,000.
        assert_eq!(counts, [doubling, vec![4_000_000]].concat());
        // Exactly min_ns ends it; a run of 0 ns counts as 1 ns; no count goes past 2^40.
        assert_eq!(counts_until(64 * 5, |count| 5 * count), 5.0);
        assert_eq!(counts_until(0, |_| 0), 1.0 / 64.0);
        let mut last = 0;
        assert_eq!(
            counts_until(u64::MAX, |count| {
                last = count;
                1
            }),
            1.0 / last as f64
        );
        assert_eq!(last, 1 << 40);
    }

    /// The chase's lines point to the word of the line that follows, and its cursors start
    /// evenly along the cycle (in cycle order, not line order).
    #[test]
    fn chase_lines_link_the_cycle_and_cursors_spread_along_it() {
        let next = [3, 0, 4, 5, 1, 2, 7, 6];
        let mut words = vec![u64::MAX; next.len() * WORDS_PER_LINE];
        link_lines(&mut words, &next);
        for (line, &following) in next.iter().enumerate() {
            assert_eq!(words[line * WORDS_PER_LINE], following as u64 * 8);
            assert!(words[line * WORDS_PER_LINE + 1..(line + 1) * WORDS_PER_LINE].iter().all(|&w| w == u64::MAX));
        }
        // A cycle 0 -> 1 -> ... -> 9 -> 0 in shuffled line order.
        let order = [0u32, 7, 2, 9, 4, 1, 6, 3, 8, 5];
        let mut next = [0u32; 10];
        for (k, &line) in order.iter().enumerate() {
            next[line as usize] = order[(k + 1) % 10];
        }
        let lines_of = |starts: Vec<usize>| starts.into_iter().map(|w| w / WORDS_PER_LINE).collect::<Vec<_>>();
        assert_eq!(lines_of(chain_starts(&next, 1)), [0]);
        assert_eq!(lines_of(chain_starts(&next, 2)), [0, 1]);
        assert_eq!(lines_of(chain_starts(&next, 3)), [0, 9, 6]);
        assert_eq!(lines_of(chain_starts(&next, 4)), [0, 2, 4, 6]);
        assert_eq!(lines_of(chain_starts(&next, 10)), order.map(|line| line as usize));
    }

    /// A chunk of work moves its part of the working set and counts its bytes, the last chunk
    /// being short; a copy goes from the first half to the second.
    #[test]
    fn a_chunk_of_work_touches_its_part_and_counts_its_bytes() {
        let per_chunk = CHUNK / 8;
        let mut words: Vec<u64> = (0..2 * per_chunk as u64 + 8).collect();
        assert_eq!(chunks(Access::Read, words.len()), 3);
        assert_eq!(work(Access::Read, &mut words, 1, 0), CHUNK as u64);
        assert_eq!(work(Access::Read, &mut words, 2, 0), 64);
        assert_eq!(work(Access::Write, &mut words, 2, 100), 64);
        assert_eq!(words[2 * per_chunk..], [100, 101, 102, 103, 104, 105, 106, 107]);
        assert_eq!(work(Access::Write, &mut words, 0, 7), CHUNK as u64);
        assert!(words[..per_chunk].iter().enumerate().all(|(i, &w)| w == 7 + i as u64));
        assert_eq!(words[per_chunk], per_chunk as u64, "the next chunk is left alone");

        let half = per_chunk + 4;
        let mut words: Vec<u64> = (0..2 * half as u64).collect();
        assert_eq!(chunks(Access::Copy, words.len()), 2);
        assert_eq!(work(Access::Copy, &mut words, 1, 0), 32);
        assert_eq!(
            words[half + per_chunk..],
            [per_chunk as u64, per_chunk as u64 + 1, per_chunk as u64 + 2, per_chunk as u64 + 3]
        );
        assert_eq!(words[half], half as u64, "chunk 0 not copied yet");
        assert_eq!(work(Access::Copy, &mut words, 0, 0), CHUNK as u64);
        assert!(words[half..half + per_chunk].iter().enumerate().all(|(i, &w)| w == i as u64));
    }

    #[test]
    fn the_random_cycle_visits_every_line_once() {
        for lines in [1, 2, 3, 64, 1000] {
            let next = random_cycle(lines, &mut XorShift64::new(RANDOM_SEED));
            let mut seen = vec![false; lines];
            let mut at = 0usize;
            for _ in 0..lines {
                assert!(!seen[at], "line {at} twice in {lines}");
                seen[at] = true;
                at = next[at] as usize;
            }
            assert_eq!(at, 0);
        }
    }

    #[test]
    fn sizes_are_geometric_and_line_aligned() {
        assert_eq!(sizes(4096, 65536, 1), [4096, 8192, 16384, 32768, 65536]);
        assert_eq!(sizes(4096, 16384, 2), [4096, 5760, 8192, 11584, 16384]);
        assert_eq!(sizes(4096, 4096, 3), [4096]);
        assert!(sizes(0, 10, 1).is_empty() && sizes(100, 10, 1).is_empty());
    }

    #[test]
    fn a_ring_copy_step_copies_its_buffer_and_wraps() {
        let ring: Vec<u8> = (0..12).collect();
        let mut app = [0u8; 4];
        assert_eq!(copy_one(&ring, &mut app, 0, 4), 1);
        assert_eq!(app, [0, 1, 2, 3]);
        assert_eq!(copy_one(&ring, &mut app, 2, 4), 0);
        assert_eq!(app, [8, 9, 10, 11]);
    }

    #[test]
    fn every_kernel_gives_a_finite_positive_figure() {
        let positive = |x: f64| assert!(x.is_finite() && x > 0.0, "{x}");
        positive(chase_ns(cpu(), 16 << 10, 1, MS).unwrap());
        positive(chase_ns(cpu(), 16 << 10, 8, MS).unwrap());
        for access in ["read", "write", "copy"] {
            positive(bandwidth_gbs(access.parse().unwrap(), 64 << 10, &[cpu()], MS).unwrap());
        }
        positive(ring_copy_ns(cpu(), 8, 2048, MS).unwrap());
        positive(random_reads_ns(cpu(), 64 << 10, MS).unwrap());
        positive(strided_scan_ns(cpu(), 64 << 10, 256, 0, MS).unwrap());
        positive(strided_scan_ns(cpu(), 64 << 10, 256, 16, MS).unwrap());
        if add_chain_available() {
            positive(clock_ghz(cpu(), MS).unwrap().unwrap());
        }
    }

    #[test]
    fn two_cpus_pass_a_line_or_say_why_not() {
        let cpus = crate::allowed_cpus();
        if cpus.len() < 2 {
            eprintln!("one CPU only: no handoff");
            return;
        }
        let ns = handoff_ns(cpus[0], cpus[1], MS).unwrap();
        assert!(ns.is_finite() && ns > 0.0);
        // Times are not compared here (tests share the CPUs); calibrate reports them.
        let peer = peer_read_ns(cpus[0], cpus[1], MS).unwrap();
        assert!(peer.is_finite() && peer > 0.0, "{peer}");
        let handed = producer_consumer_ns(cpus[0], cpus[1], 2048, MS).unwrap();
        assert!(handed.is_finite() && handed > 0.0, "{handed}");
        #[cfg(target_os = "linux")]
        {
            let error = handoff_ns(cpus[0], 1 << 20, MS).unwrap_err();
            assert!(error.to_string().contains("cpu 1048576"), "{error}");
            let error = peer_read_ns(cpus[0], 1 << 20, MS).unwrap_err();
            assert!(error.to_string().contains("cpu 1048576: the writing thread could not be pinned"), "{error}");
        }
    }

    #[test]
    fn bad_input_names_the_argument() {
        let said = |r: io::Result<f64>| {
            let e = r.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            e.to_string()
        };
        assert!(said(chase_ns(0, 8, 1, MS)).starts_with("working_set: must be 64 B"));
        assert!(said(chase_ns(0, 4096, 1, 61_000_000_000)).starts_with("min_ns: must be at most 60 s"));
        assert!(said(chase_ns(0, 4096, 0, MS)).starts_with("chains: must be 1 to min(256, lines) = 64 (got 0)"));
        assert!(said(chase_ns(0, 4096, 65, MS)).starts_with("chains"));
        assert!(said(strided_scan_ns(0, 4096, 12, 0, MS)).starts_with("stride: must be a multiple of 8"));
        assert!(said(strided_scan_ns(0, 4096, 0, 0, MS)).starts_with("stride"));
        assert!(said(ring_copy_ns(0, 0, 2048, MS)).starts_with("buffers: must be at least 1"));
        assert!(said(bandwidth_gbs(Access::Read, 4096, &[], MS)).starts_with("cpus: must name"));
        assert!(said(handoff_ns(1, 1, MS)).starts_with("cpu_b: must differ"));
        assert!(said(peer_read_ns(1, 1, MS)).starts_with("writer_cpu: must differ from reader_cpu (1)"));
        assert!(said(peer_read_ns(0, 1, 61_000_000_000)).starts_with("min_ns"));
        assert!(
            said(producer_consumer_ns(1, 1, 2048, MS)).starts_with("consumer_cpu: must differ from producer_cpu (1)")
        );
        for bytes in [0, 100, 2 << 20] {
            let said = said(producer_consumer_ns(0, 1, bytes, MS));
            assert!(said.starts_with("buffer_bytes: must be a multiple of 64 from 64 to 1 MiB"), "{said}");
        }
        assert_eq!("fill".parse::<Access>().unwrap_err().to_string(), "access: `fill` is not read, write or copy");
    }
}
