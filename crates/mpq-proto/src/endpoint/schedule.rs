//! Which connections an endpoint must look at, so that one wake costs O(log n) in the number
//! of connections instead of a scan of all of them.
//!
//! Three questions are asked of an endpoint on every wake of its runtime: what is the next
//! timer, who has something to send, who has an event for the application. A connection's
//! answers can only change when something happens to it: a datagram, a timer, the
//! application touching it, or a transmit. Each of those marks the connection *touched*; a
//! touched connection is (re)queued for transmit and events, and its timer is read again and
//! filed in an ordered set. Idle connections cost nothing until their own timer is due.

use std::collections::{BTreeSet, VecDeque};

use crate::time::Instant;

/// Per-connection bookkeeping of a [`Schedule`].
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Marks {
    /// The deadline filed in [`Schedule::timers`] for this connection.
    filed: Option<Instant>,
    /// Queued in [`Schedule::stale`]: its timer must be read again.
    stale: bool,
    /// Queued in [`Schedule::transmit`].
    may_send: bool,
    /// Queued in [`Schedule::events`].
    may_have_events: bool,
}

/// Timers in deadline order and the queues of connections that may have work.
#[derive(Debug, Default)]
pub(crate) struct Schedule {
    marks: Vec<Marks>,
    /// (deadline, connection index): at most one entry per connection, the one in `marks`.
    timers: BTreeSet<(Instant, usize)>,
    stale: Vec<usize>,
    transmit: VecDeque<usize>,
    events: VecDeque<usize>,
}

impl Schedule {
    /// Something happened to connection `idx`: it may send, may have events, and its timer
    /// may have moved.
    pub fn touch(&mut self, idx: usize) {
        self.mark_stale(idx);
        self.mark_may_send(idx);
        self.mark_may_have_events(idx);
    }

    /// Its timer must be read again before the next [`Schedule::next_deadline`].
    pub fn mark_stale(&mut self, idx: usize) {
        let m = self.marks_mut(idx);
        if !m.stale {
            m.stale = true;
            self.stale.push(idx);
        }
    }

    /// Queue `idx` for [`Schedule::next_to_send`].
    pub fn mark_may_send(&mut self, idx: usize) {
        let m = self.marks_mut(idx);
        if !m.may_send {
            m.may_send = true;
            self.transmit.push_back(idx);
        }
    }

    /// Queue `idx` for [`Schedule::next_with_events`].
    pub fn mark_may_have_events(&mut self, idx: usize) {
        let m = self.marks_mut(idx);
        if !m.may_have_events {
            m.may_have_events = true;
            self.events.push_back(idx);
        }
    }

    /// Files the timers of every stale connection; `timer_of(idx)` reads one (`None` for a
    /// connection that no longer exists or has no timer).
    pub fn refresh(&mut self, mut timer_of: impl FnMut(usize) -> Option<Instant>) {
        while let Some(idx) = self.stale.pop() {
            let deadline = timer_of(idx);
            let m = &mut self.marks[idx];
            m.stale = false;
            if m.filed == deadline {
                continue;
            }
            if let Some(old) = m.filed.take() {
                self.timers.remove(&(old, idx));
            }
            if let Some(t) = deadline {
                m.filed = Some(t);
                self.timers.insert((t, idx));
            }
        }
    }

    /// The earliest filed deadline (call [`Schedule::refresh`] first).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.timers.first().map(|&(t, _)| t)
    }

    /// Takes the connection whose filed deadline is earliest if it is due at `now`; it is
    /// marked touched, since firing its timer may change everything about it.
    pub fn pop_due(&mut self, now: Instant) -> Option<usize> {
        let &(t, idx) = self.timers.first()?;
        if t > now {
            return None;
        }
        self.timers.remove(&(t, idx));
        self.marks[idx].filed = None;
        self.touch(idx);
        Some(idx)
    }

    /// The connection to ask for a datagram next, left at the front of the queue.
    pub fn next_to_send(&self) -> Option<usize> {
        self.transmit.front().copied()
    }

    /// The connection at the front of the transmit queue had something: move it to the back
    /// so that connections take turns, one batch each.
    pub fn sent(&mut self, idx: usize) {
        if self.transmit.front() == Some(&idx) {
            self.transmit.pop_front();
            self.transmit.push_back(idx);
        }
        self.mark_stale(idx);
        self.mark_may_have_events(idx);
    }

    /// The connection at the front of the transmit queue had nothing to send: unqueue it
    /// until something happens to it.
    pub fn nothing_to_send(&mut self, idx: usize) {
        if self.transmit.front() == Some(&idx) {
            self.transmit.pop_front();
            self.marks[idx].may_send = false;
        }
        self.mark_stale(idx);
        self.mark_may_have_events(idx);
    }

    /// The connection to ask for an event next.
    pub fn next_with_events(&self) -> Option<usize> {
        self.events.front().copied()
    }

    /// The connection at the front of the event queue has no more events.
    pub fn no_more_events(&mut self, idx: usize) {
        if self.events.front() == Some(&idx) {
            self.events.pop_front();
            self.marks[idx].may_have_events = false;
        }
    }

    /// Connection `idx` is gone (its slot may be reused): forget its timer and take it out of
    /// every queue.
    pub fn forget(&mut self, idx: usize) {
        let Some(m) = self.marks.get_mut(idx) else { return };
        if let Some(t) = m.filed.take() {
            self.timers.remove(&(t, idx));
        }
        if m.may_send {
            self.transmit.retain(|&i| i != idx);
        }
        if m.may_have_events {
            self.events.retain(|&i| i != idx);
        }
        if m.stale {
            self.stale.retain(|&i| i != idx);
        }
        *m = Marks::default();
    }

    /// Filed timers (for tests and statistics).
    pub fn timer_count(&self) -> usize {
        self.timers.len()
    }

    fn marks_mut(&mut self, idx: usize) -> &mut Marks {
        if idx >= self.marks.len() {
            self.marks.resize(idx + 1, Marks::default());
        }
        &mut self.marks[idx]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(0) + Duration::from_millis(ms)
    }

    #[test]
    fn timers_fire_in_deadline_order_and_only_when_due() {
        let mut s = Schedule::default();
        let deadlines = [Some(at(30)), Some(at(10)), None, Some(at(20))];
        for i in 0..deadlines.len() {
            s.touch(i);
        }
        s.refresh(|i| deadlines[i]);
        assert_eq!(s.timer_count(), 3);
        assert_eq!(s.next_deadline(), Some(at(10)));
        assert_eq!(s.pop_due(at(5)), None);
        assert_eq!(s.pop_due(at(25)), Some(1));
        assert_eq!(s.pop_due(at(25)), Some(3));
        assert_eq!(s.pop_due(at(25)), None);
        assert_eq!(s.next_deadline(), Some(at(30)));
    }

    #[test]
    fn a_moved_timer_replaces_the_filed_one() {
        let mut s = Schedule::default();
        s.touch(0);
        s.refresh(|_| Some(at(10)));
        s.touch(0);
        s.refresh(|_| Some(at(50)));
        assert_eq!(s.timer_count(), 1);
        assert_eq!(s.pop_due(at(20)), None);
        s.touch(0);
        s.refresh(|_| None);
        assert_eq!(s.timer_count(), 0);
    }

    #[test]
    fn untouched_connections_are_not_asked_again() {
        let mut s = Schedule::default();
        s.touch(0);
        s.touch(1);
        assert_eq!(s.next_to_send(), Some(0));
        s.sent(0); // had a batch: goes to the back
        assert_eq!(s.next_to_send(), Some(1));
        s.nothing_to_send(1);
        assert_eq!(s.next_to_send(), Some(0));
        s.nothing_to_send(0);
        assert_eq!(s.next_to_send(), None);
        s.touch(1);
        s.touch(1);
        assert_eq!(s.next_to_send(), Some(1));
        s.nothing_to_send(1);
        assert_eq!(s.next_to_send(), None, "touching twice queues once");
    }

    #[test]
    fn forgotten_connections_leave_every_queue() {
        let mut s = Schedule::default();
        s.touch(0);
        s.touch(1);
        s.refresh(|_| Some(at(1)));
        s.forget(0);
        assert_eq!(s.timer_count(), 1);
        assert_eq!(s.next_to_send(), Some(1));
        assert_eq!(s.next_with_events(), Some(1));
        assert_eq!(s.pop_due(at(2)), Some(1));
    }
}
