//! CONNECTION_CLOSE frames (RFC 9000 §19.19): transport (0x1c) and application (0x1d).

use super::{frame_type as ft, take, vi};
use crate::coding::{varint_len, write_varint, Reader};
use crate::error::TransportError;

/// A CONNECTION_CLOSE frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionClose<'a> {
    /// Transport error code (0x1c) or application error code (0x1d).
    pub error_code: u64,
    /// For a transport close (0x1c), the type of the frame that triggered the error (0 if
    /// unknown); `None` for an application close (0x1d).
    pub frame_type: Option<u64>,
    /// Reason phrase; UTF-8 by convention but not validated.
    pub reason: &'a [u8],
}

impl<'a> ConnectionClose<'a> {
    pub(super) fn decode(r: &mut Reader<'a>, transport: bool) -> Result<Self, TransportError> {
        let error_code = vi(r)?;
        let frame_type = if transport { Some(vi(r)?) } else { None };
        let len = vi(r)?;
        let reason = take(r, len)?;
        Ok(Self { error_code, frame_type, reason })
    }

    /// Wire type: 0x1c (transport) or 0x1d (application).
    pub fn ty(&self) -> u64 {
        if self.frame_type.is_some() {
            ft::CONNECTION_CLOSE
        } else {
            ft::APPLICATION_CLOSE
        }
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        write_varint(out, self.ty());
        write_varint(out, self.error_code);
        if let Some(t) = self.frame_type {
            write_varint(out, t);
        }
        write_varint(out, self.reason.len() as u64);
        out.extend_from_slice(self.reason);
    }

    pub(super) fn encoded_len(&self) -> usize {
        1 + varint_len(self.error_code)
            + self.frame_type.map_or(0, varint_len)
            + varint_len(self.reason.len() as u64)
            + self.reason.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::Frame;
    use super::*;
    use crate::error::TransportErrorCode;

    #[test]
    fn known_encodings() {
        let t = ConnectionClose { error_code: 0x07, frame_type: Some(0x08), reason: b"bad" };
        let mut out = Vec::new();
        Frame::ConnectionClose(t).encode(&mut out);
        assert_eq!(out, [0x1c, 7, 8, 3, b'b', b'a', b'd']);
        assert_eq!(Frame::decode(&mut Reader::new(&out)).unwrap(), Frame::ConnectionClose(t));

        let a = ConnectionClose { error_code: 0x100, frame_type: None, reason: b"" };
        out.clear();
        Frame::ConnectionClose(a).encode(&mut out);
        assert_eq!(out, [0x1d, 0x41, 0x00, 0]);
        assert_eq!(Frame::decode(&mut Reader::new(&out)).unwrap(), Frame::ConnectionClose(a));
    }

    #[test]
    fn reason_beyond_input() {
        for b in [&[0x1c, 0, 0, 5, b'x'][..], &[0x1d, 0, 0x80, 0, 0, 1], &[0x1d, 0, 0xff, 0xff]] {
            let e = Frame::decode(&mut Reader::new(b)).unwrap_err();
            assert_eq!(e.code, TransportErrorCode::FRAME_ENCODING_ERROR);
        }
    }
}
