use super::{host_prefetch, PolicyOptions, ReplacementPolicy};

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

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: PolicyOptions = PolicyOptions { write_hit_updates_recency: true, seed: 0 };

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

    fn set_values(policy: &Rrip, set: usize) -> &[u8] {
        &policy.rrpv[set * policy.ways..(set + 1) * policy.ways]
    }

    #[test]
    fn a_fill_predicts_long_a_hit_near_a_demotion_distant_and_the_victim_search_ages_by_hand() {
        let mut rrip = Rrip::new(2, 4, OPTS, RripMode::Static);
        for way in 0..4 {
            rrip.on_fill(1, way);
        }
        rrip.on_hit(1, 0, false);
        rrip.rrpv[4 + 2] = 1;
        assert_eq!(set_values(&rrip, 1), [0, 2, 1, 2]);
        assert_eq!(set_values(&rrip, 0), [3; 4], "set 0 untouched");
        // No way distant: every allowed way ages by one until one is; the first of them wins.
        assert_eq!(rrip.victim(1, 0b1111), 1);
        assert_eq!(set_values(&rrip, 1), [1, 3, 2, 3]);
        // Only ways 0 and 2 allowed: they age twice, the others keep their values.
        assert_eq!(rrip.victim(1, 0b0101), 2);
        assert_eq!(set_values(&rrip, 1), [2, 3, 3, 3]);
        rrip.demote(1, 0);
        assert_eq!(set_values(&rrip, 1), [3, 3, 3, 3]);
        assert_eq!(rrip.victim(1, 0b1000), 3, "already distant: no ageing");
    }

    #[test]
    fn bimodal_insertion_is_long_once_in_32_fills() {
        let mut rrip = Rrip::new(1, 1, OPTS, RripMode::Bimodal);
        let values: Vec<u8> = (0..64)
            .map(|_| {
                rrip.on_fill(0, 0);
                rrip.rrpv[0]
            })
            .collect();
        let long: Vec<usize> = (0..64).filter(|&i| values[i] == RRPV_MAX - 1).collect();
        assert_eq!(long, [31, 63], "the 32nd and 64th fills");
        assert!(values.iter().all(|&v| v >= RRPV_MAX - 1));
    }

    #[test]
    fn dynamic_leader_sets_vote_with_their_misses_and_followers_take_the_winner() {
        let mut rrip = Rrip::new(64, 1, OPTS, RripMode::Dynamic);
        let fill = |rrip: &mut Rrip, set: usize| {
            rrip.on_fill(set, 0);
            rrip.rrpv[set]
        };
        // The selector starts at 511: followers insert long, as static RRIP.
        assert_eq!(fill(&mut rrip, 2), RRPV_MAX - 1);
        // A miss in a static leader (set 0 or 32) counts for bimodal: followers turn bimodal.
        assert_eq!(fill(&mut rrip, 32), RRPV_MAX - 1, "a static leader inserts long");
        assert_eq!(rrip.selector, 512);
        assert_eq!(fill(&mut rrip, 2), RRPV_MAX);
        // A miss in a bimodal leader (set 1 or 33) counts against it: back to static.
        assert_eq!(fill(&mut rrip, 33), RRPV_MAX, "a bimodal leader inserts distant");
        assert_eq!(rrip.selector, 511);
        assert_eq!(fill(&mut rrip, 2), RRPV_MAX - 1);
        // The selector saturates at both ends.
        rrip.selector = SELECTOR_MAX;
        fill(&mut rrip, 0);
        assert_eq!(rrip.selector, SELECTOR_MAX);
        rrip.selector = 0;
        fill(&mut rrip, 1);
        assert_eq!(rrip.selector, 0);
        // Other modes keep the selector still.
        let mut bimodal = Rrip::new(64, 1, OPTS, RripMode::Bimodal);
        bimodal.on_fill(0, 0);
        assert_eq!(bimodal.selector, 511);
    }

    #[test]
    fn a_write_hit_is_a_use_only_when_the_options_say_so() {
        for (write_hit_updates_recency, after_write) in [(true, 0), (false, RRPV_MAX - 1)] {
            let mut rrip = Rrip::new(1, 1, PolicyOptions { write_hit_updates_recency, seed: 0 }, RripMode::Static);
            rrip.on_fill(0, 0);
            rrip.on_hit(0, 0, true);
            assert_eq!(rrip.rrpv[0], after_write, "updates recency {write_hit_updates_recency}");
            rrip.on_hit(0, 0, false);
            assert_eq!(rrip.rrpv[0], 0);
        }
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
}
