//! `mpq bench receive` and `mpq bench send` in their short form (issue C2 asks CI to catch
//! breakage of the benchmarks, with no timing assertions): a real two-path transfer whose
//! receive (or send) work runs on one and on two path threads, every byte checked, the JSON
//! report complete (with the machine's copy and AEAD references).

use std::process::{Command, Output};

/// Runs `mpq` with `args`.
fn mpq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mpq")).args(args).output().expect("run mpq")
}

/// Runs `mpq` with `args`, which it must refuse with a message containing `says`.
fn refused(args: &[&str], says: &str) {
    let out = mpq(args);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(says), "{stderr}");
}

/// Runs `mpq bench WORK` over 2 paths on 1 and 2 threads and checks its report.
fn short_bench(work: &str) {
    let out = mpq(&[
        "bench",
        work,
        "--paths",
        "2",
        "--threads",
        "1,2",
        "--megabytes",
        "3",
        "--reps",
        "1",
        "--verify",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mpq bench {work} failed: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["paths"], 2);
    // Pinned by default, to every CPU the process may use.
    assert!(report["cpus"].as_array().is_some_and(|c| !c.is_empty()), "{report}");
    assert_eq!(report["work"], work);
    let results = report["results"].as_array().expect("results");
    let threads: Vec<u64> = results.iter().map(|r| r["threads"].as_u64().expect("threads")).collect();
    assert_eq!(threads, [1, 2]);
    for r in results {
        assert!(r["gbit_per_s"].as_f64().is_some_and(|g| g > 0.0), "{r}");
        assert!(r["packets_per_s"].as_f64().is_some_and(|p| p > 0.0), "{r}");
        assert_eq!(r["runs_gbit_per_s"].as_array().map(Vec::len), Some(1), "{r}");
        // The machine's copy reference ran beside each thread count.
        assert!(r["copy_gbit_per_s"].as_f64().is_some_and(|g| g > 0.0), "{r}");
        // And the compute reference: sealing with the connection's own suite.
        assert!(r["aead_gbit_per_s"].as_f64().is_some_and(|g| g > 0.0), "{r}");
        assert_eq!(r["aead_runs_gbit_per_s"].as_array().map(Vec::len), Some(1), "{r}");
        assert_eq!(r["copy_runs_gbit_per_s"].as_array().map(Vec::len), Some(1), "{r}");
    }
    let suite = report["cipher_suite"].as_str().expect("the negotiated suite");
    assert!(suite.starts_with("TLS13_"), "{suite}");
    assert_eq!(results[0]["aead_speedup"].as_f64(), Some(1.0), "relative to the first count");
    assert_eq!(results[0]["paired_speedup_over_aead"].as_f64(), Some(1.0), "each run over itself");
    assert!(results[1]["aead_speedup"].as_f64().is_some_and(|s| s > 0.0), "{}", results[1]);
    assert!(results[1]["paired_speedup_over_aead"].as_f64().is_some_and(|s| s > 0.0), "{}", results[1]);
    assert_eq!(results[0]["copy_speedup"].as_f64(), Some(1.0), "relative to the first count");
    assert_eq!(results[0]["paired_speedup"].as_f64(), Some(1.0), "each run over itself");
    assert!(results[1]["paired_speedup"].as_f64().is_some_and(|s| s > 0.0), "{}", results[1]);
    assert!(results[1]["copy_speedup"].as_f64().is_some_and(|s| s > 0.0), "{}", results[1]);
    // The path threads opened datagrams (or built batches) outside the connection's lock.
    assert!(results[1]["outside_lock_share"].as_f64().is_some_and(|s| s > 0.0), "{}", results[1]);
    // One thread waits for no other, and its speedup without the rounds' waits is its own.
    assert_eq!(results[0]["waiting_share"].as_f64(), Some(0.0), "{}", results[0]);
    assert_eq!(results[0]["paired_speedup_without_round_waits"].as_f64(), Some(1.0), "{}", results[0]);
    let no_wait = results[1]["paired_speedup_without_round_waits"].as_f64().expect("a no-wait speedup");
    let paired = results[1]["paired_speedup"].as_f64().expect("a paired speedup");
    if work == "receive" {
        // Taking the waits out can only shorten a run.
        assert!(no_wait >= paired * (1.0 - 1e-9), "{}", results[1]);
        assert!(results[1]["waiting_share"].as_f64().is_some_and(|s| s >= 0.0), "{}", results[1]);
    } else {
        assert_eq!(no_wait, paired, "send has no rounds to wait in: {}", results[1]);
    }
}

#[test]
fn bench_receive_runs_on_one_and_two_path_threads_and_delivers_every_byte() {
    short_bench("receive");
}

#[test]
fn bench_send_runs_on_one_and_two_path_threads_and_delivers_every_byte() {
    short_bench("send");
}

#[test]
fn bench_receive_rejects_more_threads_than_paths() {
    refused(
        &["bench", "receive", "--paths", "2", "--threads", "1,3"],
        "--threads takes counts between 1 and --paths (2)",
    );
}

#[test]
fn bench_receive_runs_unpinned_with_no_pin() {
    let out = mpq(&[
        "bench",
        "receive",
        "--paths",
        "2",
        "--threads",
        "2",
        "--megabytes",
        "1",
        "--reps",
        "1",
        "--verify",
        "--json",
        "--no-pin",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["cpus"], serde_json::json!([]));
    assert!(report["results"][0]["gbit_per_s"].as_f64().is_some_and(|g| g > 0.0), "{report}");
}

/// Smaller rounds (`--round-batches`) still carry every byte, and the report says the size.
#[test]
fn bench_receive_takes_the_round_size() {
    let out = mpq(&[
        "bench",
        "receive",
        "--threads",
        "1,2",
        "--megabytes",
        "2",
        "--reps",
        "1",
        "--round-batches",
        "2",
        "--verify",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["round_batches"], 2);
    assert!(report["results"][1]["gbit_per_s"].as_f64().is_some_and(|g| g > 0.0), "{report}");
    refused(&["bench", "receive", "--round-batches", "0"], "--round-batches must be at least 1");
}

#[test]
fn bench_rejects_a_cpu_the_process_may_not_use() {
    refused(&["bench", "send", "--cpus", "0,4000", "--megabytes", "1"], "this process may not run on CPU 4000");
}
