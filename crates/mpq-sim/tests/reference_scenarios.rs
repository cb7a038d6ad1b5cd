//! Reference scenarios: a fixed set of simulator runs whose results are committed
//! (`tests/reference/scenarios.json`), so that a refactoring of the protocol core (issue C1,
//! the split of the connection into shared and per-path state) can show that it moved the
//! results by no more than noise.
//!
//! Each scenario runs over several seeds. The test compares the median of each metric with
//! the committed median, within a tolerance set from the spread between seeds (the noise of
//! the scenario itself) and a floor. It also reports whether every run was bit-identical
//! (`trace_hash`: every delivery and drop on every link): a pure refactoring keeps them
//! identical, a change of behaviour shows as "changed" even when the metrics stay put.
//!
//! After an intended change of behaviour, rewrite the references and commit them with it:
//! `MPQ_BLESS_REFERENCE=1 cargo test -p mpq-sim --test reference_scenarios`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use mpq_proto::cc::CcAlgorithm;
use mpq_proto::conn::AckPolicy;
use mpq_proto::sched::SchedulerKind;
use mpq_sim::scenario::{Scenario, ScenarioResult};
use mpq_sim::LinkConfig;
use serde::{Deserialize, Serialize};

const MB: u64 = 1_000_000;
/// Seeds of every scenario (not the seeds of the tests in `multipath.rs`).
const SEEDS: [u64; 3] = [101, 102, 103];

fn link(s: &str) -> LinkConfig {
    s.parse().expect("link spec")
}

/// The scenarios: two homogeneous paths, the heterogeneous pair (bandwidth balance 0.9, RTT
/// balance 0.1, "The Packet Number Space Debate in Multipath QUIC" §3.2), the same pair with
/// random loss and with coupled congestion control, redundant scheduling, and the handover of
/// "Multipath QUIC: Design and Evaluation" (CoNEXT 2017, §4.3: the first of two paths dies at
/// 3 s under request/response traffic).
fn scenarios() -> Vec<(&'static str, Scenario)> {
    vec![
        (
            "two-homogeneous",
            Scenario::download(vec![link("50mbit/20ms/queue=30ms"), link("50mbit/20ms/queue=30ms")], 20 * MB),
        ),
        (
            "heterogeneous",
            Scenario::download(vec![link("90mbit/20ms/queue=30ms"), link("10mbit/180ms/queue=270ms")], 20 * MB),
        ),
        (
            "heterogeneous-lossy",
            Scenario::download(
                vec![link("90mbit/20ms/loss=0.5%/queue=30ms"), link("10mbit/180ms/loss=1%/queue=270ms")],
                10 * MB,
            ),
        ),
        (
            // Coupled congestion control (reads the other paths' windows) and PATH_ACKs on
            // the lowest-RTT path (ACKs carried for another path).
            "heterogeneous-olia-rtt-acks",
            Scenario {
                cc: CcAlgorithm::Olia,
                ack_policy: AckPolicy::LowestRtt,
                ..Scenario::download(vec![link("90mbit/20ms/queue=30ms"), link("10mbit/180ms/queue=270ms")], 10 * MB)
            },
        ),
        (
            // Every chunk duplicated on the other path.
            "homogeneous-redundant",
            Scenario {
                scheduler: SchedulerKind::Redundant,
                ..Scenario::download(vec![link("20mbit/20ms/queue=30ms"), link("20mbit/30ms/queue=45ms")], 5 * MB)
            },
        ),
        (
            "handover",
            Scenario {
                fail: vec![(0, Duration::from_secs(3))],
                ..Scenario::reqresp(
                    vec![link("20mbit/15ms/queue=25ms"), link("20mbit/25ms/queue=40ms")],
                    750,
                    Duration::from_millis(400),
                    25,
                )
            },
        ),
    ]
}

/// What is kept of one run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct RunRecord {
    seed: u64,
    /// Download: goodput in Mbit/s. Request/response: requests answered.
    primary: f64,
    /// Download: completion time in seconds. Request/response: the largest delay of the
    /// requests answered after the failure, in milliseconds.
    secondary: f64,
    trace_hash: u64,
}

fn record(seed: u64, s: &Scenario, r: &ScenarioResult) -> RunRecord {
    assert!(r.data_ok, "corrupt data: {r:#?}");
    assert!(r.completed, "did not complete: {r:#?}");
    let (primary, secondary) = if s.fail.is_empty() {
        (r.goodput_bps / 1e6, r.completion_s.unwrap_or(f64::NAN))
    } else {
        (r.requests_answered as f64, r.max_delay_after_failure_ms.unwrap_or(f64::NAN))
    };
    RunRecord { seed, primary, secondary, trace_hash: r.trace_hash }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Tolerance for a metric: twice the spread between seeds relative to the median (the noise
/// of the scenario), at least `floor` (relative) and at most 50 %.
fn tolerance(v: &[f64], floor: f64) -> f64 {
    let m = median(v.to_vec());
    let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let spread = if m.abs() > 0.0 { (hi - lo) / m.abs() } else { 0.0 };
    (2.0 * spread).clamp(floor, 0.5)
}

fn reference_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/scenarios.json")
}

#[test]
fn reference_scenarios_move_by_no_more_than_noise() {
    let mut now: BTreeMap<String, Vec<RunRecord>> = BTreeMap::new();
    for (name, base) in scenarios() {
        let runs = SEEDS
            .iter()
            .map(|&seed| {
                let s = Scenario { seed, ..base.clone() };
                let r = s.run().unwrap_or_else(|e| panic!("{name} seed {seed}: {e}"));
                record(seed, &s, &r)
            })
            .collect();
        now.insert(name.to_string(), runs);
    }
    let path = reference_file();
    if std::env::var_os("MPQ_BLESS_REFERENCE").is_some() {
        std::fs::create_dir_all(path.parent().expect("dir")).expect("create reference dir");
        let json = serde_json::to_string_pretty(&now).expect("serialize");
        std::fs::write(&path, json + "\n").expect("write references");
        eprintln!("wrote {}", path.display());
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; create it with MPQ_BLESS_REFERENCE=1 cargo test -p mpq-sim --test reference_scenarios",
            path.display()
        )
    });
    let reference: BTreeMap<String, Vec<RunRecord>> = serde_json::from_str(&text).expect("reference JSON");
    let mut failures = Vec::new();
    for (name, runs) in &now {
        let Some(refs) = reference.get(name) else {
            failures.push(format!("{name}: no reference (bless to add it)"));
            continue;
        };
        // (Floats are compared through the tolerance: a JSON round trip may change the last bit.)
        let identical = refs.iter().map(|r| (r.seed, r.trace_hash)).eq(runs.iter().map(|r| (r.seed, r.trace_hash)));
        for (label, pick, floor) in [
            ("primary", (|r: &RunRecord| r.primary) as fn(&RunRecord) -> f64, 0.03),
            ("secondary", |r: &RunRecord| r.secondary, 0.05),
        ] {
            let old: Vec<f64> = refs.iter().map(pick).collect();
            let new: Vec<f64> = runs.iter().map(pick).collect();
            let (mo, mn) = (median(old.clone()), median(new));
            let tol = tolerance(&old, floor);
            let moved = if mo.abs() > 0.0 { (mn - mo).abs() / mo.abs() } else { (mn - mo).abs() };
            eprintln!(
                "{name:28} {label:9} reference {mo:10.3} now {mn:10.3} moved {:5.1} % (tolerance {:4.1} %){}",
                moved * 100.0,
                tol * 100.0,
                if identical { ", bit-identical" } else { ", changed" }
            );
            if moved > tol {
                failures.push(format!(
                    "{name} {label}: {mo:.3} -> {mn:.3} ({:.1} % > {:.1} %)",
                    moved * 100.0,
                    tol * 100.0
                ));
            }
        }
    }
    assert!(failures.is_empty(), "results moved beyond noise:\n{}", failures.join("\n"));
}
