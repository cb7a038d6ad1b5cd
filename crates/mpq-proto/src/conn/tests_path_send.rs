//! The send seam of a runtime with a thread per path ([`Connection::poll_path_transmit`],
//! [`SendBatch::build`], [`Connection::end_send_batch`], issue C2): both endpoints of a pair
//! send only path by path, as such a runtime's threads ask, from the first Initial on.

use std::time::Duration;

use super::tests::{client, Upload};
use super::tests_multipath::{open_second_path, path_stats, server};
use super::tests_threads::finish;
use super::*;
use crate::sched::SchedulerKind;
use crate::testing::Pair;

/// A pair whose endpoints send path by path from the start, with two validated paths.
fn pair_sending_path_by_path(scheduler: SchedulerKind) -> (Pair, u64) {
    // Windows far above what the tests send: only congestion windows limit a path.
    let streams = crate::stream::StreamsConfig {
        stream_receive_window: 64 << 20,
        receive_window: 64 << 20,
        max_stream_window: 64 << 20,
        max_connection_window: 64 << 20,
        send_buffer_limit: 64 << 20,
        ..Default::default()
    };
    let cfg = TransportConfig {
        initial_max_path_id: Some(4),
        pacing: false,
        scheduler,
        streams,
        ..TransportConfig::default()
    };
    let mut pair = Pair::new(cfg);
    pair.path_threads = true;
    let id = open_second_path(&mut pair);
    (pair, id)
}

/// Under every scheduler a 400 KB upload sent path by path arrives intact; the batches of
/// the steady state are built alone (checked out of the connection; but for redundant
/// scheduling); under the schedulers
/// that spread data (round-robin, weighted, pinned with several streams, redundant) both
/// paths carry it.
#[test]
fn every_scheduler_completes_an_upload_sent_path_by_path() {
    use SchedulerKind::*;
    for kind in [MinRtt, RoundRobin, Weighted, Redundant, RttProbe, Ecf, Pinned] {
        let (mut pair, id) = pair_sending_path_by_path(kind);
        let mut up = Upload::new(400_000);
        up.pump(&mut pair);
        finish(&mut pair, &mut up);
        // (Redundant scheduling records its chunks with the host: only ACK batches are alone.)
        let want = if kind == Redundant { 5 } else { 20 };
        assert!(pair.path_batches_alone > want, "{kind:?}: {} batches built alone", pair.path_batches_alone);
        let s = server(&mut pair);
        let rx = [path_stats(s, 0).rx_bytes, path_stats(s, id).rx_bytes];
        if matches!(kind, RoundRobin | Weighted | Redundant) {
            assert!(rx.iter().all(|&b| b > 50_000), "{kind:?}: bytes received per path {rx:?}");
        }
        if kind == Redundant {
            assert!(rx.iter().all(|&b| b > 400_000), "{kind:?}: every byte on both paths: {rx:?}");
        }
    }
}

/// With minimum-RTT scheduling, the slow path's thread is told to wake the fast path's
/// while the fast path has window; the fast path sends until its window is full and is then
/// told to wake the slow path's, which sends the data itself.
#[test]
fn min_rtt_sends_the_slow_paths_thread_to_the_fast_one_until_its_window_is_full() {
    let (mut pair, id) = pair_sending_path_by_path(SchedulerKind::MinRtt);
    // Path 1 (the second client address) 40 ms slower; let the RTT estimates settle.
    pair.extra_latency.push((super::tests_multipath::addr2(), Duration::from_millis(40)));
    let mut warm = Upload::new(200_000);
    warm.pump(&mut pair);
    finish(&mut pair, &mut warm);
    // What the slow path still had in flight (its probes) is acknowledged.
    pair.run_until(Duration::from_millis(500), |_| false);
    let now = pair.now;
    assert!(client(&mut pair).path_window_open(id), "the slow path has window");
    let c = client(&mut pair);
    let h_data = c.open_stream(crate::types::Dir::Uni).expect("stream");
    c.write(h_data, &vec![7u8; 2_000_000]).expect("write");
    let mut buf = Vec::new();
    match c.poll_path_transmit(now, id, &mut buf) {
        PathTransmit::Elsewhere(0) => {}
        other => panic!("the slow path should defer to path 0, got {other:?}"),
    }
    // Path 0 sends until its window is full.
    let mut batches = 0;
    loop {
        match c.poll_path_transmit(now, 0, &mut buf) {
            PathTransmit::Batch(mut b) => {
                b.build(now, &mut buf);
                c.end_send_batch(now, b, &mut buf).expect("a batch");
                batches += 1;
            }
            PathTransmit::Ready(_) => batches += 1,
            // Full: the scheduler now sends path 0's thread to the slow path.
            PathTransmit::Elsewhere(p) if p == id => break,
            other => panic!("path 0: {other:?}"),
        }
        assert!(batches < 1000, "path 0 never filled its window");
    }
    assert!(batches > 0);
    assert!(!c.path_window_open(0), "path 0's window is full");
    // Now the slow path takes the data.
    match c.poll_path_transmit(now, id, &mut buf) {
        PathTransmit::Batch(mut b) => {
            b.build(now, &mut buf);
            let t = c.end_send_batch(now, b, &mut buf).expect("a batch on the slow path");
            assert_eq!(t.path_id, id);
        }
        PathTransmit::Ready(t) => assert_eq!(t.path_id, id),
        other => panic!("the slow path should send now, got {other:?}"),
    }
}

/// A path that is gone answers `Gone`, so its thread ends; a closed connection's threads
/// send its CONNECTION_CLOSE once and then have nothing.
#[test]
fn threads_of_gone_paths_and_closed_connections_stop() {
    let (mut pair, id) = pair_sending_path_by_path(SchedulerKind::MinRtt);
    let now = pair.now;
    let mut buf = Vec::new();
    let c = client(&mut pair);
    assert!(matches!(c.poll_path_transmit(now, 99, &mut buf), PathTransmit::Gone));
    c.close(now, 0, b"bye");
    let mut closes = 0;
    for path in [0, id, 0, id] {
        match c.poll_path_transmit(now, path, &mut buf) {
            PathTransmit::Ready(_) => closes += 1,
            PathTransmit::Idle => {}
            other => panic!("closing: {other:?}"),
        }
    }
    assert!(closes >= 1, "CONNECTION_CLOSE went out");
    pair.run_until(Duration::from_secs(5), |p| client(p).is_drained());
    let later = pair.now;
    let c = client(&mut pair);
    assert!(c.is_drained());
    assert!(matches!(c.poll_path_transmit(later, 0, &mut buf), PathTransmit::Gone));
}

/// The connection's timers split into the connection-wide ones and each path's (what a
/// runtime's path threads wait for, `poll_path_timeout`) without losing any: at every step
/// of an upload over two paths sent path by path, on both ends, the earliest of the parts is
/// the connection's next timer; and the upload completes with the pair firing them that way.
#[test]
fn path_and_shared_timers_make_up_the_connections_timer() {
    let (mut pair, id) = pair_sending_path_by_path(SchedulerKind::RoundRobin);
    let mut up = Upload::new(4_000_000);
    let mut checked = 0;
    let done = pair.run_until(Duration::from_secs(30), |p| {
        up.pump(p);
        for ep in [&mut p.client, &mut p.server] {
            for h in ep.handles() {
                let c = ep.connection_mut(h).expect("connection");
                let all = c.poll_timeout();
                let mut parts = c.poll_shared_timeout();
                for pid in [0, id] {
                    parts = [parts, c.poll_path_timeout(pid)].into_iter().flatten().min();
                }
                assert_eq!(all, parts, "the parts' earliest is the connection's timer");
                checked += 1;
            }
        }
        up.is_done()
    });
    assert!(done, "the upload did not finish");
    up.assert_intact();
    assert!(checked >= 20, "{checked} checks");
}

/// The scheduler switched mid-transfer decides from then on: an upload on one stream goes
/// over both paths under round-robin (which alternates the paths of the connection's
/// batches); switched to the pinned scheduler, the rest of it stays on the stream's path (the
/// other carries only ACKs and such), and it completes intact.
#[test]
fn a_scheduler_switched_mid_transfer_decides_from_then_on() {
    let (mut pair, id) = pair_sending_path_by_path(SchedulerKind::RoundRobin);
    // The connection's own send loop (`poll_transmit`), whose scheduler picks each batch's
    // path, rather than path threads that each take what their window allows.
    pair.path_threads = false;
    for ep in [&mut pair.client, &mut pair.server] {
        for h in ep.handles() {
            ep.set_path_threads(h, false);
        }
    }
    let mut up = Upload::new(4_000_000);
    let part = pair.run_until(Duration::from_secs(30), |p| {
        up.pump(p);
        let s = server(p);
        path_stats(s, 0).rx_bytes.min(path_stats(s, id).rx_bytes) > 200_000
    });
    assert!(part, "round-robin did not spread the first part of the upload over both paths");
    let s = server(&mut pair);
    let before = [path_stats(s, 0).rx_bytes, path_stats(s, id).rx_bytes];
    assert!(before[0] + before[1] < 3_000_000, "most of the upload is still to come: {before:?}");
    client(&mut pair).set_scheduler(SchedulerKind::Pinned);
    finish(&mut pair, &mut up);
    let s = server(&mut pair);
    let after = [path_stats(s, 0).rx_bytes, path_stats(s, id).rx_bytes];
    // Stream 0 is pinned to the first path ID in order: path 0.
    assert!(after[0] - before[0] > 1_000_000, "pinned: the stream's path carries the rest: {before:?} -> {after:?}");
    assert!(after[1] - before[1] < 60_000, "pinned: the other path carries no more data: {before:?} -> {after:?}");
}
