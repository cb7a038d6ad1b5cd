//! `mpq lab submit --slurm` against a real Slurm (ignored by default: run by
//! `scripts/test-slurm.sh`, which starts a single-node Slurm with
//! `scripts/slurm-single-node.sh`): the smoke experiment as a 2-task job array and a merge
//! job; the merged rows must equal those of a local `mpq lab run` of the same file (wall
//! times aside), and the merged report must exist.

mod common;
use common::*;

use std::path::Path;
use std::time::Duration;

use mpq_lab::metrics::Row;
use mpq_lab::results::read_rows;

fn rows(dir: &Path) -> Vec<Row> {
    let mut r = read_rows(&dir.join("results.jsonl"), false).unwrap();
    for x in &mut r {
        x.sim_wall_s = 0.0;
    }
    r.sort_by(|a, b| a.run_id.cmp(&b.run_id));
    r
}

/// The job's state as squeue shows it (`PENDING`, `RUNNING`, ...; empty once it left the
/// queue) and its reason.
fn squeue(job: &str) -> String {
    text(&run("squeue", &["-h", "-j", job, "-o", "%T %r"]).stdout).trim().to_owned()
}

#[test]
#[ignore = "needs a running Slurm: scripts/test-slurm.sh"]
fn smoke_experiment_on_slurm() {
    let mpq = env!("CARGO_BIN_EXE_mpq");
    // Under /tmp: the single node's jobs see it at the same path.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("slurm");
    let o = run(
        mpq,
        &[
            "lab",
            "submit",
            "experiments/seed002-low-bdp-smoke.yaml",
            "--slurm",
            "--shards",
            "2",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    eprintln!("{stdout}");
    let merge_job = stdout.split("merge job ").nth(1).and_then(|s| s.split(';').next()).unwrap().trim().to_owned();
    // Wait for the merge job to leave the queue (at most 5 minutes); a dependency that can
    // never be satisfied (a failed shard) fails at once.
    let report = out.join("merged/report.html");
    let mut waited = 0;
    loop {
        let state = squeue(&merge_job);
        if state.is_empty() {
            break;
        }
        if state.contains("DependencyNeverSatisfied") {
            let _ = run("scancel", &[&merge_job]);
            panic!("a shard failed: {state}; logs in {}", out.join("slurm").display());
        }
        waited += 1;
        if waited > 300 {
            let _ = run("scancel", &[&merge_job]);
            panic!("the merge job is still {state} after 5 minutes");
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    assert!(
        report.exists(),
        "no merged report; merge log:\n{}",
        std::fs::read_to_string(out.join("slurm/merge.out")).unwrap_or_default()
    );
    let local = dir.path().join("local");
    let o = run(
        mpq,
        &["lab", "run", "experiments/seed002-low-bdp-smoke.yaml", "--out", local.to_str().unwrap(), "--quiet"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (merged, local) = (rows(&out.join("merged")), rows(&local));
    assert_eq!(merged.len(), 16);
    assert_eq!(merged, local, "the shards run on Slurm give the rows of one local run");
    for k in 1..=2 {
        assert_eq!(rows(&out.join(format!("shard-{k}"))).len(), 8, "shard {k}");
    }
}
