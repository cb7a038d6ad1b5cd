//! DATAGRAM (RFC 9221) over the in-memory pair: both ways, the API's limits, the
//! PROTOCOL_VIOLATION cases, pinned and scheduler-placed datagrams on two paths, a path that
//! fails while datagrams flow, and the bounded queues.

use std::time::Duration;

use super::tests::{client, confirm_handshake, server_error, transport_code};
use super::tests_multipath::{addr2, open_second_path, server};
use super::*;
use crate::error::TransportErrorCode;
use crate::testing::Pair;
use crate::time::Instant;

fn dg_config() -> TransportConfig {
    TransportConfig { datagrams: DatagramConfig::enabled(), ..TransportConfig::default() }
}

fn mp_dg_config() -> TransportConfig {
    TransportConfig { initial_max_path_id: Some(4), ..dg_config() }
}

/// Reads every datagram the server holds.
fn drain_server(pair: &mut Pair) -> Vec<Datagram> {
    let mut out = Vec::new();
    while let Some(d) = server(pair).recv_datagram() {
        out.push(d);
    }
    out
}

/// Runs for `d`, discarding events, and collects what the server receives.
fn run_collect(pair: &mut Pair, d: Duration, got: &mut Vec<Datagram>) {
    pair.run_until(d, |p| {
        while p.client.poll_event().is_some() {}
        while p.server.poll_event().is_some() {}
        got.extend(drain_server(p));
        false
    });
}

#[test]
fn datagrams_go_both_ways() {
    let mut pair = Pair::new(dg_config());
    assert!(confirm_handshake(&mut pair));
    let max = client(&mut pair).max_datagram_size(None).expect("negotiated");
    assert!(max > 1000 && max < 1200, "max {max}");
    for i in 0..20u8 {
        client(&mut pair).send_datagram(vec![i; 100 + usize::from(i)], None).expect("client send");
        server(&mut pair).send_datagram(vec![i; 50], None).expect("server send");
    }
    // The largest one fits exactly.
    client(&mut pair).send_datagram(vec![0xee; max], None).expect("max size");
    let (mut at_client, mut at_server) = (Vec::new(), Vec::new());
    let (mut ev_client, mut ev_server) = (0, 0);
    pair.run_until(Duration::from_secs(2), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            ev_client += usize::from(e == Event::DatagramReceived);
        }
        while let Some((_, e)) = p.server.poll_event() {
            ev_server += usize::from(e == Event::DatagramReceived);
        }
        while let Some(d) = client(p).recv_datagram() {
            at_client.push(d);
        }
        at_server.extend(drain_server(p));
        at_client.len() == 20 && at_server.len() == 21
    });
    assert_eq!(at_server.len(), 21);
    assert_eq!(at_client.len(), 20);
    assert!(ev_client >= 1 && ev_server >= 1);
    for (i, d) in at_server.iter().take(20).enumerate() {
        assert_eq!(d.data.as_ref(), &vec![i as u8; 100 + i][..]);
        assert_eq!(d.path_id, 0);
    }
    assert_eq!(at_server[20].data.len(), max);
    let s = client(&mut pair).datagram_stats();
    assert_eq!((s.total.sent, s.total.received), (21, 20));
    assert_eq!(s.paths[&0].sent, 21);
    pair.run_until(Duration::from_millis(500), |_| false);
    assert_eq!(client(&mut pair).datagram_stats().total.acked, 21);
    let s = server(&mut pair).stats();
    assert_eq!((s.datagrams.total.sent, s.datagrams.total.received), (20, 21));
}

#[test]
fn send_datagram_checks_support_size_and_path() {
    // Before the handshake completes, the peer's limit is unknown.
    let mut pair = Pair::new(dg_config());
    assert_eq!(client(&mut pair).send_datagram(&b"early"[..], None), Err(DatagramError::NotConnected));
    assert!(confirm_handshake(&mut pair));
    let max = client(&mut pair).max_datagram_size(Some(0)).expect("path 0");
    assert_eq!(client(&mut pair).max_datagram_size(None), Some(max));
    assert_eq!(client(&mut pair).send_datagram(vec![0; max + 1], None), Err(DatagramError::TooLarge { max }));
    assert_eq!(client(&mut pair).send_datagram(&b"x"[..], Some(7)), Err(DatagramError::UnknownPath));
    assert_eq!(client(&mut pair).max_datagram_size(Some(7)), None);

    // The peer's max_datagram_frame_size bounds the payload (frame type and length count).
    let small = TransportConfig {
        datagrams: DatagramConfig { max_frame_size: 100, ..DatagramConfig::default() },
        ..dg_config()
    };
    let mut pair = Pair::asymmetric(dg_config(), small);
    assert!(confirm_handshake(&mut pair));
    // 100 bytes: type (1), length (2: 97 is above 63) and 97 bytes.
    assert_eq!(client(&mut pair).max_datagram_size(None), Some(97));

    // A peer that did not advertise the extension gets none (RFC 9221 §3).
    let mut pair = Pair::asymmetric(dg_config(), TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    assert_eq!(client(&mut pair).max_datagram_size(None), None);
    assert_eq!(client(&mut pair).send_datagram(&b"x"[..], None), Err(DatagramError::UnsupportedByPeer));
    // ... but may send to us.
    server(&mut pair).send_datagram(&b"to client"[..], None).expect("server sends");
    let mut got = None;
    pair.run_until(Duration::from_secs(1), |p| {
        got = client(p).recv_datagram();
        got.is_some()
    });
    assert_eq!(got.expect("delivered").data.as_ref(), b"to client");
}

/// The server's error after the client sends raw `frames` in a 1-RTT packet, with the
/// server advertising `server_max` (0: not at all).
fn error_for(server_max: u64, frames: &[u8]) -> Option<ConnectionError> {
    let server_cfg = TransportConfig {
        datagrams: DatagramConfig { max_frame_size: server_max, ..DatagramConfig::default() },
        ..TransportConfig::default()
    };
    let mut pair = Pair::asymmetric(dg_config(), server_cfg);
    assert!(confirm_handshake(&mut pair));
    client(&mut pair).shared.injected = frames.to_vec();
    server_error(&mut pair)
}

#[test]
fn unexpected_or_oversized_datagram_frames_are_protocol_violations() {
    let pv = TransportErrorCode::PROTOCOL_VIOLATION.0;
    // RFC 9221 §3: not advertised, in both forms.
    assert_eq!(transport_code(error_for(0, &[0x31, 0x01, 0xaa])), pv);
    assert_eq!(transport_code(error_for(0, &[0x30, 0xaa])), pv);
    // Larger than advertised: 12 bytes (type, length, 10 bytes) against 11.
    let mut f = vec![0x31, 10];
    f.extend_from_slice(&[7; 10]);
    assert_eq!(transport_code(error_for(11, &f)), pv);
    // 0x30 without length: type and 11 bytes (12) against 11.
    let mut f = vec![0x30];
    f.extend_from_slice(&[7; 11]);
    assert_eq!(transport_code(error_for(11, &f)), pv);
    // Exactly the limit is accepted: 12 bytes against 12.
    let mut pair = Pair::asymmetric(
        dg_config(),
        TransportConfig {
            datagrams: DatagramConfig { max_frame_size: 12, ..DatagramConfig::default() },
            ..TransportConfig::default()
        },
    );
    assert!(confirm_handshake(&mut pair));
    let mut f = vec![0x31, 10];
    f.extend_from_slice(&[7; 10]);
    client(&mut pair).shared.injected = f;
    let mut got = Vec::new();
    run_collect(&mut pair, Duration::from_millis(500), &mut got);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].data.as_ref(), &[7; 10]);
    assert!(!server(&mut pair).is_closed());
}

#[test]
fn pinned_datagrams_use_their_path() {
    let mut pair = Pair::new(mp_dg_config());
    let id = open_second_path(&mut pair);
    for i in 0..30u8 {
        let path = if i % 3 == 0 { 0 } else { id };
        client(&mut pair).send_datagram(vec![i; 200], Some(path)).expect("send");
    }
    let mut got = Vec::new();
    run_collect(&mut pair, Duration::from_secs(1), &mut got);
    assert_eq!(got.len(), 30);
    for d in &got {
        let want = if d.data[0] % 3 == 0 { 0 } else { id };
        assert_eq!(d.path_id, want, "datagram {} on path {}", d.data[0], d.path_id);
    }
    let s = client(&mut pair).datagram_stats();
    assert_eq!((s.paths[&0].sent, s.paths[&id].sent), (10, 20));
    let s = server(&mut pair).datagram_stats();
    assert_eq!((s.paths[&0].received, s.paths[&id].received), (10, 20));
}

#[test]
fn the_scheduler_places_unpinned_datagrams_on_the_fastest_path() {
    let mut pair = Pair::new(mp_dg_config());
    let id = open_second_path(&mut pair);
    // Path 0 (the client's first address) gets 60 ms more each way; let the RTTs show it.
    let a0 = pair.client_addr;
    pair.extra_latency.push((a0, Duration::from_millis(60)));
    let mut got = Vec::new();
    for _ in 0..20 {
        for p in [0, id] {
            client(&mut pair).send_datagram(&b"rtt"[..], Some(p)).expect("send");
        }
        run_collect(&mut pair, Duration::from_millis(50), &mut got);
    }
    run_collect(&mut pair, Duration::from_millis(500), &mut got);
    got.clear();
    // Two at a time, well within the fast path's window and pacing.
    for i in 0..10u8 {
        for _ in 0..2 {
            client(&mut pair).send_datagram(vec![i; 300], None).expect("send");
        }
        run_collect(&mut pair, Duration::from_millis(30), &mut got);
    }
    run_collect(&mut pair, Duration::from_secs(1), &mut got);
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|d| d.path_id == id), "paths: {:?}", got.iter().map(|d| d.path_id).collect::<Vec<_>>());
}

#[test]
fn unpinned_datagrams_continue_on_the_other_path_when_one_fails() {
    let mut pair = Pair::new(mp_dg_config());
    let id = open_second_path(&mut pair);
    let a0 = pair.client_addr;
    let mut got = Vec::new();
    let mut seq = 0u32;
    let mut send = |pair: &mut Pair, n: usize| {
        for _ in 0..n {
            client(pair).send_datagram(seq.to_be_bytes().to_vec(), None).expect("send");
            seq += 1;
        }
    };
    // Datagrams flow for a while on both paths.
    for _ in 0..10 {
        send(&mut pair, 5);
        run_collect(&mut pair, Duration::from_millis(20), &mut got);
    }
    let before = got.len();
    assert!(before >= 45, "{before} received before the failure");
    // Path 0 goes dark both ways. Datagrams keep coming; those the scheduler still puts
    // on path 0 until a PTO marks it potentially failed are lost (RFC 9002: each new
    // ack-eliciting packet re-arms the PTO, so the window fills first).
    pair.drop_addr = Box::new(move |s, d| s == a0 || d == a0);
    let mut failed = false;
    let (mut after_failure, mut sent_after) = (0, 0);
    for _ in 0..400 {
        send(&mut pair, 5);
        if failed {
            sent_after += 5;
        }
        let mut failed_now = false;
        pair.run_until(Duration::from_millis(20), |p| {
            while let Some((_, e)) = p.client.poll_event() {
                failed_now |= matches!(e, Event::Path(PathEvent::PotentiallyFailed { id: 0 }));
            }
            while p.server.poll_event().is_some() {}
            for d in drain_server(p) {
                if failed {
                    assert_eq!(d.path_id, id, "a datagram arrived on the dead path");
                    after_failure += 1;
                }
                got.push(d);
            }
            false
        });
        if failed_now && !failed {
            failed = true;
            // Pinned to the failed path: dropped before the next send, counted.
            for _ in 0..5 {
                client(&mut pair).send_datagram(&b"pinned to 0"[..], Some(0)).expect("pinned");
            }
        }
    }
    assert!(failed, "path 0 never marked potentially failed");
    // Once the path is known to have failed, every new datagram goes on path 1 and arrives
    // (but those in flight at the end).
    assert!(sent_after >= 500, "failure detected late: {sent_after} sent after it");
    assert!(after_failure + 20 >= sent_after, "{after_failure} of {sent_after} arrived after the failure");
    let s = client(&mut pair).datagram_stats();
    // Those caught on the dead path were lost (never retransmitted), the pinned ones dropped.
    assert!(s.paths[&0].lost > 0, "{:?}", s.paths[&0]);
    assert_eq!(s.paths[&0].dropped_send, 5, "{:?}", s.paths[&0]);
    assert!(!got.iter().any(|d| d.data.as_ref() == b"pinned to 0"));
    // Every datagram sent is accounted for: acknowledged, lost or still in flight.
    let t = s.total;
    assert!(t.acked + t.lost <= t.sent);
    assert!(t.sent - t.acked - t.lost < 50, "{t:?}");
    assert_eq!(client(&mut pair).datagram_send_queue_len(), 0);
    assert_eq!(server(&mut pair).datagram_stats().total.received as usize, got.len());
}

#[test]
fn send_and_receive_queues_are_bounded() {
    let limits =
        DatagramConfig { send_queue_len: 8, recv_queue_len: 4, recv_queue_bytes: 1000, ..DatagramConfig::enabled() };
    let cfg = TransportConfig { datagrams: limits, ..TransportConfig::default() };
    let mut pair = Pair::new(cfg);
    assert!(confirm_handshake(&mut pair));
    // Queued without a chance to send: the oldest are dropped.
    for i in 0..20u8 {
        client(&mut pair).send_datagram(vec![i; 10], None).expect("send");
    }
    assert_eq!(client(&mut pair).datagram_send_queue_len(), 8);
    assert_eq!(client(&mut pair).datagram_stats().total.dropped_send, 12);
    // The server's application reads nothing: it keeps the newest 4.
    pair.run_until(Duration::from_millis(500), |p| {
        while p.server.poll_event().is_some() {}
        false
    });
    let s = server(&mut pair).datagram_stats();
    assert_eq!((s.total.received, s.total.dropped_recv), (8, 4));
    let got = drain_server(&mut pair);
    assert_eq!(got.iter().map(|d| d.data[0]).collect::<Vec<_>>(), vec![16, 17, 18, 19]);
    // And by bytes: 1000 bytes hold three 300-byte datagrams.
    for i in 0..5u8 {
        client(&mut pair).send_datagram(vec![i; 300], None).expect("send");
    }
    pair.run_until(Duration::from_millis(500), |p| {
        while p.server.poll_event().is_some() {}
        false
    });
    let got = drain_server(&mut pair);
    assert_eq!(got.iter().map(|d| d.data[0]).collect::<Vec<_>>(), vec![2, 3, 4]);
    assert_eq!(server(&mut pair).datagram_stats().total.dropped_recv, 6);
}

#[test]
fn datagrams_pinned_to_an_abandoned_path_are_dropped_and_refused() {
    let mut pair = Pair::new(mp_dg_config());
    let id = open_second_path(&mut pair);
    let now = pair.now;
    // Queued, then the path is abandoned before the next send.
    for _ in 0..3 {
        client(&mut pair).send_datagram(&b"late"[..], Some(id)).expect("send");
    }
    client(&mut pair).abandon_path(now, id, 0).expect("abandon");
    let mut got = Vec::new();
    run_collect(&mut pair, Duration::from_millis(300), &mut got);
    assert!(got.is_empty());
    assert_eq!(client(&mut pair).datagram_stats().paths[&id].dropped_send, 3);
    assert_eq!(client(&mut pair).send_datagram(&b"x"[..], Some(id)), Err(DatagramError::UnknownPath));
    let _ = addr2();
}

/// A datagram pinned to a path still being validated waits for the validation (like
/// stream data, nothing but probing frames goes on an unvalidated path), then goes there.
#[test]
fn datagrams_pinned_to_a_new_path_wait_for_its_validation() {
    let mut pair = Pair::new(mp_dg_config());
    assert!(confirm_handshake(&mut pair));
    let server_addr = pair.server_addr;
    let id = super::tests_multipath::open_path_when_allowed(&mut pair, addr2(), server_addr, Duration::from_secs(2))
        .expect("path opened");
    for i in 0..5u8 {
        client(&mut pair).send_datagram(vec![i; 100], Some(id)).expect("pinned to a validating path");
    }
    let mut validated_at = None;
    let mut got: Vec<(Option<Instant>, Datagram)> = Vec::new();
    pair.run_until(Duration::from_secs(2), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            if e == Event::Path(PathEvent::Validated { id }) {
                validated_at = Some(p.now);
            }
        }
        while p.server.poll_event().is_some() {}
        let now = validated_at.map(|_| p.now);
        got.extend(drain_server(p).into_iter().map(|d| (now, d)));
        got.len() == 5
    });
    assert!(validated_at.is_some(), "path {id} never validated");
    assert_eq!(got.len(), 5);
    // All arrived on the new path, after the client saw it validated.
    assert!(got.iter().all(|(t, d)| t.is_some() && d.path_id == id));
}

/// Collects the DATAGRAM frames of the packets a connection logs: (event, length).
struct DatagramFrames(std::sync::Arc<std::sync::Mutex<Vec<(&'static str, u64)>>>);

impl crate::qlog::QlogSink for DatagramFrames {
    fn emit(&mut self, _: Instant, name: &'static str, data: serde_json::Value) {
        for f in data["frames"].as_array().into_iter().flatten() {
            if f["frame_type"] == "datagram" {
                self.0.lock().expect("log").push((name, f["length"].as_u64().expect("length")));
            }
        }
    }
}

/// qlog: DATAGRAM frames appear in packet_sent and packet_received as the schema's
/// `datagram` frame with its `length`.
#[test]
fn datagram_frames_are_logged_with_their_length() {
    let mut pair = Pair::new(dg_config());
    let (sent, received) = (std::sync::Arc::default(), std::sync::Arc::default());
    client(&mut pair).set_qlog(Box::new(DatagramFrames(std::sync::Arc::clone(&sent))));
    assert!(confirm_handshake(&mut pair));
    server(&mut pair).set_qlog(Box::new(DatagramFrames(std::sync::Arc::clone(&received))));
    for len in [1usize, 100, 1000] {
        client(&mut pair).send_datagram(vec![0; len], None).expect("send");
    }
    let mut got = Vec::new();
    run_collect(&mut pair, Duration::from_millis(300), &mut got);
    assert_eq!(got.len(), 3);
    let want = |name| vec![(name, 1), (name, 100), (name, 1000)];
    assert_eq!(*sent.lock().expect("log"), want("transport:packet_sent"));
    assert_eq!(*received.lock().expect("log"), want("transport:packet_received"));
}

/// With a thread per path, the path is checked out to its thread much of the time: the
/// datagram size (and so `send_datagram` for the scheduler's choice) must still count it
/// (before, an application saw UnsupportedByPeer whenever the only path was out).
#[test]
fn datagram_size_counts_a_checked_out_path() {
    let mut pair = Pair::new(dg_config());
    assert!(confirm_handshake(&mut pair));
    let max = client(&mut pair).max_datagram_size(None).expect("negotiated");
    let (now, local, remote) = (pair.now, pair.client_addr, pair.server_addr);
    let c = client(&mut pair);
    let run = c.begin_recv_run(0, remote, None).expect("path 0 checked out");
    assert_eq!(c.max_datagram_size(None), Some(max));
    assert_eq!(c.send_datagram(&b"while out"[..], None), Ok(()));
    let _spent = c.end_recv_run(now, local, run, &mut []);
    assert_eq!(c.datagram_send_queue_len(), 1);
}
