//! A run on a thread of its own, and the handle through which the application's threads use
//! the endpoint it drives: they take the same lock as the runtime's threads, and wake the
//! runtime when they let it go so that what they did (data written, a stream opened, a
//! connection closed) is sent.

use std::io;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::thread::JoinHandle;

use super::{control, EndpointDriver, Locked, Settings, Shared, ThreadReport};
use crate::{Clock, UdpSocket};

/// A run on its own thread ([`super::PathThreads::spawn`]). Dropping it stops the run.
pub struct Runtime<D: EndpointDriver + 'static> {
    shared: Arc<Shared<D>>,
    thread: Option<JoinHandle<io::Result<ThreadReport>>>,
}

impl<D: EndpointDriver + 'static> std::fmt::Debug for Runtime<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("running", &self.thread.is_some()).finish_non_exhaustive()
    }
}

/// The driver, locked: the runtime's threads wait until it is dropped, which wakes them to
/// act on what changed (unless [`RuntimeGuard::quiet`]).
pub struct RuntimeGuard<'a, D: EndpointDriver + 'static> {
    /// (`None` only while it is dropped: the lock goes before the wake.)
    guard: Option<MutexGuard<'a, Locked<D>>>,
    shared: &'a Shared<D>,
    /// Wake the runtime when the lock goes.
    kick: bool,
}

impl<D: EndpointDriver + 'static> RuntimeGuard<'_, D> {
    /// Letting this guard go will not wake the runtime: what was done under it has nothing
    /// to send (a stream opened, figures read), or must wait for the next call that has
    /// (a client's first flight, so that what the application writes next leaves with it).
    /// The runtime still acts on it whenever it next wakes.
    pub fn quiet(&mut self) {
        self.kick = false;
    }
}

pub(super) fn spawn<D: EndpointDriver + 'static>(
    sockets: Vec<UdpSocket>,
    clock: Clock,
    settings: Settings,
    name: &str,
    driver: D,
) -> io::Result<Runtime<D>> {
    let (shared, poll) = control::setup(sockets, clock, settings, driver)?;
    let run = shared.clone();
    let thread = std::thread::Builder::new().name(name.into()).spawn(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| control::drive(&run, poll)));
        let result = result.unwrap_or_else(|_| Err(io::Error::other("the runtime thread panicked")));
        if let Err(e) = &result {
            tracing::error!(%e, "the runtime failed: its connections are gone");
            run.fail();
        }
        result
    })?;
    Ok(Runtime { shared, thread: Some(thread) })
}

impl<D: EndpointDriver + 'static> Runtime<D> {
    /// Takes the endpoint's lock (waiting for the runtime's threads to let it go); an error
    /// once the run failed ([`Runtime::has_failed`]): the driver may be half-changed.
    pub fn lock(&self) -> io::Result<RuntimeGuard<'_, D>> {
        let failed = || io::Error::other("the runtime failed (a thread panicked or its sockets failed)");
        if self.has_failed() {
            return Err(failed());
        }
        let guard = self.shared.locked.lock().map_err(|_| failed())?;
        if self.has_failed() {
            return Err(failed());
        }
        Ok(RuntimeGuard { guard: Some(guard), shared: &self.shared, kick: true })
    }

    /// Whether a thread of the run panicked or the runtime thread failed: the driver has
    /// heard of it ([`EndpointDriver::on_runtime_failure`]) and the run is over.
    pub fn has_failed(&self) -> bool {
        self.shared.failed.load(Ordering::Acquire)
    }

    /// The runtime's clock (the protocol's time).
    pub fn clock(&self) -> Clock {
        self.shared.clock
    }

    /// The listening sockets' addresses.
    pub fn local_addrs(&self) -> Vec<std::net::SocketAddr> {
        self.shared.listeners.iter().map(UdpSocket::local_addr).collect()
    }

    /// The run's threads alive now: its own and one per path that has a thread (a path's
    /// thread ends soon after its connection is gone).
    pub fn threads(&self) -> usize {
        self.shared.threads.load(Ordering::Relaxed)
    }

    /// Whether the run is over (stopped, or ended by the driver or an I/O error).
    pub fn is_stopped(&self) -> bool {
        self.shared.stopping() || self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops the run: every thread ends after sending what the connections still have to
    /// say; returns each thread's report (the runtime thread's first).
    pub fn stop(mut self) -> io::Result<Vec<ThreadReport>> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> io::Result<Vec<ThreadReport>> {
        let Some(thread) = self.thread.take() else { return Ok(Vec::new()) };
        self.shared.stop.store(true, Ordering::Release);
        self.shared.control.wake_always();
        let report = match thread.join() {
            Ok(r) => r?,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        let mut reports = vec![report];
        reports.extend(self.shared.reports.lock().expect("reports").drain(..));
        Ok(reports)
    }
}

impl<D: EndpointDriver + 'static> Drop for Runtime<D> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.shared.stop.store(true, Ordering::Release);
            self.shared.control.wake_always();
            return;
        }
        if let Err(e) = self.stop_and_join() {
            tracing::warn!(%e, "the runtime ended with an error");
        }
    }
}

impl<D: EndpointDriver + 'static> Deref for RuntimeGuard<'_, D> {
    type Target = D;
    fn deref(&self) -> &D {
        &self.guard.as_ref().expect("held until dropped").driver
    }
}

impl<D: EndpointDriver + 'static> DerefMut for RuntimeGuard<'_, D> {
    fn deref_mut(&mut self) -> &mut D {
        &mut self.guard.as_mut().expect("held until dropped").driver
    }
}

impl<D: EndpointDriver + 'static> Drop for RuntimeGuard<'_, D> {
    fn drop(&mut self) {
        // The lock first: a runtime thread, or an application's, woken while it is still
        // held would only wait (the driver's deferred wakes, `Driver::take_wakes`, and the
        // path threads woken under it, `Locked::thread_wakes`).
        self.guard.take().map(super::unlock).unwrap_or_default().wake();
        if self.kick {
            // The runtime thread sends what changed and wakes the path threads to look.
            self.shared.app_kick.store(true, Ordering::Release);
            self.shared.control.wake_always();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ops::ControlFlow;
    use std::sync::mpsc;
    use std::time::Duration;

    use mpq_proto::endpoint::{Endpoint, EndpointConfig};
    use mpq_proto::Instant;

    use crate::path_threads::{EndpointDriver, PathThreads};
    use crate::{Clock, Driver, Transmit, UdpSocket};

    /// Panics at its next wake once `boom` is set; tells `failed` when the runtime says it
    /// failed. Defers the wake of the future it is `armed` with to its next round, as the
    /// API's driver does.
    struct Fragile {
        endpoint: Endpoint,
        boom: bool,
        failed: mpsc::Sender<()>,
        armed: Option<std::task::Waker>,
        wakes: Vec<std::task::Waker>,
    }

    impl Fragile {
        fn new(failed: mpsc::Sender<()>) -> Self {
            let endpoint = Endpoint::new(EndpointConfig::with_seed(1), None);
            Fragile { endpoint, boom: false, failed, armed: None, wakes: Vec::new() }
        }
    }

    impl Driver for Fragile {
        fn handle_datagram(
            &mut self,
            _: Instant,
            _: std::net::SocketAddr,
            _: std::net::SocketAddr,
            _: Option<u8>,
            _: &mut [u8],
        ) {
        }
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_timeout(&mut self) -> Option<Instant> {
            None
        }
        fn poll_transmit(&mut self, _: Instant, _: &mut Vec<u8>) -> Option<Transmit> {
            None
        }
        fn on_wake(&mut self, _: Instant) -> ControlFlow<()> {
            assert!(!self.boom, "the test's deliberate panic in the runtime thread");
            self.wakes.extend(self.armed.take());
            ControlFlow::Continue(())
        }
        fn take_wakes(&mut self) -> Vec<std::task::Waker> {
            std::mem::take(&mut self.wakes)
        }
    }

    impl EndpointDriver for Fragile {
        fn endpoint(&mut self) -> &mut Endpoint {
            &mut self.endpoint
        }
        fn on_runtime_failure(&mut self) {
            let _ = self.failed.send(());
        }
    }

    /// A runtime thread that panics ends the run as a failure: the driver hears of it once
    /// (to wake what waits on it), the lock is refused from then on instead of handing out
    /// half-changed state, and stopping reports the failure.
    #[test]
    fn a_panicking_runtime_thread_fails_the_run_and_tells_the_driver() {
        let socket = UdpSocket::bind_shared("127.0.0.1:0".parse().unwrap()).unwrap();
        let (tx, rx) = mpsc::channel();
        let driver = Fragile::new(tx);
        let rt = PathThreads::new(vec![socket], Clock::new()).unwrap().spawn(driver).unwrap();
        assert!(!rt.has_failed());
        // Letting the lock go wakes the runtime thread, whose next round panics.
        rt.lock().expect("running").boom = true;
        rx.recv_timeout(Duration::from_secs(20)).expect("the driver heard of the failure");
        assert!(rt.has_failed());
        assert!(rt.lock().is_err(), "a failed runtime's driver is not handed out");
        assert!(rt.stop().is_err(), "stopping reports the failure");
    }

    /// A future's waker that says whether the endpoint's lock was free when it was woken.
    struct Probe {
        shared: std::sync::Weak<crate::path_threads::Shared<Fragile>>,
        seen: mpsc::Sender<bool>,
    }

    impl std::task::Wake for Probe {
        fn wake(self: std::sync::Arc<Self>) {
            let free = self.shared.upgrade().is_some_and(|s| s.locked.try_lock().is_ok());
            let _ = self.seen.send(free);
        }
    }

    /// The wakes a driver defers go once the lock is let go, whether the runtime's thread
    /// held it (a round) or the application's (a guard): the woken thread finds it free.
    /// (Only the two threads run: when the probe is woken, the other one waits for it.)
    #[test]
    fn deferred_wakes_go_after_the_lock_is_let_go() {
        let socket = UdpSocket::bind_shared("127.0.0.1:0".parse().unwrap()).unwrap();
        let driver = Fragile::new(mpsc::channel().0);
        let rt = PathThreads::new(vec![socket], Clock::new()).unwrap().spawn(driver).unwrap();
        let (tx, seen) = mpsc::channel();
        let probe = || {
            let p = Probe { shared: std::sync::Arc::downgrade(&rt.shared), seen: tx.clone() };
            std::task::Waker::from(std::sync::Arc::new(p))
        };
        // Armed under the application's guard, whose release wakes the runtime thread: its
        // round moves the waker to the deferred wakes, and it wakes it after its lock.
        rt.lock().expect("running").armed = Some(probe());
        assert!(seen.recv_timeout(Duration::from_secs(20)).expect("woken by the runtime's round"));
        // Deferred under the application's guard: woken as the guard goes.
        rt.lock().expect("running").wakes.push(probe());
        assert!(seen.recv_timeout(Duration::from_secs(20)).expect("woken as the guard went"));
        rt.stop().expect("a clean stop");
    }

    /// A sleeping path thread woken under the lock is woken (its poll's eventfd written, a
    /// system call) only once the lock is let go, and once however often it is woken
    /// meanwhile: the later wakes find it awake and tell it to look for work once more.
    #[test]
    fn path_threads_woken_under_the_lock_are_woken_after_it() {
        use crate::path_threads::{unlock, Locked, WorkerCtl};
        use std::sync::atomic::Ordering;
        let locked = std::sync::Mutex::new(Locked::new(Fragile::new(mpsc::channel().0)));
        let mut poll = mio::Poll::new().unwrap();
        let ctl = std::sync::Arc::new(WorkerCtl::new(mio::Waker::new(poll.registry(), mio::Token(7)).unwrap()));
        let mut events = mio::Events::with_capacity(4);
        let mut woken = |poll: &mut mio::Poll| {
            poll.poll(&mut events, Some(Duration::ZERO)).unwrap();
            events.iter().any(|e| e.token() == mio::Token(7))
        };
        ctl.sleeping.store(true, Ordering::Release);
        let mut g = locked.lock().unwrap();
        ctl.wake(&mut g.thread_wakes);
        ctl.wake(&mut g.thread_wakes);
        assert!(!woken(&mut poll), "not woken while the lock is held");
        assert!(!ctl.sleeping.load(Ordering::Acquire) && ctl.kicked.load(Ordering::Acquire));
        let deferred = unlock(g);
        assert!(locked.try_lock().is_ok(), "the lock is let go first");
        assert_eq!(deferred.threads.len(), 1, "woken once");
        deferred.wake();
        assert!(woken(&mut poll), "woken after the lock");
        // Awake, a wake only tells it to look again: nothing to wake after the lock.
        ctl.kicked.store(false, Ordering::Release);
        let mut g = locked.lock().unwrap();
        ctl.wake(&mut g.thread_wakes);
        assert!(unlock(g).threads.is_empty() && ctl.kicked.load(Ordering::Acquire));
    }
}
