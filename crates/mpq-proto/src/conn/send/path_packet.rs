//! A path builds its 1-RTT packets itself (issue C1's send seam): header, frames, sealing
//! under the batch's lease and recording in its own ledger are `PathState` methods, given a
//! [`SendHost`] for what is connection-wide. [`PathState::build_batch`] writes a whole GSO
//! batch of one path this way; the connection only takes over for datagrams that coalesce
//! Initial or Handshake packets (the handshake path) and for the closing state.

use smallvec::SmallVec;

use crate::error::TransportError;
use crate::packet::header::write_short_header;
use crate::packet::number::encode_pn_len;
use crate::packet::protect::seal_packet;
use crate::recovery::sent::SentPacket;
use crate::time::Instant;
use crate::types::Level;

use super::super::path::PathState;
use super::super::qlog::packet_sent_events;
use super::super::space::SentFrames;
use super::super::{touch, State};
use super::host::ack_carriers;
use super::side::BatchSide;
use super::{
    end_packet, payload_room, Carried, Header, OpenPacket, CLOSE_RESERVE, GSO_PAD_SLACK, MIN_PACKET_ROOM, TAG_LEN,
};

/// What the connection does after a 1-RTT packet was sealed (or not).
#[derive(Debug, Default)]
pub(crate) struct AfterSeal {
    /// The packet was sealed without a lease: its (PATH_)ACKs, for the key update's
    /// bookkeeping (`Connection::on_acks_sent`).
    pub unleased_acks: Option<SmallVec<[(u64, u64); 1]>>,
    /// The connection must close (the confidentiality limit, RFC 9001 §6.6).
    pub close: Option<TransportError>,
}

/// What a batch written by a path produced (so far: a batch started alone may go on with
/// the host).
#[derive(Debug, Default)]
pub(crate) struct BatchWritten {
    /// Datagrams written.
    pub count: usize,
    /// The size of each but perhaps the last (GSO), once one was written.
    pub segment_size: Option<usize>,
    /// The connection must close (the confidentiality limit).
    pub close: Option<TransportError>,
    /// The batch is over (else it stopped to go on with the host).
    pub done: bool,
}

impl PathState {
    /// Writes the datagrams of a batch of this path, all 1-RTT (a GSO batch when several
    /// fill up), into `buf`, with what `side` has of the connection (the host, or nothing
    /// for a batch built alone). Goes on from `out` (a batch started alone and continued
    /// with the host); stops with `out.done` unset when built alone and the shared side is
    /// needed.
    pub(super) fn build_batch(
        &mut self,
        side: &mut BatchSide<'_, '_>,
        now: Instant,
        buf: &mut Vec<u8>,
        allow_data: bool,
        out: &mut BatchWritten,
    ) {
        let mtu = usize::from(self.mtu);
        let max_segments = super::max_batch_segments(side.cfg().max_gso_segments, mtu);
        // A PMTU probe is larger than the batch's segments could be: it goes alone, as a
        // batch of one datagram.
        if out.count == 0 && self.write_pmtu_probe(side, now, buf, out) {
            return;
        }
        // Offset of `buf` up to which its lines were asked for.
        let mut prefetched = buf.len();
        loop {
            let limit = out.segment_size.unwrap_or(mtu);
            // This datagram's place and the next's, asked for while this one is built and
            // sealed: the batch buffer was last written a window of data ago, and the stream
            // data's stores into it waited for their lines (`prefetch.rs`).
            crate::prefetch::spare_lines_up_to(buf, &mut prefetched, buf.len() + 2 * limit);
            if side.host_ref().is_none() && allow_data && self.lease_runs_short(limit) {
                // Alone, the next packet would go out short of data the host may have:
                // the host builds it.
                side.needs_host();
                return;
            }
            let mut after = AfterSeal::default();
            let written = self.write_1rtt_datagram(side, now, buf, limit, allow_data, &mut after);
            debug_assert!(after.unleased_acks.is_none(), "a batch's packets are sealed under its lease");
            if written > 0 {
                out.count += 1;
            }
            if after.close.is_some() {
                out.close = after.close;
                out.done = true;
                return;
            }
            if written == 0 {
                out.done = !side.alone.needs_host;
                return;
            }
            let seg = *out.segment_size.get_or_insert(written);
            // Batch only full-sized datagrams; a shorter one ends the batch.
            if !batch_goes_on(written, seg, false, mtu, out.count, max_segments) {
                out.done = true;
                return;
            }
            if side.alone.needs_host {
                return;
            }
        }
    }

    /// One datagram of at most `limit` bytes holding one 1-RTT packet of this path; its
    /// size (0: nothing to send).
    fn write_1rtt_datagram(
        &mut self,
        side: &mut BatchSide<'_, '_>,
        now: Instant,
        buf: &mut Vec<u8>,
        limit: usize,
        allow_data: bool,
        after: &mut AfterSeal,
    ) -> usize {
        let dg_start = buf.len();
        let limit = (limit as u64).min(self.amplification_budget()) as usize;
        if limit < MIN_PACKET_ROOM {
            return 0;
        }
        let cwnd_ok = self.can_send_data(now, side.cfg().pacing.then_some(side.cfg().max_gso_segments));
        if !self.wants_send_1rtt(side, now, cwnd_ok, allow_data) {
            return 0;
        }
        let Some(mut p) = self.write_1rtt_packet(side, now, buf, dg_start + limit, cwnd_ok, allow_data) else {
            return 0;
        };
        // RFC 9000 §8.2.1: path validation also checks that 1200 bytes get through.
        let pad = p.probing_path;
        self.finish_datagram(now, buf, dg_start, limit, &mut p, false, pad);
        *after = self.seal_1rtt(side, now, buf, p);
        buf.len() - dg_start
    }

    /// The last packet of a datagram is padded: to 1200 bytes when the datagram must be
    /// (`pad`: Initials, path validation), and a short-header datagram that ran out of room,
    /// not data, to exactly `limit`, so that the next one can join it in a GSO batch of
    /// equal segments.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_datagram(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        dg_start: usize,
        limit: usize,
        p: &mut OpenPacket,
        long: bool,
        pad: bool,
    ) {
        // Not a packet that elicits no acknowledgement (ACKs alone): padding would put it in
        // flight (RFC 9002 §2: ack-eliciting or padded), and ACKs go out whatever the
        // congestion window says, so large ACK-only datagrams (many ranges, several paths'
        // ACKs) would push the flight past the window.
        let room_limited = !long && p.ack_eliciting && buf.len() + TAG_LEN + GSO_PAD_SLACK >= dg_start + limit;
        let target = if pad {
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
            if let Some(c) = self.challenge.as_mut().filter(|c| c.sent_at == Some(now)) {
                c.full_size = size >= crate::MIN_INITIAL_SIZE;
            }
        }
    }

    /// Whether the path has anything to send in its data space now.
    pub(super) fn wants_send_1rtt(
        &mut self,
        side: &mut BatchSide<'_, '_>,
        now: Instant,
        cwnd_ok: bool,
        allow_data: bool,
    ) -> bool {
        // (Alone, the lease holds the keys.)
        if side.host_ref().is_some_and(|h| h.shared.one_rtt.is_none()) || !self.is_open() {
            return false;
        }
        if self.data.probes > 0 {
            return true;
        }
        // Path validation is congestion controlled like any ack-eliciting data (RFC 9002
        // §7; RFC 9000 §8.2.2 lets congestion control delay a PATH_RESPONSE): a peer that
        // keeps challenging a path it never acknowledges cannot push its flight past the
        // window.
        if cwnd_ok && (self.challenge.is_some_and(|c| c.send_pending) || !self.path_responses.is_empty()) {
            return true;
        }
        if self.acks_due(side, now) {
            return true;
        }
        if !cwnd_ok {
            return false;
        }
        // (Alone, the inbox was empty when the batch started.)
        if side.host_ref().is_some_and(|h| !h.board.inbox(h.slot).is_empty()) {
            return true;
        }
        // Datagrams pinned to this path (never alone: a batch is not built alone while
        // datagrams wait).
        if self.phase == super::super::path::PathPhase::Active
            && side
                .host_ref()
                .is_some_and(|h| h.shared.handshake_complete && h.shared.datagrams.has_pinned_for(self.id))
        {
            return true;
        }
        // Stream data and control frames the batch holds answer without the shared side.
        let leased = self.send_lease.as_ref().is_some_and(|l| l.has_data() || l.has_control());
        if !allow_data || leased {
            return allow_data;
        }
        match side.host_ref() {
            Some(h) => h.has_app_space_data(),
            None => {
                // More may wait in the stream table: the host knows.
                self.alone_needs_host(side);
                false
            }
        }
    }

    /// The batch's leased stream data cannot fill a packet of `limit` bytes, and the shared
    /// side may hold more.
    fn lease_runs_short(&self, limit: usize) -> bool {
        // (A lease left with no bytes, or only a FIN, goes on: spending it asks the host.)
        self.send_lease.as_ref().is_some_and(|l| {
            !l.all_leased && l.data.as_ref().is_some_and(|d| (1..limit as u64).contains(&d.remaining()))
        })
    }

    /// A batch built alone has spent what it leased: unless that was all there was to send
    /// when it began, the host may have more, and the batch goes on with it.
    pub(super) fn alone_needs_host(&self, side: &mut BatchSide<'_, '_>) {
        if !self.send_lease.as_ref().is_some_and(|l| l.all_leased) {
            side.needs_host();
        }
    }

    /// Some path's ACK is due and placed on this path (in a batch, among the paths its lease
    /// names): its own, from its state; another's, from its offer.
    pub(super) fn acks_due(&mut self, side: &BatchSide<'_, '_>, now: Instant) -> bool {
        let carrier = self.id;
        let max_ack_delay = side.cfg().max_ack_delay;
        let host = side.host_ref();
        let placed = self.send_lease.as_ref().map(|l| &l.ack_slots);
        // (Alone, the lease names the paths: only this one.)
        let n = placed.map_or_else(|| host.map_or(0, |h| h.board.slot_bound()), |s| s.len());
        for k in 0..n {
            let j = placed.map_or(k, |s| s[k].0);
            let pending_here = if j == side.slot() {
                !self.data.ack_carried_on.contains(&carrier) && self.own_ack_due(now, max_ack_delay)
            } else {
                host.and_then(|h| h.board.offer(j)).is_some_and(|o| !self.carried_offer(o) && o.due(now, max_ack_delay))
            };
            // (The policy is asked only for a pending ACK, and not at all in a batch.)
            if pending_here
                && (placed.is_some() || host.is_some_and(|h| ack_carriers(h.shared, h.board, j).contains(&h.slot)))
            {
                return true;
            }
        }
        false
    }

    /// The path's own ACK is pending and must go out now (RFC 9000 §13.2.1): at once after
    /// out-of-order or enough ack-eliciting packets, else at our max_ack_delay.
    pub(super) fn own_ack_due(&self, now: Instant, max_ack_delay: std::time::Duration) -> bool {
        let s = &self.data;
        s.ack_pending
            && (s.received.wants_immediate_ack() || s.received.ack_deadline(max_ack_delay).is_some_and(|t| t <= now))
    }

    /// Writes the header of this path's next 1-RTT packet (its packet number is not taken
    /// yet: the caller takes it once the packet holds something). A batch leases the keys
    /// at its first packet.
    pub(super) fn write_1rtt_header(&mut self, side: &mut BatchSide<'_, '_>, buf: &mut Vec<u8>) -> Option<Header> {
        if self.in_batch && self.send_lease.is_none() {
            self.send_lease = side.host()?.lease_keys(self);
        }
        let lease = self.send_lease.as_ref();
        let host = side.host_ref();
        let dcid = match lease {
            Some(l) => l.dcid?,
            None => host?.shared.peer_cids.get(&self.id)?.current().cid,
        };
        // The phase of the generation the packet will be sealed with.
        let key_phase = match lease {
            Some(l) => l.generation.phase(),
            None => host?.shared.one_rtt.as_ref().is_some_and(|k| k.key_phase()),
        };
        let pn = self.data.peek_pn();
        let pn_len = encode_pn_len(pn, self.data.loss.largest_acked());
        let header_start = buf.len();
        let pn_offset = write_short_header(buf, &dcid, key_phase, false, pn, pn_len);
        self.grease_quic_bit(&mut buf[header_start], pn); // RFC 9287
        Some(Header { level: Level::OneRtt, header_start, pn_offset, pn_len, pn, len_offset: None })
    }

    /// Writes this path's next 1-RTT packet ending before `max_end`; `None` if nothing fit.
    pub(super) fn write_1rtt_packet(
        &mut self,
        side: &mut BatchSide<'_, '_>,
        now: Instant,
        buf: &mut Vec<u8>,
        max_end: usize,
        cwnd_ok: bool,
        allow_data: bool,
    ) -> Option<OpenPacket> {
        let header = self.write_1rtt_header(side, buf)?;
        let payload_end = payload_room(buf, &header, max_end)?;
        let mut frames = SentFrames::default();
        let mut carried = Carried::new();
        let probing = self.data.probes > 0;
        let send_data = cwnd_ok || probing;
        // ACKs first: they are what the peer's loss detection waits for.
        self.write_acks(side, now, buf, payload_end, send_data, &mut frames, &mut carried);
        // A probe on a potentially failed path carries a PING only: data waits elsewhere.
        let data_ok = (allow_data && cwnd_ok) || (probing && !self.potentially_failed);
        let w = self.write_app_frames(side, now, buf, payload_end, &mut frames, cwnd_ok, data_ok);
        end_packet(buf, header, (frames, carried), w.eliciting, probing, payload_end, &mut self.data, w.path_validation)
    }

    /// RFC 9001 §6.6: a key must not seal more packets than its confidentiality limit. Key
    /// updates start long before (`should_update`, at three quarters); if the limit comes
    /// anyway (the peer never acknowledges the new phase), the connection closes with
    /// AEAD_LIMIT_REACHED while [`CLOSE_RESERVE`] packets are left for its CONNECTION_CLOSE.
    /// `Ok(false)`: no more packets (in the closing state); `Err`: close now.
    fn within_confidentiality_limit(&self, side: &BatchSide<'_, '_>) -> Result<bool, TransportError> {
        // (Alone: never in the closing state, and always with a lease.)
        let host = side.host_ref();
        let closing = host.is_some_and(|h| matches!(h.shared.state, State::Closing { .. }));
        let allowance = match self.send_lease.as_ref() {
            Some(l) => l.allowance,
            None => host.and_then(|h| h.shared.one_rtt.as_ref()).map_or(u64::MAX, |k| k.seal_allowance()),
        };
        let needed = if closing { 1 } else { CLOSE_RESERVE + 1 };
        if allowance >= needed {
            return Ok(true);
        }
        if closing {
            return Ok(false);
        }
        Err(TransportError::new(crate::error::TransportErrorCode::AEAD_LIMIT_REACHED, "confidentiality limit reached"))
    }

    /// Seals a 1-RTT packet of this path (with the batch's lease, or the connection's key
    /// state outside a batch) and records it in the path's ledger, congestion control and
    /// counters.
    pub(super) fn seal_1rtt(
        &mut self,
        side: &mut BatchSide<'_, '_>,
        now: Instant,
        buf: &mut Vec<u8>,
        p: OpenPacket,
    ) -> AfterSeal {
        let mut after = AfterSeal::default();
        match self.within_confidentiality_limit(side) {
            Ok(true) => {}
            Ok(false) => {
                buf.truncate(p.header.header_start);
                return after;
            }
            Err(e) => {
                buf.truncate(p.header.header_start);
                after.close = Some(e);
                return after;
            }
        }
        // qlog: the frames as they go on the wire, read before sealing encrypts them.
        let payload = &buf[p.header.pn_offset + p.header.pn_len..];
        let qlog_frames = match side.host_ref() {
            Some(h) => h.shared.qlog_sent_frames(payload),
            None => side.cfg().qlog.then(|| crate::qlog::frames_json(payload, side.cfg().ack_delay_exponent)),
        };
        let lease = self.send_lease.as_ref();
        let leased = lease.is_some();
        let host = side.host_ref();
        let sealed = match lease {
            Some(l) => Some((&*l.generation.local, &*l.header.local)),
            None => host.and_then(|h| h.shared.one_rtt.as_ref()).map(|k| (k.local_key(), k.local_header_key())),
        };
        let Some((key, hp)) = sealed else {
            buf.truncate(p.header.header_start);
            return after;
        };
        // RFC 10069 §2.4: once negotiated, the path ID enters the nonce.
        let multipath = lease.map_or_else(|| host.is_some_and(|h| h.shared.mp.enabled), |l| l.multipath);
        // (One packet number space for all paths: numbers are unique over the connection
        // and the plain nonce serves.)
        let nonce_path = (multipath && self.data.single.is_none()).then_some(self.id as u32);
        let h = &p.header;
        if seal_packet(buf, h.header_start, h.len_offset, h.pn_offset, h.pn_len, h.pn, key, hp, nonce_path).is_err() {
            buf.truncate(p.header.header_start);
            return after;
        }
        let size = (buf.len() - p.header.header_start) as u32;
        let in_flight = p.ack_eliciting || p.padded;
        // The other paths' ACKs it carries went out: the carrier remembers which version it
        // carried, their owners learn it by mail.
        // (Alone, they are posted when the batch returns: `SendHost::take_back`.)
        for (slot, notice) in &p.carried {
            match side.host() {
                Some(host) => {
                    if let Some(owner) = host.board.get(*slot).map(|v| v.id) {
                        self.note_carried(owner, notice.version);
                        host.board.post(*slot).push_ack_carried(notice.clone());
                    }
                }
                None => side.alone.carried.push((*slot, notice.clone())),
            }
        }
        if let Some(l) = self.send_lease.as_mut() {
            match side.host() {
                #[cfg_attr(not(debug_assertions), allow(unused_variables))]
                Some(host) => {
                    touch!(host, send_leased);
                }
                None => side.alone.leased_packets += 1,
            }
            l.on_sealed(p.header.pn, &p.frames.acks);
            // What the shared side learns when the lease returns.
            l.ack_eliciting_sent |= p.ack_eliciting;
            if !p.frames.stream.is_empty() {
                l.stream_packets.push(size);
            }
        } else {
            let Some(host) = side.host() else {
                // Alone, every packet is sealed under the batch's lease.
                debug_assert!(false, "a batch built alone sealed a packet without its lease");
                buf.truncate(p.header.header_start);
                return after;
            };
            touch!(host, send_unleased);
            let shared = &mut *host.shared;
            shared.packets_in_phase += 1;
            after.unleased_acks = Some(p.frames.acks.clone());
            if let Some(Err(e)) =
                shared.one_rtt.as_mut().map(|k| k.on_packet_sealed_path(&mut self.key_marks, p.header.pn))
            {
                after.close = Some(e);
            }
            if p.ack_eliciting {
                // RFC 9000 §10.1: sending an ack-eliciting packet restarts the idle timer,
                // but only the first one after a receipt. (A leased batch does it when it
                // returns.)
                if shared.idle_anchor_from_recv {
                    shared.idle_anchor = now;
                    shared.idle_anchor_from_recv = false;
                }
            }
        }
        let record_qlog = side.cfg().qlog;
        match side.host() {
            Some(host) => {
                host.shared.qlog_packet_sent(now, p.header.level, self, p.header.pn, size as usize, qlog_frames)
            }
            None if record_qlog => {
                // Alone, the path records its own events; the sink gets them when the batch
                // returns.
                let (level, pn) = (p.header.level, p.header.pn);
                for (name, data) in packet_sent_events(level, self, pn, size as usize, qlog_frames) {
                    side.alone.qlog.push((now, name, data));
                }
            }
            None => {}
        }
        self.record_sent(side, now, p, size, in_flight, leased);
        after
    }

    /// A sealed packet of `size` bytes enters the path's ledger, flight, window, pacer and
    /// counters.
    fn record_sent(
        &mut self,
        side: &mut BatchSide<'_, '_>,
        now: Instant,
        p: OpenPacket,
        size: u32,
        in_flight: bool,
        leased: bool,
    ) {
        // (A leased batch settles the anchors and the scheduler when it returns.)
        if let Some(host) = side.host().filter(|_| !leased) {
            if p.ack_eliciting {
                host.shared.last_send_anchor = now;
            }
            if !p.frames.stream.is_empty() {
                host.shared.scheduler.on_sent(self.id, u64::from(size));
            }
        }
        if !p.frames.stream.is_empty() {
            self.data_bytes_sent += u64::from(size);
        }
        self.on_sent(now, size, in_flight);
        let ecn = self.ecn_batch;
        if ecn {
            self.ecn.on_marked_sent();
        }
        match side.host() {
            Some(host) => host.board.publish_sent(host.slot, self),
            None => side.alone.sent = true,
        }
        let pmtu_probe = p.pmtu_probe;
        if pmtu_probe {
            self.pmtud.on_probe_sent(p.header.pn, u16::try_from(size).unwrap_or(u16::MAX));
        }
        // The first data after a flight of PINGs alone restarts the PTO backoff. Those PINGs
        // (liveness or PMTU probes) say nothing of whether the path failed (`on_pto`), but
        // their PTOs backed its timer off: a request sent on a path that had just died took
        // two backed-off PTOs to be resent elsewhere instead of one.
        if self.pto_count > 0
            && p.frames.carries_data()
            && !self.data.loss.iter_outstanding().any(|(_, q)| q.in_flight && q.frames.carries_data())
        {
            self.pto_count = 0;
        }
        let sent = SentPacket {
            time_sent: now,
            size,
            ack_eliciting: p.ack_eliciting,
            in_flight,
            ecn,
            pmtu_probe,
            frames: p.frames,
        };
        self.data.loss.on_packet_sent(p.header.pn, sent);
    }

    /// Counters, amplification, flight, window and pacer after a datagram of `size` bytes
    /// left (any packet number space).
    pub(super) fn on_sent(&mut self, now: Instant, size: u32, in_flight: bool) {
        self.stats.tx_packets += 1;
        if !self.validated {
            self.amp_sent += u64::from(size);
        }
        if in_flight {
            self.delivery.on_send(now, self.bytes_in_flight);
            self.bytes_in_flight += u64::from(size);
            self.cc.on_packet_sent(now, u64::from(size));
            self.pacer.on_sent(now, u64::from(size));
            if self.bytes_in_flight + u64::from(self.mtu) > self.cc.window() {
                // The window is full: the path is congestion-limited (RFC 9002 §7.8).
                self.window_full_at = Some(now);
            }
        }
    }
}

/// A GSO batch takes another datagram after one of `written` bytes: only full-sized
/// short-header datagrams of one size, up to the segment limit.
pub(super) fn batch_goes_on(written: usize, seg: usize, long: bool, mtu: usize, count: usize, max: usize) -> bool {
    !(written < seg || long || written < mtu || count >= max)
}
