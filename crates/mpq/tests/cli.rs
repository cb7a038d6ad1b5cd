//! The `mpq` binary as a newcomer meets it: a server that is not there, typos in arguments,
//! and what `-v` says. Each test runs the built binary and bounds how long it may take
//! (a process that hangs is killed and the test fails).

#[path = "common/process.rs"]
mod process;
#[path = "common/scratch.rs"]
mod scratch;

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use process::{listening, mpq, run_bounded, spawn_listening, wait_bounded};
use scratch::Scratch;

/// Runs `mpq` with `args` (no stdin), bounded by `limit`; returns (exit success, stderr, time).
fn run(args: &[&str], limit: Duration) -> (bool, String, Duration) {
    let child = mpq()
        .args(args)
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mpq");
    let (out, took) = wait_bounded(child, limit, &format!("mpq {}", args.join(" ")));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "mpq {} panicked: {stderr}", args.join(" "));
    (out.status.success(), stderr, took)
}

/// A UDP port that is bound (so nothing else takes it) and never answers.
fn silent_port() -> (UdpSocket, SocketAddr) {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let a = s.local_addr().expect("addr");
    (s, a)
}

/// A scratch directory of this test, removed when dropped.
fn scratch(name: &str) -> Scratch {
    scratch::scratch("cli-test", name)
}

/// Used to hang: after the idle timeout the event loop waited with no timer at all.
#[test]
fn client_to_a_silent_server_gives_up_after_the_handshake_timeout() {
    let (_s, addr) = silent_port();
    let out = scratch("silent");
    let url = format!("https://{addr}/x");
    let (ok, stderr, took) = run(
        &["client", &url, "--insecure", "--handshake-timeout", "1", "--output", out.to_str().expect("utf-8")],
        Duration::from_secs(20),
    );
    assert!(!ok, "exit status 0: {stderr}");
    assert!(stderr.contains(&format!("no answer from {addr} within 1 s")), "{stderr}");
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

#[test]
fn perf_client_to_a_silent_server_gives_up_after_the_handshake_timeout() {
    let (_s, addr) = silent_port();
    let a = addr.to_string();
    let (ok, stderr, took) =
        run(&["perf", "client", "--connect", &a, "--handshake-timeout", "1"], Duration::from_secs(20));
    assert!(!ok, "exit status 0: {stderr}");
    assert!(stderr.contains(&format!("no answer from {addr} within 1 s")), "{stderr}");
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

/// `--timeout` bounds the whole run even with no handshake timeout (it used to be checked
/// only when something else woke the loop).
#[test]
fn client_timeout_is_honoured() {
    let (_s, addr) = silent_port();
    let out = scratch("timeout");
    let url = format!("https://{addr}/x");
    let args = ["client", &url, "--insecure", "--handshake-timeout", "0", "--timeout", "1"];
    let mut args = args.to_vec();
    args.extend(["--output", out.to_str().expect("utf-8")]);
    let (ok, stderr, took) = run(&args, Duration::from_secs(20));
    assert!(!ok);
    assert!(stderr.contains("timed out after 1 s (--timeout)"), "{stderr}");
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

/// A server that answers the client's Initial with a Version Negotiation packet offering
/// only a version we do not speak: RFC 9000 §6.2, the client abandons the attempt at once.
#[test]
fn version_negotiation_without_v1_ends_the_client_with_a_clear_error() {
    let server = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let addr = server.local_addr().expect("addr");
    server.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let responder = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let (n, from) = server.recv_from(&mut buf).expect("the client's Initial");
        let p = &buf[..n];
        assert!(p[0] & 0x80 != 0, "not a long header");
        let dl = usize::from(p[5]);
        let dcid = &p[6..6 + dl];
        let sl = usize::from(p[6 + dl]);
        let scid = &p[7 + dl..7 + dl + sl];
        // RFC 8999 §6: the CIDs swapped, version 0, then the supported versions.
        let mut vn = vec![0xc0, 0, 0, 0, 0, scid.len() as u8];
        vn.extend_from_slice(scid);
        vn.push(dcid.len() as u8);
        vn.extend_from_slice(dcid);
        vn.extend_from_slice(&0x1a2a_3a4au32.to_be_bytes());
        server.send_to(&vn, from).expect("send VN");
    });
    let out = scratch("vn");
    let url = format!("https://{addr}/x");
    let (ok, stderr, took) = run(
        &["client", &url, "--insecure", "--handshake-timeout", "30", "--output", out.to_str().expect("utf-8")],
        Duration::from_secs(20),
    );
    responder.join().expect("responder");
    assert!(!ok);
    assert!(stderr.contains(&format!("{addr} does not speak QUIC v1")), "{stderr}");
    assert!(took < Duration::from_secs(8), "waited for a timeout instead: {took:?}");
}

#[test]
fn server_refuses_a_missing_root() {
    let (ok, stderr, _) =
        run(&["server", "--listen", "127.0.0.1:0", "--root", "/nonexistent/mpq-root"], Duration::from_secs(10));
    assert!(!ok);
    assert!(stderr.contains("--root /nonexistent/mpq-root: no such directory"), "{stderr}");
    let dir = scratch("root-file");
    let file = dir.join("f");
    std::fs::write(&file, b"x").expect("write");
    let (ok, stderr, _) =
        run(&["server", "--listen", "127.0.0.1:0", "--root", file.to_str().expect("utf-8")], Duration::from_secs(10));
    assert!(!ok);
    assert!(stderr.contains("not a directory"), "{stderr}");
}

#[test]
fn server_and_client_arguments_are_checked() {
    let root = scratch("args");
    let r = root.to_str().expect("utf-8");
    let (busy, addr) = silent_port();
    let a = addr.to_string();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (vec!["server", "--listen", &a, "--root", r], format!("cannot bind {addr}: the address is already in use")),
        (
            vec![
                "server",
                "--listen",
                "127.0.0.1:0",
                "--root",
                r,
                "--cert",
                "/nonexistent.pem",
                "--key",
                "/nonexistent.key",
            ],
            "--cert /nonexistent.pem: cannot read the file".into(),
        ),
        (vec!["perf", "server", "--listen", "127.0.0.1:0", "--mtu", "1000"], "--mtu 1000".into()),
        (vec!["perf", "client", "--connect", &a, "--duration=nan"], "--duration NaN".into()),
        (vec!["perf", "client", "--connect", &a, "--streams", "0"], "--streams 0".into()),
        (vec!["perf", "client", "--connect", &a, "--bytes", "0"], "--bytes 0".into()),
        (vec!["perf", "client", "--connect", &a, "--request-size", "750", "--shard", "2"], "not with".into()),
        (
            vec!["perf", "client", "--connect", &a, "--request-size", "750", "--transport", "tcp-tls"],
            "runs over one QUIC connection".into(),
        ),
        (vec!["perf", "client", "--connect", &a, "--request-size", "750", "--requests", "0"], "--requests".into()),
        (vec!["client", "https://127.0.0.1:1/x", "--insecure", "--timeout", "0"], "--timeout 0".into()),
        (vec!["client", "http://127.0.0.1:1/x", "--insecure"], "only https:// URLs".into()),
        (vec!["client", "https://127.0.0.1:1/x"], "pass --ca FILE, or --insecure".into()),
        (
            vec!["client", "https://127.0.0.1:1/x", "--insecure", "--handshake-timeout=-1"],
            "--handshake-timeout -1".into(),
        ),
        (vec!["client", "https://127.0.0.1:1/x", "--insecure", "--quic-version", "v3"], "unknown QUIC version".into()),
        (
            vec!["server", "--listen", "127.0.0.1:0", "--versions", "v2,0x1a2a3a4a"],
            "--versions: 0x1a2a3a4a is not a version mpq speaks".into(),
        ),
    ];
    for (args, want) in cases {
        let (ok, stderr, _) = run(&args, Duration::from_secs(10));
        assert!(!ok, "mpq {} succeeded", args.join(" "));
        assert!(stderr.contains(&want), "mpq {}: expected {want:?} in {stderr:?}", args.join(" "));
    }
    drop(busy);
}

/// `-v` tells what the handshake negotiated, on both sides.
#[test]
fn verbose_logs_the_handshake_outcome() {
    handshake_outcome("verbose", &[], &[], "QUIC v1");
}

/// A server given `--versions v2,v1` moves a default client (v1, offering v2) to v2 by
/// compatible version negotiation (RFC 9368); a client with `--quic-version v2` starts there.
#[test]
fn versions_flags_negotiate_quic_v2() {
    handshake_outcome("v2-upgrade", &["--versions", "v2,v1"], &[], "QUIC v2");
    handshake_outcome("v2-only", &["--quic-version", "v2"], &["--quic-version", "v2"], "QUIC v2");
}

/// Runs `mpq server -v` and `mpq client -v` with extra arguments; both handshake lines must
/// name `version` and the rest of the negotiation.
fn handshake_outcome(name: &str, server_args: &[&str], client_args: &[&str], version: &str) {
    let root = scratch(name);
    std::fs::write(root.join("hello.txt"), b"hello").expect("write");
    let mut args = vec!["server", "--listen", "127.0.0.1:0", "--root", root.to_str().expect("utf-8"), "-v"];
    args.extend_from_slice(server_args);
    let (mut server, addr) = spawn_listening(&args);
    let out = scratch(&format!("{name}-out"));
    let url = format!("https://{addr}/hello.txt");
    let mut args = vec!["client", &url, "--insecure", "-v", "--output", out.to_str().expect("utf-8")];
    args.extend_from_slice(client_args);
    let (ok, stderr, _) = run(&args, Duration::from_secs(30));
    let _ = server.kill();
    let server_out = server.wait_with_output().expect("server output");
    let server_err = String::from_utf8_lossy(&server_out.stderr);
    assert!(ok, "{stderr}");
    assert_eq!(std::fs::read(out.join("hello.txt")).expect("downloaded"), b"hello");
    for (side, log) in [("client", stderr.as_str()), ("server", &server_err)] {
        let l = log
            .lines()
            .find(|l| l.contains(&format!("{side} handshake complete")))
            .unwrap_or_else(|| panic!("no {side} handshake line in {log}"));
        for want in [version, "TLS13_", "ALPN \"hq-interop\"", "full handshake", "multipath negotiated"] {
            assert!(l.contains(want), "{side}: {want:?} missing from {l}");
        }
    }
}

/// `mpq perf client --datagrams` against `mpq perf server` on loopback: the JSON summary
/// counts the datagrams sent, received and lost, once over the scheduler's choice of path
/// and once pinned to a second path; an oversized datagram is refused with the limit.
#[test]
fn perf_datagrams_on_loopback() {
    let (mut server, addr) = spawn_listening(&["perf", "server", "--listen", "127.0.0.1:0"]);
    let perf = |extra: &[&str]| {
        let mut args = vec!["perf", "client", "--connect", &addr, "--datagrams", "--duration", "1", "--json"];
        args.extend_from_slice(extra);
        let out = run_bounded(&args, Duration::from_secs(30), "perf client --datagrams");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let check = |stdout: &str, path: Option<&str>| {
        let v: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("a line")).expect("json");
        assert_eq!(v["mode"], "datagrams");
        let d = &v["datagrams"];
        let (sent, received, lost) =
            (d["sent"].as_u64().unwrap(), d["received"].as_u64().unwrap(), d["lost"].as_u64().unwrap());
        assert!(sent > 100, "{stdout}");
        assert_eq!(sent, received + lost);
        // Loopback loses little.
        assert!(received * 10 >= sent * 9, "{stdout}");
        assert!(v["goodput_bps"].as_f64().unwrap() > 0.0);
        assert_eq!(v["bytes"].as_u64().unwrap(), received * 600);
        if let Some(p) = path {
            assert_eq!(d["paths"][p]["sent"].as_u64().unwrap(), sent, "{stdout}");
        }
    };
    let (ok, stdout, stderr) = perf(&["--datagram-size", "600"]);
    assert!(ok, "{stderr}");
    check(&stdout, None);
    let (ok, stdout, stderr) =
        perf(&["--datagram-size", "600", "--local", "127.0.0.1:0", "--local", "127.0.0.2:0", "--datagram-path", "1"]);
    assert!(ok, "{stderr}");
    check(&stdout, Some("1"));
    let (ok, _, stderr) = perf(&["--datagram-size", "5000"]);
    assert!(!ok && stderr.contains("--datagram-size 5000: at most"), "{stderr}");
    // --0rtt: a resumed connection whose first datagrams go in 0-RTT (RFC 9221 §3).
    let (ok, stdout, stderr) = perf(&["--datagram-size", "600", "--0rtt"]);
    assert!(ok, "{stderr}");
    check(&stdout, None);
    let v: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("a line")).expect("json");
    assert_eq!(v["zero_rtt"], "accepted", "{stdout}");
    // About the initial window's worth (12000 bytes, the Initial's included: 10 of 600
    // bytes on loopback) left in 0-RTT; a PTO while the server is slow adds a few.
    let early = v["datagrams"]["sent_0rtt"].as_u64().unwrap();
    assert!((5..=60).contains(&early), "{stdout}");
    let (ok, stdout, stderr) = perf(&["--datagram-size", "600"]);
    assert!(ok, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("a line")).expect("json");
    assert_eq!((v["zero_rtt"].as_str(), v["datagrams"]["sent_0rtt"].as_u64()), (Some("not attempted"), Some(0)));
    let _ = server.kill();
    let _ = server.wait();
}

/// `mpq perf client --request-size` against `mpq perf server` on loopback, over two paths:
/// every request answered with its size, slots --request-interval apart, small requests and
/// large ones (200 kB each way: the server reads a request's padding over many packets).
#[test]
fn perf_request_response_on_loopback() {
    let (mut server, addr) = spawn_listening(&["perf", "server", "--listen", "127.0.0.1:0"]);
    for size in ["750", "200000"] {
        let args = [
            "perf",
            "client",
            "--connect",
            &addr,
            "--local",
            "127.0.0.1:0",
            "--local",
            "127.0.0.2:0",
            "--request-size",
            size,
            "--request-interval",
            "50",
            "--requests",
            "8",
            "--json",
        ];
        let out = run_bounded(&args, Duration::from_secs(30), "perf client --request-size");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("a line")).expect("json");
        assert_eq!(
            (v["mode"].as_str(), v["requests_sent"].as_u64(), v["requests_answered"].as_u64()),
            (Some("reqresp"), Some(8), Some(8)),
            "{v}"
        );
        let size: u64 = size.parse().unwrap();
        assert_eq!(v["bytes"].as_u64(), Some(8 * size), "{v}");
        let reqs = v["requests"].as_array().unwrap();
        for w in reqs.windows(2) {
            let gap = w[1]["sent_s"].as_f64().unwrap() - w[0]["sent_s"].as_f64().unwrap();
            assert!((gap - 0.05).abs() < 1e-6, "{v}");
        }
        assert!(reqs.iter().all(|q| q["delay_ms"].as_f64().is_some_and(|d| d > 0.0 && d < 5000.0)), "{v}");
        assert_eq!(v["multipath"], true);
    }
    let _ = server.kill();
    let _ = server.wait();
}

/// PMTU discovery is on by default: over loopback (which carries any size) a path reaches
/// the --mtu ceiling (default 1472) with one probe; --no-pmtud keeps 1200 bytes and sends no
/// probe; --mtu raises the ceiling.
#[test]
fn perf_paths_report_their_pmtu() {
    let (mut server, addr) = spawn_listening(&["perf", "server", "--listen", "127.0.0.1:0", "--mtu", "1500"]);
    let perf = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["perf", "client", "--connect", &addr, "--bytes", "3000000", "--json"];
        args.extend_from_slice(extra);
        let child = mpq().args(&args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        let (out, _) = wait_bounded(child.expect("spawn client"), Duration::from_secs(30), "perf client");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("a line")).expect("json");
        v["paths"][0].clone()
    };
    let p = perf(&[]);
    assert_eq!((p["pmtu"].as_u64(), p["pmtu_probes_acked"].as_u64()), (Some(1472), Some(1)), "{p}");
    let p = perf(&["--no-pmtud"]);
    assert_eq!((p["pmtu"].as_u64(), p["pmtu_probes_sent"].as_u64()), (Some(1200), Some(0)), "{p}");
    // The server accepts 1500 (its --mtu is also what it advertises), the client searches
    // up to its own 1500.
    let p = perf(&["--mtu", "1500"]);
    assert_eq!(p["pmtu"].as_u64(), Some(1500), "{p}");
    let _ = server.kill();
    let _ = server.wait();
}

/// `mpq client --resume` / `--0rtt` fetch the first URL in a first connection and the rest
/// in a second one that resumes the session: with `--0rtt` its request goes in 0-RTT,
/// which `mpq server` accepts; `mpq server --no-0rtt` issues tickets without early data, so
/// the client resumes without offering it. Both handshake lines of the second connection
/// say so, and the files arrive whole. The same over HTTP/0.9 and HTTP/3 (`--http3` on
/// both sides: the requests as HTTP/3 in 0-RTT, RFC 9114 §3.3). (A server that declines
/// early data a ticket allowed is
/// `conn::tests_zero_rtt::zero_rtt_rejected_data_is_sent_again_in_one_rtt`.)
#[test]
fn client_resumes_with_0rtt() {
    let root = scratch("resume");
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(root.join("a.txt"), b"first").expect("write");
    std::fs::write(root.join("b.bin"), &big).expect("write");
    let cases = [
        ("resume", None, "--resume", "0-RTT not attempted"),
        ("0rtt", None, "--0rtt", "0-RTT accepted"),
        ("0rtt-no-early-data", Some("--no-0rtt"), "--0rtt", "0-RTT not attempted"),
    ];
    for (http3, (name, server_flag, client_flag, outcome)) in
        [false, true].into_iter().flat_map(|h| cases.into_iter().map(move |c| (h, c)))
    {
        let name = if http3 { format!("h3-{name}") } else { name.to_string() };
        let mut args = vec!["server", "--listen", "127.0.0.1:0", "--root", root.to_str().expect("utf-8"), "-v"];
        args.extend(server_flag);
        if http3 {
            args.push("--http3");
        }
        let (mut server, addr) = spawn_listening(&args);
        let out = scratch(&format!("resume-{name}-out"));
        let (a, b) = (format!("https://{addr}/a.txt"), format!("https://{addr}/b.bin"));
        let keylog = out.join("keys.log");
        let (out_dir, keylog_path) = (out.to_str().expect("utf-8"), keylog.to_str().expect("utf-8"));
        let mut args =
            vec!["client", &a, &b, "--insecure", "-v", client_flag, "--output", out_dir, "--keylog", keylog_path];
        if http3 {
            args.push("--http3");
        }
        let (ok, stderr, _) = run(&args, Duration::from_secs(30));
        let _ = server.kill();
        let server_out = server.wait_with_output().expect("server output");
        let server_err = String::from_utf8_lossy(&server_out.stderr);
        assert!(ok, "{name}: {stderr}");
        assert_eq!(std::fs::read(out.join("a.txt")).expect("a.txt"), b"first", "{name}");
        assert_eq!(std::fs::read(out.join("b.bin")).expect("b.bin"), big, "{name}");
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("client handshake complete")).collect();
        assert_eq!(lines.len(), 2, "{name}: two connections expected in {stderr}");
        assert!(lines[0].contains("full handshake"), "{name}: {}", lines[0]);
        for want in ["resumed session", outcome] {
            assert!(lines[1].contains(want), "{name}: {want:?} missing from {}", lines[1]);
        }
        // The key log has the early traffic secret when early data was offered.
        let keys = std::fs::read_to_string(&keylog).expect("key log");
        assert_eq!(keys.contains("CLIENT_EARLY_TRAFFIC_SECRET"), outcome == "0-RTT accepted", "{name}: {keys}");
        assert!(
            server_err.lines().any(|l| l.contains("server handshake complete")
                && l.contains("resumed session")
                && l.contains(outcome)),
            "{name}: no resumed server handshake with {outcome:?} in {server_err}"
        );
    }
}

/// The process runs without transparent huge pages (`allocator.rs`: a first touch of a
/// 2 MB region zeroed all of it, doubling a sender's peak memory), unless
/// `MIMALLOC_ALLOW_THP=1` asks for them; the kernel's account of the process says which.
#[test]
fn the_process_runs_without_transparent_huge_pages_unless_asked() {
    let thp_enabled = |allow: Option<&str>| {
        let mut cmd = mpq();
        cmd.args(["perf", "server", "--listen", "127.0.0.1:0"]);
        match allow {
            Some(v) => cmd.env("MIMALLOC_ALLOW_THP", v),
            None => cmd.env_remove("MIMALLOC_ALLOW_THP"),
        };
        // Listening: `main` has run its start.
        let (mut server, _) = listening(cmd);
        let status = std::fs::read_to_string(format!("/proc/{}/status", server.id())).expect("/proc/PID/status");
        let _ = server.kill();
        let _ = server.wait();
        let field =
            status.lines().find_map(|l| l.strip_prefix("THP_enabled:")).expect("THP_enabled in /proc/PID/status");
        field.trim() == "1"
    };
    if !std::fs::read_to_string("/proc/self/status").is_ok_and(|s| s.contains("THP_enabled:")) {
        eprintln!("this kernel does not report THP_enabled (Linux < 5.0): nothing to check");
        return;
    }
    assert!(!thp_enabled(None), "huge pages on by default");
    assert!(!thp_enabled(Some("0")));
    assert!(thp_enabled(Some("1")), "MIMALLOC_ALLOW_THP=1 keeps them");
}

/// Waits (at most 20 s) until a qlog file of `dir` whose name ends with `suffix` records
/// the confirmed handshake (connectivity events are flushed as they happen); returns it.
#[allow(clippy::disallowed_methods)] // a wall-clock bound on a real process
fn qlog_with_handshake(dir: &std::path::Path, suffix: &str) -> PathBuf {
    let start = std::time::Instant::now();
    loop {
        let found = std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).find(|p| {
            p.to_string_lossy().ends_with(suffix)
                && std::fs::read_to_string(p).is_ok_and(|s| s.contains("\"handshake_confirmed\""))
        });
        if let Some(p) = found {
            return p;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "no {suffix} qlog with a confirmed handshake in {dir:?}");
        // Polling a file another process writes: nothing notifies of its content.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every record of a qlog file (JSON-SEQ): each must parse, the last one included.
fn qlog_records(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).expect("qlog file");
    text.split('\x1e')
        .filter(|r| !r.trim().is_empty())
        .map(|r| serde_json::from_str(r).unwrap_or_else(|e| panic!("a record of {path:?} does not parse ({e}): {r}")))
        .collect()
}

/// The `connectivity:connection_closed` events of a qlog file's records.
fn closes(records: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    records.iter().filter(|r| r["name"] == "connectivity:connection_closed").map(|r| &r["data"]).collect()
}

/// Sends process `pid` the signal `name` (`TERM`, `INT`) with kill(1) (no unsafe code here).
fn signal(pid: u32, name: &str) {
    let ok = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -{name} {pid}");
}

/// A child killed when dropped: a failed assertion leaves no 120 s client or server behind.
struct Reaped(Option<std::process::Child>);

impl Reaped {
    fn pid(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    /// Waits for it (see `wait_bounded`).
    fn wait(mut self, limit: Duration, what: &str) -> (std::process::Output, Duration) {
        wait_bounded(self.0.take().expect("running"), limit, what)
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `mpq perf client` to `addr` for 120 s (far longer than a test: only a close ends it this
/// soon), with `extra` arguments.
fn long_client(addr: &str, extra: &[&str]) -> Reaped {
    let child = mpq()
        .args(["perf", "client", "--connect", addr, "--duration", "120", "--idle-timeout", "60"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn client");
    Reaped(Some(child))
}

/// Killed, a server sent its clients nothing (they waited for their idle timeout) and lost
/// the end of its qlog files. SIGTERM closes its connections: the client learns at once why,
/// the server's qlog ends with the close, and the server exits with success.
#[test]
fn sigterm_stops_a_server_cleanly() {
    let qlog = scratch("stop-server");
    let (server, addr) =
        spawn_listening(&["perf", "server", "--listen", "127.0.0.1:0", "--qlog-dir", qlog.to_str().expect("utf-8")]);
    let server = Reaped(Some(server));
    let client = long_client(&addr, &["--json"]);
    let server_qlog = qlog_with_handshake(&qlog, "_server.sqlog");
    signal(server.pid(), "TERM");
    let (out, took) = server.wait(Duration::from_secs(20), "the stopped server");
    let server_err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "server exit {:?}: {server_err}", out.status);
    assert!(server_err.contains("SIGTERM: closing the connections"), "{server_err}");
    assert!(!server_err.contains("panicked"), "{server_err}");
    assert!(took < Duration::from_secs(10), "the server took {took:?} to stop");
    let (out, took) = client.wait(Duration::from_secs(30), "the client of the stopped server");
    let client_err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "the client's run cannot have succeeded: {client_err}");
    // (A stream's task that failed used to be awaited twice: a panic.)
    assert!(!client_err.contains("panicked"), "{client_err}");
    assert!(client_err.contains("server shutting down"), "the client does not say why: {client_err}");
    assert!(took < Duration::from_secs(10), "the client took {took:?} to learn of the close");
    let records = qlog_records(&server_qlog);
    let closed = closes(&records);
    assert!(
        closed.iter().any(|c| c["owner"] == "local" && c["reason"] == "server shutting down"),
        "the server's qlog does not end with its close: {closed:?}"
    );
}

/// Ctrl-C on a client mid-transfer: its connection is closed (the server learns why), its
/// qlog is complete, and it exits with 130, as a shell reports a process SIGINT ended.
#[test]
fn ctrl_c_stops_a_client_cleanly() {
    let qlog = scratch("stop-client");
    let (server, addr) = spawn_listening(&["perf", "server", "--listen", "127.0.0.1:0"]);
    let server = Reaped(Some(server));
    let client = long_client(&addr, &["--qlog-dir", qlog.to_str().expect("utf-8")]);
    let client_qlog = qlog_with_handshake(&qlog, "_client.sqlog");
    signal(client.pid(), "INT");
    let (out, took) = client.wait(Duration::from_secs(20), "the interrupted client");
    let client_err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(130), "{client_err}");
    assert!(client_err.contains("interrupted by SIGINT"), "{client_err}");
    assert!(took < Duration::from_secs(10), "the client took {took:?} to stop");
    let records = qlog_records(&client_qlog);
    assert!(
        closes(&records).iter().any(|c| c["owner"] == "local" && c["reason"] == "interrupted"),
        "the client's qlog does not end with its close"
    );
    // The server saw the client's close, not an idle timeout: its connection-ended line says
    // so (read once the server is stopped in turn).
    signal(server.pid(), "TERM");
    let (out, _) = server.wait(Duration::from_secs(20), "the server");
    let server_err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(server_err.contains("connection ended") && server_err.contains("interrupted"), "{server_err}");
}

/// A signal the server was started with ignored stays ignored (`nohup` ignores SIGHUP, so
/// that the server outlives the terminal): SIGHUP then SIGTERM, and only SIGTERM stops it.
/// (Both are pending before it looks; the kernel delivers the lower number, SIGHUP, first.)
#[test]
fn a_server_started_under_nohup_ignores_sighup() {
    if std::process::Command::new("nohup").arg("true").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        eprintln!("no nohup(1) here: nothing to check");
        return;
    }
    let mut cmd = std::process::Command::new("nohup");
    cmd.args([env!("CARGO_BIN_EXE_mpq"), "perf", "server", "--listen", "127.0.0.1:0"]);
    let (server, _) = listening(cmd);
    let server = Reaped(Some(server));
    signal(server.pid(), "HUP");
    signal(server.pid(), "TERM");
    let (out, _) = server.wait(Duration::from_secs(20), "the server under nohup");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert!(err.contains("SIGTERM: closing") && !err.contains("SIGHUP"), "{err}");
}
