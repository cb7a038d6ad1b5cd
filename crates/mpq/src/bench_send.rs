//! One measured transfer of `mpq bench send` (issue C2): how the send work of one connection
//! over N paths scales with the threads that drive its paths.
//!
//! The same in-memory pair as `mpq bench receive` (real TLS 1.3, AES-GCM, header protection,
//! N validated paths, round-robin scheduler, one stream), with the roles turned: the client
//! sends and its work is timed. Each round the client's application writes what the stream
//! takes, then the client builds every datagram its windows allow: frames chosen, packets
//! written, sealed and header-protected, the sent packets recorded for loss recovery. That
//! is timed. The datagrams then go to the server, whose ACKs come back (not timed), and the
//! next round starts. Nothing is precomputed.
//!
//! The send buffers come from the caller's pools, one per thread, and go back to the pool of
//! the thread that filled them ([`BufferPool`]): a runtime keeps its sockets' buffers, and a
//! round takes a whole window (about 2,400 buffers of 64 kB at 2 paths). Until 2026-12-04
//! each run started with one empty pool, split evenly between the path threads every round,
//! so a run faulted in and zeroed 150 MB of fresh pages in its timed work (a quarter of two
//! path threads' samples); and one pool split evenly, even kept from run to run, grows
//! whenever one path's share of a round outgrows half of it.
//!
//! With one thread the client sends as the single-thread runtime does
//! (`Connection::poll_transmit`, path by path in turn). With T threads, path k's sending
//! goes to thread k mod T, which asks `Connection::poll_path_transmit` under the
//! connection's lock, builds a `SendBatch` without it and hands it back with
//! `Connection::end_send_batch` under the lock again: the steps of the runtime with a
//! thread per path.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use mpq_proto::types::StreamId;

use crate::bench_pair::{
    lock, path_transmits, read_stream, BufferPool, PathThreads, Sent, Setup, StreamFeed, ROUND_STEP,
};
use crate::progress::Stopwatch;

/// What one measured transfer gave.
#[derive(Debug, Clone, Copy, Default)]
pub struct SendRunResult {
    /// Stream bytes the server's application read.
    pub bytes: u64,
    /// Datagrams the client sent.
    pub datagrams: u64,
    /// Wall time of the client's send work.
    pub busy: Duration,
    /// Of that, time the threads spent building batches outside the connection's lock,
    /// summed over threads (zero with one thread).
    pub build_outside_lock: Duration,
    /// Time the threads spent taking the lock and holding it (asking for a batch, handing
    /// it back, batches written with the connection), summed over threads (zero with one
    /// thread).
    pub locked: Duration,
}

/// Runs one transfer of `bytes` over `paths` paths with the client's send work on
/// `threads` threads, thread k's send buffers from `pools[k]` (and back to it; missing pools
/// are added); `verify` checks every byte the server reads.
pub fn run(
    paths: usize,
    threads: usize,
    cpus: &[usize],
    bytes: u64,
    verify: bool,
    pools: &mut Vec<BufferPool>,
) -> Result<SendRunResult> {
    if pools.len() < threads.max(1) {
        pools.resize_with(threads.max(1), BufferPool::default);
    }
    let mut s = Setup::new(paths)?;
    let (server_handle, stream) = (s.server, s.stream);
    let mut server_stream: Option<StreamId> = None;
    let pair = &mut s.pair;
    let (client_conn, client_addr, server_addr) = (pair.client_conn, pair.client_addr, pair.server_addr);
    let path_ids = pair.client.connection(client_conn).context("no client connection")?.path_ids();
    let (client, server) = (&mut pair.client, &mut pair.server);
    let conn = Mutex::new(client.connection_mut(client_conn).context("no client connection")?);
    let mut now = pair.now;
    std::thread::scope(|scope| -> Result<SendRunResult> {
        let path_threads = if threads > 1 { threads } else { 0 };
        let conn_ref = &conn;
        let workers = PathThreads::spawn(
            scope,
            path_threads,
            cpus,
            move |now, (k, ids, mut pool): (usize, Vec<u64>, BufferPool)| {
                let round = path_transmits(conn_ref, now, &ids, &mut pool);
                (round, pool, k)
            },
        );
        let mut feed = StreamFeed::new();
        let mut read = 0u64;
        let mut result = SendRunResult::default();
        let mut idle_rounds = 0;
        while read < bytes {
            // Path threads woken before the clock starts: see `PathThreads`.
            workers.wake()?;
            let clock = Stopwatch::start();
            // What each thread sent, its buffers to go back to that thread's pool.
            let mut sent: Vec<(usize, Sent)> = Vec::new();
            {
                // The application's write, then the sending (timed).
                let mut c = lock(&conn);
                feed.feed(&mut c, stream, bytes);
                if workers.is_empty() {
                    let pool = &mut pools[0];
                    let mut buf = pool.take();
                    while let Some(t) = c.poll_transmit(now, &mut buf) {
                        sent.push((0, (t, std::mem::replace(&mut buf, pool.take()))));
                    }
                    pool.give(buf);
                }
            }
            if !workers.is_empty() {
                let mut groups: Vec<Vec<u64>> = (0..workers.len()).map(|_| Vec::new()).collect();
                for (k, id) in path_ids.iter().enumerate() {
                    groups[k % workers.len()].push(*id);
                }
                for (k, g) in groups.into_iter().enumerate() {
                    workers.give(k, now, (k, g, std::mem::take(&mut pools[k])))?;
                }
                for _ in 0..workers.len() {
                    let ((building, locked, out), left, k) = workers.next_done()?;
                    result.build_outside_lock += building;
                    result.locked += locked;
                    sent.extend(out.into_iter().map(|s| (k, s)));
                    pools[k] = left;
                }
            }
            result.busy += clock.elapsed();
            // To the server and back (not timed).
            let mut count = 0u64;
            for (k, (t, mut data)) in sent {
                let seg = t.segment_size.unwrap_or(t.size).max(1);
                let src = t.source.unwrap_or(client_addr);
                let mut slices: Vec<&mut [u8]> = data[..t.size].chunks_mut(seg).collect();
                count += slices.len() as u64;
                server.handle_datagrams(now, t.destination, src, None, &mut slices);
                pools[k].give(data);
            }
            result.datagrams += count;
            idle_rounds = if count == 0 { idle_rounds + 1 } else { 0 };
            if idle_rounds > 10_000 {
                bail!("the transfer stalled after {read} of {bytes} bytes");
            }
            let s = server.connection_mut(server_handle).context("no server connection")?;
            read += read_stream(s, &mut server_stream, read, verify)?;
            let mut buf = Vec::new();
            let mut acks: Vec<(SocketAddr, SocketAddr, Vec<u8>)> = Vec::new();
            while let Some(t) = server.poll_transmit(now, &mut buf) {
                let seg = t.segment_size.unwrap_or(t.size).max(1);
                let src = t.source.unwrap_or(server_addr);
                acks.extend(buf[..t.size].chunks(seg).map(|d| (src, t.destination, d.to_vec())));
            }
            let mut c = lock(&conn);
            for (src, dst, mut d) in acks {
                c.handle_datagrams(now, dst, src, None, &mut [d.as_mut_slice()]);
            }
            now += ROUND_STEP;
            c.handle_timeout(now);
            drop(c);
            server.handle_timeout(now);
            if lock(&conn).is_closed() {
                bail!("the client connection closed after {read} of {bytes} bytes");
            }
        }
        result.bytes = read;
        Ok(result)
    })
}
