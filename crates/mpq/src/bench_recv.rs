//! One measured transfer of `mpq bench receive` (issue C2): how the receive work of one
//! connection over N paths scales with the threads that drive its paths.
//!
//! A client and a server run the real protocol in memory (TLS 1.3, AES-GCM, header
//! protection), multipath with N validated paths and the round-robin scheduler, one stream.
//! The transfer goes in rounds: the client writes and sends what its windows allow (not
//! timed), then the server does all of its work on that round's datagrams, timed: header
//! protection removed, packets decrypted, packet numbers decoded, frames parsed, the stream
//! reassembled, the data read by the application, and its ACKs built and sealed. Its ACKs
//! then go back to the client (not timed) and the next round starts. Nothing is precomputed:
//! every datagram is fresh from the sender and decrypted once.
//!
//! With one thread the server handles each path's datagrams in GRO batches of up to 64
//! through [`Connection::handle_datagrams`], as the single-thread runtime does. With T
//! threads, path k's batches go to thread k mod T, which checks the path out with
//! [`Connection::begin_recv_run`], opens the batch alone ([`RecvRun::open`]) and applies it
//! with [`Connection::end_recv_run`], holding the connection's lock only for the first and
//! the last step: the split a runtime with a thread per path uses (`docs/connection-split.md`).
//! Each path thread then sends its paths' ACKs as the runtime's do (asked for under the lock,
//! built and sealed without it); the application's read (it takes the data as buffers,
//! [`Connection::read_chunk`], and checks them with `--verify` outside the lock, the
//! buffers freed there), and whatever else the connection
//! sends, follow on one thread. The lock is taken as the runtime takes it, spinning a little
//! before sleeping (`mpq_io::spin_lock`). The path threads are woken before a round's clock
//! starts and are pinned to CPUs, the harness's thread (and so the one-thread run) to the
//! first (`PathThreads`).

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use mpq_proto::conn::{Connection, RecvRun};
use mpq_proto::testing::Pair;
use mpq_proto::types::StreamId;

use crate::bench_pair::{
    lock, path_transmits, take_chunks, verify_chunks, BufferPool, PathThreads, Sent, Setup, StreamFeed, ROUND_STEP,
};
use crate::progress::Stopwatch;

/// Datagrams of one GRO batch at most.
const GRO_BATCH: usize = 64;
/// GRO batches a round brings per path at most by default (`--round-batches`): 2048
/// datagrams, 3 MB. The receiver's application reads, and its ACKs go back, once a round.
/// Without a cap the client sent a whole window (18 MB per path) each round, which no
/// receiver that reads as data comes sees, and the buffers of so much data in flight made the
/// runs' timings wander by 40 %.
pub const DEFAULT_ROUND_BATCHES: usize = 32;

/// Bytes of a round's datagrams on one path at most, with `round_batches` GRO batches per
/// path (datagrams of about 1.45 kB, rounded up): the size of the copy reference's buffers.
pub fn round_bytes(round_batches: usize) -> usize {
    round_batches * GRO_BATCH * 1500
}

/// What one measured transfer gave.
#[derive(Debug, Clone, Default)]
pub struct RecvRunResult {
    /// Stream bytes the server's application read.
    pub bytes: u64,
    /// Datagrams the server received.
    pub datagrams: u64,
    /// Wall time of the server's work.
    pub busy: Duration,
    /// Of that, time the threads spent outside the connection's lock (opening datagrams,
    /// building their paths' ACKs), summed over threads (zero with one thread).
    pub open_outside_lock: Duration,
    /// Time the threads spent taking the lock and holding it to check paths out, to apply
    /// what they opened and to ask for and hand back ACK batches, summed over threads (zero
    /// with one thread).
    pub locked: Duration,
    /// Time of the work after the datagrams, on one thread: the application's read and what
    /// the server sends then (all its ACKs with one thread; with path threads, those left).
    pub after: Duration,
    /// Time the path threads spent waiting for the round's slowest path thread: for each
    /// round and thread, the time from the round's start until the last thread was done, less
    /// the thread's own work; summed over threads (zero with one thread). A runtime's path
    /// threads do not wait for each other's rounds: this is what the harness's rounds cost.
    pub waiting: Duration,
    /// Of the busy time, the rounds' path-thread phases: from a round's start until its last
    /// path thread was done (zero with one thread).
    pub path_phases: Duration,
    /// Each path thread's own work summed over the rounds, by thread (empty with one thread).
    pub thread_work: Vec<Duration>,
}

impl RecvRunResult {
    /// The busy time had the path threads not waited for each other at the end of each
    /// round, as a runtime's path threads do not: the busy time with the rounds' path phases
    /// replaced by the busiest thread's summed work. Derived from measured times; equal to
    /// the busy time with one thread.
    pub fn busy_without_round_waits(&self) -> Duration {
        let busiest = self.thread_work.iter().copied().max().unwrap_or(Duration::ZERO);
        self.busy.saturating_sub(self.path_phases) + busiest
    }
}

/// One path's datagrams of a round: (path ID, server address, client address, datagrams).
type PathDatagrams = (u64, SocketAddr, SocketAddr, Vec<Vec<u8>>);

/// Runs one transfer of `bytes` over `paths` paths with the server's receive work on
/// `threads` threads, rounds of at most `round_batches` GRO batches per path, the path
/// threads' ACK buffers from `pool` (and back to it); `verify` checks every byte the
/// application reads.
pub fn run(
    paths: usize,
    threads: usize,
    cpus: &[usize],
    bytes: u64,
    round_batches: usize,
    verify: bool,
    pool: &mut BufferPool,
) -> Result<RecvRunResult> {
    let round_datagrams_per_path = (round_batches.max(1) * GRO_BATCH) as u64;
    let mut s = Setup::new(paths)?;
    let (handle, stream) = (s.server, s.stream);
    let mut server_stream: Option<StreamId> = None;
    let Pair { client, server, client_conn, now, client_addr, server_addr, .. } = &mut s.pair;
    let (client_conn, client_addr, server_addr) = (*client_conn, *client_addr, *server_addr);
    let conn = Mutex::new(server.connection_mut(handle).context("no server connection")?);
    std::thread::scope(|scope| -> Result<RecvRunResult> {
        // (One thread: the single-thread runtime, no path threads.)
        let path_threads = if threads > 1 { threads } else { 0 };
        let conn_ref = &conn;
        let workers = PathThreads::spawn(scope, path_threads, cpus, move |now, (k, job, mut pool)| {
            let work = Stopwatch::start();
            let done = open_on_path_thread(conn_ref, now, job, &mut pool);
            (done, pool, k, work.elapsed())
        });
        let mut result = RecvRunResult { thread_work: vec![Duration::ZERO; path_threads], ..Default::default() };
        let mut feed = StreamFeed::new();
        let mut read = 0u64;
        let mut chunks: Vec<bytes::Bytes> = Vec::new();
        let mut buf = Vec::new();
        let mut idle_rounds = 0;
        while read < bytes {
            // The client: keep the stream fed, send what the windows allow, up to a round's
            // worth (not timed).
            let c = client.connection_mut(client_conn).context("client connection gone")?;
            feed.feed(c, stream, bytes);
            let round_now = *now;
            let mut by_path: Vec<PathDatagrams> = Vec::new();
            let mut count = 0;
            while count < round_datagrams_per_path * paths as u64 {
                let Some(t) = client.poll_transmit(round_now, &mut buf) else { break };
                let seg = t.segment_size.unwrap_or(t.size).max(1);
                let remote = t.source.unwrap_or(client_addr);
                let i = match by_path.iter().position(|p| p.0 == t.path_id) {
                    Some(i) => i,
                    None => {
                        by_path.push((t.path_id, t.destination, remote, Vec::new()));
                        by_path.len() - 1
                    }
                };
                for d in buf[..t.size].chunks(seg) {
                    by_path[i].3.push(d.to_vec());
                    count += 1;
                }
            }
            idle_rounds = if count == 0 { idle_rounds + 1 } else { 0 };
            if idle_rounds > 10_000 {
                bail!("the transfer stalled after {read} of {bytes} bytes");
            }
            result.datagrams += count;
            // The server: everything it does with the round, timed (its path threads are
            // woken first: see `PathThreads`).
            workers.wake()?;
            let clock = Stopwatch::start();
            // (The round's buffers are freed after the clock stops: the sender allocated them.)
            let mut spent: Vec<Vec<PathDatagrams>> = Vec::new();
            let mut acks: Vec<(SocketAddr, SocketAddr, Vec<u8>)> = Vec::new();
            if workers.is_empty() {
                spent.push(receive_on_one_thread(&mut lock(&conn), round_now, by_path));
            } else {
                let mut groups: Vec<Vec<PathDatagrams>> = (0..workers.len()).map(|_| Vec::new()).collect();
                for (k, p) in by_path.into_iter().enumerate() {
                    groups[k % workers.len()].push(p);
                }
                let pools = pool.split(workers.len());
                for (k, (g, p)) in groups.into_iter().zip(pools).enumerate() {
                    workers.give(k, round_now, (k, g, p))?;
                }
                let mut worked = Duration::ZERO;
                for _ in 0..workers.len() {
                    let ((opening, locked, buffers, sent), left, k, work) = workers.next_done()?;
                    worked += work;
                    result.thread_work[k] += work;
                    pool.absorb(left);
                    result.open_outside_lock += opening;
                    result.locked += locked;
                    spent.push(buffers);
                    for (t, d) in sent {
                        let seg = t.segment_size.unwrap_or(t.size).max(1);
                        let src = t.source.unwrap_or(server_addr);
                        acks.extend(d[..t.size].chunks(seg).map(|d| (src, t.destination, d.to_vec())));
                        pool.give(d);
                    }
                }
                // Every thread was busy or waiting from the round's start until the last was done.
                let phase = clock.elapsed();
                result.path_phases += phase;
                result.waiting += (phase * workers.len() as u32).saturating_sub(worked);
            }
            let after = Stopwatch::start();
            let taken = {
                let mut server = lock(&conn);
                let taken = take_chunks(&mut server, &mut server_stream, &mut chunks);
                while let Some(t) = server.poll_transmit(round_now, &mut buf) {
                    let seg = t.segment_size.unwrap_or(t.size).max(1);
                    let src = t.source.unwrap_or(server_addr);
                    acks.extend(buf[..t.size].chunks(seg).map(|d| (src, t.destination, d.to_vec())));
                }
                taken
            };
            // The application's work on the data, outside the lock: the check (with
            // --verify), then the buffers go.
            if verify {
                verify_chunks(&chunks, read)?;
            }
            chunks.clear();
            read += taken;
            result.after += after.elapsed();
            result.busy += clock.elapsed();
            drop(spent);
            // Back to the client (not timed), and the protocol's clock moves on.
            for (src, dst, mut d) in acks {
                client.handle_datagrams(round_now, dst, src, None, &mut [d.as_mut_slice()]);
            }
            *now = round_now + ROUND_STEP;
            client.handle_timeout(*now);
            lock(&conn).handle_timeout(*now);
            if client.connection(client_conn).is_none_or(Connection::is_closed) {
                bail!("the client connection closed after {read} of {bytes} bytes");
            }
        }
        result.bytes = read;
        Ok(result)
    })
}

/// The single-thread runtime's receive work on a round: each path's GRO batches in turn.
/// Returns the buffers, to be freed outside the timed work.
fn receive_on_one_thread(
    conn: &mut Connection,
    now: mpq_proto::Instant,
    mut by_path: Vec<PathDatagrams>,
) -> Vec<PathDatagrams> {
    let mut batches: Vec<_> = by_path.iter_mut().map(|p| (p.1, p.2, p.3.chunks_mut(GRO_BATCH))).collect();
    loop {
        let mut any = false;
        for (local, remote, chunks) in batches.iter_mut() {
            if let Some(batch) = chunks.next() {
                any = true;
                let mut slices: Vec<&mut [u8]> = batch.iter_mut().map(Vec::as_mut_slice).collect();
                conn.handle_datagrams(now, *local, *remote, None, &mut slices);
            }
        }
        if !any {
            break;
        }
    }
    drop(batches);
    by_path
}

/// A path thread's receive work on a round: for each GRO batch of its paths, the path is
/// checked out under the connection's lock, opens the batch without it, and is checked in
/// and its packets applied under the lock again, which it keeps to check the path out for
/// the next batch (one take of the lock per batch, as the runtime's path threads do); then
/// it sends its paths' ACKs as they do ([`path_transmits`]). Returns the time spent outside
/// the lock (opening, building ACK batches), the time spent taking and holding the lock, the
/// buffers (freed outside the timed work) and the ACKs.
fn open_on_path_thread(
    conn: &Mutex<&mut Connection>,
    now: mpq_proto::Instant,
    mut job: Vec<PathDatagrams>,
    pool: &mut BufferPool,
) -> (Duration, Duration, Vec<PathDatagrams>, Vec<Sent>) {
    let (mut opening, mut locked) = (Duration::ZERO, Duration::ZERO);
    let mut held = None;
    // What is left of the last run, dropped once the lock is released.
    let mut spent = None;
    for (path_id, local, remote, datagrams) in job.iter_mut() {
        let (path_id, local, remote) = (*path_id, *local, *remote);
        let mut batches: Vec<Vec<&mut [u8]>> =
            datagrams.chunks_mut(GRO_BATCH).map(|b| b.iter_mut().map(Vec::as_mut_slice).collect()).collect();
        for slices in &mut batches {
            let clock = Stopwatch::start();
            let mut g = held.take().unwrap_or_else(|| lock(conn));
            let run: Option<RecvRun> = g.begin_recv_run(path_id, remote, None);
            let Some(mut run) = run else {
                g.handle_datagrams(now, local, remote, None, slices);
                held = Some(g);
                locked += clock.elapsed();
                continue;
            };
            drop(g);
            let opened = Stopwatch::start();
            locked += clock.elapsed();
            drop(spent.take());
            run.open(now, slices);
            opening += opened.elapsed();
            let applied = Stopwatch::start();
            let mut g = lock(conn);
            spent = Some(g.end_recv_run(now, local, run, slices));
            held = Some(g);
            locked += applied.elapsed();
        }
    }
    drop(held);
    drop(spent);
    let ids: Vec<u64> = job.iter().map(|p| p.0).collect();
    let (building, acking, sent) = path_transmits(conn, now, &ids, pool);
    (opening + building, locked + acking, job, sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_without_round_waits_replaces_the_path_phases_by_the_busiest_thread() {
        let ms = Duration::from_millis;
        // 10 ms busy, of which 8 ms were the rounds' path phases; the threads worked 7 and
        // 5 ms of them: without the waits the busiest thread's 7 ms replace the 8.
        let r =
            RecvRunResult { busy: ms(10), path_phases: ms(8), thread_work: vec![ms(7), ms(5)], ..Default::default() };
        assert_eq!(r.busy_without_round_waits(), ms(9));
        // One thread: no path threads, nothing replaced.
        let one = RecvRunResult { busy: ms(10), ..Default::default() };
        assert_eq!(one.busy_without_round_waits(), ms(10));
    }
}
