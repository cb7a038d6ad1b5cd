//! `mpq lab` end to end: the shipped smoke experiment with `--limit 2` into a temporary
//! directory (rows checked, a second run resumes with nothing to do), `plan` of the full
//! seed 002 §4.1 file, and a bad file's error.

mod common;
use common::*;

#[test]
fn smoke_experiment_runs_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = mpq(&["lab", "run", "experiments/seed002-low-bdp-smoke.yaml", "--limit", "2", "--out", out, "--quiet"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(stdout.contains("2 scenarios, 8 runs: 8 ran (0 failed), 0 already done"), "{stdout}");
    let lines = std::fs::read_to_string(dir.path().join("results.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 8);
    let multipath: Vec<&serde_json::Value> = rows.iter().filter(|r| r["role"] == "multipath").collect();
    assert_eq!(multipath.len(), 4);
    for r in &rows {
        assert_eq!(r["completed"], true, "{r}");
        assert_eq!(r["data_ok"], true);
        assert_eq!(r["bytes"], 2_000_000);
        assert!(r["goodput_bps"].as_f64().unwrap() > 0.0);
        assert!(r["sim_wall_s"].as_f64().unwrap() > 0.0);
        // The client acknowledged the download: ACK frames counted, at least one range each.
        assert!(r["ack_frames"].as_u64().unwrap() > 100, "{r}");
        assert!(r["ranges_per_ack"].as_f64().unwrap() >= 1.0, "{r}");
    }
    for r in &multipath {
        assert_eq!(r["cc"], "olia");
        assert!(r["eben"].is_f64(), "no EBen: {r}");
        let base: Vec<f64> =
            r["baseline_goodput_bps"].as_array().unwrap().iter().map(|g| g.as_f64().unwrap()).collect();
        assert_eq!(base.len(), 2);
    }
    // Both initial paths, and the baselines in CUBIC.
    assert!(multipath.iter().any(|r| r["initial_path"] == 1));
    assert!(rows.iter().filter(|r| r["role"] == "baseline").all(|r| r["cc"] == "cubic"));
    let csv = std::fs::read_to_string(dir.path().join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 9);
    let manifests = std::fs::read_to_string(dir.path().join("manifests.jsonl")).unwrap();
    assert_eq!(manifests.lines().count(), 8);
    assert!(manifests.contains("\"mpq_version\":\"") && manifests.contains("\"git_commit\":\""));
    // A manifest's command repeats its run bit for bit (same trace of every link event).
    let m: serde_json::Value = manifests
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|m| m["run_id"].as_str().unwrap().contains("-i1-"))
        .unwrap();
    let row = rows.iter().find(|r| r["run_id"] == m["run_id"]).unwrap();
    let cmd: Vec<&str> = m["command"].as_str().unwrap().split_whitespace().collect();
    assert_eq!(cmd[..2], ["mpq", "sim"]);
    let mut args = cmd[1..].to_vec();
    args.push("--json");
    let o = mpq(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let again: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_eq!(again["trace_hash"], row["trace_hash"], "{}", m["command"]);

    let again = mpq(&["lab", "run", "experiments/seed002-low-bdp-smoke.yaml", "--limit", "2", "--out", out, "--quiet"]);
    assert!(again.status.success());
    assert!(text(&again.stdout).contains("0 ran (0 failed), 8 already done"), "{}", text(&again.stdout));
}

#[test]
fn full_seed002_file_plans() {
    let o = mpq(&["lab", "plan", "experiments/seed002-4.1.yaml", "--limit", "3"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    assert!(s.starts_with("seed002-4.1: 3 of 1012 scenarios, 12 runs (4 classes, 1 repetition(s))"), "{s}");
    assert!(s.contains("#0 low-bdp-no-loss/0000/r0 seed "));
    let o = mpq(&["lab", "plan", "experiments/seed002-4.1.yaml", "--shard", "4/4", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let sc = v["scenarios"].as_array().unwrap();
    assert_eq!(sc.len(), 253);
    for class in ["low-bdp-no-loss", "low-bdp-losses", "high-bdp-no-loss", "high-bdp-losses"] {
        assert!(sc.iter().any(|s| s["class"] == class), "{class}");
    }
}

#[test]
fn bad_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.yaml");
    std::fs::write(&f, "name: bad\nworkload: {download: 1MB}\ntopology:\n  paths:\n    - {rate: 10mbit, rtt: 20}\n")
        .unwrap();
    let o = mpq(&["lab", "plan", f.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(e.contains("bad.yaml:5: topology.paths[0].rtt: 20 has no unit; expected a duration"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn a_shared_bottleneck_is_planned_and_repeatable_with_mpq_sim() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bn.yaml");
    std::fs::write(
        &f,
        "name: bn\nworkload: {download: 300KB}\ntopology:\n  paths:\n    - {rate: 100mbit, rtt: 4ms}\n    \
- {rate: 100mbit, rtt: 8ms}\n  bottleneck: {rate: 10mbit, rtt: 16ms, queue: 30ms}\n  competitor: true\n",
    )
    .unwrap();
    let o = mpq(&["lab", "plan", f.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    assert!(s.contains("    shared bottleneck: 10mbit/16ms/queue=30ms, with a competing flow"), "{s}");
    let o = mpq(&[
        "sim",
        "--link",
        "100mbit/4ms",
        "--link",
        "100mbit/8ms",
        "--bottleneck",
        "10mbit/16ms/queue=30ms",
        "--competitor",
        "--size",
        "300KB",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let c = r["competitor"]["goodput_bps"].as_f64().unwrap();
    assert!(c > 0.0 && r["goodput_bps"].as_f64().unwrap() + c <= 10e6, "{r}");
}
