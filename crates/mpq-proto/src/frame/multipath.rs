//! Multipath control frames (RFC 10069 §4): PATH_ABANDON,
//! PATH_STATUS_BACKUP / PATH_STATUS_AVAILABLE, MAX_PATH_ID, PATHS_BLOCKED and
//! PATH_CIDS_BLOCKED. PATH_ACK lives in `ack.rs`, the connection ID frames in `conn_id.rs`.
//!
//! Path IDs are carried as `u64` exactly as received; checking them against the 2^32-1
//! maximum and the negotiated limits is the connection's job.

use super::{frame_type as ft, vi, Frame};
use crate::coding::Reader;
use crate::error::TransportError;

/// Decodes 0x3e75..=0x3e77 and 0x3e7a..=0x3e7c.
pub(super) fn decode<'a>(ty: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, TransportError> {
    Ok(match ty {
        ft::PATH_ABANDON => Frame::PathAbandon { path_id: vi(r)?, error_code: vi(r)? },
        ft::PATH_STATUS_BACKUP | ft::PATH_STATUS_AVAILABLE => {
            Frame::PathStatus { path_id: vi(r)?, seq: vi(r)?, backup: ty == ft::PATH_STATUS_BACKUP }
        }
        ft::MAX_PATH_ID => Frame::MaxPathId(vi(r)?),
        ft::PATHS_BLOCKED => Frame::PathsBlocked(vi(r)?),
        ft::PATH_CIDS_BLOCKED => Frame::PathCidsBlocked { path_id: vi(r)?, next_seq: vi(r)? },
        _ => return Err(TransportError::frame_encoding("unknown frame type")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_encodings() {
        let cases: Vec<(Frame<'static>, Vec<u8>)> = vec![
            (Frame::PathAbandon { path_id: 1, error_code: 2 }, vec![0x7e, 0x75, 1, 2]),
            (Frame::PathStatus { path_id: 1, seq: 9, backup: true }, vec![0x7e, 0x76, 1, 9]),
            (Frame::PathStatus { path_id: 1, seq: 9, backup: false }, vec![0x7e, 0x77, 1, 9]),
            (Frame::MaxPathId(4), vec![0x7e, 0x7a, 4]),
            (Frame::PathsBlocked(4), vec![0x7e, 0x7b, 4]),
            (Frame::PathCidsBlocked { path_id: 2, next_seq: 3 }, vec![0x7e, 0x7c, 2, 3]),
        ];
        for (f, bytes) in cases {
            let mut out = Vec::new();
            f.encode(&mut out);
            assert_eq!(out, bytes, "{f:?}");
            assert_eq!(f.encoded_len(), bytes.len());
            assert_eq!(Frame::decode(&mut Reader::new(&bytes)).unwrap(), f);
        }
    }
}
