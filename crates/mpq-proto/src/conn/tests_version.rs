//! QUIC versions over the in-memory pair: v2 end to end (RFC 9369), compatible version
//! negotiation from one version to the other (RFC 9368 §2.1, §2.3), Version Negotiation for
//! a version the server refuses, the checks of version_information (RFC 9368 §4), and the
//! greased QUIC Bit (RFC 9287).

use std::time::Duration;

use super::tests::{client, client_error, run_upload};
use super::*;
use crate::error::TransportErrorCode;
use crate::testing::Pair;
use crate::transport_params::VersionInformation;
use crate::{VERSION_1, VERSION_2};

/// A client starting in `initial` that accepts `versions`.
fn client_cfg(initial: u32, versions: &[u32]) -> TransportConfig {
    TransportConfig { initial_version: initial, versions: versions.to_vec(), ..TransportConfig::default() }
}

/// A server accepting `versions`; with `switch`, it moves connections to the first of them
/// the client offers.
fn server_cfg(versions: &[u32], switch: bool) -> TransportConfig {
    TransportConfig { versions: versions.to_vec(), prefer_server_version_order: switch, ..TransportConfig::default() }
}

/// Runs the handshake to confirmation; the negotiated version on (client, server).
fn negotiated(pair: &mut Pair) -> Option<(u32, u32)> {
    // Not accepting on the server: `run_upload` takes the connection from `accept` later.
    let ok = pair.run_until(Duration::from_secs(2), |p| {
        p.client.connection(p.client_conn).is_some_and(|c| c.shared.handshake_confirmed)
    });
    if !ok {
        return None;
    }
    let c = pair.client.connection(pair.client_conn)?.handshake_info()?.version;
    let s = server_conns(pair).find_map(|c| c.handshake_info().map(|i| i.version))?;
    Some((c, s))
}

/// The server's connections.
fn server_conns(pair: &Pair) -> impl Iterator<Item = &Connection> {
    pair.server.handles().into_iter().filter_map(|h| pair.server.connection(h))
}

/// The transport error code a connection ended with, if it did.
fn error_code(conn: Option<&Connection>) -> Option<u64> {
    match conn?.error()? {
        ConnectionError::TransportError(e) | ConnectionError::ConnectionClosed(e) => Some(e.code.0),
        _ => None,
    }
}

#[test]
fn v1_client_offering_v2_is_upgraded_by_a_server_preferring_v2() {
    // The defaults of a client: v1 first, v2 offered.
    let mut pair = Pair::asymmetric(TransportConfig::default(), server_cfg(&[VERSION_2, VERSION_1], true));
    assert_eq!(negotiated(&mut pair), Some((VERSION_2, VERSION_2)));
    let c = client(&mut pair);
    assert_eq!((c.shared.version.original, c.shared.version.current), (VERSION_1, VERSION_2));
}

#[test]
fn upgraded_connection_transfers_through_key_updates() {
    // Key updates derive the next keys with v2's "quicv2 ku" label (RFC 9369 §3.3.2); a
    // client upgraded from v1 derives them itself (crypto::version_keys): both sides agree.
    // (Updates are three PTOs apart, RFC 9001 §6.5: a short PTO lets the transfer cross
    // several.)
    let max_ack_delay = Duration::from_millis(1);
    let client_t = TransportConfig { key_update_interval: 200, max_ack_delay, ..TransportConfig::default() };
    let server_t =
        TransportConfig { key_update_interval: 200, max_ack_delay, ..server_cfg(&[VERSION_2, VERSION_1], true) };
    let mut pair = Pair::asymmetric(client_t, server_t);
    pair.latency = Duration::from_millis(1);
    run_upload(&mut pair, 20_000_000, Duration::from_secs(30));
    let c = client(&mut pair);
    assert_eq!(c.shared.version.current, VERSION_2);
    assert!(c.shared.one_rtt.as_ref().is_some_and(|k| k.current().epoch >= 2), "key updates happened");
}

#[test]
fn v2_only_on_both_sides() {
    let mut pair = Pair::asymmetric(client_cfg(VERSION_2, &[VERSION_2]), server_cfg(&[VERSION_2], false));
    assert_eq!(negotiated(&mut pair), Some((VERSION_2, VERSION_2)));
    run_upload(&mut pair, 200_000, Duration::from_secs(30));
}

#[test]
fn default_server_keeps_the_client_version() {
    let mut pair = Pair::new(TransportConfig::default());
    assert_eq!(negotiated(&mut pair), Some((VERSION_1, VERSION_1)));
    let mut pair = Pair::asymmetric(client_cfg(VERSION_2, &[VERSION_2, VERSION_1]), TransportConfig::default());
    assert_eq!(negotiated(&mut pair), Some((VERSION_2, VERSION_2)));
}

#[test]
fn client_preferring_v2_is_upgraded_by_a_default_server() {
    // Starts in v1 (any server speaks it) but ranks v2 first: a server that follows the
    // client's order (the default) moves it to v2.
    let mut pair = Pair::asymmetric(client_cfg(VERSION_1, &[VERSION_2, VERSION_1]), TransportConfig::default());
    assert_eq!(negotiated(&mut pair), Some((VERSION_2, VERSION_2)));
    let c = client(&mut pair);
    assert_eq!(c.shared.version.original, VERSION_1);
}

#[test]
fn server_preferring_v1_moves_a_v2_client_to_v1() {
    // Compatible negotiation works both ways (RFC 9369 §4); the client derives v1 keys from
    // a session made for v2.
    let mut pair =
        Pair::asymmetric(client_cfg(VERSION_2, &[VERSION_2, VERSION_1]), server_cfg(&[VERSION_1, VERSION_2], true));
    assert_eq!(negotiated(&mut pair), Some((VERSION_1, VERSION_1)));
    run_upload(&mut pair, 100_000, Duration::from_secs(30));
}

#[test]
fn server_does_not_upgrade_a_client_that_does_not_offer_v2() {
    let mut pair = Pair::asymmetric(client_cfg(VERSION_1, &[VERSION_1]), server_cfg(&[VERSION_2, VERSION_1], true));
    assert_eq!(negotiated(&mut pair), Some((VERSION_1, VERSION_1)));
}

#[test]
fn v2_only_server_answers_a_v1_only_client_with_version_negotiation() {
    let mut pair = Pair::asymmetric(client_cfg(VERSION_1, &[VERSION_1]), server_cfg(&[VERSION_2], false));
    assert_eq!(client_error(&mut pair, Duration::from_secs(2)), Some(ConnectionError::VersionMismatch));
    assert_eq!(server_conns(&pair).count(), 0, "no state for a refused version");
}

#[test]
fn server_claiming_another_chosen_version_is_a_version_negotiation_error() {
    // The server moves the connection to v2 but its version_information names v1: what a
    // downgrade by an attacker who rewrote the server's first packets would look like.
    let mut pair = Pair::asymmetric(TransportConfig::default(), server_cfg(&[VERSION_2, VERSION_1], true));
    pair.server
        .set_tp_version_override(Some(Some(VersionInformation { chosen: VERSION_1, available: vec![VERSION_1] })));
    assert_eq!(negotiated(&mut pair), None);
    let code = error_code(pair.client.connection(pair.client_conn));
    assert_eq!(code, Some(TransportErrorCode::VERSION_NEGOTIATION_ERROR.0));
}

#[test]
fn version_change_without_version_information_is_a_version_negotiation_error() {
    let mut pair = Pair::asymmetric(TransportConfig::default(), server_cfg(&[VERSION_2, VERSION_1], true));
    pair.server.set_tp_version_override(Some(None));
    assert_eq!(negotiated(&mut pair), None);
    let code = error_code(pair.client.connection(pair.client_conn));
    assert_eq!(code, Some(TransportErrorCode::VERSION_NEGOTIATION_ERROR.0));
}

#[test]
fn client_chosen_version_other_than_its_initial_is_a_version_negotiation_error() {
    let mut pair = Pair::new(TransportConfig::default());
    // A second connection whose version_information claims v2 while its Initial is v1.
    pair.client.set_tp_version_override(Some(Some(VersionInformation {
        chosen: VERSION_2,
        available: vec![VERSION_2, VERSION_1],
    })));
    let cc = pair.client_config.clone();
    pair.client_conn = pair.client.connect(pair.now, &cc, pair.server_addr, "localhost").unwrap();
    let mut server_code = None;
    pair.run_until(Duration::from_secs(2), |p| {
        p.server.accept();
        server_code = server_conns(p).find_map(|c| error_code(Some(c)));
        server_code.is_some()
    });
    assert_eq!(server_code, Some(TransportErrorCode::VERSION_NEGOTIATION_ERROR.0));
}

#[test]
fn a_forged_initial_in_another_version_does_not_move_the_client() {
    let mut pair = Pair::new(TransportConfig::default());
    // A v2 Initial that does not authenticate: the client must stay in v1 and settle only
    // on the server's real answer.
    let mut forged = vec![0xd0, 0x6b, 0x33, 0x43, 0xcf, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0x40, 40];
    forged.resize(18 + 40, 0x55);
    let (s, c) = (pair.server_addr, pair.client_addr);
    pair.inject(false, s, c, &mut forged);
    let conn = client(&mut pair);
    assert_eq!(conn.shared.version.current, VERSION_1);
    assert!(!conn.shared.version.settled);
    assert_eq!(negotiated(&mut pair), Some((VERSION_1, VERSION_1)));
}

/// How many of the short headers numbered 0..64 a path would send with the QUIC Bit 0.
fn greased_of_64(conn: &Connection, path_id: u64) -> usize {
    let path = conn.paths.iter().find(|p| p.id == path_id).expect("path");
    (0..64u64)
        .filter(|&pn| {
            let mut b = 0x40;
            path.grease_quic_bit(&mut b, pn);
            b & 0x40 == 0
        })
        .count()
}

#[test]
fn greased_quic_bit_is_sent_and_accepted_when_both_advertise_it() {
    let mut pair = Pair::new(TransportConfig::default());
    run_upload(&mut pair, 200_000, Duration::from_secs(30));
    let c = client(&mut pair);
    assert!(c.shared.peer_accepts_greased_bit());
    // About half of the short headers go out with the bit cleared; the transfer above needed
    // the receiver to accept them.
    let cleared = greased_of_64(c, 0);
    assert!((8..56).contains(&cleared), "cleared {cleared} of 64");
    // The server advertised it too: it dropped none of them.
    let h = pair.server.handles()[0];
    assert_eq!(pair.server.connection(h).unwrap().stats().dropped_packets, 0);
}

#[test]
fn a_cleared_quic_bit_is_dropped_by_a_receiver_that_did_not_advertise_grease() {
    let no_grease = TransportConfig { grease_quic_bit: false, ..TransportConfig::default() };
    let mut pair = Pair::asymmetric(TransportConfig::default(), no_grease);
    assert!(negotiated(&mut pair).is_some());
    let c = client(&mut pair);
    assert!(c.paths.iter().all(|p| p.grease.is_none()), "the server did not advertise it");
    // A client that greases anyway (not what RFC 9287 allows): about half its packets are
    // dropped (RFC 9000 §17.3.1: the fixed bit must be 1).
    c.paths.iter_mut().for_each(|p| p.grease = Some(7));
    // Each retransmission is a new packet number, greased or not at random: the upload
    // gets through, with drops.
    run_upload(&mut pair, 50_000, Duration::from_secs(60));
    let h = pair.server.handles()[0];
    let dropped = pair.server.connection(h).unwrap().stats().dropped_packets;
    assert!(dropped > 0, "greased packets were accepted");
}

#[test]
fn greased_quic_bit_on_every_multipath_path() {
    // A path opened after the handshake gets its own key; the server's accepted path too.
    let cfg = TransportConfig { initial_max_path_id: Some(4), ..TransportConfig::default() };
    let mut pair = Pair::new(cfg);
    let id = super::tests_multipath::open_second_path(&mut pair);
    assert!((8..56).contains(&greased_of_64(client(&mut pair), id)), "the client's new path greases");
    let h = pair.server.handles()[0];
    let s = pair.server.connection(h).unwrap();
    assert!((8..56).contains(&greased_of_64(s, id)), "the server's accepted path greases");
}

#[test]
fn quic_bit_is_kept_and_required_without_grease_quic_bit() {
    let no_grease = TransportConfig { grease_quic_bit: false, ..TransportConfig::default() };
    let mut pair = Pair::asymmetric(no_grease, TransportConfig::default());
    run_upload(&mut pair, 100_000, Duration::from_secs(30));
    // The client did not advertise it: the server never clears the bit.
    let h = pair.server.handles()[0];
    let s = pair.server.connection(h).unwrap();
    assert!(!s.shared.peer_accepts_greased_bit());
    assert_eq!(greased_of_64(s, 0), 0);
    // And a packet with the bit cleared is dropped by the client, which did not advertise it.
    assert!(!pair.client.connection(pair.client_conn).unwrap().shared.parse_options().allow_grease_quic_bit);
}

#[test]
fn transport_parameters_carry_one_reserved_parameter() {
    // RFC 9000 §18.1: reserved IDs 31 * N + 27 exercise the peer's duty to ignore unknown
    // parameters; ours has a random N and a random short value.
    let mut pair = Pair::new(TransportConfig::default());
    assert!(negotiated(&mut pair).is_some());
    let h = pair.server.handles()[0];
    let raw = pair.server.connection(h).unwrap().shared.tls.peer_transport_params().unwrap().to_vec();
    let mut r = crate::coding::Reader::new(&raw);
    let mut reserved = Vec::new();
    while !r.is_empty() {
        let id = r.varint().unwrap();
        let len = r.varint().unwrap() as usize;
        let val = r.bytes(len).unwrap();
        if id % 31 == 27 {
            reserved.push((id, val.len()));
        }
    }
    assert_eq!(reserved.len(), 1, "{reserved:?}");
    assert!(reserved[0].1 <= 8);
    let c = client(&mut pair);
    assert!(c.shared.peer_params.as_ref().unwrap().version_information.is_some());
}

/// A qlog sink the test keeps a handle on.
#[derive(Clone, Default)]
struct SharedSink(std::sync::Arc<std::sync::Mutex<Vec<(&'static str, serde_json::Value)>>>);

impl crate::qlog::QlogSink for SharedSink {
    fn emit(&mut self, _time: crate::time::Instant, name: &'static str, data: serde_json::Value) {
        self.0.lock().unwrap().push((name, data));
    }
}

#[test]
fn qlog_shows_the_negotiated_version() {
    let mut pair = Pair::asymmetric(TransportConfig::default(), server_cfg(&[VERSION_2, VERSION_1], true));
    let sink = SharedSink::default();
    client(&mut pair).set_qlog(Box::new(sink.clone()));
    assert_eq!(negotiated(&mut pair), Some((VERSION_2, VERSION_2)));
    let events = sink.0.lock().unwrap();
    let info = events.iter().find(|(n, _)| *n == "transport:version_information").expect("version_information");
    assert_eq!(info.1["chosen_version"], "6b3343cf");
    assert_eq!(info.1["client_versions"], serde_json::json!(["00000001", "6b3343cf"]));
    assert_eq!(info.1["server_versions"], serde_json::json!(["6b3343cf", "00000001"]));
    // Long headers name their version: the client's first Initial in v1, the rest in v2.
    let versions: Vec<&str> = events
        .iter()
        .filter(|(n, _)| n.starts_with("transport:packet_"))
        .filter_map(|(_, d)| d["header"]["version"].as_str())
        .collect();
    assert_eq!(versions.first(), Some(&"00000001"));
    assert!(versions.contains(&"6b3343cf"));
}
