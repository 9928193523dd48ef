//! Golden outputs: every built-in scenario's result (host time left out) compared exactly with
//! the one stored in `tests/golden/NAME.json`. After an intended change, re-bless them with
//!
//!     STEER_BLESS=1 cargo test -p steer-sim --test golden
//!
//! and commit the files: the diff shows what the change did to every scenario.

use std::path::PathBuf;

use steer_sim::scenario::BUILTINS;
use steer_sim::{load, run, ScenarioSource};

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(format!("{name}.json"))
}

/// The scenario's result as stored: pretty JSON without the host time.
fn result_text(name: &str, source: &str) -> String {
    let scenario = load(&ScenarioSource { text: source, origin: name, default_name: name }, &[]).unwrap();
    let mut value = run(scenario, &mut |_| true).unwrap().value;
    value["sim"].as_object_mut().unwrap().remove("host_seconds");
    serde_json::to_string_pretty(&value).unwrap() + "\n"
}

#[test]
fn every_builtin_scenario_gives_its_stored_result() {
    let bless = std::env::var_os("STEER_BLESS").is_some();
    let mut differ = Vec::new();
    for builtin in BUILTINS {
        let path = golden_path(builtin.name);
        let actual = result_text(builtin.name, builtin.source);
        if bless {
            std::fs::write(&path, &actual).unwrap();
            continue;
        }
        let stored = std::fs::read_to_string(&path).unwrap_or_default();
        if stored != actual {
            let line = stored.lines().zip(actual.lines()).position(|(a, b)| a != b).unwrap_or(0);
            differ.push(format!(
                "{}: first difference at line {}: stored `{}`, now `{}`",
                builtin.name,
                line + 1,
                stored.lines().nth(line).unwrap_or("(missing)").trim(),
                actual.lines().nth(line).unwrap_or("(missing)").trim()
            ));
        }
    }
    assert!(differ.is_empty(), "results differ from tests/golden (re-bless if intended):\n{}", differ.join("\n"));
}

#[test]
fn every_golden_file_belongs_to_a_builtin_scenario() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let stem = name.strip_suffix(".json").unwrap_or(&name);
        assert!(BUILTINS.iter().any(|b| b.name == stem), "tests/golden/{name} has no built-in scenario");
    }
}
