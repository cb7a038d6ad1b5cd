//! Whether copies of stream data sent on another path (reinjection) arrive first: the
//! feedback that pauses opportunistic reinjection while its copies are late.
//!
//! Reinjection copies data still in flight on a path judged slow onto a faster one. The
//! judgement rests on RTT and delivery-rate estimates, which are noise where ACKs are
//! handled in bursts (paths of equal delay driven by CPU-starved threads: rates measured at
//! 2 to 500 MB/s for paths carrying about 60 MB/s each). A copy whose bytes the peer
//! acknowledged before the copy's own acknowledgement arrived was late: the original got
//! there first, and the copy cost a packet's encryption, sending and decryption at both
//! ends for nothing. When most copies of a window are late, reinjection pauses for a number
//! of RTTs that doubles with each such window in a row (up to [`MAX_LEVEL`] doublings) and
//! then probes again; a window in which copies mostly (three quarters) arrived first ends
//! the backoff.
//! A path suspected to have failed is always copied from (`reinject` does not ask).

use crate::time::Instant;
use std::time::Duration;

/// Copies judged before the window's outcome decides anything: a few late copies among
/// useful ones are normal (the original and the copy race).
const WINDOW: u32 = 16;

/// The longest pause is 2^MAX_LEVEL RTTs.
const MAX_LEVEL: u32 = 6;

/// What the acknowledgements of copied stream data said, and the pause it led to.
#[derive(Debug, Default, Clone)]
pub(crate) struct CopyFeedback {
    /// Copies acknowledged while some of their bytes were not yet (in this window).
    first: u32,
    /// Copies acknowledged after all their bytes were (in this window).
    late: u32,
    /// Windows in a row in which most copies were late.
    level: u32,
    /// Reinjection waits until then.
    paused_until: Option<Instant>,
}

impl CopyFeedback {
    /// Counts one acknowledged copy: `first` if it acknowledged bytes not acknowledged
    /// before, else it was late.
    pub fn on_copy_acked(&mut self, first: bool) {
        if first {
            self.first += 1;
        } else {
            self.late += 1;
        }
    }

    /// Judges the window once it holds [`WINDOW`] copies (after each ACK's packets are
    /// applied): mostly late (under half arrived first) pauses reinjection for 2^level RTTs
    /// and raises the level; at least three quarters first ends the backoff. (A copy that
    /// was late may still be counted first where path threads apply their ACKs out of step:
    /// over 8 equal loopback paths in the per-path runtime about a quarter were.)
    pub fn judge(&mut self, now: Instant, rtt: Duration) {
        let n = self.first + self.late;
        if n < WINDOW {
            return;
        }
        if self.first * 2 < n {
            self.paused_until = Some(now + rtt.saturating_mul(1 << self.level));
            self.level = (self.level + 1).min(MAX_LEVEL);
        } else if self.first * 4 >= 3 * n {
            self.level = 0;
            self.paused_until = None;
        }
        self.first = 0;
        self.late = 0;
    }

    /// Whether opportunistic reinjection may copy data now.
    pub fn allows(&self, now: Instant) -> bool {
        self.paused_until.is_none_or(|t| now >= t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTT: Duration = Duration::from_millis(10);

    fn window(f: &mut CopyFeedback, first: u32, late: u32, now: Instant) {
        for _ in 0..first {
            f.on_copy_acked(true);
        }
        for _ in 0..late {
            f.on_copy_acked(false);
        }
        f.judge(now, RTT);
    }

    #[test]
    fn late_windows_pause_for_doubling_times_up_to_the_cap() {
        let t0 = Instant::ZERO;
        let mut f = CopyFeedback::default();
        assert!(f.allows(t0));
        let mut now = t0;
        for level in 0..=MAX_LEVEL + 2 {
            window(&mut f, 7, 9, now);
            let pause = RTT * (1 << level.min(MAX_LEVEL));
            assert!(!f.allows(now + pause - Duration::from_micros(1)), "level {level}");
            assert!(f.allows(now + pause), "level {level}");
            now += pause;
        }
    }

    #[test]
    fn a_window_of_copies_arriving_first_ends_the_backoff() {
        let t0 = Instant::ZERO;
        let mut f = CopyFeedback::default();
        window(&mut f, 0, 16, t0);
        window(&mut f, 0, 16, t0 + RTT);
        assert!(!f.allows(t0 + RTT * 2));
        window(&mut f, 12, 4, t0 + RTT * 2);
        assert!(f.allows(t0 + RTT * 2), "three quarters first: no pause");
        window(&mut f, 0, 16, t0 + RTT * 3);
        assert!(f.allows(t0 + RTT * 4), "back to one RTT");
    }

    #[test]
    fn nothing_is_decided_before_a_window_is_full_or_in_between() {
        let t0 = Instant::ZERO;
        let mut f = CopyFeedback::default();
        window(&mut f, 0, WINDOW - 1, t0);
        assert!(f.allows(t0), "15 late copies are not yet a window");
        f.on_copy_acked(false);
        f.judge(t0, RTT);
        assert!(!f.allows(t0), "the 16th completes it");
        // Half arrived first: neither a pause nor the end of the backoff.
        let later = t0 + RTT;
        window(&mut f, 8, 8, later);
        assert!(f.allows(later));
        window(&mut f, 0, 16, later);
        assert!(!f.allows(later + RTT * 2 - Duration::from_micros(1)), "the level was kept");
    }
}
