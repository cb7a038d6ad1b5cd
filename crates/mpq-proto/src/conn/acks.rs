//! ACK processing (RFC 9002 §6): newly acknowledged packets and their frames, packets
//! declared lost and their frames' return to the send queues, ECN counts (§7.1).

use std::time::Duration;

use crate::error::TransportError;
use crate::frame::AckFrame;
use crate::stream::AckedRun;
use crate::time::Instant;
use crate::types::SpaceId;

use super::board::Seat;
use super::events::{Event, PathEvent};
use super::host::Host;
use super::path::PathState;
use super::path_ack::{AckParams, Fated, PacketFates};
use super::space::{Control, SentFrames};
use super::{touch, ConnShared, Connection};

impl Connection {
    /// Packets of the path in slot `pi` its loss timer declared lost: the path's congestion
    /// response, then their frames queued for retransmission (on any path).
    pub(crate) fn on_packets_lost(&mut self, now: Instant, space_id: SpaceId, pi: usize, lost: Fated) {
        if lost.is_empty() {
            return;
        }
        let mut fates = PacketFates::none(space_id);
        let Some((path, board)) = self.paths.path_and_board(pi) else { return };
        let mut seat = Seat::take(board, pi);
        path.on_lost(now, lost, false, &mut seat, &mut fates);
        seat.publish(path);
        seat.give_back(board, path);
        let path_id = path.id;
        self.host().apply_fates(now, path_id, fates);
        self.deliver_mail_or_close(now);
    }
}

impl Host<'_> {
    /// Handles ACK and PATH_ACK frames (RFC 9002 §6) for the space of `path` (in `slot`):
    /// the path's part (its ledger, RTT, loss detection, window, view on the board) by the
    /// path, then the frames' fate here.
    pub(super) fn on_ack_frame(
        &mut self,
        now: Instant,
        space_id: SpaceId,
        path: &mut PathState,
        slot: usize,
        ack: &AckFrame<'_>,
    ) -> Result<(), TransportError> {
        let params = self.ack_params();
        let mut seat = Seat::take(self.board, slot);
        let fates = {
            match space_id {
                SpaceId::Data => path.on_path_ack(now, ack, &params, &mut seat)?,
                SpaceId::Initial | SpaceId::Handshake => {
                    let space = match space_id {
                        SpaceId::Initial => self.shared.initial.as_mut(),
                        _ => self.shared.handshake.as_mut(),
                    };
                    let Some(space) = space else { return Ok(()) };
                    // No ACK delay in the handshake spaces (RFC 9002 §5.3).
                    let result = space
                        .loss
                        .on_ack_received(
                            ack.iter(),
                            Duration::ZERO,
                            now,
                            &mut path.rtt,
                            params.max_ack_delay,
                            params.handshake_confirmed,
                        )
                        .map_err(|_| TransportError::protocol_violation("ACK of an unsent packet number"))?;
                    path.on_ack_result(now, space_id, result, ack.ecn, &params, &mut seat)
                }
            }
        };
        seat.give_back(self.board, path);
        self.apply_fates(now, path.id, fates);
        Ok(())
    }

    /// The shared part of an ACK or a loss timer a path handled: the frames of packets
    /// acknowledged and lost (streams, CRYPTO, control frames), the key phase, events;
    /// with several paths, the send buffers sized to the new windows.
    pub(super) fn apply_fates(&mut self, now: Instant, path_id: u64, fates: PacketFates) {
        touch!(self, fates_applied);
        if fates.recovered {
            tracing::debug!(id = path_id, "path recovered");
            self.shared.events.push_back(Event::Path(PathEvent::Recovered { id: path_id }));
        }
        if let Some(change) = fates.mtu_updated {
            self.shared.qlog_mtu_updated(now, path_id, change);
        }
        if let Some(epoch) = fates.phase_acked {
            if let Some(k) = self.shared.one_rtt.as_mut() {
                k.on_local_phase_acked(epoch);
            }
        }
        if fates.space == SpaceId::Data && !fates.acked.is_empty() {
            if let Some(k) = self.shared.one_rtt.as_ref() {
                if k.can_initiate() && self.shared.phase_acked_at.is_none() {
                    self.shared.phase_acked_at = Some(now);
                }
            }
        }
        // Consecutive packets of a path carry consecutive bytes of a stream (a batch's
        // lease): one acknowledgement per run, not per packet, keeps the send buffer's range
        // set from being searched and rebalanced once per packet when the paths' ACKs arrive
        // out of order.
        let mut run = AckedRun::default();
        for (_, p) in fates.acked {
            self.on_frames_acked(fates.space, p.frames, &mut run);
        }
        run.finish(&mut self.shared.streams);
        // (The path's RTT is looked up only when a window of copies is complete: nearly
        // every ACK carries none.)
        if self.shared.copy_feedback.window_full() {
            if let Some(rtt) = self.path_slot(path_id).and_then(|slot| self.view(slot)).map(|v| v.srtt) {
                self.shared.copy_feedback.judge(now, rtt);
            }
        }
        // The acknowledged PATH_ACKs carried for other paths reach them by mail, which the
        // connection delivers after the work at hand.
        for (pn, _) in &fates.lost {
            self.qlog_packet_lost(now, fates.space, path_id, *pn);
        }
        for (_, p) in fates.lost {
            self.on_frames_lost(fates.space, p.frames);
        }
        if self.shared.mp.enabled {
            self.size_send_buffers();
        }
    }

    /// With several active paths a stream's oldest unacknowledged byte may sit on the
    /// slowest (perhaps deeply queued) path while the others send on: the send buffer then
    /// pins far more than one path's window. Let it hold twice what the paths' windows
    /// allow in flight, up to four times the configured limit.
    pub(super) fn size_send_buffers(&mut self) {
        let base = self.shared.config.streams.send_buffer_limit;
        let active = self.views().filter(|(_, v)| v.is_active());
        let (n, windows) = active.fold((0u32, 0u64), |(n, w), (_, v)| (n + 1, w.saturating_add(v.cwnd)));
        let limit = if n < 2 { base } else { windows.saturating_mul(2).min(base.saturating_mul(4)) };
        self.shared.streams.set_send_buffer_limit(limit);
    }

    /// The frames of an acknowledged packet; its stream chunks join `run`, which the caller
    /// finishes.
    pub(super) fn on_frames_acked(&mut self, space_id: SpaceId, mut frames: SentFrames, run: &mut AckedRun) {
        let copies = usize::from(frames.copies);
        if copies > 0 {
            // Whether a copy arrived first is read before it is acknowledged, and after the
            // chunks acknowledged so far are (the run holds them back).
            run.finish(&mut self.shared.streams);
            for c in &frames.stream[..copies.min(frames.stream.len())] {
                let first = !self.shared.streams.chunk_acked(c);
                self.shared.copy_feedback.on_copy_acked(first);
                if first {
                    self.shared.stats.copies_acked_first += 1;
                } else {
                    self.shared.stats.copies_acked_late += 1;
                }
            }
        }
        for c in &frames.stream {
            run.push(&mut self.shared.streams, c);
        }
        if let Some(crypto) = self.crypto_stream_mut(space_id) {
            for r in frames.crypto() {
                crypto.on_acked(r);
            }
        }
        // The peer has our ACKs (RFC 9000 §13.2.4): in the handshake spaces, prune their
        // ranges here; a PATH_ACK carried for another path goes to that path as mail (a
        // path's own ACKs were handled by the path, `PathState::on_path_ack`).
        for &(path_id, largest) in &frames.acks {
            if space_id != SpaceId::Data {
                if let Some(space) = self.shared.handshake_space_mut(space_id) {
                    space.received.on_ack_of_ack(largest);
                }
            } else if let Some(slot) = self.path_slot(path_id) {
                // Delivered once for all the packets of the ACK (`apply_fates`).
                self.post(slot).push_ack_acked(largest);
            }
        }
        if let Some((path_id, n)) = frames.datagrams() {
            self.shared.datagrams.on_fate(path_id, n, false);
        }
        for c in frames.take_control() {
            match c {
                Control::Stream(s) => self.shared.streams.on_control_acked(&s),
                Control::NewCid(path, _) => {
                    if let Some(l) = self.shared.local_cids.get_mut(&path) {
                        l.acked = true;
                    }
                }
                _ => {}
            }
        }
    }
}

impl ConnShared {
    /// The CRYPTO stream of a packet number space: the Initial and Handshake spaces' own,
    /// or the connection's 1-RTT one (its offsets continue whichever path carries it).
    fn crypto_stream_mut(&mut self, space_id: SpaceId) -> Option<&mut super::space::CryptoStream> {
        match space_id {
            SpaceId::Initial => self.initial.as_mut().map(|s| &mut s.crypto),
            SpaceId::Handshake => self.handshake.as_mut().map(|s| &mut s.crypto),
            SpaceId::Data => Some(&mut self.one_rtt_crypto),
        }
    }

    pub(crate) fn on_frames_lost(&mut self, space_id: SpaceId, mut frames: SentFrames) {
        for c in &frames.stream {
            self.streams.on_stream_chunk_lost(c);
        }
        if let Some(crypto) = self.crypto_stream_mut(space_id) {
            for r in frames.crypto() {
                crypto.on_lost(r);
            }
        }
        if let Some((path_id, n)) = frames.datagrams() {
            // RFC 9221 §5.2: DATAGRAM frames are not retransmitted; the loss is counted.
            self.datagrams.on_fate(path_id, n, true);
        }
        for c in frames.take_control() {
            match c {
                Control::Stream(s) => self.streams.on_control_lost(&s),
                Control::HandshakeDone => self.handshake_done_pending = true,
                Control::NewToken => self.tokens.new_token_pending = true,
                Control::NewCid(path, seq) => {
                    if let Some(l) = self.local_cids.get_mut(&path) {
                        l.on_advertisement_lost(seq);
                    }
                }
                Control::RetireCid(path, seq) => {
                    if let Some(p) = self.peer_cids.get_mut(&path) {
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

impl ConnShared {
    /// What the shared side fixes for a path's ACK processing.
    pub(super) fn ack_params(&self) -> AckParams {
        AckParams {
            ack_delay_exponent: self.peer_ack_delay_exponent(),
            max_ack_delay: self.peer_max_ack_delay(),
            handshake_confirmed: self.handshake_confirmed,
            side: self.side,
            key_epoch: self.one_rtt.as_ref().map(|k| k.epoch()),
        }
    }
}
