//! Byte-exact downloads over 1 to 8 loopback paths in each runtime (`--threads single` and
//! `--threads per-path`, issue C2), with the two runtimes on either side of a connection:
//! `mpq server` serves a file, `mpq client` fetches it over one path per `--local` address,
//! and the test compares every byte and checks that the paths were used.

#[path = "common/process.rs"]
mod process;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use process::{mpq, spawn_listening, wait_bounded};

/// A scratch directory of this test process.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mpq-runtime-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// A server in runtime `threads` serving `root`; returns it and its address.
fn server(root: &std::path::Path, threads: &str) -> (std::process::Child, String) {
    let root = root.to_str().expect("utf-8");
    spawn_listening(&["server", "--listen", "127.0.0.1:0", "--root", root, "--threads", threads])
}

/// A file whose every byte depends on its offset (a misplaced chunk cannot go unseen).
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i as u64).wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

/// Downloads a 16 MB file with the client in runtime `client_rt` over `paths` paths (one per
/// local address 127.0.0.1, 127.0.0.2, ...) from a server in runtime `server_rt`; checks the
/// bytes, that every path was opened, and that with several paths more than
/// one carried data (with a thread per path on two cores busy with other tests the shares
/// are uneven and the first paths may take it all before the last ones open: no share is
/// asked for).
fn download(name: &str, server_rt: &str, client_rt: &str, paths: usize) {
    let root = scratch(&format!("{name}-root"));
    let body = pattern(16_000_000);
    std::fs::write(root.join("big.bin"), &body).expect("write");
    let (mut srv, addr) = server(&root, server_rt);
    let out = scratch(&format!("{name}-out"));
    let url = format!("https://{addr}/big.bin");
    let mut args: Vec<String> = ["client", &url, "--insecure", "--json", "--threads", client_rt, "--output"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(out.to_str().expect("utf-8").to_string());
    args.extend(["--scheduler".to_string(), "round-robin".to_string()]);
    for k in 1..=paths {
        args.extend(["--local".to_string(), format!("127.0.0.{k}:0")]);
    }
    let child = mpq()
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn client");
    let (got, _) = wait_bounded(child, Duration::from_secs(60), &format!("{name}: mpq {}", args.join(" ")));
    let _ = srv.kill();
    let srv_out = srv.wait_with_output().expect("server output");
    let (stdout, stderr) = (String::from_utf8_lossy(&got.stdout), String::from_utf8_lossy(&got.stderr));
    let srv_err = String::from_utf8_lossy(&srv_out.stderr);
    assert!(!stderr.contains("panicked") && !srv_err.contains("panicked"), "{name}: {stderr}\n{srv_err}");
    assert!(got.status.success(), "{name}: client failed: {stderr}\nserver: {srv_err}");
    let fetched = std::fs::read(out.join("big.bin")).expect("downloaded file");
    assert!(fetched == body, "{name}: {} bytes fetched, {} served, contents differ", fetched.len(), body.len());
    let summary: serde_json::Value = stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("{name}: no JSON summary in {stdout}"));
    let all = summary["paths"].as_array().expect("paths");
    assert_eq!(all.len(), paths, "{name}: every path opened: {summary}");
    // (A path whose challenge was lost, e.g. to a full socket buffer on a busy machine,
    // validates only after its retry, which may come after the end of a short download.)
    let active = all.iter().filter(|p| p["state"] == "active").count();
    assert!(active >= paths.min(2), "{name}: {active} paths validated: {summary}");
    let used = all.iter().filter(|p| p["rx_bytes"].as_u64().unwrap_or(0) > 20_000).count();
    assert!(used >= paths.min(2), "{name}: {used} paths carried data: {summary}");
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn per_path_runtime_on_both_sides_over_1_2_4_and_8_paths() {
    for paths in [1, 2, 4, 8] {
        download(&format!("per-path-{paths}"), "per-path", "per-path", paths);
    }
}

#[test]
fn single_runtime_on_both_sides_over_1_2_4_and_8_paths() {
    for paths in [1, 2, 4, 8] {
        download(&format!("single-{paths}"), "single", "single", paths);
    }
}

/// The runtime is a local choice: either side may run either one.
#[test]
fn runtimes_mixed_across_a_connection_over_2_paths() {
    download("mixed-client-threads", "single", "per-path", 2);
    download("mixed-server-threads", "per-path", "single", 2);
}
