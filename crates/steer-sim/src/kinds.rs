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
        let message = e.inner().message().to_string();
        // serde reports an unknown key at its parent; name the key itself.
        if let Some(field) = message.strip_prefix("unknown field `").and_then(|m| m.split('`').next()) {
            if !path.ends_with(field) {
                path = join_key(&path, field);
            }
        }
        ConfigError::new(path, message)
    })
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

/// Every entry of a registry, ordered by name (registration order is the linker's).
pub fn sorted<T>(registry: &'static [T], name: impl Fn(&T) -> &'static str) -> Vec<&'static T> {
    let mut entries: Vec<&T> = registry.iter().collect();
    entries.sort_by_key(|e| name(e));
    entries
}

/// One entry of one of steer's registries, as tools list it.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// Which registry: `workload`, `device`, `placement`, `copy`, `replacement`, `prefetcher`,
    /// `preset`, `scenario`.
    pub registry: &'static str,
    pub name: &'static str,
    pub description: String,
    /// Its parameters with their defaults (kinds only).
    pub params: Vec<ParamDoc>,
}

/// Every registered entry of every registry, in registration order.
pub fn catalog() -> Vec<Listed> {
    let plain = |registry, name, description: &str| Listed {
        registry,
        name,
        description: description.into(),
        params: Vec::new(),
    };
    let mut listed = Vec::new();
    for kind in sorted(&crate::workloads::WORKLOADS, |k| k.name) {
        listed.push(Listed {
            registry: "workload",
            name: kind.name,
            description: kind.description.into(),
            params: (kind.defaults)(),
        });
    }
    for kind in sorted(&crate::devices::DEVICES, |k| k.name) {
        listed.push(Listed {
            registry: "device",
            name: kind.name,
            description: kind.description.into(),
            params: (kind.defaults)(),
        });
    }
    for policy in sorted(&crate::devices::placement::POLICIES, |p| p.name) {
        listed.push(plain("placement", policy.name, policy.description));
    }
    for policy in sorted(steer_offload::policy::COPY_POLICIES, |p| p.name) {
        listed.push(plain("copy", policy.name, policy.description));
    }
    for policy in steer_offload::policy::PLACEMENTS {
        listed.push(plain("cache-placement", policy.name, policy.description));
    }
    for policy in crate::cache::replacement::POLICIES {
        listed.push(plain("replacement", policy.name, policy.description));
    }
    for prefetcher in sorted(&crate::cache::prefetch::PREFETCHERS, |p| p.name) {
        listed.push(plain("prefetcher", prefetcher.name, prefetcher.description));
    }
    for preset in crate::platform::PRESETS {
        listed.push(plain("preset", preset.name, &preset.description()));
    }
    listed.push(plain("preset", "host", crate::platform::HOST_DESCRIPTION));
    for builtin in crate::scenario::BUILTINS {
        listed.push(plain("scenario", builtin.name, &builtin.description()));
    }
    listed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_entry_is_listed_once_with_a_description() {
        let listed = catalog();
        for entry in &listed {
            assert!(!entry.description.is_empty(), "{} {} has no description", entry.registry, entry.name);
            let same = listed.iter().filter(|e| e.registry == entry.registry && e.name == entry.name).count();
            assert_eq!(same, 1, "{} {} listed {same} times", entry.registry, entry.name);
        }
        let count = |registry| listed.iter().filter(|e| e.registry == registry).count();
        assert_eq!(count("workload"), crate::workloads::WORKLOADS.len());
        assert_eq!(count("replacement"), crate::cache::replacement::POLICIES.len());
        let tcp = listed.iter().find(|e| e.name == "tcp_rx").unwrap();
        assert!(tcp.params.iter().any(|p| p.key == "napi_budget" && p.value == "64"));
    }
}
