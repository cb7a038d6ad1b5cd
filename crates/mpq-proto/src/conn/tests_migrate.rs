//! Active migration by the client on a connection without multipath (RFC 9000 §9,
//! `conn/migrate.rs`), over the in-memory pair: the server follows the client to its new
//! address after validating it, the transfer is intact, and the rules that forbid a move.

use std::net::SocketAddr;
use std::time::Duration;

use super::tests::{client, confirm_handshake, run_upload};
use super::*;
use crate::testing::Pair;

fn new_local() -> SocketAddr {
    "10.0.9.1:5555".parse().expect("addr")
}

/// The server's one connection.
fn server_conn(pair: &mut Pair) -> &mut Connection {
    let h = *pair.server.handles().first().expect("a server connection");
    pair.server.connection_mut(h).expect("server connection")
}

#[test]
fn the_server_follows_a_migrating_client_and_the_transfer_is_intact() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    // The server's spare connection IDs arrive with the handshake's last flights.
    pair.run_until(Duration::from_millis(200), |_| false);
    let old_dcid = client(&mut pair).shared.peer_cids[&0].current().cid;
    let now = pair.now;
    client(&mut pair).migrate(now, new_local()).expect("migrate");
    let c = client(&mut pair);
    assert_ne!(c.shared.peer_cids[&0].current().cid, old_dcid, "a connection ID not used before (§9.5)");
    assert!(c.shared.peer_cids[&0].to_retire.contains(&0), "the old one is retired");
    assert_eq!(c.path_addresses()[0].1, Some(new_local()));
    // A transfer after the move: byte for byte, and the server now sends to the new address.
    run_upload(&mut pair, 400_000, Duration::from_secs(30));
    let s = server_conn(&mut pair);
    assert_eq!(s.path_addresses()[0].2, new_local(), "the server moved its path");
    assert!(
        s.shared.peer_cids[&0].to_retire.contains(&0) || s.shared.peer_cids[&0].current != 0,
        "the server sends to the new address with a connection ID of the client's not used before (§9.5)"
    );
    assert_eq!(s.path_validated(0), Some(true), "after validating the new address");
    assert_eq!(client(&mut pair).shared.migrated_to, None, "datagrams arrived at the new address");
}

#[test]
fn migration_waits_for_the_handshake_and_a_spare_connection_id() {
    let mut pair = Pair::new(TransportConfig::default());
    let now = pair.now;
    assert_eq!(client(&mut pair).migrate(now, new_local()), Err(PathError::HandshakeNotConfirmed));
    assert!(confirm_handshake(&mut pair));
    pair.run_until(Duration::from_millis(200), |_| false);
    // Spend every spare ID: then there is none left to move with.
    let now = pair.now;
    let mut moves = 0;
    while client(&mut pair).migrate(now, SocketAddr::from(([10, 0, 9, moves as u8 + 1], 5555))).is_ok() {
        moves += 1;
        assert!(moves < 100, "IDs are finite");
    }
    assert!(moves >= 1);
    let last = SocketAddr::from(([10, 0, 9, 200], 5555));
    assert_eq!(client(&mut pair).migrate(now, last), Err(PathError::NoConnectionId));
}

#[test]
fn servers_multipath_and_disable_active_migration_refuse_a_move() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    let now = pair.now;
    assert_eq!(server_conn(&mut pair).migrate(now, new_local()), Err(PathError::ServerCannotOpen));

    let mp = TransportConfig { initial_max_path_id: Some(2), ..TransportConfig::default() };
    let mut pair = Pair::new(mp);
    assert!(confirm_handshake(&mut pair));
    let now = pair.now;
    assert_eq!(client(&mut pair).migrate(now, new_local()), Err(PathError::MultipathNegotiated));

    let server = TransportConfig { disable_active_migration: true, ..TransportConfig::default() };
    let mut pair = Pair::asymmetric(TransportConfig::default(), server);
    assert!(confirm_handshake(&mut pair));
    let now = pair.now;
    assert_eq!(client(&mut pair).migrate(now, new_local()), Err(PathError::MigrationDisabled));
}

/// A migrating client checks the new path itself: a PATH_CHALLENGE in a datagram of at
/// least 1200 bytes (RFC 9000 §8.2.1), so that even with no data to send it gives the server
/// the bytes its anti-amplification limit needs to validate the new address. Without it a
/// downloading client that lost the server's first (small) challenge had nothing to send,
/// and neither had the server: the per-path runtime stalled that way after the operating
/// system changed the client's address.
#[test]
fn a_migrating_client_challenges_the_new_path_and_the_server_follows_without_data() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    pair.run_until(Duration::from_millis(200), |_| false);
    let now = pair.now;
    client(&mut pair).migrate(now, new_local()).expect("migrate");
    let c = client(&mut pair);
    let challenge = c.paths[c.primary_path()].challenge.expect("a challenge of the new path");
    let mut buf = Vec::new();
    let t = c.poll_transmit(now, &mut buf).expect("the challenge goes at once");
    assert_eq!(t.source, Some(new_local()));
    assert!(t.size >= 1200, "a PATH_CHALLENGE datagram of {} bytes", t.size);
    assert!(c.paths[c.primary_path()].challenge.is_some_and(|ch| !ch.send_pending && ch.data == challenge.data));
    let dst = t.destination;
    pair.inject(true, new_local(), dst, &mut buf[..t.size]);
    pair.run_until(Duration::from_secs(2), |_| false);
    let c = client(&mut pair);
    assert!(c.paths[c.primary_path()].challenge.is_none(), "the server answered the challenge");
    let s = server_conn(&mut pair);
    assert_eq!(s.path_addresses()[0].2, new_local(), "the server moved its path");
    assert_eq!(s.path_validated(0), Some(true));
}
