//! PMTU discovery over the in-memory pair (RFC 8899, RFC 9000 §14.3): what a probe is, the
//! search on a path with an MTU, both directions of max_udp_payload_size, a lost probe's
//! (absent) effect on the congestion window, and each path of a multipath connection
//! searching on its own.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::tests::{client, confirm_handshake, run_upload};
use super::tests_multipath::{open_second_path, path_stats, server};
use super::*;
use crate::recovery::sent::SentPacket;
use crate::testing::Pair;

/// The frames of every 1-RTT packet a connection sent: (path ID, size, frame types).
type Sent = Arc<Mutex<Vec<(u64, u64, Vec<String>)>>>;

struct SentFrames(Sent);

impl crate::qlog::QlogSink for SentFrames {
    fn emit(&mut self, _: Instant, name: &'static str, data: serde_json::Value) {
        if name != "transport:packet_sent" || data["header"]["packet_type"] != "1RTT" {
            return;
        }
        let types = data["frames"].as_array().into_iter().flatten();
        let types = types.map(|f| f["frame_type"].as_str().unwrap_or_default().to_string()).collect();
        let path = data["header"]["path_id"].as_u64().unwrap_or(0);
        self.0.lock().expect("log").push((path, data["raw"]["length"].as_u64().unwrap_or(0), types));
    }
}

/// Runs the pair for `ms` milliseconds of its time.
fn run_for(pair: &mut Pair, ms: u64) {
    let until = pair.now + Duration::from_millis(ms);
    pair.run_until(Duration::from_millis(ms), |p| p.now >= until);
}

/// RFC 9000 §14.4: a probe is an ack-eliciting packet of PING and PADDING of exactly the
/// size probed; the search starts once the handshake is confirmed and, on a path that
/// carries anything, ends at the ceiling after one probe.
#[test]
fn a_probe_is_ping_and_padding_of_the_probed_size() {
    let mut pair = Pair::new(TransportConfig::default());
    let sent = Sent::default();
    client(&mut pair).set_qlog(Box::new(SentFrames(Arc::clone(&sent))));
    assert!(confirm_handshake(&mut pair));
    assert_eq!(client(&mut pair).stats().paths[0].pmtu, 1200, "paths start at BASE_PLPMTU");
    run_for(&mut pair, 100);
    let probes: Vec<_> = sent.lock().expect("log").iter().filter(|(_, size, _)| *size > 1200).cloned().collect();
    assert_eq!(probes.len(), 1, "{probes:?}");
    let (_, size, frames) = &probes[0];
    // (The packet's size excludes nothing: a probe is alone in its datagram.)
    assert_eq!(*size, 1472);
    assert_eq!(frames, &["ping", "padding"]);
    let p = client(&mut pair).stats().paths[0].clone();
    assert_eq!((p.pmtu, p.pmtu_probes_sent, p.pmtu_probes_acked), (1472, 1, 1), "{p:?}");
}

/// A path that carries 1350-byte payloads: both sides find exactly 1350, and data flows
/// byte-exact in datagrams of that size; only probes were ever too big.
#[test]
fn the_search_finds_the_paths_mtu_exactly() {
    let mut pair = Pair::new(TransportConfig::default());
    pair.mtu.push((pair.server_addr, 1350));
    assert!(confirm_handshake(&mut pair));
    run_upload(&mut pair, 2_000_000, Duration::from_secs(30));
    run_for(&mut pair, 3_000);
    let (c, s) = (client(&mut pair).stats().paths[0].clone(), server(&mut pair).stats().paths[0].clone());
    assert_eq!((c.pmtu, s.pmtu), (1350, 1350), "{c:?} {s:?}");
    assert_eq!(pair.dropped_too_big.1, c.pmtu_probes_sent - c.pmtu_probes_acked, "{c:?}");
    assert_eq!(pair.dropped_too_big.0, s.pmtu_probes_sent - s.pmtu_probes_acked, "{s:?}");
    assert_eq!(c.lost_packets, 0, "lost probes are not lost data: {c:?}");
    assert_eq!(c.congestion_events, 0, "lost probes are no congestion: {c:?}");
}

/// RFC 9000 §18.2 both ways: each side advertises its max_recv_udp_payload_size, and the
/// other never sends more (its search stops there).
#[test]
fn each_side_stays_within_the_peers_max_udp_payload_size() {
    let client_cfg =
        TransportConfig { max_udp_payload_size: 1452, max_recv_udp_payload_size: 1300, ..Default::default() };
    let server_cfg =
        TransportConfig { max_udp_payload_size: 1452, max_recv_udp_payload_size: 1400, ..Default::default() };
    let mut pair = Pair::asymmetric(client_cfg, server_cfg);
    assert!(confirm_handshake(&mut pair));
    run_upload(&mut pair, 300_000, Duration::from_secs(10));
    run_for(&mut pair, 500);
    assert_eq!(client(&mut pair).stats().paths[0].pmtu, 1400, "the server accepts 1400");
    assert_eq!(server(&mut pair).stats().paths[0].pmtu, 1300, "the client accepts 1300");
}

/// With discovery off the limit is taken on trust at the handshake and nothing is probed.
#[test]
fn without_discovery_the_limit_is_used_on_trust() {
    let cfg = TransportConfig { pmtud: false, max_udp_payload_size: 1400, ..Default::default() };
    let mut pair = Pair::new(cfg);
    assert!(confirm_handshake(&mut pair));
    run_upload(&mut pair, 200_000, Duration::from_secs(10));
    let p = client(&mut pair).stats().paths[0].clone();
    assert_eq!((p.pmtu, p.pmtu_probes_sent), (1400, 0), "{p:?}");
}

/// RFC 9000 §14.4: a lost probe leaves the flight but does not reduce the window (nor
/// count as lost data); a lost data packet does.
#[test]
fn a_lost_probe_does_not_shrink_the_window() {
    let mut p = super::path::PathState::new(0, "127.0.0.1:1".parse().expect("addr"), &TransportConfig::default(), true);
    let sent = |size: u32, probe: bool| SentPacket {
        pmtu_probe: probe,
        ..SentPacket::eliciting(Instant::ZERO, size, super::space::SentFrames::default())
    };
    p.bytes_in_flight = 1472 + 1200;
    let window = p.cc.window();
    let now = Instant::ZERO + Duration::from_millis(100);
    assert!(!super::path::PathState::loss_is_congestion(&[(0, sent(1472, true))]));
    p.on_packets_lost(now, &[(0, sent(1472, true))], false);
    assert_eq!(p.cc.window(), window, "a lost probe shrank the window");
    assert_eq!((p.bytes_in_flight, p.stats.lost_packets, p.stats.congestion_events), (1200, 0, 0));
    p.on_packets_lost(now, &[(1, sent(1200, false))], false);
    assert!(p.cc.window() < window, "a lost data packet is congestion");
    assert_eq!((p.bytes_in_flight, p.stats.lost_packets, p.stats.congestion_events), (0, 1, 1));
}

/// Multipath: each path searches on its own, its probes on itself only. Path 0 carries
/// 1300 bytes, path 1 (from the client's second address) 1472.
#[test]
fn each_path_finds_its_own_mtu() {
    let cfg = TransportConfig { initial_max_path_id: Some(4), ..TransportConfig::default() };
    let mut pair = Pair::new(cfg);
    pair.mtu.push((pair.client_addr, 1300));
    let sent = Sent::default();
    client(&mut pair).set_qlog(Box::new(SentFrames(Arc::clone(&sent))));
    let id = open_second_path(&mut pair);
    run_upload(&mut pair, 3_000_000, Duration::from_secs(30));
    run_for(&mut pair, 3_000);
    let c = client(&mut pair);
    let (p0, p1) = (path_stats(c, 0), path_stats(c, id));
    assert_eq!((p0.pmtu, p1.pmtu), (1300, 1472), "{p0:?} {p1:?}");
    assert_eq!((p1.pmtu_probes_sent, p1.pmtu_probes_acked), (1, 1), "{p1:?}");
    // Path 1's probe of 1472 went on path 1: nothing that large went on path 0 but its
    // own (failed) probes, which the pair dropped.
    let log = sent.lock().expect("log");
    let big0 = log.iter().filter(|(path, size, _)| *path == 0 && *size > 1300).count() as u64;
    assert_eq!(big0, p0.pmtu_probes_sent - p0.pmtu_probes_acked);
    assert!(log.iter().any(|(path, size, f)| *path == id && *size == 1472 && f == &["ping", "padding"]));
    assert_eq!(pair.dropped_too_big.1, big0);
}

/// Lets `secs` of idle time pass (nothing in flight, so no event would move the pair's
/// clock), then has the client send a little on a new stream and runs a second.
fn idle_then_send(pair: &mut Pair, secs: u64) {
    pair.now += Duration::from_secs(secs);
    let id = client(pair).open_stream(crate::types::Dir::Uni).expect("stream");
    client(pair).write(id, &[5u8; 3000]).expect("write");
    run_for(pair, 1_000);
}

/// RFC 8899 §5.1.1: PMTU_RAISE_TIMER after a search completed below the ceiling, the path
/// probes again, and finds that the path now carries more (a route change that widened it).
#[test]
fn the_raise_timer_finds_a_wider_path() {
    let cfg = TransportConfig { max_idle_timeout: Duration::from_secs(3_600), ..TransportConfig::default() };
    let mut pair = Pair::new(cfg);
    pair.mtu.push((pair.server_addr, 1350));
    assert!(confirm_handshake(&mut pair));
    run_upload(&mut pair, 500_000, Duration::from_secs(30));
    run_for(&mut pair, 3_000);
    assert_eq!(client(&mut pair).stats().paths[0].pmtu, 1350);
    let probes = client(&mut pair).stats().paths[0].pmtu_probes_sent;
    pair.mtu.clear();
    // Well before the raise timer: no probe.
    idle_then_send(&mut pair, 60);
    let p = client(&mut pair).stats().paths[0].clone();
    assert_eq!((p.pmtu, p.pmtu_probes_sent), (1350, probes), "{p:?}");
    // After it (read when the path sends): one probe of the ceiling, which now gets through.
    idle_then_send(&mut pair, 600);
    let p = client(&mut pair).stats().paths[0].clone();
    assert_eq!((p.pmtu, p.pmtu_probes_sent), (1472, probes + 1), "{p:?}");
}

/// A path whose PMTU grew to jumbo size keeps its GSO batches under 64 KiB (one UDP send):
/// fewer segments, all of the path's current size but the last.
#[test]
fn jumbo_batches_stay_under_64_kib() {
    let cfg = TransportConfig {
        max_udp_payload_size: 9000,
        max_recv_udp_payload_size: 9000,
        max_gso_segments: 44,
        ..TransportConfig::default()
    };
    let mut pair = Pair::new(cfg);
    // A short RTT: the pace lets a whole window out in one burst.
    pair.latency = Duration::from_micros(50);
    assert!(confirm_handshake(&mut pair));
    run_upload(&mut pair, 2_000_000, Duration::from_secs(30));
    assert_eq!(client(&mut pair).stats().paths[0].pmtu, 9000);
    let now = pair.now;
    let c = client(&mut pair);
    let id = c.open_stream(crate::types::Dir::Uni).expect("stream");
    assert!(c.write(id, &vec![7u8; 500_000]).expect("write") > 100_000);
    let mut buf = Vec::new();
    let t = c.poll_transmit(now, &mut buf).expect("transmit");
    assert_eq!(t.segment_size, Some(9000), "{t:?}");
    assert!(t.size > 3 * 9000 && t.size <= 65_000, "{t:?}");
}
