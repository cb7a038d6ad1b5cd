//! The window mechanics LIA and OLIA share: Reno slow start, one halving per recovery
//! period, persistent congestion, and a per-path record of bytes acknowledged between losses
//! (OLIA's l_r). Only the congestion-avoidance increase differs between them.

use super::{CcConfig, PathView};
use crate::time::Instant;

/// Window state of one path of a coupled controller.
#[derive(Debug, Clone)]
pub(crate) struct CoupledWindow {
    pub config: CcConfig,
    pub mds: u64,
    pub window: u64,
    pub ssthresh: u64,
    recovery_start: Option<Instant>,
    /// Fractional bytes of increase not yet applied.
    credit: f64,
    /// Bytes acknowledged since the last loss.
    pub since_loss: u64,
    /// Bytes acknowledged between the last two losses.
    pub between_losses: u64,
    /// The other open paths of the connection, as last given.
    pub others: Vec<PathView>,
}

impl CoupledWindow {
    pub fn new(config: CcConfig, mds: u64) -> Self {
        Self {
            config,
            mds,
            window: config.initial_window(mds),
            ssthresh: u64::MAX,
            recovery_start: None,
            credit: 0.0,
            since_loss: 0,
            between_losses: 0,
            others: Vec::new(),
        }
    }

    /// OLIA's l_r: bytes between the last two losses, or since the last one if more.
    pub fn loss_interval(&self) -> u64 {
        self.since_loss.max(self.between_losses)
    }

    /// Handles an acknowledgement; `ca_increase` gives the congestion-avoidance increase in
    /// bytes (may be negative) for `bytes` acknowledged.
    pub fn on_ack(
        &mut self,
        sent_time: Instant,
        bytes: u64,
        app_limited: bool,
        ca_increase: impl FnOnce(&Self) -> f64,
    ) {
        self.since_loss = self.since_loss.saturating_add(bytes);
        // RFC 9002 §7.3.2: packets sent before recovery started do not grow the window.
        if app_limited || self.recovery_start.is_some_and(|r| sent_time <= r) {
            return;
        }
        if self.window < self.ssthresh {
            self.window = self.window.saturating_add(bytes);
            return;
        }
        self.credit += ca_increase(self);
        if self.credit >= 1.0 || self.credit <= -1.0 {
            let whole = self.credit.trunc();
            self.credit -= whole;
            let min = self.config.minimum_window(self.mds);
            self.window = if whole >= 0.0 {
                self.window.saturating_add(whole as u64)
            } else {
                self.window.saturating_sub((-whole) as u64).max(min)
            };
        }
    }

    pub fn on_congestion_event(&mut self, now: Instant, sent_time: Instant, is_persistent: bool) {
        let min = self.config.minimum_window(self.mds);
        if self.recovery_start.is_none_or(|r| sent_time > r) {
            self.recovery_start = Some(now);
            self.ssthresh = (self.window / 2).max(min);
            self.window = self.ssthresh;
            self.credit = 0.0;
            self.between_losses = self.since_loss;
            self.since_loss = 0;
        }
        if is_persistent {
            self.window = min;
        }
    }

    pub fn set_max_datagram_size(&mut self, mds: u64) {
        self.window = self.config.rescale_window(self.window, self.ssthresh, self.mds, mds);
        self.mds = mds;
    }
}

/// An RTT in seconds that is safe to divide by.
pub(crate) fn rtt_s(srtt: f64) -> f64 {
    srtt.max(1e-6)
}
