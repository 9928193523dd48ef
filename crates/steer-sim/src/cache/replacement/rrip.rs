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

    const OPTS: PolicyOptions = PolicyOptions { write_hit_updates_recency: true };

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
}
