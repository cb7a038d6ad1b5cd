//! OLIA, the Opportunistic Linked-Increases Algorithm (Khalili et al., "MPTCP is not
//! Pareto-optimal", CoNEXT 2012 / IEEE/ACM ToN 2013), per path in bytes.
//!
//! In congestion avoidance an acknowledgement of `a` packets on path r grows its window
//! (in packets) by `a * ((w_r / rtt_r^2) / (sum_p w_p / rtt_p)^2 + alpha_r / w_r)`.
//! `alpha_r` moves window from the paths with the largest windows (M) to the "best" paths
//! (B: largest l_p / rtt_p^2, l_p being the bytes acknowledged between the last two losses,
//! or since the last one if more) that do not already have the largest window:
//! `alpha_r = 1 / (n |B\\M|)` on B\\M, `-1 / (n |M|)` on M when B\\M is not empty, else 0.
//! Slow start and loss are Reno's.

use super::coupled::{rtt_s, CoupledAlgorithm, CoupledWindow};
use super::*;

/// OLIA congestion controller of one path.
#[derive(Debug, Clone)]
pub struct Olia {
    w: CoupledWindow,
}

impl Olia {
    /// A controller at the initial window.
    pub fn new(config: CcConfig, mds: u64) -> Self {
        Self { w: CoupledWindow::new(config, mds) }
    }

    /// OLIA's alpha for the path `own` among `others`.
    pub fn alpha(own: CouplingView, others: &[CouplingView]) -> f64 {
        let all: Vec<CouplingView> = std::iter::once(own).chain(others.iter().copied()).collect();
        let n = all.len() as f64;
        let max_w = all.iter().map(|p| p.window).max().unwrap_or(0);
        let quality = |p: &CouplingView| p.loss_interval_bytes as f64 / rtt_s(p.srtt).powi(2);
        let best_q = all.iter().map(quality).fold(0.0, f64::max);
        let in_m = |p: &CouplingView| p.window == max_w;
        let in_b = |p: &CouplingView| quality(p) >= best_q * (1.0 - 1e-9);
        let collected = all.iter().filter(|p| in_b(p) && !in_m(p)).count() as f64;
        let m = all.iter().filter(|p| in_m(p)).count() as f64;
        if collected == 0.0 {
            0.0
        } else if in_b(&own) && !in_m(&own) {
            1.0 / (n * collected)
        } else if in_m(&own) {
            -1.0 / (n * m)
        } else {
            0.0
        }
    }
}

impl CoupledAlgorithm for Olia {
    const NAME: &'static str = "olia";

    fn coupled(&self) -> &CoupledWindow {
        &self.w
    }

    fn coupled_mut(&mut self) -> &mut CoupledWindow {
        &mut self.w
    }

    fn increase(w: &CoupledWindow, srtt: f64, bytes: u64) -> f64 {
        let mss = w.mds as f64;
        let own = CouplingView { window: w.window, srtt, loss_interval_bytes: w.loss_interval() };
        let wr = (w.window as f64 / mss).max(1.0);
        let sum: f64 =
            std::iter::once(own).chain(w.others.iter().copied()).map(|p| (p.window as f64 / mss) / rtt_s(p.srtt)).sum();
        let acked = bytes as f64 / mss;
        let term = (wr / rtt_s(srtt).powi(2)) / (sum * sum).max(1e-12);
        acked * (term + Self::alpha(own, &w.others) / wr) * mss
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn alone_it_grows_like_reno() {
        let mut w = CoupledWindow::new(CcConfig::default(), 1200);
        w.window = 60_000;
        // One RTT acknowledges the window: one MSS, as Reno.
        let inc = Olia::increase(&w, 0.05, 60_000);
        assert!((inc - 1200.0).abs() < 1.0, "increase {inc}");
    }

    #[test]
    fn alpha_moves_window_to_the_better_path() {
        // Path a: large window, many losses. Path b: smaller window, few losses.
        let a = CouplingView { window: 100_000, srtt: 0.05, loss_interval_bytes: 200_000 };
        let b = CouplingView { window: 40_000, srtt: 0.05, loss_interval_bytes: 2_000_000 };
        assert!(Olia::alpha(b, &[a]) > 0.0);
        assert!(Olia::alpha(a, &[b]) < 0.0);
        // When the best path already has the largest window, nothing moves.
        let b2 = CouplingView { window: 150_000, ..b };
        assert_eq!(Olia::alpha(b2, &[a]), 0.0);
        assert_eq!(Olia::alpha(a, &[b2]), 0.0);
    }

    /// A deterministic two-path model: path 0 loses a packet every `l0` packets, path 1
    /// every `l1`; each round acknowledges one window per path and applies due losses.
    #[test]
    fn the_lossier_path_gets_the_smaller_share_and_the_sum_stays_tcp_friendly() {
        let rtt = RttEstimator::new(Duration::from_millis(50));
        let mut cc = [Olia::new(CcConfig::default(), 1200), Olia::new(CcConfig::default(), 1200)];
        let every = [200u64, 2000u64];
        let mut sent = [0u64; 2];
        let mut reno_like = crate::cc::NewReno::new(CcConfig::default(), 1200);
        let mut reno_sent = 0u64;
        let t = |ms: u64| Instant::ZERO + Duration::from_millis(ms);
        // Windows averaged over the second half (the sawtooth makes single samples noisy).
        let (mut avg0, mut avg1, mut avg_reno) = (0f64, 0f64, 0f64);
        for round in 0..4000u64 {
            let now = t(100 + round * 50);
            let before = t(50 + round * 50);
            for i in 0..2 {
                let others = [cc[1 - i].coupling_view(0.05)];
                cc[i].set_coupling(&others);
                let w = cc[i].window();
                cc[i].on_ack(now, before, w, &rtt, false);
                sent[i] += w / 1200;
                if sent[i] >= every[i] {
                    sent[i] = 0;
                    cc[i].on_congestion_event(now, before, false, 1200);
                }
            }
            // A Reno flow on the better path, for reference.
            let w = reno_like.window();
            reno_like.on_ack(now, before, w, &rtt, false);
            reno_sent += w / 1200;
            if reno_sent >= every[1] {
                reno_sent = 0;
                reno_like.on_congestion_event(now, before, false, 1200);
            }
            if round >= 2000 {
                avg0 += cc[0].window() as f64 / 2000.0;
                avg1 += cc[1].window() as f64 / 2000.0;
                avg_reno += reno_like.window() as f64 / 2000.0;
            }
        }
        assert!(avg0 < avg1, "lossy path {avg0} >= clean path {avg1}");
        let total = avg0 + avg1;
        assert!(total <= 1.3 * avg_reno, "aggregate {total} vs one Reno flow {avg_reno}");
        assert!(total >= 0.7 * avg_reno, "aggregate {total} far below one Reno flow {avg_reno}");
    }
}
