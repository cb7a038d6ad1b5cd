//! One path's thread: receive the path's datagrams on its connected socket and open them
//! without the lock, build the path's send batches without the lock, and between rounds do
//! whatever connection-wide work is due (timers, the application) under it.

use std::io::IoSliceMut;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mio::{Events, Interest, Poll, Token};
use mpq_proto::conn::{PathTransmit, Transmit};
use mpq_proto::endpoint::{ConnectionHandle, Endpoint};
use quinn_udp::RecvMeta;

use super::{send_on, socket_for, EndpointDriver, Locked, Shared, ThreadReport, WorkerCtl, WorkerSlot};
use super::{BLOCKED_WAIT, RX_BUDGET, RX_BUF};
use crate::UdpSocket;

/// Most datagrams opened in one run: the path acknowledges what a run brought once it is
/// applied, so a longer run would delay the ACKs (a full recvmmsg call can bring 2,000).
const MAX_RUN: usize = 128;

/// Batches each path of a thread of several paths sends in a round.
const SHARED_SEND_BUDGET: usize = 1;

/// A path given to a thread.
pub(super) struct Worker {
    pub conn: ConnectionHandle,
    pub path_id: u64,
    /// The path's local address as the path names it (`None`: the first listening
    /// socket's), when the worker started.
    pub local: Option<SocketAddr>,
    /// The path's peer.
    pub remote: SocketAddr,
    /// The socket connected to the peer; `None` if it could not be bound (the path's
    /// datagrams then reach the listening socket and go the general way).
    pub socket: Option<UdpSocket>,
    /// Set (under the lock) when the thread no longer drives the path: its slot's.
    pub done: Arc<AtomicBool>,
}

/// What a path thread is given when it starts.
pub(super) struct PathThread {
    pub poll: Poll,
    /// How the others reach it; its paths come through its inbox.
    pub ctl: Arc<WorkerCtl>,
    /// CPU to pin to.
    pub cpu: Option<usize>,
}

/// How a round of one path went.
#[derive(Default)]
struct Round {
    /// Datagrams came or went.
    busy: bool,
    /// A send waits for the socket to drain.
    blocked: bool,
    /// The path or its connection is gone, or its peer's address changed.
    gone: bool,
}

/// A path the thread drives, with its send buffers.
struct Driven {
    w: Worker,
    tx: SendBufs,
    round: Round,
    /// The path may have more to send this round (its last turn's batch spent its budget).
    sending: bool,
    /// Its socket's poll token.
    token: Option<Token>,
    /// Its socket may hold datagrams: set when registered and by each readiness event, cleared
    /// when a receive finds it empty. (Only a thread of several paths reads it: see `run`.)
    readable: bool,
}

/// The thread's loop, while it has paths; returns its report.
pub(super) fn run<D: EndpointDriver>(shared: &Shared<D>, mut t: PathThread) -> ThreadReport {
    if let Some(cpu) = t.cpu {
        super::pin_current_thread(cpu);
    }
    let mut report = ThreadReport::default();
    let cpu_start = super::cpu::thread_cpu_time();
    super::take_lock_held();
    let mut rx: Vec<Vec<u8>> = (0..quinn_udp::BATCH_SIZE).map(|_| vec![0u8; RX_BUF]).collect();
    let mut paths: Vec<Driven> = Vec::new();
    // (The endpoint's own datagrams, written while a transmit may wait in a path's buffers.)
    let mut scratch: Vec<u8> = Vec::new();
    let mut events = Events::with_capacity(16);
    let mut tokens = 0;
    while !shared.stopping() && !t.ctl.quit.load(Ordering::Acquire) {
        take_paths(&t, &mut paths, &mut tokens, &mut report);
        // A thread of several paths goes over them in turns: in each, every path receives what
        // waits and sends one batch, as the paths' own threads would side by side; the turns
        // go on until no path has more to send (a thread of one path sends what it has in
        // one turn). Two ways of doing less went wrong with one thread for two paths, round-
        // robin scheduler (2026-12-02): a path that sent until it had nothing took the
        // application's data before the other's turn (1-3 % on one path in most runs, a
        // path kept in slow start by the few packets it got); and turns of sending alone
        // left one path's ACKs unread while the other sent, its RTT samples grew to 6 ms
        // against 1 ms, its pace with them, and it carried 3 % in one run of six.
        let several = paths.len() > 1;
        let budget = several.then_some(SHARED_SEND_BUDGET);
        for p in &mut paths {
            p.round = Round::default();
            p.sending = true;
        }
        loop {
            let mut more = false;
            // A thread of several paths asks the poll which sockets have datagrams, once a
            // turn, and receives on those: a receive on each path each turn found most of
            // them empty (over 8 loopback paths with 2 threads, the sender made 59,000
            // receive calls in 3 s, now 18,000 and 14,000 polls; one loop makes 1,400; no
            // change in goodput or CPU per byte that this machine resolves). A thread of
            // one path receives each round, as cheap as asking.
            if several && poll_ready(&mut t.poll, &mut events, Some(std::time::Duration::ZERO), &mut paths).is_err() {
                // (The sleeping poll below reports it.) Meanwhile every socket is tried.
                paths.iter_mut().for_each(|p| p.readable = true);
            }
            for p in &mut paths {
                if let Some(socket) = &p.w.socket {
                    if p.readable || !several {
                        p.readable = receive(shared, &p.w, socket, &mut rx, &mut report, &mut p.round);
                    }
                }
                if p.sending {
                    p.sending = send(shared, &p.w, &mut p.tx, budget, &mut report, &mut p.round);
                    more |= p.sending;
                }
            }
            if !more {
                break;
            }
        }
        let after = after_round(shared, &t.ctl, &mut paths, &mut scratch, &mut report);
        if after.end {
            break;
        }
        if after.busy {
            continue;
        }
        let mut timeout = after.deadline.map(|d| shared.clock.until(d));
        if paths.iter().any(|p| p.round.blocked) {
            timeout = Some(timeout.map_or(BLOCKED_WAIT, |t| t.min(BLOCKED_WAIT)));
        }
        if let Err(e) = poll_ready(&mut t.poll, &mut events, timeout, &mut paths) {
            tracing::warn!(%e, "a path thread cannot wait for its sockets");
            break;
        }
        t.ctl.sleeping.store(false, Ordering::Release);
    }
    report.path_id = match report.paths[..] {
        [one] => Some(one),
        _ => None,
    };
    report.cpu = super::cpu::thread_cpu_time().saturating_sub(cpu_start);
    report.lock_held = super::take_lock_held();
    report
}

/// Waits up to `timeout` for the paths' sockets (or the thread's waker) and marks the paths
/// whose sockets became readable. (Epoll is edge-triggered: each datagram's arrival is an
/// event, so a socket left with datagrams is only one whose last receive stopped on its
/// budget, and `receive` then says it is still readable.)
fn poll_ready(
    poll: &mut Poll,
    events: &mut Events,
    timeout: Option<std::time::Duration>,
    paths: &mut [Driven],
) -> std::io::Result<()> {
    match poll.poll(events, timeout) {
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return Ok(()),
        r => r?,
    }
    for e in events.iter().filter(|e| e.is_readable() || e.is_read_closed() || e.is_error()) {
        if let Some(p) = paths.iter_mut().find(|p| p.token == Some(e.token())) {
            p.readable = true;
        }
    }
    Ok(())
}

/// Takes the paths given to the thread since it last looked, registering their sockets.
fn take_paths(t: &PathThread, paths: &mut Vec<Driven>, tokens: &mut usize, report: &mut ThreadReport) {
    let given = std::mem::take(&mut *t.ctl.inbox.lock().expect("a path thread's inbox"));
    for mut w in given {
        let mut token = None;
        if let Some(s) = w.socket.as_mut() {
            match t.poll.registry().register(s.mio(), Token(*tokens), Interest::READABLE | Interest::WRITABLE) {
                Ok(()) => token = Some(Token(*tokens)),
                Err(e) => {
                    // Closed, its datagrams reach the listening socket and go the general way.
                    tracing::warn!(%e, path = w.path_id, "a path thread cannot wait for the path's socket");
                    w.socket = None;
                }
            }
            *tokens += 1;
        }
        if report.paths.is_empty() {
            report.connection = Some(w.conn);
            report.addresses = w.socket.as_ref().map(|s| (s.local_addr(), w.remote));
        }
        report.paths.push(w.path_id);
        paths.push(Driven { w, tx: SendBufs::new(), round: Round::default(), sending: false, token, readable: true });
    }
}

/// Receives what waits on the path's socket and hands it over, a GRO batch at a time; true
/// if the socket may hold more (it stopped on its budget, or on an error).
fn receive<D: EndpointDriver>(
    shared: &Shared<D>,
    w: &Worker,
    socket: &UdpSocket,
    rx: &mut [Vec<u8>],
    report: &mut ThreadReport,
    round: &mut Round,
) -> bool {
    let mut meta = [RecvMeta::default(); quinn_udp::BATCH_SIZE];
    let local = socket.local_addr();
    for _ in 0..RX_BUDGET {
        let n = {
            let mut slices: Vec<IoSliceMut<'_>> = rx.iter_mut().map(|b| IoSliceMut::new(b)).collect();
            match socket.recv(&mut slices, &mut meta) {
                Ok(n) => n,
                Err(e) => {
                    // (An ICMP error on a connected socket, say: datagrams may still wait
                    // behind it, so the socket is tried again next turn.)
                    tracing::debug!(%e, path = w.path_id, "receive failed");
                    return true;
                }
            }
        };
        if n == 0 {
            return false; // Empty (WouldBlock): the next datagram's arrival is an event.
        }
        round.busy = true;
        report.io.rx_calls += 1;
        // The GRO buffers of the call in runs of up to MAX_RUN datagrams (the lock taken twice
        // per run, not per buffer), split where the ECN codepoint or the sender changes.
        let mut run: Vec<&mut [u8]> = Vec::new();
        let mut run_key = None;
        for (m, buf) in meta.iter().zip(rx.iter_mut()).take(n) {
            let key = (m.addr, m.ecn.map(|e| e as u8));
            if run_key.is_some_and(|k| k != key) || run.len() >= MAX_RUN {
                let (remote, ecn) = run_key.expect("a key");
                hand_over(shared, w, local, remote, ecn, &mut run, report);
                run.clear();
            }
            run_key = Some(key);
            let stride = m.stride.max(1);
            let before = run.len();
            run.extend(buf[..m.len].chunks_mut(stride));
            report.io.rx_datagrams += (run.len() - before) as u64;
            report.io.rx_bytes += m.len as u64;
        }
        if let Some((remote, ecn)) = run_key {
            hand_over(shared, w, local, remote, ecn, &mut run, report);
        }
    }
    true
}

/// One run of datagrams from `remote` with one ECN codepoint: the leading datagrams with the
/// first one's destination CID are opened without the lock when they are the path's steady
/// traffic, else handled the general way under the lock; the rest (another connection or
/// path, a long header) go the same way after them. The lock taken to apply a part is kept to
/// begin the next one: one take per part.
fn hand_over<D: EndpointDriver>(
    shared: &Shared<D>,
    w: &Worker,
    local: SocketAddr,
    remote: SocketAddr,
    ecn: Option<u8>,
    mut batch: &mut [&mut [u8]],
    report: &mut ThreadReport,
) {
    let mut held = None;
    // What is left of the last run, dropped once the lock is released.
    let mut spent = None;
    while let Some(first) = batch.first() {
        let mut g = match held.take() {
            Some(g) => g,
            None => shared.lock(report),
        };
        let now = shared.clock.now();
        let ep = g.driver.endpoint();
        // A short header's DCID is the bytes after its first; the same bytes route the same.
        let cid_end = 1 + ep.cid_len();
        let same = match first.get(..cid_end).filter(|_| first[0] & 0x80 == 0) {
            Some(dcid) => batch
                .iter()
                .take_while(|d| d.get(..cid_end).is_some_and(|c| c[1..] == dcid[1..] && c[0] & 0x80 == 0))
                .count(),
            None => 1,
        };
        let (now_part, rest) = std::mem::take(&mut batch).split_at_mut(same);
        batch = rest;
        let run = match ep.route_datagram(now_part[0]) {
            Some((h, Some(p))) if h == w.conn && p == w.path_id => ep.begin_recv_run(h, p, remote, ecn),
            _ => None,
        };
        let Some(mut run) = run else {
            g.driver.handle_datagrams(now, local, remote, ecn, now_part);
            held = Some(g);
            continue;
        };
        drop(g);
        drop(spent.take());
        run.open(now, now_part);
        report.runs_opened += 1;
        let mut g = shared.lock(report);
        spent = g.driver.endpoint().end_recv_run(now, w.conn, local, run, now_part);
        held = Some(g);
    }
    drop(held);
    drop(spent);
}

/// The worker's two send buffers: a batch is ended and the next one begun under one take of
/// the lock, the next one written into the other buffer while the first is sent.
pub(super) struct SendBufs {
    bufs: [Vec<u8>; 2],
    /// Transmits waiting for the socket, in order, with the buffer each is in.
    pending: Vec<(Transmit, usize)>,
}

impl SendBufs {
    pub(super) fn new() -> Self {
        Self { bufs: [Vec::with_capacity(RX_BUF), Vec::with_capacity(RX_BUF)], pending: Vec::new() }
    }
}

/// Sends what the path has, batch after batch, until it has nothing, the socket is full or
/// `budget` batches (`None`: no limit) have gone; true in the last case (it may have more).
fn send<D: EndpointDriver>(
    shared: &Shared<D>,
    w: &Worker,
    sb: &mut SendBufs,
    budget: Option<usize>,
    report: &mut ThreadReport,
    round: &mut Round,
) -> bool {
    let mut left = budget.unwrap_or(usize::MAX);
    while let Some((t, i)) = sb.pending.first() {
        if !transmit(shared, w, t, &sb.bufs[*i], report) {
            round.blocked = true;
            return false;
        }
        sb.pending.remove(0);
        round.busy = true;
    }
    let mut cur = 0;
    let mut g = Some(shared.lock(report));
    let mut now = shared.clock.now();
    let mut next =
        g.as_mut().expect("held").driver.endpoint().poll_path_transmit(now, w.conn, w.path_id, &mut sb.bufs[cur]);
    loop {
        let (t, follow) = match next {
            PathTransmit::Ready(t) => {
                drop(g.take());
                left -= 1;
                (Some(t), None)
            }
            PathTransmit::Batch(mut b) => {
                drop(g.take());
                b.build(now, &mut sb.bufs[cur]);
                report.batches_built += 1;
                let mut held = shared.lock(report);
                let t = held.driver.endpoint().end_send_batch(now, w.conn, b, &mut sb.bufs[cur]);
                if t.is_none() {
                    // The path offered a batch and wrote nothing into it (its window is open
                    // but, say, an unvalidated peer address's amplification limit is spent):
                    // asking again now would get the same, and this loop would never let the
                    // thread receive what unblocks it. Whoever changes that wakes the thread.
                    return false;
                }
                left -= 1;
                if left == 0 {
                    // Spent: no next batch begun (a batch begun must end).
                    drop(held);
                    (t, None)
                } else {
                    // The next batch is begun under the same take of the lock, in the other
                    // buffer.
                    now = shared.clock.now();
                    let n = held.driver.endpoint().poll_path_transmit(now, w.conn, w.path_id, &mut sb.bufs[1 - cur]);
                    drop(held);
                    (t, Some(n))
                }
            }
            PathTransmit::Elsewhere(q) => {
                let mut held = g.take().unwrap_or_else(|| shared.lock(report));
                wake_path(&mut held, w.conn, q);
                return false;
            }
            PathTransmit::Idle => return false,
            PathTransmit::Gone => {
                round.gone = true;
                return false;
            }
        };
        if let Some(t) = t {
            round.busy = true;
            if !transmit(shared, w, &t, &sb.bufs[cur], report) {
                round.blocked = true;
                sb.pending.push((t, cur));
                // What was begun in the other buffer waits too (a batch begun must end: its
                // path is checked out).
                match follow {
                    Some(PathTransmit::Ready(t2)) => sb.pending.push((t2, 1 - cur)),
                    Some(PathTransmit::Batch(mut b)) => {
                        b.build(now, &mut sb.bufs[1 - cur]);
                        report.batches_built += 1;
                        let mut held = shared.lock(report);
                        if let Some(t2) = held.driver.endpoint().end_send_batch(now, w.conn, b, &mut sb.bufs[1 - cur]) {
                            sb.pending.push((t2, 1 - cur));
                        }
                    }
                    Some(PathTransmit::Gone) => round.gone = true,
                    _ => {}
                }
                return false;
            }
        }
        match follow {
            Some(n) => {
                cur = 1 - cur;
                next = n;
            }
            None if left == 0 => {
                round.busy = true;
                return true;
            }
            None => {
                g = Some(shared.lock(report));
                now = shared.clock.now();
                next = g.as_mut().expect("held").driver.endpoint().poll_path_transmit(
                    now,
                    w.conn,
                    w.path_id,
                    &mut sb.bufs[cur],
                );
            }
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

/// What a thread does after a round.
struct After {
    /// The earliest timer of the thread's paths.
    deadline: Option<mpq_proto::Instant>,
    /// It goes round again at once.
    busy: bool,
    /// It has no paths left: it ends.
    end: bool,
}

/// After a round, under the lock: the timers that are due, the application's work, the
/// endpoint's own datagrams, other threads woken for work this round made for them; the
/// paths that are gone let go; says whether this thread may sleep.
fn after_round<D: EndpointDriver>(
    shared: &Shared<D>,
    ctl: &Arc<WorkerCtl>,
    paths: &mut Vec<Driven>,
    tx: &mut Vec<u8>,
    report: &mut ThreadReport,
) -> After {
    let mut g = shared.lock(report);
    let now = shared.clock.now();
    let mut conns: smallvec::SmallVec<[ConnectionHandle; 4]> = smallvec::SmallVec::new();
    for p in paths.iter() {
        if !conns.contains(&p.w.conn) {
            conns.push(p.w.conn);
        }
    }
    // The endpoint's timers (connection-wide ones, and those of connections without path
    // threads), then those of this thread's connections that are due: its paths', which
    // woke the thread.
    g.driver.handle_timeout(now);
    for &c in &conns {
        g.driver.endpoint().handle_connection_timeout(now, c);
    }
    if g.driver.on_wake(now).is_break() {
        shared.stop.store(true, Ordering::Release);
        shared.control.wake_always();
    }
    // The endpoint's own answers (rare) leave from a listening socket.
    while let Some(t) = g.driver.poll_transmit(now, tx) {
        let (i, src_ip) = socket_for(&shared.listeners, t.source);
        send_on(&shared.listeners[i], src_ip, &t, tx, &mut report.io);
    }
    let Locked { driver, workers, thread_wakes, .. } = &mut *g;
    let ep = driver.endpoint();
    let mut busy = paths.iter().any(|p| p.round.busy);
    wake_for(ep, workers, Some(ctl), busy, thread_wakes);
    for &c in &conns {
        wake_for_timers(ep, workers, c, Some(ctl), thread_wakes);
    }
    // This thread waits for its paths' timers; the calling thread for the endpoint's.
    let mut deadline: Option<mpq_proto::Instant> = None;
    for p in paths.iter_mut() {
        let w = &p.w;
        match ep.connection(w.conn) {
            None => {
                p.round.gone = true;
                shared.control.wake_always();
            }
            Some(conn) => {
                // Gone, or moved to another 4-tuple (a worker with a socket for it takes
                // over).
                let addrs = conn.path_addresses();
                if !addrs.iter().any(|(id, local, remote)| *id == w.path_id && *remote == w.remote && *local == w.local)
                {
                    p.round.gone = true;
                }
                let mine = workers.iter().filter(|s| s.conn == w.conn && !s.done.load(Ordering::Acquire)).count();
                if p.round.gone || mine != addrs.len() {
                    shared.control.wake_always();
                }
            }
        }
        if p.round.gone {
            w.done.store(true, Ordering::Release);
            ctl.paths.fetch_sub(1, Ordering::AcqRel);
        } else if let Some(t) = ep.poll_path_timeout(w.conn, w.path_id) {
            deadline = Some(deadline.map_or(t, |d| d.min(t)));
        }
    }
    paths.retain(|p| !p.round.gone);
    // (Paths are given to a thread under the lock: none can come after this look.)
    if paths.is_empty() && ctl.inbox.lock().expect("a path thread's inbox").is_empty() {
        ctl.quit.store(true, Ordering::Release);
        return After { deadline, busy, end: true };
    }
    // (A wake that came during the round means work may have come after this thread
    // looked for it: one more round.)
    if ctl.kicked.swap(false, Ordering::AcqRel) {
        busy = true;
    }
    if !busy {
        ctl.sleep_until.store(deadline.map_or(u64::MAX, mpq_proto::Instant::as_nanos), Ordering::Release);
        ctl.sleeping.store(true, Ordering::Release);
    }
    After { deadline, busy, end: false }
}

/// Wakes the sleeping threads of connection `conn` (but thread `me`) whose path's next
/// timer came before the one they sleep until: a round of another thread (an ACK, a loss,
/// a packet sent) moved it. Called under the lock after a round that touched the connection;
/// the threads are woken once it is let go (`later`: [`super::Locked::thread_wakes`]).
pub(super) fn wake_for_timers(
    ep: &mut Endpoint,
    workers: &[WorkerSlot],
    conn: ConnectionHandle,
    me: Option<&Arc<WorkerCtl>>,
    later: &mut Vec<Arc<WorkerCtl>>,
) {
    for s in workers.iter().filter(|s| s.conn == conn && !me.is_some_and(|m| Arc::ptr_eq(m, &s.ctl))) {
        if !s.ctl.sleeping.load(Ordering::Acquire) {
            continue;
        }
        let Some(t) = ep.poll_path_timeout(conn, s.path_id) else { continue };
        if t.as_nanos() < s.ctl.sleep_until.load(Ordering::Acquire) {
            s.ctl.wake(later);
        }
    }
}

/// Wakes the sleeping threads that may have work after a round of thread `me` (`None`: the
/// calling thread of the run): of each connection something happened to, every thread if
/// a thread that drives none of its paths did it, and else (a thread of one of the
/// connection's paths) those whose path has window for the data that waits. A thread of the
/// same connection needs no more: a path's own datagrams wake its own thread, and a path
/// whose timer the round moved earlier is woken by [`wake_for_timers`]. (What the calling
/// thread receives and what application threads do wakes every path thread at the calling
/// thread's next round: `Shared::app_kick`.) The threads are woken once the lock is let go
/// (`later`: [`super::Locked::thread_wakes`]).
pub(super) fn wake_for(
    ep: &mut Endpoint,
    workers: &[WorkerSlot],
    me: Option<&Arc<WorkerCtl>>,
    busy: bool,
    later: &mut Vec<Arc<WorkerCtl>>,
) {
    // A thread of several paths is woken once: a second wake would find it awake and make it
    // go round once more for nothing (`WorkerCtl::kicked`).
    let mut woken: smallvec::SmallVec<[*const WorkerCtl; 8]> = smallvec::SmallVec::new();
    let mut wake = |ctl: &Arc<WorkerCtl>| {
        let p = Arc::as_ptr(ctl);
        if !woken.contains(&p) {
            woken.push(p);
            ctl.wake(later);
        }
    };
    while let Some(h) = ep.poll_path_thread_wake() {
        let Some(conn) = ep.connection(h) else {
            // The connection is gone (drained, or removed at once): its threads end when
            // they see it, which a thread waiting for its socket or a timer does only if
            // woken (it used to stay, socket and all, until something else woke it).
            for s in workers.iter().filter(|s| s.conn == h) {
                wake(&s.ctl);
            }
            continue;
        };
        let own = me.filter(|m| workers.iter().any(|s| s.conn == h && Arc::ptr_eq(m, &s.ctl)));
        for s in workers.iter().filter(|s| s.conn == h) {
            match own {
                None => wake(&s.ctl),
                Some(m) if !Arc::ptr_eq(m, &s.ctl) => {
                    if busy && conn.wants_to_send() && conn.path_window_open(s.path_id) {
                        wake(&s.ctl);
                    }
                }
                Some(_) => {}
            }
        }
    }
}

/// Wakes the thread of path `path_id` of `conn`, if it sleeps (once the lock is let go).
fn wake_path<D>(g: &mut Locked<D>, conn: ConnectionHandle, path_id: u64) {
    if let Some(s) = g.workers.iter().find(|s| s.conn == conn && s.path_id == path_id) {
        s.ctl.wake(&mut g.thread_wakes);
    }
}
