//! A cache array allocated when it is first filled.

use crate::cache::{Cache, Evicted, FreeWay, Geometry, Lookup};
use crate::units::{stream_seed, Line};

/// A cache array allocated when it is first filled: a platform has far more cores than a
/// scenario uses, and a cache never filled answers every lookup with a miss.
pub(super) struct LazyCache {
    pub(super) geometry: Geometry,
    /// Whether the cache keeps a stamp for each line.
    stamped: bool,
    pub(super) cache: Option<Box<Cache>>,
}

impl LazyCache {
    /// The cache of `geometry` whose random choices follow stream `stream` of the run's `seed`.
    pub(super) fn new(geometry: &Geometry, seed: u64, stream: u64) -> LazyCache {
        let mut geometry = geometry.clone();
        geometry.options.seed = stream_seed(seed, stream);
        LazyCache { geometry, stamped: false, cache: None }
    }

    pub(super) fn stamped(self, stamped: bool) -> LazyCache {
        LazyCache { stamped, ..self }
    }

    #[inline]
    pub(super) fn contains(&self, line: Line) -> bool {
        self.cache.as_ref().is_some_and(|c| c.contains(line))
    }

    #[inline]
    pub(super) fn access(&mut self, line: Line, write: bool) -> Lookup {
        self.cache.as_mut().map_or(Lookup::Miss, |c| c.access(line, write))
    }

    pub(super) fn insert(&mut self, line: Line, dirty: bool, allowed: u64) -> Option<Evicted> {
        self.insert_filling_from(line, dirty, allowed, FreeWay::Lowest)
    }

    pub(super) fn insert_filling_from(
        &mut self,
        line: Line,
        dirty: bool,
        allowed: u64,
        free_way: FreeWay,
    ) -> Option<Evicted> {
        let (geometry, stamped) = (&self.geometry, self.stamped);
        self.cache
            .get_or_insert_with(|| {
                let mut cache = Box::new(Cache::new(geometry));
                if stamped {
                    cache.keep_stamps();
                }
                cache
            })
            .insert_filling_from(line, dirty, allowed, free_way)
    }

    pub(super) fn stamp(&mut self, line: Line, stamp: u64) {
        if let Some(c) = self.cache.as_mut() {
            c.stamp(line, stamp);
        }
    }

    pub(super) fn stamp_of(&self, line: Line) -> Option<u64> {
        self.cache.as_ref().and_then(|c| c.stamp_of(line))
    }

    pub(super) fn remove(&mut self, line: Line) -> Option<bool> {
        self.cache.as_mut().and_then(|c| c.remove(line))
    }

    pub(super) fn mark_dirty(&mut self, line: Line) -> bool {
        self.cache.as_mut().is_some_and(|c| c.mark_dirty(line))
    }

    pub(super) fn is_dirty(&self, line: Line) -> bool {
        self.cache.as_ref().is_some_and(|c| c.is_dirty(line))
    }

    #[inline]
    pub(super) fn is_exclusive(&self, line: Line) -> bool {
        self.cache.as_ref().is_some_and(|c| c.is_exclusive(line))
    }

    pub(super) fn set_exclusive(&mut self, line: Line, exclusive: bool) {
        if let Some(c) = self.cache.as_mut() {
            c.set_exclusive(line, exclusive);
        }
    }

    pub(super) fn demote(&mut self, line: Line) {
        if let Some(c) = self.cache.as_mut() {
            c.demote(line);
        }
    }

    pub(super) fn mark_prefetched(&mut self, line: Line) {
        if let Some(c) = self.cache.as_mut() {
            c.mark_prefetched(line);
        }
    }

    pub(super) fn prefetch_set_of(&self, line: Line) {
        if let Some(c) = self.cache.as_ref() {
            c.prefetch_set_of(line);
        }
    }

    pub(super) fn lines(&self) -> impl Iterator<Item = (Line, bool)> + '_ {
        self.cache.iter().flat_map(|c| c.lines())
    }

    pub(super) fn check_invariants(&self) -> Result<(), String> {
        self.cache.as_ref().map_or(Ok(()), |c| c.check_invariants())
    }
}
