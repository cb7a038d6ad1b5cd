//! Timers: idle timeout, loss detection and PTO (RFC 9002 §6.2, Appendix A.8-A.9), ACK
//! delay, pacing, closing and draining. The connection computes deadlines from its state
//! instead of storing a timer per kind, so no timer can be left stale.

use std::time::Duration;

use crate::time::Instant;
use crate::types::{Side, SpaceId};

use super::{Connection, ConnectionError, State};

impl Connection {
    /// Earliest time `handle_timeout` must be called, if any.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        match self.state {
            State::Drained => return None,
            State::Closing { until, .. } | State::Draining { until } => return Some(until),
            _ => {}
        }
        let mut t = self.idle_deadline();
        let mut merge = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        merge(self.loss_detection_deadline());
        let max_ack_delay = self.config.max_ack_delay;
        for id in [SpaceId::Initial, SpaceId::Handshake, SpaceId::Data] {
            if let Some(s) = self.space_mut(id) {
                if s.ack_pending {
                    let d = if id == SpaceId::Data { max_ack_delay } else { Duration::ZERO };
                    merge(s.received.ack_deadline(d));
                }
            }
        }
        if self.pacing_until.is_some() && self.wants_to_send_data() {
            merge(self.pacing_until);
        }
        merge(self.key_discard_at);
        t
    }

    /// Handles every timer that expired at or before `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            State::Drained => return,
            State::Closing { until, .. } | State::Draining { until } => {
                if now >= until {
                    self.set_drained(None);
                }
                return;
            }
            _ => {}
        }
        if self.idle_deadline().is_some_and(|t| now >= t) {
            tracing::debug!(side = ?self.side, "idle timeout");
            self.set_drained(Some(ConnectionError::TimedOut));
            return;
        }
        if self.pacing_until.is_some_and(|t| now >= t) {
            self.pacing_until = None;
        }
        if self.key_discard_at.is_some_and(|t| now >= t) {
            self.key_discard_at = None;
            if let Some(k) = self.one_rtt.as_mut() {
                k.discard_previous();
            }
        }
        if self.loss_detection_deadline().is_some_and(|t| now >= t) {
            self.on_loss_detection_timeout(now);
        }
    }

    fn wants_to_send_data(&self) -> bool {
        self.has_app_space_data()
            || self.initial.as_ref().is_some_and(|s| s.crypto.has_pending())
            || self.handshake.as_ref().is_some_and(|s| s.crypto.has_pending())
    }

    /// RFC 9000 §10.1: the idle timeout is at least three PTOs.
    fn idle_deadline(&self) -> Option<Instant> {
        let idle = self.idle_timeout?;
        let pto = self.paths[0].pto_base() + self.peer_max_ack_delay();
        Some(self.idle_anchor + idle.max(3 * pto))
    }

    fn pto_duration(&self, space: SpaceId) -> Duration {
        let path = &self.paths[0];
        let mut d = path.pto_base();
        if space == SpaceId::Data {
            d += self.peer_max_ack_delay();
        }
        d * 2u32.saturating_pow(path.pto_count.min(16))
    }

    /// RFC 9002 Appendix A.8 (SetLossDetectionTimer) as a pure function of the state.
    pub(crate) fn loss_detection_deadline(&self) -> Option<Instant> {
        // Earliest time-threshold loss first.
        let mut loss_time: Option<Instant> = None;
        for s in [self.initial.as_ref(), self.handshake.as_ref(), Some(&self.paths[0].data)].into_iter().flatten() {
            if let Some(t) = s.loss.loss_time() {
                loss_time = Some(loss_time.map_or(t, |l| l.min(t)));
            }
        }
        if loss_time.is_some() {
            return loss_time;
        }
        let path = &self.paths[0];
        // A server blocked by the amplification limit arms no PTO: it could not send.
        if self.side == Side::Server && path.amplification_budget() == 0 {
            return None;
        }
        let (space, anchor) = self.earliest_pto_space()?;
        Some(anchor + self.pto_duration(space))
    }

    /// The space whose PTO fires first and the time its PTO period starts.
    fn earliest_pto_space(&self) -> Option<(SpaceId, Instant)> {
        let mut best: Option<(SpaceId, Instant)> = None;
        let mut any_in_flight = false;
        for (id, s) in [
            (SpaceId::Initial, self.initial.as_ref()),
            (SpaceId::Handshake, self.handshake.as_ref()),
            (SpaceId::Data, Some(&self.paths[0].data)),
        ] {
            let Some(s) = s else { continue };
            let Some(t) = s.loss.time_of_last_ack_eliciting() else { continue };
            if !s.loss.has_ack_eliciting_in_flight() {
                continue;
            }
            any_in_flight = true;
            // Application data PTO waits until the handshake is confirmed.
            if id == SpaceId::Data && !self.handshake_confirmed {
                continue;
            }
            let deadline = t + self.pto_duration(id);
            if best.is_none_or(|(bid, bt)| deadline < bt + self.pto_duration(bid)) {
                best = Some((id, t));
            }
        }
        if !any_in_flight && self.side == Side::Client && !self.handshake_confirmed {
            // RFC 9002 §6.2.2.1: the client arms the PTO even with nothing in flight so the
            // server, possibly blocked by amplification, gets to send.
            let id = if self.handshake_keys.is_some() { SpaceId::Handshake } else { SpaceId::Initial };
            return Some((id, self.last_send_anchor));
        }
        best
    }

    /// RFC 9002 Appendix A.9 (OnLossDetectionTimeout).
    fn on_loss_detection_timeout(&mut self, now: Instant) {
        // Time-threshold losses.
        for id in [SpaceId::Initial, SpaceId::Handshake, SpaceId::Data] {
            let rtt = self.paths[0].rtt.clone();
            let lost = match self.space_mut(id) {
                Some(s) if s.loss.loss_time().is_some_and(|t| t <= now) => s.loss.detect_lost(now, &rtt),
                _ => continue,
            };
            self.on_packets_lost(now, id, lost, false);
            return;
        }
        let Some((space_id, _)) = self.earliest_pto_space() else { return };
        let path = &mut self.paths[0];
        path.pto_count += 1;
        path.stats.pto_count += 1;
        self.last_send_anchor = now;
        let confirmed = self.handshake_confirmed;
        if let Some(space) = self.space_mut(space_id) {
            space.probes = 2;
            if space_id != SpaceId::Data {
                // Handshake probes carry the unacknowledged CRYPTO data again.
                space.crypto.retransmit_unacked();
            }
        }
        let _ = confirmed;
        self.qlog_pto(now, space_id);
    }
}
