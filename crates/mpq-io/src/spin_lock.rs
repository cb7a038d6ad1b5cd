//! Taking a contended lock by spinning a little before sleeping (issue C2).
//!
//! A path thread holds its endpoint's lock for tens of microseconds per batch (applying
//! what it opened), and another path thread usually wants it at that moment. A plain
//! [`Mutex::lock`] puts the waiter to sleep in the kernel, and waking it costs more than the
//! hold itself: on a virtual machine a sleeping vCPU halts and the wake is an interrupt
//! between vCPUs (not timed directly; what the benchmark shows). `mpq bench receive` with two
//! path threads ran at 0.67-0.69x of one thread with sleeping waiters and at 0.90-1.10x
//! spinning (`docs/runtimes.md`, "Waiting for the lock"). A waiter therefore spins, checking the lock, for up to a bounded
//! time ([`SPIN_BUDGET`]) and only then sleeps, so a holder that was preempted (the machine
//! oversubscribed) costs the waiter at most that budget of CPU.

use std::sync::{LockResult, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

/// How long a waiter spins before it sleeps: longer than a batch's hold (so the common
/// wait never sleeps), short enough that spinning on a preempted holder stays cheap.
pub const SPIN_BUDGET: Duration = Duration::from_micros(200);

/// Spins between two looks at the lock (a look is a cache-line transfer: not every cycle).
const SPINS_PER_LOOK: u32 = 32;

/// Looks at the lock between two readings of the clock.
const LOOKS_PER_CLOCK: u32 = 16;

/// Takes `m`, spinning up to `budget` while another thread holds it, then sleeping. As
/// [`Mutex::lock`]: an error if a thread panicked holding it.
#[allow(clippy::disallowed_methods)] // a runtime's own wait, in real time
pub fn lock_spinning<T>(m: &Mutex<T>, budget: Duration) -> LockResult<MutexGuard<'_, T>> {
    if budget.is_zero() {
        // No spinning at all (a round of looks is tens of microseconds of `pause`).
        return m.lock();
    }
    let mut start: Option<Instant> = None;
    loop {
        for _ in 0..LOOKS_PER_CLOCK {
            match m.try_lock() {
                Ok(g) => return Ok(g),
                Err(TryLockError::Poisoned(e)) => return Err(PoisonError::new(e.into_inner())),
                Err(TryLockError::WouldBlock) => {}
            }
            for _ in 0..SPINS_PER_LOOK {
                std::hint::spin_loop();
            }
        }
        let since = *start.get_or_insert_with(Instant::now);
        if since.elapsed() >= budget {
            return m.lock();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn an_uncontended_lock_is_taken_at_once() {
        let m = Mutex::new(5);
        *lock_spinning(&m, SPIN_BUDGET).expect("not poisoned") += 1;
        assert_eq!(*m.lock().expect("not poisoned"), 6);
    }

    #[test]
    fn threads_exclude_each_other() {
        // Each thread adds non-atomically (read, yield, write): a lost update shows a
        // missing exclusion.
        let m = Arc::new(Mutex::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    for _ in 0..2_000 {
                        let mut g = lock_spinning(&m, SPIN_BUDGET).expect("not poisoned");
                        let v = *g;
                        std::hint::black_box(&v);
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(*m.lock().expect("not poisoned"), 8_000);
    }

    #[test]
    fn a_long_hold_makes_the_waiter_sleep_and_still_get_the_lock() {
        // The holder keeps the lock far past the budget; the waiter falls back to sleeping
        // and takes the lock once it is let go (a channel orders the steps, no sleeps).
        let m = Arc::new(Mutex::new(0));
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                let mut g = m.lock().expect("not poisoned");
                held_tx.send(()).expect("send");
                release_rx.recv().expect("release");
                *g = 1;
            })
        };
        held_rx.recv().expect("held");
        let waiter = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || *lock_spinning(&m, Duration::ZERO).expect("not poisoned"))
        };
        release_tx.send(()).expect("send");
        holder.join().expect("holder");
        assert_eq!(waiter.join().expect("waiter"), 1, "the waiter saw the holder's write");
    }

    #[test]
    fn a_poisoned_lock_is_reported() {
        let m = Arc::new(Mutex::new(0));
        let m2 = Arc::clone(&m);
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().expect("not poisoned");
            panic!("poison the lock (expected in this test)");
        })
        .join();
        assert!(lock_spinning(&m, SPIN_BUDGET).is_err());
    }
}
