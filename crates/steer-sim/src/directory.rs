//! The coherence directory: which caches hold each cached line. Cache ids number a core's private
//! caches (L1 and L2 together) by the core, then each CCX's L3 after the cores.
//!
//! Almost every line is held by one or two caches, so a line's holders are kept inline, four
//! 16-bit ids in one word, and only lines held by more caches spill into a full set. A directory
//! entry is then 16 bytes, which keeps the index of a large system's caches small enough for the
//! host's own caches: the directory is on the path of most simulated misses.

use rustc_hash::FxHashMap;

use crate::platform::MAX_TRACKED_CACHES;

/// A set of cache ids.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holders([u64; (MAX_TRACKED_CACHES / 64) as usize]);

impl Holders {
    pub fn add(&mut self, id: u32) {
        self.0[(id / 64) as usize] |= 1 << (id % 64);
    }

    pub fn remove(&mut self, id: u32) {
        self.0[(id / 64) as usize] &= !(1 << (id % 64));
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    pub fn len(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }

    /// The ids present, in increasing order (visits set bits only).
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().enumerate().filter(|(_, &word)| word != 0).flat_map(|(i, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros();
                    rest &= rest - 1;
                    i as u32 * 64 + bit
                })
            })
        })
    }
}

/// Four 16-bit cache ids; `FREE` marks an unused slot.
const FREE: u64 = 0xFFFF;
const ALL_FREE: u64 = u64::MAX;
/// The inline word of a line whose holders spilled into a full set.
const SPILLED: u64 = 0xFFFE_FFFE_FFFE_FFFE;
const SLOTS: u32 = 4;

fn slot(word: u64, i: u32) -> u64 {
    word >> (16 * i) & FREE
}

fn with_slot(word: u64, i: u32, value: u64) -> u64 {
    word & !(FREE << (16 * i)) | value << (16 * i)
}

/// Holders per line.
#[derive(Debug, Default)]
pub struct Directory {
    inline: FxHashMap<u64, u64>,
    spilled: FxHashMap<u64, Holders>,
}

impl Directory {
    /// The caches holding `line`.
    pub fn holders(&self, line: u64) -> Holders {
        match self.inline.get(&line) {
            None => Holders::default(),
            Some(&SPILLED) => self.spilled[&line],
            Some(&word) => {
                let mut holders = Holders::default();
                (0..SLOTS).map(|i| slot(word, i)).filter(|&id| id != FREE).for_each(|id| holders.add(id as u32));
                holders
            }
        }
    }

    pub fn add(&mut self, line: u64, id: u32) {
        let word = self.inline.entry(line).or_insert(ALL_FREE);
        if *word == SPILLED {
            self.spilled.get_mut(&line).expect("a spilled line has a set").add(id);
            return;
        }
        let ids = (0..SLOTS).map(|i| slot(*word, i));
        if ids.clone().any(|held| held == id as u64) {
            return;
        }
        match (0..SLOTS).find(|&i| slot(*word, i) == FREE) {
            Some(free) => *word = with_slot(*word, free, id as u64),
            None => {
                let mut holders = Holders::default();
                ids.for_each(|held| holders.add(held as u32));
                holders.add(id);
                *word = SPILLED;
                self.spilled.insert(line, holders);
            }
        }
    }

    pub fn remove(&mut self, line: u64, id: u32) {
        let Some(word) = self.inline.get_mut(&line) else { return };
        if *word == SPILLED {
            let holders = self.spilled.get_mut(&line).expect("a spilled line has a set");
            holders.remove(id);
            if holders.is_empty() {
                self.spilled.remove(&line);
                self.inline.remove(&line);
            }
            return;
        }
        if let Some(i) = (0..SLOTS).find(|&i| slot(*word, i) == id as u64) {
            *word = with_slot(*word, i, FREE);
            if *word == ALL_FREE {
                self.inline.remove(&line);
            }
        }
    }

    /// Every line with holders, and its holders (for invariant checks).
    pub fn entries(&self) -> impl Iterator<Item = (u64, Holders)> + '_ {
        self.inline.keys().map(|&line| (line, self.holders(line)))
    }

    pub fn len(&self) -> usize {
        self.inline.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inline.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(d: &Directory, line: u64) -> Vec<u32> {
        d.holders(line).iter().collect()
    }

    #[test]
    fn holders_are_added_once_and_removed_to_nothing() {
        let mut d = Directory::default();
        d.add(7, 3);
        d.add(7, 3);
        d.add(7, 200);
        assert_eq!(ids(&d, 7), [3, 200]);
        d.remove(7, 3);
        d.remove(7, 99);
        assert_eq!(ids(&d, 7), [200]);
        assert!(!d.is_empty());
        d.remove(7, 200);
        assert!(d.is_empty() && d.holders(7).is_empty());
        d.remove(8, 1);
        assert!(d.is_empty());
    }

    #[test]
    fn a_fifth_holder_spills_and_the_last_removal_cleans_up() {
        let mut d = Directory::default();
        for id in [0, 1, 383, 64, 65] {
            d.add(9, id);
        }
        assert_eq!(ids(&d, 9), [0, 1, 64, 65, 383]);
        d.add(9, 2);
        assert_eq!(d.holders(9).len(), 6);
        for id in [0, 1, 2, 64, 65] {
            d.remove(9, id);
        }
        assert_eq!(ids(&d, 9), [383]);
        d.remove(9, 383);
        assert!(d.is_empty() && d.spilled.is_empty());
    }

    #[test]
    fn random_changes_agree_with_a_plain_map_of_sets() {
        let mut d = Directory::default();
        let mut plain: FxHashMap<u64, Holders> = FxHashMap::default();
        let mut rng = crate::units::Rng::new(5);
        for _ in 0..20_000 {
            let line = rng.next_u64() % 16;
            let id = (rng.next_u64() % 12) as u32 * 31;
            if rng.next_u64().is_multiple_of(3) {
                d.remove(line, id);
                if let Some(h) = plain.get_mut(&line) {
                    h.remove(id);
                    if h.is_empty() {
                        plain.remove(&line);
                    }
                }
            } else {
                d.add(line, id);
                plain.entry(line).or_default().add(id);
            }
            assert_eq!(d.holders(line), plain.get(&line).copied().unwrap_or_default());
        }
        assert_eq!(d.len(), plain.len());
    }
}
