//! The runtime with a thread per path (issue C2): each path of a connection is driven by a
//! worker thread that owns a UDP socket connected to the path's peer, so the kernel hands the
//! path's datagrams to that thread, which opens them and builds the path's send batches
//! without the endpoint's lock ([`mpq_proto::conn::RecvRun`], [`mpq_proto::conn::SendBatch`]),
//! meeting the shared state under the lock once before and once after each batch.
//!
//! There is no fixed control thread for a connection: whichever thread holds the lock does
//! what is connection-wide (the handshake's datagrams, timers, the application's work, the
//! close). The thread that calls [`PathThreads::run`] keeps the listening sockets (datagrams
//! of connections and paths not yet given a thread, the endpoint's own answers), starts a
//! worker for every new path and ends the workers of paths that are gone.
//!
//! The paths get at most as many threads as the runtime has CPUs ([`PathThreadLimit`]);
//! paths beyond share them (a thread then drives several paths' sockets, each path as
//! above): with more paths than cores, a thread per path means every path's batches wait
//! for a CPU and each switch evicts the others' buffers from the caches.
//!
//! A worker sleeps only when its round did nothing; before it sleeps it says so under the
//! lock, so a thread that later makes work for its path (data to send while the path's
//! window has room, or the scheduler picking it) wakes it. Every thread sleeps until the
//! endpoint's next timer at most, and whichever wakes first fires it.

mod control;
mod cpu;
mod handle;
mod limit;
mod worker;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use mpq_proto::endpoint::{ConnectionHandle, Endpoint};

use crate::{Clock, Driver, LoopStats, UdpSocket};

pub use cpu::{allowed_cpus, pin_current_thread, thread_cpu_time};
pub use handle::{Runtime, RuntimeGuard};
pub use limit::PathThreadLimit;

/// What the runtime with a thread per path drives: a [`Driver`] (an endpoint and its
/// application, as for the single-thread loop) that also gives access to its endpoint.
pub trait EndpointDriver: Driver + Send {
    /// The QUIC endpoint.
    fn endpoint(&mut self) -> &mut Endpoint;

    /// A thread of the runtime panicked, or the runtime thread of [`PathThreads::spawn`]
    /// ended with an I/O error: the run is over. Called once, on the failing thread, with
    /// the driver as the failure left it (possibly half-changed), so that it can wake
    /// whatever waits on it; it must not rely on the protocol state.
    fn on_runtime_failure(&mut self) {}
}

/// What one thread of a run did.
#[derive(Debug, Clone, Default)]
pub struct ThreadReport {
    /// The path of a thread that drove one path; `None` for the thread that ran
    /// [`PathThreads::run`] (the listening sockets) and for a thread that drove several.
    pub path_id: Option<u64>,
    /// Every path the thread drove, in the order it was given them (empty for the thread
    /// that ran [`PathThreads::run`] and for a shard's thread).
    pub paths: Vec<u64>,
    /// The shard of a thread of the shard runtime ([`crate::shards::Shards`]).
    pub shard: Option<usize>,
    /// Datagrams a shard's thread passed to the shard that owns their connection (those
    /// the kernel's steering did not deliver there).
    pub forwarded: u64,
    /// The connection of the path.
    pub connection: Option<ConnectionHandle>,
    /// The path's local and remote addresses.
    pub addresses: Option<(SocketAddr, SocketAddr)>,
    /// CPU time the thread used.
    pub cpu: Duration,
    /// Its socket counters.
    pub io: LoopStats,
    /// Receive batches opened without the lock.
    pub runs_opened: u64,
    /// Send batches built without the lock.
    pub batches_built: u64,
    /// Times the thread took the endpoint's lock.
    pub lock_takes: u64,
    /// Time spent waiting for the lock.
    pub lock_wait: Duration,
    /// Time the thread held the lock: the run's serial part (only one thread at a time
    /// holds it), from which an Amdahl bound follows.
    pub lock_held: Duration,
}

/// The runtime with a thread per path, over the listening sockets given.
pub struct PathThreads {
    sockets: Vec<UdpSocket>,
    clock: Clock,
    settings: Settings,
}

/// How a run is set up ([`PathThreads`]'s builder calls).
#[derive(Debug, Clone, Default)]
struct Settings {
    /// CPUs to pin threads to.
    cpus: Vec<usize>,
    /// Paths get threads of their own.
    per_path: bool,
    /// SO_RCVBUF and SO_SNDBUF of the paths' own sockets (`None`: the default).
    socket_buffers: (Option<usize>, Option<usize>),
    /// The paths' own sockets have UDP GRO turned off.
    no_gro: bool,
    /// How long a thread spins for a held lock before sleeping (`None`: automatic).
    lock_spin: Option<Duration>,
    /// Most threads for paths.
    path_threads: PathThreadLimit,
}

impl std::fmt::Debug for PathThreads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PathThreads").field("sockets", &self.sockets).field("settings", &self.settings).finish()
    }
}

impl PathThreads {
    /// A runtime over `sockets`, which must have been bound with
    /// [`UdpSocket::bind_shared`] (each path's socket shares its address).
    pub fn new(sockets: Vec<UdpSocket>, clock: Clock) -> io::Result<Self> {
        if sockets.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "the runtime needs a socket"));
        }
        Ok(Self { sockets, clock, settings: Settings { per_path: true, ..Settings::default() } })
    }

    /// No path threads: the thread of [`PathThreads::run`] (or of [`PathThreads::spawn`])
    /// drives every connection, as the single-thread loop does, with the endpoint behind the
    /// lock so that other threads may use it ([`Runtime::lock`]).
    pub fn single_thread(mut self) -> Self {
        self.settings.per_path = false;
        self
    }

    /// Pins the threads to these CPUs in turn: the calling thread to the first, each path's
    /// thread to the next (cycling).
    pub fn pin_to(mut self, cpus: Vec<usize>) -> Self {
        self.settings.cpus = cpus;
        self
    }

    /// Sizes the paths' own sockets' kernel buffers (SO_RCVBUF, SO_SNDBUF; `None` keeps the
    /// default). The listening sockets are the caller's: size them before
    /// ([`UdpSocket::set_buffer_sizes`]).
    pub fn socket_buffers(mut self, recv: Option<usize>, send: Option<usize>) -> Self {
        self.settings.socket_buffers = (recv, send);
        self
    }

    /// Turns UDP GRO off on the paths' own sockets ([`UdpSocket::set_gro`]); the listening
    /// sockets are the caller's.
    pub fn without_gro(mut self) -> Self {
        self.settings.no_gro = true;
        self
    }

    /// How long a thread that finds the endpoint's lock held spins before it sleeps
    /// (`mpq_io::spin_lock`). `None`, the default, spins up to
    /// [`crate::spin_lock::SPIN_BUDGET`] while the runtime has no more threads than the
    /// CPUs it may use (the pinned ones, else the machine's), and not at all beyond: a
    /// thread waiting for a holder that has no CPU of its own would only burn time.
    pub fn lock_spin(mut self, spin: Option<Duration>) -> Self {
        self.settings.lock_spin = spin;
        self
    }

    /// How many threads the paths of every connection of the endpoint share (by default
    /// [`PathThreadLimit::Cores`]).
    pub fn path_thread_limit(mut self, limit: PathThreadLimit) -> Self {
        self.settings.path_threads = limit;
        self
    }

    /// Every listening socket's address, in order.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.sockets.iter().map(|s| s.local_addr()).collect()
    }

    /// Runs until the driver returns `Break` (from any thread) or an I/O error occurs on a
    /// listening socket. Returns the driver and a report per thread (the calling thread's
    /// first).
    pub fn run<D: EndpointDriver + 'static>(self, driver: D) -> io::Result<(D, Vec<ThreadReport>)> {
        control::run(self.sockets, self.clock, self.settings, driver)
    }

    /// Runs on a thread of its own (`mpq-runtime`) and returns at once with a handle through
    /// which other threads use the driver ([`Runtime::lock`]) and stop the run.
    pub fn spawn<D: EndpointDriver + 'static>(self, driver: D) -> io::Result<Runtime<D>> {
        handle::spawn(self.sockets, self.clock, self.settings, "mpq-runtime", driver)
    }

    /// [`PathThreads::spawn`] with the runtime thread named `name` (at most 15 bytes show:
    /// Linux's limit), e.g. `mpq-shard-3` for one of several shards, so that per-thread
    /// figures taken by name (`/proc`, `perf`) tell the runtimes apart.
    pub fn spawn_named<D: EndpointDriver + 'static>(self, name: &str, driver: D) -> io::Result<Runtime<D>> {
        handle::spawn(self.sockets, self.clock, self.settings, name, driver)
    }
}

/// What the threads share.
struct Shared<D> {
    /// The driver, and the workers' table, behind the lock.
    locked: Mutex<Locked<D>>,
    clock: Clock,
    /// Every thread stops.
    stop: AtomicBool,
    /// The listening sockets: also the way out for datagrams that are not a path's own.
    listeners: Vec<UdpSocket>,
    /// Wakes the calling thread.
    control: Arc<WorkerCtl>,
    /// Reports of the workers that ended.
    reports: Mutex<Vec<ThreadReport>>,
    /// A thread panicked or the runtime thread failed ([`Shared::fail`]).
    failed: AtomicBool,
    /// CPUs to pin threads to.
    cpus: Vec<usize>,
    /// Paths get threads of their own (else the calling thread drives them all).
    per_path: bool,
    /// SO_RCVBUF and SO_SNDBUF of the paths' own sockets.
    socket_buffers: (Option<usize>, Option<usize>),
    /// [`PathThreads::without_gro`].
    no_gro: bool,
    /// An application thread changed the endpoint ([`Runtime::lock`]), or the calling thread
    /// received datagrams: every path thread looks for work at the calling thread's next
    /// round.
    app_kick: AtomicBool,
    /// [`PathThreads::lock_spin`].
    lock_spin: Option<Duration>,
    /// The CPUs the runtime may use (the pinned ones, else the machine's).
    cores: usize,
    /// The runtime's threads now: the calling thread and the live path threads.
    threads: std::sync::atomic::AtomicUsize,
    /// The most path threads ([`PathThreadLimit::resolve`]; `None`: a thread per path).
    max_path_threads: Option<usize>,
}

/// What is behind the lock.
struct Locked<D> {
    driver: D,
    /// Every path that has a thread.
    workers: Vec<WorkerSlot>,
    /// The path threads.
    threads: Vec<ThreadSlot>,
    /// Path threads started so far (for pinning in turn).
    started: usize,
    /// Sleeping path threads woken under the lock ([`WorkerCtl::wake`]), whose wake, a
    /// write to their poll's eventfd, waits until the lock is let go ([`unlock`]): a system
    /// call made holding the lock is a point where the kernel may preempt the holder, for
    /// the thread it wakes among others, which would then only wait for the lock.
    thread_wakes: Vec<Arc<WorkerCtl>>,
}

impl<D> Locked<D> {
    /// `driver`, with no path threads yet.
    fn new(driver: D) -> Self {
        Self { driver, workers: Vec::new(), threads: Vec::new(), started: 0, thread_wakes: Vec::new() }
    }
}

/// One path with a thread, as the other threads see it.
struct WorkerSlot {
    conn: ConnectionHandle,
    path_id: u64,
    /// The path's local address (as the path names it) and peer when the worker started.
    local: Option<SocketAddr>,
    remote: SocketAddr,
    /// Its thread's.
    ctl: Arc<WorkerCtl>,
    /// Its thread no longer drives it (set under the lock).
    done: Arc<AtomicBool>,
}

/// A path thread.
struct ThreadSlot {
    ctl: Arc<WorkerCtl>,
    join: Option<std::thread::JoinHandle<()>>,
}

/// How other threads reach a sleeping thread.
struct WorkerCtl {
    waker: mio::Waker,
    /// The thread is asleep or about to be (set under the lock).
    sleeping: AtomicBool,
    /// A wake came while the thread was awake (after it looked for work, maybe): it looks
    /// again instead of sleeping (read and set under the lock).
    kicked: AtomicBool,
    /// The thread should end (its path is gone, or the run stops).
    quit: AtomicBool,
    /// The thread has ended.
    done: AtomicBool,
    /// The timer the thread sleeps until, in nanoseconds of the runtime's clock (`u64::MAX`:
    /// none); set under the lock with `sleeping`. Another thread's round that brings the
    /// path's timer earlier wakes it ([`worker::wake_for_timers`]).
    sleep_until: std::sync::atomic::AtomicU64,
    /// Paths given to the thread that it has not taken yet (pushed under the lock).
    inbox: Mutex<Vec<worker::Worker>>,
    /// The paths the thread drives or has been given (changed under the lock).
    paths: std::sync::atomic::AtomicUsize,
}

impl WorkerCtl {
    fn new(waker: mio::Waker) -> Self {
        Self {
            waker,
            sleeping: AtomicBool::new(false),
            kicked: AtomicBool::new(false),
            quit: AtomicBool::new(false),
            done: AtomicBool::new(false),
            sleep_until: std::sync::atomic::AtomicU64::new(u64::MAX),
            inbox: Mutex::new(Vec::new()),
            paths: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Wakes the thread if it sleeps, once `later` is woken ([`Locked::thread_wakes`],
    /// after the lock); if it is awake, it looks for work once more before it sleeps (it may
    /// have looked already). Called under the lock.
    fn wake(self: &Arc<Self>, later: &mut Vec<Arc<WorkerCtl>>) {
        if self.sleeping.swap(false, Ordering::AcqRel) {
            // (Its `sleeping` is false from now on: it is woken once, whoever else wakes
            // it before the lock goes.)
            later.push(self.clone());
        } else {
            self.kicked.store(true, Ordering::Release);
        }
    }

    /// Wakes the thread whatever it does.
    fn wake_always(&self) {
        self.sleeping.store(false, Ordering::Release);
        let _ = self.waker.wake();
    }
}

thread_local! {
    /// How long this thread has held the endpoint's lock ([`Held`]).
    static HELD: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}

/// The time this thread held the lock since the last call (the report's `lock_held`).
fn take_lock_held() -> Duration {
    HELD.with(|h| h.replace(Duration::ZERO))
}

/// The endpoint's lock, held: its time is added to the thread's account when it is let go,
/// and the wakes the driver deferred under it go after it ([`Driver::take_wakes`]).
struct Held<'a, D: EndpointDriver> {
    /// (`None` only while it is dropped: the lock goes before the wakes.)
    guard: Option<MutexGuard<'a, Locked<D>>>,
    since: std::time::Instant,
}

impl<D: EndpointDriver> std::ops::Deref for Held<'_, D> {
    type Target = Locked<D>;
    fn deref(&self) -> &Locked<D> {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl<D: EndpointDriver> std::ops::DerefMut for Held<'_, D> {
    fn deref_mut(&mut self) -> &mut Locked<D> {
        self.guard.as_mut().expect("held until dropped")
    }
}

/// The wakes deferred under the lock, to be done once it is let go ([`unlock`]).
#[derive(Default)]
struct Deferred {
    /// The application's futures ([`Driver::take_wakes`]).
    app: Vec<std::task::Waker>,
    /// Path threads ([`Locked::thread_wakes`]).
    threads: Vec<Arc<WorkerCtl>>,
}

impl Deferred {
    /// Wakes them: the path threads (a write to each one's eventfd), then the application's
    /// futures.
    fn wake(self) {
        for t in self.threads {
            let _ = t.waker.wake();
        }
        self.app.into_iter().for_each(std::task::Waker::wake);
    }
}

/// Lets the lock go, then returns the wakes deferred under it, to be done now that a woken
/// thread finds it free.
fn unlock<D: EndpointDriver>(mut guard: MutexGuard<'_, Locked<D>>) -> Deferred {
    let app = guard.driver.take_wakes();
    let threads = std::mem::take(&mut guard.thread_wakes);
    drop(guard);
    Deferred { app, threads }
}

impl<D: EndpointDriver> Drop for Held<'_, D> {
    fn drop(&mut self) {
        let wakes = self.guard.take().map(unlock).unwrap_or_default();
        let held = self.since.elapsed();
        HELD.with(|h| h.set(h.get() + held));
        wakes.wake();
    }
}

impl<D> Shared<D> {
    /// Takes the lock, counting the take, the wait and (when it is let go) the hold.
    #[allow(clippy::disallowed_methods)] // the runtime measures its own waits in real time
    fn lock(&self, report: &mut ThreadReport) -> Held<'_, D>
    where
        D: EndpointDriver,
    {
        report.lock_takes += 1;
        if let Ok(guard) = self.locked.try_lock() {
            return Held { guard: Some(guard), since: std::time::Instant::now() };
        }
        let start = std::time::Instant::now();
        // A thread that panicked holding the lock left the protocol state half-changed:
        // nothing sound can go on, so the panic spreads.
        let guard = crate::spin_lock::lock_spinning(&self.locked, self.spin_budget())
            .expect("a runtime thread panicked holding the endpoint");
        let since = std::time::Instant::now();
        report.lock_wait += since - start;
        Held { guard: Some(guard), since }
    }

    /// How long a waiter spins ([`PathThreads::lock_spin`]).
    fn spin_budget(&self) -> Duration {
        self.lock_spin.unwrap_or_else(|| {
            if self.threads.load(Ordering::Relaxed) <= self.cores {
                crate::spin_lock::SPIN_BUDGET
            } else {
                Duration::ZERO
            }
        })
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// The run failed (a thread panicked, or the runtime thread's I/O failed): every thread
    /// stops, and the driver hears of it once ([`EndpointDriver::on_runtime_failure`]) to
    /// wake what waits on it. The lock may be poisoned: the driver is taken as it is.
    fn fail(&self)
    where
        D: EndpointDriver,
    {
        if self.failed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.stop.store(true, Ordering::Release);
        let mut g = self.locked.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        g.driver.on_runtime_failure();
        for t in &g.threads {
            t.ctl.quit.store(true, Ordering::Release);
            t.ctl.wake_always();
        }
        unlock(g).wake();
        self.control.wake_always();
    }
}

/// The listening socket a datagram from `source` leaves from: the one bound there, else one
/// bound to the wildcard address on its port (sending with the source IP), else the first.
fn socket_for(sockets: &[UdpSocket], source: Option<SocketAddr>) -> (usize, Option<std::net::IpAddr>) {
    let Some(src) = source else { return (0, None) };
    if let Some(i) = sockets.iter().position(|s| s.local_addr() == src) {
        return (i, None);
    }
    let wildcard = sockets.iter().position(|s| {
        let l = s.local_addr();
        l.ip().is_unspecified() && l.port() == src.port()
    });
    match wildcard {
        Some(i) => (i, Some(src.ip())),
        None => (0, None),
    }
}

/// Sends `t` through `socket` (with `src_ip` on a wildcard socket); false if it would block.
/// Errors are losses, as in the single-thread loop.
fn send_on(
    socket: &UdpSocket,
    src_ip: Option<std::net::IpAddr>,
    t: &mpq_proto::conn::Transmit,
    buf: &[u8],
    stats: &mut LoopStats,
) -> bool {
    let seg = t.segment_size.filter(|&s| s < t.size);
    match socket.send_from(t.destination, src_ip, &buf[..t.size], seg, t.ecn) {
        Ok(true) => {
            stats.tx_calls += 1;
            stats.tx_bytes += t.size as u64;
            true
        }
        Ok(false) => false,
        Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
            stats.tx_too_big += 1;
            true
        }
        Err(e) => {
            tracing::debug!(%e, "send failed");
            true
        }
    }
}

/// Size of one receive buffer: a full GRO batch.
const RX_BUF: usize = 64 * 1024;
/// Receive batches (recvmmsg calls) per round before sending gets a turn. Small: with more
/// path threads than cores a thread that finds its socket's queue deep after waiting for a
/// CPU sends its ACKs and data after two calls, not sixteen. At 8 paths on 2 cores, over
/// loopback on 2026-12-01, that took per-path from 0.84x to 0.95x single's goodput and from
/// 1.19x to 1.05x its CPU per GB in 11 alternated runs (later series of this build: 0.89-0.92x
/// and 1.08-1.11x); at 2 paths it changed nothing measurable.
const RX_BUDGET: usize = 2;
/// Longest sleep while a send waits for the socket to drain.
const BLOCKED_WAIT: Duration = Duration::from_millis(5);
