//! PMTU discovery through the real kernel: three network namespaces, a client host, a
//! router and a server host, joined by veth pairs of MTU 1500 (server side) and 1300
//! (client side). The server's probes leave its 1500-byte interface and are dropped
//! silently by the router (no fragmentation: the sockets set Don't Fragment and ignore ICMP
//! route MTUs), so only DPLPMTUD can find the 1272 bytes of UDP payload the path carries;
//! the client's probes above 1272 fail at once with EMSGSIZE on its own 1300-byte
//! interface, which the runtime treats as lost.
//!
//! Needs root (or CAP_NET_ADMIN) and `ip`; skipped with a message otherwise. The
//! namespaces are named after the test process and removed at the end, also on failure.

use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

#[path = "common/netns.rs"]
mod netns;

use netns::{exec_in, mpq_in, Netns};

/// Client (`c`), router (`r`) and server (`s`) namespaces wired as the module says; `None`
/// when the system does not let us.
fn create() -> Option<Netns> {
    let steps = [
        "link add mpqc0 netns {c} type veth peer name mpqr0 netns {r}",
        "link add mpqs0 netns {s} type veth peer name mpqr1 netns {r}",
        "-n {c} addr add 10.77.2.2/24 dev mpqc0",
        "-n {r} addr add 10.77.2.1/24 dev mpqr0",
        "-n {r} addr add 10.77.1.2/24 dev mpqr1",
        "-n {s} addr add 10.77.1.1/24 dev mpqs0",
        // The client-side link is the narrow one.
        "-n {c} link set mpqc0 mtu 1300",
        "-n {r} link set mpqr0 mtu 1300",
        "-n {c} link set mpqc0 up",
        "-n {r} link set mpqr0 up",
        "-n {r} link set mpqr1 up",
        "-n {s} link set mpqs0 up",
        "-n {c} link set lo up",
        "-n {s} link set lo up",
        "-n {c} route add default via 10.77.2.1",
        "-n {s} route add default via 10.77.1.2",
    ];
    let ns = Netns::create("mpq-pmtu", &["c", "r", "s"], &steps)?;
    exec_in(ns.name(1), &["sysctl", "-qw", "net.ipv4.ip_forward=1"]).then_some(ns)
}

/// The per-path JSON of path 0 in a line holding `{"paths": [...]}` after `prefix`.
fn path0(text: &str, prefix: &str) -> Option<serde_json::Value> {
    let line = text.lines().rev().find_map(|l| l.strip_prefix(prefix))?;
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    v["paths"].as_array()?.first().cloned()
}

#[test]
#[allow(clippy::disallowed_methods)] // wall-clock bounds on real processes
fn pmtud_finds_a_routers_narrower_link_in_network_namespaces() {
    let Some(ns) = create() else {
        eprintln!("skipped: network namespaces are not available here (needs root and `ip`)");
        return;
    };
    let (client_ns, server_ns) = (ns.names[0].clone(), ns.names[2].clone());
    let mut server = mpq_in(&server_ns, &["perf", "server", "--listen", "10.77.1.1:4433", "--mtu", "1472"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mut line = [0u8; 64];
    // "listening on ..." means the socket is bound.
    let _ = server.stdout.as_mut().expect("stdout").read(&mut line);
    let client = mpq_in(
        &client_ns,
        &["perf", "client", "--connect", "10.77.1.1:4433", "--duration", "2", "--json", "--mtu", "1472"],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn client");
    let start = std::time::Instant::now();
    let mut client = client;
    while client.try_wait().expect("wait").is_none() {
        assert!(start.elapsed() < Duration::from_secs(60), "client still running after 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = client.wait_with_output().expect("client output");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "client failed: {stderr}");
    // The server reports the connection once the client's close arrives.
    std::thread::sleep(Duration::from_millis(500));
    let _ = server.kill();
    let server_out = server.wait_with_output().expect("server output");
    let server_err = String::from_utf8_lossy(&server_out.stderr);
    let s = path0(&server_err, "connection ended: ").unwrap_or_else(|| panic!("no server report: {server_err}"));
    assert_eq!(s["pmtu"], 1272, "the server's search through the router: {s}");
    assert!(s["pmtu_probes_sent"].as_u64() > s["pmtu_probes_acked"].as_u64(), "some probes were lost: {s}");
    let c = path0(&stdout, "").unwrap_or_else(|| panic!("no client JSON: {stdout}"));
    let cp = c["pmtu"].as_u64().expect("client pmtu");
    assert!((1200..=1272).contains(&cp), "the client never exceeds its 1300-byte interface: {c}");
    drop(ns);
}
