//! The real QUIC stack in the simulator: 10 MB downloads under loss and reordering, key
//! updates, determinism. Every byte is checked against the download pattern on arrival.

use std::net::SocketAddr;
use std::time::Duration;

use mpq_proto::conn::TransportConfig;
use mpq_proto::endpoint::{Endpoint, EndpointConfig};
use mpq_proto::Instant;
use mpq_sim::apps::{DownloadClient, DownloadServer};
use mpq_sim::{LinkConfig, QuicNode, Simulator};

const MB: u64 = 1_000_000;

struct Outcome {
    received: u64,
    done_at: Option<Instant>,
    key_updates: u64,
    lost_packets: u64,
    trace: u64,
}

fn download(seed: u64, link: &str, size: u64, transport: TransportConfig, limit: Duration) -> Outcome {
    let client_addr: SocketAddr = "10.0.0.1:5000".parse().unwrap();
    let server_addr: SocketAddr = "10.0.0.2:443".parse().unwrap();
    let (cc, sc) = mpq_proto::testing::configs(transport);
    let mut sim = Simulator::new(seed);
    let client_ep = Endpoint::new(EndpointConfig::with_seed(seed), None);
    let server_ep = Endpoint::new(EndpointConfig::with_seed(seed + 1), Some(sc));
    let client = sim.add_node(QuicNode::new(client_ep, DownloadClient::new(cc, server_addr, size), client_addr));
    let server = sim.add_node(QuicNode::new(server_ep, DownloadServer::default(), server_addr));
    sim.add_address(client, client_addr);
    sim.add_address(server, server_addr);
    let cfg: LinkConfig = link.parse().unwrap();
    sim.connect_symmetric(client_addr, server_addr, cfg);
    sim.run_while(|s| !s.node::<QuicNode<DownloadClient>>(client).app.finished(), Instant::ZERO + limit);
    let node = sim.node::<QuicNode<DownloadClient>>(client);
    let app = &node.app;
    if app.error.is_some() {
        let cs = node
            .endpoint
            .handles()
            .first()
            .and_then(|h| node.endpoint.connection(*h))
            .map(|c| format!("{:?}", c.stats()));
        let sn = sim.node::<QuicNode<DownloadServer>>(server);
        let ss =
            sn.endpoint.handles().first().and_then(|h| sn.endpoint.connection(*h)).map(|c| format!("{:?}", c.stats()));
        eprintln!("received {} now {:?}\nclient {cs:?}\nserver {ss:?}", app.received, sim.now());
    }
    assert_eq!(app.error, None, "connection failed (seed {seed}, link {link})");
    assert_eq!(app.corrupt_at, None, "corrupt data (seed {seed}, link {link})");
    let server_node = sim.node::<QuicNode<DownloadServer>>(server);
    let server_stats =
        server_node.endpoint.handles().first().and_then(|h| server_node.endpoint.connection(*h)).map(|c| c.stats());
    Outcome {
        received: app.received,
        done_at: app.done_at,
        key_updates: server_stats.as_ref().map_or(0, |s| s.key_updates),
        lost_packets: server_stats.as_ref().map_or(0, |s| s.paths[0].lost_packets),
        trace: sim.trace_hash(),
    }
}

fn check_complete(o: &Outcome, size: u64, within: Duration) {
    assert_eq!(o.received, size);
    let t = o.done_at.expect("download finished");
    assert!(t.since_epoch() <= within, "took {:?}, bound {within:?}", t.since_epoch());
}

#[test]
fn ten_megabytes_without_loss() {
    let o = download(1, "50mbit/20ms/queue=100ms", 10 * MB, TransportConfig::default(), Duration::from_secs(60));
    // 10 MB at 50 Mbit/s is 1.6 s of serialization; allow slow start and headers.
    check_complete(&o, 10 * MB, Duration::from_secs(4));
}

#[test]
fn ten_megabytes_at_one_percent_loss() {
    let o =
        download(2, "50mbit/20ms/queue=100ms/loss=1%", 10 * MB, TransportConfig::default(), Duration::from_secs(120));
    check_complete(&o, 10 * MB, Duration::from_secs(30));
    assert!(o.lost_packets > 0);
}

#[test]
fn ten_megabytes_at_five_percent_loss() {
    let o =
        download(3, "50mbit/20ms/queue=100ms/loss=5%", 10 * MB, TransportConfig::default(), Duration::from_secs(300));
    check_complete(&o, 10 * MB, Duration::from_secs(120));
    assert!(o.lost_packets > 0);
}

#[test]
fn ten_megabytes_with_reordering() {
    let o = download(
        4,
        "50mbit/20ms/queue=100ms/reorder=2%,5ms",
        10 * MB,
        TransportConfig::default(),
        Duration::from_secs(60),
    );
    check_complete(&o, 10 * MB, Duration::from_secs(30));
    assert!(o.lost_packets > 0, "reordering beyond the packet threshold is declared lost");
}

#[test]
fn ten_megabytes_with_duplication() {
    let o = download(4, "50mbit/20ms/queue=100ms/dup=1%", 10 * MB, TransportConfig::default(), Duration::from_secs(60));
    check_complete(&o, 10 * MB, Duration::from_secs(30));
}

/// Regression: with eager ack-of-ack pruning this stalled at about 4.8 MB.
#[test]
fn ten_megabytes_with_reordering_and_duplication() {
    let o = download(
        4,
        "50mbit/20ms/queue=100ms/reorder=2%,5ms/dup=1%",
        10 * MB,
        TransportConfig::default(),
        Duration::from_secs(120),
    );
    check_complete(&o, 10 * MB, Duration::from_secs(30));
}

#[test]
fn transfer_crosses_three_key_updates() {
    let cfg = TransportConfig { key_update_interval: 1000, ..TransportConfig::default() };
    let o = download(5, "50mbit/20ms/queue=100ms", 10 * MB, cfg, Duration::from_secs(60));
    check_complete(&o, 10 * MB, Duration::from_secs(10));
    assert!(o.key_updates >= 3, "{} key updates", o.key_updates);
}

#[test]
fn same_seed_same_run() {
    let link = "20mbit/30ms/queue=50ms/loss=2%";
    let a = download(9, link, MB, TransportConfig::default(), Duration::from_secs(60));
    let b = download(9, link, MB, TransportConfig::default(), Duration::from_secs(60));
    let c = download(10, link, MB, TransportConfig::default(), Duration::from_secs(60));
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.done_at, b.done_at);
    assert_ne!(a.trace, c.trace);
}
