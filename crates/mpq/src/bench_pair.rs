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

/// The TLS name of the cipher suite the benchmark's connections negotiate (they all use the
/// same configurations), e.g. `TLS13_AES_256_GCM_SHA384`: what the AEAD reference seals with
/// (`bench_seal.rs`).
pub(crate) fn negotiated_suite_name() -> Result<String> {
    let s = Setup::new(1)?;
    let info = s.pair.server.connection(s.server).and_then(Connection::handshake_info);
    Ok(info.context("the in-memory handshake did not complete")?.cipher_suite)
}

/// The stream's byte at `offset` (checked by the receiver, outside the timed work).
pub(crate) fn pattern(offset: u64) -> u8 {
    (offset % 251) as u8
}

/// What the harness tells a path thread.
enum Order<J> {
    /// Stay awake for the next job (untimed; see [`PathThreads::wake`]).
    Wake,
    /// A round's work, at the protocol time given.
    Job(mpq_proto::Instant, J),
}

/// What a path thread answers.
enum Answer<R> {
    /// Awake and watching for its job.
    Awake,
    /// A job's result.
    Done(R),
}

/// Path threads for the whole transfer (a runtime's threads live as long as their paths):
/// each takes a job per round and answers on a shared channel.
///
/// Between rounds the threads sleep while the harness does the untimed work (the other
/// side of the transfer). Waking a sleeping thread on this virtual machine is an interrupt
/// between vCPUs that at times took 0.5-4 ms, in up to half of the rounds: a round-based
/// harness's artefact (a runtime's path threads under load are busy on their sockets), and
/// the noise that dominated the measured scaling. So before each timed round the harness
/// wakes them ([`PathThreads::wake`], untimed) and they watch for their job, yielding the
/// CPU between looks, until it comes.
pub(crate) struct PathThreads<J, R> {
    orders: Vec<mpsc::Sender<Order<J>>>,
    answers: mpsc::Receiver<Answer<R>>,
}

impl<J, R> PathThreads<J, R> {
    /// Path threads of the transfer: `n` of them, or none (the single-thread runtime).
    /// Thread `k` is pinned to `cpus[k % cpus.len()]` if `cpus` is not empty.
    pub(crate) fn spawn<'scope, 'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        n: usize,
        cpus: &[usize],
        work: impl Fn(mpq_proto::Instant, J) -> R + Send + Sync + Copy + 'scope,
    ) -> Self
    where
        J: Send + 'scope,
        R: Send + 'scope,
    {
        let (answer_tx, answers) = mpsc::channel::<Answer<R>>();
        let mut orders = Vec::new();
        for k in 0..n {
            let (tx, rx) = mpsc::channel::<Order<J>>();
            let answer = answer_tx.clone();
            let cpu = (!cpus.is_empty()).then(|| cpus[k % cpus.len()]);
            scope.spawn(move || {
                if let Some(cpu) = cpu {
                    mpq_io::path_threads::pin_current_thread(cpu);
                }
                path_thread(&rx, &answer, work);
            });
            orders.push(tx);
        }
        Self { orders, answers }
    }

    /// Number of path threads.
    pub(crate) fn len(&self) -> usize {
        self.orders.len()
    }

    /// True for the single-thread runtime (no path threads).
    pub(crate) fn is_empty(&self) -> bool {
        self.orders.is_empty()
    }

    /// Wakes every path thread and returns once all are awake and watching for their job
    /// (untimed: call before the round's clock starts).
    pub(crate) fn wake(&self) -> Result<()> {
        for o in &self.orders {
            o.send(Order::Wake).map_err(|_| anyhow::anyhow!("a path thread stopped"))?;
        }
        for _ in 0..self.orders.len() {
            match self.answers.recv().context("a path thread stopped")? {
                Answer::Awake => {}
                Answer::Done(_) => bail!("a path thread answered a job it was not given"),
            }
        }
        Ok(())
    }

    /// Gives thread `k` its job for the round.
    pub(crate) fn give(&self, k: usize, now: mpq_proto::Instant, job: J) -> Result<()> {
        self.orders[k].send(Order::Job(now, job)).map_err(|_| anyhow::anyhow!("a path thread stopped"))
    }

    /// The next result of a job given this round.
    pub(crate) fn next_done(&self) -> Result<R> {
        match self.answers.recv().context("a path thread stopped")? {
            Answer::Done(r) => Ok(r),
            Answer::Awake => bail!("a path thread woke without being asked"),
        }
    }
}

/// A path thread's life: sleeps for its orders; once woken, watches for its job without
/// sleeping (yielding between looks, so the harness's own thread still runs), does it, and
/// answers. Ends when the harness lets go of its channel.
fn path_thread<J, R>(
    orders: &mpsc::Receiver<Order<J>>,
    answers: &mpsc::Sender<Answer<R>>,
    work: impl Fn(mpq_proto::Instant, J) -> R,
) {
    while let Ok(order) = orders.recv() {
        let order = match order {
            Order::Wake => {
                if answers.send(Answer::Awake).is_err() {
                    return;
                }
                loop {
                    match orders.try_recv() {
                        Ok(o) => break o,
                        Err(mpsc::TryRecvError::Empty) => std::thread::yield_now(),
                        Err(mpsc::TryRecvError::Disconnected) => return,
                    }
                }
            }
            job => job,
        };
        if let Order::Job(now, job) = order {
            if answers.send(Answer::Done(work(now, job))).is_err() {
                return;
            }
        }
    }
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

/// Capacity of a send buffer: a GSO batch of 64 kB.
const SEND_BUFFER: usize = 64 * 1024;

/// Send buffers kept from round to round, as a runtime keeps its sockets' buffers.
///
/// The harness hands each round's buffers to the server and then back to a pool, and the
/// pools to the threads with their jobs (`mpq bench send` keeps a pool per thread, from run
/// to run after a warm-up run: `bench_send`). Allocating a fresh buffer per batch instead,
/// on a path thread, to be freed on the harness's thread, made the allocator (mimalloc) take
/// fresh pages round after round: the kernel zeroing them was 16 % of each send path
/// thread's samples (`perf record`, 2026-12-01), a cost of the harness's hand-over that one
/// thread, which allocates and frees on its own thread, paid less of. With the pool it was 8 % (what is
/// left is the first rounds, while the windows and so the rounds grow); the goodput of
/// neither thread count moved measurably (three alternated pairs of invocations).
#[derive(Debug, Default)]
pub(crate) struct BufferPool(Vec<Vec<u8>>);

impl BufferPool {
    /// An empty buffer of [`SEND_BUFFER`] bytes' capacity, kept or new.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        let mut b = self.0.pop().unwrap_or_else(|| Vec::with_capacity(SEND_BUFFER));
        b.clear();
        b
    }

    /// Keeps `b` for a later batch.
    pub(crate) fn give(&mut self, b: Vec<u8>) {
        self.0.push(b);
    }

    /// Buffers kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Splits the pool into `n` about equal pools, one per path thread's job.
    pub(crate) fn split(&mut self, n: usize) -> Vec<BufferPool> {
        let mut out: Vec<BufferPool> = (0..n).map(|_| BufferPool::default()).collect();
        for (i, b) in self.0.drain(..).enumerate() {
            out[i % n.max(1)].give(b);
        }
        out
    }

    /// Takes every buffer of `other` into this pool.
    pub(crate) fn absorb(&mut self, other: BufferPool) {
        self.0.extend(other.0);
    }
}

/// A path thread's send work on a round (`mpq bench send`'s data, `mpq bench receive`'s
/// ACKs): for each of its paths, batches until the path has nothing more to send. A batch built alone is asked for and handed back under the lock
/// and built without it. Returns the time spent building alone, the time spent taking and
/// holding the lock, and what was sent. Buffers come from `pool` ([`BufferPool`]).
pub(crate) fn path_transmits(
    conn: &Mutex<&mut Connection>,
    now: mpq_proto::Instant,
    ids: &[u64],
    pool: &mut BufferPool,
) -> ThreadRound {
    let (mut building, mut locked) = (Duration::ZERO, Duration::ZERO);
    let mut out = Vec::new();
    for &id in ids {
        loop {
            let mut buf = pool.take();
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
                        None => {
                            pool.give(buf);
                            break;
                        }
                    }
                }
                PathTransmit::Idle | PathTransmit::Elsewhere(_) | PathTransmit::Gone => {
                    pool.give(buf);
                    break;
                }
            };
            out.push((t, buf));
        }
    }
    (building, locked, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each round: the threads are woken, each is given its job, and every result comes
    /// back once; the threads end when the harness lets go of them.
    #[test]
    fn path_threads_take_one_job_per_round_after_waking() {
        std::thread::scope(|scope| {
            let threads = PathThreads::spawn(scope, 2, &[], |_now, x: u64| x * 10);
            assert_eq!(threads.len(), 2);
            for round in 0..50u64 {
                threads.wake().expect("woken");
                threads.give(0, mpq_proto::Instant::ZERO, round).expect("given");
                threads.give(1, mpq_proto::Instant::ZERO, round + 1000).expect("given");
                let mut got = vec![threads.next_done().expect("done"), threads.next_done().expect("done")];
                got.sort_unstable();
                assert_eq!(got, vec![round * 10, (round + 1000) * 10]);
            }
            // A job given without waking is done as well (the thread is asleep, not gone).
            threads.give(1, mpq_proto::Instant::ZERO, 7).expect("given");
            assert_eq!(threads.next_done().expect("done"), 70);
        });
    }

    /// Pinned threads run where they were pinned (CPU 0 exists everywhere).
    #[test]
    fn path_threads_are_pinned_to_the_cpus_given() {
        std::thread::scope(|scope| {
            let threads = PathThreads::spawn(scope, 2, &[0], |_now, ()| mpq_io::path_threads::allowed_cpus());
            threads.wake().expect("woken");
            for k in 0..2 {
                threads.give(k, mpq_proto::Instant::ZERO, ()).expect("given");
            }
            for _ in 0..2 {
                assert_eq!(threads.next_done().expect("done"), vec![0]);
            }
        });
    }

    /// A pool hands out empty buffers, keeps what it is given, and splits evenly.
    #[test]
    fn buffer_pool_reuses_and_splits() {
        let mut pool = BufferPool::default();
        let mut b = pool.take();
        assert!(b.is_empty() && b.capacity() >= SEND_BUFFER);
        b.extend_from_slice(&[1, 2, 3]);
        let at = b.as_ptr();
        pool.give(b);
        let again = pool.take();
        assert!(again.is_empty(), "a kept buffer comes back empty");
        assert_eq!(again.as_ptr(), at, "the same allocation");
        for _ in 0..5 {
            pool.give(Vec::with_capacity(8));
        }
        let parts = pool.split(2);
        assert_eq!(pool.len(), 0);
        assert_eq!(parts.iter().map(BufferPool::len).collect::<Vec<_>>(), [3, 2]);
        for p in parts {
            pool.absorb(p);
        }
        assert_eq!(pool.len(), 5);
    }

    /// No path threads: the single-thread runtime, waking is a no-op.
    #[test]
    fn no_path_threads_wake_at_once() {
        std::thread::scope(|scope| {
            let threads = PathThreads::spawn(scope, 0, &[], |_now, ()| ());
            assert!(threads.is_empty());
            threads.wake().expect("nothing to wake");
        });
    }
}
