//! CUBIC (RFC 9438) with its Reno-friendly region and fast convergence.

use std::time::Duration;

use super::window::{Algorithm, WindowCore};
use super::*;

/// CUBIC scaling constant C (RFC 9438 §5.1), in segments per second cubed.
const C: f64 = 0.4;
/// Multiplicative decrease factor (RFC 9438 §4.6).
const BETA: f64 = 0.7;

/// CUBIC congestion controller.
#[derive(Debug, Clone)]
pub struct Cubic {
    core: WindowCore,
    /// Window before the last reduction, in bytes (W_max).
    w_max: f64,
    /// Time to reach W_max again, seconds (K).
    k: f64,
    /// Start of the current congestion avoidance epoch.
    epoch_start: Option<Instant>,
    /// The Reno-friendly estimate W_est, bytes.
    w_est: f64,
    /// Bytes acknowledged toward the next increment of the window.
    acked: u64,
}

impl Cubic {
    /// A controller at the initial window.
    pub fn new(config: CcConfig, mds: u64) -> Self {
        Self { core: WindowCore::new(config, mds), w_max: 0.0, k: 0.0, epoch_start: None, w_est: 0.0, acked: 0 }
    }

    /// W_cubic(t) in bytes (RFC 9438 §4.2).
    fn w_cubic(&self, t: f64) -> f64 {
        let mds = self.core.mds as f64;
        (C * (t - self.k).powi(3)) * mds + self.w_max
    }
}

impl Algorithm for Cubic {
    const NAME: &'static str = "cubic";

    fn core(&self) -> &WindowCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut WindowCore {
        &mut self.core
    }

    fn grow(&mut self, now: Instant, bytes: u64, rtt: &RttEstimator) {
        let mds = self.core.mds as f64;
        let cwnd = self.core.window as f64;
        // RFC 9438 §4.2: a new epoch starts at the first ACK in congestion avoidance.
        let epoch = *self.epoch_start.get_or_insert(now);
        if self.w_max < cwnd && epoch == now {
            self.w_max = cwnd;
            self.k = 0.0;
        }
        if self.w_est == 0.0 {
            self.w_est = cwnd;
        }
        let t = (now - epoch).as_secs_f64();
        let srtt = rtt.smoothed().max(Duration::from_millis(1)).as_secs_f64();
        // Target one RTT ahead, clamped to [cwnd, 1.5 cwnd] (RFC 9438 §4.2).
        let target = self.w_cubic(t + srtt).clamp(cwnd, 1.5 * cwnd);
        // Reno-friendly estimate (RFC 9438 §4.3).
        let alpha = 3.0 * (1.0 - BETA) / (1.0 + BETA);
        self.w_est += alpha * mds * (bytes as f64 / cwnd);
        if self.w_est > target {
            self.core.window = self.w_est.max(cwnd) as u64;
            return;
        }
        // Concave/convex region: grow by (target - cwnd) / cwnd per acknowledged MDS.
        self.acked = self.acked.saturating_add(bytes);
        let inc = ((target - cwnd) / cwnd * self.acked as f64) as u64;
        if inc > 0 {
            self.core.window = self.core.window.saturating_add(inc);
            self.acked = 0;
        }
    }

    fn reduce(&mut self) {
        let cwnd = self.core.window as f64;
        // Fast convergence (RFC 9438 §4.7).
        self.w_max = if cwnd < self.w_max { cwnd * (1.0 + BETA) / 2.0 } else { cwnd };
        self.core.reduce_to((cwnd * BETA) as u64);
        self.k = ((self.w_max - self.core.window as f64) / (C * self.core.mds as f64)).max(0.0).cbrt();
        self.w_est = self.core.window as f64;
        self.epoch_start = None;
        self.acked = 0;
    }

    fn on_persistent_congestion(&mut self) {
        self.w_max = 0.0;
        self.k = 0.0;
        self.epoch_start = None;
        self.w_est = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn reduction_follows_beta_and_regrows_to_w_max() {
        let mut rtt = RttEstimator::new(Duration::from_millis(100));
        rtt.update(Duration::ZERO, Duration::from_millis(100), Duration::from_millis(25), true);
        let mds = 1200;
        let mut cc = Cubic::new(CcConfig::default(), mds);
        // Slow start to 120 kB.
        cc.on_ack(t(0), t(0), 108_000, &rtt, false);
        assert_eq!(cc.window(), 120_000);
        cc.on_congestion_event(t(10), t(5), false, 1200);
        assert_eq!(cc.window(), 84_000);
        let k = ((120_000.0 - 84_000.0) / (C * mds as f64)).cbrt();
        // Feed ACKs at one window per RTT; after K seconds the window is back near W_max.
        let mut now = 20;
        while (now as f64) < 20.0 + k * 1000.0 {
            let w = cc.window();
            cc.on_ack(t(now), t(now - 1), w, &rtt, false);
            now += 100;
        }
        let w = cc.window() as f64;
        assert!((w - 120_000.0).abs() / 120_000.0 < 0.15, "window {w} after K={k}");
        // Beyond K the curve is convex: the window grows past W_max along W_cubic.
        for _ in 0..30 {
            let w = cc.window();
            cc.on_ack(t(now), t(now - 1), w, &rtt, false);
            now += 100;
        }
        let epoch_t = (now - 100 - 20) as f64 / 1000.0;
        let expected = C * (epoch_t - k).powi(3) * mds as f64 + 120_000.0;
        let w = cc.window() as f64;
        assert!(w > 120_000.0 && (w - expected).abs() / expected < 0.03, "window {w}, W_cubic {expected}");
    }

    #[test]
    fn never_below_minimum() {
        let rtt = RttEstimator::new(Duration::ZERO);
        let mut cc = Cubic::new(CcConfig::default(), 1200);
        for i in 0..50 {
            cc.on_congestion_event(t(i * 10 + 1), t(i * 10), i % 3 == 0, u64::MAX);
            cc.on_ack(t(i * 10 + 5), t(i * 10 + 2), u64::MAX / 4, &rtt, false);
        }
        assert!(cc.window() >= 2400);
    }
}
