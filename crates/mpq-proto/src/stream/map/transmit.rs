//! Transmit side of the stream table: scheduling of STREAM data, acknowledgement and loss
//! of chunks, and the control-frame queue.

use std::time::Duration;

use super::{di, Streams, DIRS};
use crate::frame::Frame;
use smallvec::SmallVec;

use crate::stream::{BatchData, DataLease, StreamChunk, StreamEvent};
use crate::time::Instant;
use crate::types::StreamId;

/// Most ranges one send batch leases (bounds the work of taking a lease).
pub const MAX_LEASE_PARTS: usize = 16;

impl Streams {
    /// Queues a stream for transmission if it has something to send.
    pub(super) fn schedule(&mut self, id: StreamId) {
        let avail = self.conn_avail();
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        let Some(send) = s.send.as_ref() else { return };
        if send.has_lost() && !s.in_lost_queue {
            s.in_lost_queue = true;
            self.lost_queue.push_back(id);
        }
        if send.has_new(avail) && !s.in_send_queue {
            s.in_send_queue = true;
            self.send_queue.push_back(id);
        }
    }

    /// Connection credit left for new data. Writes are already bounded by connection
    /// credit, so this only bites if the accounting is wrong; it is kept as a safety net.
    pub(super) fn conn_avail(&self) -> u64 {
        self.conn_send.max().saturating_sub(self.conn_sent)
    }

    /// Next chunk of STREAM data, at most `max_len` payload bytes: retransmissions first, then
    /// new data, round-robin across streams.
    pub fn next_stream_chunk(&mut self, max_len: usize) -> Option<StreamChunk> {
        self.next_stream_chunk_where(max_len, &|_| true)
    }

    /// [`Self::next_stream_chunk`] restricted to the streams `allowed` accepts (stream-to-path
    /// pinning); the others keep their place in the queues.
    pub fn next_stream_chunk_where(
        &mut self,
        max_len: usize,
        allowed: &dyn Fn(StreamId) -> bool,
    ) -> Option<StreamChunk> {
        let max = max_len as u64;
        for _ in 0..self.lost_queue.len() {
            let id = self.lost_queue.pop_front()?;
            if !allowed(id) {
                self.lost_queue.push_back(id);
                continue;
            }
            let Some(s) = self.streams.get_mut(&id) else {
                continue;
            };
            s.in_lost_queue = false;
            let Some(send) = s.send.as_mut() else {
                continue;
            };
            let c = send.next_retransmit(max);
            if send.has_lost() {
                s.in_lost_queue = true;
                self.lost_queue.push_back(id);
            }
            if let Some(c) = c {
                return Some(StreamChunk { id, offset: c.offset, len: c.len as usize, fin: c.fin });
            }
        }
        let avail = self.conn_avail();
        for _ in 0..self.send_queue.len() {
            let id = self.send_queue.pop_front()?;
            if !allowed(id) {
                self.send_queue.push_back(id);
                continue;
            }
            let Some(s) = self.streams.get_mut(&id) else {
                continue;
            };
            s.in_send_queue = false;
            let Some(send) = s.send.as_mut() else {
                continue;
            };
            let c = send.next_new(max, avail);
            if send.has_new(avail) {
                s.in_send_queue = true;
                self.send_queue.push_back(id);
            }
            if let Some(c) = c {
                self.conn_sent += c.len;
                return Some(StreamChunk { id, offset: c.offset, len: c.len as usize, fin: c.fin });
            }
        }
        None
    }

    /// Leases up to `max_len` bytes of stream data for a send batch (`conn/send/lease.rs`):
    /// from each stream `allowed` on this path with data waiting, its lost data to resend
    /// (range by range, in order) and, once none is left, its new data (at most
    /// [`MAX_LEASE_PARTS`] ranges in all), each
    /// stream's share bounded to `max_len` split evenly over them but never below `min_share`
    /// (a packet's worth). `None` if nothing can be leased (the batch then takes chunks one
    /// by one with [`Self::next_stream_chunk_where`]). With one stream the queues and the
    /// connection credit are left as a run of `next_stream_chunk` calls over the same bytes
    /// would leave them; with several, each keeps its place in the round-robin.
    pub fn lease_stream_data(
        &mut self,
        max_len: u64,
        min_share: u64,
        allowed: &dyn Fn(StreamId) -> bool,
    ) -> Option<BatchData> {
        // The streams with data waiting (one with both lost and new data counts once).
        let in_lost = |id: &StreamId| self.streams.get(id).is_some_and(|s| s.in_lost_queue);
        let only_new = self.send_queue.iter().take(MAX_LEASE_PARTS).filter(|id| !in_lost(id)).count();
        let waiting = (self.lost_queue.len() + only_new).clamp(1, MAX_LEASE_PARTS);
        let share = (max_len / waiting as u64).max(min_share).min(max_len);
        let mut parts: SmallVec<[DataLease; 1]> = SmallVec::new();
        let mut left = max_len;
        for _ in 0..self.lost_queue.len() {
            if left == 0 || parts.len() >= MAX_LEASE_PARTS {
                break;
            }
            let Some(id) = self.lost_queue.pop_front() else { break };
            // Its lost ranges in order, as the table would resend them, up to its share.
            let mut quota = share.min(left);
            while quota > 0 && parts.len() < MAX_LEASE_PARTS {
                let Some(part) = self.lease_from(id, quota, true, allowed) else { break };
                quota -= part.end - part.start;
                left -= part.end - part.start;
                let more = part.capped || !self.stream_has_lost(id);
                parts.push(part);
                if more {
                    break;
                }
            }
            self.requeue(id, true);
        }
        for _ in 0..self.send_queue.len() {
            if left == 0 || parts.len() >= MAX_LEASE_PARTS {
                break;
            }
            let Some(id) = self.send_queue.pop_front() else { break };
            if self.stream_has_lost(id) {
                // Lost data not in this lease goes first: its new data waits.
                self.send_queue.push_back(id);
                continue;
            }
            match self.lease_from(id, share.min(left), false, allowed) {
                Some(part) => {
                    left -= part.end - part.start;
                    parts.push(part);
                }
                None => self.requeue(id, false),
            }
        }
        (!parts.is_empty()).then(|| BatchData::new(parts))
    }

    /// Leases up to `max_len` bytes of stream `id`: its first lost range if `resend` (the
    /// caller, which took it off the lost queue, requeues it), else its new data (it was
    /// taken off the send queue and goes back to its end if it has more); `None` if it is
    /// not `allowed` or has nothing.
    fn lease_from(
        &mut self,
        id: StreamId,
        max_len: u64,
        resend: bool,
        allowed: &dyn Fn(StreamId) -> bool,
    ) -> Option<DataLease> {
        if !allowed(id) {
            return None;
        }
        let avail = self.conn_avail();
        let s = self.streams.get_mut(&id)?;
        let send = s.send.as_mut()?;
        let state_before = send.state();
        let c = if resend { send.next_retransmit(max_len) } else { send.next_new(max_len, avail) };
        if !resend {
            // Back in the round-robin if it has more, as the table decides (with the credit
            // before the chunk). (A stream's resends are requeued by the caller, once.)
            s.in_send_queue = send.has_new(avail);
            if s.in_send_queue {
                self.send_queue.push_back(id);
            }
        }
        let c = c?;
        if !resend {
            self.conn_sent += c.len;
        }
        let parts = send.buf.slices(c.offset, c.len);
        let end = c.offset + c.len;
        // More of the stream follows the leased range right away: a chunk the lease cannot
        // fill waits for a new lease (the table would have cut a longer one).
        let capped = c.len == max_len && if resend { send.buf.lost_starts_at(end) } else { end < send.buf.offset() };
        Some(DataLease {
            id,
            resend,
            start: c.offset,
            next: c.offset,
            end,
            fin: c.fin,
            fin_taken: false,
            capped,
            state_before,
            parts,
        })
    }

    /// Stream `id` still has lost data to resend.
    fn stream_has_lost(&self, id: StreamId) -> bool {
        self.streams.get(&id).and_then(|s| s.send.as_ref()).is_some_and(|s| s.has_lost())
    }

    /// Stream `id`, taken off its queue and not leased, goes back to the end of it (the
    /// table's round-robin would have skipped it too).
    fn requeue(&mut self, id: StreamId, lost: bool) {
        let Some(s) = self.streams.get_mut(&id) else { return };
        if lost {
            s.in_lost_queue = false;
        } else {
            s.in_send_queue = false;
        }
        if s.send.is_some() {
            // `schedule` queues it again only if it still has something to send.
            self.schedule(id);
        }
    }

    /// Takes back what a send batch did not use of its lease: new bytes (and the FIN) are
    /// unsent again, their connection credit free again; bytes to resend are lost again.
    pub fn return_stream_data(&mut self, data: BatchData) {
        for lease in data.parts {
            self.return_part(lease);
        }
    }

    fn return_part(&mut self, lease: DataLease) {
        let unused = lease.end - lease.next;
        let fin_unused = lease.fin && !lease.fin_taken;
        if unused == 0 && !fin_unused {
            return;
        }
        if lease.resend {
            if let Some(send) = self.streams.get_mut(&lease.id).and_then(|s| s.send.as_mut()) {
                send.on_lost(lease.next, unused, fin_unused);
            }
            self.schedule(lease.id);
            return;
        }
        let Some(send) = self.streams.get_mut(&lease.id).and_then(|s| s.send.as_mut()) else {
            self.conn_sent -= unused;
            return;
        };
        let sent_nothing = lease.next == lease.start && !lease.fin_taken;
        if send.unlease(lease.next, lease.end, fin_unused, lease.state_before, sent_nothing) {
            self.conn_sent -= unused;
        }
        self.schedule(lease.id);
    }

    /// A frame of the transmit side's control queue is waiting (what
    /// [`Self::poll_control`] would look at); a send batch with none may skip it.
    pub fn has_control_pending(&self) -> bool {
        !self.reset_queue.is_empty()
            || !self.stop_queue.is_empty()
            || self.max_data_pending
            || !self.msd_queue.is_empty()
            || self.max_streams_pending.iter().any(|&p| p)
            || self.data_blocked.is_some()
            || !self.stream_data_blocked.is_empty()
            || self.streams_blocked.iter().any(Option::is_some)
    }

    /// Appends exactly `len` bytes of stream `id` at `offset` to `out`.
    pub fn copy_stream_data(&self, id: StreamId, offset: u64, len: usize, out: &mut Vec<u8>) {
        match self.streams.get(&id).and_then(|s| s.send.as_ref()) {
            Some(send) => send.buf.copy(offset, len, out),
            None => {
                debug_assert!(false, "copy from a closed stream");
                out.resize(out.len() + len, 0);
            }
        }
    }

    /// True while every byte of `chunk` is still in its stream's send buffer (not yet
    /// acknowledged and freed) and some of it (or its FIN) waits for acknowledgement, so
    /// that a copy of it can be sent on another path: a copy of bytes acknowledged out of
    /// order would arrive late for sure.
    pub fn chunk_buffered(&self, chunk: &StreamChunk) -> bool {
        self.streams.get(&chunk.id).and_then(|s| s.send.as_ref()).is_some_and(|send| {
            let (offset, len) = (chunk.offset, chunk.len as u64);
            !send.is_closed() && send.buf.contains(offset, len) && !send.is_acked(offset, len, chunk.fin)
        })
    }

    /// Every byte of the chunk (and its FIN) was acknowledged, or the stream no longer
    /// sends (finished, reset or gone).
    pub fn chunk_acked(&self, chunk: &StreamChunk) -> bool {
        let Some(send) = self.streams.get(&chunk.id).and_then(|s| s.send.as_ref()) else { return true };
        send.is_closed() || send.is_acked(chunk.offset, chunk.len as u64, chunk.fin)
    }

    /// A chunk was acknowledged.
    pub fn on_stream_chunk_acked(&mut self, chunk: &StreamChunk) {
        let id = chunk.id;
        let Some(send) = self.streams.get_mut(&id).and_then(|s| s.send.as_mut()) else {
            return;
        };
        if send.on_ack(chunk.offset, chunk.len as u64, chunk.fin) {
            self.events.push_back(StreamEvent::Finished { id });
            self.maybe_remove(id);
        } else {
            self.notify_writable(id);
        }
    }

    /// A chunk was declared lost: its unacknowledged parts are retransmitted.
    pub fn on_stream_chunk_lost(&mut self, chunk: &StreamChunk) {
        let Some(send) = self.streams.get_mut(&chunk.id).and_then(|s| s.send.as_mut()) else {
            return;
        };
        if send.on_lost(chunk.offset, chunk.len as u64, chunk.fin) {
            self.schedule(chunk.id);
        }
    }

    /// Next control frame to send: MAX_DATA, MAX_STREAM_DATA, MAX_STREAMS, DATA_BLOCKED,
    /// STREAM_DATA_BLOCKED, STREAMS_BLOCKED, RESET_STREAM or STOP_SENDING. `now` and `rtt`
    /// (smoothed) drive window auto-tuning.
    pub fn poll_control(&mut self, now: Instant, rtt: Duration) -> Option<Frame<'static>> {
        while let Some(id) = self.reset_queue.pop_front() {
            let send = self.streams.get(&id).and_then(|s| s.send.as_ref());
            if let Some((error_code, final_size)) = send.filter(|s| !s.is_closed()).and_then(|s| s.reset_info()) {
                return Some(Frame::ResetStream { id, error_code, final_size });
            }
        }
        while let Some((id, error_code)) = self.stop_queue.pop_front() {
            if self.stop_relevant(id) {
                return Some(Frame::StopSending { id, error_code });
            }
        }
        if std::mem::take(&mut self.max_data_pending) {
            return Some(Frame::MaxData(self.conn_recv.poll_limit(now, rtt)));
        }
        while let Some(id) = self.msd_queue.pop_front() {
            let Some(s) = self.streams.get_mut(&id) else {
                continue;
            };
            s.in_msd_queue = false;
            let Some(r) = s.recv.as_mut().filter(|r| r.wants_credit()) else {
                continue;
            };
            let max = r.credit.poll_limit(now, rtt);
            // Keep the connection window ahead of any stream window, and raise its limit
            // with the stream's (a stream window that grew without consumption, e.g. behind
            // a slow path's gap, would otherwise wait for the connection limit).
            self.conn_recv.ensure_window(r.credit.window() + r.credit.window() / 2);
            if self.conn_recv.needs_update() {
                self.max_data_pending = true;
            }
            return Some(Frame::MaxStreamData { id, max });
        }
        for dir in DIRS {
            if std::mem::take(&mut self.max_streams_pending[di(dir)]) {
                return Some(Frame::MaxStreams { dir, count: self.max_remote[di(dir)] });
            }
        }
        if let Some(limit) = self.data_blocked.take() {
            return Some(Frame::DataBlocked(limit));
        }
        while let Some((id, limit)) = self.stream_data_blocked.pop_front() {
            if self.stream_blocked_at(id) == Some(limit) {
                return Some(Frame::StreamDataBlocked { id, limit });
            }
        }
        for dir in DIRS {
            if let Some(limit) = self.streams_blocked[di(dir)].take() {
                return Some(Frame::StreamsBlocked { dir, limit });
            }
        }
        None
    }

    fn stop_relevant(&self, id: StreamId) -> bool {
        self.streams.get(&id).and_then(|s| s.recv.as_ref()).is_some_and(|r| r.final_size().is_none())
    }

    /// The stream's send limit if it is (still) blocked by it.
    fn stream_blocked_at(&self, id: StreamId) -> Option<u64> {
        let send = self.streams.get(&id)?.send.as_ref()?;
        (send.is_open() && send.credit.available() == 0).then(|| send.credit.max())
    }

    /// A control frame from [`Self::poll_control`] was acknowledged.
    pub fn on_control_acked(&mut self, f: &Frame<'_>) {
        if let Frame::ResetStream { id, .. } = *f {
            if let Some(send) = self.streams.get_mut(&id).and_then(|s| s.send.as_mut()) {
                send.on_reset_acked();
                self.maybe_remove(id);
            }
        }
    }

    /// A control frame from [`Self::poll_control`] was lost: re-queued only if still relevant
    /// (not superseded). Other frames are not the stream layer's and are ignored.
    pub fn on_control_lost(&mut self, f: &Frame<'_>) {
        match *f {
            Frame::MaxData(max) if max == self.conn_recv.limit() => self.max_data_pending = true,
            Frame::MaxStreamData { id, max } => {
                let Some(s) = self.streams.get_mut(&id) else {
                    return;
                };
                let Some(r) = s.recv.as_ref() else { return };
                if r.wants_credit() && r.credit.limit() == max && !s.in_msd_queue {
                    s.in_msd_queue = true;
                    self.msd_queue.push_back(id);
                }
            }
            Frame::MaxStreams { dir, count } if count == self.max_remote[di(dir)] => {
                self.max_streams_pending[di(dir)] = true;
            }
            Frame::DataBlocked(limit) if self.conn_send.max() == limit && self.conn_send.available() == 0 => {
                self.data_blocked = Some(limit);
            }
            Frame::StreamDataBlocked { id, limit } if self.stream_blocked_at(id) == Some(limit) => {
                self.stream_data_blocked.push_back((id, limit));
            }
            Frame::StreamsBlocked { dir, limit }
                if self.peer_max_streams[di(dir)] == limit && self.next_local[di(dir)] >= limit =>
            {
                self.streams_blocked[di(dir)] = Some(limit);
            }
            Frame::ResetStream { id, .. } => {
                let send = self.streams.get(&id).and_then(|s| s.send.as_ref());
                if send.is_some_and(|s| s.reset_info().is_some() && !s.is_closed()) {
                    self.reset_queue.push_back(id);
                }
            }
            Frame::StopSending { id, error_code } if self.stop_relevant(id) => {
                self.stop_queue.push_back((id, error_code));
            }
            // Superseded, or not a stream-layer frame.
            _ => {}
        }
    }

    /// Bytes of stream data waiting to be sent (new and lost), over every stream; the
    /// ECF scheduler weighs it against the paths' windows.
    pub fn queued_bytes(&self) -> u64 {
        self.streams.values().filter_map(|s| s.send.as_ref()).filter(|s| !s.is_closed()).map(|s| s.buf.queued()).sum()
    }

    /// True if stream data or a control frame waits to be sent.
    pub fn has_pending_data(&self) -> bool {
        self.has_stream_data() || self.has_control_pending()
    }

    /// True if stream data (new within the flow-control limits, or lost) waits to be sent:
    /// what STREAM frames would carry, control frames aside.
    pub fn has_stream_data(&self) -> bool {
        let avail = self.conn_avail();
        let send = |id: &StreamId| self.streams.get(id).and_then(|s| s.send.as_ref());
        self.lost_queue.iter().any(|id| send(id).is_some_and(|s| s.has_lost()))
            || self.send_queue.iter().any(|id| send(id).is_some_and(|s| s.has_new(avail)))
    }
}
