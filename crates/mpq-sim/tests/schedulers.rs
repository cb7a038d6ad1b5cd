//! The multipath schedulers end to end in the simulator: each runs the server's side of a
//! seeded, byte-exact download, and what it decided is read back from the server's qlog
//! (which path carried each STREAM frame). Where a property could hold for any scheduler, a
//! control run with the default min-RTT scheduler in the same setup shows that the
//! assertion tells them apart.

mod common;

use std::time::Duration;

use common::mp::{copied_bytes, first_sent_by_path, flow_limited, mp, path, secs, stream_frames, Run, MB};
use mpq_proto::conn::{PathEvent, TransportConfig};
use mpq_proto::sched::SchedulerKind;
use mpq_proto::Instant;
use mpq_sim::apps::DownloadClient;
use mpq_sim::LinkConfig;

fn sched(kind: SchedulerKind, paths: usize) -> TransportConfig {
    TransportConfig { scheduler: kind, ..mp(paths as u64 - 1) }
}

/// Downloads `size` bytes on `streams` streams over `links` with `kind` on both sides (the
/// client's receive windows from `client`), qlog on; `prepare` may script the network.
fn download(
    links: &[LinkConfig],
    seed: u64,
    kind: SchedulerKind,
    client: impl FnOnce(TransportConfig) -> TransportConfig,
    size: u64,
    streams: usize,
    prepare: impl FnOnce(&mut Run),
) -> Run {
    download_with(links, seed, sched(kind, links.len()), client, size, streams, prepare)
}

/// [`download`] with the server's (the sender's) config given.
fn download_with(
    links: &[LinkConfig],
    seed: u64,
    server: TransportConfig,
    client: impl FnOnce(TransportConfig) -> TransportConfig,
    size: u64,
    streams: usize,
    prepare: impl FnOnce(&mut Run),
) -> Run {
    let kind = server.scheduler;
    let mut r = Run::new(links, seed, client(server.clone()), server, true, |c, s, extra| {
        DownloadClient::new(c, s, size).with_paths(extra).with_streams(streams)
    });
    prepare(&mut r);
    assert!(r.run_to_completion(Duration::from_secs(120)), "{kind}: {}", r.describe());
    r.assert_complete();
    r
}

fn done(r: &Run) -> f64 {
    secs(r.app().done_at.unwrap())
}

/// Share of the first transmissions that went on path 1.
fn share1(r: &Run) -> f64 {
    let b = first_sent_by_path(&stream_frames(&r.server_qlog), 2, Instant::ZERO);
    b[1] as f64 / (b[0] + b[1]) as f64
}

/// The rtt-probe scheduler (MPQUIC's, De Coninck and Bonaventure, CoNEXT 2017, §3) duplicates data
/// onto a path whose RTT is unknown. A new path's RTT is already sampled by its validation exchange
/// (the PATH_RESPONSE comes with a PATH_ACK), so the case arises when a NAT rebinding moves a path:
/// once the new address is validated the path starts with fresh RTT state (RFC 9000 §9.4). The
/// download is limited by flow control so the measured path has window for the originals. rtt-probe
/// copies data onto path 1 until its first sample; min-RTT, in the same run, copies nothing.
#[test]
fn rtt_probe_duplicates_on_a_path_whose_rtt_is_unknown() {
    let seed = 61;
    let links = [path(20.0, 20.0), path(20.0, 40.0)];
    let rebind_at = Instant::ZERO + Duration::from_millis(500);
    let run = |kind| {
        // (Without PMTU discovery at the sender: the probe that follows the rebound path's
        // validation samples its RTT at once, so the path's RTT is no longer unknown and
        // rtt-probe has nothing to duplicate, which is what this test is about.)
        let server = TransportConfig { pmtud: false, max_udp_payload_size: 1200, ..sched(kind, links.len()) };
        download_with(
            &links,
            seed,
            server,
            |c| flow_limited(30_000, c),
            3 * MB,
            1,
            |r| {
                r.topo.rebind(1, rebind_at, "10.0.1.1:6001".parse().unwrap());
            },
        )
    };
    let (probe, minrtt) = (run(SchedulerKind::RttProbe), run(SchedulerKind::MinRtt));
    // Copies: data sent on path 1 less than a path-0 round trip (20 ms) after it went on
    // path 0, so no loss recovery. Before and after the rebinding.
    let copies = |r: &Run| {
        let f = stream_frames(&r.server_qlog);
        let (before, after): (Vec<_>, Vec<_>) = f.iter().partition(|x| x.at < rebind_at);
        let w = Duration::from_millis(20);
        (copied_bytes(&before, 1, w), copied_bytes(&after, 1, w))
    };
    let ((p_before, p_after), (m_before, m_after)) = (copies(&probe), copies(&minrtt));
    println!(
        "seed {seed}: copies onto path 1 before/after the rebinding: rtt-probe {p_before}/{p_after} B, min-RTT \
         {m_before}/{m_after} B; done at {:.3} / {:.3} s",
        done(&probe),
        done(&minrtt)
    );
    assert!(p_after > 1000, "rtt-probe copied {p_after} B onto the rebound path: {}", probe.describe());
    assert_eq!(m_after, 0, "min-RTT copied data: {}", minrtt.describe());
    assert!(
        done(&probe) <= 1.1 * done(&minrtt),
        "seed {seed}: rtt-probe {:.3} s vs min-RTT {:.3} s",
        done(&probe),
        done(&minrtt)
    );
}

/// When the sender has window on both paths (a download limited by a 30 kB flow-control
/// window, over 20 Mbit/s paths of 20 ms and 40 ms RTT), the schedulers really choose:
/// min-RTT keeps most on the 20 ms path, round-robin and the weighted scheduler use the
/// 40 ms path, the weighted one for less than half. Both windows stay at their initial size
/// (the transfer is application-limited, RFC 9002 §7.8) and each path's pacer spaces its
/// packets at 1.25 windows per RTT, so a path is ready only part of the time: min-RTT hands
/// the 40 ms path what arrives while the 20 ms path's pacer holds it (under a tenth), and
/// round-robin, which alternates among the paths ready at the moment, gives it about as
/// much (the 40 ms path is ready half as often).
#[test]
fn round_robin_and_weighted_spread_a_flow_limited_download() {
    let seed = 62;
    let links = [path(20.0, 20.0), path(20.0, 40.0)];
    let run = |kind| download(&links, seed, kind, |c| flow_limited(30_000, c), 3 * MB, 1, |_| {});
    let (minrtt, rr, weighted) =
        (run(SchedulerKind::MinRtt), run(SchedulerKind::RoundRobin), run(SchedulerKind::Weighted));
    let (m, r, w) = (share1(&minrtt), share1(&rr), share1(&weighted));
    println!(
        "seed {seed}: share of first transmissions on the 40 ms path: min-RTT {m:.3}, round-robin {r:.3}, weighted \
         {w:.3}; done at {:.3} / {:.3} / {:.3} s",
        done(&minrtt),
        done(&rr),
        done(&weighted)
    );
    assert!(m < 0.1, "min-RTT put {m:.3} on the slow path: {}", minrtt.describe());
    assert!(r > 0.05, "round-robin put {r:.3} on path 1: {}", rr.describe());
    assert!(w > 0.05 && w < 0.5, "weighted put {w:.3} on the slower path: {}", weighted.describe());
}

/// On saturated paths of 60 and 20 Mbit/s (same RTT) the weighted scheduler splits the
/// download about 3:1, as the bandwidths.
#[test]
fn weighted_follows_the_bandwidth_of_saturated_paths() {
    let seed = 63;
    let r = download(&[path(60.0, 20.0), path(20.0, 20.0)], seed, SchedulerKind::Weighted, |c| c, 8 * MB, 1, |_| {});
    let s0 = 1.0 - share1(&r);
    println!("seed {seed}: weighted share of the 60 Mbit/s path {s0:.3}; done at {:.3} s", done(&r));
    assert!((0.65..=0.85).contains(&s0), "share {s0:.3}: {}", r.describe());
}

/// ECF on the heterogeneous paths of "The Packet Number Space Debate in Multipath QUIC" (§3.2:
/// 90 Mbit/s / 20 ms and 10 Mbit/s / 180 ms), the handshake on either: a 50 MB download is never
/// more than 10 % slower than on the best path alone. (With the handshake on the 180 ms path,
/// opening the fast path costs about 0.3 s whatever the scheduler, which smaller downloads cannot
/// amortize.)
#[test]
fn ecf_is_not_slower_than_the_best_path() {
    let seed = 64;
    let size = 50 * MB;
    let (fast, slow) = (path(90.0, 20.0), path(10.0, 180.0));
    let single = download(std::slice::from_ref(&fast), seed, SchedulerKind::MinRtt, |c| c, size, 1, |_| {});
    let s = done(&single);
    for (links, handshake) in [([fast.clone(), slow.clone()], "fast"), ([slow, fast], "slow")] {
        let ecf = download(&links, seed, SchedulerKind::Ecf, |c| c, size, 1, |_| {});
        let e = done(&ecf);
        println!("seed {seed}: handshake on the {handshake} path: ECF {e:.3} s, best path alone {s:.3} s");
        assert!(e <= 1.1 * s, "ECF {e:.3} s vs {s:.3} s on the best path alone: {}", ecf.describe());
    }
}

/// Stream-to-path pinning: four download streams over two equal paths. Once the server has
/// validated path 1, stream `4k` is pinned to path `k mod 2`: every first transmission of
/// its data goes there (retransmissions and reinjected copies may be elsewhere, but stay
/// under 2 %: with HyStart++ path 0 finishes its streams first and, idle, copies the last
/// 24,640 bytes of stream 12 still in flight on path 1, 1.6 % of it, at 0.935 s). Min-RTT,
/// the control, spreads every stream over both paths.
#[test]
fn pinned_streams_stay_on_their_path() {
    let seed = 65;
    let links = [path(30.0, 20.0), path(30.0, 20.0)];
    // Per stream, bytes on its own path and elsewhere after path 1 was validated: (first
    // transmissions, all frames).
    let split = |r: &Run| {
        let t1 = r.server_events(|e| *e == PathEvent::Validated { id: 1 })[0].0;
        let frames = stream_frames(&r.server_qlog);
        // A stream's new data goes out in offset order: a frame is a first transmission
        // when it ends beyond all the stream sent before (copies and their pieces do not).
        let mut sent_to = std::collections::HashMap::<u64, u64>::new();
        let mut out = std::collections::BTreeMap::<u64, [u64; 4]>::new();
        for f in &frames {
            let end = sent_to.entry(f.stream).or_default();
            let first = f.offset + f.len > *end;
            *end = (*end).max(f.offset + f.len);
            if f.at < t1 {
                continue;
            }
            let own = usize::from(f.path != (f.stream >> 2) % 2);
            let e = out.entry(f.stream).or_default();
            if first {
                e[own] += f.len;
            }
            e[2 + own] += f.len;
        }
        (secs(t1), out)
    };
    let pinned = download(&links, seed, SchedulerKind::Pinned, |c| c, 6 * MB, 4, |_| {});
    let minrtt = download(&links, seed, SchedulerKind::MinRtt, |c| c, 6 * MB, 4, |_| {});
    let ((t1, p), (_, m)) = (split(&pinned), split(&minrtt));
    println!("seed {seed}: after {t1:.3} s, per stream [own first, other first, own all, other all]: pinned {p:?}, min-RTT {m:?}");
    assert_eq!(p.len(), 4, "seed {seed}: {p:?}");
    for (id, [own, other, own_all, other_all]) in &p {
        assert!(*own > 500_000, "seed {seed}: stream {id}: {p:?}");
        assert_eq!(*other, 0, "seed {seed}: stream {id} left its path: {p:?}");
        assert!((*other_all as f64) < 0.02 * *own_all as f64, "seed {seed}: stream {id}: {p:?}");
    }
    // The control: without pinning, each stream uses both paths.
    assert!(m.values().all(|[own, other, ..]| *own > 100_000 && *other > 100_000), "seed {seed}: {m:?}");
    println!("done at {:.3} s (pinned) / {:.3} s (min-RTT)", done(&pinned), done(&minrtt));
}

/// Opportunistic reinjection copies data stuck on a clearly slower path onto a faster one.
/// Paths of equal delay are not "slower" than each other because their smoothed RTTs wander
/// apart with their queues or jitter: a flow-limited download (the sender often has nothing new to
/// send, the moment reinjection looks for stuck data) over two equal paths copies nothing,
/// while over a 10 ms and a 100 ms path, or a 20 ms and a jittery 60 ms path, it copies data
/// from the slow one. Round-robin puts data on the slow path (min-RTT leaves it idle in a
/// flow-limited download, so nothing would be stuck there).
#[test]
fn reinjection_copies_from_clearly_slower_paths_only_seed_5() {
    let reinjected = |links: &[LinkConfig]| {
        // (Fixed-size datagrams: the equal-paths case was calibrated without PMTU probes,
        // whose round trips, early in the flow, set the two paths' RTT estimates apart
        // enough for a few copies: 18 chunks with discovery on.)
        let fixed = |c| TransportConfig { pmtud: false, ..c };
        let r = download(links, 5, SchedulerKind::RoundRobin, |c| flow_limited(60_000, fixed(c)), 3 * MB, 1, |_| {});
        let st = r.server_stats();
        (st.reinjected_chunks, st.copies_acked_first, st.copies_acked_late)
    };
    // Equal paths with jitter: their smoothed RTTs drift apart by more than a third at times.
    let jittery = || -> LinkConfig { "20mbit/10ms/queue=15ms/jitter=4ms".parse().unwrap() };
    let equal = reinjected(&[jittery(), jittery()]);
    let unequal = reinjected(&[path(20.0, 10.0), path(20.0, 100.0)]);
    // A steady path next to a jittery one whose delay really is longer (Wi-Fi and LTE).
    let jittery_slow: LinkConfig = "20mbit/60ms/queue=90ms/jitter=20ms".parse().unwrap();
    let mixed = reinjected(&[path(20.0, 20.0), jittery_slow]);
    println!(
        "seed 5: reinjected chunks, copies acknowledged first, late: equal paths {equal:?}, \
         10 ms + 100 ms paths {unequal:?}, 20 ms + jittery 60 ms {mixed:?}"
    );
    assert_eq!(equal, (0, 0, 0), "equal paths copied each other's data");
    assert!(unequal.0 > 0, "nothing copied from the 100 ms path");
    assert!(mixed.0 > 0, "nothing copied from the jittery 60 ms path");
    // Copies from a clearly slower path arrive first (the feedback that pauses reinjection
    // while copies are late must not pause these). (Counted per packet: a chunk may be
    // copied in two pieces.)
    for (what, (_, first, late)) in [("100 ms", unequal), ("jittery 60 ms", mixed)] {
        assert!(first > 3 * late, "{what}: copies mostly late: {first} first, {late} late");
    }
}
