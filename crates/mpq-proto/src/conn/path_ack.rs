//! A path's own part of ACK processing (RFC 9002 §6-7): it takes the acknowledged packets
//! out of its ledger, samples its RTT, runs its loss detection, congestion control and ECN
//! validation, and publishes its new view, all without the connection's shared state. What
//! is left for the shared side, the fate of the packets' frames, goes back as
//! [`PacketFates`], applied by `Connection::apply_fates` (`conn/acks.rs`).
//!
//! The same method serves a PATH_ACK met while the path opens a receive batch
//! (`conn/recv_batch.rs`) and one met on the general, per-packet way.

use std::time::Duration;

use crate::error::TransportError;
use crate::frame::{AckFrame, EcnCounts};
use crate::recovery::loss::AckResult;
use crate::recovery::sent::SentPacket;
use crate::time::Instant;
use crate::types::{Side, SpaceId};

use super::board::Seat;
use super::path::PathState;
use super::space::SentFrames;

/// What the shared side fixes for a path's ACK processing: the peer's transport parameters
/// and the connection's progress. Copied for a receive batch; none of it changes within one
/// (the batch only runs once the handshake is confirmed).
#[derive(Debug, Clone, Copy)]
pub(crate) struct AckParams {
    /// The peer's ack_delay_exponent (RFC 9000 §18.2).
    pub ack_delay_exponent: u8,
    /// The peer's max_ack_delay.
    pub max_ack_delay: Duration,
    /// The handshake is confirmed (RFC 9002 §5.3 caps the ACK delay from then on).
    pub handshake_confirmed: bool,
    /// Our side (a client does not reset the PTO backoff on Initial ACKs, RFC 9002 §6.2.1).
    pub side: Side,
    /// The epoch of the current 1-RTT keys, if any (key-phase confirmation).
    pub key_epoch: Option<u64>,
}

/// Packets by number, as loss detection reports them.
pub(crate) type Fated = Vec<(u64, SentPacket<SentFrames>)>;

/// The packets a path found acknowledged or lost, handed to the shared side for their
/// frames (returned to the streams and queues), with the events the path saw.
#[derive(Debug)]
pub(crate) struct PacketFates {
    /// The packet number space they belong to.
    pub space: SpaceId,
    /// Newly acknowledged, ascending.
    pub acked: Fated,
    /// Declared lost, ascending.
    pub lost: Fated,
    /// A packet sealed in the current key phase was acknowledged: that phase is confirmed
    /// (RFC 9001 §6.1), if it is still current. The epoch the path checked against.
    pub phase_acked: Option<u64>,
    /// The path was potentially failed and is alive again (an event for the application).
    pub recovered: bool,
    /// The path's PMTU changed (a probe acknowledged, a black hole): qlog's `mtu_updated`.
    pub mtu_updated: Option<crate::recovery::pmtud::PmtuChange>,
}

impl PacketFates {
    /// No packet changed fate.
    pub fn none(space: SpaceId) -> Self {
        Self { space, acked: Vec::new(), lost: Vec::new(), phase_acked: None, recovered: false, mtu_updated: None }
    }
}

impl PathState {
    /// Coupled congestion control takes the other paths' published views.
    pub(crate) fn couple(&mut self, seat: &Seat) {
        if let Some(views) = seat.coupling_views() {
            self.cc.set_coupling(views);
        }
    }

    /// An ACK or PATH_ACK frame acknowledging packets of this path's data space. Fails with
    /// PROTOCOL_VIOLATION, changing nothing, if it acknowledges a number never sent.
    pub(crate) fn on_path_ack(
        &mut self,
        now: Instant,
        ack: &AckFrame<'_>,
        params: &AckParams,
        seat: &mut Seat,
    ) -> Result<PacketFates, TransportError> {
        let exp = u32::from(params.ack_delay_exponent);
        // RFC 9000 §19.3: the field is scaled by 2^exponent; an overflow means "very long".
        let ack_delay = Duration::from_micros(
            ack.delay.checked_shl(exp).filter(|v| v >> exp == ack.delay).unwrap_or(u64::MAX >> 1),
        );
        let (mad, confirmed) = (params.max_ack_delay, params.handshake_confirmed);
        let result = if self.data.single.is_some() {
            // One space for all paths: the connection checked the frame against the
            // shared counter (`Host::on_single_space_ack`).
            self.data.loss.on_shared_space_ack(ack.iter(), ack_delay, now, &mut self.rtt, mad, confirmed)
        } else {
            self.data
                .loss
                .on_ack_received(ack.iter(), ack_delay, now, &mut self.rtt, mad, confirmed)
                .map_err(|_| TransportError::protocol_violation("ACK of an unsent packet number"))?
        };
        Ok(self.on_ack_result(now, SpaceId::Data, result, ack.ecn, params, seat))
    }

    /// The path's part of an ACK whose loss detection already ran (for the data space in
    /// [`PathState::on_path_ack`]; for the handshake spaces, whose ledgers are shared, by the
    /// connection): ECN validation, the PTO backoff, flight and window, the key-phase mark,
    /// then the lost packets; the path publishes its view at the end if anything changed.
    pub(crate) fn on_ack_result(
        &mut self,
        now: Instant,
        space: SpaceId,
        result: AckResult<SentFrames>,
        ecn: Option<EcnCounts>,
        params: &AckParams,
        seat: &mut Seat,
    ) -> PacketFates {
        let mut fates = PacketFates::none(space);
        if result.newly_acked.is_empty() && result.lost.is_empty() {
            return fates;
        }
        let acked = result.newly_acked;
        if space == SpaceId::Data {
            // HyStart++'s rounds are counted in the path's own packet numbers (RFC 9406 §4.2).
            if let Some((largest, _)) = acked.last() {
                let sample = result.rtt_sampled.then(|| self.rtt.latest());
                self.cc.on_ack_frame(*largest, self.data.loss.next_pn(), sample);
            }
            if let Some((sent, newly_ce)) = self.on_ack_ecn(&acked, ecn) {
                self.couple(seat);
                self.on_ce(now, sent, newly_ce);
            }
        }
        if !acked.is_empty() {
            // RFC 9002 §6.2.1: reset the backoff, except at a client that does not yet know
            // the server validated its address.
            if params.side == Side::Server || space != SpaceId::Initial {
                self.pto_count = 0;
                if self.potentially_failed {
                    self.potentially_failed = false;
                    fates.recovered = true;
                }
            }
            self.couple(seat);
            self.on_packets_acked(now, &acked);
            if space == SpaceId::Data {
                if let Some(epoch) = params.key_epoch {
                    if acked.iter().any(|(pn, _)| self.key_marks.acks_local_phase(epoch, *pn)) {
                        fates.phase_acked = Some(epoch);
                    }
                }
            }
        }
        let mut acked = acked;
        if space == SpaceId::Data && self.on_own_acks_acked(&mut acked) {
            seat.publish_offer(self);
        }
        if space == SpaceId::Data {
            fates.mtu_updated = self.pmtu_on_fates(now, &acked, &result.lost);
        }
        fates.acked = acked;
        self.on_lost(now, result.lost, result.persistent_congestion, seat, &mut fates);
        seat.publish(self);
        fates
    }

    /// Of the newly acknowledged packets, the (PATH_)ACK frames that acknowledged this
    /// path's own packets: the peer has seen them, so their ranges need not be reported again
    /// (RFC 9000 §13.2.4). The path prunes its own received ranges here and drops those
    /// entries; ACKs it carried for other paths stay for the shared side.
    /// Returns whether any was found (its ACK offer may have changed).
    fn on_own_acks_acked(&mut self, acked: &mut Fated) -> bool {
        let own = self.id;
        let mut any = false;
        for (_, p) in acked.iter_mut() {
            if p.frames.acks.iter().any(|&(id, _)| id == own) {
                for &(_, largest) in p.frames.acks.iter().filter(|&&(id, _)| id == own) {
                    self.data.received.on_ack_of_ack(largest);
                }
                p.frames.acks.retain(|&mut (id, _)| id != own);
                any = true;
            }
        }
        any
    }

    /// Packets of this path declared lost (by an ACK or the loss timer): congestion
    /// response and statistics here, the packets into `fates` for their frames. (The caller
    /// publishes the path's view.)
    pub(crate) fn on_lost(
        &mut self,
        now: Instant,
        lost: Fated,
        persistent: bool,
        seat: &mut Seat,
        fates: &mut PacketFates,
    ) {
        if lost.is_empty() {
            return;
        }
        if PathState::loss_is_congestion(&lost) {
            self.couple(seat);
        }
        self.on_packets_lost(now, &lost, persistent);
        fates.lost = lost;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::config::TransportConfig;
    use crate::conn::space::SentFrames;
    use crate::recovery::received::PRUNE_AFTER_RANGES;

    /// When a packet that carried ACKs is acknowledged, the path prunes its own received
    /// ranges below the ACK it sent (RFC 9000 §13.2.4) and leaves the ACKs it carried for
    /// other paths to the shared side.
    #[test]
    fn acknowledged_own_acks_prune_the_path_and_leave_the_others() {
        let mut p = PathState::new(3, "127.0.0.1:1".parse().expect("addr"), &TransportConfig::default(), true);
        // Enough gaps that pruning applies: every other packet number received.
        let ranges = 2 * PRUNE_AFTER_RANGES as u64;
        for pn in (0..ranges).map(|i| i * 2) {
            p.data.received.on_packet(pn, true, Instant::ZERO, None);
        }
        let before = p.data.received.ranges().len();
        let mut frames = SentFrames::default();
        frames.acks.push((3, ranges)); // our own ACK, Largest Acknowledged `ranges`
        frames.acks.push((7, 40)); // an ACK carried for path 7
        let sent = SentPacket {
            time_sent: Instant::ZERO,
            size: 100,
            ack_eliciting: false,
            in_flight: false,
            ecn: false,
            pmtu_probe: false,
            frames,
        };
        let mut acked: Fated = vec![(0, sent)];
        assert!(p.on_own_acks_acked(&mut acked), "own ACKs found");
        assert_eq!(acked[0].1.frames.acks.as_slice(), &[(7, 40)], "the other path's entry stays");
        let after = p.data.received.ranges().len();
        assert!(after < before, "own ranges below the acknowledged ACK pruned: {before} -> {after}");
        assert!(p.data.received.ranges().min().is_some_and(|m| m >= ranges), "{:?}", p.data.received.ranges().min());
    }
}
