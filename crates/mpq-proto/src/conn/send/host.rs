//! The shared side as a path's send batch sees it: [`SendHost`], the only way a path that
//! builds its packets (`PathState::build_batch`, `conn/send/path_packet.rs`) reaches
//! connection-wide state. It holds the shared half and the board, never another path.
//!
//! In a quiet batch of a steady transfer the path meets the host once for its lease (keys,
//! CID, ACK placement, stream data) and once more each time the data lease is spent; the
//! rest of the batch reads the lease. A runtime with a thread per path (issue C2) implements
//! these same calls under its lock.

use std::net::IpAddr;

use smallvec::SmallVec;

use crate::frame::Frame;
use crate::stream::StreamChunk;
use crate::time::Instant;

use super::super::board::Board;
use super::super::config::{AckPolicy, TransportConfig};
use super::super::path::PathState;
use super::super::space::{Control, SentFrames};
use super::super::{touch, ConnShared, State};
use super::lease::{AckSlots, LeasedControl, SendLease};
use super::side::{AloneEffects, BatchConfig, BatchSide};
use super::AppFrames;

/// Bytes of a packet kept free of leased control frames: the short header (a 20-byte CID
/// at most), the AEAD tag and a small ACK frame.
const LEASED_CONTROL_RESERVE: usize = 1 + 20 + 4 + super::TAG_LEN + 40;

/// The shared half and the board, lent to the path in `slot` while it builds packets.
pub(crate) struct SendHost<'a> {
    /// The shared half.
    pub shared: &'a mut ConnShared,
    /// The paths' views, inboxes and ACK offers.
    pub board: &'a mut Board,
    /// The building path's slot.
    pub slot: usize,
    /// The peer's address on the primary path, when a NEW_TOKEN frame is due (the token is
    /// bound to it, RFC 9000 §8.1.3).
    pub token_ip: Option<IpAddr>,
}

impl SendHost<'_> {
    /// The transport configuration.
    pub fn config(&self) -> &TransportConfig {
        &self.shared.config
    }

    /// Prepares a batch of `path` to be built alone ([`BatchSide::alone`]): when no PING
    /// waits, the path's inbox is empty, its ACK placement is its own ACKs only, and, if the
    /// batch may send new data now, what waits connection-wide fits the lease (the control
    /// frames of one packet, stream data of a single stream), the path leases here the keys,
    /// its CID, those frames and the batch's stream data. A batch that may not send data
    /// (its window is full, or it only carries the path's own traffic) writes only the
    /// path's own frames, which need nothing connection-wide. `None`: the batch is built with
    /// the host (what it leased stays for that).
    pub fn try_alone(
        &mut self,
        path: &mut PathState,
        now: Instant,
        allow_data: bool,
    ) -> Option<BatchSide<'static, 'static>> {
        let shared = &*self.shared;
        // (Datagrams are written with the host, whether the batch may send new data or not.)
        let quiet_now = shared.state == State::Established
            && !shared.ping_pending
            && shared.datagrams.send_is_empty()
            && self.board.inbox(self.slot).is_empty();
        #[cfg(test)]
        let quiet_now = quiet_now && shared.injected.is_empty();
        // (With one packet number space for all paths, every ACK reports the other paths'
        // received numbers from their offers on the board: the host is needed.)
        if !quiet_now || !path.in_batch || path.data.single.is_some() {
            return None;
        }
        let data_ok =
            allow_data && path.can_send_data(now, shared.config.pacing.then_some(shared.config.max_gso_segments));
        let own_traffic = path.data.ack_pending
            || path.data.probes > 0
            || path.challenge.is_some_and(|c| c.send_pending)
            || !path.path_responses.is_empty();
        if !data_ok && !own_traffic {
            // Nothing of its own to send (the host may still place another path's ACK here).
            return None;
        }
        if path.send_lease.is_none() {
            path.send_lease = self.lease_keys(path);
        }
        if data_ok {
            self.lease_control(path, now);
        }
        let lease = path.send_lease.as_ref()?;
        let own_acks_only = lease.ack_slots.iter().all(|(j, _)| *j == self.slot);
        // (Without data, the batch's packets write nothing connection-wide: quiet or not.)
        if (data_ok && !lease.quiet) || lease.dcid.is_none() || !own_acks_only {
            return None;
        }
        let unleased = data_ok && !lease.has_data() && !self.renew_data_lease(path);
        // (Asked once: what is leased by now no longer counts as waiting.)
        let more_waits = self.shared.has_app_space_data();
        if unleased && more_waits {
            // Data waits that the batch cannot lease (redundant scheduling, a stream not
            // allowed on this path): chunk by chunk, with the host.
            return None;
        }
        let lease = path.send_lease.as_mut()?;
        if path.data.probes > 0 && !lease.has_data() {
            // A PTO probe carries data to resend if any waits: the host has it.
            return None;
        }
        lease.all_leased = !more_waits;
        Some(BatchSide::alone(self.slot, BatchConfig::of(&self.shared.config, self.shared.qlog.is_some())))
    }

    /// The connection-wide control frames waiting to be sent go into the lease of `path`'s
    /// batch, encoded, up to what a packet of the path holds besides its header and ACK; the
    /// lease is quiet if nothing else waits then.
    pub fn lease_control(&mut self, path: &mut PathState, now: Instant) {
        let budget = usize::from(path.mtu).saturating_sub(LEASED_CONTROL_RESERVE);
        let Some(lease) = path.send_lease.as_mut() else { return };
        if lease.quiet || lease.has_control() {
            return;
        }
        touch!(self, send_control_leases);
        let mut out = AppFrames::default();
        let control = &mut lease.control;
        self.write_connection_frames(now, &mut control.bytes, budget, &mut control.frames, &mut out);
        lease.quiet = self.shared.quiet_for_lease();
    }

    /// A batch `path` built alone returns: what it changed for the others (its view, its
    /// ACK offer, the ACKs it carried for other paths, its qlog events) is published,
    /// emitted and posted.
    pub fn take_back(&mut self, path: &mut PathState, effects: AloneEffects) {
        touch!(self, send_alone_batches);
        #[cfg(debug_assertions)]
        {
            self.shared.touches.send_leased += effects.leased_packets;
            self.shared.touches.send_alone_packets += effects.leased_packets;
        }
        if effects.sent {
            self.board.publish_sent(self.slot, path);
        }
        if effects.offer_changed && self.board.offers_on {
            self.board.publish_offer(self.slot, path.ack_offer());
        }
        self.shared.qlog_emit_recorded(effects.qlog);
        for (slot, notice) in effects.carried {
            if let Some(owner) = self.board.get(slot).map(|v| v.id) {
                path.note_carried(owner, notice.version);
                self.board.post(slot).push_ack_carried(notice);
            }
        }
    }

    /// 1-RTT keys, the path's peer CID, ACK placement and (for a quiet lease, later) stream
    /// data for a batch of `path`; `None` without 1-RTT keys.
    pub fn lease_keys(&mut self, path: &PathState) -> Option<SendLease> {
        let keys = self.shared.one_rtt.as_ref()?;
        let lease = SendLease {
            dcid: self.shared.peer_cids.get(&path.id).map(|c| c.current().cid),
            generation: keys.current().clone(),
            header: keys.header_keys().clone(),
            allowance: keys.seal_allowance(),
            first_pn: None,
            sealed: 0,
            acks_sent: SmallVec::new(),
            multipath: self.shared.mp.enabled,
            quiet: self.shared.quiet_for_lease(),
            control: LeasedControl::default(),
            all_leased: false,
            data: None,
            data_unavailable: false,
            ack_eliciting_sent: false,
            stream_packets: SmallVec::new(),
            ack_slots: ack_slots_carried_by(self.shared, self.board, self.slot),
        };
        touch!(self, send_leases);
        Some(lease)
    }

    /// The batch of `path` needs more stream data: the data lease it holds (spent) goes
    /// back and a new one is taken, up to a full batch of packets. False if none can be
    /// had; the batch then takes chunks one by one ([`SendHost::next_chunk`]).
    pub fn renew_data_lease(&mut self, path: &mut PathState) -> bool {
        let (mtu, path_id) = (path.mtu, path.id);
        let Some(lease) = path.send_lease.as_mut() else { return false };
        if !lease.quiet || lease.data_unavailable {
            return false;
        }
        if let Some(old) = lease.data.take() {
            self.shared.streams.return_stream_data(old);
        }
        touch!(self, send_data_leases);
        let max = u64::from(mtu) * self.shared.config.max_gso_segments.max(1) as u64;
        let shared = &mut *self.shared;
        let data = if shared.collect_chunks {
            // Redundant scheduling records every chunk sent: one by one.
            None
        } else if shared.mp.enabled && self.board.iter().nth(1).is_some() {
            let (sched, snaps) = (&shared.scheduler, &shared.sched_snapshots);
            shared.streams.lease_stream_data(max, u64::from(mtu), &|id| sched.stream_allowed(id, path_id, snaps))
        } else {
            shared.streams.lease_stream_data(max, u64::from(mtu), &|_| true)
        };
        lease.data_unavailable = data.is_none();
        lease.data = data;
        !lease.data_unavailable
    }

    /// A fresh data lease that cannot serve the batch's room goes back for this batch.
    pub fn give_back_data(&mut self, lease: &mut SendLease) {
        lease.data_unavailable = true;
        if let Some(d) = lease.data.take() {
            self.shared.streams.return_stream_data(d);
        }
    }

    /// The next STREAM chunk of at most `max` bytes for path `path_id`, from the shared
    /// stream table (when no lease can serve: redundant scheduling, a lease taken when the
    /// batch could not send data), with its bytes appended
    /// to `buf` after its header by the caller's `write_header`.
    pub fn next_chunk(&mut self, max: usize, path_id: u64) -> Option<StreamChunk> {
        touch!(self, send_chunks_unleased);
        let shared = &mut *self.shared;
        let pinned = shared.mp.enabled && self.board.iter().nth(1).is_some();
        let chunk = if pinned {
            let (sched, snaps) = (&shared.scheduler, &shared.sched_snapshots);
            shared.streams.next_stream_chunk_where(max, &|id| sched.stream_allowed(id, path_id, snaps))
        } else {
            shared.streams.next_stream_chunk(max)
        }?;
        if shared.collect_chunks {
            shared.batch_chunks.push(chunk);
        }
        Some(chunk)
    }

    /// Appends the bytes of `chunk` from its stream's send buffer.
    pub fn copy_chunk(&self, chunk: &StreamChunk, buf: &mut Vec<u8>) {
        self.shared.streams.copy_stream_data(chunk.id, chunk.offset, chunk.len, buf);
    }

    /// The chunk still waits for acknowledgement (a copy of it is worth sending).
    pub fn chunk_buffered(&self, chunk: &StreamChunk) -> bool {
        self.shared.streams.chunk_buffered(chunk)
    }

    /// Takes the PING the key update asked for, if any (RFC 9001 §6.1).
    pub fn take_ping(&mut self) -> bool {
        std::mem::take(&mut self.shared.ping_pending)
    }

    /// Connection-wide frames are waiting to be sent (stream data included).
    pub fn has_app_space_data(&self) -> bool {
        self.shared.has_app_space_data()
    }

    /// Connection-wide frames of a packet on the path, ahead of its stream data:
    /// HANDSHAKE_DONE, NEW_TOKEN, 1-RTT CRYPTO, CID and multipath control frames, and the
    /// streams' control frames (flow control, resets). A quiet lease skips this: none waits.
    pub(super) fn write_connection_frames(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        end: usize,
        frames: &mut SentFrames,
        out: &mut AppFrames,
    ) {
        touch!(self, send_connection_frames);
        let room = |buf: &Vec<u8>| end.saturating_sub(buf.len());
        let shared = &mut *self.shared;
        if shared.handshake_done_pending && room(buf) >= 1 {
            Frame::HandshakeDone.encode(buf);
            frames.push_control(Control::HandshakeDone);
            shared.handshake_done_pending = false;
            out.eliciting = true;
        }
        if shared.tokens.new_token_pending && room(buf) >= 1 + 2 + crate::token::MAX_TOKEN_LEN {
            if let Some(token) = self.token_ip.and_then(|ip| shared.take_new_token(now, ip)) {
                Frame::NewToken { token: &token }.encode(buf);
                frames.push_control(Control::NewToken);
                out.eliciting = true;
            }
        }
        // 1-RTT CRYPTO (session tickets), on whichever path sends first.
        while end > buf.len() + 16 {
            let hdr = 1 + 8 + 4; // type, offset, length: the worst case
            let Some(r) = shared.one_rtt_crypto.next_range((end - buf.len()).saturating_sub(hdr)) else { break };
            crate::frame::encode_crypto_header(buf, r.start, (r.end - r.start) as usize);
            buf.extend_from_slice(shared.one_rtt_crypto.data(&r));
            frames.push_crypto(r);
            out.eliciting = true;
        }
        out.eliciting |= shared.write_cid_frames(buf, end, frames);
        out.eliciting |= shared.write_mp_control(buf, end, frames);
        if !shared.handshake_complete {
            return;
        }
        // Flow-control windows must cover the slowest path's data in flight, or data stuck
        // on it blocks the fast paths (the receive-window problem of MPTCP).
        let rtt = self.board.iter().filter(|(_, v)| v.is_active()).map(|(_, v)| v.srtt).max().unwrap_or_default();
        let all_paths_fc = shared.mp.enabled && shared.config.flow_control_on_all_paths;
        while room(buf) > 32 {
            let Some(c) = shared.streams.poll_control(now, rtt) else { break };
            c.encode(buf);
            if all_paths_fc && matches!(c, Frame::MaxData(_) | Frame::MaxStreamData { .. }) {
                // A lossy path must not hold back the peer's credit (MPQUIC sends its
                // WINDOW_UPDATE frames on all paths, CoNEXT 2017 §3): a copy in every
                // other active path's inbox.
                let others: SmallVec<[usize; 4]> =
                    self.board.iter().filter(|&(q, v)| q != self.slot && v.is_active()).map(|(q, _)| q).collect();
                for q in others {
                    self.board.inbox_mut(q).push_fc_copy(c.clone());
                }
            }
            frames.push_control(Control::Stream(c));
            out.eliciting = true;
        }
    }
}

/// Path `i` can carry a packet now as far as its peer CID and the anti-amplification limit
/// (RFC 9000 §8.1) go: an address being validated after a NAT rebinding may have spent its
/// budget until the peer sends again.
pub(crate) fn can_carry(shared: &ConnShared, board: &Board, i: usize) -> bool {
    board.get(i).is_some_and(|v| v.is_open() && v.amp_room && shared.peer_cids.get(&v.id).is_some_and(|c| c.has_cid()))
}

/// The paths (slots) that should carry the ACK of path `j`'s packets (the ACK policy,
/// RFC 10069 §3.1: PATH_ACKs may go on any path, so a path that cannot
/// send now does not hold them back).
pub(crate) fn ack_carriers(shared: &ConnShared, board: &Board, j: usize) -> SmallVec<[usize; 4]> {
    let mut out = SmallVec::new();
    if !shared.mp.enabled {
        out.push(j);
        return out;
    }
    let sendable = |i: usize| can_carry(shared, board, i);
    // Only the policies that look at other paths pay for the scan (the default, same-path,
    // is O(1) while its own path can send).
    match shared.config.ack_policy {
        AckPolicy::SamePath if sendable(j) => out.push(j),
        AckPolicy::SamePath | AckPolicy::LowestRtt => {
            let fastest = board
                .iter()
                .filter(|&(i, v)| v.is_active() && !v.potentially_failed && sendable(i))
                .min_by_key(|(_, v)| v.srtt)
                .map(|(i, _)| i);
            if let Some(f) = fastest.or(if sendable(j) { Some(j) } else { None }) {
                out.push(f);
            }
        }
        AckPolicy::AllPaths => {
            out.extend(board.iter().filter(|&(i, v)| v.is_active() && sendable(i)).map(|(i, _)| i));
            if out.is_empty() && sendable(j) {
                out.push(j);
            }
        }
    }
    out
}

/// The paths (slots) whose ACKs path `pi` carries under the ACK policy, each with the IDs of
/// all its carriers. Nothing a batch does changes the choice (the board's views, the peer's
/// CIDs and the paths' amplification room: a path out of room writes no packet).
pub(crate) fn ack_slots_carried_by(shared: &ConnShared, board: &Board, pi: usize) -> AckSlots {
    let mut out = SmallVec::new();
    for (j, _) in board.iter() {
        let carriers = ack_carriers(shared, board, j);
        if carriers.contains(&pi) {
            out.push((j, carriers.iter().filter_map(|&c| board.get(c).map(|v| v.id)).collect()));
        }
    }
    out
}
