//! Scenarios: human-edited TOML files naming a platform (preset or full spec), devices, workloads
//! and the simulated window. A `[params]` table declares named parameters used in the body as
//! `"${name}"`; `--set NAME=VALUE` overrides a parameter and `--set a.b.c=VALUE` any key path.
//!
//! Loading is: parse -> apply overrides -> substitute parameters -> merge the platform preset ->
//! deserialize (unknown keys and wrong types rejected) -> validate values. Every error becomes one
//! line naming the key and where it is: `file:line:column: key: message`.

use std::ops::Range;

use crate::devices::nic::NicSpec;
use crate::error::{ensure, ConfigError, ConfigResult};
use crate::params::{params, Describe, ParamDoc};
use crate::platform::{self, MaskAgent, PlatformSpec};
use crate::workloads::{SystemShape, WorkloadSpec};

params! {
    /// The simulated time window.
    pub struct SimSpec {
        /// Simulated time before statistics start (µs): fills caches and rings.
        warmup_us: f64 = 200.0,
        /// Measured window after the warm-up (µs).
        measure_us: f64 = 1000.0,
    }
}

impl Describe for toml::Table {
    fn describe_into(&self, prefix: &str, meaning: &str, out: &mut Vec<ParamDoc>) {
        for (key, value) in self {
            out.push(ParamDoc {
                key: crate::params::join_key(prefix, key),
                value: value.to_string(),
                meaning: meaning.to_string(),
            });
        }
    }
}

params! {
    /// A scenario.
    pub struct Scenario {
        /// Scenario name (default: the file name without extension).
        name: String = String::new(),
        /// One line saying what the scenario shows.
        description: String = String::new(),
        /// Seed of every random choice; same scenario and seed give identical results.
        seed: u64 = 1,
        /// Named parameters with their values (used as "${name}" in the body).
        params: toml::Table = toml::Table::new(),
        /// The platform.
        platform: PlatformSpec = PlatformSpec::default(),
        /// The simulated window.
        sim: SimSpec = SimSpec::default(),
        /// Devices (NICs).
        devices: Vec<NicSpec> = Vec::new(),
        /// Workloads, one per CPU.
        workloads: Vec<WorkloadSpec> = Vec::new(),
    }
}

impl Scenario {
    /// Checks every value that types alone cannot (ranges, references between parts).
    pub fn validate(&self) -> ConfigResult<()> {
        self.platform.validate("platform")?;
        ensure(self.sim.warmup_us >= 0.0, "sim.warmup_us", || {
            format!("must not be negative (got {})", self.sim.warmup_us)
        })?;
        ensure(self.sim.measure_us > 0.0, "sim.measure_us", || {
            format!("must be positive (got {})", self.sim.measure_us)
        })?;
        let topology = &self.platform.topology;
        let cpus = topology.cpus();
        let nodes = self.platform.memory.nodes(topology);
        for (i, device) in self.devices.iter().enumerate() {
            device.validate(&format!("devices.{i}"), cpus, nodes)?;
            if let Some(j) = self.devices[..i].iter().position(|d| d.name == device.name) {
                return Err(ConfigError::new(
                    format!("devices.{i}.name"),
                    format!("`{}` is already the name of devices.{j}", device.name),
                ));
            }
        }
        for (level, spec) in [("l1d", &self.platform.l1d), ("l2", &self.platform.l2), ("l3", &self.platform.l3)] {
            for (i, mask) in spec.way_masks.iter().enumerate() {
                if let Ok(MaskAgent::Device(name)) = mask.parsed_agent() {
                    ensure(
                        self.devices.iter().any(|d| d.name == name),
                        &format!("platform.{level}.way_masks.{i}.agent"),
                        || format!("no device named `{name}`"),
                    )?;
                }
            }
        }
        let shape = SystemShape {
            cpus,
            devices: self
                .devices
                .iter()
                .map(|d| (d.name.as_str(), d.expanded_queues().iter().map(|q| q.consumer_cpu).collect()))
                .collect(),
        };
        for (i, device) in self.devices.iter().enumerate() {
            if device.placement.policy == "ddio" {
                ensure(
                    self.platform.io.ddio_mask(self.platform.l3.ways) != 0,
                    &format!("devices.{i}.placement.policy"),
                    || format!("platform `{}` has no DDIO ways (platform.io.ddio_ways = 0)", self.platform.name),
                )?;
            }
        }
        let mut busy: Vec<(u32, usize)> = Vec::new();
        for (i, workload) in self.workloads.iter().enumerate() {
            workload.validate(&format!("workloads.{i}"), &shape)?;
            for cpu in workload.cpus(&shape) {
                if let Some((_, j)) = busy.iter().find(|(c, _)| *c == cpu) {
                    return Err(ConfigError::new(
                        format!("workloads.{i}.cpu"),
                        format!("CPU {cpu} already runs workloads.{j}"),
                    ));
                }
                busy.push((cpu, i));
            }
        }
        Ok(())
    }

    /// The fully resolved scenario as TOML: every default filled in, parameters substituted.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a scenario serializes")
    }
}

/// Where an error points: a file position, a `--set` override, or nothing more specific.
fn position_of(text: &str, span: Range<usize>) -> (usize, usize) {
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
    (line, column)
}

/// The span of the deepest item along a dotted path in the parsed document.
fn locate(doc: &toml_edit::ImDocument<String>, path: &str) -> Option<Range<usize>> {
    use toml_edit::{Item, Table, Value};
    enum Node<'a> {
        Table(&'a Table),
        Item(&'a Item),
        Value(&'a Value),
    }
    let mut node = Node::Table(doc.as_table());
    let mut best = None;
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let index = segment.parse::<usize>().ok();
        let (next, key_span) = match node {
            Node::Table(table) | Node::Item(Item::Table(table)) => {
                (table.get(segment).map(Node::Item), table.key(segment).and_then(|k| k.span()))
            }
            Node::Item(Item::ArrayOfTables(array)) => (index.and_then(|i| array.get(i)).map(Node::Table), None),
            Node::Item(Item::Value(value)) | Node::Value(value) => match value {
                Value::InlineTable(table) => {
                    (table.get(segment).map(Node::Value), table.key(segment).and_then(|k| k.span()))
                }
                Value::Array(array) => (index.and_then(|i| array.get(i)).map(Node::Value), None),
                _ => (None, None),
            },
            Node::Item(_) => (None, None),
        };
        let Some(next) = next else { break };
        let span = match &next {
            Node::Table(table) => table.span(),
            Node::Item(item) => item.span(),
            Node::Value(value) => value.span(),
        };
        best = key_span.or(span).or(best);
        node = next;
    }
    best
}

/// A scenario file's text and how to name it in messages.
pub struct ScenarioSource<'a> {
    pub text: &'a str,
    /// Shown in error messages (a path, or `builtin:NAME`).
    pub origin: &'a str,
    /// Default scenario name when the file does not set one.
    pub default_name: &'a str,
}

/// Loads, resolves and validates a scenario. The error is one line.
pub fn load(source: &ScenarioSource, overrides: &[String]) -> Result<Scenario, String> {
    let doc = toml_edit::ImDocument::parse(source.text.to_string()).map_err(|e| {
        let (line, column) = e.span().map(|s| position_of(source.text, s)).unwrap_or((1, 1));
        format!("{}:{line}:{column}: invalid TOML: {}", source.origin, e.message().trim())
    })?;
    let mut tree: toml::Table =
        toml::from_str(source.text).map_err(|e| format!("{}: invalid TOML: {}", source.origin, e.message()))?;
    let mut overridden = Vec::new();
    let result = resolve(&mut tree, overrides, &mut overridden, source.default_name);
    let scenario = result.and_then(|scenario| scenario.validate().map(|_| scenario));
    scenario.map_err(|error| {
        let from_override = overridden.iter().find(|key: &&String| {
            error.path == **key
                || error.path.starts_with(&format!("{key}."))
                || key.starts_with(&format!("{}.", error.path))
        });
        let place = match from_override {
            Some(key) => format!("--set {key}"),
            None => match locate(&doc, &error.path) {
                Some(span) => {
                    let (line, column) = position_of(source.text, span);
                    format!("{}:{line}:{column}", source.origin)
                }
                None => source.origin.to_string(),
            },
        };
        format!("{place}: {error}")
    })
}

fn resolve(
    tree: &mut toml::Table,
    overrides: &[String],
    overridden: &mut Vec<String>,
    default_name: &str,
) -> ConfigResult<Scenario> {
    let mut params = match tree.remove("params") {
        None => toml::Table::new(),
        Some(toml::Value::Table(table)) => table,
        Some(_) => return Err(ConfigError::new("params", "must be a table of name = value")),
    };
    for assignment in overrides {
        let (key, text) = assignment
            .split_once('=')
            .ok_or_else(|| ConfigError::new("", format!("--set {assignment}: expected KEY=VALUE")))?;
        let key = key.trim().to_string();
        let value = parse_value(text.trim());
        if !key.contains('.') && params.contains_key(&key) {
            params.insert(key.clone(), value);
            overridden.push(format!("params.{key}"));
        } else {
            set_path(tree, &key, value)?;
            overridden.push(key);
        }
    }
    substitute_table(tree, &params, "")?;
    merge_platform_preset(tree)?;
    tree.insert("params".into(), toml::Value::Table(params));
    let mut scenario: Scenario = serde_path_to_error::deserialize(toml::Value::Table(tree.clone())).map_err(|e| {
        let mut path = e
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
        let message = e.inner().message().to_string();
        // serde reports an unknown key at its parent; name the key itself.
        if let Some(field) = message.strip_prefix("unknown field `").and_then(|m| m.split('`').next()) {
            if !path.ends_with(field) {
                path = crate::params::join_key(&path, field);
            }
        }
        ConfigError::new(path, message)
    })?;
    if scenario.name.is_empty() {
        scenario.name = default_name.to_string();
    }
    Ok(scenario)
}

/// Reads a `--set` value as TOML (number, bool, string, array, inline table), else as a bare string.
fn parse_value(text: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("value = {text}"))
        .ok()
        .and_then(|mut t| t.remove("value"))
        .unwrap_or_else(|| toml::Value::String(text.to_string()))
}

fn set_path(tree: &mut toml::Table, key: &str, value: toml::Value) -> ConfigResult<()> {
    let segments: Vec<&str> = key.split('.').collect();
    let bad = |message: String| ConfigError::new(key, message);
    let mut node: &mut toml::Value = tree.entry(segments[0].to_string()).or_insert_with(|| {
        if segments.len() > 1 {
            toml::Value::Table(toml::Table::new())
        } else {
            value.clone()
        }
    });
    for (depth, segment) in segments.iter().enumerate().skip(1) {
        let last = depth == segments.len() - 1;
        node = match node {
            toml::Value::Table(table) => table.entry(segment.to_string()).or_insert_with(|| {
                if last {
                    value.clone()
                } else {
                    toml::Value::Table(toml::Table::new())
                }
            }),
            toml::Value::Array(array) => {
                let index: usize =
                    segment.parse().map_err(|_| bad(format!("`{segment}` is not an index into a list")))?;
                let len = array.len();
                array.get_mut(index).ok_or_else(|| bad(format!("index {index} out of range (the list has {len})")))?
            }
            _ => return Err(bad(format!("`{}` is not a table", segments[..depth].join(".")))),
        };
    }
    *node = value;
    Ok(())
}

fn substitute_table(table: &mut toml::Table, params: &toml::Table, prefix: &str) -> ConfigResult<()> {
    for (key, value) in table.iter_mut() {
        substitute(value, params, &crate::params::join_key(prefix, key))?;
    }
    Ok(())
}

/// Replaces `"${name}"` by the parameter's typed value and `${name}` inside longer strings by its text.
fn substitute(value: &mut toml::Value, params: &toml::Table, path: &str) -> ConfigResult<()> {
    match value {
        toml::Value::String(text) if text.contains("${") => {
            let lookup = |name: &str| {
                params.get(name).cloned().ok_or_else(|| {
                    let known: Vec<_> = params.keys().map(String::as_str).collect();
                    ConfigError::new(path, format!("unknown parameter `{name}` (declared: {})", known.join(", ")))
                })
            };
            if let Some(name) = text.strip_prefix("${").and_then(|t| t.strip_suffix('}')).filter(|n| !n.contains('}')) {
                *value = lookup(name)?;
            } else {
                let mut out = String::new();
                let mut rest = text.as_str();
                while let Some(start) = rest.find("${") {
                    let end =
                        rest[start..].find('}').ok_or_else(|| ConfigError::new(path, "unterminated `${`"))? + start;
                    out.push_str(&rest[..start]);
                    match lookup(&rest[start + 2..end])? {
                        toml::Value::String(s) => out.push_str(&s),
                        other => out.push_str(&other.to_string()),
                    }
                    rest = &rest[end + 1..];
                }
                out.push_str(rest);
                *value = toml::Value::String(out);
            }
        }
        toml::Value::Table(table) => substitute_table(table, params, path)?,
        toml::Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                substitute(item, params, &format!("{path}.{i}"))?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// `platform.preset = NAME` starts from the preset's table; the other keys override it.
fn merge_platform_preset(tree: &mut toml::Table) -> ConfigResult<()> {
    let Some(toml::Value::Table(user)) = tree.get_mut("platform") else {
        if tree.contains_key("platform") {
            return Err(ConfigError::new("platform", "must be a table"));
        }
        return Ok(());
    };
    let Some(preset) = user.remove("preset") else { return Ok(()) };
    let name = preset.as_str().ok_or_else(|| ConfigError::new("platform.preset", "must be a string"))?;
    let mut base = platform::preset_table(name).ok_or_else(|| {
        ConfigError::new(
            "platform.preset",
            format!("unknown preset `{name}` (known: {})", platform::preset_names().join(", ")),
        )
    })?;
    deep_merge(&mut base, std::mem::take(user));
    *user = base;
    Ok(())
}

fn deep_merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => deep_merge(b, o),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// A built-in scenario shipped inside steer.
pub struct Builtin {
    pub name: &'static str,
    pub source: &'static str,
}

pub const BUILTINS: &[Builtin] = &[
    Builtin { name: "rx-default", source: include_str!("../scenarios/rx-default.toml") },
    Builtin { name: "ddio-l2fwd", source: include_str!("../scenarios/ddio-l2fwd.toml") },
    Builtin { name: "sdci-l2fwd", source: include_str!("../scenarios/sdci-l2fwd.toml") },
    Builtin { name: "leon-reduce", source: include_str!("../scenarios/leon-reduce.toml") },
    Builtin { name: "leon-pollution", source: include_str!("../scenarios/leon-pollution.toml") },
    Builtin { name: "iperf-rx", source: include_str!("../scenarios/iperf-rx.toml") },
    Builtin { name: "eflatency", source: include_str!("../scenarios/eflatency.toml") },
    Builtin { name: "sdci-affinity", source: include_str!("../scenarios/sdci-affinity.toml") },
];

impl Builtin {
    /// The `description` line of the scenario file.
    pub fn description(&self) -> String {
        toml::from_str::<toml::Table>(self.source)
            .ok()
            .and_then(|t| t.get("description").and_then(|d| d.as_str()).map(str::to_string))
            .unwrap_or_default()
    }
}

pub fn builtin(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}
