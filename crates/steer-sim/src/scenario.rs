//! Scenarios: human-edited TOML files naming a platform (preset or full spec), devices, workloads
//! and the simulated window. A `[params]` table declares named parameters used in the body as
//! `"${name}"`; `--set NAME=VALUE` overrides a parameter and `--set a.b.c=VALUE` any key path.
//!
//! Loading is: parse -> apply overrides -> substitute parameters -> merge the platform preset ->
//! deserialize (unknown keys and wrong types rejected) -> validate values. Every error becomes one
//! line naming the key and where it is: `file:line:column: key: message`.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::devices::{DeviceShape, DeviceSpec, SystemShape, DEVICES};
use crate::error::{ensure, io_reason, shortened, ConfigError, ConfigResult, Error, Shown};
use crate::kinds::{deserialize_at, Kind, SpecBase};
use crate::params::{join_key, params, Describe, ParamDoc};
use crate::platform::{self, MaskAgent, PlatformSpec};
use crate::workloads::{WorkloadSpec, WORKLOADS};

params! {
    /// The simulated time window.
    pub struct SimSpec {
        /// Simulated time before statistics start (µs): fills caches and rings.
        warmup_us: f64 = 200.0,
        /// Measured window after the warm-up (µs).
        measure_us: f64 = 1000.0,
        /// How far an agent may simulate past the next event that could interact with it (ns):
        /// a CPU stops between two accesses, a device between two packets, once it is this far
        /// ahead. Smaller is more exact and slower; results have converged at the default (see
        /// docs/engine.md).
        max_runahead_ns: f64 = 100.0,
        /// Run even when it would take more than `MAX_SIMULATED_US` of simulated time or
        /// `MAX_HOST_BYTES` of host memory (`--allow-large`).
        allow_large: bool = false,
    }
}

/// Simulated time beyond which a run needs `sim.allow_large`: one second, hours of host time for
/// a loaded machine.
pub const MAX_SIMULATED_US: f64 = 1e6;
/// Simulated time no run may take, `sim.allow_large` or not: about 12 days, well inside the
/// clock's 2^64 picoseconds (213 days), so that every event of the run has a time.
pub const MAX_CLOCK_US: f64 = 1e12;
/// Host memory beyond which a run needs `sim.allow_large`.
pub const MAX_HOST_BYTES: u64 = 4 << 30;
/// Host bytes per cache line a cache may hold (tag, state, replacement rank).
const HOST_BYTES_PER_CACHED_LINE: u64 = 16;

impl Describe for toml::Table {
    fn describe_into(&self, prefix: &str, meaning: &str, out: &mut Vec<ParamDoc>) {
        for (key, value) in self {
            out.push(ParamDoc { key: join_key(prefix, key), value: value.to_string(), meaning: meaning.to_string() });
        }
    }
}

/// A device or workload of a scenario: its registered kind and its parameters.
pub struct Entry<S: ?Sized + 'static> {
    pub kind: &'static Kind<S>,
    pub spec: Arc<S>,
}

/// A device of a scenario (`[[devices]]`).
pub type Device = Entry<dyn DeviceSpec>;
/// A workload of a scenario (`[[workloads]]`).
pub type Workload = Entry<dyn WorkloadSpec>;

impl<S: ?Sized> Clone for Entry<S> {
    fn clone(&self) -> Self {
        Entry { kind: self.kind, spec: self.spec.clone() }
    }
}

impl<S: ?Sized + SpecBase> PartialEq for Entry<S> {
    fn eq(&self, other: &Self) -> bool {
        self.kind.name == other.kind.name && self.spec.eq_dyn(other.spec.as_any())
    }
}

impl<S: ?Sized + SpecBase> fmt::Debug for Entry<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}", self.kind.name, self.spec)
    }
}

impl<S: ?Sized + SpecBase> Serialize for Entry<S> {
    fn serialize<Z: serde::Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        let mut table = toml::Table::new();
        table.insert("kind".into(), toml::Value::String(self.kind.name.into()));
        table.extend(self.spec.to_table());
        table.serialize(serializer)
    }
}

impl<S: ?Sized + SpecBase> Describe for Entry<S> {
    fn describe_into(&self, prefix: &str, meaning: &str, out: &mut Vec<ParamDoc>) {
        out.push(ParamDoc {
            key: join_key(prefix, "kind"),
            value: format!("\"{}\"", self.kind.name),
            meaning: self.kind.description.into(),
        });
        self.spec.describe_into(prefix, meaning, out)
    }
}

/// Reads `[[devices]]` or `[[workloads]]` entries: each names its kind (`default_kind` if it may
/// leave it out) and is read as that kind's parameters; errors name keys below `section.i`.
fn parse_entries<S: ?Sized>(
    registry: &'static [Kind<S>],
    section: &str,
    what: &str,
    default_kind: Option<&str>,
    tables: Vec<toml::Table>,
) -> ConfigResult<Vec<Entry<S>>> {
    tables
        .into_iter()
        .enumerate()
        .map(|(i, mut table)| {
            let path = format!("{section}.{i}");
            let name = match (table.remove("kind"), default_kind) {
                (Some(toml::Value::String(name)), _) => name,
                (Some(_), _) => return Err(ConfigError::new(join_key(&path, "kind"), "must be a string")),
                (None, Some(default)) => default.to_string(),
                (None, None) => {
                    let known: Vec<_> = registry.iter().map(|k| k.name).collect();
                    return Err(ConfigError::new(
                        join_key(&path, "kind"),
                        format!("missing: every {what} names its kind (one of: {})", known.join(", ")),
                    ));
                }
            };
            let kind = crate::kinds::find(registry, what, &name, &join_key(&path, "kind"))?;
            Ok(Entry { kind, spec: (kind.parse)(toml::Value::Table(table), &path)? })
        })
        .collect()
}

params! {
    /// A scenario file as written: devices and workloads are read by their kinds afterwards.
    pub struct ScenarioFile {
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
        /// Devices; each names its `kind` (default `nic`).
        devices: Vec<toml::Table> = Vec::new(),
        /// Workloads; each names its `kind`.
        workloads: Vec<toml::Table> = Vec::new(),
    }
}

/// A scenario: a platform, devices, workloads and the simulated window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    /// Scenario name (default: the file name without extension).
    pub name: String,
    /// One line saying what the scenario shows.
    pub description: String,
    /// Seed of every random choice; same scenario and seed give identical results.
    pub seed: u64,
    /// Named parameters with their values (used as "${name}" in the body).
    pub params: toml::Table,
    pub platform: PlatformSpec,
    pub sim: SimSpec,
    pub devices: Vec<Device>,
    pub workloads: Vec<Workload>,
}

impl Describe for Scenario {
    fn describe_into(&self, prefix: &str, _meaning: &str, out: &mut Vec<ParamDoc>) {
        let key = |k: &str| join_key(prefix, k);
        self.name.describe_into(&key("name"), "scenario name", out);
        self.description.describe_into(&key("description"), "what the scenario shows", out);
        self.seed.describe_into(&key("seed"), "seed of every random choice", out);
        self.params.describe_into(&key("params"), "a declared parameter", out);
        self.platform.describe_into(&key("platform"), "", out);
        self.sim.describe_into(&key("sim"), "", out);
        self.devices.describe_into(&key("devices"), "", out);
        self.workloads.describe_into(&key("workloads"), "", out);
    }
}

impl Scenario {
    /// Checks every value that types alone cannot (ranges, references between parts).
    /// Refuses a run that would need more simulated time or host memory than is sane, unless
    /// `sim.allow_large`: one line saying what and how much.
    pub fn check_size(&self) -> Result<(), String> {
        if self.sim.allow_large {
            return Ok(());
        }
        let simulated = self.sim.warmup_us + self.sim.measure_us;
        let t = &self.platform.topology;
        let p = &self.platform;
        let cached = t.cores() as u64 * (p.l1d.lines() + p.l2.lines()) + t.ccx_count() as u64 * p.l3.lines();
        let bytes = cached * HOST_BYTES_PER_CACHED_LINE + self.devices.iter().map(|d| d.spec.host_bytes()).sum::<u64>();
        let too_much = if simulated > MAX_SIMULATED_US {
            format!("sim: {} µs of simulated time is more than {MAX_SIMULATED_US} µs", Shown(simulated))
        } else if bytes > MAX_HOST_BYTES {
            format!(
                "the caches and devices would need {:.1} GiB of host memory, more than {} GiB",
                bytes as f64 / (1u64 << 30) as f64,
                MAX_HOST_BYTES >> 30
            )
        } else {
            return Ok(());
        };
        Err(format!("{too_much}; set sim.allow_large = true (or --allow-large) to run it anyway"))
    }

    pub fn validate(&self) -> ConfigResult<()> {
        self.platform.validate("platform")?;
        let sim = &self.sim;
        ensure(sim.warmup_us >= 0.0, "sim.warmup_us", || {
            format!("must not be negative (got {})", Shown(sim.warmup_us))
        })?;
        // At least a nanosecond: a shorter window rounds to nothing measured.
        ensure(sim.measure_us >= 0.001, "sim.measure_us", || {
            format!("must be at least 0.001 µs (got {})", Shown(sim.measure_us))
        })?;
        // Named by the larger part: the value to change.
        let larger = if sim.warmup_us >= sim.measure_us { "sim.warmup_us" } else { "sim.measure_us" };
        ensure(sim.warmup_us + sim.measure_us <= MAX_CLOCK_US, larger, || {
            let (warmup, measure, most) = (Shown(sim.warmup_us), Shown(sim.measure_us), Shown(MAX_CLOCK_US));
            format!("{warmup} µs of warm-up and {measure} µs measured are more than steer's clock runs ({most} µs)")
        })?;
        ensure(sim.max_runahead_ns >= 0.0, "sim.max_runahead_ns", || {
            format!("must not be negative (got {})", Shown(sim.max_runahead_ns))
        })?;
        for (i, device) in self.devices.iter().enumerate() {
            device.spec.validate(&format!("devices.{i}"), &self.platform)?;
            let name = device.spec.name();
            if let Some(j) = self.devices[..i].iter().position(|d| d.spec.name() == name) {
                return Err(ConfigError::new(
                    format!("devices.{i}.name"),
                    format!("`{name}` is already the name of devices.{j}"),
                ));
            }
        }
        for (level, spec) in [("l1d", &self.platform.l1d), ("l2", &self.platform.l2), ("l3", &self.platform.l3)] {
            for (i, mask) in spec.way_masks.iter().enumerate() {
                if let Ok(MaskAgent::Device(name)) = mask.parsed_agent() {
                    let known = self.devices.iter().any(|d| d.spec.name() == name);
                    ensure(known, &format!("platform.{level}.way_masks.{i}.agent"), || {
                        format!("no device named `{name}`")
                    })?;
                }
            }
        }
        let shape = SystemShape {
            platform: &self.platform,
            cpus: self.platform.topology.cpus(),
            copy_engines: self.devices.iter().filter_map(|d| d.spec.copy_engines(&self.platform)).collect(),
            devices: self.devices.iter().map(|d| DeviceShape::of(&*d.spec)).collect(),
        };
        let mut busy: Vec<(u32, usize)> = Vec::new();
        for (i, workload) in self.workloads.iter().enumerate() {
            workload.spec.validate(&format!("workloads.{i}"), &shape)?;
            for cpu in workload.spec.cpus(&shape) {
                if let Some((_, j)) = busy.iter().find(|(c, _)| *c == cpu) {
                    return Err(ConfigError::new(
                        format!("workloads.{i}.cpu"),
                        format!("CPU {cpu} already runs workloads.{j}"),
                    ));
                }
                busy.push((cpu, i));
            }
        }
        self.devices.check_magnitudes("devices")?;
        self.workloads.check_magnitudes("workloads")?;
        // Devices without any workload are driven from the API (tests take completions themselves).
        let consumed: Vec<(String, u32)> = self.workloads.iter().flat_map(|w| w.spec.queues(&shape)).collect();
        for (i, device) in self.devices.iter().enumerate().filter(|_| !self.workloads.is_empty()) {
            let name = device.spec.name();
            let queues = device.spec.queue_cpus().len() as u32;
            if let Some(q) = (0..queues).find(|&q| !consumed.iter().any(|(d, c)| d == name && *c == q)) {
                return Err(ConfigError::new(
                    format!("devices.{i}.queues"),
                    format!(
                        "queue {q} of `{name}` has no workload consuming it (its packets would only be dropped); \
                         add one with device = \"{name}\" and queue = {q}, or lower the queue count"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The fully resolved scenario as TOML: every default filled in, parameters substituted.
    pub fn to_toml(&self) -> String {
        let text = toml::to_string_pretty(self).expect("a scenario serializes");
        // A reader editing the parameters of a resolved scenario would change nothing: say so there.
        text.replacen("\n[params]\n", &format!("\n{PARAMS_RECORDED}\n[params]\n"), 1)
    }
}

/// Where an error points: a file position, a `--set` override, or nothing more specific.
pub(crate) fn position_of(text: &str, span: Range<usize>) -> (usize, usize) {
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
    (line, column)
}

/// A TOML parser's message on one line ("invalid table header\nexpected `.`, `]`" has two).
pub(crate) fn toml_message(message: &str) -> String {
    message.trim().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ")
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
    /// Shown in error messages (a path, or `builtin:NAME`). When it is the path of a file, the
    /// files the scenario names are found from that file's directory.
    pub origin: &'a str,
    /// Default scenario name when the file does not set one.
    pub default_name: &'a str,
}

impl ScenarioSource<'_> {
    /// Where the relative paths of the scenario start: its file's directory, else (a built-in
    /// scenario, a text from a pipe) the directory steer runs in.
    fn directory(&self) -> PathBuf {
        let path = Path::new(self.origin);
        match path.parent() {
            Some(dir) if path.is_file() => dir.to_path_buf(),
            _ => PathBuf::new(),
        }
    }
}

/// Loads, resolves and validates a scenario. The error is one line, of a readable length.
pub fn load(source: &ScenarioSource, overrides: &[String]) -> Result<Scenario, Error> {
    load_located(source, overrides).map_err(|message| Error::Input(shortened(&one_line(&message))))
}

/// The message with control characters a user typed (a newline in a `--set` key) escaped.
fn one_line(message: &str) -> String {
    message.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

fn load_located(source: &ScenarioSource, overrides: &[String]) -> Result<Scenario, String> {
    let doc = toml_edit::ImDocument::parse(source.text.to_string()).map_err(|e| {
        let (line, column) = e.span().map(|s| position_of(source.text, s)).unwrap_or((1, 1));
        format!("{}:{line}:{column}: invalid TOML: {}", source.origin, toml_message(e.message()))
    })?;
    let mut tree: toml::Table = toml::from_str(source.text)
        .map_err(|e| format!("{}: invalid TOML: {}", source.origin, toml_message(e.message())))?;
    let mut overridden = Vec::new();
    let result = resolve(&mut tree, overrides, &mut overridden, source.default_name);
    let scenario = result.and_then(|mut scenario| {
        let dir = source.directory();
        for workload in &mut scenario.workloads {
            Arc::get_mut(&mut workload.spec).expect("a workload just read has one owner").resolve_paths(&dir);
        }
        scenario.validate().map(|_| scenario)
    });
    scenario.map_err(|error| {
        let from_override = overridden.iter().find(|(path, _)| {
            error.path == *path
                || error.path.starts_with(&format!("{path}."))
                || path.starts_with(&format!("{}.", error.path))
        });
        let place = match from_override {
            // The key names the value already: the error's path is said only where it differs.
            Some((_, key)) if *key == error.path => return format!("--set {key}: {}", error.message),
            Some((_, key)) => format!("--set {key}"),
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

/// Above a resolved scenario's `[params]`.
const PARAMS_RECORDED: &str =
    "# The values the parameters had, substituted below already: to change one, change what it became.";

fn resolve(
    tree: &mut toml::Table,
    overrides: &[String],
    overridden: &mut Vec<(String, String)>,
    default_name: &str,
) -> ConfigResult<Scenario> {
    let mut params = match tree.remove("params") {
        None => toml::Table::new(),
        Some(toml::Value::Table(table)) => table,
        Some(_) => return Err(ConfigError::new("params", "must be a table of name = value")),
    };
    // A file's `platform = "NAME"` as the table it stands for, before the overrides change keys of it.
    if let Some(platform) = tree.get_mut("platform") {
        *platform = platform_shorthand("platform", std::mem::replace(platform, toml::Value::Boolean(false)));
    }
    // An override of a table applies before those of keys inside it, wherever it stands (in a
    // sweep's or a fit's file the order is the file's): `platform=NAME` then names the preset that
    // `platform.l2.ways=8` changes. Otherwise overrides apply in their order; the last of a key wins.
    let mut ordered: Vec<&String> = overrides.iter().collect();
    // (`params.NAME` is a parameter, as `NAME` is: no deeper.)
    let depth = |key: &str| key.trim().trim_start_matches("params.").matches('.').count();
    ordered.sort_by_key(|assignment| assignment.split_once('=').map_or(0, |(key, _)| depth(key)));
    for assignment in ordered {
        let Some((key, text)) = assignment.split_once('=').filter(|(key, _)| !key.trim().is_empty()) else {
            overridden.push((assignment.clone(), assignment.clone()));
            return Err(ConfigError::new(assignment, "expected KEY=VALUE"));
        };
        let key = key.trim().to_string();
        overridden.push((key.clone(), key.clone()));
        let value = parse_value(&key, text.trim())?;
        // `params.NAME` names a parameter as the resolved scenario lists it; `params` alone is none.
        let parameter = match key.strip_prefix("params.") {
            Some(name) => Some(name),
            None if key == "params" => {
                return Err(ConfigError::new("params", "set a parameter by its name: NAME=VALUE or params.NAME=VALUE"));
            }
            None if !key.contains('.') && (params.contains_key(&key) || !is_top_level_key(&key)) => Some(key.as_str()),
            None => None,
        };
        match parameter {
            Some(name) if params.contains_key(name) => {
                set_parameter(tree, &mut params, name, &key, value, overridden)?;
            }
            Some(_) => return Err(not_a_parameter(&params, &key)),
            // `platform = NAME` is the preset alone, in place of the platform before it.
            None if key == "platform" && value.is_str() => {
                set_path(tree, &key, platform_shorthand(&key, value), false)?
            }
            None => set_path(tree, &key, value, true)?,
        }
    }
    substitute_table(tree, &params, "")?;
    merge_platform_preset(tree)?;
    tree.iter().try_for_each(|(key, value)| reject_non_finite(value, key))?;
    tree.insert("params".into(), toml::Value::Table(params));
    let file: ScenarioFile = deserialize_at(toml::Value::Table(tree.clone()), "")?;
    let devices = parse_entries(&DEVICES, "devices", "device kind", Some("nic"), file.devices)?;
    let workloads = parse_entries(&WORKLOADS, "workloads", "workload kind", None, file.workloads)?;
    let name = if file.name.is_empty() { default_name.to_string() } else { file.name };
    Ok(Scenario {
        name,
        description: file.description,
        seed: file.seed,
        params: file.params,
        platform: file.platform,
        sim: file.sim,
        devices,
        workloads,
    })
}

/// Sets declared parameter `name` (as `--set key`) to `value`. A parameter no value uses would change
/// nothing: refused. Errors in the values it is substituted into are the override's.
fn set_parameter(
    tree: &toml::Table,
    params: &mut toml::Table,
    name: &str,
    key: &str,
    value: toml::Value,
    overridden: &mut Vec<(String, String)>,
) -> ConfigResult<()> {
    let mut uses = Vec::new();
    for (top, used) in tree.iter() {
        parameter_uses(used, name, top, &mut |path| uses.push((path, key.to_string())));
    }
    if uses.is_empty() {
        return Err(ConfigError::new(
            key,
            format!(
                "no value of this scenario uses parameter `{name}` (a resolved scenario's parameters are \
                 substituted already: set what they became by its path)"
            ),
        ));
    }
    overridden.extend(uses);
    overridden.push((format!("params.{name}"), key.to_string()));
    params.insert(name.to_string(), value);
    Ok(())
}

fn not_a_parameter(params: &toml::Table, key: &str) -> ConfigError {
    let declared = if params.is_empty() {
        "this scenario declares none".to_string()
    } else {
        format!("declared: {}", params.keys().map(String::as_str).collect::<Vec<_>>().join(", "))
    };
    ConfigError::new(
        key,
        format!("not a parameter ({declared}); other keys are set by their path, e.g. sim.measure_us"),
    )
}

/// Calls `found` with the path of every value that uses parameter `name` (`"${name}"`).
fn parameter_uses(value: &toml::Value, name: &str, path: &str, found: &mut impl FnMut(String)) {
    let child = |key: &str| crate::params::join_key(path, key);
    match value {
        toml::Value::String(text) if text.contains(&format!("${{{name}}}")) => found(path.to_string()),
        toml::Value::Table(table) => table.iter().for_each(|(k, v)| parameter_uses(v, name, &child(k), found)),
        toml::Value::Array(items) => {
            items.iter().enumerate().for_each(|(i, v)| parameter_uses(v, name, &child(&i.to_string()), found))
        }
        _ => {}
    }
}

/// Whether `key` is a field of a scenario file (`name`, `sim`, ...), read from its declaration.
fn is_top_level_key(key: &str) -> bool {
    matches!(toml::Value::try_from(ScenarioFile::default()), Ok(toml::Value::Table(t)) if t.contains_key(key))
}

/// Refuses NaN and infinities anywhere (TOML accepts `inf` and `nan`; no parameter means them).
fn reject_non_finite(value: &toml::Value, path: &str) -> ConfigResult<()> {
    let child = |key: &str| if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
    match value {
        toml::Value::Float(f) if !f.is_finite() => {
            Err(ConfigError::new(path, format!("must be a finite number (got {f})")))
        }
        toml::Value::Table(table) => table.iter().try_for_each(|(k, v)| reject_non_finite(v, &child(k))),
        toml::Value::Array(items) => {
            items.iter().enumerate().try_for_each(|(i, v)| reject_non_finite(v, &child(&i.to_string())))
        }
        _ => Ok(()),
    }
}

/// Reads a `--set` value as TOML (number, bool, string, array, inline table), else as a bare
/// string; a number too large for a float (`1e400`) is refused rather than taken for text.
fn parse_value(key: &str, text: &str) -> ConfigResult<toml::Value> {
    match toml::from_str::<toml::Table>(&format!("value = {text}")).ok().and_then(|mut t| t.remove("value")) {
        Some(value) => Ok(value),
        None if text.parse::<f64>().is_ok_and(f64::is_infinite) => {
            Err(ConfigError::new(key, format!("{text} is beyond the range of a number")))
        }
        None if is_whole_number(text) => {
            Err(ConfigError::new(key, format!("{text} is beyond the range of a whole number (64-bit, signed)")))
        }
        None => Ok(toml::Value::String(text.to_string())),
    }
}

/// Digits with an optional sign: a whole number however large.
fn is_whole_number(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Sets the value at a dotted key path, making the tables on the way; a numeric step indexes into
/// a list. With `merge`, a table laid on a table merges into it key by key (recursively, as a
/// preset's overrides do): `sim={measure_us=100}` keeps the scenario's `sim.warmup_us`. Anything
/// else replaces what was there.
fn set_path(tree: &mut toml::Table, key: &str, value: toml::Value, merge: bool) -> ConfigResult<()> {
    let segments: Vec<&str> = key.split('.').collect();
    let bad = |message: String| ConfigError::new(key, message);
    if segments.contains(&"") {
        return Err(bad("a key's parts are joined by single dots, none empty (e.g. sim.measure_us)".into()));
    }
    let table = || toml::Value::Table(toml::Table::new());
    let mut node: &mut toml::Value = tree.entry(segments[0].to_string()).or_insert_with(table);
    for (depth, segment) in segments.iter().enumerate().skip(1) {
        node = match node {
            toml::Value::Table(t) => t.entry(segment.to_string()).or_insert_with(table),
            toml::Value::Array(array) => {
                let index: usize =
                    segment.parse().map_err(|_| bad(format!("`{segment}` is not an index into a list")))?;
                let len = array.len();
                array.get_mut(index).ok_or_else(|| bad(format!("index {index} out of range (the list has {len})")))?
            }
            _ => return Err(bad(format!("`{}` is not a table", segments[..depth].join(".")))),
        };
    }
    match (node, value) {
        (toml::Value::Table(table), toml::Value::Table(over)) if merge => deep_merge(table, over),
        (node, value) => *node = value,
    }
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

/// `platform = "NAME"` is short for `platform = { preset = "NAME" }`: the preset alone, in place of
/// any platform table before it (a resolved scenario's is complete, so a preset under it would
/// change nothing).
fn platform_shorthand(key: &str, value: toml::Value) -> toml::Value {
    match value {
        toml::Value::String(name) if key == "platform" => {
            toml::Value::Table(toml::Table::from_iter([("preset".to_string(), toml::Value::String(name))]))
        }
        value => value,
    }
}

/// `platform.preset = NAME` starts from the preset's table; the other keys override it.
fn merge_platform_preset(tree: &mut toml::Table) -> ConfigResult<()> {
    let Some(toml::Value::Table(user)) = tree.get_mut("platform") else {
        if tree.contains_key("platform") {
            return Err(ConfigError::new("platform", "must be a table or the name of a preset"));
        }
        return Ok(());
    };
    let Some(preset) = user.remove("preset") else { return Ok(()) };
    let name = preset.as_str().ok_or_else(|| ConfigError::new("platform.preset", "must be a string"))?;
    let mut base = platform::preset_table(name)?;
    let given = std::mem::take(user);
    deep_merge(&mut base, given.clone());
    if base == given {
        return Err(ConfigError::new(
            "platform.preset",
            format!(
                "every value of preset `{name}` is given beside it, so it would change nothing (a resolved \
                 scenario's platform is complete): set platform = \"{name}\" to start from the preset alone"
            ),
        ));
    }
    *user = base;
    Ok(())
}

/// Lays `over` on `base`: tables merge key by key, anything else replaces.
pub(crate) fn deep_merge(base: &mut toml::Table, over: toml::Table) {
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
    Builtin { name: "dsa-copy", source: include_str!("../scenarios/dsa-copy.toml") },
    Builtin { name: "qdp", source: include_str!("../scenarios/qdp.toml") },
    Builtin { name: "nvme-read", source: include_str!("../scenarios/nvme-read.toml") },
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

/// A scenario found by name: its text, where it came from, and the name its results take.
pub struct FoundScenario {
    pub text: String,
    pub origin: String,
    pub default_name: String,
}

/// Finds a scenario: a file if `name` is a path to one (it exists, ends in `.toml` or has a
/// `/`), else a built-in scenario. The rule every front end (command line, Python, C) uses.
pub fn find(name: &str) -> Result<FoundScenario, Error> {
    let path = std::path::Path::new(name);
    if path.exists() || name.ends_with(".toml") || name.contains('/') {
        let cannot = |reason: &str| Error::Input(shortened(&format!("{name}: cannot read scenario: {reason}")));
        let bytes = std::fs::read(path).map_err(|e| cannot(&io_reason(&e)))?;
        let text = String::from_utf8(bytes).map_err(|_| cannot("not UTF-8 text"))?;
        let default_name = path.file_stem().map_or_else(|| name.to_string(), |s| s.to_string_lossy().into_owned());
        return Ok(FoundScenario { text, origin: name.to_string(), default_name });
    }
    match builtin(name) {
        Some(b) => Ok(FoundScenario {
            text: b.source.to_string(),
            origin: format!("builtin:{name}"),
            default_name: name.to_string(),
        }),
        None => {
            let known: Vec<&str> = BUILTINS.iter().map(|b| b.name).collect();
            Err(Error::Input(shortened(&format!(
                "{name}: no such scenario file or built-in scenario (built-in: {})",
                known.join(", ")
            ))))
        }
    }
}
