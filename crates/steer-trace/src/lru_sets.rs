//! LRU levels kept as sets of entries in recency order, compact enough that a replay's caches
//! stay in the host's: `LruSets`, used by `SingleCore` (see `single_core`) for every LRU level
//! of up to 16 ways and a power-of-two number of sets. A replay in order looks lines up and
//! fills them (`LruSets::access`, `LruSets::insert`); a replay by level runs a level's requests
//! in one pass (`LruSets::run_pass`), its sets searched and rewritten by a `SetKernel`.

use super::pass::{Pass, Victim, PREFETCH_DISTANCE};
use steer_sim::cache::Geometry;

// How an LRU set makes the victim a pass records (`Victim` is the pass's, in `pass`).
impl Victim {
    /// What a request that did (`hit`) or did not find its line pushed out of a set whose last
    /// way held `last` (see `Entry::use_or_fill`), `line` giving the line of a tag: dirty only
    /// if a miss pushed out a dirty line.
    #[inline(always)]
    pub(super) fn of_last_way<E: Entry>(hit: bool, last: E, line: impl FnOnce(u64) -> u64) -> Victim {
        let entry: u64 = last.into();
        Victim { line: line(entry >> 1), dirty: !hit & (last != E::EMPTY) & (entry & 1 == 1) }
    }
}

/// Most ways an LRU level keeps in `LruSets`.
pub(super) const SET_WAYS: usize = 16;

/// A set entry: a line's tag shifted left by one, with its dirty bit in bit 0; all ones is empty.
///
/// The operations on a set are plain loops over its entries by default. 32-bit entries on x86-64
/// search a set, and rewrite it on a hit, as four aligned 16-byte quarters (`quarters`), the size
/// and places the next lookup reads it in: a set written in other pieces cannot be forwarded from
/// the store buffer to that lookup, which waits for the stores to reach the host's cache instead,
/// and the accesses of a group of sets meet their few L1 sets back to back (a trace whose
/// accesses all hit L1 replays some 17% faster). A miss's insertion keeps the loop, which is
/// cheaper: the lookup after a miss comes late enough.
pub(super) trait Entry: Copy + Eq + Into<u64> {
    const EMPTY: Self;
    /// Largest tag an entry holds (the empty pattern is no tag).
    const MAX_TAG: u64;
    /// The entry of a tag, dirty bit set: what an entry matches once its own dirty bit is set.
    fn key(tag: u64) -> Self;
    fn matches(self, key: Self) -> bool;
    fn clean(self) -> Self;
    fn dirty(self) -> Self;

    /// Bit `i` set where `entries[i]` matches `key`.
    #[inline(always)]
    fn matching(entries: &[Self; SET_WAYS], key: Self) -> u32 {
        entries.iter().enumerate().fold(0, |found, (i, entry)| found | (entry.matches(key) as u32) << i)
    }

    /// Puts `entry` first, the entries before `way` one place back, over the one at `way`.
    #[inline(always)]
    fn move_to_front(entries: &mut [Self; SET_WAYS], way: usize, entry: Self) {
        // Every entry is written, so that the loop becomes vector selects rather than branches.
        let old = *entries;
        for i in 1..SET_WAYS {
            entries[i] = if i <= way { old[i - 1] } else { old[i] };
        }
        entries[0] = entry;
    }

    /// Puts `entry` first and every other entry one place back, the entries from `ways` on
    /// empty; returns the entry that was at `ways - 1` (empty while the set had room).
    #[inline(always)]
    fn push_front(entries: &mut [Self; SET_WAYS], ways: usize, entry: Self) -> Self {
        let pushed_out = entries[ways - 1];
        let old = *entries;
        entries[1..].copy_from_slice(&old[..SET_WAYS - 1]);
        entries[0] = entry;
        if ways < SET_WAYS {
            entries[ways] = Self::EMPTY;
        }
        pushed_out
    }

    /// Takes out the entry at `way`, moving the later ones one place forward.
    #[inline(always)]
    fn take(entries: &mut [Self; SET_WAYS], way: usize) -> Self {
        let old = *entries;
        for i in 0..SET_WAYS - 1 {
            entries[i] = if i >= way { old[i + 1] } else { old[i] };
        }
        entries[SET_WAYS - 1] = Self::EMPTY;
        old[way]
    }

    /// Sets the dirty bit of the entry at `way`.
    #[inline(always)]
    fn mark_dirty(entries: &mut [Self; SET_WAYS], way: usize) {
        entries[way] = entries[way].dirty();
    }

    /// A request to the set of `ways` ways holding `entries`, as a level that sees nothing but
    /// its requests carries it out (see `LruSets::run_pass`); returns whether it hit and the
    /// entry that was in the last way. 32-bit entries are searched and rewritten by `K`. With
    /// `CLEAN`, the caller knows that every entry is clean and the request a read (so that no
    /// victim can be dirty), and the entry returned is meaningless.
    #[inline(always)]
    fn use_or_fill<K: SetKernel, const CLEAN: bool>(
        entries: &mut [Self; SET_WAYS],
        key: Self,
        write: bool,
        ways: usize,
        use_on_write: bool,
    ) -> (bool, Self) {
        use_or_fill_in_place(entries, key, write, ways, use_on_write)
    }

    /// The entries, if they are 32-bit ones.
    fn narrow(entries: &mut [Self; SET_WAYS]) -> Option<&mut [u32; SET_WAYS]>;
}

/// `Entry::use_or_fill` with the set operations of `Entry`, without a branch on the outcome.
#[inline(always)]
fn use_or_fill_in_place<E: Entry>(
    entries: &mut [E; SET_WAYS],
    key: E,
    write: bool,
    ways: usize,
    use_on_write: bool,
) -> (bool, E) {
    let found = E::matching(entries, key);
    let hit = found != 0;
    // A miss takes the last way: no match lies beyond it.
    let way = (found | 1 << (ways - 1)).trailing_zeros() as usize;
    let (old, last) = (entries[way], entries[ways - 1]);
    if hit && write && !use_on_write {
        E::mark_dirty(entries, way);
    } else {
        let entry = std::hint::select_unpredictable(hit, old, key.clean());
        E::move_to_front(entries, way, std::hint::select_unpredictable(write, entry.dirty(), entry));
    }
    (hit, last)
}

/// How a replay run level by level searches and rewrites a set of 32-bit entries (see
/// `Entry::use_or_fill`): with the portable operations of `Entry`, or with AVX-512 (`Avx512`,
/// on hosts that have it), a set in one register.
pub(super) trait SetKernel {
    /// A set as the kernel holds it while it works on it.
    type Register: Copy;
    fn load(entries: &[u32; SET_WAYS]) -> Self::Register;
    fn store(entries: &mut [u32; SET_WAYS], set: Self::Register);
    /// `Entry::use_or_fill` on a set held in a register: returns the set after it too.
    fn use_or_fill<const CLEAN: bool>(
        set: Self::Register,
        key: u32,
        write: bool,
        ways: usize,
        use_on_write: bool,
    ) -> (Self::Register, bool, u32);
}

/// `SetKernel` of the portable set operations (for tests of replays by level on any host).
#[cfg(test)]
pub(super) struct Portable;

#[cfg(test)]
impl SetKernel for Portable {
    type Register = [u32; SET_WAYS];

    #[inline(always)]
    fn load(entries: &[u32; SET_WAYS]) -> [u32; SET_WAYS] {
        *entries
    }

    #[inline(always)]
    fn store(entries: &mut [u32; SET_WAYS], set: [u32; SET_WAYS]) {
        *entries = set;
    }

    #[inline(always)]
    fn use_or_fill<const CLEAN: bool>(
        mut set: [u32; SET_WAYS],
        key: u32,
        write: bool,
        ways: usize,
        use_on_write: bool,
    ) -> ([u32; SET_WAYS], bool, u32) {
        let (hit, last) = use_or_fill_in_place(&mut set, key, write, ways, use_on_write);
        (set, hit, last)
    }
}

macro_rules! entry {
    ($t:ty $(, $operation:item)*) => {
        impl Entry for $t {
            const EMPTY: $t = <$t>::MAX;
            const MAX_TAG: u64 = (<$t>::MAX >> 1) as u64 - 1;
            #[inline(always)]
            fn key(tag: u64) -> $t {
                (tag << 1 | 1) as $t
            }
            #[inline(always)]
            fn matches(self, key: $t) -> bool {
                self | 1 == key
            }
            #[inline(always)]
            fn clean(self) -> $t {
                self & !1
            }
            #[inline(always)]
            fn dirty(self) -> $t {
                self | 1
            }
            $($operation)*
        }
    };
}

entry!(
    u64,
    fn narrow(_: &mut [u64; SET_WAYS]) -> Option<&mut [u32; SET_WAYS]> {
        None
    }
);

/// The operations of 32-bit entries that do not depend on the host.
macro_rules! narrow_entry {
    ($($operation:item),*) => {
        entry!(
            u32,
            #[inline(always)]
            fn use_or_fill<K: SetKernel, const CLEAN: bool>(
                entries: &mut [u32; SET_WAYS],
                key: u32,
                write: bool,
                ways: usize,
                use_on_write: bool,
            ) -> (bool, u32) {
                let (set, hit, last) = K::use_or_fill::<CLEAN>(K::load(entries), key, write, ways, use_on_write);
                K::store(entries, set);
                (hit, last)
            },
            fn narrow(entries: &mut [u32; SET_WAYS]) -> Option<&mut [u32; SET_WAYS]> {
                Some(entries)
            }
            $(, $operation)*
        );
    };
}

#[cfg(not(target_arch = "x86_64"))]
narrow_entry!();
#[cfg(target_arch = "x86_64")]
narrow_entry!(
    #[inline(always)]
    fn matching(entries: &[u32; SET_WAYS], key: u32) -> u32 {
        quarters::matching(entries, key)
    },
    #[inline(always)]
    fn move_to_front(entries: &mut [u32; SET_WAYS], way: usize, entry: u32) {
        quarters::move_to_front(entries, way, entry);
    },

    #[inline(always)]
    fn mark_dirty(entries: &mut [u32; SET_WAYS], way: usize) {
        quarters::mark_dirty(entries, way);
    }
);

/// Set operations of 32-bit entries with SSE2 (part of every x86-64 CPU), a set as four 16-byte
/// quarters of four entries, read and written whole (see `Entry`).
#[cfg(target_arch = "x86_64")]
mod quarters {
    use std::arch::x86_64::*;

    use super::SET_WAYS;

    /// Sixteen lanes of 32 bits, aligned as a set is.
    #[derive(Clone, Copy)]
    #[repr(C, align(64))]
    struct Lanes([u32; SET_WAYS]);

    /// `BELOW[n]`: all ones in the lanes before `n`.
    static BELOW: [Lanes; SET_WAYS + 1] = {
        let mut below = [Lanes([0; SET_WAYS]); SET_WAYS + 1];
        let mut n = 0;
        while n <= SET_WAYS {
            let mut lane = 0;
            while lane < n {
                below[n].0[lane] = u32::MAX;
                lane += 1;
            }
            n += 1;
        }
        below
    };

    type Quarters = [__m128i; 4];

    // SAFETY (every `unsafe` below): SSE2 is always available on x86-64, and each load or store
    // covers one quarter of the 16 entries of the array it is given.
    #[inline(always)]
    fn load(entries: &[u32; SET_WAYS]) -> Quarters {
        let at = |q: usize| unsafe { _mm_loadu_si128(entries[4 * q..].as_ptr().cast()) };
        [at(0), at(1), at(2), at(3)]
    }

    #[inline(always)]
    fn store(entries: &mut [u32; SET_WAYS], [q0, q1, q2, q3]: Quarters) {
        let pointer = entries.as_mut_ptr();
        unsafe {
            _mm_storeu_si128(pointer.cast(), q0);
            _mm_storeu_si128(pointer.add(4).cast(), q1);
            _mm_storeu_si128(pointer.add(8).cast(), q2);
            _mm_storeu_si128(pointer.add(12).cast(), q3);
        }
    }

    /// Lanes where `mask` is all ones from `a`, the others from `b`.
    #[inline(always)]
    fn select(mask: &Lanes, a: Quarters, b: Quarters) -> Quarters {
        let [m0, m1, m2, m3] = load(&mask.0);
        let pick = |m, a, b| unsafe { _mm_or_si128(_mm_and_si128(m, a), _mm_andnot_si128(m, b)) };
        [pick(m0, a[0], b[0]), pick(m1, a[1], b[1]), pick(m2, a[2], b[2]), pick(m3, a[3], b[3])]
    }

    /// Every entry one lane up, `first` in lane 0.
    #[inline(always)]
    fn shifted_back([q0, q1, q2, q3]: Quarters, first: u32) -> Quarters {
        unsafe {
            [
                _mm_or_si128(_mm_slli_si128::<4>(q0), _mm_cvtsi32_si128(first as i32)),
                _mm_or_si128(_mm_slli_si128::<4>(q1), _mm_srli_si128::<12>(q0)),
                _mm_or_si128(_mm_slli_si128::<4>(q2), _mm_srli_si128::<12>(q1)),
                _mm_or_si128(_mm_slli_si128::<4>(q3), _mm_srli_si128::<12>(q2)),
            ]
        }
    }

    /// Four comparisons of four entries each (the compiler does not vectorise the bit mask).
    #[inline(always)]
    pub fn matching(entries: &[u32; SET_WAYS], key: u32) -> u32 {
        unsafe {
            let (key, dirty_bit) = (_mm_set1_epi32(key as i32), _mm_set1_epi32(1));
            load(entries).into_iter().enumerate().fold(0, |found, (q, quarter)| {
                let equal = _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_or_si128(quarter, dirty_bit), key));
                found | (_mm_movemask_ps(equal) as u32) << (4 * q)
            })
        }
    }

    #[inline(always)]
    pub fn move_to_front(entries: &mut [u32; SET_WAYS], way: usize, entry: u32) {
        let old = load(entries);
        store(entries, select(&BELOW[way + 1], shifted_back(old, entry), old));
    }

    #[inline(always)]
    pub fn mark_dirty(entries: &mut [u32; SET_WAYS], way: usize) {
        // Bit 0 of lane `way`, in the quarter holding it.
        let quarter = &mut entries[way & !3..][..4];
        unsafe {
            let lane = _mm_and_si128(_mm_loadu_si128(BELOW[way % 4 + 1].0.as_ptr().cast()), _mm_set1_epi32(1));
            let above = _mm_loadu_si128(BELOW[way % 4].0.as_ptr().cast());
            let bit = _mm_andnot_si128(above, lane);
            let marked = _mm_or_si128(_mm_loadu_si128(quarter.as_ptr().cast()), bit);
            _mm_storeu_si128(quarter.as_mut_ptr().cast(), marked);
        }
    }
}

/// `SetKernel` of AVX-512, for hosts that have it (`available`): a set of sixteen 32-bit entries
/// is one register, searched by one comparison and rewritten by one masked lane shift, where the
/// portable operations take four of each. Its code is compiled for AVX-512 only where a caller
/// with `#[target_feature(enable = "avx512f")]` inlines it.
#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    use std::arch::x86_64::*;

    use super::{SetKernel, SET_WAYS};

    pub(in super::super) struct Avx512;

    /// Whether the host has AVX-512 (the foundation instructions are all `Avx512` uses).
    pub(in super::super) fn available() -> bool {
        std::is_x86_feature_detected!("avx512f")
    }

    // SAFETY (every `unsafe` below): only reached from code that runs where `available` holds
    // (see `single_core::replay_by_level_avx512`).
    impl SetKernel for Avx512 {
        type Register = __m512i;

        #[inline(always)]
        fn load(entries: &[u32; SET_WAYS]) -> __m512i {
            unsafe { load(entries) }
        }

        #[inline(always)]
        fn store(entries: &mut [u32; SET_WAYS], set: __m512i) {
            unsafe { store(entries, set) }
        }

        #[inline(always)]
        fn use_or_fill<const CLEAN: bool>(
            set: __m512i,
            key: u32,
            write: bool,
            ways: usize,
            use_on_write: bool,
        ) -> (__m512i, bool, u32) {
            unsafe { use_or_fill::<CLEAN>(set, key, write, ways, use_on_write) }
        }
    }

    // The operations themselves are compiled for AVX-512, so that its instructions are inlined
    // into them, and they into the caller compiled for it.

    #[target_feature(enable = "avx512f")]
    #[inline]
    fn load(entries: &[u32; SET_WAYS]) -> __m512i {
        // SAFETY: the load covers the 16 entries.
        unsafe { _mm512_loadu_si512(entries.as_ptr().cast()) }
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    fn store(entries: &mut [u32; SET_WAYS], set: __m512i) {
        // SAFETY: the store covers the 16 entries.
        unsafe { _mm512_storeu_si512(entries.as_mut_ptr().cast(), set) }
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    fn use_or_fill<const CLEAN: bool>(
        set: __m512i,
        key: u32,
        write: bool,
        ways: usize,
        use_on_write: bool,
    ) -> (__m512i, bool, u32) {
        let keys = _mm512_set1_epi32(key as i32);
        let dirty_bits = _mm512_set1_epi32(1);
        // Clean entries are compared as they are.
        let found = if CLEAN {
            _mm512_cmpeq_epi32_mask(set, _mm512_set1_epi32((key & !1) as i32))
        } else {
            _mm512_cmpeq_epi32_mask(_mm512_or_si512(set, dirty_bits), keys)
        } as u32;
        // The entry put first: dirty if written or dirty before (compared, so that the rewrite
        // need not wait for the way to be known).
        let was_dirty = !CLEAN && _mm512_cmpeq_epi32_mask(set, keys) != 0;
        let hit = found != 0;
        let way = (found | 1 << (ways - 1)).trailing_zeros();
        let entry = std::hint::select_unpredictable(write || was_dirty, key, key & !1);
        // A write hit that is no use only marks its entry dirty; anything else moves the entries
        // before `way` one lane up, `entry` into lane 0.
        let in_place = hit & write & !use_on_write;
        let shifted_lanes = std::hint::select_unpredictable(in_place, 0, (2u32 << way) - 1) as u16;
        let shifted = _mm512_alignr_epi32::<15>(set, _mm512_set1_epi32(entry as i32));
        let moved = _mm512_mask_mov_epi32(set, shifted_lanes, shifted);
        if CLEAN {
            return (moved, hit, u32::MAX);
        }
        let marked_lane = std::hint::select_unpredictable(in_place, 1u32 << way, 0) as u16;
        let after = _mm512_mask_or_epi32(moved, marked_lane, moved, dirty_bits);
        let last = _mm512_permutexvar_epi32(_mm512_set1_epi32(ways as i32 - 1), set);
        (after, hit, _mm_cvtsi128_si32(_mm512_castsi512_si128(last)) as u32)
    }
}

/// Where a level's lines go: set and tag of a line, and back (the set count a power of two).
#[derive(Debug, Clone, Copy)]
struct Indexing {
    set_bits: u32,
    /// The set count less one (kept rather than worked out on every access).
    set_mask: u64,
}

impl Indexing {
    fn new(sets: usize) -> Indexing {
        Indexing { set_bits: sets.trailing_zeros(), set_mask: sets as u64 - 1 }
    }

    #[inline(always)]
    fn split(self, line: u64) -> (usize, u64) {
        ((line & self.set_mask) as usize, line >> self.set_bits)
    }

    fn join(self, set: usize, tag: u64) -> u64 {
        tag << self.set_bits | set as u64
    }
}

/// One set of an LRU level: its entries most recently used first, then empty ones (a fixed length
/// lets the loops over a set become vector operations; entries past the way count stay empty).
/// Aligned to the host's cache lines, so a set of 32-bit entries is one host line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Set<E>([E; SET_WAYS]);

impl<E: Entry> Set<E> {
    const EMPTY: Set<E> = Set([E::EMPTY; SET_WAYS]);

    /// Where the key sits; the most recent entry is tried first (a run of accesses to one line
    /// finds it there).
    #[inline(always)]
    fn find(&self, key: E) -> Option<usize> {
        if self.0[0].matches(key) {
            return Some(0);
        }
        let found = E::matching(&self.0, key);
        (found != 0).then(|| found.trailing_zeros() as usize)
    }

    /// See `Entry::move_to_front`.
    #[inline(always)]
    fn move_to_front(&mut self, way: usize, entry: E) {
        E::move_to_front(&mut self.0, way, entry);
    }

    /// See `Entry::push_front`.
    #[inline(always)]
    fn push_front(&mut self, ways: usize, entry: E) -> E {
        E::push_front(&mut self.0, ways, entry)
    }

    /// See `Entry::take`.
    #[inline(always)]
    fn take(&mut self, way: usize) -> E {
        E::take(&mut self.0, way)
    }

    /// See `Entry::mark_dirty`.
    #[inline(always)]
    fn mark_dirty(&mut self, way: usize) {
        E::mark_dirty(&mut self.0, way);
    }
}

/// True LRU over sets kept in recency order. Recency order among the valid lines is all that true
/// LRU's victim choice depends on, and the cache fills empty ways before evicting, so this evicts
/// exactly what `cache::replacement::Lru` evicts, without per-way ranks.
pub(super) struct LruSets<E> {
    indexing: Indexing,
    ways: usize,
    sets: Vec<Set<E>>,
    write_hit_updates_recency: bool,
}

impl<E: Entry> LruSets<E> {
    /// Whether a level of this geometry is kept in `LruSets`: LRU with at most `SET_WAYS` ways
    /// and a power-of-two number of sets.
    pub(super) fn fit(geometry: &Geometry) -> bool {
        geometry.policy == "lru" && geometry.ways <= SET_WAYS && geometry.sets.is_power_of_two() && geometry.slices == 1
    }

    /// Empty sets of a geometry that `fit`s.
    pub(super) fn new(geometry: &Geometry) -> LruSets<E> {
        LruSets {
            indexing: Indexing::new(geometry.sets),
            ways: geometry.ways,
            sets: vec![Set::EMPTY; geometry.sets],
            write_hit_updates_recency: geometry.options.write_hit_updates_recency,
        }
    }

    /// Largest line every set can tag.
    pub(super) fn max_line(&self) -> u64 {
        self.indexing.join(self.sets.len() - 1, E::MAX_TAG)
    }

    pub(super) fn ordered(&self) -> bool {
        true
    }

    /// The line's set and its key (see `Entry::key`).
    #[inline(always)]
    fn locate(&mut self, line: u64) -> (&mut Set<E>, E) {
        let (set, tag) = self.indexing.split(line);
        (&mut self.sets[set], E::key(tag))
    }

    /// A lookup as a use: refreshes recency (unless a write hit is no use) and marks a write dirty.
    #[inline(always)]
    pub(super) fn access(&mut self, line: u64, write: bool) -> bool {
        let use_on_write = self.write_hit_updates_recency;
        let (set, key) = self.locate(line);
        let Some(way) = set.find(key) else { return false };
        if way != 0 && (!write || use_on_write) {
            let entry = if write { set.0[way].dirty() } else { set.0[way] };
            set.move_to_front(way, entry);
        } else if write {
            set.mark_dirty(way);
        }
        true
    }

    /// See `Array::run_pass` (`single_core`).
    #[inline(always)]
    pub(super) fn run_pass<K: SetKernel, const PREFETCH: bool, const CLEAN: bool>(
        &mut self,
        requests: &[u64],
        pass: &mut Pass,
    ) {
        // Taken out of `self` once, so that the loop keeps them in registers.
        let (indexing, ways, use_on_write) = (self.indexing, self.ways, self.write_hit_updates_recency);
        let sets = &mut self.sets[..];
        for (i, &request) in requests.iter().enumerate() {
            if let Some(&ahead) = requests.get(i + PREFETCH_DISTANCE).filter(|_| PREFETCH) {
                let (set, _) = indexing.split(Pass::decode(ahead).0);
                steer_sim::cache::host_prefetch(std::slice::from_ref(&sets[set]));
            }
            let (line, write) = Pass::decode(request);
            let (index, tag) = indexing.split(line);
            let (hit, last) = E::use_or_fill::<K, CLEAN>(&mut sets[index].0, E::key(tag), write, ways, use_on_write);
            pass.record::<CLEAN>(line, write, hit, Victim::of_last_way(hit, last, |tag| indexing.join(index, tag)));
        }
    }

    /// The level's only set, if it has one of 32-bit entries: its entries, its way count and
    /// whether a write hit is a use.
    pub(super) fn lone_set(&mut self) -> Option<(&mut [u32; SET_WAYS], usize, bool)> {
        let (ways, use_on_write) = (self.ways, self.write_hit_updates_recency);
        match &mut self.sets[..] {
            [set] => E::narrow(&mut set.0).map(|entries| (entries, ways, use_on_write)),
            _ => None,
        }
    }

    /// Installs an absent line as the most recent; returns the least recent one if the set was full.
    pub(super) fn insert(&mut self, line: u64, dirty: bool) -> Option<Victim> {
        let (index, _) = self.indexing.split(line);
        let ways = self.ways;
        let (set, key) = self.locate(line);
        let pushed_out = set.push_front(ways, if dirty { key } else { key.clean() });
        (pushed_out != E::EMPTY).then(|| {
            let entry: u64 = pushed_out.into();
            Victim { line: self.indexing.join(index, entry >> 1), dirty: entry & 1 == 1 }
        })
    }

    /// Removes the line if present; returns whether it was dirty.
    pub(super) fn remove(&mut self, line: u64) -> Option<bool> {
        let (set, key) = self.locate(line);
        let way = set.find(key)?;
        Some(set.take(way) == key)
    }

    /// Marks a present line dirty without a use; false if absent.
    pub(super) fn mark_dirty(&mut self, line: u64) -> bool {
        let (set, key) = self.locate(line);
        set.find(key).map(|way| set.mark_dirty(way)).is_some()
    }

    #[cfg(test)]
    pub(super) fn contains(&mut self, line: u64) -> bool {
        let (set, key) = self.locate(line);
        set.find(key).is_some()
    }

    #[inline(always)]
    pub(super) fn prefetch_set_of(&self, line: u64) {
        let (set, _) = self.indexing.split(line);
        steer_sim::cache::host_prefetch(std::slice::from_ref(&self.sets[set]));
    }

    /// The same sets with 64-bit entries.
    pub(super) fn widened(&self) -> LruSets<u64> {
        let widen = |&entry: &E| if entry == E::EMPTY { u64::EMPTY } else { entry.into() };
        LruSets {
            indexing: self.indexing,
            ways: self.ways,
            sets: self.sets.iter().map(|set| Set(set.0.each_ref().map(widen))).collect(),
            write_hit_updates_recency: self.write_hit_updates_recency,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use steer_sim::cache::{replacement, slice_hash::SliceHash};

    fn four_sets(ways: usize, write_hit_updates_recency: bool) -> Geometry {
        Geometry {
            sets: 4,
            ways,
            slices: 1,
            slice_hash: SliceHash::Uniform,
            policy: "lru",
            options: replacement::PolicyOptions { write_hit_updates_recency, seed: 0 },
        }
    }

    /// The largest line 32-bit entries tag: the largest tag (the top bit and all ones are kept for
    /// the flags and the empty entry) in the last set.
    #[test]
    fn narrow_sets_tag_lines_up_to_their_max_line() {
        let mut narrow = LruSets::<u32>::new(&four_sets(2, false));
        let max_line = ((u32::MAX >> 1) as u64 - 1) << 2 | 3;
        assert_eq!(narrow.max_line(), max_line);
        assert!(narrow.insert(max_line, true).is_none());
        assert!(narrow.contains(max_line) && !narrow.contains(max_line - 4));
        assert_eq!(narrow.remove(max_line), Some(true));
    }

    /// 32-bit entries (searched and rewritten by `quarters` on x86-64) and 64-bit ones (plain
    /// loops) answer and hold the same under random operations, for every way count.
    #[test]
    fn narrow_and_wide_sets_behave_alike() {
        let mut rng = steer_sim::units::Rng::new(17);
        for ways in 1..=SET_WAYS {
            for write_hit_updates_recency in [false, true] {
                let geometry = four_sets(ways, write_hit_updates_recency);
                let (mut narrow, mut wide) = (LruSets::<u32>::new(&geometry), LruSets::<u64>::new(&geometry));
                for _ in 0..4000 {
                    let line = rng.next_u64() % (8 * ways as u64 + 8);
                    let flag = rng.next_u64().is_multiple_of(2);
                    let (a, b) = match rng.next_u64() % 5 {
                        0 | 1 => (narrow.access(line, flag) as u64, wide.access(line, flag) as u64),
                        2 if !narrow.contains(line) => {
                            let victim = |v: Option<Victim>| v.map_or(u64::MAX, |v| v.line << 1 | v.dirty as u64);
                            (victim(narrow.insert(line, flag)), victim(wide.insert(line, flag)))
                        }
                        3 => (narrow.mark_dirty(line) as u64, wide.mark_dirty(line) as u64),
                        _ => (narrow.remove(line).map_or(2, u64::from), wide.remove(line).map_or(2, u64::from)),
                    };
                    assert_eq!(a, b, "{ways} ways");
                }
                let widened = narrow.widened();
                let entries = |sets: &LruSets<u64>| sets.sets.iter().map(|set| set.0).collect::<Vec<_>>();
                assert_eq!(entries(&widened), entries(&wide), "{ways} ways");
            }
        }
    }
}
