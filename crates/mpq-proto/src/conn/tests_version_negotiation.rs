//! Incompatible version negotiation over the in-memory pair (RFC 9368 §2.2, RFC 9000 §6.2):
//! a client whose first version the server refuses starts again in a version the Version
//! Negotiation packet lists, under the same handle, and checks the server's
//! version_information against it (RFC 9368 §4).

use std::time::Duration;

use super::tests::{client, client_error, run_upload};
use super::*;
use crate::error::TransportErrorCode;
use crate::testing::Pair;
use crate::transport_params::VersionInformation;
use crate::{VERSION_1, VERSION_2};

/// A client starting in v2 that also accepts v1, and a server that speaks only v1.
fn v2_client_v1_server() -> Pair {
    let client =
        TransportConfig { initial_version: VERSION_2, versions: vec![VERSION_2, VERSION_1], ..Default::default() };
    let server = TransportConfig { versions: vec![VERSION_1], ..Default::default() };
    Pair::asymmetric(client, server)
}

/// Runs until the client's handshake is confirmed or it loses the connection; the error
/// code if it lost it.
fn handshake(pair: &mut Pair) -> Result<(), Option<u64>> {
    let mut lost = None;
    let confirmed = pair.run_until(Duration::from_secs(3), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            if let Event::ConnectionLost(e) = e {
                lost = Some(e);
            }
        }
        lost.is_some() || p.client.connection(p.client_conn).is_some_and(|c| c.shared.handshake_confirmed)
    });
    match lost {
        None if confirmed => Ok(()),
        Some(ConnectionError::TransportError(e) | ConnectionError::ConnectionClosed(e)) => Err(Some(e.code.0)),
        _ => Err(None),
    }
}

#[test]
fn a_refused_version_is_retried_in_one_the_server_lists() {
    let mut pair = v2_client_v1_server();
    let handle = pair.client_conn;
    assert_eq!(handshake(&mut pair), Ok(()));
    assert_eq!(pair.client_conn, handle, "the same handle carries the new attempt");
    let c = client(&mut pair);
    let v = &c.shared.version;
    assert_eq!((v.original, v.current, v.negotiated_from), (VERSION_1, VERSION_1, Some(VERSION_2)));
    // The new attempt is a working connection: data goes through, byte for byte.
    run_upload(&mut pair, 200_000, Duration::from_secs(30));
    assert_eq!(pair.client.handles().len(), 1, "the ended attempt left no connection behind");
}

#[test]
fn no_version_in_common_still_ends_the_attempt() {
    let client = TransportConfig { initial_version: VERSION_2, versions: vec![VERSION_2], ..Default::default() };
    let server = TransportConfig { versions: vec![VERSION_1], ..Default::default() };
    let mut pair = Pair::asymmetric(client, server);
    assert_eq!(client_error(&mut pair, Duration::from_secs(2)), Some(ConnectionError::VersionMismatch));
}

#[test]
fn server_versions_contradicting_its_version_negotiation_are_a_downgrade() {
    // The server's version_information lists v2, which the client prefers: a server that
    // speaks v2 would not have refused it, so the Version Negotiation packet was forged.
    let mut pair = v2_client_v1_server();
    pair.server.set_tp_version_override(Some(Some(VersionInformation {
        chosen: VERSION_1,
        available: vec![VERSION_2, VERSION_1],
    })));
    assert_eq!(handshake(&mut pair), Err(Some(TransportErrorCode::VERSION_NEGOTIATION_ERROR.0)));
}

#[test]
fn an_empty_server_version_list_after_version_negotiation_is_an_error() {
    // RFC 9368 §4: "if the client reacted to a Version Negotiation packet and the server's
    // Available Versions field is empty, the client MUST close the connection".
    let mut pair = v2_client_v1_server();
    pair.server.set_tp_version_override(Some(Some(VersionInformation { chosen: VERSION_1, available: vec![] })));
    assert_eq!(handshake(&mut pair), Err(Some(TransportErrorCode::VERSION_NEGOTIATION_ERROR.0)));
}

#[test]
fn a_server_without_version_information_cannot_confirm_version_negotiation() {
    let mut pair = v2_client_v1_server();
    pair.server.set_tp_version_override(Some(None));
    assert_eq!(handshake(&mut pair), Err(Some(TransportErrorCode::VERSION_NEGOTIATION_ERROR.0)));
}

#[test]
fn a_second_version_negotiation_packet_is_ignored() {
    // RFC 9000 §6.2: a client that acted on one Version Negotiation packet discards the
    // next. The new attempt gets a forged one, listing only a version it does not speak
    // (it would end the attempt if acted on), before the server's answer.
    let mut pair = v2_client_v1_server();
    let mut forged = false;
    let ok = pair.run_until(Duration::from_secs(3), |p| {
        let c = p.client.connection_mut(p.client_conn).expect("client");
        if !forged && c.shared.version.negotiated_from.is_some() {
            forged = true;
            let scid = c.shared.local_cids.get(&0).and_then(|l| l.active.values().next()).map(|x| x.cid);
            let scid = scid.expect("a CID");
            let mut vn = vec![0x80, 0, 0, 0, 0, scid.len() as u8];
            vn.extend_from_slice(&scid);
            vn.extend_from_slice(&[8, 1, 2, 3, 4, 5, 6, 7, 8]);
            vn.extend_from_slice(&0x1a2a_3a4a_u32.to_be_bytes());
            let (now, server) = (p.now, p.server_addr);
            c.handle_datagram(now, p.client_addr, server, None, &mut vn);
        }
        p.client.connection(p.client_conn).is_some_and(|c| c.shared.handshake_confirmed || c.is_closed())
    });
    assert!(forged, "the new attempt was seen");
    assert!(ok && client(&mut pair).shared.handshake_confirmed, "the forged packet was ignored");
}
