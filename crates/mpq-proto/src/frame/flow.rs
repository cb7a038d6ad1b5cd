//! Stream and flow control frames: RESET_STREAM, STOP_SENDING (RFC 9000 §19.4-5), MAX_DATA,
//! MAX_STREAM_DATA, MAX_STREAMS, DATA_BLOCKED, STREAM_DATA_BLOCKED and STREAMS_BLOCKED
//! (RFC 9000 §19.9-14). Encoding is shared in `Frame::encode` (varint-only frames).

use super::{dir_of, frame_type as ft, vi, Frame, MAX_STREAM_COUNT};
use crate::coding::Reader;
use crate::error::TransportError;
use crate::types::StreamId;

pub(super) fn decode_reset_or_stop<'a>(ty: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, TransportError> {
    let id = StreamId(vi(r)?);
    let error_code = vi(r)?;
    Ok(if ty == ft::RESET_STREAM {
        Frame::ResetStream { id, error_code, final_size: vi(r)? }
    } else {
        Frame::StopSending { id, error_code }
    })
}

/// Decodes types 0x10..=0x17.
pub(super) fn decode<'a>(ty: u64, r: &mut Reader<'a>) -> Result<Frame<'a>, TransportError> {
    Ok(match ty {
        ft::MAX_DATA => Frame::MaxData(vi(r)?),
        ft::MAX_STREAM_DATA => Frame::MaxStreamData { id: StreamId(vi(r)?), max: vi(r)? },
        ft::DATA_BLOCKED => Frame::DataBlocked(vi(r)?),
        ft::STREAM_DATA_BLOCKED => Frame::StreamDataBlocked { id: StreamId(vi(r)?), limit: vi(r)? },
        _ => {
            // MAX_STREAMS (0x12/0x13) or STREAMS_BLOCKED (0x16/0x17).
            let count = vi(r)?;
            // RFC 9000 §19.11 / §19.14: a count above 2^60 MUST be a FRAME_ENCODING_ERROR.
            if count > MAX_STREAM_COUNT {
                return Err(TransportError::frame_encoding("stream count above 2^60"));
            }
            let dir = dir_of(ty);
            if ty <= ft::MAX_STREAMS_UNI {
                Frame::MaxStreams { dir, count }
            } else {
                Frame::StreamsBlocked { dir, limit: count }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TransportErrorCode;
    use crate::types::Dir;

    fn dec(b: &[u8]) -> Result<Frame<'_>, TransportError> {
        Frame::decode(&mut Reader::new(b))
    }

    fn enc(f: &Frame<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        f.encode(&mut out);
        assert_eq!(out.len(), f.encoded_len());
        out
    }

    #[test]
    fn known_encodings() {
        let cases: Vec<(Frame<'static>, Vec<u8>)> = vec![
            (Frame::ResetStream { id: StreamId(4), error_code: 1, final_size: 100 }, vec![0x04, 4, 1, 0x40, 100]),
            (Frame::StopSending { id: StreamId(3), error_code: 7 }, vec![0x05, 3, 7]),
            (Frame::MaxData(0x3fff), vec![0x10, 0x7f, 0xff]),
            (Frame::MaxStreamData { id: StreamId(8), max: 16 }, vec![0x11, 8, 16]),
            (Frame::MaxStreams { dir: Dir::Bi, count: 10 }, vec![0x12, 10]),
            (Frame::MaxStreams { dir: Dir::Uni, count: 3 }, vec![0x13, 3]),
            (Frame::DataBlocked(5), vec![0x14, 5]),
            (Frame::StreamDataBlocked { id: StreamId(2), limit: 9 }, vec![0x15, 2, 9]),
            (Frame::StreamsBlocked { dir: Dir::Bi, limit: 1 }, vec![0x16, 1]),
            (Frame::StreamsBlocked { dir: Dir::Uni, limit: 2 }, vec![0x17, 2]),
        ];
        for (f, bytes) in cases {
            assert_eq!(enc(&f), bytes, "{f:?}");
            assert_eq!(dec(&bytes).unwrap(), f);
        }
    }

    #[test]
    fn stream_count_limit() {
        let mut ok = vec![0x12];
        crate::coding::write_varint(&mut ok, MAX_STREAM_COUNT);
        assert_eq!(dec(&ok).unwrap(), Frame::MaxStreams { dir: Dir::Bi, count: MAX_STREAM_COUNT });
        for ty in [0x12u8, 0x13, 0x16, 0x17] {
            let mut b = vec![ty];
            crate::coding::write_varint(&mut b, MAX_STREAM_COUNT + 1);
            let e = dec(&b).unwrap_err();
            assert_eq!((e.code, e.frame_type), (TransportErrorCode::FRAME_ENCODING_ERROR, Some(u64::from(ty))));
        }
    }
}
