//! Unreliable datagrams: the QUIC DATAGRAM extension (RFC 9221) over multipath.
//!
//! The application queues a datagram with [`Connection::send_datagram`], either for a path
//! it names (*pinned*) or for the scheduler to place (*unpinned*); the peer's datagrams are
//! read with [`Connection::recv_datagram`] after an [`Event::DatagramReceived`]. RFC 10069
//! puts no restriction on DATAGRAM frames: they may go on any path.
//!
//! * **Path choice.** An unpinned datagram goes in the next packet of new data, on the path
//!   the connection's scheduler picks for it ([`TransportConfig::scheduler`]: with the
//!   default min-RTT scheduler, the active path with the lowest smoothed RTT that has room
//!   in its congestion window; potentially failed and backup paths only when nothing else
//!   works). The choice is made when the datagram is sent, not when it is queued, so a path
//!   that fails while datagrams wait simply stops being picked: they go on another path. A
//!   pinned datagram waits for its own path and goes out as path-local traffic when that
//!   path's window allows; if the path is abandoned, discarded or potentially failed while
//!   it waits, the datagram is dropped and counted (`dropped_send` of that path).
//! * **Unreliable** (RFC 9221 §5.2): DATAGRAM frames are ack-eliciting and congestion
//!   controlled, but never retransmitted: a datagram in a lost packet is counted `lost` for
//!   its path. They are not flow controlled (RFC 9221 §5).
//! * **Bounded memory.** The send queue holds at most
//!   [`DatagramConfig::send_queue_len`] datagrams and [`DatagramConfig::send_queue_bytes`]
//!   bytes; the receive queue likewise ([`DatagramConfig::recv_queue_len`],
//!   [`DatagramConfig::recv_queue_bytes`]). A full queue drops its oldest datagram, counted.
//!
//! [`TransportConfig::scheduler`]: super::TransportConfig::scheduler

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

use crate::coding::varint_len;
use crate::error::TransportError;

use super::{Connection, Event};

/// Bytes of a 1-RTT packet that are not payload, at most: the short header (flags, a
/// connection ID of up to 20 bytes, a packet number of up to 4) and the AEAD tag.
pub(crate) const SHORT_PACKET_OVERHEAD: usize = 1 + crate::cid::MAX_CID_LEN + 4 + super::send::TAG_LEN;

/// DATAGRAM settings of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramConfig {
    /// The max_datagram_frame_size transport parameter we advertise (RFC 9221 §3): the
    /// largest DATAGRAM frame (type, length and payload) we accept. 0, the default, does
    /// not advertise the extension: the peer must not send DATAGRAM frames, and a received
    /// one closes the connection with PROTOCOL_VIOLATION.
    pub max_frame_size: u64,
    /// Most datagrams waiting to be sent; the oldest is dropped to make room.
    pub send_queue_len: usize,
    /// Most payload bytes waiting to be sent; the oldest datagrams are dropped to make room.
    pub send_queue_bytes: usize,
    /// Most received datagrams the application has not read; the oldest is dropped.
    pub recv_queue_len: usize,
    /// Most received payload bytes the application has not read; the oldest datagrams are
    /// dropped.
    pub recv_queue_bytes: usize,
}

impl Default for DatagramConfig {
    fn default() -> Self {
        Self {
            max_frame_size: 0,
            send_queue_len: 1024,
            send_queue_bytes: 1 << 20,
            recv_queue_len: 1024,
            recv_queue_bytes: 1 << 20,
        }
    }
}

impl DatagramConfig {
    /// The default queues with the extension advertised: frames of up to 65535 bytes
    /// accepted (the packet size limits them further).
    pub fn enabled() -> Self {
        Self { max_frame_size: 65535, ..Self::default() }
    }
}

/// Why [`Connection::send_datagram`] refused a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DatagramError {
    /// The handshake has not completed: the peer's transport parameters are not known yet
    /// (and the connection is not in 0-RTT, where the remembered ones apply).
    #[error("the handshake has not completed")]
    NotConnected,
    /// The peer did not advertise max_datagram_frame_size (RFC 9221 §3: we must not send
    /// DATAGRAM frames).
    #[error("the peer does not support DATAGRAM frames")]
    UnsupportedByPeer,
    /// The datagram does not fit in one packet on the path (or, unpinned, on every open
    /// path), or is above the peer's max_datagram_frame_size (RFC 9221 §5: a datagram is
    /// never fragmented).
    #[error("datagram too large (at most {max} bytes)")]
    TooLarge {
        /// Largest payload accepted now ([`Connection::max_datagram_size`]).
        max: usize,
    },
    /// No such path, or it is abandoned.
    #[error("unknown or abandoned path")]
    UnknownPath,
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
}

/// A datagram received from the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// The path whose packet carried it.
    pub path_id: u64,
    /// The payload.
    pub data: Bytes,
}

/// Datagram counters, per path or for the whole connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DatagramCounters {
    /// Datagrams sent (written in a sealed packet).
    pub sent: u64,
    /// Payload bytes sent.
    pub sent_bytes: u64,
    /// Of `sent`, those in 0-RTT packets (a resumed client, before its handshake completed).
    pub sent_0rtt: u64,
    /// Sent datagrams whose packet was acknowledged.
    pub acked: u64,
    /// Sent datagrams whose packet was declared lost (never retransmitted, RFC 9221 §5.2).
    pub lost: u64,
    /// Datagrams dropped before they were sent: the send queue was full (connection total
    /// only), or the path they were pinned to became unusable, or they no longer fit the
    /// path's packets.
    pub dropped_send: u64,
    /// Datagrams received.
    pub received: u64,
    /// Payload bytes received.
    pub received_bytes: u64,
    /// Received datagrams dropped because the application did not read them in time (the
    /// receive queue was full).
    pub dropped_recv: u64,
}

/// Datagram statistics of a connection ([`Connection::datagram_stats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DatagramStats {
    /// The whole connection.
    pub total: DatagramCounters,
    /// Per path ID (paths that sent, received or dropped a datagram).
    pub paths: BTreeMap<u64, DatagramCounters>,
}

/// A datagram waiting to be sent.
#[derive(Debug)]
struct Outgoing {
    data: Bytes,
    /// The path it is pinned to.
    path: Option<u64>,
}

/// The connection's datagram state (in the shared half: the queues are the connection's,
/// the paths take from them when they build packets with the host).
#[derive(Debug, Default)]
pub(crate) struct Datagrams {
    config: DatagramConfig,
    send: VecDeque<Outgoing>,
    send_bytes: usize,
    /// Pinned datagrams waiting, per path ID.
    pinned: BTreeMap<u64, usize>,
    recv: VecDeque<Datagram>,
    recv_bytes: usize,
    pub stats: DatagramStats,
}

impl Datagrams {
    pub fn new(config: DatagramConfig) -> Self {
        Self { config, ..Self::default() }
    }

    fn path_stats(&mut self, path_id: u64) -> &mut DatagramCounters {
        self.stats.paths.entry(path_id).or_default()
    }

    /// Nothing waits to be sent.
    pub fn send_is_empty(&self) -> bool {
        self.send.is_empty()
    }

    /// Unpinned datagrams wait (for whichever path sends new data next).
    pub fn has_unpinned(&self) -> bool {
        self.send.len() > self.pinned.values().sum::<usize>()
    }

    /// Datagrams pinned to `path_id` wait.
    pub fn has_pinned_for(&self, path_id: u64) -> bool {
        !self.pinned.is_empty() && self.pinned.contains_key(&path_id)
    }

    /// Datagrams pinned to some path wait.
    pub fn has_pinned(&self) -> bool {
        !self.pinned.is_empty()
    }

    /// Datagrams waiting to be sent.
    pub fn send_queue_len(&self) -> usize {
        self.send.len()
    }

    fn unpin(&mut self, path: Option<u64>) {
        if let Some(id) = path {
            if let Some(n) = self.pinned.get_mut(&id) {
                *n -= 1;
                if *n == 0 {
                    self.pinned.remove(&id);
                }
            }
        }
    }

    fn pop_oldest(&mut self) {
        if let Some(o) = self.send.pop_front() {
            self.send_bytes -= o.data.len();
            self.unpin(o.path);
            self.stats.total.dropped_send += 1;
            if let Some(id) = o.path {
                self.path_stats(id).dropped_send += 1;
            }
        }
    }

    /// Queues a datagram, dropping the oldest ones beyond the queue's bounds.
    fn push(&mut self, data: Bytes, path: Option<u64>) {
        while !self.send.is_empty()
            && (self.send.len() + 1 > self.config.send_queue_len.max(1)
                || self.send_bytes + data.len() > self.config.send_queue_bytes)
        {
            self.pop_oldest();
        }
        self.send_bytes += data.len();
        if let Some(id) = path {
            *self.pinned.entry(id).or_default() += 1;
        }
        self.send.push_back(Outgoing { data, path });
    }

    /// The next datagram for a packet on path `path_id` whose DATAGRAM frame fits in `room`
    /// bytes: the oldest pinned to this path or (with `unpinned_ok`) not pinned. A datagram
    /// whose frame could never fit a packet of the path (`max_frame`) is dropped, counted.
    /// `None` when the next one does not fit: it waits for the next packet (datagrams keep
    /// their order).
    /// The frame length of the datagram [`Datagrams::take_for`] would take next for
    /// `path_id`.
    pub fn next_frame_len(&self, path_id: u64, unpinned_ok: bool) -> Option<usize> {
        let o = self.send.iter().find(|o| o.path == Some(path_id) || (unpinned_ok && o.path.is_none()))?;
        Some(frame_len(o.data.len()))
    }

    pub fn take_for(&mut self, path_id: u64, unpinned_ok: bool, room: usize, max_frame: usize) -> Option<Bytes> {
        loop {
            let at = self.send.iter().position(|o| o.path == Some(path_id) || (unpinned_ok && o.path.is_none()))?;
            let len = frame_len(self.send[at].data.len());
            if len > room && len <= max_frame {
                return None;
            }
            let o = self.send.remove(at)?;
            self.send_bytes -= o.data.len();
            self.unpin(o.path);
            if len > max_frame {
                // The path's packets shrank below it since it was queued.
                self.stats.total.dropped_send += 1;
                self.path_stats(path_id).dropped_send += 1;
                continue;
            }
            return Some(o.data);
        }
    }

    /// Drops the queued datagrams whose frame would be above `max_frame` bytes (0: all),
    /// counted as dropped before sending: the peer's limit turned out lower than the one
    /// they were queued under (a server that declined 0-RTT, RFC 9221 §3).
    pub fn drop_above(&mut self, max_frame: u64) {
        let fits = |o: &Outgoing| max_frame > 0 && frame_len(o.data.len()) as u64 <= max_frame;
        let (keep, gone): (VecDeque<Outgoing>, VecDeque<Outgoing>) = self.send.drain(..).partition(fits);
        self.send = keep;
        for o in gone {
            self.send_bytes -= o.data.len();
            self.unpin(o.path);
            self.stats.total.dropped_send += 1;
            if let Some(id) = o.path {
                self.path_stats(id).dropped_send += 1;
            }
        }
    }

    /// A datagram of `len` bytes went out on `path_id` (in a 0-RTT packet: `early`).
    pub fn on_sent(&mut self, path_id: u64, len: usize, early: bool) {
        for c in [&mut self.stats.total, self.stats.paths.entry(path_id).or_default()] {
            c.sent += 1;
            c.sent_bytes += len as u64;
            c.sent_0rtt += u64::from(early);
        }
    }

    /// `n` datagrams sent on `path_id` were acknowledged (`lost` false) or lost.
    pub fn on_fate(&mut self, path_id: u64, n: u32, lost: bool) {
        let n = u64::from(n);
        for c in [&mut self.stats.total, self.stats.paths.entry(path_id).or_default()] {
            if lost {
                c.lost += n;
            } else {
                c.acked += n;
            }
        }
    }

    /// Drops the pinned datagrams whose path `usable` rejects, counted for that path.
    pub fn drop_pinned_unless(&mut self, usable: impl Fn(u64) -> bool) {
        let gone: Vec<u64> = self.pinned.keys().copied().filter(|id| !usable(*id)).collect();
        if gone.is_empty() {
            return;
        }
        let before = self.send.len();
        let mut freed = 0;
        self.send.retain(|o| {
            let drop = o.path.is_some_and(|id| gone.contains(&id));
            if drop {
                freed += o.data.len();
            }
            !drop
        });
        self.send_bytes -= freed;
        self.stats.total.dropped_send += (before - self.send.len()) as u64;
        for id in gone {
            let n = self.pinned.remove(&id).unwrap_or(0) as u64;
            self.path_stats(id).dropped_send += n;
            tracing::debug!(path = id, dropped = n, "datagrams pinned to an unusable path dropped");
        }
    }

    /// A DATAGRAM frame of `frame_len` bytes carrying `data` arrived on `path_id`. Returns
    /// whether the receive queue was empty before (the application is told once).
    pub fn on_received(&mut self, path_id: u64, data: &[u8], frame_len: usize) -> Result<bool, TransportError> {
        let max = self.config.max_frame_size;
        // RFC 9221 §3: "An endpoint that receives a DATAGRAM frame when it has not indicated
        // support via the transport parameter MUST terminate the connection with an error of
        // type PROTOCOL_VIOLATION."
        if max == 0 {
            return Err(TransportError::protocol_violation("DATAGRAM frames not negotiated"));
        }
        // RFC 9221 §3: "an endpoint that receives a DATAGRAM frame that is larger than the
        // value it sent in its max_datagram_frame_size transport parameter MUST terminate
        // the connection with an error of type PROTOCOL_VIOLATION."
        if frame_len as u64 > max {
            return Err(TransportError::protocol_violation("DATAGRAM frame above max_datagram_frame_size"));
        }
        for c in [&mut self.stats.total, self.stats.paths.entry(path_id).or_default()] {
            c.received += 1;
            c.received_bytes += data.len() as u64;
        }
        let was_empty = self.recv.is_empty();
        // Peer-controlled memory is bounded: the oldest unread datagrams make room.
        while !self.recv.is_empty()
            && (self.recv.len() + 1 > self.config.recv_queue_len.max(1)
                || self.recv_bytes + data.len() > self.config.recv_queue_bytes)
        {
            if let Some(old) = self.recv.pop_front() {
                self.recv_bytes -= old.data.len();
                self.stats.total.dropped_recv += 1;
                self.path_stats(old.path_id).dropped_recv += 1;
            }
        }
        if data.len() > self.config.recv_queue_bytes {
            self.stats.total.dropped_recv += 1;
            self.path_stats(path_id).dropped_recv += 1;
            return Ok(false);
        }
        self.recv_bytes += data.len();
        self.recv.push_back(Datagram { path_id, data: Bytes::copy_from_slice(data) });
        Ok(was_empty)
    }

    fn pop_received(&mut self) -> Option<Datagram> {
        let d = self.recv.pop_front()?;
        self.recv_bytes -= d.data.len();
        Some(d)
    }
}

/// Bytes of a DATAGRAM frame with a length field carrying `len` payload bytes (RFC 9221 §4).
pub(crate) fn frame_len(len: usize) -> usize {
    crate::frame::datagram_header_len(Some(len)) + len
}

/// Largest payload whose DATAGRAM frame (with a length) fits in `limit` bytes.
fn payload_within(limit: usize) -> usize {
    // The length field of the payload can be shorter than the limit's (limit 64: a 62-byte
    // payload has a 1-byte length), so the estimate may be low as well as high.
    let mut p = limit.saturating_sub(1 + varint_len(limit as u64));
    while p > 0 && frame_len(p) > limit {
        p -= 1;
    }
    while frame_len(p + 1) <= limit {
        p += 1;
    }
    p
}

/// Largest DATAGRAM frame one packet of a path with this MTU holds.
pub(crate) fn max_frame_for_mtu(mtu: u16) -> usize {
    usize::from(mtu).saturating_sub(SHORT_PACKET_OVERHEAD)
}

impl Connection {
    /// Queues an unreliable datagram (RFC 9221) for path `path`, or for the scheduler to
    /// place when `None` (see the module documentation of `conn::datagram` and
    /// docs/datagrams.md: the path the scheduler picks for new data when it is sent; with
    /// the default min-RTT scheduler, the lowest-RTT active path with window room).
    ///
    /// A pinned datagram waits for its path and is dropped (counted in
    /// [`DatagramCounters::dropped_send`]) if that path becomes unusable (abandoned,
    /// discarded or potentially failed) first. A full send queue drops its oldest datagram.
    ///
    /// Errors: the handshake is not complete, the peer did not advertise the extension, the
    /// path is unknown or abandoned, or the datagram exceeds [`Connection::max_datagram_size`]
    /// for that path.
    pub fn send_datagram(&mut self, data: impl Into<Bytes>, path: Option<u64>) -> Result<(), DatagramError> {
        let data = data.into();
        if self.is_closed() {
            return Err(DatagramError::Closed);
        }
        // Before the handshake completes, only a client in 0-RTT may queue datagrams, for
        // its 0-RTT packets (RFC 9221 §3).
        if !self.shared.handshake_complete && self.zero_rtt_datagram_limit().is_none() {
            return Err(DatagramError::NotConnected);
        }
        if let Some(id) = path {
            let open = self.paths.board().slot_of(id).and_then(|s| self.paths.view(s)).is_some_and(|v| v.is_open());
            if !open {
                return Err(DatagramError::UnknownPath);
            }
        }
        let max = self.max_datagram_size(path).ok_or(DatagramError::UnsupportedByPeer)?;
        if data.len() > max {
            return Err(DatagramError::TooLarge { max });
        }
        self.shared.datagrams.push(data, path);
        Ok(())
    }

    /// Largest datagram payload [`Connection::send_datagram`] accepts now for `path` (for
    /// `None`: one that fits every open path, as the scheduler may pick any). It is bounded
    /// by the peer's max_datagram_frame_size (RFC 9221 §3) and by one packet of the path
    /// (RFC 9221 §5: datagrams are not fragmented). `None` until the handshake completes
    /// (except in 0-RTT: a client that resumed with early data uses the value the server
    /// gave with its ticket, RFC 9221 §3), when the peer does not support DATAGRAM frames,
    /// or for an unknown path.
    pub fn max_datagram_size(&self, path: Option<u64>) -> Option<usize> {
        let peer = if self.shared.handshake_complete {
            self.shared.peer_params.as_ref()?.max_datagram_frame_size
        } else {
            self.zero_rtt_datagram_limit()?
        };
        if peer == 0 {
            return None;
        }
        let mtu = match path {
            Some(id) => self.paths.board().slot_of(id).and_then(|s| self.paths.view(s)).filter(|v| v.is_open())?.mtu,
            // Every open path, those a path thread holds now included (their views are as
            // they left; `views()` leaves them out, and with a thread per path the only
            // path is out much of the time).
            None => self.paths.board().iter().map(|(_, v)| v).filter(|v| v.is_open()).map(|v| v.mtu).min()?,
        };
        // In 0-RTT the frame must fit a 0-RTT packet, whose long header is larger.
        let frame_room = if self.shared.handshake_complete {
            max_frame_for_mtu(mtu)
        } else {
            usize::from(mtu).saturating_sub(self.zero_rtt_overhead())
        };
        let limit = frame_room.min(usize::try_from(peer).unwrap_or(usize::MAX));
        Some(payload_within(limit))
    }

    /// The next datagram the peer sent, oldest first. An [`Event::DatagramReceived`] tells
    /// when the queue stops being empty; read until this returns `None`.
    pub fn recv_datagram(&mut self) -> Option<Datagram> {
        self.shared.datagrams.pop_received()
    }

    /// Datagrams queued and not yet sent.
    pub fn datagram_send_queue_len(&self) -> usize {
        self.shared.datagrams.send_queue_len()
    }

    /// Datagram counters, for the connection and per path.
    pub fn datagram_stats(&self) -> DatagramStats {
        self.shared.datagrams.stats.clone()
    }

    /// Before a send: datagrams pinned to a path that can no longer carry them (abandoned,
    /// discarded, potentially failed) are dropped (documented in the module).
    pub(crate) fn drop_unsendable_pinned_datagrams(&mut self) {
        if !self.shared.datagrams.has_pinned() {
            return;
        }
        let paths = &self.paths;
        let usable = |id: u64| {
            paths.board().slot_of(id).and_then(|s| paths.view(s)).is_some_and(|v| v.is_open() && !v.potentially_failed)
        };
        self.shared.datagrams.drop_pinned_unless(usable);
    }
}

impl super::host::Host<'_> {
    /// A DATAGRAM frame of `frame_len` bytes arrived on path `path_id` (RFC 9221 §3, §5).
    pub(crate) fn on_datagram_frame(
        &mut self,
        path_id: u64,
        data: &[u8],
        frame_len: usize,
    ) -> Result<(), TransportError> {
        if self.shared.datagrams.on_received(path_id, data, frame_len)? {
            self.shared.events.push_back(Event::DatagramReceived);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn payload_within_uses_a_shorter_length_field_at_the_boundary() {
        // Found by the property below: limit 64 gave 61 (a 2-byte length assumed).
        assert_eq!(payload_within(64), 62);
        assert_eq!(frame_len(62), 64);
        assert_eq!(payload_within(16_384), 16_384 - 1 - 2);
    }

    proptest! {
        /// The largest payload for a frame limit fits it, and one byte more does not.
        #[test]
        fn payload_within_is_the_largest_that_fits(limit in 0usize..100_000) {
            let p = payload_within(limit);
            if limit >= 2 {
                prop_assert!(frame_len(p) <= limit, "{} -> {}", limit, p);
            }
            if limit >= 2 {
                prop_assert!(frame_len(p + 1) > limit, "{} -> {}", limit, p);
            }
        }
    }

    /// The send queue keeps its bounds and order; pinned datagrams wait for their path.
    #[test]
    fn send_queue_bounds_and_pins() {
        let mut q =
            Datagrams::new(DatagramConfig { send_queue_len: 3, send_queue_bytes: 25, ..DatagramConfig::enabled() });
        for i in 0..5u8 {
            q.push(Bytes::from(vec![i; 10]), if i % 2 == 1 { Some(1) } else { None });
        }
        // 25 bytes hold two of ten.
        assert_eq!(q.send_queue_len(), 2);
        assert_eq!(q.stats.total.dropped_send, 3);
        assert!(q.has_pinned_for(1) && q.has_unpinned());
        // Path 0 takes only the unpinned one; path 1 its pinned one.
        assert_eq!(q.take_for(0, true, 1000, 1000).unwrap()[0], 4);
        assert_eq!(q.take_for(0, true, 1000, 1000), None);
        assert_eq!(q.take_for(1, false, 1000, 1000).unwrap()[0], 3);
        assert!(q.send_is_empty() && !q.has_pinned());
        // One that does not fit the room waits; one that can never fit the path is dropped.
        q.push(Bytes::from(vec![7; 10]), None);
        assert_eq!(q.take_for(0, true, 5, 1000), None);
        assert_eq!(q.send_queue_len(), 1);
        assert_eq!(q.take_for(0, true, 5, 5), None);
        assert!(q.send_is_empty());
        assert_eq!(q.stats.paths[&0].dropped_send, 1);
    }
}
