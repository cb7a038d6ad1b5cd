//! The whole-system benchmark scripts of issue C2 in their short form (CI catches their
//! breakage; no timing assertions): `scripts/bench_perf.py --runtimes`, which compares the
//! runtimes on one transfer each, interleaved, and `scripts/profile_runtime.py`, which
//! profiles one transfer by category and projects the speed-up with cores. Both run this
//! build's `mpq` over loopback, and over veth pairs between namespaces where the test may
//! create them (root).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `python3 scripts/SCRIPT --mpq <this build's mpq> ARGS` from the repository's root.
fn script(name: &str, args: &[&str]) -> Output {
    Command::new("python3")
        .current_dir(root())
        .arg(Path::new("scripts").join(name))
        .args(["--mpq", env!("CARGO_BIN_EXE_mpq")])
        .args(args)
        .output()
        .expect("python3 runs")
}

#[path = "common/testbed.rs"]
mod testbed;
use testbed::one_at_a_time;

/// Whether network namespaces can be made here (root, iproute2; a failure instead under
/// `MPQ_REQUIRE_NETNS`, which the test command sets).
fn namespaces_available() -> bool {
    testbed::available()
}

/// Runs the runtime comparison over 2 paths with every kind given (and `more_kinds`) and
/// checks its JSON: one run per kind, bytes through both paths, CPU accounted, ratios
/// against the first.
fn runtime_comparison(more_kinds: &[&str], extra: &[&str]) {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let json = dir.path().join("bench.json");
    let mut kinds = vec!["single", "per-path", "per-path/1", "shard", "per-path/paths+pinned"];
    kinds.extend(more_kinds);
    let mut args = vec!["--paths", "", "--runtimes", "2", "--reps", "1", "--duration", "2"];
    let kinds_arg = kinds.join(",");
    args.extend(["--kinds", &kinds_arg, "--json", json.to_str().expect("a UTF-8 path")]);
    args.extend(extra);
    let out = script("bench_perf.py", &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench_perf.py failed: {stderr}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("the JSON report")).expect("JSON");
    let runs = &report["runs"]["runtimes"];
    for &kind in &kinds {
        let name = format!("2p {kind}");
        let run = &runs[&name][0];
        assert!(run["gbps"].as_f64().is_some_and(|g| g > 0.0), "{name}: {run}");
        assert!(run["cpu_s_per_gb"].as_f64().is_some_and(|c| c > 0.0), "{name}: {run}");
        // (With one thread for both paths, this failed one run in three before its paths
        // took turns.)
        assert_eq!(run["paths_used"], 2, "{name}: both paths carried data: {run}");
        if kind != "single" {
            // The path (or shard) threads did the endpoints' work.
            assert!(run["client_path_share"].as_f64().is_some_and(|s| s > 0.5), "{name}: {run}");
            assert!(run["server_path_share"].as_f64().is_some_and(|s| s > 0.5), "{name}: {run}");
        }
    }
    // One path thread drove both paths of each endpoint with --path-threads 1.
    let one = &runs["2p per-path/1"][0];
    assert_eq!(one["server_path_threads"].as_object().map(|t| t.len()), Some(1), "{one}");
    // And a thread each with --path-threads paths.
    let each = &runs["2p per-path/paths+pinned"][0];
    assert_eq!(each["server_path_threads"].as_object().map(|t| t.len()), Some(2), "{each}");
    let medians = &report["medians"]["runtimes"];
    assert_eq!(medians.as_object().map(|m| m.len()), Some(kinds.len()), "{medians}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("(ratios relative to 2p single)"), "no ratios: {stdout}");
}

#[test]
fn bench_perf_compares_every_runtime_kind_over_loopback() {
    // (With more options for both ends, as `--mpq-args` passes them, and a kind run by
    // another build, `@baseline`: this one again, as the test has no other.)
    let build = env!("CARGO_BIN_EXE_mpq");
    let extra = ["--mpq-args", "--rcvbuf 1048576 --cc cubic", "--mpq-baseline", build];
    runtime_comparison(&["per-path@baseline"], &extra);
}

#[test]
fn bench_perf_compares_every_runtime_kind_over_veth_pairs() {
    if !namespaces_available() {
        eprintln!("skipped: network namespaces need root and iproute2");
        return;
    }
    runtime_comparison(&[], &["--netns"]);
}

#[test]
fn bench_perf_refuses_an_unknown_runtime_kind() {
    let out = script("bench_perf.py", &["--paths", "", "--runtimes", "2", "--kinds", "single,per-core"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--kinds single,per-core"), "{stderr}");
    // A kind of the baseline build, without one.
    let out = script("bench_perf.py", &["--paths", "", "--runtimes", "2", "--kinds", "single,per-path@baseline"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("@baseline runs the --mpq-baseline build"), "{stderr}");
}

#[test]
fn profile_runtime_categorises_both_endpoints_and_projects_the_speed_up() {
    if !mpq_lab::profile::available() || !namespaces_available() {
        // (CI installs perf and runs as root: there this test runs.)
        eprintln!("skipped: perf and root are needed");
        return;
    }
    let _turn = one_at_a_time();
    let out = script("profile_runtime.py", &["--paths", "2", "--duration", "1", "--runtime", "per-path+pinned"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "profile_runtime.py failed: {stderr}\n{stdout}");
    assert!(stdout.starts_with("# per-path+pinned runtime, 2 paths over loopback"), "{stdout}");
    // Both endpoints' profiles in our categories and seed 000's, with a share each.
    for row in ["| crypto (AEAD, header protection) |", "| packet I/O |", "| connection management |"] {
        let line = stdout.lines().find(|l| l.starts_with(row)).unwrap_or_else(|| panic!("no {row:?} row: {stdout}"));
        assert_eq!(line.matches(" % |").count(), 2, "{line}");
    }
    // The serial fraction of each endpoint from the runtime's own accounts, and the
    // projection: both endpoints' path threads accounted for.
    for endpoint in ["| client (receiver) |", "| server (sender, path threads) |"] {
        let line =
            stdout.lines().find(|l| l.starts_with(endpoint)).unwrap_or_else(|| panic!("no {endpoint:?}: {stdout}"));
        let cpu: f64 = line.split('|').nth(2).and_then(|c| c.trim().parse().ok()).expect("CPU seconds");
        assert!(cpu > 0.0, "{line}");
        assert!(line.ends_with("x |"), "no projection: {line}");
    }
}
