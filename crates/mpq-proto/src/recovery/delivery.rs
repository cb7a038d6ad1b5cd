//! A path's delivery rate, measured from its acknowledgements: the bytes newly acknowledged
//! over at least one smoothed RTT, divided by that time.
//!
//! Why measured and not `cwnd / srtt`: on a path whose queue is filling, the window grows
//! faster than the smoothed RTT follows it, so `cwnd / srtt` can overstate what the path
//! delivers several times (a 2.3 Mbit/s link with a 0.5 s queue showed 5.2 Mbit/s), while
//! the acknowledgement clock runs at the bottleneck's rate. Reinjection uses the rate to tell
//! whether a slow path's queue holds data back (`conn/send/reinject.rs`) and when the data
//! queued on it will arrive (`conn/mail.rs`).
//!
//! A measurement window restarts when a packet leaves an idle path (nothing in flight), so
//! idle time never counts as time the path was delivering. A window in which the sender was
//! short of data (every packet acknowledged in it was sent while the congestion window had
//! room) underestimates the rate: such an "application-limited" sample only ever raises the
//! estimate, as in BBR's delivery rate estimation (draft-cheng-iccrg-delivery-rate-estimation
//! §3.3). A handshake path that had carried a request and a few control frames measured
//! 1.85 kB/s on a 20 Mbit/s link, and reinjection took it for a path whose queue held its
//! data back.

use std::time::Duration;

use crate::time::Instant;

/// Shortest window a rate is measured over (a path of sub-millisecond RTT would otherwise
/// measure single ACKs).
const MIN_WINDOW: Duration = Duration::from_millis(1);

/// The delivery-rate estimator of one path.
#[derive(Debug, Clone, Default)]
pub struct DeliveryRate {
    /// Bytes acknowledged in all.
    delivered: u64,
    /// Start of the current window: when, and `delivered` then.
    window: Option<(Instant, u64)>,
    /// The rate of the last complete window, bytes per second.
    rate: Option<f64>,
    /// A packet acknowledged in the current window was sent while the congestion window
    /// limited the sender: the window measures the path, not the application.
    window_limited: bool,
}

impl DeliveryRate {
    /// A packet is about to be sent on the path with `bytes_in_flight` before it: on an idle
    /// path a new window starts now.
    pub fn on_send(&mut self, now: Instant, bytes_in_flight: u64) {
        if bytes_in_flight == 0 {
            self.window = Some((now, self.delivered));
            self.window_limited = false;
        }
    }

    /// `bytes` of in-flight packets were newly acknowledged at `now`; a window of at least
    /// `srtt` ends here and gives the rate. `window_limited`: one of them was sent while the
    /// congestion window limited the sender.
    pub fn on_acked(&mut self, now: Instant, bytes: u64, srtt: Duration, window_limited: bool) {
        if bytes == 0 {
            return;
        }
        self.delivered += bytes;
        let Some((start, at_start)) = self.window else {
            // The first acknowledgement of a window starting before anything was sent.
            self.window = Some((now, self.delivered));
            self.window_limited = false;
            return;
        };
        self.window_limited |= window_limited;
        let elapsed = now.saturating_duration_since(start);
        if elapsed >= srtt.max(MIN_WINDOW) {
            let sample = (self.delivered - at_start) as f64 / elapsed.as_secs_f64();
            if self.window_limited || self.rate.is_some_and(|r| sample > r) {
                self.rate = Some(sample);
            }
            self.window = Some((now, self.delivered));
            self.window_limited = false;
        }
    }

    /// Bytes per second over the last complete window, if one completed.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    /// ACKs of 1000 bytes every 10 ms measure 100 kB/s once a window of one RTT closes,
    /// whatever the window of the sender.
    #[test]
    fn acknowledgements_over_an_rtt_give_the_rate() {
        let mut d = DeliveryRate::default();
        d.on_send(at(0), 0);
        let srtt = Duration::from_millis(50);
        for k in 1..=4 {
            d.on_acked(at(10 * k), 1000, srtt, true);
        }
        assert_eq!(d.rate(), None, "no window of one RTT yet");
        d.on_acked(at(50), 1000, srtt, true);
        assert_eq!(d.rate(), Some(100_000.0));
        for k in 6..=10 {
            d.on_acked(at(10 * k), 1000, srtt, true);
        }
        assert_eq!(d.rate(), Some(100_000.0));
    }

    /// Idle time between two bursts does not count: the window restarts with the first
    /// packet sent on the idle path.
    #[test]
    fn idle_time_is_not_delivery_time() {
        let mut d = DeliveryRate::default();
        let srtt = Duration::from_millis(20);
        d.on_send(at(0), 0);
        d.on_acked(at(20), 2000, srtt, true);
        assert_eq!(d.rate(), Some(100_000.0));
        // Idle for a second, then a burst delivered at 50 kB/s.
        d.on_send(at(1020), 0);
        d.on_send(at(1021), 1200);
        d.on_acked(at(1040), 1000, srtt, true);
        assert_eq!(d.rate(), Some(50_000.0));
    }

    /// Acknowledgements of nothing in flight (ACK-only packets) neither start nor end a
    /// window.
    #[test]
    fn empty_acknowledgements_change_nothing() {
        let mut d = DeliveryRate::default();
        d.on_acked(at(5), 0, Duration::from_millis(1), true);
        assert_eq!((d.rate(), d.window), (None, None));
        d.on_acked(at(6), 100, Duration::from_millis(1), true);
        assert_eq!(d.window, Some((at(6), 100)));
    }

    /// A window in which the sender was short of data measures the application, not the
    /// path: it sets no first rate and only raises one (a handshake path that carried a
    /// request and a few control frames measured 1.85 kB/s on a 20 Mbit/s link).
    #[test]
    fn application_limited_windows_only_raise_the_rate() {
        let mut d = DeliveryRate::default();
        let srtt = Duration::from_millis(10);
        d.on_send(at(0), 0);
        d.on_acked(at(10), 100, srtt, false);
        assert_eq!(d.rate(), None, "an application-limited first window");
        d.on_acked(at(20), 1000, srtt, true);
        assert_eq!(d.rate(), Some(100_000.0), "a window the congestion window limited");
        d.on_acked(at(30), 100, srtt, false);
        assert_eq!(d.rate(), Some(100_000.0), "a lower application-limited window is ignored");
        d.on_acked(at(40), 2000, srtt, false);
        assert_eq!(d.rate(), Some(200_000.0), "a higher one raises the estimate");
        // One window-limited packet in the window is enough for the sample to count.
        d.on_acked(at(45), 100, srtt, true);
        d.on_acked(at(50), 400, srtt, false);
        assert_eq!(d.rate(), Some(50_000.0));
    }
}
