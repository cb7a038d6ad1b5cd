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
/// act on what changed.
pub struct RuntimeGuard<'a, D: EndpointDriver + 'static> {
    guard: MutexGuard<'a, Locked<D>>,
    shared: &'a Shared<D>,
}

pub(super) fn spawn<D: EndpointDriver + 'static>(
    sockets: Vec<UdpSocket>,
    clock: Clock,
    settings: Settings,
    driver: D,
) -> io::Result<Runtime<D>> {
    let (shared, poll) = control::setup(sockets, clock, settings, driver)?;
    let run = shared.clone();
    let thread = std::thread::Builder::new().name("mpq-runtime".into()).spawn(move || control::drive(&run, poll))?;
    Ok(Runtime { shared, thread: Some(thread) })
}

impl<D: EndpointDriver + 'static> Runtime<D> {
    /// Takes the endpoint's lock (waiting for the runtime's threads to let it go).
    pub fn lock(&self) -> RuntimeGuard<'_, D> {
        let guard = self.shared.locked.lock().expect("a runtime thread panicked holding the endpoint");
        RuntimeGuard { guard, shared: &self.shared }
    }

    /// The runtime's clock (the protocol's time).
    pub fn clock(&self) -> Clock {
        self.shared.clock
    }

    /// The listening sockets' addresses.
    pub fn local_addrs(&self) -> Vec<std::net::SocketAddr> {
        self.shared.listeners.iter().map(UdpSocket::local_addr).collect()
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
        &self.guard.driver
    }
}

impl<D: EndpointDriver + 'static> DerefMut for RuntimeGuard<'_, D> {
    fn deref_mut(&mut self) -> &mut D {
        &mut self.guard.driver
    }
}

impl<D: EndpointDriver + 'static> Drop for RuntimeGuard<'_, D> {
    fn drop(&mut self) {
        // The runtime thread sends what changed and wakes the path threads to look.
        self.shared.app_kick.store(true, Ordering::Release);
        self.shared.control.wake_always();
    }
}
