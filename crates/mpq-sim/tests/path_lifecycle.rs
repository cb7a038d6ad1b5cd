//! Multipath path lifecycle in the simulator (RFC 10069): abandon by the
//! application, backup status, path-ID and connection-ID exhaustion, NAT rebinding, key
//! updates and reopening after an outage, each during a download over real simulated links.
//!
//! Every run is seeded and byte-exact: the download app checks every byte against the
//! pattern, and [`Run::assert_complete`] requires the whole download. Failure messages carry
//! the seed and the per-path figures ([`Run::describe`]).

mod common;

use std::time::Duration;

use common::mp::{mp, path, path_updates, secs, Run, MB};
use mpq_proto::conn::{PathError, PathEvent, PathStatus};
use mpq_sim::apps::DownloadClient;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The application abandons path 1 in the middle of a two-path download: the download
/// completes byte-exact on path 0, path 1 ends abandoned then closed on both sides, and
/// not one byte goes on it after each side learned of the abandonment.
#[test]
fn application_abandons_a_path_mid_transfer() {
    let seed = 51;
    let size = 6 * MB;
    let mut r = Run::new(&[path(50.0, 20.0), path(50.0, 20.0)], seed, mp(1), mp(1), false, |c, s, extra| {
        DownloadClient::new(c, s, size).with_paths(extra)
    });
    r.run_until(ms(300));
    let before = r.client_stats();
    let p1 = Run::path_of(&before, 1);
    assert!(p1.rx_bytes > 300_000, "path 1 carried little before the abandon: {}", r.describe());
    let (up_at_abandon, _) = r.link(1);
    assert_eq!(r.with_client_conn(|now, c| c.abandon_path(now, 1, 0)), Ok(()), "seed {seed}");
    assert_eq!(r.with_client_conn(|now, c| c.abandon_path(now, 1, 0)), Err(PathError::UnknownPath), "seed {seed}");

    // The server learns of it from the PATH_ABANDON (sent on path 0).
    let by_peer = |e: &PathEvent| matches!(e, PathEvent::Abandoned { id: 1, by_peer: true, .. });
    assert!(r.run_while_not(|r| !r.server_events(by_peer).is_empty(), Duration::from_secs(2)), "{}", r.describe());
    let t_server = r.now();
    let server_p1_at_abandon = Run::path_of(&r.server_stats(), 1);
    let (_, down_at_server_abandon) = r.link(1);

    assert!(r.run_to_completion(Duration::from_secs(30)), "{}", r.describe());
    r.assert_complete();
    let (up_end, down_end) = r.link(1);
    // Nothing offered to path 1's links after each side abandoned it.
    assert_eq!(up_end.sent_bytes, up_at_abandon.sent_bytes, "seed {seed}: client sent on path 1 after abandoning it");
    assert_eq!(
        down_end.sent_bytes, down_at_server_abandon.sent_bytes,
        "seed {seed}: server sent on path 1 after the abandon"
    );
    // The same from the endpoints' own per-path counters.
    let (client_end, server_end) = (r.client_stats(), r.server_stats());
    assert_eq!(Run::path_of(&client_end, 1).tx_bytes, p1.tx_bytes, "{}", r.describe());
    assert_eq!(Run::path_of(&server_end, 1).tx_bytes, server_p1_at_abandon.tx_bytes, "{}", r.describe());
    assert_eq!(Run::path_of(&client_end, 1).state, "abandoned", "{}", r.describe());
    assert_eq!(Run::path_of(&server_end, 1).state, "abandoned", "{}", r.describe());
    // Abandoned, then closed (state dropped after 3 PTOs), on both sides.
    let ours = r.client_events(|e| matches!(e, PathEvent::Abandoned { id: 1, by_peer: false, .. }));
    assert_eq!(ours.len(), 1, "{}", r.describe());
    assert_eq!(r.client_events(|e| *e == PathEvent::Closed { id: 1 }).len(), 1, "{}", r.describe());
    assert_eq!(r.server_events(|e| *e == PathEvent::Closed { id: 1 }).len(), 1, "{}", r.describe());
    assert_eq!(r.server_conn().unwrap().path_ids(), [0], "{}", r.describe());
    // Path 0 carried the rest of the download.
    let after = r.size - before.paths.iter().map(|p| p.rx_bytes).sum::<u64>();
    assert!(Run::path_of(&client_end, 0).rx_bytes > after, "{}", r.describe());
    println!(
        "seed {seed}: abandoned at 0.300 s (path 1 had {} B), server knew at {:.3} s, done at {:.3} s",
        p1.rx_bytes,
        secs(t_server),
        secs(r.app().done_at.unwrap())
    );
}

/// Path 1 is opened as a backup (the client sends PATH_STATUS_BACKUP): while path 0 works
/// the server sends (almost) nothing on it; when path 0's link dies, path 1 takes over and
/// the download completes byte-exact.
#[test]
fn backup_path_takes_over_when_the_primary_fails() {
    let seed = 52;
    let size = 6 * MB;
    let fail_at = ms(500);
    let mut r = Run::new(&[path(50.0, 20.0), path(50.0, 20.0)], seed, mp(1), mp(1), false, |c, s, extra| {
        DownloadClient::new(c, s, size).with_paths(extra).with_path_status(PathStatus::Backup)
    });
    r.topo.fail_path(0, mpq_proto::Instant::ZERO + fail_at);
    r.run_until(fail_at);
    let received_before = r.app().received;
    let (_, down1_before) = r.link(1);
    let (_, down0_before) = r.link(0);
    assert!(r.client_events(|e| *e == PathEvent::Validated { id: 1 }).len() == 1, "{}", r.describe());
    assert!(Run::path_of(&r.server_stats(), 1).backup, "server does not treat path 1 as backup: {}", r.describe());
    // Before the failure: path validation and acknowledgements only (a few kB) on path 1.
    assert!(received_before > 2 * MB, "{}", r.describe());
    assert!(
        down1_before.delivered_bytes < 20_000 && down1_before.delivered_bytes * 100 < down0_before.delivered_bytes,
        "backup path carried {} B while path 0 carried {} B: {}",
        down1_before.delivered_bytes,
        down0_before.delivered_bytes,
        r.describe()
    );

    assert!(r.run_to_completion(Duration::from_secs(30)), "{}", r.describe());
    r.assert_complete();
    let (_, down1) = r.link(1);
    // Packets already on path 0's wire at the failure still arrive; the rest is the backup's.
    let rest = size - received_before;
    let on_backup = down1.delivered_bytes - down1_before.delivered_bytes;
    assert!(
        on_backup as f64 > 0.9 * rest as f64,
        "backup path carried {on_backup} B of the last {rest} B: {}",
        r.describe()
    );
    let done = secs(r.app().done_at.unwrap());
    // The rest (about 3.5 MB) takes 0.6 s at 50 Mbit/s; the failure detection costs PTOs.
    assert!(done < 0.5 + 0.6 + 1.5, "handover too slow: done at {done:.3} s: {}", r.describe());
    println!(
        "seed {seed}: backup carried {} B before the failure at 0.5 s ({} B received), {on_backup} B after; done at \
         {done:.3} s",
        down1_before.delivered_bytes, received_before
    );
}

/// Three links, but the server allows path IDs up to 1 only (initial_max_path_id = 1): the
/// client's third path is refused with `NoPathId` and PATHS_BLOCKED goes out. Once the
/// application abandons path 1 and the server drops its state, the server's MAX_PATH_ID
/// allows path ID 2, which opens on the third link and carries data.
#[test]
fn path_id_limit_blocks_until_max_path_id_allows_another() {
    let seed = 53;
    let size = 8 * MB;
    let links = [path(40.0, 20.0), path(40.0, 20.0), path(40.0, 20.0)];
    let mut r =
        Run::new(&links, seed, mp(2), mp(1), false, |c, s, extra| DownloadClient::new(c, s, size).with_paths(extra));
    let third = (r.topo.paths[2].client, r.topo.paths[2].server);
    r.run_until(ms(300));
    let opener = r.app().paths();
    assert_eq!(opener.opened.iter().map(|p| p.0).collect::<Vec<_>>(), [1], "{}", r.describe());
    assert!(
        opener.errors.iter().any(|e| (e.0, e.1, e.2) == (third.0, third.1, PathError::NoPathId)),
        "seed {seed}: {:?}",
        opener.errors
    );
    assert_eq!(opener.pending(), [third], "seed {seed}");
    let (c, s) = (r.client_stats(), r.server_stats());
    // One PATHS_BLOCKED per limit, however often the application retries.
    assert_eq!((c.paths_blocked_sent, s.paths_blocked_received), (1, 1), "{}", r.describe());
    assert_eq!(r.link(2).0.sent_bytes, 0, "seed {seed}: the third link was used before path ID 2 was allowed");

    let t_abandon = r.now();
    assert_eq!(r.with_client_conn(|now, c| c.abandon_path(now, 1, 0)), Ok(()), "seed {seed}");
    assert!(r.run_to_completion(Duration::from_secs(30)), "{}", r.describe());
    r.assert_complete();
    let opened = r.client_events(|e| matches!(e, PathEvent::Opened { id: 2, .. }));
    let closed_on_server = r.server_events(|e| *e == PathEvent::Closed { id: 1 });
    assert_eq!(opened.len(), 1, "path ID 2 never opened: {}", r.describe());
    assert_eq!(closed_on_server.len(), 1, "{}", r.describe());
    // Path ID 2 only after the server freed path ID 1 (and told the client with MAX_PATH_ID).
    assert!(opened[0].0 > closed_on_server[0].0, "{}", r.describe());
    assert_eq!(r.app().paths().opened.iter().map(|p| p.0).collect::<Vec<_>>(), [1, 2], "seed {seed}");
    let (_, down2) = r.link(2);
    assert!(down2.delivered_bytes > MB, "path 2 carried {} B: {}", down2.delivered_bytes, r.describe());
    println!(
        "seed {seed}: abandoned path 1 at {:.3} s, server closed it at {:.3} s, path 2 opened at {:.3} s and carried \
         {} B; done at {:.3} s",
        secs(t_abandon),
        secs(closed_on_server[0].0),
        secs(opened[0].0),
        down2.delivered_bytes,
        secs(r.app().done_at.unwrap())
    );
}

/// Connection-ID exhaustion: the server allows path IDs up to 2 but at most two paths at once
/// (max_concurrent_paths = 2, path 0 included), so it issues connection IDs for path ID 1
/// only. The client's attempt at path ID 2 gets `NoConnectionId` and sends PATH_CIDS_BLOCKED;
/// once path 1 is abandoned and closed, the server issues CIDs for path ID 2, which opens.
#[test]
fn path_cids_blocked_until_the_server_issues_cids_for_the_next_path_id() {
    let seed = 54;
    let size = 8 * MB;
    let links = [path(40.0, 20.0), path(40.0, 20.0), path(40.0, 20.0)];
    let server = mpq_proto::conn::TransportConfig { max_concurrent_paths: 2, ..mp(2) };
    let mut r =
        Run::new(&links, seed, mp(2), server, false, |c, s, extra| DownloadClient::new(c, s, size).with_paths(extra));
    let third = (r.topo.paths[2].client, r.topo.paths[2].server);
    r.run_until(ms(300));
    let opener = r.app().paths();
    assert_eq!(opener.opened.iter().map(|p| p.0).collect::<Vec<_>>(), [1], "{}", r.describe());
    assert!(
        opener.errors.iter().any(|e| (e.0, e.1, e.2) == (third.0, third.1, PathError::NoConnectionId)),
        "{:?}: {}",
        opener.errors,
        r.describe()
    );
    let (c, s) = (r.client_stats(), r.server_stats());
    assert!(c.path_cids_blocked_sent >= 1 && s.path_cids_blocked_received >= 1, "seed {seed}: {c:?} {s:?}");
    assert_eq!(c.paths_blocked_sent, 0, "seed {seed}");
    assert_eq!(r.link(2).0.sent_bytes, 0, "seed {seed}: the third link was used without connection IDs");

    assert_eq!(r.with_client_conn(|now, c| c.abandon_path(now, 1, 0)), Ok(()), "seed {seed}");
    assert!(r.run_to_completion(Duration::from_secs(30)), "{}", r.describe());
    r.assert_complete();
    let opened = r.client_events(|e| matches!(e, PathEvent::Opened { id: 2, .. }));
    let validated = r.client_events(|e| *e == PathEvent::Validated { id: 2 });
    let closed_on_server = r.server_events(|e| *e == PathEvent::Closed { id: 1 });
    assert_eq!((opened.len(), validated.len(), closed_on_server.len()), (1, 1, 1), "{}", r.describe());
    assert!(opened[0].0 > closed_on_server[0].0, "{}", r.describe());
    let (_, down2) = r.link(2);
    assert!(down2.delivered_bytes > MB, "path 2 carried {} B: {}", down2.delivered_bytes, r.describe());
    println!(
        "seed {seed}: {} PATH_CIDS_BLOCKED sent; server closed path 1 at {:.3} s, path 2 opened at {:.3} s and carried \
         {} B; done at {:.3} s",
        c.path_cids_blocked_sent,
        secs(closed_on_server[0].0),
        secs(opened[0].0),
        down2.delivered_bytes,
        secs(r.app().done_at.unwrap())
    );
}

/// NAT rebinding during a two-path download: path 0's client address gets a new port at
/// 0.3 s, path 1's at 0.5 s (the old mappings stop working at once). The server sees each
/// path's packets come from the new address, moves the path there and validates it again
/// (only a validated address lifts the 3x anti-amplification limit, so a path that keeps
/// carrying the download at full rate was revalidated); the download completes byte-exact.
#[test]
fn nat_rebinding_moves_both_paths_during_a_transfer() {
    let seed = 55;
    let size = 8 * MB;
    // Receive windows larger than the download: the client sends no flow-control update,
    // which could otherwise take the path by chance and tell the server of the move.
    let mut client = mp(1);
    client.streams.stream_receive_window = 2 * size;
    client.streams.receive_window = 2 * size;
    let mut r = Run::new(&[path(40.0, 20.0), path(40.0, 20.0)], seed, client, mp(1), true, |c, s, extra| {
        DownloadClient::new(c, s, size).with_paths(extra)
    });
    let new0: std::net::SocketAddr = "10.0.0.1:6000".parse().unwrap();
    let new1: std::net::SocketAddr = "10.0.1.1:6001".parse().unwrap();
    let nat0 = r.topo.rebind(0, mpq_proto::Instant::ZERO + ms(300), new0);
    let nat1 = r.topo.rebind(1, mpq_proto::Instant::ZERO + ms(500), new1);
    assert!(r.run_to_completion(Duration::from_secs(30)), "{}", r.describe());
    r.assert_complete();

    let moves: Vec<_> = path_updates(&r.server_qlog).into_iter().filter(|u| u.2 == "rebinding").collect();
    let moved_to = |id: u64| moves.iter().filter(|u| u.1 == id).map(|u| (secs(u.0), u.3.clone())).collect::<Vec<_>>();
    let (m0, m1) = (moved_to(0), moved_to(1));
    assert_eq!(m0.len(), 1, "seed {seed}: {moves:?}");
    assert_eq!(m1.len(), 1, "seed {seed}: {moves:?}");
    assert_eq!(m0[0].1, new0.to_string(), "seed {seed}");
    assert_eq!(m1[0].1, new1.to_string(), "seed {seed}");
    // The server learns of a move from the client's next packet on the path. The client,
    // unaware of its NAT, sends on a download path only in reply to data (ACKs) or with
    // flow-control updates (none here), and the data in flight to the old mapping is lost:
    // its liveness probe takes the path, two PTOs of silence (while the other path
    // delivers) after the move. (With the default windows, updates that happened to take
    // the path told the server 0.04 to 0.54 s after the move, or it abandoned the path.)
    assert!((0.3..0.7).contains(&m0[0].0) && (0.5..0.9).contains(&m1[0].0), "seed {seed}: {moves:?}");
    let client = r.client_conn().unwrap().stats();
    let probes: u64 = client.paths.iter().map(|p| p.liveness_probes).sum();
    assert!(probes > 0, "seed {seed}: no liveness probe: {:?}", client.paths);
    assert_eq!(r.server_conn().unwrap().remote_address(), new0, "{}", r.describe());
    assert_eq!(r.server_conn().unwrap().path_ids(), [0, 1], "a path was lost: {}", r.describe());
    let (s0, s1) = (r.topo.sim.nat(nat0).stats.clone(), r.topo.sim.nat(nat1).stats.clone());
    // The old mappings died with packets in flight on them.
    assert!(s0.dropped_stale > 0 && s1.dropped_stale > 0, "seed {seed}: {s0:?} {s1:?}");
    // After the move each path carried the download far beyond 3x what the client sent from
    // the new address: the server validated it.
    for (st, name) in [(&s0, "path 0"), (&s1, "path 1")] {
        let (down, up) = (st.inbound_bytes[1], st.outbound_bytes[1]);
        assert!(down > 500_000 && down > 10 * up, "{name} after rebinding: {down} B down, {up} B up: {}", r.describe());
    }
    println!(
        "seed {seed}: path 0 moved at {:.3} s ({} B after, {} stale drops), path 1 at {:.3} s ({} B after, {} stale \
         drops); done at {:.3} s",
        m0[0].0,
        s0.inbound_bytes[1],
        s0.dropped_stale,
        m1[0].0,
        s1.inbound_bytes[1],
        s1.dropped_stale,
        secs(r.app().done_at.unwrap())
    );
}

/// Key updates due every 300 packets during a two-path download. Several updates happen
/// (both sides count each one) and not a byte is lost or corrupted. They are spaced by at
/// least three of the largest PTO after the previous one was acknowledged
/// (RFC 10069 §2.5): far more than the ~40 ms 300 packets take here.
#[test]
fn key_updates_during_a_multipath_transfer() {
    let seed = 56;
    // About 1.5 s at 80 Mbit/s: room for several updates three PTOs apart.
    let size = 14 * MB;
    let cfg = mpq_proto::conn::TransportConfig { key_update_interval: 300, ..mp(1) };
    let mut r = Run::new(&[path(40.0, 20.0), path(40.0, 40.0)], seed, cfg.clone(), cfg, true, |c, s, extra| {
        DownloadClient::new(c, s, size).with_paths(extra)
    });
    assert!(r.run_to_completion(Duration::from_secs(30)), "{}", r.describe());
    r.assert_complete();
    let (c, s) = (r.client_stats(), r.server_stats());
    assert!(c.key_updates >= 3, "client saw {} key updates: {}", c.key_updates, r.describe());
    // Per side: every update it starts comes at least three PTOs (> 3 x 40 ms) after the
    // previous phase change it saw, its own or the peer's.
    let key_log = |q: &common::mp::Qlog| -> Vec<(f64, bool)> {
        let q = q.lock().unwrap();
        q.iter()
            // One update logs both directions' keys: count it once.
            .filter(|(_, n, d)| *n == "security:key_updated" && d["key_type"] == "client_1rtt_secret")
            .map(|(t, _, d)| (secs(*t), d["trigger"] == "local_update"))
            .collect()
    };
    let (client_log, server_log) = (key_log(&r.client_qlog), key_log(&r.server_qlog));
    for (side, log) in [("client", &client_log), ("server", &server_log)] {
        for w in log.windows(2) {
            assert!(!w[1].1 || w[1].0 - w[0].0 > 0.12, "seed {seed}: {side} updated too soon: {log:?}");
        }
    }
    let initiated = |log: &[(f64, bool)]| log.iter().filter(|u| u.1).map(|u| u.0).collect::<Vec<_>>();
    let (by_client, by_server) = (initiated(&client_log), initiated(&server_log));
    // Each update is counted by the side that starts it and the side that follows (both
    // count one if they start the same update at once); one side may be one ahead at the end.
    assert!(s.key_updates.abs_diff(c.key_updates) <= 1, "{}", r.describe());
    for id in [0, 1] {
        let p = Run::path_of(&c, id);
        assert!(p.rx_bytes > MB, "path {id} carried {} B: {}", p.rx_bytes, r.describe());
    }
    assert_eq!(c.dropped_packets, 0, "client could not decrypt some packets: {}", r.describe());
    println!(
        "seed {seed}: {} key updates (client), {} (server); started by the client at {by_client:.3?} s, by the \
         server at {by_server:.3?} s; done at {:.3} s",
        c.key_updates,
        s.key_updates,
        secs(r.app().done_at.unwrap())
    );
}

/// Path 1's link goes down at 0.3 s and comes back at 2.5 s. The client runs mpq-proto's
/// `PathManager`: once path 1 is abandoned as dead (four PTOs without an answer, about
/// 1.6 s), it opens a new path (a new path ID, allowed by the server's MAX_PATH_ID once path
/// 1 is closed) on the same addresses while the link is still down; that path validates only
/// once the link is back (its PATH_CHALLENGE is repeated after a PTO), then carries data.
/// Byte-exact.
///
/// (A path opened during an outage fails validation if the outage lasts about 3 s more: the
/// challenge is repeated after one and three PTOs of an unmeasured path, about 1 s and 3 s,
/// and validation gives up after max(3 PTO, 6 initial RTT). The manager then opens yet
/// another path ID.)
#[test]
fn path_manager_reopens_a_path_after_an_outage() {
    use mpq_proto::path_manager::{PathManagerConfig, PathMode};
    let seed = 57;
    let size = 12 * MB;
    let (down_at, up_at) = (ms(300), ms(2500));
    let links = [path(20.0, 20.0), path(20.0, 20.0)];
    let mut r = Run::new(&links, seed, mp(1), mp(1), false, |c, s, _| {
        let pm = PathManagerConfig {
            locals: vec![Some(mpq_sim::topology::client_addr(0)), Some(mpq_sim::topology::client_addr(1))],
            remotes: vec![s, mpq_sim::topology::server_addr(1)],
            mode: PathMode::Pairs,
            max_paths: 2,
            reopen_backoff: ms(200),
            status: PathStatus::Available,
        };
        DownloadClient::new(c, s, size).with_path_manager(pm)
    });
    r.topo.outage(1, mpq_proto::Instant::ZERO + down_at, mpq_proto::Instant::ZERO + up_at);
    r.run_until(down_at);
    let before = Run::path_of(&r.client_stats(), 1).rx_bytes;
    assert!(before > 200_000, "path 1 unused before the outage: {}", r.describe());
    assert!(r.run_to_completion(Duration::from_secs(60)), "{}", r.describe());
    r.assert_complete();

    let t = |d: Duration| mpq_proto::Instant::ZERO + d;
    let abandoned = r.client_events(|e| matches!(e, PathEvent::Abandoned { id: 1, .. }));
    assert_eq!(abandoned.len(), 1, "path 1 never abandoned: {}", r.describe());
    assert!(abandoned[0].0 < t(up_at), "path 1 abandoned only after the outage: {}", r.describe());
    // Paths opened on the second pair after the first one died; the last one works.
    let reopened = r.client_events(|e| matches!(e, PathEvent::Opened { id, .. } if *id >= 2));
    assert!(!reopened.is_empty() && reopened[0].0 >= abandoned[0].0, "no path reopened: {}", r.describe());
    assert!(reopened[0].0 < t(up_at), "reopened only after the outage: {}", r.describe());
    let validated = r.client_events(|e| matches!(e, PathEvent::Validated { id } if *id >= 2));
    assert_eq!(validated.len(), 1, "{}", r.describe());
    let (t_valid, PathEvent::Validated { id: new_id }) = validated[0].clone() else { unreachable!() };
    assert!(t_valid >= t(up_at), "validated while the link was down: {}", r.describe());
    let stats = r.client_stats();
    let new_path = Run::path_of(&stats, new_id);
    assert!(new_path.rx_bytes > 500_000, "reopened path {new_id} carried {} B: {}", new_path.rx_bytes, r.describe());
    let (_, down1) = r.link(1);
    println!(
        "seed {seed}: path 1 abandoned at {:.3} s; reopened as {:?} from {:.3} s; path {new_id} validated at {:.3} s \
         and carried {} B (link 1: {} B down); done at {:.3} s",
        secs(abandoned[0].0),
        reopened.iter().map(|(_, e)| e.clone()).collect::<Vec<_>>(),
        secs(reopened[0].0),
        secs(t_valid),
        new_path.rx_bytes,
        down1.delivered_bytes,
        secs(r.app().done_at.unwrap())
    );
}
