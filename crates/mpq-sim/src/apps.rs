//! Applications for simulated transfers: a bulk download and a request/response workload,
//! both checked byte by byte on arrival, and both able to open extra paths.
//!
//! Protocol (a superset of `mpq perf`'s): for each transfer the client opens a bidirectional
//! stream and sends the size of the answer it wants as an 8-byte big-endian integer, optionally
//! followed by padding (a request of a given size), then FIN. Once the whole request arrived,
//! the server answers with that many bytes of a deterministic [pattern](pattern_byte), then FIN.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use mpq_proto::conn::{ClientConfig, Connection, ConnectionStats, Event, PathError, PathEvent, PathStatus};
use mpq_proto::endpoint::{ConnectionHandle, Endpoint};
use mpq_proto::{Dir, Instant, StreamId};

/// Byte `i` of every download: cheap to generate, and any shift or corruption shows.
pub fn pattern_byte(i: u64) -> u8 {
    (i ^ (i >> 8) ^ (i >> 16).wrapping_mul(7)) as u8
}

/// Fills `out` with the pattern starting at offset `start`.
pub fn fill_pattern(start: u64, out: &mut [u8]) {
    for (k, b) in out.iter_mut().enumerate() {
        *b = pattern_byte(start + k as u64);
    }
}

/// Opens one extra path per (local, remote) address pair once the connection allows it.
///
/// Attempts happen when the handshake completes and again on every
/// [`PathEvent::NewPathAllowed`]: right after the handshake the peer may not have issued
/// connection IDs for the new path IDs yet, so a refusal for lack of a path or connection ID
/// is retried later. Every refusal is recorded; none is fatal, so that a peer (or a core)
/// without multipath degrades to a single-path transfer.
#[derive(Debug, Clone, Default)]
pub struct PathOpener {
    pending: Vec<(SocketAddr, SocketAddr)>,
    retry: bool,
    /// Paths opened: (path ID, local, remote).
    pub opened: Vec<(u64, SocketAddr, SocketAddr)>,
    /// Refused attempts: (local, remote, error), in order.
    pub errors: Vec<(SocketAddr, SocketAddr, PathError)>,
}

impl PathOpener {
    /// Will open a path for each `(local, remote)` pair.
    pub fn new(pairs: Vec<(SocketAddr, SocketAddr)>) -> Self {
        Self { pending: pairs, ..Self::default() }
    }

    /// Pairs not opened yet.
    pub fn pending(&self) -> &[(SocketAddr, SocketAddr)] {
        &self.pending
    }

    /// Notes the connection events that make opening possible.
    pub fn on_event(&mut self, ev: &Event) {
        if matches!(ev, Event::Connected | Event::HandshakeConfirmed | Event::Path(PathEvent::NewPathAllowed)) {
            self.retry = true;
        }
    }

    /// Tries the pending pairs if an event since the last call allows it.
    pub fn poll(&mut self, now: Instant, conn: &mut Connection) {
        if !std::mem::take(&mut self.retry) || self.pending.is_empty() {
            return;
        }
        let mut still = Vec::new();
        for (local, remote) in std::mem::take(&mut self.pending) {
            match conn.open_path(now, Some(local), remote, PathStatus::Available) {
                Ok(id) => self.opened.push((id, local, remote)),
                Err(e) => {
                    self.errors.push((local, remote, e));
                    // Worth another try on the next NewPathAllowed; the others will not change.
                    let transient = matches!(
                        e,
                        PathError::NoPathId | PathError::NoConnectionId | PathError::MultipathNotNegotiated
                    );
                    if transient {
                        still.push((local, remote));
                    }
                }
            }
        }
        self.pending = still;
    }
}

/// What every client app does: connect, drain events, open extra paths, remember how the
/// connection ended.
struct ClientConn {
    config: ClientConfig,
    server: SocketAddr,
    conn: Option<ConnectionHandle>,
    paths: PathOpener,
    connected_at: Option<Instant>,
    error: Option<String>,
    stats: Option<ConnectionStats>,
    /// The connection negotiated multipath at some point.
    multipath: bool,
}

impl ClientConn {
    fn new(config: ClientConfig, server: SocketAddr) -> Self {
        Self {
            config,
            server,
            conn: None,
            paths: PathOpener::default(),
            connected_at: None,
            error: None,
            stats: None,
            multipath: false,
        }
    }

    /// Connects on the first call, handles events; returns the connection once established.
    /// `done`: the application got what it wanted, so the end of the connection is no error.
    fn poll<'a>(&mut self, now: Instant, ep: &'a mut Endpoint, done: bool) -> Option<&'a mut Connection> {
        if self.conn.is_none() && self.error.is_none() {
            match ep.connect(now, &self.config, self.server, "localhost") {
                Ok(h) => self.conn = Some(h),
                Err(e) => self.error = Some(e.to_string()),
            }
        }
        while let Some((h, ev)) = ep.poll_event() {
            self.paths.on_event(&ev);
            match ev {
                Event::Connected => self.connected_at = Some(now),
                Event::ConnectionLost(e) if !done => {
                    self.error = Some(e.to_string());
                    // Statistics survive until the connection drains; keep them now.
                    self.stats = ep.connection(h).map(Connection::stats);
                }
                _ => {}
            }
        }
        let c = ep.connection_mut(self.conn?)?;
        if !c.is_established() {
            return None;
        }
        self.multipath |= c.is_multipath();
        self.paths.poll(now, c);
        Some(c)
    }
}

/// Client side of a bulk download.
pub struct DownloadClient {
    base: ClientConn,
    size: u64,
    stream: Option<StreamId>,
    request_sent: bool,
    /// Bytes received and verified so far.
    pub received: u64,
    /// A byte differed from the pattern (offset of the first one).
    pub corrupt_at: Option<u64>,
    /// When the last byte (FIN) arrived.
    pub done_at: Option<Instant>,
    /// When the handshake completed.
    pub connected_at: Option<Instant>,
    /// Connection error, if the connection ended early.
    pub error: Option<String>,
    buf: Vec<u8>,
}

impl DownloadClient {
    /// Downloads `size` bytes from `server`.
    pub fn new(config: ClientConfig, server: SocketAddr, size: u64) -> Self {
        Self {
            base: ClientConn::new(config, server),
            size,
            stream: None,
            request_sent: false,
            received: 0,
            corrupt_at: None,
            done_at: None,
            connected_at: None,
            error: None,
            buf: vec![0; 65536],
        }
    }

    /// Also opens a path for each `(local, remote)` pair once the handshake completes (see
    /// [`PathOpener`]).
    pub fn with_paths(mut self, extra: Vec<(SocketAddr, SocketAddr)>) -> Self {
        self.base.paths = PathOpener::new(extra);
        self
    }

    /// True once every byte arrived or the connection failed.
    pub fn finished(&self) -> bool {
        self.done_at.is_some() || self.error.is_some()
    }

    /// The client connection's handle.
    pub fn handle(&self) -> Option<ConnectionHandle> {
        self.base.conn
    }

    /// The extra paths opened and the refusals.
    pub fn paths(&self) -> &PathOpener {
        &self.base.paths
    }

    /// True if the connection negotiated multipath.
    pub fn is_multipath(&self) -> bool {
        self.base.multipath
    }

    /// Connection statistics taken when the download completed or the connection failed.
    pub fn final_stats(&self) -> Option<&ConnectionStats> {
        self.base.stats.as_ref()
    }
}

impl crate::quic::SimApp for DownloadClient {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) {
        let c = self.base.poll(now, ep, self.done_at.is_some());
        self.connected_at = self.base.connected_at;
        self.error.clone_from(&self.base.error);
        let Some(c) = c else { return };
        if self.stream.is_none() {
            self.stream = c.open_stream(Dir::Bi);
        }
        let Some(id) = self.stream else { return };
        if !self.request_sent && c.write(id, &self.size.to_be_bytes()) == Ok(8) {
            let _ = c.finish(id);
            self.request_sent = true;
        }
        while self.done_at.is_none() {
            let Ok(r) = c.read(id, &mut self.buf) else { break };
            for (k, b) in self.buf[..r.len].iter().enumerate() {
                let off = self.received + k as u64;
                if self.corrupt_at.is_none() && *b != pattern_byte(off) {
                    self.corrupt_at = Some(off);
                }
            }
            self.received += r.len as u64;
            if r.fin {
                self.done_at = Some(now);
                self.base.stats = Some(c.stats());
                c.close(now, 0, b"done");
            }
            if r.len == 0 {
                break;
            }
        }
    }
}

/// One request of a [`ReqRespClient`].
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// When the application issued it (its slot in the schedule).
    pub sent_at: Instant,
    /// When the last byte of the response arrived.
    pub answered_at: Option<Instant>,
    /// Response bytes received and verified.
    pub received: u64,
    stream: Option<StreamId>,
    written: usize,
}

impl Request {
    /// Application delay: issued → whole response received.
    pub fn delay(&self) -> Option<Duration> {
        self.answered_at.map(|t| t - self.sent_at)
    }
}

/// Interactive client (seed 002, fig. 11): every `interval` it sends a `size`-byte request on
/// a new bidirectional stream and the server answers with `size` bytes. It records each
/// request's application delay, from the moment it is due to the arrival of the whole
/// response, in virtual time.
///
/// A stream per request keeps one lost response from delaying the next ones (no head-of-line
/// blocking between requests), as an HTTP-style application would. A request that cannot get
/// a stream (peer's stream limit) waits, and its delay includes the wait. The first request is
/// due when the handshake completes; after the last answer the client closes the connection.
pub struct ReqRespClient {
    base: ClientConn,
    interval: Duration,
    count: u64,
    next_due: Option<Instant>,
    /// What every request carries: the answer's size, then pattern padding.
    body: Vec<u8>,
    /// Every request issued so far, in order.
    pub requests: Vec<Request>,
    /// First response byte that differed from the pattern: (request index, offset).
    pub corrupt_at: Option<(usize, u64)>,
    /// When every response had arrived.
    pub done_at: Option<Instant>,
    buf: Vec<u8>,
}

impl ReqRespClient {
    /// `count` requests of `size` bytes (at least 8: the header), one every `interval`.
    pub fn new(config: ClientConfig, server: SocketAddr, size: u64, interval: Duration, count: u64) -> Self {
        let size = size.max(8);
        let mut body = vec![0u8; usize::try_from(size).unwrap_or(usize::MAX)];
        body[..8].copy_from_slice(&size.to_be_bytes());
        fill_pattern(8, &mut body[8..]);
        Self {
            base: ClientConn::new(config, server),
            interval,
            count,
            next_due: None,
            body,
            requests: Vec::new(),
            corrupt_at: None,
            done_at: None,
            buf: vec![0; 65536],
        }
    }

    /// Also opens a path for each `(local, remote)` pair (see [`PathOpener`]).
    pub fn with_paths(mut self, extra: Vec<(SocketAddr, SocketAddr)>) -> Self {
        self.base.paths = PathOpener::new(extra);
        self
    }

    /// True once every request was answered or the connection failed.
    pub fn finished(&self) -> bool {
        self.done_at.is_some() || self.base.error.is_some()
    }

    /// Requests whose whole response arrived.
    pub fn answered(&self) -> usize {
        self.requests.iter().filter(|r| r.answered_at.is_some()).count()
    }

    /// When the handshake completed.
    pub fn connected_at(&self) -> Option<Instant> {
        self.base.connected_at
    }

    /// Connection error, if the connection ended early.
    pub fn error(&self) -> Option<&str> {
        self.base.error.as_deref()
    }

    /// The client connection's handle.
    pub fn handle(&self) -> Option<ConnectionHandle> {
        self.base.conn
    }

    /// The extra paths opened and the refusals.
    pub fn paths(&self) -> &PathOpener {
        &self.base.paths
    }

    /// True if the connection negotiated multipath.
    pub fn is_multipath(&self) -> bool {
        self.base.multipath
    }

    /// Connection statistics taken when the last answer arrived or the connection failed.
    pub fn final_stats(&self) -> Option<&ConnectionStats> {
        self.base.stats.as_ref()
    }
}

impl crate::quic::SimApp for ReqRespClient {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) {
        let Some(c) = self.base.poll(now, ep, self.done_at.is_some()) else { return };
        if self.done_at.is_some() {
            return;
        }
        let due = *self.next_due.get_or_insert(now);
        if due <= now && (self.requests.len() as u64) < self.count {
            self.requests.push(Request { sent_at: due, answered_at: None, received: 0, stream: None, written: 0 });
            // Catch up from the slot, not from now: a late poll must not shift the schedule.
            let mut next = due + self.interval;
            while next <= now && (self.requests.len() as u64) < self.count {
                self.requests.push(Request { sent_at: next, answered_at: None, received: 0, stream: None, written: 0 });
                next += self.interval;
            }
            self.next_due = Some(next);
        }
        let body = &self.body;
        for (i, req) in self.requests.iter_mut().enumerate() {
            if req.answered_at.is_some() {
                continue;
            }
            if req.stream.is_none() {
                // Streams are opened in request order; if this one cannot, neither can the next.
                match c.open_stream(Dir::Bi) {
                    Some(id) => req.stream = Some(id),
                    None => break,
                }
            }
            let Some(id) = req.stream else { continue };
            if req.written < body.len() {
                if let Ok(w) = c.write(id, &body[req.written..]) {
                    req.written += w;
                }
                if req.written == body.len() {
                    let _ = c.finish(id);
                }
            }
            while let Ok(r) = c.read(id, &mut self.buf) {
                for (k, b) in self.buf[..r.len].iter().enumerate() {
                    let off = req.received + k as u64;
                    if self.corrupt_at.is_none() && *b != pattern_byte(off) {
                        self.corrupt_at = Some((i, off));
                    }
                }
                req.received += r.len as u64;
                if r.fin {
                    req.answered_at = Some(now);
                    break;
                }
                if r.len == 0 {
                    break;
                }
            }
        }
        let all_issued = self.requests.len() as u64 >= self.count;
        if all_issued && self.requests.iter().all(|r| r.answered_at.is_some()) {
            self.done_at = Some(now);
            self.base.stats = Some(c.stats());
            c.close(now, 0, b"done");
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if self.done_at.is_some() || self.base.error.is_some() || self.requests.len() as u64 >= self.count {
            return None;
        }
        self.next_due
    }
}

/// One response being sent.
#[derive(Default)]
struct Response {
    header: Vec<u8>,
    /// The whole request (FIN included) arrived.
    complete: bool,
    size: u64,
    sent: u64,
    /// Pattern bytes starting at `chunk_off`, generated once and written as flow control allows.
    chunk: Vec<u8>,
    chunk_off: u64,
}

/// Server side of [`DownloadClient`] and [`ReqRespClient`]: answers every request on every
/// connection, once the request's FIN arrived.
#[derive(Default)]
pub struct DownloadServer {
    streams: HashMap<(ConnectionHandle, StreamId), Response>,
    scratch: Vec<u8>,
}

impl crate::quic::SimApp for DownloadServer {
    fn poll(&mut self, _now: Instant, ep: &mut Endpoint) {
        while ep.accept().is_some() {}
        while ep.poll_event().is_some() {}
        for h in ep.handles() {
            let Some(c) = ep.connection_mut(h) else { continue };
            while let Some(id) = c.accept_stream(Dir::Bi) {
                self.streams.insert((h, id), Response::default());
            }
        }
        if self.scratch.is_empty() {
            self.scratch = vec![0; 4096];
        }
        let mut done = Vec::new();
        for (&(h, id), st) in self.streams.iter_mut() {
            let Some(c) = ep.connection_mut(h) else {
                done.push((h, id));
                continue;
            };
            while !st.complete {
                // The first 8 bytes are the answer's size; the rest is padding to discard.
                let want = if st.header.len() < 8 { 8 - st.header.len() } else { self.scratch.len() };
                let Ok(r) = c.read(id, &mut self.scratch[..want]) else { break };
                if st.header.len() < 8 {
                    st.header.extend_from_slice(&self.scratch[..r.len]);
                }
                st.complete = r.fin;
                if r.len == 0 {
                    break;
                }
            }
            if !st.complete {
                continue;
            }
            if st.header.len() < 8 {
                // A request too short to name a size: nothing sensible to answer.
                let _ = c.finish(id);
                done.push((h, id));
                continue;
            }
            st.size = u64::from_be_bytes(st.header[..8].try_into().unwrap_or([0; 8]));
            while st.sent < st.size {
                if st.sent >= st.chunk_off + st.chunk.len() as u64 {
                    let n = (st.size - st.sent).min(64 * 1024) as usize;
                    st.chunk.resize(n, 0);
                    st.chunk_off = st.sent;
                    fill_pattern(st.sent, &mut st.chunk);
                }
                let from = (st.sent - st.chunk_off) as usize;
                match c.write(id, &st.chunk[from..]) {
                    Ok(0) | Err(_) => break,
                    Ok(w) => st.sent += w as u64,
                }
            }
            if st.sent == st.size {
                let _ = c.finish(id);
                done.push((h, id));
            }
        }
        for k in done {
            self.streams.remove(&k);
        }
    }
}
