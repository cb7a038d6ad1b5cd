//! The receive window behind a slow path, end to end: data in flight on a slow, deep-queued
//! path leaves a gap at the receiver that holds back everything the fast path delivers
//! after it, so the stream and connection windows must grow with the gap, not only with
//! the application's reads (`RecvCredit::note_held_back`).

mod common;

use std::time::Duration;

use common::mp::{mp, Run, MB};
use mpq_proto::conn::TransportConfig;
use mpq_sim::apps::DownloadClient;
use mpq_sim::LinkConfig;

/// Completion time (s) of a 20 MB download (byte-exact) with mpq's default windows over
/// `links`, the first carrying the handshake.
fn download(links: &[&str], seed: u64) -> f64 {
    let links: Vec<LinkConfig> = links.iter().map(|l| l.parse().unwrap()).collect();
    let cfg = if links.len() > 1 { mp(4) } else { TransportConfig::default() };
    let mut r = Run::new(&links, seed, cfg.clone(), cfg, false, |c, s, extra| {
        DownloadClient::new(c, s, 20 * MB).with_paths(extra)
    });
    assert!(r.run_to_completion(Duration::from_secs(60)), "{}", r.describe());
    r.assert_complete();
    r.app().done_at.unwrap().since_epoch().as_secs_f64()
}

/// A 99 Mbit/s, 190 ms path with 1.5 s of queue next to a 2.7 Mbit/s, 154 ms one with 0.5 s
/// (a scenario of seed 002 §4.1's high-BDP class). Each packet min-RTT puts on the slow path
/// arrives up to 0.7 s after the fast path's data sent with it: 8 MB at 99 Mbit/s. With
/// windows tuned by reads alone the fast path stalled on the stream limit three times and
/// the download took 4.97 s against 3.57 s on the fast path alone (EBen -0.28); with the
/// windows doubling when a quarter of them waits behind a gap, two paths beat one.
#[test]
fn a_slow_paths_gap_does_not_stall_the_fast_path_seed_5() {
    let fast = "99.072008mbit/189.498ms/queue=1549.126ms";
    let slow = "2.690805mbit/154.373ms/queue=513.778ms";
    let alone = download(&[fast], 5);
    let both = download(&[fast, slow], 5);
    println!("seed 5: fast path alone {alone:.3} s, both paths {both:.3} s");
    assert!(both < alone, "two paths ({both:.3} s) no faster than the fast one alone ({alone:.3} s)");
}
