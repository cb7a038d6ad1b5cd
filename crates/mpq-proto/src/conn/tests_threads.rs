//! Issue C1's seam for a thread per path (issue C2): the work a path does alone, checked out
//! of its connection, runs on a thread of its own while another path's runs on another.

use std::time::Duration;

use super::send::AloneBatch;
use super::tests::{client, Upload};
use super::tests_multipath::{open_second_path, path_stats, server};
use super::*;
use crate::testing::Pair;

/// A pair with two validated paths, unpaced (bursts fill GSO batches), and an upload whose
/// first data the client holds, nothing of it sent yet. Returns the second path's ID.
pub(super) fn two_paths_and_an_upload() -> (Pair, u64, Upload) {
    two_paths_and_an_upload_with(AckPolicy::SamePath)
}

/// [`two_paths_and_an_upload`] with ACKs placed by `ack_policy`.
fn two_paths_and_an_upload_with(ack_policy: AckPolicy) -> (Pair, u64, Upload) {
    let cfg = TransportConfig { initial_max_path_id: Some(4), pacing: false, ack_policy, ..TransportConfig::default() };
    let mut pair = Pair::new(cfg);
    let id = open_second_path(&mut pair);
    // Let the connection-wide frames of the path's opening (CIDs, ACKs) settle.
    pair.run_until(Duration::from_millis(500), |_| false);
    let mut up = Upload::new(400_000);
    up.pump(&mut pair);
    (pair, id, up)
}

/// Runs the upload to its end and checks every byte arrived.
pub(super) fn finish(pair: &mut Pair, up: &mut Upload) {
    let done = pair.run_until(Duration::from_secs(30), |p| {
        up.pump(p);
        up.is_done()
    });
    assert!(done, "the upload did not finish");
    up.assert_intact();
}

/// Two paths of one connection build their send batches alone on two threads at once (each
/// checked out with its lease); checked back in, both batches reach the peer on their paths
/// and the transfer they began completes intact.
#[test]
fn two_paths_build_their_send_batches_on_two_threads_at_once() {
    let (mut pair, id, mut up) = two_paths_and_an_upload();
    let (now, client_addr) = (pair.now, pair.client_addr);
    let c = client(&mut pair);
    let slots = [c.path_index(0).expect("path 0"), c.path_index(id).expect("path 1")];
    let mut batches: Vec<AloneBatch> = Vec::new();
    for &pi in &slots {
        c.paths[pi].in_batch = true;
        batches.push(c.begin_alone_batch(now, pi, true).expect("a batch built alone"));
    }
    assert!(slots.iter().all(|&pi| c.paths.get(pi).is_none()), "both paths are checked out");
    let built: Vec<(AloneBatch, Vec<u8>)> = std::thread::scope(|s| {
        let threads: Vec<_> = batches
            .into_iter()
            .map(|mut b| {
                s.spawn(move || {
                    let mut buf = Vec::new();
                    b.build(now, &mut buf);
                    (b, buf)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("path thread")).collect()
    });
    let mut to_send = Vec::new();
    for (b, buf) in built {
        let pi = b.slot();
        let w = c.end_alone_batch(b);
        assert!(w.done && w.count > 1 && w.close.is_none(), "slot {pi}: {w:?}");
        c.end_batch(now, pi);
        let path = &c.paths[pi];
        let seg = w.segment_size.expect("a GSO batch");
        let datagrams: Vec<Vec<u8>> = buf.chunks(seg).map(<[u8]>::to_vec).collect();
        assert_eq!(datagrams.len(), w.count);
        to_send.push((path.id, path.local.unwrap_or(client_addr), path.remote, datagrams));
    }
    let before: Vec<u64> = to_send.iter().map(|(id, ..)| path_stats(server(&mut pair), *id).rx_packets).collect();
    for (k, (id, src, dst, mut datagrams)) in to_send.into_iter().enumerate() {
        let n = datagrams.len() as u64;
        pair.inject_batch(true, src, dst, &mut datagrams);
        assert_eq!(path_stats(server(&mut pair), id).rx_packets, before[k] + n, "path {id}: every datagram opened");
    }
    finish(&mut pair, &mut up);
}

/// Two paths of one connection open their runs of received datagrams alone on two threads
/// at once (each checked out with its seat at the board); checked back in, the packets are
/// applied and the transfer goes on and completes intact.
#[test]
fn two_paths_open_their_received_datagrams_on_two_threads_at_once() {
    // With ACKs on every path, a run applied while the other path is out carries that
    // path's PATH_ACKs: its mail waits for its check-in.
    for policy in [AckPolicy::SamePath, AckPolicy::AllPaths] {
        open_on_two_threads(policy);
    }
}

fn open_on_two_threads(policy: AckPolicy) {
    let (mut pair, id, mut up) = two_paths_and_an_upload_with(policy);
    // The client's next datagrams, taken off the link by path (the round-robin scheduler
    // would spread them; the default one fills both windows).
    let now = pair.now;
    let mut by_path: Vec<(u64, std::net::SocketAddr, Vec<Vec<u8>>)> = Vec::new();
    let mut buf = Vec::new();
    while let Some(t) = pair.client.poll_transmit(now, &mut buf) {
        let seg = t.segment_size.unwrap_or(t.size);
        let src = t.source.unwrap_or(pair.client_addr);
        let datagrams = buf[..t.size].chunks(seg).map(<[u8]>::to_vec);
        match by_path.iter_mut().find(|(p, ..)| *p == t.path_id) {
            Some((_, _, v)) => v.extend(datagrams),
            None => by_path.push((t.path_id, src, datagrams.collect())),
        }
    }
    assert_eq!(by_path.len(), 2, "data on both paths");
    let s = server(&mut pair);
    let before: Vec<u64> = [0, id].iter().map(|&p| path_stats(s, p).rx_packets).collect();
    let sizes: Vec<usize> = by_path.iter().map(|r| r.2.len()).collect();
    // With the connection: each path checked out for its run (`begin_recv_run`).
    let runs: Vec<_> = by_path.iter().map(|(p, src, _)| s.begin_recv_run(*p, *src, None).expect("a run")).collect();
    // On two threads at once: each path opens its datagrams alone.
    let opened: Vec<(crate::conn::RecvRun, Vec<Vec<u8>>, usize)> = std::thread::scope(|scope| {
        let threads: Vec<_> = runs
            .into_iter()
            .zip(by_path)
            .map(|(mut run, (_, _, mut datagrams))| {
                scope.spawn(move || {
                    let mut slices: Vec<&mut [u8]> = datagrams.iter_mut().map(Vec::as_mut_slice).collect();
                    let n = run.open(now, &mut slices);
                    (run, datagrams, n)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("path thread")).collect()
    });
    let counts: Vec<usize> = opened.iter().map(|o| o.2).collect();
    assert_eq!(counts, sizes, "every datagram opened by its path alone");
    // With the connection again: each run checked in and applied.
    let local = pair.server_addr;
    for (run, mut datagrams, n) in opened {
        let mut slices: Vec<&mut [u8]> = datagrams.iter_mut().map(Vec::as_mut_slice).collect();
        let spent = server(&mut pair).end_recv_run(now, local, run, &mut slices);
        // What is left of the run needs nothing of the connection: freed on another thread.
        let handled = std::thread::spawn(move || spent.handled()).join().expect("dropped elsewhere");
        assert_eq!(handled, n);
    }
    let s = server(&mut pair);
    let after: Vec<u64> = [0, id].iter().map(|&p| path_stats(s, p).rx_packets).collect();
    assert!(after[0] > before[0] && after[1] > before[1], "{before:?} -> {after:?}");
    finish(&mut pair, &mut up);
}

/// A run stops at the first datagram that needs the connection (here one to a connection
/// ID that is not the path's): the path opened the datagrams before it alone; that one and
/// those after it go the general way when the run ends, in order; the transfer completes.
#[test]
fn a_run_stops_where_a_datagram_needs_the_connection() {
    let (mut pair, _, mut up) = two_paths_and_an_upload();
    let now = pair.now;
    let mut buf = Vec::new();
    let t = pair.client.poll_transmit(now, &mut buf).expect("data");
    let seg = t.segment_size.unwrap_or(t.size);
    let mut datagrams: Vec<Vec<u8>> = buf[..t.size].chunks(seg).map(<[u8]>::to_vec).collect();
    assert!(datagrams.len() >= 3, "a GSO batch");
    // A short-header datagram to an unknown CID, second in the run.
    let mut junk = datagrams[0].clone();
    junk[1..9].copy_from_slice(&[0xee; 8]);
    datagrams.insert(1, junk);
    let (path, src) = (t.path_id, t.source.unwrap_or(pair.client_addr));
    let s = server(&mut pair);
    let before = path_stats(s, path).rx_packets;
    let mut run = s.begin_recv_run(path, src, None).expect("a run");
    let mut slices: Vec<&mut [u8]> = datagrams.iter_mut().map(Vec::as_mut_slice).collect();
    assert_eq!(run.open(now, &mut slices), 1, "stopped at the unknown CID");
    let local = t.destination;
    let spent = server(&mut pair).end_recv_run(now, local, run, &mut slices);
    assert_eq!(spent.handled(), 1, "the run handled the datagram before the unknown CID");
    let s = server(&mut pair);
    // Every real datagram counted once (the one to an unknown CID dropped), in order.
    assert_eq!(path_stats(s, path).rx_packets - before, (datagrams.len() - 1) as u64);
    finish(&mut pair, &mut up);
}

/// Mail posted for a path while it is checked out (its run on another thread) waits in its
/// inbox, marked, through every delivery round of the connection, and reaches it when it is
/// checked back in.
#[test]
fn mail_for_a_checked_out_path_waits_for_its_check_in() {
    let (mut pair, id, _) = two_paths_and_an_upload();
    let now = pair.now;
    let (local, remote) = (pair.server_addr, super::tests_multipath::addr2());
    let s = server(&mut pair);
    let slot = s.path_index(id).expect("second path");
    let run = s.begin_recv_run(id, remote, None).expect("a run");
    s.paths.board_mut().post(slot).peer_backup = Some(true);
    s.deliver_mail_or_close(now);
    assert!(!s.paths.board().inbox(slot).mail.is_empty(), "the mail waits while the path is out");
    assert!(s.paths.board().mail_waiting_slots().any(|w| w == slot), "still marked");
    let _spent = s.end_recv_run(now, local, run, &mut []);
    assert!(s.paths.board().inbox(slot).mail.is_empty(), "delivered at check-in");
    assert!(!s.paths.has_mail_waiting_here());
}

/// Collects a connection's `transport:packet_sent` events as (packet type, number).
struct SentLog(std::sync::Arc<std::sync::Mutex<Vec<(String, u64)>>>);

impl crate::qlog::QlogSink for SentLog {
    fn emit(&mut self, _: Instant, name: &'static str, data: serde_json::Value) {
        if name == "transport:packet_sent" {
            let ty = data["header"]["packet_type"].as_str().unwrap_or_default().to_string();
            let pn = data["header"]["packet_number"].as_u64().expect("packet number");
            self.0.lock().expect("log").push((ty, pn));
        }
    }
}

/// A path building its batches alone records its own qlog events, handed to the sink when
/// each batch returns: with qlog on, batches are still built alone, and every 1-RTT packet
/// sent appears once, in order.
#[test]
fn batches_built_alone_log_every_packet_they_send() {
    let mut pair = Pair::new(TransportConfig { pacing: false, ..TransportConfig::default() });
    let log = std::sync::Arc::default();
    client(&mut pair).set_qlog(Box::new(SentLog(std::sync::Arc::clone(&log))));
    let before = client(&mut pair).shared.touches;
    super::tests::run_upload(&mut pair, 1_000_000, Duration::from_secs(30));
    let after = client(&mut pair).shared.touches;
    assert!(after.send_alone_batches > before.send_alone_batches + 20, "{after:?}");
    let log = log.lock().expect("log");
    let one_rtt: Vec<u64> = log.iter().filter(|(ty, _)| ty == "1RTT").map(|(_, pn)| *pn).collect();
    let sent = client(&mut pair).stats().paths[0].tx_packets;
    assert!(one_rtt.len() > 700, "{} 1-RTT packets logged", one_rtt.len());
    assert!(one_rtt.iter().enumerate().all(|(i, &pn)| pn == i as u64), "each packet once, in order");
    let long = log.len() - one_rtt.len();
    assert_eq!(log.len() as u64, sent, "{long} long-header packets and {} 1-RTT ones", one_rtt.len());
}
