//! Packet-level rules a peer or an off-path attacker can push against (issue H.7, H.8):
//! coalesced packets with another DCID (RFC 9000 §12.2), later Initials with another SCID
//! (§7.2), server address changes seen by a client (§9), probing packets from a new
//! address (§9.3), and the rate of CONNECTION_CLOSE answers while closing (§10.2.1).

use std::net::SocketAddr;
use std::time::Duration;

use super::tests::{client, confirm_handshake};
use super::tests_multipath::server;
use super::*;
use crate::endpoint::{Endpoint, EndpointConfig};
use crate::frame::Frame;
use crate::packet::header::{parse_packet, PacketKind};
use crate::testing::Pair;

/// Every datagram the endpoint wants to send now, one GSO segment each.
fn drain(ep: &mut Endpoint, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        out.extend(buf[..t.size].chunks(t.segment_size.unwrap_or(t.size)).map(<[u8]>::to_vec));
    }
    out
}

/// The packets coalesced in `datagram`, with their kinds.
fn packets(datagram: &[u8]) -> Vec<(PacketKind, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = datagram;
    while let Ok(p) = parse_packet(rest, 8) {
        let len = p.packet_len.min(rest.len());
        out.push((p.kind, rest[..len].to_vec()));
        rest = &rest[len..];
        if rest.is_empty() || p.kind == PacketKind::Short {
            break;
        }
    }
    out
}

fn packet_of(datagrams: &[Vec<u8>], kind: PacketKind) -> Vec<u8> {
    datagrams.iter().flat_map(|d| packets(d)).find(|(k, _)| *k == kind).expect("packet of that kind").1
}

/// A valid Handshake packet (the client's Finished) coalesced behind a packet with another
/// Destination Connection ID is ignored (RFC 9000 §12.2); on its own it completes the
/// handshake. It used to be processed.
#[test]
fn coalesced_packet_with_another_dcid_is_ignored() {
    let mut pair = Pair::new(TransportConfig::default());
    let (c_addr, s_addr, now) = (pair.client_addr, pair.server_addr, pair.now);
    let hello = drain(&mut pair.client, now);
    for d in &hello {
        pair.server.handle_datagram(now, s_addr, c_addr, None, &mut d.clone());
    }
    for mut d in drain(&mut pair.server, now) {
        pair.client.handle_datagram(now, c_addr, s_addr, None, &mut d);
    }
    let finished = drain(&mut pair.client, now);
    // The client's first Initial again (DCID: the original one), then its Finished
    // (DCID: the server's CID).
    let mut spliced = packet_of(&hello, PacketKind::Initial);
    spliced.extend(packet_of(&finished, PacketKind::Handshake));
    let h = pair.server.handle_datagram(now, s_addr, c_addr, None, &mut spliced).expect("routed");
    assert!(pair.server.connection_mut(h).expect("conn").is_handshaking(), "the coalesced Finished was processed");
    for mut d in finished {
        pair.server.handle_datagram(now, s_addr, c_addr, None, &mut d);
    }
    assert!(!pair.server.connection_mut(h).expect("conn").is_handshaking());
}

/// Two servers answer the same client Initial (a race, or a spoofer who saw it): the client
/// keeps the first server's SCID and discards the other's later Initial (RFC 9000 §7.2).
/// It used to process it.
#[test]
fn later_initial_with_another_scid_is_discarded() {
    let mut pair = Pair::new(TransportConfig::default());
    let (c_addr, s_addr, now) = (pair.client_addr, pair.server_addr, pair.now);
    let (_, other_config) = crate::testing::configs(TransportConfig::default());
    let mut other = Endpoint::new(EndpointConfig::with_seed(3), Some(other_config));
    let hello = drain(&mut pair.client, now);
    for d in &hello {
        pair.server.handle_datagram(now, s_addr, c_addr, None, &mut d.clone());
        other.handle_datagram(now, s_addr, c_addr, None, &mut d.clone());
    }
    // Only the first server's Initial reaches the client: it keeps its Initial keys.
    let mut first = packet_of(&drain(&mut pair.server, now), PacketKind::Initial);
    pair.client.handle_datagram(now, c_addr, s_addr, None, &mut first);
    let _ = drain(&mut other, now);
    // The other server's Initial retransmission (packet number 1, its own SCID).
    let pto = other.poll_timeout().expect("timer");
    other.handle_timeout(pto);
    let mut second = packet_of(&drain(&mut other, pto), PacketKind::Initial);
    let dropped = client(&mut pair).stats().dropped_packets;
    pair.client.handle_datagram(pto, c_addr, s_addr, None, &mut second);
    let c = client(&mut pair);
    assert_eq!(c.stats().dropped_packets, dropped + 1);
    let largest = c.shared.initial.as_ref().and_then(|s| s.received.largest()).map(|(pn, _)| pn);
    assert_eq!(largest, Some(0), "the other server's Initial was processed");
}

/// The server's packets suddenly come from another address: the client does not follow
/// (RFC 9000 §9: only clients migrate; it discards packets from an unknown server address).
/// It used to move its path there.
#[test]
fn client_ignores_a_server_address_change() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    let old = pair.server_addr;
    pair.server_addr = "10.0.0.3:443".parse().expect("addr");
    // The server's path leaves from the new address (as a server behind a NAT that rebound).
    let h = pair.server.handles()[0];
    for p in pair.server.connection_mut(h).expect("server").paths.iter_mut() {
        p.local = Some(pair.server_addr);
    }
    let dropped = client(&mut pair).stats().dropped_packets;
    let stream = client(&mut pair).open_stream(crate::types::Dir::Bi).expect("stream");
    client(&mut pair).write(stream, b"ping").expect("write");
    pair.run_until(Duration::from_millis(200), |_| false);
    let c = client(&mut pair);
    assert_eq!(c.remote_address(), old);
    assert!(c.stats().dropped_packets > dropped, "no packet from the new address was dropped");
}

/// A probing packet (only PATH_CHALLENGE) from a new client address does not move the
/// server's path (RFC 9000 §9.3: only the highest-numbered non-probing packet does), but
/// its PATH_RESPONSE goes back to that address (§8.2.2); a non-probing packet afterwards
/// moves the path. The probe used to move it.
#[test]
fn probing_packet_does_not_move_the_path() {
    // (Without PMTU probes: the ACKs of their exchange would ride in the client's packet
    // and make it non-probing.)
    let mut pair = Pair::new(TransportConfig { pmtud: false, ..TransportConfig::default() });
    assert!(confirm_handshake(&mut pair));
    pair.run_until(Duration::from_millis(500), |_| false);
    let old: SocketAddr = pair.client_addr;
    let new: SocketAddr = "10.0.0.1:5555".parse().expect("addr");
    let mut probe = Vec::new();
    Frame::PathChallenge([7; 8]).encode(&mut probe);
    client(&mut pair).shared.injected = probe;
    let received = server(&mut pair).paths[0].stats.rx_packets;
    let to_new = std::rc::Rc::new(std::cell::Cell::new(0));
    let seen = to_new.clone();
    pair.drop_addr = Box::new(move |_, dst| {
        if dst == new {
            seen.set(seen.get() + 1);
        }
        false
    });
    pair.client_addr = new;
    // Runs until the probe arrived, before any other client packet could.
    pair.run_until(Duration::from_millis(100), |p| server(p).paths[0].stats.rx_packets > received);
    pair.client_addr = old;
    assert_eq!(server(&mut pair).paths[0].stats.rx_packets, received + 1);
    assert_eq!(server(&mut pair).remote_address(), old, "a probing packet moved the path");
    assert_eq!(server(&mut pair).paths[0].off_path_responses.len(), 1);
    pair.run_until(Duration::from_millis(1), |_| false);
    assert_eq!(to_new.get(), 1, "the PATH_RESPONSE went back to the prober's address");
    // A non-probing packet from the new address is a migration (NAT rebinding).
    pair.client_addr = new;
    let stream = client(&mut pair).open_stream(crate::types::Dir::Bi).expect("stream");
    client(&mut pair).write(stream, b"data").expect("write");
    assert!(pair.run_until(Duration::from_secs(1), |p| server(p).remote_address() == new));
}

/// A closing endpoint answers the 1st, 2nd, 4th, 8th... datagram with CONNECTION_CLOSE
/// (RFC 9000 §10.2.1), not every one: 1000 datagrams get 10 answers, not 1000.
#[test]
fn closing_answers_ever_fewer_datagrams() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    let (c_addr, s_addr, now) = (pair.client_addr, pair.server_addr, pair.now);
    let s = server(&mut pair);
    s.close(now, 7, b"bye");
    let mut buf = Vec::new();
    assert!(s.poll_transmit(now, &mut buf).is_some(), "the first CONNECTION_CLOSE");
    let cid = s.local_cids().next().expect("cid");
    let mut answers = 0;
    for i in 0..1000u32 {
        let mut d = vec![0x40];
        d.extend_from_slice(cid.as_slice());
        d.extend(i.to_be_bytes().repeat(10));
        s.handle_datagram(now, s_addr, c_addr, None, &mut d);
        while s.poll_transmit(now, &mut buf).is_some() {
            answers += 1;
        }
    }
    assert_eq!(answers, 10, "answers to 1000 datagrams");
}

/// After an apparent migration the server challenges the client's previous address too
/// (RFC 9000 §9.3.3: had a forwarded packet caused it, the real client answers there and
/// its next packets bring the path back). Here the client did move: it answers from its
/// new address, and the path stays there.
#[test]
fn apparent_migration_challenges_the_previous_address() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    pair.run_until(Duration::from_millis(500), |_| false);
    let old = pair.client_addr;
    let new: SocketAddr = "10.0.0.1:5555".parse().expect("addr");
    let to_old = std::rc::Rc::new(std::cell::Cell::new(0));
    let seen = to_old.clone();
    pair.drop_addr = Box::new(move |_, dst| {
        if dst == old {
            seen.set(seen.get() + 1);
        }
        false
    });
    pair.client_addr = new;
    let stream = client(&mut pair).open_stream(crate::types::Dir::Bi).expect("stream");
    client(&mut pair).write(stream, b"data").expect("write");
    assert!(pair.run_until(Duration::from_secs(1), |p| server(p).remote_address() == new));
    assert!(pair.run_until(Duration::from_secs(1), |p| server(p).paths[0].old_challenge.is_none()));
    assert_eq!(to_old.get(), 1, "datagrams to the previous address");
    pair.run_until(Duration::from_secs(1), |_| false);
    assert_eq!(server(&mut pair).remote_address(), new);
    assert!(server(&mut pair).paths[0].validated);
}
