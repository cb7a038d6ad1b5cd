//! A small experiment with a shared bottleneck and a competitor: the plan carries the
//! bottleneck into every run (and its manifest's command), and the results show its effect.

use std::path::Path;

use mpq_lab::metrics::Row;
use mpq_lab::plan::{Plan, Role};
use mpq_lab::results::{read_lines, read_rows, MANIFESTS, RESULTS_JSONL};
use mpq_lab::runner::{run, RunOptions};
use mpq_lab::Experiment;

const EXP: &str = "\
name: shared
seed: 2
workload: {download: 1MB}
metrics: [goodput_bps, competitor_goodput_bps]
design: {type: grid}
topology:
  paths:
    - {rate: 100mbit, rtt: 4ms, queue: 10ms}
    - {rate: 100mbit, rtt: 8ms, queue: 10ms}
  bottleneck: {rate: [5mbit, 10mbit], rtt: 16ms, queue: 30ms}
  competitor: true
";

#[test]
fn paths_and_competitor_together_fit_in_the_bottleneck() {
    let exp = Experiment::from_text(Path::new("shared.yaml"), EXP.into()).unwrap();
    let plan = Plan::new(&exp).unwrap();
    assert_eq!(plan.scenarios.len(), 2, "one scenario per bottleneck rate");
    assert_eq!(plan.scenarios[0].bottleneck.as_deref(), Some("5mbit/16ms/queue=30ms"));
    assert_eq!(plan.scenarios[1].params["bottleneck.rate"], "10mbit");
    let dir = tempfile::tempdir().unwrap();
    let opts = RunOptions::new(dir.path(), 1);
    let s = run(&exp, &plan, &opts).unwrap();
    assert_eq!((s.runs, s.failed), (6, 0));
    let rows: Vec<Row> = read_rows(&dir.path().join(RESULTS_JSONL), false).unwrap();
    for r in &rows {
        let rate = if r.scenario.starts_with("main/0000") { 5e6 } else { 10e6 };
        let c = r.competitor_goodput_bps.unwrap_or_else(|| panic!("{}: no competitor goodput", r.run_id));
        assert!(c > 0.05 * rate, "{}: competitor {c}", r.run_id);
        // Both paths and the competitor cross the bottleneck: together at most its rate.
        assert!(r.goodput_bps + c <= rate, "{}: {} + {c} > {rate}", r.run_id, r.goodput_bps);
        assert_eq!(r.bottleneck.as_deref(), Some(plan.scenarios[r.point].bottleneck.as_deref().unwrap()));
        if r.role == Role::Multipath {
            assert!(r.multipath && r.path_bytes.iter().all(|&b| b > 0), "{r:?}");
        }
    }
    let manifests = read_lines(&dir.path().join(MANIFESTS), false).unwrap();
    assert!(manifests.iter().all(|m| m.contains("--bottleneck 5mbit/16ms/queue=30ms --competitor")
        || m.contains("--bottleneck 10mbit/16ms/queue=30ms --competitor")));
}
