//! Sending: datagram assembly (coalesced packets, GSO batches), frame scheduling within a
//! packet, congestion, pacing and amplification limits (RFC 9000 §12.2, §13, §14).

use crate::frame::{self, Frame};
use crate::packet::header::{write_long_header, write_short_header, LongType};
use crate::packet::number::encode_pn_len;
use crate::packet::protect::seal_packet;
use crate::recovery::sent::SentPacket;
use crate::time::Instant;
use crate::types::{Level, Side, SpaceId};

use super::space::{Control, SentFrames};
use super::{CloseFrame, Connection, State, Transmit};

/// AEAD tag length of every QUIC v1 cipher suite.
const TAG_LEN: usize = 16;
/// Smallest room worth starting a packet in.
const MIN_PACKET_ROOM: usize = 64;
/// A datagram within this many bytes of its limit counts as full and is padded to it.
const GSO_PAD_SLACK: usize = 64;

/// A packet written but not yet sealed: the last one of a datagram may still be padded.
struct OpenPacket {
    level: Level,
    header_start: usize,
    pn_offset: usize,
    pn_len: usize,
    pn: u64,
    len_offset: Option<usize>,
    frames: SentFrames,
    ack_eliciting: bool,
    padded: bool,
}

impl Connection {
    /// Writes the next datagram, or a GSO batch of equal-sized datagrams, into `buf`
    /// (cleared first). Returns `None` when there is nothing to send now.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        buf.clear();
        match self.state {
            State::Drained | State::Draining { .. } => return None,
            State::Closing { .. } => return self.poll_close(now, buf),
            _ => {}
        }
        self.maybe_initiate_key_update(now);
        self.arm_key_discard(now);
        let max_segments = self.config.max_gso_segments.max(1);
        let mtu = usize::from(self.paths[0].mtu);
        let mut segment_size: Option<usize> = None;
        let mut count = 0;
        loop {
            let limit = segment_size.unwrap_or(mtu);
            let (written, coalesced_long) = self.write_datagram(now, buf, limit);
            if written == 0 {
                break;
            }
            count += 1;
            self.stats.tx_datagrams += 1;
            let seg = *segment_size.get_or_insert(written);
            // Batch only full-sized short-header datagrams; a shorter one ends the batch.
            if written < seg || coalesced_long || written < mtu || count >= max_segments {
                break;
            }
        }
        if buf.is_empty() {
            return None;
        }
        let path = &mut self.paths[0];
        path.stats.tx_bytes += buf.len() as u64;
        Some(Transmit {
            destination: path.remote,
            source: None,
            path_id: path.id,
            size: buf.len(),
            segment_size: if count > 1 { segment_size } else { None },
            ecn: None,
        })
    }

    /// Writes one datagram of at most `limit` bytes; returns its size and whether it holds
    /// long-header packets (which never go in GSO batches).
    fn write_datagram(&mut self, now: Instant, buf: &mut Vec<u8>, limit: usize) -> (usize, bool) {
        let dg_start = buf.len();
        let budget = self.paths[0].amplification_budget();
        let limit = (limit as u64).min(budget) as usize;
        if limit < MIN_PACKET_ROOM {
            return (0, false);
        }
        let can_send_data = self.can_send_data(now);
        let mut open: Option<OpenPacket> = None;
        let mut pad_datagram = false;
        let mut long = false;
        for space_id in [SpaceId::Initial, SpaceId::Handshake, SpaceId::Data] {
            if !self.space_wants_send(now, space_id, can_send_data) {
                continue;
            }
            let room = (dg_start + limit).saturating_sub(buf.len());
            if room < MIN_PACKET_ROOM {
                break;
            }
            if let Some(p) = open.take() {
                self.seal(now, buf, p);
            }
            if let Some(p) = self.write_packet(now, space_id, buf, dg_start + limit, can_send_data) {
                if p.level == Level::Initial && (self.side == Side::Client || p.ack_eliciting) {
                    // RFC 9000 §14.1: datagrams with (ack-eliciting) Initials are padded.
                    pad_datagram = true;
                }
                long |= p.level != Level::OneRtt;
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
        self.seal(now, buf, p);
        (buf.len() - dg_start, long)
    }

    /// Congestion window and pacing allow ack-eliciting packets now (probes ignore both).
    fn can_send_data(&mut self, now: Instant) -> bool {
        let path = &mut self.paths[0];
        let mtu = u64::from(path.mtu);
        if path.bytes_in_flight + mtu > path.cc.window() {
            return false;
        }
        if self.config.pacing {
            let srtt = path.rtt.smoothed();
            if let Some(at) = path.pacer.delay(now, mtu, mtu, path.cc.window(), srtt) {
                if at > now {
                    self.pacing_until = Some(at);
                    return false;
                }
            }
        }
        self.pacing_until = None;
        true
    }

    fn has_keys(&self, space_id: SpaceId) -> bool {
        match space_id {
            SpaceId::Initial => self.initial_keys.is_some() && self.initial.is_some(),
            SpaceId::Handshake => self.handshake_keys.is_some() && self.handshake.is_some(),
            SpaceId::Data => self.one_rtt.is_some(),
        }
    }

    /// Whether the space has anything to send now.
    fn space_wants_send(&mut self, now: Instant, space_id: SpaceId, can_send_data: bool) -> bool {
        if !self.has_keys(space_id) {
            return false;
        }
        let ack_due = self.ack_due(now, space_id);
        let Some(space) = self.space_mut(space_id) else { return false };
        if ack_due || space.probes > 0 {
            return true;
        }
        if !can_send_data {
            return false;
        }
        if space.crypto.has_pending() {
            return true;
        }
        space_id == SpaceId::Data && self.has_app_space_data()
    }

    pub(crate) fn has_app_space_data(&self) -> bool {
        #[cfg(test)]
        if !self.injected.is_empty() {
            return true;
        }
        self.handshake_done_pending
            || self.ping_pending
            || !self.paths[0].path_responses.is_empty()
            || !self.local_cids.to_advertise.is_empty()
            || !self.peer_cids.to_retire.is_empty()
            || (self.handshake_complete && self.streams.has_pending_data())
    }

    /// An ACK must go out now in this space (RFC 9000 §13.2.1).
    pub(crate) fn ack_due(&mut self, now: Instant, space_id: SpaceId) -> bool {
        let max_ack_delay = self.config.max_ack_delay;
        let Some(space) = self.space_mut(space_id) else { return false };
        if !space.ack_pending {
            return false;
        }
        if space_id != SpaceId::Data {
            // Initial and Handshake packets are acknowledged at once, if ack-eliciting.
            return space.received.ack_deadline(std::time::Duration::ZERO).is_some();
        }
        space.received.wants_immediate_ack() || space.received.ack_deadline(max_ack_delay).is_some_and(|t| t <= now)
    }

    /// Writes one packet of `space_id` ending before `max_end`; None if nothing fit.
    fn write_packet(
        &mut self,
        now: Instant,
        space_id: SpaceId,
        buf: &mut Vec<u8>,
        max_end: usize,
        can_send_data: bool,
    ) -> Option<OpenPacket> {
        let ack_due = self.ack_due(now, space_id);
        let ack_delay_exponent = self.config.ack_delay_exponent;
        let Header { level, header_start, pn_offset, pn_len, pn, len_offset } = self.write_header(space_id, buf)?;
        let space = self.space_mut(space_id)?;
        let payload_end = max_end.saturating_sub(TAG_LEN);
        if buf.len() + 8 > payload_end {
            buf.truncate(header_start);
            return None;
        }
        let mut frames = SentFrames::default();
        let mut ack_eliciting = false;
        let probing = space.probes > 0;
        let send_data = can_send_data || probing;

        // ACK first: it is what the peer's loss detection waits for.
        if space.ack_pending && (ack_due || send_data) {
            let delay = space.received.ack_delay(now).as_micros() as u64 >> ack_delay_exponent;
            let largest = space.received.ranges().max();
            let ecn = space.received.ecn_counts();
            let room = payload_end - buf.len();
            if frame::encode_ack_bounded(buf, None, space.received.ranges(), delay, ecn.as_ref(), room) {
                frames.ack_largest = largest;
                space.ack_pending = false;
                space.received.on_ack_sent(now);
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
                frames.crypto.push(r);
                ack_eliciting = true;
            }
        }
        #[cfg(test)]
        if space_id == SpaceId::Handshake && ack_eliciting && payload_end >= buf.len() + self.injected_handshake.len() {
            buf.append(&mut self.injected_handshake);
        }
        if space_id == SpaceId::Data && send_data {
            ack_eliciting |= self.write_app_frames(now, buf, payload_end, &mut frames);
        }
        let space = self.space_mut(space_id)?;
        if probing && !ack_eliciting && payload_end > buf.len() {
            Frame::Ping.encode(buf);
            ack_eliciting = true;
        }
        if buf.len() == header_start + (pn_offset - header_start) + pn_len {
            // Nothing but the header: drop the packet.
            buf.truncate(header_start);
            return None;
        }
        if ack_eliciting && space.probes > 0 {
            space.probes -= 1;
        }
        // Header protection samples 16 bytes starting 4 bytes after the packet number.
        let payload_len = buf.len() - pn_offset - pn_len;
        let mut padded = false;
        if payload_len + pn_len < 4 {
            buf.resize(buf.len() + 4 - pn_len - payload_len, 0);
            padded = true;
        }
        space.take_pn();
        Some(OpenPacket { level, header_start, pn_offset, pn_len, pn, len_offset, frames, ack_eliciting, padded })
    }

    /// Application-space frames in priority order; returns whether any was ack-eliciting.
    fn write_app_frames(&mut self, now: Instant, buf: &mut Vec<u8>, end: usize, frames: &mut SentFrames) -> bool {
        let mut eliciting = false;
        let room = |buf: &Vec<u8>| end.saturating_sub(buf.len());
        while let Some(data) = self.paths[0].path_responses.first().copied() {
            if room(buf) < 9 {
                break;
            }
            Frame::PathResponse(data).encode(buf);
            self.paths[0].path_responses.remove(0);
            eliciting = true;
        }
        #[cfg(test)]
        if !self.injected.is_empty() && room(buf) >= self.injected.len() {
            buf.append(&mut self.injected);
            eliciting = true;
        }
        if self.ping_pending && room(buf) >= 1 {
            Frame::Ping.encode(buf);
            self.ping_pending = false;
            eliciting = true;
        }
        if self.handshake_done_pending && room(buf) >= 1 {
            Frame::HandshakeDone.encode(buf);
            frames.control.push(Control::HandshakeDone);
            self.handshake_done_pending = false;
            eliciting = true;
        }
        while let Some(&seq) = self.local_cids.to_advertise.first() {
            let Some(c) = self.local_cids.active.get(&seq).copied() else {
                self.local_cids.to_advertise.remove(0);
                continue;
            };
            let f = Frame::NewConnectionId(frame::NewConnectionId {
                path_id: None,
                seq,
                retire_prior_to: 0,
                cid: c.cid,
                reset_token: c.reset_token,
            });
            if f.encoded_len() > room(buf) {
                break;
            }
            f.encode(buf);
            self.local_cids.to_advertise.remove(0);
            frames.control.push(Control::NewCid(seq));
            eliciting = true;
        }
        while let Some(&seq) = self.peer_cids.to_retire.first() {
            let f = Frame::RetireConnectionId { path_id: None, seq };
            if f.encoded_len() > room(buf) {
                break;
            }
            f.encode(buf);
            self.peer_cids.to_retire.remove(0);
            frames.control.push(Control::RetireCid(seq));
            eliciting = true;
        }
        if !self.handshake_complete {
            return eliciting;
        }
        let rtt = self.paths[0].rtt.smoothed();
        while room(buf) > 32 {
            let Some(c) = self.streams.poll_control(now, rtt) else { break };
            control_frame(&c).encode(buf);
            frames.control.push(Control::Stream(c));
            eliciting = true;
        }
        // STREAM frames fill the rest. They always carry a Length: the packet may still be
        // padded after them (coalesced Initials, the header protection sample).
        while room(buf) > frame::MAX_STREAM_HEADER_LEN {
            let max = room(buf) - frame::MAX_STREAM_HEADER_LEN;
            let Some(chunk) = self.streams.next_stream_chunk(max) else { break };
            frame::encode_stream_header(buf, chunk.id, chunk.offset, Some(chunk.len), chunk.fin);
            self.streams.copy_stream_data(chunk.id, chunk.offset, chunk.len, buf);
            frames.stream.push(chunk);
            eliciting = true;
        }
        eliciting
    }

    /// Seals a packet and records it for loss detection and congestion control.
    fn seal(&mut self, now: Instant, buf: &mut Vec<u8>, p: OpenPacket) {
        let sealed = match p.level {
            Level::Initial => self.initial_keys.as_ref().map(|k| (&*k.local.packet, &*k.local.header)),
            Level::Handshake => self.handshake_keys.as_ref().map(|k| (&*k.local.packet, &*k.local.header)),
            _ => self.one_rtt.as_ref().map(|k| (k.local_key(), k.local_header_key())),
        };
        let Some((key, hp)) = sealed else {
            buf.truncate(p.header_start);
            return;
        };
        if seal_packet(buf, p.header_start, p.len_offset, p.pn_offset, p.pn_len, p.pn, key, hp, None).is_err() {
            buf.truncate(p.header_start);
            return;
        }
        let size = (buf.len() - p.header_start) as u32;
        let in_flight = p.ack_eliciting || p.padded;
        if p.level == Level::OneRtt {
            self.packets_in_phase += 1;
            let sealed = self.one_rtt.as_mut().map(|k| {
                if let Some(l) = p.frames.ack_largest {
                    k.on_ack_sent(l);
                }
                k.on_packet_sealed(p.pn)
            });
            if let Some(Err(e)) = sealed {
                self.close_with_error(now, e);
            }
        }
        if p.ack_eliciting {
            // RFC 9000 §10.1: sending an ack-eliciting packet restarts the idle timer, but
            // only the first one after a receipt.
            if self.idle_anchor_from_recv {
                self.idle_anchor = now;
                self.idle_anchor_from_recv = false;
            }
        }
        self.qlog_packet_sent(now, p.level, p.pn, size as usize, &p.frames);
        if p.ack_eliciting {
            self.last_send_anchor = now;
        }
        let path = &mut self.paths[0];
        path.stats.tx_packets += 1;
        if !path.validated {
            path.amp_sent += u64::from(size);
        }
        if in_flight {
            path.bytes_in_flight += u64::from(size);
            path.cc.on_packet_sent(now, u64::from(size));
            path.pacer.on_sent(now, u64::from(size));
        }
        let sent = SentPacket { time_sent: now, size, ack_eliciting: p.ack_eliciting, in_flight, frames: p.frames };
        if let Some(space) = self.space_mut(p.level.space()) {
            space.loss.on_packet_sent(p.pn, sent);
        }
    }

    /// In the closing state: one datagram with CONNECTION_CLOSE at every level we have
    /// keys for, each time a packet arrives (RFC 9000 §10.2.1, §10.2.3).
    fn poll_close(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let State::Closing { close, send_pending, .. } = &mut self.state else { return None };
        if !*send_pending {
            return None;
        }
        *send_pending = false;
        let close = close.clone();
        let limit = (usize::from(self.paths[0].mtu) as u64).min(self.paths[0].amplification_budget()) as usize;
        let mut open: Option<OpenPacket> = None;
        for space_id in [SpaceId::Initial, SpaceId::Handshake, SpaceId::Data] {
            if !self.has_keys(space_id)
                || (space_id == SpaceId::Data && !self.handshake_complete && self.side == Side::Client)
            {
                continue;
            }
            if limit.saturating_sub(buf.len()) < MIN_PACKET_ROOM + close.reason.len() {
                break;
            }
            if let Some(p) = open.take() {
                self.seal(now, buf, p);
            }
            open = self.write_close_packet(space_id, buf, &close);
        }
        if let Some(p) = open {
            self.seal(now, buf, p);
        }
        if buf.is_empty() {
            return None;
        }
        Some(Transmit {
            destination: self.paths[0].remote,
            source: None,
            path_id: 0,
            size: buf.len(),
            segment_size: None,
            ecn: None,
        })
    }

    fn write_close_packet(&mut self, space_id: SpaceId, buf: &mut Vec<u8>, close: &CloseFrame) -> Option<OpenPacket> {
        let Header { level, header_start, pn_offset, pn_len, pn, len_offset } = self.write_header(space_id, buf)?;
        self.space_mut(space_id)?.take_pn();
        // RFC 9000 §10.2.3: an application close cannot be sent in Initial or Handshake
        // packets; it becomes APPLICATION_ERROR without a reason there.
        let f = match (level, close.frame_type) {
            (Level::OneRtt, _) | (_, Some(_)) => frame::ConnectionClose {
                error_code: close.error_code,
                frame_type: close.frame_type,
                reason: &close.reason,
            },
            _ => frame::ConnectionClose {
                error_code: crate::error::TransportErrorCode::APPLICATION_ERROR.0,
                frame_type: Some(0),
                reason: &[],
            },
        };
        Frame::ConnectionClose(f).encode(buf);
        let payload_len = buf.len() - pn_offset - pn_len;
        if payload_len + pn_len < 4 {
            buf.resize(buf.len() + 4 - pn_len - payload_len, 0);
        }
        Some(OpenPacket {
            level,
            header_start,
            pn_offset,
            pn_len,
            pn,
            len_offset,
            frames: SentFrames::default(),
            ack_eliciting: false,
            padded: false,
        })
    }

    /// Starts a key update once enough packets were sent in this phase (RFC 9001 §6.1),
    /// and always well before the AEAD confidentiality limit (RFC 9001 §6.6).
    fn maybe_initiate_key_update(&mut self, now: Instant) {
        if !self.handshake_confirmed {
            return;
        }
        let Some(keys) = self.one_rtt.as_mut() else { return };
        let interval = self.config.key_update_interval.max(1);
        let due = self.packets_in_phase >= interval || keys.should_update();
        if due && !keys.can_initiate() && self.packets_in_phase >= self.key_update_ping_at + 32 {
            self.key_update_ping_at = self.packets_in_phase;
            // RFC 9001 §6.1: the next update waits for an acknowledgement of a packet sent
            // in this phase. A receiver that sends only ACKs would wait forever, so elicit one.
            self.ping_pending = true;
        }
        if due && keys.can_initiate() && keys.initiate_update() {
            self.packets_in_phase = 0;
            self.key_update_ping_at = 0;
            self.stats.key_updates += 1;
            self.key_discard_pending = true;
            self.qlog_key_update(now, "local_update");
            tracing::debug!(side = ?self.side, "initiated key update");
        }
    }
}

/// The wire frame of a stream-layer control message.
fn control_frame(c: &crate::stream::StreamControl) -> Frame<'static> {
    use crate::stream::StreamControl as C;
    match *c {
        C::MaxData(max) => Frame::MaxData(max),
        C::MaxStreamData { id, max } => Frame::MaxStreamData { id, max },
        C::MaxStreams { dir, count } => Frame::MaxStreams { dir, count },
        C::DataBlocked(limit) => Frame::DataBlocked(limit),
        C::StreamDataBlocked { id, limit } => Frame::StreamDataBlocked { id, limit },
        C::StreamsBlocked { dir, limit } => Frame::StreamsBlocked { dir, limit },
        C::ResetStream { id, error_code, final_size } => Frame::ResetStream { id, error_code, final_size },
        C::StopSending { id, error_code } => Frame::StopSending { id, error_code },
    }
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
    fn write_header(&mut self, space_id: SpaceId, buf: &mut Vec<u8>) -> Option<Header> {
        let level = match space_id {
            SpaceId::Initial => Level::Initial,
            SpaceId::Handshake => Level::Handshake,
            SpaceId::Data => Level::OneRtt,
        };
        let dcid = self.peer_cids.current().cid;
        let scid = self.local_cids.active.get(&0).map(|c| c.cid).unwrap_or_default();
        let key_phase = self.one_rtt.as_ref().is_some_and(|k| k.key_phase());
        let space = self.space_mut(space_id)?;
        let pn = space.next_pn;
        let pn_len = encode_pn_len(pn, space.loss.largest_acked());
        let header_start = buf.len();
        let (pn_offset, len_offset) = match level {
            Level::OneRtt => (write_short_header(buf, &dcid, key_phase, false, pn, pn_len), None),
            _ => {
                let ty = if level == Level::Initial { LongType::Initial } else { LongType::Handshake };
                let o = write_long_header(buf, ty, crate::VERSION_1, &dcid, &scid, &[], pn, pn_len);
                (o.pn_offset, Some(o.len_offset))
            }
        };
        Some(Header { level, header_start, pn_offset, pn_len, pn, len_offset })
    }
}
