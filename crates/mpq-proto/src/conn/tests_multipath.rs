//! Multipath tests over the in-memory pair (RFC 10069): negotiation,
//! opening and validating paths, data on every path, PATH_ACK placement, status, abandon,
//! failure, NAT rebinding, path ID and CID limits, key updates, and the frame error cases.

use std::net::SocketAddr;
use std::time::Duration;

use super::tests::{client, confirm_handshake, run_upload, server_error, transport_code, Upload};
use super::*;
use crate::error::TransportErrorCode;
use crate::frame::Frame;
use crate::testing::Pair;

const CLIENT_ADDR2: &str = "10.0.1.1:4433";

fn mp_config() -> TransportConfig {
    TransportConfig { initial_max_path_id: Some(4), ..TransportConfig::default() }
}

pub(super) fn addr2() -> SocketAddr {
    CLIENT_ADDR2.parse().expect("addr")
}

/// Runs until the client's handshake is confirmed; returns every client event seen.
pub(super) fn confirm(pair: &mut Pair) -> Vec<Event> {
    let mut events = Vec::new();
    assert!(pair.run_until(Duration::from_secs(2), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            if let Event::ConnectionLost(e) = &e {
                panic!("client connection lost: {e}");
            }
            events.push(e);
        }
        while let Some((_, e)) = p.server.poll_event() {
            if let Event::ConnectionLost(e) = &e {
                panic!("server connection lost: {e}");
            }
        }
        events.contains(&Event::HandshakeConfirmed)
    }));
    events
}

pub(super) fn server(pair: &mut Pair) -> &mut Connection {
    let h = pair.server.handles()[0];
    pair.server.connection_mut(h).expect("server connection")
}

/// Confirms the handshake and opens path 1 from the second client address; runs until the
/// client validated it.
pub(super) fn open_second_path(pair: &mut Pair) -> u64 {
    let events = confirm(pair);
    assert!(client(pair).is_multipath(), "multipath not negotiated");
    // The server's CIDs for path 1 arrive with the handshake's last flight.
    let mut allowed = events.contains(&Event::Path(PathEvent::NewPathAllowed));
    pair.run_until(Duration::from_secs(1), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            allowed |= e == Event::Path(PathEvent::NewPathAllowed);
        }
        allowed
    });
    assert!(allowed, "no NewPathAllowed event");
    let now = pair.now;
    let server_addr = pair.server_addr;
    let id = client(pair).open_path(now, Some(addr2()), server_addr, PathStatus::Available).expect("open_path");
    let mut validated = false;
    assert!(pair.run_until(Duration::from_secs(2), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            validated |= e == Event::Path(PathEvent::Validated { id });
        }
        validated
    }));
    id
}

/// Calls `open_path` from `local` to `remote` until it succeeds (the path ID and CIDs it
/// needs may take a round trip or the discard of an old path), for at most `limit`.
pub(super) fn open_path_when_allowed(
    pair: &mut Pair,
    local: SocketAddr,
    remote: SocketAddr,
    limit: Duration,
) -> Option<u64> {
    let mut opened = None;
    pair.run_until(limit, |p| {
        while p.client.poll_event().is_some() {}
        let now = p.now;
        opened = opened.or_else(|| client(p).open_path(now, Some(local), remote, PathStatus::Available).ok());
        opened.is_some()
    });
    opened
}

/// Runs `pair` until the client's handshake is complete (`Event::Connected`), not confirmed.
fn run_until_connected(pair: &mut Pair) {
    assert!(pair.run_until(Duration::from_secs(2), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            if e == Event::Connected {
                return true;
            }
        }
        false
    }));
}

/// A pair whose client's handshake is complete (not confirmed), every datagram from the
/// client's first address lost while the flag is set, and path 1 opened from `addr2()`.
fn opened_with_first_path_blocked() -> (Pair, std::sync::Arc<std::sync::atomic::AtomicBool>, u64) {
    let mut pair = Pair::new(mp_config());
    run_until_connected(&mut pair);
    let blocked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (client_addr, server_addr) = (pair.client_addr, pair.server_addr);
    let b = blocked.clone();
    pair.drop_addr = Box::new(move |src, _| src == client_addr && b.load(std::sync::atomic::Ordering::Relaxed));
    let id = open_path_when_allowed(&mut pair, addr2(), server_addr, Duration::from_secs(1)).expect("path opened");
    (pair, blocked, id)
}

pub(super) fn path_stats(c: &Connection, id: u64) -> PathStats {
    c.stats().paths.into_iter().find(|p| p.path_id == id).expect("path stats")
}

#[test]
fn multipath_is_negotiated_only_when_both_offer_it() {
    let mut pair = Pair::new(mp_config());
    confirm(&mut pair);
    assert!(client(&mut pair).is_multipath());
    assert!(server(&mut pair).is_multipath());

    let mut pair = Pair::asymmetric(mp_config(), TransportConfig::default());
    confirm(&mut pair);
    assert!(!client(&mut pair).is_multipath());
    let now = pair.now;
    let server_addr = pair.server_addr;
    let err = client(&mut pair).open_path(now, Some(addr2()), server_addr, PathStatus::Available);
    assert_eq!(err, Err(PathError::MultipathNotNegotiated));
}

#[test]
fn second_path_is_validated_and_carries_data() {
    let mut pair = Pair::new(mp_config());
    let id = open_second_path(&mut pair);
    assert_eq!(id, 1);
    run_upload(&mut pair, 2_000_000, Duration::from_secs(30));
    let c = client(&mut pair);
    let (p0, p1) = (path_stats(c, 0), path_stats(c, 1));
    assert!(p0.tx_bytes > 200_000 && p1.tx_bytes > 200_000, "data not spread: {p0:?} {p1:?}");
    let s = server(&mut pair);
    assert!(path_stats(s, 1).rx_bytes > 200_000);
    assert_eq!(s.path_ids(), vec![0, 1]);
}

#[test]
fn path_acks_can_return_on_the_fastest_path() {
    let cfg = TransportConfig { ack_policy: AckPolicy::LowestRtt, ..mp_config() };
    let mut pair = Pair::new(cfg);
    // Path 1 is 40 ms slower each way: its ACKs should come back on path 0.
    pair.extra_latency.push((addr2(), Duration::from_millis(40)));
    open_second_path(&mut pair);
    run_upload(&mut pair, 1_000_000, Duration::from_secs(30));
    let s = server(&mut pair);
    let p0 = path_stats(s, 0);
    let p1 = path_stats(s, 1);
    assert!(p0.acks_for_other_paths > 0, "server sent no PATH_ACK for path 1 on path 0: {p0:?}");
    // Path 1 carried data to the server, but the server answers on path 0.
    assert!(p1.rx_packets > 3 * p1.tx_packets, "server acknowledged on path 1 itself: {p1:?}");
    // The client counts those PATH_ACKs as received on path 0 for path 1.
    let c0 = path_stats(client(&mut pair), 0);
    assert!(c0.rx_acks_for_other_paths > 0, "client saw no PATH_ACK for path 1 on path 0: {c0:?}");
}

#[test]
fn abandoned_path_stops_and_transfer_completes() {
    let mut pair = Pair::new(mp_config());
    let id = open_second_path(&mut pair);
    let mut up = Upload::new(3_000_000);
    // Upload a while on both paths, then abandon path 1.
    pair.run_until(Duration::from_millis(60), |p| {
        up.pump(p);
        false
    });
    assert!(up.received.len() < 3_000_000);
    assert!(path_stats(client(&mut pair), id).tx_bytes > 20_000, "path 1 carried nothing before the abandon");
    let now = pair.now;
    client(&mut pair).abandon_path(now, id, 0).expect("abandon");
    assert!(client(&mut pair).abandon_path(now, id, 0).is_err(), "abandoned twice");
    let done = pair.run_until(Duration::from_secs(30), |p| {
        up.pump(p);
        up.is_done()
    });
    assert!(done, "upload stalled after abandon ({} bytes)", up.received.len());
    up.assert_intact();
    pair.run_until(Duration::from_secs(2), |_| false);
    let s = server(&mut pair);
    assert!(s.path_ids() == vec![0], "server still has path 1 open: {:?}", s.path_ids());
    assert_eq!(path_stats(s, id).state, "abandoned");
    // After three PTOs the path's state is gone on both sides.
    assert!(!client(&mut pair).paths.iter().any(|p| p.id == id));
    assert!(!server(&mut pair).paths.iter().any(|p| p.id == id));
}

#[test]
fn dead_path_is_detected_and_data_moves() {
    let mut pair = Pair::new(mp_config());
    open_second_path(&mut pair);
    let mut up = Upload::new(3_000_000);
    pair.run_until(Duration::from_millis(30), |p| {
        up.pump(p);
        false
    });
    assert!(up.received.len() < 3_000_000);
    // Path 0 (the client's first address) goes dark in both directions.
    let a0 = pair.client_addr;
    pair.drop_addr = Box::new(move |s, d| s == a0 || d == a0);
    let (mut failed, mut abandoned) = (false, false);
    let done = pair.run_until(Duration::from_secs(60), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            failed |= matches!(e, Event::Path(PathEvent::PotentiallyFailed { id: 0 }));
            abandoned |= matches!(e, Event::Path(PathEvent::Abandoned { id: 0, by_peer: false, .. }));
        }
        up.pump(p);
        up.is_done() && abandoned
    });
    assert!(up.is_done(), "transfer stalled after the path failure ({} bytes)", up.received.len());
    up.assert_intact();
    assert!(failed, "path 0 never marked potentially failed");
    assert!(done, "the dead path 0 was never abandoned");
    assert_eq!(client(&mut pair).path_ids(), vec![1]);
}

#[test]
fn backup_path_is_avoided_while_another_works() {
    let mut pair = Pair::new(mp_config());
    let id = open_second_path(&mut pair);
    let now = pair.now;
    // The server asks the client to use path 1 only as a backup.
    server(&mut pair).set_path_status(now, id, PathStatus::Backup).expect("status");
    let mut changed = false;
    pair.run_until(Duration::from_secs(1), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            changed |= e == Event::Path(PathEvent::StatusChanged { id, backup: true });
        }
        changed
    });
    assert!(changed, "client never saw the backup status");
    let before = path_stats(client(&mut pair), id).tx_bytes;
    run_upload(&mut pair, 1_000_000, Duration::from_secs(30));
    let after = path_stats(client(&mut pair), id).tx_bytes;
    assert!(after - before < 50_000, "backup path carried {} bytes", after - before);
}

#[test]
fn nat_rebinding_moves_the_path() {
    let mut pair = Pair::new(mp_config());
    let second = open_second_path(&mut pair);
    let mut up = Upload::new(3_000_000);
    pair.run_until(Duration::from_millis(30), |p| {
        up.pump(p);
        false
    });
    assert!(up.received.len() < 3_000_000);
    // The client's NAT picks a new port for path 0.
    pair.client_addr = "10.0.0.1:5555".parse().expect("addr");
    let done = pair.run_until(Duration::from_secs(30), |p| {
        up.pump(p);
        up.is_done()
    });
    assert!(done, "transfer stalled after rebinding ({} bytes)", up.received.len());
    up.assert_intact();
    assert_eq!(server(&mut pair).remote_address(), pair.client_addr);
    // Both paths stayed open and path 0 carried data from its new address.
    assert_eq!(server(&mut pair).path_ids(), vec![0, second]);
    let rebound = server(&mut pair).paths.iter().find(|p| p.id == 0).map(|p| (p.remote, p.validated));
    assert_eq!(rebound, Some((pair.client_addr, true)));
}

/// Flow-control windows of about 100 kB: with a 20 ms RTT an upload moves about 5 MB/s, so
/// it lasts long enough for key updates three PTOs apart (the pair has no rate limit).
fn slow_upload_config() -> TransportConfig {
    TransportConfig { streams: slow_upload_windows(), ..mp_config() }
}

/// Receive windows small enough that flow control holds an upload to a few windows per RTT
/// (so that it lasts long enough for several key updates).
pub(super) fn slow_upload_windows() -> crate::stream::StreamsConfig {
    crate::stream::StreamsConfig {
        stream_receive_window: 100_000,
        max_stream_window: 100_000,
        receive_window: 200_000,
        max_connection_window: 200_000,
        ..Default::default()
    }
}

#[test]
fn key_updates_cross_a_multipath_transfer() {
    let cfg = TransportConfig { key_update_interval: 200, ..slow_upload_config() };
    let mut pair = Pair::new(cfg);
    open_second_path(&mut pair);
    run_upload(&mut pair, 6_000_000, Duration::from_secs(30));
    let updates = client(&mut pair).stats().key_updates;
    assert!(updates >= 2, "only {updates} key updates");
}

/// Shares a connection's qlog with the test.
pub(super) struct SharedLog(pub(super) UpdateLog);

/// The key updates a [`SharedLog`] saw: (time, trigger).
pub(super) type UpdateLog = std::sync::Arc<std::sync::Mutex<Vec<(Instant, String)>>>;

impl crate::qlog::QlogSink for SharedLog {
    fn emit(&mut self, time: Instant, name: &'static str, data: serde_json::Value) {
        // One update logs both directions' keys: count it once.
        if name == "security:key_updated" && data["key_type"] == "client_1rtt_secret" {
            let trigger = data["trigger"].as_str().unwrap_or_default().to_string();
            self.0.lock().expect("log").push((time, trigger));
        }
    }
}

/// RFC 10069 §2.5: the next key update waits three of the largest PTOs
/// after the previous one was acknowledged, also when the previous update was the peer's
/// (the side that followed it must not start its own right away).
#[test]
fn key_updates_wait_three_ptos_on_both_sides() {
    let cfg = TransportConfig { key_update_interval: 100, ..slow_upload_config() };
    let mut pair = Pair::new(cfg);
    let logs = [std::sync::Arc::default(), std::sync::Arc::default()];
    client(&mut pair).set_qlog(Box::new(SharedLog(std::sync::Arc::clone(&logs[0]))));
    open_second_path(&mut pair);
    server(&mut pair).set_qlog(Box::new(SharedLog(std::sync::Arc::clone(&logs[1]))));
    run_upload(&mut pair, 6_000_000, Duration::from_secs(30));
    // Both paths have a 20 ms RTT: a PTO is well above that, three of them above 60 ms.
    let local_updates = local_updates_apart(&logs, 3 * 2 * pair.latency);
    assert!(local_updates >= 3, "{local_updates} key updates: {logs:?}");
}

/// The key updates the client's and the server's logs ([`SharedLog`]) show each side
/// initiating; each must come at least `min_gap` after the update before it.
pub(super) fn local_updates_apart(logs: &[UpdateLog; 2], min_gap: Duration) -> usize {
    let mut local_updates = 0;
    for (side, log) in ["client", "server"].iter().zip(logs) {
        let log = log.lock().expect("log");
        for w in log.windows(2) {
            if w[1].1 == "local_update" {
                local_updates += 1;
                let gap = w[1].0 - w[0].0;
                assert!(gap >= min_gap, "{side} updated {gap:?} after the previous update: {log:?}");
            }
        }
    }
    local_updates
}

/// The wait of RFC 10069 §2.5 follows an update: the first one (out of the handshake's
/// phase) starts as soon as it is due, well within three PTOs of the handshake (a fast
/// transfer of a megabyte ended before multipath connections made any update at all).
#[test]
fn the_first_key_update_does_not_wait_three_ptos() {
    let cfg = TransportConfig { key_update_interval: 16, ..slow_upload_config() };
    let mut pair = Pair::new(cfg);
    let log = std::sync::Arc::default();
    client(&mut pair).set_qlog(Box::new(SharedLog(std::sync::Arc::clone(&log))));
    assert!(confirm_handshake(&mut pair));
    assert!(client(&mut pair).shared.mp.enabled, "multipath negotiated");
    let confirmed = pair.now;
    run_upload(&mut pair, 300_000, Duration::from_secs(30));
    let log = log.lock().expect("log");
    let first = log.iter().find(|(_, t)| t == "local_update").expect("the client updated its keys");
    // Three PTOs are above three round trips (60 ms here); the first update comes sooner.
    assert!(first.0 - confirmed < 3 * 2 * pair.latency, "first update {:?} after confirmation", first.0 - confirmed);
}

#[test]
fn path_id_limit_blocks_then_max_path_id_raises_it() {
    let client_cfg = mp_config();
    let server_cfg = TransportConfig { initial_max_path_id: Some(1), ..TransportConfig::default() };
    let mut pair = Pair::asymmetric(client_cfg, server_cfg);
    let id = open_second_path(&mut pair);
    let now = pair.now;
    let server_addr = pair.server_addr;
    let third: SocketAddr = "10.0.2.1:4433".parse().expect("addr");
    assert_eq!(
        client(&mut pair).open_path(now, Some(third), server_addr, PathStatus::Available),
        Err(PathError::NoPathId)
    );
    pair.run_until(Duration::from_millis(200), |_| false);
    assert_eq!(client(&mut pair).stats().paths_blocked_sent, 1);
    assert_eq!(server(&mut pair).stats().paths_blocked_received, 1);
    let now = pair.now;
    client(&mut pair).abandon_path(now, id, 0).expect("abandon");
    // Once the server drops path 1's state it allows path ID 2 (MAX_PATH_ID).
    assert_eq!(open_path_when_allowed(&mut pair, third, server_addr, Duration::from_secs(10)), Some(2));
}

/// A server that takes two paths at once (path 0 included) issues connection IDs for path
/// ID 1 only, even though its path ID limit is higher: the client is told to wait
/// (`NoConnectionId`, PATH_CIDS_BLOCKED) instead of opening a path the server would drop.
#[test]
fn concurrent_path_limit_bounds_the_path_ids_with_cids() {
    let server_cfg = TransportConfig { max_concurrent_paths: 2, ..mp_config() };
    let mut pair = Pair::asymmetric(mp_config(), server_cfg);
    let id = open_second_path(&mut pair);
    assert_eq!(id, 1);
    let now = pair.now;
    let server_addr = pair.server_addr;
    let third: SocketAddr = "10.0.2.1:4433".parse().expect("addr");
    assert_eq!(
        client(&mut pair).open_path(now, Some(third), server_addr, PathStatus::Available),
        Err(PathError::NoConnectionId)
    );
    pair.run_until(Duration::from_millis(200), |_| false);
    assert_eq!(client(&mut pair).stats().path_cids_blocked_sent, 1);
    assert!(server(&mut pair).stats().path_cids_blocked_received >= 1);
    // Once path 1 is gone on the server, path ID 2 gets CIDs and opens.
    let now = pair.now;
    client(&mut pair).abandon_path(now, id, 0).expect("abandon");
    assert_eq!(open_path_when_allowed(&mut pair, third, server_addr, Duration::from_secs(10)), Some(2));
}

/// Puts path `id` of `c` in the state a NAT rebinding leaves it in on the server (new address
/// not validated, its anti-amplification budget spent), with an ack-eliciting packet received
/// 50 ms ago whose ACK is due; then runs `c`'s timers and sends what it can. Returns the
/// paths that carried datagrams.
fn amplification_blocked_ack(c: &mut Connection, id: u64, now: Instant) -> Vec<u64> {
    let pi = c.path_index(id).expect("path");
    let p = &mut c.paths[pi];
    p.validated = false;
    p.amp_received = 32;
    p.amp_sent = 96;
    let pn = p.data.received.largest().map_or(0, |(l, _)| l + 1);
    p.data.received.on_packet(pn, true, now - Duration::from_millis(50), None);
    p.data.ack_pending = true;
    c.paths.publish(pi);
    c.handle_timeout(now);
    let mut buf = Vec::new();
    let mut sent_on = Vec::new();
    while let Some(t) = c.poll_transmit(now, &mut buf) {
        sent_on.push(t.path_id);
    }
    sent_on
}

/// Runs the pair for 500 ms, draining both sides' events: only timers and ACKs remain.
fn settle(pair: &mut Pair) {
    pair.run_until(Duration::from_millis(500), |p| {
        while p.client.poll_event().is_some() {}
        while p.server.poll_event().is_some() {}
        false
    });
}

/// Found in the simulator: after a NAT rebinding of a download path, the server's ACK for that
/// path was due but could only go on that path, blocked by the anti-amplification limit, so
/// poll_timeout returned the same past instant forever (a busy loop). PATH_ACKs may travel on
/// any path (RFC 10069 §3.1): it goes on path 0.
#[test]
fn ack_of_an_amplification_limited_path_goes_elsewhere() {
    let mut pair = Pair::new(mp_config());
    let id = open_second_path(&mut pair);
    settle(&mut pair);
    let now = pair.now;
    let s = server(&mut pair);
    let sent_on = amplification_blocked_ack(s, id, now);
    assert_eq!(sent_on, [0], "the ACK of path {id} did not go on path 0");
    assert!(s.poll_timeout().is_some_and(|t| t > now), "timer left at {:?} (now {now:?})", s.poll_timeout());
}

/// Without another path the ACK waits for the peer's next datagram (which raises the limit),
/// without a timer in the past.
#[test]
fn ack_blocked_by_the_amplification_limit_arms_no_past_timer() {
    let mut pair = Pair::new(TransportConfig::default());
    confirm(&mut pair);
    pair.run_until(Duration::from_millis(500), |p| {
        while p.server.poll_event().is_some() {}
        false
    });
    let now = pair.now;
    let s = server(&mut pair);
    assert_eq!(amplification_blocked_ack(s, 0, now), Vec::<u64>::new());
    assert!(s.poll_timeout().is_some_and(|t| t > now), "timer left at {:?} (now {now:?})", s.poll_timeout());
}

/// Found by the simulator sweep over the ranges of Table 1 of "Multipath QUIC: Design and
/// Evaluation" (CoNEXT 2017) (`mpq sim --seed 1 --link 9.571mbit/1.9ms/queue=44.5ms/loss=0.602%
/// --link 0.296mbit/20.7ms/queue=5.0ms/loss=1.403%`): the server validating the client's new path
/// had spent that path's anti-amplification budget on its PATH_CHALLENGEs. The retry deadline of
/// the challenge, already past and already marking it for sending, stayed in `poll_timeout`, so the
/// timer fired at the same instant forever (the simulator's spin guard panicked). The challenge now
/// waits for the peer's next datagram, and validation still fails at `fail_at`.
#[test]
fn seed002_challenge_blocked_by_amplification_arms_no_past_timer() {
    let mut pair = Pair::new(mp_config());
    let id = open_second_path(&mut pair);
    settle(&mut pair);
    let now = pair.now;
    let s = server(&mut pair);
    let pi = s.path_index(id).expect("path");
    let p = &mut s.paths[pi];
    // The state the sweep left path 1 in: not validated, budget spent, the challenge's
    // retry due long ago.
    p.validated = false;
    p.amp_received = 100;
    p.amp_sent = 300;
    let fail_at = now + Duration::from_secs(2);
    p.challenge = Some(path::Challenge {
        data: [7; 8],
        send_pending: false,
        sent_at: Some(now - Duration::from_secs(1)),
        fail_at: Some(fail_at),
        full_size: true,
    });
    s.paths.publish(pi);
    for _ in 0..3 {
        s.handle_timeout(now);
        let mut buf = Vec::new();
        while let Some(t) = s.poll_transmit(now, &mut buf) {
            assert_ne!(t.path_id, id, "sent on a path with no anti-amplification budget");
        }
        assert!(s.poll_timeout().is_some_and(|t| t > now), "timer left at {:?} (now {now:?})", s.poll_timeout());
    }
    let pi = s.path_index(id).expect("path");
    assert!(s.paths[pi].challenge.is_some_and(|c| c.send_pending), "the challenge is still to be sent");
    // Nothing arrives: validation fails when it should, not later.
    s.handle_timeout(fail_at);
    assert!(s.path_index(id).is_none_or(|pi| s.paths[pi].challenge.is_none()), "validation did not fail at fail_at");
}

/// Found by the chaos sweep (`crates/mpq-sim/tests/chaos.rs`, case seed
/// 11623035763058037611): the client's PATH_NEW_CONNECTION_IDs for path 1 were lost on a
/// congested handshake path, the client opened path 1 anyway, the server (holding no CID
/// to answer with) dropped every packet on it, and the client declared the path failed and
/// lost it for good. The client opens a path once its CIDs for it were sent; the server
/// keeps the new path's packets until the resent CIDs arrive, then answers, dropping none.
#[test]
fn path_opens_even_if_its_cids_are_late_seed_11623035763058037611() {
    let mut pair = Pair::new(mp_config());
    let events = confirm(&mut pair);
    // Wait until the client could open path 1, then rewind both sides to the state where
    // the client's CIDs for it never arrived: the server holds none, the client sends them
    // again, on a path 0 now slower than the new path.
    let mut allowed = events.contains(&Event::Path(PathEvent::NewPathAllowed));
    pair.run_until(Duration::from_secs(1), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            allowed |= e == Event::Path(PathEvent::NewPathAllowed);
        }
        allowed
    });
    assert!(allowed);
    server(&mut pair).shared.peer_cids.get_mut(&1).expect("path 1 CIDs").active.clear();
    let c = client(&mut pair);
    let l = c.shared.local_cids.get_mut(&1).expect("path 1 CIDs");
    l.to_advertise = l.active.keys().copied().collect();
    let client_addr = pair.client_addr;
    pair.extra_latency.push((client_addr, Duration::from_millis(50)));
    let dropped = server(&mut pair).stats().dropped_packets;

    let server_addr = pair.server_addr;
    let id = open_path_when_allowed(&mut pair, addr2(), server_addr, Duration::from_secs(2)).expect("path opened");
    // The new path's challenge reaches the server first, which keeps it.
    let mut held = false;
    let mut validated = false;
    assert!(pair.run_until(Duration::from_secs(2), |p| {
        held |= !server(p).shared.early_one_rtt.is_empty();
        while let Some((_, e)) = p.client.poll_event() {
            validated |= e == Event::Path(PathEvent::Validated { id });
        }
        validated
    }));
    assert!(held, "the new path's packets did not wait for its CIDs");
    assert_eq!(server(&mut pair).stats().dropped_packets, dropped, "the server dropped packets of the new path");
    assert!(server(&mut pair).shared.early_one_rtt.is_empty());
}

/// Paths open once the client's handshake completes, before it is confirmed: the server's
/// CIDs for them come with its Finished (0.5-RTT), the client's with its own Finished.
#[test]
fn paths_open_before_the_handshake_is_confirmed() {
    let mut pair = Pair::new(mp_config());
    let client_addr = pair.client_addr;
    // A slow first path: the client's Finished takes 100 ms to arrive, HANDSHAKE_DONE as
    // long to come back.
    pair.extra_latency.push((client_addr, Duration::from_millis(100)));
    let server_addr = pair.server_addr;
    let id = open_path_when_allowed(&mut pair, addr2(), server_addr, Duration::from_secs(2)).expect("path opened");
    assert!(!client(&mut pair).is_handshake_confirmed(), "the path opened only with the confirmed handshake");
    let mut validated_before_confirmed = false;
    assert!(pair.run_until(Duration::from_secs(2), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            let confirmed = client(p).is_handshake_confirmed();
            validated_before_confirmed |= !confirmed && e == Event::Path(PathEvent::Validated { id });
        }
        while p.server.poll_event().is_some() {}
        client(p).is_handshake_confirmed()
    }));
    assert!(validated_before_confirmed, "the new path was validated only after the confirmation");
    // Data flows on both paths.
    run_upload(&mut pair, 2_000_000, Duration::from_secs(30));
    let c = client(&mut pair);
    let (p0, p1) = (path_stats(c, 0), path_stats(c, 1));
    assert!(p1.tx_bytes > 1_000_000 && p0.rtt_ms > p1.rtt_ms, "the new, faster path unused: {p0:?} {p1:?}");
}

/// A new path's first packets can overtake the client's Finished (lost here): the server,
/// whose handshake is not complete, keeps them and answers once the Finished and the
/// client's CIDs for the path arrive (RFC 9001 §5.7), dropping none.
#[test]
fn a_new_paths_packets_wait_for_the_clients_finished() {
    // The client's handshake is complete; its Finished (and its CIDs for path 1) are lost.
    let (mut pair, blocked, id) = opened_with_first_path_blocked();
    let mut held = false;
    assert!(pair.run_until(Duration::from_secs(1), |p| {
        let s = server(p);
        held |= !s.shared.handshake_complete && !s.shared.early_one_rtt.is_empty();
        held
    }));
    blocked.store(false, std::sync::atomic::Ordering::Relaxed);
    let mut validated = false;
    assert!(pair.run_until(Duration::from_secs(5), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            validated |= e == Event::Path(PathEvent::Validated { id });
        }
        validated
    }));
    // Every packet the client sent on the new path was processed (none was dropped).
    pair.run_until(Duration::from_secs(1), |_| false);
    let sent = path_stats(client(&mut pair), id).tx_packets;
    let s = server(&mut pair);
    assert!(s.shared.handshake_complete && s.shared.early_one_rtt.is_empty());
    assert_eq!(s.path_ids(), vec![0, 1]);
    assert_eq!(path_stats(s, id).rx_packets, sent, "the server dropped packets of the new path");
}

/// A path opened right after the client's handshake completed, while the server cannot
/// complete its own for seconds (every datagram of the client's first path lost): the
/// server holds the new path's packets, and the client keeps validating the path until the
/// handshake is confirmed and for the full validation time after (RFC 10069 §3, RFC 9001
/// §5.7). Giving it up 3 PTOs after its first challenge left a client behind a slow first
/// path on that path alone.
#[test]
fn a_path_opened_before_confirmation_is_not_given_up_while_the_handshake_lags() {
    let (mut pair, blocked, id) = opened_with_first_path_blocked();
    // Six seconds: twice the path's validation time (three PTOs of an initial RTT).
    let mut events = Vec::new();
    pair.run_until(Duration::from_secs(6), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            events.push(e);
        }
        false
    });
    assert!(!client(&mut pair).is_handshake_confirmed());
    blocked.store(false, std::sync::atomic::Ordering::Relaxed);
    let mut validated = false;
    assert!(
        pair.run_until(Duration::from_secs(20), |p| {
            while let Some((_, e)) = p.client.poll_event() {
                validated |= e == Event::Path(PathEvent::Validated { id });
                events.push(e);
            }
            validated
        }),
        "path {id} not validated: {events:?}"
    );
    assert!(
        !events.iter().any(|e| matches!(e, Event::Path(PathEvent::Abandoned { .. }))),
        "a path was abandoned: {events:?}"
    );
}

/// The client's first 1-RTT packets reach the server while its Finished does not (every
/// long-header datagram of the client lost for longer than six initial RTTs): the server
/// keeps them until its handshake completes, whatever their age, and drops none.
#[test]
fn one_rtt_packets_held_for_the_handshake_are_kept_however_long_it_takes() {
    let mut pair = Pair::new(mp_config());
    run_until_connected(&mut pair);
    let blocked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let client_addr = pair.client_addr;
    let b = blocked.clone();
    pair.drop_datagram = Box::new(move |src, d| {
        src == client_addr && d.first().is_some_and(|f| f & 0x80 != 0) && b.load(std::sync::atomic::Ordering::Relaxed)
    });
    // A request's worth of stream data: a few 1-RTT packets and their PTO probes.
    // And 2.5 s later, more (on another stream): held when the first ones have waited longer
    // than six initial RTTs.
    let mut up = Upload::new(3000);
    let late_at = pair.now + Duration::from_millis(2500);
    let mut late_sent = false;
    let mut held_longest = Duration::ZERO;
    let mut first_held = None;
    pair.run_until(Duration::from_secs(5), |p| {
        up.pump(p);
        let now = p.now;
        if !late_sent && now >= late_at {
            let c = client(p);
            let id = c.open_stream(crate::types::Dir::Uni).expect("stream");
            late_sent = c.write(id, b"late").expect("write") == 4;
        }
        let s = server(p);
        if !s.shared.early_one_rtt.is_empty() {
            let since = *first_held.get_or_insert(now);
            held_longest = now - since;
        }
        false
    });
    assert!(!server(&mut pair).shared.handshake_complete);
    assert!(held_longest > 6 * mp_config().initial_rtt, "nothing held long enough: {held_longest:?}");
    let dropped_before = server(&mut pair).shared.stats.dropped_packets;
    blocked.store(false, std::sync::atomic::Ordering::Relaxed);
    assert!(pair.run_until(Duration::from_secs(20), |p| {
        up.pump(p);
        up.is_done() && server(p).shared.early_one_rtt.is_empty()
    }));
    up.assert_intact();
    // (Afterwards the client's queued Handshake retransmissions find the server's Handshake
    // keys discarded: those drops are not held packets.)
    assert_eq!(dropped_before, 0, "held packets were dropped before the handshake completed");
}

#[test]
fn redundant_scheduler_sends_everything_on_both_paths() {
    let cfg = TransportConfig { scheduler: crate::sched::SchedulerKind::Redundant, ..mp_config() };
    let mut pair = Pair::new(cfg);
    open_second_path(&mut pair);
    run_upload(&mut pair, 1_000_000, Duration::from_secs(30));
    let c = client(&mut pair);
    let (p0, p1) = (path_stats(c, 0), path_stats(c, 1));
    // Each packet's copy waits for the other path's window and is dropped once the original
    // was acknowledged (the data arrived): both paths carry data and well over the file
    // crosses the network.
    assert!(p0.tx_bytes > 400_000 && p1.tx_bytes > 400_000, "one path idle: {p0:?} {p1:?}");
    assert!(p0.tx_bytes + p1.tx_bytes > 1_100_000, "nothing duplicated: {p0:?} {p1:?}");
}

#[test]
fn coupled_congestion_control_runs_on_every_path() {
    for cc in [crate::cc::CcAlgorithm::Lia, crate::cc::CcAlgorithm::Olia] {
        let cfg = TransportConfig { cc, ..mp_config() };
        let mut pair = Pair::new(cfg);
        pair.drop = Box::new(|n, _| n % 50 == 0);
        open_second_path(&mut pair);
        run_upload(&mut pair, 2_000_000, Duration::from_secs(60));
        let c = client(&mut pair);
        assert!(path_stats(c, 0).tx_bytes > 100_000 && path_stats(c, 1).tx_bytes > 100_000, "{cc}");
    }
}

#[test]
fn paths_opened_out_of_order_are_accepted() {
    let mut pair = Pair::new(mp_config());
    open_second_path(&mut pair);
    // Path 2's first packet overtakes path 3's: the server must still accept path 3.
    let slow: SocketAddr = "10.0.3.1:4433".parse().expect("addr");
    let fast: SocketAddr = "10.0.2.1:4433".parse().expect("addr");
    pair.extra_latency.push((slow, Duration::from_millis(80)));
    let now = pair.now;
    let server_addr = pair.server_addr;
    let a = client(&mut pair).open_path(now, Some(slow), server_addr, PathStatus::Available).expect("open");
    let b = client(&mut pair).open_path(now, Some(fast), server_addr, PathStatus::Available).expect("open");
    assert!(a < b);
    pair.run_until(Duration::from_secs(2), |p| {
        while p.client.poll_event().is_some() {}
        false
    });
    let s = server(&mut pair);
    let mut ids = s.path_ids();
    // The server learned of path b first.
    assert_eq!(ids, vec![0, 1, b, a]);
    ids.sort_unstable();
    assert_eq!(path_stats(s, a).state, "active");
}

#[test]
fn multipath_frame_errors() {
    // A path ID above our limit.
    let mut buf = Vec::new();
    Frame::PathAbandon { path_id: 100, error_code: 0 }.encode(&mut buf);
    assert_eq!(transport_code(mp_server_error_for(&buf)), TransportErrorCode::PROTOCOL_VIOLATION.0);
    // PATH_CIDS_BLOCKED naming a sequence number we never reached.
    let mut buf = Vec::new();
    Frame::PathCidsBlocked { path_id: 1, next_seq: 50 }.encode(&mut buf);
    assert_eq!(transport_code(mp_server_error_for(&buf)), TransportErrorCode::PROTOCOL_VIOLATION.0);
    // MAX_PATH_ID below the initial value.
    let mut buf = Vec::new();
    Frame::MaxPathId(0).encode(&mut buf);
    assert_eq!(transport_code(mp_server_error_for(&buf)), TransportErrorCode::PROTOCOL_VIOLATION.0);
    // A PATH_ACK for a path that does not exist is ignored, as is a status for a path not
    // in use yet.
    let mut buf = Vec::new();
    Frame::PathStatus { path_id: 3, seq: 0, backup: true }.encode(&mut buf);
    let mut ranges = crate::range_set::RangeSet::new();
    ranges.insert(0..1);
    crate::frame::encode_ack_bounded(&mut buf, Some(3), &ranges, 0, None, 100, usize::MAX);
    assert_eq!(mp_server_error_for(&buf), None);
}

/// Injects frames into a client 1-RTT packet of a multipath connection; returns the
/// server's error, if the server closed.
fn mp_server_error_for(frames: &[u8]) -> Option<ConnectionError> {
    let mut pair = Pair::new(mp_config());
    confirm(&mut pair);
    client(&mut pair).shared.injected = frames.to_vec();
    let mut err = None;
    pair.run_until(Duration::from_secs(1), |p| {
        while let Some((_, e)) = p.server.poll_event() {
            if let Event::ConnectionLost(e) = e {
                err = Some(e);
            }
        }
        err.is_some()
    });
    let _ = server_error;
    err
}
