//! Sending: datagram assembly (coalesced packets, GSO batches), frame scheduling within a
//! packet, congestion, pacing and amplification limits (RFC 9000 §12.2, §13, §14).

use crate::frame::{self, Frame};
use crate::packet::header::{write_long_header, LongType};
use crate::packet::number::encode_pn_len;
use crate::packet::protect::seal_packet;
use crate::recovery::sent::SentPacket;
use crate::sched::{Decision, SchedContext};
use crate::time::Instant;
use crate::types::{Level, Side, SpaceId};
use smallvec::SmallVec;

use super::space::SentFrames;
use super::{touch, Connection, State, Transmit};
pub(crate) use copy_feedback::CopyFeedback;

mod alone;
mod close;
mod copy_feedback;
mod frames;
mod host;
mod lease;
mod path_send;
pub(crate) use alone::AloneBatch;
pub(crate) use lease::SendLease;
pub use path_send::{PathTransmit, SendBatch};
mod off_path;
mod path_packet;
mod pmtu_probe;
mod reinject;
mod side;
mod single_space_ack;
#[cfg(test)]
mod tests_lease;

use super::path::PathState;
#[cfg(test)]
pub(crate) use host::ack_slots_carried_by;
use host::SendHost;
use path_packet::{batch_goes_on, AfterSeal, BatchWritten};
use side::BatchSide;

/// Packets of a key's confidentiality limit kept for CONNECTION_CLOSE (RFC 9001 §6.6).
pub(super) const CLOSE_RESERVE: u64 = 16;
/// AEAD tag length of every QUIC v1 cipher suite.
pub(super) const TAG_LEN: usize = 16;
/// Smallest room worth starting a packet in.
pub(crate) const MIN_PACKET_ROOM: usize = 64;
/// A datagram within this many bytes of its limit counts as full and is padded to it.
pub(super) const GSO_PAD_SLACK: usize = 64;
/// Most bytes in one GSO batch: the kernel takes a batch as one UDP send of at most 64 KiB,
/// so a path whose PMTU grew (jumbo frames) puts fewer segments in a batch.
pub(super) const MAX_BATCH_BYTES: usize = 65_000;

/// Most datagrams in a batch of `mtu`-byte segments: the configured count, within
/// [`MAX_BATCH_BYTES`].
pub(super) fn max_batch_segments(configured: usize, mtu: usize) -> usize {
    configured.min(MAX_BATCH_BYTES / mtu.max(1)).max(1)
}

/// A packet written but not yet sealed: the last one of a datagram may still be padded.
pub(super) struct OpenPacket {
    /// Where its header is.
    pub header: Header,
    /// What it carries.
    pub frames: SentFrames,
    /// It elicits an acknowledgement.
    pub ack_eliciting: bool,
    /// It was padded (counts in flight).
    pub padded: bool,
    /// Holds PATH_CHALLENGE or PATH_RESPONSE: the datagram is padded to 1200 bytes.
    pub probing_path: bool,
    /// A PMTU probe (PING and PADDING, RFC 9000 §14.4).
    pub pmtu_probe: bool,
    /// Other paths' ACKs it carries, by the owner's slot: their owners are told once the
    /// packet is sealed.
    pub carried: Carried,
}

/// The other paths' ACKs a packet carries: (owner's slot, the notice for it). A `Vec`, so
/// that the packets that carry none (all of them with ACKs on their own path) move no
/// inline space around and allocate nothing.
pub(super) type Carried = Vec<(usize, super::mail::AckCarried)>;

/// What `write_app_frames` wrote.
#[derive(Default)]
pub(super) struct AppFrames {
    /// Something ack-eliciting was written.
    pub eliciting: bool,
    /// PATH_CHALLENGE or PATH_RESPONSE was written.
    pub path_validation: bool,
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
        if self.shared.zero_rtt.flight_held {
            return None;
        }
        if let Some(t) = self.before_paths_send(now, buf) {
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
                let data = self.handshake_carries_data(pi);
                if let Some(t) = self.write_batch(now, buf, pi, data) {
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

    /// What comes before any path sends: a key update due, the old keys' discard timer, the
    /// paths' PMTU searches, datagrams pinned to paths that cannot take them; then the
    /// datagrams answering other addresses, if one waits (written into `buf`).
    fn before_paths_send(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.maybe_initiate_key_update(now);
        self.arm_key_discard(now);
        if self.shared.handshake_confirmed {
            // PMTU probes are 1-RTT packets, sent once the handshake is confirmed: each path
            // starts its search then (a path still validating probes once validated; paths
            // opened later start at their creation).
            for p in self.paths.iter_mut() {
                p.pmtud.start();
            }
        }
        self.drop_unsendable_pinned_datagrams();
        self.preferred_address_step(now);
        self.poll_off_path(now, buf)
    }

    /// The handshake's datagrams on path `pi` may carry new data too: it carries the
    /// handshake spaces and no other path could take the data, so the scheduler has no
    /// choice to make.
    ///
    /// Why: a client's datagram with its Finished also holds an Initial ACK, so it is padded
    /// to 1200 bytes (RFC 9000 §14.1). Written as path-local traffic without data, the padding
    /// took the room of the 1-RTT packet with the request and the client's connection IDs,
    /// and that packet then waited for the pacer: one packet's time at the first RTT sample's
    /// pace, RTT / 12.5 (25 ms on a 318 ms path). The server's reply waited as long, and so
    /// did every other path (the server can use one only once it holds the client's
    /// connection IDs for it), which is what a connection started on its slower path pays.
    fn handshake_carries_data(&self, pi: usize) -> bool {
        self.handshake_on(pi)
            && self.paths.slots().into_iter().all(|q| q == pi || !self.paths.view(q).is_some_and(|v| v.is_active()))
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
        // A PMTU probe is the path's own (RFC 8899: each path searches by itself).
        if self.shared.handshake_confirmed && p.wants_pmtu_probe(now).is_some() {
            return true;
        }
        if !self.paths.inbox(pi).is_empty() && self.can_send_data(now, pi) {
            return true;
        }
        // Datagrams pinned to this path are its own traffic.
        if self.shared.handshake_complete
            && self.paths[pi].phase == super::path::PathPhase::Active
            && self.shared.datagrams.has_pinned_for(self.paths[pi].id)
            && self.can_send_data(now, pi)
        {
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
        self.send_host(pi).is_some_and(|(path, mut host)| path.acks_due(&BatchSide::with_host(&mut host), now))
    }

    /// Path `pi` with the shared side as its send batch sees it ([`SendHost`]).
    fn send_host(&mut self, pi: usize) -> Option<(&mut PathState, SendHost<'_>)> {
        // NEW_TOKEN binds its token to the client's address on the primary path.
        let token_ip = if self.shared.tokens.new_token_pending {
            self.paths.get(self.primary_path()).map(|p| p.remote.ip())
        } else {
            None
        };
        let (path, board) = self.paths.path_and_board(pi)?;
        Some((path, SendHost { shared: &mut self.shared, board, slot: pi, token_ip }))
    }

    /// Writes datagrams of path index `pi` (a GSO batch when several fill up): the steps a
    /// runtime with a thread per path takes (`path_batch`, `SendBatch::build`,
    /// `end_send_batch`), here on one thread.
    fn write_batch(&mut self, now: Instant, buf: &mut Vec<u8>, pi: usize, allow_data: bool) -> Option<Transmit> {
        match self.path_batch(now, buf, pi, allow_data) {
            PathTransmit::Batch(mut b) => {
                b.build(now, buf);
                self.end_send_batch(now, b, buf)
            }
            PathTransmit::Ready(t) => Some(t),
            PathTransmit::Idle | PathTransmit::Elsewhere(_) | PathTransmit::Gone => None,
        }
    }

    /// The batch of path `pi` is over: the path returns its lease and leaves the batch; the
    /// mail the batch posted (ACKs carried for other paths) reaches them now.
    pub(crate) fn end_batch(&mut self, now: Instant, pi: usize) {
        if let Some(p) = self.paths.get_mut(pi) {
            p.in_batch = false;
            // Packets outside a batch (off-path responses, CONNECTION_CLOSE) are not marked.
            p.ecn_batch = false;
        }
        self.return_lease(now, pi);
        self.deliver_mail_or_close(now);
    }

    /// One ECN codepoint for the whole batch of path `pi`, recorded on the path; only 1-RTT
    /// datagrams are marked (once the handshake is confirmed no other packet type is left).
    fn batch_ecn(&mut self, pi: usize) -> bool {
        let ecn = self.shared.config.ecn && self.shared.handshake_confirmed && self.paths[pi].ecn.should_mark();
        self.paths[pi].ecn_batch = ecn;
        ecn
    }

    /// Path `pi` carries the handshake spaces still in use: its datagrams may coalesce
    /// Initial and Handshake packets.
    fn handshake_on(&self, pi: usize) -> bool {
        pi == self.primary_path() && (self.shared.initial.is_some() || self.shared.handshake.is_some())
    }

    /// Datagrams that may coalesce Initial and Handshake packets: the connection writes
    /// them, the path its 1-RTT packet.
    fn write_handshake_batch(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        pi: usize,
        allow_data: bool,
        ecn: bool,
    ) -> Option<Transmit> {
        let mtu = usize::from(self.paths[pi].mtu);
        let max_segments = max_batch_segments(self.shared.config.max_gso_segments, mtu);
        let mut segment_size: Option<usize> = None;
        let mut count = 0;
        loop {
            let limit = segment_size.unwrap_or(mtu);
            let (written, coalesced_long) = self.write_datagram(now, buf, limit, pi, allow_data);
            if written == 0 {
                break;
            }
            count += 1;
            let seg = *segment_size.get_or_insert(written);
            if !batch_goes_on(written, seg, coalesced_long, mtu, count, max_segments) {
                break;
            }
        }
        self.batch_transmit(buf, pi, count, if count > 1 { segment_size } else { None }, ecn)
    }

    /// The first step of a batch a path builds itself: the batch built alone, when it can
    /// be (not while chunks are collected for copies: redundant scheduling records them with
    /// the host).
    fn start_path_batch(&mut self, now: Instant, pi: usize, allow_data: bool) -> Option<AloneBatch> {
        self.paths.check_offers_fresh();
        touch!(self, send_path_batches);
        if self.shared.collect_chunks {
            return None;
        }
        self.begin_alone_batch(now, pi, allow_data)
    }

    /// The last step: unless the part built alone finished it (`b.done`), the batch goes on
    /// with the host; then the datagrams are counted and described.
    fn finish_path_batch(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        pi: usize,
        allow_data: bool,
        ecn: bool,
        mut b: BatchWritten,
    ) -> Option<Transmit> {
        if !b.done {
            let (path, mut host) = self.send_host(pi)?;
            path.build_batch(&mut BatchSide::with_host(&mut host), now, buf, allow_data, &mut b);
        }
        if let Some(e) = b.close {
            self.host().close_with_error(now, e);
        }
        self.batch_transmit(buf, pi, b.count, if b.count > 1 { b.segment_size } else { None }, ecn)
    }

    /// What a runtime needs to send the batch of path `pi` written into `buf`.
    fn batch_transmit(
        &mut self,
        buf: &[u8],
        pi: usize,
        count: usize,
        segment_size: Option<usize>,
        ecn: bool,
    ) -> Option<Transmit> {
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
            segment_size,
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
            if space_id == SpaceId::Data && self.shared.one_rtt.is_none() && !self.zero_rtt_fits(pi, room) {
                // Sealing the packet before for a 0-RTT packet that then holds nothing
                // would leave a client's Initial unpadded: the 0-RTT one waits for the next
                // datagram.
                continue;
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
        self.paths[pi].finish_datagram(now, buf, dg_start, limit, &mut p, long, pad_datagram);
        self.seal(now, buf, p, pi);
        (buf.len() - dg_start, long)
    }

    /// Congestion window and pacing allow ack-eliciting packets on path `pi` now (probes
    /// ignore both).
    fn can_send_data(&mut self, now: Instant, pi: usize) -> bool {
        let pacing = self.shared.config.pacing.then_some(self.shared.config.max_gso_segments);
        match self.paths.get_mut(pi) {
            Some(p) => p.can_send_data(now, pacing),
            // Checked out to its own thread (issue C2): its view tells whether its window
            // has room; its thread decides the rest when it comes back.
            None => self.paths.view(pi).is_some_and(|v| v.window_has_room()),
        }
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
        if space_id == SpaceId::Data && self.shared.one_rtt.is_none() {
            // Before the 1-RTT keys, the data space sends 0-RTT packets if any.
            return self.zero_rtt_wants_send(pi, cwnd_ok, allow_data);
        }
        if !self.has_keys(space_id) {
            return false;
        }
        if space_id == SpaceId::Data {
            return self.send_host(pi).is_some_and(|(path, mut host)| {
                path.wants_send_1rtt(&mut BatchSide::with_host(&mut host), now, cwnd_ok, allow_data)
            });
        }
        let ack_due = self.ack_due(space_id, pi);
        let Some(space) = self.space_mut(space_id, pi) else { return false };
        if ack_due || space.probes > 0 {
            return true;
        }
        cwnd_ok && space.crypto.has_pending()
    }

    /// Connection-wide frames are waiting (stream data, flow control, CIDs, multipath control).
    pub(crate) fn has_app_space_data(&self) -> bool {
        self.shared.has_app_space_data()
            || (!self.shared.mp.enabled && self.paths.iter().any(|p| !p.path_responses.is_empty()))
    }

    /// An ACK must go out now in a handshake space (RFC 9000 §13.2.1: Initial and Handshake
    /// packets are acknowledged at once, if ack-eliciting). The data space's is its path's
    /// question (`PathState::own_ack_due`).
    fn ack_due(&mut self, space_id: SpaceId, pi: usize) -> bool {
        let Some(space) = self.space_mut(space_id, pi) else { return false };
        space.ack_pending && space.received.ack_deadline(std::time::Duration::ZERO).is_some()
    }

    /// Path `i` can carry a packet now ([`host::can_carry`]).
    pub(crate) fn can_carry(&self, i: usize) -> bool {
        host::can_carry(&self.shared, self.paths.board(), i)
    }

    /// The paths (slots) that should carry the ACK of path `j`'s packets
    /// ([`host::ack_carriers`]).
    pub(crate) fn ack_carriers(&self, j: usize) -> SmallVec<[usize; 4]> {
        host::ack_carriers(&self.shared, self.paths.board(), j)
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
        if space_id == SpaceId::Data && self.shared.one_rtt.is_none() {
            return self.write_0rtt_packet(pi, buf, max_end);
        }
        if space_id == SpaceId::Data {
            // The path writes its 1-RTT packets itself.
            let (path, mut host) = self.send_host(pi)?;
            return path.write_1rtt_packet(
                &mut BatchSide::with_host(&mut host),
                now,
                buf,
                max_end,
                cwnd_ok,
                allow_data,
            );
        }
        let ack_delay_exponent = self.shared.config.ack_delay_exponent;
        let max_ranges = self.shared.config.max_ack_ranges.max(1);
        let header = self.write_header(space_id, pi, buf)?;
        let payload_end = payload_room(buf, &header, max_end)?;
        let mut frames = SentFrames::default();
        let mut ack_eliciting = false;
        let probing = self.space_mut(space_id, pi)?.probes > 0;
        let send_data = cwnd_ok || probing;
        // ACKs first: they are what the peer's loss detection waits for.
        let mut ack_ranges = None;
        let ack_due = self.ack_due(space_id, pi);
        let space = self.space_mut(space_id, pi)?;
        if space.ack_pending && (ack_due || send_data) {
            let delay = space.received.ack_delay(now).as_micros() as u64 >> ack_delay_exponent;
            let largest = space.received.ranges().max();
            let ecn = space.received.ecn_counts();
            let room = payload_end - buf.len();
            if let Some(n) =
                frame::encode_ack_bounded(buf, None, space.received.ranges(), delay, ecn.as_ref(), room, max_ranges)
            {
                if let Some(l) = largest {
                    frames.acks.push((0, l));
                }
                space.ack_pending = false;
                space.received.on_ack_sent(now);
                ack_ranges = Some(n);
            }
        }
        if send_data {
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
        if let (Some(n), Some(path)) = (ack_ranges, self.paths.get_mut(pi)) {
            path.stats.acks_sent += 1;
            path.stats.ack_ranges_sent += n as u64;
        }
        let space = self.space_mut(space_id, pi)?;
        end_packet(buf, header, (frames, Carried::new()), ack_eliciting, probing, payload_end, space, false)
    }

    /// Seals a packet and records it for loss detection and congestion control. A 1-RTT
    /// packet is its path's work ([`PathState::seal_1rtt`]).
    fn seal(&mut self, now: Instant, buf: &mut Vec<u8>, p: OpenPacket, pi: usize) {
        if p.header.level == Level::OneRtt {
            let Some((path, mut host)) = self.send_host(pi) else {
                buf.truncate(p.header.header_start);
                return;
            };
            let after = path.seal_1rtt(&mut BatchSide::with_host(&mut host), now, buf, p);
            self.after_seal(now, pi, after);
            return;
        }
        let sealed = match p.header.level {
            Level::Initial => self.shared.initial_keys.as_ref().map(|k| (&*k.local.packet, &*k.local.header)),
            // RFC 9000 §17.2.3: 0-RTT packets are sealed with the early keys TLS derived.
            Level::ZeroRtt => self.shared.zero_rtt.keys().map(|k| (&*k.packet, &*k.header)),
            _ => self.shared.handshake_keys.as_ref().map(|k| (&*k.local.packet, &*k.local.header)),
        };
        let Some((key, hp)) = sealed else {
            buf.truncate(p.header.header_start);
            return;
        };
        let h = &p.header;
        // qlog: the frames as they go on the wire, read before sealing encrypts them.
        let qlog_frames = self.shared.qlog_sent_frames(&buf[h.pn_offset + h.pn_len..]);
        if seal_packet(buf, h.header_start, h.len_offset, h.pn_offset, h.pn_len, h.pn, key, hp, None).is_err() {
            buf.truncate(p.header.header_start);
            return;
        }
        let size = (buf.len() - p.header.header_start) as u32;
        let in_flight = p.ack_eliciting || p.padded;
        if p.ack_eliciting {
            // RFC 9000 §10.1: sending an ack-eliciting packet restarts the idle timer, but
            // only the first one after a receipt.
            if self.shared.idle_anchor_from_recv {
                self.shared.idle_anchor = now;
                self.shared.idle_anchor_from_recv = false;
            }
        }
        let path = &mut self.paths[pi];
        self.shared.qlog_packet_sent(now, p.header.level, path, p.header.pn, size as usize, qlog_frames);
        if p.ack_eliciting {
            self.shared.last_send_anchor = now;
        }
        path.on_sent(now, size, in_flight);
        self.paths.publish_sent(pi);
        let sent = SentPacket {
            time_sent: now,
            size,
            ack_eliciting: p.ack_eliciting,
            in_flight,
            ecn: false,
            pmtu_probe: false,
            frames: p.frames,
        };
        if let Some(space) = self.space_mut(p.header.level.space(), pi) {
            space.loss.on_packet_sent(p.header.pn, sent);
        }
        if p.header.level == Level::Handshake && self.shared.side == Side::Client && self.shared.initial.is_some() {
            // RFC 9001 §4.9.1: a client discards Initial keys when it first sends a
            // Handshake packet.
            self.host().discard_space(now, SpaceId::Initial);
            self.deliver_mail_or_close(now);
        }
    }

    /// The connection's part after a path sealed a 1-RTT packet: the ACKs of a packet
    /// sealed without a lease for the key update, a close the key's limit asks for.
    fn after_seal(&mut self, now: Instant, pi: usize, after: AfterSeal) {
        if let Some(acks) = after.unleased_acks {
            self.on_acks_sent(pi, &acks);
        }
        if let Some(e) = after.close {
            self.host().close_with_error(now, e);
        }
    }

    /// Starts a key update once enough packets were sent in this phase (RFC 9001 §6.1),
    /// and always well before the AEAD confidentiality limit (RFC 9001 §6.6).
    fn maybe_initiate_key_update(&mut self, now: Instant) {
        if !self.shared.handshake_confirmed {
            return;
        }
        // RFC 10069 §2.5: three of the largest PTOs after the previous
        // update was acknowledged; RFC 9001 §6.5 asks the same of one path ("Failing to
        // allow sufficient time could lead to packets being discarded": ngtcp2 could not
        // open our packets of an update 7 ms after the previous one, when single-path
        // connections did not wait). The first update (from the handshake's phase) has no
        // previous one to wait for.
        let settle = 3 * self.max_pto();
        let first = self.shared.one_rtt.as_ref().is_some_and(|k| k.current().epoch == 0);
        let settled = first || self.shared.phase_acked_at.is_none_or(|t| now >= t + settle);
        let Some(keys) = self.shared.one_rtt.as_mut() else { return };
        let interval = self.shared.config.key_update_interval.max(1);
        let due = self.shared.packets_in_phase >= interval || keys.should_update();
        if due && !keys.can_initiate() && self.shared.packets_in_phase >= self.shared.key_update_ping_at + 32 {
            self.shared.key_update_ping_at = self.shared.packets_in_phase;
            // RFC 9001 §6.1: the next update waits for an acknowledgement of a packet sent
            // in this phase. A receiver that sends only ACKs would wait forever, so elicit one.
            self.shared.ping_pending = true;
        }
        if due && settled {
            self.initiate_key_update(now);
        }
    }

    /// Starts a key update now if the keys allow one (RFC 9001 §6.1: the previous one was
    /// acknowledged); true if it started.
    pub(crate) fn initiate_key_update(&mut self, now: Instant) -> bool {
        let Some(keys) = self.shared.one_rtt.as_mut() else { return false };
        if !(keys.can_initiate() && keys.initiate_update()) {
            return false;
        }
        self.shared.phase_acked_at = None;
        self.shared.packets_in_phase = 0;
        self.shared.key_update_ping_at = 0;
        self.shared.stats.key_updates += 1;
        self.shared.key_discard_pending = true;
        self.shared.qlog_key_update(now, "local_update");
        tracing::debug!(side = ?self.shared.side, "initiated key update");
        true
    }
}

/// Where the payload of a packet whose header was just written must end (room for the AEAD
/// tag before `max_end`); `None`, the header taken back, when not even a small frame fits.
pub(super) fn payload_room(buf: &mut Vec<u8>, header: &Header, max_end: usize) -> Option<usize> {
    let payload_end = max_end.saturating_sub(TAG_LEN);
    if buf.len() + 8 > payload_end {
        buf.truncate(header.header_start);
        return None;
    }
    Some(payload_end)
}

/// Ends a packet being written in `space`: a PING if a probe holds nothing else that elicits
/// an acknowledgement, nothing if it holds only its header, the probe counted, padding for
/// the header protection sample, its packet number taken.
#[allow(clippy::too_many_arguments)]
pub(super) fn end_packet(
    buf: &mut Vec<u8>,
    header: Header,
    (frames, carried): (SentFrames, Carried),
    mut ack_eliciting: bool,
    probing: bool,
    payload_end: usize,
    space: &mut super::space::PacketSpace,
    probing_path: bool,
) -> Option<OpenPacket> {
    if probing && !ack_eliciting && payload_end > buf.len() {
        Frame::Ping.encode(buf);
        ack_eliciting = true;
    }
    if buf.len() == header.pn_offset + header.pn_len {
        // Nothing but the header: drop the packet.
        buf.truncate(header.header_start);
        return None;
    }
    if ack_eliciting && space.probes > 0 {
        space.probes -= 1;
        if space.probes > 0 && matches!(header.level, Level::Initial | Level::Handshake) {
            // The second probe of a handshake space carries the CRYPTO data the peer has
            // not acknowledged again, rather than a bare PING: when a flight is lost, either
            // datagram getting through moves the handshake on (RFC 9002 §6.2.4 lets the
            // probes carry data; a PING only elicits an ACK, and the next PTO is twice as far).
            space.crypto.retransmit_unacked();
        }
    }
    let padded = pad_for_sample(buf, &header);
    space.take_pn();
    Some(OpenPacket { header, frames, ack_eliciting, padded, probing_path, pmtu_probe: false, carried })
}

/// Header protection samples 16 bytes starting 4 bytes after the packet number
/// (RFC 9001 §5.4.2): pads a short packet so the sample exists. Returns whether it padded.
pub(super) fn pad_for_sample(buf: &mut Vec<u8>, h: &Header) -> bool {
    let payload_len = buf.len() - h.pn_offset - h.pn_len;
    if payload_len + h.pn_len >= 4 {
        return false;
    }
    buf.resize(buf.len() + 4 - h.pn_len - payload_len, 0);
    true
}

/// Where the header of a packet being built ended up.
pub(super) struct Header {
    pub level: Level,
    pub header_start: usize,
    pub pn_offset: usize,
    pub pn_len: usize,
    pub pn: u64,
    pub len_offset: Option<usize>,
}

impl Connection {
    /// Writes the header of the next packet of `space_id` (its packet number is not taken
    /// yet: the caller takes it once the packet holds something).
    fn write_header(&mut self, space_id: SpaceId, pi: usize, buf: &mut Vec<u8>) -> Option<Header> {
        let level = match space_id {
            SpaceId::Initial => Level::Initial,
            SpaceId::Handshake => Level::Handshake,
            SpaceId::Data => {
                let (path, mut host) = self.send_host(pi)?;
                return path.write_1rtt_header(&mut BatchSide::with_host(&mut host), buf);
            }
        };
        let dcid = self.shared.peer_cids.get(&0)?.current().cid;
        let space = self.space_mut(space_id, pi)?;
        let pn = space.next_pn;
        let pn_len = encode_pn_len(pn, space.loss.largest_acked());
        let header_start = buf.len();
        let ty = if level == Level::Initial { LongType::Initial } else { LongType::Handshake };
        // RFC 9000 §17.2.2: a client's Initials carry its token (from a Retry or NEW_TOKEN).
        let token: &[u8] = if ty == LongType::Initial { &self.shared.tokens.initial_token } else { &[] };
        let scid = self.shared.long_header_scid();
        let o = write_long_header(buf, ty, self.shared.version.current, &dcid, &scid, token, pn, pn_len);
        let (pn_offset, len_offset) = (o.pn_offset, Some(o.len_offset));
        Some(Header { level, header_start, pn_offset, pn_len, pn, len_offset })
    }
}
