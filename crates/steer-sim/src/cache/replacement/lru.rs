use super::{host_prefetch, PolicyOptions, ReplacementPolicy};

/// True LRU: each way of a set carries its recency rank, 0 for the most recently used, the ranks of
/// a set being a permutation of `0..ways`; the victim is the allowed way of highest rank. A touch
/// moves the way to rank 0 and ages the ways that were more recent. Among the ways used since
/// they were filled (the only candidates: the cache fills invalid ways first), rank order is the
/// order of last use, so this evicts exactly what per-way use stamps would, in a byte per way.
pub struct Lru {
    ways: usize,
    pub(super) ranks: Vec<u8>,
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
        let mut candidates = allowed;
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

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: PolicyOptions = PolicyOptions { write_hit_updates_recency: true, seed: 0 };

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
        let mut lru = Lru::new(1, 2, PolicyOptions { write_hit_updates_recency: false, seed: 0 });
        lru.on_fill(0, 0);
        lru.on_fill(0, 1);
        lru.on_hit(0, 0, true);
        assert_eq!(lru.victim(0, 0b11), 0);
    }
}
