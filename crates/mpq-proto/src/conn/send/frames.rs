//! The frames of a 1-RTT packet, written by its path: (PATH_)ACKs (its own and those it
//! carries from other paths' offers), path-local frames, copies from its inbox, the
//! connection-wide frames through the host when a batch is not quiet, and STREAM data from
//! the batch's lease (or one by one through the host).

use crate::frame::{self, Frame};
use crate::stream::StreamChunk;
use crate::time::Instant;

use super::super::mail::AckCarried;
use super::super::path::PathState;
use super::super::space::{Control, SentFrames};
use super::super::ConnShared;
use super::host::ack_slots_carried_by;
use super::side::BatchSide;
use super::AppFrames;

impl PathState {
    /// (PATH_)ACK frames placed on this path: due ones, and any pending one when the packet
    /// goes out anyway. Its own from its received ranges; other paths' from the offers they
    /// published, which learn by mail that their ACK went out (`carried`, posted once the
    /// packet is sealed).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_acks(
        &mut self,
        side: &mut BatchSide<'_, '_>,
        now: Instant,
        buf: &mut Vec<u8>,
        payload_end: usize,
        send_data: bool,
        frames: &mut SentFrames,
        carried: &mut super::Carried,
    ) {
        // The batch's lease fixed which paths' ACKs this path carries (taken out of the
        // lease for the loop and put back: no copy per packet); without one (a packet
        // outside a batch), ask the policy now.
        let leased = self.send_lease.as_mut().map(|l| std::mem::take(&mut l.ack_slots));
        let placed = match (leased, side.host_ref()) {
            (Some(slots), _) => slots,
            (None, Some(h)) => ack_slots_carried_by(h.shared, h.board, h.slot),
            // Alone, the batch holds a lease.
            (None, None) => return,
        };
        if self.data.single.is_some() {
            // One packet number space for all paths: one ACK frame reports them all.
            self.write_single_space_ack(side, now, buf, payload_end, send_data, frames, carried, &placed);
            if let Some(l) = self.send_lease.as_mut() {
                l.ack_slots = placed;
            }
            return;
        }
        let ack_delay_exponent = side.cfg().ack_delay_exponent;
        let max_ack_delay = side.cfg().max_ack_delay;
        let max_ranges = side.cfg().max_ack_ranges;
        let carrier = self.id;
        let multipath = match (self.send_lease.as_ref(), side.host_ref()) {
            (Some(l), _) => l.multipath,
            (None, h) => h.is_some_and(|h| h.shared.mp.enabled),
        };
        let mut own_written = false;
        for (j, carrier_ids) in placed.iter() {
            let j = *j;
            let room = payload_end.saturating_sub(buf.len());
            if j == side.slot() {
                // The path's own ACK, from its own received ranges.
                if !self.data.ack_pending || self.data.ack_carried_on.contains(&carrier) {
                    continue;
                }
                if !(self.own_ack_due(now, max_ack_delay) || send_data) {
                    continue;
                }
                let space = &mut self.data;
                let delay = space.received.ack_delay(now).as_micros() as u64 >> ack_delay_exponent;
                let ecn = space.received.ecn_counts();
                let frame_path = if multipath { Some(carrier) } else { None };
                if let Some(n) = frame::encode_ack_bounded(
                    buf,
                    frame_path,
                    space.received.ranges(),
                    delay,
                    ecn.as_ref(),
                    room,
                    max_ranges,
                ) {
                    self.stats.acks_sent += 1;
                    self.stats.ack_ranges_sent += n as u64;
                    self.on_own_ack_written(now, carrier_ids, frames);
                    own_written = true;
                }
                continue;
            }
            // Another path's ACK, from the offer it published (never its own state); the
            // owner learns by mail that it went out.
            let taken = {
                // (Alone, the lease names this path only.)
                let Some(offer) = side.host_ref().and_then(|h| h.board.offer(j)) else { continue };
                if self.carried_offer(offer) {
                    continue;
                }
                if !(offer.due(now, max_ack_delay) || send_data) {
                    continue;
                }
                let delay = offer.ack_delay(now).as_micros() as u64 >> ack_delay_exponent;
                let frame_path = if multipath { Some(offer.path_id) } else { None };
                let written = frame::encode_ack_bounded(
                    buf,
                    frame_path,
                    &offer.ranges,
                    delay,
                    offer.ecn.as_ref(),
                    room,
                    max_ranges,
                );
                written.map(|n| (offer.path_id, offer.version, offer.ranges.max(), n))
            };
            let Some((owner, version, largest, n)) = taken else { continue };
            self.stats.acks_sent += 1;
            self.stats.ack_ranges_sent += n as u64;
            if let Some(l) = largest {
                frames.acks.push((owner, l));
            }
            self.stats.acks_for_other_paths += 1;
            let notice = AckCarried { owner, carrier, version, at: now, carriers: carrier_ids.clone(), largest };
            carried.push((j, notice));
        }
        if own_written {
            self.publish_own_offer(side);
        }
        if let Some(l) = self.send_lease.as_mut() {
            l.ack_slots = placed;
        }
    }

    /// This path's pending ACK went out in this packet (`frames`): the packet records its
    /// Largest Acknowledged (for pruning once it is acknowledged), and once every path meant
    /// to carry it (`carrier_ids`) did, the ACK counts as sent.
    pub(super) fn on_own_ack_written(&mut self, now: Instant, carrier_ids: &[u64], frames: &mut SentFrames) {
        let carrier = self.id;
        let space = &mut self.data;
        if let Some(l) = space.received.ranges().max() {
            frames.acks.push((carrier, l));
        }
        space.ack_carried_on.push(carrier);
        if carrier_ids.iter().all(|c| space.ack_carried_on.contains(c)) {
            space.ack_pending = false;
            space.ack_carried_on.clear();
            space.received.on_ack_sent(now);
        }
    }

    /// After this path wrote its own ACK, its offer changed: published on the board (with
    /// the host), or handed over when an alone batch returns.
    pub(super) fn publish_own_offer(&self, side: &mut BatchSide<'_, '_>) {
        match side.host() {
            Some(host) if host.board.offers_on => host.board.publish_offer(host.slot, self.ack_offer()),
            Some(_) => {}
            None => side.alone.offer_changed = true,
        }
    }

    /// Application-space frames for a packet on this path, in priority order.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_app_frames(
        &mut self,
        side: &mut BatchSide<'_, '_>,
        now: Instant,
        buf: &mut Vec<u8>,
        end: usize,
        frames: &mut SentFrames,
        cwnd_ok: bool,
        data_ok: bool,
    ) -> AppFrames {
        let mut out = AppFrames::default();
        let room = |buf: &Vec<u8>| end.saturating_sub(buf.len());
        // Path-local frames: validation of this path, within the window (or in a probe).
        let validation_ok = cwnd_ok || self.data.probes > 0;
        while let Some(data) = self.path_responses.first().copied().filter(|_| validation_ok) {
            if room(buf) < 9 {
                break;
            }
            Frame::PathResponse(data).encode(buf);
            self.path_responses.remove(0);
            out.eliciting = true;
            out.path_validation = true;
        }
        if let Some(c) = self.challenge.as_mut().filter(|c| c.send_pending && validation_ok) {
            if room(buf) >= 9 {
                Frame::PathChallenge(c.data).encode(buf);
                c.send_pending = false;
                c.sent_at = Some(now);
                out.eliciting = true;
                out.path_validation = true;
            }
        }
        // The rest but leased stream data needs the host. (Alone, the batch started with no
        // PING due, an empty inbox and nothing connection-wide waiting.)
        let Some(host) = side.host() else {
            if data_ok {
                self.write_leased_control(buf, end, frames, &mut out);
                self.write_leased_stream_frames(side, buf, end, frames, &mut out);
            }
            return out;
        };
        #[cfg(test)]
        if !host.shared.injected.is_empty() && room(buf) >= host.shared.injected.len() {
            buf.append(&mut host.shared.injected);
            out.eliciting = true;
        }
        if host.shared.ping_pending && room(buf) >= 1 && host.take_ping() {
            Frame::Ping.encode(buf);
            out.eliciting = true;
        }
        if cwnd_ok {
            // Copies of flow-control frames sent on another path (not retransmitted).
            let inbox = host.board.inbox_mut(host.slot);
            let mut copies = 0;
            while let Some(f) = inbox.fc_copies.last() {
                if f.encoded_len() > room(buf) {
                    break;
                }
                f.encode(buf);
                inbox.fc_copies.pop();
                copies += 1;
                out.eliciting = true;
            }
            self.stats.flow_control_copies += copies;
            // Redundant copies of STREAM chunks first sent on another path.
            while let Some(c) = host.board.inbox(host.slot).dup_chunks.front().copied() {
                if !host.chunk_buffered(&c) {
                    host.board.inbox_mut(host.slot).dup_chunks.pop_front();
                    continue;
                }
                let Some(piece) = dup_piece(&c, room(buf)) else { break };
                let queue = &mut host.board.inbox_mut(host.slot).dup_chunks;
                if piece.len == c.len {
                    queue.pop_front();
                } else if let Some(front) = queue.front_mut() {
                    // The rest waits for the next packet.
                    *front = StreamChunk { offset: c.offset + piece.len as u64, len: c.len - piece.len, ..c };
                }
                frame::encode_stream_header(buf, piece.id, piece.offset, Some(piece.len), piece.fin);
                host.copy_chunk(&piece, buf);
                frames.push_copy(piece);
                out.eliciting = true;
                if piece.len < c.len {
                    break;
                }
            }
        }
        // DATAGRAM frames (RFC 9221 §5: congestion controlled, so within the window): those
        // pinned to this path, and with new data allowed, those the scheduler places.
        // Only on a validated path: like stream data, datagrams wait for validation.
        if cwnd_ok
            && self.phase == super::super::path::PathPhase::Active
            && host.shared.handshake_complete
            && !host.shared.datagrams.send_is_empty()
        {
            let max_frame = super::super::datagram::max_frame_for_mtu(self.mtu);
            while let Some(d) = host.shared.datagrams.take_for(self.id, data_ok, room(buf), max_frame) {
                frame::encode_datagram_header(buf, Some(d.len()));
                buf.extend_from_slice(&d);
                frames.push_datagram(self.id);
                host.shared.datagrams.on_sent(self.id, d.len(), false);
                out.eliciting = true;
            }
        }
        if !data_ok {
            return out;
        }
        self.write_leased_control(buf, end, frames, &mut out);
        let quiet = self.send_lease.as_ref().is_some_and(|l| l.quiet);
        if !quiet {
            host.write_connection_frames(now, buf, end, frames, &mut out);
            // Once what waited is written, the rest of the batch is quiet.
            let quiet_now = host.shared.quiet_for_lease();
            if let Some(l) = self.send_lease.as_mut() {
                l.quiet = quiet_now;
            }
        }
        if !host.shared.handshake_complete {
            return out;
        }
        self.write_leased_stream_frames(side, buf, end, frames, &mut out);
        out
    }

    /// The connection-wide control frames the batch's lease holds, whole, if the packet has
    /// room for them (else a later packet of the batch takes them).
    fn write_leased_control(&mut self, buf: &mut Vec<u8>, end: usize, frames: &mut SentFrames, out: &mut AppFrames) {
        let Some(l) = self.send_lease.as_mut().filter(|l| l.has_control()) else { return };
        if l.control.bytes.len() > end.saturating_sub(buf.len()) {
            return;
        }
        buf.append(&mut l.control.bytes);
        frames.append(&mut l.control.frames);
        // Every connection-wide frame elicits an acknowledgement (RFC 9000 §13.2.1).
        out.eliciting = true;
    }

    /// STREAM frames fill the rest of the packet. They always carry a Length: the packet may
    /// still be padded after them (coalesced Initials, the header protection sample).
    fn write_leased_stream_frames(
        &mut self,
        side: &mut BatchSide<'_, '_>,
        buf: &mut Vec<u8>,
        end: usize,
        frames: &mut SentFrames,
        out: &mut AppFrames,
    ) {
        let room = |buf: &Vec<u8>| end.saturating_sub(buf.len());
        while room(buf) > frame::MAX_STREAM_HEADER_LEN {
            let max = room(buf) - frame::MAX_STREAM_HEADER_LEN;
            // From the batch's lease while it has data (renewed when spent), else one by
            // one through the host.
            if let Some(chunk) = self.take_leased_chunk(side, max) {
                frame::encode_stream_header(buf, chunk.id, chunk.offset, Some(chunk.len), chunk.fin);
                if let Some(d) = self.send_lease.as_ref().and_then(|l| l.data.as_ref()) {
                    d.copy(&chunk, buf);
                }
                frames.stream.push(chunk);
                out.eliciting = true;
                continue;
            }
            let Some(host) = side.host() else {
                // Alone: the leased data is spent; the stream table may hold more.
                self.alone_needs_host(side);
                break;
            };
            let Some(chunk) = host.next_chunk(max, self.id) else { break };
            frame::encode_stream_header(buf, chunk.id, chunk.offset, Some(chunk.len), chunk.fin);
            host.copy_chunk(&chunk, buf);
            frames.stream.push(chunk);
            out.eliciting = true;
        }
    }

    /// The next STREAM chunk of at most `max` bytes for this path's batch from its data
    /// lease, renewed once if it cannot give one (only with the host). `None`: take chunks
    /// one by one.
    fn take_leased_chunk(&mut self, side: &mut BatchSide<'_, '_>, max: usize) -> Option<crate::stream::StreamChunk> {
        let take = |p: &mut PathState| p.send_lease.as_mut()?.data.as_mut()?.take(max);
        if let Some(chunk) = take(self) {
            return Some(chunk);
        }
        let host = side.host()?;
        if !host.renew_data_lease(self) {
            return None;
        }
        if let Some(chunk) = take(self) {
            return Some(chunk);
        }
        // A fresh lease that cannot serve this room: give it back for this batch.
        host.give_back_data(self.send_lease.as_mut()?);
        None
    }
}

impl ConnShared {
    /// (PATH_)NEW_CONNECTION_ID and (PATH_)RETIRE_CONNECTION_ID frames of every path ID.
    pub(crate) fn write_cid_frames(&mut self, buf: &mut Vec<u8>, end: usize, frames: &mut SentFrames) -> bool {
        let mut eliciting = false;
        let room = |buf: &Vec<u8>| end.saturating_sub(buf.len());
        let multipath = self.mp.enabled;
        let (mut first_advertised, mut full) = (false, false);
        'sets: for (&path, l) in self.local_cids.iter_mut() {
            while let Some(&seq) = l.to_advertise.first() {
                let Some(c) = l.active.get(&seq).copied() else {
                    l.to_advertise.remove(&seq);
                    continue;
                };
                let f = Frame::NewConnectionId(frame::NewConnectionId {
                    path_id: if multipath && path != 0 { Some(path) } else { None },
                    seq,
                    retire_prior_to: 0,
                    cid: c.cid,
                    reset_token: c.reset_token,
                });
                if f.encoded_len() > room(buf) {
                    full = true;
                    break 'sets;
                }
                f.encode(buf);
                l.to_advertise.remove(&seq);
                first_advertised |= !l.advertised;
                l.advertised = true;
                frames.push_control(Control::NewCid(path, seq));
                eliciting = true;
            }
        }
        if first_advertised {
            // The peer will be able to answer on that path ID: the client may open it.
            self.maybe_signal_new_path_allowed();
        }
        if full {
            return eliciting;
        }
        for (&path, p) in self.peer_cids.iter_mut() {
            while let Some(&seq) = p.to_retire.first() {
                let f =
                    Frame::RetireConnectionId { path_id: if multipath && path != 0 { Some(path) } else { None }, seq };
                if f.encoded_len() > room(buf) {
                    return eliciting;
                }
                f.encode(buf);
                p.to_retire.remove(&seq);
                frames.push_control(Control::RetireCid(path, seq));
                eliciting = true;
            }
        }
        eliciting
    }

    /// PATH_ABANDON, PATH_STATUS_*, MAX_PATH_ID, PATHS_BLOCKED and PATH_CIDS_BLOCKED.
    pub(crate) fn write_mp_control(&mut self, buf: &mut Vec<u8>, end: usize, frames: &mut SentFrames) -> bool {
        if !self.mp.enabled {
            return false;
        }
        let mut eliciting = false;
        let room = |buf: &Vec<u8>| end.saturating_sub(buf.len());
        while let Some(c) = self.mp.pending.first().cloned() {
            let f = match c {
                Control::PathAbandon(path_id, error_code) => Frame::PathAbandon { path_id, error_code },
                Control::PathStatus(path_id, seq) => {
                    let backup = self.mp.local_status.get(&path_id).is_some_and(|s| s.1);
                    Frame::PathStatus { path_id, seq, backup }
                }
                Control::MaxPathId(v) => Frame::MaxPathId(v),
                _ => {
                    self.mp.pending.remove(0);
                    continue;
                }
            };
            if f.encoded_len() > room(buf) {
                return eliciting;
            }
            f.encode(buf);
            self.mp.pending.remove(0);
            frames.push_control(c);
            eliciting = true;
        }
        if let Some(max) = self.mp.paths_blocked {
            let f = Frame::PathsBlocked(max);
            if f.encoded_len() <= room(buf) {
                f.encode(buf);
                self.mp.paths_blocked = None;
                self.mp.paths_blocked_sent = Some(max);
                self.stats.paths_blocked_sent += 1;
                eliciting = true;
            }
        }
        while let Some(&(path_id, _)) = self.mp.cids_blocked.first() {
            let next_seq = self.peer_cids.get(&path_id).map_or(0, |p| p.active.keys().max().map_or(0, |m| m + 1));
            let f = Frame::PathCidsBlocked { path_id, next_seq };
            if f.encoded_len() > room(buf) {
                break;
            }
            f.encode(buf);
            self.mp.cids_blocked.remove(0);
            self.stats.path_cids_blocked_sent += 1;
            eliciting = true;
        }
        eliciting
    }
}

/// Smallest piece of a redundant copy worth a STREAM frame of its own: below it the copy
/// waits for the next packet.
const MIN_DUP_PIECE: usize = 64;

/// What of the copy `c` a packet with `room` bytes left carries: all of it when it fits
/// with its real header, else its first bytes if at least [`MIN_DUP_PIECE`] fit (without
/// the FIN, which goes with the last byte). A copy is a chunk of a packet of another path,
/// whose MTU or ACK frames may leave more room than this one's: split, it does not wait at
/// the head of the queue for a packet it can never fit.
fn dup_piece(c: &StreamChunk, room: usize) -> Option<StreamChunk> {
    // (A piece's length field is no longer than the whole's.)
    let header = frame::stream_header_len(c.id, c.offset, Some(c.len));
    if header + c.len <= room {
        return Some(*c);
    }
    let len = room.checked_sub(header).filter(|&l| l >= MIN_DUP_PIECE && l < c.len)?;
    Some(StreamChunk { len, fin: false, ..*c })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::StreamId;

    fn chunk(offset: u64, len: usize, fin: bool) -> StreamChunk {
        StreamChunk { id: StreamId(3), offset, len, fin }
    }

    #[test]
    fn a_copy_that_fits_goes_whole_with_its_real_header() {
        let c = chunk(70_000, 1_200, true);
        // Type, stream ID (1 byte), offset (4), length (2).
        let header = 1 + 1 + 4 + 2;
        assert_eq!(frame::stream_header_len(c.id, c.offset, Some(c.len)), header);
        assert_eq!(dup_piece(&c, header + 1_200), Some(c));
    }

    #[test]
    fn a_copy_too_long_for_the_packet_is_split_without_its_fin() {
        let c = chunk(70_000, 1_200, true);
        let piece = dup_piece(&c, 1_000).expect("a piece fits");
        assert_eq!(piece, chunk(70_000, 1_000 - 8, false));
        // The piece and its header fill the room exactly.
        assert_eq!(frame::stream_header_len(piece.id, piece.offset, Some(piece.len)) + piece.len, 1_000);
    }

    #[test]
    fn no_piece_below_the_minimum() {
        let c = chunk(70_000, 1_200, false);
        assert_eq!(dup_piece(&c, 8 + MIN_DUP_PIECE - 1), None);
        assert_eq!(dup_piece(&c, 8 + MIN_DUP_PIECE).map(|p| p.len), Some(MIN_DUP_PIECE));
        assert_eq!(dup_piece(&c, 3), None);
        // A FIN-only copy needs only its header.
        assert_eq!(dup_piece(&chunk(5, 0, true), 4), Some(chunk(5, 0, true)));
    }
}
