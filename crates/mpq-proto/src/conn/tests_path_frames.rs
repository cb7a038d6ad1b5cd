//! A path's own frames in a receive batch (`conn/path_frames.rs`): handled by the path once,
//! their shared part applied in order, and errors exactly those of the general way.

use crate::coding::write_varint;
use crate::conn::events::ConnectionError;
use crate::conn::fuzzing::tests::{forge_to_server, null_pair};
use crate::error::TransportErrorCode as C;
use crate::frame::frame_type as ft;
use crate::testing::Pair;

/// An ACK (or PATH_ACK for `path`) frame acknowledging exactly packet `pn`.
fn ack_of(path: Option<u64>, pn: u64) -> Vec<u8> {
    let mut f = Vec::new();
    match path {
        None => write_varint(&mut f, ft::ACK),
        Some(id) => {
            write_varint(&mut f, ft::PATH_ACK);
            write_varint(&mut f, id);
        }
    }
    for v in [pn, 0, 0, 0] {
        write_varint(&mut f, v); // largest, delay, range count, first range
    }
    f
}

/// Reserves a packet number on the server's path `path_id`, recorded as sent, for the
/// client to acknowledge.
fn server_slot(pair: &mut Pair, path_id: u64) -> u64 {
    let (now, sh) = (pair.now, pair.server.handles()[0]);
    pair.server.connection_mut(sh).expect("server").fuzz_forge_slot(now, path_id).expect("slot").pn
}

fn server(pair: &mut Pair) -> &mut crate::conn::Connection {
    let sh = pair.server.handles()[0];
    pair.server.connection_mut(sh).expect("server")
}

#[test]
fn a_path_challenge_in_a_batch_is_answered_once() {
    let mut pair = null_pair();
    let data = [7u8, 1, 2, 3, 4, 5, 6, 7];
    let mut frames = vec![ft::PATH_CHALLENGE as u8];
    frames.extend_from_slice(&data);
    frames.push(ft::MAX_DATA as u8); // a frame for the shared side after it
    write_varint(&mut frames, 1 << 40);
    forge_to_server(&mut pair, 0, false, &frames);
    let s = server(&mut pair);
    assert!(s.error().is_none(), "{:?}", s.error());
    let slot = s.path_index(0).expect("path 0");
    assert_eq!(s.paths[slot].path_responses, vec![data], "queued by the path, not again by the shared side");
}

#[test]
fn own_acks_are_handled_by_the_path_and_others_by_the_shared_side() {
    let mut pair = null_pair();
    let (pn0, pn1) = (server_slot(&mut pair, 0), server_slot(&mut pair, 1));
    let before = server(&mut pair).shared.touches;
    let outstanding = |p: &mut Pair, id: u64| {
        let s = server(p);
        let slot = s.path_index(id).expect("path");
        s.paths[slot].data.loss.iter_outstanding().any(|(pn, _)| pn == if id == 0 { pn0 } else { pn1 })
    };
    assert!(outstanding(&mut pair, 0) && outstanding(&mut pair, 1));
    // On path 0: a PATH_ACK for path 1 (another path's: the shared side), then path 0's own.
    let mut frames = ack_of(Some(1), pn1);
    frames.extend(ack_of(Some(0), pn0));
    forge_to_server(&mut pair, 0, false, &frames);
    assert!(server(&mut pair).error().is_none());
    assert!(!outstanding(&mut pair, 0) && !outstanding(&mut pair, 1), "both acknowledged");
    let after = server(&mut pair).shared.touches;
    assert_eq!(after.acks_in_batch - before.acks_in_batch, 1, "path 0's own ACK handled by the path");
    assert_eq!(after.fates_applied - before.fates_applied, 2, "both ACKs' fates applied");
    let s = server(&mut pair);
    let slot = s.path_index(0).expect("path 0");
    assert_eq!(s.paths[slot].stats.rx_acks_for_other_paths, 1);
}

fn error_of(pair: &mut Pair) -> (u64, Option<u64>) {
    match server(pair).error() {
        Some(ConnectionError::TransportError(t)) => (t.code.0, t.frame_type),
        other => panic!("expected a transport error, got {other:?}"),
    }
}

/// The walk stops at the first frame it cannot vouch for; the shared side meets that frame
/// the general way, so the error and its frame type are the general path's.
#[test]
fn errors_after_an_own_ack_are_those_of_the_general_way() {
    // An own ACK, then a malformed STREAM frame (length beyond the packet).
    let mut pair = null_pair();
    let pn = server_slot(&mut pair, 0);
    let mut frames = ack_of(Some(0), pn);
    frames.extend_from_slice(&[0x0a, 0x00, 0x40, 0xff, 1, 2, 3]);
    forge_to_server(&mut pair, 0, false, &frames);
    assert_eq!(error_of(&mut pair), (C::FRAME_ENCODING_ERROR.0, Some(0x0a)));

    // An own ACK of a packet number never sent: nothing changes on the path, and the
    // shared side closes with PROTOCOL_VIOLATION naming the frame.
    let mut pair = null_pair();
    let mut frames = vec![ft::PING as u8];
    frames.extend(ack_of(Some(0), 1 << 30));
    forge_to_server(&mut pair, 0, false, &frames);
    assert_eq!(error_of(&mut pair), (C::PROTOCOL_VIOLATION.0, Some(ft::PATH_ACK)));

    // A PATH_ACK for a path ID above our limit is not the path's: MP_PROTOCOL_VIOLATION or
    // the like from the shared side, as before.
    let mut pair = null_pair();
    forge_to_server(&mut pair, 0, false, &ack_of(Some(1 << 20), 0));
    assert!(server(&mut pair).error().is_some(), "a PATH_ACK beyond the path ID limit is an error");

    // Nothing after a CONNECTION_CLOSE is handled, not even an own ACK.
    let mut pair = null_pair();
    let pn = server_slot(&mut pair, 0);
    let mut frames = vec![ft::CONNECTION_CLOSE as u8, 0x00, 0x00, 0x00];
    frames.extend(ack_of(Some(0), pn));
    forge_to_server(&mut pair, 0, false, &frames);
    let s = server(&mut pair);
    assert!(s.is_closed());
    let slot = s.path_index(0).expect("path 0");
    assert!(s.paths[slot].data.loss.iter_outstanding().any(|(p, _)| p == pn), "the ACK after the close was ignored");
}

/// A send batch's lease fixes which paths' ACKs its path carries: with ACKs on their own
/// path (the default) only its own, so its packets read no other path's ACK state; with
/// the lowest-RTT policy the fastest path carries every path's and the other none.
#[test]
fn a_batch_carries_the_acks_its_policy_places_on_its_path() {
    use crate::conn::config::AckPolicy;
    use crate::conn::TransportConfig;
    for policy in [AckPolicy::SamePath, AckPolicy::LowestRtt] {
        let transport =
            TransportConfig { initial_max_path_id: Some(4), ack_policy: policy, ..TransportConfig::default() };
        let (cc, sc) = crate::testing::configs(transport);
        let mut pair = Pair::handshaken_null(&cc, sc, 1).expect("handshake");
        let conn = server(&mut pair);
        let slots = conn.paths.slots();
        assert_eq!(slots.len(), 2, "two paths");
        let placed: Vec<Vec<usize>> = slots
            .iter()
            .map(|&pi| {
                let carried = crate::conn::send::ack_slots_carried_by(&conn.shared, conn.paths.board(), pi);
                carried.iter().map(|(j, _)| *j).collect()
            })
            .collect();
        match policy {
            AckPolicy::SamePath => assert_eq!(placed, slots.iter().map(|&s| vec![s]).collect::<Vec<_>>()),
            _ => {
                let mut sizes: Vec<usize> = placed.iter().map(Vec::len).collect();
                sizes.sort_unstable();
                assert_eq!(sizes, [0, 2], "{policy:?}: {placed:?}");
            }
        }
    }
}
