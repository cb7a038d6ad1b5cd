//! What `mpq bench receive` and `mpq bench send` share: the in-memory pair with N validated
//! paths and a stream (client to server), the data pattern, the path threads that take one
//! job per round, the sending application's feed and the receiving application's read.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use mpq_proto::conn::{Connection, Event, PathEvent, PathStatus, PathTransmit, Transmit, TransportConfig};
use mpq_proto::endpoint::ConnectionHandle;
use mpq_proto::sched::SchedulerKind;
use mpq_proto::stream::StreamsConfig;
use mpq_proto::testing::Pair;
use mpq_proto::types::{Dir, StreamId};

use crate::progress::Stopwatch;

/// Virtual time between rounds (the protocol's clock; wall time is what is measured).
pub(crate) const ROUND_STEP: Duration = Duration::from_micros(200);

/// The connected pair, its paths and the stream.
pub(crate) struct Setup {
    pub pair: Pair,
    pub server: ConnectionHandle,
    /// The client's stream (the data goes client to server).
    pub stream: StreamId,
}

/// The client's address for path `k`.
fn client_addr(k: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 1, k as u8 + 1], 4433))
}

fn transport(paths: usize) -> TransportConfig {
    // Windows large enough that a round is limited by the sender's congestion window, not
    // by flow control; no pacing (bursts fill GSO batches).
    let window = 32 << 20;
    let streams = StreamsConfig {
        stream_receive_window: window,
        receive_window: window,
        max_stream_window: window,
        max_connection_window: window,
        send_buffer_limit: window,
        ..StreamsConfig::default()
    };
    TransportConfig {
        initial_max_path_id: Some(paths as u64 + 1),
        max_concurrent_paths: paths as u64 + 1,
        scheduler: SchedulerKind::RoundRobin,
        pacing: false,
        max_idle_timeout: Duration::from_secs(600),
        streams,
        ..TransportConfig::default()
    }
}

impl Setup {
    /// Handshake, `paths` validated paths, and a stream the server has accepted.
    pub(crate) fn new(paths: usize) -> Result<Self> {
        let mut pair = Pair::new(transport(paths));
        let mut confirmed = false;
        let mut allowed = 0usize;
        pair.run_until(Duration::from_secs(5), |p| {
            while let Some((_, e)) = p.client.poll_event() {
                confirmed |= e == Event::HandshakeConfirmed;
                allowed += usize::from(e == Event::Path(PathEvent::NewPathAllowed));
            }
            while p.server.poll_event().is_some() {}
            confirmed
        });
        if !confirmed {
            bail!("the in-memory handshake did not complete");
        }
        let server_addr = pair.server_addr;
        for k in 1..paths {
            // A path ID and the server's CIDs for it may take a round trip.
            let mut id = None;
            pair.run_until(Duration::from_secs(5), |p| {
                let now = p.now;
                let c = p.client.connection_mut(p.client_conn).expect("client");
                id = c.open_path(now, Some(client_addr(k)), server_addr, PathStatus::Available).ok();
                id.is_some()
            });
            let id = id.with_context(|| format!("path {k} could not be opened"))?;
            let mut validated = false;
            pair.run_until(Duration::from_secs(5), |p| {
                while let Some((_, e)) = p.client.poll_event() {
                    validated |= e == Event::Path(PathEvent::Validated { id });
                }
                while p.server.poll_event().is_some() {}
                validated
            });
            if !validated {
                bail!("path {k} was not validated");
            }
        }
        let c = pair.client.connection_mut(pair.client_conn).expect("client");
        let stream = c.open_stream(Dir::Uni).context("no stream")?;
        // Settle the paths' opening (CIDs, ACKs) before measuring.
        pair.run_until(Duration::from_millis(300), |_| false);
        let server = *pair.server.handles().first().context("no server connection")?;
        Ok(Self { pair, server, stream })
    }
}

/// The stream's byte at `offset` (checked by the receiver, outside the timed work).
pub(crate) fn pattern(offset: u64) -> u8 {
    (offset % 251) as u8
}

/// Path threads for the whole transfer (a runtime's threads live as long as their paths):
/// each takes a job per round from its channel and answers on the shared one. `n` of 0
/// starts none (the single-thread runtime).
pub(crate) fn spawn_path_threads<'scope, 'env, J: Send + 'scope, R: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    n: usize,
    work: impl Fn(mpq_proto::Instant, J) -> R + Send + Sync + Copy + 'scope,
) -> (Vec<mpsc::Sender<(mpq_proto::Instant, J)>>, mpsc::Receiver<R>) {
    let (done_tx, done_rx) = mpsc::channel::<R>();
    let mut workers = Vec::new();
    for _ in 0..n {
        let (tx, rx) = mpsc::channel::<(mpq_proto::Instant, J)>();
        let done = done_tx.clone();
        scope.spawn(move || {
            while let Ok((now, job)) = rx.recv() {
                if done.send(work(now, job)).is_err() {
                    break;
                }
            }
        });
        workers.push(tx);
    }
    (workers, done_rx)
}

/// Takes the connection's lock as the per-path runtime takes its endpoint's (spinning a
/// little before sleeping: `mpq_io::spin_lock`).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mpq_io::spin_lock::lock_spinning(m, mpq_io::spin_lock::SPIN_BUDGET).expect("no bench thread panicked")
}

/// The sending application: writes the pattern into the stream as far as it takes it.
pub(crate) struct StreamFeed {
    /// About a megabyte of the pattern, a whole number of its periods (so it repeats).
    chunk: Bytes,
    /// Bytes written so far.
    pub written: u64,
}

impl StreamFeed {
    pub(crate) fn new() -> Self {
        Self { chunk: (0..251 * 4096).map(pattern).collect::<Vec<u8>>().into(), written: 0 }
    }

    /// Writes what `stream` takes, up to `bytes` in all (then finishes it), without copying.
    pub(crate) fn feed(&mut self, c: &mut Connection, stream: StreamId, bytes: u64) {
        while self.written < bytes {
            let off = (self.written % self.chunk.len() as u64) as usize;
            let len = (self.chunk.len() - off).min((bytes - self.written) as usize);
            match c.write_bytes(stream, &self.chunk.slice(off..off + len)) {
                Ok(0) | Err(_) => break,
                Ok(n) => self.written += n as u64,
            }
        }
        if self.written == bytes {
            let _ = c.finish(stream);
        }
    }
}

/// The server's application takes what arrived on the stream as buffers
/// ([`Connection::read_chunk`]: no copy while the stream holds its data as chunks) into
/// `out`. Returns the bytes taken. The application works on them after letting go of the
/// connection ([`verify_chunks`]).
pub(crate) fn take_chunks(conn: &mut Connection, id: &mut Option<StreamId>, out: &mut Vec<Bytes>) -> u64 {
    if id.is_none() {
        *id = conn.accept_stream(Dir::Uni);
    }
    let Some(id) = *id else { return 0 };
    let mut n = 0;
    while let Ok((r, chunk)) = conn.read_chunk(id, usize::MAX) {
        n += r.len as u64;
        out.extend(chunk);
        if r.len == 0 || r.fin {
            break;
        }
    }
    n
}

/// Checks the bytes of `chunks`, which start at stream offset `offset`, against the pattern.
pub(crate) fn verify_chunks(chunks: &[Bytes], mut offset: u64) -> Result<()> {
    for c in chunks {
        if let Some(i) = (0..c.len()).find(|&i| c[i] != pattern(offset + i as u64)) {
            bail!("stream data corrupted at offset {}", offset + i as u64);
        }
        offset += c.len() as u64;
    }
    Ok(())
}

/// The server's application reads what arrived, checking every byte against the pattern
/// if `verify`. Returns the bytes read.
pub(crate) fn read_stream(conn: &mut Connection, id: &mut Option<StreamId>, offset: u64, verify: bool) -> Result<u64> {
    let mut chunks = Vec::new();
    let n = take_chunks(conn, id, &mut chunks);
    if verify {
        verify_chunks(&chunks, offset)?;
    }
    Ok(n)
}

/// A datagram or GSO batch sent: its transmit and bytes.
pub(crate) type Sent = (Transmit, Vec<u8>);

/// What a path thread did in a round: time building alone, time locked, what it sent.
pub(crate) type ThreadRound = (Duration, Duration, Vec<Sent>);

/// A path thread's send work on a round (`mpq bench send`'s data, `mpq bench receive`'s
/// ACKs): for each of its paths, batches until the path has nothing more to send. A batch built alone is asked for and handed back under the lock
/// and built without it. Returns the time spent building alone, the time spent taking and
/// holding the lock, and what was sent.
pub(crate) fn path_transmits(conn: &Mutex<&mut Connection>, now: mpq_proto::Instant, ids: &[u64]) -> ThreadRound {
    let (mut building, mut locked) = (Duration::ZERO, Duration::ZERO);
    let mut out = Vec::new();
    for &id in ids {
        loop {
            let mut buf = Vec::with_capacity(64 * 1024);
            let clock = Stopwatch::start();
            let next = lock(conn).poll_path_transmit(now, id, &mut buf);
            locked += clock.elapsed();
            let t = match next {
                PathTransmit::Ready(t) => t,
                PathTransmit::Batch(mut batch) => {
                    let built = Stopwatch::start();
                    batch.build(now, &mut buf);
                    building += built.elapsed();
                    let back = Stopwatch::start();
                    let t = lock(conn).end_send_batch(now, batch, &mut buf);
                    locked += back.elapsed();
                    match t {
                        Some(t) => t,
                        None => break,
                    }
                }
                PathTransmit::Idle | PathTransmit::Elsewhere(_) | PathTransmit::Gone => break,
            };
            out.push((t, buf));
        }
    }
    (building, locked, out)
}
