//! The catalog of every registry (kinds, policies, presets, built-in scenarios), as `steer kinds`
//! and the Python `steer.catalog()` list it: it sits above everything it lists.

use crate::params::ParamDoc;

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
    for preset in crate::platform::READ_PRESETS {
        listed.push(plain("preset", preset.name, preset.description));
    }
    for builtin in crate::scenario::BUILTINS {
        listed.push(plain("scenario", builtin.name, &builtin.description()));
    }
    listed
}

/// Every entry of a registry, ordered by name (registration order is the linker's).
fn sorted<T>(registry: &'static [T], name: impl Fn(&T) -> &'static str) -> Vec<&'static T> {
    let mut entries: Vec<&T> = registry.iter().collect();
    entries.sort_by_key(|e| name(e));
    entries
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
