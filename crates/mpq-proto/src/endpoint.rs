//! The endpoint: owns connections, routes datagrams to them by destination connection ID,
//! accepts new connections (server), answers unknown versions with Version Negotiation and
//! unknown connections with Stateless Reset (RFC 9000 §5.2, §6, §10.3), and recognises the
//! peer's stateless resets (§10.3.1).
//!
//! One wake of a runtime costs O(log n) in the number of connections, not a scan of all of
//! them: a `schedule::Schedule` files each connection's timer in deadline order and queues
//! the connections that something happened to, for transmit and for events.

mod accept;
mod connect;
mod reset_tokens;
mod retry;
mod schedule;
mod shards;
mod threads;
mod version_select;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cid::ConnectionId;
use crate::conn::{Connection, ConnectionInit, EndpointEvent, Event, ResetTokenKey, ServerConfig, Transmit};
use crate::crypto::session::TlsSession;
use crate::packet::header;
use crate::time::Instant;
use crate::token::{RetryMode, TokenCheck, TokenKey, TokenLifetimes, TokenStore};
use crate::types::Side;

#[cfg(test)]
mod tests_flood;

pub use retry::EndpointStats;

use reset_tokens::ResetTokens;
use schedule::Schedule;

/// Endpoint-wide settings.
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// Length of the connection IDs we issue (4..=20; routing needs them non-empty).
    pub cid_len: usize,
    /// Secret for stateless reset tokens; keep it stable across restarts to let a
    /// restarted endpoint reset its old connections.
    pub reset_secret: [u8; 32],
    /// Seed of the endpoint's RNG (CIDs, per-connection seeds). Runtimes draw it from the OS.
    pub seed: u64,
    /// Most connections served at once; further Initials are ignored.
    pub max_connections: usize,
    /// Server: when to validate client addresses with Retry first (RFC 9000 §8.1.2).
    pub retry: RetryMode,
    /// Server, [`RetryMode::Auto`]: handshakes in progress from which Initials without a
    /// valid token get a Retry.
    pub retry_threshold: usize,
    /// Server: most handshakes in progress (connections not yet established); further
    /// Initials are dropped. Keep it above `retry_threshold`, so that clients returning a
    /// Retry token still find room while spoofed Initials are answered statelessly.
    pub max_handshakes: usize,
    /// Server: most handshakes in progress from one client IP address.
    pub max_handshakes_per_ip: usize,
    /// Secret of the Retry and NEW_TOKEN token key. Tokens are valid only under the key
    /// that sealed them: keep it stable across restarts to honour tokens issued before.
    pub token_secret: [u8; 32],
    /// How long tokens stay valid.
    pub token_lifetimes: TokenLifetimes,
    /// Server: send a NEW_TOKEN frame once the handshake is confirmed (RFC 9000 §8.1.3), so
    /// the client's next connection skips Retry and the amplification limit.
    pub new_tokens: bool,
    /// First byte of every connection ID this endpoint (and each of its connections)
    /// issues, or `None` for all-random IDs. A runtime that runs several endpoints on one
    /// UDP port (shards) gives each its index here, so that a datagram the kernel hands to
    /// the wrong shard is passed to the one that owns its connection
    /// ([`Endpoint::cid_owner`]). The byte links a connection's IDs to the shard, not to
    /// one another, much as QUIC-LB's plaintext server ID does.
    pub cid_prefix: Option<u8>,
}

impl EndpointConfig {
    /// Defaults with the given RNG seed; the reset secret is derived from it.
    pub fn with_seed(seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_5eed);
        let mut reset_secret = [0u8; 32];
        rng.fill_bytes(&mut reset_secret);
        let mut token_secret = [0u8; 32];
        rng.fill_bytes(&mut token_secret);
        Self {
            cid_len: 8,
            reset_secret,
            seed,
            max_connections: 4096,
            retry: RetryMode::Auto,
            retry_threshold: 64,
            max_handshakes: 1024,
            max_handshakes_per_ip: 32,
            token_secret,
            token_lifetimes: TokenLifetimes::default(),
            new_tokens: true,
            cid_prefix: None,
        }
    }
}

/// Index of a connection inside its endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionHandle(pub usize);

/// Why `connect` failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The server name is not a valid DNS name or IP address.
    #[error("invalid server name: {0}")]
    InvalidServerName(String),
    /// TLS refused the configuration.
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// Too many connections.
    #[error("connection limit reached")]
    TooManyConnections,
}

/// A QUIC endpoint: any number of client and server connections on shared sockets.
pub struct Endpoint {
    config: EndpointConfig,
    server: Option<ServerConfig>,
    rng: ChaCha8Rng,
    reset_key: ResetTokenKey,
    connections: Vec<Option<Slot>>,
    /// Live connections.
    live: usize,
    free: Vec<usize>,
    /// Connection IDs to connection slots. Looked up for every datagram, so hashed with
    /// foldhash rather than SipHash, keyed per endpoint from its seed: the peer picks the
    /// Initial DCIDs routed here, and must not be able to choose colliding ones.
    routes: HashMap<ConnectionId, usize, RouteHasher>,
    /// Tokens of the peer CIDs in use, to recognise stateless resets.
    reset_tokens: ResetTokens,
    /// Timers and work queues: what a wake must look at.
    schedule: Schedule,
    incoming: VecDeque<ConnectionHandle>,
    /// Endpoint-generated datagrams (Version Negotiation, Stateless Reset).
    responses: VecDeque<(Option<SocketAddr>, SocketAddr, Vec<u8>)>,
    /// Connections with path threads that something happened to since the runtime last
    /// asked ([`Endpoint::poll_path_thread_wake`]): their threads may have work, or end
    /// (the connection was removed).
    path_thread_wakes: VecDeque<ConnectionHandle>,
    /// Server: Retry, tokens and handshake limits.
    guard: retry::ServerGuard,
    /// Client: NEW_TOKEN tokens by server name, for later connections.
    token_store: TokenStore,
    /// Times a connection was asked for a transmit, a timer or an event.
    connection_polls: u64,
    /// Makes the qlog sink of each connection as it is created.
    qlog_factory: Option<QlogFactory>,
}

/// Makes the qlog sink of a new connection (see [`Endpoint::set_qlog_factory`]).
pub type QlogFactory = Box<dyn FnMut(&Connection) -> Option<Box<dyn crate::qlog::QlogSink>> + Send>;

/// The keyed hash of [`Endpoint`]'s route table.
type RouteHasher = foldhash::quality::FixedState;

/// A connection and what the endpoint routes to it.
struct Slot {
    conn: Connection,
    /// Every CID routed to this connection, to unroute exactly these when it goes.
    routes: Vec<ConnectionId>,
    /// A runtime drives the connection's paths from threads of their own
    /// ([`Endpoint::set_path_threads`]): [`Endpoint::poll_transmit`] leaves it to them.
    path_threads: bool,
    /// Client: how the connection was opened, to start it again in another version after a
    /// Version Negotiation packet (`endpoint/connect.rs`).
    client: Option<Box<connect::ClientStart>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("connections", &self.len()).finish_non_exhaustive()
    }
}

impl Endpoint {
    /// A new endpoint; pass a server config to accept connections.
    pub fn new(config: EndpointConfig, server: Option<ServerConfig>) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            reset_key: ResetTokenKey::new(&config.reset_secret),
            server,
            connections: Vec::new(),
            live: 0,
            free: Vec::new(),
            // A stream of its own, so the endpoint RNG draws (CIDs) stay what they were.
            routes: HashMap::with_hasher(RouteHasher::with_seed(
                ChaCha8Rng::seed_from_u64(config.seed ^ 0x7275_7465_735f_6b65).random(),
            )),
            reset_tokens: ResetTokens::default(),
            schedule: Schedule::default(),
            incoming: VecDeque::new(),
            responses: VecDeque::new(),
            path_thread_wakes: VecDeque::new(),
            connection_polls: 0,
            qlog_factory: None,
            guard: retry::ServerGuard::new(TokenKey::new(&config.token_secret), config.retry),
            token_store: TokenStore::default(),
            config,
        }
    }

    /// Server: changes when Retry is used (e.g. at once under a known attack).
    pub fn set_retry_mode(&mut self, mode: RetryMode) {
        self.guard.mode = mode;
    }

    /// Server: changes the bounds on handshakes in progress, in total and from one client
    /// IP address (see [`EndpointConfig::max_handshakes`]).
    pub fn set_handshake_limits(&mut self, max_handshakes: usize, max_per_ip: usize) {
        self.config.max_handshakes = max_handshakes;
        self.config.max_handshakes_per_ip = max_per_ip;
    }

    /// Server: counters of new connection attempts (Retry, tokens, drops).
    pub fn stats(&self) -> EndpointStats {
        self.guard.stats
    }

    /// Tests: what the server sends as retry_source_connection_id after a Retry
    /// (`Some(None)`: nothing), to exercise the client's check (RFC 9000 §7.3).
    #[cfg(test)]
    pub(crate) fn set_tp_retry_scid_override(&mut self, v: Option<Option<ConnectionId>>) {
        self.guard.tp_retry_scid_override = v;
    }

    /// Tests: what this endpoint sends as version_information (`Some(None)`: nothing), to
    /// exercise the peer's checks (RFC 9368 §4).
    #[cfg(test)]
    pub(crate) fn set_tp_version_override(&mut self, v: Option<Option<crate::transport_params::VersionInformation>>) {
        self.guard.tp_version_override = v;
    }

    /// Tests: handshakes the server currently counts as in progress.
    #[cfg(test)]
    pub(crate) fn handshakes_counted(&self) -> usize {
        self.guard.counted()
    }

    /// Client: the NEW_TOKEN tokens received so far, by server name. A runtime can read it
    /// to persist tokens, or add tokens it kept from an earlier run.
    pub fn token_store(&self) -> &TokenStore {
        &self.token_store
    }

    /// Client: shares a token store (e.g. one kept by the runtime across endpoints).
    pub fn set_token_store(&mut self, store: TokenStore) {
        self.token_store = store;
    }

    /// Changes the most connections held at once (see [`EndpointConfig::max_connections`]).
    pub fn set_max_connections(&mut self, n: usize) {
        self.config.max_connections = n;
    }

    /// Number of live connections.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when no connection is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Processes one received datagram (decrypted in place). Returns the connection it
    /// went to, if any.
    /// Processes the datagrams of one receive batch (a GRO batch: same source, destination
    /// and ECN codepoint), in order. Runs of datagrams for the same connection go to it in
    /// one call ([`Connection::handle_datagrams`]), which meets its shared state once per run.
    pub fn handle_datagrams(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        ecn: Option<u8>,
        datagrams: &mut [&mut [u8]],
    ) {
        let mut i = 0;
        while i < datagrams.len() {
            let Some(idx) = self.route_of(datagrams[i]) else {
                self.handle_datagram(now, local, remote, ecn, datagrams[i]);
                i += 1;
                continue;
            };
            let mut end = i + 1;
            while end < datagrams.len() && self.route_of(datagrams[end]) == Some(idx) {
                end += 1;
            }
            if let Some(slot) = self.connections[idx].as_mut() {
                slot.conn.handle_datagrams(now, local, remote, ecn, &mut datagrams[i..end]);
                self.restart_after_version_negotiation(now, idx);
                self.after_io(idx);
                self.schedule.mark_may_send(idx);
            }
            i = end;
        }
    }

    /// Our transport parameters on the wire, with one reserved parameter of random ID and
    /// value (RFC 9000 §18.1) so that peers keep ignoring unknown parameters (§7.4.2).
    fn encode_params(&mut self, tp: &crate::transport_params::TransportParameters) -> Vec<u8> {
        #[cfg(test)]
        let tp = &{
            let mut tp = tp.clone();
            if let Some(v) = &self.guard.tp_version_override {
                tp.version_information = v.clone();
            }
            tp
        };
        let mut value = [0u8; 8];
        let len = self.rng.random_range(0..=value.len());
        self.rng.fill_bytes(&mut value[..len]);
        let n = self.rng.random::<u64>();
        let mut out = Vec::new();
        tp.encode_with_grease(&mut out, n, &value[..len]);
        out
    }

    /// The connection a datagram of a version we implement is routed to by its destination
    /// CID, if any (what [`Endpoint::handle_datagram`] does first).
    fn route_of(&self, data: &[u8]) -> Option<usize> {
        let first = *data.first()?;
        if first & 0x80 != 0 {
            let version = data.get(1..5).map(|v| u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
            if version.is_some_and(|v| v != 0 && !crate::packet::version::is_implemented(v)) {
                return None;
            }
        }
        let dcid = header::peek_dcid(data, self.config.cid_len)?;
        let idx = *self.routes.get(&dcid)?;
        self.connections[idx].as_ref().map(|_| idx)
    }

    /// Processes one datagram (see [`Endpoint::handle_datagrams`] for a batch).
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        ecn: Option<u8>,
        data: &mut [u8],
    ) -> Option<ConnectionHandle> {
        let first = *data.first()?;
        let version = data.get(1..5).map(|v| u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
        if first & 0x80 != 0 && version.is_some_and(|v| v != 0 && !crate::packet::version::is_implemented(v)) {
            // Another version: its CIDs may be up to 255 bytes (RFC 8999 §5.1), longer than
            // ours, so it is answered before any v1 parsing. (Version 0 is a Version
            // Negotiation packet for one of our client connections: routed below.)
            return self.handle_unknown_long(now, local, remote, ecn, data);
        }
        let dcid = header::peek_dcid(data, self.config.cid_len)?;
        if let Some(&idx) = self.routes.get(&dcid) {
            if let Some(slot) = self.connections[idx].as_mut() {
                slot.conn.handle_datagram(now, local, remote, ecn, data);
                self.restart_after_version_negotiation(now, idx);
                self.after_io(idx);
                self.schedule.mark_may_send(idx);
                return Some(ConnectionHandle(idx));
            }
        }
        if first & 0x80 != 0 {
            return self.handle_unknown_long(now, local, remote, ecn, data);
        }
        // RFC 9000 §10.3.1: a datagram no CID routes may be the peer's stateless reset for one
        // of our connections; answering it with a reset of our own would leave that
        // connection hanging until its idle timeout.
        if let Some(idx) = self.reset_tokens.lookup(data) {
            if let Some(slot) = self.connections[idx].as_mut() {
                if slot.conn.handle_stateless_reset(now, data) {
                    self.after_io(idx);
                    return Some(ConnectionHandle(idx));
                }
            }
        }
        self.maybe_stateless_reset(local, remote, &dcid, data.len());
        None
    }

    /// RFC 9000 §10.3: a short-header packet for an unknown connection may be answered
    /// with a stateless reset, smaller than the trigger so that resets cannot loop.
    fn maybe_stateless_reset(&mut self, local: SocketAddr, remote: SocketAddr, dcid: &ConnectionId, len: usize) {
        const MIN_RESET: usize = 21;
        if len <= MIN_RESET + 1 || dcid.len() != self.config.cid_len {
            return;
        }
        let size = (len - 1).min(43);
        let token = self.reset_key.token(dcid);
        let mut out = Vec::with_capacity(size);
        header::write_stateless_reset(&mut out, &token, size, &mut self.rng);
        self.responses.push_back((Some(local), remote, out));
    }

    /// Writes the next datagram (or GSO batch) to send into `buf`. Connections that have
    /// something take turns, one batch each; only connections that something happened to
    /// since they last had nothing are asked.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if let Some((local, dst, data)) = self.responses.pop_front() {
            buf.clear();
            buf.extend_from_slice(&data);
            return Some(Transmit {
                destination: dst,
                source: local,
                path_id: 0,
                size: data.len(),
                segment_size: None,
                ecn: None,
            });
        }
        while let Some(idx) = self.schedule.next_to_send() {
            let Some(slot) = self.connections[idx].as_mut() else {
                self.schedule.nothing_to_send(idx);
                continue;
            };
            if slot.path_threads {
                // Its path threads send; the runtime learns that it may have work for them.
                self.schedule.nothing_to_send(idx);
                if !self.path_thread_wakes.contains(&ConnectionHandle(idx)) {
                    self.path_thread_wakes.push_back(ConnectionHandle(idx));
                }
                continue;
            }
            self.connection_polls += 1;
            match slot.conn.poll_transmit(now, buf) {
                Some(t) => {
                    self.schedule.sent(idx);
                    self.after_io(idx);
                    return Some(t);
                }
                None => {
                    self.schedule.nothing_to_send(idx);
                    self.after_io(idx);
                }
            }
        }
        None
    }

    /// Earliest timer of any connection.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.refresh_timers();
        self.schedule.next_deadline()
    }

    /// Fires the expired timers of the connections whose deadline has come.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.refresh_timers();
        while let Some(idx) = self.schedule.pop_due(now) {
            let Some(slot) = self.connections[idx].as_mut() else { continue };
            // The filed deadline was read after the connection's last change, so it is due;
            // the check guards against a runtime that calls this early.
            if slot.conn.poll_timeout().is_some_and(|t| t <= now) {
                slot.conn.handle_timeout(now);
            }
            self.after_io(idx);
        }
    }

    /// Every new connection gets its qlog sink from `factory` as it is created: a server's
    /// before its first datagram is processed, a client's (from [`Endpoint::connect`])
    /// before its first packet is built (`None` from the factory: no qlog).
    pub fn set_qlog_factory(&mut self, factory: QlogFactory) {
        self.qlog_factory = Some(factory);
    }

    /// Next connection accepted by the server side.
    pub fn accept(&mut self) -> Option<ConnectionHandle> {
        self.incoming.pop_front()
    }

    /// Next application event of any connection. The `Drained` event is the last one of a
    /// connection: it is removed from the endpoint right after.
    pub fn poll_event(&mut self) -> Option<(ConnectionHandle, Event)> {
        while let Some(idx) = self.schedule.next_with_events() {
            let Some(slot) = self.connections[idx].as_mut() else {
                self.schedule.no_more_events(idx);
                continue;
            };
            self.connection_polls += 1;
            match slot.conn.poll_event() {
                Some(ev) => {
                    if ev == Event::Drained {
                        self.remove(idx);
                    }
                    return Some((ConnectionHandle(idx), ev));
                }
                None => self.schedule.no_more_events(idx),
            }
        }
        None
    }

    /// A connection by handle.
    pub fn connection(&self, h: ConnectionHandle) -> Option<&Connection> {
        self.connections.get(h.0).and_then(|c| c.as_ref()).map(|s| &s.conn)
    }

    /// A connection by handle, mutably. The endpoint looks at it again on the next poll (it
    /// may have data to send, new timers or events).
    pub fn connection_mut(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        let slot = self.connections.get_mut(h.0).and_then(|c| c.as_mut())?;
        self.schedule.touch(h.0);
        Some(&mut slot.conn)
    }

    /// Handles of every live connection (a scan: applications that serve many connections
    /// should follow events instead).
    pub fn handles(&self) -> Vec<ConnectionHandle> {
        (0..self.connections.len()).filter(|&i| self.connections[i].is_some()).map(ConnectionHandle).collect()
    }

    /// How many times a connection was asked for a transmit, a timer or an event: what the
    /// endpoint's wakes cost, independent of the machine (for tests and benchmarks).
    pub fn connection_polls(&self) -> u64 {
        self.connection_polls
    }

    /// Timers filed in the schedule (one per connection with a timer; for tests and stats).
    pub fn filed_timers(&self) -> usize {
        self.schedule.timer_count()
    }

    fn new_cid(&mut self) -> ConnectionId {
        loop {
            let mut b = [0u8; crate::cid::MAX_CID_LEN];
            let len = self.config.cid_len.clamp(4, crate::cid::MAX_CID_LEN);
            self.rng.fill_bytes(&mut b[..len]);
            if let Some(prefix) = self.config.cid_prefix {
                b[0] = prefix;
            }
            let cid = ConnectionId::new(&b[..len]);
            if !self.routes.contains_key(&cid) {
                return cid;
            }
        }
    }

    fn insert(&mut self, mut conn: Connection) -> ConnectionHandle {
        conn.set_cid_prefix(self.config.cid_prefix);
        let slot = Some(Slot { conn, routes: Vec::new(), path_threads: false, client: None });
        let idx = match self.free.pop() {
            Some(idx) => {
                self.connections[idx] = slot;
                idx
            }
            None => {
                self.connections.push(slot);
                self.connections.len() - 1
            }
        };
        self.live += 1;
        self.schedule.touch(idx);
        ConnectionHandle(idx)
    }

    /// Routes datagrams carrying `cid` to connection `idx`.
    fn route(&mut self, cid: ConnectionId, idx: usize) {
        if let Some(slot) = self.connections[idx].as_mut() {
            self.routes.insert(cid, idx);
            if !slot.routes.contains(&cid) {
                slot.routes.push(cid);
            }
        }
    }

    fn remove(&mut self, idx: usize) {
        if let Some(slot) = self.connections[idx].take() {
            for cid in slot.routes {
                if self.routes.get(&cid) == Some(&idx) {
                    self.routes.remove(&cid);
                }
            }
            self.reset_tokens.remove(idx);
            self.schedule.forget(idx);
            self.live -= 1;
            // Its path threads wait for their sockets and timers: the runtime wakes them to
            // see that it is gone and end, sockets and all.
            if slot.path_threads && !self.path_thread_wakes.contains(&ConnectionHandle(idx)) {
                self.path_thread_wakes.push_back(ConnectionHandle(idx));
            }
            // Drained connections can still hold unread events: the app already saw Drained.
            self.free.push(idx);
        }
    }

    /// Reads the timers of the connections touched since the last call.
    ///
    /// The reset tokens of the peer CIDs they use are refreshed here too, once per wake
    /// rather than once per datagram: they change only when a path or its CID does.
    fn refresh_timers(&mut self) {
        let connections = &mut self.connections;
        let polls = &mut self.connection_polls;
        let reset_tokens = &mut self.reset_tokens;
        self.schedule.refresh(|idx| {
            *polls += 1;
            let slot = connections.get_mut(idx)?.as_mut()?;
            reset_tokens.set(idx, slot.conn.peer_reset_tokens_in_use());
            // A connection whose paths have threads of their own: they wait for their paths'
            // timers (`poll_path_timeout`), the endpoint for the connection-wide ones.
            if slot.path_threads {
                slot.conn.poll_shared_timeout()
            } else {
                slot.conn.poll_timeout()
            }
        });
    }

    /// After the connection did something: apply its routing changes and look at its timer,
    /// reset tokens and events again (callers that gave it input also queue it for
    /// transmit).
    fn after_io(&mut self, idx: usize) {
        let Some(slot) = self.connections[idx].as_mut() else { return };
        while let Some(ev) = slot.conn.poll_endpoint_event() {
            match ev {
                EndpointEvent::NewCid(cid) => {
                    self.routes.insert(cid, idx);
                    if !slot.routes.contains(&cid) {
                        slot.routes.push(cid);
                    }
                }
                EndpointEvent::RetireCid(cid) => {
                    if self.routes.get(&cid) == Some(&idx) {
                        self.routes.remove(&cid);
                    }
                    slot.routes.retain(|c| *c != cid);
                }
            }
        }
        self.schedule.mark_stale(idx);
        self.schedule.mark_may_have_events(idx);
    }
}

#[cfg(test)]
mod tests;

impl Connection {
    /// Client: produce the first flight.
    pub(crate) fn start(&mut self, now: Instant) {
        if let Err(e) = self.drive_tls(now) {
            self.host().close_with_error(now, e);
        }
        // A resumed session may send 0-RTT from the first flight on (RFC 9001 §4.6.1).
        self.init_zero_rtt();
    }
}

/// Reference count helper so runtimes can share server configs.
pub type SharedServerConfig = Arc<ServerConfig>;

/// The ranges of the connection IDs of the long header at the start of `data` (for a
/// Version Negotiation answer); empty ranges if the header is cut short.
fn cid_ranges(data: &[u8]) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
    let dcid_len = data.get(5).map_or(0, |&l| usize::from(l));
    let dcid = 6..6 + dcid_len;
    let scid_len = data.get(dcid.end).map_or(0, |&l| usize::from(l));
    let scid = dcid.end + 1..dcid.end + 1 + scid_len;
    (dcid, scid)
}
