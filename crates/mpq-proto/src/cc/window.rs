//! What every controller shares (RFC 9002 §7): the window and the slow start threshold, no
//! growth from app-limited acknowledgements or from packets sent before the current recovery
//! period, slow start, one reduction per recovery period, the collapse on persistent
//! congestion, and datagram size changes.
//!
//! An algorithm supplies only its congestion-avoidance increase and its reduction, through
//! [`Algorithm`]; the [`CongestionController`] implementation is written once, here, for all
//! of them.

use std::fmt;

use std::time::Duration;

use super::hystart::{Growth, HyStart, CSS_GROWTH_DIVISOR};
use super::{CcConfig, CongestionController, CouplingView};
use crate::recovery::rtt::RttEstimator;
use crate::time::Instant;

/// Window state of one path, common to every algorithm.
#[derive(Debug, Clone)]
pub(crate) struct WindowCore {
    /// Initial and minimum window parameters.
    pub config: CcConfig,
    /// The path's maximum datagram size.
    pub mds: u64,
    /// Congestion window in bytes.
    pub window: u64,
    /// Slow start threshold in bytes (`u64::MAX` before the first loss).
    pub ssthresh: u64,
    /// When the current recovery period started.
    recovery_start: Option<Instant>,
    /// HyStart++ (RFC 9406) in the initial slow start.
    hystart: HyStart,
}

impl WindowCore {
    /// At the initial window, in slow start.
    pub fn new(config: CcConfig, mds: u64) -> Self {
        Self {
            config,
            mds,
            window: config.initial_window(mds),
            ssthresh: u64::MAX,
            recovery_start: None,
            hystart: HyStart::new(config.hystart),
        }
    }

    /// The minimum window in bytes.
    pub fn minimum(&self) -> u64 {
        self.config.minimum_window(self.mds)
    }

    /// Whether acknowledging a packet sent at `sent_time` may grow the window: not while
    /// app-limited (RFC 9002 §7.8), nor for packets sent before the current recovery period
    /// started (RFC 9002 §7.3.2).
    fn may_grow(&self, sent_time: Instant, app_limited: bool) -> bool {
        !app_limited && self.recovery_start.is_none_or(|r| sent_time > r)
    }

    /// In slow start, grows the window by the `bytes` acknowledged and returns true (RFC
    /// 9002 §7.3.1), by a quarter of them in HyStart++'s Conservative Slow Start (RFC 9406
    /// §4.2); in congestion avoidance returns false.
    fn slow_start(&mut self, bytes: u64) -> bool {
        if self.window >= self.ssthresh {
            return false;
        }
        let inc = match self.hystart.growth() {
            Growth::Full => bytes,
            Growth::Conservative => bytes / CSS_GROWTH_DIVISOR,
        };
        self.window = self.window.saturating_add(inc);
        true
    }

    /// A loss of a packet sent at `sent_time`: starts a new recovery period at `now` and
    /// returns true, unless the packet was sent within the current one (RFC 9002 §7.3.2: one
    /// reduction per recovery period).
    fn start_recovery(&mut self, now: Instant, sent_time: Instant) -> bool {
        if self.recovery_start.is_none_or(|r| sent_time > r) {
            self.recovery_start = Some(now);
            return true;
        }
        false
    }

    /// The multiplicative decrease: the slow start threshold and the window both become
    /// `ssthresh`, but no less than the minimum window.
    pub fn reduce_to(&mut self, ssthresh: u64) {
        // A loss ends the initial slow start, HyStart++'s or not (RFC 9406 §4.2).
        self.hystart.stop();
        self.ssthresh = ssthresh.max(self.minimum());
        self.window = self.ssthresh;
    }

    /// The path's maximum datagram size changed (see [`CcConfig::rescale_window`]).
    fn set_max_datagram_size(&mut self, mds: u64) {
        self.window = self.config.rescale_window(self.window, self.ssthresh, self.mds, mds);
        self.mds = mds;
    }
}

/// What makes one algorithm differ from another; [`CongestionController`] is implemented for
/// every `Algorithm` on top of its [`WindowCore`].
pub(crate) trait Algorithm: Clone + Send + fmt::Debug + 'static {
    /// The name [`CongestionController::name`] reports.
    const NAME: &'static str;

    /// The shared window state.
    fn core(&self) -> &WindowCore;

    /// The shared window state, mutably.
    fn core_mut(&mut self) -> &mut WindowCore;

    /// Every acknowledgement of `bytes`, before the growth rules apply (default: nothing).
    fn on_acked_bytes(&mut self, _bytes: u64) {}

    /// Congestion avoidance: `bytes` were acknowledged that may grow the window, which is at
    /// or above the slow start threshold.
    fn grow(&mut self, now: Instant, bytes: u64, rtt: &RttEstimator);

    /// A new recovery period started: the multiplicative decrease (usually through
    /// [`WindowCore::reduce_to`]).
    fn reduce(&mut self);

    /// Persistent congestion, after the window collapsed to the minimum (RFC 9002 §7.6.2);
    /// default: nothing more.
    fn on_persistent_congestion(&mut self) {}

    /// The other paths of the connection (coupled algorithms only; default: ignored).
    fn couple(&mut self, _others: &[CouplingView]) {}

    /// How this path looks to the coupled controllers of the other paths.
    fn view(&self, srtt: f64) -> CouplingView {
        CouplingView { window: self.core().window, srtt, ..Default::default() }
    }
}

impl<A: Algorithm> CongestionController for A {
    fn on_packet_sent(&mut self, _now: Instant, _bytes: u64) {}

    fn on_ack(&mut self, now: Instant, sent_time: Instant, bytes: u64, rtt: &RttEstimator, app_limited: bool) {
        self.on_acked_bytes(bytes);
        let core = self.core_mut();
        if app_limited && core.hystart.active() {
            core.hystart.on_app_limited_ack();
        }
        if core.may_grow(sent_time, app_limited) && !core.slow_start(bytes) {
            self.grow(now, bytes, rtt);
        }
    }

    fn on_ack_frame(&mut self, largest_acked: u64, next_pn: u64, rtt_sample: Option<Duration>) {
        let core = self.core_mut();
        // HyStart++ ends slow start: the window becomes the slow start threshold (RFC 9406
        // §4.2), and the next acknowledgements grow it by the algorithm's rule.
        if core.window < core.ssthresh && core.hystart.on_ack_frame(largest_acked, next_pn, rtt_sample) {
            core.ssthresh = core.window;
        }
    }

    fn on_congestion_event(&mut self, now: Instant, sent_time: Instant, is_persistent: bool, _lost_bytes: u64) -> bool {
        let reduced = self.core_mut().start_recovery(now, sent_time);
        if reduced {
            self.reduce();
        }
        if is_persistent {
            // RFC 9002 §7.6.2: collapse to the minimum window.
            let core = self.core_mut();
            core.window = core.minimum();
            self.on_persistent_congestion();
        }
        reduced || is_persistent
    }

    fn window(&self) -> u64 {
        self.core().window
    }

    fn ssthresh(&self) -> u64 {
        self.core().ssthresh
    }

    fn set_max_datagram_size(&mut self, mds: u64) {
        self.core_mut().set_max_datagram_size(mds);
    }

    fn name(&self) -> &'static str {
        A::NAME
    }

    fn clone_box(&self) -> Box<dyn CongestionController> {
        Box::new(self.clone())
    }

    fn set_coupling(&mut self, others: &[CouplingView]) {
        self.couple(others);
    }

    fn coupling_view(&self, srtt: f64) -> CouplingView {
        self.view(srtt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{build, CcAlgorithm};
    use std::time::Duration;

    const ALL: [CcAlgorithm; 4] = [CcAlgorithm::NewReno, CcAlgorithm::Cubic, CcAlgorithm::Lia, CcAlgorithm::Olia];

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn every_algorithm_shares_the_window_mechanics() {
        let rtt = RttEstimator::new(Duration::from_millis(50));
        for algo in ALL {
            let mut cc = build(algo, &CcConfig::default(), 1200);
            assert_eq!(cc.name(), algo.to_string());
            assert_eq!((cc.window(), cc.ssthresh()), (12_000, u64::MAX), "{algo}");
            // App-limited acknowledgements do not grow the window; slow start does.
            cc.on_ack(t(10), t(1), 6000, &rtt, true);
            assert_eq!(cc.window(), 12_000, "{algo}");
            cc.on_ack(t(10), t(1), 6000, &rtt, false);
            assert_eq!(cc.window(), 18_000, "{algo}");
            assert!(cc.in_slow_start(), "{algo}");
            // One reduction per recovery period; packets sent before it do not grow the window.
            cc.on_congestion_event(t(20), t(15), false, 1200);
            let reduced = cc.window();
            assert!(reduced < 18_000 && reduced == cc.ssthresh(), "{algo}: {reduced}");
            cc.on_congestion_event(t(30), t(19), false, 1200);
            cc.on_ack(t(30), t(20), 6000, &rtt, false);
            assert_eq!(cc.window(), reduced, "{algo}");
            // Persistent congestion collapses to the minimum window, and not below.
            cc.on_congestion_event(t(40), t(35), true, 1200);
            assert_eq!(cc.window(), 2400, "{algo}");
            cc.on_congestion_event(t(50), t(45), true, 1200);
            assert_eq!(cc.window(), 2400, "{algo}");
            // A larger datagram size raises the minimum; a copy starts from the same state.
            cc.set_max_datagram_size(1500);
            assert_eq!(cc.window(), 3000, "{algo}");
            let copy = cc.clone_box();
            assert_eq!((copy.name(), copy.window(), copy.ssthresh()), (cc.name(), cc.window(), cc.ssthresh()));
        }
    }

    /// HyStart++ (RFC 9406 §4.2) in every algorithm's initial slow start: a rise of the
    /// round's minimum RTT makes the growth a quarter (CSS), CSS_ROUNDS rounds later the
    /// window becomes the slow start threshold; switched off, standard slow start.
    #[test]
    fn hystart_ends_every_algorithms_slow_start() {
        let rtt = RttEstimator::new(Duration::from_millis(50));
        let ms = Duration::from_millis;
        for (algo, on) in ALL.iter().flat_map(|a| [(*a, true), (*a, false)]) {
            let config = CcConfig { hystart: on, ..CcConfig::default() };
            let mut cc = build(algo, &config, 1200);
            let mut pn = 0;
            // A round at 50 ms, then rounds at 60 ms: eight ACK frames of one packet each.
            for r in 0..7u64 {
                let sample = if r == 0 { 50 } else { 60 };
                for _ in 0..8 {
                    cc.on_ack_frame(pn, (pn / 8 + 1) * 8, Some(ms(sample)));
                    let before = cc.window();
                    cc.on_ack(t(100 * r + 60), t(100 * r), 1200, &rtt, false);
                    let grown = cc.window() - before;
                    let css = on && r >= 1 && (r > 1 || pn % 8 == 7);
                    if cc.in_slow_start() {
                        assert_eq!(grown, if css { 300 } else { 1200 }, "{algo} {on} round {r} packet {pn}");
                    }
                    pn += 1;
                }
            }
            // CSS began at the eighth sample of round 1 (15 packets at full growth, 33 at a
            // quarter); the first ACK of round 6 ends it.
            if on {
                assert!(!cc.in_slow_start(), "{algo}");
                assert_eq!(cc.ssthresh(), 12_000 + 15 * 1200 + 33 * 300, "{algo}");
            } else {
                assert!(cc.in_slow_start(), "{algo}");
                assert_eq!(cc.window(), 12_000 + 56 * 1200, "{algo}");
            }
        }
    }

    #[test]
    fn an_untouched_initial_window_follows_the_datagram_size() {
        for algo in ALL {
            let mut cc = build(algo, &CcConfig::default(), 1200);
            cc.set_max_datagram_size(1400);
            assert_eq!(cc.window(), 14_000, "{algo}");
            assert_eq!(cc.coupling_view(0.05).window, 14_000, "{algo}");
        }
    }
}
