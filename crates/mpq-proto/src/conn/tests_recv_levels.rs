//! Frames at an encryption level whose keys went away while their packet was processed.

use std::time::Duration;

use crate::cid::ConnectionId;
use crate::conn::TransportConfig;
use crate::frame::Frame;
use crate::testing::Pair;
use crate::types::Level;

/// A client's Handshake packet may carry, after its Finished, a CRYPTO frame repeating
/// handshake data. The server completes its handshake on Finished and drops its Handshake
/// keys (RFC 9001 §4.9.2) before it reaches that frame: the frame is dropped with its level,
/// not a PROTOCOL_VIOLATION that kills a good connection.
#[test]
fn crypto_after_finished_in_the_same_packet_is_dropped() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(pair.run_until(Duration::from_secs(2), |p| p.server.len() == 1
        && p.server.handles().iter().all(|&h| p.server.connection(h).is_some_and(|c| c.is_established()))));
    let h = pair.server.handles()[0];
    let now = pair.now;
    let s = pair.server.connection_mut(h).expect("server");
    assert!(s.shared.handshake.is_none(), "the server dropped its Handshake space on completion");
    let frame = Frame::Crypto { offset: 0, data: &[0x14, 0, 0, 4, 1, 2, 3, 4] };
    let (mut host, path) = s.host_for(0).expect("path 0");
    let r = host.on_frame(now, Level::Handshake, path, 0, &ConnectionId::EMPTY, frame);
    assert_eq!(r, Ok(()));
    assert!(!s.is_closed());
}
