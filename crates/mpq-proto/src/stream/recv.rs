//! The receiving half of a stream: reassembly buffer and receive state machine
//! (RFC 9000 §3.2).

use std::collections::{BTreeMap, VecDeque};

use super::flow::RecvCredit;
use super::{ReadOutcome, StreamError};
use crate::coding::VARINT_MAX;
use crate::error::{TransportError, TransportErrorCode};

/// Reassembles stream data received at arbitrary offsets into an in-order byte stream.
///
/// In-order data is appended to a ring buffer that keeps its capacity, so the common case
/// costs one copy in and one copy out and no allocation. Out-of-order data is kept in
/// disjoint segments until the gap before it fills. Overlapping and duplicate data is
/// trimmed on arrival (overlaps are assumed identical, as RFC 9000 §2.2 allows). Memory is
/// bounded by flow control: the caller rejects data beyond the advertised limit.
#[derive(Debug, Default)]
pub struct RecvBuffer {
    /// Bytes `[read_offset, read_offset + contiguous.len())`.
    contiguous: VecDeque<u8>,
    /// Offset of the first byte not yet read by the application.
    read_offset: u64,
    /// Disjoint out-of-order segments, all starting after the contiguous end.
    segments: BTreeMap<u64, Vec<u8>>,
    /// Total bytes in `segments`.
    segment_bytes: usize,
}

impl RecvBuffer {
    /// An empty buffer starting at offset 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Offset of the next byte the application will read.
    pub fn read_offset(&self) -> u64 {
        self.read_offset
    }

    /// End of the contiguous prefix: every byte below it has been received.
    pub fn contiguous_end(&self) -> u64 {
        self.read_offset + self.contiguous.len() as u64
    }

    /// Bytes readable now.
    pub fn readable(&self) -> usize {
        self.contiguous.len()
    }

    /// Bytes held (readable and out-of-order).
    pub fn buffered(&self) -> usize {
        self.contiguous.len() + self.segment_bytes
    }

    /// Number of out-of-order segments held.
    pub fn segments(&self) -> usize {
        self.segments.len()
    }

    /// Stores `data` received at `offset`, ignoring parts already received or read.
    pub fn insert(&mut self, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        let mut pos = offset.max(self.contiguous_end());
        if pos >= end {
            return;
        }
        // In order: append up to the next segment, pull in the segments now reached, repeat.
        while pos == self.contiguous_end() {
            let upto = self.segments.keys().next().map_or(end, |&s| s.min(end));
            self.contiguous.extend(&data[(pos - offset) as usize..(upto - offset) as usize]);
            self.drain_segments();
            pos = self.contiguous_end();
            if pos >= end {
                return;
            }
        }
        // Out of order: fill the gaps between the segments overlapping [pos, end).
        while pos < end {
            if let Some((&s, seg)) = self.segments.range(..=pos).next_back() {
                let seg_end = s + seg.len() as u64;
                if seg_end > pos {
                    pos = seg_end;
                    continue;
                }
            }
            let next = self.segments.range(pos..end).next().map_or(end, |(&s, _)| s);
            let piece = data[(pos - offset) as usize..(next - offset) as usize].to_vec();
            self.segment_bytes += piece.len();
            self.segments.insert(pos, piece);
            pos = next;
        }
    }

    /// Moves segments that became contiguous into the ring buffer.
    fn drain_segments(&mut self) {
        while let Some(entry) = self.segments.first_entry() {
            let start = *entry.key();
            let cend = self.read_offset + self.contiguous.len() as u64;
            if start > cend {
                break;
            }
            let seg = entry.remove();
            self.segment_bytes -= seg.len();
            let skip = (cend - start) as usize;
            if skip < seg.len() {
                self.contiguous.extend(&seg[skip..]);
            }
        }
    }

    /// Copies readable bytes into `out`; returns how many.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.contiguous.len());
        let (a, b) = self.contiguous.as_slices();
        let na = n.min(a.len());
        out[..na].copy_from_slice(&a[..na]);
        out[na..n].copy_from_slice(&b[..n - na]);
        self.contiguous.drain(..n);
        self.read_offset += n as u64;
        n
    }

    /// Discards everything and frees the memory.
    pub fn clear(&mut self) {
        self.read_offset = self.contiguous_end();
        self.contiguous = VecDeque::new();
        self.segments.clear();
        self.segment_bytes = 0;
    }
}

/// Receive-side states (RFC 9000 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvState {
    /// Receiving; final size unknown.
    Recv,
    /// The final size is known (FIN received), data still missing.
    SizeKnown,
    /// All data up to the final size received, not all read.
    DataRecvd,
    /// RESET_STREAM received, not yet reported to the application.
    ResetRecvd,
    /// The application read everything including the end of stream. Terminal.
    DataRead,
    /// The application saw the reset. Terminal.
    ResetRead,
}

fn final_size_error(reason: &str) -> TransportError {
    TransportError::new(TransportErrorCode::FINAL_SIZE_ERROR, reason)
}

fn flow_control_error(reason: &str) -> TransportError {
    TransportError::new(TransportErrorCode::FLOW_CONTROL_ERROR, reason)
}

/// The receiving half of a stream.
#[derive(Debug)]
pub struct RecvStream {
    buf: RecvBuffer,
    /// Stream-level credit we grant.
    pub(crate) credit: RecvCredit,
    state: RecvState,
    /// Highest offset received (including a RESET_STREAM final size).
    max_received: u64,
    final_size: Option<u64>,
    reset_code: Option<u64>,
    /// Set when the application asked the peer to stop (STOP_SENDING): data is discarded.
    stopped: Option<u64>,
    /// Bytes already given back to connection-level credit.
    retired: u64,
    /// A Readable event was emitted and not yet followed by a read that drained the buffer.
    pub(crate) notified: bool,
}

impl RecvStream {
    /// A receive half with an initial window and an auto-tuning cap.
    pub fn new(window: u64, max_window: u64) -> Self {
        Self {
            buf: RecvBuffer::new(),
            credit: RecvCredit::new(window, max_window),
            state: RecvState::Recv,
            max_received: 0,
            final_size: None,
            reset_code: None,
            stopped: None,
            retired: 0,
            notified: false,
        }
    }

    /// Current state.
    pub fn state(&self) -> RecvState {
        self.state
    }

    /// The final size, once known.
    pub fn final_size(&self) -> Option<u64> {
        self.final_size
    }

    /// Bytes buffered (readable and out-of-order).
    pub fn buffered(&self) -> usize {
        self.buf.buffered()
    }

    /// True once the application stopped reading (STOP_SENDING).
    pub fn is_stopped(&self) -> bool {
        self.stopped.is_some()
    }

    /// Processes a STREAM frame; returns how much the highest received offset grew, which the
    /// caller charges to connection-level flow control.
    pub fn on_data(&mut self, offset: u64, data: &[u8], fin: bool) -> Result<u64, TransportError> {
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|&e| e <= VARINT_MAX)
            .ok_or_else(|| flow_control_error("stream offset overflow"))?;
        if let Some(fs) = self.final_size {
            if end > fs || (fin && end != fs) {
                return Err(final_size_error("data beyond or changing the final size"));
            }
        }
        if fin && end < self.max_received {
            return Err(final_size_error("final size below received data"));
        }
        if end > self.credit.limit() {
            return Err(flow_control_error("stream data beyond MAX_STREAM_DATA"));
        }
        let grew = end.saturating_sub(self.max_received);
        if !self.credit.on_received(grew) {
            return Err(flow_control_error("stream data beyond MAX_STREAM_DATA"));
        }
        self.max_received += grew;
        match self.state {
            RecvState::Recv | RecvState::SizeKnown => {}
            // Late or duplicate data: nothing to store.
            _ => return Ok(grew),
        }
        if fin {
            self.final_size = Some(end);
            self.state = RecvState::SizeKnown;
        }
        if self.stopped.is_none() {
            self.buf.insert(offset, data);
            if self.final_size == Some(self.buf.contiguous_end()) {
                self.state = RecvState::DataRecvd;
            }
        }
        Ok(grew)
    }

    /// Processes a RESET_STREAM frame; returns the growth of the highest received offset.
    pub fn on_reset(&mut self, error_code: u64, final_size: u64) -> Result<u64, TransportError> {
        if self.final_size.is_some_and(|fs| fs != final_size) {
            return Err(final_size_error("RESET_STREAM changes the final size"));
        }
        if final_size < self.max_received {
            return Err(final_size_error("RESET_STREAM final size below received data"));
        }
        if final_size > self.credit.limit() {
            return Err(flow_control_error("RESET_STREAM final size beyond MAX_STREAM_DATA"));
        }
        let grew = final_size - self.max_received;
        if !self.credit.on_received(grew) {
            return Err(flow_control_error("RESET_STREAM final size beyond MAX_STREAM_DATA"));
        }
        self.max_received = final_size;
        self.final_size = Some(final_size);
        if matches!(self.state, RecvState::Recv | RecvState::SizeKnown) {
            self.state = RecvState::ResetRecvd;
            self.reset_code = Some(error_code);
            self.buf.clear();
        }
        Ok(grew)
    }

    /// The application stops reading (it sends STOP_SENDING): buffered and future data is
    /// discarded. Returns true if a STOP_SENDING frame is worth sending (the peer may still
    /// be sending).
    pub fn stop(&mut self, error_code: u64) -> bool {
        self.stopped = Some(error_code);
        self.buf.clear();
        matches!(self.state, RecvState::Recv | RecvState::SizeKnown)
    }

    /// Reads into `out`. Returns the bytes read and whether the end of the stream was
    /// reached; `Err(Blocked)` when nothing is readable yet; `Err(Reset)` once after a reset.
    pub fn read(&mut self, out: &mut [u8]) -> Result<ReadOutcome, StreamError> {
        if self.stopped.is_some() {
            return Err(StreamError::ClosedStream);
        }
        match self.state {
            RecvState::ResetRecvd => {
                self.state = RecvState::ResetRead;
                return Err(StreamError::Reset(self.reset_code.unwrap_or(0)));
            }
            RecvState::ResetRead | RecvState::DataRead => return Err(StreamError::ClosedStream),
            _ => {}
        }
        let len = self.buf.read(out);
        let fin = self.state == RecvState::DataRecvd && self.buf.readable() == 0;
        if fin {
            self.state = RecvState::DataRead;
        } else if len == 0 && !out.is_empty() {
            self.notified = false;
            return Err(StreamError::Blocked);
        }
        self.credit.on_consumed(len as u64);
        Ok(ReadOutcome { len, fin })
    }

    /// True when the application has something to learn: data, end of stream or a reset.
    pub fn is_readable(&self) -> bool {
        self.stopped.is_none()
            && (self.buf.readable() > 0 || matches!(self.state, RecvState::DataRecvd | RecvState::ResetRecvd))
    }

    /// True while MAX_STREAM_DATA updates are useful (the peer may still send).
    pub fn wants_credit(&self) -> bool {
        self.stopped.is_none() && self.final_size.is_none()
    }

    /// True once nothing more is expected from the peer nor owed to the application.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, RecvState::DataRead | RecvState::ResetRead)
            || (self.stopped.is_some() && self.final_size.is_some())
    }

    /// Bytes newly given back to connection-level credit since the last call: what the
    /// application read, or everything received when the data is discarded.
    pub fn take_retired(&mut self) -> u64 {
        let discarding = self.stopped.is_some() || matches!(self.state, RecvState::ResetRecvd | RecvState::ResetRead);
        let upto = if discarding { self.max_received } else { self.buf.read_offset() };
        let n = upto.saturating_sub(self.retired);
        self.retired += n;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn overlapping_segments() {
        let data: Vec<u8> = (0..100u8).collect();
        let mut b = RecvBuffer::new();
        b.insert(50, &data[50..60]);
        b.insert(70, &data[70..80]);
        b.insert(45, &data[45..85]);
        assert_eq!(b.segments(), 5);
        assert_eq!(b.buffered(), 40);
        b.insert(0, &data[0..50]);
        assert_eq!(b.readable(), 85);
        assert_eq!(b.segments(), 0);
        let mut out = [0u8; 100];
        assert_eq!(b.read(&mut out), 85);
        assert_eq!(&out[..85], &data[..85]);
        b.insert(10, &data[10..90]);
        assert_eq!(b.readable(), 5);
    }

    proptest! {
        /// Random chunking, reordering and duplication always reassembles byte-exact, and
        /// memory never exceeds the distinct bytes above the read offset.
        #[test]
        fn reassembly(
            data in proptest::collection::vec(any::<u8>(), 1..2000),
            cuts in proptest::collection::vec((any::<prop::sample::Index>(), 1usize..300), 1..60),
            order in any::<prop::sample::Index>(),
            read_sizes in proptest::collection::vec(1usize..500, 1..20),
        ) {
            let n = data.len();
            let mut chunks: Vec<(usize, usize)> =
                cuts.iter().map(|(i, len)| { let s = i.index(n); (s, (s + len).min(n)) }).collect();
            // Guarantee coverage with a second, sequential chunking.
            let mut s = 0;
            while s < n { let e = (s + 137).min(n); chunks.push((s, e)); s = e; }
            // Deterministic shuffle.
            let rot = order.index(chunks.len());
            chunks.rotate_left(rot);
            for i in (1..chunks.len()).step_by(2) { chunks.swap(i, i - 1); }
            let mut b = RecvBuffer::new();
            let mut out = Vec::new();
            let mut tmp = [0u8; 500];
            let mut r = 0;
            for (i, &(s, e)) in chunks.iter().enumerate() {
                b.insert(s as u64, &data[s..e]);
                prop_assert!(b.buffered() <= n - b.read_offset() as usize);
                if i % 3 == 0 {
                    let k = b.read(&mut tmp[..read_sizes[r % read_sizes.len()]]);
                    r += 1;
                    out.extend_from_slice(&tmp[..k]);
                }
            }
            loop {
                let k = b.read(&mut tmp);
                if k == 0 { break; }
                out.extend_from_slice(&tmp[..k]);
            }
            prop_assert_eq!(out, data);
            prop_assert_eq!(b.buffered(), 0);
        }
    }
}
