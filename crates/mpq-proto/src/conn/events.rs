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
    /// The server does not support our version.
    #[error("version negotiation failed")]
    VersionMismatch,
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
    /// The connection is closed; no more data will be exchanged.
    ConnectionLost(ConnectionError),
    /// The connection is fully drained and may be dropped.
    Drained,
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
    /// Per-path counters.
    pub paths: Vec<PathStats>,
}
