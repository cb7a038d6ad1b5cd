//! What a path decides by itself about time: its probe timeout and loss-detection deadline
//! (RFC 9002 §6.2, Appendix A.8), how long to wait before challenging again (RFC 9000
//! §8.2.4), and whether its window and pacer let a packet out now (RFC 9002 §7, §7.7). The
//! connection supplies the few shared inputs (the peer's max_ack_delay, handshake
//! confirmation, its side).

use std::time::Duration;

use crate::stream::StreamChunk;
use crate::time::Instant;
use crate::types::SpaceId;

use super::board::Seat;
use super::multipath::DEAD_PATH_PTOS;

/// PTOs of silence on a path, while the peer is heard on another, after which a client
/// sends a PING on it. A client behind a NAT that rebinds (RFC 9000 §9.3) learns nothing
/// from the path: the peer's packets go to the old mapping and are dropped, and the client
/// of a download sends on the path only in reply to them, so the server would learn of the
/// new address only when some flow-control update happened to take the path, and
/// otherwise abandon it after `DEAD_PATH_PTOS`. The PING takes the new mapping, and the
/// server answers there (RFC 9000 §9.3). Two PTOs come well before the server's fourth.
pub(crate) const LIVENESS_PTOS: u32 = 2;
use super::path::{PathPhase, PathState};
use super::path_ack::PacketFates;

/// What a probe timeout of a path (RFC 9002 §6.2.4) leaves for the shared side.
#[derive(Debug, Default)]
pub(crate) struct PtoVerdict {
    /// The path just became potentially failed (De Coninck and Bonaventure, "Multipath
    /// QUIC: Design and Evaluation", CoNEXT 2017, §4.3): an event, and these STREAM chunks
    /// it has in flight to resend on the working paths now (RFC 10069
    /// §5.7). The packets stay in its ledger and may still be acknowledged.
    pub newly_failed: Option<Vec<StreamChunk>>,
    /// The path timed out `DEAD_PATH_PTOS` times in a row while another path works: to be
    /// abandoned.
    pub dead: bool,
    /// The PMTU fell back to the base (a black hole): qlog's `mtu_updated`.
    pub mtu_updated: Option<crate::recovery::pmtud::PmtuChange>,
}

/// What a path's loss-detection deadline is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathTimer {
    /// Time-threshold loss detection.
    Loss,
    /// Probe timeout.
    Pto,
}

impl PathState {
    /// The loss timer of the data space fired (RFC 9002 §6.1.2, Appendix A.10): the packets
    /// now too old are lost; their frames go back as fates. Publishes the path's view.
    pub(crate) fn on_loss_timer(&mut self, now: Instant, seat: &mut Seat) -> PacketFates {
        let lost = self.data.loss.detect_lost(now, &self.rtt);
        let mut fates = PacketFates::none(SpaceId::Data);
        fates.mtu_updated = self.pmtu_on_fates(now, &[], &lost);
        self.on_lost(now, lost, false, seat, &mut fates);
        seat.publish(self);
        fates
    }

    /// The probe timeout of the data space fired (RFC 9002 §6.2.4): backoff and two probes.
    /// With multipath and another path working (`others_work`), a path that showed no sign
    /// of life since the probed packet left is potentially failed, and after
    /// `DEAD_PATH_PTOS` timeouts dead, if data (not just PINGs) is in flight on it, or if
    /// the peer, silent here, sent something ack-eliciting on another path after that
    /// packet left (`heard_elsewhere`: the latest such arrival on the other paths).
    /// Publishes the path's view.
    pub(crate) fn on_pto(
        &mut self,
        others_work: bool,
        heard_elsewhere: Option<Instant>,
        seat: &mut Seat,
    ) -> PtoVerdict {
        self.pto_count += 1;
        self.stats.pto_count += 1;
        self.data.probes = 2;
        let mut verdict = PtoVerdict::default();
        // Every full-size packet may be vanishing (a black hole): the probes go out at the
        // base size then (RFC 8899 §4.3).
        let change = self.pmtud.on_pto(self.pto_count);
        verdict.mtu_updated = self.apply_pmtu(change);
        // Only data of ours that does not get through says the path failed. A PING alone (a
        // liveness or PMTU probe) says nothing: its acknowledgement may be due on another
        // path (PATH_ACKs on the lowest-RTT one) that itself failed, and then the path that
        // works was the one declared failed, and abandoned.
        let carries_data = self.data.loss.iter_outstanding().any(|(_, p)| p.in_flight && p.frames.carries_data());
        // Packets still arriving on the path since the probed one was sent: it is slow or
        // its ACKs are queued, not dead.
        let sent = self.data.loss.time_of_last_ack_eliciting();
        let alive = matches!((self.last_recv, sent), (Some(r), Some(s)) if r >= s);
        // The peer is at work on another path but sent nothing here since our packet left,
        // and it did not acknowledge it either (the PTO fired): the path, not the peer, is
        // gone. This is what a downloading client has to go on: it sends only ACKs, PINGs
        // and copies of flow-control frames on a path, none of them data of its own, and a
        // sender that keeps its in-flight data waiting on a dead path until the path is
        // abandoned (noq, RFC 10069 leaves it to the implementation) stalls the download
        // until the receiver abandons it.
        let silent_here = !alive && matches!((heard_elsewhere, sent), (Some(h), Some(s)) if h > s);
        if others_work && (carries_data || silent_here) {
            if !self.potentially_failed && !alive {
                self.potentially_failed = true;
                let chunks =
                    self.data.loss.iter_outstanding().flat_map(|(_, p)| p.frames.stream.iter().copied()).collect();
                verdict.newly_failed = Some(chunks);
            }
            verdict.dead = self.pto_count >= DEAD_PATH_PTOS;
        }
        seat.publish(self);
        verdict
    }

    /// Path validation's timer (RFC 9000 §8.2.4): our PATH_CHALLENGE is sent again after
    /// [`PathState::challenge_retry`], and validation fails three PTOs (at least six initial
    /// RTTs) after the last one sent when the timer first looks once validation may fail,
    /// and not before `fail_from` (the handshake's confirmation; `None` while it may not
    /// fail). Returns true when it failed.
    pub(crate) fn on_validation_timer(
        &mut self,
        now: Instant,
        max_ack_delay: Duration,
        initial_rtt: Duration,
        fail_from: Option<Instant>,
    ) -> bool {
        let retry = self.challenge_retry(max_ack_delay);
        let fail_after = (3 * (self.pto_base() + max_ack_delay)).max(6 * initial_rtt);
        let Some(c) = self.challenge.as_mut() else { return false };
        let Some(sent) = c.sent_at else { return false };
        if !c.send_pending && now >= sent + retry {
            c.send_pending = true;
        }
        // A client opens paths once its handshake is complete (RFC 10069 §3), before it is
        // confirmed. Until then the server may not have completed its own and holds our
        // packets (RFC 9001 §5.7), and our CIDs for the path may be in packets still being
        // resent on the first path: validation does not fail before the confirmation, and
        // gets its full time from then. (Behind a 0.1 Mbit/s first path, confirmation took
        // 4 s, and faster new paths were given up before the server could answer.)
        let Some(from) = fail_from else { return false };
        let fail_at = *c.fail_at.get_or_insert(sent.max(from) + fail_after);
        now >= fail_at
    }

    /// The probe timeout (RFC 9002 §6.2.1): PTO base plus `max_ack_delay` (zero for the
    /// handshake spaces), doubled per consecutive PTO.
    pub(crate) fn pto(&self, max_ack_delay: Duration) -> Duration {
        (self.pto_base() + max_ack_delay) * 2u32.saturating_pow(self.pto_count.min(16))
    }

    /// How long to wait for a PATH_RESPONSE before challenging again (RFC 9000 §8.2.4).
    pub(crate) fn challenge_retry(&self, max_ack_delay: Duration) -> Duration {
        (self.pto_base() + max_ack_delay) * 2u32.saturating_pow(self.pto_count.min(8))
    }

    /// The next loss-detection event of the path's data space (RFC 9002 Appendix A.8):
    /// a loss time, else a PTO once the handshake is confirmed and something ack-eliciting
    /// is in flight. A server whose amplification budget is spent arms no PTO: it could not
    /// send the probe.
    pub(crate) fn loss_deadline(
        &self,
        confirmed: bool,
        is_server: bool,
        max_ack_delay: Duration,
    ) -> Option<(Instant, PathTimer)> {
        if self.phase == PathPhase::Abandoned {
            return None;
        }
        if let Some(t) = self.data.loss.loss_time() {
            return Some((t, PathTimer::Loss));
        }
        if !confirmed || !self.data.loss.has_ack_eliciting_in_flight() {
            return None;
        }
        if is_server && self.amplification_budget() == 0 {
            return None;
        }
        let t = self.data.loss.time_of_last_ack_eliciting()?;
        Some((t + self.pto(max_ack_delay), PathTimer::Pto))
    }

    /// When to probe this path's liveness, and since when the peer has been silent on it:
    /// it is open and validated, the peer sent something ack-eliciting on it since the last
    /// probe (one probe per silence: a standby path the peer does not use is not probed
    /// again and again), nothing ack-eliciting of ours is in flight on it (else its PTO
    /// probes it), and neither we nor the peer used it for `LIVENESS_PTOS` PTOs. The caller
    /// sends the PING only while the peer is heard on another path since then.
    pub(crate) fn liveness_probe_at(&self, max_ack_delay: Duration) -> Option<(Instant, Instant)> {
        let used_since_probe =
            self.last_eliciting_recv.is_some_and(|r| self.liveness_probed_at.is_none_or(|probed| probed < r));
        if self.phase != PathPhase::Active
            || !self.validated
            || !used_since_probe
            || self.potentially_failed
            || self.data.probes > 0
            || self.data.loss.has_ack_eliciting_in_flight()
        {
            return None;
        }
        let heard = self.last_recv?;
        let silent_since = self.data.loss.time_of_last_ack_eliciting().map_or(heard, |s| s.max(heard));
        Some((silent_since, silent_since + LIVENESS_PTOS * (self.pto_base() + max_ack_delay)))
    }

    /// The congestion window has room for a full packet (whatever the pacer says).
    pub(crate) fn window_has_room(&self) -> bool {
        self.bytes_in_flight + u64::from(self.mtu) <= self.cc.window()
    }

    /// The window has room for a full packet and the pacer (if `pacing`, with GSO batches of
    /// up to that many segments) lets one out now. Held back by the pacer, the path notes
    /// when to try again and that its window, not the application, limits it.
    pub(crate) fn can_send_data(&mut self, now: Instant, pacing: Option<usize>) -> bool {
        let mtu = u64::from(self.mtu);
        if !self.window_has_room() {
            return false;
        }
        if let Some(segments) = pacing {
            let srtt = self.rtt.smoothed();
            let first_flight = !self.rtt.has_sample();
            let batch = super::send::max_batch_segments(segments, mtu as usize) as u64 * mtu;
            if let Some(at) = self.pacer.delay(now, mtu, mtu, batch, self.cc.window(), srtt, first_flight) {
                if at > now {
                    self.pacing_until = Some(at);
                    // The pacer spreads the window over the RTT: held back by it, the path
                    // is limited by its window, not by the application, if it would have
                    // filled the window without the pacing delay (RFC 9002 §7.8). A paced
                    // bulk sender keeps most of its window in flight; a trickle the pacer
                    // merely spaces out (a packet or two in flight) is application-limited.
                    if 2 * self.bytes_in_flight >= self.cc.window() {
                        self.window_full_at = Some(now);
                    }
                    return false;
                }
            }
        }
        self.pacing_until = None;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::board::Board;
    use crate::conn::config::TransportConfig;

    fn path(validated: bool) -> PathState {
        PathState::new(0, "127.0.0.1:1".parse().expect("addr"), &TransportConfig::default(), validated)
    }

    #[test]
    fn pto_doubles_per_consecutive_timeout() {
        let mut p = path(true);
        let mad = Duration::from_millis(25);
        let base = p.pto(mad);
        assert_eq!(base, p.pto_base() + mad);
        p.pto_count = 3;
        assert_eq!(p.pto(mad), base * 8);
        // The backoff is capped (2^16), so a long outage cannot overflow the duration.
        p.pto_count = 1000;
        assert_eq!(p.pto(mad), base * 65_536);
        assert_eq!(p.challenge_retry(mad), base * 256);
    }

    #[test]
    fn no_deadline_without_ack_eliciting_flight_or_once_abandoned() {
        let mut p = path(false);
        assert_eq!(p.loss_deadline(true, true, Duration::ZERO), None, "nothing in flight");
        p.phase = PathPhase::Abandoned;
        assert_eq!(p.loss_deadline(true, false, Duration::ZERO), None);
    }

    /// Sends an ack-eliciting packet carrying one STREAM chunk at `at_ms`.
    fn send_chunk(p: &mut PathState, at_ms: u64, offset: u64) -> u64 {
        use crate::conn::space::SentFrames;
        use crate::recovery::sent::SentPacket;
        let pn = p.data.take_pn();
        let mut frames = SentFrames::default();
        frames.stream.push(StreamChunk { id: crate::types::StreamId(0), offset, len: 1000, fin: false });
        let time_sent = Instant::ZERO + Duration::from_millis(at_ms);
        let sent = SentPacket::eliciting(time_sent, 1200, frames);
        p.data.loss.on_packet_sent(pn, sent);
        p.bytes_in_flight += 1200;
        pn
    }

    /// The PTO of `p` in slot 0, its seat taken from `board` and given back.
    fn pto(p: &mut PathState, others_work: bool, board: &mut Board) -> PtoVerdict {
        pto_heard(p, others_work, None, board)
    }

    /// [`pto`] with the peer last heard on another path at `heard_elsewhere`.
    fn pto_heard(
        p: &mut PathState,
        others_work: bool,
        heard_elsewhere: Option<Instant>,
        board: &mut Board,
    ) -> PtoVerdict {
        let mut seat = Seat::take(board, 0);
        let v = p.on_pto(others_work, heard_elsewhere, &mut seat);
        seat.give_back(board, p);
        v
    }

    /// The loss timer of `p` in slot 0, its seat taken from `board` and given back.
    fn loss_timer(p: &mut PathState, now: Instant, board: &mut Board) -> PacketFates {
        let mut seat = Seat::take(board, 0);
        let fates = p.on_loss_timer(now, &mut seat);
        seat.give_back(board, p);
        fates
    }

    #[test]
    fn a_timeout_fails_a_silent_path_then_declares_it_dead() {
        let mut board = Board::default();
        let mut p = path(true);
        board.publish(0, p.view());
        send_chunk(&mut p, 0, 0);
        send_chunk(&mut p, 1, 1000);
        // Alone (or with no other working path): backoff only.
        let v = pto(&mut p, false, &mut board);
        assert!(v.newly_failed.is_none() && !v.dead);
        assert_eq!((p.pto_count, p.data.probes), (1, 2));
        // Another path works and nothing arrived since the probed packet left: potentially
        // failed once, with its in-flight chunks to resend elsewhere; dead after
        // DEAD_PATH_PTOS timeouts in a row.
        let v = pto(&mut p, true, &mut board);
        let chunks = v.newly_failed.expect("newly failed");
        assert_eq!(chunks.iter().map(|c| c.offset).collect::<Vec<_>>(), [0, 1000]);
        assert!(p.potentially_failed && board.get(0).is_some_and(|v| v.potentially_failed), "published");
        let mut dead = v.dead;
        while p.pto_count < DEAD_PATH_PTOS {
            let v = pto(&mut p, true, &mut board);
            assert!(v.newly_failed.is_none(), "failed only once");
            dead = v.dead;
        }
        assert!(dead);
    }

    #[test]
    fn pings_alone_in_flight_do_not_fail_a_path() {
        use crate::conn::space::SentFrames;
        use crate::recovery::sent::SentPacket;
        let mut board = Board::default();
        let mut p = path(true);
        board.publish(0, p.view());
        // A liveness PING whose acknowledgement may be due on another, failed, path.
        let pn = p.data.take_pn();
        p.data.loss.on_packet_sent(pn, SentPacket::eliciting(Instant::ZERO, 40, SentFrames::default()));
        p.bytes_in_flight += 40;
        for _ in 0..DEAD_PATH_PTOS + 1 {
            let v = pto(&mut p, true, &mut board);
            assert!(v.newly_failed.is_none() && !v.dead, "PTO {}", p.pto_count);
        }
        assert!(!p.potentially_failed);
        // Data in flight does say it.
        send_chunk(&mut p, 1, 0);
        assert!(pto(&mut p, true, &mut board).newly_failed.is_some());
    }

    #[test]
    fn pings_alone_fail_a_path_the_peer_is_silent_on_while_heard_elsewhere() {
        use crate::conn::space::SentFrames;
        use crate::recovery::sent::SentPacket;
        let ms = |n| Instant::ZERO + Duration::from_millis(n);
        let mut board = Board::default();
        let mut p = path(true);
        board.publish(0, p.view());
        // A downloading client's last packets here: ACKs, then a PING (or a copy of a
        // flow-control frame, which is not tracked for retransmission), at 10 ms; the peer
        // was last heard here at 5 ms.
        p.last_recv = Some(ms(5));
        let pn = p.data.take_pn();
        p.data.loss.on_packet_sent(pn, SentPacket::eliciting(ms(10), 40, SentFrames::default()));
        p.bytes_in_flight += 40;
        // Heard elsewhere only before the PING left: nothing said yet.
        let v = pto_heard(&mut p, true, Some(ms(8)), &mut board);
        assert!(v.newly_failed.is_none() && !v.dead && !p.potentially_failed);
        // Heard elsewhere after it left, silent here: potentially failed (no data to move),
        // then dead after DEAD_PATH_PTOS timeouts.
        let v = pto_heard(&mut p, true, Some(ms(20)), &mut board);
        assert!(v.newly_failed.is_some_and(|c| c.is_empty()) && p.potentially_failed);
        let mut dead = v.dead;
        while p.pto_count < DEAD_PATH_PTOS {
            dead = pto_heard(&mut p, true, Some(ms(30)), &mut board).dead;
        }
        assert!(dead);
        // Without another working path, silence proves nothing.
        let mut q = path(true);
        q.last_recv = Some(ms(5));
        let pn = q.data.take_pn();
        q.data.loss.on_packet_sent(pn, SentPacket::eliciting(ms(10), 40, SentFrames::default()));
        for _ in 0..DEAD_PATH_PTOS + 1 {
            let v = pto_heard(&mut q, false, Some(ms(30)), &mut board);
            assert!(v.newly_failed.is_none() && !v.dead);
        }
        // Nor does a path the peer still sends on.
        let mut r = path(true);
        let pn = r.data.take_pn();
        r.data.loss.on_packet_sent(pn, SentPacket::eliciting(ms(10), 40, SentFrames::default()));
        r.last_recv = Some(ms(12));
        for _ in 0..DEAD_PATH_PTOS + 1 {
            let v = pto_heard(&mut r, true, Some(ms(30)), &mut board);
            assert!(v.newly_failed.is_none() && !v.dead);
        }
    }

    #[test]
    fn a_path_hearing_from_its_peer_is_slow_not_failed() {
        let mut board = Board::default();
        let mut p = path(true);
        board.publish(0, p.view());
        send_chunk(&mut p, 0, 0);
        p.last_recv = Some(Instant::ZERO + Duration::from_millis(5));
        let v = pto(&mut p, true, &mut board);
        assert!(v.newly_failed.is_none() && !p.potentially_failed);
    }

    #[test]
    fn a_silent_path_is_probed_two_ptos_after_it_was_last_used() {
        let ms = |n| Instant::ZERO + Duration::from_millis(n);
        let mad = Duration::from_millis(25);
        let mut p = path(true);
        p.phase = PathPhase::Active;
        assert_eq!(p.liveness_probe_at(mad), None, "never heard from");
        p.last_recv = Some(ms(100));
        assert_eq!(p.liveness_probe_at(mad), None, "only ACKs heard");
        p.last_eliciting_recv = Some(ms(100));
        let interval = LIVENESS_PTOS * (p.pto_base() + mad);
        assert_eq!(p.liveness_probe_at(mad), Some((ms(100), ms(100) + interval)));
        // Something ack-eliciting of ours in flight: its PTO watches the path.
        send_chunk(&mut p, 150, 0);
        assert_eq!(p.liveness_probe_at(mad), None);
        // Acknowledged: silence counts from our last packet.
        let acked = p.data.loss.on_ack_received(std::iter::once(0..1), Duration::ZERO, ms(190), &mut p.rtt, mad, true);
        assert!(acked.is_ok());
        assert!(!p.data.loss.has_ack_eliciting_in_flight());
        let interval = LIVENESS_PTOS * (p.pto_base() + mad);
        assert_eq!(p.liveness_probe_at(mad), Some((ms(150), ms(150) + interval)));
        // A probe already due, a potentially failed path, a path not validated: none.
        p.data.probes = 1;
        assert_eq!(p.liveness_probe_at(mad), None);
        p.data.probes = 0;
        p.potentially_failed = true;
        assert_eq!(p.liveness_probe_at(mad), None);
        p.potentially_failed = false;
        // Probed once: not again until the peer uses the path again.
        p.liveness_probed_at = Some(ms(400));
        assert_eq!(p.liveness_probe_at(mad), None);
        p.last_eliciting_recv = Some(ms(500));
        p.last_recv = Some(ms(500));
        assert!(p.liveness_probe_at(mad).is_some());
        p.validated = false;
        assert_eq!(p.liveness_probe_at(mad), None);
    }

    #[test]
    fn the_loss_timer_hands_lost_packets_back_as_fates() {
        let mut board = Board::default();
        let mut p = path(true);
        board.publish(0, p.view());
        let first = send_chunk(&mut p, 0, 0);
        for i in 1..=3 {
            send_chunk(&mut p, i, 1000 * i);
        }
        // Nothing acknowledged yet: the timer finds nothing lost.
        let fates = loss_timer(&mut p, Instant::ZERO + Duration::from_secs(1), &mut board);
        assert!(fates.lost.is_empty() && fates.acked.is_empty());
        assert_eq!(fates.space, SpaceId::Data);
        // Acknowledge the last packet; the first is then lost by the packet threshold.
        let ack_time = Instant::ZERO + Duration::from_millis(50);
        let r = p.data.loss.on_ack_received(
            std::iter::once(3..4),
            Duration::ZERO,
            ack_time,
            &mut p.rtt,
            Duration::ZERO,
            true,
        );
        let lost: Vec<u64> = r.expect("ack").lost.iter().map(|(pn, _)| *pn).collect();
        assert_eq!(lost, [first]);
        // Packets 1 and 2 are too recent for the time threshold at the ACK (9/8 of the
        // 50 ms RTT); a second later the timer declares them lost.
        let fates = loss_timer(&mut p, Instant::ZERO + Duration::from_secs(1), &mut board);
        assert_eq!(fates.lost.iter().map(|(pn, _)| *pn).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(p.stats.lost_packets, 2);
        assert_eq!(p.bytes_in_flight, 2 * 1200, "the timer's losses left the flight");
    }

    #[test]
    fn an_unanswered_challenge_is_repeated_then_fails() {
        use super::super::path::Challenge;
        let mut p = path(false);
        let (mad, irtt) = (Duration::from_millis(25), Duration::from_millis(100));
        let confirmed = Some(Instant::ZERO);
        assert!(!p.on_validation_timer(Instant::ZERO, mad, irtt, confirmed), "no challenge, no timer");
        let c = Challenge { data: [1; 8], send_pending: false, sent_at: None, fail_at: None, full_size: true };
        p.challenge = Some(c);
        assert!(!p.on_validation_timer(Instant::ZERO, mad, irtt, confirmed), "not sent yet");
        p.challenge.as_mut().expect("challenge").sent_at = Some(Instant::ZERO);
        let retry = p.challenge_retry(mad);
        assert!(!p.on_validation_timer(Instant::ZERO + retry / 2, mad, irtt, confirmed));
        assert!(!p.challenge.expect("challenge").send_pending);
        assert!(!p.on_validation_timer(Instant::ZERO + retry, mad, irtt, confirmed));
        assert!(p.challenge.expect("challenge").send_pending, "sent again after the retry time");
        // Fails at max(3 PTOs, 6 initial RTTs) after the first one.
        let fail_after = (3 * (p.pto_base() + mad)).max(6 * irtt);
        assert!(!p.on_validation_timer(Instant::ZERO + fail_after - Duration::from_millis(1), mad, irtt, confirmed));
        assert!(p.on_validation_timer(Instant::ZERO + fail_after, mad, irtt, confirmed));
    }

    #[test]
    fn validation_does_not_fail_before_the_handshake_is_confirmed_and_gets_its_full_time_after() {
        use super::super::path::Challenge;
        let mut p = path(false);
        let (mad, irtt) = (Duration::from_millis(25), Duration::from_millis(100));
        let c = Challenge {
            data: [1; 8],
            send_pending: false,
            sent_at: Some(Instant::ZERO),
            fail_at: None,
            full_size: true,
        };
        p.challenge = Some(c);
        let fail_after = (3 * (p.pto_base() + mad)).max(6 * irtt);
        let late = Instant::ZERO + 3 * fail_after;
        assert!(!p.on_validation_timer(late, mad, irtt, None), "failed before confirmation");
        assert!(p.challenge.expect("challenge").send_pending, "but still retried");
        // Confirmed at `late`: the path has until `late + fail_after`.
        assert!(!p.on_validation_timer(late, mad, irtt, Some(late)));
        assert!(!p.on_validation_timer(late + fail_after - Duration::from_millis(1), mad, irtt, Some(late)));
        assert!(p.on_validation_timer(late + fail_after, mad, irtt, Some(late)));
    }

    #[test]
    fn a_full_window_holds_data_back() {
        let mut p = path(true);
        assert!(p.can_send_data(Instant::ZERO, None));
        p.bytes_in_flight = p.cc.window();
        assert!(!p.can_send_data(Instant::ZERO, None));
    }
}
