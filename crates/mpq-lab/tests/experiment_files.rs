//! Experiment files: a good file loads; a bad one is an error naming the file, the line, the
//! key and what was expected.

use std::path::Path;

use mpq_lab::experiment::{Design, Experiment, WorkloadPlan};
use mpq_lab::LabError;

const GOOD: &str = "\
name: good
description: two paths
seed: 9
workload:
  download: 2MB
factors:
  scheduler: [minrtt, ecf]
  cc: [olia]
  initial_path: [0, 1]
design:
  type: wsp
  points: 5
topology:
  paths:
    - rate: {min: 1mbit, max: 20mbit}
      rtt: {min: 0ms, max: 50ms}
      queue: 50ms
    - rate: 10mbit
      rtt: 20ms
      gilbert_elliott: {p_gb: 1%, p_bg: 10%}
  events:
    - {path: 0, fail_at: 3s}
";

fn load(text: &str) -> Result<Experiment, String> {
    Experiment::from_text(Path::new("exp.yaml"), text.to_owned()).map_err(|e| match e {
        LabError::File(f) => f.to_string(),
        other => panic!("not a file error: {other}"),
    })
}

/// The good file with `from` replaced by `to` (which must be there).
fn edit(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "{from:?}");
    GOOD.replacen(from, to, 1)
}

#[track_caller]
fn bad(text: &str, expect: &[&str]) {
    let e = load(text).expect_err("accepted a bad file");
    for part in expect {
        assert!(e.contains(part), "{e:?} lacks {part:?}");
    }
}

#[test]
fn good_file_loads() {
    let e = load(GOOD).unwrap();
    assert_eq!(e.name, "good");
    assert_eq!(e.seed, 9);
    assert_eq!(e.workload, WorkloadPlan::Download { sizes: vec![2_000_000] });
    assert_eq!(e.schedulers.len(), 2);
    assert_eq!(e.initial_paths, [0, 1]);
    let c = &e.classes[0];
    assert_eq!(c.name, "main");
    assert_eq!(c.dims.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), ["path0.rate", "path0.rtt"]);
    assert!(matches!(c.design, Design::Wsp { points: 5, .. }));
    assert_eq!(c.fail, [(0, std::time::Duration::from_secs(3))]);
}

#[test]
fn unknown_key_names_key_line_and_expected() {
    bad(
        &edit("      queue: 50ms", "      queue: 50ms\n      colour: red"),
        &["exp.yaml:18", "unknown field `colour`", "expected one of", "`rate`"],
    );
    bad(&edit("seed: 9", "seed: 9\nrepetition: 3"), &["exp.yaml:4", "unknown field `repetition`"]);
}

#[test]
fn bad_values_name_key_and_line() {
    bad(&edit("rate: 10mbit", "rate: 10"), &["exp.yaml:18", "has no unit", "a rate with a unit"]);
    bad(&edit("download: 2MB", "download: lots"), &["exp.yaml:5", "workload.download", "\"lots\" is not a size"]);
    bad(&edit("points: 5", "points: many"), &["exp.yaml:12", "design.points", "invalid type"]);
    bad(&edit("type: wsp", "type: lhs"), &["exp.yaml:11", "unknown variant `lhs`", "`grid`, `list`, `wsp`"]);
    bad(&edit("{min: 0ms, max: 50ms}", "{min: 50ms, max: 0ms}"), &["exp.yaml:16", "is above max"]);
}

#[test]
fn cross_key_rules_name_key_and_line() {
    bad(
        &edit("scheduler: [minrtt, ecf]", "scheduler: [minrtt, magic]"),
        &["exp.yaml:7", "factors.scheduler[1]", "unknown scheduler \"magic\""],
    );
    bad(&edit("cc: [olia]", "cc:\n    - olia\n    - bbr"), &["exp.yaml:10", "factors.cc[1]", "unknown"]);
    bad(
        &edit("initial_path: [0, 1]", "initial_path: [0, 2]"),
        &["exp.yaml:9", "factors.initial_path[1]", "path 2 does not exist"],
    );
    bad(
        &edit("{path: 0, fail_at: 3s}", "{path: 5, fail_at: 3s}"),
        &["exp.yaml:22", "topology.events[0].path", "path 5 does not exist"],
    );
    bad(
        &edit("      gilbert_elliott:", "      loss: 1%\n      gilbert_elliott:"),
        &["exp.yaml:21", "topology.paths[1].gilbert_elliott", "not both"],
    );
    bad(&edit("  points: 5\n", ""), &["exp.yaml:10", "design", "needs `points`"]);
    bad(
        &edit("  type: wsp\n  points: 5\n", "  type: grid\n"),
        &["exp.yaml:14", "topology.paths[0].rate", "needs `levels`"],
    );
    bad(
        &edit("  download: 2MB\n", "  download: 2MB\n  reqresp: {size: 750B, interval: 400ms, count: 3}\n"),
        &["exp.yaml:4", "workload", "exactly one"],
    );
    bad(&edit("name: good", "name: a/b"), &["exp.yaml:1", "name", "letters, digits"]);
    bad(
        &edit("seed: 9", "seed: 9\nmetrics: [goodput, eben]"),
        &["exp.yaml:4", "metrics[0]", "unknown metric \"goodput\""],
    );
}

/// The good file with a shared bottleneck: `extra` goes into its map.
fn with_bottleneck(extra: &str) -> String {
    edit("  events:\n", &format!("  bottleneck: {{rate: 5mbit, rtt: 10ms, queue: 20ms{extra}}}\n  events:\n"))
}

/// The good file with a shared bottleneck and `competitor: value` in its topology.
fn with_competitor(value: &str) -> String {
    edit(
        "  events:\n",
        &format!("  bottleneck: {{rate: 5mbit, rtt: 10ms, queue: 20ms}}\n  competitor: {value}\n  events:\n"),
    )
}

#[test]
fn a_shared_bottleneck_loads_and_bad_ones_are_located() {
    let e = load(&with_competitor("true")).unwrap();
    let b = e.classes[0].bottleneck.as_ref().expect("the bottleneck");
    assert!(b.competitor);
    assert!(!load(&with_bottleneck("")).unwrap().classes[0].bottleneck.as_ref().unwrap().competitor);
    let varied = load(&with_bottleneck(", loss: [0%, 1%]")).unwrap();
    let dims: Vec<&str> = varied.classes[0].dims.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(dims, ["path0.rate", "path0.rtt", "bottleneck.loss"]);
    bad(&with_bottleneck(", colour: red"), &["exp.yaml:21", "unknown field `colour`", "`gilbert_elliott`"]);
    bad(&with_competitor("maybe"), &["exp.yaml:22", "invalid type", "boolean"]);
    bad(&edit("  events:\n", "  competitor: true\n  events:\n"), &["topology.competitor", "add `bottleneck`"]);
    bad(
        &with_bottleneck("").replace("rate: 5mbit", "rate: inf"),
        &["exp.yaml:21", "topology.bottleneck.rate", "finite rate"],
    );
    bad(
        &with_bottleneck("").replace("rate: 5mbit", "rate: [0mbit, 5mbit]"),
        &["exp.yaml:21", "topology.bottleneck.rate", "finite rate"],
    );
    bad(
        &with_bottleneck(", loss: 1%, gilbert_elliott: {p_gb: 1%, p_bg: 10%}"),
        &["exp.yaml:21", "topology.bottleneck.gilbert_elliott", "not both"],
    );
    bad(&with_bottleneck("").replace("rtt: 10ms, ", ""), &["exp.yaml:21", "missing field `rtt`"]);
}

#[test]
fn not_yaml_is_a_located_error() {
    bad("name: x\nworkload: {download: 2MB\n", &["exp.yaml:3", "did not find expected"]);
    bad("", &["exp.yaml"]);
    bad("name: x\n", &["missing field `workload`"]);
}

#[test]
fn list_design_values_are_checked() {
    let list = edit(
        "  type: wsp\n  points: 5\n",
        "  type: list\n  scenarios:\n    - {path0.rate: 5mbit, path0.rtt: 10ms}\n    - {path0.rate: 7mbit, path0.rtt: 30ms}\n",
    );
    let e = load(&list).unwrap();
    let Design::List(points) = &e.classes[0].design else { panic!() };
    assert_eq!(points.len(), 2);
    assert_eq!(points[1]["path0.rtt"].value, 0.03);
    bad(
        &list.replace("path0.rtt: 30ms", "path1.rtt: 30ms"),
        &["design.scenarios[1].path1.rtt", "not a varied parameter", "path0.rate, path0.rtt"],
    );
    bad(&list.replace("path0.rtt: 30ms}", "}"), &["design.scenarios[1]", "missing `path0.rtt`"]);
    bad(&list.replace("path0.rate: 7mbit", "path0.rate: 7"), &["design.scenarios[1].path0.rate", "has no unit"]);
}

#[test]
fn shipped_experiment_files_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "yaml") {
            Experiment::load(&p).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 2, "{n} experiment files in {}", dir.display());
}

/// `factors.ack_ranges` (seed 003's ACK-range limits): each limit is a multipath run of its
/// own (`-rN` in its ID, `--ack-ranges N` in its command, the limit in its simulator
/// scenario); the single-path baselines keep the protocol's default; a limit outside 1..=256
/// is an error naming the key.
#[test]
fn ack_range_limits_are_a_factor() {
    let text = edit("cc: [olia]", "cc: [olia]\n  ack_ranges: [4, 32]");
    let exp = load(&text).unwrap();
    assert_eq!(exp.ack_ranges, [Some(4), Some(32)]);
    let plan = mpq_lab::plan::Plan::new(&exp).unwrap();
    let sc = &plan.scenarios[0];
    let multi: Vec<_> = sc.runs.iter().filter(|r| r.role == mpq_lab::plan::Role::Multipath).collect();
    assert_eq!(multi.len(), 2 * 2 * 2, "2 schedulers x 2 initial paths x 2 limits");
    for r in &multi {
        let n = r.ack_ranges.expect("a limit");
        assert!(r.id.contains(&format!("-r{n}-")), "{}", r.id);
        assert!(sc.sim_command(&exp, r).contains(&format!("--ack-ranges {n}")));
        assert_eq!(sc.sim_scenario(&exp, r).unwrap().ack_ranges, n);
    }
    for r in sc.runs.iter().filter(|r| r.role == mpq_lab::plan::Role::Baseline) {
        assert_eq!(r.ack_ranges, None, "{}", r.id);
        assert_eq!(sc.sim_scenario(&exp, r).unwrap().ack_ranges, mpq_proto::conn::DEFAULT_MAX_ACK_RANGES);
    }
    // Without the factor: one run per combination, with the default and the old IDs.
    let plain = mpq_lab::plan::Plan::new(&load(GOOD).unwrap()).unwrap();
    assert!(plain.scenarios[0].runs.iter().all(|r| r.ack_ranges.is_none() && !r.id.contains("-r")));
    bad(
        &edit("cc: [olia]", "cc: [olia]\n  ack_ranges: [4, 0]"),
        &["exp.yaml:9", "factors.ack_ranges[1]", "1 to 256 ranges"],
    );
}
