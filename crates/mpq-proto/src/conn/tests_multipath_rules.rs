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
