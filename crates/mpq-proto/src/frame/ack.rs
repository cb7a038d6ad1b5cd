//! ACK (RFC 9000 §19.3) and multipath PATH_ACK (RFC 10069 §4.1) frames.

use std::ops::Range;

use super::{frame_type as ft, truncated, vi};
use crate::coding::{varint_len, write_varint, Reader, VARINT_MAX};
use crate::error::TransportError;
use crate::range_set::RangeSet;

/// ECN counts carried by ACK frames of type 0x03 / PATH_ACK 0x3f (RFC 9000 §19.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EcnCounts {
    /// Packets received with the ECT(0) codepoint.
    pub ect0: u64,
    /// Packets received with the ECT(1) codepoint.
    pub ect1: u64,
    /// Packets received with the ECN-CE codepoint.
    pub ce: u64,
}

impl EcnCounts {
    fn encoded_len(&self) -> usize {
        varint_len(self.ect0) + varint_len(self.ect1) + varint_len(self.ce)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        write_varint(out, self.ect0);
        write_varint(out, self.ect1);
        write_varint(out, self.ce);
    }
}

/// An [`AckFrame`] that owns its additional ranges (their validated wire form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedAckFrame {
    /// The frame with no additional ranges of its own.
    head: AckFrame<'static>,
    ranges: Vec<u8>,
}

impl OwnedAckFrame {
    /// The frame, borrowing the ranges.
    pub fn as_frame(&self) -> AckFrame<'_> {
        AckFrame { ranges: &self.ranges, ..self.head.clone() }
    }
}

/// A decoded ACK or PATH_ACK frame.
///
/// The additional ACK ranges stay in their wire form, borrowed from the packet; they are
/// fully validated at decode time, so [`AckFrame::iter`] cannot fail. Build ACK frames to
/// send with [`encode_ack`] / [`encode_ack_bounded`]. Equality compares the wire form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckFrame<'a> {
    /// Path ID for PATH_ACK; `None` for a plain ACK.
    pub path_id: Option<u64>,
    /// Largest packet number acknowledged.
    pub largest: u64,
    /// Encoded ACK delay (scale by the sender's ack_delay_exponent, RFC 9000 §19.3).
    pub delay: u64,
    /// Number of packets below `largest` in the first range.
    pub first_range: u64,
    /// ECN counts when present (frame type 0x03 / 0x3f).
    pub ecn: Option<EcnCounts>,
    range_count: u64,
    ranges: &'a [u8],
}

impl<'a> AckFrame<'a> {
    /// Decodes the body after the type. `path`: PATH_ACK; `ecn`: ECN variant.
    /// (Public to the crate for the receive path, which decodes ACK frames without the
    /// general `Frame`.)
    #[inline]
    pub(crate) fn decode(r: &mut Reader<'a>, path: bool, ecn: bool) -> Result<Self, TransportError> {
        let path_id = if path { Some(vi(r)?) } else { None };
        let largest = vi(r)?;
        let delay = vi(r)?;
        let range_count = vi(r)?;
        let first_range = vi(r)?;
        // RFC 9000 §19.3.1: a computed packet number below 0 MUST be a FRAME_ENCODING_ERROR.
        let mut smallest =
            largest.checked_sub(first_range).ok_or_else(|| TransportError::frame_encoding("ACK range below 0"))?;
        // Each additional range needs at least two bytes: bound the work before looping.
        if range_count > (r.remaining() / 2) as u64 {
            return Err(truncated());
        }
        let start = r.peek_rest();
        for _ in 0..range_count {
            let gap = vi(r)?;
            let len = vi(r)?;
            let next_largest = smallest.checked_sub(gap).and_then(|v| v.checked_sub(2));
            smallest = next_largest
                .and_then(|l| l.checked_sub(len))
                .ok_or_else(|| TransportError::frame_encoding("ACK range below 0"))?;
        }
        let ranges = &start[..start.len() - r.remaining()];
        let ecn = if ecn { Some(EcnCounts { ect0: vi(r)?, ect1: vi(r)?, ce: vi(r)? }) } else { None };
        Ok(Self { path_id, largest, delay, first_range, ecn, range_count, ranges })
    }

    /// A copy that owns its ranges (an ACK handed to another path as mail outlives the
    /// packet it came in). Its size is bounded by the frame's, thus by the packet's.
    pub fn to_owned_frame(&self) -> OwnedAckFrame {
        let head = AckFrame {
            path_id: self.path_id,
            largest: self.largest,
            delay: self.delay,
            first_range: self.first_range,
            ecn: self.ecn,
            range_count: self.range_count,
            ranges: &[],
        };
        OwnedAckFrame { head, ranges: self.ranges.to_vec() }
    }

    /// Wire type: 0x02/0x03 for ACK, 0x3e/0x3f for PATH_ACK.
    pub fn ty(&self) -> u64 {
        let base = if self.path_id.is_some() { ft::PATH_ACK } else { ft::ACK };
        base | u64::from(self.ecn.is_some())
    }

    /// Number of ACK ranges, including the first one.
    pub fn range_count(&self) -> u64 {
        self.range_count + 1
    }

    /// Smallest packet number acknowledged by the first (highest) range.
    pub fn first_smallest(&self) -> u64 {
        self.largest - self.first_range
    }

    /// Acknowledged packet numbers as half-open ranges, from highest to lowest.
    pub fn iter(&self) -> AckIter<'a> {
        AckIter {
            r: Reader::new(self.ranges),
            next: Some(self.largest - self.first_range..self.largest + 1),
            left: self.range_count,
        }
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        write_varint(out, self.ty());
        if let Some(p) = self.path_id {
            write_varint(out, p);
        }
        write_varint(out, self.largest);
        write_varint(out, self.delay);
        write_varint(out, self.range_count);
        write_varint(out, self.first_range);
        out.extend_from_slice(self.ranges);
        if let Some(e) = &self.ecn {
            e.encode(out);
        }
    }

    pub(super) fn encoded_len(&self) -> usize {
        1 + self.path_id.map_or(0, varint_len)
            + varint_len(self.largest)
            + varint_len(self.delay)
            + varint_len(self.range_count)
            + varint_len(self.first_range)
            + self.ranges.len()
            + self.ecn.as_ref().map_or(0, EcnCounts::encoded_len)
    }
}

/// Iterator over the ranges of an [`AckFrame`], highest first.
#[derive(Debug, Clone)]
pub struct AckIter<'a> {
    r: Reader<'a>,
    next: Option<Range<u64>>,
    left: u64,
}

impl Iterator for AckIter<'_> {
    type Item = Range<u64>;

    fn next(&mut self) -> Option<Range<u64>> {
        let cur = self.next.take()?;
        if self.left > 0 {
            self.left -= 1;
            // Validated at decode: none of these can fail or underflow.
            let gap = self.r.varint().ok()?;
            let len = self.r.varint().ok()?;
            let largest = cur.start.checked_sub(gap)?.checked_sub(2)?;
            self.next = Some(largest.checked_sub(len)?..largest + 1);
        }
        Some(cur)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.left).unwrap_or(usize::MAX).saturating_add(usize::from(self.next.is_some()));
        (n, Some(n))
    }
}

impl ExactSizeIterator for AckIter<'_> {}

impl std::iter::FusedIterator for AckIter<'_> {}

/// How many additional ranges (beyond the first) fit, and the total frame length.
fn plan(
    path_id: Option<u64>,
    ranges: &RangeSet,
    delay: u64,
    ecn: Option<&EcnCounts>,
    max_ranges: usize,
    max_bytes: usize,
) -> Option<(usize, usize)> {
    let mut it = ranges.iter().rev();
    let first = it.next()?;
    if max_ranges == 0 {
        return None;
    }
    let largest = first.end - 1;
    debug_assert!(largest <= VARINT_MAX);
    let base = 1
        + path_id.map_or(0, varint_len)
        + varint_len(largest)
        + varint_len(delay)
        + varint_len(largest - first.start)
        + ecn.map_or(0, EcnCounts::encoded_len);
    if base + 1 > max_bytes {
        return None;
    }
    let (mut n, mut body, mut prev_start) = (0usize, 0usize, first.start);
    for r in it.take(max_ranges - 1) {
        // RangeSet ranges are disjoint and non-adjacent, so r.end < prev_start.
        let cost = varint_len(prev_start - r.end - 1) + varint_len(r.end - 1 - r.start);
        if base + varint_len(n as u64 + 1) + body + cost > max_bytes {
            break;
        }
        body += cost;
        n += 1;
        prev_start = r.start;
    }
    Some((n, base + varint_len(n as u64) + body))
}

fn write(out: &mut Vec<u8>, path_id: Option<u64>, ranges: &RangeSet, delay: u64, ecn: Option<&EcnCounts>, n: usize) {
    let mut it = ranges.iter().rev();
    let Some(first) = it.next() else { return };
    let base = if path_id.is_some() { ft::PATH_ACK } else { ft::ACK };
    write_varint(out, base | u64::from(ecn.is_some()));
    if let Some(p) = path_id {
        write_varint(out, p);
    }
    write_varint(out, first.end - 1);
    write_varint(out, delay);
    write_varint(out, n as u64);
    write_varint(out, first.end - 1 - first.start);
    let mut prev_start = first.start;
    for r in it.take(n) {
        write_varint(out, prev_start - r.end - 1);
        write_varint(out, r.end - 1 - r.start);
        prev_start = r.start;
    }
    if let Some(e) = ecn {
        e.encode(out);
    }
}

/// Writes an ACK (or, with `path_id`, a PATH_ACK) frame acknowledging `ranges`, highest
/// ranges first, keeping at most `max_ranges` ranges (the lowest are dropped).
///
/// `delay` is the already-scaled ACK Delay field. Returns the number of bytes written: 0 if
/// `ranges` is empty or `max_ranges` is 0.
pub fn encode_ack(
    out: &mut Vec<u8>,
    path_id: Option<u64>,
    ranges: &RangeSet,
    delay: u64,
    ecn: Option<&EcnCounts>,
    max_ranges: usize,
) -> usize {
    match plan(path_id, ranges, delay, ecn, max_ranges, usize::MAX) {
        Some((n, len)) => {
            write(out, path_id, ranges, delay, ecn, n);
            len
        }
        None => 0,
    }
}

/// Length of the frame [`encode_ack`] would write with the same arguments.
pub fn ack_encoded_len(
    path_id: Option<u64>,
    ranges: &RangeSet,
    delay: u64,
    ecn: Option<&EcnCounts>,
    max_ranges: usize,
) -> usize {
    plan(path_id, ranges, delay, ecn, max_ranges, usize::MAX).map_or(0, |(_, len)| len)
}

/// Like [`encode_ack`], but includes as many ranges (highest first) as fit in `max_bytes`,
/// at most `max_ranges` (RFC 9000 §13.2.4 lets a receiver limit the ranges it reports).
///
/// Returns the number of ranges written, the first included; `None`, writing nothing, if `ranges` is empty,
/// `max_ranges` is 0 or not even the first range fits.
pub fn encode_ack_bounded(
    out: &mut Vec<u8>,
    path_id: Option<u64>,
    ranges: &RangeSet,
    delay: u64,
    ecn: Option<&EcnCounts>,
    max_bytes: usize,
    max_ranges: usize,
) -> Option<usize> {
    let (n, len) = plan(path_id, ranges, delay, ecn, max_ranges, max_bytes)?;
    let start = out.len();
    write(out, path_id, ranges, delay, ecn, n);
    debug_assert_eq!(out.len() - start, len);
    // The first range and `n` more.
    Some(n + 1)
}

#[cfg(test)]
mod tests {
    use super::super::Frame;
    use super::*;
    use crate::error::TransportErrorCode;

    fn set(rs: &[Range<u64>]) -> RangeSet {
        let mut s = RangeSet::new();
        for r in rs {
            s.insert(r.clone());
        }
        s
    }

    #[test]
    fn known_encoding() {
        // Packets 0..=2 and 5..=9: largest 9, first range 4, one gap of 2 (3,4), length 2.
        let s = set(&[0..3, 5..10]);
        let mut out = Vec::new();
        assert_eq!(encode_ack(&mut out, None, &s, 7, None, 10), 7);
        assert_eq!(out, [0x02, 9, 7, 1, 4, 1, 2]);
        let f = Frame::decode(&mut Reader::new(&out)).unwrap();
        let Frame::Ack(a) = &f else { panic!() };
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![5..10, 0..3]);
        assert_eq!(f.encoded_len(), out.len());

        let mut out = Vec::new();
        let ecn = EcnCounts { ect0: 1, ect1: 2, ce: 3 };
        encode_ack(&mut out, Some(5), &s, 7, Some(&ecn), 1);
        assert_eq!(out, [0x3f, 5, 9, 7, 0, 4, 1, 2, 3]);
        let Frame::Ack(a) = Frame::decode(&mut Reader::new(&out)).unwrap() else { panic!() };
        assert_eq!((a.path_id, a.ecn), (Some(5), Some(ecn)));
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![5..10]);
    }

    #[test]
    fn ranges_below_zero_are_rejected() {
        for bytes in [
            &[0x02, 3, 0, 0, 4][..],   // first range larger than largest
            &[0x02, 5, 0, 1, 0, 4, 0], // gap reaches below zero
            &[0x02, 5, 0, 1, 0, 0, 4], // range length reaches below zero
            &[0x02, 5, 0, 1, 5, 0, 0], // smallest 0, next largest would be -2
        ] {
            let e = Frame::decode(&mut Reader::new(bytes)).unwrap_err();
            assert_eq!(e.code, TransportErrorCode::FRAME_ENCODING_ERROR, "{bytes:?}");
            assert_eq!(e.frame_type, Some(0x02));
        }
        // Exactly reaching zero is fine: 5, gap 0 -> largest 3, len 3 -> 0.
        assert!(Frame::decode(&mut Reader::new(&[0x02, 5, 0, 1, 0, 0, 3])).is_ok());
    }

    #[test]
    fn huge_range_count_is_rejected_cheaply() {
        let bytes = [0x02, 5, 0, 0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0];
        let e = Frame::decode(&mut Reader::new(&bytes)).unwrap_err();
        assert_eq!(e.code, TransportErrorCode::FRAME_ENCODING_ERROR);
    }

    #[test]
    fn truncation_to_max_ranges_and_bytes() {
        let s = set(&[0..1, 2..3, 4..5, 6..7, 8..9]);
        let mut out = Vec::new();
        let n = encode_ack(&mut out, None, &s, 0, None, 2);
        assert_eq!(n, out.len());
        assert_eq!(n, ack_encoded_len(None, &s, 0, None, 2));
        let Frame::Ack(a) = Frame::decode(&mut Reader::new(&out)).unwrap() else { panic!() };
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![8..9, 6..7]);

        for max in 0..20 {
            let mut out = Vec::new();
            let written = encode_ack_bounded(&mut out, Some(1), &s, 0, None, max, usize::MAX);
            let ok = written.is_some();
            assert!(out.len() <= max);
            assert_eq!(ok, max >= 6, "max {max}");
            if ok {
                let Frame::Ack(a) = Frame::decode(&mut Reader::new(&out)).unwrap() else { panic!() };
                let got: Vec<_> = a.iter().collect();
                let want: Vec<_> = s.iter().rev().take(got.len()).collect();
                assert_eq!(got, want);
                assert_eq!(got.len(), (1 + (max - 6) / 2).min(5));
                assert_eq!(written, Some(got.len()), "the ranges written are reported");
            }
        }
        assert!(encode_ack_bounded(&mut Vec::new(), None, &RangeSet::new(), 0, None, 100, 8).is_none());
        assert_eq!(encode_ack(&mut Vec::new(), None, &RangeSet::new(), 0, None, 100), 0);
    }
}
