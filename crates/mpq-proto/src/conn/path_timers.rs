//! What a path decides by itself about time: its probe timeout and loss-detection deadline
//! (RFC 9002 §6.2, Appendix A.8), how long to wait before challenging again (RFC 9000
//! §8.2.4), and whether its window and pacer let a packet out now (RFC 9002 §7, §7.7). The
//! connection supplies the few shared inputs (the peer's max_ack_delay, handshake
//! confirmation, its side).

use std::time::Duration;

use crate::time::Instant;

use super::path::{PathPhase, PathState};

/// What a path's loss-detection deadline is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathTimer {
    /// Time-threshold loss detection.
    Loss,
    /// Probe timeout.
    Pto,
}

impl PathState {
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

    /// The window has room for a full packet and the pacer (if `pacing`) lets one out now.
    /// Held back by the pacer, the path notes when to try again and that its window, not
    /// the application, limits it.
    pub(crate) fn can_send_data(&mut self, now: Instant, pacing: bool) -> bool {
        let mtu = u64::from(self.mtu);
        if self.bytes_in_flight + mtu > self.cc.window() {
            return false;
        }
        if pacing {
            let srtt = self.rtt.smoothed();
            if let Some(at) = self.pacer.delay(now, mtu, mtu, self.cc.window(), srtt) {
                if at > now {
                    self.pacing_until = Some(at);
                    // The pacer spreads the window over the RTT: held back by it, the path
                    // is limited by its window, not by the application (RFC 9002 §7.8).
                    self.window_full_at = Some(now);
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

    #[test]
    fn a_full_window_holds_data_back() {
        let mut p = path(true);
        assert!(p.can_send_data(Instant::ZERO, false));
        p.bytes_in_flight = p.cc.window();
        assert!(!p.can_send_data(Instant::ZERO, false));
    }
}
