//! Stream data leased to a path for a send batch (issue C1's send seam): [`BatchData`], one
//! [`DataLease`] per stream with data waiting, each a range of the stream's send buffer as
//! reference-counted slices: data to resend (lost), or new data with its connection credit
//! already counted and the FIN if the range ends the stream. The path cuts STREAM chunks from
//! them and copies their bytes into its packets without the stream table; what it did not
//! use goes back with [`Streams::return_stream_data`](super::Streams::return_stream_data).
//!
//! Cutting follows [`Streams::next_stream_chunk`](super::Streams::next_stream_chunk): lost
//! data first, then new data, round-robin over the streams chunk by chunk. With one stream
//! (a transfer) it is exact, the same chunk for the same room, so a leased batch sends the
//! same packets; with several, each stream's share of the batch is bounded when the lease is
//! taken, where the table would let a stream with more data take the rest of the batch.

use bytes::Bytes;
use smallvec::SmallVec;

use super::{SendState, StreamChunk};
use crate::types::StreamId;

/// A stream's data held by a send batch: new data, or data to resend.
#[derive(Debug)]
pub struct DataLease {
    /// The stream.
    pub(crate) id: StreamId,
    /// Lost data to resend (its connection credit was spent when it was first sent).
    pub(crate) resend: bool,
    /// First offset of the lease.
    pub(crate) start: u64,
    /// Next offset to hand out.
    pub(crate) next: u64,
    /// End of the leased range.
    pub(crate) end: u64,
    /// The FIN belongs to the lease (the range ends the stream).
    pub(crate) fin: bool,
    /// The FIN was handed out.
    pub(crate) fin_taken: bool,
    /// The lease was cut short by its size limit: the stream has more. A chunk the lease
    /// cannot fill then waits for a new lease (the stream would have cut a longer one).
    pub(crate) capped: bool,
    /// The stream's send state before the lease.
    pub(crate) state_before: SendState,
    /// The bytes `start..end`, each slice with its stream offset.
    pub(crate) parts: SmallVec<[(u64, Bytes); 2]>,
}

impl DataLease {
    /// The next chunk of at most `max_len` bytes, cut as the stream table would cut it:
    /// the FIN rides on the chunk that reaches the end; a lease of no bytes and the FIN
    /// gives a FIN-only chunk.
    /// `None` when spent, or when capped and short of `max_len`: renew the lease then.
    pub fn take(&mut self, max_len: usize) -> Option<StreamChunk> {
        if self.capped && self.end - self.next < max_len as u64 {
            return None;
        }
        let len = (self.end - self.next).min(max_len as u64);
        let fin = self.fin && !self.fin_taken && self.next + len == self.end;
        if len == 0 && !fin {
            return None;
        }
        let chunk = StreamChunk { id: self.id, offset: self.next, len: len as usize, fin };
        self.next += len;
        self.fin_taken |= fin;
        Some(chunk)
    }

    /// Nothing left to hand out.
    pub fn is_spent(&self) -> bool {
        self.next >= self.end && (!self.fin || self.fin_taken)
    }

    /// Bytes not yet handed out.
    pub fn remaining(&self) -> u64 {
        self.end - self.next
    }

    /// Appends exactly the `len` bytes at stream `offset` (within the lease) to `out`.
    pub fn copy(&self, offset: u64, len: usize, out: &mut Vec<u8>) {
        let before = out.len();
        let end = offset + len as u64;
        let mut pos = offset;
        for (start, b) in &self.parts {
            let part_end = start + b.len() as u64;
            if part_end <= pos || *start >= end {
                continue;
            }
            let from = (pos - start) as usize;
            let to = (end.min(part_end) - start) as usize;
            out.extend_from_slice(&b[from..to]);
            pos = start + to as u64;
        }
        debug_assert_eq!(out.len() - before, len, "copy outside the lease");
        // Only short on a caller bug: keep the "exactly len bytes" contract.
        out.resize(before + len, 0);
    }
}

/// The stream data of one send batch: a [`DataLease`] per stream, resends first.
#[derive(Debug, Default)]
pub struct BatchData {
    /// The streams' leases, those with data to resend first.
    pub(crate) parts: SmallVec<[DataLease; 1]>,
    /// The part the next chunk is tried from (round-robin among resends, then new data).
    cursor: usize,
}

impl BatchData {
    /// A batch's data from its parts, those with data to resend first.
    pub(crate) fn new(mut parts: SmallVec<[DataLease; 1]>) -> Self {
        parts.sort_by_key(|p| !p.resend);
        Self { parts, cursor: 0 }
    }

    /// The next chunk of at most `max_len` bytes: from a part with data to resend while
    /// any has some, else from the new data, round-robin over the streams, each stream's
    /// ranges in order. `None`
    /// when no part can give one (spent, or capped and short of `max_len`): renew then.
    pub fn take(&mut self, max_len: usize) -> Option<StreamChunk> {
        if let [only] = self.parts.as_mut_slice() {
            // A transfer: one stream, one range (every packet comes here).
            return only.take(max_len);
        }
        let n = self.parts.len();
        let resends = self.parts.iter().filter(|p| p.resend && !p.is_spent()).count();
        for k in 0..n {
            let i = (self.cursor + k) % n;
            if resends > 0 && !self.parts[i].resend {
                continue;
            }
            // A stream's ranges go in order: round-robin is over streams, not ranges.
            let id = self.parts[i].id;
            if self.parts[..i].iter().any(|p| p.id == id && !p.is_spent()) {
                continue;
            }
            if let Some(c) = self.parts[i].take(max_len) {
                self.cursor = (i + 1) % n;
                return Some(c);
            }
        }
        None
    }

    /// Nothing left to hand out.
    pub fn is_spent(&self) -> bool {
        self.parts.iter().all(DataLease::is_spent)
    }

    /// Bytes not yet handed out.
    pub fn remaining(&self) -> u64 {
        self.parts.iter().map(DataLease::remaining).sum()
    }

    /// Appends exactly the bytes of `chunk` (cut from this lease) to `out`.
    pub fn copy(&self, chunk: &StreamChunk, out: &mut Vec<u8>) {
        if let [only] = self.parts.as_slice() {
            return only.copy(chunk.offset, chunk.len, out);
        }
        let end = chunk.offset + chunk.len as u64;
        let part = self.parts.iter().find(|p| p.id == chunk.id && p.start <= chunk.offset && end <= p.end);
        match part {
            Some(p) => p.copy(chunk.offset, chunk.len, out),
            None => {
                debug_assert!(false, "copy of a chunk outside the lease");
                out.resize(out.len() + chunk.len, 0);
            }
        }
    }
}
