//! Test support shared by unit tests, the simulator and benchmarks: self-signed TLS
//! configurations and an in-memory client/server pair with a fixed one-way latency.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::conn::{ClientConfig, ServerConfig, Transmit, TransportConfig};
use crate::endpoint::{ConnectionHandle, Endpoint, EndpointConfig};
use crate::time::Instant;

pub mod seeded_tls;

/// ALPN used by tests and the interop tools (HTTP/0.9 of the interop runner).
pub const TEST_ALPN: &[u8] = b"hq-interop";

/// A self-signed certificate for `localhost`, its key, and matching client and server TLS
/// configurations (the stack's provider, TLS 1.3 only).
pub fn tls_configs(alpn: &[u8]) -> (Arc<rustls::ClientConfig>, Arc<rustls::ServerConfig>) {
    // Ed25519 with a fixed serial: signatures and certificates have the same size in every
    // run, so simulated runs with the same seed send the same packet sizes.
    let key_pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("key");
    let cert = localhost_certificate(&key_pair);
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_pair.serialize_der()));
    let provider = Arc::new(crate::crypto::backend::default_provider());
    tls_configs_of(provider, cert, key, alpn)
}

/// A self-signed certificate of `key_pair` for `localhost`, serial 1 (rcgen's fixed
/// validity): the same key, the same certificate.
fn localhost_certificate(key_pair: &rcgen::KeyPair) -> CertificateDer<'static> {
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
    params.serial_number = Some(rcgen::SerialNumber::from(1u64));
    params.self_signed(key_pair).expect("cert").der().clone()
}

/// Client and server TLS configurations (TLS 1.3 only) with `provider`, the server with
/// `cert` and `key`, the client trusting `cert` alone.
fn tls_configs_of(
    provider: Arc<rustls::crypto::CryptoProvider>,
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
    alpn: &[u8],
) -> (Arc<rustls::ClientConfig>, Arc<rustls::ServerConfig>) {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.clone()).expect("root");
    let mut client = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("tls13")
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![alpn.to_vec()];
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("tls13")
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("cert");
    server.alpn_protocols = vec![alpn.to_vec()];
    server.max_early_data_size = 0;
    (Arc::new(client), Arc::new(server))
}

/// [`configs`] whose TLS draws all its randomness from `seed` ([`seeded_tls`]): the same
/// seed, the same bytes on the wire. The seed restarts the calling thread's stream, which
/// the connections made with these configs draw from on whatever thread handshakes. For the
/// simulator; never for a network.
pub fn seeded_configs(transport: TransportConfig, seed: u64) -> (ClientConfig, ServerConfig) {
    seeded_tls::reseed(seed);
    let (cert, key) = seeded_tls::seeded_certificate();
    let provider = Arc::new(seeded_tls::seeded_provider());
    let (c, s) = tls_configs_of(provider, cert, key, TEST_ALPN);
    let transport = Arc::new(transport);
    (ClientConfig { tls: c, transport: transport.clone() }, ServerConfig { tls: s, transport })
}

/// Client and server configs sharing one transport config.
pub fn configs(transport: TransportConfig) -> (ClientConfig, ServerConfig) {
    let (c, s) = tls_configs(TEST_ALPN);
    let transport = Arc::new(transport);
    (ClientConfig { tls: c, transport: transport.clone() }, ServerConfig { tls: s, transport })
}

/// Client and server configs for session resumption with 0-RTT: the client offers early
/// data when its ticket allows it, the server issues such tickets (stateful, single-use:
/// rustls's in-memory session cache) and accepts early data.
pub fn zero_rtt_configs(transport: TransportConfig) -> (ClientConfig, ServerConfig) {
    let (mut cc, mut sc) = configs(transport);
    let mut c = (*cc.tls).clone();
    c.enable_early_data = true;
    cc.tls = Arc::new(c);
    let mut s = (*sc.tls).clone();
    // RFC 9001 §4.6.1: QUIC requires max_early_data_size 0xffffffff in tickets for 0-RTT.
    s.max_early_data_size = u32::MAX;
    sc.tls = Arc::new(s);
    (cc, sc)
}

/// Decides whether a datagram is dropped: (sequence number, to_server) -> drop?
pub type DropFn = Box<dyn FnMut(u64, bool) -> bool>;

/// Loss decision by a datagram's source address and bytes ([`Pair::drop_datagram`]).
pub type DropDatagramFn = Box<dyn FnMut(SocketAddr, &[u8]) -> bool>;

/// A datagram on the pair's link: (arrival, to_server, source, destination, ECN, bytes).
type InFlight = (Instant, bool, SocketAddr, SocketAddr, Option<u8>, Vec<u8>);

/// What the pair's link does to the ECN codepoint of datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PairEcn {
    /// Clears it (the receiver sees not-ECT), as many networks do.
    #[default]
    Bleach,
    /// Delivers it unchanged.
    Pass,
    /// Delivers it, but turns every n-th ECN-capable datagram into CE (a congested queue).
    MarkCeEvery(u64),
}

/// Two endpoints joined by an in-memory link with a fixed one-way latency.
pub struct Pair {
    /// Client endpoint.
    pub client: Endpoint,
    /// Server endpoint.
    pub server: Endpoint,
    /// The client connection.
    pub client_conn: ConnectionHandle,
    /// Current time.
    pub now: Instant,
    /// Client address.
    pub client_addr: SocketAddr,
    /// Server address.
    pub server_addr: SocketAddr,
    /// One-way latency.
    pub latency: Duration,
    /// Datagrams in flight: (arrival, to_server, source, destination, ECN, bytes).
    in_flight: VecDeque<InFlight>,
    /// What happens to ECN codepoints.
    pub ecn: PairEcn,
    ect_seen: u64,
    /// Loss decision.
    pub drop: DropFn,
    /// Loss decision by addresses (source, destination): a dead path.
    pub drop_addr: Box<dyn FnMut(SocketAddr, SocketAddr) -> bool>,
    /// Loss decision by source address and datagram bytes (e.g. only long-header packets).
    pub drop_datagram: DropDatagramFn,
    /// Extra one-way latency of datagrams from or to an address (a slower path).
    pub extra_latency: Vec<(SocketAddr, Duration)>,
    /// Largest datagram that gets through from or to an address (a path's MTU, UDP
    /// payload bytes); larger ones are dropped silently, as on a path without ICMP.
    pub mtu: Vec<(SocketAddr, usize)>,
    /// Datagrams dropped for exceeding [`Pair::mtu`], (to client, to server).
    pub dropped_too_big: (u64, u64),
    sent: u64,
    /// Datagrams delivered in each direction (to client, to server).
    pub delivered: (u64, u64),
    /// The client's config, to open more connections to the same server.
    pub client_config: ClientConfig,
    /// Deliver datagrams in batches, as a runtime receives GRO batches: arrivals are
    /// rounded up to this quantum, and datagrams due together between the same addresses
    /// go in one call. `None`: one by one, at their exact arrival times.
    pub gro: Option<Duration>,
    /// Both endpoints send the way a runtime with a thread per path does, path by path
    /// through [`Endpoint::poll_path_transmit`] (batches built alone are built at once).
    pub path_threads: bool,
    /// Send batches built alone that way.
    pub path_batches_alone: u64,
}

impl Pair {
    /// A pair with the given transport config on both sides; the client connects at once.
    pub fn new(transport: TransportConfig) -> Self {
        Self::asymmetric(transport.clone(), transport)
    }

    /// A pair whose client and server use different transport configs.
    pub fn asymmetric(client_transport: TransportConfig, server_transport: TransportConfig) -> Self {
        let (tls_client, tls_server) = tls_configs(TEST_ALPN);
        let cc = ClientConfig { tls: tls_client, transport: Arc::new(client_transport) };
        let sc = ServerConfig { tls: tls_server, transport: Arc::new(server_transport) };
        Self::from_configs(&cc, sc)
    }

    /// A pair from ready-made configs (a caller building many pairs makes the certificate
    /// once); the client connects at once.
    pub fn from_configs(cc: &ClientConfig, sc: ServerConfig) -> Self {
        let client_addr: SocketAddr = "10.0.0.1:4433".parse().expect("addr");
        let server_addr: SocketAddr = "10.0.0.2:443".parse().expect("addr");
        let mut client = Endpoint::new(EndpointConfig::with_seed(1), None);
        let server = Endpoint::new(EndpointConfig::with_seed(2), Some(sc));
        let now = Instant::ZERO;
        let client_conn = client.connect(now, cc, server_addr, "localhost").expect("connect");
        let client_config = cc.clone();
        Self {
            client,
            server,
            client_conn,
            now,
            client_addr,
            server_addr,
            latency: Duration::from_millis(10),
            in_flight: VecDeque::new(),
            drop: Box::new(|_, _| false),
            drop_addr: Box::new(|_, _| false),
            drop_datagram: Box::new(|_, _| false),
            extra_latency: Vec::new(),
            mtu: Vec::new(),
            dropped_too_big: (0, 0),
            ecn: PairEcn::default(),
            ect_seen: 0,
            sent: 0,
            delivered: (0, 0),
            client_config,
            gro: None,
            path_threads: false,
            path_batches_alone: 0,
        }
    }

    /// Moves every pending transmit of both endpoints onto the link.
    fn flush(&mut self) -> bool {
        let mut any = false;
        let mut buf = Vec::new();
        for to_server in [true, false] {
            loop {
                let ep = if to_server { &mut self.client } else { &mut self.server };
                let Some(t) = poll_any(ep, self.now, &mut buf, self.path_threads, &mut self.path_batches_alone) else {
                    break;
                };
                any = true;
                let default_src = if to_server { self.client_addr } else { self.server_addr };
                let src = t.source.unwrap_or(default_src);
                let dst = t.destination;
                let extra: Duration = self
                    .extra_latency
                    .iter()
                    .filter(|(a, _)| *a == src || *a == dst)
                    .map(|(_, d)| *d)
                    .max()
                    .unwrap_or_default();
                let seg = t.segment_size.unwrap_or(t.size);
                for d in buf[..t.size].chunks(seg) {
                    self.sent += 1;
                    if (self.drop)(self.sent, to_server) || (self.drop_addr)(src, dst) || (self.drop_datagram)(src, d) {
                        continue;
                    }
                    if self.mtu.iter().any(|&(a, m)| (a == src || a == dst) && d.len() > m) {
                        let n = if to_server { &mut self.dropped_too_big.1 } else { &mut self.dropped_too_big.0 };
                        *n += 1;
                        continue;
                    }
                    let mut at = self.now + self.latency + extra;
                    if let Some(q) = self.gro.filter(|q| !q.is_zero()) {
                        let since = at.saturating_duration_since(Instant::ZERO).as_nanos();
                        let q = q.as_nanos();
                        let rounded = since.div_ceil(q) * q;
                        at = Instant::ZERO + Duration::from_nanos(rounded as u64);
                    }
                    let ecn = match (self.ecn, t.ecn) {
                        (PairEcn::Bleach, _) | (_, None) => None,
                        (PairEcn::Pass, e) => e,
                        (PairEcn::MarkCeEvery(n), Some(e)) => {
                            self.ect_seen += 1;
                            Some(if self.ect_seen.is_multiple_of(n.max(1)) { 0b11 } else { e })
                        }
                    };
                    // Keep arrival order sorted: paths of different latency interleave.
                    let pos = self.in_flight.iter().rposition(|e| e.0 <= at).map_or(0, |i| i + 1);
                    self.in_flight.insert(pos, (at, to_server, src, dst, ecn, d.to_vec()));
                }
            }
        }
        any
    }

    /// Advances one step: deliver what is due, else jump to the next event. Returns false
    /// when nothing is left to happen before `deadline`.
    pub fn step(&mut self, deadline: Instant) -> bool {
        self.flush();
        let next_delivery = self.in_flight.front().map(|d| d.0);
        let next_timer = [next_timer(&mut self.client), next_timer(&mut self.server)].into_iter().flatten().min();
        let next = [next_delivery, next_timer].into_iter().flatten().min();
        let Some(next) = next else { return false };
        if next > deadline {
            return false;
        }
        self.now = self.now.max(next);
        while self.gro.is_some() && self.in_flight.front().is_some_and(|d| d.0 <= self.now) {
            let Some(first) = self.in_flight.pop_front() else { break };
            let (_, to_server, src, dst, ecn, _) = first;
            let mut batch = vec![first.5];
            while batch.len() < 64
                && self
                    .in_flight
                    .front()
                    .is_some_and(|d| d.0 <= self.now && (d.1, d.2, d.3, d.4) == (to_server, src, dst, ecn))
            {
                batch.extend(self.in_flight.pop_front().map(|d| d.5));
            }
            let mut slices: Vec<&mut [u8]> = batch.iter_mut().map(|d| d.as_mut_slice()).collect();
            if to_server {
                self.delivered.1 += slices.len() as u64;
                self.server.handle_datagrams(self.now, dst, src, ecn, &mut slices);
            } else {
                self.delivered.0 += slices.len() as u64;
                self.client.handle_datagrams(self.now, dst, src, ecn, &mut slices);
            }
        }
        while self.in_flight.front().is_some_and(|d| d.0 <= self.now) {
            let Some((_, to_server, src, dst, ecn, mut d)) = self.in_flight.pop_front() else { break };
            if to_server {
                self.delivered.1 += 1;
                self.server.handle_datagram(self.now, dst, src, ecn, &mut d);
            } else {
                self.delivered.0 += 1;
                self.client.handle_datagram(self.now, dst, src, ecn, &mut d);
            }
        }
        fire_timers(&mut self.client, self.now);
        fire_timers(&mut self.server, self.now);
        true
    }

    /// Delivers `data` to the server (`to_server`) or the client at once, bypassing the link
    /// (a packet an attacker or a fuzz target injects).
    pub fn inject(&mut self, to_server: bool, src: SocketAddr, dst: SocketAddr, data: &mut [u8]) {
        if to_server {
            self.server.handle_datagram(self.now, dst, src, None, data);
        } else {
            self.client.handle_datagram(self.now, dst, src, None, data);
        }
    }

    /// Delivers several datagrams to the server (`to_server`) or the client at once, in one
    /// receive batch (as a GRO batch), bypassing the link.
    pub fn inject_batch(&mut self, to_server: bool, src: SocketAddr, dst: SocketAddr, data: &mut [Vec<u8>]) {
        let mut slices: Vec<&mut [u8]> = data.iter_mut().map(|d| d.as_mut_slice()).collect();
        if to_server {
            self.server.handle_datagrams(self.now, dst, src, None, &mut slices);
        } else {
            self.client.handle_datagrams(self.now, dst, src, None, &mut slices);
        }
    }

    /// Datagrams on the link, not yet delivered.
    pub fn in_flight_len(&self) -> usize {
        self.in_flight.len()
    }

    /// INSECURE, fuzzing only: a pair that completed its handshake (confirmed on both sides,
    /// nothing left on the link) and then switched both connections to the null 1-RTT cipher,
    /// so a caller can write 1-RTT packets as plain bytes (see `insecure_use_null_one_rtt_keys`).
    /// With `extra_paths` (multipath negotiated), the client first opens that many more paths
    /// from addresses 10.0.1.n:4433 and waits for them to be validated. `None` if the
    /// handshake did not complete within 10 s of virtual time.
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn handshaken_null(cc: &ClientConfig, sc: ServerConfig, extra_paths: u8) -> Option<Self> {
        let mut pair = Self::from_configs(cc, sc);
        let h = pair.client_conn;
        let established = |p: &mut Self| {
            let c = p.client.connection(h).is_some_and(|c| c.is_established());
            let s = p.server.handles().iter().any(|&sh| p.server.connection(sh).is_some_and(|c| c.is_established()));
            c && s
        };
        if !pair.run_until(Duration::from_secs(10), established) {
            return None;
        }
        // HANDSHAKE_DONE arrives one latency later: only then may the client open paths.
        let _ = pair.run_until(Duration::from_millis(100), |_| false);
        for n in 0..extra_paths {
            let local = SocketAddr::from(([10, 0, 1, n], 4433));
            let (now, remote) = (pair.now, pair.server_addr);
            let conn = pair.client.connection_mut(h)?;
            let _ = conn.open_path(now, Some(local), remote, crate::conn::PathStatus::Available);
        }
        // Let everything settle: paths validated, ACKs exchanged, the link empty.
        let _ = pair.run_until(Duration::from_millis(200), |_| false);
        while pair.client.poll_event().is_some() || pair.server.poll_event().is_some() {}
        pair.flush();
        pair.in_flight.clear();
        for ep in [&mut pair.client, &mut pair.server] {
            for sh in ep.handles() {
                if let Some(c) = ep.connection_mut(sh) {
                    c.insecure_use_null_one_rtt_keys();
                }
            }
        }
        // Each side PINGs and acknowledges the other's PING under the null keys.
        let _ = pair.run_until(Duration::from_millis(100), |_| false);
        Some(pair)
    }

    /// Runs until `done` holds or `limit` of virtual time passes; returns whether `done` held.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Self) -> bool) -> bool {
        let deadline = self.now + limit;
        loop {
            if done(self) {
                return true;
            }
            if !self.step(deadline) {
                return done(self);
            }
        }
    }
}

/// The endpoint's next timer and, for connections whose paths have threads, each path's:
/// what a runtime's threads wait for.
fn next_timer(ep: &mut Endpoint) -> Option<Instant> {
    let mut t = ep.poll_timeout();
    for h in ep.handles() {
        if !ep.has_path_threads(h) {
            continue;
        }
        for id in ep.connection(h).map(|c| c.path_ids()).unwrap_or_default() {
            t = [t, ep.poll_path_timeout(h, id)].into_iter().flatten().min();
        }
    }
    t
}

/// Fires the timers due at `now`: the endpoint's, and those of connections with path
/// threads, as their paths' threads do.
fn fire_timers(ep: &mut Endpoint, now: Instant) {
    ep.handle_timeout(now);
    for h in ep.handles() {
        if ep.has_path_threads(h) {
            ep.handle_connection_timeout(now, h);
        }
    }
}

/// The next datagram of `ep`: its own answers and connections without path threads first,
/// then, with `path_threads`, each path of each connection in turn as its thread would ask.
fn poll_any(
    ep: &mut Endpoint,
    now: Instant,
    buf: &mut Vec<u8>,
    path_threads: bool,
    alone: &mut u64,
) -> Option<Transmit> {
    use crate::conn::PathTransmit;
    if path_threads {
        for h in ep.handles() {
            ep.set_path_threads(h, true);
        }
    }
    if let Some(t) = ep.poll_transmit(now, buf) {
        return Some(t);
    }
    if !path_threads {
        return None;
    }
    while ep.poll_path_thread_wake().is_some() {}
    for h in ep.handles() {
        let ids: Vec<u64> =
            ep.connection(h).map(|c| c.path_addresses().iter().map(|p| p.0).collect()).unwrap_or_default();
        for id in ids {
            match ep.poll_path_transmit(now, h, id, buf) {
                PathTransmit::Ready(t) => return Some(t),
                PathTransmit::Batch(mut b) => {
                    b.build(now, buf);
                    *alone += 1;
                    if let Some(t) = ep.end_send_batch(now, h, b, buf) {
                        return Some(t);
                    }
                }
                PathTransmit::Idle | PathTransmit::Elsewhere(_) | PathTransmit::Gone => {}
            }
        }
    }
    None
}
