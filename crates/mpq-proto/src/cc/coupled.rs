//! What LIA and OLIA share on top of the window mechanics of every controller: a per-path
//! record of bytes acknowledged between losses (OLIA's l_r), the view of the other paths, and
//! fractional increases (or decreases) accumulated until they make a whole byte. Only the
//! congestion-avoidance increase differs between them ([`CoupledAlgorithm::increase`]); slow
//! start and the reduction on loss are Reno's.

use std::fmt;
use std::ops::{Deref, DerefMut};

use super::window::{Algorithm, WindowCore};
use super::{CcConfig, CouplingView};
use crate::recovery::rtt::RttEstimator;
use crate::time::Instant;

/// Window state of one path of a coupled controller; it extends (and dereferences to) the
/// [`WindowCore`] every controller has.
#[derive(Debug, Clone)]
pub(crate) struct CoupledWindow {
    /// Window, slow start threshold, recovery period.
    pub core: WindowCore,
    /// Fractional bytes of increase not yet applied.
    credit: f64,
    /// Bytes acknowledged since the last loss.
    pub since_loss: u64,
    /// Bytes acknowledged between the last two losses.
    pub between_losses: u64,
    /// The other open paths of the connection, as last given.
    pub others: Vec<CouplingView>,
}

impl Deref for CoupledWindow {
    type Target = WindowCore;

    fn deref(&self) -> &WindowCore {
        &self.core
    }
}

impl DerefMut for CoupledWindow {
    fn deref_mut(&mut self) -> &mut WindowCore {
        &mut self.core
    }
}

impl CoupledWindow {
    /// At the initial window, alone.
    pub fn new(config: CcConfig, mds: u64) -> Self {
        Self { core: WindowCore::new(config, mds), credit: 0.0, since_loss: 0, between_losses: 0, others: Vec::new() }
    }

    /// OLIA's l_r: bytes between the last two losses, or since the last one if more.
    pub fn loss_interval(&self) -> u64 {
        self.since_loss.max(self.between_losses)
    }

    /// Adds a congestion-avoidance increase of `bytes` (may be negative or fractional) to the
    /// window, whole bytes at a time; a decrease stops at the minimum window.
    fn apply(&mut self, bytes: f64) {
        self.credit += bytes;
        if self.credit >= 1.0 || self.credit <= -1.0 {
            let whole = self.credit.trunc();
            self.credit -= whole;
            let min = self.minimum();
            self.window = if whole >= 0.0 {
                self.window.saturating_add(whole as u64)
            } else {
                self.window.saturating_sub((-whole) as u64).max(min)
            };
        }
    }

    /// A new recovery period: Reno's halving, and a new loss interval.
    fn on_loss(&mut self) {
        self.core.reduce_to(self.window / 2);
        self.credit = 0.0;
        self.between_losses = self.since_loss;
        self.since_loss = 0;
    }
}

/// A coupled algorithm: a [`CoupledWindow`] and its congestion-avoidance increase; the rest of
/// [`Algorithm`] (and so of [`super::CongestionController`]) is shared.
pub(crate) trait CoupledAlgorithm: Clone + Send + fmt::Debug + 'static {
    /// The algorithm's name.
    const NAME: &'static str;

    /// The path's window state.
    fn coupled(&self) -> &CoupledWindow;

    /// The path's window state, mutably.
    fn coupled_mut(&mut self) -> &mut CoupledWindow;

    /// Congestion-avoidance increase in bytes (may be negative) for `bytes` acknowledged on
    /// the path `w` at smoothed RTT `srtt` (seconds).
    fn increase(w: &CoupledWindow, srtt: f64, bytes: u64) -> f64;
}

impl<C: CoupledAlgorithm> Algorithm for C {
    const NAME: &'static str = <C as CoupledAlgorithm>::NAME;

    fn core(&self) -> &WindowCore {
        &self.coupled().core
    }

    fn core_mut(&mut self) -> &mut WindowCore {
        &mut self.coupled_mut().core
    }

    fn on_acked_bytes(&mut self, bytes: u64) {
        let w = self.coupled_mut();
        w.since_loss = w.since_loss.saturating_add(bytes);
    }

    fn grow(&mut self, _now: Instant, bytes: u64, rtt: &RttEstimator) {
        let srtt = rtt.smoothed().as_secs_f64();
        let w = self.coupled_mut();
        let increase = C::increase(w, srtt, bytes);
        w.apply(increase);
    }

    fn reduce(&mut self) {
        self.coupled_mut().on_loss();
    }

    fn couple(&mut self, others: &[CouplingView]) {
        let w = self.coupled_mut();
        w.others.clear();
        w.others.extend_from_slice(others);
    }

    fn view(&self, srtt: f64) -> CouplingView {
        let w = self.coupled();
        CouplingView { window: w.window, srtt, loss_interval_bytes: w.loss_interval() }
    }
}

/// An RTT in seconds that is safe to divide by.
pub(crate) fn rtt_s(srtt: f64) -> f64 {
    srtt.max(1e-6)
}
