//! A path that dies mid-transfer, through the real kernel (issue C2): two network
//! namespaces joined by two veth pairs, each a path, the server's side of each shaped to
//! 100 Mbit/s (tbf) so the download takes a while. Once the second path has carried a few
//! megabytes the client's end of its link is taken down; the download must still complete,
//! byte for byte, on the first path. Run in both runtimes (`--threads single` and
//! `--threads per-path`).
//!
//! Needs root (or CAP_NET_ADMIN), `ip` and `tc`; skipped with a message otherwise.

#[path = "common/netns.rs"]
mod netns;
#[path = "common/scratch.rs"]
mod scratch;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use netns::{exec_in, mpq_in, Netns};

/// Client (`c`) and server (`s`) namespaces joined by two shaped veth pairs.
fn create() -> Option<Netns> {
    let steps = [
        "link add mpqk0 netns {c} type veth peer name mpqk1 netns {s}",
        "link add mpqk2 netns {c} type veth peer name mpqk3 netns {s}",
        "-n {c} addr add 10.79.1.2/24 dev mpqk0",
        "-n {s} addr add 10.79.1.1/24 dev mpqk1",
        "-n {c} addr add 10.79.2.2/24 dev mpqk2",
        "-n {s} addr add 10.79.2.1/24 dev mpqk3",
        "-n {c} link set mpqk0 up",
        "-n {c} link set mpqk2 up",
        "-n {s} link set mpqk1 up",
        "-n {s} link set mpqk3 up",
        "-n {c} link set lo up",
        "-n {s} link set lo up",
    ];
    let ns = Netns::create("mpq-kill", &["c", "s"], &steps)?;
    for dev in ["mpqk1", "mpqk3"] {
        let tbf =
            ["tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", "100mbit", "burst", "64kb", "latency", "20ms"];
        if !exec_in(ns.name(1), &tbf) {
            eprintln!("tc qdisc add dev {dev}: failed");
            return None;
        }
    }
    Some(ns)
}

/// Bytes received so far on interface `dev` of namespace `ns`.
fn rx_bytes(ns: &str, dev: &str) -> u64 {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "cat", &format!("/sys/class/net/{dev}/statistics/rx_bytes")])
        .output()
        .expect("read interface counters");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0)
}

/// A file whose every byte depends on its offset.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i as u64).wrapping_mul(2_654_435_761) >> 11) as u8).collect()
}

#[allow(clippy::disallowed_methods)] // wall-clock bounds on real processes
fn download_survives_a_dead_path(ns: &Netns, threads: &str) {
    let (client_ns, server_ns) = (ns.name(0), ns.name(1));
    let dir = scratch::scratch("kill", threads);
    let (root, out) = (dir.join("root"), dir.join("out"));
    std::fs::create_dir_all(&root).expect("root");
    std::fs::create_dir_all(&out).expect("out");
    let body = pattern(40_000_000);
    std::fs::write(root.join("big.bin"), &body).expect("write");
    let root_s = root.to_str().expect("utf-8");
    let server_args = [
        "server",
        "--listen",
        "10.79.1.1:4433",
        "--listen",
        "10.79.2.1:4433",
        "--root",
        root_s,
        "--threads",
        threads,
        "--scheduler",
        "round-robin",
    ];
    let mut server = mpq_in(server_ns, &server_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    // "listening on ..." (once per address) means the sockets are bound.
    let mut lines = BufReader::new(server.stdout.take().expect("stdout")).lines();
    for _ in 0..2 {
        let l = lines.next().expect("a listening line").expect("read");
        assert!(l.starts_with("listening on "), "{l}");
    }
    let out_s = out.to_str().expect("utf-8");
    let client_args = [
        "client",
        "https://10.79.1.1:4433/big.bin",
        "--insecure",
        "--output",
        out_s,
        "--threads",
        threads,
        "--local",
        "10.79.1.2:0",
        "--local",
        "10.79.2.2:0",
        "--server-addr",
        "10.79.2.1:4433",
        "--path-mode",
        "pairs",
        "--scheduler",
        "round-robin",
    ];
    let mut client = mpq_in(client_ns, &client_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn client");
    let start = std::time::Instant::now();
    // (The counters go on from the previous runtime's run.)
    let (base0, base2) = (rx_bytes(client_ns, "mpqk0"), rx_bytes(client_ns, "mpqk2"));
    // The second path carries data, then its link goes down in the middle of the download.
    while rx_bytes(client_ns, "mpqk2") - base2 < 4_000_000 {
        assert!(
            client.try_wait().expect("wait").is_none(),
            "{threads}: the download ended before the second path carried 4 MB"
        );
        assert!(start.elapsed() < Duration::from_secs(60), "{threads}: the second path never carried 4 MB");
        // Polling a kernel counter: it has no notification.
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(exec_in(client_ns, &["ip", "link", "set", "mpqk2", "down"]), "take the second path's link down");
    let killed_at = rx_bytes(client_ns, "mpqk0") - base0 + rx_bytes(client_ns, "mpqk2") - base2;
    while client.try_wait().expect("wait").is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{threads}: the download never completed after the path died"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let got = client.wait_with_output().expect("client output");
    let _ = server.kill();
    let _ = server.wait();
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert!(got.status.success(), "{threads}: the client failed: {stderr}");
    let fetched = std::fs::read(out.join("big.bin")).expect("downloaded file");
    assert!(fetched == body, "{threads}: {} bytes fetched of {}, or contents differ", fetched.len(), body.len());
    assert!(killed_at < body.len() as u64, "{threads}: the path died after the download had arrived");
    // Bring the link back for the next runtime.
    assert!(exec_in(client_ns, &["ip", "link", "set", "mpqk2", "up"]));
}

#[test]
fn a_download_survives_its_second_path_dying_in_both_runtimes() {
    let Some(ns) = create() else {
        eprintln!("skipped: network namespaces are not available here (needs root, `ip` and `tc`)");
        return;
    };
    for threads in ["per-path", "single"] {
        download_survives_a_dead_path(&ns, threads);
    }
    drop(ns);
}
