//! NEW_CONNECTION_ID / RETIRE_CONNECTION_ID (RFC 9000 §19.15-16) and their multipath forms
//! PATH_NEW_CONNECTION_ID (0x3e78) / PATH_RETIRE_CONNECTION_ID (0x3e79).

use super::{arr, frame_type as ft, take, vi, Frame};
use crate::cid::{ConnectionId, MAX_CID_LEN};
use crate::coding::{varint_len, write_varint, Reader};
use crate::error::TransportError;

/// A NEW_CONNECTION_ID frame, or PATH_NEW_CONNECTION_ID when `path_id` is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewConnectionId {
    /// Path the connection ID is issued for (multipath only).
    pub path_id: Option<u64>,
    /// Sequence number of the connection ID.
    pub seq: u64,
    /// Connection IDs with lower sequence numbers are to be retired.
    pub retire_prior_to: u64,
    /// The new connection ID (1 to 20 bytes).
    pub cid: ConnectionId,
    /// Stateless reset token for the connection ID.
    pub reset_token: [u8; 16],
}

impl NewConnectionId {
    pub(super) fn decode(r: &mut Reader<'_>, path: bool) -> Result<Self, TransportError> {
        let path_id = if path { Some(vi(r)?) } else { None };
        let seq = vi(r)?;
        let retire_prior_to = vi(r)?;
        // RFC 9000 §19.15: Retire Prior To greater than Sequence Number MUST be a
        // FRAME_ENCODING_ERROR.
        if retire_prior_to > seq {
            return Err(TransportError::frame_encoding("retire_prior_to above sequence number"));
        }
        let len = r.u8().map_err(|_| super::truncated())?;
        // RFC 9000 §19.15: a length below 1 or above 20 MUST be a FRAME_ENCODING_ERROR.
        if len == 0 || usize::from(len) > MAX_CID_LEN {
            return Err(TransportError::frame_encoding("invalid connection ID length"));
        }
        let cid = ConnectionId::new(take(r, u64::from(len))?);
        let reset_token = arr(r)?;
        Ok(Self { path_id, seq, retire_prior_to, cid, reset_token })
    }

    /// Wire type: 0x18, or 0x3e78 with a path ID.
    pub fn ty(&self) -> u64 {
        if self.path_id.is_some() {
            ft::PATH_NEW_CONNECTION_ID
        } else {
            ft::NEW_CONNECTION_ID
        }
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        write_varint(out, self.ty());
        if let Some(p) = self.path_id {
            write_varint(out, p);
        }
        write_varint(out, self.seq);
        write_varint(out, self.retire_prior_to);
        out.push(self.cid.len() as u8);
        out.extend_from_slice(&self.cid);
        out.extend_from_slice(&self.reset_token);
    }

    pub(super) fn encoded_len(&self) -> usize {
        varint_len(self.ty())
            + self.path_id.map_or(0, varint_len)
            + varint_len(self.seq)
            + varint_len(self.retire_prior_to)
            + 1
            + self.cid.len()
            + 16
    }
}

pub(super) fn decode_retire<'a>(ty: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, TransportError> {
    let path_id = if ty == ft::PATH_RETIRE_CONNECTION_ID { Some(vi(r)?) } else { None };
    Ok(Frame::RetireConnectionId { path_id, seq: vi(r)? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TransportErrorCode;

    fn dec(b: &[u8]) -> Result<Frame<'_>, TransportError> {
        Frame::decode(&mut Reader::new(b))
    }

    #[test]
    fn known_encodings() {
        let n = NewConnectionId {
            path_id: None,
            seq: 2,
            retire_prior_to: 1,
            cid: ConnectionId::new(&[0xaa, 0xbb]),
            reset_token: [7; 16],
        };
        let mut out = Vec::new();
        Frame::NewConnectionId(n).encode(&mut out);
        let mut want = vec![0x18, 2, 1, 2, 0xaa, 0xbb];
        want.extend_from_slice(&[7; 16]);
        assert_eq!(out, want);
        assert_eq!(dec(&out).unwrap(), Frame::NewConnectionId(n));

        let p = NewConnectionId { path_id: Some(3), ..n };
        out.clear();
        Frame::NewConnectionId(p).encode(&mut out);
        let mut want = vec![0x7e, 0x78, 3, 2, 1, 2, 0xaa, 0xbb];
        want.extend_from_slice(&[7; 16]);
        assert_eq!(out, want);
        assert_eq!(dec(&out).unwrap(), Frame::NewConnectionId(p));

        assert_eq!(dec(&[0x19, 5]).unwrap(), Frame::RetireConnectionId { path_id: None, seq: 5 });
        assert_eq!(dec(&[0x7e, 0x79, 1, 5]).unwrap(), Frame::RetireConnectionId { path_id: Some(1), seq: 5 });
    }

    #[test]
    fn invalid_fields() {
        let tail = [0u8; 40];
        let cases: [(&[u8], u64); 5] = [
            (&[0x18, 1, 0, 0], 0x18),            // length 0
            (&[0x18, 1, 0, 21], 0x18),           // length 21
            (&[0x18, 1, 2, 4], 0x18),            // retire_prior_to > seq
            (&[0x7e, 0x78, 0, 1, 0, 0], 0x3e78), // length 0 on the path form
            (&[0x7e, 0x78, 0, 1, 2, 4], 0x3e78), // retire_prior_to > seq on the path form
        ];
        for (head, ty) in cases {
            let b = [head, &tail[..]].concat();
            let e = dec(&b).unwrap_err();
            assert_eq!((e.code, e.frame_type), (TransportErrorCode::FRAME_ENCODING_ERROR, Some(ty)), "{head:?}");
        }
    }
}
