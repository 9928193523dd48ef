//! `stream`: per 4 KiB region, follow accesses moving up or down and keep fetching ahead of the
//! furthest one, as the stream prefetchers of AMD's Zen L2 ("additional sequential lines in
//! ascending or descending directions", Zen 5 software optimization guide) do. Two consecutive
//! lines start a stream; from then on an access further along it moves it on, and one behind
//! its furthest (an earlier miss served late, a request the L1's own prefetcher overtook) leaves
//! it as it is. The stream's head, the next line it fetches, runs ahead by at most `degree` lines
//! per access until it is `distance` lines beyond the furthest access: it ramps up, as stream
//! prefetchers that "run up to N lines ahead" issuing a few requests per access do.
//!
//! With `cross_pages` the head runs on past its region's end, and an access in the next region
//! that the stream already fetched ahead of carries the stream on there (a streamer following
//! physical memory a larger page maps, or a next-page prefetcher); without it a stream stops at
//! its region's end and the next region starts its own.

use super::{region_of, Prefetcher, PrefetcherInfo, RegionTable, Trigger, REGION_LINES};
use crate::units::Line;

/// The kind's registration.
#[linkme::distributed_slice(super::PREFETCHERS)]
pub static KIND: PrefetcherInfo = PrefetcherInfo {
    name: "stream",
    description: "per 4 KiB region, follow accesses moving up or down and keep up to `distance` lines ahead of the furthest, `degree` lines per access",
    build: |spec| {
        Some(Box::new(Stream {
            degree: spec.degree as i64,
            distance: spec.distance as i64,
            cross_pages: spec.cross_pages,
            table: RegionTable::new(),
        }))
    },
};

#[derive(Clone, Copy)]
struct Region {
    /// The furthest line accessed along the stream (the last one before it has a direction).
    furthest: i64,
    /// +1 up, -1 down, 0 until two consecutive lines give it.
    direction: i64,
    /// The next line the stream fetches.
    head: i64,
}

struct Stream {
    degree: i64,
    distance: i64,
    cross_pages: bool,
    table: RegionTable<Region>,
}

impl Stream {
    /// The stream of the region before `line`'s if its head already ran up past `line`, or of the
    /// region after it if it ran down past it: it carries on in `line`'s region. (Only a stream
    /// going that way has its head there.)
    fn carried_into(&self, line: i64) -> Option<Region> {
        [1, -1].into_iter().find_map(|direction| {
            let neighbour = line - direction * REGION_LINES as i64;
            let from = self.table.get(Line(u64::try_from(neighbour).ok()?))?;
            (along(direction, line, from.head) > 0).then_some(*from)
        })
    }
}

/// How many lines `line` lies beyond `from` in a stream's direction (+1 or -1).
fn along(direction: i64, from: i64, line: i64) -> i64 {
    if direction == 1 {
        line - from
    } else {
        from - line
    }
}

impl Prefetcher for Stream {
    fn on_access(&mut self, trigger: Trigger, out: &mut Vec<Line>) {
        let line = trigger.line.0 as i64;
        let carried =
            if self.cross_pages && self.table.get(trigger.line).is_none() { self.carried_into(line) } else { None };
        let entry =
            self.table.entry(trigger.line, || carried.unwrap_or(Region { furthest: line, direction: 0, head: line }));
        let delta = line - entry.furthest;
        if entry.direction == 0 {
            if delta.abs() == 1 {
                *entry = Region { furthest: line, direction: delta, head: line + delta };
            } else {
                entry.furthest = line;
                return;
            }
        } else if along(entry.direction, entry.furthest, line) > 0 {
            entry.furthest = line;
            if along(entry.direction, line, entry.head) <= 0 {
                entry.head = line + entry.direction;
            }
        } else {
            return;
        }
        let lines = region_of(trigger.line);
        for _ in 0..self.degree {
            let beyond = if self.cross_pages { entry.head < 0 } else { !lines.contains(&entry.head) };
            if along(entry.direction, entry.furthest, entry.head) > self.distance || beyond {
                break;
            }
            out.push(Line(entry.head as u64));
            entry.head += entry.direction;
        }
    }
}
