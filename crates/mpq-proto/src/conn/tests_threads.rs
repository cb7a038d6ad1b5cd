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
fn two_paths_and_an_upload() -> (Pair, u64, Upload) {
    let cfg = TransportConfig { initial_max_path_id: Some(4), pacing: false, ..TransportConfig::default() };
    let mut pair = Pair::new(cfg);
    let id = open_second_path(&mut pair);
    // Let the connection-wide frames of the path's opening (CIDs, ACKs) settle.
    pair.run_until(Duration::from_millis(500), |_| false);
    let mut up = Upload::new(400_000);
    up.pump(&mut pair);
    (pair, id, up)
}

/// Runs the upload to its end and checks every byte arrived.
fn finish(pair: &mut Pair, up: &mut Upload) {
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
    let (mut pair, id, mut up) = two_paths_and_an_upload();
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
    let mut runs: Vec<(usize, std::net::SocketAddr, Vec<Vec<u8>>)> =
        by_path.into_iter().map(|(p, src, d)| (s.path_index(p).expect("server path"), src, d)).collect();
    let sizes: Vec<usize> = runs.iter().map(|r| r.2.len()).collect();
    let before: Vec<u64> = [0, id].iter().map(|&p| path_stats(s, p).rx_packets).collect();
    let opened = s.open_runs_on_threads(now, &mut runs);
    assert_eq!(opened, sizes, "every datagram opened by its path alone");
    let after: Vec<u64> = [0, id].iter().map(|&p| path_stats(s, p).rx_packets).collect();
    assert!(after[0] > before[0] && after[1] > before[1], "{before:?} -> {after:?}");
    finish(&mut pair, &mut up);
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
