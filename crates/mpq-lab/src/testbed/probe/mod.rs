//! Traffic to measure a testbed with, from threads that enter its namespaces (so one
//! process drives both ends): a UDP echo and RTT probes (what ping does), a paced UDP
//! blast and its sink (rate, loss, which packets an outage took) in [`udp`], and a TCP bulk
//! transfer in [`tcp`]. Datagrams carry a sequence number and their send time.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

pub use super::host::unix_now_ns;
use super::host::Deadline;
use super::sys;

pub mod tcp;
pub mod udp;

pub use tcp::{tcp_send, tcp_sink, TcpReport};
pub use udp::{blast, common_window_rate_bps, echo, rtt, sink, BlastReport, RttStats, SinkReport};

/// IPv4 and UDP headers: what a datagram of N payload bytes adds on the link.
pub const UDP_OVERHEAD: usize = 28;

#[allow(clippy::disallowed_methods)] // measuring real time is the point
pub(crate) fn mono_now() -> std::time::Instant {
    std::time::Instant::now()
}

/// Whether a socket call should just be tried again: nothing was ready, its timeout passed,
/// or a signal interrupted it. A socket call with a timeout returns EINTR even for a signal
/// whose handler asks for restarts (socket(7)); the test processes saw such interruptions
/// (one reset a TCP transfer in about 1 of 15 runs before this retried them).
pub(crate) fn again(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted)
}

/// A probe stopped by SIGINT or SIGTERM (when the process catches them, as `up` does).
pub(crate) fn interrupted() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "interrupted")
}

/// Runs `f` on a new thread inside network namespace `ns`.
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> JoinHandle<io::Result<T>> {
    let ns = ns.to_owned();
    std::thread::spawn(move || {
        sys::enter_netns(&ns)?;
        f()
    })
}

/// Waits for a thread started by [`in_netns`].
pub fn join<T>(h: JoinHandle<io::Result<T>>) -> io::Result<T> {
    h.join().map_err(|_| io::Error::other("probe thread panicked"))?
}

pub(crate) fn bind_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = UdpSocket::bind(addr).map_err(|e| io::Error::new(e.kind(), format!("binding {addr}: {e}")))?;
    // Deep buffers: the probes measure the link, not the socket.
    let _ = sys::force_buffer(s.as_raw_fd(), true, 16 << 20);
    let _ = sys::force_buffer(s.as_raw_fd(), false, 4 << 20);
    Ok(s)
}

/// A thread serving until dropped (or [`Server::stop`]).
pub struct Server<T> {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<io::Result<T>>>,
}

impl<T> Server<T> {
    /// Stops the thread and returns its result.
    pub fn stop(mut self) -> io::Result<T> {
        self.stop.store(true, Ordering::SeqCst);
        match self.handle.take() {
            Some(h) => join(h),
            None => Err(io::Error::other("already stopped")),
        }
    }
}

impl<T> Server<T> {
    /// Waits up to `limit` for the thread to end by itself (a sink ends once idle), then
    /// stops it and returns its result.
    pub fn finish_within(self, limit: Duration) -> io::Result<T> {
        let deadline = Deadline::after(limit);
        while self.handle.as_ref().is_some_and(|h| !h.is_finished()) && !deadline.passed() {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.stop()
    }
}

impl<T> Drop for Server<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Starts `body(socket-ready-callback, stop)` in `ns` and returns once it said it is ready
/// (bounded) or failed.
pub(crate) fn serve<T: Send + 'static>(
    ns: &str,
    body: impl FnOnce(&dyn Fn(), &AtomicBool) -> io::Result<T> + Send + 'static,
) -> io::Result<Server<T>> {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<()>();
    let s2 = stop.clone();
    let handle = in_netns(ns, move || {
        let ready = move || {
            let _ = tx.send(());
        };
        body(&ready, &s2)
    });
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(()) => Ok(Server { stop, handle: Some(handle) }),
        Err(_) => {
            stop.store(true, Ordering::SeqCst);
            match join(handle) {
                Err(e) => Err(e),
                Ok(_) => Err(io::Error::other("the probe server did not start")),
            }
        }
    }
}
