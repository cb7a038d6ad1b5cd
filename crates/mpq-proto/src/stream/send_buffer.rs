//! The send buffer of one stream: application data from the first unacknowledged byte to
//! the write offset, with the ranges to retransmit.

use std::collections::VecDeque;
use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};
use smallvec::SmallVec;

use crate::range_set::RangeSet;

/// Copied writes are gathered in a tail of at most this many bytes before it becomes a chunk
/// of its own: small writes do not cost a chunk each, and lookups stay cheap.
const TAIL_CHUNK: usize = 64 * 1024;

/// Bytes written by the application and not yet acknowledged.
///
/// Data is held as a queue of reference-counted chunks: [`SendBuffer::write_bytes`] queues
/// the application's own buffer (no copy), [`SendBuffer::write`] copies into a growing tail.
/// The packet builder copies from here straight into the datagram (the one copy of the send
/// path). The acknowledged prefix is freed as soon as it is contiguous. Lost ranges are
/// queued for retransmission ahead of new data; acknowledged ranges are never queued again.
#[derive(Debug, Default)]
pub struct SendBuffer {
    /// Full chunks, oldest first; `starts[i]` is the stream offset of `chunks[i][0]`.
    chunks: VecDeque<Bytes>,
    starts: VecDeque<u64>,
    /// Copied writes not yet made a chunk; starts at `tail_start`.
    tail: BytesMut,
    tail_start: u64,
    /// Stream offset of the first byte held; everything below is acknowledged.
    base: u64,
    /// Bytes held: from `base` to the write offset.
    len: u64,
    /// Offset of the first byte never sent.
    unsent: u64,
    /// Acknowledged ranges above `base`.
    acked: RangeSet,
    /// Sent, lost and not acknowledged ranges, to retransmit.
    lost: RangeSet,
}

impl SendBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends application data (copied).
    pub fn write(&mut self, data: &[u8]) {
        if self.tail.is_empty() {
            self.tail_start = self.offset();
        }
        self.tail.extend_from_slice(data);
        self.len += data.len() as u64;
        if self.tail.len() >= TAIL_CHUNK {
            self.seal_tail();
        }
    }

    /// Appends application data without copying it: the buffer keeps a reference to `data`
    /// until the peer acknowledged it.
    pub fn write_bytes(&mut self, data: Bytes) {
        if data.is_empty() {
            return;
        }
        self.seal_tail();
        let at = self.offset();
        self.len += data.len() as u64;
        self.starts.push_back(at);
        self.chunks.push_back(data);
    }

    /// Turns the tail into a chunk (it keeps its allocation's spare room for later writes).
    fn seal_tail(&mut self) {
        if !self.tail.is_empty() {
            self.starts.push_back(self.tail_start);
            self.chunks.push_back(self.tail.split().freeze());
        }
    }

    /// The write offset: total bytes written.
    pub fn offset(&self) -> u64 {
        self.base + self.len
    }

    /// Offset of the first byte never sent.
    pub fn unsent(&self) -> u64 {
        self.unsent
    }

    /// Bytes held (written and not acknowledged as a prefix).
    pub fn unacked_len(&self) -> u64 {
        self.len
    }

    /// Bytes waiting to be sent: never sent, plus lost and not yet resent.
    pub fn queued(&self) -> u64 {
        (self.offset() - self.unsent) + self.lost.count()
    }

    /// True if some written data was never sent.
    pub fn has_unsent(&self) -> bool {
        self.unsent < self.offset()
    }

    /// True if lost data waits for retransmission.
    pub fn has_lost(&self) -> bool {
        !self.lost.is_empty()
    }

    /// True once every written byte is acknowledged.
    pub fn is_fully_acked(&self) -> bool {
        self.len == 0 && self.unsent == self.base
    }

    /// Takes up to `max_len` bytes of the lowest lost range.
    pub fn next_lost(&mut self, max_len: u64) -> Option<Range<u64>> {
        if max_len == 0 {
            return None;
        }
        let r = self.lost.first()?;
        let end = r.end.min(r.start + max_len);
        self.lost.remove(r.start..end);
        Some(r.start..end)
    }

    /// A lost range to resend starts at `offset` (what was just taken of it continues).
    pub fn lost_starts_at(&self, offset: u64) -> bool {
        self.lost.first().is_some_and(|r| r.start == offset)
    }

    /// Takes up to `max_len` new bytes.
    pub fn next_new(&mut self, max_len: u64) -> Range<u64> {
        let start = self.unsent;
        let end = self.offset().min(start + max_len);
        self.unsent = end;
        start..end
    }

    /// Gives back never-used new bytes from `to` on (the unused end of a send batch's
    /// lease): they count as unsent again.
    pub fn unsend(&mut self, to: u64) {
        debug_assert!(to >= self.base && to <= self.unsent, "unsend {to} outside {}..={}", self.base, self.unsent);
        self.unsent = to.clamp(self.base, self.unsent);
    }

    /// The bytes `[offset, offset + len)` as reference-counted slices of the buffer's
    /// chunks, each with its stream offset (the copied-writes tail becomes a chunk first).
    /// A send batch holds them so that it builds packets without the stream.
    pub fn slices(&mut self, offset: u64, len: u64) -> SmallVec<[(u64, Bytes); 2]> {
        debug_assert!(self.contains(offset, len), "range not buffered");
        let end = offset + len;
        if end > self.tail_start && !self.tail.is_empty() {
            self.seal_tail();
        }
        let mut out = SmallVec::new();
        let mut i = self.starts.partition_point(|&s| s <= offset).saturating_sub(1);
        let mut pos = offset;
        while pos < end && i < self.chunks.len() {
            let (start, c) = (self.starts[i], &self.chunks[i]);
            let from = (pos - start) as usize;
            if from < c.len() {
                let to = c.len().min((end - start) as usize);
                out.push((pos, c.slice(from..to)));
                pos = start + to as u64;
            }
            i += 1;
        }
        out
    }

    /// True while `[offset, offset + len)` is still buffered.
    pub fn contains(&self, offset: u64, len: u64) -> bool {
        offset >= self.base && offset.saturating_add(len) <= self.offset()
    }

    /// Whether every byte of `r` was acknowledged (freed below the base, or acknowledged
    /// out of order above it).
    pub fn is_acked(&self, r: Range<u64>) -> bool {
        // (An empty range, a FIN-only chunk's, has nothing to wait for.)
        if r.end <= self.base || r.start >= r.end {
            return true;
        }
        let from = r.start.max(self.base);
        // The acknowledged ranges are disjoint and merged: one of them covers all or none.
        self.acked.intersecting(from..r.end).next().is_some_and(|a| a.start <= from && a.end >= r.end)
    }

    /// Appends exactly `len` bytes starting at `offset` to `out`.
    pub fn copy(&self, offset: u64, len: usize, out: &mut Vec<u8>) {
        debug_assert!(self.contains(offset, len as u64), "range not buffered");
        let before = out.len();
        out.reserve(len);
        let end = offset + len as u64;
        let mut pos = offset.max(self.base);
        // The chunk holding `pos`: the last one starting at or before it.
        let mut i = self.starts.partition_point(|&s| s <= pos).saturating_sub(1);
        while pos < end && i < self.chunks.len() {
            let (start, c) = (self.starts[i], &self.chunks[i]);
            let from = (pos - start) as usize;
            if from < c.len() {
                let to = c.len().min((end - start) as usize);
                out.extend_from_slice(&c[from..to]);
                pos = start + to as u64;
            }
            i += 1;
        }
        if pos < end && !self.tail.is_empty() && pos >= self.tail_start {
            let from = (pos - self.tail_start) as usize;
            let to = self.tail.len().min((end - self.tail_start) as usize);
            if from < to {
                out.extend_from_slice(&self.tail[from..to]);
            }
        }
        // Only short on a caller bug: keep the "exactly len bytes" contract.
        out.resize(before + len, 0);
    }

    /// Records an acknowledgement; frees the acknowledged prefix.
    pub fn ack(&mut self, r: Range<u64>) {
        let r = r.start.max(self.base)..r.end.min(self.unsent);
        if r.start >= r.end {
            return;
        }
        self.lost.remove(r.clone());
        if r.start == self.base && self.acked.is_empty() {
            // In-order acknowledgement: free the prefix without touching the range set.
            self.free_to(r.end);
            return;
        }
        self.acked.insert(r);
        if let Some(first) = self.acked.first() {
            if first.start == self.base {
                self.acked.pop_min();
                self.free_to(first.end);
            }
        }
    }

    /// Drops the data below `to` (acknowledged): whole chunks go, a partly acknowledged one
    /// is trimmed in place (no copy).
    fn free_to(&mut self, to: u64) {
        let to = to.min(self.offset());
        while let (Some(&start), Some(c)) = (self.starts.front(), self.chunks.front_mut()) {
            let chunk_end = start + c.len() as u64;
            if chunk_end <= to {
                self.chunks.pop_front();
                self.starts.pop_front();
            } else {
                if start < to {
                    c.advance((to - start) as usize);
                    self.starts[0] = to;
                }
                break;
            }
        }
        if self.chunks.is_empty() && !self.tail.is_empty() && self.tail_start < to {
            let n = ((to - self.tail_start) as usize).min(self.tail.len());
            self.tail.advance(n);
            self.tail_start += n as u64;
        }
        self.len -= to - self.base;
        self.base = to;
    }

    /// Records a loss: the parts not acknowledged are queued for retransmission.
    pub fn on_lost(&mut self, r: Range<u64>) {
        let r = r.start.max(self.base)..r.end.min(self.unsent);
        // Already freed (acknowledged through a copy sent on another path): nothing to resend.
        if r.start >= r.end {
            return;
        }
        let mut pos = r.start;
        for a in self.acked.intersecting(r.clone()) {
            if a.start > pos {
                self.lost.insert(pos..a.start);
            }
            pos = a.end;
        }
        if pos < r.end {
            self.lost.insert(pos..r.end);
        }
    }

    /// Drops everything (the stream was reset); returns the number of written bytes that
    /// were never sent.
    pub fn discard(&mut self) -> u64 {
        let unsent = self.offset() - self.unsent;
        self.chunks = VecDeque::new();
        self.starts = VecDeque::new();
        self.tail = BytesMut::new();
        self.base = self.unsent;
        self.len = 0;
        self.acked = RangeSet::new();
        self.lost = RangeSet::new();
        unsent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any mix of copied and zero-copy writes, acknowledged in any order, reads back
        /// exactly what was written, frees exactly the acknowledged prefix, and says of any
        /// range whether all of it was acknowledged as the model does.
        #[test]
        fn chunks_read_back_what_was_written(
            writes in proptest::collection::vec((0usize..3000, any::<bool>()), 1..40),
            acks in proptest::collection::vec((0u64..100_000, 0u64..5000), 0..40),
            reads in proptest::collection::vec((0u64..100_000, 0usize..3000), 1..40),
        ) {
            let mut b = SendBuffer::new();
            let mut data = Vec::new();
            for (i, &(n, zero_copy)) in writes.iter().enumerate() {
                let piece: Vec<u8> = (0..n).map(|k| (i * 31 + k) as u8).collect();
                if zero_copy { b.write_bytes(Bytes::from(piece.clone())) } else { b.write(&piece) }
                data.extend_from_slice(&piece);
            }
            let total = data.len() as u64;
            prop_assert_eq!(b.offset(), total);
            let sent = b.next_new(u64::MAX);
            prop_assert_eq!(sent, 0..total);
            let mut acked = RangeSet::new();
            for &(start, len) in &acks {
                let (s, e) = (start.min(total), (start + len).min(total));
                b.ack(s..e);
                if s < e { acked.insert(s..e); }
                let base = acked.first().filter(|r| r.start == 0).map_or(0, |r| r.end);
                prop_assert_eq!(b.unacked_len(), total - base);
                for &(off, n) in &reads {
                    let r = off..off + n as u64;
                    let model = r.end <= base || acked.intersecting(r.clone()).map(|x| x.end - x.start).sum::<u64>() == n as u64;
                    prop_assert_eq!(b.is_acked(r.clone()), model, "{:?} acked {:?}", r, acked);
                    let off = off.clamp(base, total);
                    let n = (n as u64).min(total - off) as usize;
                    let mut out = Vec::new();
                    b.copy(off, n, &mut out);
                    prop_assert_eq!(&out[..], &data[off as usize..off as usize + n]);
                }
            }
        }
    }

    #[test]
    fn small_writes_share_a_chunk() {
        let mut b = SendBuffer::new();
        for _ in 0..1000 {
            b.write(b"0123456789");
        }
        assert_eq!(b.chunks.len(), 0, "10 kB of copied writes stay in the tail");
        b.write_bytes(Bytes::from_static(b"abc"));
        assert_eq!(b.chunks.len(), 2);
        let mut out = Vec::new();
        b.copy(9995, 8, &mut out);
        assert_eq!(&out, b"56789abc");
    }
}
