//! The connection: the sans-IO state machine of one QUIC connection.
//!
//! # Contract
//! *Inputs*: [`Connection::handle_datagram`] (a datagram routed to this connection),
//! [`Connection::handle_datagrams`] (a receive batch of them, such as a GRO batch: the
//! connection's shared state is met once per batch) and [`Connection::handle_timeout`] (when
//! [`Connection::poll_timeout`] is reached).
//! *Outputs*: [`Connection::poll_transmit`] (datagrams to send, possibly a GSO batch),
//! [`Connection::poll_event`] (application events) and [`Connection::poll_endpoint_event`]
//! (connection IDs to route).
//! *Application actions*: streams ([`Connection::open_stream`], [`Connection::write`],
//! [`Connection::read`], ...) and [`Connection::close`].
//!
//! After any input or application action, drain `poll_transmit` until it returns `None`,
//! then `poll_event`, then re-arm the timer with `poll_timeout`.
//!
//! The connection-wide state (TLS, streams, connection IDs, close state) lives in
//! `ConnShared`; the state of each network path (packet number space, recovery, congestion
//! control, pacing, amplification, key-phase marks, statistics) lives in `path::PathState`,
//! in a table of stable slots with a board of published views and per-path inboxes
//! (`board.rs`). Work done for one path (building its packets, applying the frames of the
//! packets it received) gets that path and a `Host` (`host.rs`, `send/host.rs`): the shared
//! half and the board, never the table, so it reaches other paths only by mail.
//! `docs/connection-split.md` describes the split and its batch seams.

mod acks;
mod board;
mod cids;
pub mod config;
pub mod datagram;
pub mod events;
#[cfg(any(test, feature = "fuzzing"))]
mod fuzzing;
mod grease;
mod handshake;
pub(crate) mod host;
mod info;
mod mail;
mod migrate;
mod multipath;
pub mod path;
mod path_ack;
mod path_api;
mod path_frames;
mod path_ids;
mod path_pmtu;
mod path_recovery;
mod path_table;
mod path_timers;
mod preferred_address;
mod qlog;
mod recv;
mod recv_arena;
mod recv_batch;
mod recv_join;
mod recv_run;
mod reset;
mod retry;
mod send;
mod shared;
mod single_space;
mod space;
mod timers;
mod touches;
pub(crate) mod version;
pub mod zero_rtt;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cid::ConnectionId;
use crate::crypto::key_update::OneRttKeys;
use crate::crypto::session::TlsSession;
use crate::error::TransportError;
use crate::qlog::QlogSink;
use crate::stream::{ReadOutcome, StreamError, Streams};
use crate::time::Instant;
use crate::transport_params::TransportParameters;
use crate::types::{Dir, Side, SpaceId, StreamId};

pub use config::{
    AckPolicy, ClientConfig, PreferredAddressConfig, ServerConfig, TransportConfig, DEFAULT_MAX_ACK_RANGES,
};
pub use datagram::{Datagram, DatagramConfig, DatagramCounters, DatagramError, DatagramStats};
pub use events::{ConnectionError, ConnectionStats, Event, PathError, PathEvent, PathStatus};
#[cfg(any(test, feature = "fuzzing"))]
pub use fuzzing::{Footprint, ForgeSlot};
pub(crate) use handshake::local_transport_params;
pub use info::HandshakeInfo;
pub use path::PathStats;
pub use recv_run::{RecvRun, SpentRecvRun};
pub(crate) use retry::AddressTokens;
pub use send::{PathTransmit, SendBatch};
pub use zero_rtt::ZeroRttState;

use cids::{LocalCids, PeerCids};
use host::Host;
use path::PathState;
use space::PacketSpace;
pub(crate) use touches::touch;
#[cfg(debug_assertions)]
use touches::TouchCounts;

/// Derives stateless reset tokens (RFC 9000 §10.3.2) from an endpoint-wide secret, so that
/// an endpoint that lost all state can still produce the token for a CID.
#[derive(Clone)]
pub struct ResetTokenKey(Arc<ring::hmac::Key>);

impl ResetTokenKey {
    /// A key from 32 secret bytes.
    pub fn new(secret: &[u8; 32]) -> Self {
        Self(Arc::new(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret)))
    }

    /// The reset token for `cid`.
    pub fn token(&self, cid: &ConnectionId) -> [u8; 16] {
        let tag = ring::hmac::sign(&self.0, cid.as_slice());
        let mut t = [0u8; 16];
        t.copy_from_slice(&tag.as_ref()[..16]);
        t
    }
}

impl std::fmt::Debug for ResetTokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResetTokenKey(..)")
    }
}

/// Something the endpoint must do for this connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointEvent {
    /// Route datagrams carrying this destination CID to this connection.
    NewCid(ConnectionId),
    /// Stop routing this CID.
    RetireCid(ConnectionId),
}

/// One datagram (or GSO batch of equal-sized datagrams) to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Where to send it.
    pub destination: SocketAddr,
    /// Local address to send it from; `None`: the runtime's default socket.
    pub source: Option<SocketAddr>,
    /// Path the datagrams belong to (0 for the handshake path and for stateless responses).
    pub path_id: u64,
    /// Total bytes written to the buffer.
    pub size: usize,
    /// Size of each datagram when the buffer holds several (GSO); the last may be shorter.
    pub segment_size: Option<usize>,
    /// ECN codepoint to mark (None: not ECN-capable).
    pub ecn: Option<u8>,
}

/// Connection state (RFC 9000 §10).
#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Handshake in progress.
    Handshake,
    /// Handshake complete.
    Established,
    /// We sent CONNECTION_CLOSE; we answer further packets with it until `until`, to the
    /// 1st, 2nd, 4th, 8th... datagram received (`received` reaching `answer_at`), as
    /// RFC 9000 §10.2.1 asks the rate of closing packets be limited.
    Closing { until: Instant, close: CloseFrame, send_pending: bool, received: u64, answer_at: u64 },
    /// The peer closed; we send nothing until `until`.
    Draining { until: Instant },
    /// Over: the connection may be dropped.
    Drained,
}

/// The CONNECTION_CLOSE we send while closing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CloseFrame {
    error_code: u64,
    /// Some for a transport close (0x1c), None for an application close (0x1d).
    frame_type: Option<u64>,
    reason: Vec<u8>,
}

/// A QUIC connection (either side). See the module documentation for the contract.
///
/// Two halves: `ConnShared`, what the whole connection shares, and the `PathTable` of
/// per-path state (`PathState`) with its board and inboxes.
pub struct Connection {
    shared: ConnShared,
    paths: path_table::PathTable,
}

/// The state the paths of a connection share: TLS and keys, the handshake spaces, streams,
/// connection IDs, multipath control, close state, events, timers that are not a path's.
pub(crate) struct ConnShared {
    side: Side,
    config: Arc<TransportConfig>,
    tls: TlsSession,
    rng: ChaCha8Rng,
    reset_key: ResetTokenKey,
    state: State,

    // ---- handshake and keys ----
    initial: Option<PacketSpace>,
    handshake: Option<PacketSpace>,
    initial_keys: Option<rustls::quic::Keys>,
    /// The QUIC version in use and how it was negotiated (RFC 9368).
    version: version::VersionState,
    handshake_keys: Option<rustls::quic::Keys>,
    one_rtt: Option<OneRttKeys>,
    /// Next 1-RTT secrets as handed out by TLS, until 1-RTT keys are installed.
    /// Level TLS currently writes at.
    write_level: crate::types::Level,
    handshake_complete: bool,
    handshake_confirmed: bool,
    /// When the handshake was confirmed: validation of a path opened before then runs its
    /// full time from then (`PathState::on_validation_timer`).
    handshake_confirmed_at: Option<Instant>,
    handshake_done_pending: bool,
    /// The DCID of the client's first Initial (RFC 9000 §7.3).
    orig_dst_cid: ConnectionId,
    /// The client learned the server's CID from its first packet.
    got_server_cid: bool,
    /// Source CID the peer used in its first long-header packet.
    peer_initial_scid: Option<ConnectionId>,
    peer_params: Option<TransportParameters>,
    /// Packets sent in the current key phase, for automatic key updates.
    packets_in_phase: u64,

    // ---- connection IDs, per path ID (RFC 10069 §3.2) ----
    local_cids: BTreeMap<u64, LocalCids>,
    peer_cids: BTreeMap<u64, PeerCids>,
    local_cid_len: usize,
    /// First byte of every connection ID we issue, if the endpoint fixes it
    /// ([`crate::endpoint::EndpointConfig::cid_prefix`]).
    cid_prefix: Option<u8>,

    // ---- multipath ----
    mp: multipath::MultipathState,
    scheduler: Box<dyn crate::sched::PathScheduler>,
    /// Statistics of the most recent paths whose state was discarded.
    closed_paths: VecDeque<PathStats>,
    /// Path IDs that were used and are gone: never used again (RFC 10069 §3.4).
    closed_ids: path_ids::ClosedPathIds,
    /// The path table the scheduler last decided on (stream pinning consults it).
    sched_snapshots: Vec<crate::sched::PathSnapshot>,
    /// Record the STREAM chunks written in this batch (they are copied to other paths).
    collect_chunks: bool,
    batch_chunks: Vec<crate::stream::StreamChunk>,
    /// Whether copies of stream data arrived first; pauses reinjection while they are late.
    copy_feedback: send::CopyFeedback,

    // ---- connection-wide data ----
    streams: Streams,
    idle_timeout: Option<Duration>,
    /// Time of the last packet received or first ack-eliciting packet sent after it.
    idle_anchor: Instant,
    /// The connection is given up if its handshake has not completed by then.
    handshake_deadline: Option<Instant>,
    events: VecDeque<Event>,
    endpoint_events: VecDeque<EndpointEvent>,
    stats: ConnectionStats,
    qlog: Option<Box<dyn QlogSink>>,
    error: Option<ConnectionError>,
    /// `idle_anchor` was set by a receipt and not yet moved by a send.
    idle_anchor_from_recv: bool,
    /// Start of the client's anti-deadlock PTO period.
    last_send_anchor: Instant,
    /// When the previous 1-RTT receive key is dropped (RFC 9001 §6.5: after about 3 PTO).
    key_discard_at: Option<Instant>,
    /// A local key update happened; the discard timer starts at the next send.
    key_discard_pending: bool,
    /// Send a PING: a key update is due but waits for an acknowledgement in this phase.
    ping_pending: bool,
    /// `packets_in_phase` when that PING was last queued.
    key_update_ping_at: u64,
    /// Client: the local address it migrated to, until the first datagram arrives there
    /// (`conn/migrate.rs`).
    migrated_to: Option<SocketAddr>,
    /// Client: the validation of the server's preferred address under way (RFC 9000 §9.6).
    preferred_probe: Option<preferred_address::PreferredProbe>,
    /// Client: whether to validate the preferred address was decided (once, at confirmation).
    preferred_decided: bool,
    /// When the peer first acknowledged a packet of our current key phase: the next update
    /// waits three of the largest PTOs from there (RFC 10069 §2.5).
    phase_acked_at: Option<Instant>,
    /// Round-robin cursor over paths for path-local traffic.
    next_path_cursor: usize,
    /// The peer's address during the handshake (disable_active_migration applies to it).
    handshake_remote: SocketAddr,
    /// The 1-RTT CRYPTO stream (session tickets). It belongs to the connection, not to a
    /// path: its offsets continue whichever path carries it, and when paths go away.
    one_rtt_crypto: space::CryptoStream,
    /// The key-phase marks of a packet authenticated for a path not created yet
    /// (`accept_path` adopts them).
    new_path_marks: Option<(u64, crate::crypto::key_update::PathKeyMarks)>,
    /// Debug builds: how the batch seams met this state.
    #[cfg(debug_assertions)]
    touches: TouchCounts,
    /// What work done on a [`host::Host`] left for the whole connection.
    followups: host::Followups,
    /// Server: 1-RTT packets that arrived before the handshake completed (RFC 9001 §5.7).
    early_one_rtt: Vec<recv::HeldOneRtt>,
    /// Retry and NEW_TOKEN state (RFC 9000 §8.1).
    tokens: retry::AddressTokens,
    /// 0-RTT keys, remembered limits and held packets (RFC 9001 §4.6).
    zero_rtt: zero_rtt::ZeroRtt,
    /// While the frames of a packet from an address its path does not use are processed
    /// (a probing packet, RFC 9000 §9.3): where it came from, for the PATH_RESPONSE.
    probe_from: Option<recv::Rx>,
    /// Raw frame bytes the next 1-RTT packet carries as they are (tests of peer errors).
    /// DATAGRAM (RFC 9221): the send and receive queues and their counters.
    datagrams: datagram::Datagrams,
    #[cfg(test)]
    injected: Vec<u8>,
    /// Raw frame bytes the next Handshake packet carries as they are.
    #[cfg(test)]
    injected_handshake: Vec<u8>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("side", &self.shared.side)
            .field("state", &self.shared.state)
            .field("orig_dst_cid", &self.shared.orig_dst_cid)
            .finish_non_exhaustive()
    }
}

/// Parameters the endpoint hands to a new connection.
pub(crate) struct ConnectionInit {
    pub side: Side,
    pub config: Arc<TransportConfig>,
    pub tls: TlsSession,
    pub now: Instant,
    pub remote: SocketAddr,
    pub local_cid: ConnectionId,
    pub peer_cid: ConnectionId,
    pub orig_dst_cid: ConnectionId,
    pub reset_key: ResetTokenKey,
    pub seed: u64,
    /// Server: the client's address is validated already (a valid Retry or NEW_TOKEN
    /// token), so no amplification limit applies (RFC 9000 §8.1).
    pub address_validated: bool,
    /// Tokens: the client's initial token and store, the server's issuer and Retry CID.
    pub tokens: retry::AddressTokens,
    /// The version of the client's first Initial (RFC 9368's original version).
    pub original_version: u32,
    /// The version the connection sends in: the original one, or the one a server chose by
    /// compatible version negotiation (RFC 9368 §2.1).
    pub version: u32,
}

impl Connection {
    pub(crate) fn new(init: ConnectionInit) -> Self {
        let ConnectionInit {
            side,
            config,
            tls,
            now,
            remote,
            local_cid,
            peer_cid,
            orig_dst_cid,
            reset_key,
            seed,
            address_validated,
            tokens,
            original_version,
            version,
        } = init;
        let mut cids0 = LocalCids::default();
        cids0.issue(local_cid, reset_key.token(&local_cid), false);
        let mut local_cids = BTreeMap::new();
        local_cids.insert(0, cids0);
        let mut peer_cids = BTreeMap::new();
        peer_cids.insert(0, PeerCids::new(peer_cid, config.active_connection_id_limit));
        // After a Retry the Initial keys come from the DCID the client chose then, which the
        // server finds in its token (RFC 9001 §5.2); otherwise from the first DCID.
        let initial_dcid = tokens.retry_scid.unwrap_or(orig_dst_cid);
        let initial_keys = Some(crate::crypto::initial::initial_keys(&initial_dcid, side, version));
        let mut version_state = version::VersionState::new(original_version, version);
        if version != original_version {
            // A server that switched still reads the client's first flight, protected with
            // the original version's Initial keys (RFC 9368 §2.1).
            version_state.original_initial_keys =
                Some(crate::crypto::initial::initial_keys(&initial_dcid, side, original_version));
        }
        // A client's own address needs no validation; the server validates the client's.
        let path = PathState::new(0, remote, &config, side == Side::Client || address_validated);
        let streams = Streams::new(side, &config.streams);
        let datagrams = datagram::Datagrams::new(config.datagrams);
        let shared = ConnShared {
            side,
            tls,
            rng: ChaCha8Rng::seed_from_u64(seed),
            reset_key,
            state: State::Handshake,
            initial: Some(PacketSpace::new(1)),
            handshake: Some(PacketSpace::new(1)),
            initial_keys,
            version: version_state,
            handshake_keys: None,
            one_rtt: None,
            write_level: crate::types::Level::Initial,
            handshake_complete: false,
            handshake_confirmed: false,
            handshake_confirmed_at: None,
            handshake_done_pending: false,
            orig_dst_cid,
            got_server_cid: false,
            peer_initial_scid: if side == Side::Server { Some(peer_cid) } else { None },
            peer_params: None,
            datagrams,
            packets_in_phase: 0,
            local_cid_len: local_cid.len(),
            cid_prefix: None,
            local_cids,
            peer_cids,
            streams,
            idle_timeout: Some(config.max_idle_timeout).filter(|d| !d.is_zero()),
            idle_anchor: now,
            handshake_deadline: config.handshake_timeout.map(|t| now + t),
            events: VecDeque::new(),
            endpoint_events: VecDeque::new(),
            stats: ConnectionStats::default(),
            qlog: None,
            error: None,
            idle_anchor_from_recv: true,
            last_send_anchor: now,
            key_discard_at: None,
            key_discard_pending: false,
            ping_pending: false,
            key_update_ping_at: 0,
            migrated_to: None,
            preferred_probe: None,
            preferred_decided: false,
            phase_acked_at: None,
            next_path_cursor: 0,
            handshake_remote: remote,
            one_rtt_crypto: space::CryptoStream::default(),
            early_one_rtt: Vec::new(),
            new_path_marks: None,
            #[cfg(debug_assertions)]
            touches: TouchCounts::default(),
            followups: host::Followups::default(),
            tokens,
            zero_rtt: zero_rtt::ZeroRtt::default(),
            probe_from: None,
            mp: multipath::MultipathState::default(),
            scheduler: crate::sched::build(config.scheduler),
            closed_paths: VecDeque::new(),
            closed_ids: path_ids::ClosedPathIds::default(),
            sched_snapshots: Vec::new(),
            collect_chunks: false,
            batch_chunks: Vec::new(),
            copy_feedback: Default::default(),
            #[cfg(test)]
            injected: Vec::new(),
            #[cfg(test)]
            injected_handshake: Vec::new(),
            config,
        };
        let mut paths = path_table::PathTable::default();
        paths.insert(path);
        Self { shared, paths }
    }

    // ------------------------------------------------------------------ getters

    /// Which side this endpoint is.
    pub fn side(&self) -> Side {
        self.shared.side
    }

    /// True until the handshake completes.
    pub fn is_handshaking(&self) -> bool {
        !self.shared.handshake_complete
    }

    /// True once the handshake is confirmed (RFC 9001 §4.1.2): from then on a client may
    /// migrate (RFC 9000 §9). Paths open earlier, once the handshake is complete.
    pub fn is_handshake_confirmed(&self) -> bool {
        self.shared.handshake_confirmed
    }

    /// True once the handshake completed and while the connection is open.
    pub fn is_established(&self) -> bool {
        self.shared.state == State::Established
    }

    /// True once the connection is closing, draining or drained.
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// True when the connection may be dropped.
    pub fn is_drained(&self) -> bool {
        self.shared.state == State::Drained
    }

    /// Why the connection ended, once it did.
    pub fn error(&self) -> Option<&ConnectionError> {
        self.shared.error.as_ref()
    }

    /// The negotiated ALPN protocol.
    pub fn alpn(&self) -> Option<&[u8]> {
        self.shared.tls.alpn()
    }

    /// A server's first path leaves from the local address its client's first Initial
    /// came to: a server listening on several addresses answers from the one the client
    /// chose, as the client expects (RFC 9000 §9: a path is its 4-tuple).
    pub(crate) fn set_first_path_local(&mut self, local: SocketAddr) {
        if let Some(p) = self.paths.get_mut(0).filter(|p| p.id == 0) {
            p.local = Some(local);
        }
    }

    /// Fixes the first byte of the connection IDs issued from now on (the endpoint's
    /// [`crate::endpoint::EndpointConfig::cid_prefix`]).
    pub(crate) fn set_cid_prefix(&mut self, prefix: Option<u8>) {
        self.shared.cid_prefix = prefix;
    }

    /// Switches the multipath packet scheduler, which picks the path of each new packet of
    /// data (RFC 10069 leaves the choice to the sender): from the next packet on, `kind`
    /// decides. What the old scheduler had learned (round-robin's turn, weights) starts
    /// afresh; packets in flight are not moved.
    pub fn set_scheduler(&mut self, kind: crate::sched::SchedulerKind) {
        self.shared.scheduler = crate::sched::build(kind);
    }

    /// The DCID of the client's first Initial: a stable name for logs and qlog files.
    pub fn orig_dst_cid(&self) -> ConnectionId {
        self.shared.orig_dst_cid
    }

    /// The peer's address on the handshake path (or the first open path once it is gone).
    pub fn remote_address(&self) -> SocketAddr {
        // (From the board: the path may be out on its own thread.)
        let pi = self.primary_path();
        self.paths.view(pi).map_or_else(|| self.paths[pi].remote, |v| v.remote)
    }

    /// Connection and per-path statistics (paths already discarded included).
    pub fn stats(&self) -> ConnectionStats {
        let mut s = self.shared.stats.clone();
        s.paths = self.shared.closed_paths.iter().cloned().collect();
        s.paths.extend(self.paths.iter().map(|p| p.snapshot()));
        // A path out on its own thread: as it was when it left.
        s.paths.extend(self.paths.out_stats().cloned());
        s.paths.sort_by_key(|p| p.path_id);
        s.datagrams = self.shared.datagrams.stats.clone();
        s
    }

    /// Installs a qlog sink; events start flowing at once.
    pub fn set_qlog(&mut self, sink: Box<dyn QlogSink>) {
        self.shared.qlog = Some(sink);
    }

    // ------------------------------------------------------------------ application API

    /// Opens a stream; `None` while the peer's stream limit is reached.
    pub fn open_stream(&mut self, dir: Dir) -> Option<StreamId> {
        self.shared.streams.open(dir)
    }

    /// Accepts the next stream the peer opened.
    pub fn accept_stream(&mut self, dir: Dir) -> Option<StreamId> {
        self.shared.streams.accept(dir)
    }

    /// Writes stream data; returns how many bytes were accepted (flow control and send
    /// buffer limits may accept fewer; wait for a `Writable` event).
    pub fn write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, StreamError> {
        self.shared.streams.write(id, data)
    }

    /// Writes stream data without copying it: the stream keeps a reference to the accepted
    /// prefix `data.slice(..n)` (returned `n`, limited as for [`Connection::write`]) until the
    /// peer acknowledged it. Continue with `data.slice(n..)` after a `Writable` event.
    pub fn write_bytes(&mut self, id: StreamId, data: &bytes::Bytes) -> Result<usize, StreamError> {
        self.shared.streams.write_bytes(id, data)
    }

    /// Stream data or a stream-layer control frame (MAX_DATA, MAX_STREAM_DATA, MAX_STREAMS,
    /// RESET_STREAM, STOP_SENDING, a BLOCKED frame) waits to be sent. A thread that drives
    /// the connection for the application (reads, writes) needs to wake the one that sends
    /// only when this turned true: while it was true already, the sender has it in hand
    /// (it sends as windows and pacing allow, and sleeps only on their timers or packets).
    pub fn streams_want_to_send(&self) -> bool {
        self.shared.streams.has_pending_data()
    }

    /// Ends the sending side of a stream (FIN).
    pub fn finish(&mut self, id: StreamId) -> Result<(), StreamError> {
        self.shared.streams.finish(id)
    }

    /// Abandons the sending side of a stream (RESET_STREAM).
    pub fn reset_stream(&mut self, id: StreamId, error_code: u64) -> Result<(), StreamError> {
        self.shared.streams.reset(id, error_code)
    }

    /// Asks the peer to stop sending on a stream (STOP_SENDING).
    pub fn stop_sending(&mut self, id: StreamId, error_code: u64) -> Result<(), StreamError> {
        self.shared.streams.stop_sending(id, error_code)
    }

    /// Reads stream data in order.
    pub fn read(&mut self, id: StreamId, buf: &mut [u8]) -> Result<ReadOutcome, StreamError> {
        self.shared.streams.read(id, buf)
    }

    /// Reads up to `max` bytes of stream data in order as one buffer, without a copy while
    /// the stream holds its data as reference-counted chunks (the usual case: the bytes were
    /// copied once, when their packet was opened). The application can keep the buffer and
    /// work on it after letting go of the connection, which matters where the connection
    /// sits behind a lock that path threads take (C2). Same outcome and errors as
    /// [`Connection::read`]; `Ok((outcome, None))` only at the end of the stream.
    pub fn read_chunk(&mut self, id: StreamId, max: usize) -> Result<(ReadOutcome, Option<bytes::Bytes>), StreamError> {
        self.shared.streams.read_chunk(id, max)
    }

    /// Reads stream data in order without copying it out: up to `max` bytes are handed to
    /// `f` where they lie in the receive buffer (in order, in as many pieces as they are
    /// held in) and are consumed.
    /// Same outcome and errors as [`Connection::read`].
    pub fn read_with(
        &mut self,
        id: StreamId,
        max: usize,
        mut f: impl FnMut(&[u8]),
    ) -> Result<ReadOutcome, StreamError> {
        self.shared.streams.read_with(id, max, &mut f)
    }

    /// Closes the connection with an application error code (CONNECTION_CLOSE 0x1d).
    pub fn close(&mut self, now: Instant, error_code: u64, reason: &[u8]) {
        if self.is_closed() {
            return;
        }
        self.shared.error = Some(ConnectionError::LocallyClosed);
        self.shared.events.push_back(Event::ConnectionLost(ConnectionError::LocallyClosed));
        self.host().enter_closing(now, CloseFrame { error_code, frame_type: None, reason: reason.to_vec() });
    }

    /// Next application event.
    pub fn poll_event(&mut self) -> Option<Event> {
        if let Some(e) = self.shared.events.pop_front() {
            return Some(e);
        }
        self.shared.streams.poll_event().map(Event::Stream)
    }

    /// Next instruction for the endpoint.
    pub fn poll_endpoint_event(&mut self) -> Option<EndpointEvent> {
        self.shared.endpoint_events.pop_front()
    }

    /// Connection IDs routed to this connection.
    pub fn local_cids(&self) -> impl Iterator<Item = ConnectionId> + '_ {
        self.shared.local_cids.values().flat_map(|l| l.active.values().map(|c| c.cid))
    }

    // ------------------------------------------------------------------ internals

    fn set_drained(&mut self, err: Option<ConnectionError>) {
        if let (None, Some(e)) = (&self.shared.error, err) {
            self.shared.error = Some(e.clone());
            self.shared.events.push_back(Event::ConnectionLost(e));
        }
        if self.shared.state != State::Drained {
            self.shared.state = State::Drained;
            self.shared.events.push_back(Event::Drained);
        }
    }

    /// A packet number space: Initial and Handshake, or the data space of path index `pi`.
    fn space_mut(&mut self, id: SpaceId, pi: usize) -> Option<&mut PacketSpace> {
        match id {
            SpaceId::Initial => self.shared.initial.as_mut(),
            SpaceId::Handshake => self.shared.handshake.as_mut(),
            SpaceId::Data => self.paths.get_mut(pi).map(|p| &mut p.data),
        }
    }

    /// The largest PTO of all paths ([`Host::max_pto`]).
    pub(crate) fn max_pto(&self) -> Duration {
        self.paths.board().max_pto(self.shared.peer_max_ack_delay())
    }

    /// Closing and draining last three times the largest PTO of all paths
    /// (RFC 9000 §10.2, RFC 10069 §4.3).
    fn close_period(&self) -> Duration {
        3 * self.max_pto()
    }

    /// The shared half and the board, for work that reaches no path's state directly.
    pub(crate) fn host(&mut self) -> host::Host<'_> {
        host::Host { shared: &mut self.shared, board: self.paths.board_mut() }
    }

    /// The path in `slot` apart from the shared half and the board, for work done for it.
    pub(crate) fn host_for(&mut self, slot: usize) -> Option<(host::Host<'_>, &mut PathState)> {
        let (path, board) = self.paths.path_and_board(slot)?;
        Some((host::Host { shared: &mut self.shared, board }, path))
    }

    /// Slot of the path with ID `id` (found on the board: a checked-out path has one too).
    pub(crate) fn path_index(&self, id: u64) -> Option<usize> {
        self.paths.board().slot_of(id)
    }

    /// The path that carries the handshake and, without multipath, everything
    /// ([`board::Board::primary_slot`]); slot 0 when there is no path.
    pub(crate) fn primary_path(&self) -> usize {
        self.paths.board().primary_slot().unwrap_or(0)
    }

    /// The peer updated its keys (RFC 9001 §6.2): we follow, and keep the old key a while.
    fn on_peer_key_update(&mut self, now: Instant) {
        self.shared.qlog_key_update(now, "remote_update");
        self.shared.stats.key_updates += 1;
        self.shared.packets_in_phase = 0;
        self.shared.key_update_ping_at = 0;
        self.shared.key_discard_pending = true;
        // The three-PTO wait before our next update (RFC 10069 §2.5)
        // counts from the first acknowledgement in this new phase, as after an update of our
        // own: the time kept from the previous phase would let us update again at once, while
        // the peer may still hold the keys this phase replaced.
        self.shared.phase_acked_at = None;
        tracing::debug!(side = ?self.shared.side, "peer initiated key update");
    }

    /// Arms the timer that drops the previous key, three PTOs from `now`, once a packet of
    /// the peer's in the current phase has been opened: RFC 9001 §6.1, "An endpoint MUST
    /// retain old keys until it has successfully unprotected a packet sent using the new
    /// keys". After an update of our own the peer may not have seen our first packets of the
    /// new phase (lost, or ACK-only and never resent) and goes on in the old one; dropping
    /// its key after three PTOs regardless left such a connection unable to open anything
    /// the peer sent (found with ngtcp2's server dropping 5 % of the packets).
    fn arm_key_discard(&mut self, now: Instant) {
        if self.shared.key_discard_pending && self.heard_in_current_phase() {
            self.shared.key_discard_pending = false;
            self.shared.key_discard_at = Some(now + self.close_period());
        }
    }

    /// Whether a packet the peer sent in the current key phase was opened, on any path
    /// (those checked out to a thread do not count: the question is asked again later).
    fn heard_in_current_phase(&self) -> bool {
        let Some(keys) = self.shared.one_rtt.as_ref() else { return false };
        let epoch = keys.epoch();
        self.paths.iter().any(|p| p.key_marks.heard_in(epoch))
    }
}

impl Host<'_> {
    /// Closes the connection because of a protocol error we detected.
    pub(crate) fn close_with_error(&mut self, now: Instant, err: TransportError) {
        if self.shared.is_closed() {
            return;
        }
        tracing::debug!(side = ?self.shared.side, %err, "closing connection on transport error");
        let close = CloseFrame {
            error_code: err.code.0,
            frame_type: Some(err.frame_type.unwrap_or(0)),
            reason: err.reason.clone().into_bytes(),
        };
        self.shared.error = Some(ConnectionError::TransportError(err.clone()));
        self.shared.events.push_back(Event::ConnectionLost(ConnectionError::TransportError(err)));
        self.enter_closing(now, close);
    }

    fn enter_closing(&mut self, now: Instant, close: CloseFrame) {
        self.qlog_closed(now, &close);
        let until = now + self.close_period();
        self.shared.state = State::Closing { until, close, send_pending: true, received: 0, answer_at: 1 };
    }

    /// The peer closed the connection, or it timed out / was reset: stop sending.
    fn enter_draining(&mut self, now: Instant, err: ConnectionError) {
        if matches!(self.shared.state, State::Draining { .. } | State::Drained) {
            return;
        }
        self.shared.qlog_lost(now, &err);
        if self.shared.error.is_none() {
            self.shared.error = Some(err.clone());
            self.shared.events.push_back(Event::ConnectionLost(err));
        }
        let until = now + self.close_period();
        self.shared.state = State::Draining { until };
    }

    /// Closing and draining last three times the largest PTO of all paths
    /// (RFC 9000 §10.2, RFC 10069 §2.6).
    fn close_period(&self) -> Duration {
        3 * self.max_pto()
    }
}

impl ConnShared {
    fn peer_max_ack_delay(&self) -> Duration {
        Duration::from_millis(self.peer_params.as_ref().map(|p| p.max_ack_delay).unwrap_or(25))
    }

    fn peer_ack_delay_exponent(&self) -> u8 {
        self.peer_params.as_ref().map(|p| p.ack_delay_exponent.min(20) as u8).unwrap_or(3)
    }

    fn random_cid(&mut self) -> ConnectionId {
        let mut b = [0u8; crate::cid::MAX_CID_LEN];
        let len = self.local_cid_len.max(1);
        self.rng.fill_bytes(&mut b[..len]);
        if let Some(prefix) = self.cid_prefix {
            b[0] = prefix;
        }
        ConnectionId::new(&b[..len])
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_datagram;
#[cfg(test)]
mod tests_handshake_loss;
#[cfg(test)]
mod tests_key_update;
#[cfg(test)]
mod tests_mail;
#[cfg(test)]
mod tests_migrate;
#[cfg(test)]
mod tests_multipath;
#[cfg(test)]
mod tests_multipath_rules;
#[cfg(test)]
mod tests_packet_rules;
#[cfg(test)]
mod tests_path_frames;
#[cfg(test)]
mod tests_path_send;
#[cfg(test)]
mod tests_peer_limits;
#[cfg(test)]
mod tests_pmtud;
#[cfg(test)]
mod tests_preferred_address;
#[cfg(test)]
mod tests_retry;
#[cfg(test)]
mod tests_shuttle;
#[cfg(test)]
mod tests_threads;
#[cfg(test)]
mod tests_version;
#[cfg(test)]
mod tests_version_negotiation;
#[cfg(test)]
mod tests_zero_rtt;
#[cfg(test)]
mod tests_zero_rtt_datagram;
