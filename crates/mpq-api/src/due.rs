//! Which connections' address watches must run at a wake of the runtime: those an event
//! concerned, and those whose own timer came due. A wake then costs nothing per idle
//! connection: polling every client connection's watch at every wake made a client holding
//! 4000 idle connections fifteen times slower.

use std::collections::BTreeSet;

use mpq_proto::endpoint::ConnectionHandle;
use mpq_proto::Instant;

/// The connections due for a job.
#[derive(Debug, Default)]
pub(crate) struct Due {
    /// By the instant their job asked to run again.
    at: BTreeSet<(Instant, ConnectionHandle)>,
    /// At the next wake, whatever the time (an event or a new job).
    now: Vec<ConnectionHandle>,
}

impl Due {
    /// `h`'s job runs at the next wake.
    pub fn kick(&mut self, h: ConnectionHandle) {
        self.now.push(h);
    }

    /// `h`'s job runs at `t` (or the first wake after it).
    pub fn at(&mut self, t: Instant, h: ConnectionHandle) {
        self.at.insert((t, h));
    }

    /// The connections due at `now`, each once (a job asked for at an instant that was
    /// later moved runs once more, early, and finds nothing to do).
    pub fn take(&mut self, now: Instant) -> Vec<ConnectionHandle> {
        let mut due = std::mem::take(&mut self.now);
        while let Some(&(t, h)) = self.at.first() {
            if t > now {
                break;
            }
            self.at.pop_first();
            due.push(h);
        }
        due.sort_unstable();
        due.dedup();
        due
    }

    /// When the next job is due: now if one was kicked.
    pub fn next(&self) -> Option<Instant> {
        if self.now.is_empty() {
            self.at.first().map(|e| e.0)
        } else {
            Some(Instant::ZERO)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn jobs_come_due_by_kick_or_time_once_each() {
        let t0 = Instant::ZERO + Duration::from_secs(1);
        let (a, b, c) = (ConnectionHandle(1), ConnectionHandle(2), ConnectionHandle(3));
        let mut d = Due::default();
        assert_eq!(d.next(), None);
        d.at(t0 + Duration::from_millis(10), a);
        d.at(t0 + Duration::from_millis(20), b);
        assert_eq!(d.next(), Some(t0 + Duration::from_millis(10)));
        assert_eq!(d.take(t0), Vec::<ConnectionHandle>::new());
        d.kick(c);
        d.kick(c);
        assert_eq!(d.next(), Some(Instant::ZERO));
        assert_eq!(d.take(t0), vec![c]);
        d.kick(a);
        assert_eq!(d.take(t0 + Duration::from_millis(15)), vec![a]);
        assert_eq!(d.next(), Some(t0 + Duration::from_millis(20)));
        assert_eq!(d.take(t0 + Duration::from_millis(20)), vec![b]);
        assert_eq!(d.next(), None);
    }
}
