//! The stream table: stream limits, peer frames and connection-level flow control. The
//! transmit side lives in `map/transmit.rs`, the application API in `map/app.rs`.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

mod app;
mod transmit;

use super::chunks::BufferSlice;
use super::flow::{RecvCredit, SendCredit};
use super::recv::{RecvState, RecvStream};
use super::recv_store::StreamData;
use super::send::SendStream;
use super::{LocalStreamParams, StreamEvent, StreamsConfig};
use crate::error::{TransportError, TransportErrorCode};
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
    /// Current send buffer limit per stream (see [`Streams::set_send_buffer_limit`]).
    send_buffer_limit: u64,
    /// Open streams. FxHash, not SipHash: this map is looked up several times per packet, and
    /// the peer cannot flood it with colliding keys because it only holds stream IDs inside
    /// the windows our MAX_STREAMS allows (RFC 9000 §4.6).
    streams: FxHashMap<StreamId, Stream>,
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
    /// Received data accounted for and waiting to be stored together with what follows it
    /// ([`Streams::on_stream_piece`]); empty outside a batch's application.
    pending: Option<PendingPiece>,
}

/// Stream data of consecutive frames, one buffer (`recv_store.rs`), stored once.
#[derive(Debug)]
struct PendingPiece {
    id: StreamId,
    offset: u64,
    data: BufferSlice,
}

impl Streams {
    /// An empty stream table. The peer's limits are zero until [`Streams::set_peer_params`].
    pub fn new(side: Side, config: &StreamsConfig) -> Self {
        Self {
            side,
            config: config.clone(),
            send_buffer_limit: config.send_buffer_limit,
            streams: FxHashMap::default(),
            next_local: [0; 2],
            peer_max_streams: [0; 2],
            next_remote: [0; 2],
            next_accept: [0; 2],
            max_remote: [config.max_concurrent_bidi, config.max_concurrent_uni].map(|n| n.min(MAX_STREAM_COUNT)),
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
            pending: None,
            events: VecDeque::new(),
        }
    }

    /// Sets how many unacknowledged bytes a stream may buffer before `write` pushes back
    /// (at least the configured `send_buffer_limit`). With several paths the oldest
    /// unacknowledged byte can sit on the slowest one while the others send on, so the
    /// connection widens the limit to what its paths hold in flight.
    pub fn set_send_buffer_limit(&mut self, limit: u64) {
        self.send_buffer_limit = limit.max(self.config.send_buffer_limit);
    }

    /// The current limit of [`Self::set_send_buffer_limit`].
    pub fn send_buffer_limit(&self) -> u64 {
        self.send_buffer_limit
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
            return Err(TransportError::new(TransportErrorCode::STREAM_LIMIT_ERROR, "stream beyond MAX_STREAMS"));
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
    pub(super) fn after_recv(&mut self, id: StreamId) {
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
    pub(super) fn maybe_remove(&mut self, id: StreamId) {
        let Some(s) = self.streams.get(&id) else {
            return;
        };
        let closed = s.send.as_ref().is_none_or(|x| x.is_closed()) && s.recv.as_ref().is_none_or(|r| r.is_closed());
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
    pub fn on_stream_frame(&mut self, id: StreamId, offset: u64, data: &[u8], fin: bool) -> Result<(), TransportError> {
        self.on_stream_data(id, offset, StreamData::Slice(data), fin)
    }

    /// A STREAM frame whose data may already be in a buffer of its own
    /// ([`StreamData::Shared`]: copied when its packet was opened), kept without a copy.
    pub fn on_stream_data(
        &mut self,
        id: StreamId,
        offset: u64,
        data: StreamData<'_>,
        fin: bool,
    ) -> Result<(), TransportError> {
        if self.receive_data(id, offset, data, fin)? {
            self.after_recv(id);
        }
        Ok(())
    }

    /// A STREAM frame's checks and flow control (both levels), `data` stored or deferred as
    /// it says; false when the frame is for a stream already gone (ignored).
    fn receive_data(
        &mut self,
        id: StreamId,
        offset: u64,
        data: StreamData<'_>,
        fin: bool,
    ) -> Result<bool, TransportError> {
        if !self.frame_stream(id, Half::Recv)? {
            return Ok(false);
        }
        let s = self.streams.get_mut(&id).expect("stream");
        // The connection limit is checked before the stream takes anything: an error must
        // leave both levels' accounting as it was.
        let room = self.conn_recv.room();
        let grew = s.recv.as_mut().expect("receive half").on_data(offset, data, fin, room)?;
        let accepted = self.conn_recv.on_received(grew);
        debug_assert!(accepted, "checked against the room above");
        Ok(true)
    }

    /// A STREAM frame whose data its path copied into one of its buffers when it opened the
    /// packet (`conn/recv_arena.rs`): its flow control and the stream's state are checked
    /// and changed now, as [`Streams::on_stream_frame`] does, and its bytes join those of
    /// the previous such frame when they continue them (same stream, the next offset, the
    /// next bytes of the same buffer: a path's packets in a run), to be stored with one
    /// insert ([`Streams::flush_pieces`], which the caller runs at the end of the batch and
    /// before any other frame).
    pub fn on_stream_piece(
        &mut self,
        id: StreamId,
        offset: u64,
        data: BufferSlice,
        fin: bool,
    ) -> Result<(), TransportError> {
        if !self.receive_data(id, offset, StreamData::Deferred(data.len()), fin)? {
            return Ok(());
        }
        if let Some(p) = self.pending.as_mut() {
            if p.id == id && p.offset + p.data.len() as u64 == offset && p.data.is_continued_by(&data) {
                // The next bytes of the same buffer: joined without a copy.
                p.data.range.end = data.range.end;
                return Ok(());
            }
        }
        self.flush_pieces();
        self.pending = Some(PendingPiece { id, offset, data });
        Ok(())
    }

    /// Debug builds: no data is held back outside a batch's application (the application
    /// would miss it).
    pub(super) fn debug_assert_no_pieces(&self) {
        debug_assert!(self.pending.is_none(), "stream data held back outside a batch");
    }

    /// Stores the data [`Streams::on_stream_piece`] holds back (one insert for a run of a
    /// path's packets), with the bookkeeping that follows.
    pub fn flush_pieces(&mut self) {
        let Some(p) = self.pending.take() else { return };
        let Some(r) = self.streams.get_mut(&p.id).and_then(|s| s.recv.as_mut()) else { return };
        let backing = p.data.backing;
        r.store(p.offset, StreamData::Shared(p.data.into_bytes(), backing));
        self.after_recv(p.id);
    }

    /// A RESET_STREAM frame.
    pub fn on_reset_stream(&mut self, id: StreamId, error_code: u64, final_size: u64) -> Result<(), TransportError> {
        if !self.frame_stream(id, Half::Recv)? {
            return Ok(());
        }
        let s = self.streams.get_mut(&id).expect("stream");
        let r = s.recv.as_mut().expect("receive half");
        let was_open = matches!(r.state(), RecvState::Recv | RecvState::SizeKnown);
        let grew = r.on_reset(error_code, final_size, self.conn_recv.room())?;
        let accepted = self.conn_recv.on_received(grew);
        debug_assert!(accepted, "checked against the room above");
        if was_open && r.state() == RecvState::ResetRecvd && !r.is_stopped() {
            self.events.push_back(StreamEvent::Reset { id, code: error_code });
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
        self.events.push_back(StreamEvent::Stopped { id, code: error_code });
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

    /// A DATA_BLOCKED frame: re-sends MAX_DATA if the peer has not seen our latest limit.
    pub fn on_data_blocked(&mut self, limit: u64) {
        // Blocked below our current limit: the peer missed our latest MAX_DATA. (Raising
        // the limit itself is driven by the application's reads.)
        if limit < self.conn_recv.limit() {
            self.max_data_pending = true;
        }
    }

    /// A STREAM_DATA_BLOCKED frame: re-sends MAX_STREAM_DATA if the peer has not seen our
    /// latest limit.
    pub fn on_stream_data_blocked(&mut self, id: StreamId, limit: u64) -> Result<(), TransportError> {
        if !self.frame_stream(id, Half::Recv)? {
            return Ok(());
        }
        let s = self.streams.get_mut(&id).expect("stream");
        let r = s.recv.as_ref().expect("receive half");
        if r.wants_credit() && limit < r.credit.limit() && !s.in_msd_queue {
            s.in_msd_queue = true;
            self.msd_queue.push_back(id);
        }
        Ok(())
    }

    /// A STREAMS_BLOCKED frame. Informational: slots are returned as streams close.
    pub fn on_streams_blocked(&mut self, _dir: Dir, _limit: u64) {}
}
