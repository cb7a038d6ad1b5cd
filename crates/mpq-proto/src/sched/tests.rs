//! Table-driven tests of every scheduler over synthetic path tables.

use std::time::Duration;

use super::*;

/// A path snapshot builder: `path(id, rtt_ms)` can send, has a sampled RTT and 100 kB cwnd.
fn path(id: u64, rtt_ms: u64) -> PathSnapshot {
    let srtt = Duration::from_millis(rtt_ms);
    PathSnapshot {
        id,
        srtt,
        rttvar: srtt / 4,
        min_rtt: srtt,
        rtt_sampled: true,
        cwnd: 100_000,
        bytes_in_flight: 0,
        mtu: 1200,
        can_send: true,
        backup: false,
        potentially_failed: false,
        delivery_rate: 100_000.0 / srtt.as_secs_f64(),
        bytes_sent: 0,
    }
}

fn blocked(mut p: PathSnapshot) -> PathSnapshot {
    p.can_send = false;
    p
}

fn all_kinds() -> Vec<SchedulerKind> {
    use SchedulerKind::*;
    vec![MinRtt, RoundRobin, Weighted, Redundant, RttProbe, Ecf, Pinned]
}

fn sent_path(d: &Decision) -> Option<u64> {
    match d {
        Decision::Send { path, .. } => Some(*path),
        Decision::Wait => None,
    }
}

#[test]
fn every_scheduler_sends_only_where_the_window_allows() {
    let tables = [
        vec![path(0, 20), path(1, 50)],
        vec![blocked(path(0, 20)), path(1, 50)],
        vec![blocked(path(0, 20)), blocked(path(1, 50))],
        vec![path(3, 80)],
    ];
    for kind in all_kinds() {
        let mut s = build(kind);
        for t in &tables {
            for _ in 0..5 {
                let d = s.schedule(t, &SchedContext { queued_bytes: 10_000 });
                if let Decision::Send { path, copies } = &d {
                    assert!(t.iter().any(|p| p.id == *path && p.can_send), "{kind}: sent on a blocked path in {t:?}");
                    // Copies go to other paths of the table; a copy waits for its path's window.
                    assert!(copies.iter().all(|c| *c != *path && t.iter().any(|p| p.id == *c)), "{kind}: bad copies");
                    s.on_sent(*path, 1200);
                }
            }
            if t.iter().all(|p| !p.can_send) {
                assert_eq!(s.schedule(t, &SchedContext::default()), Decision::Wait, "{kind}");
            }
        }
    }
}

#[test]
fn backup_and_failed_paths_are_used_only_as_a_last_resort() {
    for kind in all_kinds() {
        let mut s = build(kind);
        let mut b = path(1, 5);
        b.backup = true;
        let mut f = path(2, 5);
        f.potentially_failed = true;
        let t = [path(0, 50), b, f];
        for _ in 0..10 {
            let d = s.schedule(&t, &SchedContext::default());
            assert_eq!(sent_path(&d), Some(0), "{kind} used a backup or failed path");
            if let Decision::Send { copies, .. } = d {
                assert!(copies.is_empty(), "{kind} copied onto a backup or failed path");
            }
        }
        // Only the backup path is left working: it is used.
        let mut failed = path(0, 50);
        failed.potentially_failed = true;
        let t2 = [failed, b];
        assert_eq!(sent_path(&s.schedule(&t2, &SchedContext::default())), Some(1), "{kind}");
    }
}

#[test]
fn minrtt_prefers_the_fast_path_then_spills_over() {
    let mut s = MinRtt;
    let ctx = SchedContext::default();
    assert_eq!(sent_path(&s.schedule(&[path(0, 50), path(1, 20)], &ctx)), Some(1));
    assert_eq!(sent_path(&s.schedule(&[path(0, 50), blocked(path(1, 20))], &ctx)), Some(0));
    // An unmeasured path ranks after measured ones even with a smaller initial estimate.
    let mut fresh = path(2, 1);
    fresh.rtt_sampled = false;
    assert_eq!(sent_path(&s.schedule(&[path(0, 50), fresh], &ctx)), Some(0));
}

#[test]
fn round_robin_alternates() {
    let mut s = RoundRobin::default();
    let t = [path(0, 20), path(1, 50), path(2, 90)];
    let seq: Vec<_> = (0..6).map(|_| sent_path(&s.schedule(&t, &SchedContext::default())).unwrap()).collect();
    assert_eq!(seq, vec![0, 1, 2, 0, 1, 2]);
    let t = [path(0, 20), blocked(path(1, 50)), path(2, 90)];
    let seq: Vec<_> = (0..4).map(|_| sent_path(&s.schedule(&t, &SchedContext::default())).unwrap()).collect();
    assert_eq!(seq, vec![0, 2, 0, 2]);
}

#[test]
fn weighted_splits_bytes_by_rate() {
    let mut s = Weighted::default();
    let mut a = path(0, 20);
    let mut b = path(1, 20);
    a.delivery_rate = 3e6;
    b.delivery_rate = 1e6;
    let mut bytes = [0u64; 2];
    for _ in 0..1000 {
        let p = sent_path(&s.schedule(&[a, b], &SchedContext::default())).unwrap();
        bytes[p as usize] += 1500;
        s.on_sent(p, 1500);
    }
    let ratio = bytes[0] as f64 / bytes[1] as f64;
    assert!((ratio - 3.0).abs() <= 0.15, "split {ratio}");
}

#[test]
fn redundant_copies_onto_every_other_path() {
    let mut s = Redundant;
    let d = s.schedule(&[path(0, 50), path(1, 20), blocked(path(2, 30)), path(3, 90)], &SchedContext::default());
    match d {
        Decision::Send { path, mut copies } => {
            assert_eq!(path, 1);
            copies.sort_unstable();
            // The blocked path gets its copy too: it waits there for the path's window.
            assert_eq!(copies.as_slice(), &[0, 2, 3]);
        }
        Decision::Wait => panic!("redundant waited"),
    }
}

#[test]
fn rtt_probe_duplicates_onto_unmeasured_paths() {
    let mut s = RttProbe;
    let mut fresh = path(1, 333);
    fresh.rtt_sampled = false;
    let d = s.schedule(&[path(0, 30), fresh], &SchedContext::default());
    assert_eq!(d, Decision::Send { path: 0, copies: [1].into_iter().collect() });
    // Measured: no more copies.
    let d = s.schedule(&[path(0, 30), path(1, 60)], &SchedContext::default());
    assert_eq!(d, Decision::send(0));
    // Only the unmeasured path can send: use it.
    let d = s.schedule(&[blocked(path(0, 30)), fresh], &SchedContext::default());
    assert_eq!(d, Decision::send(1));
}

#[test]
fn ecf_waits_for_the_fast_path_unless_the_queue_is_long() {
    let mut s = Ecf;
    let fast = blocked(path(0, 10));
    let mut slow = path(1, 200);
    slow.cwnd = 20_000;
    // A little data: the fast path clears it before the slow one would deliver it.
    let d = s.schedule(&[fast, slow], &SchedContext { queued_bytes: 50_000 });
    assert_eq!(d, Decision::Wait);
    // Much more than the fast path carries in the slow path's RTT: use both.
    let d = s.schedule(&[fast, slow], &SchedContext { queued_bytes: 5_000_000 });
    assert_eq!(d, Decision::send(1));
    // Similar paths: no reason to wait.
    let d = s.schedule(&[fast, path(1, 12)], &SchedContext { queued_bytes: 50_000 });
    assert_eq!(d, Decision::send(1));
}

#[test]
fn pinned_keeps_each_stream_on_one_path() {
    let s = Pinned;
    let t = [path(0, 20), path(1, 50)];
    for i in 0..8u64 {
        let id = StreamId(i << 2);
        let allowed: Vec<u64> = t.iter().map(|p| p.id).filter(|&p| s.stream_allowed(id, p, &t)).collect();
        assert_eq!(allowed, vec![i % 2], "stream {i}");
    }
    // The assigned path failed: the stream may go anywhere.
    let mut f = path(1, 50);
    f.potentially_failed = true;
    let t = [path(0, 20), f];
    assert!(s.stream_allowed(StreamId(1 << 2), 0, &t));
}

/// Asked from each path's thread (`schedule_for`), round-robin and pinned let every ready
/// path send at once (no rotation for threads to chase), while minimum-RTT still sends the
/// slow path's thread to the fast path; no scheduler sends a blocked or backup path's thread
/// to itself.
#[test]
fn schedule_for_answers_each_paths_thread() {
    let ctx = SchedContext::default();
    let table = [path(0, 10), path(1, 50)];
    for kind in [SchedulerKind::RoundRobin, SchedulerKind::Pinned] {
        let mut s = build(kind);
        for _ in 0..3 {
            for id in [0, 1, 1, 0] {
                assert_eq!(sent_path(&s.schedule_for(id, &table, &ctx)), Some(id), "{kind:?} for path {id}");
            }
        }
    }
    let mut m = build(SchedulerKind::MinRtt);
    assert_eq!(sent_path(&m.schedule_for(1, &table, &ctx)), Some(0));
    let fast_full = [blocked(path(0, 10)), path(1, 50)];
    assert_eq!(sent_path(&m.schedule_for(1, &fast_full, &ctx)), Some(1));
    let mut backup = path(1, 5);
    backup.backup = true;
    for kind in all_kinds() {
        let mut s = build(kind);
        let d = s.schedule_for(1, &[path(0, 10), backup], &ctx);
        assert_ne!(sent_path(&d), Some(1), "{kind:?} sent on a backup path");
        let d = s.schedule_for(1, &[path(0, 10), blocked(path(1, 5))], &ctx);
        assert_ne!(sent_path(&d), Some(1), "{kind:?} sent on a blocked path");
    }
}
