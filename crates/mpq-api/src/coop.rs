//! Cooperative yielding for the stream handles: a handle that has answered many polls in a
//! row without waiting answers `Pending` once (after waking its task), so that a task reading
//! or writing data that is always ready gives the executor's other tasks their turn.
//!
//! Why: executors run a task until it returns `Pending`. A task that reads a stream whose data
//! is always there (a fast transfer, a reader slower than the network) never returns it, and
//! every other task on its executor thread starves: with tokio's one-thread runtime, the `mpq`
//! client's `--abandon-after-ms` timer did not fire during a 0.7 s download (interop,
//! 2026-12-05). tokio's own resources do this through its task budget; the API's futures are
//! not tokio's (any executor drives them), so each handle keeps a budget of its own.

use std::task::{Context, Poll};

/// Polls a handle answers `Ready` in a row before it yields once. tokio's budget is 128
/// operations per task; a read or write here moves up to a packet's data or more, so half of
/// that keeps a yield every 100 kB or so, one extra poll in 65.
pub(crate) const READY_IN_A_ROW: u32 = 64;

/// A handle's count of polls answered `Ready` since it last waited or yielded.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    ready: u32,
}

impl Budget {
    /// `Pending`, with the task woken at once, when the handle has answered
    /// [`READY_IN_A_ROW`] polls in a row; else `Ready(())`: go on with the poll.
    pub(crate) fn poll_proceed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.yield_now() {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(())
    }

    /// Counts the poll's answer: a `Ready` spends the budget, a `Pending` (the task will
    /// wait, others run meanwhile) restores it.
    pub(crate) fn spent<T>(&mut self, answer: Poll<T>) -> Poll<T> {
        self.count(answer.is_ready());
        answer
    }

    /// True (and the budget restored) when the handle has answered [`READY_IN_A_ROW`]
    /// polls in a row: the caller wakes its task and answers `Pending`.
    pub(crate) fn yield_now(&mut self) -> bool {
        if self.ready >= READY_IN_A_ROW {
            self.ready = 0;
            return true;
        }
        false
    }

    /// Counts an answer: ready, or a wait.
    pub(crate) fn count(&mut self, ready: bool) {
        self.ready = if ready { self.ready + 1 } else { 0 };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn yields_once_after_a_run_of_ready_answers_and_wakes_its_task() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut b = Budget::default();
        for _ in 0..READY_IN_A_ROW {
            assert!(b.poll_proceed(&mut cx).is_ready());
            assert!(b.spent(Poll::Ready(())).is_ready());
        }
        assert!(b.poll_proceed(&mut cx).is_pending(), "the budget is spent: yield");
        assert_eq!(count.0.load(Ordering::Relaxed), 1, "the yield woke the task");
        assert!(b.poll_proceed(&mut cx).is_ready(), "the yield restored the budget");
    }

    #[test]
    fn a_wait_restores_the_budget() {
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut b = Budget::default();
        for _ in 0..READY_IN_A_ROW - 1 {
            let _ = b.spent(Poll::Ready(()));
        }
        let _ = b.spent(Poll::<()>::Pending);
        for _ in 0..READY_IN_A_ROW {
            assert!(b.poll_proceed(&mut cx).is_ready());
            let _ = b.spent(Poll::Ready(()));
        }
        assert!(b.poll_proceed(&mut cx).is_pending());
    }
}
