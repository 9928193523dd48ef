//! Replacement policies, one file each behind `ReplacementPolicy`, registered by name in `POLICIES`,
//! so a cache spec selects one with `replacement = "NAME"`. A cache holds its policy as a
//! `Replacement`, an enum of the policies, so the calls on every lookup are direct (and can be
//! inlined) rather than through a trait object: a new policy is its file, its `mod` line, a
//! variant and an arm of `dispatch!`, and its `POLICIES` entry, all in this file.

use super::host_prefetch;

mod lru;
mod random;
mod rrip;
mod tree_plru;

pub use lru::Lru;
pub use random::Random;
pub use rrip::{Rrip, RripMode};
pub use tree_plru::TreePlru;

/// The contract between a set-associative cache and its replacement policy.
///
/// The cache owns tags and validity; the policy owns only recency state. The cache calls `on_hit`
/// for every hit, `on_fill` when a line is installed, `on_invalidate` when a line leaves without
/// being chosen as a victim, and `victim` only when every way allowed by `allowed` is valid
/// (the cache fills invalid ways first). `allowed` holds no bit beyond the set's ways, and at least
/// one; `victim` must return a way whose bit is set in it.
/// `demote` moves a valid way to where the policy evicts next (a fill not expected to be reused
/// soon, such as an injected line), so that it displaces nothing until it is used.
pub trait ReplacementPolicy: Send {
    fn on_hit(&mut self, set: usize, way: usize, write: bool);
    fn on_fill(&mut self, set: usize, way: usize);
    fn demote(&mut self, set: usize, way: usize);
    fn on_invalidate(&mut self, _set: usize, _way: usize) {}
    fn victim(&mut self, set: usize, allowed: u64) -> usize;
    /// Starts loading the host memory holding `set`'s state (`super::host_prefetch`): a speed
    /// hint for callers that know their next sets (the trace replayer); a policy may leave it out.
    fn prefetch_set(&self, _set: usize) {}
}

/// Options every policy may read.
#[derive(Debug, Clone, Copy)]
pub struct PolicyOptions {
    /// Whether a write hit counts as a use (real caches: yes; pycachesim: no).
    pub write_hit_updates_recency: bool,
    /// Seeds the policy's random choices (only `random` makes any): each cache of a run draws
    /// its own stream, derived from the scenario's seed.
    pub seed: u64,
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
    /// that groups of sets can be simulated apart (the `steer-trace` crate's set groups).
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
        build: |sets, _, options| Replacement::Random(Random::new(sets, options.seed)),
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

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: PolicyOptions = PolicyOptions { write_hit_updates_recency: true, seed: 0 };

    #[test]
    fn tree_plru_takes_power_of_two_ways_up_to_64() {
        let check = find("tree_plru").unwrap().check_ways;
        assert!(check(8).is_ok() && check(64).is_ok());
        assert_eq!(check(12), Err("tree_plru needs a power-of-two way count up to 64, got 12".into()));
        assert!(check(128).is_err());
        assert!(POLICIES.iter().filter(|p| p.name != "tree_plru").all(|p| (p.check_ways)(12).is_ok()));
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

    #[test]
    fn registry_knows_policies() {
        assert!(find("lru").is_some());
        assert!((find("tree_plru").unwrap().check_ways)(12).is_err());
        assert!(find("random").is_some() && find("bogus").is_none());
    }
}
