//! The stream table: stream limits, connection-level flow control, transmit scheduling,
//! the control-frame queue and the application API.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use super::flow::{RecvCredit, SendCredit};
use super::recv::{RecvState, RecvStream};
use super::send::SendStream;
use super::{
    LocalStreamParams, ReadOutcome, StreamChunk, StreamControl, StreamError, StreamEvent,
    StreamsConfig,
};
use crate::error::{TransportError, TransportErrorCode};
use crate::time::Instant;
use crate::types::{Dir, Side, StreamId};

/// Stream counts never exceed 2^60 (RFC 9000 §4.6).
const MAX_STREAM_COUNT: u64 = 1 << 60;

fn di(dir: Dir) -> usize {
    match dir {
        Dir::Bi => 0,
        Dir::Uni => 1,
    }
}

const DIRS: [Dir; 2] = [Dir::Bi, Dir::Uni];

fn state_error(reason: &str) -> TransportError {
    TransportError::new(TransportErrorCode::STREAM_STATE_ERROR, reason)
}

#[derive(Debug)]
struct Stream {
    send: Option<SendStream>,
    recv: Option<RecvStream>,
    in_send_queue: bool,
    in_lost_queue: bool,
    in_msd_queue: bool,
}

/// Which half a received frame addresses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Half {
    Recv,
    Send,
}

/// All streams of a connection; see the [module docs](super).
#[derive(Debug)]
pub struct Streams {
    side: Side,
    config: StreamsConfig,
    streams: HashMap<StreamId, Stream>,
    /// Streams we opened, per direction.
    next_local: [u64; 2],
    /// The peer's MAX_STREAMS.
    peer_max_streams: [u64; 2],
    /// Streams the peer opened (highest index + 1), per direction.
    next_remote: [u64; 2],
    /// Next peer stream [`Streams::accept`] returns.
    next_accept: [u64; 2],
    /// Our MAX_STREAMS (advertised or to advertise).
    max_remote: [u64; 2],
    /// The peer's initial_max_stream_data_{bidi_local, bidi_remote, uni}.
    peer_stream_data: [u64; 3],
    /// Connection credit from the peer; `used` counts bytes committed to send buffers
    /// (written, minus unsent bytes discarded by a reset), so writes never overcommit.
    conn_send: SendCredit,
    /// New stream bytes sent (the sum of the highest offsets sent, what the peer counts).
    conn_sent: u64,
    /// Connection credit we grant.
    conn_recv: RecvCredit,
    lost_queue: VecDeque<StreamId>,
    send_queue: VecDeque<StreamId>,
    max_data_pending: bool,
    msd_queue: VecDeque<StreamId>,
    max_streams_pending: [bool; 2],
    data_blocked: Option<u64>,
    stream_data_blocked: VecDeque<(StreamId, u64)>,
    streams_blocked: [Option<u64>; 2],
    streams_blocked_sent: [Option<u64>; 2],
    /// `open` was refused since the last MAX_STREAMS increase: emit Available on the next.
    open_refused: [bool; 2],
    reset_queue: VecDeque<StreamId>,
    stop_queue: VecDeque<(StreamId, u64)>,
    events: VecDeque<StreamEvent>,
}

impl Streams {
    /// An empty stream table. The peer's limits are zero until [`Streams::set_peer_params`].
    pub fn new(side: Side, config: &StreamsConfig) -> Self {
        Self {
            side,
            config: config.clone(),
            streams: HashMap::new(),
            next_local: [0; 2],
            peer_max_streams: [0; 2],
            next_remote: [0; 2],
            next_accept: [0; 2],
            max_remote: [config.max_concurrent_bidi, config.max_concurrent_uni]
                .map(|n| n.min(MAX_STREAM_COUNT)),
            peer_stream_data: [0; 3],
            conn_send: SendCredit::new(0),
            conn_sent: 0,
            conn_recv: RecvCredit::new(config.receive_window, config.max_connection_window),
            lost_queue: VecDeque::new(),
            send_queue: VecDeque::new(),
            max_data_pending: false,
            msd_queue: VecDeque::new(),
            max_streams_pending: [false; 2],
            data_blocked: None,
            stream_data_blocked: VecDeque::new(),
            streams_blocked: [None; 2],
            streams_blocked_sent: [None; 2],
            open_refused: [false; 2],
            reset_queue: VecDeque::new(),
            stop_queue: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// Applies the peer's transport parameters (initial_max_data,
    /// initial_max_stream_data_{bidi_local, bidi_remote, uni}, initial_max_streams_{bidi, uni}).
    pub fn set_peer_params(
        &mut self,
        max_data: u64,
        bidi_local: u64,
        bidi_remote: u64,
        uni: u64,
        max_streams_bidi: u64,
        max_streams_uni: u64,
    ) {
        self.peer_stream_data = [bidi_local, bidi_remote, uni];
        self.on_max_data(max_data);
        self.on_max_streams(Dir::Bi, max_streams_bidi);
        self.on_max_streams(Dir::Uni, max_streams_uni);
        let ids: Vec<StreamId> = self.streams.keys().copied().collect();
        for id in ids {
            if self.streams[&id].send.is_some() {
                let max = self.peer_send_limit(id);
                self.raise_stream_credit(id, max);
            }
        }
    }

    /// Values for our own transport parameters.
    pub fn local_params(&self) -> LocalStreamParams {
        let w = self.config.stream_receive_window;
        LocalStreamParams {
            max_data: self.config.receive_window,
            max_stream_data_bidi_local: w,
            max_stream_data_bidi_remote: w,
            max_stream_data_uni: w,
            max_streams_bidi: self.max_remote[0],
            max_streams_uni: self.max_remote[1],
        }
    }

    /// The peer's initial send limit for a stream of ours to send on.
    fn peer_send_limit(&self, id: StreamId) -> u64 {
        match (id.dir(), id.initiator() == self.side) {
            (Dir::Uni, _) => self.peer_stream_data[2],
            (Dir::Bi, true) => self.peer_stream_data[1],
            (Dir::Bi, false) => self.peer_stream_data[0],
        }
    }

    fn new_stream(&self, id: StreamId) -> Stream {
        let local = id.initiator() == self.side;
        let has_send = id.dir() == Dir::Bi || local;
        let has_recv = id.dir() == Dir::Bi || !local;
        let c = &self.config;
        Stream {
            send: has_send.then(|| SendStream::new(self.peer_send_limit(id))),
            recv: has_recv.then(|| RecvStream::new(c.stream_receive_window, c.max_stream_window)),
            in_send_queue: false,
            in_lost_queue: false,
            in_msd_queue: false,
        }
    }

    /// Finds the stream a received frame addresses, opening peer streams as needed.
    /// `Ok(None)`: the stream was already closed; the frame is ignored.
    fn frame_stream(&mut self, id: StreamId, half: Half) -> Result<bool, TransportError> {
        let local = id.initiator() == self.side;
        if id.dir() == Dir::Uni && local == (half == Half::Recv) {
            return Err(state_error(match half {
                Half::Recv => "receive frame on a send-only stream",
                Half::Send => "send frame on a receive-only stream",
            }));
        }
        let d = di(id.dir());
        if local {
            if id.index() >= self.next_local[d] {
                return Err(state_error("frame for a stream we never opened"));
            }
        } else if id.index() >= self.max_remote[d] {
            return Err(TransportError::new(
                TransportErrorCode::STREAM_LIMIT_ERROR,
                "stream beyond MAX_STREAMS",
            ));
        } else {
            while self.next_remote[d] <= id.index() {
                let nid = StreamId::new(self.side.peer(), id.dir(), self.next_remote[d]);
                self.next_remote[d] += 1;
                let s = self.new_stream(nid);
                self.streams.insert(nid, s);
                self.events.push_back(StreamEvent::Opened { id: nid });
            }
        }
        Ok(self.streams.contains_key(&id))
    }

    /// Bookkeeping after anything touched a receive half: connection credit, stream credit
    /// updates, Readable event, and removal of a closed stream.
    fn after_recv(&mut self, id: StreamId) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        let Some(r) = s.recv.as_mut() else { return };
        self.conn_recv.on_consumed(r.take_retired());
        if self.conn_recv.needs_update() {
            self.max_data_pending = true;
        }
        if r.wants_credit() && r.credit.needs_update() && !s.in_msd_queue {
            s.in_msd_queue = true;
            self.msd_queue.push_back(id);
        }
        if r.is_readable() && !r.notified {
            r.notified = true;
            self.events.push_back(StreamEvent::Readable { id });
        }
        self.maybe_remove(id);
    }

    /// Removes a stream whose both halves are closed; frees a peer stream's slot.
    fn maybe_remove(&mut self, id: StreamId) {
        let Some(s) = self.streams.get(&id) else {
            return;
        };
        let closed = s.send.as_ref().is_none_or(|x| x.is_closed())
            && s.recv.as_ref().is_none_or(|r| r.is_closed());
        if !closed {
            return;
        }
        self.streams.remove(&id);
        if id.initiator() != self.side {
            let d = di(id.dir());
            if self.max_remote[d] < MAX_STREAM_COUNT {
                self.max_remote[d] += 1;
                self.max_streams_pending[d] = true;
            }
        }
    }

    // ---- frames received ----

    /// A STREAM frame.
    pub fn on_stream_frame(
        &mut self,
        id: StreamId,
        offset: u64,
        data: &[u8],
        fin: bool,
    ) -> Result<(), TransportError> {
        if !self.frame_stream(id, Half::Recv)? {
            return Ok(());
        }
        let s = self.streams.get_mut(&id).expect("stream");
        let grew = s
            .recv
            .as_mut()
            .expect("receive half")
            .on_data(offset, data, fin)?;
        if !self.conn_recv.on_received(grew) {
            return Err(TransportError::new(
                TransportErrorCode::FLOW_CONTROL_ERROR,
                "data beyond MAX_DATA",
            ));
        }
        self.after_recv(id);
        Ok(())
    }

    /// A RESET_STREAM frame.
    pub fn on_reset_stream(
        &mut self,
        id: StreamId,
        error_code: u64,
        final_size: u64,
    ) -> Result<(), TransportError> {
        if !self.frame_stream(id, Half::Recv)? {
            return Ok(());
        }
        let s = self.streams.get_mut(&id).expect("stream");
        let r = s.recv.as_mut().expect("receive half");
        let was_open = matches!(r.state(), RecvState::Recv | RecvState::SizeKnown);
        let grew = r.on_reset(error_code, final_size)?;
        if !self.conn_recv.on_received(grew) {
            return Err(TransportError::new(
                TransportErrorCode::FLOW_CONTROL_ERROR,
                "final size beyond MAX_DATA",
            ));
        }
        if was_open && r.state() == RecvState::ResetRecvd && !r.is_stopped() {
            self.events.push_back(StreamEvent::Reset {
                id,
                code: error_code,
            });
        }
        self.after_recv(id);
        Ok(())
    }

    /// A STOP_SENDING frame: the stream is reset with the peer's code.
    pub fn on_stop_sending(&mut self, id: StreamId, error_code: u64) -> Result<(), TransportError> {
        if !self.frame_stream(id, Half::Send)? {
            return Ok(());
        }
        let s = self.streams.get_mut(&id).expect("stream");
        let send = s.send.as_mut().expect("send half");
        if send.reset_info().is_some() || send.is_closed() {
            return Ok(());
        }
        send.stop_code = Some(error_code);
        self.events.push_back(StreamEvent::Stopped {
            id,
            code: error_code,
        });
        self.do_reset(id, error_code);
        Ok(())
    }

    /// A MAX_DATA frame.
    pub fn on_max_data(&mut self, max: u64) {
        if self.conn_send.raise(max) {
            let ids: Vec<StreamId> = self.streams.keys().copied().collect();
            for id in ids {
                self.schedule(id);
            }
            self.notify_writable_all();
        }
    }

    /// A MAX_STREAM_DATA frame.
    pub fn on_max_stream_data(&mut self, id: StreamId, max: u64) -> Result<(), TransportError> {
        if self.frame_stream(id, Half::Send)? {
            self.raise_stream_credit(id, max);
        }
        Ok(())
    }

    fn raise_stream_credit(&mut self, id: StreamId, max: u64) {
        let Some(send) = self.streams.get_mut(&id).and_then(|s| s.send.as_mut()) else {
            return;
        };
        if send.credit.raise(max) {
            self.notify_writable(id);
        }
    }

    /// A MAX_STREAMS frame.
    pub fn on_max_streams(&mut self, dir: Dir, count: u64) {
        let d = di(dir);
        let count = count.min(MAX_STREAM_COUNT);
        if count > self.peer_max_streams[d] {
            self.peer_max_streams[d] = count;
            if std::mem::take(&mut self.open_refused[d]) {
                self.events.push_back(StreamEvent::Available { dir });
            }
        }
    }

    /// A DATA_BLOCKED frame: re-advertise if we have credit to give.
    pub fn on_data_blocked(&mut self, _limit: u64) {
        if self.conn_recv.consumed() + self.conn_recv.window() > self.conn_recv.limit() {
            self.max_data_pending = true;
        }
    }

    /// A STREAM_DATA_BLOCKED frame: re-advertise if we have credit to give.
    pub fn on_stream_data_blocked(
        &mut self,
        id: StreamId,
        _limit: u64,
    ) -> Result<(), TransportError> {
        if !self.frame_stream(id, Half::Recv)? {
            return Ok(());
        }
        let s = self.streams.get_mut(&id).expect("stream");
        let r = s.recv.as_ref().expect("receive half");
        if r.wants_credit()
            && r.credit.consumed() + r.credit.window() > r.credit.limit()
            && !s.in_msd_queue
        {
            s.in_msd_queue = true;
            self.msd_queue.push_back(id);
        }
        Ok(())
    }

    /// A STREAMS_BLOCKED frame. Informational: slots are returned as streams close.
    pub fn on_streams_blocked(&mut self, _dir: Dir, _limit: u64) {}

    // ---- transmit side ----

    /// Queues a stream for transmission if it has something to send.
    fn schedule(&mut self, id: StreamId) {
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
    fn conn_avail(&self) -> u64 {
        self.conn_send.max().saturating_sub(self.conn_sent)
    }

    /// Next chunk of STREAM data, at most `max_len` payload bytes: retransmissions first, then
    /// new data, round-robin across streams.
    pub fn next_stream_chunk(&mut self, max_len: usize) -> Option<StreamChunk> {
        let max = max_len as u64;
        for _ in 0..self.lost_queue.len() {
            let id = self.lost_queue.pop_front()?;
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
                return Some(StreamChunk {
                    id,
                    offset: c.offset,
                    len: c.len as usize,
                    fin: c.fin,
                });
            }
        }
        let avail = self.conn_avail();
        for _ in 0..self.send_queue.len() {
            let id = self.send_queue.pop_front()?;
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
                return Some(StreamChunk {
                    id,
                    offset: c.offset,
                    len: c.len as usize,
                    fin: c.fin,
                });
            }
        }
        None
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
        let Some(send) = self
            .streams
            .get_mut(&chunk.id)
            .and_then(|s| s.send.as_mut())
        else {
            return;
        };
        if send.on_lost(chunk.offset, chunk.len as u64, chunk.fin) {
            self.schedule(chunk.id);
        }
    }

    /// Next control frame to send. `now` and `rtt` (smoothed) drive window auto-tuning.
    pub fn poll_control(&mut self, now: Instant, rtt: Duration) -> Option<StreamControl> {
        while let Some(id) = self.reset_queue.pop_front() {
            let send = self.streams.get(&id).and_then(|s| s.send.as_ref());
            if let Some((error_code, final_size)) =
                send.filter(|s| !s.is_closed()).and_then(|s| s.reset_info())
            {
                return Some(StreamControl::ResetStream {
                    id,
                    error_code,
                    final_size,
                });
            }
        }
        while let Some((id, error_code)) = self.stop_queue.pop_front() {
            if self.stop_relevant(id) {
                return Some(StreamControl::StopSending { id, error_code });
            }
        }
        if std::mem::take(&mut self.max_data_pending) {
            return Some(StreamControl::MaxData(self.conn_recv.poll_limit(now, rtt)));
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
            // Keep the connection window ahead of any stream window.
            self.conn_recv
                .ensure_window(r.credit.window() + r.credit.window() / 2);
            return Some(StreamControl::MaxStreamData { id, max });
        }
        for dir in DIRS {
            if std::mem::take(&mut self.max_streams_pending[di(dir)]) {
                return Some(StreamControl::MaxStreams {
                    dir,
                    count: self.max_remote[di(dir)],
                });
            }
        }
        if let Some(limit) = self.data_blocked.take() {
            return Some(StreamControl::DataBlocked(limit));
        }
        while let Some((id, limit)) = self.stream_data_blocked.pop_front() {
            if self.stream_blocked_at(id) == Some(limit) {
                return Some(StreamControl::StreamDataBlocked { id, limit });
            }
        }
        for dir in DIRS {
            if let Some(limit) = self.streams_blocked[di(dir)].take() {
                return Some(StreamControl::StreamsBlocked { dir, limit });
            }
        }
        None
    }

    fn stop_relevant(&self, id: StreamId) -> bool {
        self.streams
            .get(&id)
            .and_then(|s| s.recv.as_ref())
            .is_some_and(|r| r.final_size().is_none())
    }

    /// The stream's send limit if it is (still) blocked by it.
    fn stream_blocked_at(&self, id: StreamId) -> Option<u64> {
        let send = self.streams.get(&id)?.send.as_ref()?;
        (send.is_open() && send.credit.available() == 0).then(|| send.credit.max())
    }

    /// A control frame was acknowledged.
    pub fn on_control_acked(&mut self, f: &StreamControl) {
        if let StreamControl::ResetStream { id, .. } = *f {
            if let Some(send) = self.streams.get_mut(&id).and_then(|s| s.send.as_mut()) {
                send.on_reset_acked();
                self.maybe_remove(id);
            }
        }
    }

    /// A control frame was lost: re-queued only if still relevant (not superseded).
    pub fn on_control_lost(&mut self, f: &StreamControl) {
        match *f {
            StreamControl::MaxData(max) => {
                if max == self.conn_recv.limit() {
                    self.max_data_pending = true;
                }
            }
            StreamControl::MaxStreamData { id, max } => {
                let Some(s) = self.streams.get_mut(&id) else {
                    return;
                };
                let Some(r) = s.recv.as_ref() else { return };
                if r.wants_credit() && r.credit.limit() == max && !s.in_msd_queue {
                    s.in_msd_queue = true;
                    self.msd_queue.push_back(id);
                }
            }
            StreamControl::MaxStreams { dir, count } => {
                if count == self.max_remote[di(dir)] {
                    self.max_streams_pending[di(dir)] = true;
                }
            }
            StreamControl::DataBlocked(limit) => {
                if self.conn_send.max() == limit && self.conn_send.available() == 0 {
                    self.data_blocked = Some(limit);
                }
            }
            StreamControl::StreamDataBlocked { id, limit } => {
                if self.stream_blocked_at(id) == Some(limit) {
                    self.stream_data_blocked.push_back((id, limit));
                }
            }
            StreamControl::StreamsBlocked { dir, limit } => {
                let d = di(dir);
                if self.peer_max_streams[d] == limit && self.next_local[d] >= limit {
                    self.streams_blocked[d] = Some(limit);
                }
            }
            StreamControl::ResetStream { id, .. } => {
                let send = self.streams.get(&id).and_then(|s| s.send.as_ref());
                if send.is_some_and(|s| s.reset_info().is_some() && !s.is_closed()) {
                    self.reset_queue.push_back(id);
                }
            }
            StreamControl::StopSending { id, error_code } => {
                if self.stop_relevant(id) {
                    self.stop_queue.push_back((id, error_code));
                }
            }
        }
    }

    /// True if stream data or a control frame waits to be sent.
    pub fn has_pending_data(&self) -> bool {
        let avail = self.conn_avail();
        let send = |id: &StreamId| self.streams.get(id).and_then(|s| s.send.as_ref());
        self.lost_queue
            .iter()
            .any(|id| send(id).is_some_and(|s| s.has_lost()))
            || self
                .send_queue
                .iter()
                .any(|id| send(id).is_some_and(|s| s.has_new(avail)))
            || !self.reset_queue.is_empty()
            || !self.stop_queue.is_empty()
            || self.max_data_pending
            || !self.msd_queue.is_empty()
            || self.max_streams_pending.iter().any(|&p| p)
            || self.data_blocked.is_some()
            || !self.stream_data_blocked.is_empty()
            || self.streams_blocked.iter().any(Option::is_some)
    }

    // ---- application API ----

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
        Some(StreamId::new(
            self.side.peer(),
            dir,
            self.next_accept[d] - 1,
        ))
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

    /// Writes data; may accept fewer bytes than given (send buffer limit, flow control).
    /// `Err(Blocked)` when nothing could be accepted: wait for a Writable event.
    pub fn write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, StreamError> {
        let conn_avail = self.conn_send.available();
        let limit = self.config.send_buffer_limit;
        let send = self.send_mut(id)?;
        let stream_avail = send.credit.available();
        let buf_avail = limit.saturating_sub(send.buf.unacked_len());
        let n = (data.len() as u64)
            .min(stream_avail)
            .min(buf_avail)
            .min(conn_avail) as usize;
        if n < data.len() {
            send.want_writable = true;
        }
        send.write(&data[..n]);
        if n < data.len() && n as u64 == stream_avail {
            if let Some(limit) = send.credit.take_blocked() {
                self.stream_data_blocked.push_back((id, limit));
            }
        }
        self.conn_send.consume(n as u64);
        if n < data.len() && n as u64 == conn_avail {
            self.data_blocked = self.conn_send.take_blocked().or(self.data_blocked);
        }
        self.schedule(id);
        if n == 0 && !data.is_empty() {
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

    fn do_reset(&mut self, id: StreamId, error_code: u64) {
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
        let s = self.streams.get_mut(&id).ok_or(StreamError::ClosedStream)?;
        let r = s.recv.as_mut().ok_or(StreamError::WrongDirection)?;
        let res = r.read(buf);
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

    fn notify_writable(&mut self, id: StreamId) {
        let conn_avail = self.conn_send.available();
        let limit = self.config.send_buffer_limit;
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

    fn notify_writable_all(&mut self) {
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
