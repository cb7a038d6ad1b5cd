//! STREAM (RFC 9000 §19.8) and CRYPTO (RFC 9000 §19.6) frames, with header helpers for the
//! send path: write the header, then copy the payload straight into the packet.

use super::{frame_type as ft, take, vi, Frame};
use crate::coding::{varint_len, write_varint, Reader, VARINT_MAX};
use crate::error::TransportError;
use crate::types::StreamId;

const OFF_BIT: u64 = 0x04;
const LEN_BIT: u64 = 0x02;
const FIN_BIT: u64 = 0x01;

/// Worst-case STREAM frame header: type, 8-byte stream ID, offset and length.
pub const MAX_STREAM_HEADER_LEN: usize = 1 + 8 + 8 + 8;

/// Worst-case CRYPTO frame header: type, 8-byte offset and length.
pub const MAX_CRYPTO_HEADER_LEN: usize = 1 + 8 + 8;

/// The STREAM type byte for the given fields.
pub(super) fn stream_type(offset: u64, has_len: bool, fin: bool) -> u64 {
    let mut ty = ft::STREAM;
    if offset != 0 {
        ty |= OFF_BIT;
    }
    if has_len {
        ty |= LEN_BIT;
    }
    if fin {
        ty |= FIN_BIT;
    }
    ty
}

/// RFC 9000 §19.8/§19.6: offset + length MUST NOT exceed 2^62-1 (FRAME_ENCODING_ERROR).
fn check_end(offset: u64, len: usize) -> Result<(), TransportError> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= VARINT_MAX => Ok(()),
        _ => Err(TransportError::frame_encoding("data end beyond 2^62-1")),
    }
}

pub(super) fn decode_stream<'a>(ty: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, TransportError> {
    let StreamFrame { id, offset, fin, data } = StreamFrame::decode(ty, r)?;
    Ok(Frame::Stream { id, offset, fin, data })
}

/// The fields of a STREAM frame, decoded on their own: the receive path takes STREAM frames,
/// most of a bulk transfer's frames, without going through the general [`Frame`] (about
/// 100 bytes, returned through memory and copied again at each move).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamFrame<'a> {
    /// Stream ID.
    pub id: StreamId,
    /// Offset of the first byte.
    pub offset: u64,
    /// The last byte of the stream.
    pub fin: bool,
    /// The data.
    pub data: &'a [u8],
}

impl<'a> StreamFrame<'a> {
    /// True for the type bytes of STREAM frames (0x08..=0x0f, RFC 9000 §19.8): one-byte
    /// varints, so the byte is the whole, minimally encoded type.
    pub fn is_stream_type(byte: u8) -> bool {
        (ft::STREAM..=ft::STREAM_MAX).contains(&u64::from(byte))
    }

    /// Decodes the body of a STREAM frame of type `ty` (the type already read). Errors do
    /// not name the frame type yet ([`TransportError::with_frame`]).
    #[inline]
    pub fn decode(ty: u64, r: &mut Reader<'a>) -> Result<Self, TransportError> {
        let id = StreamId(vi(r)?);
        let offset = if ty & OFF_BIT != 0 { vi(r)? } else { 0 };
        let data = if ty & LEN_BIT != 0 {
            let len = vi(r)?;
            take(r, len)?
        } else {
            r.rest()
        };
        check_end(offset, data.len())?;
        Ok(Self { id, offset, fin: ty & FIN_BIT != 0, data })
    }
}

pub(super) fn decode_crypto<'a>(r: &mut Reader<'a>) -> Result<Frame<'a>, TransportError> {
    let offset = vi(r)?;
    let len = vi(r)?;
    let data = take(r, len)?;
    check_end(offset, data.len())?;
    Ok(Frame::Crypto { offset, data })
}

/// Writes a STREAM frame header; the caller appends the payload.
///
/// With `len` = `None` the LEN bit is clear and the frame extends to the end of the packet,
/// so it must be the last frame. The OFF bit is set only for a non-zero `offset`.
pub fn encode_stream_header(out: &mut Vec<u8>, id: StreamId, offset: u64, len: Option<usize>, fin: bool) {
    write_varint(out, stream_type(offset, len.is_some(), fin));
    write_varint(out, id.0);
    if offset != 0 {
        write_varint(out, offset);
    }
    if let Some(len) = len {
        write_varint(out, len as u64);
    }
}

/// Length of the header [`encode_stream_header`] writes for these fields.
pub fn stream_header_len(id: StreamId, offset: u64, len: Option<usize>) -> usize {
    1 + varint_len(id.0) + if offset != 0 { varint_len(offset) } else { 0 } + len.map_or(0, |l| varint_len(l as u64))
}

/// Writes a CRYPTO frame header for `len` bytes at `offset`; the caller appends the data.
pub fn encode_crypto_header(out: &mut Vec<u8>, offset: u64, len: usize) {
    write_varint(out, ft::CRYPTO);
    write_varint(out, offset);
    write_varint(out, len as u64);
}

/// Length of the header [`encode_crypto_header`] writes.
pub fn crypto_header_len(offset: u64, len: usize) -> usize {
    1 + varint_len(offset) + varint_len(len as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TransportErrorCode;

    fn dec(b: &[u8]) -> Result<Frame<'_>, TransportError> {
        Frame::decode(&mut Reader::new(b))
    }

    #[test]
    fn stream_forms() {
        // 0x08: no offset, no length, no fin: data runs to the end.
        assert_eq!(
            dec(&[0x08, 4, 1, 2, 3]).unwrap(),
            Frame::Stream { id: StreamId(4), offset: 0, fin: false, data: &[1, 2, 3] }
        );
        // 0x0f: offset, length, fin; trailing byte left for the next frame.
        let mut r = Reader::new(&[0x0f, 1, 0x40, 0x80, 2, 9, 9, 0x01]);
        assert_eq!(
            Frame::decode(&mut r).unwrap(),
            Frame::Stream { id: StreamId(1), offset: 128, fin: true, data: &[9, 9] }
        );
        assert_eq!(r.remaining(), 1);

        let mut out = Vec::new();
        encode_stream_header(&mut out, StreamId(1), 128, Some(2), true);
        assert_eq!(out, [0x0f, 1, 0x40, 0x80, 2]);
        assert_eq!(stream_header_len(StreamId(1), 128, Some(2)), 5);
        out.clear();
        encode_stream_header(&mut out, StreamId(4), 0, None, false);
        assert_eq!(out, [0x08, 4]);
        assert_eq!(stream_header_len(StreamId(4), 0, None), 2);
        let worst = stream_header_len(StreamId(VARINT_MAX), VARINT_MAX, Some(1 << 40));
        assert_eq!(worst, MAX_STREAM_HEADER_LEN);
    }

    #[test]
    fn crypto_form() {
        let mut out = Vec::new();
        encode_crypto_header(&mut out, 0, 3);
        out.extend_from_slice(b"abc");
        assert_eq!(out, [0x06, 0, 3, b'a', b'b', b'c']);
        assert_eq!(crypto_header_len(0, 3), 3);
        assert_eq!(dec(&out).unwrap(), Frame::Crypto { offset: 0, data: b"abc" });
        assert_eq!(crypto_header_len(VARINT_MAX, 1 << 40), MAX_CRYPTO_HEADER_LEN);
    }

    #[test]
    fn end_beyond_varint_max_is_rejected() {
        let mut out = Vec::new();
        encode_stream_header(&mut out, StreamId(0), VARINT_MAX, Some(1), false);
        out.push(0);
        let e = dec(&out).unwrap_err();
        assert_eq!((e.code, e.frame_type), (TransportErrorCode::FRAME_ENCODING_ERROR, Some(0x0e)));
        // Exactly 2^62-1 with zero bytes is fine.
        out.clear();
        encode_stream_header(&mut out, StreamId(0), VARINT_MAX, Some(0), true);
        assert!(dec(&out).is_ok());

        out.clear();
        encode_crypto_header(&mut out, VARINT_MAX, 1);
        out.push(0);
        let e = dec(&out).unwrap_err();
        assert_eq!((e.code, e.frame_type), (TransportErrorCode::FRAME_ENCODING_ERROR, Some(0x06)));
    }

    #[test]
    fn length_beyond_input_is_rejected() {
        let e = dec(&[0x0a, 0, 5, 1, 2]).unwrap_err();
        assert_eq!(e.code, TransportErrorCode::FRAME_ENCODING_ERROR);
        let e = dec(&[0x06, 0, 5, 1, 2]).unwrap_err();
        assert_eq!(e.code, TransportErrorCode::FRAME_ENCODING_ERROR);
    }
}
