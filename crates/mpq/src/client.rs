//! `mpq client`: downloads URLs over HTTP/0.9 (ALPN hq-interop), one stream per URL.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use indicatif::ProgressBar;
use mpq_proto::conn::{ClientConfig, Event, ZeroRttState};
use mpq_proto::endpoint::{ConnectionHandle, Endpoint};
use mpq_proto::{Dir, Instant, StreamId};

use crate::cli::{ClientArgs, PathArgs};
use crate::runner::{self, App};

/// A parsed `https://host:port/path` URL.
#[derive(Debug, Clone, PartialEq)]
pub struct Url {
    /// Host name or IP literal (without brackets).
    pub host: String,
    /// Port (443 when absent).
    pub port: u16,
    /// Path with its leading slash.
    pub path: String,
}

/// Parses the URLs the interop runner uses.
pub fn parse_url(s: &str) -> Result<Url> {
    let rest = s.strip_prefix("https://").ok_or_else(|| anyhow!("{s}: only https:// URLs are supported"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let end = v6.find(']').ok_or_else(|| anyhow!("{s}: unterminated IPv6 literal"))?;
        let port = v6[end + 1..].strip_prefix(':').map(str::parse).transpose()?.unwrap_or(443);
        (v6[..end].to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().with_context(|| format!("{s}: bad port"))?),
            None => (authority.to_string(), 443),
        }
    };
    if host.is_empty() {
        bail!("{s}: missing host");
    }
    Ok(Url { host, port, path: path.to_string() })
}

struct Request {
    /// The connection that fetches it: 0, or 1 for the resumed one (--resume, --0rtt).
    phase: u8,
    path: String,
    file: std::fs::File,
    stream: Option<StreamId>,
    received: u64,
    done: bool,
}

struct HqClient {
    config: ClientConfig,
    server: SocketAddr,
    server_name: String,
    requests: Vec<Request>,
    conn: Option<ConnectionHandle>,
    qlog_dir: Option<PathBuf>,
    deadline: Instant,
    /// `--timeout`, for the message.
    timeout_secs: u64,
    /// The shared options, for messages.
    common: crate::cli::Common,
    error: Option<String>,
    closed: bool,
    bar: ProgressBar,
    buf: Vec<u8>,
    paths: runner::ClientPaths,
    /// Statistics taken when the last download finished.
    stats: Option<mpq_proto::conn::ConnectionStats>,
    multipath: bool,
    started: Option<Instant>,
    finished: Option<Instant>,
    /// The connection in use: 0, then 1 (the resumed one) with --resume or --0rtt.
    phase: u8,
    /// --0rtt: requests may go before the handshake completes (in 0-RTT packets).
    zero_rtt: bool,
    /// The path options and bound sockets, to start the path manager afresh for the
    /// resumed connection.
    path_args: crate::cli::PathArgs,
    bound: Vec<SocketAddr>,
}

impl App for HqClient {
    fn timeout(&self) -> Option<Instant> {
        // The overall deadline (--timeout) must wake the loop even when nothing else will.
        [self.paths.timeout(), Some(self.deadline)].into_iter().flatten().min()
    }

    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
        if self.conn.is_none() {
            match ep.connect(now, &self.config, self.server, &self.server_name) {
                Ok(h) => {
                    runner::attach_qlog(ep, h, &self.qlog_dir);
                    self.conn = Some(h);
                }
                Err(e) => {
                    self.error = Some(e.to_string());
                    return ControlFlow::Break(());
                }
            }
        }
        while let Some((h, ev)) = ep.poll_event() {
            if Some(h) != self.conn {
                // The first connection, closed before the resumed one (--resume).
                continue;
            }
            if let Event::ConnectionLost(e) = &ev {
                if !self.closed {
                    self.error = Some(runner::describe_loss(e, self.server, &self.common));
                    return ControlFlow::Break(());
                }
            }
            if ev == Event::Connected {
                runner::log_handshake(ep, h);
            }
            self.paths.on_event(now, &ev);
        }
        if now >= self.deadline {
            self.error = Some(format!("timed out after {} s (--timeout)", self.timeout_secs));
            return ControlFlow::Break(());
        }
        let Some(h) = self.conn else { return ControlFlow::Continue(()) };
        self.paths.poll(now, ep, h);
        let Some(c) = ep.connection_mut(h) else { return ControlFlow::Break(()) };
        // With 0-RTT keys (a resumed session whose ticket allows early data), the requests
        // go at once, within the limits remembered with the ticket.
        let early = self.zero_rtt && c.zero_rtt_state() == ZeroRttState::Pending;
        if !c.is_established() && !early {
            return ControlFlow::Continue(());
        }
        self.started.get_or_insert(now);
        self.multipath = c.is_multipath();
        let phase = self.phase;
        for r in self.requests.iter_mut().filter(|r| r.stream.is_none() && r.phase == phase) {
            let Some(id) = c.open_stream(Dir::Bi) else { break };
            let line = format!("GET {}\r\n", r.path);
            if c.write(id, line.as_bytes()) != Ok(line.len()) || c.finish(id).is_err() {
                self.error = Some("cannot send the request".into());
                return ControlFlow::Break(());
            }
            r.stream = Some(id);
        }
        for r in self.requests.iter_mut().filter(|r| !r.done) {
            let Some(id) = r.stream else { continue };
            loop {
                match c.read(id, &mut self.buf) {
                    Ok(o) => {
                        if let Err(e) = r.file.write_all(&self.buf[..o.len]) {
                            self.error = Some(format!("writing {}: {e}", r.path));
                            return ControlFlow::Break(());
                        }
                        r.received += o.len as u64;
                        self.bar.inc(o.len as u64);
                        if o.fin {
                            r.done = true;
                            break;
                        }
                        if o.len == 0 {
                            break;
                        }
                    }
                    Err(mpq_proto::stream::StreamError::Blocked) => break,
                    Err(e) => {
                        self.error = Some(format!("{}: {e}", r.path));
                        return ControlFlow::Break(());
                    }
                }
            }
        }
        if self.phase == 0
            && self.requests.iter().any(|r| r.phase == 1)
            && self.requests.iter().all(|r| r.done || r.phase == 1)
        {
            // The first connection is done (servers send their tickets right after the
            // handshake, before any response): close it and resume in a second one
            // (--resume, --0rtt), whose paths the path manager opens afresh.
            c.close(now, 0, b"");
            self.phase = 1;
            self.conn = None;
            match runner::ClientPaths::new(&self.path_args, &self.bound, self.server) {
                Ok(p) => self.paths = p,
                Err(e) => {
                    self.error = Some(e.to_string());
                    return ControlFlow::Break(());
                }
            }
            return self.poll(now, ep);
        }
        if self.requests.iter().all(|r| r.done) && !self.closed {
            self.closed = true;
            self.finished = Some(now);
            self.stats = Some(c.stats());
            c.close(now, 0, b"");
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

/// The server every URL names (the first URL's host, resolved); an error if the URLs name
/// more than one (one connection fetches them all).
pub fn server_of(urls: &[Url]) -> Result<(Url, SocketAddr)> {
    let first = urls.first().ok_or_else(|| anyhow!("no URL given (e.g. https://127.0.0.1:4433/file)"))?.clone();
    if urls.iter().any(|u| u.host != first.host || u.port != first.port) {
        bail!("all URLs must name the same server");
    }
    let server = (first.host.as_str(), first.port)
        .to_socket_addrs()
        .with_context(|| format!("resolving {}", first.host))?
        .next()
        .ok_or_else(|| anyhow!("{} has no address", first.host))?;
    Ok((first, server))
}

/// Creates the file under `output` (made if missing) that `url`'s body goes to: named after
/// the URL's last path segment, `index.html` for a directory.
pub fn output_file(output: &std::path::Path, url: &Url) -> Result<std::fs::File> {
    std::fs::create_dir_all(output)
        .with_context(|| format!("--output {}: cannot create the directory", output.display()))?;
    let name = url.path.rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or("index.html");
    let path = output.join(name);
    std::fs::File::create(&path).with_context(|| format!("cannot write {} (check --output)", path.display()))
}

/// Downloads every URL; fails if any download fails.
pub fn run(args: ClientArgs) -> Result<()> {
    if args.http3 {
        return crate::http3_client::run(args);
    }
    let urls = args.urls.iter().map(|u| parse_url(u)).collect::<Result<Vec<_>>>()?;
    if args.timeout == 0 {
        bail!("--timeout 0: expected a number of seconds greater than 0");
    }
    let resume = args.resume || args.zero_rtt;
    if resume && urls.len() < 2 {
        bail!("--resume and --0rtt need at least two URLs: the first for the first connection, the rest for the resumed one");
    }
    let (first, server) = server_of(&urls)?;
    let mut requests = Vec::new();
    for (i, u) in urls.iter().enumerate() {
        let file = output_file(&args.output, u)?;
        let phase = u8::from(resume && i > 0);
        requests.push(Request { phase, path: u.path.clone(), file, stream: None, received: 0, done: false });
    }
    let transport = runner::shared(runner::transport_config(&args.common)?);
    let tls = crate::tls::client_config(&args.common, args.ca.as_deref(), args.insecure, b"hq-interop", args.zero_rtt)?;
    let bar = crate::progress::bar();
    let config = ClientConfig { tls, transport };
    let started = crate::progress::Stopwatch::start();
    // One connection, or with --shard one per shard, each with its share of the requests
    // (round robin) on a path of its own (the k-th --local address to the k-th server
    // address, cycling).
    let n = args.common.shard.map_or(1, |n| n as usize);
    if n > 1 && resume {
        bail!("--shard does not combine with --resume or --0rtt (each shard's connection is a first one)");
    }
    if requests.len() < n {
        bail!("--shard {n}: give at least {n} URLs (each connection fetches a share of them)");
    }
    let locals = runner::client_locals(&args.paths, server)?;
    let mut servers = vec![server];
    servers.extend(args.paths.server_addrs.iter().copied().filter(|a| *a != server));
    let mut shares: Vec<Vec<Request>> = (0..n).map(|_| Vec::new()).collect();
    for (i, r) in requests.into_iter().enumerate() {
        shares[i % n].push(r);
    }
    let mut sockets = Vec::new();
    let mut shards = Vec::new();
    let mut own = args.common.clone();
    own.shard = None;
    for (k, (endpoint, requests)) in runner::endpoints(None, &args.common).into_iter().zip(shares).enumerate() {
        let (to, path_args, sock) = if args.common.shard.is_some() {
            // A shard's connection has one path, from a socket of its own.
            let one = PathArgs { locals: Vec::new(), server_addrs: Vec::new(), max_paths: 1, ..args.paths.clone() };
            (servers[k % servers.len()], one, runner::bind(&[locals[k % locals.len()]], &own)?)
        } else {
            (server, args.paths.clone(), runner::bind(&locals, &args.common)?)
        };
        let bound: Vec<SocketAddr> = sock.iter().map(|s| s.local_addr()).collect();
        let app = HqClient {
            paths: runner::ClientPaths::new(&path_args, &bound, to)?,
            stats: None,
            multipath: false,
            started: None,
            finished: None,
            phase: 0,
            zero_rtt: args.zero_rtt,
            path_args,
            bound,
            config: config.clone(),
            server: to,
            server_name: first.host.clone(),
            requests,
            conn: None,
            qlog_dir: args.common.qlog_dir.clone(),
            // The loop's clock starts at zero when it is created, just below.
            deadline: Instant::ZERO + Duration::from_secs(args.timeout),
            timeout_secs: args.timeout,
            common: args.common.clone(),
            error: None,
            closed: false,
            bar: bar.clone(),
            buf: vec![0; 256 * 1024],
        };
        sockets.push(sock);
        shards.push((endpoint, app));
    }
    let apps: Vec<HqClient> = if args.common.shard.is_some() {
        crate::shard_run::run(sockets, shards, &args.common)?.into_iter().map(|(a, _)| a).collect()
    } else {
        let (sock, (endpoint, app)) = sockets.into_iter().zip(shards).next().expect("one connection");
        vec![runner::run_on(sock, endpoint, app, &args.common)?.0]
    };
    bar.finish_and_clear();
    for (k, app) in apps.iter().enumerate() {
        if let Some(e) = &app.error {
            match args.common.shard {
                Some(_) => bail!("download failed on shard {k} (from {}): {e}", app.server),
                None => bail!("download failed: {e}"),
            }
        }
    }
    let total: u64 = apps.iter().flat_map(|a| &a.requests).map(|r| r.received).sum();
    let count: usize = apps.iter().map(|a| a.requests.len()).sum();
    eprintln!("{}", crate::progress::summary(total, started.elapsed(), count));
    if args.json {
        let secs = match (apps.iter().filter_map(|a| a.started).min(), apps.iter().filter_map(|a| a.finished).max()) {
            (Some(s), Some(f)) => (f - s).as_secs_f64().max(1e-9),
            _ => started.elapsed().as_secs_f64().max(1e-9),
        };
        let stats: Vec<_> = apps.iter().map(|a| a.stats.clone().unwrap_or_default()).collect();
        let out = serde_json::json!({
            "bytes": total,
            "duration_s": secs,
            "goodput_bps": total as f64 * 8.0 / secs,
            "multipath": apps.iter().any(|a| a.multipath),
            "key_updates": stats.iter().map(|s| s.key_updates).sum::<u64>(),
            // Every connection's paths (with --shard, one per connection, shard by shard).
            "paths": stats.iter().flat_map(crate::report::paths_json).collect::<Vec<_>>(),
            "connections": apps.len(),
        });
        println!("{out}");
    }
    // After the summary, so that its statistics show what happened.
    for app in &apps {
        app.paths.finish()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("https://127.0.0.1:4433/a/b").unwrap(),
            Url { host: "127.0.0.1".into(), port: 4433, path: "/a/b".into() }
        );
        assert_eq!(parse_url("https://[::1]:9/x").unwrap(), Url { host: "::1".into(), port: 9, path: "/x".into() });
        assert_eq!(parse_url("https://example.org").unwrap().port, 443);
        assert!(parse_url("http://x/").is_err());
        assert!(parse_url("https://:4/").is_err());
    }
}
