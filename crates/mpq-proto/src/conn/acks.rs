//! ACK processing (RFC 9002 §6): newly acknowledged packets and their frames, packets
//! declared lost and their frames' return to the send queues, ECN counts (§7.1).

use std::time::Duration;

use crate::error::TransportError;
use crate::frame::AckFrame;
use crate::time::Instant;
use crate::types::{Side, SpaceId};

use super::path::PathState;
use super::space::{Control, SentFrames};
use super::Connection;

impl Connection {
    /// Handles ACK and PATH_ACK frames (RFC 9002 §6) for the space of path index `pi`;
    /// the path then publishes its new window, flight and RTT on the board.
    pub(super) fn on_ack_frame(
        &mut self,
        now: Instant,
        space_id: SpaceId,
        pi: usize,
        ack: &AckFrame<'_>,
    ) -> Result<(), TransportError> {
        let r = self.process_ack_frame(now, space_id, pi, ack);
        self.paths.publish(pi);
        if r.is_ok() && self.shared.mp.enabled {
            self.size_send_buffers();
        }
        r
    }

    fn process_ack_frame(
        &mut self,
        now: Instant,
        space_id: SpaceId,
        pi: usize,
        ack: &AckFrame<'_>,
    ) -> Result<(), TransportError> {
        let ack_delay = if space_id == SpaceId::Data {
            let exp = u32::from(self.peer_ack_delay_exponent());
            Duration::from_micros(ack.delay.checked_shl(exp).filter(|v| v >> exp == ack.delay).unwrap_or(u64::MAX >> 1))
        } else {
            Duration::ZERO
        };
        let max_ack_delay = self.peer_max_ack_delay();
        let confirmed = self.shared.handshake_confirmed;
        let result = {
            let path = &mut self.paths[pi];
            let space = match space_id {
                SpaceId::Initial => self.shared.initial.as_mut(),
                SpaceId::Handshake => self.shared.handshake.as_mut(),
                SpaceId::Data => Some(&mut path.data),
            };
            let Some(space) = space else { return Ok(()) };
            space.loss.on_ack_received(ack.iter(), ack_delay, now, &mut path.rtt, max_ack_delay, confirmed)
        };
        let result = result.map_err(|_| TransportError::protocol_violation("ACK of an unsent packet number"))?;
        // (The path publishes its new view once, when the frame is done: what runs before
        // reads only the other paths' views.)
        if result.newly_acked.is_empty() && result.lost.is_empty() {
            return Ok(());
        }
        if space_id == SpaceId::Data {
            if let Some((sent, newly_ce)) = self.paths[pi].on_ack_ecn(&result.newly_acked, ack.ecn) {
                self.set_coupling(pi);
                self.paths[pi].on_ce(now, sent, newly_ce);
            }
        }
        // RFC 9002 §6.2.1: reset the backoff, except at a client that does not yet know
        // the server validated its address.
        if !result.newly_acked.is_empty() && (self.shared.side == Side::Server || space_id != SpaceId::Initial) {
            self.paths[pi].pto_count = 0;
            self.on_path_alive(pi);
        }
        if !result.newly_acked.is_empty() {
            self.set_coupling(pi);
        }
        // The path's own part first (flight, window), then the shared part: key phases and
        // the frames' fate.
        self.paths[pi].on_packets_acked(now, &result.newly_acked);
        for (pn, p) in result.newly_acked {
            if space_id == SpaceId::Data {
                if let Some(k) = self.shared.one_rtt.as_mut() {
                    k.on_packet_acked_path(&mut self.paths[pi].key_marks, pn);
                    if k.can_initiate() && self.shared.phase_acked_at.is_none() {
                        self.shared.phase_acked_at = Some(now);
                    }
                }
            }
            self.on_frames_acked(space_id, p.frames);
        }
        self.on_packets_lost(now, space_id, pi, result.lost, result.persistent_congestion);
        Ok(())
    }

    /// With several active paths a stream's oldest unacknowledged byte may sit on the
    /// slowest (perhaps deeply queued) path while the others send on: the send buffer then
    /// pins far more than one path's window. Let it hold twice what the paths' windows
    /// allow in flight, up to four times the configured limit.
    pub(super) fn size_send_buffers(&mut self) {
        let base = self.shared.config.streams.send_buffer_limit;
        let active = self.paths.views().filter(|(_, v)| v.is_active());
        let (n, windows) = active.fold((0u32, 0u64), |(n, w), (_, v)| (n + 1, w.saturating_add(v.cwnd)));
        let limit = if n < 2 { base } else { windows.saturating_mul(2).min(base.saturating_mul(4)) };
        self.shared.streams.set_send_buffer_limit(limit);
    }

    /// The CRYPTO stream of a packet number space: the Initial and Handshake spaces' own,
    /// or the connection's 1-RTT one (its offsets continue whichever path carries it).
    fn crypto_stream_mut(&mut self, space_id: SpaceId) -> Option<&mut super::space::CryptoStream> {
        match space_id {
            SpaceId::Initial => self.shared.initial.as_mut().map(|s| &mut s.crypto),
            SpaceId::Handshake => self.shared.handshake.as_mut().map(|s| &mut s.crypto),
            SpaceId::Data => Some(&mut self.shared.one_rtt_crypto),
        }
    }

    pub(super) fn on_frames_acked(&mut self, space_id: SpaceId, frames: SentFrames) {
        for c in &frames.stream {
            self.shared.streams.on_stream_chunk_acked(c);
        }
        if let Some(crypto) = self.crypto_stream_mut(space_id) {
            for r in &frames.crypto {
                crypto.on_acked(r);
            }
        }
        for &(path_id, largest) in &frames.acks {
            let pi = if space_id == SpaceId::Data { self.path_index(path_id) } else { Some(self.primary_path()) };
            if let Some(space) = pi.and_then(|pi| self.space_mut(space_id, pi)) {
                space.received.on_ack_of_ack(largest);
            }
        }
        let mut cid_acked = false;
        for c in frames.control {
            match c {
                Control::Stream(s) => self.shared.streams.on_control_acked(&s),
                Control::NewCid(path_id, seq) => {
                    cid_acked |=
                        self.shared.local_cids.get_mut(&path_id).is_some_and(|l| l.on_advertisement_acked(seq));
                }
                _ => {}
            }
        }
        if cid_acked {
            // The peer can now answer on that path ID: the client may open it.
            self.maybe_signal_new_path_allowed();
        }
    }

    /// Lost packets of path index `pi`: congestion response once per event, frames queued
    /// for retransmission (on any path).
    pub(crate) fn on_packets_lost(
        &mut self,
        now: Instant,
        space_id: SpaceId,
        pi: usize,
        lost: Vec<(u64, crate::recovery::sent::SentPacket<SentFrames>)>,
        persistent: bool,
    ) {
        if lost.is_empty() {
            return;
        }
        let path_id = self.paths[pi].id;
        for (pn, _) in &lost {
            self.qlog_packet_lost(now, space_id, path_id, *pn);
        }
        if PathState::loss_is_congestion(&lost) {
            self.set_coupling(pi);
        }
        self.paths[pi].on_packets_lost(now, &lost, persistent);
        self.paths.publish(pi);
        for (_, p) in lost {
            self.on_frames_lost(space_id, p.frames);
        }
    }

    pub(crate) fn on_frames_lost(&mut self, space_id: SpaceId, frames: SentFrames) {
        for c in &frames.stream {
            self.shared.streams.on_stream_chunk_lost(c);
        }
        if let Some(crypto) = self.crypto_stream_mut(space_id) {
            for r in &frames.crypto {
                crypto.on_lost(r);
            }
        }
        for c in frames.control {
            match c {
                Control::Stream(s) => self.shared.streams.on_control_lost(&s),
                Control::HandshakeDone => self.shared.handshake_done_pending = true,
                Control::NewToken => self.shared.tokens.new_token_pending = true,
                Control::NewCid(path, seq) => {
                    if let Some(l) = self.shared.local_cids.get_mut(&path) {
                        l.on_advertisement_lost(seq);
                    }
                }
                Control::RetireCid(path, seq) => {
                    if let Some(p) = self.shared.peer_cids.get_mut(&path) {
                        p.on_retirement_lost(seq);
                    }
                }
                c @ (Control::PathAbandon(..) | Control::PathStatus(..) | Control::MaxPathId(_)) => {
                    self.on_mp_control_lost(c)
                }
            }
        }
    }
}
