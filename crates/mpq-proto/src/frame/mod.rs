//! QUIC frames (RFC 9000 §19, RFC 9221 §4, RFC 10069 §4): zero-copy
//! decoding, encoding, and the per-level permission table (RFC 9000 §12.4, Table 3).
//!
//! Decoding borrows payload bytes (STREAM/CRYPTO data, tokens, reasons, ACK ranges) from the
//! packet buffer; nothing is allocated from peer-controlled lengths. Every decoding failure is
//! a [`TransportError`] carrying the offending frame type.

use std::fmt;

use crate::coding::{varint_len, write_varint, Reader};
use crate::error::TransportError;
use crate::types::{Dir, Level, StreamId};

mod ack;
mod close;
mod conn_id;
mod flow;
pub mod frame_type;
mod misc;
mod multipath;
mod stream;
#[cfg(test)]
mod tests;

pub use ack::{ack_encoded_len, encode_ack, encode_ack_bounded, AckFrame, AckIter, EcnCounts, OwnedAckFrame};
pub use close::ConnectionClose;
pub use conn_id::NewConnectionId;
pub use misc::{datagram_header_len, encode_datagram_header};
pub use stream::{
    crypto_header_len, encode_crypto_header, encode_stream_header, stream_header_len, StreamFrame,
    MAX_CRYPTO_HEADER_LEN, MAX_STREAM_HEADER_LEN,
};

use frame_type as ft;

/// Largest stream count MAX_STREAMS / STREAMS_BLOCKED may carry (RFC 9000 §19.11, §19.14).
pub const MAX_STREAM_COUNT: u64 = 1 << 60;

/// One decoded QUIC frame, borrowing its variable-length fields from the packet payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A run of PADDING bytes; consecutive 0x00 bytes collapse into one frame (RFC 9000 §19.1).
    Padding {
        /// Number of padding bytes (at least 1 when decoded).
        len: usize,
    },
    /// PING (RFC 9000 §19.2).
    Ping,
    /// ACK (0x02/0x03) or, with `path_id` set, multipath PATH_ACK (0x3e/0x3f).
    Ack(AckFrame<'a>),
    /// RESET_STREAM (RFC 9000 §19.4).
    ResetStream {
        /// The stream being reset.
        id: StreamId,
        /// Application error code.
        error_code: u64,
        /// Final size of the stream.
        final_size: u64,
    },
    /// STOP_SENDING (RFC 9000 §19.5).
    StopSending {
        /// The stream.
        id: StreamId,
        /// Application error code.
        error_code: u64,
    },
    /// CRYPTO (RFC 9000 §19.6).
    Crypto {
        /// Byte offset of `data` in the crypto stream of this level.
        offset: u64,
        /// Handshake bytes.
        data: &'a [u8],
    },
    /// NEW_TOKEN (RFC 9000 §19.7).
    NewToken {
        /// The (non-empty) address validation token.
        token: &'a [u8],
    },
    /// STREAM (0x08..=0x0f, RFC 9000 §19.8).
    Stream {
        /// The stream.
        id: StreamId,
        /// Byte offset of `data` in the stream.
        offset: u64,
        /// True if this frame ends the stream.
        fin: bool,
        /// Stream bytes.
        data: &'a [u8],
    },
    /// MAX_DATA (RFC 9000 §19.9).
    MaxData(u64),
    /// MAX_STREAM_DATA (RFC 9000 §19.10).
    MaxStreamData {
        /// The stream.
        id: StreamId,
        /// New limit in bytes.
        max: u64,
    },
    /// MAX_STREAMS (RFC 9000 §19.11).
    MaxStreams {
        /// Which kind of stream the limit applies to.
        dir: Dir,
        /// Cumulative stream count (at most 2^60).
        count: u64,
    },
    /// DATA_BLOCKED (RFC 9000 §19.12).
    DataBlocked(u64),
    /// STREAM_DATA_BLOCKED (RFC 9000 §19.13).
    StreamDataBlocked {
        /// The stream.
        id: StreamId,
        /// The limit the sender is blocked at.
        limit: u64,
    },
    /// STREAMS_BLOCKED (RFC 9000 §19.14).
    StreamsBlocked {
        /// Which kind of stream.
        dir: Dir,
        /// The stream limit the sender is blocked at (at most 2^60).
        limit: u64,
    },
    /// NEW_CONNECTION_ID (0x18) or PATH_NEW_CONNECTION_ID (0x3e78, `path_id` set).
    NewConnectionId(NewConnectionId),
    /// RETIRE_CONNECTION_ID (0x19) or PATH_RETIRE_CONNECTION_ID (0x3e79, `path_id` set).
    RetireConnectionId {
        /// Path the sequence number belongs to (multipath only).
        path_id: Option<u64>,
        /// Sequence number of the connection ID being retired.
        seq: u64,
    },
    /// PATH_CHALLENGE (RFC 9000 §19.17).
    PathChallenge([u8; 8]),
    /// PATH_RESPONSE (RFC 9000 §19.18).
    PathResponse([u8; 8]),
    /// CONNECTION_CLOSE: transport (0x1c) when `frame_type` is Some, application (0x1d) otherwise.
    ConnectionClose(ConnectionClose<'a>),
    /// HANDSHAKE_DONE (RFC 9000 §19.20).
    HandshakeDone,
    /// DATAGRAM (0x30/0x31, RFC 9221 §4).
    Datagram {
        /// The datagram payload.
        data: &'a [u8],
    },
    /// PATH_ABANDON (0x3e75).
    PathAbandon {
        /// The path being abandoned.
        path_id: u64,
        /// Application protocol error code (or multipath error code).
        error_code: u64,
    },
    /// PATH_STATUS_BACKUP (0x3e76, `backup` true) / PATH_STATUS_AVAILABLE (0x3e77).
    PathStatus {
        /// The path.
        path_id: u64,
        /// Path status sequence number; only the highest one received counts.
        seq: u64,
        /// True for backup, false for available.
        backup: bool,
    },
    /// MAX_PATH_ID (0x3e7a).
    MaxPathId(u64),
    /// PATHS_BLOCKED (0x3e7b), carrying the maximum path ID the sender is blocked at.
    PathsBlocked(u64),
    /// PATH_CIDS_BLOCKED (0x3e7c).
    PathCidsBlocked {
        /// The path lacking connection IDs.
        path_id: u64,
        /// The next sequence number the sender expects.
        next_seq: u64,
    },
}

// ---- decoding helpers shared by the family modules ----

fn truncated() -> TransportError {
    TransportError::frame_encoding("truncated frame")
}

/// Reads a varint; truncation is FRAME_ENCODING_ERROR.
fn vi(r: &mut Reader<'_>) -> Result<u64, TransportError> {
    r.varint().map_err(|_| truncated())
}

/// Reads `n` bytes (`n` from the wire); truncation is FRAME_ENCODING_ERROR.
fn take<'a>(r: &mut Reader<'a>, n: u64) -> Result<&'a [u8], TransportError> {
    r.bytes(usize::try_from(n).unwrap_or(usize::MAX)).map_err(|_| truncated())
}

/// Reads a fixed-size array; truncation is FRAME_ENCODING_ERROR.
fn arr<const N: usize>(r: &mut Reader<'_>) -> Result<[u8; N], TransportError> {
    r.array::<N>().map_err(|_| truncated())
}

/// The stream direction a MAX_STREAMS/STREAMS_BLOCKED type's low bit encodes.
fn dir_of(ty: u64) -> Dir {
    if ty & 1 == 0 {
        Dir::Bi
    } else {
        Dir::Uni
    }
}

fn dir_bit(dir: Dir) -> u64 {
    match dir {
        Dir::Bi => 0,
        Dir::Uni => 1,
    }
}

impl<'a> Frame<'a> {
    /// Decodes one frame from `r`.
    ///
    /// Errors are FRAME_ENCODING_ERROR (truncated or malformed frames, unknown frame types,
    /// RFC 9000 §12.4) with the frame type recorded, except a frame type that is not
    /// minimally encoded, which is PROTOCOL_VIOLATION (RFC 9000 §12.4).
    pub fn decode(r: &mut Reader<'a>) -> Result<Frame<'a>, TransportError> {
        let before = r.remaining();
        let ty = r.varint().map_err(|_| TransportError::frame_encoding("truncated frame type"))?;
        // RFC 9000 §12.4: the frame type MUST use the shortest encoding; an endpoint MAY
        // treat a longer one as PROTOCOL_VIOLATION.
        if before - r.remaining() != varint_len(ty) {
            return Err(TransportError::protocol_violation("frame type not minimally encoded").with_frame(ty));
        }
        Self::decode_body(ty, r).map_err(|e| e.with_frame(ty))
    }

    fn decode_body(ty: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, TransportError> {
        Ok(match ty {
            ft::PADDING => misc::decode_padding(r),
            ft::PING => Frame::Ping,
            ft::ACK | ft::ACK_ECN => Frame::Ack(AckFrame::decode(r, false, ty == ft::ACK_ECN)?),
            ft::PATH_ACK | ft::PATH_ACK_ECN => Frame::Ack(AckFrame::decode(r, true, ty == ft::PATH_ACK_ECN)?),
            ft::RESET_STREAM | ft::STOP_SENDING => flow::decode_reset_or_stop(ty, r)?,
            ft::CRYPTO => stream::decode_crypto(r)?,
            ft::NEW_TOKEN => misc::decode_new_token(r)?,
            ft::STREAM..=ft::STREAM_MAX => stream::decode_stream(ty, r)?,
            ft::MAX_DATA..=ft::STREAMS_BLOCKED_UNI => flow::decode(ty, r)?,
            ft::NEW_CONNECTION_ID | ft::PATH_NEW_CONNECTION_ID => {
                Frame::NewConnectionId(NewConnectionId::decode(r, ty == ft::PATH_NEW_CONNECTION_ID)?)
            }
            ft::RETIRE_CONNECTION_ID | ft::PATH_RETIRE_CONNECTION_ID => conn_id::decode_retire(ty, r)?,
            ft::PATH_CHALLENGE => Frame::PathChallenge(arr(r)?),
            ft::PATH_RESPONSE => Frame::PathResponse(arr(r)?),
            ft::CONNECTION_CLOSE | ft::APPLICATION_CLOSE => {
                Frame::ConnectionClose(ConnectionClose::decode(r, ty == ft::CONNECTION_CLOSE)?)
            }
            ft::HANDSHAKE_DONE => Frame::HandshakeDone,
            ft::DATAGRAM | ft::DATAGRAM_LEN => misc::decode_datagram(ty, r)?,
            ft::PATH_ABANDON..=ft::PATH_STATUS_AVAILABLE | ft::MAX_PATH_ID..=ft::PATH_CIDS_BLOCKED => {
                multipath::decode(ty, r)?
            }
            _ => return Err(TransportError::frame_encoding("unknown frame type")),
        })
    }

    /// The wire type this frame has when written by [`Frame::encode`].
    ///
    /// STREAM frames always carry the LEN bit and DATAGRAM frames the length form (0x31), so a
    /// decoded frame that used the implicit-length form reports the explicit-length type.
    pub fn ty(&self) -> u64 {
        match self {
            Frame::Padding { .. } => ft::PADDING,
            Frame::Ping => ft::PING,
            Frame::Ack(a) => a.ty(),
            Frame::ResetStream { .. } => ft::RESET_STREAM,
            Frame::StopSending { .. } => ft::STOP_SENDING,
            Frame::Crypto { .. } => ft::CRYPTO,
            Frame::NewToken { .. } => ft::NEW_TOKEN,
            Frame::Stream { offset, fin, .. } => stream::stream_type(*offset, true, *fin),
            Frame::MaxData(_) => ft::MAX_DATA,
            Frame::MaxStreamData { .. } => ft::MAX_STREAM_DATA,
            Frame::MaxStreams { dir, .. } => ft::MAX_STREAMS_BIDI | dir_bit(*dir),
            Frame::DataBlocked(_) => ft::DATA_BLOCKED,
            Frame::StreamDataBlocked { .. } => ft::STREAM_DATA_BLOCKED,
            Frame::StreamsBlocked { dir, .. } => ft::STREAMS_BLOCKED_BIDI | dir_bit(*dir),
            Frame::NewConnectionId(n) => n.ty(),
            Frame::RetireConnectionId { path_id: None, .. } => ft::RETIRE_CONNECTION_ID,
            Frame::RetireConnectionId { path_id: Some(_), .. } => ft::PATH_RETIRE_CONNECTION_ID,
            Frame::PathChallenge(_) => ft::PATH_CHALLENGE,
            Frame::PathResponse(_) => ft::PATH_RESPONSE,
            Frame::ConnectionClose(c) => c.ty(),
            Frame::HandshakeDone => ft::HANDSHAKE_DONE,
            Frame::Datagram { .. } => ft::DATAGRAM_LEN,
            Frame::PathAbandon { .. } => ft::PATH_ABANDON,
            Frame::PathStatus { backup: true, .. } => ft::PATH_STATUS_BACKUP,
            Frame::PathStatus { backup: false, .. } => ft::PATH_STATUS_AVAILABLE,
            Frame::MaxPathId(_) => ft::MAX_PATH_ID,
            Frame::PathsBlocked(_) => ft::PATHS_BLOCKED,
            Frame::PathCidsBlocked { .. } => ft::PATH_CIDS_BLOCKED,
        }
    }

    /// True for every frame except PADDING, ACK/PATH_ACK and CONNECTION_CLOSE
    /// (RFC 9002 §2, RFC 10069).
    pub fn is_ack_eliciting(&self) -> bool {
        !matches!(self, Frame::Padding { .. } | Frame::Ack(_) | Frame::ConnectionClose(_))
    }

    /// True for probing frames: PADDING, PATH_CHALLENGE, PATH_RESPONSE and NEW_CONNECTION_ID
    /// (RFC 9000 §9.1). PATH_NEW_CONNECTION_ID is treated like NEW_CONNECTION_ID.
    pub fn is_probing(&self) -> bool {
        matches!(
            self,
            Frame::Padding { .. } | Frame::PathChallenge(_) | Frame::PathResponse(_) | Frame::NewConnectionId(_)
        )
    }

    /// Whether this frame may appear in a packet of `level` (RFC 9000 §12.4, Table 3;
    /// RFC 9000 §17.2.3 for 0-RTT; RFC 9221 §4; multipath frames only in 1-RTT).
    ///
    /// A frame in a packet type that does not permit it MUST be treated as a connection
    /// error of type PROTOCOL_VIOLATION (RFC 9000 §12.4).
    pub fn allowed_in(&self, level: Level) -> bool {
        use Level::*;
        let app = matches!(level, ZeroRtt | OneRtt);
        match self {
            Frame::Padding { .. } | Frame::Ping => true,
            Frame::Ack(a) if a.path_id.is_some() => level == OneRtt,
            Frame::Ack(_) | Frame::Crypto { .. } => level != ZeroRtt,
            Frame::ConnectionClose(c) => c.frame_type.is_some() || app,
            Frame::NewToken { .. }
            | Frame::HandshakeDone
            | Frame::PathResponse(_)
            | Frame::RetireConnectionId { .. } => level == OneRtt,
            Frame::NewConnectionId(n) if n.path_id.is_some() => level == OneRtt,
            Frame::PathAbandon { .. }
            | Frame::PathStatus { .. }
            | Frame::MaxPathId(_)
            | Frame::PathsBlocked(_)
            | Frame::PathCidsBlocked { .. } => level == OneRtt,
            Frame::ResetStream { .. }
            | Frame::StopSending { .. }
            | Frame::Stream { .. }
            | Frame::MaxData(_)
            | Frame::MaxStreamData { .. }
            | Frame::MaxStreams { .. }
            | Frame::DataBlocked(_)
            | Frame::StreamDataBlocked { .. }
            | Frame::StreamsBlocked { .. }
            | Frame::NewConnectionId(_)
            | Frame::PathChallenge(_)
            | Frame::Datagram { .. } => app,
        }
    }

    /// Frames made only of varint fields after the type: (fields, count).
    fn varint_fields(&self) -> Option<([u64; 3], usize)> {
        Some(match *self {
            Frame::Ping | Frame::HandshakeDone => ([0; 3], 0),
            Frame::ResetStream { id, error_code, final_size } => ([id.0, error_code, final_size], 3),
            Frame::StopSending { id, error_code } => ([id.0, error_code, 0], 2),
            Frame::MaxData(v) | Frame::DataBlocked(v) | Frame::MaxPathId(v) | Frame::PathsBlocked(v) => ([v, 0, 0], 1),
            Frame::MaxStreams { count: v, .. } | Frame::StreamsBlocked { limit: v, .. } => ([v, 0, 0], 1),
            Frame::MaxStreamData { id, max: v } | Frame::StreamDataBlocked { id, limit: v } => ([id.0, v, 0], 2),
            Frame::RetireConnectionId { path_id: None, seq } => ([seq, 0, 0], 1),
            Frame::RetireConnectionId { path_id: Some(p), seq } => ([p, seq, 0], 2),
            Frame::PathAbandon { path_id, error_code: v }
            | Frame::PathStatus { path_id, seq: v, .. }
            | Frame::PathCidsBlocked { path_id, next_seq: v } => ([path_id, v, 0], 2),
            _ => return None,
        })
    }

    /// Appends the frame's wire encoding to `out`.
    ///
    /// STREAM frames are written with an explicit length and DATAGRAM as type 0x31, so the
    /// frame can be followed by others. Values are not validated; in debug builds, a field
    /// above 2^62-1 panics.
    pub fn encode(&self, out: &mut Vec<u8>) {
        if let Some((vals, n)) = self.varint_fields() {
            write_varint(out, self.ty());
            for v in &vals[..n] {
                write_varint(out, *v);
            }
            return;
        }
        match self {
            Frame::Padding { len } => out.resize(out.len() + len, 0),
            Frame::Ack(a) => a.encode(out),
            Frame::Crypto { offset, data } => {
                encode_crypto_header(out, *offset, data.len());
                out.extend_from_slice(data);
            }
            Frame::NewToken { token } => {
                write_varint(out, ft::NEW_TOKEN);
                write_varint(out, token.len() as u64);
                out.extend_from_slice(token);
            }
            Frame::Stream { id, offset, fin, data } => {
                encode_stream_header(out, *id, *offset, Some(data.len()), *fin);
                out.extend_from_slice(data);
            }
            Frame::NewConnectionId(n) => n.encode(out),
            Frame::PathChallenge(d) | Frame::PathResponse(d) => {
                write_varint(out, self.ty());
                out.extend_from_slice(d);
            }
            Frame::ConnectionClose(c) => c.encode(out),
            Frame::Datagram { data } => {
                encode_datagram_header(out, Some(data.len()));
                out.extend_from_slice(data);
            }
            _ => unreachable!("varint-only frames are handled above"),
        }
    }

    /// Number of bytes [`Frame::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        if let Some((vals, n)) = self.varint_fields() {
            return varint_len(self.ty()) + vals[..n].iter().map(|v| varint_len(*v)).sum::<usize>();
        }
        match self {
            Frame::Padding { len } => *len,
            Frame::Ack(a) => a.encoded_len(),
            Frame::Crypto { offset, data } => crypto_header_len(*offset, data.len()) + data.len(),
            Frame::NewToken { token } => 1 + varint_len(token.len() as u64) + token.len(),
            Frame::Stream { id, offset, data, .. } => stream_header_len(*id, *offset, Some(data.len())) + data.len(),
            Frame::NewConnectionId(n) => n.encoded_len(),
            Frame::PathChallenge(_) | Frame::PathResponse(_) => 9,
            Frame::ConnectionClose(c) => c.encoded_len(),
            Frame::Datagram { data } => datagram_header_len(Some(data.len())) + data.len(),
            _ => unreachable!("varint-only frames are handled above"),
        }
    }
}

impl fmt::Display for Frame<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Frame::Stream { id, offset, fin, data } => {
                write!(f, "STREAM id={id} off={offset} len={} fin={fin}", data.len())
            }
            Frame::Crypto { offset, data } => write!(f, "CRYPTO off={offset} len={}", data.len()),
            Frame::Datagram { data } => write!(f, "DATAGRAM len={}", data.len()),
            other => write!(f, "{other:?}"),
        }
    }
}

/// Iterates over the frames of a decrypted packet payload.
///
/// Yields `Err` at most once, for the first frame that fails to decode, and then stops.
#[derive(Debug, Clone)]
pub struct FrameIter<'a> {
    r: Reader<'a>,
    failed: bool,
}

/// Iterates over the frames in `payload`; see [`FrameIter`].
pub fn iter_frames(payload: &[u8]) -> FrameIter<'_> {
    FrameIter { r: Reader::new(payload), failed: false }
}

impl<'a> FrameIter<'a> {
    /// Bytes not yet decoded.
    pub fn remaining(&self) -> usize {
        self.r.remaining()
    }
}

impl<'a> Iterator for FrameIter<'a> {
    type Item = Result<Frame<'a>, TransportError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.r.is_empty() {
            return None;
        }
        let res = Frame::decode(&mut self.r);
        self.failed = res.is_err();
        Some(res)
    }
}

impl std::iter::FusedIterator for FrameIter<'_> {}
