//! The hq-interop client: every URL on its own stream of one connection, or, with
//! --resume / --0rtt, the first URL in a first connection and the rest in a second one
//! that resumes the first one's TLS session (in 0-RTT with --0rtt).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use quinn::{ClientConfig, Connection, Endpoint, VarInt};
use tokio::io::AsyncWriteExt;

/// `quinn-peer client` options.
#[derive(clap::Args)]
pub struct Opts {
    /// URLs to fetch (https://HOST:PORT/name); all must name the same server.
    #[arg(required = true)]
    urls: Vec<String>,
    /// Directory for the downloads.
    #[arg(long)]
    output: PathBuf,
    /// CA certificate (PEM) the server's certificate must chain to.
    #[arg(long)]
    ca: PathBuf,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    /// Local address to bind.
    #[arg(long, default_value = "127.0.0.1:0")]
    local: SocketAddr,
    /// Fetch the first URL, then the others in a second connection resuming the session.
    #[arg(long)]
    resume: bool,
    /// As --resume, with the second connection's requests in 0-RTT.
    #[arg(long = "0rtt")]
    pub zero_rtt: bool,
    /// Offer only TLS_CHACHA20_POLY1305_SHA256.
    #[arg(long)]
    chacha20: bool,
    /// Start a 1-RTT key update every this many bytes received.
    #[arg(long)]
    key_update_bytes: Option<u64>,
    /// Move the connection to a new socket bound to this address (RFC 9000 §9)...
    #[arg(long)]
    rebind_to: Option<SocketAddr>,
    /// ... this many milliseconds after the handshake.
    #[arg(long, default_value_t = 20)]
    rebind_after_ms: u64,
}

/// Downloads every URL; fails unless all of them arrive whole.
pub async fn run(o: Opts) -> Result<()> {
    let mut targets = Vec::new();
    for url in &o.urls {
        targets.push(parse_url(url)?);
    }
    let (host, server) = (targets[0].0.clone(), targets[0].1);
    if targets.iter().any(|t| t.1 != server) {
        bail!("all URLs must name the same server");
    }
    let paths: Vec<String> = targets.into_iter().map(|t| t.2).collect();

    let mut endpoint = Endpoint::client(o.local).with_context(|| format!("binding {}", o.local))?;
    let (crypto, verifier) = crate::tls::client(&o.ca, o.chacha20)?;
    let mut cfg = ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(Arc::new(crate::transport()));
    endpoint.set_default_client_config(cfg);

    let start = Instant::now();
    let mut total = 0;
    if o.resume || o.zero_rtt {
        let (first, rest) = paths.split_at(1);
        total += connection(&endpoint, &o, &verifier, server, &host, first, false).await?;
        if !rest.is_empty() {
            total += connection(&endpoint, &o, &verifier, server, &host, rest, o.zero_rtt).await?;
        }
    } else {
        total += connection(&endpoint, &o, &verifier, server, &host, &paths, false).await?;
    }
    eprintln!("downloaded {} file(s), {total} bytes in {:.2}s", paths.len(), start.elapsed().as_secs_f64());
    endpoint.wait_idle().await;
    Ok(())
}

/// One connection fetching `paths` concurrently; requests in 0-RTT when `early` and the
/// stored ticket allows it.
#[allow(clippy::too_many_arguments)]
async fn connection(
    endpoint: &Endpoint,
    o: &Opts,
    verifier: &crate::tls::CountingVerifier,
    server: SocketAddr,
    host: &str,
    paths: &[String],
    early: bool,
) -> Result<u64> {
    let verified_before = verifier.verified.load(Ordering::SeqCst);
    let connecting = endpoint.connect(server, host)?;
    let (conn, zero_rtt) = if early {
        match connecting.into_0rtt() {
            Ok((conn, accepted)) => (conn, Some(accepted)),
            Err(connecting) => {
                eprintln!("no ticket allowing 0-RTT: requests wait for the handshake");
                (connecting.await?, None)
            }
        }
    } else {
        (connecting.await?, None)
    };
    // Every request is written here, before anything is awaited that waits for the
    // server: in 0-RTT they go out before the handshake completes (in spawned tasks they
    // could miss it and go in 1-RTT).
    let mut fetches = Vec::new();
    for p in paths {
        let recv = request(&conn, p).await?;
        fetches.push(tokio::spawn(download(recv, p.clone(), o.output.clone())));
    }
    let tried_0rtt = zero_rtt.is_some();
    let used_0rtt = match zero_rtt {
        Some(accepted) => accepted.await,
        None => false,
    };
    // The handshake is complete here (ZeroRttAccepted resolves when it is).
    let resumed = verifier.verified.load(Ordering::SeqCst) == verified_before;
    eprintln!("handshake completed {} resumed={resumed} used_0rtt={used_0rtt}", crate::tls::describe(&conn));
    eprintln!("negotiated quic_version=00000001");
    if let Some(bytes) = o.key_update_bytes {
        tokio::spawn(key_updates(conn.clone(), bytes));
    }
    if let Some(to) = o.rebind_to {
        let (endpoint, after) = (endpoint.clone(), o.rebind_after_ms);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(after)).await;
            match std::net::UdpSocket::bind(to).and_then(|s| endpoint.rebind(s).map(|_| s_addr(&endpoint))) {
                Ok(addr) => eprintln!("rebound to {addr}"),
                Err(e) => eprintln!("rebinding to {to} failed: {e}"),
            }
        });
    }
    let mut total = 0;
    let mut err = None;
    for f in fetches {
        match f.await? {
            Ok(n) => total += n,
            Err(e) => err = Some(e),
        }
    }
    if let Some(e) = err {
        return Err(e);
    }
    if tried_0rtt && !used_0rtt {
        eprintln!("0-RTT rejected: the requests were sent again in 1-RTT");
    }
    conn.close(VarInt::from_u32(0), b"done");
    Ok(total)
}

fn s_addr(endpoint: &Endpoint) -> String {
    endpoint.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into())
}

/// Forces a key update each time another `every` bytes have arrived.
async fn key_updates(conn: Connection, every: u64) {
    let mut next = every;
    loop {
        tokio::time::sleep(Duration::from_millis(5)).await;
        if conn.close_reason().is_some() {
            return;
        }
        if conn.stats().udp_rx.bytes >= next {
            conn.force_key_update();
            eprintln!("key_update trigger=local_update requested after {next} bytes");
            next += every;
        }
    }
}

/// Opens a stream for `path` and sends its request (in 0-RTT packets when the connection
/// has 0-RTT keys and the handshake has not completed yet).
async fn request(conn: &Connection, path: &str) -> Result<quinn::RecvStream> {
    let (mut send, recv) = conn.open_bi().await?;
    send.write_all(format!("GET {path}\r\n").as_bytes()).await?;
    send.finish()?;
    Ok(recv)
}

/// Reads the answer to `path` into `out`/<its last segment>.
async fn download(mut recv: quinn::RecvStream, path: String, out: PathBuf) -> Result<u64> {
    let name = path.rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or("index.html").to_string();
    let mut file = tokio::fs::File::create(out.join(&name)).await?;
    let mut n = 0u64;
    while let Some(chunk) = recv.read_chunk(usize::MAX, true).await.with_context(|| format!("reading {path}"))? {
        n += chunk.bytes.len() as u64;
        file.write_all(&chunk.bytes).await?;
    }
    file.flush().await?;
    Ok(n)
}

/// (host, address, path) of `https://HOST:PORT/path`.
fn parse_url(url: &str) -> Result<(String, SocketAddr, String)> {
    let rest = url.strip_prefix("https://").ok_or_else(|| anyhow!("URL must start with https://: {url}"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = authority
        .to_socket_addrs()
        .with_context(|| format!("resolving {authority}"))?
        .next()
        .ok_or_else(|| anyhow!("{authority} resolves to nothing"))?;
    let host = match authority.rsplit_once(':') {
        Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']').to_string(),
        None => authority.to_string(),
    };
    Ok((host, addr, path.to_string()))
}
