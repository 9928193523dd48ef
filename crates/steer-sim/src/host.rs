//! The `host` preset: cache geometry and topology read from this machine's sysfs, then the values
//! `steer calibrate` measured here (latencies, bandwidths, the clock), when it has been run. What
//! neither gives keeps the generic defaults, marked as assumptions.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{ConfigError, ConfigResult};
use crate::platform::PlatformSpec;

const CPU_ROOT: &str = "/sys/devices/system/cpu";

/// The description of the `host` preset, read from this machine.
pub const HOST_DESCRIPTION: &str =
    "this machine: geometry from sysfs, latencies and bandwidths from `steer calibrate` (else assumed)";

#[linkme::distributed_slice(crate::platform::READ_PRESETS)]
static HOST: crate::platform::ReadPreset =
    crate::platform::ReadPreset { name: "host", description: HOST_DESCRIPTION, read: host_platform_table };

fn read(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Parses sysfs sizes such as `48K`, `1024K`, `32M`, into KiB.
fn size_kib(text: &str) -> Option<u64> {
    let (digits, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let value: u64 = digits.parse().ok()?;
    match unit {
        "K" | "" => Some(value),
        "M" => Some(value * 1024),
        "G" => Some(value * 1024 * 1024),
        _ => None,
    }
}

/// Counts CPUs in a sysfs list such as `0-3,8,10-11`.
fn cpu_list_len(text: &str) -> u32 {
    text.split(',')
        .filter_map(|part| match part.split_once('-') {
            Some((a, b)) => Some(b.parse::<u32>().ok()? - a.parse::<u32>().ok()? + 1),
            None => part.parse::<u32>().ok().map(|_| 1),
        })
        .sum()
}

fn cache_table(index: &Path) -> Option<(u32, String, toml::Table, u32)> {
    let level: u32 = read(&index.join("level"))?.parse().ok()?;
    let kind = read(&index.join("type"))?;
    let mut table = toml::Table::new();
    table.insert("size_kib".into(), (size_kib(&read(&index.join("size"))?)? as i64).into());
    table.insert("ways".into(), read(&index.join("ways_of_associativity"))?.parse::<i64>().ok()?.into());
    if let Some(line) = read(&index.join("coherency_line_size")).and_then(|s| s.parse::<i64>().ok()) {
        table.insert("line_bytes".into(), line.into());
    }
    let sharing = read(&index.join("shared_cpu_list")).map(|s| cpu_list_len(&s)).unwrap_or(1);
    Some((level, kind, table, sharing))
}

/// Where `steer calibrate` keeps this machine's measured values: `$STEER_HOST_CALIBRATION`, else
/// `$XDG_CONFIG_HOME/steer/host.toml`, else `$HOME/.config/steer/host.toml`.
pub fn calibration_path() -> Option<PathBuf> {
    calibration_path_in(|name| std::env::var_os(name))
}

/// `calibration_path` with the environment read through `env` (an unset or empty variable is
/// skipped).
fn calibration_path_in(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let var = |name| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("STEER_HOST_CALIBRATION")
        .or_else(|| var("XDG_CONFIG_HOME").map(|d| d.join("steer/host.toml")))
        .or_else(|| var("HOME").map(|d| d.join(".config/steer/host.toml")))
}

/// The host platform as a preset table (same keys as a preset file): sysfs, then this machine's
/// calibration if there is one.
pub fn host_platform_table() -> ConfigResult<toml::Table> {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let mut table = sysfs_table(Path::new(CPU_ROOT), &cpuinfo);
    if let Some(path) = calibration_path().filter(|p| p.exists()) {
        overlay_calibration(&mut table, &path)?;
    }
    Ok(table)
}

/// Lays the calibration file at `path` over `table`; fails naming the file unless it parses and
/// the result is a valid platform.
pub fn overlay_calibration(table: &mut toml::Table, path: &Path) -> ConfigResult<()> {
    let fail = |message: String| ConfigError::new("", format!("host calibration {}: {message}", path.display()));
    let text = fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    let overlay: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let (line, column) = e.span().map(|s| crate::scenario::position_of(&text, s)).unwrap_or((1, 1));
        fail(format!("{line}:{column}: invalid TOML: {}", crate::scenario::toml_message(e.message())))
    })?;
    crate::scenario::deep_merge(table, overlay);
    let spec: PlatformSpec = toml::Value::Table(table.clone())
        .try_into()
        .map_err(|e: toml::de::Error| fail(crate::scenario::toml_message(e.message())))?;
    spec.validate("platform").map_err(|e| fail(e.to_string()))
}

/// The platform read from a sysfs CPU folder (`/sys/devices/system/cpu`: CPU count, SMT siblings
/// and cpu0's caches) and `/proc/cpuinfo`'s text (the clock).
fn sysfs_table(root: &Path, cpuinfo: &str) -> toml::Table {
    let cpus = fs::read_dir(root)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().to_string();
                    name.strip_prefix("cpu").is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
                })
                .count() as u32
        })
        .unwrap_or(1)
        .max(1);
    let threads = read(&root.join("cpu0/topology/thread_siblings_list")).map(|s| cpu_list_len(&s)).unwrap_or(1).max(1);
    let mut platform = toml::Table::new();
    platform.insert("name".into(), "host".into());
    platform.insert("description".into(), HOST_DESCRIPTION.into());
    let mut l3_sharing = cpus;
    for entry in fs::read_dir(root.join("cpu0/cache")).into_iter().flatten().flatten() {
        let Some((level, kind, mut table, sharing)) = cache_table(&entry.path()) else { continue };
        let key = match (level, kind.as_str()) {
            (1, "Data") => "l1d",
            (2, _) => "l2",
            (3, _) => {
                l3_sharing = sharing.max(1);
                // Zen parts have a victim L3; Intel parts since Skylake-SP a non-inclusive one,
                // modelled as a victim cache too. Inclusive L3s must be set by hand.
                table.insert("relation".into(), "exclusive".into());
                "l3"
            }
            _ => continue,
        };
        platform.insert(key.into(), table.into());
    }
    let cores = (cpus / threads).max(1);
    let cores_per_ccx = (l3_sharing / threads).clamp(1, cores);
    let mut topology = toml::Table::new();
    topology.insert("sockets".into(), 1.into());
    topology.insert("ccx_per_socket".into(), ((cores / cores_per_ccx).max(1) as i64).into());
    topology.insert("cores_per_ccx".into(), (cores_per_ccx as i64).into());
    topology.insert("threads_per_core".into(), (threads as i64).into());
    platform.insert("topology".into(), topology.into());
    if let Some(mhz) = cpuinfo
        .lines()
        .find(|l| l.starts_with("cpu MHz"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse::<f64>().ok())
    {
        let mut core = toml::Table::new();
        core.insert("freq_ghz".into(), ((mhz / 10.0).round() / 100.0).into());
        platform.insert("core".into(), core.into());
    }
    for (level, prefetcher) in vendor_prefetchers(cpuinfo) {
        let table = platform.entry(level).or_insert_with(|| toml::Table::new().into());
        if let Some(table) = table.as_table_mut() {
            table.insert("prefetcher".into(), prefetcher.parse::<toml::Table>().expect("a prefetcher table").into());
        }
    }
    platform
}

/// The prefetchers of the vendor `/proc/cpuinfo` names, by cache level, as the presets of that
/// vendor's parts have them: Intel's L2 streamer (Intel 64 and IA-32 Architectures Optimization
/// Reference Manual, "Data Prefetching": lines ascending or descending within a 4 KiB page, up to
/// two prefetches per L2 lookup, up to 20 lines ahead); AMD's L1 and L2 stream prefetchers (the
/// AMD Zen 4 and Zen 5 software optimization guides name them; the Zen 5 presets' degrees and
/// distances, fitted on seed 000's fill rows). None for another vendor.
fn vendor_prefetchers(cpuinfo: &str) -> Vec<(&'static str, &'static str)> {
    let vendor = cpuinfo.lines().find_map(|l| l.strip_prefix("vendor_id")).and_then(|l| l.split(':').nth(1));
    match vendor.map(str::trim) {
        Some("GenuineIntel") => vec![("l2", "kind = \"stride\"\ndegree = 2\ndistance = 20")],
        Some("AuthenticAMD") => vec![
            ("l1d", "kind = \"stream\"\ndegree = 1\ndistance = 4"),
            ("l2", "kind = \"stream\"\ndegree = 2\ndistance = 32"),
        ],
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sysfs_forms() {
        assert_eq!(size_kib("48K"), Some(48));
        assert_eq!(size_kib("32M"), Some(32768));
        assert_eq!(size_kib("2G"), Some(2 * 1024 * 1024));
        assert_eq!(size_kib("512"), Some(512));
        assert_eq!(size_kib("3T"), None);
        assert_eq!(size_kib("K"), None);
        assert_eq!(cpu_list_len("0-3,8,10-11"), 7);
        assert_eq!(cpu_list_len("0"), 1);
    }

    #[test]
    fn the_calibration_file_is_named_by_the_first_variable_set_and_not_empty() {
        let path = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            calibration_path_in(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.into()))
        };
        let all = [("STEER_HOST_CALIBRATION", "/c/h.toml"), ("XDG_CONFIG_HOME", "/x"), ("HOME", "/home/u")];
        assert_eq!(path(&all), Some(PathBuf::from("/c/h.toml")));
        assert_eq!(
            path(&[("STEER_HOST_CALIBRATION", ""), ("XDG_CONFIG_HOME", "/x")]),
            Some(PathBuf::from("/x/steer/host.toml"))
        );
        assert_eq!(path(&all[2..]), Some(PathBuf::from("/home/u/.config/steer/host.toml")));
        assert_eq!(path(&[]), None);
        // The process's own environment (tests run with HOME set at least).
        assert!(calibration_path().is_some());
        assert_eq!(calibration_path(), calibration_path_in(|name| std::env::var_os(name)));
    }

    /// Writes `files` (path below `root`, contents) as a fake sysfs tree.
    fn tree(root: &Path, files: &[(String, String)]) {
        for (path, text) in files {
            let path = root.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, format!("{text}\n")).unwrap();
        }
    }

    #[test]
    fn the_host_platform_is_read_from_sysfs_and_cpuinfo() {
        let root = std::env::temp_dir().join(format!("steer-sysfs-{}", std::process::id()));
        let cache = |i: u32, level: &str, kind: &str, size: &str, ways: &str, shared: &str| {
            let at = |name: &str| format!("cpu0/cache/index{i}/{name}");
            [(at("level"), level), (at("type"), kind), (at("size"), size), (at("ways_of_associativity"), ways)]
                .into_iter()
                .chain([(at("coherency_line_size"), "64"), (at("shared_cpu_list"), shared)])
                .map(|(path, text)| (path, text.to_string()))
                .collect::<Vec<_>>()
        };
        let mut files: Vec<(String, String)> = (0..16).map(|n| (format!("cpu{n}/online"), "1".into())).collect();
        files.push(("cpu0/topology/thread_siblings_list".into(), "0,8".into()));
        files.extend(cache(0, "1", "Data", "48K", "12", "0,8"));
        files.extend(cache(1, "1", "Instruction", "32K", "8", "0,8"));
        files.extend(cache(2, "2", "Unified", "1024K", "16", "0,8"));
        files.extend(cache(3, "3", "Unified", "16M", "16", "0-3,8-11"));
        tree(&root, &files);
        let table = sysfs_table(&root, "processor\t: 0\ncpu MHz\t\t: 2994.372\n");
        fs::remove_dir_all(&root).unwrap();
        let expected: toml::Table = r#"
            name = "host"
            description = "DESCRIPTION"
            l1d = { size_kib = 48, ways = 12, line_bytes = 64 }
            l2 = { size_kib = 1024, ways = 16, line_bytes = 64 }
            l3 = { size_kib = 16384, ways = 16, line_bytes = 64, relation = "exclusive" }
            topology = { sockets = 1, ccx_per_socket = 2, cores_per_ccx = 4, threads_per_core = 2 }
            core = { freq_ghz = 2.99 }
        "#
        .replace("DESCRIPTION", HOST_DESCRIPTION)
        .parse()
        .unwrap();
        assert_eq!(table, expected);
    }

    #[test]
    fn the_host_takes_its_vendors_prefetchers() {
        let prefetchers = |vendor: &str| {
            let table = sysfs_table(Path::new("/nonexistent"), &format!("processor\t: 0\nvendor_id\t: {vendor}\n"));
            ["l1d", "l2"].map(|level| table.get(level).map(|t| t["prefetcher"].to_string()))
        };
        let [l1d, l2] = prefetchers("GenuineIntel");
        assert_eq!(l1d, None);
        assert_eq!(l2.as_deref(), Some("{ degree = 2, distance = 20, kind = \"stride\" }"));
        let [l1d, l2] = prefetchers("AuthenticAMD");
        assert_eq!(l1d.as_deref(), Some("{ degree = 1, distance = 4, kind = \"stream\" }"));
        assert_eq!(l2.as_deref(), Some("{ degree = 2, distance = 32, kind = \"stream\" }"));
        assert_eq!(prefetchers("HygonGenuine"), [None, None]);
    }

    #[test]
    fn only_folders_named_cpu_and_a_number_are_cpus() {
        // Without caches or SMT siblings every CPU is a core of one CCX: its size counts them.
        let root = std::env::temp_dir().join(format!("steer-sysfs-count-{}", std::process::id()));
        let folders = ["cpu0", "cpu1", "cpu12", "cpufreq", "cpu", "cpu1a", "node0"];
        tree(&root, &folders.map(|f| (format!("{f}/x"), String::new())));
        let table = sysfs_table(&root, "");
        fs::remove_dir_all(&root).unwrap();
        assert_eq!(table["topology"]["cores_per_ccx"].as_integer(), Some(3));
    }

    #[test]
    fn a_machine_that_says_nothing_is_one_core_of_unknown_caches() {
        let table = sysfs_table(Path::new("/nonexistent"), "");
        let one: toml::Table =
            "sockets = 1\nccx_per_socket = 1\ncores_per_ccx = 1\nthreads_per_core = 1".parse().unwrap();
        assert_eq!(table["topology"].as_table(), Some(&one));
        assert!(!table.contains_key("l1d") && !table.contains_key("core"));
    }

    fn overlaid(text: &str) -> ConfigResult<toml::Table> {
        let dir = std::env::temp_dir().join(format!("steer-host-{}-{}", std::process::id(), text.len()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("host.toml");
        fs::write(&path, text).unwrap();
        let mut table = crate::platform::preset_table("turin-9655").unwrap();
        let result = overlay_calibration(&mut table, &path).map(|_| table);
        fs::remove_dir_all(&dir).unwrap();
        result
    }

    #[test]
    fn a_calibration_replaces_only_the_values_it_measured() {
        let table = overlaid("description = \"measured\"\n[l2]\nlatency_cycles = 17.5\n").unwrap();
        assert_eq!(table["description"].as_str(), Some("measured"));
        assert_eq!(table["l2"]["latency_cycles"].as_float(), Some(17.5));
        assert_eq!(table["l2"]["ways"].as_integer(), Some(16), "the rest of the level is kept");
        assert_eq!(table["l1d"]["latency_cycles"].as_float(), Some(5.0));
    }

    #[test]
    fn a_bad_calibration_is_one_line_naming_the_file_and_what() {
        let message = |text: &str| overlaid(text).unwrap_err().to_string();
        let broken = message("[l2\n");
        assert!(broken.starts_with("host calibration ") && broken.contains("host.toml: 1:"), "{broken}");
        assert!(!broken.contains('\n'), "{broken}");
        assert!(message("[l2]\nlatency = 3.0\n").contains("unknown field `latency`"));
        assert!(message("[l2]\nlatency_cycles = \"fast\"\n").contains("host.toml"));
        let absurd = message("[memory]\nidle_latency_ns = -4.0\n");
        assert!(absurd.contains("platform.memory.idle_latency_ns"), "{absurd}");
        let missing = overlay_calibration(&mut toml::Table::new(), Path::new("/nonexistent/host.toml"));
        assert!(missing.unwrap_err().to_string().starts_with("host calibration /nonexistent/host.toml: "));
    }
}
