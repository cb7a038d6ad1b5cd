//! Applications for simulated transfers: a bulk download whose bytes are checked on arrival.
//!
//! Protocol (the same as `mpq perf`): the client opens a bidirectional stream and sends the
//! requested size as an 8-byte big-endian integer followed by FIN; the server answers with
//! that many bytes of a deterministic pattern, then FIN.

use mpq_proto::conn::{ClientConfig, Event};
use mpq_proto::endpoint::{ConnectionHandle, Endpoint};
use mpq_proto::{Dir, Instant, StreamId};
use std::collections::HashMap;
use std::net::SocketAddr;

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

/// Client side of a bulk download.
pub struct DownloadClient {
    config: ClientConfig,
    server: SocketAddr,
    size: u64,
    conn: Option<ConnectionHandle>,
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
            config,
            server,
            size,
            conn: None,
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

    /// True once every byte arrived or the connection failed.
    pub fn finished(&self) -> bool {
        self.done_at.is_some() || self.error.is_some()
    }

    /// The client connection's handle.
    pub fn handle(&self) -> Option<ConnectionHandle> {
        self.conn
    }
}

impl crate::quic::SimApp for DownloadClient {
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) {
        if self.conn.is_none() && self.error.is_none() {
            match ep.connect(now, &self.config, self.server, "localhost") {
                Ok(h) => self.conn = Some(h),
                Err(e) => self.error = Some(e.to_string()),
            }
        }
        while let Some((_, ev)) = ep.poll_event() {
            match ev {
                Event::Connected => self.connected_at = Some(now),
                Event::ConnectionLost(e) if self.done_at.is_none() => self.error = Some(e.to_string()),
                _ => {}
            }
        }
        let Some(h) = self.conn else { return };
        let Some(c) = ep.connection_mut(h) else { return };
        if !c.is_established() {
            return;
        }
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
                c.close(now, 0, b"done");
            }
            if r.len == 0 {
                break;
            }
        }
    }
}

/// One response being sent.
#[derive(Default)]
struct Response {
    request: Vec<u8>,
    size: u64,
    sent: u64,
    /// Pattern bytes starting at `chunk_off`, generated once and written as flow control allows.
    chunk: Vec<u8>,
    chunk_off: u64,
}

/// Server side: answers every download request on every connection.
#[derive(Default)]
pub struct DownloadServer {
    streams: HashMap<(ConnectionHandle, StreamId), Response>,
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
        let mut done = Vec::new();
        for (&(h, id), st) in self.streams.iter_mut() {
            let Some(c) = ep.connection_mut(h) else {
                done.push((h, id));
                continue;
            };
            if st.request.len() < 8 {
                let mut req = [0u8; 8];
                let want = 8 - st.request.len();
                if let Ok(r) = c.read(id, &mut req[..want]) {
                    st.request.extend_from_slice(&req[..r.len]);
                    if st.request.len() == 8 {
                        st.size = u64::from_be_bytes(st.request[..8].try_into().unwrap_or([0; 8]));
                    }
                }
                if st.request.len() < 8 {
                    continue;
                }
            }
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
