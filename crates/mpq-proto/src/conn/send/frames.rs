//! The frames of a 1-RTT packet: (PATH_)ACKs, path-local frames, copies, connection-wide
//! control (CIDs, multipath control, flow control) and STREAM data.

use crate::frame::{self, Frame};
use crate::time::Instant;

use super::super::mail::AckCarried;
use super::super::space::{Control, SentFrames};
use super::super::Connection;
use super::AppFrames;

impl Connection {
    /// (PATH_)ACK frames placed on path `pi`: due ones, and any pending one when the packet
    /// goes out anyway.
    pub(super) fn write_acks(
        &mut self,
        now: Instant,
        pi: usize,
        buf: &mut Vec<u8>,
        payload_end: usize,
        send_data: bool,
        frames: &mut SentFrames,
    ) {
        // The batch's lease fixed which paths' ACKs this path carries (taken out of the
        // lease for the loop and put back: no copy per packet); without one (a packet
        // outside a batch), ask the policy now.
        let leased = self.paths[pi].send_lease.as_mut().map(|l| std::mem::take(&mut l.ack_slots));
        let placed = match leased {
            Some(slots) => slots,
            None => self.ack_slots_carried_by(pi),
        };
        let ack_delay_exponent = self.shared.config.ack_delay_exponent;
        let max_ack_delay = self.shared.config.max_ack_delay;
        let carrier = self.paths[pi].id;
        let multipath = self.shared.mp.enabled;
        let mut own_written = false;
        for (j, carrier_ids) in placed.iter() {
            let j = *j;
            let room = payload_end.saturating_sub(buf.len());
            if j == pi {
                // The path's own ACK, from its own received ranges.
                let path = &mut self.paths[pi];
                let space = &mut path.data;
                if !space.ack_pending || space.ack_carried_on.contains(&carrier) {
                    continue;
                }
                let due = space.received.wants_immediate_ack()
                    || space.received.ack_deadline(max_ack_delay).is_some_and(|t| t <= now);
                if !(due || send_data) {
                    continue;
                }
                let delay = space.received.ack_delay(now).as_micros() as u64 >> ack_delay_exponent;
                let largest = space.received.ranges().max();
                let ecn = space.received.ecn_counts();
                let frame_path = if multipath { Some(carrier) } else { None };
                if frame::encode_ack_bounded(buf, frame_path, space.received.ranges(), delay, ecn.as_ref(), room) {
                    if let Some(l) = largest {
                        frames.acks.push((carrier, l));
                    }
                    space.ack_carried_on.push(carrier);
                    if carrier_ids.iter().all(|c| space.ack_carried_on.contains(c)) {
                        space.ack_pending = false;
                        space.ack_carried_on.clear();
                        space.received.on_ack_sent(now);
                    }
                    own_written = true;
                }
                continue;
            }
            // Another path's ACK, from the offer it published (never its own state); the
            // owner learns by mail that it went out.
            let carried = {
                let Some(offer) = self.paths.offer(j) else { continue };
                if offer.carried_on.contains(&carrier) || self.paths[pi].has_carried(offer.path_id, offer.version) {
                    continue;
                }
                if !(offer.due(now, max_ack_delay) || send_data) {
                    continue;
                }
                let delay = offer.ack_delay(now).as_micros() as u64 >> ack_delay_exponent;
                let frame_path = if multipath { Some(offer.path_id) } else { None };
                let written =
                    frame::encode_ack_bounded(buf, frame_path, &offer.ranges, delay, offer.ecn.as_ref(), room);
                written.then(|| (offer.path_id, offer.version, offer.ranges.max()))
            };
            let Some((owner, version, largest)) = carried else { continue };
            if let Some(l) = largest {
                frames.acks.push((owner, l));
            }
            let path = &mut self.paths[pi];
            path.note_carried(owner, version);
            path.stats.acks_for_other_paths += 1;
            let notice = AckCarried { carrier, version, at: now, carriers: carrier_ids.clone() };
            self.paths.post(j).push_ack_carried(notice);
        }
        if own_written {
            self.paths.publish_offer(pi);
        }
        if let Some(l) = self.paths[pi].send_lease.as_mut() {
            l.ack_slots = placed;
        }
    }

    /// Application-space frames for a packet on path `pi`, in priority order.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_app_frames(
        &mut self,
        now: Instant,
        pi: usize,
        buf: &mut Vec<u8>,
        end: usize,
        frames: &mut SentFrames,
        cwnd_ok: bool,
        data_ok: bool,
    ) -> AppFrames {
        let mut out = AppFrames::default();
        let room = |buf: &Vec<u8>| end.saturating_sub(buf.len());
        // Path-local frames: validation of this path.
        while let Some(data) = self.paths[pi].path_responses.first().copied() {
            if room(buf) < 9 {
                break;
            }
            Frame::PathResponse(data).encode(buf);
            self.paths[pi].path_responses.remove(0);
            out.eliciting = true;
            out.path_validation = true;
        }
        if let Some(c) = self.paths[pi].challenge.as_mut().filter(|c| c.send_pending) {
            if room(buf) >= 9 {
                Frame::PathChallenge(c.data).encode(buf);
                c.send_pending = false;
                c.sent_at = Some(now);
                out.eliciting = true;
                out.path_validation = true;
            }
        }
        #[cfg(test)]
        if !self.shared.injected.is_empty() && room(buf) >= self.shared.injected.len() {
            buf.append(&mut self.shared.injected);
            out.eliciting = true;
        }
        if self.shared.ping_pending && room(buf) >= 1 {
            Frame::Ping.encode(buf);
            self.shared.ping_pending = false;
            out.eliciting = true;
        }
        if cwnd_ok {
            // Copies of flow-control frames sent on another path (not retransmitted).
            let inbox = self.paths.inbox_mut(pi);
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
            self.paths[pi].stats.flow_control_copies += copies;
            // Redundant copies of STREAM chunks first sent on another path.
            while let Some(c) = self.paths.inbox(pi).dup_chunks.front().copied() {
                if !self.shared.streams.chunk_buffered(&c) {
                    self.paths.inbox_mut(pi).dup_chunks.pop_front();
                    continue;
                }
                if room(buf) < c.len + frame::MAX_STREAM_HEADER_LEN {
                    break;
                }
                self.paths.inbox_mut(pi).dup_chunks.pop_front();
                frame::encode_stream_header(buf, c.id, c.offset, Some(c.len), c.fin);
                self.shared.streams.copy_stream_data(c.id, c.offset, c.len, buf);
                frames.stream.push(c);
                out.eliciting = true;
            }
        }
        if !data_ok {
            return out;
        }
        let quiet = self.paths[pi].send_lease.as_ref().is_some_and(|l| l.quiet);
        if !quiet {
            self.write_connection_frames(now, pi, buf, end, frames, &mut out);
            // Once what waited is written, the rest of the batch is quiet.
            let quiet_now = self.shared.quiet_for_lease();
            if let Some(l) = self.paths[pi].send_lease.as_mut() {
                l.quiet = quiet_now;
            }
        }
        if !self.shared.handshake_complete {
            return out;
        }
        // STREAM frames fill the rest. They always carry a Length: the packet may still be
        // padded after them (coalesced Initials, the header protection sample).
        let pinned = self.shared.mp.enabled && self.paths.len() > 1;
        let path_id = self.paths[pi].id;
        while room(buf) > frame::MAX_STREAM_HEADER_LEN {
            let max = room(buf) - frame::MAX_STREAM_HEADER_LEN;
            // From the batch's lease while it has data (renewed when spent), else one by
            // one from the shared side.
            if let Some(chunk) = self.take_leased_chunk(pi, max) {
                frame::encode_stream_header(buf, chunk.id, chunk.offset, Some(chunk.len), chunk.fin);
                if let Some(d) = self.paths[pi].send_lease.as_ref().and_then(|l| l.data.as_ref()) {
                    d.copy(chunk.offset, chunk.len, buf);
                }
                frames.stream.push(chunk);
                out.eliciting = true;
                continue;
            }
            super::super::touch!(self, send_chunks_unleased);
            let chunk = if pinned {
                let sched = &self.shared.scheduler;
                let snaps = &self.shared.sched_snapshots;
                self.shared.streams.next_stream_chunk_where(max, &|id| sched.stream_allowed(id, path_id, snaps))
            } else {
                self.shared.streams.next_stream_chunk(max)
            };
            let Some(chunk) = chunk else { break };
            frame::encode_stream_header(buf, chunk.id, chunk.offset, Some(chunk.len), chunk.fin);
            self.shared.streams.copy_stream_data(chunk.id, chunk.offset, chunk.len, buf);
            frames.stream.push(chunk);
            if self.shared.collect_chunks {
                self.shared.batch_chunks.push(chunk);
            }
            out.eliciting = true;
        }
        out
    }

    /// Connection-wide frames of a packet on path `pi`, ahead of its stream data:
    /// HANDSHAKE_DONE, NEW_TOKEN, 1-RTT CRYPTO, CID and multipath control frames, and the
    /// streams' control frames (flow control, resets). A quiet lease skips this: none waits.
    fn write_connection_frames(
        &mut self,
        now: Instant,
        pi: usize,
        buf: &mut Vec<u8>,
        end: usize,
        frames: &mut SentFrames,
        out: &mut AppFrames,
    ) {
        super::super::touch!(self, send_connection_frames);
        let room = |buf: &Vec<u8>| end.saturating_sub(buf.len());
        if self.shared.handshake_done_pending && room(buf) >= 1 {
            Frame::HandshakeDone.encode(buf);
            frames.push_control(Control::HandshakeDone);
            self.shared.handshake_done_pending = false;
            out.eliciting = true;
        }
        if self.shared.tokens.new_token_pending && room(buf) >= 1 + 2 + crate::token::MAX_TOKEN_LEN {
            if let Some(token) = self.take_new_token(now) {
                Frame::NewToken { token: &token }.encode(buf);
                frames.push_control(Control::NewToken);
                out.eliciting = true;
            }
        }
        // 1-RTT CRYPTO (session tickets), on whichever path sends first.
        while end > buf.len() + 16 {
            let hdr = 1 + 8 + 4; // type, offset, length: the worst case
            let Some(r) = self.shared.one_rtt_crypto.next_range((end - buf.len()).saturating_sub(hdr)) else { break };
            frame::encode_crypto_header(buf, r.start, (r.end - r.start) as usize);
            buf.extend_from_slice(self.shared.one_rtt_crypto.data(&r));
            frames.push_crypto(r);
            out.eliciting = true;
        }
        out.eliciting |= self.write_cid_frames(buf, end, frames);
        out.eliciting |= self.write_mp_control(buf, end, frames);
        if !self.shared.handshake_complete {
            return;
        }
        // Flow-control windows must cover the slowest path's data in flight, or data stuck
        // on it blocks the fast paths (the receive-window problem of MPTCP).
        let rtt = self.paths.views().filter(|(_, v)| v.is_active()).map(|(_, v)| v.srtt).max().unwrap_or_default();
        let all_paths_fc = self.shared.mp.enabled && self.shared.config.flow_control_on_all_paths;
        while room(buf) > 32 {
            let Some(c) = self.shared.streams.poll_control(now, rtt) else { break };
            c.encode(buf);
            if all_paths_fc && matches!(c, Frame::MaxData(_) | Frame::MaxStreamData { .. }) {
                // A lossy path must not hold back the peer's credit (MPQUIC sends its
                // WINDOW_UPDATE frames on all paths, CoNEXT 2017 §3).
                for q in self.paths.slots() {
                    if q != pi && self.paths.view(q).is_some_and(|v| v.is_active()) {
                        self.paths.inbox_mut(q).push_fc_copy(c.clone());
                    }
                }
            }
            frames.push_control(Control::Stream(c));
            out.eliciting = true;
        }
    }

    /// (PATH_)NEW_CONNECTION_ID and (PATH_)RETIRE_CONNECTION_ID frames of every path ID.
    pub(super) fn write_cid_frames(&mut self, buf: &mut Vec<u8>, end: usize, frames: &mut SentFrames) -> bool {
        let mut eliciting = false;
        let room = |buf: &Vec<u8>| end.saturating_sub(buf.len());
        let multipath = self.shared.mp.enabled;
        for (&path, l) in self.shared.local_cids.iter_mut() {
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
                    return eliciting;
                }
                f.encode(buf);
                l.to_advertise.remove(&seq);
                frames.push_control(Control::NewCid(path, seq));
                eliciting = true;
            }
        }
        for (&path, p) in self.shared.peer_cids.iter_mut() {
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
    pub(super) fn write_mp_control(&mut self, buf: &mut Vec<u8>, end: usize, frames: &mut SentFrames) -> bool {
        if !self.shared.mp.enabled {
            return false;
        }
        let mut eliciting = false;
        let room = |buf: &Vec<u8>| end.saturating_sub(buf.len());
        while let Some(c) = self.shared.mp.pending.first().cloned() {
            let f = match c {
                Control::PathAbandon(path_id, error_code) => Frame::PathAbandon { path_id, error_code },
                Control::PathStatus(path_id, seq) => {
                    let backup = self.shared.mp.local_status.get(&path_id).is_some_and(|s| s.1);
                    Frame::PathStatus { path_id, seq, backup }
                }
                Control::MaxPathId(v) => Frame::MaxPathId(v),
                _ => {
                    self.shared.mp.pending.remove(0);
                    continue;
                }
            };
            if f.encoded_len() > room(buf) {
                return eliciting;
            }
            f.encode(buf);
            self.shared.mp.pending.remove(0);
            frames.push_control(c);
            eliciting = true;
        }
        if let Some(max) = self.shared.mp.paths_blocked {
            let f = Frame::PathsBlocked(max);
            if f.encoded_len() <= room(buf) {
                f.encode(buf);
                self.shared.mp.paths_blocked = None;
                self.shared.mp.paths_blocked_sent = Some(max);
                self.shared.stats.paths_blocked_sent += 1;
                eliciting = true;
            }
        }
        while let Some(&(path_id, _)) = self.shared.mp.cids_blocked.first() {
            let next_seq =
                self.shared.peer_cids.get(&path_id).map_or(0, |p| p.active.keys().max().map_or(0, |m| m + 1));
            let f = Frame::PathCidsBlocked { path_id, next_seq };
            if f.encoded_len() > room(buf) {
                break;
            }
            f.encode(buf);
            self.shared.mp.cids_blocked.remove(0);
            self.shared.stats.path_cids_blocked_sent += 1;
            eliciting = true;
        }
        eliciting
    }
}
