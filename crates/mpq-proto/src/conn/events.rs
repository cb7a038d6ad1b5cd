//! What a connection tells its application: events, the reason it ended, statistics.

use crate::error::TransportError;
use crate::stream::StreamEvent;

use super::path::PathStats;

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    /// We detected a protocol violation and closed the connection.
    #[error("local transport error: {0}")]
    TransportError(TransportError),
    /// The peer closed the connection with a transport error.
    #[error("peer closed the connection: {0}")]
    ConnectionClosed(TransportError),
    /// The peer's application closed the connection.
    #[error("peer application closed the connection (code {code}): {reason}")]
    ApplicationClosed {
        /// Application error code.
        code: u64,
        /// Reason phrase (lossily decoded).
        reason: String,
    },
    /// Our application closed the connection.
    #[error("closed locally")]
    LocallyClosed,
    /// No packet arrived within the idle timeout.
    #[error("idle timeout")]
    TimedOut,
    /// The peer sent a stateless reset.
    #[error("stateless reset by peer")]
    Reset,
    /// The server does not support the version we started in: its Version Negotiation
    /// packet did not list it (RFC 9000 §6.2), and it lists no other version this client
    /// accepts to start again in (incompatible version negotiation, RFC 9368 §2.2).
    #[error("version negotiation failed: the server does not support the QUIC version we started in")]
    VersionMismatch,
    /// The handshake did not complete within
    /// [`TransportConfig::handshake_timeout`](super::TransportConfig::handshake_timeout).
    #[error("{}", if *peer_answered { "handshake did not complete in time" } else { "no answer from the peer" })]
    HandshakeTimeout {
        /// A packet from the peer was processed (the client learnt the server's connection
        /// ID): the peer is there but the handshake stalled. `false`: nothing came back.
        peer_answered: bool,
    },
}

/// Something the application should know about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed: streams may carry 1-RTT data.
    Connected,
    /// The handshake is confirmed (RFC 9001 §4.1.2).
    HandshakeConfirmed,
    /// A stream changed state.
    Stream(StreamEvent),
    /// A multipath path changed state.
    Path(PathEvent),
    /// The connection is closed; no more data will be exchanged.
    ConnectionLost(ConnectionError),
    /// The connection is fully drained and may be dropped.
    Drained,
    /// Datagrams from the peer (RFC 9221) wait to be read with
    /// [`Connection::recv_datagram`](super::Connection::recv_datagram): raised when the
    /// receive queue stops being empty.
    DatagramReceived,
}

/// Connection-wide counters.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ConnectionStats {
    /// UDP datagrams sent.
    pub tx_datagrams: u64,
    /// UDP datagrams received.
    pub rx_datagrams: u64,
    /// Key updates completed (either side initiated).
    pub key_updates: u64,
    /// Packets dropped because they could not be decrypted or parsed.
    pub dropped_packets: u64,
    /// STREAM chunks copied from a slow path onto a faster one (multipath reinjection).
    pub reinjected_chunks: u64,
    /// Copies of STREAM chunks (reinjected or sent redundantly; counted per packet, as a
    /// chunk may be copied in pieces) whose acknowledgement acknowledged bytes not
    /// acknowledged before: they arrived first.
    pub copies_acked_first: u64,
    /// Copies of STREAM chunks acknowledged after all their bytes were: the original
    /// arrived first and the copy was sent for nothing.
    pub copies_acked_late: u64,
    /// PATHS_BLOCKED frames sent (we wanted a path ID beyond the peer's MAX_PATH_ID).
    pub paths_blocked_sent: u64,
    /// PATHS_BLOCKED frames received.
    pub paths_blocked_received: u64,
    /// PATH_CIDS_BLOCKED frames sent (the peer had issued no CID for a path ID we wanted).
    pub path_cids_blocked_sent: u64,
    /// PATH_CIDS_BLOCKED frames received.
    pub path_cids_blocked_received: u64,
    /// Per-path counters.
    pub paths: Vec<PathStats>,
    /// DATAGRAM counters (RFC 9221), for the connection and per path.
    pub datagrams: super::DatagramStats,
}

/// What happened to a path (RFC 10069 §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathEvent {
    /// Multipath was negotiated and a path ID with connection IDs on both sides is free:
    /// the client may call `open_path`.
    NewPathAllowed,
    /// A path was opened: by us (`open_path`) or by the peer (a packet on a new path ID).
    Opened {
        /// Path ID.
        id: u64,
        /// The peer's address on the path.
        remote: std::net::SocketAddr,
    },
    /// The path passed validation (RFC 9000 §8.2) and carries application data.
    Validated {
        /// Path ID.
        id: u64,
    },
    /// The peer advised a status for one of our sending directions (PATH_STATUS_*).
    StatusChanged {
        /// Path ID.
        id: u64,
        /// The peer asked us not to use the path while another one works.
        backup: bool,
    },
    /// A retransmission timeout fired with no sign of life since: the path is not
    /// scheduled until it answers.
    PotentiallyFailed {
        /// Path ID.
        id: u64,
    },
    /// A potentially failed path answered again.
    Recovered {
        /// Path ID.
        id: u64,
    },
    /// The path was abandoned (PATH_ABANDON sent or received); nothing more is sent on it.
    Abandoned {
        /// Path ID.
        id: u64,
        /// Error code of the PATH_ABANDON.
        error_code: u64,
        /// The peer abandoned it (else we did).
        by_peer: bool,
    },
    /// The path's state was discarded (3 PTO after abandonment).
    Closed {
        /// Path ID.
        id: u64,
    },
}

/// Why a path operation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The peer did not offer multipath, or the handshake is not complete.
    #[error("multipath is not negotiated")]
    MultipathNotNegotiated,
    /// Only the client opens paths (RFC 10069 §3).
    #[error("only the client opens paths")]
    ServerCannotOpen,
    /// Every path ID allowed by both sides is used (the peer was sent PATHS_BLOCKED).
    #[error("no path ID available (the peer's MAX_PATH_ID limit)")]
    NoPathId,
    /// The peer has not issued a connection ID for the next path ID yet, or none of ours
    /// for it has been sent yet (the peer could not answer on the path). Transient: a
    /// [`PathEvent::NewPathAllowed`] follows when it can be opened.
    #[error("no connection ID for the next path ID")]
    NoConnectionId,
    /// The configured maximum number of paths is reached.
    #[error("too many paths")]
    TooManyPaths,
    /// No such path, or it is already abandoned.
    #[error("unknown or abandoned path")]
    UnknownPath,
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
    /// The server sent disable_active_migration: no new path to its handshake address.
    #[error("the peer disabled migration to its handshake address")]
    MigrationDisabled,
    /// Migration waits for the handshake to be confirmed (RFC 9000 §9).
    #[error("the handshake is not confirmed yet")]
    HandshakeNotConfirmed,
    /// With multipath, moving is opening a path from the new address and abandoning the
    /// old one ([`crate::conn::Connection::open_path`], `abandon_path`).
    #[error("multipath is negotiated: open a path from the new address instead")]
    MultipathNegotiated,
}

/// The status one endpoint advises the other to use for a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PathStatus {
    /// Use it as the scheduler sees fit.
    #[default]
    Available,
    /// Use it only when no available path works.
    Backup,
}
