//! The calling thread of [`super::PathThreads::run`]: it keeps the listening sockets (the
//! datagrams of connections and paths that have no thread yet, and the endpoint's own
//! answers), starts a thread for every new path of every connection, collects the threads
//! of paths that are gone, and at the end stops them all and sends what the connections
//! still have to say (a CONNECTION_CLOSE) from the listening sockets.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use mio::{Events, Interest, Poll, Token, Waker};
use mpq_proto::conn::Transmit;
use mpq_proto::endpoint::ConnectionHandle;
use quinn_udp::RecvMeta;

use super::worker::{self, PathThread, Worker};
use super::{
    send_on, socket_for, EndpointDriver, Locked, Settings, Shared, ThreadReport, ThreadSlot, WorkerCtl, WorkerSlot,
};
use super::{BLOCKED_WAIT, RX_BUDGET, RX_BUF};
use crate::{Clock, UdpSocket};

/// The token of a thread's waker (sockets take the tokens from 0).
const WAKER: Token = Token(usize::MAX);

/// The shared state of a run and the calling thread's poll over the listening sockets.
pub(super) fn setup<D: EndpointDriver + 'static>(
    mut sockets: Vec<UdpSocket>,
    clock: Clock,
    settings: Settings,
    driver: D,
) -> io::Result<(Arc<Shared<D>>, Poll)> {
    let poll = Poll::new()?;
    for (i, s) in sockets.iter_mut().enumerate() {
        poll.registry().register(s.mio(), Token(i), Interest::READABLE | Interest::WRITABLE)?;
    }
    let waker = Waker::new(poll.registry(), WAKER)?;
    // The CPUs the runtime may use: the pinned ones (each counted once), else those the
    // process may run on (affinity, cgroup quota).
    let cores = if settings.cpus.is_empty() {
        std::thread::available_parallelism().map_or(1, usize::from)
    } else {
        settings.cpus.iter().collect::<std::collections::BTreeSet<_>>().len()
    };
    let shared = Arc::new(Shared {
        locked: Mutex::new(Locked::new(driver)),
        clock,
        stop: AtomicBool::new(false),
        listeners: sockets,
        control: Arc::new(WorkerCtl::new(waker)),
        reports: Mutex::new(Vec::new()),
        failed: AtomicBool::new(false),
        per_path: settings.per_path,
        socket_buffers: settings.socket_buffers,
        no_gro: settings.no_gro,
        app_kick: AtomicBool::new(false),
        lock_spin: settings.lock_spin,
        cores,
        threads: std::sync::atomic::AtomicUsize::new(1),
        max_path_threads: settings.path_threads.resolve(cores),
        cpus: settings.cpus,
    });
    Ok((shared, poll))
}

/// The calling thread's part of a run, until the driver or [`Shared::stop`] stops it: then
/// every path thread is stopped and joined, and what the connections still have to send
/// leaves. Returns the calling thread's report.
pub(super) fn drive<D: EndpointDriver + 'static>(shared: &Arc<Shared<D>>, mut poll: Poll) -> io::Result<ThreadReport> {
    if let Some(&cpu) = shared.cpus.first() {
        super::pin_current_thread(cpu);
    }
    let mut report = ThreadReport::default();
    let cpu_start = super::cpu::thread_cpu_time();
    super::take_lock_held();
    let result = control_loop(shared, &mut poll, &mut report);
    stop_workers(shared, &mut report);
    final_flush(shared, &mut report);
    report.cpu = super::cpu::thread_cpu_time().saturating_sub(cpu_start);
    report.lock_held = super::take_lock_held();
    result.map(|()| report)
}

/// See [`super::PathThreads::run`].
pub(super) fn run<D: EndpointDriver + 'static>(
    sockets: Vec<UdpSocket>,
    clock: Clock,
    settings: Settings,
    driver: D,
) -> io::Result<(D, Vec<ThreadReport>)> {
    let (shared, poll) = setup(sockets, clock, settings, driver)?;
    let report = drive(&shared, poll)?;
    let shared = match Arc::try_unwrap(shared) {
        Ok(s) => s,
        Err(_) => unreachable!("every worker is joined, so none holds the shared state"),
    };
    Ok(into_parts(shared, report))
}

/// The driver and every thread's report (the calling thread's first) of a run that ended.
pub(super) fn into_parts<D>(shared: Shared<D>, report: ThreadReport) -> (D, Vec<ThreadReport>) {
    let locked = shared.locked.into_inner().expect("a runtime thread panicked holding the endpoint");
    let mut reports = vec![report];
    reports.extend(shared.reports.into_inner().expect("reports"));
    (locked.driver, reports)
}

/// Rounds until the driver stops: listening sockets read, timers, the application, threads
/// started and collected, the endpoint's own datagrams sent.
fn control_loop<D: EndpointDriver + 'static>(
    shared: &Arc<Shared<D>>,
    poll: &mut Poll,
    report: &mut ThreadReport,
) -> io::Result<()> {
    let mut events = Events::with_capacity(64);
    let mut rx: Vec<Vec<u8>> = (0..quinn_udp::BATCH_SIZE).map(|_| vec![0u8; RX_BUF]).collect();
    let mut tx: Vec<u8> = Vec::with_capacity(RX_BUF);
    let mut pending: Option<Transmit> = None;
    loop {
        let (deadline, blocked) = {
            let mut g = shared.lock(report);
            let now = shared.clock.now();
            g.driver.handle_timeout(now);
            if g.driver.on_wake(now).is_break() || shared.stopping() {
                return Ok(());
            }
            manage(shared, &mut g)?;
            let blocked = flush(shared, &mut g, &mut tx, &mut pending, report);
            let Locked { driver, workers, threads, thread_wakes, .. } = &mut *g;
            worker::wake_for(driver.endpoint(), workers, None, true, thread_wakes);
            if shared.app_kick.swap(false, Ordering::AcqRel) {
                for t in threads.iter() {
                    t.ctl.wake(thread_wakes);
                }
            }
            let deadline = g.driver.poll_timeout();
            shared.control.sleeping.store(true, Ordering::Release);
            (deadline, blocked)
        };
        // Path threads wait for their paths' timers; this thread for the endpoint's (the
        // connection-wide ones, those of connections without path threads, the
        // application's), for its sockets, and for the others.
        let mut timeout = deadline.map(|t| shared.clock.until(t));
        if blocked {
            timeout = Some(timeout.map_or(BLOCKED_WAIT, |t| t.min(BLOCKED_WAIT)));
        }
        match poll.poll(&mut events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        shared.control.sleeping.store(false, Ordering::Release);
        receive(shared, &mut rx, report);
    }
}

/// Reads every listening socket and hands the datagrams to the endpoint, the general way.
fn receive<D: EndpointDriver>(shared: &Shared<D>, rx: &mut [Vec<u8>], report: &mut ThreadReport) {
    let mut meta = [RecvMeta::default(); quinn_udp::BATCH_SIZE];
    for socket in &shared.listeners {
        let bound = socket.local_addr();
        for _ in 0..RX_BUDGET {
            let n = {
                let mut slices: Vec<IoSliceMut<'_>> = rx.iter_mut().map(|b| IoSliceMut::new(b)).collect();
                socket.recv(&mut slices, &mut meta).unwrap_or_else(|e| {
                    tracing::debug!(%e, "receive failed");
                    0
                })
            };
            if n == 0 {
                break;
            }
            report.io.rx_calls += 1;
            // A path thread may take the record of this change before this thread's next
            // round does: every path thread looks then, whoever took it.
            shared.app_kick.store(true, Ordering::Release);
            let mut g = shared.lock(report);
            let now = shared.clock.now();
            for (m, buf) in meta.iter().zip(rx.iter_mut()).take(n) {
                // On a wildcard socket the destination IP (IP_PKTINFO) names the path.
                let local = match m.dst_ip {
                    Some(ip) if bound.ip().is_unspecified() => SocketAddr::new(ip, bound.port()),
                    _ => bound,
                };
                let mut batch: smallvec::SmallVec<[&mut [u8]; 64]> = buf[..m.len].chunks_mut(m.stride.max(1)).collect();
                report.io.rx_datagrams += batch.len() as u64;
                report.io.rx_bytes += m.len as u64;
                g.driver.handle_datagrams(now, local, m.addr, m.ecn.map(|e| e as u8), &mut batch);
            }
        }
    }
}

/// Sends what the endpoint itself has (answers to unknown peers, connections without path
/// threads); returns true if a socket is full.
fn flush<D: EndpointDriver>(
    shared: &Shared<D>,
    g: &mut Locked<D>,
    tx: &mut Vec<u8>,
    pending: &mut Option<Transmit>,
    report: &mut ThreadReport,
) -> bool {
    loop {
        let t = match pending.take() {
            Some(t) => t,
            None => match g.driver.poll_transmit(shared.clock.now(), tx) {
                Some(t) => t,
                None => return false,
            },
        };
        let (i, src_ip) = socket_for(&shared.listeners, t.source);
        if !send_on(&shared.listeners[i], src_ip, &t, tx, &mut report.io) {
            *pending = Some(t);
            return true;
        }
    }
}

/// Collects the threads that ended and gives a thread to every path that has none; a
/// connection with path threads is left to them.
fn manage<D: EndpointDriver + 'static>(shared: &Arc<Shared<D>>, g: &mut Locked<D>) -> io::Result<()> {
    g.workers.retain(|s| !s.done.load(Ordering::Acquire));
    let mut i = 0;
    while i < g.threads.len() {
        if g.threads[i].ctl.done.load(Ordering::Acquire) {
            let t = g.threads.remove(i);
            join(t);
        } else {
            i += 1;
        }
    }
    if !shared.per_path {
        return Ok(());
    }
    let ep = g.driver.endpoint();
    let mut wanted: Vec<(ConnectionHandle, u64, Option<SocketAddr>, SocketAddr)> = Vec::new();
    for h in ep.handles() {
        let Some(conn) = ep.connection(h) else { continue };
        if conn.is_closed() {
            continue;
        }
        for (id, local, remote) in conn.path_addresses() {
            // (A path whose local address or peer changed gets a worker with a socket for
            // its new 4-tuple; the old one ends.)
            let has =
                g.workers.iter().any(|s| s.conn == h && s.path_id == id && s.remote == remote && s.local == local);
            if !has {
                wanted.push((h, id, local, remote));
            }
        }
    }
    for (h, id, local, remote) in wanted {
        start_worker(shared, g, h, id, local, remote)?;
        g.driver.endpoint().set_path_threads(h, true);
    }
    Ok(())
}

/// Gives path `path_id` of `conn` a socket bound to the path's local address (the first
/// listening socket's when the path does not name one) and connected to its peer, and a
/// thread: one of its own unless the most ([`super::PathThreadLimit`]) are started, else
/// the one that drives the fewest paths.
fn start_worker<D: EndpointDriver + 'static>(
    shared: &Arc<Shared<D>>,
    g: &mut Locked<D>,
    conn: ConnectionHandle,
    path_id: u64,
    local: Option<SocketAddr>,
    remote: SocketAddr,
) -> io::Result<()> {
    let named_local = local;
    let local = local.unwrap_or_else(|| shared.listeners[0].local_addr());
    // On a wildcard address (a client's default socket) the kernel picks the source
    // address by route when the socket connects, as it does for the listening socket's
    // datagrams to that peer.
    let socket = match UdpSocket::bind_connected(local, remote) {
        Ok(s) => {
            let (recv, send) = shared.socket_buffers;
            if recv.is_some() || send.is_some() {
                if let Err(e) = s.set_buffer_sizes(recv, send) {
                    tracing::warn!(%e, "cannot size a path socket's buffers");
                }
            }
            if shared.no_gro {
                if let Err(e) = s.set_gro(false) {
                    tracing::warn!(%e, "cannot turn GRO off on a path socket");
                }
            }
            Some(s)
        }
        Err(e) => {
            tracing::warn!(%local, %remote, %e, "no socket of its own for a path: its datagrams go through the listening socket");
            None
        }
    };
    let done = Arc::new(AtomicBool::new(false));
    let w = Worker { conn, path_id, local: named_local, remote, socket, done: done.clone() };
    // Once the most threads run, the one with the fewest paths. (A thread that found itself
    // without paths has set `quit` under the lock: it ends.)
    let joined = shared.max_path_threads.and_then(|max| {
        let live: Vec<&ThreadSlot> = g.threads.iter().filter(|t| !t.ctl.quit.load(Ordering::Acquire)).collect();
        let least = live.iter().min_by_key(|t| t.ctl.paths.load(Ordering::Acquire));
        least.filter(|_| live.len() >= max).map(|t| t.ctl.clone())
    });
    let ctl = match joined {
        Some(ctl) => ctl,
        None => start_thread(shared, g, path_id)?,
    };
    ctl.paths.fetch_add(1, Ordering::AcqRel);
    ctl.inbox.lock().expect("a path thread's inbox").push(w);
    ctl.wake_always();
    g.workers.push(WorkerSlot { conn, path_id, local: named_local, remote, ctl, done });
    Ok(())
}

/// Starts a path thread (named for `path_id`, its first path, unless paths share threads).
fn start_thread<D: EndpointDriver + 'static>(
    shared: &Arc<Shared<D>>,
    g: &mut Locked<D>,
    path_id: u64,
) -> io::Result<Arc<WorkerCtl>> {
    let poll = Poll::new()?;
    let ctl = Arc::new(WorkerCtl::new(Waker::new(poll.registry(), WAKER)?));
    g.started += 1;
    let cpu = (!shared.cpus.is_empty()).then(|| shared.cpus[g.started % shared.cpus.len()]);
    // (Named for its first path: more may join it once the threads are at their limit.)
    let name = format!("mpq-path-{path_id}");
    let t = PathThread { poll, ctl: ctl.clone(), cpu };
    let thread_shared = shared.clone();
    let thread_ctl = ctl.clone();
    shared.threads.fetch_add(1, Ordering::Relaxed);
    let join = std::thread::Builder::new().name(name).spawn(move || {
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker::run(&thread_shared, t)));
        let report = match run {
            Ok(report) => report,
            Err(_) => {
                // (The panic's message is already on stderr, from the panic hook.)
                tracing::error!(path = path_id, "a path thread panicked: the runtime stops");
                thread_shared.fail();
                ThreadReport::default()
            }
        };
        tracing::debug!(
            paths = ?report.paths,
            cpu_s = report.cpu.as_secs_f64(),
            runs_opened = report.runs_opened,
            batches_built = report.batches_built,
            lock_takes = report.lock_takes,
            lock_wait_s = report.lock_wait.as_secs_f64(),
            lock_held_s = report.lock_held.as_secs_f64(),
            rx_datagrams = report.io.rx_datagrams,
            tx_bytes = report.io.tx_bytes,
            tx_calls = report.io.tx_calls,
            "path thread ended"
        );
        thread_shared.reports.lock().expect("reports").push(report);
        thread_shared.threads.fetch_sub(1, Ordering::Relaxed);
        thread_ctl.done.store(true, Ordering::Release);
        thread_shared.control.wake_always();
    })?;
    g.threads.push(ThreadSlot { ctl: ctl.clone(), join: Some(join) });
    Ok(ctl)
}

/// Waits for an ended thread; a panic in it goes on here.
fn join(mut slot: ThreadSlot) {
    if let Some(j) = slot.join.take() {
        if let Err(panic) = j.join() {
            std::panic::resume_unwind(panic);
        }
    }
}

/// Tells every thread to stop and waits for them (outside the lock: they take it to end
/// their round).
fn stop_workers<D: EndpointDriver>(shared: &Shared<D>, report: &mut ThreadReport) {
    shared.stop.store(true, Ordering::Release);
    let slots: Vec<ThreadSlot> = {
        let mut g = shared.lock(report);
        for t in &g.threads {
            t.ctl.quit.store(true, Ordering::Release);
            t.ctl.wake_always();
        }
        g.workers.clear();
        std::mem::take(&mut g.threads)
    };
    for s in slots {
        join(s);
    }
}

/// The connections go back to the endpoint, and what they still have to send (a
/// CONNECTION_CLOSE) leaves from the listening sockets.
fn final_flush<D: EndpointDriver>(shared: &Shared<D>, report: &mut ThreadReport) {
    let mut g = shared.lock(report);
    let ep = g.driver.endpoint();
    for h in ep.handles() {
        ep.set_path_threads(h, false);
    }
    let mut tx = Vec::with_capacity(RX_BUF);
    let mut pending = None;
    // Bounded: a full socket gets a few chances, then what is left is lost like any datagram.
    for _ in 0..8 {
        if !flush(shared, &mut g, &mut tx, &mut pending, report) {
            break;
        }
        std::thread::yield_now();
    }
}
