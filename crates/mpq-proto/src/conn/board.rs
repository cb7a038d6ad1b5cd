//! The path board and the path inboxes: how the paths of a connection see and reach each
//! other without touching each other's state.
//!
//! **Board.** Each path publishes a [`PathView`] of itself (window, bytes in flight, RTT,
//! status, ...) after the operations that change it: a batch sent, an ACK or loss processed,
//! a timer, a status change. The scheduler, coupled congestion control (LIA, OLIA), the
//! choice of path for ACKs, reinjection and the connection-wide RTT bound of flow control
//! read the board, never another path's [`PathState`].
//!
//! *How stale a view may be, and why that is safe.* With one thread the connection publishes
//! right after each change, so views are exact (debug builds check that every read matches
//! the path; see [`Board::strict`]). With a thread per path (issue C2) a view is at most one
//! batch of its path old. Every reader tolerates that: the scheduler only steers new data, so
//! a stale window costs a slightly worse choice of path, never a protocol error (each path
//! still enforces its own congestion window, pacing and amplification limit when it builds
//! packets); coupled congestion control uses the other paths' windows and RTTs as a hint for
//! its increase (RFC 6356 §3 computes alpha from values that are themselves one RTT old);
//! ACK placement falls back to the own path; and the RTT bound of flow control only sizes a
//! window.
//!
//! **Inboxes.** What one path's processing produces for another path goes into that path's
//! [`Inbox`] and is taken out by the owning path when it builds packets: copies of
//! flow-control frames (MAX_DATA / MAX_STREAM_DATA sent on all paths) and STREAM chunks to
//! duplicate (redundant scheduling, reinjection), and the mail of `conn/mail.rs` (ACKs
//! carried for it and their acknowledgement, challenge answers, abandonment, reinjection
//! requests), which the path handles itself.
//!
//! **ACK offers.** With multipath, a path with an ACK pending publishes an `AckOffer` here:
//! the paths that carry its ACKs (ACK placement) read the offer, never its received ranges.
//!
//! [`PathState`]: super::path::PathState

use std::collections::VecDeque;
use std::time::Duration;

use crate::cc::CouplingView;
use crate::frame::Frame;
use crate::stream::StreamChunk;

use smallvec::SmallVec;

use super::mail::{AckOffer, Mail};
use super::path::{PathPhase, PathState};

/// Most flow-control copies waiting in one inbox (they are refreshed by newer frames).
pub(crate) const MAX_FC_COPIES: usize = 16;
/// Most STREAM chunks waiting in one inbox for duplication; the oldest go first.
pub(crate) const MAX_DUP_CHUNKS: usize = 256;

/// What one path publishes about itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PathView {
    /// Path ID.
    pub id: u64,
    /// Lifecycle.
    pub phase: PathPhase,
    /// Smoothed RTT.
    pub srtt: Duration,
    /// RTT variation.
    pub rttvar: Duration,
    /// Minimum RTT.
    pub min_rtt: Duration,
    /// An RTT sample was taken.
    pub rtt_sampled: bool,
    /// Probe timeout base (RFC 9002 §6.2.1) without max_ack_delay.
    pub pto_base: Duration,
    /// Congestion window in bytes.
    pub cwnd: u64,
    /// Bytes in flight.
    pub bytes_in_flight: u64,
    /// Largest datagram sent on the path.
    pub mtu: u16,
    /// The peer asked for the path to be a backup.
    pub backup: bool,
    /// A PTO fired without sign of life since.
    pub potentially_failed: bool,
    /// When the peer last sent something ack-eliciting on the path (as of the last
    /// publication): a path the peer went silent on is judged against the others.
    pub last_eliciting_recv: Option<crate::time::Instant>,
    /// Bytes of new application data sent.
    pub data_bytes_sent: u64,
    /// The anti-amplification limit leaves room for at least a small packet
    /// (RFC 9000 §8.1).
    pub amp_room: bool,
    /// What coupled congestion controllers see of this path.
    pub coupling: CouplingView,
    /// The payload of our PATH_CHALLENGE on this path, if one is outstanding: a
    /// PATH_RESPONSE arriving on any path finds the path it answers here.
    pub challenge: Option<[u8; 8]>,
    /// The payload of the challenge to the address the path used before an apparent
    /// migration (RFC 9000 §9.3.3), if outstanding.
    pub old_challenge: Option<[u8; 8]>,
    /// The peer's address on this path.
    pub remote: std::net::SocketAddr,
    /// Our address on this path, when known.
    pub local: Option<std::net::SocketAddr>,
    /// Bytes per second its acknowledgements show arriving (`recovery/delivery.rs`), once
    /// measured.
    pub delivery_rate: Option<f64>,
}

impl PathView {
    /// True unless abandoned.
    pub fn is_open(&self) -> bool {
        self.phase != PathPhase::Abandoned
    }

    /// True when the path may carry application data.
    pub fn is_active(&self) -> bool {
        self.phase == PathPhase::Active
    }

    /// The window has room for a full packet, as the path decides it
    /// (`PathState::window_has_room`); the pacer is the path's own business.
    pub fn window_has_room(&self) -> bool {
        self.bytes_in_flight + u64::from(self.mtu) <= self.cwnd
    }
}

/// Messages to one path from the rest of the connection.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    /// Flow-control frames to copy onto this path (sent once, never retransmitted: the
    /// original is tracked where it was first sent). The newest is sent first.
    pub fc_copies: Vec<Frame<'static>>,
    /// STREAM chunks to duplicate on this path, sent when its congestion window allows;
    /// those no longer buffered (acknowledged meanwhile) are skipped.
    pub dup_chunks: VecDeque<StreamChunk>,
    /// Messages the path handles itself (`conn/mail.rs`): its ACKs carried elsewhere and
    /// acknowledged, challenge answers, abandonment, reinjection requests.
    pub mail: Mail,
}

impl Inbox {
    /// Nothing waiting.
    pub fn is_empty(&self) -> bool {
        self.fc_copies.is_empty() && self.dup_chunks.is_empty()
    }

    /// Queues a flow-control copy unless the inbox holds [`MAX_FC_COPIES`] already.
    pub fn push_fc_copy(&mut self, frame: Frame<'static>) {
        if self.fc_copies.len() < MAX_FC_COPIES {
            self.fc_copies.push(frame);
        }
    }

    /// Queues chunks to duplicate, dropping the oldest beyond [`MAX_DUP_CHUNKS`].
    pub fn push_dup_chunks(&mut self, chunks: impl IntoIterator<Item = StreamChunk>) {
        self.dup_chunks.extend(chunks);
        while self.dup_chunks.len() > MAX_DUP_CHUNKS {
            self.dup_chunks.pop_front();
        }
    }

    /// Queues reinjected chunks. Not capped: the caller budgets them to the window room
    /// of this path, and reinjects only into an empty inbox.
    pub fn push_reinjected(&mut self, chunks: Vec<StreamChunk>) {
        self.dup_chunks.extend(chunks);
    }

    /// Drops the frames and chunks waiting (the path was abandoned); its mail stays for it.
    pub fn clear(&mut self) {
        self.fc_copies.clear();
        self.dup_chunks.clear();
    }
}

/// The views and inboxes of a connection's paths, by path slot.
#[derive(Debug)]
pub(crate) struct Board {
    views: Vec<Option<PathView>>,
    inboxes: Vec<Inbox>,
    /// Each path's pending ACK, for the paths that may carry it (multipath only).
    offers: Vec<Option<AckOffer>>,
    /// Paths publish ACK offers (multipath is in use).
    pub offers_on: bool,
    /// Slots with mail waiting, in the order it was posted.
    mail_waiting: SmallVec<[usize; 4]>,
    /// Every read must match the path's current state (one thread: the connection
    /// publishes after each change). Checked in debug builds.
    pub strict: bool,
}

impl Default for Board {
    fn default() -> Self {
        Self {
            views: Vec::new(),
            inboxes: Vec::new(),
            offers: Vec::new(),
            offers_on: false,
            mail_waiting: SmallVec::new(),
            strict: true,
        }
    }
}

impl Board {
    /// Publishes `view` for `slot`.
    pub fn publish(&mut self, slot: usize, view: PathView) {
        if self.views.len() <= slot {
            self.views.resize(slot + 1, None);
            self.inboxes.resize_with(slot + 1, Inbox::default);
            self.offers.resize(slot + 1, None);
        }
        self.views[slot] = Some(view);
    }

    /// Publishes the ACK offer of `slot` (`None`: no ACK pending). Only while offers are on.
    pub fn publish_offer(&mut self, slot: usize, offer: Option<AckOffer>) {
        if let Some(o) = self.offers.get_mut(slot) {
            *o = offer;
        }
    }

    /// The ACK offer of `slot`.
    pub fn offer(&self, slot: usize) -> Option<&AckOffer> {
        self.offers.get(slot).and_then(Option::as_ref)
    }

    /// Mail for `slot`, to be filled; the slot is marked as having mail waiting. The mail
    /// names the path that holds the slot now (mail left for an earlier holder is dropped).
    pub fn post(&mut self, slot: usize) -> &mut Mail {
        if !self.mail_waiting.contains(&slot) {
            self.mail_waiting.push(slot);
        }
        let owner = self.get(slot).map(|v| v.id);
        let mail = &mut self.inboxes[slot].mail;
        if mail.owner != owner {
            *mail = Mail { owner, ..Mail::default() };
        }
        mail
    }

    /// The next slot with mail waiting (the mark is removed).
    pub fn take_mail_waiting(&mut self) -> Option<usize> {
        (!self.mail_waiting.is_empty()).then(|| self.mail_waiting.remove(0))
    }

    /// The slots with mail waiting.
    pub fn mail_waiting_slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.mail_waiting.iter().copied()
    }

    /// Puts the mark of mail waiting back on `slot` (its path was out when the mail was due).
    pub fn keep_mail_waiting(&mut self, slot: usize) {
        if !self.mail_waiting.contains(&slot) {
            self.mail_waiting.push(slot);
        }
    }

    /// The view of `slot`, mutably, for the per-packet updates of a few fields (cheaper
    /// than publishing the whole view after every packet sent).
    pub fn get_mut(&mut self, slot: usize) -> Option<&mut PathView> {
        self.views.get_mut(slot).and_then(Option::as_mut)
    }

    /// One past the highest slot that ever published.
    pub fn slot_bound(&self) -> usize {
        self.views.len()
    }

    /// The path in `slot` sent a packet: publishes what that changes (flight, data sent,
    /// amplification room) without rebuilding the whole view.
    pub fn publish_sent(&mut self, slot: usize, p: &PathState) {
        let Some(v) = self.get_mut(slot) else { return };
        v.bytes_in_flight = p.bytes_in_flight;
        v.data_bytes_sent = p.data_bytes_sent;
        if !p.validated {
            v.amp_room = p.amplification_budget() >= super::send::MIN_PACKET_ROOM as u64;
        }
    }

    /// The peer was last heard (ack-eliciting) on the path in `slot` at `at`: publishes
    /// just that, which every received batch changes.
    pub fn publish_heard(&mut self, slot: usize, at: Option<crate::time::Instant>) {
        if let Some(v) = self.get_mut(slot) {
            v.last_eliciting_recv = at;
        }
    }

    /// Forgets `slot` (its path was discarded): no view, an empty inbox.
    pub fn remove(&mut self, slot: usize) {
        if let Some(v) = self.views.get_mut(slot) {
            *v = None;
            self.inboxes[slot].clear();
            self.inboxes[slot].mail = Mail::default();
            self.offers[slot] = None;
            self.mail_waiting.retain(|s| *s != slot);
        }
    }

    /// The view of `slot`, if a path there published one.
    pub fn get(&self, slot: usize) -> Option<&PathView> {
        self.views.get(slot).and_then(Option::as_ref)
    }

    /// The views with their slots, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &PathView)> + '_ {
        self.views.iter().enumerate().filter_map(|(i, v)| v.as_ref().map(|v| (i, v)))
    }

    /// The slot of the path with ID `id`.
    pub fn slot_of(&self, id: u64) -> Option<usize> {
        self.iter().find(|(_, v)| v.id == id).map(|(slot, _)| slot)
    }

    /// The slot of the path that carries the handshake and, without multipath, everything:
    /// path 0 while it is open, else the first active path, else the first path left (a
    /// slot in use whenever any path is: slot 0 may be free once its path was discarded).
    pub fn primary_slot(&self) -> Option<usize> {
        self.slot_of(0)
            .filter(|&s| self.get(s).is_some_and(PathView::is_open))
            .or_else(|| self.iter().find(|(_, v)| v.is_active()).map(|(s, _)| s))
            .or_else(|| self.iter().next().map(|(s, _)| s))
    }

    /// The largest PTO of the paths on the board with the peer's `max_ack_delay`, or 1 ms
    /// without paths.
    pub fn max_pto(&self, max_ack_delay: Duration) -> Duration {
        self.iter().map(|(_, v)| v.pto_base + max_ack_delay).max().unwrap_or(Duration::from_millis(1))
    }

    /// The inbox of `slot`.
    ///
    /// # Panics
    /// If no path ever published in `slot` (a caller bug: slots come from the path table,
    /// which publishes a view on insertion).
    pub fn inbox(&self, slot: usize) -> &Inbox {
        &self.inboxes[slot]
    }

    /// The inbox of `slot`, mutably. Same panics as [`Board::inbox`].
    pub fn inbox_mut(&mut self, slot: usize) -> &mut Inbox {
        &mut self.inboxes[slot]
    }
}

/// A path's seat at the board while it works alone (opening a receive batch, handling its
/// own ACKs and timers), detached from the board: taken with [`Seat::take`], which copies
/// what the path may read of the others (their coupling views), and returned with
/// [`Seat::give_back`], which publishes the path's view and ACK offer if its work changed
/// them. In between the path holds no reference into the connection, so a thread of its own
/// (issue C2) can do this work while other threads use the board; with one thread nothing
/// reads the board while a seat is out, so the result is the same as publishing at once.
#[derive(Debug)]
pub(crate) struct Seat {
    slot: usize,
    /// The other active paths' coupling views when the seat was taken; `None` when the path
    /// was alone on the board.
    coupling: Option<SmallVec<[CouplingView; 8]>>,
    /// The path's view changed: publish it on return.
    view_changed: bool,
    /// The path's ACK state changed: publish its offer on return (while offers are on).
    offer_changed: bool,
    /// Given back (debug builds check that no seat is dropped with changes unpublished).
    returned: bool,
}

impl Seat {
    /// The seat of the path in `slot`, with a copy of the other paths' coupling views.
    pub fn take(board: &Board, slot: usize) -> Self {
        let coupling = board.iter().nth(1).map(|_| {
            let others = board.iter().filter(|&(i, v)| i != slot && v.is_active());
            others.map(|(_, v)| v.coupling).collect()
        });
        Self { slot, coupling, view_changed: false, offer_changed: false, returned: false }
    }

    /// What coupled congestion control needs of the other active paths, or `None` when the
    /// path is alone on the board (nothing to couple with).
    pub fn coupling_views(&self) -> Option<&[CouplingView]> {
        self.coupling.as_deref()
    }

    /// The path's view changed; it is published when the seat is given back.
    pub fn publish(&mut self, _path: &PathState) {
        self.view_changed = true;
    }

    /// The path's ACK state changed; its offer is published when the seat is given back.
    pub fn publish_offer(&mut self, _path: &PathState) {
        self.offer_changed = true;
    }

    /// The path's work is done: its view and offer are published if they changed.
    pub fn give_back(mut self, board: &mut Board, path: &PathState) {
        self.returned = true;
        if self.view_changed {
            board.publish(self.slot, path.view());
        } else {
            // Every batch of received packets comes back here: when the peer was last heard
            // on the path is kept fresh without publishing the whole view.
            board.publish_heard(self.slot, path.last_eliciting_recv);
        }
        if self.offer_changed && board.offers_on {
            board.publish_offer(self.slot, path.ack_offer());
        }
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        if cfg!(debug_assertions) && !std::thread::panicking() {
            debug_assert!(
                self.returned || !(self.view_changed || self.offer_changed),
                "a seat dropped with its path's changes unpublished (slot {})",
                self.slot
            );
        }
    }
}

impl PathState {
    /// What this path publishes on the board.
    pub(crate) fn view(&self) -> PathView {
        let srtt = self.rtt.smoothed();
        PathView {
            id: self.id,
            phase: self.phase,
            srtt,
            rttvar: self.rtt.rttvar(),
            min_rtt: self.rtt.min(),
            rtt_sampled: self.rtt.has_sample(),
            pto_base: self.rtt.pto_base(),
            cwnd: self.cc.window(),
            bytes_in_flight: self.bytes_in_flight,
            mtu: self.mtu,
            backup: self.peer_backup,
            potentially_failed: self.potentially_failed,
            last_eliciting_recv: self.last_eliciting_recv,
            data_bytes_sent: self.data_bytes_sent,
            amp_room: self.amplification_budget() >= super::send::MIN_PACKET_ROOM as u64,
            coupling: self.cc.coupling_view(srtt.as_secs_f64()),
            challenge: self.challenge.map(|c| c.data),
            old_challenge: self.old_challenge.map(|c| c.data),
            remote: self.remote,
            local: self.local,
            delivery_rate: self.delivery.rate(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::config::TransportConfig;
    use crate::stream::StreamChunk;
    use crate::types::StreamId;

    fn chunk(offset: u64) -> StreamChunk {
        StreamChunk { id: StreamId(0), offset, len: 10, fin: false }
    }

    #[test]
    fn views_follow_slots_and_inboxes_are_bounded() {
        let path = PathState::new(7, "127.0.0.1:1".parse().expect("addr"), &TransportConfig::default(), true);
        let mut b = Board::default();
        b.publish(2, path.view());
        assert!(b.get(0).is_none() && b.get(1).is_none());
        assert_eq!(b.get(2).map(|v| v.id), Some(7));
        assert_eq!(b.iter().map(|(i, _)| i).collect::<Vec<_>>(), [2]);

        let inbox = b.inbox_mut(2);
        inbox.push_dup_chunks((0..MAX_DUP_CHUNKS as u64 + 10).map(|i| chunk(i * 10)));
        assert_eq!(inbox.dup_chunks.len(), MAX_DUP_CHUNKS);
        assert_eq!(inbox.dup_chunks.front().map(|c| c.offset), Some(100), "the oldest go first");
        for _ in 0..MAX_FC_COPIES + 5 {
            inbox.push_fc_copy(Frame::MaxData(1));
        }
        assert_eq!(inbox.fc_copies.len(), MAX_FC_COPIES);

        b.remove(2);
        assert!(b.get(2).is_none());
        assert!(b.inbox(2).is_empty(), "a discarded path's inbox is emptied");
    }

    /// A seat copies the other active paths' coupling views when taken, and the path's
    /// changes reach the board only when it is given back (and only those it declared).
    #[test]
    fn a_seat_is_detached_from_the_board_until_given_back() {
        let addr = "127.0.0.1:1".parse().expect("addr");
        let cfg = TransportConfig::default();
        let mut b = Board::default();
        let mut mine = PathState::new(0, addr, &cfg, true);
        mine.phase = PathPhase::Active;
        let mut other = PathState::new(1, addr, &cfg, true);
        other.phase = PathPhase::Active;
        b.publish(0, mine.view());
        let seat = Seat::take(&b, 0);
        assert!(seat.coupling_views().is_none(), "alone on the board: nothing to couple with");
        seat.give_back(&mut b, &mine);
        b.publish(1, other.view());
        let mut seat = Seat::take(&b, 0);
        assert_eq!(seat.coupling_views().map(<[_]>::len), Some(1), "the other path's view, not its own");
        // The path changes and says so; the board still shows the old view until the seat
        // comes back.
        mine.bytes_in_flight = 4321;
        seat.publish(&mine);
        assert_eq!(b.get(0).map(|v| v.bytes_in_flight), Some(0));
        seat.give_back(&mut b, &mine);
        assert_eq!(b.get(0).map(|v| v.bytes_in_flight), Some(4321));
        // A seat whose path declared nothing publishes nothing.
        mine.bytes_in_flight = 99;
        Seat::take(&b, 0).give_back(&mut b, &mine);
        assert_eq!(b.get(0).map(|v| v.bytes_in_flight), Some(4321));
    }

    /// Mail names the path it is for: what was left for an earlier holder of a slot is
    /// dropped when a message for the new holder is posted.
    #[test]
    fn mail_left_for_an_earlier_holder_of_a_slot_is_dropped() {
        let addr = "127.0.0.1:1".parse().expect("addr");
        let mut b = Board::default();
        b.publish(0, PathState::new(7, addr, &TransportConfig::default(), true).view());
        b.post(0).push_ack_acked(40);
        assert_eq!(b.inbox(0).mail.owner, Some(7));
        // Path 7 is gone before its mail was read; path 9 gets the slot.
        b.publish(0, PathState::new(9, addr, &TransportConfig::default(), true).view());
        b.post(0).push_ack_acked(5);
        assert_eq!(b.inbox(0).mail.owner, Some(9));
        assert_eq!(b.inbox(0).mail.acks_acked.as_slice(), &[5], "path 7's notice dropped");
        assert_eq!(b.take_mail_waiting(), Some(0));
        assert_eq!(b.take_mail_waiting(), None, "the slot is listed once");
    }
}
