//! Registered kinds: what a scenario names with `kind = "..."` (devices, workloads). A kind is one
//! file with its parameters (`params!`), its behaviour and a `KIND` static that registers itself
//! in its registry (a `linkme` distributed slice), plus its `mod` line; names, descriptions and
//! parameter docs shown anywhere come from the registries.

use std::any::Any;
use std::fmt::Debug;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{ConfigError, ConfigResult};
use crate::params::{join_key, Describe, ParamDoc};

/// What every kind's parameters can do, whatever the kind: be written back as TOML, compared,
/// described.
pub trait SpecBase: Describe + Debug + Any {
    fn to_table(&self) -> toml::Table;
    fn eq_dyn(&self, other: &dyn Any) -> bool;
    fn as_any(&self) -> &dyn Any;
}

impl<T: Describe + Debug + Serialize + PartialEq + Any> SpecBase for T {
    fn to_table(&self) -> toml::Table {
        toml::Table::try_from(self).expect("parameters serialize to a table")
    }
    fn eq_dyn(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<T>() == Some(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Deserializes `value` as `T`; errors name the key path below `base`.
pub fn deserialize_at<T: DeserializeOwned>(value: toml::Value, base: &str) -> ConfigResult<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e
            .path()
            .iter()
            .filter_map(|segment| match segment {
                serde_path_to_error::Segment::Seq { index } => Some(index.to_string()),
                serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                serde_path_to_error::Segment::Enum { variant } => Some(variant.clone()),
                serde_path_to_error::Segment::Unknown => None,
            })
            .collect::<Vec<_>>()
            .join(".");
        let mut path = join_key(base, &inner);
        let message = in_toml_words(e.inner().message());
        // serde reports an unknown key at its parent; name the key itself.
        if let Some(field) = message.strip_prefix("unknown field `").and_then(|m| m.split('`').next()) {
            if !path.ends_with(field) {
                path = join_key(&path, field);
            }
        }
        ConfigError::new(path, message)
    })
}

/// serde's message in the words of TOML, not of Rust's types: "expected u32" is "expected a whole
/// number from 0 to 4294967295", a struct or map is a table, a sequence an array.
fn in_toml_words(message: &str) -> String {
    let Some((found, expected)) = message.rsplit_once(", expected ") else {
        return message.to_string();
    };
    let expected = match expected {
        "f32" | "f64" => "a number".to_string(),
        "u8" => format!("a whole number from 0 to {}", u8::MAX),
        "u16" => format!("a whole number from 0 to {}", u16::MAX),
        "u32" => format!("a whole number from 0 to {}", u32::MAX),
        // TOML's integers are 64-bit signed: its largest is the largest such a key can take.
        "u64" | "usize" => format!("a whole number from 0 to {}", i64::MAX),
        "i32" => format!("a whole number from {} to {}", i32::MIN, i32::MAX),
        "i64" => format!("a whole number from {} to {}", i64::MIN, i64::MAX),
        "a sequence" => "an array".to_string(),
        "a map" => "a table".to_string(),
        other if other.starts_with("struct ") => "a table".to_string(),
        other => other.to_string(),
    };
    let found = match found.strip_prefix("invalid type: ") {
        Some("sequence") => "invalid type: array",
        Some("map") => "invalid type: table",
        _ => found,
    };
    format!("{found}, expected {expected}")
}

/// A registry entry: a kind's name, its one-line description, how to read its parameters and its
/// defaults (for documentation).
pub struct Kind<S: ?Sized> {
    pub name: &'static str,
    pub description: &'static str,
    pub parse: fn(toml::Value, &str) -> ConfigResult<std::sync::Arc<S>>,
    pub defaults: fn() -> Vec<ParamDoc>,
}

/// The entry of `name` in `registry`; the error (at `path`) lists the known names.
pub fn find<'a, S: ?Sized>(registry: &'a [Kind<S>], what: &str, name: &str, path: &str) -> ConfigResult<&'a Kind<S>> {
    registry.iter().find(|k| k.name == name).ok_or_else(|| {
        let known: Vec<_> = registry.iter().map(|k| k.name).collect();
        ConfigError::new(path, format!("unknown {what} `{name}` (known: {})", known.join(", ")))
    })
}

/// A kind's parameters with their defaults, for documentation.
pub fn defaults_of<T: Default + Describe>() -> Vec<ParamDoc> {
    T::default().describe()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)] // read only through Debug: the test is about the errors
    struct Types {
        rate: f64,
        count: u32,
        seed: u64,
        offset: i64,
        narrow: u8,
        list: Vec<u32>,
        inner: Inner,
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        on: bool,
    }

    #[test]
    fn a_wrong_type_is_named_in_the_words_of_toml() {
        let error = |key: &str, value: &str| {
            let mut table: toml::Table = toml::from_str(
                "rate = 1.0\ncount = 1\nseed = 1\noffset = 1\nnarrow = 1\nlist = [1]\ninner = { on = true }",
            )
            .unwrap();
            let value: toml::Table = toml::from_str(&format!("v = {value}")).unwrap();
            table.insert(key.to_string(), value["v"].clone());
            deserialize_at::<Types>(toml::Value::Table(table), "x").unwrap_err().to_string()
        };
        assert_eq!(error("rate", "[1]"), "x.rate: invalid type: array, expected a number");
        assert_eq!(error("rate", "{ a = 1 }"), "x.rate: invalid type: table, expected a number");
        assert_eq!(
            error("count", "-1"),
            "x.count: invalid value: integer `-1`, expected a whole number from 0 to 4294967295"
        );
        assert_eq!(
            error("count", "\"x\""),
            "x.count: invalid type: string \"x\", expected a whole number from 0 to 4294967295"
        );
        assert_eq!(
            error("seed", "-1"),
            "x.seed: invalid value: integer `-1`, expected a whole number from 0 to 9223372036854775807"
        );
        assert_eq!(
            error("narrow", "256"),
            "x.narrow: invalid value: integer `256`, expected a whole number from 0 to 255"
        );
        assert_eq!(
            error("offset", "1.5"),
            "x.offset: invalid type: floating point `1.5`, expected a whole number from -9223372036854775808 to 9223372036854775807"
        );
        assert_eq!(error("list", "1"), "x.list: invalid type: integer `1`, expected an array");
        assert_eq!(error("inner", "1"), "x.inner: invalid type: integer `1`, expected a table");
        assert_eq!(error("inner", "{ on = 1 }"), "x.inner.on: invalid type: integer `1`, expected a boolean");
        // A message with no type in it passes unchanged.
        assert_eq!(error("inner", "{ on = true, off = 1 }"), "x.inner.off: unknown field `off`, expected `on`");
    }
}
