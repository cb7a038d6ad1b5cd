//! A server's preferred_address (RFC 9000 §9.6): the transport parameter with a connection
//! ID of sequence number 1 that reaches the connection; a client that validates the address
//! and moves there, the server following (its path takes the new local address and
//! validates it), with the transfer going on byte-exact; a preferred address that does not
//! answer, or a client told not to use it, leaving the connection where it was.

use std::net::SocketAddr;

use super::tests::{client, confirm_handshake, run_upload};
use super::tests_multipath::server;
use super::*;
use crate::testing::Pair;

const PREFERRED: &str = "192.0.2.77:4434";

/// A pair whose server offers [`PREFERRED`]; the client uses it if `client_moves`.
fn pair_with(client_moves: bool) -> Pair {
    let preferred: SocketAddr = PREFERRED.parse().expect("address");
    let server = TransportConfig {
        preferred_address: Some(PreferredAddressConfig::from_addrs(&[preferred]).expect("one address")),
        ..TransportConfig::default()
    };
    let client = TransportConfig { use_preferred_address: client_moves, ..TransportConfig::default() };
    let mut pair = Pair::asymmetric(client, server);
    assert!(confirm_handshake(&mut pair));
    pair
}

/// A pair whose client stays on the handshake address (the tests that play the client's
/// move by hand).
fn pair_with_preferred_address() -> Pair {
    pair_with(false)
}

#[test]
fn the_server_offers_its_preferred_address_with_connection_id_sequence_1() {
    let mut pair = pair_with_preferred_address();
    let pa =
        client(&mut pair).shared.peer_params.as_ref().and_then(|p| p.preferred_address).expect("preferred_address");
    assert_eq!(pa.address_v4, Some(PREFERRED.parse().expect("v4")));
    assert_eq!(pa.address_v6, None);
    let cids = &server(&mut pair).shared.local_cids[&0];
    let seq1 = cids.active.get(&1).expect("sequence 1 is active");
    assert_eq!(seq1.cid, pa.connection_id);
    assert_eq!(seq1.reset_token, pa.stateless_reset_token);
    // NEW_CONNECTION_ID frames went on from sequence 2, with other IDs.
    assert!(cids.active.iter().filter(|(s, _)| **s >= 2).all(|(_, c)| c.cid != pa.connection_id));
    assert!(cids.next_seq > 2);
}

#[test]
fn a_server_without_a_preferred_address_sends_none() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    assert!(client(&mut pair).shared.peer_params.as_ref().is_some_and(|p| p.preferred_address.is_none()));
}

/// The client's next 1-RTT datagram, taken before the link carries it.
fn next_client_datagram(pair: &mut Pair) -> Vec<u8> {
    let now = pair.now;
    let mut buf = Vec::new();
    let t = pair.client.poll_transmit(now, &mut buf).expect("a datagram");
    buf.truncate(t.size);
    buf
}

#[test]
fn a_client_at_the_preferred_address_moves_the_servers_path_there_to_be_validated() {
    let mut pair = pair_with_preferred_address();
    let preferred: SocketAddr = PREFERRED.parse().expect("address");
    // A non-probing packet (a stream's data) from the client, addressed to the preferred
    // address (as a client that validated it sends).
    let c = client(&mut pair);
    let id = c.open_stream(crate::Dir::Bi).expect("a stream");
    assert_eq!(c.write(id, b"to the preferred address"), Ok(24));
    let mut d = next_client_datagram(&mut pair);
    let client_addr = pair.client_addr;
    pair.inject(true, client_addr, preferred, &mut d);
    let s = server(&mut pair);
    let path = &s.paths[s.primary_path()];
    assert_eq!(path.local, Some(preferred), "the server's path did not move to the preferred address");
    assert_eq!(path.remote, client_addr);
    assert!(!path.validated && path.challenge.is_some(), "the moved path is validated again (RFC 9000 §9.3)");
    // The server's datagrams now leave from the preferred address (besides a PATH_CHALLENGE
    // on the 4-tuple the client left, RFC 9000 §9.3.3).
    let mut buf = Vec::new();
    let now = pair.now;
    let mut sent = Vec::new();
    while let Some(t) = pair.server.poll_transmit(now, &mut buf) {
        sent.push((t.source, t.destination));
    }
    assert!(sent.contains(&(Some(preferred), client_addr)), "nothing from the preferred address: {sent:?}");
    assert!(sent.iter().all(|(_, to)| *to == client_addr));
}

#[test]
fn a_client_moves_to_the_preferred_address_and_the_transfer_goes_on() {
    let mut pair = pair_with(true);
    let preferred: SocketAddr = PREFERRED.parse().expect("address");
    run_upload(&mut pair, 300_000, std::time::Duration::from_secs(5));
    let c = client(&mut pair);
    assert_eq!(c.paths[c.primary_path()].remote, preferred, "the client did not move to the preferred address");
    // It uses the preferred_address's connection ID (sequence number 1), and retired the
    // handshake's.
    let pa = c.shared.peer_params.as_ref().and_then(|p| p.preferred_address).expect("preferred_address");
    assert_eq!(c.shared.peer_cids[&0].current().cid, pa.connection_id);
    let s = server(&mut pair);
    let path = &s.paths[s.primary_path()];
    assert_eq!(path.local, Some(preferred), "the server did not follow");
    assert!(path.validated, "the server validated the path at its preferred address");
    assert!(!s.shared.local_cids[&0].active.contains_key(&0), "the handshake's connection ID was retired");
}

#[test]
fn a_preferred_address_that_does_not_answer_leaves_the_client_where_it_was() {
    let mut pair = pair_with(true);
    let preferred: SocketAddr = PREFERRED.parse().expect("address");
    pair.drop_addr = Box::new(move |src, dst| src == preferred || dst == preferred);
    let server_addr = pair.server_addr;
    // Long enough for the three probes and their timeouts.
    run_upload(&mut pair, 300_000, std::time::Duration::from_secs(5));
    pair.run_until(std::time::Duration::from_secs(3), |_| false);
    let c = client(&mut pair);
    assert_eq!(c.paths[c.primary_path()].remote, server_addr);
    assert!(c.shared.preferred_probe.is_none(), "the client gave up on the preferred address");
    assert!(c.shared.preferred_decided);
    assert!(!c.is_closed());
}

#[test]
fn a_client_told_not_to_use_the_preferred_address_stays() {
    let mut pair = pair_with(false);
    let server_addr = pair.server_addr;
    run_upload(&mut pair, 100_000, std::time::Duration::from_secs(5));
    let c = client(&mut pair);
    assert_eq!(c.paths[c.primary_path()].remote, server_addr);
    assert!(c.shared.preferred_probe.is_none());
}

/// ECN is validated again on the new network path, against the peer's running counts (they
/// are per packet number space): the server's path, moved to its preferred address, ends
/// ECN-capable on a link that passes the codepoints, not failed.
#[test]
fn ecn_stays_capable_across_the_move() {
    let preferred: SocketAddr = PREFERRED.parse().expect("address");
    let server_cfg = TransportConfig {
        preferred_address: Some(PreferredAddressConfig::from_addrs(&[preferred]).expect("one address")),
        ..TransportConfig::default()
    };
    let mut pair = Pair::asymmetric(TransportConfig::default(), server_cfg);
    pair.ecn = crate::testing::PairEcn::Pass;
    assert!(confirm_handshake(&mut pair));
    run_upload(&mut pair, 300_000, std::time::Duration::from_secs(5));
    pair.run_until(std::time::Duration::from_secs(2), |_| false);
    let s = server(&mut pair);
    let path = &s.paths[s.primary_path()];
    assert_eq!(path.local, Some(preferred));
    assert_eq!(path.ecn.state(), crate::recovery::ecn::EcnState::Capable);
}

/// With multipath the preferred_address's connection ID is path 0's: path 0 validates the
/// preferred address and moves there, a second path stays on the handshake address, and
/// the upload goes on over both (checked byte-exact by `run_upload`).
#[test]
fn with_multipath_path_0_moves_and_the_other_path_stays() {
    let preferred: SocketAddr = PREFERRED.parse().expect("address");
    let server_cfg = TransportConfig {
        preferred_address: Some(PreferredAddressConfig::from_addrs(&[preferred]).expect("one address")),
        initial_max_path_id: Some(4),
        ..TransportConfig::default()
    };
    let client_cfg = TransportConfig { initial_max_path_id: Some(4), ..TransportConfig::default() };
    let mut pair = Pair::asymmetric(client_cfg, server_cfg);
    let server_addr = pair.server_addr;
    let id = super::tests_multipath::open_second_path(&mut pair);
    run_upload(&mut pair, 2_000_000, std::time::Duration::from_secs(30));
    let c = client(&mut pair);
    assert!(c.shared.mp.enabled);
    let slot =
        |c: &Connection, id: u64| (0..c.paths.slot_bound()).find(|&pi| c.paths.get(pi).is_some_and(|p| p.id == id));
    let (c0, c1) = (slot(c, 0).expect("path 0"), slot(c, id).expect("path 1"));
    assert_eq!(c.paths[c0].remote, preferred, "path 0 did not move to the preferred address");
    assert_eq!(c.paths[c1].remote, server_addr, "the second path moved too");
    let pa = c.shared.peer_params.as_ref().and_then(|p| p.preferred_address).expect("preferred_address");
    assert_eq!(c.shared.peer_cids[&0].current().cid, pa.connection_id, "path 0 uses the preferred_address's CID");
    let (tx0, tx1) =
        (super::tests_multipath::path_stats(c, 0).tx_bytes, super::tests_multipath::path_stats(c, id).tx_bytes);
    assert!(tx0 > 200_000 && tx1 > 200_000, "both paths carried the upload: {tx0} {tx1}");
    let s = server(&mut pair);
    let (s0, s1) = (slot(s, 0).expect("server path 0"), slot(s, id).expect("server path 1"));
    assert_eq!(s.paths[s0].local, Some(preferred), "the server's path 0 did not follow");
    assert!(s.paths[s0].validated);
    assert_ne!(s.paths[s1].local, Some(preferred), "the server's path 1 moved");
}
