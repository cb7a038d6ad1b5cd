//! The receiving half of a stream: reassembly buffer and receive state machine
//! (RFC 9000 §3.2).

use super::flow::RecvCredit;
pub use super::reassembly::RecvBuffer;
use super::recv_store::{RecvStore, StreamData};
use super::{ReadOutcome, StreamError};
use crate::coding::VARINT_MAX;
use crate::error::{TransportError, TransportErrorCode};

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
    buf: RecvStore,
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
            buf: RecvStore::new(),
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
    ///
    /// `conn_room` is what the connection-level credit still allows: data that would take
    /// the connection past it is a FLOW_CONTROL_ERROR (RFC 9000 §4.1) and changes nothing.
    pub fn on_data(
        &mut self,
        offset: u64,
        data: StreamData<'_>,
        fin: bool,
        conn_room: u64,
    ) -> Result<u64, TransportError> {
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
        if grew > conn_room {
            return Err(flow_control_error("data beyond MAX_DATA"));
        }
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
            // Deferred bytes arrive with store(), which measures the gap then.
            let stored_now = !matches!(data, StreamData::Deferred(_));
            self.buf.insert(offset, data);
            if stored_now {
                self.note_gap();
            }
            if self.final_size == Some(self.buf.contiguous_end()) {
                self.state = RecvState::DataRecvd;
            }
        }
        Ok(grew)
    }

    /// Stores data whose frames were accounted for with [`StreamData::Deferred`]: dropped if
    /// the stream was reset or stopped since.
    pub fn store(&mut self, offset: u64, data: StreamData<'_>) {
        if !matches!(self.state, RecvState::Recv | RecvState::SizeKnown) || self.stopped.is_some() {
            return;
        }
        self.buf.insert(offset, data);
        self.note_gap();
        if self.final_size == Some(self.buf.contiguous_end()) {
            self.state = RecvState::DataRecvd;
        }
    }

    /// Tells the credit how much received data waits beyond a gap (window auto-tuning).
    fn note_gap(&mut self) {
        self.credit.note_held_back(self.max_received.saturating_sub(self.buf.contiguous_end()));
    }

    /// Processes a RESET_STREAM frame; returns the growth of the highest received offset.
    /// `conn_room` as for [`RecvStream::on_data`].
    pub fn on_reset(&mut self, error_code: u64, final_size: u64, conn_room: u64) -> Result<u64, TransportError> {
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
        if grew > conn_room {
            return Err(flow_control_error("final size beyond MAX_DATA"));
        }
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

    /// Like [`RecvStream::read`], but hands up to `max` bytes to `f` in place (in order, in
    /// as many pieces as they are held in) instead of copying them out.
    pub fn read_with(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<ReadOutcome, StreamError> {
        self.read_by(max, |buf| (buf.read_with(max, f), ())).map(|(o, ())| o)
    }

    /// Like [`RecvStream::read`], but takes up to `max` bytes as one buffer, without a copy
    /// while the data is held as chunks (`recv_store.rs`). `Ok((outcome, None))` only at the
    /// end of the stream.
    pub fn read_chunk(&mut self, max: usize) -> Result<(ReadOutcome, Option<bytes::Bytes>), StreamError> {
        self.read_by(max, |buf| {
            let chunk = buf.read_chunk(max);
            (chunk.as_ref().map_or(0, bytes::Bytes::len), chunk)
        })
    }

    /// The states and accounting of a read; `take` takes the bytes and says how many.
    fn read_by<T: Default>(
        &mut self,
        max: usize,
        take: impl FnOnce(&mut RecvStore) -> (usize, T),
    ) -> Result<(ReadOutcome, T), StreamError> {
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
        let (len, taken) = take(&mut self.buf);
        let fin = self.state == RecvState::DataRecvd && self.buf.readable() == 0;
        if fin {
            self.state = RecvState::DataRead;
        } else if len == 0 && max > 0 {
            self.notified = false;
            return Err(StreamError::Blocked);
        }
        self.credit.on_consumed(len as u64);
        Ok((ReadOutcome { len, fin }, taken))
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
