//! Which connections' address watches must run at a wake of the runtime: those an event
//! concerned, and those whose own timer came due. A wake then costs nothing per idle
//! connection: polling every client connection's watch at every wake made a client holding
//! 4000 idle connections fifteen times slower.

use std::collections::{BTreeSet, HashMap};

use mpq_proto::endpoint::ConnectionHandle;
use mpq_proto::Instant;

/// The connections due for a job.
#[derive(Debug, Default)]
pub(crate) struct Due {
    /// By the instant their job asked to run again: one entry per connection.
    at: BTreeSet<(Instant, ConnectionHandle)>,
    /// Each connection's entry in `at`, to replace it when its job asks for another instant.
    when: HashMap<ConnectionHandle, Instant>,
    /// At the next wake, whatever the time (an event or a new job).
    now: Vec<ConnectionHandle>,
}

impl Due {
    /// `h`'s job runs at the next wake.
    pub fn kick(&mut self, h: ConnectionHandle) {
        self.now.push(h);
    }

    /// `h`'s job runs at `t` (or the first wake after it), instead of when it asked before.
    pub fn at(&mut self, t: Instant, h: ConnectionHandle) {
        if let Some(before) = self.when.insert(h, t) {
            self.at.remove(&(before, h));
        }
        self.at.insert((t, h));
    }

    /// The connections due at `now`, each once.
    pub fn take(&mut self, now: Instant) -> Vec<ConnectionHandle> {
        let mut due = std::mem::take(&mut self.now);
        while let Some(&(t, h)) = self.at.first() {
            if t > now {
                break;
            }
            self.at.pop_first();
            self.when.remove(&h);
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

    /// A job that asks for another instant keeps one entry: it does not run at the old one.
    #[test]
    fn a_job_moved_to_another_instant_runs_only_then() {
        let t0 = Instant::ZERO + Duration::from_secs(1);
        let a = ConnectionHandle(1);
        let mut d = Due::default();
        d.at(t0 + Duration::from_millis(10), a);
        d.at(t0 + Duration::from_millis(30), a);
        assert_eq!(d.next(), Some(t0 + Duration::from_millis(30)));
        assert!(d.take(t0 + Duration::from_millis(20)).is_empty());
        d.at(t0 + Duration::from_millis(5), a);
        assert_eq!(d.take(t0 + Duration::from_millis(40)), vec![a]);
        assert_eq!((d.next(), d.at.len(), d.when.len()), (None, 0, 0));
    }
}
