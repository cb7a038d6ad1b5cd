//! The runner on a small experiment: rows and manifests, resumption after an interruption
//! (a torn last line included), sharding plus merging gives the same rows as one run.

use std::path::{Path, PathBuf};

use mpq_lab::metrics::Row;
use mpq_lab::plan::{Plan, Role};
use mpq_lab::results::{merge, read_lines, read_rows, MANIFESTS, RESULTS_CSV, RESULTS_JSONL};
use mpq_lab::runner::{run, RunOptions, RunSummary};
use mpq_lab::shard::Shard;
use mpq_lab::Experiment;

const EXP: &str = "\
name: tiny
seed: 5
workload: {download: 300KB}
factors: {initial_path: [0, 1]}
design: {type: wsp, points: 3, seed: 1}
topology:
  paths:
    - {rate: {min: 5mbit, max: 20mbit}, rtt: {min: 10ms, max: 40ms}, queue: 50ms}
    - {rate: 10mbit, rtt: 30ms, queue: 50ms}
";

fn experiment() -> (Experiment, Plan) {
    let exp = Experiment::from_text(Path::new("tiny.yaml"), EXP.into()).unwrap();
    let plan = Plan::new(&exp).unwrap();
    (exp, plan)
}

fn go(out: &Path, limit: Option<usize>, shard: Option<Shard>) -> RunSummary {
    let (exp, plan) = experiment();
    run(&exp, &plan, &RunOptions { limit, shard, ..RunOptions::new(out, 2) }).unwrap()
}

fn rows(dir: &Path) -> Vec<Row> {
    let mut r = read_rows(&dir.join(RESULTS_JSONL), false).unwrap();
    r.sort_by(|a, b| a.run_id.cmp(&b.run_id));
    r
}

/// Rows without the wall time (which differs from run to run).
fn comparable(mut r: Vec<Row>) -> Vec<Row> {
    for x in &mut r {
        x.sim_wall_s = 0.0;
    }
    r
}

#[test]
fn runs_write_rows_manifests_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let s = go(dir.path(), None, None);
    // 3 scenarios x (2 baselines + 2 initial paths).
    assert_eq!((s.scenarios, s.runs, s.ran, s.skipped, s.failed), (3, 12, 12, 0, 0));
    let r = rows(dir.path());
    assert_eq!(r.len(), 12);
    for x in &r {
        assert!(x.completed && x.data_ok && x.error.is_none(), "{x:?}");
        assert_eq!(x.bytes, 300_000);
        assert!(x.goodput_bps > 0.0 && x.sim_wall_s > 0.0);
        assert!((x.path_share.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        match x.role {
            Role::Baseline => {
                assert_eq!(x.paths, 1);
                assert_eq!(x.eben, None);
                // A baseline's bytes all cross its own path.
                assert_eq!(x.path_share[x.initial_path], 1.0);
            }
            Role::Multipath => {
                assert_eq!(x.paths, 2);
                assert!(x.multipath);
                assert_eq!(x.baseline_goodput_bps.len(), 2);
                let e = x.eben.expect("EBen of a multipath run");
                assert!((-1.0..=2.0).contains(&e), "{e}");
            }
        }
    }
    let manifests = read_lines(&dir.path().join(MANIFESTS), false).unwrap();
    assert_eq!(manifests.len(), 12);
    assert!(manifests[0].contains("\"command\":\"mpq sim --link "), "{}", manifests[0]);
    let csv = std::fs::read_to_string(dir.path().join(RESULTS_CSV)).unwrap();
    assert_eq!(csv.lines().count(), 13);
    assert!(csv.starts_with("run_id,experiment,scenario,class,point,repetition,seed,role,"));
    assert!(csv.lines().next().unwrap().contains(",eben,"));
}

#[test]
fn an_interrupted_run_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let first = go(dir.path(), Some(2), None);
    assert_eq!(first.ran, 8);
    let before = rows(dir.path());
    // Interrupt: lose the last three rows and leave half a line behind.
    let path = dir.path().join(RESULTS_JSONL);
    let lines = read_lines(&path, false).unwrap();
    let kept: String = lines[..5].iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, format!("{kept}{}", &lines[5][..40])).unwrap();
    let again = go(dir.path(), Some(2), None);
    assert_eq!((again.ran, again.skipped), (3, 5));
    assert_eq!(comparable(rows(dir.path())), comparable(before), "same rows after resuming");
    // Nothing left to do; a larger limit only runs the new scenario.
    assert_eq!(go(dir.path(), Some(2), None).ran, 0);
    assert_eq!(go(dir.path(), None, None).ran, 4);
}

#[test]
fn another_experiment_file_in_the_same_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    go(dir.path(), Some(1), None);
    let exp = Experiment::from_text(Path::new("tiny.yaml"), EXP.replace("seed: 5", "seed: 6")).unwrap();
    let plan = Plan::new(&exp).unwrap();
    let opts = RunOptions { limit: Some(1), ..RunOptions::new(dir.path(), 1) };
    let e = run(&exp, &plan, &opts).unwrap_err().to_string();
    assert!(e.contains("another version of the experiment file"), "{e}");
}

#[test]
fn shards_merge_into_the_whole() {
    let whole = tempfile::tempdir().unwrap();
    go(whole.path(), None, None);
    let parts: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut ran = 0;
    for (i, p) in parts.iter().enumerate() {
        ran += go(p.path(), None, Some(Shard { index: i + 1, count: 2 })).ran;
    }
    assert_eq!(ran, 12);
    let merged = tempfile::tempdir().unwrap();
    let inputs: Vec<PathBuf> = parts.iter().map(|p| p.path().to_owned()).collect();
    let s = merge(merged.path(), &inputs).unwrap();
    assert_eq!((s.rows, s.duplicates, s.conflicts.len()), (12, 0, 0));
    // Deterministic runs: the merged slices equal the whole, EBen included.
    assert_eq!(comparable(rows(merged.path())), comparable(rows(whole.path())));
    assert_eq!(read_lines(&merged.path().join(MANIFESTS), false).unwrap().len(), 12);
    // Merging the same input twice only drops duplicates.
    let twice = tempfile::tempdir().unwrap();
    let s = merge(twice.path(), &[whole.path().to_owned(), whole.path().to_owned()]).unwrap();
    assert_eq!((s.rows, s.duplicates), (12, 12));
}

#[test]
fn merge_recomputes_eben_from_joined_baselines() {
    let whole = tempfile::tempdir().unwrap();
    go(whole.path(), Some(1), None);
    let all = rows(whole.path());
    // Split baselines and multipath rows into two files with EBen erased.
    let dir = tempfile::tempdir().unwrap();
    let (mut a, mut b) = (String::new(), String::new());
    for mut r in all.clone() {
        if r.role == Role::Multipath {
            r.eben = None;
            b += &format!("{}\n", serde_json::to_string(&r).unwrap());
        } else {
            a += &format!("{}\n", serde_json::to_string(&r).unwrap());
        }
    }
    let (fa, fb) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    std::fs::write(&fa, a).unwrap();
    std::fs::write(&fb, b).unwrap();
    let out = dir.path().join("out");
    merge(&out, &[fb, fa]).unwrap();
    let merged = rows(&out);
    assert_eq!(merged, all);
    assert!(merged.iter().filter(|r| r.role == Role::Multipath).all(|r| r.eben.is_some()));
}

/// The records of a JSON-SEQ file (RFC 7464: each starts with the record separator 0x1E),
/// each parsed as JSON.
fn json_seq(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(text.starts_with('\u{1e}'), "{}: not JSON-SEQ", path.display());
    text.split('\u{1e}')
        .skip(1)
        .map(|r| serde_json::from_str(r.trim_end()).unwrap_or_else(|e| panic!("{}: {e}: {r}", path.display())))
        .collect()
}

#[test]
fn qlog_files_per_run_hold_the_connections_events() {
    let (exp, plan) = experiment();
    let dir = tempfile::tempdir().unwrap();
    let qlog = dir.path().join("qlog");
    let opts = RunOptions {
        limit: Some(1),
        shard: None,
        out: dir.path().join("out"),
        jobs: 1,
        progress: false,
        qlog: Some(qlog.clone()),
        profile: false,
        mpq: None,
        hosts: None,
    };
    let s = run(&exp, &plan, &opts).unwrap();
    assert_eq!((s.ran, s.failed), (4, 0));
    for r in &plan.scenarios[0].runs {
        for vantage in ["client", "server"] {
            let path = mpq_lab::qlog::qlog_path(&qlog, &r.id, vantage);
            let records = json_seq(&path);
            assert_eq!(records[0]["qlog_format"], "JSON-SEQ", "{}", path.display());
            assert_eq!(records[0]["trace"]["vantage_point"]["type"], vantage);
            let names: Vec<&str> = records[1..].iter().map(|e| e["name"].as_str().unwrap()).collect();
            assert!(records[1..].iter().all(|e| e["time"].is_f64()), "{}", path.display());
            assert!(names.contains(&"transport:packet_sent"), "{}: {names:?}", path.display());
            assert!(names.contains(&"transport:packet_received"), "{}", path.display());
        }
        assert!(qlog.join(format!("{}_client.sqlog", r.id)).exists());
    }
    // Without --qlog, nothing is written.
    let other = tempfile::tempdir().unwrap();
    go(other.path(), Some(1), None);
    assert!(!other.path().join("main").exists());
}
