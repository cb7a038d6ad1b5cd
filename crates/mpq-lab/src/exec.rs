//! Runs one planned run in the simulator and turns it into a result row, timing the
//! simulation on the wall clock. A run that cannot be built, or that panics (a bug in the
//! stack), becomes a row with an error instead of stopping the experiment.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use mpq_sim::scenario::{RunHooks, ScenarioError};

use crate::experiment::{Experiment, WorkloadPlan};
use crate::manifest::Manifest;
use crate::metrics::{row, Row};
use crate::plan::{PlannedScenario, RunSpec};

/// Wall-clock seconds since `start`.
#[allow(clippy::disallowed_methods)] // the lab measures the simulator's own cost
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

/// Runs `run` of `scenario` and returns its row (EBen not set) and manifest; with `qlog`,
/// writes the run's qlog files there (see [`crate::qlog`]; a file that cannot be made is the
/// row's error).
pub fn execute(exp: &Experiment, scenario: &PlannedScenario, run: &RunSpec, qlog: Option<&Path>) -> (Row, Manifest) {
    let workload = match exp.workload {
        WorkloadPlan::Download { .. } => "download",
        WorkloadPlan::ReqResp { .. } => "reqresp",
    };
    let qlog = qlog.map(|dir| crate::qlog::factory(dir, &run.id));
    let start = wall_clock();
    let outcome = match scenario.sim_scenario(exp, run) {
        Err(e) => Err(format!("invalid run: {e}")),
        Ok(s) => match catch_unwind(AssertUnwindSafe(|| {
            s.run_with(RunHooks { qlog: qlog.as_ref().map(|q| q.0.clone()), progress: None })
        })) {
            Ok(Ok(r)) => Ok(r),
            // Corrupt data: the row says so (data_ok is false) and keeps the measurements.
            Ok(Err(ScenarioError::CorruptData { result, .. })) => Ok(*result),
            Ok(Err(e)) => Err(e.to_string()),
            Err(p) => {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown".into());
                Err(format!("the simulation panicked: {msg}"))
            }
        },
    };
    let wall_s = start.elapsed().as_secs_f64();
    let mut r = row(&exp.name, scenario, run, workload, outcome.as_ref().map_err(String::as_str), wall_s);
    if let Some(e) = qlog.and_then(|q| q.1.borrow().first().cloned()) {
        r.error.get_or_insert(e);
    }
    (r, Manifest::of_run(exp, scenario, run, "sim".into(), scenario.sim_command(exp, run)))
}
