//! `mpq perf server` on mpq's application API (mpq-api): a task per connection, a task per
//! request. A request is an 8-byte big-endian size on a bidirectional stream; the answer is
//! that many zeros, handed to the stream without a copy (`u64::MAX`: until the client
//! closes). Whatever the client sends after the size (the padding of request/response runs)
//! is read and dropped. [`perf::DATAGRAM_REPORT`] as the size asks how many datagrams
//! (RFC 9221) arrived: the answer is their count and payload bytes, 8 bytes each.

use std::future::Future;
use std::io::Write;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use anyhow::Result;
use bytes::Bytes;
use mpq_proto::conn::{DatagramConfig, ServerConfig};

use crate::cli::PerfServerArgs;
use crate::perf::{self, ZEROS};

/// Most received datagrams a connection holds for the counting task (about 1.3 s of a
/// loopback run of 600-byte datagrams).
const RECV_QUEUE: usize = 1 << 16;
/// Most payload bytes of those.
const RECV_QUEUE_BYTES: usize = 64 << 20;

/// Datagrams read on one connection: (count, payload bytes).
type DatagramCount = Arc<Mutex<(u64, u64)>>;

/// Runs the perf server until Ctrl-C or SIGTERM (which close its connections first:
/// `stop_signal`).
pub fn server(args: PerfServerArgs) -> Result<()> {
    if args.transport != crate::cli::Transport::Quic {
        return crate::perf_tcp::server(args);
    }
    let mut transport = crate::runner::transport_config(&args.common)?;
    // Clients may measure datagrams (--datagrams): advertise them (RFC 9221 §3). The
    // count is the measurement, so what arrives must not be dropped for want of room while
    // the counting task waits for a core (the default queue, 1024 datagrams, is 20 ms of a
    // loopback run; with client and server sharing two cores a fifth of them were dropped).
    transport.datagrams =
        DatagramConfig { recv_queue_len: RECV_QUEUE, recv_queue_bytes: RECV_QUEUE_BYTES, ..DatagramConfig::enabled() };
    let transport = crate::runner::shared(transport);
    let tls = crate::tls::server_config(&args.common, None, None, &[b"perf"], true)?;
    let executor = crate::api_runtime::executor()?;
    let ep = crate::api_runtime::endpoint(&args.listen, Some(ServerConfig { tls, transport }), &args.common)?;
    ep.set_max_connections(usize::try_from(args.max_connections).unwrap_or(usize::MAX))?;
    ep.set_retry_mode(args.retry)?;
    // (Caught before the server says it listens: a script may signal it as soon as it does.)
    let mut signals = crate::api_runtime::stop_signals()?;
    for addr in ep.local_addrs() {
        println!("listening on {addr}");
    }
    let _ = std::io::stdout().flush();
    executor.block_on(signals.serve(&ep, crate::stop_signal::close_code(false), |conn| {
        tokio::spawn(serve_connection(conn));
    }));
    Ok(())
}

/// Serves one connection: its handshake and end reported as `mpq server` does, its
/// datagrams counted, each request stream answered in a task of its own.
async fn serve_connection(conn: mpq_api::Connection) {
    crate::report::follow_server_connection(&conn);
    let count = DatagramCount::default();
    let (reader, counted) = (conn.clone(), count.clone());
    tokio::spawn(async move {
        while let Ok(d) = reader.read_datagram().await {
            add(&counted, d.data.len());
        }
    });
    while let Ok((send, recv)) = conn.accept_bi().await {
        tokio::spawn(answer(conn.clone(), send, recv, count.clone()));
    }
}

fn add(count: &DatagramCount, len: usize) {
    if let Ok(mut c) = count.lock() {
        c.0 += 1;
        c.1 += len as u64;
    }
}

/// Reads the request's size and sends the answer; drops what else the request brings.
async fn answer(
    conn: mpq_api::Connection,
    mut send: mpq_api::SendStream,
    mut recv: mpq_api::RecvStream,
    count: DatagramCount,
) {
    let mut header = [0u8; 8];
    let mut got = 0;
    while got < header.len() {
        match recv.read(&mut header[got..]).await {
            Ok(Some(n)) => got += n,
            // A stream that ends (or fails) before its size asks for nothing.
            _ => return,
        }
    }
    let size = u64::from_be_bytes(header);
    if size == perf::DATAGRAM_REPORT {
        // Those the connection still holds count too.
        while let Some(Ok(d)) = ready_now(conn.read_datagram()) {
            add(&count, d.data.len());
        }
        let (n, bytes) = count.lock().map(|c| *c).unwrap_or_default();
        let mut report = n.to_be_bytes().to_vec();
        report.extend_from_slice(&bytes.to_be_bytes());
        if send.write_all(&report).await.is_ok() {
            let _ = send.finish();
        }
        return;
    }
    // The request's padding, read and dropped while the answer goes.
    tokio::spawn(async move { while let Ok(Some(_)) = recv.read_chunk(usize::MAX).await {} });
    let mut left = size;
    while left > 0 {
        let n = left.min(ZEROS.len() as u64) as usize;
        // (An error: the client closed the connection or stopped the stream, which ends
        // an answer of `u64::MAX` bytes.)
        if send.write_chunk(Bytes::from_static(&ZEROS[..n])).await.is_err() {
            return;
        }
        left -= n as u64;
    }
    let _ = send.finish();
}

/// The output of `f` if it is ready at its first poll.
fn ready_now<F: Future>(f: F) -> Option<F::Output> {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}
