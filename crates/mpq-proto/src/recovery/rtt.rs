//! RTT estimation (RFC 9002 §5).

use std::time::Duration;

use super::GRANULARITY;

/// Smoothed RTT, variation and minimum of one path.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    initial: Duration,
    latest: Duration,
    smoothed: Duration,
    var: Duration,
    min: Duration,
    has_sample: bool,
}

impl RttEstimator {
    /// An estimator that assumes `initial` until the first sample (RFC 9002 §6.2.2).
    pub fn new(initial: Duration) -> Self {
        Self { initial, latest: initial, smoothed: initial, var: initial / 2, min: initial, has_sample: false }
    }

    /// Adds a sample (RFC 9002 §5.3). `ack_delay` is the peer's reported delay; after the
    /// handshake is confirmed it is capped by `max_ack_delay`, and it is never subtracted
    /// below the minimum RTT.
    pub fn update(
        &mut self,
        ack_delay: Duration,
        sample: Duration,
        max_ack_delay: Duration,
        handshake_confirmed: bool,
    ) {
        self.latest = sample;
        if !self.has_sample {
            self.has_sample = true;
            self.min = sample;
            self.smoothed = sample;
            self.var = sample / 2;
            return;
        }
        self.min = self.min.min(sample);
        let ack_delay = if handshake_confirmed { ack_delay.min(max_ack_delay) } else { ack_delay };
        let adjusted = if sample >= self.min + ack_delay { sample - ack_delay } else { sample };
        let diff = self.smoothed.abs_diff(adjusted);
        self.var = (3 * self.var + diff) / 4;
        self.smoothed = (7 * self.smoothed + adjusted) / 8;
    }

    /// Smoothed RTT.
    pub fn smoothed(&self) -> Duration {
        self.smoothed
    }

    /// RTT variation.
    pub fn rttvar(&self) -> Duration {
        self.var
    }

    /// Minimum RTT seen (the initial RTT before any sample).
    pub fn min(&self) -> Duration {
        self.min
    }

    /// Latest sample.
    pub fn latest(&self) -> Duration {
        self.latest
    }

    /// True once a sample was taken.
    pub fn has_sample(&self) -> bool {
        self.has_sample
    }

    /// `smoothed + max(4 * rttvar, granularity)`: the PTO without max_ack_delay
    /// (RFC 9002 §6.2.1).
    pub fn pto_base(&self) -> Duration {
        self.smoothed + (4 * self.var).max(GRANULARITY)
    }

    /// Forgets every sample (after migration to a new path, RFC 9000 §9.4).
    pub fn reset(&mut self) {
        *self = Self::new(self.initial);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn first_sample_and_smoothing() {
        let mut r = RttEstimator::new(333 * MS);
        assert_eq!(r.pto_base(), 333 * MS + 4 * (333 * MS / 2));
        r.update(Duration::ZERO, 100 * MS, 25 * MS, true);
        assert_eq!((r.smoothed(), r.rttvar(), r.min()), (100 * MS, 50 * MS, 100 * MS));
        // 120 ms with 10 ms of ack delay: adjusted 110 ms.
        r.update(10 * MS, 120 * MS, 25 * MS, true);
        assert_eq!(r.smoothed(), (7 * 100 * MS + 110 * MS) / 8);
        assert_eq!(r.rttvar(), (3 * 50 * MS + 10 * MS) / 4);
    }

    #[test]
    fn ack_delay_rules() {
        let mut r = RttEstimator::new(333 * MS);
        r.update(Duration::ZERO, 100 * MS, 25 * MS, true);
        // Delay beyond max_ack_delay is capped once confirmed.
        r.update(50 * MS, 150 * MS, 25 * MS, true);
        assert_eq!(r.smoothed(), (7 * 100 * MS + 125 * MS) / 8);
        // Never subtract below min_rtt.
        let mut r = RttEstimator::new(333 * MS);
        r.update(Duration::ZERO, 100 * MS, 25 * MS, true);
        r.update(20 * MS, 110 * MS, 25 * MS, true);
        assert_eq!(r.smoothed(), (7 * 100 * MS + 110 * MS) / 8);
        assert_eq!(r.min(), 100 * MS);
    }
}
