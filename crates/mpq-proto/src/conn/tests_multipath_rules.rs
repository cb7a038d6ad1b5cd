//! Multipath rules of draft-ietf-quic-multipath-21 that concern edge cases rather than the
//! main flow: 1-RTT packets that overtake the handshake, the last path going away, late
//! frames for paths whose state is gone, limits a peer can push against.

use std::time::Duration;

use super::tests::{client, run_upload, server_error, transport_code};
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
    // Had the server dropped the early 1-RTT packets, the client would have lost them.
    let lost: u64 = client(&mut pair).stats().paths.iter().map(|p| p.lost_packets).sum();
    assert_eq!(lost, 0, "the server processed the 1-RTT packets it kept");
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
    assert!(pair.run_until(Duration::from_secs(2), |p| {
        let mut done = false;
        while let Some((_, e)) = p.client.poll_event() {
            done |= e == Event::HandshakeConfirmed;
        }
        done
    }));
    assert!(client(&mut pair).is_multipath());
    pair
}

fn is_no_error(e: &Option<ConnectionError>) -> bool {
    matches!(e, Some(ConnectionError::ConnectionClosed(t) | ConnectionError::TransportError(t))
        if t.code == TransportErrorCode::NO_ERROR)
}

/// Abandoning the only path closes the connection, and the peer hears of it through a
/// CONNECTION_CLOSE on that path, not by timing out (§3.4).
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
    client(&mut pair).injected = buf;
    let start = pair.now;
    let (c, s) = run_to_close(&mut pair, Duration::from_secs(5));
    assert!(is_no_error(&s), "server: {s:?}");
    assert!(matches!(&c, Some(ConnectionError::ConnectionClosed(_))), "client: {c:?}");
    assert!(pair.now - start < Duration::from_millis(100), "the client learned late: {:?}", pair.now - start);
}
