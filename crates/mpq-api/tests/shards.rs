//! The shard runtime of the application API (`Threads::Shards`): a server of two shards
//! sharing its port, where the kernel steers each datagram to the shard that owns its
//! connection ID, and a client whose connections take the shards in turn; byte-exact echoes
//! over many connections, a second path (from another address, so another 4-tuple) reaching
//! the connection's shard, and both shards' threads doing work.

mod common;

use common::{addr, echo, echo_streams};

use std::time::Duration;

use mpq_api::{Endpoint, Error, Options, Threads, TransportConfig, Wait};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// A server of `shards` shards on 127.0.0.1 that echoes every bidirectional stream and
/// reports each accepted connection's shard.
fn echo_server(
    shards: usize,
    transport: TransportConfig,
) -> (Endpoint, mpq_api::ClientConfig, std::sync::mpsc::Receiver<usize>) {
    let transport = TransportConfig { max_idle_timeout: Duration::from_secs(5), ..transport };
    let (client_cfg, server_cfg) = mpq_proto::testing::configs(transport);
    let server = Endpoint::server(
        &[addr("127.0.0.1:0")],
        server_cfg,
        Options { threads: Threads::Shards(shards), ..Options::default() },
    )
    .expect("server endpoint");
    assert_eq!(server.shard_count(), shards);
    let (tx, rx) = std::sync::mpsc::channel();
    let ep = server.clone();
    std::thread::spawn(move || {
        while let Some(conn) = ep.accept().wait() {
            let _ = tx.send(conn.shard());
            echo_streams(conn);
        }
    });
    (server, client_cfg, rx)
}

#[test]
fn sharded_client_and_server_echo_exactly_over_both_shards() {
    let (server, cfg, shards_seen) = echo_server(2, TransportConfig::default());
    let to = server.local_addrs()[0];
    let client =
        Endpoint::client(&[addr("127.0.0.1:0")], Options { threads: Threads::Shards(2), ..Options::default() })
            .expect("client endpoint");
    let mut conns = Vec::new();
    for i in 0..8u8 {
        let conn = client.connect(to, "localhost", &cfg).expect("connect").wait().expect("handshake");
        // The client's connections take its shards in turn.
        assert_eq!(conn.shard(), usize::from(i) % 2);
        let data = pattern(20_000 + usize::from(i) * 1000, i);
        assert!(echo(&conn, &data) == data, "connection {i}: the echo differs");
        conns.push(conn);
    }
    // The server's shards: where the kernel's hash of each new client's addresses put it.
    // Sixteen more clients of one shard each, so sixteen client ports: both server shards,
    // but for a chance of 2^-15.
    let mut others = Vec::new();
    for i in 0..16u8 {
        let ep = Endpoint::client(&[addr("127.0.0.1:0")], Options::default()).expect("client");
        let conn = ep.connect(to, "localhost", &cfg).expect("connect").wait().expect("handshake");
        let data = pattern(5000, i);
        assert!(echo(&conn, &data) == data, "client {i}: the echo differs");
        others.push((ep, conn));
    }
    let mut seen = [0; 2];
    for _ in 0..24 {
        seen[shards_seen.recv_timeout(Duration::from_secs(5)).expect("accepted")] += 1;
    }
    assert!(seen[0] > 0 && seen[1] > 0, "every connection on one shard: {seen:?}");
    for (ep, c) in others {
        c.close(0, b"done");
        ep.wait_idle().wait();
    }
    for c in &conns {
        c.close(0, b"done");
    }
    client.wait_idle().wait();
    drop(conns);
    let reports = client.shutdown().expect("last handle").expect("stopped");
    let mut per_shard = [0u64; 2];
    for r in &reports {
        per_shard[r.shard.expect("a shard's report")] += r.io.rx_datagrams;
    }
    assert!(per_shard[0] > 0 && per_shard[1] > 0, "a client shard received nothing: {per_shard:?}");
    server.close(0, b"done");
}

/// A sharded client bound to two addresses: shard k's connections start from the k-th
/// address (cycling), so the server sees them come from both.
#[test]
fn a_sharded_clients_connections_spread_over_its_addresses() {
    let transport = TransportConfig { max_idle_timeout: Duration::from_secs(5), ..TransportConfig::default() };
    let (client_cfg, server_cfg) = mpq_proto::testing::configs(transport);
    let server = Endpoint::server(&[addr("127.0.0.1:0")], server_cfg, Options::default()).expect("server");
    let to = server.local_addrs()[0];
    let accepting = server.clone();
    let peers = std::thread::spawn(move || {
        (0..4).map(|_| accepting.accept().wait().expect("a connection").remote_address().expect("peer")).collect()
    });
    let client = Endpoint::client(
        &[addr("127.0.0.1:0"), addr("127.0.0.2:0")],
        Options { threads: Threads::Shards(2), ..Options::default() },
    )
    .expect("client endpoint");
    let conns: Vec<_> = (0..4)
        .map(|_| client.connect(to, "localhost", &client_cfg).expect("connect").wait().expect("handshake"))
        .collect();
    let peers: Vec<std::net::SocketAddr> = peers.join().expect("server side");
    let ips: Vec<String> = peers.iter().map(|a| a.ip().to_string()).collect();
    assert_eq!(ips.iter().filter(|ip| *ip == "127.0.0.1").count(), 2, "{peers:?}");
    assert_eq!(ips.iter().filter(|ip| *ip == "127.0.0.2").count(), 2, "{peers:?}");
    for c in &conns {
        c.close(0, b"done");
    }
    client.wait_idle().wait();
    server.close(0, b"done");
}

/// A multipath client (single runtime) against a sharded server: its second path comes from
/// another address, so the kernel's hash alone could put it on the other shard; the steering
/// by connection ID brings it to the connection's shard, and the transfer uses it.
#[test]
fn a_second_path_reaches_its_connections_shard() {
    let transport = TransportConfig { initial_max_path_id: Some(4), ..TransportConfig::default() };
    let (server, cfg, _) = echo_server(2, transport);
    let to = server.local_addrs()[0];
    for round in 0..8u8 {
        let client = Endpoint::client(&[addr("127.0.0.1:0"), addr("127.0.0.2:0")], Options::default()).expect("client");
        let conn = client.connect(to, "localhost", &cfg).expect("connect").wait().expect("handshake");
        let local1 = client.local_addrs()[1];
        let id = conn.add_path(Some(local1), to, false).wait().expect("the second path validates");
        let data = pattern(1_000_000, round);
        assert!(echo(&conn, &data) == data, "round {round}: the echo differs");
        let stats = conn.path_stats().expect("stats");
        let second = stats.iter().find(|p| p.path_id == id).expect("the second path");
        assert!(
            second.rx_bytes > 0 && second.tx_bytes > 0,
            "round {round}: the second path carried nothing: {second:?}"
        );
        conn.close(0, b"done");
        client.wait_idle().wait();
    }
    server.close(0, b"done");
}

#[test]
fn shard_counts_out_of_range_are_refused() {
    for n in [0, 257] {
        let r = Endpoint::client(&[addr("127.0.0.1:0")], Options { threads: Threads::Shards(n), ..Options::default() });
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{n} shards: {r:?}");
    }
}
