//! steer's simulation core: where I/O data lands in the memory hierarchy, and what that costs.
//!
//! The layout follows the data path: `devices` (NICs, the rings they share with programs, DMA
//! placement, PCIe TPH) -> `steering` (the I/O die's path for writes steered into an L2) ->
//! `hierarchy` (coherent caches built from `cache` arrays) -> `memory`
//! (DRAM channels); bulk copies (a copy engine's descriptors) move as `flows` over memory nodes,
//! meshes and socket links. Workload programs (`workloads`) run on CPUs (`cpu`, with the core timing
//! model); `engine` runs every agent in time order and keeps what they share (`Shared`, a store of
//! facilities by type); `system` is the builder kinds assemble a system with, `simulation` a
//! scenario's run; `scenario` loads what users write; `stats` and `results` declare and shape what
//! they read. The layers, each importing only those below it, are in docs/engine.md.
//! Traces are replayed through these caches by the `steer-trace` crate.

pub mod cache;
pub mod catalog;
pub mod cpu;
pub mod devices;
pub mod directory;
pub mod engine;
pub mod error;
pub mod flows;
pub mod hierarchy;
pub mod host;
pub mod kinds;
pub mod memory;
pub mod params;
pub mod platform;
pub mod results;
pub mod scenario;
pub mod simulation;
pub mod stats;
pub mod steering;
pub mod system;
#[cfg(test)]
mod testing;
pub mod tlb;
pub mod units;
pub mod workloads;

pub use error::Error;
pub use scenario::{load, Scenario, ScenarioSource};
pub use simulation::{RunResult, Simulation};

/// Validates and runs a scenario, reporting progress as a fraction in [0, 1]; `progress`
/// returning false stops the run (`Error::Stopped`).
pub fn run(scenario: Scenario, progress: &mut dyn FnMut(f64) -> bool) -> Result<RunResult, Error> {
    Simulation::new(scenario)?.run(progress)
}
