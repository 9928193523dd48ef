//! Strong types for addresses and time, so a line index is never confused with a byte address and
//! picoseconds never with cycles.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A byte address in the simulated physical address space.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Addr(pub u64);

/// A cache-line index: a byte address shifted right by the line size's log2.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Line(pub u64);

impl Addr {
    pub fn line(self, line_bits: u32) -> Line {
        Line(self.0 >> line_bits)
    }
    pub fn offset(self, bytes: u64) -> Addr {
        Addr(self.0 + bytes)
    }
}

/// Simulated time in picoseconds: integral so that event order never depends on rounding.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Time(pub u64);

impl Time {
    pub const ZERO: Time = Time(0);
    pub const MAX: Time = Time(u64::MAX);

    pub fn from_ns(ns: f64) -> Time {
        Time((ns * 1000.0).round().max(0.0) as u64)
    }
    pub fn from_us(us: f64) -> Time {
        Time::from_ns(us * 1000.0)
    }
    pub fn as_ns(self) -> f64 {
        self.0 as f64 / 1000.0
    }
    pub fn saturating_sub(self, other: Time) -> Time {
        Time(self.0.saturating_sub(other.0))
    }
}

/// Saturates: a time past `Time::MAX` (some 213 days) is never, not a wrap into the past.
impl Add for Time {
    type Output = Time;
    fn add(self, rhs: Time) -> Time {
        Time(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Time {
    fn add_assign(&mut self, rhs: Time) {
        *self = *self + rhs;
    }
}

impl Sub for Time {
    type Output = Time;
    fn sub(self, rhs: Time) -> Time {
        Time(self.0 - rhs.0)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} ns", self.as_ns())
    }
}

/// A core clock: converts cycles to time.
#[derive(Copy, Clone, Debug)]
pub struct Clock {
    ps_per_cycle: f64,
}

impl Clock {
    pub fn new(ghz: f64) -> Clock {
        Clock { ps_per_cycle: 1000.0 / ghz }
    }
    pub fn cycles(&self, cycles: f64) -> Time {
        Time((cycles * self.ps_per_cycle).round() as u64)
    }
    pub fn to_cycles(&self, t: Time) -> f64 {
        t.0 as f64 / self.ps_per_cycle
    }
}

/// The seed of one of a run's random streams: the scenario's seed mixed with the stream's id, so
/// that streams differ from each other and each follows the scenario's seed. Ids: 0 a probe's
/// random walk (the seed itself); a NIC queue's arrivals its index + 1; the hierarchy's caches and
/// rinsing from 2^32 (`hierarchy`).
pub fn stream_seed(seed: u64, stream: u64) -> u64 {
    seed ^ stream.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// A deterministic pseudo-random generator (SplitMix64): small, fast, and identical on every host.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
    /// Exponentially distributed with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * self.unit().ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_names_its_line_and_moves_by_bytes() {
        assert_eq!(Addr(0x1040).line(6), Line(0x41));
        assert_eq!(Addr(0x107f).line(6), Line(0x41));
        assert_eq!(Addr(0x1040).offset(63), Addr(0x107f));
    }

    #[test]
    fn time_conversions_round_trip() {
        assert_eq!(Time::from_ns(1.5).0, 1500);
        assert_eq!(Time::from_us(2.0).as_ns(), 2000.0);
        let clock = Clock::new(2.0);
        assert_eq!(clock.cycles(4.0), Time(2000));
        assert_eq!(clock.to_cycles(Time(2000)), 4.0);
        assert_eq!(Time(1_234_567).to_string(), "1234.567 ns");
    }

    #[test]
    fn time_past_the_last_picosecond_is_never() {
        assert_eq!(Time(2) + Time(3), Time(5));
        assert_eq!(Time(u64::MAX - 1) + Time(2), Time::MAX);
        let mut t = Time(u64::MAX - 1);
        t += Time(1);
        assert_eq!(t, Time::MAX);
        t += Time(1);
        assert_eq!(t, Time::MAX);
        let mut u = Time(7);
        u += Time(5);
        assert_eq!(u, Time(12));
    }

    #[test]
    fn rng_is_deterministic() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let u = Rng::new(1).unit();
        assert!(u > 0.0 && u <= 1.0);
        // SplitMix64 from state 0 (its published first output), then a unit from the second.
        let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.unit(), 3_886_858_653_415_213.0 / (1u64 << 53) as f64);
    }
}
