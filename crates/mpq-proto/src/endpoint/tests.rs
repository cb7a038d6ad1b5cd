//! Endpoint-level tests: stateless resets, version negotiation, the cost of idle
//! connections.

use std::time::Duration;

use crate::conn::{ConnectionError, Event, TransportConfig};
use crate::endpoint::{Endpoint, EndpointConfig};
use crate::testing::Pair;

fn established(pair: &mut Pair) {
    assert!(pair
        .run_until(Duration::from_secs(2), |p| p.client.connection(p.client_conn).is_some_and(|c| c.is_established())));
    // Let the handshake settle (HANDSHAKE_DONE, ACKs, NEW_CONNECTION_IDs).
    pair.run_until(Duration::from_millis(500), |_| false);
}

/// A server that lost its state (a restart with the same reset secret) answers the client's
/// next packet with a stateless reset. Its destination CID is random, so only the token at its
/// end leads to the client connection, which must then close at once (RFC 9000 §10.3.1)
/// instead of answering with a reset of its own and waiting for its idle timeout.
#[test]
fn stateless_reset_from_a_restarted_server_closes_the_client() {
    let cfg = TransportConfig { max_idle_timeout: Duration::from_secs(30), ..TransportConfig::default() };
    let mut pair = Pair::new(cfg.clone());
    established(&mut pair);
    while pair.client.poll_event().is_some() {}
    let (_, server_config) = crate::testing::configs(cfg);
    // Same seed, so the same reset secret: the restarted server's tokens are the old ones.
    pair.server = Endpoint::new(EndpointConfig::with_seed(2), Some(server_config));
    let start = pair.now;
    let c = pair.client.connection_mut(pair.client_conn).expect("client");
    let id = c.open_stream(crate::Dir::Bi).expect("stream");
    c.write(id, b"hello").expect("write");
    let mut err = None;
    let closed = pair.run_until(Duration::from_secs(5), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            if let Event::ConnectionLost(e) = e {
                err = Some(e);
            }
        }
        err.is_some()
    });
    assert!(closed, "the client did not notice the reset within 5 s");
    assert_eq!(err, Some(ConnectionError::Reset));
    assert!(pair.now - start < Duration::from_secs(1), "took {:?}", pair.now - start);
}

/// A datagram that merely ends in random bytes is not a reset, and an unroutable datagram
/// ending in a token of a CID the client does not use (not its current one) is ignored.
#[test]
fn unroutable_garbage_does_not_reset_a_connection() {
    let mut pair = Pair::new(TransportConfig::default());
    established(&mut pair);
    let mut d = vec![0x41u8; 60];
    d[1..9].copy_from_slice(&[9; 8]);
    let (now, local, remote) = (pair.now, pair.client_addr, pair.server_addr);
    assert!(pair.client.handle_datagram(now, local, remote, None, &mut d).is_none());
    assert!(!pair.client.connection(pair.client_conn).expect("client").is_closed());
}

/// RFC 8999 §5.1 / RFC 9000 §6.1: a long header of an unknown version may carry connection
/// IDs of up to 255 bytes; the server still answers with Version Negotiation, echoing them.
#[test]
fn version_negotiation_echoes_long_connection_ids() {
    let (_, server_config) = crate::testing::configs(TransportConfig::default());
    let mut server = Endpoint::new(EndpointConfig::with_seed(5), Some(server_config));
    let dcid = [0xaa; 40];
    let scid = [0xbb; 255];
    let mut d = vec![0xc0];
    d.extend_from_slice(&0x1a2a_3a4au32.to_be_bytes());
    d.push(dcid.len() as u8);
    d.extend_from_slice(&dcid);
    d.push(scid.len() as u8);
    d.extend_from_slice(&scid);
    d.resize(1200, 0);
    let (local, remote) = ("10.0.0.2:443".parse().unwrap(), "10.0.0.1:5000".parse().unwrap());
    server.handle_datagram(crate::Instant::ZERO, local, remote, None, &mut d);
    let mut buf = Vec::new();
    let t = server.poll_transmit(crate::Instant::ZERO, &mut buf).expect("a Version Negotiation packet");
    assert_eq!(t.destination, remote);
    let vn = &buf[..t.size];
    assert_eq!(&vn[1..5], &[0; 4], "version 0 marks Version Negotiation");
    // The client's SCID comes back as the DCID and vice versa.
    assert_eq!(usize::from(vn[5]), scid.len());
    assert_eq!(&vn[6..6 + 255], &scid);
    assert_eq!(usize::from(vn[261]), dcid.len());
    assert_eq!(&vn[262..262 + 40], &dcid);
    let versions: Vec<u32> = vn[302..].chunks(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])).collect();
    assert!(versions.contains(&crate::VERSION_1));
    assert!(server.is_empty());
}

/// With many idle connections, a wake of the endpoint (timers, transmit, events) asks only
/// the connections that something happened to: idle ones cost nothing until their own timer
/// is due.
#[test]
fn idle_connections_are_not_polled_on_every_wake() {
    let cfg = TransportConfig { max_idle_timeout: Duration::from_secs(600), ..TransportConfig::default() };
    let mut pair = Pair::new(cfg);
    // 200 handshakes at once from one client address: above the default per-address bound.
    pair.server.set_handshake_limits(1024, 256);
    let config = pair.client_config.clone();
    for _ in 0..199 {
        let (now, server) = (pair.now, pair.server_addr);
        pair.client.connect(now, &config, server, "localhost").expect("connect");
    }
    let all_up = pair.run_until(Duration::from_secs(10), |p| {
        while p.client.poll_event().is_some() {}
        while p.server.poll_event().is_some() {}
        while p.server.accept().is_some() {}
        p.server.len() == 200
            && p.client.handles().iter().all(|&h| p.client.connection(h).is_some_and(|c| c.is_established()))
    });
    assert!(all_up, "200 connections did not come up");
    // Let every handshake settle so that only idle timers remain.
    pair.run_until(Duration::from_secs(5), |p| {
        while p.client.poll_event().is_some() {}
        while p.server.poll_event().is_some() {}
        false
    });
    assert_eq!(pair.server.len(), 200);
    assert_eq!(pair.server.filed_timers(), 200, "each idle connection keeps its idle timer filed");
    let before = pair.server.connection_polls();
    let mut buf = Vec::new();
    for _ in 0..1000 {
        let now = pair.now;
        pair.server.handle_timeout(now);
        assert!(pair.server.poll_transmit(now, &mut buf).is_none());
        assert!(pair.server.poll_timeout().is_some_and(|t| t > now));
        assert!(pair.server.poll_event().is_none());
    }
    assert_eq!(pair.server.connection_polls(), before, "idle connections were polled");
    // One datagram for one connection costs a handful of polls, not one per connection.
    let h = pair.client.handles()[17];
    let c = pair.client.connection_mut(h).expect("client");
    let id = c.open_stream(crate::Dir::Bi).expect("stream");
    c.write(id, b"ping").expect("write");
    let mut buf = Vec::new();
    let now = pair.now;
    let t = pair.client.poll_transmit(now, &mut buf).expect("a datagram");
    let before = pair.server.connection_polls();
    let (local, remote) = (pair.server_addr, pair.client_addr);
    pair.server.handle_datagram(now, local, remote, None, &mut buf[..t.size]);
    pair.server.handle_timeout(now);
    while pair.server.poll_transmit(now, &mut buf).is_some() {}
    pair.server.poll_timeout();
    while pair.server.poll_event().is_some() {}
    let cost = pair.server.connection_polls() - before;
    assert!(cost <= 8, "one datagram cost {cost} connection polls");
}

/// Our max_udp_payload_size transport parameter says what we accept (RFC 9000 §18.2).
#[test]
fn max_udp_payload_size_is_advertised() {
    let cfg = TransportConfig { max_recv_udp_payload_size: 1400, ..TransportConfig::default() };
    let tp = crate::conn::local_transport_params(
        crate::Side::Client,
        &cfg,
        crate::ConnectionId::new(&[1; 8]),
        [0; 16],
        crate::ConnectionId::new(&[2; 8]),
        crate::VERSION_1,
    );
    let mut bytes = Vec::new();
    tp.encode(&mut bytes);
    let decoded = crate::transport_params::TransportParameters::decode(crate::Side::Client, &bytes).expect("decode");
    assert_eq!(decoded.max_udp_payload_size, 1400);
}

/// A client that got a session ticket on its first connection offers it on the next; TLS
/// then shows the ticket's remembered transport parameters until the server's arrive, and
/// they name the first connection's IDs. The second connection must use its own
/// (regression: it failed with "initial_source_connection_id mismatch").
#[test]
fn a_second_connection_after_a_session_ticket_connects() {
    let mut pair = Pair::new(TransportConfig::default());
    established(&mut pair);
    let config = pair.client_config.clone();
    let (now, server) = (pair.now, pair.server_addr);
    let second = pair.client.connect(now, &config, server, "localhost").expect("connect");
    let mut lost = None;
    let up = pair.run_until(Duration::from_secs(5), |p| {
        while let Some((h, e)) = p.client.poll_event() {
            if let (true, Event::ConnectionLost(e)) = (h == second, e) {
                lost = Some(e);
            }
        }
        lost.is_some() || p.client.connection(second).is_some_and(|c| c.is_established())
    });
    assert!(up, "the second connection neither came up nor failed");
    assert_eq!(lost, None);
}

/// A qlog sink that shares its events with the test.
struct SharedSink(std::sync::Arc<std::sync::Mutex<Vec<(&'static str, serde_json::Value)>>>);

impl crate::qlog::QlogSink for SharedSink {
    fn emit(&mut self, _time: crate::Instant, name: &'static str, data: serde_json::Value) {
        self.0.lock().expect("sink").push((name, data));
    }
}

/// A server's qlog sink comes from its factory as the connection is created, so the file
/// begins with the client's first Initial (the CLI used to attach it at the application's
/// next wake, which on a fast loopback came after the handshake and a new path's first packets:
/// a flaky interop test found it).
#[test]
fn qlog_factory_sees_the_first_initial() {
    let mut pair = Pair::new(TransportConfig::default());
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let shared = events.clone();
    pair.server.set_qlog_factory(Box::new(move |_| Some(Box::new(SharedSink(shared.clone())))));
    established(&mut pair);
    let events = events.lock().expect("sink");
    let first_rx = events.iter().find(|(name, _)| *name == "transport:packet_received").expect("a received packet");
    assert_eq!(first_rx.1["header"]["packet_type"], "initial", "first: {first_rx:?}");
    assert_eq!(first_rx.1["header"]["packet_number"], 0);
}

/// A client's connections get their qlog sink from the factory as `connect` creates them,
/// before the first packet is built: the file begins with the first Initial sent.
#[test]
fn qlog_factory_gives_a_client_connection_its_sink_before_its_first_packet() {
    let mut pair = Pair::new(TransportConfig::default());
    established(&mut pair);
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let shared = events.clone();
    pair.client.set_qlog_factory(Box::new(move |_| Some(Box::new(SharedSink(shared.clone())))));
    let config = pair.client_config.clone();
    let (now, server) = (pair.now, pair.server_addr);
    let second = pair.client.connect(now, &config, server, "localhost").expect("connect");
    assert!(pair.run_until(Duration::from_secs(2), |p| p.client.connection(second).is_some_and(|c| c.is_established())));
    let events = events.lock().expect("sink");
    let first_tx = events.iter().find(|(name, _)| *name == "transport:packet_sent").expect("a sent packet");
    assert_eq!(first_tx.1["header"]["packet_type"], "initial", "first: {first_tx:?}");
    assert_eq!(first_tx.1["header"]["packet_number"], 0);
}

/// A server listening on several addresses answers a new client from the address its first
/// Initial came to (the client knows no other): the first path's transmits name it as their
/// source, so that a runtime with a socket per address sends from the right one.
#[test]
fn a_server_answers_from_the_address_the_client_chose() {
    let (cc, sc) = crate::testing::configs(TransportConfig::default());
    let mut client = Endpoint::new(EndpointConfig::with_seed(1), None);
    let mut server = Endpoint::new(EndpointConfig::with_seed(2), Some(sc));
    let second: std::net::SocketAddr = "192.0.2.2:443".parse().unwrap();
    let client_addr: std::net::SocketAddr = "198.51.100.1:5000".parse().unwrap();
    let now = crate::Instant::ZERO;
    client.connect(now, &cc, second, "localhost").unwrap();
    let mut buf = Vec::new();
    let t = client.poll_transmit(now, &mut buf).unwrap();
    let mut initial = buf[..t.size].to_vec();
    server.handle_datagram(now, second, client_addr, None, &mut initial);
    let mut out = Vec::new();
    let answer = server.poll_transmit(now, &mut out).expect("the server answers");
    assert_eq!(answer.destination, client_addr);
    assert_eq!(answer.source, Some(second));
}
