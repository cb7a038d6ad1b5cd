//! A client and a server over [`Topology::parallel`] links, with separate transport configs,
//! optional qlog capture and handles on both connections: for multipath tests that need
//! more control than [`mpq_sim::scenario::Scenario`] gives (acting on a connection mid-run,
//! asymmetric limits, NAT rebinding, outages).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mpq_proto::conn::{ClientConfig, Connection, ConnectionStats, PathEvent, PathStats, ServerConfig, TransportConfig};
use mpq_proto::endpoint::{Endpoint, EndpointConfig};
use mpq_proto::qlog::QlogSink;
use mpq_proto::Instant;
use mpq_sim::apps::{DownloadClient, DownloadServer};
use mpq_sim::topology::Topology;
use mpq_sim::{LinkConfig, LinkStats, NodeId, QuicNode};

pub const MB: u64 = 1_000_000;

/// A symmetric link of `mbit` Mbit/s and `rtt_ms` RTT with a 1.5 × BDP queue.
pub fn path(mbit: f64, rtt_ms: f64) -> LinkConfig {
    format!("{mbit}mbit/{rtt_ms}ms/queue={}ms", 1.5 * rtt_ms).parse().unwrap()
}

/// Multipath allowed up to path ID `max_path_id`, other settings default.
pub fn mp(max_path_id: u64) -> TransportConfig {
    TransportConfig { initial_max_path_id: Some(max_path_id), ..TransportConfig::default() }
}

pub fn secs(t: Instant) -> f64 {
    t.since_epoch().as_secs_f64()
}

/// qlog events of one connection, shared with the test.
pub type Qlog = Arc<Mutex<Vec<(Instant, &'static str, serde_json::Value)>>>;

struct SharedSink(Qlog);

impl QlogSink for SharedSink {
    fn emit(&mut self, time: Instant, name: &'static str, data: serde_json::Value) {
        self.0.lock().unwrap().push((time, name, data));
    }
}

/// One STREAM frame a connection sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamSent {
    pub at: Instant,
    pub path: u64,
    pub stream: u64,
    pub offset: u64,
    pub len: u64,
}

/// Every STREAM frame in the `transport:packet_sent` events of `q`, in order.
pub fn stream_frames(q: &Qlog) -> Vec<StreamSent> {
    let q = q.lock().unwrap();
    let mut out = Vec::new();
    for (at, name, data) in q.iter() {
        if *name != "transport:packet_sent" {
            continue;
        }
        let path = data["header"]["path_id"].as_u64().unwrap_or(0);
        for f in data["frames"].as_array().into_iter().flatten() {
            if f["frame_type"] == "stream" {
                let n = |k: &str| f[k].as_u64().unwrap();
                out.push(StreamSent { at: *at, path, stream: n("stream_id"), offset: n("offset"), len: n("length") });
            }
        }
    }
    out
}

/// `connectivity:path_updated` events of `q`: (time, path ID, state, peer address).
pub fn path_updates(q: &Qlog) -> Vec<(Instant, u64, String, String)> {
    let q = q.lock().unwrap();
    q.iter()
        .filter(|(_, name, _)| *name == "connectivity:path_updated")
        .map(|(t, _, d)| {
            (
                *t,
                d["path_id"].as_u64().unwrap_or(u64::MAX),
                d["state"].as_str().unwrap_or("").to_string(),
                d["peer"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Bytes of STREAM data sent on `path` that had been sent on another path less than
/// `within` before: copies made by the scheduler (redundancy, RTT probing) or reinjection,
/// not loss recovery, which needs at least one round trip of the first path.
pub fn copied_bytes(frames: &[StreamSent], path: u64, within: Duration) -> u64 {
    use std::collections::HashMap;
    let mut first: HashMap<(u64, u64, u64), (Instant, u64)> = HashMap::new();
    let mut copied = 0;
    for f in frames {
        let key = (f.stream, f.offset, f.len);
        match first.get(&key) {
            None => {
                first.insert(key, (f.at, f.path));
            }
            Some(&(t, p)) => {
                if f.path == path && p != path && f.at - t < within {
                    copied += f.len;
                }
            }
        }
    }
    copied
}

/// A download over parallel links; see the module docs.
pub struct Run {
    pub topo: Topology,
    pub client: NodeId,
    pub server: NodeId,
    pub client_qlog: Qlog,
    pub server_qlog: Qlog,
    pub seed: u64,
    pub size: u64,
}

impl Run {
    /// Client and server over `links` (path 0 first) with their own transport configs; the
    /// client app comes from `app` (given the client config, the server address and the
    /// other paths' address pairs). With `qlog`, both connections log to memory.
    pub fn new(
        links: &[LinkConfig],
        seed: u64,
        client: TransportConfig,
        server: TransportConfig,
        qlog: bool,
        app: impl FnOnce(ClientConfig, SocketAddr, Vec<(SocketAddr, SocketAddr)>) -> DownloadClient,
    ) -> Run {
        let mut topo = Topology::parallel(links, seed);
        let (client_cfg, server_tls) = mpq_proto::testing::configs(client);
        let server_cfg = ServerConfig { tls: server_tls.tls, transport: Arc::new(server) };
        let client_qlog = Qlog::default();
        let server_qlog = Qlog::default();
        let server_ep = Endpoint::new(EndpointConfig::with_seed(seed.wrapping_add(1)), Some(server_cfg));
        let mut server_node = topo.server_node(server_ep, DownloadServer::default());
        let client_ep = Endpoint::new(EndpointConfig::with_seed(seed), None);
        let app = app(client_cfg, topo.paths[0].server, topo.extra_path_pairs());
        let size = app.transfers.iter().map(|t| t.size).sum();
        let mut client_node = topo.client_node(client_ep, app);
        if qlog {
            let q = server_qlog.clone();
            server_node.set_connection_hook(Box::new(move |_, c| c.set_qlog(Box::new(SharedSink(q.clone())))));
            let q = client_qlog.clone();
            client_node.set_connection_hook(Box::new(move |_, c| c.set_qlog(Box::new(SharedSink(q.clone())))));
        }
        let server = topo.add_server(server_node);
        let client = topo.add_client(client_node);
        Run { topo, client, server, client_qlog, server_qlog, seed, size }
    }

    pub fn now(&self) -> Instant {
        self.topo.sim.now()
    }

    pub fn client_node(&self) -> &QuicNode<DownloadClient> {
        self.topo.sim.node(self.client)
    }

    pub fn app(&self) -> &DownloadClient {
        &self.client_node().app
    }

    pub fn server_app(&self) -> &DownloadServer {
        &self.topo.sim.node::<QuicNode<DownloadServer>>(self.server).app
    }

    pub fn client_conn(&self) -> Option<&Connection> {
        let n = self.client_node();
        n.app.handle().and_then(|h| n.endpoint.connection(h))
    }

    /// The server's (first) connection.
    pub fn server_conn(&self) -> Option<&Connection> {
        let n = self.topo.sim.node::<QuicNode<DownloadServer>>(self.server);
        n.endpoint.handles().first().and_then(|&h| n.endpoint.connection(h))
    }

    /// Runs `f` on the client connection now, then lets the client send.
    pub fn with_client_conn<R>(&mut self, f: impl FnOnce(Instant, &mut Connection) -> R) -> R {
        let now = self.now();
        self.topo.sim.with_node::<QuicNode<DownloadClient>, R>(self.client, |n| {
            let h = n.app.handle().expect("client connection");
            f(now, n.endpoint.connection_mut(h).expect("client connection alive"))
        })
    }

    pub fn run_until(&mut self, t: Duration) {
        self.topo.sim.run_until(Instant::ZERO + t);
    }

    /// Runs until `cond` holds (true) or `limit`.
    pub fn run_while_not(&mut self, mut cond: impl FnMut(&Run) -> bool, limit: Duration) -> bool {
        let end = Instant::ZERO + limit;
        loop {
            if cond(self) {
                return true;
            }
            if self.topo.sim.next_event_time().is_none_or(|t| t > end) {
                return false;
            }
            self.topo.sim.step();
        }
    }

    /// Runs until the download finished (or failed) or `limit`; true if it finished.
    pub fn run_to_completion(&mut self, limit: Duration) -> bool {
        let c = self.client;
        self.topo.sim.run_while(|s| !s.node::<QuicNode<DownloadClient>>(c).app.finished(), Instant::ZERO + limit)
    }

    /// Client statistics: final ones if the download ended, else live ones.
    pub fn client_stats(&self) -> ConnectionStats {
        self.app().final_stats().cloned().or_else(|| self.client_conn().map(Connection::stats)).unwrap_or_default()
    }

    pub fn server_stats(&self) -> ConnectionStats {
        self.server_conn().map(Connection::stats).unwrap_or_default()
    }

    /// Stats of path `id` in `s`.
    pub fn path_of(s: &ConnectionStats, id: u64) -> PathStats {
        s.paths.iter().find(|p| p.path_id == id).cloned().unwrap_or_else(|| panic!("no path {id} in {:?}", s.paths))
    }

    /// Counters of path `i`'s own links: (client → server, server → client).
    pub fn link(&self, i: usize) -> (LinkStats, LinkStats) {
        let (up, down) = self.topo.paths[i].own;
        (self.topo.sim.link_stats(up).clone(), self.topo.sim.link_stats(down).clone())
    }

    /// Client path events matching `f`, with their times.
    pub fn client_events(&self, f: impl Fn(&PathEvent) -> bool) -> Vec<(Instant, PathEvent)> {
        self.app().path_events().iter().filter(|(_, e)| f(e)).cloned().collect()
    }

    /// Server path events matching `f`, with their times.
    pub fn server_events(&self, f: impl Fn(&PathEvent) -> bool) -> Vec<(Instant, PathEvent)> {
        self.server_app().path_events.iter().filter(|(_, _, e)| f(e)).map(|(t, _, e)| (*t, e.clone())).collect()
    }

    /// A summary for assertion messages: seed, time, progress, per-path figures.
    pub fn describe(&self) -> String {
        let a = self.app();
        let mut s = format!(
            "seed {} t={:.3}s received {}/{} corrupt_at {:?} error {:?} done_at {:?}\n",
            self.seed,
            secs(self.now()),
            a.received,
            self.size,
            a.corrupt_at,
            a.error,
            a.done_at.map(secs)
        );
        for (who, st) in [("client", self.client_stats()), ("server", self.server_stats())] {
            let _ = writeln!(
                s,
                "{who}: key_updates {} reinjected {} copies acked first {} late {}",
                st.key_updates, st.reinjected_chunks, st.copies_acked_first, st.copies_acked_late
            );
            for p in &st.paths {
                let _ = writeln!(
                    s,
                    "  path {} {:10} tx {:>10} rx {:>10} lost {:>5} rtt {:6.1} ms cwnd {:>8} backup {}",
                    p.path_id, p.state, p.tx_bytes, p.rx_bytes, p.lost_packets, p.rtt_ms, p.cwnd, p.backup
                );
            }
        }
        for i in 0..self.topo.paths.len() {
            let (u, d) = self.link(i);
            let _ = writeln!(
                s,
                "link {i}: up {} B ({} dropped), down {} B ({} dropped)",
                u.delivered_bytes,
                u.dropped(),
                d.delivered_bytes,
                d.dropped()
            );
        }
        let _ = writeln!(s, "client path events: {:?}", self.app().path_events());
        s
    }

    /// The download completed, every byte checked, nobody sent from a foreign address.
    pub fn assert_complete(&self) {
        let a = self.app();
        assert!(a.done_at.is_some() && a.error.is_none(), "download did not complete: {}", self.describe());
        assert_eq!(a.corrupt_at, None, "corrupt data: {}", self.describe());
        assert_eq!(a.received, self.size, "{}", self.describe());
        assert!(a.transfers.iter().all(|t| t.received == t.size && t.done_at.is_some()), "{}", self.describe());
        assert_eq!(self.client_node().unknown_sources(), 0, "{}", self.describe());
        let server = self.topo.sim.node::<QuicNode<DownloadServer>>(self.server);
        assert_eq!(server.unknown_sources(), 0, "{}", self.describe());
    }
}

/// Bytes of STREAM data whose first transmission went on each path (index = path ID), for
/// frames sent at or after `since`: retransmissions and copies are left out.
pub fn first_sent_by_path(frames: &[StreamSent], paths: usize, since: Instant) -> Vec<u64> {
    let mut seen = std::collections::HashSet::new();
    let mut out = vec![0; paths];
    for f in frames {
        if seen.insert((f.stream, f.offset, f.len)) && f.at >= since {
            if let Some(b) = out.get_mut(f.path as usize) {
                *b += f.len;
            }
        }
    }
    out
}

/// A transport config whose receive windows stay at `window` bytes per stream (twice that
/// for the connection): a download to it is limited by flow control to about one window per
/// round trip, so the sender has spare congestion window and the scheduler really chooses.
pub fn flow_limited(window: u64, base: TransportConfig) -> TransportConfig {
    let streams = mpq_proto::stream::StreamsConfig {
        stream_receive_window: window,
        max_stream_window: window,
        receive_window: 2 * window,
        max_connection_window: 2 * window,
        ..Default::default()
    };
    TransportConfig { streams, ..base }
}
