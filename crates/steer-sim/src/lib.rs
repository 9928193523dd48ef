//! steer's simulation core: where I/O data lands in the memory hierarchy, and what that costs.
//!
//! The layout follows the data path: `devices` (NICs and their DMA placement policies) ->
//! `hierarchy` (coherent caches built from `cache` arrays) -> `memory` (DRAM channels). `workloads`
//! run on CPUs with the timing model in `workloads::timing`; `engine` orders everything in time;
//! `scenario` loads what users write; `results` shapes what they read; `trace` replays traces.

pub mod cache;
pub mod devices;
pub mod engine;
pub mod error;
pub mod hierarchy;
mod host;
pub mod memory;
pub mod params;
pub mod platform;
pub mod results;
pub mod scenario;
pub mod trace;
pub mod units;
pub mod workloads;

pub use engine::Simulation;
pub use results::RunResult;
pub use scenario::{load, Scenario, ScenarioSource};

/// Runs a validated scenario, reporting progress as a fraction in [0, 1]; `progress` returning
/// false stops the run (then `None`).
pub fn run(scenario: Scenario, progress: &mut dyn FnMut(f64) -> bool) -> Option<RunResult> {
    Simulation::new(scenario).run(progress)
}
