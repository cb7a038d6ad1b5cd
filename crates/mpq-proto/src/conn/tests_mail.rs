//! Mail between paths (`conn/mail.rs`): each message handled by its path alone, bounded, and
//! the connection-level flows that use it (ACKs carried for another path and their
//! acknowledgement).

use std::sync::Arc;
use std::time::Duration;

use super::config::{AckPolicy, TransportConfig};
use super::fuzzing::tests::{forge_to_server, null_pair};
use super::mail::*;
use super::path::{Challenge, OldPathChallenge, PathPhase, PathState};
use super::space::SentFrames;
use super::Connection;
use crate::coding::write_varint;
use crate::frame::frame_type as ft;
use crate::recovery::received::PRUNE_AFTER_RANGES;
use crate::recovery::sent::SentPacket;
use crate::stream::StreamChunk;
use crate::testing::Pair;
use crate::time::Instant;
use crate::types::StreamId;

fn path(id: u64) -> PathState {
    PathState::new(id, "127.0.0.1:1".parse().expect("addr"), &TransportConfig::default(), true)
}

fn challenge(data: u8, full_size: bool) -> Challenge {
    Challenge { data: [data; 8], send_pending: false, sent_at: None, fail_at: None, full_size }
}

/// A notice for path 1 (the owner in these tests).
fn notice(carrier: u64, version: u64, carriers: &[u64]) -> AckCarried {
    let carriers = carriers.iter().copied().collect();
    AckCarried { owner: 1, carrier, version, at: Instant::ZERO, carriers, largest: None }
}

/// Records packet `pn` on path `p` for acknowledgement, as the receive path does.
fn receive(p: &mut PathState, pn: u64) {
    p.data.received.on_packet(pn, true, Instant::ZERO, None);
    p.data.on_packet_recorded();
}

#[test]
fn an_ack_counts_as_sent_once_every_carrier_of_its_version_reported() {
    let mut p = path(1);
    assert!(p.ack_offer().is_none(), "nothing pending, nothing offered");
    receive(&mut p, 0);
    let v = p.ack_offer().expect("offer").version;
    // Path 0 and path 2 are meant to carry it; path 0 reports first.
    p.on_ack_carried(&notice(0, v, &[0, 2]), None);
    assert!(p.data.ack_pending, "path 2 has not carried it yet");
    assert_eq!(p.ack_offer().expect("offer").carried_on.as_slice(), &[0]);
    // A notice about an older version is stale: a packet arrived since.
    receive(&mut p, 1);
    p.on_ack_carried(&notice(2, v, &[0, 2]), None);
    assert!(p.data.ack_pending && p.data.ack_carried_on.is_empty(), "stale notice ignored");
    let v2 = p.ack_offer().expect("offer").version;
    assert_eq!(v2, v + 1);
    p.on_ack_carried(&notice(0, v2, &[0, 2]), None);
    p.on_ack_carried(&notice(2, v2, &[0, 2]), None);
    assert!(!p.data.ack_pending && p.ack_offer().is_none(), "sent once both carried it");
    assert!(!p.data.received.wants_immediate_ack(), "the ACK timer was reset");
    // A notice for another path (its slot was reused) changes nothing.
    receive(&mut p, 2);
    let v3 = p.ack_offer().expect("offer").version;
    p.on_ack_carried(&AckCarried { owner: 7, carriers: [0].into_iter().collect(), ..notice(0, v3, &[0]) }, None);
    assert!(p.data.ack_pending, "not this path's notice");
}

/// The owner of a carried ACK checks its own key marks: the ACK covers a packet the peer sent
/// in the current key phase only if its Largest Acknowledged reaches the phase's first packet
/// on this path (RFC 9001 §6.2).
#[test]
fn a_carried_ack_tells_whether_it_covers_the_peers_current_phase() {
    let mut p = path(1);
    p.key_marks.on_current_authenticated(3, 10).expect("marks");
    receive(&mut p, 10);
    let v = p.ack_offer().expect("offer").version;
    let with_largest = |l: u64| AckCarried { largest: Some(l), ..notice(0, v, &[0, 2]) };
    assert!(!p.on_ack_carried(&with_largest(9), Some(3)), "below the phase's first packet");
    assert!(p.on_ack_carried(&with_largest(10), Some(3)));
    assert!(!p.on_ack_carried(&with_largest(10), None), "no 1-RTT keys");
}

#[test]
fn a_carrier_carries_each_version_once_and_keeps_bounded_records() {
    let mut c = path(0);
    c.note_carried(1, 5);
    assert!(c.has_carried(1, 5) && !c.has_carried(1, 6));
    c.note_carried(1, 6);
    assert!(c.has_carried(1, 6) && !c.has_carried(1, 5), "one record per owner");
    for owner in 10..10 + 2 * MAX_CARRIED_RECORDS as u64 {
        c.note_carried(owner, 1);
    }
    assert_eq!(c.carried_acks.len(), MAX_CARRIED_RECORDS);
}

#[test]
fn mail_is_bounded() {
    let mut m = Mail::default();
    assert!(m.is_empty());
    // One notice per carrier: a newer one replaces the older, none is dropped.
    for v in 0..100 {
        m.push_ack_carried(notice(v % 3, v, &[0, 1, 2]));
    }
    assert_eq!(m.acks_carried.len(), 3);
    let mut versions: Vec<u64> = m.acks_carried.iter().map(|n| n.version).collect();
    versions.sort_unstable();
    assert_eq!(versions, [97, 98, 99], "the newest of each carrier");
    for l in 0..3 * MAX_ACKS_ACKED as u64 {
        m.push_ack_acked(l);
    }
    assert_eq!(m.acks_acked.len(), MAX_ACKS_ACKED);
    assert_eq!(m.acks_acked.last(), Some(&(3 * MAX_ACKS_ACKED as u64 - 1)), "merged into the newest");
    for d in 0..5 {
        m.push_challenge_answer(ChallengeAnswer { data: [d; 8], recheck: None });
    }
    assert_eq!(m.challenge_answers.len(), MAX_CHALLENGE_ANSWERS);
    assert!(!m.is_empty());
}

#[test]
fn a_challenge_answer_validates_only_its_path() {
    let cfg = TransportConfig::default();
    let mut p = path(1);
    p.phase = PathPhase::Validating;
    p.validated = false;
    p.challenge = Some(challenge(1, true));
    let answer = |d: u8, recheck: Option<Challenge>| ChallengeAnswer { data: [d; 8], recheck };
    assert_eq!(p.on_challenge_answer(answer(9, None), &cfg), ChallengeOutcome::NotMine);
    assert!(p.challenge.is_some() && !p.validated);
    assert_eq!(
        p.on_challenge_answer(answer(1, Some(challenge(2, false))), &cfg),
        ChallengeOutcome::Validated { newly_active: true }
    );
    assert!(p.validated && p.challenge.is_none() && p.phase == PathPhase::Active);

    // A challenge that went in a datagram under 1200 bytes: validated, then checked again.
    let mut q = path(2);
    q.phase = PathPhase::Validating;
    q.challenge = Some(challenge(3, false));
    assert_eq!(q.on_challenge_answer(answer(3, Some(challenge(4, false))), &cfg), ChallengeOutcome::Rechecking);
    assert_eq!(q.challenge.map(|c| c.data), Some([4; 8]));
    assert_eq!(q.phase, PathPhase::Validating, "not usable before 1200 bytes got through");

    // The previous address answers (RFC 9000 §9.3.3).
    let old = OldPathChallenge { remote: q.remote, local: None, data: [5; 8], send_pending: false };
    q.old_challenge = Some(old);
    assert_eq!(q.on_challenge_answer(answer(5, None), &cfg), ChallengeOutcome::OldAddressAnswers);
    assert!(q.old_challenge.is_none());
}

fn sent(frames: SentFrames) -> SentPacket<SentFrames> {
    SentPacket::eliciting(Instant::ZERO, 1200, frames)
}

fn stream_frames(offset: u64) -> SentFrames {
    let mut f = SentFrames::default();
    f.stream.push(StreamChunk { id: StreamId(0), offset, len: 1000, fin: false });
    f
}

#[test]
fn an_abandoned_path_hands_back_its_flight_and_a_late_order_only_extends_its_state() {
    let mut p = path(1);
    for pn in 0..3 {
        p.data.loss.on_packet_sent(pn, sent(stream_frames(pn * 1000)));
    }
    p.bytes_in_flight = 3 * 1200;
    let t0 = Instant::ZERO + Duration::from_secs(1);
    let order = AbandonOrder { keep: Duration::from_secs(3), by_peer: false, error_code: 0 };
    match p.on_abandon(t0, order) {
        AbandonOutcome::Abandoned { send_abandon, lost } => {
            assert!(send_abandon);
            assert_eq!(lost.iter().map(|(pn, _)| *pn).collect::<Vec<_>>(), [0, 1, 2]);
        }
        o => panic!("{o:?}"),
    }
    assert_eq!((p.phase, p.bytes_in_flight, p.discard_at), (PathPhase::Abandoned, 0, Some(t0 + order.keep)));
    // The peer's PATH_ABANDON arrives later: the state stays three PTOs from then.
    let t1 = t0 + Duration::from_secs(2);
    let answer = AbandonOrder { by_peer: true, ..order };
    assert!(matches!(p.on_abandon(t1, answer), AbandonOutcome::AlreadyAbandoned));
    assert_eq!(p.discard_at, Some(t1 + order.keep));
    // Our own second order changes nothing.
    assert!(matches!(p.on_abandon(t1 + order.keep, order), AbandonOutcome::AlreadyAbandoned));
    assert_eq!(p.discard_at, Some(t1 + order.keep));
}

fn request(fast_rtt_ms: u64, fast_rate: Option<f64>, budget: usize) -> ReinjectRequest {
    ReinjectRequest { to: 0, to_id: 0, fast_rtt: Duration::from_millis(fast_rtt_ms), fast_rate, budget }
}

fn offsets(chunks: &[StreamChunk]) -> Vec<u64> {
    chunks.iter().map(|c| c.offset).collect()
}

#[test]
fn reinjection_copies_the_newest_first_within_the_budget() {
    let mut slow = path(1);
    for pn in 0..4 {
        slow.data.loss.on_packet_sent(pn, sent(stream_frames(pn * 1000)));
    }
    // Sent at 0 on a path with the initial RTT (333 ms): a 10 ms path delivers a copy
    // sent at 100 ms clearly earlier.
    let now = Instant::ZERO + Duration::from_millis(100);
    let req = request(10, None, 2 * 1032);
    let unacked = |c: &StreamChunk| c.offset != 2000; // the chunk at 2000 was acknowledged
    let (chunks, used) = slow.reinjection_copies(now, &req, unacked);
    assert_eq!(offsets(&chunks), [3000, 1000], "the tail first, skipping the acknowledged chunk");
    assert_eq!(used, 2 * 1032);
    // Asked again: only what was not copied yet.
    let (chunks, _) = slow.reinjection_copies(now, &req, unacked);
    assert_eq!(offsets(&chunks), [0]);
    assert!(slow.reinjection_copies(now, &req, unacked).0.is_empty(), "everything was copied once");
    // A packet sent since is copied too.
    slow.data.loss.on_packet_sent(4, sent(stream_frames(4000)));
    assert_eq!(offsets(&slow.reinjection_copies(now, &req, unacked).0), [4000]);
    // Nothing that the slow path would deliver about as soon.
    let mut late = path(2);
    late.data.loss.on_packet_sent(0, sent(stream_frames(0)));
    let later = Instant::ZERO + Duration::from_millis(330);
    assert!(late.reinjection_copies(later, &req, |_| true).0.is_empty());
}

/// A slow path whose queue is still filling: its smoothed RTT says its packets arrive soon,
/// its delivery rate says the ones at the back of its queue arrive much later. Only with the
/// rate measured are those copied, and only as many as the fast path delivers first.
#[test]
fn reinjection_reads_the_slow_paths_queue_from_its_delivery_rate() {
    let ms = |v: u64| Instant::ZERO + Duration::from_millis(v);
    let fill = |p: &mut PathState| {
        // 40 packets of 1200 bytes sent from 0 to 39 ms.
        for pn in 0..40 {
            p.data.loss.on_packet_sent(pn, SentPacket::eliciting(ms(pn), 1200, stream_frames(pn * 1000)));
        }
    };
    let mut slow = path(1);
    slow.rtt.update(Duration::ZERO, Duration::from_millis(100), Duration::ZERO, false);
    fill(&mut slow);
    // At 60 ms a 10 ms path would deliver a copy at 72.5 ms; by its RTT the slow path
    // delivers everything by 139 ms, so even the newest packets are copied...
    let req = request(10, None, usize::MAX);
    let by_rtt = slow.reinjection_copies(ms(60), &req, |_| true).0;
    assert_eq!(by_rtt.len(), 40);
    // ...but at 130 ms (a copy at 142.5 ms) it would wait for nothing.
    let mut slow = path(1);
    slow.rtt.update(Duration::ZERO, Duration::from_millis(100), Duration::ZERO, false);
    fill(&mut slow);
    assert!(slow.reinjection_copies(ms(130), &req, |_| true).0.is_empty());
    // The same path measured delivering 120 kB/s: its 48 kB in flight are acknowledged in
    // order over 400 ms, 10 ms per packet, so all but the oldest arrive after a copy would
    // (130 + 12.5 ms).
    let mut slow = path(1);
    slow.rtt.update(Duration::ZERO, Duration::from_millis(100), Duration::ZERO, false);
    slow.delivery.on_send(ms(0), 0);
    slow.delivery.on_acked(ms(0), 1, Duration::from_millis(100), true);
    slow.delivery.on_acked(ms(100), 12_000, Duration::from_millis(100), true);
    assert!((slow.delivery.rate().expect("rate") - 120_010.0).abs() < 1.0);
    fill(&mut slow);
    let queued = slow.reinjection_copies(ms(130), &req, |_| true).0;
    assert_eq!(offsets(&queued), (1..40).rev().map(|pn| pn * 1000).collect::<Vec<_>>());
    // A fast path of 100 kB/s is busy 10 ms per 1000 bytes of copies: going back from the
    // tail (packet 39, acknowledged at 530 ms; copy at 152.5 ms), it stops where its copies
    // would no longer arrive first: after 19 copies (packet 21 at 350 ms; copy at 342.5 ms).
    let mut slow = path(1);
    slow.rtt.update(Duration::ZERO, Duration::from_millis(100), Duration::ZERO, false);
    slow.delivery = Default::default();
    slow.delivery.on_send(ms(0), 0);
    slow.delivery.on_acked(ms(0), 1, Duration::from_millis(100), true);
    slow.delivery.on_acked(ms(100), 12_000, Duration::from_millis(100), true);
    fill(&mut slow);
    let met = slow.reinjection_copies(ms(130), &request(10, Some(100_000.0), usize::MAX), |_| true).0;
    assert_eq!(offsets(&met), (21..40).rev().map(|pn| pn * 1000).collect::<Vec<_>>());
}

fn server(pair: &mut Pair) -> &mut Connection {
    let sh = pair.server.handles()[0];
    pair.server.connection_mut(sh).expect("server")
}

/// A PATH_ACK for path 0 acknowledging exactly packet `pn`.
fn path0_ack_of(pn: u64) -> Vec<u8> {
    let mut f = Vec::new();
    write_varint(&mut f, ft::PATH_ACK);
    for v in [0, pn, 0, 0, 0] {
        write_varint(&mut f, v); // path 0, largest, delay, range count, first range
    }
    f
}

/// Under the all-paths ACK policy path 0 carries path 1's ACK from path 1's offer; path 1
/// learns by mail that it went out, and by mail again when the peer acknowledged it, which
/// prunes path 1's ranges (RFC 9000 §13.2.4).
#[test]
fn an_ack_carried_for_another_path_is_reported_to_it_and_its_acknowledgement_prunes_it() {
    let mut pair = null_pair();
    {
        let s = server(&mut pair);
        let cfg = TransportConfig { ack_policy: AckPolicy::AllPaths, ..(*s.shared.config).clone() };
        s.shared.config = Arc::new(cfg);
    }
    // Path 1 of the server receives packets with many gaps (the client burns a packet
    // number between PINGs), so that pruning applies.
    let gaps = 2 * PRUNE_AFTER_RANGES;
    for _ in 0..gaps {
        let (now, h) = (pair.now, pair.client_conn);
        let c = pair.client.connection_mut(h).expect("client");
        let id = c.fuzz_path_ids()[1];
        c.fuzz_forge_slot(now, id).expect("slot");
        forge_to_server(&mut pair, 1, false, &[ft::PING as u8]);
    }
    let now = pair.now;
    let s = server(&mut pair);
    let (s0, s1) = (s.path_index(0).expect("path 0"), s.path_index(1).expect("path 1"));
    let ranges_before = s.paths[s1].data.received.ranges().len();
    assert!(ranges_before > PRUNE_AFTER_RANGES, "{ranges_before} ranges");
    let offer = s.paths.offer(s1).expect("path 1 offers its pending ACK").clone();
    assert_eq!(offer.ranges.len(), ranges_before);
    let carried_before = s.paths[s0].stats.acks_for_other_paths;

    // The server sends: path 0 carries path 1's ACK, path 1 its own.
    let mut buf = Vec::new();
    while s.poll_transmit(now, &mut buf).is_some() {}
    assert_eq!(s.paths[s0].stats.acks_for_other_paths, carried_before + 1, "path 0 carried it once");
    assert!(s.paths[s0].has_carried(1, offer.version));
    assert!(!s.paths[s1].data.ack_pending, "both carriers reported: the ACK counts as sent");
    assert!(s.paths.offer(s1).is_none());
    assert!(!s.paths.has_mail_waiting_here());

    // The client acknowledges the path-0 packet that carried path 1's ACK.
    let carrier_pn = s.paths[s0]
        .data
        .loss
        .iter_outstanding()
        .find(|(_, p)| p.frames.acks.iter().any(|&(id, _)| id == 1))
        .map(|(pn, _)| pn)
        .expect("path 0 packet with path 1's ACK");
    forge_to_server(&mut pair, 0, false, &path0_ack_of(carrier_pn));
    let s = server(&mut pair);
    assert!(s.error().is_none(), "{:?}", s.error());
    let ranges_after = s.paths[s1].data.received.ranges().len();
    assert!(ranges_after < ranges_before, "path 1 pruned by mail: {ranges_before} -> {ranges_after}");
}

/// A PATH_ACK for path `path` acknowledging exactly packet `pn`.
fn path_ack_of(path: u64, pn: u64) -> Vec<u8> {
    let mut f = Vec::new();
    write_varint(&mut f, ft::PATH_ACK);
    for v in [path, pn, 0, 0, 0] {
        write_varint(&mut f, v);
    }
    f
}

/// A PATH_ACK for path 1 arriving on path 0 is path 1's to handle (mail): it leaves path 1's
/// ledger, and one that acknowledges a packet path 1 never sent closes the connection with
/// PROTOCOL_VIOLATION naming the frame, as it would on path 1 itself.
#[test]
fn a_path_ack_received_on_another_path_is_handled_by_the_path_it_acknowledges() {
    let mut pair = null_pair();
    let (now, sh) = (pair.now, pair.server.handles()[0]);
    let pn = pair.server.connection_mut(sh).expect("server").fuzz_forge_slot(now, 1).expect("slot").pn;
    forge_to_server(&mut pair, 0, false, &path_ack_of(1, pn));
    let s = server(&mut pair);
    assert!(s.error().is_none(), "{:?}", s.error());
    let s1 = s.path_index(1).expect("path 1");
    assert!(!s.paths[s1].data.loss.iter_outstanding().any(|(p, _)| p == pn), "acknowledged on path 1");
    let s0 = s.path_index(0).expect("path 0");
    assert_eq!(s.paths[s0].stats.rx_acks_for_other_paths, 1);
    assert!(!s.paths.has_mail_waiting_here());

    let mut pair = null_pair();
    forge_to_server(&mut pair, 0, false, &path_ack_of(1, 1 << 30));
    match server(&mut pair).error() {
        Some(super::ConnectionError::TransportError(t)) => {
            assert_eq!(
                (t.code, t.frame_type),
                (crate::error::TransportErrorCode::PROTOCOL_VIOLATION, Some(ft::PATH_ACK))
            )
        }
        other => panic!("expected PROTOCOL_VIOLATION, got {other:?}"),
    }

    // With more mail behind it (a status change for path 0, posted after the PATH_ACK):
    // the connection closes and the rest of the mail is dropped, not left for the next
    // operation (debug builds check none is waiting when one starts; a fuzzer found this).
    let mut pair = null_pair();
    let mut frames = path_ack_of(1, 1 << 30);
    for v in [ft::PATH_STATUS_BACKUP, 0, 1] {
        write_varint(&mut frames, v);
    }
    forge_to_server(&mut pair, 0, false, &frames);
    let s = server(&mut pair);
    assert!(s.error().is_some(), "closed");
    assert!(!s.paths.has_mail_waiting_here(), "mail left behind");
    pair.run_until(std::time::Duration::from_millis(100), |_| false);
}

#[test]
fn received_path_acks_waiting_for_a_path_are_bounded_and_keep_their_ranges() {
    use crate::coding::Reader;
    use crate::frame::AckFrame;
    // largest 100, delay 0, one more range: first range 4 (96..=100), gap 2, length 3.
    let mut wire = Vec::new();
    for v in [1, 100, 0, 1, 4, 2, 3] {
        write_varint(&mut wire, v);
    }
    let ack = AckFrame::decode(&mut Reader::new(&wire), true, false).expect("decode");
    let owned = ack.to_owned_frame();
    assert_eq!(owned.as_frame(), ack);
    assert_eq!(owned.as_frame().iter().collect::<Vec<_>>(), ack.iter().collect::<Vec<_>>());
    let mut m = Mail::default();
    for _ in 0..2 * MAX_PATH_ACKS {
        m.push_path_ack(owned.clone());
    }
    assert_eq!(m.path_acks.len(), MAX_PATH_ACKS);
}

/// A peer that keeps challenging a path and never acknowledges the answers cannot push that
/// path's flight past its congestion window: PATH_RESPONSE is congestion controlled like any
/// ack-eliciting packet (RFC 9002 §7, RFC 9000 §8.2.2). Found by `conn_frames` fuzzing under
/// the all-paths ACK policy (`fuzz/regressions/conn_frames/path-responses-beyond-cwnd`).
#[test]
fn unacknowledged_path_responses_stay_within_the_window() {
    let mut pair = null_pair();
    let mut buf = Vec::new();
    for i in 0..200u8 {
        let mut frames = vec![ft::PATH_CHALLENGE as u8];
        frames.extend_from_slice(&[i; 8]);
        forge_to_server(&mut pair, 1, false, &frames);
        // The server's answers are sent but never delivered, so never acknowledged.
        let now = pair.now;
        while pair.server.poll_transmit(now, &mut buf).is_some() {}
    }
    let s = server(&mut pair);
    assert!(s.error().is_none(), "{:?}", s.error());
    let slot = s.path_index(1).expect("path 1");
    let p = &s.paths[slot];
    assert!(
        p.bytes_in_flight <= p.cc.window() + u64::from(p.mtu),
        "in flight {} with a window of {}",
        p.bytes_in_flight,
        p.cc.window()
    );
    assert!(p.stats.tx_packets > 5, "some challenges were answered: {}", p.stats.tx_packets);
}
