//! The receiving half of a stream: reassembly buffer and receive state machine
//! (RFC 9000 §3.2).

use std::collections::{BTreeMap, VecDeque};

use super::flow::RecvCredit;
use super::{ReadOutcome, StreamError};
use crate::coding::VARINT_MAX;
use crate::error::{TransportError, TransportErrorCode};

/// Bytes of one out-of-order page.
const PAGE: usize = 1024;
/// Presence bitmap words of one page.
const PAGE_WORDS: usize = PAGE / 64;
/// Bookkeeping we charge per page on top of its size: the box's allocation header and the
/// B-tree entry (key, pointer, node slack).
const PAGE_OVERHEAD: usize = 64;

/// A fixed-size window of the stream's offsets with a bit per byte received.
struct Page {
    data: [u8; PAGE],
    present: [u64; PAGE_WORDS],
}

impl Page {
    fn new() -> Box<Self> {
        Box::new(Self { data: [0; PAGE], present: [0; PAGE_WORDS] })
    }

    /// Marks `[from, to)` (page-relative) received; returns how many of them were new.
    fn mark(&mut self, from: usize, to: usize) -> usize {
        let mut new = 0;
        let mut i = from;
        while i < to {
            let (w, b) = (i / 64, i % 64);
            let n = (64 - b).min(to - i);
            let mask = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << b };
            new += (mask & !self.present[w]).count_ones() as usize;
            self.present[w] |= mask;
            i += n;
        }
        new
    }

    /// Length of the run of received bytes starting at `from` (page-relative); clears it.
    fn take_run(&mut self, from: usize) -> usize {
        let mut i = from;
        while i < PAGE {
            let (w, b) = (i / 64, i % 64);
            let ones = (self.present[w] >> b).trailing_ones() as usize;
            let n = ones.min(64 - b);
            if n == 0 {
                break;
            }
            let mask = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << b };
            self.present[w] &= !mask;
            i += n;
            if b + n < 64 {
                break;
            }
        }
        i - from
    }

    fn is_empty(&self) -> bool {
        self.present.iter().all(|w| *w == 0)
    }
}

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Page(..)")
    }
}

/// Reassembles stream data received at arbitrary offsets into an in-order byte stream.
///
/// In-order data is appended to a ring buffer that keeps its capacity, so the common case
/// costs one copy in and one copy out and no allocation. Out-of-order data goes into
/// fixed-size pages, each with a bit per byte received, until the gap before it fills.
/// Memory therefore depends only on the span of offsets held, never on how the peer cut
/// the data: a stream of one-byte frames at every other offset costs about 1.2 bytes per
/// offset spanned, not a heap allocation per frame. Overlapping and duplicate data is
/// simply written again (overlaps are assumed identical, as RFC 9000 §2.2 allows). The
/// span is bounded by flow control: the caller rejects data beyond the advertised limit,
/// and the connection-level credit charges every stream's highest offset.
#[derive(Debug, Default)]
pub struct RecvBuffer {
    /// Bytes `[read_offset, read_offset + contiguous.len())`.
    contiguous: VecDeque<u8>,
    /// Offset of the first byte not yet read by the application.
    read_offset: u64,
    /// Out-of-order bytes by page index (offset / PAGE); every byte marked present lies
    /// beyond the contiguous end.
    pages: BTreeMap<u64, Box<Page>>,
    /// Bytes marked present in `pages`.
    page_bytes: usize,
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
        self.contiguous.len() + self.page_bytes
    }

    /// Number of out-of-order pages held.
    pub fn segments(&self) -> usize {
        self.pages.len()
    }

    /// Heap memory this buffer accounts for: the ring buffer's capacity and every page with
    /// its bookkeeping.
    pub fn memory(&self) -> usize {
        self.contiguous.capacity() + self.pages.len() * (std::mem::size_of::<Page>() + PAGE_OVERHEAD)
    }

    /// Stores `data` received at `offset`, ignoring parts already received or read.
    pub fn insert(&mut self, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        let mut pos = offset.max(self.contiguous_end());
        if pos >= end {
            return;
        }
        if pos == self.contiguous_end() {
            // In order: append directly up to the first out-of-order page.
            let upto = self.pages.keys().next().map_or(end, |&p| (p * PAGE as u64).clamp(pos, end));
            self.contiguous.extend(&data[(pos - offset) as usize..(upto - offset) as usize]);
            pos = upto;
        }
        while pos < end {
            let index = pos / PAGE as u64;
            let page_start = index * PAGE as u64;
            let to = end.min(page_start + PAGE as u64);
            let page = self.pages.entry(index).or_insert_with(Page::new);
            let (a, b) = ((pos - page_start) as usize, (to - page_start) as usize);
            page.data[a..b].copy_from_slice(&data[(pos - offset) as usize..(to - offset) as usize]);
            self.page_bytes += page.mark(a, b);
            pos = to;
        }
        self.drain_pages();
    }

    /// Moves out-of-order bytes that became contiguous into the ring buffer.
    fn drain_pages(&mut self) {
        loop {
            let cend = self.contiguous_end();
            let index = cend / PAGE as u64;
            let Some(page) = self.pages.get_mut(&index) else { return };
            let from = (cend - index * PAGE as u64) as usize;
            let run = page.take_run(from);
            self.contiguous.extend(&page.data[from..from + run]);
            self.page_bytes -= run;
            if page.is_empty() {
                self.pages.remove(&index);
            }
            if run == 0 || from + run < PAGE {
                return;
            }
        }
    }

    /// Copies readable bytes into `out`; returns how many.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let mut at = 0;
        self.read_with(out.len(), &mut |piece| {
            out[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
        })
    }

    /// Hands up to `max` readable bytes to `f`, in order and in at most two pieces, without
    /// copying them; they are consumed. Returns how many.
    pub fn read_with(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let n = max.min(self.contiguous.len());
        let (a, b) = self.contiguous.as_slices();
        let na = n.min(a.len());
        if na > 0 {
            f(&a[..na]);
        }
        if n > na {
            f(&b[..n - na]);
        }
        self.contiguous.drain(..n);
        self.read_offset += n as u64;
        n
    }

    /// Discards everything and frees the memory.
    pub fn clear(&mut self) {
        self.read_offset = self.contiguous_end();
        self.contiguous = VecDeque::new();
        self.pages.clear();
        self.page_bytes = 0;
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
        let mut at = 0;
        self.read_with(out.len(), &mut |piece| {
            out[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
        })
    }

    /// Like [`RecvStream::read`], but hands up to `max` bytes to `f` in place (in at most two
    /// pieces) instead of copying them out.
    pub fn read_with(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<ReadOutcome, StreamError> {
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
        let len = self.buf.read_with(max, f);
        let fin = self.state == RecvState::DataRecvd && self.buf.readable() == 0;
        if fin {
            self.state = RecvState::DataRead;
        } else if len == 0 && max > 0 {
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
        assert_eq!(b.segments(), 1, "one page holds them all");
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

    /// Deterministic xorshift for the adversarial patterns below.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn one_byte_fragments_are_paged_not_boxed() {
        // Every other byte of a 64 KiB window, highest first: 32768 fragments in 64 pages.
        let window = 64 * 1024;
        let data: Vec<u8> = (0..window).map(|i| i as u8).collect();
        let mut b = RecvBuffer::new();
        for off in (1..window).rev().step_by(2) {
            b.insert(off as u64, &data[off..off + 1]);
        }
        assert_eq!(b.segments(), window / PAGE);
        assert_eq!(b.buffered(), window / 2);
        assert!(b.memory() <= window * 5 / 4, "memory {} for a window of {window}", b.memory());
        // Duplicates and overlaps add nothing.
        b.insert(1, &data[1..2]);
        b.insert(PAGE as u64 - 5, &data[PAGE - 5..PAGE + 5]);
        assert_eq!(b.buffered(), window / 2 + 5);
        b.insert(0, &data[..1]);
        for off in (2..window).step_by(2) {
            b.insert(off as u64, &data[off..off + 1]);
        }
        let mut out = vec![0u8; window];
        assert_eq!(b.read(&mut out), window);
        assert_eq!(out, data);
        assert_eq!((b.segments(), b.buffered()), (0, 0));
    }

    proptest! {
        /// Whatever the fragment pattern within the window (tiny, overlapping, duplicated,
        /// any order), accounted memory stays within a small multiple of the window and the
        /// bytes come out exact.
        #[test]
        fn memory_bounded_by_window(
            window in 1usize..40_000,
            seed in 1u64..u64::MAX,
            max_len in 1usize..64,
            frames in 1usize..3000,
        ) {
            let data: Vec<u8> = (0..window).map(|i| (i * 31) as u8).collect();
            let mut state = seed;
            let mut b = RecvBuffer::new();
            let mut peak = 0;
            for _ in 0..frames {
                let s = (next(&mut state) % window as u64) as usize;
                let e = (s + 1 + (next(&mut state) % max_len as u64) as usize).min(window);
                b.insert(s as u64, &data[s..e]);
                peak = peak.max(b.memory());
            }
            // Fill whatever is missing, back to front.
            for s in (0..window).rev().step_by(97) {
                let e = (s + 97).min(window);
                b.insert(s as u64, &data[s..e]);
                peak = peak.max(b.memory());
            }
            let mut s = 0;
            while s < window {
                let e = (s + 97).min(window);
                b.insert(s as u64, &data[s..e]);
                s = e;
            }
            prop_assert!(peak <= 3 * window + 2 * (PAGE + 256), "peak {} for a window of {}", peak, window);
            let mut out = vec![0u8; window];
            prop_assert_eq!(b.read(&mut out), window);
            prop_assert_eq!(out, data);
            prop_assert_eq!(b.buffered(), 0);
        }
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
