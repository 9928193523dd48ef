use super::{host_prefetch, ReplacementPolicy};

/// Random replacement: the victim is an allowed way drawn from a seeded generator, so runs are
/// reproducible; ways demoted since their fill (injected lines nobody used) go first.
pub struct Random {
    /// Per set, the ways demoted and not used since.
    demoted: Vec<u64>,
    state: u64,
}

impl Random {
    pub fn new(sets: usize, seed: u64) -> Random {
        // xorshift's state must not be 0: the one seed that would cancel the constant starts
        // from it, as seed 0 does.
        let state = match 0x9E37_79B9_7F4A_7C15 ^ seed {
            0 => 0x9E37_79B9_7F4A_7C15,
            state => state,
        };
        Random { demoted: vec![0; sets], state }
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

    #[test]
    fn random_victims_of_the_seeded_sequence_by_hand() {
        // xorshift64* from 0x9E3779B97F4A7C15, each draw modulo 4 ways (a Python transcription).
        let mut r = Random::new(1, 0);
        assert_eq!((0..8).map(|_| r.victim(0, 0b1111)).collect::<Vec<_>>(), [2, 3, 0, 1, 1, 2, 1, 0]);
        // A use or a fill takes a way out of the demoted ones, and only that way.
        let mut r = Random::new(1, 0);
        for way in [1, 2, 3] {
            r.demote(0, way);
        }
        r.on_hit(0, 1, false);
        r.on_fill(0, 3);
        assert!((0..20).all(|_| r.victim(0, 0b1111) == 2));
        r.on_fill(0, 2);
        assert_eq!((0..8).map(|_| r.victim(0, 0b1111)).collect::<Vec<_>>(), [0, 2, 1, 0, 1, 0, 1, 0], "draws 21-28");
    }

    #[test]
    fn the_seed_chooses_the_sequence_and_none_leaves_the_generator_stuck() {
        let draws = |seed| {
            let mut r = Random::new(1, seed);
            (0..16).map(|_| r.victim(0, u64::MAX)).collect::<Vec<_>>()
        };
        assert_ne!(draws(0), draws(1));
        assert_eq!(draws(1), draws(1));
        // The seed that cancels the constant: xorshift from 0 would give way 0 forever.
        assert_eq!(draws(0x9E37_79B9_7F4A_7C15), draws(0));
    }

    #[test]
    fn random_picks_demoted_ways_first_then_every_allowed_way_and_never_another() {
        let mut r = Random::new(1, 0);
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
        let mut again = Random::new(1, 0);
        again.demote(0, 5);
        again.victim(0, 0b11_0000);
        again.on_hit(0, 5, false);
        assert_eq!((0..400).map(|_| again.victim(0, 0b1011_0000)).collect::<Vec<_>>(), picks);
    }
}
