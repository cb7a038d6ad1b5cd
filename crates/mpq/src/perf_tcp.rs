//! `mpq perf --transport tcp-tls|mptcp-tls`: the perf workload over TLS 1.3 (rustls) on
//! kernel TCP or MPTCP sockets, the baselines the QUIC perf is compared with on the testbed.
//!
//! The protocol is the QUIC perf's, with a TCP connection where QUIC has a stream: the
//! client opens `--streams` connections, sends on each an 8-byte big-endian request (the
//! bytes it wants, `u64::MAX` for "until I close"), and the server sends that many bytes of
//! zeros, then close_notify. TLS is the same as QUIC's (rustls, TLS 1.3 only, the same
//! provider and `--cipher`, ALPN `perf`, a self-signed certificate the client does not
//! check). Blocking sockets and a thread per connection: the kernel does the transport, and
//! a thread per connection is what a simple TLS server would do.
//!
//! The client's JSON report has the QUIC perf's fields (`goodput_bps`, `duration_s`,
//! `bytes`, `streams`, `cpu_s`, `cpu_util`, `multipath`) and `transport`; with MPTCP also
//! `mptcp` (every connection negotiated it), `mptcp_subflows_joined` (from the namespace's
//! counters, [`crate::mptcp_counters`]) and each connection's extra subflows.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rustls::pki_types::ServerName;
use rustls::{ClientConnection, ServerConnection, StreamOwned};
use serde_json::json;

use crate::cli::{Common, PerfClientArgs, PerfServerArgs, Transport};
use crate::kernel_stream::{self, Buffers, Kind};
use crate::mptcp_counters::Counters;

/// Largest plaintext handed to rustls (and read from it) at once: a few TLS records' worth,
/// so that a write system call carries several.
const CHUNK: usize = 256 * 1024;

/// How often a client's blocked read wakes to check the clock: the end of a timed run is
/// noticed at most this late when no data arrives (with data flowing, at the next read).
const TICK: Duration = Duration::from_millis(50);

/// The wall clock. The binary may read it (the core is what stays sans-IO).
#[allow(clippy::disallowed_methods)]
fn now() -> Instant {
    Instant::now()
}

fn kind(t: Transport) -> Kind {
    if t == Transport::MptcpTls {
        Kind::Mptcp
    } else {
        Kind::Tcp
    }
}

fn buffers(common: &Common) -> Buffers {
    Buffers { rcvbuf: common.rcvbuf, sndbuf: common.sndbuf, congestion: common.tcp_cc.clone() }
}

/// Options of the QUIC perf that mean nothing over TCP: refused rather than ignored, so
/// that a comparison does not silently differ from what was asked.
fn refuse_quic_only(common: &Common, more: &[(&str, bool)]) -> Result<()> {
    let mut quic_only = vec![
        ("--shard", common.shard.is_some()),
        ("--qlog-dir", common.qlog_dir.is_some()),
        ("--threads per-path", common.threads == crate::cli::Threads::PerPath),
        // The kernel's TCP has its own offloads and buffer tuning (ethtool, sysctls).
        ("--no-gso", common.no_gso),
        ("--no-gro", common.no_gro),
        ("--window", common.window.is_some()),
    ];
    quic_only.extend_from_slice(more);
    if let Some((flag, _)) = quic_only.iter().find(|(_, set)| *set) {
        bail!("{flag} applies to QUIC only (--transport quic)");
    }
    Ok(())
}

/// Runs a tcp-tls or mptcp-tls perf server until killed: one thread per listening address
/// and one per connection.
pub fn server(args: PerfServerArgs) -> Result<()> {
    refuse_quic_only(&args.common, &[])?;
    let tls = crate::tls::server_config(&args.common, None, None, &[b"perf"], false)?;
    let kind = kind(args.transport);
    let listeners = args
        .listen
        .iter()
        .map(|&a| kernel_stream::listen(kind, a, &buffers(&args.common)))
        .collect::<Result<Vec<_>>>()?;
    for l in &listeners {
        println!("listening on {}", l.local_addr()?);
    }
    let _ = std::io::stdout().flush();
    let shared = Arc::new(Shared {
        tls,
        transport: args.transport,
        idle: Duration::from_secs(args.common.idle_timeout.max(1)),
        max: args.max_connections,
        active: AtomicU64::new(0),
    });
    let mut threads = Vec::new();
    for l in listeners {
        let shared = shared.clone();
        threads.push(std::thread::spawn(move || accept_loop(&l, &shared)));
    }
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

/// What a server's connection threads share.
struct Shared {
    tls: Arc<rustls::ServerConfig>,
    transport: Transport,
    /// A client silent this long is dropped (`--idle-timeout`).
    idle: Duration,
    /// `--max-connections`.
    max: u64,
    /// Connections being served.
    active: AtomicU64,
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    loop {
        let (sock, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("accept on {:?}: {e}", listener.local_addr().ok());
                // Out of descriptors or memory: back off instead of spinning on the error.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if shared.active.fetch_add(1, Ordering::SeqCst) >= shared.max {
            shared.active.fetch_sub(1, Ordering::SeqCst);
            eprintln!("refused {peer}: --max-connections {} reached", shared.max);
            continue;
        }
        let shared = shared.clone();
        std::thread::spawn(move || {
            let mptcp = kernel_stream::is_mptcp(&sock);
            let (sent, error) = serve(sock, &shared);
            shared.active.fetch_sub(1, Ordering::SeqCst);
            let line = json!({
                "peer": peer.to_string(),
                "transport": shared.transport.name(),
                "mptcp": mptcp,
                "bytes": sent,
                "error": error,
            });
            eprintln!("connection ended: {line}");
        });
    }
}

/// Serves one connection: reads the request, sends that many bytes, closes. Returns the
/// bytes sent and what went wrong (`None` for a normal end, which for a timed request is
/// the client closing).
fn serve(sock: TcpStream, shared: &Shared) -> (u64, Option<String>) {
    let mut sent = 0u64;
    let r = (|| -> Result<()> {
        sock.set_read_timeout(Some(shared.idle))?;
        let conn = ServerConnection::new(shared.tls.clone())?;
        let mut s = StreamOwned::new(conn, sock);
        let mut req = [0u8; 8];
        // Drives the handshake, then reads the request.
        s.read_exact(&mut req).context("reading the request")?;
        let size = u64::from_be_bytes(req);
        while sent < size {
            let n = (size - sent).min(CHUNK as u64) as usize;
            if let Err(e) = s.write_all(&crate::perf::ZEROS[..n]) {
                // A timed run ends with the client closing its connection.
                if size == u64::MAX && matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) {
                    return Ok(());
                }
                return Err(e).context("sending");
            }
            sent += n as u64;
        }
        s.conn.send_close_notify();
        s.flush().context("sending close_notify")?;
        let _ = s.sock.shutdown(std::net::Shutdown::Write);
        // Close only after the client has: closing with its bytes (its close_notify)
        // unread would send a RST, which can destroy data it has not read yet.
        let mut sink = [0u8; 1024];
        while matches!(s.sock.read(&mut sink), Ok(n) if n > 0) {}
        Ok(())
    })();
    (sent, r.err().map(|e| format!("{e:#}")))
}

/// What one client connection did.
struct ConnReport {
    local: Option<SocketAddr>,
    bytes: u64,
    start: Instant,
    end: Instant,
    /// Negotiated MPTCP (and did not fall back to TCP).
    mptcp: bool,
    /// The MPTCP connection's subflows besides the first, at the end.
    extra_subflows: Option<u8>,
    /// Its congestion control (TCP_CONGESTION).
    cc: Option<String>,
}

/// What every client connection thread needs.
struct ClientJob {
    kind: Kind,
    local: Option<SocketAddr>,
    server: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    buffers: Buffers,
    handshake_timeout: Duration,
    idle: Duration,
    /// Bytes to ask for (`u64::MAX` with a duration).
    per_stream: u64,
    duration: Option<Duration>,
    /// Every connection's handshake is done before any asks for data.
    barrier: Barrier,
    /// When the first connection asked for data: the measurement's start.
    started: OnceLock<Instant>,
    /// Bytes received by all connections so far (progress lines).
    total: AtomicU64,
}

/// Connects and completes the TLS handshake.
fn connect(job: &ClientJob) -> Result<StreamOwned<ClientConnection, TcpStream>> {
    let mut sock = kernel_stream::connect(job.kind, job.local, job.server, &job.buffers, job.handshake_timeout)?;
    // The handshake is bounded like the QUIC perf's (--handshake-timeout; 0: the idle timeout).
    let hs = if job.handshake_timeout.is_zero() { job.idle } else { job.handshake_timeout };
    sock.set_read_timeout(Some(hs))?;
    let mut conn = ClientConnection::new(job.tls.clone(), ServerName::try_from("localhost")?)?;
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).map_err(|e| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                anyhow::anyhow!("TLS handshake with {} not done within {hs:?}", job.server)
            }
            _ => anyhow::anyhow!("TLS handshake with {}: {e}", job.server),
        })?;
    }
    Ok(StreamOwned::new(conn, sock))
}

/// One measured connection: connect, wait for the others, ask, count what arrives.
fn measure(job: &ClientJob) -> Result<ConnReport> {
    let setup = connect(job);
    // Every thread reaches the barrier, failed or not, so that none waits forever.
    job.barrier.wait();
    let mut s = setup?;
    let start = now();
    job.started.get_or_init(|| start);
    s.write_all(&job.per_stream.to_be_bytes())?;
    s.flush()?;
    s.sock.set_read_timeout(Some(TICK))?;
    let deadline = job.duration.map(|d| start + d);
    let mut buf = vec![0u8; CHUNK];
    let (mut bytes, mut last) = (0u64, start);
    loop {
        let t = now();
        if deadline.is_some_and(|d| t >= d) {
            break;
        }
        match s.read(&mut buf) {
            Ok(0) if deadline.is_none() => break,
            Ok(0) => bail!("the server closed after {bytes} bytes, before the end of the run"),
            Ok(n) => {
                bytes += n as u64;
                job.total.fetch_add(n as u64, Ordering::Relaxed);
                last = t;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if t - last > job.idle {
                    bail!("no data from {} for {:?} (--idle-timeout)", job.server, job.idle);
                }
            }
            Err(e) => bail!("receiving from {} after {bytes} bytes: {e}", job.server),
        }
    }
    let end = now();
    if deadline.is_none() && bytes != job.per_stream {
        bail!("received {bytes} bytes, asked for {}", job.per_stream);
    }
    let mptcp = kernel_stream::is_mptcp(&s.sock);
    let extra_subflows = if mptcp { kernel_stream::mptcp_extra_subflows(&s.sock) } else { None };
    let local = s.sock.local_addr().ok();
    // A timed run stops here: the server learns it from the closed connection.
    let _ = s.sock.shutdown(std::net::Shutdown::Both);
    let cc = kernel_stream::congestion_control(&s.sock);
    Ok(ConnReport { local, bytes, start, end, mptcp, extra_subflows, cc })
}

/// Runs one tcp-tls or mptcp-tls measurement and prints the result like the QUIC perf.
pub fn client(args: PerfClientArgs, per_stream: u64, duration: Option<Duration>) -> Result<()> {
    let p = &args.paths;
    refuse_quic_only(
        &args.common,
        &[
            ("--datagrams", args.datagrams),
            ("--idle-connections", args.idle_connections > 0),
            ("--server-addr", !p.server_addrs.is_empty()),
            ("--migrate-after-ms", p.migrate_after_ms.is_some()),
            ("--abandon-after-ms", p.abandon_after_ms.is_some()),
            ("--backup-paths", p.backup_paths),
        ],
    )?;
    let kind = kind(args.transport);
    let local = p.locals.first().copied();
    if p.locals.len() > 1 && kind == Kind::Tcp {
        eprintln!(
            "warning: tcp-tls uses one path: connecting from the first --local ({}) only; \
             --transport mptcp-tls adds the others as subflows",
            p.locals[0]
        );
    }
    let tls = crate::tls::client_config(&args.common, None, true, b"perf", false)?;
    let streams = args.streams as usize;
    let job = Arc::new(ClientJob {
        kind,
        local,
        server: args.connect,
        tls,
        buffers: buffers(&args.common),
        handshake_timeout: crate::runner::seconds("--handshake-timeout", args.common.handshake_timeout)?,
        idle: Duration::from_secs(args.common.idle_timeout.max(1)),
        per_stream,
        duration,
        barrier: Barrier::new(streams),
        started: OnceLock::new(),
        total: AtomicU64::new(0),
    });
    let counters0 = if kind == Kind::Mptcp { Counters::read() } else { None };
    let cpu0 = crate::perf::cpu_seconds();
    let (tx, rx) = mpsc::channel();
    for _ in 0..streams {
        let (job, tx) = (job.clone(), tx.clone());
        std::thread::spawn(move || {
            let _ = tx.send(measure(&job));
        });
    }
    drop(tx);
    let progress = !args.json;
    let mut reports = Vec::new();
    let mut last = (None::<Instant>, 0u64);
    loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(r) => reports.push(r),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let (true, Some(&start)) = (progress, job.started.get()) {
            let (t, b) = (now(), job.total.load(Ordering::Relaxed));
            let (t0, b0) = (last.0.unwrap_or(start), last.1);
            if t - t0 >= Duration::from_secs(1) {
                let mbps = (b - b0) as f64 * 8.0 / (t - t0).as_secs_f64() / 1e6;
                println!("{:6.2} s  {mbps:9.1} Mbit/s", (t - start).as_secs_f64());
                last = (Some(t), b);
            }
        }
    }
    let cpu = crate::perf::cpu_seconds() - cpu0;
    let conns = reports.into_iter().collect::<Result<Vec<_>>>().context("perf run failed")?;
    let delta = counters0.and_then(|c0| Some(Counters::read()?.since(&c0)));
    let start = conns.iter().map(|c| c.start).min().context("no connection")?;
    let end = conns.iter().map(|c| c.end).max().context("no connection")?;
    let secs = (end - start).as_secs_f64().max(1e-9);
    let bytes: u64 = conns.iter().map(|c| c.bytes).sum();
    let goodput = bytes as f64 * 8.0 / secs;
    let mptcp = kind == Kind::Mptcp && conns.iter().all(|c| c.mptcp);
    let joined = delta.as_ref().map(Counters::joined_as_client);
    let extra: u64 = conns.iter().filter_map(|c| c.extra_subflows).map(u64::from).sum();
    if args.json {
        let out = json!({
            "transport": args.transport.name(),
            "goodput_bps": goodput,
            "duration_s": secs,
            "bytes": bytes,
            "streams": streams,
            "cpu_s": cpu,
            "cpu_util": cpu / secs,
            "multipath": mptcp && extra > 0,
            "mptcp": mptcp,
            "mptcp_subflows_joined": joined,
            "mptcp_counters": delta.as_ref().map(|d| &d.0),
            "tcp_cc": conns.iter().find_map(|c| c.cc.clone()),
            "connections": conns.iter().map(|c| json!({
                "local": c.local.map(|a| a.to_string()),
                "bytes": c.bytes,
                "mptcp": c.mptcp,
                "extra_subflows": c.extra_subflows,
            })).collect::<Vec<_>>(),
        });
        println!("{out}");
    } else {
        println!("{bytes} bytes in {secs:.2} s: {:.1} Mbit/s, client CPU {:.0} %", goodput / 1e6, 100.0 * cpu / secs);
        if kind == Kind::Mptcp {
            let joined = joined.map_or("unknown (no MPTcpExt counters)".into(), |j| j.to_string());
            println!(
                "  MPTCP: {}, subflows joined: {joined}, extra subflows at the end: {extra}",
                if mptcp { "negotiated" } else { "NOT negotiated" }
            );
        }
    }
    if kind == Kind::Mptcp {
        warn_mptcp(&args, &conns, joined.unwrap_or(extra));
    }
    Ok(())
}

/// Says clearly when MPTCP did not do what the run was meant to measure: a connection fell
/// back to TCP, or several `--local` were given and no subflow joined.
fn warn_mptcp(args: &PerfClientArgs, conns: &[ConnReport], joined: u64) {
    let fell_back = conns.iter().filter(|c| !c.mptcp).count();
    if fell_back > 0 {
        eprintln!(
            "warning: {fell_back} of {} connection(s) fell back to plain TCP (MP_CAPABLE not taken): run the \
             server with --transport mptcp-tls and net.mptcp.enabled=1 on its side",
            conns.len()
        );
    }
    let locals = &args.paths.locals;
    if locals.len() > 1 && joined == 0 {
        let extra: Vec<String> = locals[1..].iter().map(|a| a.ip().to_string()).collect();
        eprintln!(
            "warning: no MPTCP subflow joined, the run used one path. The kernel opens subflows from its \
             endpoints: in this namespace `ip mptcp endpoint add ADDR dev IF subflow` for each of {} and \
             `ip mptcp limits set subflows N add_addr_accepted N` on both sides (`mpq lab testbed up` does this \
             in its namespaces); `ip mptcp endpoint show` lists them",
            extra.join(", ")
        );
    }
}
