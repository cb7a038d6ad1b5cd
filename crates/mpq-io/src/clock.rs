//! The one place the runtime reads the wall clock.

use std::time::Duration;

/// Maps `std::time::Instant` to the protocol's [`mpq_proto::Instant`] (nanoseconds since
/// the clock was created).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: std::time::Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock whose epoch is now.
    #[allow(clippy::disallowed_methods)] // the runtime is where real time enters
    pub fn new() -> Self {
        Self { epoch: std::time::Instant::now() }
    }

    /// The current time.
    #[allow(clippy::disallowed_methods)] // the runtime is where real time enters
    pub fn now(&self) -> mpq_proto::Instant {
        let d = std::time::Instant::now().saturating_duration_since(self.epoch);
        mpq_proto::Instant::from_nanos(d.as_nanos().min(u128::from(u64::MAX)) as u64)
    }

    /// Time until `t`, zero if it has passed.
    pub fn until(&self, t: mpq_proto::Instant) -> Duration {
        t - self.now()
    }
}
