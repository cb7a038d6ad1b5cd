//! Timers: idle timeout, loss detection and PTO per path (RFC 9002 §6.2, Appendix A.8-A.9),
//! ACK delay, pacing, path validation, abandoned-path retention, closing and draining. The
//! connection computes deadlines from its state instead of storing a timer per kind, so no
//! timer can be left stale.

use std::time::Duration;

use crate::time::Instant;
use crate::types::{Side, SpaceId};

use super::board::Seat;
use super::events::PathEvent;
use super::host::Host;
use super::multipath::PATH_UNSTABLE_OR_POOR;
use super::path::PathState;
use super::path_table::Slots;
use super::{Connection, ConnectionError, Event, State};

use super::path_timers::PathTimer;

/// Longest a path's validation waits, after the handshake's confirmation, for the peer to
/// acknowledge our CIDs for its path ID before it may fail (`path_validation_timers`).
const CID_ACK_WAIT: Duration = Duration::from_secs(30);

/// Which timers a deadline covers ([`Connection::poll_timeout`] and its parts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timers {
    /// Every timer.
    All,
    /// The connection-wide ones.
    Shared,
    /// Those of the path in this slot.
    Path(usize),
}

impl Connection {
    /// Earliest time `handle_timeout` must be called, if any.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.deadline(Timers::All)
    }

    /// The earliest of the connection-wide timers alone (idle and handshake timeouts, the
    /// handshake's loss detection and ACKs, key discard, closing and draining): what a
    /// runtime whose path threads wait for their own paths' timers
    /// ([`Connection::poll_path_timeout`]) waits for besides.
    pub fn poll_shared_timeout(&mut self) -> Option<Instant> {
        self.deadline(Timers::Shared)
    }

    /// The earliest of the timers path `path_id`'s thread waits for: the path's loss
    /// detection and PTO, pacing, validation and retention, and the ACK deadlines of every
    /// path whose ACKs it carries. `None` if there is no such path (or none is due).
    pub fn poll_path_timeout(&mut self, path_id: u64) -> Option<Instant> {
        let pi = self.path_index(path_id)?;
        self.deadline(Timers::Path(pi))
    }

    /// The earliest deadline of the timers `which` names.
    fn deadline(&mut self, which: Timers) -> Option<Instant> {
        match self.shared.state {
            State::Drained => return None,
            // (Closing and draining are the connection's: a path's thread does not wait.)
            State::Closing { until, .. } | State::Draining { until } => {
                return (!matches!(which, Timers::Path(_))).then_some(until)
            }
            _ => {}
        }
        let covers = |pi: usize| match which {
            Timers::All => true,
            Timers::Shared => false,
            Timers::Path(p) => p == pi,
        };
        let shared = matches!(which, Timers::All | Timers::Shared);
        let mut t = if shared { self.idle_deadline() } else { None };
        if shared && !self.shared.handshake_complete {
            t = match (t, self.shared.handshake_deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        let mut merge = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        if shared {
            merge(self.handshake_loss_deadline().map(|(t, _)| t));
        }
        for pi in self.paths.slots() {
            if covers(pi) {
                merge(self.path_loss_deadline(pi).map(|(t, _)| t));
            }
        }
        let max_ack_delay = self.shared.config.max_ack_delay;
        if shared {
            for id in [SpaceId::Initial, SpaceId::Handshake] {
                if let Some(s) = self.space_mut(id, 0) {
                    if s.ack_pending {
                        merge(s.received.ack_deadline(Duration::ZERO));
                    }
                }
            }
        }
        let wants_data = self.wants_to_send_data();
        for (j, p) in self.paths.enumerate() {
            // An ACK no path can carry now (the anti-amplification limit of an address being
            // validated) waits for the peer's next datagram, which raises the limit: a
            // deadline already past would make the timer fire again and again. A path's
            // thread waits for the ACKs it carries (its own, with the default policy).
            if p.data.ack_pending && which != Timers::Shared {
                let carried = self.ack_carriers(j).iter().any(|&c| self.can_carry(c) && covers(c));
                if carried {
                    merge(p.data.received.ack_deadline(max_ack_delay));
                }
            }
            if !covers(j) {
                continue;
            }
            if wants_data || !self.paths.inbox(j).dup_chunks.is_empty() {
                merge(p.pacing_until);
            }
            if let Some(c) = p.challenge {
                merge(c.fail_at);
                // The retry deadline only matters until it marks the challenge for sending
                // again: once `send_pending` is set, sending it waits for the path (a server
                // validating a new address may have spent its anti-amplification budget and
                // must wait for the peer's next datagram, RFC 9000 §8.1). A retry deadline
                // already past would make the timer fire again and again without progress.
                if !c.send_pending {
                    merge(c.sent_at.map(|s| s + p.challenge_retry(self.shared.peer_max_ack_delay())));
                }
            }
            merge(p.discard_at);
            merge(self.liveness_probe_deadline(j));
        }
        if shared {
            merge(self.shared.key_discard_at);
            merge(self.preferred_probe_deadline());
        }
        t
    }

    /// Handles every timer that expired at or before `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.debug_assert_mail_delivered();
        match self.shared.state {
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
            tracing::debug!(side = ?self.shared.side, "idle timeout");
            self.shared.qlog_lost(now, &ConnectionError::TimedOut);
            self.set_drained(Some(ConnectionError::TimedOut));
            return;
        }
        if !self.shared.handshake_complete && self.shared.handshake_deadline.is_some_and(|t| now >= t) {
            // Nothing to tell a peer that never answered; one that did learns of it from its
            // own timers, as with the idle timeout.
            let peer_answered = self.shared.side == Side::Server || self.shared.got_server_cid;
            tracing::debug!(side = ?self.shared.side, peer_answered, "handshake timeout");
            self.shared.qlog_lost(now, &ConnectionError::HandshakeTimeout { peer_answered });
            self.set_drained(Some(ConnectionError::HandshakeTimeout { peer_answered }));
            return;
        }
        for p in self.paths.iter_mut() {
            if p.pacing_until.is_some_and(|t| now >= t) {
                p.pacing_until = None;
            }
        }
        if self.shared.key_discard_at.is_some_and(|t| now >= t) {
            self.shared.key_discard_at = None;
            if let Some(k) = self.shared.one_rtt.as_mut() {
                k.discard_previous();
            }
        }
        self.path_validation_timers(now);
        self.liveness_probe_timers(now);
        self.preferred_probe_timer(now);
        if let Some((t, space)) = self.handshake_loss_deadline() {
            if now >= t {
                self.on_handshake_loss_timeout(now, space);
            }
        }
        for pi in self.paths.slots() {
            if self.is_closed() {
                break;
            }
            if let Some((t, kind)) = self.path_loss_deadline(pi) {
                if now >= t {
                    // The path's timer, with the path and the shared half; other paths
                    // by mail.
                    if let Some((mut host, path)) = self.host_for(pi) {
                        host.on_path_loss_timeout(now, path, pi, kind);
                    }
                    self.finish_host_work(now);
                }
            }
        }
        // Abandoned paths whose retention period is over.
        for pi in self.paths.slots() {
            if self.paths.get(pi).is_some_and(|p| p.discard_at.is_some_and(|t| now >= t)) {
                self.discard_path(now, pi);
            }
        }
    }

    /// When a client probes path `pi`'s liveness
    /// ([`PathState::liveness_probe_at`](super::path::PathState)): only with multipath, once
    /// the handshake is confirmed, and while the peer sent something ack-eliciting on another
    /// path after this one went silent (a connection quiet on every path is left to the idle
    /// timeout).
    fn liveness_probe_deadline(&self, pi: usize) -> Option<Instant> {
        if self.shared.side != Side::Client || !self.shared.mp.enabled || !self.shared.handshake_confirmed {
            return None;
        }
        let (silent_since, at) = self.paths.get(pi)?.liveness_probe_at(self.shared.peer_max_ack_delay())?;
        // Heard: something ack-eliciting, not just the ACKs of our own PINGs (two idle paths
        // would otherwise keep probing each other, and the connection would never go idle).
        let heard_elsewhere =
            self.paths.enumerate().any(|(j, q)| j != pi && q.last_eliciting_recv.is_some_and(|r| r > silent_since));
        heard_elsewhere.then_some(at)
    }

    /// Liveness probes that are due: one PING each (sent like a PTO probe, outside the
    /// congestion window).
    fn liveness_probe_timers(&mut self, now: Instant) {
        for pi in self.paths.slots() {
            if self.liveness_probe_deadline(pi).is_some_and(|t| now >= t) {
                let p = &mut self.paths[pi];
                // Two packets, as a PTO's probes: the peer acknowledges a second
                // ack-eliciting packet at once (RFC 9000 §13.2.2), where a lone PING waits
                // for its max_ack_delay. That delayed sample, a few hundred microseconds
                // under min_rtt + ack_delay for a small packet, enters the RTT estimate
                // unadjusted (RFC 9002 §5.3) and lengthened the PTO that detects a failed
                // path by 23 ms (seed002-4.3-handover: 91 ms instead of 69 ms).
                p.data.probes = 2;
                p.liveness_probed_at = Some(now);
                p.stats.liveness_probes += 1;
                tracing::debug!(id = p.id, "liveness probe of a silent path");
            }
        }
    }

    /// Something waits to be sent that congestion control or pacing may hold back.
    pub(crate) fn wants_to_send_data(&self) -> bool {
        self.has_app_space_data()
            || self.shared.initial.as_ref().is_some_and(|s| s.crypto.has_pending())
            || self.shared.handshake.as_ref().is_some_and(|s| s.crypto.has_pending())
    }

    /// RFC 9000 §10.1: the idle timeout is at least three PTOs (of the slowest path).
    fn idle_deadline(&self) -> Option<Instant> {
        let idle = self.shared.idle_timeout?;
        Some(self.shared.idle_anchor + idle.max(3 * self.max_pto()))
    }

    /// PTO of path `pi` for `space`, with backoff.
    fn pto_duration(&self, space: SpaceId, pi: usize) -> Duration {
        let mad = if space == SpaceId::Data { self.shared.peer_max_ack_delay() } else { Duration::ZERO };
        self.paths[pi].pto(mad)
    }

    /// Retransmits PATH_CHALLENGEs and gives up on paths that never answered.
    fn path_validation_timers(&mut self, now: Instant) {
        let (initial_rtt, mad) = (self.shared.config.initial_rtt, self.shared.peer_max_ack_delay());
        let confirmed_at = self.shared.handshake_confirmed_at;
        // A path other than 0 cannot be answered before the peer has our CIDs for its path
        // ID: its validation does not fail while they are unacknowledged (they are resent
        // until they are), for at most CID_ACK_WAIT after the confirmation (a peer that never
        // acknowledges them does not keep a path validating forever).
        let local_cids = &self.shared.local_cids;
        let may_fail_from = |path_id: u64| {
            confirmed_at.filter(|&c| {
                path_id == 0 || local_cids.get(&path_id).is_none_or(|l| l.acked) || now >= c + CID_ACK_WAIT
            })
        };
        let failed: Slots = self
            .paths
            .slots()
            .into_iter()
            .filter(|&pi| {
                // (Only a path being validated has a timer to look at.)
                self.paths[pi].challenge.is_some() && {
                    let fail_from = may_fail_from(self.paths[pi].id);
                    self.paths[pi].on_validation_timer(now, mad, initial_rtt, fail_from)
                }
            })
            .collect();
        for pi in failed.into_iter().rev() {
            if let Some((mut host, path)) = self.host_for(pi) {
                host.on_validation_failed(now, path, pi);
            }
            self.finish_host_work(now);
        }
    }

    /// Loss or PTO deadline of the Initial and Handshake spaces (on the primary path), as
    /// RFC 9002 Appendix A.8 computes it.
    fn handshake_loss_deadline(&self) -> Option<(Instant, SpaceId)> {
        if self.shared.initial.is_none() && self.shared.handshake.is_none() {
            return None;
        }
        let pi = self.primary_path();
        let mut loss: Option<(Instant, SpaceId)> = None;
        for (id, s) in
            [(SpaceId::Initial, self.shared.initial.as_ref()), (SpaceId::Handshake, self.shared.handshake.as_ref())]
        {
            if let Some(t) = s.and_then(|s| s.loss.loss_time()) {
                if loss.is_none_or(|(l, _)| t < l) {
                    loss = Some((t, id));
                }
            }
        }
        if loss.is_some() {
            return loss;
        }
        let path = &self.paths[pi];
        // A server blocked by the amplification limit arms no PTO: it could not send.
        if self.shared.side == Side::Server && path.amplification_budget() == 0 {
            return None;
        }
        let mut best: Option<(Instant, SpaceId)> = None;
        let mut any_in_flight = false;
        for (id, s) in
            [(SpaceId::Initial, self.shared.initial.as_ref()), (SpaceId::Handshake, self.shared.handshake.as_ref())]
        {
            let Some(s) = s else { continue };
            let Some(t) = s.loss.time_of_last_ack_eliciting() else { continue };
            if !s.loss.has_ack_eliciting_in_flight() {
                continue;
            }
            any_in_flight = true;
            let deadline = t + self.pto_duration(id, pi);
            if best.is_none_or(|(b, _)| deadline < b) {
                best = Some((deadline, id));
            }
        }
        let data_in_flight = self.paths[pi].data.loss.has_ack_eliciting_in_flight();
        if !any_in_flight && !data_in_flight && self.shared.side == Side::Client && !self.shared.handshake_confirmed {
            // RFC 9002 §6.2.2.1: the client arms the PTO even with nothing in flight so the
            // server, possibly blocked by amplification, gets to send.
            let id = if self.shared.handshake_keys.is_some() { SpaceId::Handshake } else { SpaceId::Initial };
            return Some((self.shared.last_send_anchor + self.pto_duration(id, pi), id));
        }
        best
    }

    /// Loss or PTO deadline of path `pi`'s data space. Application data PTOs wait for the
    /// handshake to be confirmed (RFC 9002 §6.2.1).
    fn path_loss_deadline(&self, pi: usize) -> Option<(Instant, PathTimer)> {
        let is_server = self.shared.side == Side::Server;
        self.paths[pi].loss_deadline(self.shared.handshake_confirmed, is_server, self.shared.peer_max_ack_delay())
    }

    /// RFC 9002 Appendix A.9 for the handshake spaces.
    fn on_handshake_loss_timeout(&mut self, now: Instant, space_id: SpaceId) {
        let pi = self.primary_path();
        let rtt = self.paths[pi].rtt.clone();
        let lost = match self.space_mut(space_id, pi) {
            Some(s) if s.loss.loss_time().is_some_and(|t| t <= now) => Some(s.loss.detect_lost(now, &rtt)),
            _ => None,
        };
        if let Some(lost) = lost {
            self.on_packets_lost(now, space_id, pi, lost);
            return;
        }
        let path = &mut self.paths[pi];
        path.pto_count += 1;
        path.stats.pto_count += 1;
        self.shared.last_send_anchor = now;
        if let Some(space) = self.space_mut(space_id, pi) {
            space.probes = 2;
            // Handshake probes carry the unacknowledged CRYPTO data again.
            space.crypto.retransmit_unacked();
        }
        // RFC 9002 §6.2.4: "the sender SHOULD send ack-eliciting packets from other packet
        // number spaces with in-flight data". The other handshake space's CRYPTO data the
        // peer has not acknowledged goes too, in flight or lost: a server whose Initial (the
        // ServerHello) was lost, its window full of Handshake probes the client cannot
        // decrypt without it, otherwise sent the ServerHello again only at an Initial PTO.
        let other = if space_id == SpaceId::Handshake { SpaceId::Initial } else { SpaceId::Handshake };
        if let Some(space) = self.space_mut(other, pi).filter(|s| s.crypto.has_unacked()) {
            space.probes = space.probes.max(1);
            space.crypto.retransmit_unacked();
        }
        self.shared.qlog_pto(now, space_id, 0);
    }
}

impl Host<'_> {
    /// RFC 9002 Appendix A.9 for one path, plus multipath failure handling: a PTO with no
    /// sign of life since the path's last packet marks it potentially failed (De Coninck and
    /// Bonaventure, "Multipath QUIC: Design and Evaluation", CoNEXT 2017, §4.3), its
    /// in-flight data is resent on the other paths (RFC 10069 §5.7), and
    /// after `DEAD_PATH_PTOS` it is abandoned when another path works.
    fn on_path_loss_timeout(&mut self, now: Instant, path: &mut PathState, slot: usize, kind: PathTimer) {
        let mp = self.shared.mp.enabled;
        // Another active path that is not itself potentially failed, as the board shows it.
        let others_work = mp && self.views().any(|(i, v)| i != slot && v.is_active() && !v.potentially_failed);
        // When the peer last sent something ack-eliciting on another active path.
        let heard_elsewhere =
            self.views().filter(|&(i, v)| i != slot && v.is_active()).filter_map(|(_, v)| v.last_eliciting_recv).max();
        let mut seat = Seat::take(self.board, slot);
        let id = path.id;
        if kind == PathTimer::Loss {
            let fates = path.on_loss_timer(now, &mut seat);
            seat.give_back(self.board, path);
            if !fates.lost.is_empty() || fates.mtu_updated.is_some() {
                self.apply_fates(now, id, fates);
            }
            return;
        }
        let verdict = path.on_pto(others_work, heard_elsewhere, &mut seat);
        seat.give_back(self.board, path);
        self.shared.last_send_anchor = now;
        self.shared.qlog_pto(now, SpaceId::Data, id);
        if let Some(change) = verdict.mtu_updated {
            self.shared.qlog_mtu_updated(now, id, change);
        }
        if let Some(chunks) = verdict.newly_failed {
            tracing::debug!(id, "path potentially failed");
            self.shared.events.push_back(Event::Path(PathEvent::PotentiallyFailed { id }));
            self.qlog_path(now, id, "potentially_failed");
            for c in &chunks {
                self.shared.streams.on_stream_chunk_lost(c);
            }
        }
        if verdict.dead {
            self.abandon(now, slot, PATH_UNSTABLE_OR_POOR, false);
        }
    }
}
