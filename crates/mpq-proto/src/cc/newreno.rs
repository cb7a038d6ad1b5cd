//! NewReno (RFC 9002 §7, Appendix B).

use super::window::{Algorithm, WindowCore};
use super::*;

/// NewReno congestion controller.
#[derive(Debug, Clone)]
pub struct NewReno {
    core: WindowCore,
    /// Bytes acknowledged in congestion avoidance since the last window increase.
    acked: u64,
}

impl NewReno {
    /// A controller at the initial window.
    pub fn new(config: CcConfig, mds: u64) -> Self {
        Self { core: WindowCore::new(config, mds), acked: 0 }
    }
}

impl Algorithm for NewReno {
    const NAME: &'static str = "newreno";

    fn core(&self) -> &WindowCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut WindowCore {
        &mut self.core
    }

    /// One maximum datagram size per window of bytes acknowledged.
    fn grow(&mut self, _now: Instant, bytes: u64, _rtt: &RttEstimator) {
        self.acked += bytes;
        if self.acked >= self.core.window {
            self.acked -= self.core.window;
            self.core.window = self.core.window.saturating_add(self.core.mds);
        }
    }

    /// Halves the window.
    fn reduce(&mut self) {
        self.core.reduce_to(self.core.window / 2);
        self.acked = 0;
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
