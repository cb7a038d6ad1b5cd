//! Application API of the stream table.

use super::{di, Streams};
use crate::stream::{ReadOutcome, SendStream, StreamError, StreamEvent};
use crate::types::{Dir, StreamId};

impl Streams {
    /// Opens a stream; `None` if the peer's MAX_STREAMS forbids it (STREAMS_BLOCKED is queued).
    pub fn open(&mut self, dir: Dir) -> Option<StreamId> {
        let d = di(dir);
        if self.next_local[d] >= self.peer_max_streams[d] {
            let limit = self.peer_max_streams[d];
            self.open_refused[d] = true;
            if self.streams_blocked_sent[d] != Some(limit) {
                self.streams_blocked_sent[d] = Some(limit);
                self.streams_blocked[d] = Some(limit);
            }
            return None;
        }
        let id = StreamId::new(self.side, dir, self.next_local[d]);
        self.next_local[d] += 1;
        let s = self.new_stream(id);
        self.streams.insert(id, s);
        Some(id)
    }

    /// The next stream opened by the peer, in order.
    pub fn accept(&mut self, dir: Dir) -> Option<StreamId> {
        let d = di(dir);
        if self.next_accept[d] >= self.next_remote[d] {
            return None;
        }
        self.next_accept[d] += 1;
        Some(StreamId::new(self.side.peer(), dir, self.next_accept[d] - 1))
    }

    fn send_mut(&mut self, id: StreamId) -> Result<&mut SendStream, StreamError> {
        let s = self.streams.get_mut(&id).ok_or(StreamError::ClosedStream)?;
        let send = s.send.as_mut().ok_or(StreamError::WrongDirection)?;
        if let Some(code) = send.stop_code {
            return Err(StreamError::Stopped(code));
        }
        if !send.is_open() {
            return Err(StreamError::ClosedStream);
        }
        Ok(send)
    }

    /// Writes data (copied into the send buffer); may accept fewer bytes than given (send
    /// buffer limit, flow control). `Err(Blocked)` when nothing could be accepted: wait for a
    /// Writable event.
    pub fn write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, StreamError> {
        self.write_with(id, data.len(), |send, n| send.write(&data[..n]))
    }

    /// Like [`Streams::write`], without copying: the stream keeps a reference to the accepted
    /// prefix of `data` (`data.slice(..n)`) until the peer acknowledged it.
    pub fn write_bytes(&mut self, id: StreamId, data: &bytes::Bytes) -> Result<usize, StreamError> {
        self.write_with(id, data.len(), |send, n| send.write_bytes(data.slice(..n)))
    }

    /// Limits a write of `len` bytes to what the buffer limit and both credits allow, hands
    /// the accepted length to `put`, and does the flow-control bookkeeping.
    fn write_with(
        &mut self,
        id: StreamId,
        len: usize,
        put: impl FnOnce(&mut SendStream, usize),
    ) -> Result<usize, StreamError> {
        let conn_avail = self.conn_send.available();
        let limit = self.send_buffer_limit;
        let send = self.send_mut(id)?;
        let stream_avail = send.credit.available();
        let buf_avail = limit.saturating_sub(send.buf.unacked_len());
        let n = (len as u64).min(stream_avail).min(buf_avail).min(conn_avail) as usize;
        if n < len {
            send.want_writable = true;
        }
        if n > 0 {
            put(send, n);
        }
        if n < len && n as u64 == stream_avail {
            if let Some(limit) = send.credit.take_blocked() {
                self.stream_data_blocked.push_back((id, limit));
            }
        }
        self.conn_send.consume(n as u64);
        if n < len && n as u64 == conn_avail {
            self.data_blocked = self.conn_send.take_blocked().or(self.data_blocked);
        }
        self.schedule(id);
        if n == 0 && len > 0 {
            return Err(StreamError::Blocked);
        }
        Ok(n)
    }

    /// Ends the stream: a FIN follows the written data.
    pub fn finish(&mut self, id: StreamId) -> Result<(), StreamError> {
        self.send_mut(id)?.finish();
        self.schedule(id);
        Ok(())
    }

    /// Abandons sending: queues RESET_STREAM, stops (re)transmission of data.
    pub fn reset(&mut self, id: StreamId, error_code: u64) -> Result<(), StreamError> {
        let s = self.streams.get_mut(&id).ok_or(StreamError::ClosedStream)?;
        let send = s.send.as_mut().ok_or(StreamError::WrongDirection)?;
        if send.reset_info().is_some() || send.is_closed() {
            return Err(StreamError::ClosedStream);
        }
        self.do_reset(id, error_code);
        Ok(())
    }

    pub(super) fn do_reset(&mut self, id: StreamId, error_code: u64) {
        let Some(send) = self.streams.get_mut(&id).and_then(|s| s.send.as_mut()) else {
            return;
        };
        let unsent = send.reset(error_code);
        self.conn_send.release(unsent);
        self.reset_queue.push_back(id);
        if unsent > 0 {
            self.notify_writable_all();
        }
    }

    /// Reads into `buf`: bytes read and whether the end of the stream was reached.
    /// `Err(Blocked)` when nothing is readable yet, `Err(Reset)` once if the peer reset it.
    pub fn read(&mut self, id: StreamId, buf: &mut [u8]) -> Result<ReadOutcome, StreamError> {
        let mut at = 0;
        self.read_with(id, buf.len(), &mut |piece| {
            buf[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
        })
    }

    /// Like [`Streams::read`], but takes up to `max` bytes as one buffer, without a copy
    /// while the stream holds its data as chunks; `Ok((outcome, None))` only at the end of
    /// the stream.
    pub fn read_chunk(&mut self, id: StreamId, max: usize) -> Result<(ReadOutcome, Option<bytes::Bytes>), StreamError> {
        self.debug_assert_no_pieces();
        let s = self.streams.get_mut(&id).ok_or(StreamError::ClosedStream)?;
        let r = s.recv.as_mut().ok_or(StreamError::WrongDirection)?;
        let res = r.read_chunk(max);
        if matches!(res, Ok(_) | Err(StreamError::Reset(_))) {
            self.after_recv(id);
        }
        res
    }

    /// Like [`Streams::read`], but hands up to `max` bytes to `f` in place (in order, in as
    /// many pieces as they are held in) instead of copying them out.
    pub fn read_with(
        &mut self,
        id: StreamId,
        max: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<ReadOutcome, StreamError> {
        self.debug_assert_no_pieces();
        let s = self.streams.get_mut(&id).ok_or(StreamError::ClosedStream)?;
        let r = s.recv.as_mut().ok_or(StreamError::WrongDirection)?;
        let res = r.read_with(max, f);
        if matches!(res, Ok(_) | Err(StreamError::Reset(_))) {
            self.after_recv(id);
        }
        res
    }

    /// Abandons reading: discards data and queues STOP_SENDING.
    pub fn stop_sending(&mut self, id: StreamId, error_code: u64) -> Result<(), StreamError> {
        let s = self.streams.get_mut(&id).ok_or(StreamError::ClosedStream)?;
        let r = s.recv.as_mut().ok_or(StreamError::WrongDirection)?;
        if r.is_closed() || r.is_stopped() {
            return Err(StreamError::ClosedStream);
        }
        if r.stop(error_code) {
            self.stop_queue.push_back((id, error_code));
        }
        self.after_recv(id);
        Ok(())
    }

    /// Next application event.
    pub fn poll_event(&mut self) -> Option<StreamEvent> {
        self.events.pop_front()
    }

    pub(super) fn notify_writable(&mut self, id: StreamId) {
        let conn_avail = self.conn_send.available();
        let limit = self.send_buffer_limit;
        let Some(send) = self.streams.get_mut(&id).and_then(|s| s.send.as_mut()) else {
            return;
        };
        if send.want_writable
            && send.is_open()
            && conn_avail > 0
            && send.credit.available() > 0
            && send.buf.unacked_len() < limit
        {
            send.want_writable = false;
            self.events.push_back(StreamEvent::Writable { id });
        }
    }

    pub(super) fn notify_writable_all(&mut self) {
        let ids: Vec<StreamId> = self
            .streams
            .iter()
            .filter(|(_, s)| s.send.as_ref().is_some_and(|x| x.want_writable))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.notify_writable(id);
        }
    }

    /// Number of streams in the table (open or draining).
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// True when no stream is open.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }
}
