//! Replacement policies. Each is a small module behind `ReplacementPolicy` and registers itself by
//! name in `POLICIES`, so a cache spec selects one with `replacement = "NAME"`. A cache holds its
//! policy as a `Replacement`, an enum of the policies, so the calls on every lookup are direct
//! (and can be inlined) rather than through a trait object.

use super::host_prefetch;

/// The contract between a set-associative cache and its replacement policy.
///
/// The cache owns tags and validity; the policy owns only recency state. The cache calls `on_hit`
/// for every hit, `on_fill` when a line is installed, `on_invalidate` when a line leaves without
/// being chosen as a victim, and `victim` only when every way allowed by `allowed` is valid
/// (the cache fills invalid ways first). `victim` must return a way whose bit is set in `allowed`.
/// `demote` moves a valid way to where the policy evicts next (a fill not expected to be reused
/// soon, such as an injected line), so that it displaces nothing until it is used.
pub trait ReplacementPolicy: Send {
    fn on_hit(&mut self, set: usize, way: usize, write: bool);
    fn on_fill(&mut self, set: usize, way: usize);
    fn demote(&mut self, set: usize, way: usize);
    fn on_invalidate(&mut self, _set: usize, _way: usize) {}
    fn victim(&mut self, set: usize, allowed: u64) -> usize;
    /// Starts loading the host memory holding `set`'s state (`super::host_prefetch`); a hint.
    fn prefetch_set(&self, set: usize);
}

/// Options every policy may read.
#[derive(Debug, Clone, Copy)]
pub struct PolicyOptions {
    /// Whether a write hit counts as a use (real caches: yes; pycachesim: no).
    pub write_hit_updates_recency: bool,
}

impl PolicyOptions {
    /// Whether a hit of this kind refreshes the line's recency.
    pub fn hit_is_use(&self, write: bool) -> bool {
        !write || self.write_hit_updates_recency
    }
}

/// A registered policy: its name, a one-line description, its constraints and its constructor.
pub struct PolicyInfo {
    pub name: &'static str,
    pub description: &'static str,
    /// Returns an error message if the policy cannot manage `ways` ways.
    pub check_ways: fn(ways: usize) -> Result<(), String>,
    pub build: fn(sets: usize, ways: usize, options: PolicyOptions) -> Replacement,
    /// Whether a set's choices depend on its own accesses alone (no state shared between sets), so
    /// that groups of sets can be simulated apart (see `trace::single_core::set_groups`).
    pub per_set: bool,
}

/// One of the registered policies; a new policy adds a variant here and an arm to `dispatch!`.
pub enum Replacement {
    Lru(Lru),
    TreePlru(TreePlru),
    Rrip(Rrip),
    Random(Random),
}

/// Calls a `ReplacementPolicy` method on whichever policy `$self` holds.
macro_rules! dispatch {
    ($self:ident.$method:ident($($arg:expr),*)) => {
        match $self {
            Replacement::Lru(policy) => policy.$method($($arg),*),
            Replacement::TreePlru(policy) => policy.$method($($arg),*),
            Replacement::Rrip(policy) => policy.$method($($arg),*),
            Replacement::Random(policy) => policy.$method($($arg),*),
        }
    };
}

impl ReplacementPolicy for Replacement {
    #[inline]
    fn on_hit(&mut self, set: usize, way: usize, write: bool) {
        dispatch!(self.on_hit(set, way, write))
    }
    #[inline]
    fn on_fill(&mut self, set: usize, way: usize) {
        dispatch!(self.on_fill(set, way))
    }
    #[inline]
    fn on_invalidate(&mut self, set: usize, way: usize) {
        dispatch!(self.on_invalidate(set, way))
    }
    fn demote(&mut self, set: usize, way: usize) {
        dispatch!(self.demote(set, way))
    }
    #[inline]
    fn victim(&mut self, set: usize, allowed: u64) -> usize {
        dispatch!(self.victim(set, allowed))
    }
    #[inline]
    fn prefetch_set(&self, set: usize) {
        dispatch!(self.prefetch_set(set))
    }
}

pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "lru",
        description: "true least-recently-used (per-line recency ranks)",
        check_ways: |_| Ok(()),
        build: |sets, ways, options| Replacement::Lru(Lru::new(sets, ways, options)),
        per_set: true,
    },
    PolicyInfo {
        name: "tree_plru",
        description: "binary-tree pseudo-LRU (ways must be a power of two, at most 64)",
        check_ways: |ways| {
            if ways.is_power_of_two() && ways <= 64 {
                Ok(())
            } else {
                Err(format!("tree_plru needs a power-of-two way count up to 64, got {ways}"))
            }
        },
        build: |sets, ways, options| Replacement::TreePlru(TreePlru::new(sets, ways, options)),
        per_set: true,
    },
    PolicyInfo {
        name: "srrip",
        description: "static re-reference interval prediction (2-bit), insertion at a long interval",
        check_ways: |_| Ok(()),
        build: |sets, ways, options| Replacement::Rrip(Rrip::new(sets, ways, options, RripMode::Static)),
        per_set: true,
    },
    PolicyInfo {
        name: "brrip",
        description: "bimodal RRIP: most insertions at a distant interval (thrash-resistant)",
        check_ways: |_| Ok(()),
        build: |sets, ways, options| Replacement::Rrip(Rrip::new(sets, ways, options, RripMode::Bimodal)),
        per_set: false,
    },
    PolicyInfo {
        name: "drrip",
        description: "dynamic RRIP: set dueling between srrip and brrip (adaptive, as Intel LLCs)",
        check_ways: |_| Ok(()),
        build: |sets, ways, options| Replacement::Rrip(Rrip::new(sets, ways, options, RripMode::Dynamic)),
        per_set: false,
    },
    PolicyInfo {
        name: "random",
        description: "a pseudo-random allowed way (demoted ways first): no recency kept, seeded",
        check_ways: |_| Ok(()),
        build: |sets, _, _| Replacement::Random(Random::new(sets)),
        per_set: false,
    },
];

pub fn find(name: &str) -> Option<&'static PolicyInfo> {
    POLICIES.iter().find(|p| p.name == name)
}

/// The registry `replacement` names an entry of.
pub struct ReplacementPolicies;

impl crate::params::Registry for ReplacementPolicies {
    const WHAT: &'static str = "replacement policy";
    fn entries() -> Vec<(&'static str, &'static str)> {
        POLICIES.iter().map(|p| (p.name, p.description)).collect()
    }
}

pub fn names() -> Vec<&'static str> {
    POLICIES.iter().map(|p| p.name).collect()
}

/// True LRU: each way of a set carries its recency rank, 0 for the most recently used, the ranks of
/// a set being a permutation of `0..ways`; the victim is the allowed way of highest rank. A touch
/// moves the way to rank 0 and ages the ways that were more recent. Among the ways used since
/// they were filled (the only candidates: the cache fills invalid ways first), rank order is the
/// order of last use, so this evicts exactly what per-way use stamps would, in a byte per way.
pub struct Lru {
    ways: usize,
    ranks: Vec<u8>,
    options: PolicyOptions,
}

impl Lru {
    pub fn new(sets: usize, ways: usize, options: PolicyOptions) -> Lru {
        assert!(ways <= 256, "a rank is one byte");
        Lru { ways, ranks: (0..sets).flat_map(|_| (0..ways).map(|rank| rank as u8)).collect(), options }
    }
    fn touch(&mut self, set: usize, way: usize) {
        let ranks = &mut self.ranks[set * self.ways..(set + 1) * self.ways];
        let old = ranks[way];
        // Already the most recent (a line used again and again): nothing to age.
        if old == 0 {
            return;
        }
        for rank in ranks.iter_mut() {
            *rank += (*rank < old) as u8;
        }
        ranks[way] = 0;
    }
}

impl ReplacementPolicy for Lru {
    fn on_hit(&mut self, set: usize, way: usize, write: bool) {
        if self.options.hit_is_use(write) {
            self.touch(set, way);
        }
    }
    fn on_fill(&mut self, set: usize, way: usize) {
        self.touch(set, way);
    }
    fn demote(&mut self, set: usize, way: usize) {
        let ranks = &mut self.ranks[set * self.ways..(set + 1) * self.ways];
        let old = ranks[way];
        for rank in ranks.iter_mut() {
            *rank -= (*rank > old) as u8;
        }
        ranks[way] = (self.ways - 1) as u8;
    }
    fn victim(&mut self, set: usize, allowed: u64) -> usize {
        let ranks = &self.ranks[set * self.ways..(set + 1) * self.ways];
        // The least recent way of the set, if allowed, is the answer without looking further.
        let least_recent = ranks.iter().position(|&rank| rank as usize == self.ways - 1).expect("a permutation");
        if allowed >> least_recent & 1 == 1 {
            return least_recent;
        }
        let (mut victim, mut oldest) = (None, 0);
        let mut candidates = allowed & (u64::MAX >> (64 - self.ways));
        while candidates != 0 {
            let way = candidates.trailing_zeros() as usize;
            candidates &= candidates - 1;
            if victim.is_none() || ranks[way] > oldest {
                (victim, oldest) = (Some(way), ranks[way]);
            }
        }
        victim.expect("allowed mask selects at least one way")
    }
    fn prefetch_set(&self, set: usize) {
        host_prefetch(&self.ranks[set * self.ways..(set + 1) * self.ways]);
    }
}

/// Tree pseudo-LRU: `ways - 1` direction bits per set form a binary tree over the ways; each bit
/// points to the half that was used less recently. Node `n` has children `2n+1` and `2n+2`.
pub struct TreePlru {
    ways: usize,
    bits: Vec<u64>,
    options: PolicyOptions,
}

impl TreePlru {
    pub fn new(sets: usize, ways: usize, options: PolicyOptions) -> TreePlru {
        TreePlru { ways, bits: vec![0; sets], options }
    }

    /// Points every node on the path to `way` away from it (`toward = false`, a use) or at it.
    fn point(&mut self, set: usize, way: usize, toward: bool) {
        let (mut node, mut lo, mut span) = (0usize, 0usize, self.ways);
        while span > 1 {
            let half = span / 2;
            let went_right = way >= lo + half;
            // bit = 1 means "the victim is on the right".
            if went_right == toward {
                self.bits[set] |= 1 << node;
            } else {
                self.bits[set] &= !(1 << node);
            }
            if went_right {
                lo += half;
                node = 2 * node + 2;
            } else {
                node = 2 * node + 1;
            }
            span = half;
        }
    }

    fn touch(&mut self, set: usize, way: usize) {
        self.point(set, way, false);
    }
}

impl ReplacementPolicy for TreePlru {
    fn on_hit(&mut self, set: usize, way: usize, write: bool) {
        if self.options.hit_is_use(write) {
            self.touch(set, way);
        }
    }
    fn on_fill(&mut self, set: usize, way: usize) {
        self.touch(set, way);
    }
    fn demote(&mut self, set: usize, way: usize) {
        self.point(set, way, true);
    }
    fn victim(&mut self, set: usize, allowed: u64) -> usize {
        let any_allowed = |lo: usize, span: usize| {
            let mask = if span >= 64 { u64::MAX } else { ((1u64 << span) - 1) << lo };
            allowed & mask != 0
        };
        let (mut node, mut lo, mut span) = (0usize, 0usize, self.ways);
        while span > 1 {
            let half = span / 2;
            let mut right = self.bits[set] >> node & 1 == 1;
            // Follow the tree, but never into a half with no allowed way (way masks).
            if right && !any_allowed(lo + half, half) {
                right = false;
            } else if !right && !any_allowed(lo, half) {
                right = true;
            }
            if right {
                lo += half;
                node = 2 * node + 2;
            } else {
                node = 2 * node + 1;
            }
            span = half;
        }
        lo
    }
    fn prefetch_set(&self, set: usize) {
        host_prefetch(std::slice::from_ref(&self.bits[set]));
    }
}

/// How an RRIP cache predicts the re-reference interval of a new line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RripMode {
    /// Always "long" (RRPV max-1).
    Static,
    /// "Distant" (RRPV max) except one insertion in 32, which keeps part of a thrashing set.
    Bimodal,
    /// Leader sets of each kind duel; the other sets follow the one that misses less.
    Dynamic,
}

/// Re-reference interval prediction (Jaleel et al., ISCA 2010) with 2-bit prediction values: a
/// hit predicts a near re-reference (0); the victim is a line predicted distant (3), after
/// ageing every candidate until one is.
pub struct Rrip {
    ways: usize,
    rrpv: Vec<u8>,
    mode: RripMode,
    /// Saturating selector: high means bimodal insertion misses less.
    selector: u32,
    /// Counts insertions, so one in 32 bimodal insertions is long (deterministic, no RNG).
    insertions: u32,
    options: PolicyOptions,
}

const RRPV_MAX: u8 = 3;
const SELECTOR_MAX: u32 = 1023;
/// One set in this many leads for each insertion kind under dynamic mode.
const LEADER_STRIDE: usize = 32;

impl Rrip {
    pub fn new(sets: usize, ways: usize, options: PolicyOptions, mode: RripMode) -> Rrip {
        Rrip { ways, rrpv: vec![RRPV_MAX; sets * ways], mode, selector: SELECTOR_MAX / 2, insertions: 0, options }
    }

    /// Which insertion a set uses: leaders are fixed, followers take the selector's side.
    fn bimodal_in(&self, set: usize) -> bool {
        match self.mode {
            RripMode::Static => false,
            RripMode::Bimodal => true,
            RripMode::Dynamic => match set % LEADER_STRIDE {
                0 => false,
                1 => true,
                _ => self.selector > SELECTOR_MAX / 2,
            },
        }
    }
}

impl ReplacementPolicy for Rrip {
    fn on_hit(&mut self, set: usize, way: usize, write: bool) {
        if self.options.hit_is_use(write) {
            self.rrpv[set * self.ways + way] = 0;
        }
    }

    fn on_fill(&mut self, set: usize, way: usize) {
        // A fill follows a miss: a miss in a leader set votes against that leader's insertion.
        if self.mode == RripMode::Dynamic {
            match set % LEADER_STRIDE {
                0 => self.selector = (self.selector + 1).min(SELECTOR_MAX),
                1 => self.selector = self.selector.saturating_sub(1),
                _ => {}
            }
        }
        self.insertions = self.insertions.wrapping_add(1);
        let distant = self.bimodal_in(set) && !self.insertions.is_multiple_of(32);
        self.rrpv[set * self.ways + way] = if distant { RRPV_MAX } else { RRPV_MAX - 1 };
    }

    fn demote(&mut self, set: usize, way: usize) {
        self.rrpv[set * self.ways + way] = RRPV_MAX;
    }

    fn victim(&mut self, set: usize, allowed: u64) -> usize {
        let base = set * self.ways;
        loop {
            let candidates = (0..self.ways).filter(|w| allowed >> w & 1 == 1);
            if let Some(way) = candidates.clone().find(|w| self.rrpv[base + w] == RRPV_MAX) {
                return way;
            }
            for way in candidates {
                self.rrpv[base + way] += 1;
            }
        }
    }

    fn prefetch_set(&self, set: usize) {
        host_prefetch(&self.rrpv[set * self.ways..(set + 1) * self.ways]);
    }
}

/// Random replacement: the victim is an allowed way drawn from a fixed-seed generator, so runs
/// are reproducible; ways demoted since their fill (injected lines nobody used) go first.
pub struct Random {
    /// Per set, the ways demoted and not used since.
    demoted: Vec<u64>,
    state: u64,
}

impl Random {
    pub fn new(sets: usize) -> Random {
        Random { demoted: vec![0; sets], state: 0x9E37_79B9_7F4A_7C15 }
    }

    /// xorshift64*.
    fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

impl ReplacementPolicy for Random {
    fn on_hit(&mut self, set: usize, way: usize, _write: bool) {
        self.demoted[set] &= !(1 << way);
    }
    fn on_fill(&mut self, set: usize, way: usize) {
        self.demoted[set] &= !(1 << way);
    }
    fn demote(&mut self, set: usize, way: usize) {
        self.demoted[set] |= 1 << way;
    }
    fn victim(&mut self, set: usize, allowed: u64) -> usize {
        let demoted = self.demoted[set] & allowed;
        let pool = if demoted != 0 { demoted } else { allowed };
        let pick = (self.next() % pool.count_ones() as u64) as u32;
        // The pick-th set bit of `pool`.
        let mut bits = pool;
        for _ in 0..pick {
            bits &= bits - 1;
        }
        bits.trailing_zeros() as usize
    }
    fn prefetch_set(&self, set: usize) {
        host_prefetch(std::slice::from_ref(&self.demoted[set]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: PolicyOptions = PolicyOptions { write_hit_updates_recency: true };

    #[test]
    fn random_picks_demoted_ways_first_then_every_allowed_way_and_never_another() {
        let mut r = Random::new(1);
        r.demote(0, 5);
        assert_eq!(r.victim(0, 0b11_0000), 5);
        r.on_hit(0, 5, false);
        let picks: Vec<usize> = (0..400).map(|_| r.victim(0, 0b1011_0000)).collect();
        for way in [4, 5, 7] {
            let n = picks.iter().filter(|&&w| w == way).count();
            assert!((100..170).contains(&n), "way {way} picked {n} times of 400");
        }
        assert!(picks.iter().all(|w| [4, 5, 7].contains(w)));
        // The same seed, the same choices.
        let mut again = Random::new(1);
        again.demote(0, 5);
        again.victim(0, 0b11_0000);
        again.on_hit(0, 5, false);
        assert_eq!((0..400).map(|_| again.victim(0, 0b1011_0000)).collect::<Vec<_>>(), picks);
    }

    #[test]
    fn lru_evicts_least_recent_allowed_way() {
        let mut lru = Lru::new(1, 4, OPTS);
        for way in 0..4 {
            lru.on_fill(0, way);
        }
        lru.on_hit(0, 0, false);
        assert_eq!(lru.victim(0, 0b1111), 1);
        assert_eq!(lru.victim(0, 0b1101), 2);
    }

    #[test]
    fn lru_write_hit_recency_is_optional() {
        let mut lru = Lru::new(1, 2, PolicyOptions { write_hit_updates_recency: false });
        lru.on_fill(0, 0);
        lru.on_fill(0, 1);
        lru.on_hit(0, 0, true);
        assert_eq!(lru.victim(0, 0b11), 0);
    }

    #[test]
    fn tree_plru_protects_recent_half() {
        let mut plru = TreePlru::new(1, 4, OPTS);
        for way in 0..4 {
            plru.on_fill(0, way);
        }
        // Last touched way 3 (right half), so the victim is in the left half: way 0 was touched
        // before way 1, and node 1 points away from way 1.
        assert_eq!(plru.victim(0, 0b1111), 0);
        plru.on_hit(0, 0, false);
        assert_eq!(plru.victim(0, 0b1111), 2);
        // Masked to the left half only.
        assert_eq!(plru.victim(0, 0b0011), 1);
    }

    #[test]
    fn a_demoted_way_is_the_next_victim_under_every_policy() {
        let policies: [Replacement; 3] = [
            Replacement::Lru(Lru::new(1, 4, OPTS)),
            Replacement::TreePlru(TreePlru::new(1, 4, OPTS)),
            Replacement::Rrip(Rrip::new(1, 4, OPTS, RripMode::Static)),
        ];
        for mut policy in policies {
            for way in 0..4 {
                policy.on_fill(0, way);
                policy.on_hit(0, way, false);
            }
            // Way 3, the most recently used, is demoted: it goes next, then a use protects it again.
            policy.demote(0, 3);
            assert_eq!(policy.victim(0, 0b1111), 3);
            policy.on_hit(0, 3, false);
            assert_ne!(policy.victim(0, 0b1111), 3);
        }
        // LRU keeps its ranks a permutation: after demoting way 0, the others keep their order.
        let mut lru = Lru::new(1, 4, OPTS);
        for way in 0..4 {
            lru.on_fill(0, way);
        }
        lru.demote(0, 0);
        assert_eq!(lru.ranks, vec![3, 2, 1, 0]);
        assert_eq!(lru.victim(0, 0b1110), 1);
    }

    /// Hit rate of a cyclic scan over `lines` lines through one 8-way set after warm-up.
    fn cyclic_hit_rate(mode: RripMode, lines: usize) -> f64 {
        let ways = 8;
        let sets = 64;
        let mut policy = Rrip::new(sets, ways, OPTS, mode);
        let mut tags = vec![vec![usize::MAX; ways]; sets];
        let (mut hits, mut total) = (0, 0);
        for round in 0..200 {
            for line in 0..lines * sets {
                let set = line % sets;
                let hit = tags[set].iter().position(|&t| t == line);
                match hit {
                    Some(way) => policy.on_hit(set, way, false),
                    None => {
                        let way =
                            tags[set].iter().position(|&t| t == usize::MAX).unwrap_or_else(|| policy.victim(set, 0xff));
                        tags[set][way] = line;
                        policy.on_fill(set, way);
                    }
                }
                if round >= 100 {
                    total += 1;
                    hits += hit.is_some() as u32;
                }
            }
        }
        hits as f64 / total as f64
    }

    #[test]
    fn rrip_keeps_part_of_a_thrashing_working_set() {
        // 32 lines per 8-way set: a quarter fits. LRU and SRRIP keep nothing; BRRIP and DRRIP
        // keep most of what fits.
        assert_eq!(cyclic_hit_rate(RripMode::Static, 32), 0.0);
        for mode in [RripMode::Bimodal, RripMode::Dynamic] {
            let rate = cyclic_hit_rate(mode, 32);
            assert!((0.15..=0.25).contains(&rate), "{mode:?}: {rate}");
        }
        // A fitting working set always hits.
        assert_eq!(cyclic_hit_rate(RripMode::Dynamic, 8), 1.0);
    }

    #[test]
    fn registry_knows_policies() {
        assert!(find("lru").is_some());
        assert!((find("tree_plru").unwrap().check_ways)(12).is_err());
        assert!(find("random").is_some() && find("bogus").is_none());
    }
}
