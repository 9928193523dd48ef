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
        // `span` is half a subtree: at most 32 ways (of a 64-way set), so the shift fits.
        let any_allowed = |lo: usize, span: usize| allowed & ((1u64 << span) - 1) << lo != 0;
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

    const OPTS: PolicyOptions = PolicyOptions { write_hit_updates_recency: true, seed: 0 };

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
    fn a_use_points_each_node_on_its_path_away_and_a_demotion_toward_it_by_hand() {
        // 8 ways: way 5 is right of node 0, left of node 2 (ways 4-7), right of node 5 (4-5).
        let mut plru = TreePlru::new(2, 8, OPTS);
        plru.on_fill(1, 5);
        assert_eq!(plru.bits, [0, 1 << 2], "node 0 and 5 point left (cleared), node 2 right; set 0 untouched");
        plru.bits[1] = 0x7f;
        plru.on_hit(1, 5, false);
        assert_eq!(plru.bits[1], 0x7f & !(1 << 0) & !(1 << 5), "only the path's nodes change");
        plru.demote(1, 5);
        assert_eq!(plru.bits[1], 0x7f & !(1 << 2));
        assert_eq!(plru.victim(1, 0xff), 5, "a demoted way is the next victim");
        plru.bits[0] = 0x7f;
        assert_eq!(plru.victim(0, 0xff), 7, "every node pointing right: the last way");
        plru.bits[0] = 1 << 1;
        assert_eq!(plru.victim(0, 0xff), 2, "left at node 0, right at its left child (node 1), left at node 4");
    }

    #[test]
    fn the_victim_search_turns_away_from_a_half_with_no_allowed_way() {
        // All nodes point left (way 0); only way 7 allowed: right at nodes 0, 2 and 6 in turn.
        let mut plru = TreePlru::new(1, 8, OPTS);
        assert_eq!(plru.victim(0, 0xff), 0);
        assert_eq!(plru.victim(0, 1 << 7), 7);
        assert_eq!(plru.victim(0, 1 << 2), 2);
        // All nodes point right (way 7); only way 0 allowed: left all the way down.
        plru.bits[0] = 0x7f;
        assert_eq!(plru.victim(0, 1), 0);
        assert_eq!(plru.victim(0, 1 << 5), 5);
        // 64 ways: the halves are 32 wide; only the last way allowed.
        let mut wide = TreePlru::new(1, 64, OPTS);
        assert_eq!(wide.victim(0, 1 << 63), 63);
        assert_eq!(wide.victim(0, 1 << 31 | 1 << 40), 31);
    }

    #[test]
    fn a_write_hit_is_a_use_only_when_the_options_say_so() {
        for (write_hit_updates_recency, moved) in [(true, true), (false, false)] {
            let mut plru = TreePlru::new(1, 4, PolicyOptions { write_hit_updates_recency, seed: 0 });
            plru.on_hit(0, 0, true);
            assert_eq!(plru.bits[0] != 0, moved, "write hit, updates recency {write_hit_updates_recency}");
            plru.on_hit(0, 0, false);
            assert_eq!(plru.bits[0], 0b11, "a read hit is always a use: nodes 0 and 1 point away from way 0");
        }
    }
}
