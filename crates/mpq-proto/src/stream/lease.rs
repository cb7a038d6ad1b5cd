//! New data of one stream leased to a path for a send batch (issue C1's send seam): a range
//! of the stream's send buffer as reference-counted slices, its connection credit already
//! counted, and the FIN if the range ends the stream. The path cuts STREAM chunks from it
//! and copies their bytes into its packets without the stream table; what it did not use
//! goes back with [`Streams::return_stream_data`](super::Streams::return_stream_data).
//!
//! Cutting follows [`Streams::next_stream_chunk`](super::Streams::next_stream_chunk) exactly
//! (the same chunk for the same room), so a leased batch sends the same packets.

use bytes::Bytes;
use smallvec::SmallVec;

use super::{SendState, StreamChunk};
use crate::types::StreamId;

/// A stream's new data held by a send batch.
#[derive(Debug)]
pub struct DataLease {
    /// The stream.
    pub(crate) id: StreamId,
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
