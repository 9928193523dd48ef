//! Declared statistics. Every statistic a component reports is declared next to its code with a
//! key, a unit and a meaning (`stat!`, or `stats!` for a struct of counters), as parameters are
//! with `params!`. Results are built only through `Report::put`, which records each key's
//! declaration, so `steer stats` and the Python views read the same schema the run wrote.

use serde::Serialize;
use serde_json::{Map, Value};

/// One declared statistic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The key it is reported under (one path segment).
    pub key: &'static str,
    /// Its unit: `GB/s` (bytes), `Gb/s` (bits), `ns`, `packets`, `bytes`, `lines`, `fraction`, ...
    pub unit: &'static str,
    pub meaning: &'static str,
}

/// Declares a `Stat` constant: `stat!(NAME, "key", "unit", "meaning")`.
macro_rules! stat {
    ($(#[$attr:meta])* $name:ident, $key:literal, $unit:literal, $meaning:literal) => {
        $(#[$attr])*
        pub const $name: $crate::stats::Stat =
            $crate::stats::Stat { key: $key, unit: $unit, meaning: $meaning };
    };
}
pub(crate) use stat;

/// Declares a struct of counters: each field's doc comment is its meaning, `[unit]` its unit.
/// The struct gets `Default`, `reset()`, and `report(&self, out)`, which puts every field.
macro_rules! stats {
    (
        $(#[doc = $sdoc:literal])*
        pub struct $name:ident {
            $( $(#[doc = $doc:literal])+ $field:ident : $ty:ty [$unit:literal] ),* $(,)?
        }
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct $name { $( $(#[doc = $doc])+ pub $field: $ty ),* }

        impl $name {
            /// The declaration of each field, in order.
            pub const DECLARED: &'static [$crate::stats::Stat] = &[
                $( $crate::stats::Stat { key: stringify!($field), unit: $unit, meaning: concat!($($doc),+) } ),*
            ];

            /// Zeroes every counter.
            pub fn reset(&mut self) {
                *self = Self::default();
            }

            /// Puts every field under its declared key.
            pub fn report(&self, out: &mut $crate::stats::Report) {
                let mut declared = Self::DECLARED.iter();
                $( out.put(declared.next().expect("one declaration per field"), self.$field); )*
            }
        }
    };
}
pub(crate) use stats;

/// One entry of a result's schema: a key path (dotted; list items and map entries by index or
/// name), its unit and meaning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaEntry {
    pub key: String,
    pub unit: &'static str,
    pub meaning: String,
}

/// Builds a result object from declared statistics, recording the schema as it goes.
pub struct Report {
    path: String,
    values: Map<String, Value>,
    schema: Vec<SchemaEntry>,
}

impl Report {
    /// An empty report at the root of a result.
    pub fn root() -> Report {
        Report::at(String::new())
    }

    fn at(path: String) -> Report {
        Report { path, values: Map::new(), schema: Vec::new() }
    }

    fn key_path(&self, key: &str) -> String {
        crate::params::join_key(&self.path, key)
    }

    /// Puts a declared statistic.
    pub fn put(&mut self, stat: &Stat, value: impl Into<Value>) {
        let key = self.key_path(stat.key);
        self.schema.push(SchemaEntry { key, unit: stat.unit, meaning: stat.meaning.trim().to_string() });
        self.values.insert(stat.key.to_string(), value.into());
    }

    /// Puts a statistic whose key is made at run time (a fill source, a CPU number) under a
    /// declaration that says what all such keys mean.
    pub fn put_named(&mut self, key: &str, declared: &Stat, value: impl Into<Value>) {
        let path = self.key_path(key);
        self.schema.push(SchemaEntry { key: path, unit: declared.unit, meaning: declared.meaning.trim().to_string() });
        self.values.insert(key.to_string(), value.into());
    }

    /// A nested object under `key`, filled by `fill` (added to what is there already).
    pub fn section(&mut self, key: &str, fill: impl FnOnce(&mut Report)) {
        let values = match self.values.remove(key) {
            Some(Value::Object(values)) => values,
            _ => Map::new(),
        };
        let mut inner = Report { path: self.key_path(key), values, schema: Vec::new() };
        fill(&mut inner);
        self.absorb(key, inner);
    }

    /// A list under `key`, one object per item, each filled by `fill(index, item, report)`.
    pub fn list<T>(&mut self, key: &str, items: impl IntoIterator<Item = T>, mut fill: impl FnMut(&mut Report, T)) {
        let mut values = Vec::new();
        for (i, item) in items.into_iter().enumerate() {
            let mut inner = Report::at(self.key_path(&format!("{key}.{i}")));
            fill(&mut inner, item);
            self.schema.append(&mut inner.schema);
            values.push(Value::Object(inner.values));
        }
        self.values.insert(key.to_string(), Value::Array(values));
    }

    fn absorb(&mut self, key: &str, mut inner: Report) {
        self.schema.append(&mut inner.schema);
        self.values.insert(key.to_string(), Value::Object(inner.values));
    }

    /// The object built, and the schema of every key in it.
    pub fn finish(self) -> (Value, Vec<SchemaEntry>) {
        (Value::Object(self.values), self.schema)
    }
}

stat!(MIN, "min", "ns", "smallest sample");
stat!(P10, "p10", "ns", "10th percentile (nearest rank)");
stat!(P25, "p25", "ns", "25th percentile (nearest rank)");
stat!(P50, "p50", "ns", "median (nearest rank)");
stat!(P75, "p75", "ns", "75th percentile (nearest rank)");
stat!(P90, "p90", "ns", "90th percentile (nearest rank)");
stat!(P99, "p99", "ns", "99th percentile (nearest rank)");
stat!(MAX, "max", "ns", "largest sample");
stat!(MEAN, "mean", "ns", "mean");
stat!(COUNT, "count", "samples", "number of samples");

/// Samples of a latency, summarised one way everywhere: nearest-rank percentiles and the mean.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Distribution {
    samples: Vec<f64>,
}

/// A distribution's summary: enough percentiles to draw its CDF, the mean and the count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub min: f64,
    pub p10: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
    pub count: usize,
}

impl Distribution {
    pub fn add(&mut self, sample: f64) {
        self.samples.push(sample);
    }

    pub fn clear(&mut self) {
        self.samples.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Distribution) {
        self.samples.extend_from_slice(&other.samples);
    }

    /// The value at or below which a fraction `p` of the samples lie (nearest rank), of samples
    /// sorted in increasing order.
    fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
        let rank = (p * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }

    /// Percentiles, mean and count; `None` without samples.
    pub fn summary(&self) -> Option<Summary> {
        if self.samples.is_empty() {
            return None;
        }
        let mut sorted = self.samples.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let at = |p| Self::nearest_rank(&sorted, p);
        Some(Summary {
            min: sorted[0],
            p10: at(0.10),
            p25: at(0.25),
            p50: at(0.50),
            p75: at(0.75),
            p90: at(0.90),
            p99: at(0.99),
            max: sorted[sorted.len() - 1],
            mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
            count: sorted.len(),
        })
    }

    /// Puts the summary under `key` (described by `declared`), or null without samples.
    pub fn report(&self, out: &mut Report, declared: &Stat) {
        match self.summary() {
            None => out.put(declared, Value::Null),
            Some(summary) => out.section(declared.key, |r| {
                r.put(&MIN, summary.min);
                r.put(&P10, summary.p10);
                r.put(&P25, summary.p25);
                r.put(&P50, summary.p50);
                r.put(&P75, summary.p75);
                r.put(&P90, summary.p90);
                r.put(&P99, summary.p99);
                r.put(&MAX, summary.max);
                r.put(&MEAN, summary.mean);
                r.put(&COUNT, summary.count);
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    stats! {
        /// Test counters.
        pub struct Counters {
            /// Things seen.
            seen: u64 ["things"],
            /// Bytes of them.
            bytes: u64 ["bytes"],
        }
    }

    #[test]
    fn nearest_rank_percentiles_of_hand_worked_samples() {
        let mut d = Distribution::default();
        assert_eq!(d.summary(), None);
        assert!(d.is_empty());
        for v in [5.0, 1.0, 4.0, 2.0, 3.0] {
            d.add(v);
        }
        assert!(!d.is_empty());
        // Sorted 1..5: rank ceil(p * 5): p10 -> 1, p25 -> 2, p50 -> 3, p75 -> 4, p90 and p99 -> 5.
        assert_eq!(
            d.summary(),
            Some(Summary {
                min: 1.0,
                p10: 1.0,
                p25: 2.0,
                p50: 3.0,
                p75: 4.0,
                p90: 5.0,
                p99: 5.0,
                max: 5.0,
                mean: 3.0,
                count: 5
            })
        );
        let mut hundred = Distribution::default();
        (1..=100).rev().for_each(|v| hundred.add(v as f64));
        let s = hundred.summary().unwrap();
        assert_eq!(
            (s.min, s.p10, s.p25, s.p50, s.p75, s.p90, s.p99, s.max),
            (1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 100.0)
        );
    }

    #[test]
    fn a_report_records_every_key_with_its_declaration() {
        let counters = Counters { seen: 3, bytes: 192 };
        let mut root = Report::root();
        root.section("queue", |r| counters.report(r));
        root.list("items", [1u64, 2], |r, n| r.put(&COUNT, n));
        let (value, schema) = root.finish();
        assert_eq!(value["queue"]["bytes"], 192);
        assert_eq!(value["items"][1]["count"], 2);
        let keys: Vec<_> = schema.iter().map(|e| (e.key.as_str(), e.unit)).collect();
        assert_eq!(
            keys,
            [
                ("queue.seen", "things"),
                ("queue.bytes", "bytes"),
                ("items.0.count", "samples"),
                ("items.1.count", "samples")
            ]
        );
        assert_eq!(schema[0].meaning, "Things seen.");
        let mut reset = counters.clone();
        reset.reset();
        assert_eq!(reset, Counters::default());
    }

    #[test]
    fn an_empty_distribution_reports_null() {
        let mut root = Report::root();
        Distribution::default().report(&mut root, &stat_for_test());
        assert_eq!(root.finish().0["latency"], Value::Null);
    }

    fn stat_for_test() -> Stat {
        Stat { key: "latency", unit: "ns", meaning: "a latency" }
    }
}
