//! A validated scenario assembled into a runnable system, and its run: warm-up, reset, the
//! measured window, the results.

use crate::engine::{Engine, ReportView, Shared};
use crate::error::Error;
use crate::flows::Flows;
use crate::scenario::Scenario;
use crate::stats::SchemaEntry;
use crate::system::Builder;
use crate::units::Time;

/// The result of a run: the JSON document, and the declaration of every key in it.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub value: serde_json::Value,
    pub schema: Vec<SchemaEntry>,
}

/// A validated scenario assembled into a runnable system.
pub struct Simulation {
    pub scenario: Scenario,
    pub shared: Shared,
    engine: Engine,
    window_start: Time,
}

impl Simulation {
    /// Validates a scenario and builds its system.
    pub fn new(scenario: Scenario) -> Result<Simulation, Error> {
        scenario.validate().map_err(|e| Error::Input(e.to_string()))?;
        scenario.check_size().map_err(Error::TooLarge)?;
        if scenario.devices.is_empty() && scenario.workloads.is_empty() {
            return Err(Error::Input("nothing to simulate: no [[devices]] and no [[workloads]]".into()));
        }
        let max_runahead = Time::from_ns(scenario.sim.max_runahead_ns);
        let (engine, shared) = {
            let mut builder = Builder::new(&scenario.platform, scenario.seed);
            for device in &scenario.devices {
                device.spec.build(&mut builder);
            }
            let mut every_workload_ends = true;
            for workload in &scenario.workloads {
                let jobs = builder.shared.jobs.registered;
                workload.spec.build(&mut builder);
                every_workload_ends &= builder.shared.jobs.registered > jobs;
            }
            builder.shared.jobs.end_the_run = every_workload_ends && !scenario.workloads.is_empty();
            builder.finish(max_runahead)
        };
        Ok(Simulation { scenario, shared, engine, window_start: Time::ZERO })
    }

    /// Runs every event before `until`; `progress` is called with the simulated time now and
    /// then and stops the run by returning false. Returns whether `until` was reached.
    pub fn run_until(&mut self, until: Time, progress: &mut dyn FnMut(Time) -> bool) -> bool {
        self.engine.run_until(&mut self.shared, until, progress)
    }

    /// Zeroes every statistic: the measured window starts now.
    pub fn reset_stats(&mut self) {
        self.shared.reset_stats(self.engine.now());
        self.engine.reset_stats();
        self.window_start = self.engine.now();
    }

    pub fn now(&self) -> Time {
        self.engine.now()
    }

    /// The agents of type `T` (a device, a CPU), in the order they were built.
    pub fn agents_of<T: 'static>(&self) -> impl Iterator<Item = &T> {
        self.engine.agents().iter().filter_map(|a| a.as_any().downcast_ref::<T>())
    }

    /// Warm-up, reset, measured window; the results, or `Error::Stopped` if `progress` (called
    /// with the completed fraction) stopped the run by returning false.
    pub fn run(mut self, progress: &mut dyn FnMut(f64) -> bool) -> Result<RunResult, Error> {
        let started = std::time::Instant::now();
        let warmup = Time::from_us(self.scenario.sim.warmup_us);
        let end = warmup + Time::from_us(self.scenario.sim.measure_us);
        let total = end.0.max(1) as f64;
        if !self.run_until(warmup, &mut |t| progress(t.0 as f64 / total)) {
            return Err(Error::Stopped);
        }
        self.reset_stats();
        if !self.run_until(end, &mut |t| progress(t.0 as f64 / total)) || !progress(1.0) {
            return Err(Error::Stopped);
        }
        // Flows still moving at the window's end count what they moved until then.
        self.shared.get_mut::<Flows>().advance(self.engine.now());
        Ok(self.report(started.elapsed().as_secs_f64()))
    }

    /// The results of the measured window so far.
    pub fn report(&self, host_seconds: f64) -> RunResult {
        let view = ReportView { shared: &self.shared, window_start: self.window_start, now: self.engine.now() };
        let stalls = self.engine.stalls(self.window_start);
        let (value, schema) = crate::results::collect(
            &self.scenario,
            self.engine.agents(),
            &view,
            &stalls,
            self.engine.ran_dry_at,
            host_seconds,
        );
        RunResult { value, schema }
    }

    /// The schema of this simulation's results (every key, its unit and meaning), without running.
    pub fn schema(&self) -> Vec<SchemaEntry> {
        self.report(0.0).schema
    }
}
