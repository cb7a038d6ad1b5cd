//! Streams (RFC 9000 §2-4): send and receive buffers, reassembly, flow control with window
//! auto-tuning, and the connection-wide stream table.
//!
//! This is connection-wide state. It never encodes frames: the packet builder asks
//! [`Streams::next_stream_chunk`] for a description of the STREAM data to send and
//! [`Streams::poll_control`] for the stream and flow-control frames (as
//! [`Frame`](crate::frame::Frame) values, which the frame module encodes), and reports their
//! fate through the `on_*_acked` / `on_*_lost` methods. Received frames are decoded by the
//! connection and dispatched to the `on_*` methods.

mod chunks;
mod flow;
mod lease;
mod map;
mod reassembly;
mod recv;
mod recv_store;
mod send;
mod send_buffer;
#[cfg(test)]
mod tests;

pub use chunks::{Backing, BufferSlice};
pub use flow::{RecvCredit, SendCredit};
pub use lease::{BatchData, DataLease};
pub use map::Streams;
pub use recv::{RecvBuffer, RecvState, RecvStream};
pub use recv_store::{RecvStore, StreamData};
pub use send::{Chunk, SendBuffer, SendState, SendStream};

use crate::types::{Dir, StreamId};

/// Stream and flow-control configuration of one endpoint.
#[derive(Debug, Clone)]
pub struct StreamsConfig {
    /// Initial per-stream receive window (our initial_max_stream_data_* parameters).
    pub stream_receive_window: u64,
    /// Initial connection receive window (our initial_max_data parameter).
    pub receive_window: u64,
    /// Auto-tuning cap of a stream receive window.
    pub max_stream_window: u64,
    /// Auto-tuning cap of the connection receive window.
    pub max_connection_window: u64,
    /// Peer-initiated bidirectional streams allowed open at once.
    pub max_concurrent_bidi: u64,
    /// Peer-initiated unidirectional streams allowed open at once.
    pub max_concurrent_uni: u64,
    /// Unacknowledged bytes a stream buffers before `write` pushes back.
    pub send_buffer_limit: u64,
}

impl Default for StreamsConfig {
    fn default() -> Self {
        Self {
            stream_receive_window: 1_250_000,
            receive_window: 2_000_000,
            max_stream_window: 16 * 1024 * 1024,
            max_connection_window: 24 * 1024 * 1024,
            max_concurrent_bidi: 100,
            max_concurrent_uni: 100,
            send_buffer_limit: 8 * 1024 * 1024,
        }
    }
}

/// Values for our own stream-related transport parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalStreamParams {
    /// initial_max_data.
    pub max_data: u64,
    /// initial_max_stream_data_bidi_local.
    pub max_stream_data_bidi_local: u64,
    /// initial_max_stream_data_bidi_remote.
    pub max_stream_data_bidi_remote: u64,
    /// initial_max_stream_data_uni.
    pub max_stream_data_uni: u64,
    /// initial_max_streams_bidi.
    pub max_streams_bidi: u64,
    /// initial_max_streams_uni.
    pub max_streams_uni: u64,
}

/// A piece of stream data to send: the connection copies the bytes with
/// [`Streams::copy_stream_data`] and reports the chunk acknowledged or lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamChunk {
    /// The stream.
    pub id: StreamId,
    /// Stream offset of the first byte.
    pub offset: u64,
    /// Payload length (0 only for a FIN-only chunk).
    pub len: usize,
    /// Whether the STREAM frame carries the FIN bit.
    pub fin: bool,
}

impl StreamChunk {
    /// Extends this chunk by `next` if `next` continues it: the same stream, the bytes right
    /// after it, and no FIN before them. Returns whether it did. Acknowledging the extended
    /// chunk does what acknowledging the two did.
    pub fn absorb(&mut self, next: &StreamChunk) -> bool {
        if self.id != next.id || self.fin || self.offset.checked_add(self.len as u64) != Some(next.offset) {
            return false;
        }
        let Some(len) = self.len.checked_add(next.len) else { return false };
        self.len = len;
        self.fin = next.fin;
        true
    }
}

/// The stream chunks of one ACK's newly acknowledged packets, acknowledged to the stream
/// table a run at a time: each chunk extends the run when it continues it
/// ([`StreamChunk::absorb`]), else the run is acknowledged and a new one begins.
/// [`AckedRun::finish`] acknowledges the last run.
#[derive(Debug, Default)]
pub struct AckedRun(Option<StreamChunk>);

impl AckedRun {
    /// Adds `c`, acknowledging the run it does not continue.
    pub fn push(&mut self, streams: &mut Streams, c: &StreamChunk) {
        if !self.0.as_mut().is_some_and(|r| r.absorb(c)) {
            if let Some(r) = self.0.replace(*c) {
                streams.on_stream_chunk_acked(&r);
            }
        }
    }

    /// Acknowledges the run that is left.
    pub fn finish(&mut self, streams: &mut Streams) {
        if let Some(r) = self.0.take() {
            streams.on_stream_chunk_acked(&r);
        }
    }
}

/// Something the application should know about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEvent {
    /// The peer opened a stream (see [`Streams::accept`]).
    Opened {
        /// The stream.
        id: StreamId,
    },
    /// Data, the end of the stream or a reset can be read.
    Readable {
        /// The stream.
        id: StreamId,
    },
    /// A stream whose write was refused or shortened can take more data.
    Writable {
        /// The stream.
        id: StreamId,
    },
    /// All data and the FIN we sent were acknowledged.
    Finished {
        /// The stream.
        id: StreamId,
    },
    /// The peer sent STOP_SENDING; the stream was reset with the same code.
    Stopped {
        /// The stream.
        id: StreamId,
        /// The peer's error code.
        code: u64,
    },
    /// The peer reset the stream (RESET_STREAM).
    Reset {
        /// The stream.
        id: StreamId,
        /// The peer's error code.
        code: u64,
    },
    /// The peer raised MAX_STREAMS: [`Streams::open`] may succeed again.
    Available {
        /// Which stream type.
        dir: Dir,
    },
}

/// Result of a successful [`Streams::read`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOutcome {
    /// Bytes copied into the buffer.
    pub len: usize,
    /// The end of the stream was reached (nothing more will be read).
    pub fin: bool,
}

/// Errors of the application stream API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// The stream does not exist (never opened, or already closed), or this direction is
    /// already finished, reset or stopped by us.
    #[error("unknown or closed stream")]
    ClosedStream,
    /// The stream has no half in this direction (e.g. writing a peer's unidirectional stream).
    #[error("stream not usable in this direction")]
    WrongDirection,
    /// The peer asked us to stop sending (STOP_SENDING) with this code.
    #[error("stopped by peer (code {0})")]
    Stopped(u64),
    /// The peer reset the stream (RESET_STREAM) with this code.
    #[error("reset by peer (code {0})")]
    Reset(u64),
    /// Nothing can be read or written now; wait for a Readable / Writable event.
    #[error("blocked")]
    Blocked,
}
