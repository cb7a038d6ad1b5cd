//! Every shipped experiment file in its short form: `mpq lab run FILE --limit 1` (the first
//! scenario with all its runs) and `mpq lab report` of the results. A file added to
//! experiments/ without a test here fails `every_file_is_tested`.

mod common;
use common::*;

const FILES: &[&str] = &[
    // On two sshd hosts in namespaces with the peers built (root, openssh-server): its short
    // form is in interop/test_lab_implementations.py too.
    "implementations-ssh.yaml",
    // On the kernel testbed with the peers of implementations/ (root, built by
    // interop/setup.sh): its short form is in interop/test_lab_implementations.py.
    "implementations.yaml",
    // On the kernel testbed (root): their short forms are in lab_testbed.rs.
    "mpq-vs-mptcp-3paths.yaml",
    "mpq-vs-mptcp.yaml",
    // On the kernel testbed (root): their short forms are in lab_testbed.rs.
    "seed000-affinity.yaml",
    "seed000-paths.yaml",
    "seed001-quic-settings.yaml",
    "seed001-rates.yaml",
    "seed002-4.1-cc.yaml",
    "seed002-4.1-hystart.yaml",
    "seed002-4.1-schedulers.yaml",
    // On the kernel testbed (root): its short form is in lab_testbed.rs.
    "seed002-4.1-testbed.yaml",
    "seed002-4.1.yaml",
    "seed002-4.2.yaml",
    // On the kernel testbed (root): its short form is in lab_testbed.rs.
    "seed002-4.3-handover-testbed.yaml",
    "seed002-4.3-handover.yaml",
    "seed002-low-bdp-smoke.yaml",
    "seed003.yaml",
    "seed004.yaml",
    // On the kernel testbed (root): its short form is in lab_testbed.rs.
    "shared-bottleneck-testbed.yaml",
    // On two sshd hosts in namespaces (root, openssh-server): its short form is in lab_ssh.rs.
    "ssh-paths.yaml",
    // On the kernel testbed (root): its short form is in lab_testbed.rs.
    "testbed-smoke.yaml",
];

/// Runs the first scenario of `file` and reports it; returns the rows.
fn short_form(file: &str, runs: usize) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let path = format!("experiments/{file}");
    let o = mpq(&["lab", "run", &path, "--limit", "1", "--out", out, "--quiet"]);
    assert!(o.status.success(), "{file}: {}", text(&o.stderr));
    assert!(text(&o.stdout).contains(&format!("1 scenarios, {runs} runs: {runs} ran")), "{file}: {}", text(&o.stdout));
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(dir.path().join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), runs, "{file}");
    let o = mpq(&["lab", "report", out]);
    assert!(o.status.success(), "{file}: report: {}", text(&o.stderr));
    let page = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(page.matches("<svg").count() >= 2, "{file}: report without figures");
    rows
}

fn multipath(rows: &[serde_json::Value]) -> impl Iterator<Item = &serde_json::Value> {
    rows.iter().filter(|r| r["role"] == "multipath")
}

#[test]
fn every_file_is_tested() {
    let mut found: Vec<String> = std::fs::read_dir(repo().join("experiments"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    found.sort();
    assert_eq!(found, FILES, "experiments/ and this test's list differ");
}

#[test]
fn seed002_4_1() {
    let rows = short_form("seed002-4.1.yaml", 4);
    assert!(multipath(&rows).all(|r| r["eben"].is_f64() && r["size"] == 20_000_000));
}

#[test]
fn seed002_4_1_hystart() {
    // Each setting: two baselines and a multipath run from each initial path.
    let rows = short_form("seed002-4.1-hystart.yaml", 8);
    assert_eq!(values_of(&rows, "hystart"), ["off", "on"]);
    for r in &rows {
        let h = r["hystart"].as_str().unwrap();
        assert!(r["run_id"].as_str().unwrap().ends_with(&format!("-hystart-{h}")), "{r}");
        if r["role"] == "multipath" {
            assert!(r["eben"].is_f64(), "{r}");
            let bases = r["baseline_runs"].as_array().unwrap();
            assert!(bases.iter().all(|b| b.as_str().unwrap().ends_with(&format!("-hystart-{h}"))), "{r}");
        }
    }
}

/// The distinct values of `key` among the multipath rows, sorted.
fn values_of<'a>(rows: &'a [serde_json::Value], key: &str) -> Vec<&'a str> {
    let mut v: Vec<&str> = multipath(rows).map(|r| r[key].as_str().unwrap()).collect();
    v.sort_unstable();
    v.dedup();
    v
}

#[test]
fn seed002_4_1_cc() {
    // Two CUBIC baselines, three CCs from each initial path.
    let rows = short_form("seed002-4.1-cc.yaml", 8);
    assert_eq!(values_of(&rows, "cc"), ["cubic", "lia", "olia"]);
    assert!(rows.iter().filter(|r| r["role"] == "baseline").all(|r| r["cc"] == "cubic"));
    assert!(multipath(&rows).all(|r| r["eben"].is_f64() && r["scheduler"] == "minrtt"));
}

#[test]
fn seed002_4_1_schedulers() {
    // Two CUBIC baselines, six schedulers from each initial path.
    let rows = short_form("seed002-4.1-schedulers.yaml", 14);
    assert_eq!(values_of(&rows, "scheduler"), ["ecf", "minrtt", "redundant", "round-robin", "rtt-probe", "weighted"]);
    assert!(multipath(&rows).all(|r| r["eben"].is_f64() && r["cc"] == "olia"));
}

#[test]
fn seed002_4_2() {
    let rows = short_form("seed002-4.2.yaml", 4);
    assert!(rows.iter().all(|r| r["size"] == 256_000 && r["completed"] == true));
    assert!(multipath(&rows).all(|r| r["eben"].is_f64()));
}

#[test]
fn seed002_4_3_handover() {
    let rows = short_form("seed002-4.3-handover.yaml", 5);
    for r in multipath(&rows) {
        // Every request answered, the failure of path 0 at 3 s included.
        assert_eq!(r["requests_sent"], r["requests_answered"], "{r}");
        assert!(r["requests"].as_array().unwrap().len() >= 25, "{r}");
        assert!(r["delay_after_failure_max_ms"].is_f64(), "{r}");
    }
    let alone0 = rows.iter().find(|r| r["run_id"].as_str().unwrap().ends_with("/sp0-cubic-s750")).unwrap();
    assert_eq!(alone0["completed"], false, "path 0 alone cannot answer after it failed");
}

#[test]
fn seed002_low_bdp_smoke() {
    short_form("seed002-low-bdp-smoke.yaml", 4);
}

#[test]
fn seed003() {
    // Two baselines, then two ACK placements crossed with five ACK-range limits and the two
    // packet number space designs.
    let rows = short_form("seed003.yaml", 22);
    let mut policies: Vec<&str> = multipath(&rows).map(|r| r["ack_policy"].as_str().unwrap()).collect();
    policies.dedup();
    assert_eq!(policies, ["same-path", "all-paths"]);
    let limits: Vec<u64> = multipath(&rows).step_by(2).take(5).map(|r| r["ack_ranges"].as_u64().unwrap()).collect();
    assert_eq!(limits, [4, 8, 16, 32, 256]);
    let spaces: Vec<&str> = multipath(&rows).take(2).map(|r| r["pn_space"].as_str().unwrap()).collect();
    assert_eq!(spaces, ["per-path", "single"]);
    assert_eq!(multipath(&rows).filter(|r| r["pn_space"] == "single").count(), 10);
    assert!(rows.iter().all(|r| r["size"] == 50_000_000 && r["completed"] == true));
    // The ACK metrics the file lists are measured: the receiver acknowledged the download,
    // each ACK with at least one range and no more than the run's limit.
    for r in &rows {
        assert!(r["ack_frames"].as_u64().unwrap() > 0, "{r}");
        let per_ack = r["ranges_per_ack"].as_f64().unwrap();
        assert!(per_ack >= 1.0, "{r}");
        if let Some(limit) = r["ack_ranges"].as_u64() {
            assert!(per_ack <= limit as f64, "{per_ack} ranges per ACK over a limit of {limit}: {r}");
        }
    }
    let unlimited = |policy: &str, space: &str| {
        multipath(&rows)
            .find(|r| r["ack_policy"] == policy && r["ack_ranges"] == 256 && r["pn_space"] == space)
            .unwrap()
    };
    assert!(
        unlimited("all-paths", "per-path")["ack_frames"].as_u64()
            > unlimited("same-path", "per-path")["ack_frames"].as_u64(),
        "ACKs on every path send more frames"
    );
    // (On these equal paths one space need not report more ranges than a space per path; on
    // uneven ones it does: crates/mpq-sim/tests/multipath.rs.)
    assert!(multipath(&rows).all(|r| r["eben"].as_f64().is_some()), "every run compared with its baselines");
}

#[test]
fn seed004() {
    let rows = short_form("seed004.yaml", 12);
    let mut schedulers: Vec<&str> = multipath(&rows).map(|r| r["scheduler"].as_str().unwrap()).collect();
    schedulers.sort();
    schedulers.dedup();
    assert_eq!(schedulers, ["ecf", "minrtt"]);
    let sizes: std::collections::BTreeSet<u64> = rows.iter().map(|r| r["size"].as_u64().unwrap()).collect();
    assert_eq!(sizes.into_iter().collect::<Vec<_>>(), [512_000, 20_000_000]);
}
