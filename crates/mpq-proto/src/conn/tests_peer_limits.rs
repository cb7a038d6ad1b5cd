//! What a hostile peer can make a connection spend (issue H): path IDs it burns without
//! using them, per-path tables, retired CIDs, CONNECTION_CLOSE answers while closing.
//! Each test counts work or table sizes, never wall time.

use std::time::Duration;

use super::multipath::{UNUSED_PATH_ID_ALLOWANCE, UNUSED_PATH_ID_REFILL};
use super::tests::{client, confirm_handshake};
use super::tests_multipath::server;
use super::*;
use crate::error::TransportErrorCode;
use crate::frame::Frame;
use crate::testing::Pair;

fn mp_pair() -> Pair {
    let cfg = TransportConfig { initial_max_path_id: Some(4), ..TransportConfig::default() };
    let mut pair = Pair::new(cfg);
    assert!(confirm_handshake(&mut pair));
    assert!(client(&mut pair).is_multipath());
    pair
}

/// Sends `frames` from the client in its next 1-RTT packet and lets the server handle it.
fn inject(pair: &mut Pair, frames: Vec<u8>) {
    client(pair).shared.injected = frames;
    pair.run_until(Duration::from_millis(100), |p| client(p).shared.injected.is_empty());
    // One more one-way latency: the packet reaches the server.
    let until = pair.now + Duration::from_millis(15);
    pair.run_until(Duration::from_millis(15), |p| p.now >= until);
}

/// A peer sends PATH_ABANDON for every path ID we allow without ever using one (8000
/// frames in all, as fast as MAX_PATH_ID lets it). Each used to raise MAX_PATH_ID and
/// issue four fresh CIDs, without end (and 10.7 s of CPU for 8000 frames in a debug
/// build). Now the connection closes with PROTOCOL_VIOLATION once the peer is past its
/// allowance, having issued a bounded number of CIDs.
#[test]
fn burning_unused_path_ids_closes_the_connection() {
    let mut pair = mp_pair();
    let issued_before = server(&mut pair).shared.mp.cids_issued;
    let mut next = 1;
    let mut sent = 0;
    while sent < 8000 && !server(&mut pair).is_closed() {
        let max = server(&mut pair).shared.mp.local_max;
        let mut buf = Vec::new();
        while next <= max && buf.len() < 1000 {
            Frame::PathAbandon { path_id: next, error_code: 0 }.encode(&mut buf);
            next += 1;
            sent += 1;
        }
        assert!(!buf.is_empty(), "the server stopped raising MAX_PATH_ID at {max} without closing");
        inject(&mut pair, buf);
    }
    let s = server(&mut pair);
    assert!(s.is_closed(), "still open after {sent} PATH_ABANDON frames");
    match s.error() {
        Some(ConnectionError::TransportError(t)) => assert_eq!(t.code, TransportErrorCode::PROTOCOL_VIOLATION),
        e => panic!("closed with {e:?}"),
    }
    // One path used (path 0): the allowance plus one, then the violation.
    assert!(s.shared.mp.unused_closed <= UNUSED_PATH_ID_ALLOWANCE + 2, "{} IDs burnt", s.shared.mp.unused_closed);
    let issued = s.shared.mp.cids_issued - issued_before;
    assert!(issued <= 4 * (UNUSED_PATH_ID_ALLOWANCE + 2), "{issued} CIDs issued for {sent} frames");
    assert!(sent < 200, "{sent} frames before the close");
}

/// A client retrying a path over a dead interface burns a path ID per attempt that the
/// server never sees used (none of its packets arrive), one every few seconds (backoff
/// plus validation timeout): that is no abuse, and the connection lives on well past the
/// burst allowance.
#[test]
fn slowly_burnt_path_ids_are_not_abuse() {
    let mut pair = mp_pair();
    let attempts = 3 * UNUSED_PATH_ID_ALLOWANCE;
    for id in 1..=attempts {
        // Nothing is scheduled in between on an idle connection: jump.
        let wait = pair.now + 3 * UNUSED_PATH_ID_REFILL;
        pair.run_until(Duration::from_secs(10), |p| p.now >= wait);
        pair.now = pair.now.max(wait);
        let mut buf = Vec::new();
        Frame::PathAbandon { path_id: id, error_code: 0 }.encode(&mut buf);
        inject(&mut pair, buf);
        let s = server(&mut pair);
        assert!(!s.is_closed(), "closed after {id} attempts: {:?}", s.error());
    }
    assert_eq!(server(&mut pair).shared.mp.unused_closed, attempts);
}

/// PATH_STATUS frames for every path ID we allow, each ID then abandoned unused: the
/// status table keeps only IDs still usable (it used to gain an entry per ID for good).
#[test]
fn path_status_table_forgets_closed_path_ids() {
    let mut pair = mp_pair();
    let mut next = 1;
    for seq in 0..UNUSED_PATH_ID_ALLOWANCE / 4 {
        let max = server(&mut pair).shared.mp.local_max;
        let mut buf = Vec::new();
        for id in next..=max {
            Frame::PathStatus { path_id: id, seq, backup: true }.encode(&mut buf);
        }
        for id in next..=max.min(next + 3) {
            Frame::PathAbandon { path_id: id, error_code: 0 }.encode(&mut buf);
        }
        next = max.min(next + 3) + 1;
        inject(&mut pair, buf);
        let s = server(&mut pair);
        assert!(!s.is_closed(), "closed: {:?}", s.error());
        for id in s.shared.mp.peer_status.keys() {
            assert!(!s.shared.closed_ids.contains(*id), "status kept for closed path ID {id}");
        }
        assert!(s.shared.mp.peer_status.len() <= 4, "{} status entries", s.shared.mp.peer_status.len());
    }
    assert!(server(&mut pair).shared.closed_ids.len() >= UNUSED_PATH_ID_ALLOWANCE - 4);
}

/// CRYPTO frames that overlap over and over, then one that ends past the 64 KiB buffered
/// at a level: CRYPTO_BUFFER_EXCEEDED (RFC 9000 §7.5), through the whole receive path (the
/// reassembly itself is tested in space.rs). 1-RTT CRYPTO, which a server never expects
/// from a client but must take.
#[test]
fn crypto_beyond_the_buffer_limit_closes_the_connection() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    let junk = [0x42u8; 40];
    let mut buf = Vec::new();
    for k in 0..20u64 {
        Frame::Crypto { offset: 30_000 + k, data: &junk }.encode(&mut buf);
    }
    inject(&mut pair, buf);
    assert!(!server(&mut pair).is_closed());
    assert_eq!(server(&mut pair).shared.one_rtt_crypto.recv_buffered(), 59, "overlaps held once");
    let mut buf = Vec::new();
    Frame::Crypto { offset: 64 * 1024 - 10, data: &junk }.encode(&mut buf);
    client(&mut pair).shared.injected = buf;
    let code = super::tests::transport_code(super::tests::server_error(&mut pair));
    assert_eq!(code, TransportErrorCode::CRYPTO_BUFFER_EXCEEDED.0);
}
