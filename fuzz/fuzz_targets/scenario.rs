//! The scenario loader on any text: an error or a scenario whose resolved form loads back equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use steer_sim::{load, ScenarioSource};

fuzz_target!(|text: &str| {
    let source = ScenarioSource { text, origin: "fuzz.toml", default_name: "fuzz" };
    if let Ok(scenario) = load(&source, &[]) {
        let resolved = scenario.to_toml();
        let again = load(&ScenarioSource { text: &resolved, origin: "resolved.toml", default_name: "fuzz" }, &[])
            .expect("a resolved scenario loads");
        assert_eq!(again, scenario, "resolving is idempotent");
    }
});
