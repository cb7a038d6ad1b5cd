//! `mpq perf --transport tcp-tls|mptcp-tls` over loopback: a transfer of an exact byte
//! count on several connections, a timed run, MPTCP negotiated on loopback, QUIC-only
//! options refused, and the error when a namespace has MPTCP disabled. Each run is bounded
//! (a process that hangs is killed and the test fails).

#[allow(dead_code)] // this file uses part of it
#[path = "common/process.rs"]
mod process;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use process::run_bounded;

/// A perf server (killed on drop) with its address and its stderr lines.
struct Server {
    child: Child,
    addr: String,
    lines: mpsc::Receiver<String>,
}

impl Server {
    /// `mpq perf server --transport T --listen 127.0.0.1:0`, once it says where it listens.
    fn start(transport: &str) -> Server {
        let (mut child, addr) =
            process::spawn_listening(&["perf", "server", "--transport", transport, "--listen", "127.0.0.1:0"]);
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Server { child, addr, lines }
    }

    /// The next `n` "connection ended" accounts, as JSON (each within 10 s).
    fn ended(&self, n: usize) -> Vec<serde_json::Value> {
        let mut v = Vec::new();
        while v.len() < n {
            let l = self.lines.recv_timeout(Duration::from_secs(10)).expect("a `connection ended` line within 10 s");
            if let Some(j) = l.strip_prefix("connection ended: ") {
                v.push(serde_json::from_str(j).unwrap_or_else(|e| panic!("{l}: {e}")));
            }
        }
        v
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `mpq perf client ARGS --json` to its end (30 s at most) and parses its report.
fn client_json(args: &[&str]) -> serde_json::Value {
    let mut a = vec!["perf", "client"];
    a.extend_from_slice(args);
    a.push("--json");
    let out = run_bounded(&a, Duration::from_secs(30), "perf client");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "mpq {}: {stderr}", a.join(" "));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{stdout:?}: {e}"))
}

#[test]
fn tcp_tls_transfers_exactly_the_bytes_asked_on_every_connection() {
    let server = Server::start("tcp-tls");
    let r = client_json(&["--transport", "tcp-tls", "--connect", &server.addr, "--bytes", "3000000", "--streams", "2"]);
    assert_eq!(r["transport"], "tcp-tls");
    assert_eq!(r["bytes"], 3_000_000, "{r}");
    assert_eq!(r["streams"], 2);
    let conns = r["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 2, "{r}");
    assert!(conns.iter().all(|c| c["bytes"] == 1_500_000 && c["mptcp"] == false), "{r}");
    // The QUIC perf's fields, with sensible values.
    for k in ["goodput_bps", "duration_s", "cpu_s", "cpu_util"] {
        assert!(r[k].as_f64().is_some_and(|v| v > 0.0), "{k} in {r}");
    }
    let expect = 3_000_000.0 * 8.0 / r["duration_s"].as_f64().unwrap();
    assert!((r["goodput_bps"].as_f64().unwrap() / expect - 1.0).abs() < 1e-6, "{r}");
    assert_eq!(r["multipath"], false);
    assert!(r["mptcp_subflows_joined"].is_null(), "{r}");
    // The server sent each its bytes and ended both cleanly.
    for e in server.ended(2) {
        assert_eq!(
            (e["bytes"].as_u64(), e["error"].is_null(), e["transport"].as_str()),
            (Some(1_500_000), true, Some("tcp-tls")),
            "{e}"
        );
    }
}

#[test]
fn tcp_tls_timed_run_prints_progress_and_a_summary() {
    let server = Server::start("tcp-tls");
    let out = run_bounded(
        &["perf", "client", "--transport", "tcp-tls", "--connect", &server.addr, "--duration", "1.2"],
        Duration::from_secs(20),
        "perf client",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A progress line after 1 s, then "N bytes in 1.2x s: R Mbit/s, client CPU C %".
    assert!(text.lines().any(|l| l.trim_start().starts_with("1.") && l.ends_with("Mbit/s")), "{text}");
    let last = text.lines().last().unwrap();
    assert!(last.contains(" bytes in 1.2") && last.contains("Mbit/s, client CPU"), "{text}");
    // The server saw the client close and counts it as a normal end.
    let e = &server.ended(1)[0];
    assert!(e["error"].is_null() && e["bytes"].as_u64().unwrap() > 0, "{e}");
}

/// Whether this kernel lets this namespace open MPTCP sockets.
fn mptcp_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/net/mptcp/enabled").is_ok_and(|s| s.trim() == "1")
}

#[test]
fn mptcp_tls_is_negotiated_over_loopback() {
    if !mptcp_enabled() {
        eprintln!("skipped: this kernel (or namespace) has no MPTCP enabled");
        return;
    }
    let server = Server::start("mptcp-tls");
    let r = client_json(&["--transport", "mptcp-tls", "--connect", &server.addr, "--bytes", "2000000"]);
    assert_eq!((r["transport"].as_str(), r["bytes"].as_u64()), (Some("mptcp-tls"), Some(2_000_000)), "{r}");
    assert_eq!(r["mptcp"], true, "MPTCP fell back to TCP: {r}");
    assert_eq!(r["connections"][0]["extra_subflows"], 0, "one address, no subflow: {r}");
    // Counted from the namespace's counters (other MPTCP users of the host may add joins,
    // so only its presence is certain).
    assert!(r["mptcp_subflows_joined"].is_u64(), "{r}");
    assert!(r["mptcp_counters"]["MPCapableSYNACKRX"].as_u64() >= Some(1), "{r}");
    assert_eq!(server.ended(1)[0]["mptcp"], true);
    // A plain TCP client of an MPTCP server falls back and still works.
    let r = client_json(&["--transport", "tcp-tls", "--connect", &server.addr, "--bytes", "100000"]);
    assert_eq!((r["bytes"].as_u64(), r["mptcp"].as_bool()), (Some(100_000), Some(false)), "{r}");
}

#[test]
fn quic_only_options_are_refused_over_tcp() {
    for (extra, flag) in [
        (&["--datagrams"][..], "--datagrams"),
        (&["--server-addr", "127.0.0.1:9"][..], "--server-addr"),
        (&["--shard", "2"][..], "--shard"),
        (&["--idle-connections", "3"][..], "--idle-connections"),
        (&["--no-gso"][..], "--no-gso"),
        (&["--no-gro"][..], "--no-gro"),
        (&["--window", "12500"][..], "--window"),
    ] {
        let mut a = vec!["perf", "client", "--transport", "tcp-tls", "--connect", "127.0.0.1:9"];
        a.extend_from_slice(extra);
        let out = run_bounded(&a, Duration::from_secs(10), "perf client");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(&format!("{flag} applies to QUIC only")), "{a:?}: {err}");
    }
    let out = run_bounded(
        &["perf", "client", "--transport", "udp", "--connect", "127.0.0.1:9"],
        Duration::from_secs(10),
        "perf client",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("quic") && err.contains("mptcp-tls"), "{err}");
}

#[test]
fn a_namespace_without_mptcp_gets_an_error_naming_the_sysctl() {
    if !mptcp_enabled() || mpq_lab::testbed::sys::effective_uid() != 0 {
        eprintln!("skipped: needs root and a kernel with MPTCP");
        return;
    }
    let ns = format!("mpqtest-{}-nomptcp", std::process::id());
    let ip = |args: &[&str]| Command::new("ip").args(args).stdout(Stdio::null()).status().is_ok_and(|s| s.success());
    assert!(ip(&["netns", "add", &ns]), "ip netns add {ns}");
    // Deleted however the test ends.
    struct Del(String);
    impl Drop for Del {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    let _del = Del(ns.clone());
    assert!(ip(&["netns", "exec", &ns, "sysctl", "-qw", "net.mptcp.enabled=0"]));
    let child = Command::new("ip")
        .args(["netns", "exec", &ns, env!("CARGO_BIN_EXE_mpq")])
        .args(["perf", "client", "--transport", "mptcp-tls", "--connect", "127.0.0.1:9"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, _) = process::wait_bounded(child, Duration::from_secs(10), "perf client");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("refused an MPTCP socket") && err.contains("sysctl net.mptcp.enabled=1"), "{err}");
}
