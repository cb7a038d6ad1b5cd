//! What a path does by itself with the fate of its packets: bytes in flight, the congestion
//! window, the PTO backoff, ECN validation and its loss statistics (RFC 9002 §6-7). The
//! connection hands it the packets an ACK newly acknowledged or declared lost, and keeps for
//! itself only what is shared (the frames' return to streams and queues, key phases).

use crate::frame::EcnCounts;
use crate::recovery::ecn::EcnSignal;
use crate::recovery::sent::SentPacket;
use crate::time::Instant;

use super::path::PathState;
use super::space::SentFrames;

/// Packets by number, as loss detection reports them.
pub(crate) type Packets = [(u64, SentPacket<SentFrames>)];

impl PathState {
    /// Newly acknowledged packets of this path: they leave the flight and grow the window.
    pub(crate) fn on_packets_acked(&mut self, now: Instant, acked: &Packets) {
        let srtt = self.rtt.smoothed();
        let mut delivered = 0;
        let mut window_limited = false;
        for (_, p) in acked.iter().filter(|(_, p)| p.in_flight) {
            self.bytes_in_flight = self.bytes_in_flight.saturating_sub(u64::from(p.size));
            delivered += u64::from(p.size);
            // RFC 9002 §7.8: the window grows only on packets of flights it limited, i.e.
            // when it was full within a round trip of the packet's sending; a sender short
            // of data or of flow-control credit does not grow it.
            let app_limited = self.window_full_at.is_none_or(|t| t + srtt < p.time_sent);
            self.cc.on_ack(now, p.time_sent, u64::from(p.size), &self.rtt, app_limited);
            window_limited |= !app_limited;
        }
        self.delivery.on_acked(now, delivered, srtt, window_limited);
    }

    /// Packets of this path declared lost: they leave the flight, count in the statistics,
    /// and (if any was in flight) make one congestion event dated by the last of them
    /// (RFC 9002 §7.3.2), persistent congestion included (§7.6).
    pub(crate) fn on_packets_lost(&mut self, now: Instant, lost: &Packets, persistent: bool) {
        let mut lost_bytes = 0;
        let mut largest_sent_time = None;
        for (_, p) in lost {
            if p.in_flight {
                self.bytes_in_flight = self.bytes_in_flight.saturating_sub(u64::from(p.size));
            }
            // RFC 9000 §14.4: a lost PMTU probe is no reliable sign of congestion and
            // SHOULD NOT trigger a congestion control reaction; it is no lost data either.
            if p.pmtu_probe {
                continue;
            }
            self.stats.lost_packets += 1;
            self.stats.lost_bytes += u64::from(p.size);
            if p.in_flight {
                lost_bytes += u64::from(p.size);
                largest_sent_time = Some(p.time_sent);
            }
        }
        if let Some(sent) = largest_sent_time {
            // Losses within a recovery period are part of the event that began it.
            if self.cc.on_congestion_event(now, sent, persistent, lost_bytes) {
                self.stats.congestion_events += 1;
            }
        }
    }

    /// True if these lost packets will make a congestion event (the coupled controllers
    /// need a fresh view of the other paths before it).
    pub(crate) fn loss_is_congestion(lost: &Packets) -> bool {
        lost.iter().any(|(_, p)| p.in_flight && !p.pmtu_probe)
    }

    /// ECN validation of an ACK's counts (RFC 9000 §13.4.2). Returns the time of the
    /// congestion event newly CE-marked packets call for (RFC 9002 §7.1: one, dated by the
    /// largest newly acknowledged packet), to be applied with [`PathState::on_ce`].
    pub(crate) fn on_ack_ecn(&mut self, acked: &Packets, counts: Option<EcnCounts>) -> Option<(Instant, u64)> {
        let marked = acked.iter().filter(|(_, p)| p.ecn).count() as u64;
        let EcnSignal::Congestion { newly_ce } = self.ecn.on_ack(marked, counts) else { return None };
        acked.last().map(|(_, p)| (p.time_sent, newly_ce))
    }

    /// The congestion event of newly CE-marked packets (see [`PathState::on_ack_ecn`]).
    pub(crate) fn on_ce(&mut self, now: Instant, sent: Instant, newly_ce: u64) {
        self.stats.ecn_ce += newly_ce;
        if self.cc.on_congestion_event(now, sent, false, 0) {
            self.stats.congestion_events += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::conn::TransportConfig;

    /// Losses count as one congestion event per recovery period (RFC 9002 §7.3.2): more
    /// losses of packets sent before the window was reduced neither reduce it again nor
    /// count; a loss of a packet sent after the reduction does both.
    #[test]
    fn losses_in_one_recovery_period_are_one_congestion_event() {
        let at = |ms: u64| Instant::ZERO + Duration::from_millis(ms);
        let mut p = PathState::new(0, "127.0.0.1:1".parse().expect("addr"), &TransportConfig::default(), true);
        let sent = |ms: u64| SentPacket::eliciting(at(ms), 1200, SentFrames::default());
        p.bytes_in_flight = 10 * 1200;
        p.on_packets_lost(at(100), &[(1, sent(10)), (2, sent(11))], false);
        let (window, events) = (p.cc.window(), p.stats.congestion_events);
        assert_eq!((p.stats.lost_packets, events), (2, 1));
        for (pn, ms) in [(3, 12), (4, 13), (5, 99)] {
            p.on_packets_lost(at(100 + pn), &[(pn, sent(ms))], false);
        }
        assert_eq!((p.stats.lost_packets, p.stats.congestion_events, p.cc.window()), (5, 1, window));
        p.on_packets_lost(at(300), &[(6, sent(150))], false);
        assert_eq!(p.stats.congestion_events, 2);
        assert!(p.cc.window() < window, "a loss after the recovery period began reduces again");
    }
}
