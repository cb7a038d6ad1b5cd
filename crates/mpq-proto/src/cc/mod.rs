//! Congestion control: one object-safe controller per path, built by name at run time so
//! experiments can sweep algorithms.
//!
//! The mechanics every algorithm shares (slow start, recovery periods, persistent
//! congestion, app-limited acknowledgements, datagram size changes) are written once, in
//! `window`; each algorithm's file holds only its own increase and decrease.
//!
//! Extension point for multipath coupled controllers (LIA, OLIA): they implement the same
//! trait and additionally receive a view of the other paths of the connection through
//! [`CongestionController::set_coupling`] before each decision; uncoupled controllers ignore
//! it.

mod coupled;
mod cubic;
mod hystart;
mod lia;
mod newreno;
mod olia;
mod window;

use std::fmt;
use std::str::FromStr;

use crate::recovery::rtt::RttEstimator;
use crate::time::Instant;

pub use cubic::Cubic;
pub use lia::Lia;
pub use newreno::NewReno;
pub use olia::Olia;

/// What a coupled controller learns about the connection's other paths.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CouplingView {
    /// Congestion window of the path in bytes.
    pub window: u64,
    /// Smoothed RTT of the path in seconds.
    pub srtt: f64,
    /// Bytes acknowledged between the path's last two losses, or since the last one if
    /// more (OLIA's l_r); 0 for uncoupled controllers.
    pub loss_interval_bytes: u64,
}

/// A congestion controller for one path (RFC 9002 §7).
pub trait CongestionController: Send + fmt::Debug {
    /// An in-flight packet of `bytes` was sent.
    fn on_packet_sent(&mut self, now: Instant, bytes: u64);
    /// An ACK (PATH_ACK) frame of the path's application data space newly acknowledged
    /// packets up to number `largest_acked` while `next_pn` is the next number the path
    /// will send; `rtt_sample` is the RTT sample it gave, if any. Called once per frame,
    /// before [`CongestionController::on_ack`] for each of the packets (HyStart++'s rounds
    /// and RTT samples, RFC 9406 §4.2).
    fn on_ack_frame(&mut self, _largest_acked: u64, _next_pn: u64, _rtt_sample: Option<std::time::Duration>) {}
    /// A packet sent at `sent_time` carrying `bytes` was acknowledged.
    fn on_ack(&mut self, now: Instant, sent_time: Instant, bytes: u64, rtt: &RttEstimator, app_limited: bool);
    /// Packets were lost; the newest of them was sent at `sent_time` (RFC 9002 §7.3.2:
    /// one reduction per recovery period). Returns true when this was a congestion event,
    /// i.e. the window was reduced: the loss started a recovery period, or was persistent
    /// congestion; losses of packets sent before the current recovery period began are not.
    fn on_congestion_event(&mut self, now: Instant, sent_time: Instant, is_persistent: bool, lost_bytes: u64) -> bool;
    /// Congestion window in bytes.
    fn window(&self) -> u64;
    /// Slow start threshold in bytes (`u64::MAX` before the first loss).
    fn ssthresh(&self) -> u64;
    /// True in slow start.
    fn in_slow_start(&self) -> bool {
        self.window() < self.ssthresh()
    }
    /// The path's maximum datagram size changed.
    fn set_max_datagram_size(&mut self, mds: u64);
    /// Algorithm name.
    fn name(&self) -> &'static str;
    /// A copy (for a new path starting from the same parameters).
    fn clone_box(&self) -> Box<dyn CongestionController>;
    /// The other paths of the connection (coupled algorithms only).
    fn set_coupling(&mut self, _others: &[CouplingView]) {}
    /// How this path looks to the coupled controllers of the other paths.
    fn coupling_view(&self, srtt: f64) -> CouplingView {
        CouplingView { window: self.window(), srtt, ..Default::default() }
    }
}

/// Parameters common to every algorithm.
#[derive(Debug, Clone, Copy)]
pub struct CcConfig {
    /// Initial window in packets (RFC 9002 §7.2: 10).
    pub initial_window_packets: u64,
    /// Minimum window in packets (RFC 9002 §7.2: 2).
    pub minimum_window_packets: u64,
    /// HyStart++ (RFC 9406) in the initial slow start of every algorithm: slow start ends
    /// when the RTT rises, before the window fills a deep buffer (default on).
    pub hystart: bool,
}

impl Default for CcConfig {
    fn default() -> Self {
        Self { initial_window_packets: 10, minimum_window_packets: 2, hystart: true }
    }
}

impl CcConfig {
    /// Initial window in bytes: min(10 * mds, max(14720, 2 * mds)) for the default 10.
    pub fn initial_window(&self, mds: u64) -> u64 {
        if self.initial_window_packets == 10 {
            (10 * mds).min(14_720.max(2 * mds))
        } else {
            self.initial_window_packets * mds
        }
    }

    /// Minimum window in bytes.
    pub fn minimum_window(&self, mds: u64) -> u64 {
        self.minimum_window_packets * mds
    }

    /// The window after the datagram size changes from `old` to `new`: an untouched initial
    /// window is rescaled so it stays the same number of packets; any window is kept at or
    /// above the new minimum.
    pub fn rescale_window(&self, window: u64, ssthresh: u64, old: u64, new: u64) -> u64 {
        let w =
            if ssthresh == u64::MAX && window == self.initial_window(old) { self.initial_window(new) } else { window };
        w.max(self.minimum_window(new))
    }
}

/// The algorithms [`build`] knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CcAlgorithm {
    /// RFC 9002 NewReno.
    NewReno,
    /// RFC 9438 CUBIC.
    Cubic,
    /// RFC 6356 LIA (coupled).
    Lia,
    /// OLIA (coupled).
    Olia,
}

impl FromStr for CcAlgorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "newreno" | "reno" => Ok(CcAlgorithm::NewReno),
            "cubic" => Ok(CcAlgorithm::Cubic),
            "lia" => Ok(CcAlgorithm::Lia),
            "olia" => Ok(CcAlgorithm::Olia),
            other => Err(format!("unknown congestion controller {other:?} (expected newreno, cubic, lia or olia)")),
        }
    }
}

impl fmt::Display for CcAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CcAlgorithm::NewReno => "newreno",
            CcAlgorithm::Cubic => "cubic",
            CcAlgorithm::Lia => "lia",
            CcAlgorithm::Olia => "olia",
        })
    }
}

/// Builds a controller.
pub fn build(algo: CcAlgorithm, config: &CcConfig, max_datagram_size: u64) -> Box<dyn CongestionController> {
    match algo {
        CcAlgorithm::NewReno => Box::new(NewReno::new(*config, max_datagram_size)),
        CcAlgorithm::Cubic => Box::new(Cubic::new(*config, max_datagram_size)),
        CcAlgorithm::Lia => Box::new(Lia::new(*config, max_datagram_size)),
        CcAlgorithm::Olia => Box::new(Olia::new(*config, max_datagram_size)),
    }
}
