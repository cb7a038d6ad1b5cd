//! Multipath rules of RFC 10069 that concern edge cases rather than the
//! main flow: 1-RTT packets that overtake the handshake, the last path going away, late
//! frames for paths whose state is gone, limits a peer can push against.

use std::time::Duration;

use super::tests::{client, confirm_handshake, run_upload, server_error, transport_code};
use super::tests_multipath::{addr2, open_path_when_allowed, open_second_path, server};
use super::*;
use crate::error::TransportErrorCode;
use crate::frame::Frame;
use crate::testing::Pair;

fn mp_config(max_path_id: u64) -> TransportConfig {
    TransportConfig { initial_max_path_id: Some(max_path_id), ..TransportConfig::default() }
}

/// The client's 1-RTT packets (full of PATH_NEW_CONNECTION_ID frames) reach the server
/// before the client's Finished: RFC 9001 §5.7 forbids processing them before the
/// handshake completes, so the server keeps them and processes them afterwards instead of
/// treating their multipath frames as a violation.
#[test]
fn one_rtt_packets_overtaking_the_finished_are_kept() {
    let mut pair = Pair::new(mp_config(7));
    let mut to_server = 0;
    pair.drop = Box::new(move |_, up| {
        if up {
            to_server += 1;
            // The client's second flight: its Finished (and whatever shares the datagram).
            return to_server == 2;
        }
        false
    });
    // The client fills its window with 1-RTT data the server may not acknowledge yet: the
    // Finished must still be resent (a Handshake probe is not congestion controlled).
    run_upload(&mut pair, 200_000, Duration::from_secs(10));
    assert!(client(&mut pair).is_multipath());
    // The dropped datagram also held the client's first 1-RTT packet (coalesced after the
    // Finished, RFC 9000 §12.2): that one is lost. Had the server dropped the 1-RTT packets
    // that overtook the resent Finished, the client would have lost those too.
    let lost: u64 = client(&mut pair).stats().paths.iter().map(|p| p.lost_packets).sum();
    assert_eq!(lost, 1, "the server processed the 1-RTT packets it kept");
}

/// A multipath client's request leaves with its Finished: the datagram is padded to 1200
/// bytes anyway (it holds an Initial ACK, RFC 9000 §14.1), and the 1-RTT packet with the
/// request and the client's connection IDs takes the padding's room. Written apart, that
/// packet waited for the pacer, one packet's time at the first RTT sample's pace (23 ms on
/// this 300 ms path), and the server's reply and every other path waited as long.
#[test]
fn the_request_leaves_with_the_finished() {
    for mp in [true, false] {
        let transport = if mp { mp_config(3) } else { TransportConfig::default() };
        let mut pair = Pair::new(transport);
        pair.latency = Duration::from_millis(150);
        let mut request = None;
        let (mut server_done, mut request_seen) = (None, None);
        pair.run_until(Duration::from_secs(2), |p| {
            let c = p.client.connection_mut(p.client_conn).expect("client");
            if request.is_none() && c.is_established() {
                let id = c.open_stream(Dir::Bi).expect("stream");
                assert_eq!(c.write(id, b"GET /20MB"), Ok(9));
                request = Some(id);
            }
            while p.client.poll_event().is_some() {}
            p.server.accept();
            while p.server.poll_event().is_some() {}
            let Some(&h) = p.server.handles().first() else { return false };
            let s = p.server.connection_mut(h).expect("server");
            if server_done.is_none() && s.is_established() {
                server_done = Some(p.now);
            }
            if request_seen.is_none() && s.accept_stream(Dir::Bi).is_some() {
                request_seen = Some(p.now);
            }
            request_seen.is_some()
        });
        assert_eq!(client(&mut pair).is_multipath(), mp);
        let (done, seen) = (server_done.expect("handshake"), request_seen.expect("request"));
        assert_eq!(seen, done, "multipath {mp}: the request came {:?} after the Finished", seen - done);
    }
}

/// Runs until both sides reported the end of the connection; returns (client, server) errors.
fn run_to_close(pair: &mut Pair, limit: Duration) -> (Option<ConnectionError>, Option<ConnectionError>) {
    let (mut c, mut s) = (None, None);
    pair.run_until(limit, |p| {
        while let Some((_, e)) = p.client.poll_event() {
            if let Event::ConnectionLost(e) = e {
                c = Some(e);
            }
        }
        while let Some((_, e)) = p.server.poll_event() {
            if let Event::ConnectionLost(e) = e {
                s = Some(e);
            }
        }
        c.is_some() && s.is_some()
    });
    (c, s)
}

fn confirmed_pair() -> Pair {
    let mut pair = Pair::new(mp_config(4));
    assert!(confirm_handshake(&mut pair));
    assert!(client(&mut pair).is_multipath());
    pair
}

fn is_no_error(e: &Option<ConnectionError>) -> bool {
    matches!(e, Some(ConnectionError::ConnectionClosed(t) | ConnectionError::TransportError(t))
        if t.code == TransportErrorCode::NO_ERROR)
}

/// Abandoning the only path closes the connection, and the peer hears of it through a
/// CONNECTION_CLOSE on that path, not by timing out (RFC 10069 §3.4).
#[test]
fn abandoning_the_last_path_sends_connection_close() {
    let mut pair = confirmed_pair();
    let now = pair.now;
    client(&mut pair).abandon_path(now, 0, 0).expect("abandon");
    let start = pair.now;
    let (c, s) = run_to_close(&mut pair, Duration::from_secs(5));
    assert!(is_no_error(&c), "client: {c:?}");
    assert!(matches!(&s, Some(ConnectionError::ConnectionClosed(_))), "server: {s:?}");
    assert!(pair.now - start < Duration::from_millis(100), "the server learned late: {:?}", pair.now - start);
}

/// A PATH_ABANDON from the peer for our last open path: we answer with CONNECTION_CLOSE.
#[test]
fn peer_abandoning_the_last_path_gets_connection_close() {
    let mut pair = confirmed_pair();
    let mut buf = Vec::new();
    Frame::PathAbandon { path_id: 0, error_code: 0 }.encode(&mut buf);
    client(&mut pair).shared.injected = buf;
    let start = pair.now;
    let (c, s) = run_to_close(&mut pair, Duration::from_secs(5));
    assert!(is_no_error(&s), "server: {s:?}");
    assert!(matches!(&c, Some(ConnectionError::ConnectionClosed(_))), "client: {c:?}");
    assert!(pair.now - start < Duration::from_millis(100), "the client learned late: {:?}", pair.now - start);
}

/// PATHS_BLOCKED names the limit in force: one above ours is a PROTOCOL_VIOLATION (RFC 10069 §4.7).
#[test]
fn paths_blocked_above_our_limit_is_a_violation() {
    let mut pair = confirmed_pair();
    let mut buf = Vec::new();
    Frame::PathsBlocked(5).encode(&mut buf);
    client(&mut pair).shared.injected = buf;
    assert_eq!(transport_code(server_error(&mut pair)), TransportErrorCode::PROTOCOL_VIOLATION.0);
}

/// Frames that name a path whose state is gone arrive late all the time (retransmissions,
/// reordering); they are ignored, not violations (RFC 10069 §4).
#[test]
fn late_frames_for_a_discarded_path_are_ignored() {
    let mut pair = Pair::new(mp_config(4));
    let id = open_second_path(&mut pair);
    let now = pair.now;
    client(&mut pair).abandon_path(now, id, 0).expect("abandon");
    // Three PTOs later both sides dropped the path's state.
    assert!(pair.run_until(Duration::from_secs(5), |p| {
        while p.client.poll_event().is_some() {}
        while p.server.poll_event().is_some() {}
        !server(p).path_ids().contains(&id) && !server(p).paths.iter().any(|q| q.id == id)
    }));
    let mut buf = Vec::new();
    Frame::PathCidsBlocked { path_id: id, next_seq: 3 }.encode(&mut buf);
    Frame::RetireConnectionId { path_id: Some(id), seq: 1 }.encode(&mut buf);
    Frame::PathStatus { path_id: id, seq: 9, backup: true }.encode(&mut buf);
    Frame::PathAbandon { path_id: id, error_code: 0 }.encode(&mut buf);
    client(&mut pair).shared.injected = buf;
    assert_eq!(server_error(&mut pair), None);
}

/// A PATH_ABANDON for a path ID that was never used closes that ID on both sides: the
/// server answers in kind, and the client's next path takes the following ID (RFC 10069 §3.4).
#[test]
fn abandoning_an_unused_path_id_closes_it_for_good() {
    let mut pair = confirmed_pair();
    let mut buf = Vec::new();
    Frame::PathAbandon { path_id: 1, error_code: 0 }.encode(&mut buf);
    client(&mut pair).shared.injected = buf;
    // The server's answer reaches the client, which drops its CIDs for path ID 1.
    assert!(pair.run_until(Duration::from_secs(1), |p| client(p).shared.closed_ids.contains(1)));
    assert!(server(&mut pair).shared.closed_ids.contains(1));
    let server_addr = pair.server_addr;
    assert_eq!(open_path_when_allowed(&mut pair, addr2(), server_addr, Duration::from_secs(2)), Some(2));
    assert!(pair.run_until(Duration::from_secs(2), |p| client(p).paths.iter().any(|q| q.id == 2 && q.is_active())));
}

/// A client whose own MAX_PATH_ID is the obstacle raises it (RFC 10069 §3.2.1) and opens the path once
/// the server issued CIDs for the new ID.
#[test]
fn client_raises_its_own_path_id_limit() {
    let client_cfg = mp_config(1);
    let server_cfg = mp_config(4);
    let mut pair = Pair::asymmetric(client_cfg, server_cfg);
    let first = open_second_path(&mut pair);
    assert_eq!(first, 1);
    let now = pair.now;
    let server_addr = pair.server_addr;
    let third: std::net::SocketAddr = "10.0.2.1:4433".parse().expect("addr");
    assert_eq!(
        client(&mut pair).open_path(now, Some(third), server_addr, PathStatus::Available),
        Err(PathError::NoConnectionId)
    );
    assert_eq!(open_path_when_allowed(&mut pair, third, server_addr, Duration::from_secs(2)), Some(2));
    assert_eq!(client(&mut pair).path_ids(), vec![0, 1, 2]);
}

fn path_stats(c: &Connection, id: u64) -> PathStats {
    c.stats().paths.into_iter().find(|p| p.path_id == id).expect("path stats")
}

/// Runs a 1 MB two-path upload with `cfg` on both sides; returns the server's stats of
/// paths 0 and 1.
fn two_path_upload(cfg: TransportConfig) -> (PathStats, PathStats) {
    let mut pair = Pair::new(cfg);
    open_second_path(&mut pair);
    run_upload(&mut pair, 1_000_000, Duration::from_secs(30));
    let s = server(&mut pair);
    (path_stats(s, 0), path_stats(s, 1))
}

/// `AckPolicy::AllPaths` puts every PATH_ACK on every path (the ACK duplication of "The
/// Packet Number Space Debate in Multipath QUIC", §3.2); the default keeps each on its own
/// path.
#[test]
fn all_paths_ack_policy_acknowledges_on_every_path() {
    let (p0, p1) = two_path_upload(TransportConfig { ack_policy: AckPolicy::AllPaths, ..mp_config(4) });
    assert!(p0.acks_for_other_paths > 0 && p1.acks_for_other_paths > 0, "{p0:?} {p1:?}");
    let (p0, p1) = two_path_upload(mp_config(4));
    assert_eq!((p0.acks_for_other_paths, p1.acks_for_other_paths), (0, 0));
}

/// With `flow_control_on_all_paths` (the default) the receiver's MAX_DATA and
/// MAX_STREAM_DATA also travel on the other path (as MPQUIC sends WINDOW_UPDATE frames on all
/// paths, De Coninck and Bonaventure, CoNEXT 2017, §3); without it they do not.
#[test]
fn flow_control_credit_is_copied_to_every_path() {
    let small = |on| {
        let mut cfg = TransportConfig { flow_control_on_all_paths: on, ..mp_config(4) };
        // Small windows so that the upload needs many updates.
        cfg.streams.receive_window = 64 * 1024;
        cfg.streams.stream_receive_window = 64 * 1024;
        cfg
    };
    let (p0, p1) = two_path_upload(small(true));
    assert!(p0.flow_control_copies + p1.flow_control_copies > 0, "{p0:?} {p1:?}");
    let (p0, p1) = two_path_upload(small(false));
    assert_eq!(p0.flow_control_copies + p1.flow_control_copies, 0);
}

/// Runs a 1 MB two-path upload over a link that treats ECN as `ecn`; returns the client's
/// stats of paths 0 and 1.
fn ecn_upload(ecn: crate::testing::PairEcn) -> (PathStats, PathStats) {
    let mut pair = Pair::new(mp_config(4));
    pair.ecn = ecn;
    open_second_path(&mut pair);
    run_upload(&mut pair, 1_000_000, Duration::from_secs(30));
    let c = client(&mut pair);
    (path_stats(c, 0), path_stats(c, 1))
}

/// ECN over PATH_ACK (0x3f): each path validates on its own counts (RFC 9000 §13.4.2).
#[test]
fn ecn_is_validated_per_path_through_path_acks() {
    let (p0, p1) = ecn_upload(crate::testing::PairEcn::Pass);
    assert_eq!((p0.ecn, p1.ecn), ("capable", "capable"));
    assert_eq!((p0.ecn_ce, p1.ecn_ce), (0, 0));
    // A network that clears the codepoint fails validation: marking stops.
    let (p0, p1) = ecn_upload(crate::testing::PairEcn::Bleach);
    assert_eq!((p0.ecn, p1.ecn), ("failed", "failed"));
}

/// CE marks are congestion signals without any loss (RFC 9002 §7.1).
#[test]
fn ce_marks_reduce_the_window_without_loss() {
    let (p0, p1) = ecn_upload(crate::testing::PairEcn::MarkCeEvery(40));
    for p in [&p0, &p1] {
        assert_eq!(p.ecn, "capable");
        assert!(p.ecn_ce > 0 && p.congestion_events > 0, "{p:?}");
        assert_eq!(p.lost_packets, 0);
    }
}

/// disable_active_migration forbids new paths to the server's handshake address, and only
/// to it (RFC 10069 §2.2).
#[test]
fn disable_active_migration_forbids_paths_to_the_handshake_address_only() {
    let server_cfg = TransportConfig { disable_active_migration: true, ..mp_config(4) };
    let mut pair = Pair::asymmetric(mp_config(4), server_cfg);
    assert!(confirm_handshake(&mut pair));
    let now = pair.now;
    let server_addr = pair.server_addr;
    assert_eq!(
        client(&mut pair).open_path(now, Some(addr2()), server_addr, PathStatus::Available),
        Err(PathError::MigrationDisabled)
    );
    let other: std::net::SocketAddr = "10.0.0.3:443".parse().expect("addr");
    assert_eq!(open_path_when_allowed(&mut pair, addr2(), other, Duration::from_secs(1)), Some(1));
}

/// The server's session tickets travel in 1-RTT CRYPTO frames on the connection's CRYPTO
/// stream (not a path's), and arrive whole.
#[test]
fn session_tickets_are_sent_and_received() {
    let mut pair = confirmed_pair();
    pair.run_until(Duration::from_millis(500), |_| false);
    let sent = server(&mut pair).shared.one_rtt_crypto.offsets().0;
    assert!(sent > 0, "rustls wrote no session ticket");
    assert!(server(&mut pair).shared.one_rtt_crypto.all_acked());
    assert_eq!(client(&mut pair).shared.one_rtt_crypto.offsets().1, sent);
}

/// A server with no room for another path abandons the client's new one at once
/// (PATH_RESOURCE_LIMIT_REACHED) instead of letting its validation time out. CIDs are only
/// issued for path IDs the server would accept, so here the server's limit shrinks after
/// it issued them (as under resource pressure).
#[test]
fn server_without_room_abandons_the_new_path() {
    let mut pair = Pair::new(mp_config(4));
    assert!(confirm_handshake(&mut pair));
    pair.run_until(Duration::from_millis(200), |_| false);
    let shrunk = TransportConfig { max_concurrent_paths: 1, ..(*server(&mut pair).shared.config).clone() };
    server(&mut pair).shared.config = std::sync::Arc::new(shrunk);
    let mut id = None;
    let server_addr = pair.server_addr;
    let mut abandoned = None;
    pair.run_until(Duration::from_secs(1), |p| {
        let now = p.now;
        while let Some((_, e)) = p.client.poll_event() {
            if let Event::Path(PathEvent::Abandoned { id, error_code, by_peer: true }) = e {
                abandoned = Some((id, error_code));
            }
        }
        id = id.or_else(|| client(p).open_path(now, Some(addr2()), server_addr, PathStatus::Available).ok());
        abandoned.is_some()
    });
    assert_eq!(abandoned, Some((1, 0x3e75)));
    assert_eq!(server(&mut pair).path_ids(), vec![0]);
}

/// After a NAT rebinding announced by a tiny packet, the anti-amplification limit keeps the
/// server's first PATH_CHALLENGE under 1200 bytes: the address is validated by the answer,
/// and a second, full-size challenge then checks the datagram size (RFC 9000 §8.2.1).
#[test]
fn small_challenge_is_followed_by_a_full_size_one() {
    let mut pair = confirmed_pair();
    pair.run_until(Duration::from_millis(300), |_| false);
    // The client's NAT picks a new port; its next packet is a lone PING. The old mapping
    // is gone: the server's challenge to the old address (RFC 9000 §9.3.3) goes nowhere.
    let old = pair.client_addr;
    pair.drop_addr = Box::new(move |_, dst| dst == old);
    pair.client_addr = "10.0.0.1:5555".parse().expect("addr");
    client(&mut pair).shared.injected = vec![0x01];
    let mut sizes = Vec::new();
    let mut last_sent = None;
    let new_addr = pair.client_addr;
    // Watch the server's challenges until the path is validated again.
    let validated = pair.run_until(Duration::from_secs(2), |p| {
        let s = server(p);
        if let Some(c) = s.paths[0].challenge.filter(|c| c.sent_at.is_some() && c.sent_at != last_sent) {
            last_sent = c.sent_at;
            sizes.push(c.full_size);
        }
        s.paths[0].remote == new_addr && s.paths[0].validated && s.paths[0].challenge.is_none()
    });
    assert!(validated, "the rebound path was not validated");
    assert!(sizes.contains(&false) && sizes.last() == Some(&true), "challenges (full size?): {sizes:?}");
    // Data flows on the new address.
    run_upload(&mut pair, 100_000, Duration::from_secs(5));
}
