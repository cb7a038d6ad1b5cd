//! `mpq lab submit --slurm` against a stand-in `sbatch` (a shell script that records its
//! arguments and answers job IDs): the array script is submitted first, the merge job with
//! `--dependency=afterok:` on the array's ID; `--dry-run` prints both scripts and submits
//! nothing; an sbatch that fails is reported. The real Slurm test is `lab_slurm.rs`.

mod common;
use common::*;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A stand-in sbatch in `dir`: appends `ARGS` and a line per call to `dir/calls`, prints job
/// IDs 41, 42, ... (`--parsable` form), or fails with `fail` set.
fn fake_sbatch(dir: &Path, fail: bool) -> PathBuf {
    let p = dir.join("sbatch");
    let body = if fail {
        "echo 'sbatch: error: invalid partition specified: nope' >&2; exit 1".to_string()
    } else {
        format!(
            "echo \"$@\" >> {calls}\nn=$(wc -l < {calls})\necho \"$((40 + n));mpqlab\"",
            calls = dir.join("calls").display()
        )
    };
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn submits_the_array_then_the_dependent_merge() {
    let dir = tempfile::tempdir().unwrap();
    let sbatch = fake_sbatch(dir.path(), false);
    let out = dir.path().join("results");
    let o = mpq(&[
        "lab",
        "submit",
        "experiments/seed002-low-bdp-smoke.yaml",
        "--slurm",
        "--shards",
        "3",
        "--partition",
        "lab",
        "--out",
        out.to_str().unwrap(),
        "--sbatch",
        sbatch.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("submitted job array 41 (3 shards of 4 scenarios) and merge job 42"),
        "{}",
        text(&o.stdout)
    );
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    let array = out.join("slurm/array.sbatch");
    let merge = out.join("slurm/merge.sbatch");
    assert_eq!(
        calls,
        [format!("--parsable {}", array.display()), format!("--parsable --dependency=afterok:41 {}", merge.display())]
    );
    let a = std::fs::read_to_string(&array).unwrap();
    assert!(a.contains("#SBATCH --array=0-2\n") && a.contains("#SBATCH --partition=lab\n"), "{a}");
    assert!(a.contains("lab run") && a.contains("--shard \"$K/3\""), "{a}");
    let m = std::fs::read_to_string(&merge).unwrap();
    for k in 1..=3 {
        assert!(m.contains(&format!("shard-{k}'")), "{m}");
    }
}

#[test]
fn dry_run_prints_and_submits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sbatch = fake_sbatch(dir.path(), false);
    let out = dir.path().join("results");
    let o = mpq(&[
        "lab",
        "submit",
        "experiments/seed002-low-bdp-smoke.yaml",
        "--slurm",
        "--shards",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--sbatch",
        sbatch.to_str().unwrap(),
        "--dry-run",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = text(&o.stdout);
    assert!(s.contains("#SBATCH --array=0-1") && s.contains("lab merge") && s.contains("afterok"), "{s}");
    assert!(!dir.path().join("calls").exists(), "sbatch was called");
    assert!(!out.exists(), "a dry run writes nothing");
}

#[test]
fn errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let failing = fake_sbatch(dir.path(), true);
    let out = dir.path().join("r");
    let args = ["lab", "submit", "experiments/seed002-low-bdp-smoke.yaml", "--slurm", "--out", out.to_str().unwrap()];
    let o = mpq(&[&args[..], &["--sbatch", failing.to_str().unwrap()]].concat());
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("invalid partition specified"), "{}", text(&o.stderr));
    let o = mpq(&[&args[..], &["--sbatch", "/nonexistent/sbatch"]].concat());
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("is Slurm installed?"), "{}", text(&o.stderr));
    let o = mpq(&[&args[..], &["--shards", "0"]].concat());
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--shards must be at least 1"), "{}", text(&o.stderr));
    let o = mpq(&["lab", "submit", "experiments/seed002-low-bdp-smoke.yaml", "--dry-run"]);
    assert!(!o.status.success(), "--slurm is required");
}
