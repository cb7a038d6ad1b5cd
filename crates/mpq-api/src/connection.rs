//! A connection: its streams, its paths, its statistics and its close.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use mpq_proto::conn::{ConnectionStats, PathError, PathEvent, PathStats, PathStatus, ZeroRttState};
use mpq_proto::endpoint::ConnectionHandle;
use mpq_proto::path_manager::{PathManager, PathManagerConfig};
use mpq_proto::{Dir, StreamId};

use crate::driver::{register, ApiDriver, ConnState};
use crate::endpoint::Inner;
use crate::stream::{RecvStream, SendStream};
use crate::Error;

/// One QUIC connection. Clones are handles on the same connection, usable from any thread.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
    h: ConnectionHandle,
    /// Which connection of the handle (the endpoint reuses handles).
    gen: u64,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("handle", &self.h.0).finish()
    }
}

/// Why a connection cannot be used: its error if it has one, else that it is gone.
pub(crate) fn gone(st: Option<&ConnState>) -> Error {
    if st.is_some_and(|s| s.runtime_failed) {
        return Error::RuntimeFailed;
    }
    match st.and_then(|s| s.error.clone()) {
        Some(e) => Error::Closed(e),
        None => Error::Gone,
    }
}

/// Lets a held first flight go (`Endpoint::connect` holds a 0-RTT connection's until the
/// application's first call that has something to send; `into_0rtt` and opening a stream
/// do not, so the requests written next leave with the ClientHello).
/// True if it was held.
pub(crate) fn release_first_flight(c: &mut mpq_proto::conn::Connection) -> bool {
    let held = c.first_flight_held();
    if held {
        c.hold_first_flight(false);
    }
    held
}

impl Connection {
    pub(crate) fn new(inner: Arc<Inner>, h: ConnectionHandle, gen: u64) -> Self {
        Self { inner, h, gen }
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// The protocol's connection and the API's state of it, if it is still this one.
    pub(crate) fn parts<'a>(
        &self,
        d: &'a mut ApiDriver,
    ) -> (Option<&'a mut mpq_proto::conn::Connection>, Option<&'a mut ConnState>) {
        let ApiDriver { endpoint, conns, .. } = d;
        match conns.get_mut(&self.h).filter(|s| s.gen == self.gen) {
            Some(st) => (endpoint.connection_mut(self.h), Some(st)),
            None => (None, None),
        }
    }

    /// Runs `f` on the protocol's connection under the endpoint's lock; the connection's
    /// error (or `Gone`) if it is closed.
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&mut mpq_proto::conn::Connection, &mut ConnState, mpq_proto::Instant) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let now = self.inner.now();
        let mut g = self.inner.lock()?;
        match self.parts(&mut g) {
            (Some(c), Some(st)) if st.error.is_none() => {
                release_first_flight(c);
                f(c, st, now)
            }
            (_, st) => Err(gone(st.map(|s| &*s))),
        }
    }

    /// Reads from the protocol's connection under the endpoint's lock, without waking the
    /// runtime (nothing changed) or letting a held first flight go; the connection's error
    /// (or `Gone`) if it is closed.
    pub(crate) fn peek<T>(&self, f: impl FnOnce(&mpq_proto::conn::Connection) -> T) -> Result<T, Error> {
        let mut g = self.inner.lock()?;
        g.quiet();
        match self.parts(&mut g) {
            (Some(c), Some(st)) if st.error.is_none() => Ok(f(c)),
            (_, st) => Err(gone(st.map(|s| &*s))),
        }
    }

    /// What became of this client's 0-RTT attempt: `Pending` until the server answered,
    /// then `Accepted` or `Rejected` (early data sent again in 1-RTT); `NotAttempted` without
    /// one ([`Connecting::into_0rtt`]).
    pub fn zero_rtt(&self) -> Result<ZeroRttState, Error> {
        self.peek(|c| c.zero_rtt_state())
    }

    /// Completes when the handshake does: for a connection taken before it with
    /// [`Connecting::into_0rtt`] (at once for one that is already established).
    pub fn established(&self) -> Connecting {
        Connecting::new(self.clone())
    }

    /// The peer's address on the first path.
    pub fn remote_address(&self) -> Result<SocketAddr, Error> {
        self.peek(|c| c.remote_address())
    }

    /// What the handshake negotiated (version, cipher suite, ALPN, resumption, multipath);
    /// `None` before it completed.
    pub fn handshake_info(&self) -> Result<Option<mpq_proto::conn::HandshakeInfo>, Error> {
        self.peek(|c| c.handshake_info())
    }

    /// Opens a unidirectional stream, waiting while the peer's stream limit is reached.
    pub fn open_uni(&self) -> OpenStream<SendStream> {
        OpenStream { conn: self.clone(), dir: Dir::Uni, make: |c, id| SendStream::new(c, id) }
    }

    /// Opens a bidirectional stream, waiting while the peer's stream limit is reached.
    pub fn open_bi(&self) -> OpenStream<(SendStream, RecvStream)> {
        OpenStream {
            conn: self.clone(),
            dir: Dir::Bi,
            make: |c, id| (SendStream::new(c.clone(), id), RecvStream::new(c, id)),
        }
    }

    /// The next unidirectional stream the peer opened.
    pub fn accept_uni(&self) -> AcceptStream<RecvStream> {
        AcceptStream { conn: self.clone(), dir: Dir::Uni, make: |c, id| RecvStream::new(c, id) }
    }

    /// The next bidirectional stream the peer opened.
    pub fn accept_bi(&self) -> AcceptStream<(SendStream, RecvStream)> {
        AcceptStream {
            conn: self.clone(),
            dir: Dir::Bi,
            make: |c, id| (SendStream::new(c.clone(), id), RecvStream::new(c, id)),
        }
    }

    /// Opens a path from `local` (one of the endpoint's addresses; `None`: the first) to
    /// `remote` (RFC 10069 §3); returns its path ID. [`PathEvent::Validated`] follows when
    /// the peer answered.
    pub fn open_path(&self, local: Option<SocketAddr>, remote: SocketAddr, backup: bool) -> Result<u64, Error> {
        let status = if backup { PathStatus::Backup } else { PathStatus::Available };
        self.with(|c, _, now| Ok(c.open_path(now, local, remote, status)?))
    }

    /// Opens a path from `local` to `remote` as soon as the peer allows one (a path ID and
    /// its connection IDs may take a round trip after the handshake) and completes when the
    /// path is validated, with its ID.
    pub fn add_path(&self, local: Option<SocketAddr>, remote: SocketAddr, backup: bool) -> AddPath {
        AddPath { conn: self.clone(), local, remote, backup, id: None }
    }

    /// Keeps a path open on every (local, remote) address pair `config` names (a client's
    /// path manager, `mpq_proto::path_manager`): from the runtime's thread, once multipath
    /// is in use, each missing path is opened as soon as the peer allows, and one that
    /// fails or is abandoned is opened again after `config.reopen_backoff`. The first pair
    /// is the handshake's path (path 0): set it before opening other paths. `None` stops
    /// the manager (the paths open stay open), e.g. before abandoning paths on purpose.
    pub fn set_path_manager(&self, config: Option<PathManagerConfig>) -> Result<(), Error> {
        let mut g = self.inner.lock()?;
        let gen = match self.parts(&mut g) {
            (Some(c), Some(st)) if st.error.is_none() => {
                if !c.side().is_client() {
                    return Err(Error::InvalidArgument("a path manager runs on a client's connection".into()));
                }
                st.gen
            }
            (_, st) => return Err(gone(st.map(|s| &*s))),
        };
        match config {
            Some(config) => g.managers.insert(self.h, (gen, PathManager::new(config))),
            None => g.managers.remove(&self.h),
        };
        Ok(())
    }

    /// Abandons path `id` (PATH_ABANDON with `error_code`); its data in flight is resent on
    /// the others.
    pub fn abandon_path(&self, id: u64, error_code: u64) -> Result<(), Error> {
        self.with(|c, _, now| Ok(c.abandon_path(now, id, error_code)?))
    }

    /// Migrates a connection without multipath to `local`, another of the endpoint's
    /// addresses (RFC 9000 §9): its path moves there with a connection ID not used before,
    /// and the server validates the new address and follows. Refused before the handshake
    /// is confirmed, after the server's disable_active_migration, with multipath (open a path
    /// from `local` and abandon the old one instead), and while the server has issued no
    /// spare connection ID. For the single-thread runtime: a path thread keeps the socket
    /// it connected.
    pub fn migrate(&self, local: SocketAddr) -> Result<(), Error> {
        self.with(|c, _, now| Ok(c.migrate(now, local)?))
    }

    /// Asks the peer to use path `id` only as a backup (`true`) or as any path (`false`).
    pub fn set_path_backup(&self, id: u64, backup: bool) -> Result<(), Error> {
        let status = if backup { PathStatus::Backup } else { PathStatus::Available };
        self.with(|c, _, now| Ok(c.set_path_status(now, id, status)?))
    }

    /// Switches the multipath packet scheduler by name (`minrtt`, `round-robin`,
    /// `weighted`, `redundant`, `rtt-probe`, `ecf` or `pinned`): it picks the path of every
    /// new packet of data from now on. The congestion controller is chosen per connection
    /// when it starts (`TransportConfig::cc`, by name with `"olia".parse()`).
    pub fn set_scheduler(&self, name: &str) -> Result<(), Error> {
        let kind: mpq_proto::sched::SchedulerKind = name.parse().map_err(Error::InvalidArgument)?;
        self.with(|c, _, _| {
            c.set_scheduler(kind);
            Ok(())
        })
    }

    /// The shard of the endpoint that drives this connection (0 unless
    /// [`crate::Threads::Shards`]).
    pub fn shard(&self) -> usize {
        self.inner.shard
    }

    /// The IDs of the open paths.
    pub fn path_ids(&self) -> Result<Vec<u64>, Error> {
        self.peek(|c| c.path_ids())
    }

    /// Every path's counters (RTT, window, bytes, losses, state), closed ones included. (With
    /// a thread per path, a path its thread holds at that moment is as it was when it left.)
    pub fn path_stats(&self) -> Result<Vec<PathStats>, Error> {
        self.peek(|c| c.stats().paths)
    }

    /// The connection's counters.
    pub fn stats(&self) -> Result<ConnectionStats, Error> {
        self.peek(|c| c.stats())
    }

    /// Multipath was negotiated.
    pub fn is_multipath(&self) -> Result<bool, Error> {
        self.peek(|c| c.is_multipath())
    }

    /// The next path event (opened, validated, status, failure, closed); the oldest are
    /// dropped when more than 256 wait.
    pub fn path_event(&self) -> NextPathEvent {
        NextPathEvent { conn: self.clone() }
    }

    /// Closes the connection with an application error code and reason (CONNECTION_CLOSE).
    pub fn close(&self, error_code: u64, reason: &[u8]) {
        let _ = self.with(|c, _, now| {
            c.close(now, error_code, reason);
            Ok(())
        });
    }

    /// Waits until the connection is closed (by either side) and returns why.
    pub fn closed(&self) -> Closed {
        Closed { conn: self.clone() }
    }

    /// How the connection ended and its figures at that moment (its peer's address, whether
    /// multipath was in use, every path's counters), once it is closed: `None` before, or
    /// when it was gone without a close (the runtime failed). For a server's log of every
    /// connection it served.
    pub fn final_report(&self) -> Option<FinalReport> {
        let mut g = self.inner.lock().ok()?;
        let (_, st) = self.parts(&mut g);
        st.and_then(|st| st.at_close.clone())
    }

    /// Polls `f` under the lock with the connection (`None` once it is gone) and its state;
    /// `Pending` registers the waker in the connection's general list. `f` must answer when
    /// the connection is gone.
    pub(crate) fn poll_general<T>(
        &self,
        cx: &mut Context<'_>,
        f: impl FnOnce(Option<&mut mpq_proto::conn::Connection>, &mut ConnState) -> Option<T>,
    ) -> Poll<T> {
        let Ok(mut g) = self.inner.lock() else {
            // The runtime failed: the connection is gone, and `f` says so.
            let mut failed = ConnState { drained: true, runtime_failed: true, ..ConnState::default() };
            return match f(None, &mut failed) {
                Some(v) => Poll::Ready(v),
                None => unreachable!("`f` answers when the connection is gone"),
            };
        };
        let (mut c, st) = self.parts(&mut g);
        if let Some(c) = c.as_deref_mut() {
            release_first_flight(c);
        }
        // Another connection took the handle: this one is gone, with no state left.
        let mut gone_state = ConnState { drained: true, ..ConnState::default() };
        let fresh = st.is_some();
        let st = st.unwrap_or(&mut gone_state);
        match f(c, st) {
            Some(v) => Poll::Ready(v),
            None => {
                // (`f` answers whenever the connection is gone, so a stale handle never
                // gets here.)
                debug_assert!(fresh, "a gone connection left a future pending");
                register(&mut st.general, cx.waker());
                Poll::Pending
            }
        }
    }
}

/// A connection's end: why, and its figures when it was lost ([`Connection::final_report`]).
#[derive(Debug, Clone)]
pub struct FinalReport {
    /// Why it closed (either side's CONNECTION_CLOSE, the idle timeout, a stateless reset).
    pub error: mpq_proto::conn::ConnectionError,
    /// The peer's address on the first path then.
    pub remote: SocketAddr,
    /// Multipath was negotiated.
    pub multipath: bool,
    /// Its counters then, every path's included.
    pub stats: ConnectionStats,
}

/// A connection whose handshake is under way; completes with it.
pub struct Connecting {
    pub(crate) conn: Option<Connection>,
}

impl Connecting {
    pub(crate) fn new(conn: Connection) -> Self {
        Self { conn: Some(conn) }
    }

    /// The connection now, before its handshake completes, if it attempted 0-RTT (RFC 9001
    /// §4.6: a resumed session whose ticket allows early data, and a `ClientConfig` whose
    /// TLS configuration enables it): streams opened and written now leave in 0-RTT packets,
    /// within the limits the server gave with the ticket (RFC 9000 §7.4.1). Early data the
    /// server declines is sent again once the handshake completes, so nothing is lost either
    /// way ([`Connection::zero_rtt`] tells which). [`Endpoint::connect`](crate::Endpoint::connect)
    /// held the first flight: it leaves with the first call that sends (a write, a
    /// datagram, awaiting the handshake), so the requests written first go with the
    /// ClientHello however late this thread runs; this call, opening streams and reading
    /// the connection's state do not let it go. If the handshake completed already (another
    /// handle awaited it), the connection comes back all the same, its state `Accepted` or
    /// `Rejected`. Without 0-RTT (no ticket, or one that allows no early data) the future
    /// comes back, to be awaited as usual.
    pub fn into_0rtt(mut self) -> Result<Connection, Self> {
        let attempted = self.conn.as_ref().is_some_and(|conn| {
            let Ok(mut g) = conn.inner.lock() else { return false };
            let attempted = match conn.parts(&mut g) {
                (Some(c), Some(st)) if st.error.is_none() => c.zero_rtt_state() != ZeroRttState::NotAttempted,
                _ => false,
            };
            if attempted {
                // (Nothing to send yet: the first flight waits for the first write.)
                g.quiet();
            }
            attempted
        });
        match self.conn.take() {
            Some(conn) if attempted => Ok(conn),
            conn => {
                self.conn = conn;
                Err(self)
            }
        }
    }
}

impl Future for Connecting {
    type Output = Result<Connection, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let conn = self.conn.as_ref().expect("polled after completion");
        let r = conn.poll_general(cx, |c, st| {
            if st.error.is_some() || c.is_none() {
                return Some(Err(gone(Some(st))));
            }
            st.connected.then_some(Ok(()))
        });
        match r {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(self.conn.take().expect("once"))),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The future of [`Connection::open_uni`] and [`Connection::open_bi`].
pub struct OpenStream<T> {
    conn: Connection,
    dir: Dir,
    make: fn(Connection, StreamId) -> T,
}

impl<T> Future for OpenStream<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Opening a stream sends nothing: the runtime is not woken for it (a 0-RTT
        // connection's first flight waits for the request written next). When the limit
        // is reached, the general path registers the waker (and wakes the runtime, which
        // may have STREAMS_BLOCKED to send).
        if let Ok(mut g) = self.conn.inner.lock() {
            if let (Some(c), Some(st)) = self.conn.parts(&mut g) {
                if st.error.is_none() {
                    if let Some(id) = c.open_stream(self.dir) {
                        g.quiet();
                        drop(g);
                        return Poll::Ready(Ok((self.make)(self.conn.clone(), id)));
                    }
                }
            }
        }
        let dir = self.dir;
        let r = self.conn.poll_general(cx, |c, st| match c {
            Some(c) if st.error.is_none() => c.open_stream(dir).map(Ok),
            _ => Some(Err(gone(Some(st)))),
        });
        r.map(|id| id.map(|id| (self.make)(self.conn.clone(), id)))
    }
}

/// The future of [`Connection::accept_uni`] and [`Connection::accept_bi`].
pub struct AcceptStream<T> {
    conn: Connection,
    dir: Dir,
    make: fn(Connection, StreamId) -> T,
}

impl<T> Future for AcceptStream<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let dir = self.dir;
        let r = self.conn.poll_general(cx, |c, st| match c {
            Some(c) if st.error.is_none() => c.accept_stream(dir).map(Ok),
            _ => Some(Err(gone(Some(st)))),
        });
        r.map(|id| id.map(|id| (self.make)(self.conn.clone(), id)))
    }
}

/// The future of [`Connection::path_event`].
pub struct NextPathEvent {
    conn: Connection,
}

impl Future for NextPathEvent {
    type Output = Result<PathEvent, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.conn.poll_general(cx, |c, st| match st.path_events.pop_front() {
            Some(e) => Some(Ok(e)),
            None if st.error.is_some() || c.is_none() => Some(Err(gone(Some(st)))),
            None => None,
        })
    }
}

/// The future of [`Connection::closed`]: why the connection closed.
pub struct Closed {
    conn: Connection,
}

impl Future for Closed {
    type Output = Error;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Error> {
        self.conn.poll_general(cx, |c, st| (st.error.is_some() || st.drained || c.is_none()).then(|| gone(Some(st))))
    }
}

/// The future of [`Connection::add_path`].
pub struct AddPath {
    conn: Connection,
    local: Option<SocketAddr>,
    remote: SocketAddr,
    backup: bool,
    /// The path, once opened.
    id: Option<u64>,
}

impl Future for AddPath {
    type Output = Result<u64, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (local, remote, id) = (self.local, self.remote, self.id);
        let status = if self.backup { PathStatus::Backup } else { PathStatus::Available };
        let now = self.conn.inner.now();
        let r = self.conn.poll_general(cx, |c, st| {
            let c = match c {
                Some(c) if st.error.is_none() => c,
                _ => return Some(Err(gone(Some(st)))),
            };
            if !st.connected {
                return None;
            }
            let Some(id) = id else {
                return match c.open_path(now, local, remote, status) {
                    Ok(id) => Some(Ok((id, false))),
                    // Transient: a path ID or its connection IDs are on their way.
                    Err(PathError::NoConnectionId | PathError::NoPathId) => None,
                    // (Known once the handshake is complete; waiting for the
                    // confirmation as well costs nothing.)
                    Err(PathError::MultipathNotNegotiated) if !st.confirmed => None,
                    Err(e) => Some(Err(Error::Path(e))),
                };
            };
            match c.path_validated(id) {
                Some(true) => Some(Ok((id, true))),
                Some(false) => None,
                None => Some(Err(Error::Path(PathError::UnknownPath))),
            }
        });
        match r {
            Poll::Ready(Ok((id, true))) => Poll::Ready(Ok(id)),
            Poll::Ready(Ok((id, false))) => {
                // Opened: now wait for its validation (woken by its path event).
                self.id = Some(id);
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}
