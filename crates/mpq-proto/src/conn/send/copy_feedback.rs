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
//! then probes again with one window's worth of copies (a probe at full rate copied a whole
//! congestion window's room before its first copy was judged); each window in which copies
//! mostly (three quarters) arrived first undoes one doubling.
//! A path suspected to have failed is always copied from (`reinject` does not ask).

use crate::time::Instant;
use std::time::Duration;

/// Copies judged before the window's outcome decides anything: a few late copies among
/// useful ones are normal (the original and the copy race). Also the copies a probe may
/// queue while backing off.
const WINDOW: u32 = 16;

/// The longest pause is 2^MAX_LEVEL RTTs.
const MAX_LEVEL: u32 = 6;

/// A probe whose copies were queued but not all judged (skipped because the original was
/// acknowledged first, lost, or their path closed) is renewed after this many RTTs.
const PROBE_RENEW_RTTS: u32 = 4;

/// What the acknowledgements of copied stream data said, and the pause it led to.
#[derive(Debug, Default, Clone)]
pub(crate) struct CopyFeedback {
    /// Copies acknowledged while some of their bytes were not yet (in this window).
    first: u32,
    /// Copies acknowledged after all their bytes were (in this window).
    late: u32,
    /// Windows in a row in which most copies were late (0: not backing off).
    level: u32,
    /// Reinjection waits until then.
    paused_until: Option<Instant>,
    /// Backing off: copies the current probe may still queue.
    probe_left: u32,
    /// Backing off with the probe spent: when it is renewed if no window was judged.
    probe_renew_at: Option<Instant>,
    /// The RTT of the last judgement (the probe's renewal is counted in it).
    rtt: Duration,
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

    /// The window holds [`WINDOW`] copies: [`CopyFeedback::judge`] decides something.
    pub fn window_full(&self) -> bool {
        self.first + self.late >= WINDOW
    }

    /// Judges the window once it holds [`WINDOW`] copies (after each ACK's packets are
    /// applied): mostly late (under half arrived first) pauses reinjection for 2^level RTTs
    /// and raises the level; at least three quarters first lowers it by one; in between,
    /// a backoff under way pauses for as long as the last time. (A copy that was late may
    /// still be counted first where path threads apply their ACKs out of step: over 8
    /// equal loopback paths in the per-path runtime 10 to 30 % were.)
    pub fn judge(&mut self, now: Instant, rtt: Duration) {
        if !self.window_full() {
            return;
        }
        let n = self.first + self.late;
        if self.first * 4 >= 3 * n {
            // One level down per such window, not all the way: where ACKs are applied out of
            // step, a window of late copies can look like this now and then (per-path over 8
            // equal loopback paths: 15-18 of 60-80 windows), and each reset to no limit
            // copied a congestion window's room again.
            self.level = self.level.saturating_sub(1);
            self.paused_until = None;
            self.probe_left = WINDOW;
            self.probe_renew_at = None;
        } else {
            let pause_level = if self.first * 2 < n {
                let l = self.level;
                self.level = (l + 1).min(MAX_LEVEL);
                Some(l)
            } else {
                // Backing off, and not clearly better: about the same pause again (a mixed
                // window must not let reinjection copy at full rate until the next one).
                self.level.checked_sub(1)
            };
            if let Some(l) = pause_level {
                self.paused_until = Some(now + rtt.saturating_mul(1 << l));
                self.probe_left = WINDOW;
                self.probe_renew_at = None;
                self.rtt = rtt;
            }
        }
        self.first = 0;
        self.late = 0;
    }

    /// How many chunks opportunistic reinjection may copy now: none while paused, the rest
    /// of the probe while backing off, any number otherwise.
    pub fn allowance(&mut self, now: Instant) -> usize {
        if self.paused_until.is_some_and(|t| now < t) {
            return 0;
        }
        if self.level == 0 {
            return usize::MAX;
        }
        if self.probe_renew_at.is_some_and(|t| now >= t) {
            self.probe_left = WINDOW;
            self.probe_renew_at = None;
        }
        self.probe_left as usize
    }

    /// Opportunistic reinjection queued `n` copies.
    pub fn on_copies_queued(&mut self, now: Instant, n: usize) {
        if self.level == 0 || n == 0 {
            return;
        }
        self.probe_left = self.probe_left.saturating_sub(u32::try_from(n).unwrap_or(u32::MAX));
        if self.probe_left == 0 && self.probe_renew_at.is_none() {
            self.probe_renew_at = Some(now + self.rtt.saturating_mul(PROBE_RENEW_RTTS));
        }
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

    fn allows(f: &mut CopyFeedback, now: Instant) -> bool {
        f.allowance(now) > 0
    }

    #[test]
    fn late_windows_pause_for_doubling_times_up_to_the_cap() {
        let t0 = Instant::ZERO;
        let mut f = CopyFeedback::default();
        assert_eq!(f.allowance(t0), usize::MAX);
        let mut now = t0;
        for level in 0..=MAX_LEVEL + 2 {
            window(&mut f, 7, 9, now);
            let pause = RTT * (1 << level.min(MAX_LEVEL));
            assert_eq!(f.allowance(now + pause - Duration::from_micros(1)), 0, "level {level}");
            assert_eq!(f.allowance(now + pause), WINDOW as usize, "level {level}: a probe");
            now += pause;
        }
    }

    #[test]
    fn windows_of_copies_arriving_first_undo_the_backoff_a_level_each() {
        let t0 = Instant::ZERO;
        let mut f = CopyFeedback::default();
        window(&mut f, 0, 16, t0);
        window(&mut f, 0, 16, t0 + RTT);
        assert!(!allows(&mut f, t0 + RTT * 2));
        window(&mut f, 12, 4, t0 + RTT * 2);
        assert_eq!(f.allowance(t0 + RTT * 2), WINDOW as usize, "three quarters first: no pause, a probe");
        window(&mut f, 0, 16, t0 + RTT * 3);
        assert!(!allows(&mut f, t0 + RTT * 5 - Duration::from_micros(1)), "from level 1: two RTTs");
        assert!(allows(&mut f, t0 + RTT * 5));
        window(&mut f, 16, 0, t0 + RTT * 5);
        assert_eq!(f.allowance(t0 + RTT * 5), WINDOW as usize, "level 1");
        window(&mut f, 16, 0, t0 + RTT * 6);
        assert_eq!(f.allowance(t0 + RTT * 6), usize::MAX, "level 0: no limit");
        window(&mut f, 0, 16, t0 + RTT * 7);
        assert!(!allows(&mut f, t0 + RTT * 8 - Duration::from_micros(1)));
        assert!(allows(&mut f, t0 + RTT * 8), "back to one RTT");
    }

    #[test]
    fn nothing_is_decided_before_a_window_is_full_or_in_between() {
        let t0 = Instant::ZERO;
        let mut f = CopyFeedback::default();
        window(&mut f, 0, WINDOW - 1, t0);
        assert!(allows(&mut f, t0), "15 late copies are not yet a window");
        f.on_copy_acked(false);
        f.judge(t0, RTT);
        assert!(!allows(&mut f, t0), "the 16th completes it");
        // Half arrived first, backing off: the same pause again, at the same level.
        let later = t0 + RTT;
        window(&mut f, 8, 8, later);
        assert!(!allows(&mut f, later + RTT - Duration::from_micros(1)));
        assert!(allows(&mut f, later + RTT));
        window(&mut f, 0, 16, later);
        assert!(!allows(&mut f, later + RTT * 2 - Duration::from_micros(1)), "the level was kept");
        assert!(allows(&mut f, later + RTT * 2));
        // Not backing off, half first pauses nothing.
        let mut fresh = CopyFeedback::default();
        window(&mut fresh, 8, 8, t0);
        assert_eq!(fresh.allowance(t0), usize::MAX);
    }

    /// Backing off, a probe queues one window of copies; if they are never all judged
    /// (skipped, lost), a new probe starts 4 RTTs after it was spent.
    #[test]
    fn a_probe_queues_one_window_and_is_renewed_if_never_judged() {
        let t0 = Instant::ZERO;
        let mut f = CopyFeedback::default();
        window(&mut f, 0, 16, t0);
        let t1 = t0 + RTT;
        assert_eq!(f.allowance(t1), 16);
        f.on_copies_queued(t1, 10);
        assert_eq!(f.allowance(t1), 6);
        f.on_copies_queued(t1, 10);
        assert_eq!(f.allowance(t1), 0, "spent");
        assert_eq!(f.allowance(t1 + RTT * 4 - Duration::from_micros(1)), 0);
        assert_eq!(f.allowance(t1 + RTT * 4), 16, "renewed");
        // Not backing off, queuing counts nothing.
        let mut fresh = CopyFeedback::default();
        fresh.on_copies_queued(t0, 100);
        assert_eq!(fresh.allowance(t0), usize::MAX);
    }
}
