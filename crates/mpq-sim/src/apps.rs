//! Applications for simulated transfers: a bulk download (on one stream or several) and a
//! request/response workload, both checked byte by byte on arrival, and both able to open
//! extra paths: once each ([`PathOpener`], optionally as backups), or kept open and reopened
//! after failure by mpq-proto's [`PathManager`] (download). Clients and the server record the
//! connection's path events.
//!
//! Protocol (a superset of `mpq perf`'s): for each transfer the client opens a bidirectional
//! stream and sends the size of the answer it wants as an 8-byte big-endian integer, optionally
//! followed by padding (a request of a given size), then FIN. Once the whole request arrived,
//! the server answers with that many bytes of a deterministic [pattern](pattern_byte), then FIN.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use mpq_proto::conn::{ClientConfig, Connection, ConnectionStats, Event, PathError, PathEvent, PathStatus};
use mpq_proto::endpoint::{ConnectionHandle, Endpoint};
use mpq_proto::path_manager::{PathManager, PathManagerConfig};
use mpq_proto::{Dir, Instant, StreamId};

/// Byte `i` of every download: cheap to generate, and any shift or corruption shows.
pub fn pattern_byte(i: u64) -> u8 {
    (i ^ (i >> 8) ^ (i >> 16).wrapping_mul(7)) as u8
}

/// One run of the pattern inside a 256-offset block, where the pattern is the offset's low
/// byte XOR a constant: loops over a run vectorise (the byte-by-byte form was a tenth of a
/// lab experiment's time, in the client's check and the server's fill).
#[derive(Clone, Copy)]
struct PatternRun {
    /// Where it starts in the buffer at hand.
    at: usize,
    /// How many bytes it has.
    len: usize,
    /// The low byte of its first offset.
    low: u8,
    /// What that low byte is XORed with throughout the run.
    xor: u8,
}

impl PatternRun {
    /// Its `k`-th byte.
    #[inline]
    fn byte(self, k: usize) -> u8 {
        self.low.wrapping_add(k as u8) ^ self.xor
    }

    /// Where it ends in the buffer at hand.
    fn end(self) -> usize {
        self.at + self.len
    }

    /// Writes its bytes into `out` (its length).
    #[inline]
    fn fill(self, out: &mut [u8]) {
        for (k, b) in out.iter_mut().enumerate() {
            *b = self.byte(k);
        }
    }
}

/// The runs of `len` pattern bytes from offset `start`, in order.
fn pattern_runs(start: u64, len: usize) -> impl Iterator<Item = PatternRun> {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at == len {
            return None;
        }
        let off = start + at as u64;
        let run_len = ((256 - (off & 0xff)) as usize).min(len - at);
        let run = PatternRun { at, len: run_len, low: off as u8, xor: pattern_byte(off) ^ off as u8 };
        at += run_len;
        Some(run)
    })
}

/// Fills `out` with the pattern starting at offset `start`.
pub fn fill_pattern(start: u64, out: &mut [u8]) {
    for run in pattern_runs(start, out.len()) {
        run.fill(&mut out[run.at..run.end()]);
    }
}

/// A fresh buffer of `len` pattern bytes from offset `start` ([`fill_pattern`] without
/// zeroing the buffer first: that memset was 1 % of a simulated download).
pub fn pattern_block(start: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    for run in pattern_runs(start, len) {
        out.extend((0..run.len).map(|k| run.byte(k)));
    }
    out
}

/// The offset of the first byte of `data` (which starts at offset `start`) that differs
/// from the pattern, if one does.
pub fn pattern_mismatch(start: u64, data: &[u8]) -> Option<u64> {
    let mut expected = [0u8; 256];
    for run in pattern_runs(start, data.len()) {
        let expected = &mut expected[..run.len];
        run.fill(expected);
        let got = &data[run.at..run.end()];
        if got != expected {
            let k = got.iter().zip(expected.iter()).position(|(a, b)| a != b).unwrap_or(0);
            return Some(start + (run.at + k) as u64);
        }
    }
    None
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
    status: PathStatus,
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

    /// Opens the paths with `status` (advice to the server, PATH_STATUS_*) instead of
    /// [`PathStatus::Available`]: with [`PathStatus::Backup`] the server sends on them only
    /// when no available path works.
    pub fn with_status(mut self, status: PathStatus) -> Self {
        self.status = status;
        self
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
            match conn.open_path(now, Some(local), remote, self.status) {
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
    /// Keeps paths open, reopening them after failure (instead of `paths`, which opens each
    /// pair once).
    manager: Option<PathManager>,
    connected_at: Option<Instant>,
    error: Option<String>,
    stats: Option<ConnectionStats>,
    /// The connection negotiated multipath at some point.
    multipath: bool,
    /// Every path event, with the time it was seen.
    path_events: Vec<(Instant, PathEvent)>,
}

impl ClientConn {
    fn new(config: ClientConfig, server: SocketAddr) -> Self {
        Self {
            config,
            server,
            conn: None,
            paths: PathOpener::default(),
            manager: None,
            connected_at: None,
            error: None,
            stats: None,
            multipath: false,
            path_events: Vec::new(),
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
                Event::Path(p) => {
                    if let Some(m) = self.manager.as_mut() {
                        m.on_event(now, &p);
                    }
                    self.path_events.push((now, p));
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
        if let Some(m) = self.manager.as_mut() {
            m.poll(now, c);
        }
        Some(c)
    }

    /// When the path manager wants to retry opening a path.
    fn poll_timeout(&self) -> Option<Instant> {
        self.manager.as_ref().and_then(PathManager::poll_timeout)
    }
}

/// One download stream of a [`DownloadClient`].
#[derive(Debug, Clone, PartialEq)]
pub struct Transfer {
    /// Bytes asked for.
    pub size: u64,
    /// The stream, once opened.
    pub stream: Option<StreamId>,
    request_sent: bool,
    /// Bytes received and verified so far.
    pub received: u64,
    /// When the FIN arrived.
    pub done_at: Option<Instant>,
}

/// Client side of a bulk download: one stream by default, or several in parallel
/// ([`with_streams`](Self::with_streams)), each checked byte by byte against the pattern.
pub struct DownloadClient {
    base: ClientConn,
    size: u64,
    /// The download streams (one unless [`with_streams`](Self::with_streams)).
    pub transfers: Vec<Transfer>,
    /// Bytes received and verified so far (all streams).
    pub received: u64,
    /// A byte differed from the pattern: offset of the first one in its stream.
    pub corrupt_at: Option<u64>,
    /// When the last byte (FIN) of the last stream arrived.
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
            transfers: vec![Transfer { size, stream: None, request_sent: false, received: 0, done_at: None }],
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
        self.base.paths = PathOpener::new(extra).with_status(self.base.paths.status);
        self
    }

    /// Opens the extra paths with `status` (see [`PathOpener::with_status`]).
    pub fn with_path_status(mut self, status: PathStatus) -> Self {
        self.base.paths = std::mem::take(&mut self.base.paths).with_status(status);
        self
    }

    /// Lets `mpq_proto`'s [`PathManager`] keep the paths open instead of the one-shot
    /// [`PathOpener`]: it opens the configured pairs once multipath allows, and opens a new
    /// path (a new path ID) for a pair whose path was abandoned, after its back-off.
    pub fn with_path_manager(mut self, config: PathManagerConfig) -> Self {
        self.base.paths = PathOpener::default();
        self.base.manager = Some(PathManager::new(config));
        self
    }

    /// Splits the download over `n` streams (at least 1) requested at once, each of
    /// `size / n` bytes (the first ones take the remainder).
    pub fn with_streams(mut self, n: usize) -> Self {
        let n = n.max(1) as u64;
        self.transfers = (0..n)
            .map(|i| Transfer {
                size: self.size / n + u64::from(i < self.size % n),
                stream: None,
                request_sent: false,
                received: 0,
                done_at: None,
            })
            .collect();
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

    /// Every path event the connection reported, with the time the application saw it.
    pub fn path_events(&self) -> &[(Instant, PathEvent)] {
        &self.base.path_events
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
        for t in &mut self.transfers {
            if t.stream.is_none() {
                t.stream = c.open_stream(Dir::Bi);
            }
            let Some(id) = t.stream else { break };
            if !t.request_sent && c.write(id, &t.size.to_be_bytes()) == Ok(8) {
                let _ = c.finish(id);
                t.request_sent = true;
            }
            while t.done_at.is_none() {
                let Ok(r) = c.read(id, &mut self.buf) else { break };
                if self.corrupt_at.is_none() {
                    self.corrupt_at = pattern_mismatch(t.received, &self.buf[..r.len]);
                }
                t.received += r.len as u64;
                self.received += r.len as u64;
                if r.fin {
                    t.done_at = Some(now);
                }
                if r.len == 0 {
                    break;
                }
            }
        }
        if self.done_at.is_none() && self.transfers.iter().all(|t| t.done_at.is_some()) {
            self.done_at = Some(now);
            self.base.stats = Some(c.stats());
            c.close(now, 0, b"done");
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if self.finished() {
            return None;
        }
        self.base.poll_timeout()
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

/// Interactive client (the handover experiment of De Coninck and Bonaventure, "Multipath QUIC:
/// Design and Evaluation", CoNEXT 2017, §4.3, Fig. 11): every `interval` it sends a `size`-byte
/// request on a new bidirectional stream and the server answers with `size` bytes. It records each
/// request's application delay, from the moment it is due to the arrival of the whole response, in
/// virtual time.
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

    /// Every path event the connection reported, with the time the application saw it.
    pub fn path_events(&self) -> &[(Instant, PathEvent)] {
        &self.base.path_events
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
                if self.corrupt_at.is_none() {
                    self.corrupt_at = pattern_mismatch(req.received, &self.buf[..r.len]).map(|off| (i, off));
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
        if self.done_at.is_some() || self.base.error.is_some() {
            return None;
        }
        let next = self.next_due.filter(|_| (self.requests.len() as u64) < self.count);
        match (next, self.base.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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
    /// Pattern bytes starting at `chunk_off`, generated once and handed to the stream
    /// without a copy ([`Connection::write_bytes`]) as flow control allows.
    chunk: bytes::Bytes,
    chunk_off: u64,
}

/// Server side of [`DownloadClient`] and [`ReqRespClient`]: answers every request on every
/// connection, once the request's FIN arrived.
#[derive(Default)]
pub struct DownloadServer {
    /// Ordered, so that the server serves its streams in the same order in every run (a
    /// hash map's order changes from one instance to the next).
    streams: BTreeMap<(ConnectionHandle, StreamId), Response>,
    scratch: Vec<u8>,
    /// Every path event of every connection, with the time the application saw it.
    pub path_events: Vec<(Instant, ConnectionHandle, PathEvent)>,
}

impl crate::quic::SimApp for DownloadServer {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) {
        while ep.accept().is_some() {}
        while let Some((h, ev)) = ep.poll_event() {
            if let Event::Path(p) = ev {
                self.path_events.push((now, h, p));
            }
        }
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
                    let len = (st.size - st.sent).min(64 * 1024) as usize;
                    st.chunk = pattern_block(st.sent, len).into();
                    st.chunk_off = st.sent;
                }
                let from = (st.sent - st.chunk_off) as usize;
                match c.write_bytes(id, &st.chunk.slice(from..)) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The block-wise fill, fresh block and check agree with the pattern byte by byte, across block
    /// boundaries and for any start, and the check names the first corrupted offset.
    #[test]
    fn block_wise_pattern_matches_the_byte_wise_one() {
        for start in [0u64, 1, 255, 256, 65_535, 65_536, 16_777_215, 20_000_000 - 700, u64::MAX - 1000] {
            for len in [0usize, 1, 255, 256, 257, 700, 1000] {
                let mut out = vec![0u8; len];
                fill_pattern(start, &mut out);
                let naive: Vec<u8> = (0..len as u64).map(|k| pattern_byte(start.wrapping_add(k))).collect();
                assert_eq!(out, naive, "start {start} len {len}");
                assert_eq!(pattern_block(start, len), naive, "start {start} len {len}");
                assert_eq!(pattern_mismatch(start, &out), None);
                for bad in [0, len / 2, len.saturating_sub(1)] {
                    if bad < len {
                        let mut corrupt = out.clone();
                        corrupt[bad] ^= 0x40;
                        corrupt[len - 1] ^= u8::from(bad < len - 1);
                        assert_eq!(
                            pattern_mismatch(start, &corrupt),
                            Some(start + bad as u64),
                            "start {start} len {len}"
                        );
                    }
                }
            }
        }
    }
}
