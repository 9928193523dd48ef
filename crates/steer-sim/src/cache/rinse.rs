//! An L3 that writes dirty lines back to memory in idle time and keeps them, clean (AMD's
//! "dynamically controlled cache rinsing", US 12,399,839 B2: the cache rinses "as bandwidth
//! allows", picking its entries by age, by set or at random). Modelled as an engine of bounded
//! throughput per L3, shared evenly by the lines that entered that L3 dirty: with `D` of them
//! present, each is rinsed at `rate / D` per unit of time. Each L3 keeps a clock that advances by
//! `rate / D` per unit of time; a line's chance of having been rinsed during its stay is
//! 1 - exp(-(clock at leaving - clock at entering)). The draw is made when the line leaves other
//! than by eviction (a core takes it, a write replaces it), and the write is booked then, an
//! idle-time write moved to when its effect is known; an evicted dirty line is written once,
//! rinsed or not. A line that entered clean (and was written in the L3 later) is never rinsed.

use crate::units::{Rng, Time};

/// The stamp of a line that entered clean: not a candidate.
const CLEAN: u64 = u64::MAX;

pub struct RinseEngine {
    lines_per_ps: f64,
    rng: Rng,
    l3s: Vec<L3State>,
}

#[derive(Debug, Clone, Copy, Default)]
struct L3State {
    /// Lines present that entered dirty.
    dirty: u64,
    /// Rinses each such line has been owed since the start, summed over time.
    clock: f64,
    last: Time,
}

impl RinseEngine {
    /// An engine of `gbs` GB/s of `line_bytes` lines for each of `l3s` L3s, drawing from the
    /// random stream seeded `stream`.
    pub fn new(gbs: f64, line_bytes: u32, l3s: u32, stream: u64) -> RinseEngine {
        RinseEngine {
            lines_per_ps: gbs * 1e9 / line_bytes as f64 / 1e12,
            rng: Rng::new(stream),
            l3s: vec![L3State::default(); l3s as usize],
        }
    }

    /// Brings L3 `l3`'s clock to `now` (a time before the last seen counts as the last).
    fn advance(&mut self, l3: u32, now: Time) -> &mut L3State {
        let state = &mut self.l3s[l3 as usize];
        if now > state.last {
            if state.dirty > 0 {
                state.clock += self.lines_per_ps * (now.0 - state.last.0) as f64 / state.dirty as f64;
            }
            state.last = now;
        }
        state
    }

    /// A line enters L3 `l3` at `now`; returns the stamp to keep with it.
    pub fn entered(&mut self, l3: u32, dirty: bool, now: Time) -> u64 {
        let state = self.advance(l3, now);
        if !dirty {
            return CLEAN;
        }
        state.dirty += 1;
        // A non-negative f64's bits order as its value, and give it back exactly.
        state.clock.to_bits()
    }

    /// The line stamped `stamp` leaves L3 `l3` at `now` other than by eviction; returns whether
    /// it was rinsed during its stay.
    pub fn left(&mut self, l3: u32, stamp: u64, now: Time) -> bool {
        if stamp == CLEAN {
            return false;
        }
        let state = self.advance(l3, now);
        state.dirty -= 1;
        let owed = state.clock - f64::from_bits(stamp);
        // `unit` is uniform in (0, 1]: above exp(-x) with probability 1 - exp(-x).
        self.rng.unit() > (-owed).exp()
    }

    /// The line stamped `stamp` is evicted from L3 `l3` at `now`.
    pub fn evicted(&mut self, l3: u32, stamp: u64, now: Time) {
        if stamp != CLEAN {
            self.advance(l3, now).dirty -= 1;
        }
    }

    /// The next draw of the rinse stream (tests of its seeding).
    #[cfg(test)]
    pub fn next_draw(&mut self) -> u64 {
        self.rng.next_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(t: f64) -> Time {
        Time::from_ns(t)
    }

    /// 1 GB/s of 64 B lines: one line every 64 ns.
    fn engine() -> RinseEngine {
        RinseEngine::new(1.0, 64, 2, 1)
    }

    #[test]
    fn the_clock_advances_by_the_rate_shared_among_the_dirty_lines_present() {
        let mut e = engine();
        let first = e.entered(0, true, ns(0.0));
        // Alone for 64 ns: one rinse owed. With a second line, half a rinse each per 64 ns.
        let second = e.entered(0, true, ns(64.0));
        e.advance(0, ns(192.0));
        assert_eq!(f64::from_bits(first), 0.0);
        assert!((f64::from_bits(second) - 1.0).abs() < 1e-12);
        assert!((e.l3s[0].clock - 2.0).abs() < 1e-12, "{}", e.l3s[0].clock);
        // The other L3 has no dirty lines: its clock stands still, and a clean line changes nothing.
        assert_eq!(e.entered(1, false, ns(192.0)), CLEAN);
        e.advance(1, ns(1000.0));
        assert_eq!((e.l3s[1].clock, e.l3s[1].dirty), (0.0, 0));
    }

    #[test]
    fn a_line_leaving_at_once_was_not_rinsed_and_one_owed_many_rinses_was() {
        let mut e = engine();
        let stamp = e.entered(0, true, ns(0.0));
        assert!(!e.left(0, stamp, ns(0.0)), "nothing owed: exp(0) = 1 is never exceeded");
        let stamp = e.entered(0, true, ns(0.0));
        // Alone for 64 µs: 1000 rinses owed.
        assert!(e.left(0, stamp, ns(64_000.0)));
        assert_eq!(e.l3s[0].dirty, 0);
    }

    #[test]
    fn clean_lines_are_never_rinsed_and_evictions_leave_the_count() {
        let mut e = engine();
        assert!(!e.left(0, CLEAN, ns(1e9)));
        let stamp = e.entered(0, true, ns(0.0));
        e.entered(0, true, ns(0.0));
        e.evicted(0, stamp, ns(10.0));
        e.evicted(0, CLEAN, ns(10.0));
        assert_eq!(e.l3s[0].dirty, 1);
        // The clock advanced at the rate for one line from then on: 64 ns, one rinse owed.
        e.advance(0, ns(74.0));
        assert!((e.l3s[0].clock - (10.0 / 64.0 / 2.0 + 1.0)).abs() < 1e-12, "{}", e.l3s[0].clock);
    }

    #[test]
    fn an_earlier_time_than_the_last_moves_nothing() {
        let mut e = engine();
        e.entered(0, true, ns(100.0));
        let clock = e.l3s[0].clock;
        e.advance(0, ns(50.0));
        assert_eq!((e.l3s[0].clock, e.l3s[0].last), (clock, ns(100.0)));
    }

    #[test]
    fn with_d_lines_owed_one_rinse_each_about_1_minus_1_over_e_are_rinsed() {
        // 2,000 lines enter together; each is owed one rinse after 2,000 x 64 ns.
        let mut e = RinseEngine::new(1.0, 64, 1, 7);
        let stamps: Vec<u64> = (0..2000).map(|_| e.entered(0, true, ns(0.0))).collect();
        // Leaving one after another changes the count, so they leave together in effect: the
        // clock is read at the same instant for all.
        e.advance(0, ns(2000.0 * 64.0));
        let rinsed = stamps.iter().filter(|&&s| e.left(0, s, ns(2000.0 * 64.0))).count();
        // 1 - 1/e = 0.632; 2,000 draws: within 0.06 by far more than three standard deviations.
        assert!((rinsed as f64 / 2000.0 - 0.632).abs() < 0.06, "{rinsed}");
    }
}
