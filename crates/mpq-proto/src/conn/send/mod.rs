//! Sending: datagram assembly (coalesced packets, GSO batches), frame scheduling within a
//! packet, congestion, pacing and amplification limits (RFC 9000 §12.2, §13, §14).

use crate::frame::{self, Frame};
use crate::packet::header::{write_long_header, write_short_header, LongType};
use crate::packet::number::encode_pn_len;
use crate::packet::protect::seal_packet;
use crate::recovery::sent::SentPacket;
use crate::sched::{Decision, SchedContext};
use crate::time::Instant;
use crate::types::{Level, Side, SpaceId};
use smallvec::SmallVec;

use super::config::AckPolicy;
use super::space::SentFrames;
use super::{Connection, State, Transmit};

mod close;
mod frames;
mod lease;
pub(crate) use lease::SendLease;
mod off_path;
mod reinject;

/// Packets of a key's confidentiality limit kept for CONNECTION_CLOSE (RFC 9001 §6.6).
const CLOSE_RESERVE: u64 = 16;
/// AEAD tag length of every QUIC v1 cipher suite.
const TAG_LEN: usize = 16;
/// Smallest room worth starting a packet in.
pub(crate) const MIN_PACKET_ROOM: usize = 64;
/// A datagram within this many bytes of its limit counts as full and is padded to it.
const GSO_PAD_SLACK: usize = 64;

/// A packet written but not yet sealed: the last one of a datagram may still be padded.
struct OpenPacket {
    /// Where its header is.
    header: Header,
    frames: SentFrames,
    ack_eliciting: bool,
    padded: bool,
    /// Holds PATH_CHALLENGE or PATH_RESPONSE: the datagram is padded to 1200 bytes.
    probing_path: bool,
}

/// What `write_app_frames` wrote.
#[derive(Default)]
struct AppFrames {
    eliciting: bool,
    path_validation: bool,
}

impl Connection {
    /// Writes the next datagram, or a GSO batch of equal-sized datagrams of one path, into
    /// `buf` (cleared first). Returns `None` when there is nothing to send now.
    ///
    /// With multipath, path-local traffic (PATH_CHALLENGE/RESPONSE, the ACKs placed on a
    /// path, PTO probes, copies) goes first, path by path in turn; new data then goes on
    /// the path the scheduler picks.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.debug_assert_mail_delivered();
        buf.clear();
        match self.shared.state {
            State::Drained | State::Draining { .. } => return None,
            State::Closing { .. } => return self.poll_close(now, buf),
            _ => {}
        }
        self.maybe_initiate_key_update(now);
        self.arm_key_discard(now);
        if let Some(t) = self.poll_off_path(now, buf) {
            return Some(t);
        }
        if !self.shared.mp.enabled {
            let pi = self.primary_path();
            return self.write_batch(now, buf, pi, true);
        }
        // Path-local traffic, path by path in turn (the cursor is a position in the list of
        // live slots).
        let slots = self.paths.slots();
        let n = slots.len();
        for k in 0..n {
            let at = (self.shared.next_path_cursor + k) % n;
            let pi = slots[at];
            if self.path_has_local_traffic(now, pi) {
                if let Some(t) = self.write_batch(now, buf, pi, false) {
                    self.shared.next_path_cursor = (at + 1) % n;
                    return Some(t);
                }
            }
        }
        if !self.wants_to_send_data() {
            // Nothing new: a path with window may speed up data stuck on a slower one.
            if self.reinject(now) {
                return self.poll_transmit(now, buf);
            }
            return None;
        }
        let snaps = self.path_snapshots(now);
        if !snaps.iter().any(|s| s.can_send) {
            return None;
        }
        let ctx = SchedContext { queued_bytes: self.shared.streams.queued_bytes() };
        let (path, copies) = match self.shared.scheduler.schedule(&snaps, &ctx) {
            Decision::Send { path, copies } => (path, copies),
            Decision::Wait => return None,
        };
        if !snaps.iter().any(|s| s.id == path && s.can_send) {
            return None;
        }
        let pi = self.path_index(path)?;
        let fallbacks: SmallVec<[u64; 4]> = snaps.iter().filter(|s| s.can_send && s.id != path).map(|s| s.id).collect();
        self.shared.sched_snapshots = snaps;
        self.shared.collect_chunks = !copies.is_empty();
        let mut t = self.write_batch(now, buf, pi, true);
        // Nothing fit the chosen path (e.g. every waiting stream is pinned elsewhere): let
        // another path that can send have the data rather than stall until the next ACK.
        for q in fallbacks {
            if t.is_some() {
                break;
            }
            if let Some(qi) = self.path_index(q) {
                t = self.write_batch(now, buf, qi, true);
            }
        }
        self.shared.collect_chunks = false;
        let chunks = std::mem::take(&mut self.shared.batch_chunks);
        for q in copies {
            if q == path {
                continue;
            }
            if let Some(qi) = self.path_index(q) {
                self.paths.inbox_mut(qi).push_dup_chunks(chunks.iter().copied());
            }
        }
        t
    }

    /// Path `pi` has traffic that belongs to it alone.
    fn path_has_local_traffic(&mut self, now: Instant, pi: usize) -> bool {
        let p = &self.paths[pi];
        if !p.is_open() || !self.shared.peer_cids.get(&p.id).is_some_and(|c| c.has_cid()) {
            return false;
        }
        if p.challenge.is_some_and(|c| c.send_pending) || !p.path_responses.is_empty() || p.data.probes > 0 {
            return true;
        }
        if !self.paths.inbox(pi).is_empty() && self.can_send_data(now, pi) {
            return true;
        }
        // The handshake spaces live on the primary path: their ACKs, PTO probes and CRYPTO
        // data (a lost Finished) must go out even when the path's window is full of 1-RTT
        // data (RFC 9002 §7.5: probes are not blocked by congestion control).
        if pi == self.primary_path() && (self.shared.initial.is_some() || self.shared.handshake.is_some()) {
            let cwnd_ok = self.can_send_data(now, pi);
            for space_id in [SpaceId::Initial, SpaceId::Handshake] {
                if self.space_wants_send(now, space_id, pi, cwnd_ok, false) {
                    return true;
                }
            }
        }
        self.acks_due_on(now, pi)
    }

    /// Writes datagrams of path index `pi` (a GSO batch when several fill up).
    /// The path leases the 1-RTT keys when the batch writes its first 1-RTT packet and
    /// returns the lease after the batch.
    fn write_batch(&mut self, now: Instant, buf: &mut Vec<u8>, pi: usize, allow_data: bool) -> Option<Transmit> {
        self.paths[pi].in_batch = true;
        let t = self.write_batch_leased(now, buf, pi, allow_data);
        if let Some(p) = self.paths.get_mut(pi) {
            p.in_batch = false;
        }
        self.return_lease(now, pi);
        // The mail the batch posted (ACKs carried for other paths) reaches them now.
        self.deliver_mail(now);
        t
    }

    fn write_batch_leased(&mut self, now: Instant, buf: &mut Vec<u8>, pi: usize, allow_data: bool) -> Option<Transmit> {
        let max_segments = self.shared.config.max_gso_segments.max(1);
        let mtu = usize::from(self.paths[pi].mtu);
        let mut segment_size: Option<usize> = None;
        let mut count = 0;
        // One ECN codepoint for the whole batch; only 1-RTT datagrams are marked (once the
        // handshake is confirmed no other packet type is left).
        let ecn = self.shared.config.ecn && self.shared.handshake_confirmed && self.paths[pi].ecn.should_mark();
        self.paths[pi].ecn_batch = ecn;
        loop {
            let limit = segment_size.unwrap_or(mtu);
            let (written, coalesced_long) = self.write_datagram(now, buf, limit, pi, allow_data);
            if written == 0 {
                break;
            }
            count += 1;
            let seg = *segment_size.get_or_insert(written);
            // Batch only full-sized short-header datagrams; a shorter one ends the batch.
            if written < seg || coalesced_long || written < mtu || count >= max_segments {
                break;
            }
        }
        self.shared.stats.tx_datagrams += count as u64;
        if buf.is_empty() {
            return None;
        }
        let path = &mut self.paths[pi];
        path.stats.tx_bytes += buf.len() as u64;
        Some(Transmit {
            destination: path.remote,
            source: path.local,
            path_id: path.id,
            size: buf.len(),
            segment_size: if count > 1 { segment_size } else { None },
            ecn: ecn.then_some(crate::recovery::ecn::ECT0),
        })
    }

    /// Writes one datagram of at most `limit` bytes on path `pi`; returns its size and
    /// whether it holds long-header packets (which never go in GSO batches).
    fn write_datagram(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        limit: usize,
        pi: usize,
        allow_data: bool,
    ) -> (usize, bool) {
        let dg_start = buf.len();
        let budget = self.paths[pi].amplification_budget();
        let limit = (limit as u64).min(budget) as usize;
        if limit < MIN_PACKET_ROOM {
            return (0, false);
        }
        let cwnd_ok = self.can_send_data(now, pi);
        let spaces: &[SpaceId] = if pi == self.primary_path() {
            &[SpaceId::Initial, SpaceId::Handshake, SpaceId::Data]
        } else {
            &[SpaceId::Data]
        };
        let mut open: Option<OpenPacket> = None;
        let mut pad_datagram = false;
        let mut long = false;
        for &space_id in spaces {
            if !self.space_wants_send(now, space_id, pi, cwnd_ok, allow_data) {
                continue;
            }
            let room = (dg_start + limit).saturating_sub(buf.len());
            if room < MIN_PACKET_ROOM {
                break;
            }
            if let Some(p) = open.take() {
                self.seal(now, buf, p, pi);
            }
            if let Some(p) = self.write_packet(now, space_id, pi, buf, dg_start + limit, cwnd_ok, allow_data) {
                if p.header.level == Level::Initial && (self.shared.side == Side::Client || p.ack_eliciting) {
                    // RFC 9000 §14.1: datagrams with (ack-eliciting) Initials are padded.
                    pad_datagram = true;
                }
                // RFC 9000 §8.2.1: path validation also checks that 1200 bytes get through.
                pad_datagram |= p.probing_path;
                long |= p.header.level != Level::OneRtt;
                open = Some(p);
            }
        }
        let Some(mut p) = open else {
            return (buf.len() - dg_start, long);
        };
        // A short-header datagram that ran out of room, not data, is padded to exactly the
        // limit so that the next one can join it in a GSO batch of equal segments.
        let room_limited = !long && buf.len() + TAG_LEN + GSO_PAD_SLACK >= dg_start + limit;
        let target = if pad_datagram {
            (dg_start + crate::MIN_INITIAL_SIZE).min(dg_start + limit)
        } else if room_limited {
            dg_start + limit
        } else {
            0
        };
        let end = buf.len() + TAG_LEN;
        if end < target {
            buf.resize(buf.len() + (target - end), 0);
            p.padded = true;
        }
        if p.probing_path {
            // Whether this PATH_CHALLENGE also shows that 1200 bytes get through.
            let size = buf.len() + TAG_LEN - dg_start;
            if let Some(c) = self.paths[pi].challenge.as_mut().filter(|c| c.sent_at == Some(now)) {
                c.full_size = size >= crate::MIN_INITIAL_SIZE;
            }
        }
        self.seal(now, buf, p, pi);
        (buf.len() - dg_start, long)
    }

    /// Congestion window and pacing allow ack-eliciting packets on path `pi` now (probes
    /// ignore both).
    fn can_send_data(&mut self, now: Instant, pi: usize) -> bool {
        let pacing = self.shared.config.pacing;
        self.paths[pi].can_send_data(now, pacing)
    }

    fn has_keys(&self, space_id: SpaceId) -> bool {
        match space_id {
            SpaceId::Initial => self.shared.initial_keys.is_some() && self.shared.initial.is_some(),
            SpaceId::Handshake => self.shared.handshake_keys.is_some() && self.shared.handshake.is_some(),
            SpaceId::Data => self.shared.one_rtt.is_some(),
        }
    }

    /// Whether the space has anything to send on path `pi` now.
    fn space_wants_send(
        &mut self,
        now: Instant,
        space_id: SpaceId,
        pi: usize,
        cwnd_ok: bool,
        allow_data: bool,
    ) -> bool {
        if !self.has_keys(space_id) {
            return false;
        }
        if space_id == SpaceId::Data {
            if !self.paths[pi].is_open() {
                return false;
            }
            let p = &self.paths[pi];
            if p.data.probes > 0 || p.challenge.is_some_and(|c| c.send_pending) || !p.path_responses.is_empty() {
                return true;
            }
            if self.acks_due_on(now, pi) {
                return true;
            }
            if !cwnd_ok {
                return false;
            }
            if !self.paths.inbox(pi).is_empty() {
                return true;
            }
            // Stream data the batch holds answers without the shared side.
            let leased = self.paths[pi].send_lease.as_ref().is_some_and(|l| l.has_data());
            return allow_data && (leased || self.has_app_space_data());
        }
        let ack_due = self.ack_due(now, space_id, pi);
        let Some(space) = self.space_mut(space_id, pi) else { return false };
        if ack_due || space.probes > 0 {
            return true;
        }
        cwnd_ok && space.crypto.has_pending()
    }

    /// Connection-wide frames are waiting (stream data, flow control, CIDs, multipath control).
    pub(crate) fn has_app_space_data(&self) -> bool {
        // Stream data first: in a bulk transfer it answers at once, before the scans of
        // every path's CID tables.
        (self.shared.handshake_complete && self.shared.streams.has_pending_data())
            || self.shared.ping_pending
            || self.shared.connection_frames_waiting()
            || (!self.shared.mp.enabled && self.paths.iter().any(|p| !p.path_responses.is_empty()))
    }

    /// An ACK must go out now in a handshake space, or in the data space of path `pi`
    /// (RFC 9000 §13.2.1).
    pub(crate) fn ack_due(&mut self, now: Instant, space_id: SpaceId, pi: usize) -> bool {
        let max_ack_delay = self.shared.config.max_ack_delay;
        let Some(space) = self.space_mut(space_id, pi) else { return false };
        if !space.ack_pending {
            return false;
        }
        if space_id != SpaceId::Data {
            // Initial and Handshake packets are acknowledged at once, if ack-eliciting.
            return space.received.ack_deadline(std::time::Duration::ZERO).is_some();
        }
        space.received.wants_immediate_ack() || space.received.ack_deadline(max_ack_delay).is_some_and(|t| t <= now)
    }

    /// Path `i` can carry a packet now as far as its peer CID and the anti-amplification
    /// limit (RFC 9000 §8.1) go: an address being validated after a NAT rebinding may have
    /// spent its budget until the peer sends again.
    pub(crate) fn can_carry(&self, i: usize) -> bool {
        self.paths
            .view(i)
            .is_some_and(|v| v.is_open() && v.amp_room && self.shared.peer_cids.get(&v.id).is_some_and(|c| c.has_cid()))
    }

    /// The paths (indices) that should carry the ACK of path `j`'s packets (the ACK policy,
    /// draft-ietf-quic-multipath-21 §4.3: PATH_ACKs may go on any path, so a path that
    /// cannot send now does not hold them back).
    pub(crate) fn ack_carriers(&self, j: usize) -> SmallVec<[usize; 4]> {
        let mut out = SmallVec::new();
        if !self.shared.mp.enabled {
            out.push(j);
            return out;
        }
        let sendable = |i: usize| self.can_carry(i);
        // Only the policies that look at other paths pay for the scan (the default,
        // same-path, is O(1) while its own path can send).
        match self.shared.config.ack_policy {
            AckPolicy::SamePath if sendable(j) => out.push(j),
            AckPolicy::SamePath | AckPolicy::LowestRtt => {
                let fastest = self
                    .paths
                    .views()
                    .filter(|&(i, v)| v.is_active() && !v.potentially_failed && sendable(i))
                    .min_by_key(|(_, v)| v.srtt)
                    .map(|(i, _)| i);
                if let Some(f) = fastest.or(if sendable(j) { Some(j) } else { None }) {
                    out.push(f);
                }
            }
            AckPolicy::AllPaths => {
                out.extend(self.paths.views().filter(|&(i, v)| v.is_active() && sendable(i)).map(|(i, _)| i));
                if out.is_empty() && sendable(j) {
                    out.push(j);
                }
            }
        }
        out
    }

    /// Some path's ACK is due and placed on path `pi` (in a batch, among the paths its
    /// lease names).
    fn acks_due_on(&mut self, now: Instant, pi: usize) -> bool {
        let carrier = self.paths[pi].id;
        let max_ack_delay = self.shared.config.max_ack_delay;
        // In a batch: the paths its lease names (taken out for the loop, put back after).
        let leased = self.paths[pi].send_lease.as_mut().map(|l| std::mem::take(&mut l.ack_slots));
        let placed = leased.as_ref();
        let n = placed.map_or(self.paths.slot_bound(), |s| s.len());
        let mut due = false;
        for k in 0..n {
            let j = placed.map_or(k, |s| s[k].0);
            let pending_here = if j == pi {
                let s = &self.paths[pi].data;
                s.ack_pending && !s.ack_carried_on.contains(&carrier) && self.ack_due(now, SpaceId::Data, pi)
            } else {
                // Another path's ACK: its offer (without multipath no other path exists).
                self.paths.offer(j).is_some_and(|o| {
                    !o.carried_on.contains(&carrier)
                        && !self.paths[pi].has_carried(o.path_id, o.version)
                        && o.due(now, max_ack_delay)
                })
            };
            // (The policy is asked only for a pending ACK, and not at all in a batch.)
            if pending_here && (placed.is_some() || self.ack_carriers(j).contains(&pi)) {
                due = true;
                break;
            }
        }
        if let (Some(slots), Some(l)) = (leased, self.paths[pi].send_lease.as_mut()) {
            l.ack_slots = slots;
        }
        due
    }

    /// Writes one packet of `space_id` on path `pi` ending before `max_end`; None if
    /// nothing fit.
    #[allow(clippy::too_many_arguments)]
    fn write_packet(
        &mut self,
        now: Instant,
        space_id: SpaceId,
        pi: usize,
        buf: &mut Vec<u8>,
        max_end: usize,
        cwnd_ok: bool,
        allow_data: bool,
    ) -> Option<OpenPacket> {
        let ack_delay_exponent = self.shared.config.ack_delay_exponent;
        let header = self.write_header(space_id, pi, buf)?;
        let (header_start, pn_offset, pn_len) = (header.header_start, header.pn_offset, header.pn_len);
        let payload_end = max_end.saturating_sub(TAG_LEN);
        if buf.len() + 8 > payload_end {
            buf.truncate(header_start);
            return None;
        }
        let mut frames = SentFrames::default();
        let mut ack_eliciting = false;
        let probing = self.space_mut(space_id, pi)?.probes > 0;
        let send_data = cwnd_ok || probing;

        // ACKs first: they are what the peer's loss detection waits for.
        if space_id == SpaceId::Data {
            self.write_acks(now, pi, buf, payload_end, send_data, &mut frames);
        } else {
            let ack_due = self.ack_due(now, space_id, pi);
            let space = self.space_mut(space_id, pi)?;
            if space.ack_pending && (ack_due || send_data) {
                let delay = space.received.ack_delay(now).as_micros() as u64 >> ack_delay_exponent;
                let largest = space.received.ranges().max();
                let ecn = space.received.ecn_counts();
                let room = payload_end - buf.len();
                if frame::encode_ack_bounded(buf, None, space.received.ranges(), delay, ecn.as_ref(), room) {
                    if let Some(l) = largest {
                        frames.acks.push((0, l));
                    }
                    space.ack_pending = false;
                    space.received.on_ack_sent(now);
                }
            }
        }
        if send_data && space_id != SpaceId::Data {
            let space = self.space_mut(space_id, pi)?;
            // CRYPTO at this level.
            while payload_end > buf.len() + 16 {
                let room = payload_end - buf.len();
                let hdr = 1 + 8 + 4; // type, offset, length: the worst case
                let Some(r) = space.crypto.next_range(room.saturating_sub(hdr)) else { break };
                frame::encode_crypto_header(buf, r.start, (r.end - r.start) as usize);
                buf.extend_from_slice(space.crypto.data(&r));
                frames.push_crypto(r);
                ack_eliciting = true;
            }
        }
        #[cfg(test)]
        if space_id == SpaceId::Handshake
            && ack_eliciting
            && payload_end >= buf.len() + self.shared.injected_handshake.len()
        {
            buf.append(&mut self.shared.injected_handshake);
        }
        let mut probing_path = false;
        if space_id == SpaceId::Data {
            // A probe on a potentially failed path carries a PING only: data waits elsewhere.
            let data_ok = (allow_data && cwnd_ok) || (probing && !self.paths[pi].potentially_failed);
            let w = self.write_app_frames(now, pi, buf, payload_end, &mut frames, cwnd_ok, data_ok);
            ack_eliciting |= w.eliciting;
            probing_path = w.path_validation;
        }
        let space = self.space_mut(space_id, pi)?;
        if probing && !ack_eliciting && payload_end > buf.len() {
            Frame::Ping.encode(buf);
            ack_eliciting = true;
        }
        if buf.len() == pn_offset + pn_len {
            // Nothing but the header: drop the packet.
            buf.truncate(header_start);
            return None;
        }
        if ack_eliciting && space.probes > 0 {
            space.probes -= 1;
        }
        let padded = pad_for_sample(buf, &header);
        space.take_pn();
        Some(OpenPacket { header, frames, ack_eliciting, padded, probing_path })
    }

    /// Seals a packet and records it for loss detection and congestion control.
    fn seal(&mut self, now: Instant, buf: &mut Vec<u8>, p: OpenPacket, pi: usize) {
        if p.header.level == Level::OneRtt && !self.within_confidentiality_limit(now, pi) {
            buf.truncate(p.header.header_start);
            return;
        }
        let leased = p.header.level == Level::OneRtt && self.paths[pi].send_lease.is_some();
        let lease = self.paths[pi].send_lease.as_ref().filter(|_| leased);
        let sealed = match p.header.level {
            Level::Initial => self.shared.initial_keys.as_ref().map(|k| (&*k.local.packet, &*k.local.header)),
            Level::Handshake => self.shared.handshake_keys.as_ref().map(|k| (&*k.local.packet, &*k.local.header)),
            _ => match lease {
                Some(l) => Some((&*l.generation.local, &*l.header.local)),
                None => self.shared.one_rtt.as_ref().map(|k| (k.local_key(), k.local_header_key())),
            },
        };
        let Some((key, hp)) = sealed else {
            buf.truncate(p.header.header_start);
            return;
        };
        let path_id = self.paths[pi].id;
        // draft-ietf-quic-multipath-21 §4.1: once negotiated, the path ID enters the nonce.
        let multipath = match lease {
            Some(l) => l.multipath,
            None => self.shared.mp.enabled,
        };
        let nonce_path = if multipath && p.header.level == Level::OneRtt { Some(path_id as u32) } else { None };
        if seal_packet(
            buf,
            p.header.header_start,
            p.header.len_offset,
            p.header.pn_offset,
            p.header.pn_len,
            p.header.pn,
            key,
            hp,
            nonce_path,
        )
        .is_err()
        {
            buf.truncate(p.header.header_start);
            return;
        }
        let size = (buf.len() - p.header.header_start) as u32;
        let in_flight = p.ack_eliciting || p.padded;
        if leased {
            super::touch!(self, send_leased);
            if let Some(l) = self.paths[pi].send_lease.as_mut() {
                l.on_sealed(p.header.pn, &p.frames.acks);
                // What the shared side learns when the lease returns.
                l.ack_eliciting_sent |= p.ack_eliciting;
                if !p.frames.stream.is_empty() {
                    l.stream_packets.push(size);
                }
            }
        } else if p.header.level == Level::OneRtt {
            super::touch!(self, send_unleased);
            self.shared.packets_in_phase += 1;
            self.on_acks_sent(&p.frames.acks);
            let marks = &mut self.paths[pi].key_marks;
            let sealed = self.shared.one_rtt.as_mut().map(|k| k.on_packet_sealed_path(marks, p.header.pn));
            if let Some(Err(e)) = sealed {
                self.close_with_error(now, e);
            }
        }
        if p.ack_eliciting && !leased {
            // RFC 9000 §10.1: sending an ack-eliciting packet restarts the idle timer, but
            // only the first one after a receipt. (A leased batch does it when it returns.)
            if self.shared.idle_anchor_from_recv {
                self.shared.idle_anchor = now;
                self.shared.idle_anchor_from_recv = false;
            }
        }
        self.qlog_packet_sent(now, p.header.level, pi, p.header.pn, size as usize, &p.frames);
        if p.ack_eliciting && !leased {
            self.shared.last_send_anchor = now;
        }
        if !p.frames.stream.is_empty() && !leased {
            self.shared.scheduler.on_sent(path_id, u64::from(size));
        }
        let path = &mut self.paths[pi];
        if !p.frames.stream.is_empty() {
            path.data_bytes_sent += u64::from(size);
        }
        path.stats.tx_packets += 1;
        if !path.validated {
            path.amp_sent += u64::from(size);
        }
        if in_flight {
            path.bytes_in_flight += u64::from(size);
            path.cc.on_packet_sent(now, u64::from(size));
            path.pacer.on_sent(now, u64::from(size));
            if path.bytes_in_flight + u64::from(path.mtu) > path.cc.window() {
                // The window is full: the path is congestion-limited (RFC 9002 §7.8).
                path.window_full_at = Some(now);
            }
        }
        let ecn = p.header.level == Level::OneRtt && path.ecn_batch;
        if ecn {
            path.ecn.on_marked_sent();
        }
        self.paths.publish_sent(pi);
        let sent =
            SentPacket { time_sent: now, size, ack_eliciting: p.ack_eliciting, in_flight, ecn, frames: p.frames };
        if let Some(space) = self.space_mut(p.header.level.space(), pi) {
            space.loss.on_packet_sent(p.header.pn, sent);
        }
        if p.header.level == Level::Handshake && self.shared.side == Side::Client && self.shared.initial.is_some() {
            // RFC 9001 §4.9.1: a client discards Initial keys when it first sends a
            // Handshake packet.
            self.discard_space(now, SpaceId::Initial);
        }
    }

    /// RFC 9001 §6.6: a key must not seal more packets than its confidentiality limit. Key
    /// updates start long before (`should_update`, at three quarters); if the limit comes
    /// anyway (the peer never acknowledges the new phase), the connection closes with
    /// AEAD_LIMIT_REACHED while [`CLOSE_RESERVE`] packets are left for its CONNECTION_CLOSE.
    /// Returns whether packet `pi` may seal one more packet.
    fn within_confidentiality_limit(&mut self, now: Instant, pi: usize) -> bool {
        let closing = matches!(self.shared.state, State::Closing { .. });
        let allowance = match self.paths.get(pi).and_then(|p| p.send_lease.as_ref()) {
            Some(l) => l.allowance,
            None => self.shared.one_rtt.as_ref().map_or(u64::MAX, |k| k.seal_allowance()),
        };
        let needed = if closing { 1 } else { CLOSE_RESERVE + 1 };
        if allowance >= needed {
            return true;
        }
        if !closing {
            let e = crate::error::TransportError::new(
                crate::error::TransportErrorCode::AEAD_LIMIT_REACHED,
                "confidentiality limit reached",
            );
            self.close_with_error(now, e);
        }
        false
    }

    /// Starts a key update once enough packets were sent in this phase (RFC 9001 §6.1),
    /// and always well before the AEAD confidentiality limit (RFC 9001 §6.6).
    fn maybe_initiate_key_update(&mut self, now: Instant) {
        if !self.shared.handshake_confirmed {
            return;
        }
        // draft-ietf-quic-multipath-21 §4.2: three of the largest PTOs after the previous
        // update was acknowledged (RFC 9001 §6.5 asks the same of one path).
        let settle = 3 * self.max_pto();
        let settled = self.shared.phase_acked_at.is_none_or(|t| now >= t + settle) || !self.shared.mp.enabled;
        let Some(keys) = self.shared.one_rtt.as_mut() else { return };
        let interval = self.shared.config.key_update_interval.max(1);
        let due = self.shared.packets_in_phase >= interval || keys.should_update();
        if due && !keys.can_initiate() && self.shared.packets_in_phase >= self.shared.key_update_ping_at + 32 {
            self.shared.key_update_ping_at = self.shared.packets_in_phase;
            // RFC 9001 §6.1: the next update waits for an acknowledgement of a packet sent
            // in this phase. A receiver that sends only ACKs would wait forever, so elicit one.
            self.shared.ping_pending = true;
        }
        if due && settled && keys.can_initiate() && keys.initiate_update() {
            self.shared.phase_acked_at = None;
            self.shared.packets_in_phase = 0;
            self.shared.key_update_ping_at = 0;
            self.shared.stats.key_updates += 1;
            self.shared.key_discard_pending = true;
            self.qlog_key_update(now, "local_update");
            tracing::debug!(side = ?self.shared.side, "initiated key update");
        }
    }
}

/// Header protection samples 16 bytes starting 4 bytes after the packet number
/// (RFC 9001 §5.4.2): pads a short packet so the sample exists. Returns whether it padded.
fn pad_for_sample(buf: &mut Vec<u8>, h: &Header) -> bool {
    let payload_len = buf.len() - h.pn_offset - h.pn_len;
    if payload_len + h.pn_len >= 4 {
        return false;
    }
    buf.resize(buf.len() + 4 - h.pn_len - payload_len, 0);
    true
}

/// Where the header of a packet being built ended up.
struct Header {
    level: Level,
    header_start: usize,
    pn_offset: usize,
    pn_len: usize,
    pn: u64,
    len_offset: Option<usize>,
}

impl Connection {
    /// Writes the header of the next packet of `space_id` (its packet number is not taken
    /// yet: the caller takes it once the packet holds something).
    fn write_header(&mut self, space_id: SpaceId, pi: usize, buf: &mut Vec<u8>) -> Option<Header> {
        let level = match space_id {
            SpaceId::Initial => Level::Initial,
            SpaceId::Handshake => Level::Handshake,
            SpaceId::Data => Level::OneRtt,
        };
        if level == Level::OneRtt {
            let p = self.paths.get(pi)?;
            if p.in_batch && p.send_lease.is_none() {
                self.lease_keys(pi);
            }
        }
        let lease = if level == Level::OneRtt { self.paths.get(pi)?.send_lease.as_ref() } else { None };
        let dcid = match lease {
            Some(l) => l.dcid?,
            None => {
                let path_id = if level == Level::OneRtt { self.paths.get(pi)?.id } else { 0 };
                self.shared.peer_cids.get(&path_id)?.current().cid
            }
        };
        // The phase of the generation the packet will be sealed with.
        let key_phase = match lease {
            Some(l) => l.generation.phase(),
            None => self.shared.one_rtt.as_ref().is_some_and(|k| k.key_phase()),
        };
        let space = self.space_mut(space_id, pi)?;
        let pn = space.next_pn;
        let pn_len = encode_pn_len(pn, space.loss.largest_acked());
        let header_start = buf.len();
        let (pn_offset, len_offset) = match level {
            Level::OneRtt => (write_short_header(buf, &dcid, key_phase, false, pn, pn_len), None),
            _ => {
                let ty = if level == Level::Initial { LongType::Initial } else { LongType::Handshake };
                // RFC 9000 §17.2.2: a client's Initials carry its token (from a Retry or NEW_TOKEN).
                let token: &[u8] = if ty == LongType::Initial { &self.shared.tokens.initial_token } else { &[] };
                let scid = self
                    .shared
                    .local_cids
                    .get(&0)
                    .and_then(|l| l.active.values().next())
                    .map_or_else(crate::cid::ConnectionId::default, |c| c.cid);
                let o = write_long_header(buf, ty, crate::VERSION_1, &dcid, &scid, token, pn, pn_len);
                (o.pn_offset, Some(o.len_offset))
            }
        };
        Some(Header { level, header_start, pn_offset, pn_len, pn, len_offset })
    }
}
