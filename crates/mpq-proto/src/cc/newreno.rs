//! NewReno (RFC 9002 §7, Appendix B).

use super::{CcConfig, CongestionController};
use crate::recovery::rtt::RttEstimator;
use crate::time::Instant;

/// NewReno congestion controller.
#[derive(Debug, Clone)]
pub struct NewReno {
    config: CcConfig,
    mds: u64,
    window: u64,
    ssthresh: u64,
    recovery_start: Option<Instant>,
    /// Bytes acknowledged in congestion avoidance since the last window increase.
    acked: u64,
}

impl NewReno {
    /// A controller at the initial window.
    pub fn new(config: CcConfig, mds: u64) -> Self {
        Self { config, mds, window: config.initial_window(mds), ssthresh: u64::MAX, recovery_start: None, acked: 0 }
    }
}

impl CongestionController for NewReno {
    fn on_packet_sent(&mut self, _now: Instant, _bytes: u64) {}

    fn on_ack(&mut self, _now: Instant, sent_time: Instant, bytes: u64, _rtt: &RttEstimator, app_limited: bool) {
        // RFC 9002 §7.3.2: packets sent before recovery started do not grow the window.
        if app_limited || self.recovery_start.is_some_and(|r| sent_time <= r) {
            return;
        }
        if self.window < self.ssthresh {
            self.window = self.window.saturating_add(bytes);
        } else {
            self.acked += bytes;
            if self.acked >= self.window {
                self.acked -= self.window;
                self.window = self.window.saturating_add(self.mds);
            }
        }
    }

    fn on_congestion_event(&mut self, now: Instant, sent_time: Instant, is_persistent: bool, _lost_bytes: u64) {
        let min = self.config.minimum_window(self.mds);
        if self.recovery_start.is_none_or(|r| sent_time > r) {
            self.recovery_start = Some(now);
            self.ssthresh = (self.window / 2).max(min);
            self.window = self.ssthresh;
            self.acked = 0;
        }
        if is_persistent {
            // RFC 9002 §7.6.2: collapse to the minimum window.
            self.window = min;
        }
    }

    fn window(&self) -> u64 {
        self.window
    }

    fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    fn set_max_datagram_size(&mut self, mds: u64) {
        self.window = self.config.rescale_window(self.window, self.ssthresh, self.mds, mds);
        self.mds = mds;
    }

    fn name(&self) -> &'static str {
        "newreno"
    }

    fn clone_box(&self) -> Box<dyn CongestionController> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn slow_start_recovery_and_persistent_congestion() {
        let rtt = RttEstimator::new(Duration::from_millis(100));
        let mut cc = NewReno::new(CcConfig::default(), 1200);
        let t = |ms| Instant::ZERO + Duration::from_millis(ms);
        assert_eq!(cc.window(), 12_000);
        cc.on_ack(t(100), t(0), 12_000, &rtt, false);
        assert_eq!(cc.window(), 24_000);
        cc.on_congestion_event(t(200), t(150), false, 1200);
        assert_eq!(cc.window(), 12_000);
        // Same recovery period: no second reduction, no growth from old packets.
        cc.on_congestion_event(t(210), t(190), false, 1200);
        cc.on_ack(t(220), t(190), 1200, &rtt, false);
        assert_eq!(cc.window(), 12_000);
        // Congestion avoidance: one MDS per window acknowledged.
        cc.on_ack(t(400), t(300), 12_000, &rtt, false);
        assert_eq!(cc.window(), 13_200);
        cc.on_congestion_event(t(500), t(450), true, 1200);
        assert_eq!(cc.window(), 2400);
        // Never below the minimum, whatever happens.
        for i in 0..10 {
            cc.on_congestion_event(t(600 + i * 100), t(590 + i * 100), true, u64::MAX);
        }
        assert_eq!(cc.window(), 2400);
        cc.on_ack(t(2000), t(1990), u64::MAX, &rtt, false);
        assert!(cc.window() >= 2400);
    }
}
