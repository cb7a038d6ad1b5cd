//! Flow-control credit (RFC 9000 §4): what the peer lets us send ([`SendCredit`]) and what
//! we let the peer send ([`RecvCredit`]), with receive-window auto-tuning.
//!
//! Auto-tuning follows quinn/quiche: the window starts at the configured value; when the
//! application consumes data so fast that a limit update is due within two RTTs of the
//! previous one, the window doubles (up to a cap). An update is due once the consumed data
//! passes half the window. Advertised limits never shrink.

use std::time::Duration;

use crate::time::Instant;

/// Credit the peer granted us (MAX_DATA or MAX_STREAM_DATA), and how much of it we used.
#[derive(Debug, Clone, Default)]
pub struct SendCredit {
    max: u64,
    used: u64,
    /// The limit we last reported being blocked at (so each limit is reported once).
    blocked_at: Option<u64>,
}

impl SendCredit {
    /// Credit with an initial limit.
    pub fn new(max: u64) -> Self {
        Self { max, used: 0, blocked_at: None }
    }

    /// The peer's current limit.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Credit used so far.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Credit left.
    pub fn available(&self) -> u64 {
        self.max.saturating_sub(self.used)
    }

    /// Raises the limit; returns true if it grew (limits never shrink).
    pub fn raise(&mut self, max: u64) -> bool {
        if max > self.max {
            self.max = max;
            true
        } else {
            false
        }
    }

    /// Consumes `n` bytes of credit.
    pub fn consume(&mut self, n: u64) {
        self.used += n;
        debug_assert!(self.used <= self.max, "flow control credit overrun");
    }

    /// Gives back `n` bytes of credit that will never be sent.
    pub fn release(&mut self, n: u64) {
        self.used -= n;
    }

    /// If we are blocked and have not yet reported this limit, the limit to report in a
    /// DATA_BLOCKED / STREAM_DATA_BLOCKED frame.
    pub fn take_blocked(&mut self) -> Option<u64> {
        if self.available() == 0 && self.blocked_at != Some(self.max) {
            self.blocked_at = Some(self.max);
            Some(self.max)
        } else {
            None
        }
    }
}

/// Credit we grant the peer, with window auto-tuning.
#[derive(Debug, Clone)]
pub struct RecvCredit {
    /// Current window: the distance between consumed data and the limit we aim for.
    window: u64,
    /// Auto-tuning cap.
    max_window: u64,
    /// Largest limit advertised (initial transport parameter or MAX_(STREAM_)DATA).
    advertised: u64,
    /// Bytes received (connection: sum of the highest offsets of all streams).
    received: u64,
    /// Bytes the application consumed (or that were discarded), i.e. credit to give back.
    consumed: u64,
    /// When we last raised the limit because of consumption.
    last_update: Option<Instant>,
}

impl RecvCredit {
    /// Credit with an initial window (advertised as the initial limit) and a tuning cap.
    pub fn new(window: u64, max_window: u64) -> Self {
        Self {
            window,
            max_window: max_window.max(window),
            advertised: window,
            received: 0,
            consumed: 0,
            last_update: None,
        }
    }

    /// The limit advertised to the peer.
    pub fn limit(&self) -> u64 {
        self.advertised
    }

    /// The current window.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Bytes consumed so far.
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Bytes the peer may still send under the advertised limit.
    pub fn room(&self) -> u64 {
        self.advertised.saturating_sub(self.received)
    }

    /// Accounts `n` more received bytes; returns false (nothing changed) if that would
    /// exceed the advertised limit, which is a FLOW_CONTROL_ERROR.
    #[must_use]
    pub fn on_received(&mut self, n: u64) -> bool {
        match self.received.checked_add(n) {
            Some(total) if total <= self.advertised => {
                self.received = total;
                true
            }
            _ => false,
        }
    }

    /// Accounts `n` bytes consumed by the application (or discarded).
    pub fn on_consumed(&mut self, n: u64) {
        self.consumed += n;
        debug_assert!(self.consumed <= self.received, "consumed more than received");
    }

    /// True when the consumed data passed half the window since the last advertised limit,
    /// so a MAX_(STREAM_)DATA update is due.
    pub fn needs_update(&self) -> bool {
        let target = self.consumed + self.window;
        target > self.advertised && target - self.advertised >= self.window / 2
    }

    /// Records that `bytes` received lie beyond a gap: they count against the window but the
    /// application cannot read them until the gap fills. When that is a quarter of the
    /// window or more, the window doubles at once (up to its cap), so an update is due.
    ///
    /// This is for multipath: data in flight on a slow path leaves a gap that holds back
    /// everything the fast paths deliver after it, so the window must cover the fast paths'
    /// rate times the slow path's delay (MPTCP's receive-buffer rule of "2 × the sum of the
    /// rates × the largest RTT", Raiciu et al., NSDI 2012, §4.2). Consumption stalls
    /// meanwhile, so the consumption-driven rule of [`RecvCredit::poll_limit`] does not
    /// fire. Each doubling needs twice as much held back, which only the peer sending
    /// under the new limit can bring; loss gaps on one path can trigger it too, which the
    /// cap bounds. (A quarter, not a half: tuned over seed 002 §4.1's classes on a design
    /// that is not the shipped one, where a half left fast paths stalled behind a gap of
    /// just under half the window; an eighth gained nothing more.)
    pub fn note_held_back(&mut self, bytes: u64) {
        if bytes >= self.window / 4 {
            self.window = (self.window * 2).min(self.max_window);
        }
    }

    /// The limit to advertise now. If an update is due, first auto-tunes the window (doubling
    /// it when the previous update was less than two RTTs ago: the window, not the reader,
    /// limits the peer) and raises the limit; otherwise returns the current limit (a
    /// retransmission).
    pub fn poll_limit(&mut self, now: Instant, rtt: Duration) -> u64 {
        if self.needs_update() {
            if let Some(last) = self.last_update {
                if !rtt.is_zero() && now - last < rtt * 2 {
                    self.window = (self.window * 2).min(self.max_window);
                }
            }
            self.last_update = Some(now);
            self.advertised = self.advertised.max(self.consumed + self.window);
        }
        self.advertised
    }

    /// Grows the window to at least `min` (capped), e.g. to keep the connection window larger
    /// than any stream window.
    pub fn ensure_window(&mut self, min: u64) {
        self.window = self.window.max(min.min(self.max_window));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn update_at_half_window_and_autotune() {
        let mut c = RecvCredit::new(100, 400);
        assert!(c.on_received(100));
        assert!(!c.on_received(1), "over the limit");
        c.on_consumed(49);
        assert!(!c.needs_update());
        c.on_consumed(1);
        assert!(c.needs_update());
        let t0 = Instant::from_nanos(0);
        assert_eq!(c.poll_limit(t0, ms(10)), 150);
        assert_eq!(c.window(), 100, "first update: no tuning");
        // The next update is due quickly: the window doubles.
        assert!(c.on_received(50));
        c.on_consumed(50);
        assert!(c.needs_update());
        assert_eq!(c.poll_limit(t0 + ms(15), ms(10)), 300);
        assert_eq!(c.window(), 200);
        // A slow consumer does not tune.
        assert!(c.on_received(100));
        c.on_consumed(100);
        assert_eq!(c.poll_limit(t0 + ms(1000), ms(10)), 400);
        assert_eq!(c.window(), 200);
        // Retransmission of the same limit when no update is due.
        assert_eq!(c.poll_limit(t0 + ms(1001), ms(10)), 400);
        // The cap holds.
        for i in 0..10 {
            let r = c.limit() - c.received();
            assert!(c.on_received(r));
            c.on_consumed(r);
            c.poll_limit(t0 + ms(1002 + i), ms(10));
        }
        assert_eq!(c.window(), 400);
    }

    #[test]
    fn a_window_held_back_by_a_gap_doubles_at_once() {
        let t0 = Instant::from_nanos(0);
        let mut c = RecvCredit::new(1000, 8000);
        assert!(c.on_received(1000));
        // Under a quarter of the window beyond a gap: nothing changes.
        c.note_held_back(249);
        assert_eq!(c.window(), 1000);
        assert!(!c.needs_update());
        // A quarter waits behind a gap (a slow path's packet is missing): the window doubles
        // before the reader consumed anything, and an update is due.
        c.note_held_back(250);
        assert_eq!(c.window(), 2000);
        assert!(c.needs_update());
        assert_eq!(c.poll_limit(t0, ms(10)), 2000, "consumed 0 + window 2000");
        // A gap must grow with the window to double it again.
        c.note_held_back(499);
        assert_eq!(c.window(), 2000, "499 is under a quarter of 2000");
        c.note_held_back(500);
        assert_eq!(c.window(), 4000);
        // The cap holds.
        for _ in 0..10 {
            c.note_held_back(u64::MAX);
        }
        assert_eq!(c.window(), 8000);
        assert_eq!(c.poll_limit(t0 + ms(5000), ms(10)), 8000);
    }

    #[test]
    fn send_credit_blocked_once_per_limit() {
        let mut c = SendCredit::new(10);
        assert_eq!(c.take_blocked(), None);
        c.consume(10);
        assert_eq!(c.take_blocked(), Some(10));
        assert_eq!(c.take_blocked(), None);
        assert!(c.raise(20));
        assert!(!c.raise(15));
        assert_eq!(c.available(), 10);
        c.consume(10);
        assert_eq!(c.take_blocked(), Some(20));
    }
}
