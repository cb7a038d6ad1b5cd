//! PMTU discovery (RFC 8899, RFC 9000 §14.3) over simulated links that drop every datagram
//! larger than their MTU: each path finds its own link's MTU to the byte, probes never
//! shrink the congestion window, the peer's max_udp_payload_size caps the search, and a
//! black hole mid-transfer falls back to 1200 bytes and searches again.
//!
//! Links carry `overhead=28` (IPv4 + UDP headers), so a link of MTU M carries UDP payloads
//! of M - 28 bytes. Every run is seeded (the seed is in the test's name) and byte-exact.

mod common;

use std::time::Duration;

use common::mp::{flow_limited, mp, Qlog, Run, MB};
use mpq_proto::conn::TransportConfig;
use mpq_sim::apps::DownloadClient;
use mpq_sim::{LinkConfig, LinkEvent};

fn link(s: &str) -> LinkConfig {
    s.parse().expect("link spec")
}

/// A download of `size` bytes from server to client over `links`.
fn download(links: &[LinkConfig], seed: u64, client: TransportConfig, server: TransportConfig, size: u64) -> Run {
    Run::new(links, seed, client, server, true, |c, s, extra| DownloadClient::new(c, s, size).with_paths(extra))
}

/// The qlog `connectivity:mtu_updated` events of path `id`: (old, new, done).
fn mtu_updates(q: &Qlog, id: u64) -> Vec<(u64, u64, bool)> {
    let q = q.lock().expect("qlog");
    q.iter()
        .filter(|(_, name, d)| *name == "connectivity:mtu_updated" && d["path_id"] == id)
        .map(|(_, _, d)| (d["old"].as_u64().unwrap_or(0), d["new"].as_u64().unwrap_or(0), d["done"] == true))
        .collect()
}

/// One path at a time, several link MTUs: the sender's PMTU ends exactly at the link's
/// MTU minus the headers, no datagram but a probe was ever dropped for its size, and the
/// lost probes made no congestion event (unlimited queue, no random loss, and a receive
/// window that keeps the queue short: nothing else is lost).
#[test]
fn single_path_search_finds_the_exact_link_mtu_seed_11() {
    let seed = 11;
    for mtu in [1280u64, 1400, 1500] {
        let l = link(&format!("20mbit/10ms/mtu={mtu}/overhead=28"));
        let client = flow_limited(64_000, TransportConfig::default());
        let mut r = download(&[l], seed, client, TransportConfig::default(), 4 * MB);
        assert!(r.run_to_completion(Duration::from_secs(60)), "{}", r.describe());
        r.assert_complete();
        let expect = (mtu - 28).min(1472);
        for (who, stats) in [("server", r.server_stats()), ("client", r.client_stats())] {
            let p = Run::path_of(&stats, 0);
            assert_eq!(u64::from(p.pmtu), expect, "{who} link MTU {mtu}: {p:?}");
            assert_eq!(p.congestion_events, 0, "{who} link MTU {mtu}: lost probes are no congestion: {p:?}");
            assert_eq!(p.lost_packets, 0, "{who} link MTU {mtu}: {p:?}");
        }
        // The link dropped exactly the probes that were not acknowledged, in each direction.
        let (up, down) = r.link(0);
        let (s, c) = (Run::path_of(&r.server_stats(), 0), Run::path_of(&r.client_stats(), 0));
        assert_eq!(down.dropped_mtu, s.pmtu_probes_sent - s.pmtu_probes_acked, "MTU {mtu}: {s:?}");
        assert_eq!(up.dropped_mtu, c.pmtu_probes_sent - c.pmtu_probes_acked, "MTU {mtu}: {c:?}");
        assert_eq!(down.dropped(), down.dropped_mtu, "MTU {mtu}");
        // The last update says the search is done at that size.
        assert_eq!(mtu_updates(&r.server_qlog, 0).last().map(|u| (u.1, u.2)), Some((expect, true)), "MTU {mtu}");
    }
}

/// A jumbo link (9000) with a 9000-byte ceiling on both sides: the server's search stops at
/// the client's advertised max_udp_payload_size (4000, RFC 9000 §18.2) and never sends
/// more; the client, whose peer accepts 9000, searches above 4000 towards the link's 8972.
/// (The client sends ACKs only, so its lost probes are found by probe timeouts: its search
/// is slower than the download, which is why only its direction is checked.)
#[test]
fn the_peers_max_udp_payload_size_caps_the_search_seed_12() {
    let seed = 12;
    let client = TransportConfig { max_udp_payload_size: 9000, max_recv_udp_payload_size: 4000, ..Default::default() };
    let server = TransportConfig { max_udp_payload_size: 9000, max_recv_udp_payload_size: 9000, ..Default::default() };
    let l = link("100mbit/10ms/mtu=9000/overhead=28");
    let mut r = download(&[l], seed, client, server, 8 * MB);
    let raised =
        r.run_while_not(|r| r.client_conn().is_some_and(|c| c.stats().paths[0].pmtu > 4000), Duration::from_secs(30));
    assert!(raised, "{}", r.describe());
    let server_pmtu = r.server_conn().map(|c| c.stats().paths[0].pmtu);
    assert_eq!(server_pmtu, Some(4000), "{}", r.describe());
    assert!(r.run_to_completion(Duration::from_secs(60)), "{}", r.describe());
    r.assert_complete();
    let c = Run::path_of(&r.client_stats(), 0);
    assert!(c.pmtu > 4000 && c.pmtu <= 8972, "{c:?}");
    let (up, down) = r.link(0);
    assert_eq!(down.dropped_mtu, 0, "the server never sent more than the client accepts");
    assert_eq!(up.dropped_mtu, c.pmtu_probes_sent - c.pmtu_probes_acked, "only the client's probes: {c:?}");
}

/// Two paths with different MTUs (1280 and 1500): each finds its own, the probes of one
/// never go on the other.
#[test]
fn two_paths_find_their_own_mtu_seed_13() {
    let seed = 13;
    let links =
        [link("20mbit/20ms/queue=30ms/mtu=1280/overhead=28"), link("20mbit/30ms/queue=45ms/mtu=1500/overhead=28")];
    let mut r = download(&links, seed, mp(1), mp(1), 6 * MB);
    assert!(r.run_to_completion(Duration::from_secs(60)), "{}", r.describe());
    r.assert_complete();
    let s = r.server_stats();
    let (p0, p1) = (Run::path_of(&s, 0), Run::path_of(&s, 1));
    assert_eq!((p0.pmtu, p1.pmtu), (1252, 1472), "{}", r.describe());
    assert!(p1.rx_bytes > 0 && p1.tx_bytes > MB, "path 1 carried data: {}", r.describe());
    // Path 1's one probe (its ceiling) got through; path 0's failed ones were dropped on its
    // own link only.
    assert_eq!((p1.pmtu_probes_sent, p1.pmtu_probes_acked), (1, 1), "{p1:?}");
    assert_eq!(r.link(1).1.dropped_mtu, 0);
    assert_eq!(r.link(0).1.dropped_mtu, p0.pmtu_probes_sent - p0.pmtu_probes_acked, "{p0:?}");
    assert_eq!(mtu_updates(&r.server_qlog, 1), [(1200, 1472, true)]);
}

/// The link's MTU drops from 1500 to 1300 in the middle of a download (a route change onto
/// a tunnel; no ICMP in the simulator): full-size packets vanish, the sender detects the
/// black hole, falls back to 1200 bytes, searches again and finds 1272; the download
/// completes byte-exact.
#[test]
fn a_black_hole_falls_back_and_searches_again_seed_14() {
    let seed = 14;
    let l = link("20mbit/20ms/queue=30ms/mtu=1500/overhead=28");
    let mut r = download(&[l], seed, TransportConfig::default(), TransportConfig::default(), 8 * MB);
    r.run_until(Duration::from_secs(1));
    assert_eq!(Run::path_of(&r.server_stats(), 0).pmtu, 1472, "{}", r.describe());
    let at = r.now() + Duration::from_millis(1);
    let (up, down) = r.topo.paths[0].own;
    r.topo.sim.schedule(at, up, LinkEvent::SetMtu(1300));
    r.topo.sim.schedule(at, down, LinkEvent::SetMtu(1300));
    assert!(r.run_to_completion(Duration::from_secs(60)), "{}", r.describe());
    r.assert_complete();
    let p = Run::path_of(&r.server_stats(), 0);
    assert_eq!(p.pmtu, 1272, "{}", r.describe());
    assert!(p.pmtu_black_holes >= 1, "{p:?}");
    let updates = mtu_updates(&r.server_qlog, 0);
    assert!(updates.contains(&(1472, 1200, false)), "fell back to the base: {updates:?}");
    assert_eq!(updates.last().map(|u| (u.1, u.2)), Some((1272, true)), "{updates:?}");
}
