use super::{host_prefetch, PolicyOptions, ReplacementPolicy};

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

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: PolicyOptions = PolicyOptions { write_hit_updates_recency: true };

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
}
