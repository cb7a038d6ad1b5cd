//! `mpq client --http3`: downloads URLs over HTTP/3 (RFC 9114, ALPN h3), the h3 crate on
//! mpq's application API; every request at once, each on its own stream.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, Bytes};
use indicatif::ProgressBar;
use mpq_proto::conn::{ClientConfig, PathError};

use crate::cli::ClientArgs;
use crate::client::{output_file, parse_url, server_of, Url};

/// How often a migration asked for with --migrate-after-ms is tried again while the
/// connection cannot move yet (no spare connection ID, handshake not confirmed).
const MIGRATE_RETRY: Duration = Duration::from_millis(50);

/// One URL to fetch and the file its body goes to.
struct Download {
    url: Url,
    file: std::fs::File,
}

/// Fetches every URL and writes the bodies under --output.
pub fn run(args: ClientArgs) -> Result<()> {
    if args.timeout == 0 {
        bail!("--timeout 0: expected a number of seconds greater than 0");
    }
    let urls = args.urls.iter().map(|u| parse_url(u)).collect::<Result<Vec<_>>>()?;
    if (args.resume || args.zero_rtt) && urls.len() < 2 {
        bail!("--resume and --0rtt need at least two URLs: the first for the first connection, the rest for the resumed one");
    }
    if let Some(n) = args.common.shard {
        if args.resume || args.zero_rtt {
            bail!("--shard does not combine with --resume or --0rtt (each shard's connection is a first one)");
        }
        if args.paths.migrate_after_ms.is_some() {
            bail!("--shard does not combine with --migrate-after-ms (each shard's connection keeps its one path)");
        }
        if (urls.len() as u64) < n {
            bail!("--shard {n}: give at least {n} URLs (each connection fetches a share of them)");
        }
    }
    let (first, server) = server_of(&urls)?;
    let mut downloads = Vec::new();
    for url in urls {
        let file = output_file(&args.output, &url)?;
        downloads.push(Download { url, file });
    }
    let transport = crate::runner::shared(crate::runner::transport_config(&args.common)?);
    let tls = crate::tls::client_config(&args.common, args.ca.as_deref(), args.insecure, mpq_h3::ALPN, args.zero_rtt)?;
    let config = ClientConfig { tls, transport };
    let locals = crate::runner::client_locals(&args.paths, server)?;
    if args.paths.migrate_after_ms.is_some() && locals.len() < 2 {
        bail!("--migrate-after-ms needs a second --local address to move to");
    }
    let executor = crate::api_runtime::executor()?;
    let ep = crate::api_runtime::endpoint(&locals, None, &args.common)?;
    let bar = crate::progress::bar();
    let started = crate::progress::Stopwatch::start();
    let count = downloads.len();
    let timeout = Duration::from_secs(args.timeout);
    let outcome = executor.block_on(async {
        match tokio::time::timeout(timeout, fetch_all(&ep, server, &first.host, &config, &args, downloads, &bar)).await
        {
            Ok(r) => r,
            Err(_) => Err(anyhow!("timed out after {} s (--timeout)", args.timeout)),
        }
    });
    bar.finish_and_clear();
    let outcome = outcome?;
    eprintln!("{}", crate::progress::summary(outcome.bytes, started.elapsed(), count));
    if args.json {
        let secs = outcome.secs.max(1e-9);
        let out = serde_json::json!({
            "bytes": outcome.bytes,
            "duration_s": secs,
            "goodput_bps": outcome.bytes as f64 * 8.0 / secs,
            "multipath": outcome.multipath,
            "key_updates": outcome.stats.iter().map(|s| s.key_updates).sum::<u64>(),
            // Every connection's paths (with --shard, one per connection, shard by shard).
            "paths": outcome.stats.iter().flat_map(crate::report::paths_json).collect::<Vec<_>>(),
            "connections": outcome.connections,
            "http3": true,
        });
        println!("{out}");
    }
    if let Some(e) = outcome.path_error {
        bail!("{e}");
    }
    Ok(())
}

/// What a finished run reports.
struct Outcome {
    bytes: u64,
    /// From the first request to the last body's end.
    secs: f64,
    multipath: bool,
    /// Each connection's statistics (the last one's with --resume or --0rtt).
    stats: Vec<mpq_proto::conn::ConnectionStats>,
    /// A migration asked for on the command line that failed.
    path_error: Option<String>,
    /// Connections made: 1, 2 with --resume or --0rtt, N with --shard N.
    connections: u32,
}

/// Fetches every URL: on one connection, or with --resume or --0rtt the first URL on a first
/// connection and the rest on a second one that resumes its session (RFC 8446 §2.2), its
/// requests sent in 0-RTT packets with --0rtt when the ticket allows early data (RFC 9001
/// §4.6; RFC 9114 §3.3 lets a client send requests in 0-RTT). The figures are those of the
/// connections together.
async fn fetch_all(
    ep: &mpq_api::Endpoint,
    server: SocketAddr,
    host: &str,
    config: &ClientConfig,
    args: &ClientArgs,
    mut downloads: Vec<Download>,
    bar: &ProgressBar,
) -> Result<Outcome> {
    let lost = |e: mpq_api::Error| match e {
        mpq_api::Error::Closed(e) => anyhow!("{}", crate::runner::describe_loss(&e, server, &args.common)),
        e => anyhow!("{e}"),
    };
    if ep.shard_count() > 1 {
        return fetch_sharded(ep, server, host, config, args, downloads, bar).await;
    }
    if !(args.resume || args.zero_rtt) {
        let conn = ep.connect(server, host, config)?.await.map_err(lost)?;
        log_handshake(&conn, server);
        return fetch_on(ep, conn, server, args, downloads, bar).await;
    }
    let rest = downloads.split_off(1);
    let conn = ep.connect(server, host, config)?.await.map_err(lost)?;
    log_handshake(&conn, server);
    // The first connection: its session tickets came with its answer; closed and drained
    // before the second starts.
    let first = fetch_on(ep, conn, server, args, downloads, bar).await?;
    let connecting = ep.connect(server, host, config)?;
    let conn = match (args.zero_rtt, connecting.into_0rtt()) {
        (true, Ok(early)) => {
            tracing::info!(peer = %server, "0-RTT keys: the requests go before the handshake completes");
            let done = early.clone();
            tokio::spawn(async move {
                if done.established().await.is_ok() {
                    log_handshake(&done, server);
                }
            });
            early
        }
        (_, Ok(conn)) => {
            // (--resume without --0rtt: the TLS configuration offers no early data.)
            let conn = conn.established().await.map_err(lost)?;
            log_handshake(&conn, server);
            conn
        }
        (_, Err(connecting)) => {
            let conn = connecting.await.map_err(lost)?;
            log_handshake(&conn, server);
            conn
        }
    };
    let second = fetch_on(ep, conn, server, args, rest, bar).await?;
    Ok(Outcome {
        bytes: first.bytes + second.bytes,
        secs: first.secs + second.secs,
        multipath: second.multipath,
        stats: second.stats,
        path_error: first.path_error.or(second.path_error),
        connections: 2,
    })
}

/// --shard N: one connection per shard (the endpoint puts them on its shards in turn), the
/// k-th to the k-th server address (the URLs' and the --server-addr ones, cycling), each
/// from its shard's own port on one path, fetching every N-th URL; all at once. The figures
/// are those of the connections together, from the first request to the last body.
async fn fetch_sharded(
    ep: &mpq_api::Endpoint,
    server: SocketAddr,
    host: &str,
    config: &ClientConfig,
    args: &ClientArgs,
    downloads: Vec<Download>,
    bar: &ProgressBar,
) -> Result<Outcome> {
    let n = ep.shard_count();
    let mut servers = vec![server];
    servers.extend(args.paths.server_addrs.iter().copied().filter(|a| *a != server));
    let mut shares: Vec<Vec<Download>> = (0..n).map(|_| Vec::new()).collect();
    for (i, d) in downloads.into_iter().enumerate() {
        shares[i % n].push(d);
    }
    let mut fetches = Vec::new();
    for (k, share) in shares.into_iter().enumerate() {
        let to = servers[k % servers.len()];
        fetches.push(async move {
            let conn = ep.connect(to, host, config)?.await.map_err(|e| match e {
                mpq_api::Error::Closed(e) => anyhow!("{}", crate::runner::describe_loss(&e, to, &args.common)),
                e => anyhow!("{e}"),
            })?;
            log_handshake(&conn, to);
            fetch_on(ep, conn, to, args, share, bar).await.map_err(|e| anyhow!("shard {k} (to {to}): {e}"))
        });
    }
    let mut total =
        Outcome { bytes: 0, secs: 0.0, multipath: false, stats: Vec::new(), path_error: None, connections: 0 };
    for r in join_all(fetches).await {
        let o = r?;
        total.bytes += o.bytes;
        total.secs = total.secs.max(o.secs);
        total.multipath |= o.multipath;
        total.stats.extend(o.stats);
        total.connections += 1;
    }
    Ok(total)
}

/// Runs every future at once on the calling task and returns their outputs in order.
async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in futures.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *o = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// Logs what the handshake negotiated (version, cipher, resumption, 0-RTT), as `mpq client`
/// does.
fn log_handshake(conn: &mpq_api::Connection, server: SocketAddr) {
    if let Ok(Some(info)) = conn.handshake_info() {
        tracing::info!(peer = %server, "client handshake complete: {info}");
    }
}

/// On `conn`: opens the extra paths, sends every request and writes every body; then closes
/// the connection with H3_NO_ERROR and waits until the server knows.
async fn fetch_on(
    ep: &mpq_api::Endpoint,
    conn: mpq_api::Connection,
    server: SocketAddr,
    args: &ClientArgs,
    downloads: Vec<Download>,
    bar: &ProgressBar,
) -> Result<Outcome> {
    let lost = |e: mpq_api::Error| match e {
        mpq_api::Error::Closed(e) => anyhow!("{}", crate::runner::describe_loss(&e, server, &args.common)),
        e => anyhow!("{e}"),
    };
    // (A shard's connection keeps to its one path.)
    if ep.shard_count() == 1 {
        open_paths(&conn, &ep.local_addrs(), server, args)?;
    }
    let migration = args.paths.migrate_after_ms.filter(|_| ep.shard_count() == 1).map(|ms| {
        let to = ep.local_addrs()[1];
        tokio::spawn(migrate(conn.clone(), to, Duration::from_millis(ms)))
    });
    let (mut driver, send) = h3::client::new(mpq_h3::Connection::new(conn.clone()))
        .await
        .map_err(|e| anyhow!("HTTP/3 did not start: {e}"))?;
    let driving = tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    let clock = crate::progress::Stopwatch::start();
    let mut tasks = Vec::new();
    for d in downloads {
        let send = send.clone();
        let bar = bar.clone();
        tasks.push(tokio::spawn(async move { fetch(send, d, &bar).await }));
    }
    let mut bytes = 0;
    let mut failure = None;
    for t in tasks {
        match t.await.map_err(|e| anyhow!("request task: {e}")).and_then(|r| r) {
            Ok(n) => bytes += n,
            Err(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    let secs = clock.elapsed().as_secs_f64();
    let stats = conn.stats().map_err(lost)?;
    let multipath = conn.is_multipath().unwrap_or(false);
    // The last request sender: h3 closes the connection once it is gone (below), so the
    // statistics are taken first.
    drop(send);
    let path_error = match migration {
        Some(m) => m.await.map_err(|e| anyhow!("migration task: {e}"))?.err(),
        None => None,
    };
    // Every request sender is gone: h3 closes the connection with H3_NO_ERROR.
    let closed = driving.await.map_err(|e| anyhow!("HTTP/3 driver: {e}"))?;
    if !closed.is_h3_no_error() && failure.is_none() {
        tracing::info!("HTTP/3 connection ended: {closed}");
    }
    ep.wait_idle().await;
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(Outcome { bytes, secs, multipath, stats: vec![stats], path_error, connections: 1 })
}

/// GETs one URL and writes its body to its file; the body's length.
async fn fetch(
    mut send: h3::client::SendRequest<mpq_h3::Opener, Bytes>,
    mut d: Download,
    bar: &ProgressBar,
) -> Result<u64> {
    let path = d.url.path.clone();
    let authority = if d.url.host.contains(':') { format!("[{}]", d.url.host) } else { d.url.host.clone() };
    let req = http::Request::get(format!("https://{authority}:{}{path}", d.url.port)).body(())?;
    let mut stream = send.send_request(req).await.map_err(|e| anyhow!("GET {path}: {e}"))?;
    match stream.finish().await {
        Ok(()) => {}
        // RFC 9114 §4.1.2: a server that answered without needing the rest of the request may
        // stop it with H3_NO_ERROR, and "clients MUST NOT discard complete responses as a
        // result of having their request terminated abruptly" (quic-go's server answering
        // a 404 did, now and then, before the client's FIN left).
        Err(h3::error::StreamError::RemoteTerminate { code }) if code == h3::error::Code::H3_NO_ERROR => {}
        Err(e) => bail!("GET {path}: {e}"),
    }
    let response = stream.recv_response().await.map_err(|e| anyhow!("GET {path}: {e}"))?;
    if response.status() != http::StatusCode::OK {
        bail!("GET {path}: {}", response.status());
    }
    let mut received = 0u64;
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| anyhow!("GET {path}: {e}"))? {
        while chunk.has_remaining() {
            let piece = chunk.chunk();
            d.file.write_all(piece).with_context(|| format!("GET {path}: writing the file"))?;
            let n = piece.len();
            received += n as u64;
            bar.inc(n as u64);
            chunk.advance(n);
        }
    }
    Ok(received)
}

/// Opens a path on every other address pair the path options ask for (--local,
/// --server-addr, --path-mode, --max-paths, --backup-paths) once the handshake completed
/// with multipath, each as soon as the server allows; one that fails is reported and the
/// download goes on without it. (A connection sending 0-RTT opens none before.)
fn open_paths(conn: &mpq_api::Connection, locals: &[SocketAddr], server: SocketAddr, args: &ClientArgs) -> Result<()> {
    let plan = crate::runner::ClientPaths::new(&args.paths, locals, server)?;
    let pairs: Vec<(SocketAddr, SocketAddr)> =
        plan.pairs().iter().skip(1).map(|&(local, remote)| (local.unwrap_or(locals[0]), remote)).collect();
    if pairs.is_empty() {
        return Ok(());
    }
    let (conn, backup) = (conn.clone(), args.paths.backup_paths);
    tokio::spawn(async move {
        if conn.established().await.is_err() || !conn.is_multipath().unwrap_or(false) {
            return;
        }
        for (local, remote) in pairs {
            let adding = conn.add_path(Some(local), remote, backup);
            tokio::spawn(async move {
                match adding.await {
                    Ok(id) => tracing::info!(id, %local, %remote, "path validated"),
                    Err(e) => eprintln!("path from {local} to {remote} not opened: {e}"),
                }
            });
        }
    });
    Ok(())
}

/// --migrate-after-ms: moves the connection to `to` once `after` has passed, trying again
/// while it cannot move yet.
async fn migrate(conn: mpq_api::Connection, to: SocketAddr, after: Duration) -> Result<(), String> {
    tokio::time::sleep(after).await;
    loop {
        match conn.migrate(to) {
            Ok(()) => {
                eprintln!("migrated to {to} (new connection ID; the server validates the address)");
                return Ok(());
            }
            Err(mpq_api::Error::Path(PathError::NoConnectionId | PathError::HandshakeNotConfirmed)) => {
                tokio::time::sleep(MIGRATE_RETRY).await;
            }
            Err(e) => return Err(format!("--migrate-after-ms: {e}")),
        }
    }
}
