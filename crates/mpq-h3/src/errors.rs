//! mpq-api's errors as the h3 traits report them.

use std::sync::Arc;

use h3::quic::{ConnectionErrorIncoming, StreamErrorIncoming};
use mpq_api::{ConnectionError, Error};
use mpq_proto::stream::StreamError;

/// A connection-level error: the peer's application close keeps its code (h3 reads HTTP/3
/// error codes from it, RFC 9114 §8.1), the idle timeout is h3's `Timeout`, the rest
/// passes through as the error it is.
pub(crate) fn connection_error(e: Error) -> ConnectionErrorIncoming {
    match e {
        Error::Closed(ConnectionError::ApplicationClosed { code, .. }) => {
            ConnectionErrorIncoming::ApplicationClose { error_code: code }
        }
        Error::Closed(ConnectionError::TimedOut) => ConnectionErrorIncoming::Timeout,
        Error::RuntimeFailed => ConnectionErrorIncoming::InternalError(e.to_string()),
        e => ConnectionErrorIncoming::Undefined(Arc::new(e)),
    }
}

/// A stream-level error: a reset or STOP_SENDING from the peer is the stream terminated
/// with the peer's code; a connection error is reported as one.
pub(crate) fn stream_error(e: Error) -> StreamErrorIncoming {
    match e {
        Error::Stream(StreamError::Reset(code) | StreamError::Stopped(code)) => {
            StreamErrorIncoming::StreamTerminated { error_code: code }
        }
        Error::Stream(e) => StreamErrorIncoming::Unknown(Box::new(e)),
        e => StreamErrorIncoming::ConnectionErrorIncoming { connection_error: connection_error(e) },
    }
}

/// mpq's stream ID as h3's (both are QUIC's 62-bit stream IDs, RFC 9000 §2.1).
pub(crate) fn h3_stream_id(id: mpq_api::StreamId) -> h3::quic::StreamId {
    // (mpq's stream IDs are below 2^62 by construction: it never opens or accepts more.)
    h3::quic::StreamId::try_from(id.0).expect("a QUIC stream ID is a 62-bit integer")
}
