//! DATAGRAM frames in 0-RTT (RFC 9221 §3): a client that resumed with early data sends
//! datagrams under the max_datagram_frame_size remembered with the ticket; without one it
//! may not; a server that declines the early data gets none of them, and what waited is
//! dropped when the new limit does not allow it.

use std::sync::Arc;
use std::time::Duration;

use super::tests_zero_rtt::{client_flight, client_learns_the_outcome, first_connection};
use super::zero_rtt::ZeroRttState;
use super::*;
use crate::testing::{zero_rtt_configs, Pair};

fn dg_config() -> TransportConfig {
    TransportConfig { datagrams: DatagramConfig::enabled(), ..TransportConfig::default() }
}

fn client_conn(pair: &mut Pair) -> &mut Connection {
    let h = pair.client_conn;
    pair.client.connection_mut(h).expect("client")
}

/// Runs until `until` holds or `limit` passes, collecting the server's datagrams with
/// whether its handshake was still incomplete when each was read.
fn run_collect(pair: &mut Pair, limit: Duration, got: &mut Vec<(Vec<u8>, bool)>, until: impl Fn(&Pair) -> bool) {
    pair.run_until(limit, |p| {
        for &sh in p.server.handles().to_vec().iter() {
            let Some(s) = p.server.connection_mut(sh) else { continue };
            let early = s.is_handshaking();
            while let Some(d) = s.recv_datagram() {
                assert_eq!(d.path_id, 0, "0-RTT datagrams come on path 0");
                got.push((d.data.to_vec(), early));
            }
        }
        until(p)
    });
}

/// The ticket's connection advertised DATAGRAM: datagrams queued before the handshake go
/// in the first flight's 0-RTT packets, reach the server's application before its handshake
/// completes, exactly, and are acknowledged like any 1-RTT packet's.
#[test]
fn zero_rtt_carries_the_datagrams_the_ticket_allows() {
    let (cc, sc) = zero_rtt_configs(dg_config());
    first_connection(&cc, &sc);
    let mut pair = Pair::from_configs(&cc, sc);
    let c = client_conn(&mut pair);
    assert_eq!(c.zero_rtt_state(), ZeroRttState::Pending);
    let max = c.max_datagram_size(None).expect("the remembered limit allows datagrams");
    assert!(max > 1000 && max < 1200, "one packet of the initial path: {max}");
    assert_eq!(c.send_datagram(vec![0; max + 1], None), Err(DatagramError::TooLarge { max }));
    assert_eq!(c.send_datagram(&b"x"[..], Some(1)), Err(DatagramError::UnknownPath), "no path but 0 in 0-RTT");
    let sent: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 200 * usize::from(i) + 1]).collect();
    for d in &sent {
        client_conn(&mut pair).send_datagram(d.clone(), None).expect("0-RTT datagram");
    }
    // They leave at once, in 0-RTT packets (long header type 0-RTT: 0b01 in bits 4-5).
    let flight = client_flight(&mut pair);
    assert!(flight.iter().any(|d| d.len() > 20 && d[0] & 0xb0 == 0x90), "no 0-RTT packet in the first flight");
    let s = client_conn(&mut pair).datagram_stats().total;
    assert_eq!((s.sent, s.sent_0rtt), (5, 5));
    assert_eq!(client_conn(&mut pair).datagram_send_queue_len(), 0);
    for mut d in flight {
        pair.server.handle_datagrams(pair.now, pair.server_addr, pair.client_addr, None, &mut [d.as_mut_slice()]);
    }
    let mut got = Vec::new();
    run_collect(&mut pair, Duration::from_secs(2), &mut got, |p| {
        p.client.connection(p.client_conn).is_some_and(|c| c.datagram_stats().total.acked == 5)
    });
    assert_eq!(got.iter().map(|g| g.0.clone()).collect::<Vec<_>>(), sent);
    assert!(got.iter().all(|g| g.1), "every datagram arrived before the server's handshake completed");
    client_learns_the_outcome(&mut pair);
    let s = client_conn(&mut pair).datagram_stats().total;
    assert_eq!((s.sent, s.acked, s.lost, s.dropped_send), (5, 5, 0, 0));
    assert_eq!(client_conn(&mut pair).zero_rtt_state(), ZeroRttState::Accepted);
}

/// Without DATAGRAM in the ticket's connection (the server advertised none), the client
/// may not send any in 0-RTT (RFC 9221 §3); outside 0-RTT, before the handshake, nothing is
/// known yet.
#[test]
fn zero_rtt_datagrams_need_the_remembered_limit() {
    let (cc, sc) = zero_rtt_configs(dg_config());
    let sc_without = ServerConfig { transport: Arc::new(TransportConfig::default()), ..sc.clone() };
    first_connection(&cc, &sc_without);
    let mut pair = Pair::from_configs(&cc, sc);
    let c = client_conn(&mut pair);
    assert_eq!(c.zero_rtt_state(), ZeroRttState::Pending);
    assert_eq!(c.max_datagram_size(None), None);
    assert_eq!(c.send_datagram(&b"early"[..], None), Err(DatagramError::UnsupportedByPeer));
    // A first connection (no ticket for this server name yet): not connected.
    let (cc2, sc2) = zero_rtt_configs(dg_config());
    let mut fresh = Pair::from_configs(&cc2, sc2);
    let c = client_conn(&mut fresh);
    assert_eq!(c.zero_rtt_state(), ZeroRttState::NotAttempted);
    assert_eq!(c.send_datagram(&b"early"[..], None), Err(DatagramError::NotConnected));
}

/// A server that declines the early data and no longer supports DATAGRAM: the datagrams
/// sent in 0-RTT are lost (never sent again, RFC 9221 §5.2) and those still queued are
/// dropped, since the new limit does not allow them (RFC 9221 §3); the server's
/// application gets none, and the connection goes on.
#[test]
fn declined_zero_rtt_datagrams_are_lost_and_the_rest_dropped() {
    let (cc, sc) = zero_rtt_configs(dg_config());
    first_connection(&cc, &sc);
    let mut tls = (*sc.tls).clone();
    tls.max_early_data_size = 0;
    let declining = ServerConfig { tls: Arc::new(tls), transport: Arc::new(TransportConfig::default()) };
    let mut pair = Pair::from_configs(&cc, declining);
    // More than the first flight's congestion window carries: some wait.
    for i in 0..40u8 {
        client_conn(&mut pair).send_datagram(vec![i; 1000], None).expect("0-RTT datagram");
    }
    let mut got = Vec::new();
    run_collect(&mut pair, Duration::from_secs(2), &mut got, |p| {
        p.client.connection(p.client_conn).is_some_and(|c| c.is_established())
    });
    client_learns_the_outcome(&mut pair);
    run_collect(&mut pair, Duration::from_millis(500), &mut got, |_| false);
    assert!(got.is_empty(), "the server took {} datagrams it does not support", got.len());
    let c = client_conn(&mut pair);
    assert_eq!(c.zero_rtt_state(), ZeroRttState::Rejected);
    assert!(!c.is_closed(), "the connection goes on");
    assert_eq!(c.max_datagram_size(None), None, "the server supports no DATAGRAM now");
    let s = c.datagram_stats().total;
    assert!(s.sent > 0 && s.sent < 40, "some went in 0-RTT, some waited: {s:?}");
    assert_eq!(s.sent_0rtt, s.sent);
    assert_eq!((s.lost, s.acked, s.dropped_send), (s.sent, 0, 40 - s.sent), "{s:?}");
    assert_eq!(c.datagram_send_queue_len(), 0);
}

/// A 0-RTT datagram too large to follow the Initial in the first datagram goes in the next
/// one, and the Initial's datagram is still padded to 1200 bytes (RFC 9000 §14.1); before,
/// the Initial was sealed for a 0-RTT packet that then held nothing, and went out short: the
/// server dropped it and the handshake waited a PTO.
#[test]
fn a_large_0rtt_datagram_leaves_the_initial_padded() {
    let (cc, sc) = zero_rtt_configs(dg_config());
    first_connection(&cc, &sc);
    let mut pair = Pair::from_configs(&cc, sc);
    let t0 = pair.now;
    let max = client_conn(&mut pair).max_datagram_size(None).expect("allowed");
    client_conn(&mut pair).send_datagram(vec![7u8; max], None).expect("0-RTT datagram");
    let flight = client_flight(&mut pair);
    // Long header, type Initial (0b00 in bits 4-5).
    let initial = flight.iter().find(|d| d[0] & 0xb0 == 0x80).expect("an Initial");
    assert!(initial.len() >= 1200, "the Initial's datagram has {} bytes", initial.len());
    assert!(flight.iter().any(|d| d[0] & 0xb0 == 0x90 && d.len() > max), "the datagram left in a 0-RTT packet");
    assert_eq!(client_conn(&mut pair).datagram_stats().total.sent_0rtt, 1);
    for mut d in flight {
        pair.server.handle_datagrams(pair.now, pair.server_addr, pair.client_addr, None, &mut [d.as_mut_slice()]);
    }
    let mut got = Vec::new();
    run_collect(&mut pair, Duration::from_secs(1), &mut got, |p| {
        p.client.connection(p.client_conn).is_some_and(|c| c.is_established())
    });
    assert_eq!(got, vec![(vec![7u8; max], true)], "the server took it before its handshake completed");
    // One round trip (20 ms on the pair's link), not a PTO.
    let took = pair.now.saturating_duration_since(t0);
    assert!(took < Duration::from_millis(200), "the handshake took {took:?}");
}
