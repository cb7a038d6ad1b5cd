//! Time as the core sees it: an opaque monotonic instant passed in by the runtime.
//!
//! The core never reads a clock. Runtimes convert their clock (virtual time in the simulator,
//! `std::time::Instant` in `mpq-io`) to nanoseconds since an epoch of their choosing.

use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time, in nanoseconds since a runtime-chosen epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct Instant(u64);

impl Instant {
    /// The runtime's epoch.
    pub const ZERO: Self = Self(0);

    /// An instant `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Self {
        Self(nanos)
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time since the epoch.
    pub fn since_epoch(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, or `None` on overflow.
    pub fn checked_add(self, d: Duration) -> Option<Self> {
        u64::try_from(d.as_nanos()).ok().and_then(|n| self.0.checked_add(n)).map(Self)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        // Saturate: a timer at the end of time is as good as none.
        Instant(self.0.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating difference: never panics, zero if `rhs` is later.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_nanos(5);
        assert_eq!(t - Instant::from_nanos(10), Duration::ZERO);
        assert_eq!((t + Duration::from_nanos(3)).as_nanos(), 8);
        assert_eq!((t - Duration::from_secs(1)).as_nanos(), 0);
        assert_eq!((t + Duration::MAX).as_nanos(), u64::MAX);
    }
}
