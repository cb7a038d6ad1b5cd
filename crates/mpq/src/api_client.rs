//! `mpq client`, over HTTP/0.9 (ALPN hq-interop) or HTTP/3 (`--http3`), on mpq's
//! application API: the connections (one; two with --resume or --0rtt; one per shard with
//! --shard), their paths, the migration asked for, the timeout and the JSON summary. The
//! requests themselves are the protocols' ([`crate::client::hq_requests`],
//! [`crate::http3_client::h3_requests`]).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use indicatif::ProgressBar;
use mpq_proto::conn::ClientConfig;

use crate::cli::ClientArgs;
use crate::client::{output_file, parse_url, server_of, Download};

/// The application protocol of the requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/0.9, ALPN hq-interop (the interop runner's).
    Hq,
    /// HTTP/3 (RFC 9114), ALPN h3, through the h3 crate.
    H3,
}

/// What one connection's requests came to ([`crate::client::hq_requests`],
/// [`crate::http3_client::h3_requests`]); the protocol closed the connection after taking
/// its statistics.
pub struct Fetched {
    /// Body bytes written to the files.
    pub bytes: u64,
    /// From the first request to the last body's end.
    pub secs: f64,
    /// The first request that failed, if any.
    pub failure: Option<anyhow::Error>,
    /// The connection's statistics when the last body ended.
    pub stats: mpq_proto::conn::ConnectionStats,
    /// Multipath was in use.
    pub multipath: bool,
}

impl Fetched {
    /// What the request tasks (each a body's length) came to on `conn`, timed from
    /// `clock`: their bytes, the first failure (`failure`, met before them, comes first),
    /// and the connection's figures once the last ended. The connection's error if it is
    /// gone and no request failed.
    pub async fn collect(
        conn: &mpq_api::Connection,
        clock: &crate::progress::Stopwatch,
        tasks: Vec<tokio::task::JoinHandle<Result<u64>>>,
        mut failure: Option<anyhow::Error>,
    ) -> Result<Fetched> {
        let mut bytes = 0;
        for t in tasks {
            match t.await.map_err(|e| anyhow!("request task: {e}")).and_then(|r| r) {
                Ok(n) => bytes += n,
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        let secs = clock.elapsed().as_secs_f64();
        let stats = match conn.stats() {
            Ok(s) => s,
            Err(e) => return Err(failure.unwrap_or_else(|| anyhow!("{e}"))),
        };
        let multipath = conn.is_multipath().unwrap_or(false);
        Ok(Fetched { bytes, secs, failure, stats, multipath })
    }
}

/// Fetches every URL and writes the bodies under --output; fails if any download fails.
pub fn run(args: ClientArgs) -> Result<()> {
    let protocol = if args.http3 { Protocol::H3 } else { Protocol::Hq };
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
    let alpn: &[u8] = match protocol {
        Protocol::Hq => b"hq-interop",
        Protocol::H3 => mpq_h3::ALPN,
    };
    let tls = crate::tls::client_config(&args.common, args.ca.as_deref(), args.insecure, alpn, args.zero_rtt)?;
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
    let run = Run {
        ep: &ep,
        server,
        host: &first.host,
        config: &config,
        args: &args,
        bar: &bar,
        protocol,
        started: &started,
        last_body: std::cell::Cell::new(Duration::ZERO),
    };
    let mut signals = crate::api_runtime::stop_signals()?;
    let outcome = executor.block_on(async {
        match signals.or_stop(tokio::time::timeout(timeout, run.fetch_all(downloads))).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(_)) => Ok(Err(anyhow!("timed out after {} s (--timeout)", args.timeout))),
            Err(stop) => Err(crate::stop_signal::interrupted(
                &ep,
                crate::stop_signal::close_code(protocol == Protocol::H3),
                stop,
            )
            .await),
        }
    });
    bar.finish_and_clear();
    let outcome = outcome?.map_err(|e| anyhow!("download failed: {e}"))?;
    // Timed to the last body's end: the closing period after it is not the transfer's.
    eprintln!("{}", crate::progress::summary(outcome.bytes, run.last_body.get(), count));
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
            "http3": protocol == Protocol::H3,
        });
        println!("{out}");
    }
    // After the summary, so that its statistics show what happened.
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
    /// A path abandonment or migration asked for on the command line that failed.
    path_error: Option<String>,
    /// Connections made: 1, 2 with --resume or --0rtt, N with --shard N.
    connections: u32,
}

/// One run's settings, shared by its connections.
struct Run<'a> {
    ep: &'a mpq_api::Endpoint,
    server: SocketAddr,
    host: &'a str,
    config: &'a ClientConfig,
    args: &'a ClientArgs,
    bar: &'a ProgressBar,
    protocol: Protocol,
    /// When the run started (before the first handshake).
    started: &'a crate::progress::Stopwatch,
    /// From `started` to the end of the last body, once it came.
    last_body: std::cell::Cell<Duration>,
}

impl Run<'_> {
    /// The message of a connection's error, with what to check when it never answered.
    fn lost(&self, to: SocketAddr) -> impl Fn(mpq_api::Error) -> anyhow::Error + '_ {
        move |e| match e {
            mpq_api::Error::Closed(e) => anyhow!("{}", crate::runner::describe_loss(&e, to, &self.args.common)),
            e => anyhow!("{e}"),
        }
    }

    /// Fetches every URL: on one connection, or with --resume or --0rtt the first URL on a
    /// first connection and the rest on a second one that resumes its session (RFC 8446
    /// §2.2), its requests sent in 0-RTT packets with --0rtt when the ticket allows early
    /// data (RFC 9001 §4.6; RFC 9114 §3.3 lets an HTTP/3 client send requests in 0-RTT).
    /// The figures are those of the connections together.
    async fn fetch_all(&self, mut downloads: Vec<Download>) -> Result<Outcome> {
        let (ep, server, host, config, args) = (self.ep, self.server, self.host, self.config, self.args);
        if ep.shard_count() > 1 {
            return self.fetch_sharded(downloads).await;
        }
        if !(args.resume || args.zero_rtt) {
            let conn = ep.connect(server, host, config)?.await.map_err(self.lost(server))?;
            log_handshake(&conn, server);
            return self.fetch_on(conn, server, downloads).await;
        }
        let rest = downloads.split_off(1);
        let conn = ep.connect(server, host, config)?.await.map_err(self.lost(server))?;
        log_handshake(&conn, server);
        // The first connection: its session tickets came with its answer; closed and
        // drained before the second starts.
        let first = self.fetch_on(conn, server, downloads).await?;
        let connecting = ep.connect(server, host, config)?;
        let conn = match (args.zero_rtt, connecting.into_0rtt()) {
            (true, Ok(early)) => {
                tracing::info!(peer = %server, "0-RTT attempted: the requests go at once");
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
                let conn = conn.established().await.map_err(self.lost(server))?;
                log_handshake(&conn, server);
                conn
            }
            (_, Err(connecting)) => {
                let conn = connecting.await.map_err(self.lost(server))?;
                log_handshake(&conn, server);
                conn
            }
        };
        let second = self.fetch_on(conn, server, rest).await?;
        Ok(Outcome {
            bytes: first.bytes + second.bytes,
            secs: first.secs + second.secs,
            multipath: second.multipath,
            stats: second.stats,
            path_error: first.path_error.or(second.path_error),
            connections: 2,
        })
    }

    /// --shard N: one connection per shard (the endpoint puts them on its shards in turn),
    /// the k-th to the k-th server address (the URLs' and the --server-addr ones, cycling),
    /// each from its shard's own port on one path, fetching every N-th URL; all at once. The
    /// figures are those of the connections together, from the first request to the last
    /// body.
    async fn fetch_sharded(&self, downloads: Vec<Download>) -> Result<Outcome> {
        let n = self.ep.shard_count();
        let mut servers = vec![self.server];
        servers.extend(self.args.paths.server_addrs.iter().copied().filter(|a| *a != self.server));
        let mut shares: Vec<Vec<Download>> = (0..n).map(|_| Vec::new()).collect();
        for (i, d) in downloads.into_iter().enumerate() {
            shares[i % n].push(d);
        }
        let mut fetches = Vec::new();
        for (k, share) in shares.into_iter().enumerate() {
            let to = servers[k % servers.len()];
            fetches.push(async move {
                let conn = self.ep.connect(to, self.host, self.config)?.await.map_err(self.lost(to))?;
                log_handshake(&conn, to);
                self.fetch_on(conn, to, share).await.map_err(|e| anyhow!("shard {k} (to {to}): {e}"))
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
            total.path_error = total.path_error.or(o.path_error);
            total.connections += 1;
        }
        Ok(total)
    }

    /// On `conn`: keeps the extra paths open (the path manager), abandons or migrates as
    /// asked, sends every request and writes every body; the protocol then closes the
    /// connection, and this waits until it drained (at most [`crate::stop_signal::DRAIN_LIMIT`]).
    async fn fetch_on(
        &self,
        conn: mpq_api::Connection,
        server: SocketAddr,
        downloads: Vec<Download>,
    ) -> Result<Outcome> {
        let (ep, args) = (self.ep, self.args);
        let paths = crate::api_paths::PathTasks::start(ep, &conn, server, &args.paths, ep.shard_count() > 1)?;
        let fetched = match self.protocol {
            Protocol::Hq => crate::client::hq_requests(&conn, downloads, self.bar).await,
            Protocol::H3 => crate::http3_client::h3_requests(&conn, downloads, self.bar).await,
        };
        let path_error = paths.finish().await;
        let fetched = fetched?;
        self.last_body.set(self.started.elapsed());
        if !crate::stop_signal::drained_within_limit(ep).await {
            tracing::info!(
                "closing period cut short after {:?} (RFC 9000 §10.2: the socket closes with the endpoint)",
                crate::stop_signal::DRAIN_LIMIT
            );
        }
        if let Some(e) = fetched.failure {
            return Err(e);
        }
        Ok(Outcome {
            bytes: fetched.bytes,
            secs: fetched.secs,
            multipath: fetched.multipath,
            stats: vec![fetched.stats],
            path_error,
            connections: 1,
        })
    }
}

/// Runs every future at once on the calling task and returns their outputs in order.
pub(crate) async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
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

/// Logs what the handshake negotiated (version, cipher, resumption, 0-RTT), as the server
/// does.
pub(crate) fn log_handshake(conn: &mpq_api::Connection, server: SocketAddr) {
    if let Ok(Some(info)) = conn.handshake_info() {
        tracing::info!(peer = %server, "client handshake complete: {info}");
    }
}
