//! LIA, the Linked Increases Algorithm of MPTCP (RFC 6356), per path in bytes.
//!
//! In congestion avoidance each acknowledgement of `b` bytes on path i grows its window by
//! `min(alpha * b * mss / total, b * mss / w_i)`, with
//! `alpha = total * max_i(w_i / rtt_i^2) / (sum_i w_i / rtt_i)^2` (RFC 6356 §3): the
//! connection as a whole is no more aggressive than one Reno flow on its best path, and no
//! path grows faster than a Reno flow would on it. Slow start and loss are Reno's.

use super::coupled::{rtt_s, CoupledAlgorithm, CoupledWindow};
use super::*;

/// LIA congestion controller of one path.
#[derive(Debug, Clone)]
pub struct Lia {
    w: CoupledWindow,
}

impl Lia {
    /// A controller at the initial window.
    pub fn new(config: CcConfig, mds: u64) -> Self {
        Self { w: CoupledWindow::new(config, mds) }
    }

    /// RFC 6356 alpha over this path (`own`) and the others.
    pub fn alpha(own: CouplingView, others: &[CouplingView]) -> f64 {
        let all = || std::iter::once(own).chain(others.iter().copied());
        let total: f64 = all().map(|p| p.window as f64).sum();
        let best = all().map(|p| p.window as f64 / rtt_s(p.srtt).powi(2)).fold(0.0, f64::max);
        let denom: f64 = all().map(|p| p.window as f64 / rtt_s(p.srtt)).sum();
        if denom <= 0.0 {
            return 1.0;
        }
        total * best / (denom * denom)
    }
}

impl CoupledAlgorithm for Lia {
    const NAME: &'static str = "lia";

    fn coupled(&self) -> &CoupledWindow {
        &self.w
    }

    fn coupled_mut(&mut self) -> &mut CoupledWindow {
        &mut self.w
    }

    fn increase(w: &CoupledWindow, srtt: f64, bytes: u64) -> f64 {
        let own = CouplingView { window: w.window, srtt, ..Default::default() };
        let total = (w.window + w.others.iter().map(|p| p.window).sum::<u64>()) as f64;
        let mss = w.mds as f64;
        let b = bytes as f64;
        let coupled = Self::alpha(own, &w.others) * b * mss / total.max(1.0);
        let reno = b * mss / (w.window as f64).max(1.0);
        coupled.min(reno)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::NewReno;
    use std::time::Duration;

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    /// Leaves slow start with a loss, at `window` bytes.
    fn in_ca<C: CongestionController>(cc: &mut C, rtt: &RttEstimator) {
        cc.on_ack(t(10), t(1), 100_000, rtt, false);
        cc.on_congestion_event(t(20), t(15), false, 1200);
    }

    fn grow<C: CongestionController>(cc: &mut C, rtt: &RttEstimator, rounds: u64) -> u64 {
        let start = cc.window();
        for i in 0..rounds {
            let w = cc.window();
            cc.on_ack(t(100 + i * 100), t(50 + i * 100), w, rtt, false);
        }
        cc.window() - start
    }

    #[test]
    fn alone_it_grows_like_reno() {
        let rtt = RttEstimator::new(Duration::from_millis(50));
        let (mut lia, mut reno) = (Lia::new(CcConfig::default(), 1200), NewReno::new(CcConfig::default(), 1200));
        in_ca(&mut lia, &rtt);
        in_ca(&mut reno, &rtt);
        assert_eq!(lia.window(), reno.window());
        let (a, b) = (grow(&mut lia, &rtt, 20), grow(&mut reno, &rtt, 20));
        assert!((a as f64 - b as f64).abs() <= 0.05 * b as f64, "lia {a} reno {b}");
    }

    #[test]
    fn two_equal_paths_together_match_one_reno_flow_at_equilibrium() {
        let own = CouplingView { window: 60_000, srtt: 0.05, ..Default::default() };
        let alpha = Lia::alpha(own, &[own]);
        assert!((alpha - 0.5).abs() < 1e-9, "alpha {alpha}");
        let mut w = CoupledWindow::new(CcConfig::default(), 1200);
        w.window = 60_000;
        w.others = vec![own];
        // One RTT on a path acknowledges its window: it grows by a quarter MSS. At the same
        // loss rate p a Reno flow of window W balances 1 MSS/RTT against p*W*W/2; each of the
        // two paths (W/2 each) balances 1/4 MSS/RTT against p*(W/2)*(W/2)/2: the same total.
        let per_path = Lia::increase(&w, 0.05, 60_000);
        assert!((per_path - 300.0).abs() <= 0.05 * 300.0, "per-path increase {per_path} per RTT");
    }

    #[test]
    fn never_faster_than_reno_on_the_path() {
        let mut w = CoupledWindow::new(CcConfig::default(), 1200);
        w.window = 30_000;
        // The other path is much better: alpha is large, but the cap holds.
        w.others = vec![CouplingView { window: 300_000, srtt: 0.01, ..Default::default() }];
        let inc = Lia::increase(&w, 0.2, 30_000);
        assert!(inc <= 1200.0 + 1e-6, "increase {inc}");
        assert!(inc > 0.0);
    }

    #[test]
    fn loss_halves_and_persistent_congestion_collapses() {
        let rtt = RttEstimator::new(Duration::from_millis(50));
        let mut lia = Lia::new(CcConfig::default(), 1200);
        lia.on_ack(t(10), t(1), 12_000, &rtt, false);
        assert_eq!(lia.window(), 24_000, "slow start as Reno");
        lia.on_congestion_event(t(20), t(15), false, 1200);
        assert_eq!(lia.window(), 12_000);
        lia.on_congestion_event(t(30), t(25), true, 1200);
        assert_eq!(lia.window(), 2400);
    }
}
