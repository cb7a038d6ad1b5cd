//! Session resumption and 0-RTT over the in-memory pair: accepted early data delivered
//! exactly, declined early data sent again in 1-RTT, single-use tickets against replay,
//! junk 0-RTT packets, the remembered limits (RFC 9000 §7.4.1), no paths during 0-RTT, a
//! first flight held for the early data.

use std::sync::Arc;
use std::time::Duration;

use super::zero_rtt::{check_accepted_limits, ZeroRttState};
use super::*;
use crate::endpoint::{Endpoint, EndpointConfig};
use crate::error::TransportErrorCode;
use crate::packet::header::{write_long_header, LongType};
use crate::testing::{zero_rtt_configs, Pair};
use crate::types::Dir;

/// A first connection that completes and receives its session tickets.
pub(super) fn first_connection(cc: &ClientConfig, sc: &ServerConfig) {
    let mut pair = Pair::from_configs(cc, sc.clone());
    let h = pair.client_conn;
    assert!(pair.run_until(Duration::from_secs(2), |p| p.client.connection(h).is_some_and(|c| c.is_established())));
    // NewSessionTicket comes after the handshake, in 1-RTT CRYPTO frames.
    pair.run_until(Duration::from_millis(200), |_| false);
    assert_eq!(pair.client.connection(h).map(|c| c.zero_rtt_state()), Some(ZeroRttState::NotAttempted));
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 253) as u8).collect()
}

/// Opens a unidirectional stream on the client before anything was sent, writes `bytes`
/// and finishes it: with 0-RTT keys the data leaves in the first flight.
fn write_early(pair: &mut Pair, bytes: &[u8]) -> StreamId {
    let h = pair.client_conn;
    let c = pair.client.connection_mut(h).expect("client");
    let id = c.open_stream(Dir::Uni).expect("the remembered limits allow a stream");
    assert_eq!(c.write(id, bytes).expect("write"), bytes.len());
    c.finish(id).expect("finish");
    id
}

/// Runs until the server read a whole unidirectional stream; returns the bytes and
/// whether the server's handshake was still incomplete when the first bytes came.
/// Runs until the client knows what became of its 0-RTT (the server's EncryptedExtensions
/// say; all the early data can reach the server before that arrives).
pub(super) fn client_learns_the_outcome(pair: &mut Pair) {
    pair.run_until(Duration::from_secs(2), |p| {
        p.client.connection(p.client_conn).is_some_and(|c| c.zero_rtt_state() != ZeroRttState::Pending)
    });
}

fn server_reads(pair: &mut Pair, limit: Duration) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let mut early = None;
    let mut stream = None;
    let mut fin = false;
    pair.run_until(limit, |p| {
        let Some(sh) = p.server.handles().first().copied() else { return false };
        let Some(s) = p.server.connection_mut(sh) else { return false };
        if stream.is_none() {
            stream = s.accept_stream(Dir::Uni);
        }
        if let Some(id) = stream {
            let mut buf = vec![0u8; 65536];
            while let Ok(r) = s.read(id, &mut buf) {
                if r.len > 0 && early.is_none() {
                    early = Some(s.is_handshaking());
                }
                got.extend_from_slice(&buf[..r.len]);
                if r.fin {
                    fin = true;
                }
                if r.len == 0 {
                    break;
                }
            }
        }
        fin
    });
    assert!(fin, "the server did not read the whole stream ({} bytes)", got.len());
    (got, early.unwrap_or(false))
}

/// The client's datagrams ready now (its first flight), one by one.
pub(super) fn client_flight(pair: &mut Pair) -> Vec<Vec<u8>> {
    let mut flight = Vec::new();
    let mut buf = Vec::new();
    while let Some(t) = pair.client.poll_transmit(pair.now, &mut buf) {
        let seg = t.segment_size.unwrap_or(t.size);
        flight.extend(buf[..t.size].chunks(seg).map(<[u8]>::to_vec));
    }
    flight
}

fn server_conn(pair: &Pair) -> &Connection {
    let sh = pair.server.handles()[0];
    pair.server.connection(sh).expect("server")
}

/// Resumption with 0-RTT: the data written before the handshake goes in 0-RTT packets,
/// reaches the server's application before the server's handshake completes, byte for
/// byte, and both sides report the early data accepted.
#[test]
fn zero_rtt_accepted_delivers_the_bytes_exactly() {
    let (cc, sc) = zero_rtt_configs(TransportConfig::default());
    first_connection(&cc, &sc);
    let mut pair = Pair::from_configs(&cc, sc);
    assert_eq!(pair.client.connection(pair.client_conn).map(|c| c.zero_rtt_state()), Some(ZeroRttState::Pending));
    let sent = data(6000);
    write_early(&mut pair, &sent);
    let (got, early) = server_reads(&mut pair, Duration::from_secs(2));
    assert_eq!(got, sent);
    assert!(early, "the data should have arrived in 0-RTT, before the server's handshake completed");
    assert_eq!(server_conn(&pair).zero_rtt_state(), ZeroRttState::Accepted);
    client_learns_the_outcome(&mut pair);
    let c = pair.client.connection(pair.client_conn).expect("client");
    assert_eq!(c.zero_rtt_state(), ZeroRttState::Accepted);
    let info = c.handshake_info().expect("info");
    assert!(info.resumed && info.early_data == ZeroRttState::Accepted, "{info}");
}

/// A server that declines early data (here: configured without it, sharing the ticket
/// store): the client's 0-RTT packets are lost, their data goes again in 1-RTT and arrives
/// exactly once.
#[test]
fn zero_rtt_rejected_data_is_sent_again_in_one_rtt() {
    let (cc, sc) = zero_rtt_configs(TransportConfig::default());
    first_connection(&cc, &sc);
    let mut tls = (*sc.tls).clone();
    tls.max_early_data_size = 0;
    let declining = ServerConfig { tls: Arc::new(tls), transport: sc.transport.clone() };
    let mut pair = Pair::from_configs(&cc, declining);
    let sent = data(9000);
    write_early(&mut pair, &sent);
    let (got, early) = server_reads(&mut pair, Duration::from_secs(3));
    assert_eq!(got, sent);
    assert!(!early, "declined 0-RTT data cannot arrive before the handshake");
    let c = pair.client.connection(pair.client_conn).expect("client");
    assert_eq!(c.zero_rtt_state(), ZeroRttState::Rejected);
    assert!(c.handshake_info().is_some_and(|i| i.resumed), "still a resumed session");
    assert_eq!(server_conn(&pair).zero_rtt_state(), ZeroRttState::NotAttempted);
    assert!(server_conn(&pair).stats().dropped_packets > 0, "the 0-RTT packets were dropped");
    // Requeued when the server's answer came, not found lost by loss detection: no loss
    // declared, no congestion signal (RFC 9002 §6.4). (Before this was checked, a declined
    // 0-RTT flight stayed in flight until the packet threshold or a PTO declared it lost.)
    let p0 = pair.client.connection(pair.client_conn).expect("client").stats().paths[0].clone();
    assert_eq!((p0.lost_packets, p0.congestion_events), (0, 0), "{p0:?}");
}

/// Tickets are single use (RFC 8446 §8.1): a first flight replayed to a server sharing the
/// ticket store (another instance, or the same after its first use) resumes nothing and
/// its 0-RTT stream data never reaches the application.
#[test]
fn replayed_zero_rtt_is_rejected() {
    let (cc, sc) = zero_rtt_configs(TransportConfig::default());
    first_connection(&cc, &sc);
    let mut pair = Pair::from_configs(&cc, sc.clone());
    let sent = data(500);
    write_early(&mut pair, &sent);
    // Capture the client's first flight, deliver it, and keep a copy to replay.
    let flight = client_flight(&mut pair);
    assert!(!flight.is_empty());
    for d in flight.clone() {
        let mut d = d;
        let (now, s, c) = (pair.now, pair.server_addr, pair.client_addr);
        pair.server.handle_datagram(now, s, c, None, &mut d);
    }
    let (got, _) = server_reads(&mut pair, Duration::from_secs(2));
    assert_eq!(got, sent);
    assert_eq!(server_conn(&pair).zero_rtt_state(), ZeroRttState::Accepted);
    // The replay, to a second server instance with the same TLS configuration.
    let mut other = Endpoint::new(EndpointConfig::with_seed(9), Some(sc));
    for mut d in flight {
        other.handle_datagram(pair.now, pair.server_addr, pair.client_addr, None, &mut d);
    }
    let h = other.handles()[0];
    let conn = other.connection_mut(h).expect("replayed connection");
    assert_eq!(conn.zero_rtt_state(), ZeroRttState::NotAttempted);
    assert!(conn.accept_stream(Dir::Uni).is_none(), "replayed 0-RTT data reached the application");
}

/// 0-RTT packets that are junk (undecryptable, a Length past the datagram, cut short, of
/// a connection that has no 0-RTT keys) are dropped without harm.
#[test]
fn junk_zero_rtt_packets_are_dropped() {
    let (cc, sc) = zero_rtt_configs(TransportConfig::default());
    first_connection(&cc, &sc);
    let mut pair = Pair::from_configs(&cc, sc);
    write_early(&mut pair, &data(100));
    assert!(pair.run_until(Duration::from_secs(1), |p| !p.server.handles().is_empty()));
    let dcid = {
        let sh = pair.server.handles()[0];
        pair.server.connection(sh).expect("server").orig_dst_cid()
    };
    let scid = crate::cid::ConnectionId::new(&[7; 8]);
    let (s, c) = (pair.server_addr, pair.client_addr);
    for (i, payload_len) in [0usize, 1, 20, 1100, 4000].into_iter().enumerate() {
        let mut d = Vec::new();
        let o = write_long_header(&mut d, LongType::ZeroRtt, crate::VERSION_1, &dcid, &scid, &[], i as u64, 2);
        d.resize(d.len() + payload_len, 0xa5);
        if payload_len == 20 {
            // A Length that claims more than the datagram holds.
            d[o.len_offset] = 0x7f;
            d[o.len_offset + 1] = 0xff;
        }
        let mut cut = d.clone();
        cut.truncate(cut.len() / 2);
        pair.inject(true, c, s, &mut d);
        pair.inject(true, c, s, &mut cut);
        // To the client too: a client never accepts 0-RTT.
        let mut to_client = d.clone();
        pair.inject(false, s, c, &mut to_client);
    }
    for _ in 0..100 {
        let mut d = Vec::new();
        write_long_header(&mut d, LongType::ZeroRtt, crate::VERSION_1, &dcid, &scid, &[], 1, 2);
        d.resize(d.len() + 1000, 1);
        pair.inject(true, c, s, &mut d);
    }
    // The connection is unharmed: the real early data still arrives.
    let (got, _) = server_reads(&mut pair, Duration::from_secs(3));
    assert_eq!(got, data(100));
}

/// RFC 9000 §7.4.1: a server that accepts 0-RTT must not lower the limits the client
/// remembered; the client closes with PROTOCOL_VIOLATION when it does.
#[test]
fn reduced_limits_after_accepted_zero_rtt_close_the_connection() {
    let (cc, sc) = zero_rtt_configs(TransportConfig::default());
    first_connection(&cc, &sc);
    let mut smaller = TransportConfig::default();
    smaller.streams.receive_window /= 2;
    let lowered = ServerConfig { tls: sc.tls.clone(), transport: Arc::new(smaller) };
    let mut pair = Pair::from_configs(&cc, lowered);
    write_early(&mut pair, &data(100));
    let h = pair.client_conn;
    assert!(pair.run_until(Duration::from_secs(2), |p| p.client.connection(h).is_some_and(|c| c.is_closed())));
    let c = pair.client.connection(h).expect("client");
    match c.error() {
        Some(ConnectionError::TransportError(e)) => {
            assert_eq!(e.code, TransportErrorCode::PROTOCOL_VIOLATION, "{e}");
            assert!(e.reason.contains("initial_max_data"), "{e}");
        }
        other => panic!("expected a PROTOCOL_VIOLATION, got {other:?}"),
    }
}

/// The check itself: every remembered limit, and nothing else (initial_max_path_id is not
/// remembered, RFC 10069 §2.1).
#[test]
fn remembered_limits_check() {
    let old = crate::transport_params::TransportParameters {
        initial_max_data: 100,
        initial_max_streams_uni: 3,
        max_datagram_frame_size: 1200,
        initial_max_path_id: Some(4),
        ..Default::default()
    };
    let mut new = old.clone();
    new.initial_max_path_id = None;
    new.initial_max_data = 200;
    assert!(check_accepted_limits(&old, &new).is_ok());
    for f in [
        |t: &mut crate::transport_params::TransportParameters| t.initial_max_streams_uni = 2,
        |t: &mut crate::transport_params::TransportParameters| t.max_datagram_frame_size = 0,
        |t: &mut crate::transport_params::TransportParameters| t.initial_max_data = 99,
    ] {
        let mut lower = new.clone();
        f(&mut lower);
        let e = check_accepted_limits(&old, &lower).expect_err("a lowered limit");
        assert_eq!(e.code, TransportErrorCode::PROTOCOL_VIOLATION);
    }
}

/// Multipath: no path is opened during 0-RTT (RFC 10069 §2: the multipath parameters are
/// not remembered, and paths wait for the completed handshake); after it, as usual.
#[test]
fn no_new_paths_during_zero_rtt() {
    let cfg = TransportConfig { initial_max_path_id: Some(2), ..TransportConfig::default() };
    let (cc, sc) = zero_rtt_configs(cfg);
    first_connection(&cc, &sc);
    let mut pair = Pair::from_configs(&cc, sc);
    write_early(&mut pair, &data(10));
    let (now, remote) = (pair.now, pair.server_addr);
    let local: std::net::SocketAddr = "10.0.1.1:4433".parse().expect("addr");
    let c = pair.client.connection_mut(pair.client_conn).expect("client");
    assert_eq!(c.zero_rtt_state(), ZeroRttState::Pending);
    assert_eq!(c.open_path(now, Some(local), remote, PathStatus::Available), Err(PathError::MultipathNotNegotiated));
    let (got, _) = server_reads(&mut pair, Duration::from_secs(2));
    assert_eq!(got, data(10));
    pair.run_until(Duration::from_millis(100), |_| false);
    let now = pair.now;
    let c = pair.client.connection_mut(pair.client_conn).expect("client");
    assert!(c.open_path(now, Some(local), remote, PathStatus::Available).is_ok());
}

/// A server that answers the first flight with a Retry kept nothing of it: the client's
/// 0-RTT data goes again, in 0-RTT packets to the Retry's connection ID (RFC 9000
/// §17.2.5.3), and is accepted there.
#[test]
fn zero_rtt_goes_again_after_a_retry() {
    let (cc, sc) = zero_rtt_configs(TransportConfig::default());
    first_connection(&cc, &sc);
    let mut pair = Pair::from_configs(&cc, sc);
    pair.server.set_retry_mode(crate::token::RetryMode::Always);
    let sent = data(3000);
    write_early(&mut pair, &sent);
    let (got, early) = server_reads(&mut pair, Duration::from_secs(2));
    assert_eq!(got, sent);
    assert!(early, "the data should have arrived in 0-RTT after the Retry");
    assert_eq!(server_conn(&pair).zero_rtt_state(), ZeroRttState::Accepted);
    client_learns_the_outcome(&mut pair);
    let c = pair.client.connection(pair.client_conn).expect("client");
    assert!(c.shared.tokens.retry_scid.is_some(), "no Retry happened");
    assert_eq!(c.zero_rtt_state(), ZeroRttState::Accepted);
}

/// A server that moves the connection to another version (compatible version negotiation,
/// RFC 9368) declines the early data sealed with the first version's keys; the client
/// sends it again in 1-RTT. (The ticket comes from a connection the server kept in v1: one
/// it moved to v2 issues tickets without early data.)
#[test]
fn zero_rtt_is_declined_across_a_version_change() {
    let (cc, sc) = zero_rtt_configs(TransportConfig::default());
    first_connection(&cc, &sc);
    let server_t = TransportConfig {
        versions: vec![crate::VERSION_2, crate::VERSION_1],
        prefer_server_version_order: true,
        ..TransportConfig::default()
    };
    let switching = ServerConfig { tls: sc.tls.clone(), transport: Arc::new(server_t) };
    let mut pair = Pair::from_configs(&cc, switching);
    assert_eq!(pair.client.connection(pair.client_conn).map(|c| c.zero_rtt_state()), Some(ZeroRttState::Pending));
    let sent = data(2000);
    write_early(&mut pair, &sent);
    let (got, _) = server_reads(&mut pair, Duration::from_secs(3));
    assert_eq!(got, sent);
    let c = pair.client.connection(pair.client_conn).expect("client");
    assert_eq!(c.handshake_info().map(|i| i.version), Some(crate::VERSION_2));
    assert_eq!(c.zero_rtt_state(), ZeroRttState::Rejected);
    assert_eq!(server_conn(&pair).zero_rtt_state(), ZeroRttState::NotAttempted);
}

/// 0-RTT packets that arrive before TLS has read the whole ClientHello (here a ClientHello
/// made to span two datagrams) are held, at most 16: a flood of them is dropped past the
/// bound, the real 0-RTT packet with it, whose data the client then sends again.
#[test]
fn zero_rtt_held_before_the_client_hello_is_bounded() {
    let (mut cc, sc) = zero_rtt_configs(TransportConfig::default());
    let mut tls = (*cc.tls).clone();
    // Many ALPN names: a ClientHello larger than one Initial datagram.
    tls.alpn_protocols.extend((0..80).map(|i| format!("unused-protocol-name-{i:03}").into_bytes()));
    cc.tls = Arc::new(tls);
    first_connection(&cc, &sc);
    let mut pair = Pair::from_configs(&cc, sc);
    let sent = data(700);
    write_early(&mut pair, &sent);
    let mut flight = client_flight(&mut pair);
    assert!(flight.len() >= 2, "the ClientHello should span two datagrams");
    let (s, c) = (pair.server_addr, pair.client_addr);
    let mut first = flight.remove(0);
    pair.inject(true, c, s, &mut first);
    let dcid = server_conn(&pair).orig_dst_cid();
    assert!(!server_conn(&pair).shared.zero_rtt.decided, "TLS has read only part of the ClientHello");
    let scid = crate::cid::ConnectionId::new(&[7; 8]);
    for pn in 0..100u64 {
        let mut d = Vec::new();
        let o = write_long_header(&mut d, LongType::ZeroRtt, crate::VERSION_1, &dcid, &scid, &[], pn, 2);
        d.resize(d.len() + 1000, 1);
        let len = (d.len() - o.pn_offset) as u16 | 0x4000;
        d[o.len_offset..o.len_offset + 2].copy_from_slice(&len.to_be_bytes());
        pair.inject(true, c, s, &mut d);
        let held = server_conn(&pair).shared.zero_rtt_held();
        assert!(held <= 16, "{held} 0-RTT packets held");
    }
    for mut d in flight {
        pair.inject(true, c, s, &mut d);
    }
    // The rest of the ClientHello (the client sends it as its pacer allows).
    assert!(pair.run_until(Duration::from_secs(1), |p| server_conn(p).shared.zero_rtt.decided));
    assert_eq!(server_conn(&pair).shared.zero_rtt_held(), 0, "held packets are opened or dropped once TLS decided");
    let (got, _) = server_reads(&mut pair, Duration::from_secs(3));
    assert_eq!(got, sent);
}

/// A held first flight (`hold_first_flight`, what a runtime on another thread uses) sends
/// nothing, not even the ClientHello, however long it waits; once let go, the early data
/// written meanwhile leaves with it in 0-RTT. Holding after anything was sent is ignored.
#[test]
fn a_held_first_flight_waits_for_the_early_data() {
    let (cc, sc) = zero_rtt_configs(TransportConfig::default());
    first_connection(&cc, &sc);
    let mut pair = Pair::from_configs(&cc, sc);
    let h = pair.client_conn;
    pair.client.connection_mut(h).expect("client").hold_first_flight(true);
    assert!(pair.client.connection(h).is_some_and(|c| c.first_flight_held()));
    pair.run_until(Duration::from_millis(500), |_| false);
    assert!(pair.server.handles().is_empty(), "the server heard of a held connection");
    let sent = data(3000);
    write_early(&mut pair, &sent);
    pair.client.connection_mut(h).expect("client").hold_first_flight(false);
    let (got, early) = server_reads(&mut pair, Duration::from_secs(2));
    assert_eq!(got, sent);
    assert!(early, "the early data should have left with the ClientHello, in 0-RTT");
    let c = pair.client.connection_mut(h).expect("client");
    c.hold_first_flight(true);
    assert!(!c.first_flight_held(), "a connection that sent cannot be held");
}

/// A runtime with a thread per path asks each path what it sends
/// (`poll_path_transmit`): a held first flight sends nothing that way either, and the
/// connection does not ask to be woken for it; let go, path 0 sends the ClientHello.
#[test]
fn a_held_first_flight_is_held_on_the_per_path_entry_too() {
    let (cc, sc) = zero_rtt_configs(TransportConfig::default());
    first_connection(&cc, &sc);
    let mut pair = Pair::from_configs(&cc, sc);
    let (h, now) = (pair.client_conn, pair.now);
    let c = pair.client.connection_mut(h).expect("client");
    c.hold_first_flight(true);
    let mut buf = Vec::new();
    assert!(matches!(c.poll_path_transmit(now, 0, &mut buf), PathTransmit::Idle));
    assert!(buf.is_empty());
    let id = c.open_stream(Dir::Bi).expect("stream");
    c.write(id, b"early").expect("write");
    assert!(!c.wants_to_send(), "a held flight has nothing to wake a path thread for");
    c.hold_first_flight(false);
    assert!(c.wants_to_send());
    match c.poll_path_transmit(now, 0, &mut buf) {
        PathTransmit::Ready(t) => assert!(t.size >= 1200, "the Initial is padded: {}", t.size),
        PathTransmit::Batch(_) => {}
        _ => panic!("the ClientHello should leave once let go"),
    }
}
