//! The API's errors.

use mpq_proto::conn::{ConnectionError, DatagramError, PathError};
use mpq_proto::stream::StreamError;

/// What can go wrong in a call of the API.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The connection is closed (by either side, an error, or the idle timeout).
    #[error("connection closed: {0}")]
    Closed(ConnectionError),
    /// The connection is gone (drained) without an error to report.
    #[error("the connection is gone")]
    Gone,
    /// A stream call failed (reset or stopped by the peer, wrong direction, closed).
    #[error("stream: {0}")]
    Stream(#[from] StreamError),
    /// A path call failed.
    #[error("path: {0}")]
    Path(#[from] PathError),
    /// A datagram was refused (not supported by the peer, too large, unknown path, or
    /// before the handshake outside 0-RTT).
    #[error("datagram: {0}")]
    Datagram(#[from] DatagramError),
    /// The connection could not be started (e.g. an invalid server name, too many
    /// connections).
    #[error("connect: {0}")]
    Connect(String),
    /// The endpoint is closed: it accepts and starts no more connections.
    #[error("the endpoint is closed")]
    EndpointClosed,
    /// An argument was refused (e.g. an unknown scheduler name); the message says what is
    /// expected.
    #[error("{0}")]
    InvalidArgument(String),
    /// A socket or thread could not be set up.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The runtime failed (one of its threads panicked, or its sockets failed): every
    /// connection of the endpoint is gone. The panic's message is on stderr.
    #[error("the endpoint's runtime failed (a runtime thread panicked or its sockets failed)")]
    RuntimeFailed,
    /// A stream's data exceeds the limit given to `read_to_end`.
    #[error("the stream holds more than {0} bytes")]
    TooLong(usize),
}

impl From<Error> for std::io::Error {
    /// For `std::io` and tokio's I/O traits: the API's error as the source of an
    /// `io::Error` of kind `Other` (an `Io` error is passed through).
    fn from(e: Error) -> Self {
        match e {
            Error::Io(e) => e,
            e => std::io::Error::other(e),
        }
    }
}
