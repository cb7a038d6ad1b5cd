//! Loss detection for one packet number space (RFC 9002 §6, Appendix A).

use std::ops::Range;
use std::time::Duration;

use super::rtt::RttEstimator;
use super::sent::{SentPacket, SentPackets};
use super::GRANULARITY;
use crate::time::Instant;

/// Packet reordering threshold (RFC 9002 §6.1.1).
pub const PACKET_THRESHOLD: u64 = 3;

/// The peer acknowledged a packet number we never sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("acknowledgement of an unsent packet number")]
pub struct AckError;

/// What one ACK frame changed.
#[derive(Debug)]
pub struct AckResult<F> {
    /// Packets acknowledged for the first time, ascending.
    pub newly_acked: Vec<(u64, SentPacket<F>)>,
    /// Packets declared lost, ascending.
    pub lost: Vec<(u64, SentPacket<F>)>,
    /// An RTT sample was taken.
    pub rtt_sampled: bool,
    /// The lost packets establish persistent congestion (RFC 9002 §7.6).
    pub persistent_congestion: bool,
}

impl<F> Default for AckResult<F> {
    fn default() -> Self {
        Self { newly_acked: Vec::new(), lost: Vec::new(), rtt_sampled: false, persistent_congestion: false }
    }
}

/// Sent packets of one space and the loss-detection state over them.
#[derive(Debug)]
pub struct LossDetection<F> {
    sent: SentPackets<F>,
    largest_acked: Option<u64>,
    loss_time: Option<Instant>,
    time_of_last_ack_eliciting: Option<Instant>,
    ack_eliciting_in_flight: u64,
    /// Bytes of the outstanding packets that count in flight.
    in_flight_bytes: u64,
    /// Largest packet number sent so far.
    largest_sent: Option<u64>,
}

impl<F> Default for LossDetection<F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F> LossDetection<F> {
    /// An empty space.
    pub fn new() -> Self {
        Self {
            sent: SentPackets::default(),
            largest_acked: None,
            loss_time: None,
            time_of_last_ack_eliciting: None,
            ack_eliciting_in_flight: 0,
            in_flight_bytes: 0,
            largest_sent: None,
        }
    }

    /// Records a sent packet.
    pub fn on_packet_sent(&mut self, pn: u64, p: SentPacket<F>) {
        if p.ack_eliciting {
            self.time_of_last_ack_eliciting = Some(p.time_sent);
            self.ack_eliciting_in_flight += 1;
        }
        self.in_flight_bytes += p.flight_bytes();
        self.largest_sent = Some(pn);
        self.sent.insert(pn, p);
    }

    /// The packet number after the largest sent (0 before any).
    pub fn next_pn(&self) -> u64 {
        self.largest_sent.map_or(0, |pn| pn + 1)
    }

    /// Largest packet number the peer acknowledged.
    pub fn largest_acked(&self) -> Option<u64> {
        self.largest_acked
    }

    /// When a time-threshold loss will be declared, if a packet is waiting for it.
    pub fn loss_time(&self) -> Option<Instant> {
        self.loss_time
    }

    /// When the last ack-eliciting packet was sent.
    pub fn time_of_last_ack_eliciting(&self) -> Option<Instant> {
        self.time_of_last_ack_eliciting
    }

    /// True while an ack-eliciting packet awaits acknowledgement.
    pub fn has_ack_eliciting_in_flight(&self) -> bool {
        self.ack_eliciting_in_flight > 0
    }

    /// Bytes of the packets awaiting acknowledgement that count in flight (this space's
    /// share of the path's bytes in flight).
    pub fn in_flight_bytes(&self) -> u64 {
        self.in_flight_bytes
    }

    /// Every packet awaiting acknowledgement, oldest first.
    pub fn iter_outstanding(&self) -> impl DoubleEndedIterator<Item = (u64, &SentPacket<F>)> {
        self.sent.iter_range(self.sent.first_pn(), self.sent.end_pn())
    }

    /// Packets awaiting acknowledgement numbered from `start`, ascending.
    pub fn iter_outstanding_from(&self, start: u64) -> impl DoubleEndedIterator<Item = (u64, &SentPacket<F>)> {
        self.sent.iter_range(start, self.sent.end_pn())
    }

    /// Packets awaiting acknowledgement numbered below `end`, ascending.
    pub fn iter_outstanding_below(&self, end: u64) -> impl DoubleEndedIterator<Item = (u64, &SentPacket<F>)> {
        self.sent.iter_range(self.sent.first_pn(), end.min(self.sent.end_pn()))
    }

    /// Packets awaiting acknowledgement.
    pub fn outstanding(&self) -> usize {
        self.sent.len()
    }

    fn take(&mut self, pn: u64) -> Option<SentPacket<F>> {
        let p = self.sent.remove(pn)?;
        if p.ack_eliciting {
            self.ack_eliciting_in_flight -= 1;
        }
        self.in_flight_bytes -= p.flight_bytes();
        Some(p)
    }

    /// Processes the acknowledged ranges of an ACK frame (highest first), then detects
    /// losses (RFC 9002 Appendix A.7).
    pub fn on_ack_received(
        &mut self,
        ranges: impl Iterator<Item = Range<u64>>,
        ack_delay: Duration,
        now: Instant,
        rtt: &mut RttEstimator,
        max_ack_delay: Duration,
        handshake_confirmed: bool,
    ) -> Result<AckResult<F>, AckError> {
        let mut res = AckResult::default();
        let mut largest: Option<u64> = None;
        for r in ranges {
            if largest.is_none() {
                largest = r.end.checked_sub(1);
                if self.largest_sent.is_none_or(|s| r.end > s + 1) {
                    return Err(AckError);
                }
            }
            self.take_range(r, &mut res);
        }
        let Some(largest) = largest else { return Ok(res) };
        self.on_acked(largest, false, res, ack_delay, now, rtt, max_ack_delay, handshake_confirmed)
    }

    /// Like [`LossDetection::on_ack_received`] for an ACK frame of a packet number space
    /// this ledger shares with others (one space for all paths): the frame also reports
    /// numbers other ledgers sent, so numbers we never sent are not an error (the caller
    /// checks the frame against the shared counter), and "the largest acknowledged" of
    /// RFC 9002 is the largest of our own packets the frame newly acknowledges: loss
    /// detection and RTT samples stay per path, as in picoquic's single-space mode (seed
    /// 003 §3), so another path's faster packets do not make ours look lost. The ACK Delay
    /// belongs to the frame's largest number and may be shorter than our packet waited at
    /// the receiver, which makes the samples larger: the imprecision seed 003 names. The
    /// packet threshold (RFC 9002 §6.1.1) still counts packet numbers, which the other
    /// paths' packets interleave: it fires after fewer of our own packets.
    #[allow(clippy::too_many_arguments)]
    pub fn on_shared_space_ack(
        &mut self,
        ranges: impl Iterator<Item = Range<u64>>,
        ack_delay: Duration,
        now: Instant,
        rtt: &mut RttEstimator,
        max_ack_delay: Duration,
        handshake_confirmed: bool,
    ) -> AckResult<F> {
        let mut res = AckResult::default();
        for r in ranges {
            self.take_range(r, &mut res);
        }
        let Some(largest) = res.newly_acked.iter().map(|(pn, _)| *pn).max() else { return res };
        // An older packet of ours acknowledged late is no RTT sample (RFC 9002 §5.1).
        let newest = self.largest_acked.is_none_or(|l| largest > l);
        self.on_acked(largest, !newest, res, ack_delay, now, rtt, max_ack_delay, handshake_confirmed)
            .unwrap_or_default()
    }

    /// Takes the packets of `r` out of the ledger into `res`.
    fn take_range(&mut self, r: Range<u64>, res: &mut AckResult<F>) {
        let lo = r.start.max(self.sent.first_pn());
        let hi = r.end.min(self.sent.end_pn());
        // Room for the range at once (at most what the ledger holds): grown push by push, the
        // records of a 64-packet ACK (104 bytes each) were copied at 4, 8, 16, 32 and 64 of
        // them, five reallocations per ACK in the sender's profile.
        let most = usize::try_from(hi.saturating_sub(lo)).unwrap_or(usize::MAX).min(self.sent.len());
        res.newly_acked.reserve(most);
        for pn in lo..hi {
            if let Some(p) = self.take(pn) {
                res.newly_acked.push((pn, p));
            }
        }
    }

    /// The rest of an ACK once its packets left the ledger: the largest acknowledged, the
    /// RTT sample (unless `no_sample`), then loss detection.
    #[allow(clippy::too_many_arguments)]
    fn on_acked(
        &mut self,
        largest: u64,
        no_sample: bool,
        mut res: AckResult<F>,
        ack_delay: Duration,
        now: Instant,
        rtt: &mut RttEstimator,
        max_ack_delay: Duration,
        handshake_confirmed: bool,
    ) -> Result<AckResult<F>, AckError> {
        if res.newly_acked.is_empty() {
            return Ok(res);
        }
        res.newly_acked.sort_unstable_by_key(|(pn, _)| *pn);
        self.largest_acked = Some(self.largest_acked.map_or(largest, |l| l.max(largest)));
        let had_sample_before = rtt.has_sample();
        // RTT sample: the largest acknowledged is newly acked and something new was
        // ack-eliciting (RFC 9002 §5.1).
        if let Some((pn, p)) = res.newly_acked.last().filter(|_| !no_sample) {
            if *pn == largest && res.newly_acked.iter().any(|(_, p)| p.ack_eliciting) {
                rtt.update(ack_delay, now - p.time_sent, max_ack_delay, handshake_confirmed);
                res.rtt_sampled = true;
            }
        }
        res.lost = self.detect_lost(now, rtt);
        res.persistent_congestion =
            had_sample_before && persistent_congestion(&res.lost, rtt, max_ack_delay, &res.newly_acked);
        Ok(res)
    }

    /// Declares lost every packet below the largest acknowledged that is too old by packet
    /// or time threshold (RFC 9002 §6.1, Appendix A.10), and re-arms the loss time.
    pub fn detect_lost(&mut self, now: Instant, rtt: &RttEstimator) -> Vec<(u64, SentPacket<F>)> {
        self.loss_time = None;
        let Some(largest) = self.largest_acked else { return Vec::new() };
        let loss_delay = (rtt.latest().max(rtt.smoothed()) * 9 / 8).max(GRANULARITY);
        let lost_send_time = now - loss_delay;
        let mut lost_pns = Vec::new();
        let mut loss_time: Option<Instant> = None;
        for (pn, p) in self.sent.iter_range(0, largest) {
            if pn + PACKET_THRESHOLD <= largest || p.time_sent <= lost_send_time {
                lost_pns.push(pn);
            } else {
                let t = p.time_sent + loss_delay;
                loss_time = Some(loss_time.map_or(t, |l| l.min(t)));
            }
        }
        self.loss_time = loss_time;
        lost_pns.into_iter().filter_map(|pn| self.take(pn).map(|p| (pn, p))).collect()
    }

    /// Removes every packet without declaring it lost (key discard, path abandon).
    pub fn discard_all(&mut self) -> Vec<(u64, SentPacket<F>)> {
        self.loss_time = None;
        self.time_of_last_ack_eliciting = None;
        self.ack_eliciting_in_flight = 0;
        self.in_flight_bytes = 0;
        self.sent.drain()
    }
}

/// RFC 9002 §7.6.2: ack-eliciting losses spanning more than the persistent congestion
/// duration, with nothing acknowledged in between.
fn persistent_congestion<F>(
    lost: &[(u64, SentPacket<F>)],
    rtt: &RttEstimator,
    max_ack_delay: Duration,
    acked: &[(u64, SentPacket<F>)],
) -> bool {
    let mut eliciting = lost.iter().filter(|(_, p)| p.ack_eliciting);
    let Some((first_pn, first)) = eliciting.next() else { return false };
    let Some((last_pn, last)) = lost.iter().rev().find(|(_, p)| p.ack_eliciting) else { return false };
    let duration = (rtt.smoothed() + (4 * rtt.rttvar()).max(GRANULARITY) + max_ack_delay) * 3;
    if last.time_sent - first.time_sent <= duration {
        return false;
    }
    // Nothing acknowledged between the two: the lost packets form one contiguous episode.
    !acked.iter().any(|(pn, _)| pn > first_pn && pn < last_pn)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn sent(ms: u64) -> SentPacket<()> {
        SentPacket::eliciting(t(ms), 1200, ())
    }

    fn ld(n: u64) -> LossDetection<()> {
        let mut l = LossDetection::new();
        for pn in 0..n {
            l.on_packet_sent(pn, sent(pn));
        }
        l
    }

    #[test]
    fn packet_threshold() {
        let mut l = ld(5);
        let mut rtt = RttEstimator::new(100 * MS);
        let r = l.on_ack_received(std::iter::once(3..4), Duration::ZERO, t(100), &mut rtt, 25 * MS, true).unwrap();
        assert_eq!(r.newly_acked.len(), 1);
        assert!(r.rtt_sampled);
        assert_eq!(r.lost.iter().map(|(pn, _)| *pn).collect::<Vec<_>>(), vec![0]);
        // 1 and 2 wait for the time threshold.
        assert!(l.loss_time().is_some());
        let lost = l.detect_lost(t(1000), &rtt);
        assert_eq!(lost.iter().map(|(pn, _)| *pn).collect::<Vec<_>>(), vec![1, 2]);
        assert!(l.loss_time().is_none());
    }

    #[test]
    fn unsent_and_duplicate_acks() {
        let mut l = ld(3);
        let mut rtt = RttEstimator::new(100 * MS);
        assert_eq!(
            l.on_ack_received(std::iter::once(0..4), Duration::ZERO, t(50), &mut rtt, 25 * MS, true).unwrap_err(),
            AckError
        );
        let r = l.on_ack_received(std::iter::once(0..3), Duration::ZERO, t(50), &mut rtt, 25 * MS, true).unwrap();
        assert_eq!(r.newly_acked.len(), 3);
        let r = l.on_ack_received(std::iter::once(0..3), Duration::ZERO, t(60), &mut rtt, 25 * MS, true).unwrap();
        assert!(r.newly_acked.is_empty() && r.lost.is_empty());
        assert!(!l.has_ack_eliciting_in_flight());
    }

    #[test]
    fn persistent_congestion_needs_a_long_episode() {
        let mut rtt = RttEstimator::new(100 * MS);
        rtt.update(Duration::ZERO, 10 * MS, 25 * MS, true);
        let mut l = LossDetection::new();
        // Packets 0..10 over 2 s, then 10 acked: 0..7 lost by threshold, spanning > 3 PTO.
        for pn in 0..11 {
            l.on_packet_sent(pn, sent(pn * 200));
        }
        let r = l.on_ack_received(std::iter::once(10..11), Duration::ZERO, t(2100), &mut rtt, 25 * MS, true).unwrap();
        assert!(r.persistent_congestion);
        // A short episode is not persistent.
        let mut l = ld(5);
        let r = l.on_ack_received(std::iter::once(4..5), Duration::ZERO, t(10), &mut rtt, 25 * MS, true).unwrap();
        assert!(!r.lost.is_empty());
        assert!(!r.persistent_congestion);
    }
}
