//! A server's preferred_address (RFC 9000 §9.6): the transport parameter with a connection
//! ID of sequence number 1 that reaches the connection, and a client that moves to the
//! preferred address followed: the server's path takes the new local address and validates
//! it. (mpq's own client does not move there yet; ngtcp2's does, in the HTTP/3 interop.)

use std::net::SocketAddr;

use super::tests::{client, confirm_handshake};
use super::tests_multipath::server;
use super::*;
use crate::testing::Pair;

const PREFERRED: &str = "192.0.2.77:4434";

fn pair_with_preferred_address() -> Pair {
    let preferred: SocketAddr = PREFERRED.parse().expect("address");
    let transport = TransportConfig {
        preferred_address: Some(PreferredAddressConfig::from_addrs(&[preferred]).expect("one address")),
        ..TransportConfig::default()
    };
    let mut pair = Pair::new(transport);
    assert!(confirm_handshake(&mut pair));
    pair
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
