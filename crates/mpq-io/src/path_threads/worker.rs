//! One path's thread: receive the path's datagrams on its connected socket and open them
//! without the lock, build the path's send batches without the lock, and between rounds do
//! whatever connection-wide work is due (timers, the application) under it.

use std::io::IoSliceMut;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use mio::{Events, Poll};
use mpq_proto::conn::{PathTransmit, Transmit};
use mpq_proto::endpoint::{ConnectionHandle, Endpoint};
use quinn_udp::RecvMeta;

use super::{send_on, socket_for, EndpointDriver, Locked, Shared, ThreadReport, WorkerCtl, WorkerSlot};
use super::{BLOCKED_WAIT, RX_BUDGET, RX_BUF};
use crate::UdpSocket;

/// What a worker is given when it starts.
pub(super) struct Worker {
    pub conn: ConnectionHandle,
    pub path_id: u64,
    /// The path's peer.
    pub remote: SocketAddr,
    /// The socket connected to the peer, registered with `poll`; `None` if it could not be
    /// bound (the path's datagrams then reach the listening socket and go the general way).
    pub socket: Option<UdpSocket>,
    pub poll: Poll,
    pub ctl: Arc<WorkerCtl>,
    /// CPU to pin to.
    pub cpu: Option<usize>,
}

/// How a round went.
#[derive(Default)]
struct Round {
    /// Datagrams came or went.
    busy: bool,
    /// A send waits for the socket to drain.
    blocked: bool,
    /// The path or its connection is gone, or its peer's address changed.
    gone: bool,
}

/// The worker's loop; returns its report.
pub(super) fn run<D: EndpointDriver>(shared: &Shared<D>, mut w: Worker) -> ThreadReport {
    if let Some(cpu) = w.cpu {
        super::pin_current_thread(cpu);
    }
    let local = w.socket.as_ref().map(UdpSocket::local_addr);
    let mut report = ThreadReport {
        path_id: Some(w.path_id),
        connection: Some(w.conn),
        addresses: local.map(|l| (l, w.remote)),
        ..ThreadReport::default()
    };
    let cpu_start = super::cpu::thread_cpu_time();
    let mut rx: Vec<Vec<u8>> = (0..quinn_udp::BATCH_SIZE).map(|_| vec![0u8; RX_BUF]).collect();
    let mut tx: Vec<u8> = Vec::with_capacity(RX_BUF);
    let mut pending: Option<Transmit> = None;
    let mut events = Events::with_capacity(16);
    while !shared.stopping() && !w.ctl.quit.load(Ordering::Acquire) {
        let mut round = Round::default();
        if let Some(socket) = &w.socket {
            receive(shared, &w, socket, &mut rx, &mut report, &mut round);
        }
        send(shared, &w, &mut tx, &mut pending, &mut report, &mut round);
        let deadline = after_round(shared, &w, &mut tx, &mut report, &mut round);
        if round.gone {
            break;
        }
        if round.busy {
            continue;
        }
        let mut timeout = deadline.map(|t| shared.clock.until(t));
        if round.blocked {
            timeout = Some(timeout.map_or(BLOCKED_WAIT, |t| t.min(BLOCKED_WAIT)));
        }
        if let Err(e) = w.poll.poll(&mut events, timeout) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                tracing::warn!(%e, path = w.path_id, "a path thread cannot wait for its socket");
                break;
            }
        }
        w.ctl.sleeping.store(false, Ordering::Release);
    }
    report.cpu = super::cpu::thread_cpu_time().saturating_sub(cpu_start);
    report
}

/// Receives what waits on the path's socket and hands it over, a GRO batch at a time.
fn receive<D: EndpointDriver>(
    shared: &Shared<D>,
    w: &Worker,
    socket: &UdpSocket,
    rx: &mut [Vec<u8>],
    report: &mut ThreadReport,
    round: &mut Round,
) {
    let mut meta = [RecvMeta::default(); quinn_udp::BATCH_SIZE];
    let local = socket.local_addr();
    for _ in 0..RX_BUDGET {
        let n = {
            let mut slices: Vec<IoSliceMut<'_>> = rx.iter_mut().map(|b| IoSliceMut::new(b)).collect();
            match socket.recv(&mut slices, &mut meta) {
                Ok(n) => n,
                Err(e) => {
                    tracing::debug!(%e, path = w.path_id, "receive failed");
                    0
                }
            }
        };
        if n == 0 {
            return;
        }
        round.busy = true;
        report.io.rx_calls += 1;
        for (m, buf) in meta.iter().zip(rx.iter_mut()).take(n) {
            let stride = m.stride.max(1);
            let mut batch: smallvec::SmallVec<[&mut [u8]; 64]> = buf[..m.len].chunks_mut(stride).collect();
            report.io.rx_datagrams += batch.len() as u64;
            report.io.rx_bytes += m.len as u64;
            let ecn = m.ecn.map(|e| e as u8);
            hand_over(shared, w, local, m.addr, ecn, &mut batch, report);
        }
    }
}

/// One GRO batch: opened without the lock when it is the path's steady traffic, else
/// handled the general way under the lock.
fn hand_over<D: EndpointDriver>(
    shared: &Shared<D>,
    w: &Worker,
    local: SocketAddr,
    remote: SocketAddr,
    ecn: Option<u8>,
    batch: &mut [&mut [u8]],
    report: &mut ThreadReport,
) {
    let Some(first) = batch.first() else { return };
    let mut g = shared.lock(report);
    let now = shared.clock.now();
    let ep = g.driver.endpoint();
    let run = match ep.route_datagram(first) {
        Some((h, Some(p))) if h == w.conn && p == w.path_id => ep.begin_recv_run(h, p, remote),
        _ => None,
    };
    let Some(mut run) = run else {
        g.driver.handle_datagrams(now, local, remote, ecn, batch);
        return;
    };
    drop(g);
    run.open(now, batch);
    report.runs_opened += 1;
    let mut g = shared.lock(report);
    g.driver.endpoint().end_recv_run(now, w.conn, local, ecn, run, batch);
}

/// Sends what the path has, batch after batch, until it has nothing or the socket is full.
fn send<D: EndpointDriver>(
    shared: &Shared<D>,
    w: &Worker,
    tx: &mut Vec<u8>,
    pending: &mut Option<Transmit>,
    report: &mut ThreadReport,
    round: &mut Round,
) {
    loop {
        let t = match pending.take() {
            Some(t) => t,
            None => {
                let mut g = shared.lock(report);
                let now = shared.clock.now();
                match g.driver.endpoint().poll_path_transmit(now, w.conn, w.path_id, tx) {
                    PathTransmit::Ready(t) => t,
                    PathTransmit::Batch(mut b) => {
                        drop(g);
                        b.build(now, tx);
                        report.batches_built += 1;
                        let mut g = shared.lock(report);
                        match g.driver.endpoint().end_send_batch(now, w.conn, b, tx) {
                            Some(t) => t,
                            None => continue,
                        }
                    }
                    PathTransmit::Elsewhere(q) => {
                        wake_path(&g, w.conn, q);
                        return;
                    }
                    PathTransmit::Idle => return,
                    PathTransmit::Gone => {
                        round.gone = true;
                        return;
                    }
                }
            }
        };
        round.busy = true;
        if !transmit(shared, w, &t, tx, report) {
            *pending = Some(t);
            round.blocked = true;
            return;
        }
    }
}

/// Sends `t` from the path's socket if it is the path's own, else from a listening socket.
fn transmit<D>(shared: &Shared<D>, w: &Worker, t: &Transmit, buf: &[u8], report: &mut ThreadReport) -> bool {
    if let Some(socket) = &w.socket {
        if t.destination == w.remote && t.source.is_none_or(|s| s == socket.local_addr()) {
            return send_on(socket, None, t, buf, &mut report.io);
        }
    }
    let (i, src_ip) = socket_for(&shared.listeners, t.source);
    send_on(&shared.listeners[i], src_ip, t, buf, &mut report.io)
}

/// After a round, under the lock: the timers that are due, the application's work, the
/// endpoint's own datagrams, other threads woken for work this round made for them; says
/// whether this thread may sleep. Returns the endpoint's next timer.
fn after_round<D: EndpointDriver>(
    shared: &Shared<D>,
    w: &Worker,
    tx: &mut Vec<u8>,
    report: &mut ThreadReport,
    round: &mut Round,
) -> Option<mpq_proto::Instant> {
    let mut g = shared.lock(report);
    let now = shared.clock.now();
    g.driver.handle_timeout(now);
    if g.driver.on_wake(now).is_break() {
        shared.stop.store(true, Ordering::Release);
        shared.control.wake_always();
    }
    // The endpoint's own answers (rare) leave from a listening socket.
    while let Some(t) = g.driver.poll_transmit(now, tx) {
        let (i, src_ip) = socket_for(&shared.listeners, t.source);
        send_on(&shared.listeners[i], src_ip, &t, tx, &mut report.io);
    }
    let deadline = g.driver.poll_timeout();
    let Locked { driver, workers, .. } = &mut *g;
    let ep = driver.endpoint();
    wake_for(ep, workers, Some(w), round.busy);
    let Some(conn) = ep.connection(w.conn) else {
        round.gone = true;
        shared.control.wake_always();
        return deadline;
    };
    // Gone, or moved to another address (a new worker with a socket for it takes over).
    let paths = conn.path_addresses();
    if !paths.iter().any(|(id, _, remote)| *id == w.path_id && *remote == w.remote) {
        round.gone = true;
    }
    let mine = workers.iter().filter(|s| s.conn == w.conn && !s.ctl.done.load(Ordering::Acquire)).count();
    if round.gone || mine != paths.len() {
        shared.control.wake_always();
    }
    if !round.busy {
        w.ctl.sleeping.store(true, Ordering::Release);
    }
    deadline
}

/// Wakes the sleeping threads that may have work after a round of thread `me` (`None`: the
/// calling thread of the run): of each connection something happened to, every thread if
/// another thread or connection did it, and else (the connection's own path thread) those
/// whose path has window for the data that waits. A thread of the same connection needs no
/// more: every thread sleeps until the endpoint's next timer at most, and a path's own
/// datagrams wake its own thread.
pub(super) fn wake_for(ep: &mut Endpoint, workers: &[WorkerSlot], me: Option<&Worker>, busy: bool) {
    while let Some(h) = ep.poll_path_thread_wake() {
        let Some(conn) = ep.connection(h) else { continue };
        let own = me.filter(|w| w.conn == h);
        for s in workers.iter().filter(|s| s.conn == h) {
            match own {
                None => s.ctl.wake(),
                Some(w) if s.path_id != w.path_id => {
                    if busy && conn.wants_to_send() && conn.path_window_open(s.path_id) {
                        s.ctl.wake();
                    }
                }
                Some(_) => {}
            }
        }
    }
}

/// Wakes the thread of path `path_id` of `conn`, if it sleeps.
fn wake_path<D>(g: &Locked<D>, conn: ConnectionHandle, path_id: u64) {
    if let Some(s) = g.workers.iter().find(|s| s.conn == conn && s.path_id == path_id) {
        s.ctl.wake();
    }
}
