//! PADDING, NEW_TOKEN, and DATAGRAM (RFC 9000 §19.1, §19.7; RFC 9221 §4). PING,
//! PATH_CHALLENGE/PATH_RESPONSE and HANDSHAKE_DONE need no code of their own.

use super::{frame_type as ft, take, vi, Frame};
use crate::coding::{varint_len, write_varint, Reader};
use crate::error::TransportError;

/// Consumes the run of 0x00 bytes after a PADDING type byte.
pub(super) fn decode_padding<'a>(r: &mut Reader<'a>) -> Frame<'a> {
    let n = r.peek_rest().iter().take_while(|b| **b == 0).count();
    // Cannot fail: the bytes are there.
    let _ = r.bytes(n);
    Frame::Padding { len: n + 1 }
}

pub(super) fn decode_new_token<'a>(r: &mut Reader<'a>) -> Result<Frame<'a>, TransportError> {
    let len = vi(r)?;
    // RFC 9000 §19.7: an empty token MUST be treated as a FRAME_ENCODING_ERROR.
    if len == 0 {
        return Err(TransportError::frame_encoding("empty NEW_TOKEN"));
    }
    Ok(Frame::NewToken { token: take(r, len)? })
}

pub(super) fn decode_datagram<'a>(ty: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, TransportError> {
    let data = if ty == ft::DATAGRAM_LEN {
        let len = vi(r)?;
        take(r, len)?
    } else {
        r.rest()
    };
    Ok(Frame::Datagram { data })
}

/// Writes a DATAGRAM frame header (RFC 9221 §4); the caller appends the payload.
///
/// With `len` = `None` the type is 0x30 and the frame extends to the end of the packet.
pub fn encode_datagram_header(out: &mut Vec<u8>, len: Option<usize>) {
    match len {
        Some(len) => {
            write_varint(out, ft::DATAGRAM_LEN);
            write_varint(out, len as u64);
        }
        None => write_varint(out, ft::DATAGRAM),
    }
}

/// Length of the header [`encode_datagram_header`] writes.
pub fn datagram_header_len(len: Option<usize>) -> usize {
    1 + len.map_or(0, |l| varint_len(l as u64))
}

#[cfg(test)]
mod tests {
    use super::super::iter_frames;
    use super::*;
    use crate::error::TransportErrorCode;

    #[test]
    fn padding_collapses() {
        let frames: Vec<_> = iter_frames(&[0, 0, 0, 1, 0, 0x1e]).map(Result::unwrap).collect();
        assert_eq!(
            frames,
            vec![Frame::Padding { len: 3 }, Frame::Ping, Frame::Padding { len: 1 }, Frame::HandshakeDone]
        );
        let mut out = Vec::new();
        Frame::Padding { len: 4 }.encode(&mut out);
        assert_eq!(out, [0; 4]);
    }

    #[test]
    fn token_and_datagram() {
        let mut r = Reader::new(&[0x07, 2, 0xaa, 0xbb]);
        assert_eq!(Frame::decode(&mut r).unwrap(), Frame::NewToken { token: &[0xaa, 0xbb] });
        let e = Frame::decode(&mut Reader::new(&[0x07, 0])).unwrap_err();
        assert_eq!((e.code, e.frame_type), (TransportErrorCode::FRAME_ENCODING_ERROR, Some(7)));

        assert_eq!(Frame::decode(&mut Reader::new(&[0x30, 1, 2])).unwrap(), Frame::Datagram { data: &[1, 2] });
        let mut out = Vec::new();
        Frame::Datagram { data: &[1, 2] }.encode(&mut out);
        assert_eq!(out, [0x31, 2, 1, 2]);
        assert_eq!(datagram_header_len(Some(2)), 2);
        out.clear();
        encode_datagram_header(&mut out, None);
        assert_eq!(out, [0x30]);

        let mut out = Vec::new();
        Frame::PathChallenge([1, 2, 3, 4, 5, 6, 7, 8]).encode(&mut out);
        assert_eq!(out, [0x1a, 1, 2, 3, 4, 5, 6, 7, 8]);
        let e = Frame::decode(&mut Reader::new(&out[..8])).unwrap_err();
        assert_eq!((e.code, e.frame_type), (TransportErrorCode::FRAME_ENCODING_ERROR, Some(0x1a)));
    }

    #[test]
    fn unknown_and_non_minimal_types() {
        let e = Frame::decode(&mut Reader::new(&[0x21])).unwrap_err();
        assert_eq!((e.code, e.frame_type), (TransportErrorCode::FRAME_ENCODING_ERROR, Some(0x21)));
        let e = Frame::decode(&mut Reader::new(&[0x7e, 0x7d, 0])).unwrap_err();
        assert_eq!((e.code, e.frame_type), (TransportErrorCode::FRAME_ENCODING_ERROR, Some(0x3e7d)));
        // PING encoded on two bytes.
        let e = Frame::decode(&mut Reader::new(&[0x40, 0x01])).unwrap_err();
        assert_eq!((e.code, e.frame_type), (TransportErrorCode::PROTOCOL_VIOLATION, Some(1)));
        let e = Frame::decode(&mut Reader::new(&[])).unwrap_err();
        assert_eq!(e.code, TransportErrorCode::FRAME_ENCODING_ERROR);
    }
}
