//! noq-peer: an HTTP/0.9 (ALPN `hq-interop`) client and server on the `noq` QUIC stack
//! (n0-computer's quinn fork), with the multipath extension (RFC 10069)
//! enabled. Used by the mpq interop suite as an independent multipath implementation.
//!
//! noq sends every path of a connection through one UDP socket; a path's local side is
//! chosen by IP only (`FourTuple { remote, local_ip }`, sent with IP_PKTINFO), never by
//! port. So when the client gets two `--local` addresses with different IPs it binds
//! the wildcard address on the first one's port and opens the second path with the second
//! one's IP as source.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use noq::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use noq::{
    ClientConfig, Connection, Endpoint, FourTuple, IdleTimeout, PathEvent, PathId, PathStatus,
    ServerConfig, TransportConfig, VarInt,
};
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use tokio::io::AsyncWriteExt;

const ALPN: &[u8] = b"hq-interop";
/// HTTP/0.9 error for an unknown file (as in the QUIC interop runner's servers).
const ERR_NOT_FOUND: u32 = 0x10;

#[derive(Parser)]
#[command(name = "noq-peer", about = "hq-interop peer on the noq QUIC stack, multipath enabled")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve files from --root over hq-interop.
    Server {
        /// UDP address to listen on.
        #[arg(long, default_value = "127.0.0.1:4433")]
        listen: SocketAddr,
        /// Directory whose files are served.
        #[arg(long)]
        root: PathBuf,
        /// initial_max_path_id to advertise (0 = multipath off).
        #[arg(long, default_value_t = 4)]
        max_path_id: u32,
    },
    /// Download URLs (https://HOST:PORT/name) into --output.
    Client {
        /// URLs to fetch; all must name the same server.
        #[arg(required = true)]
        urls: Vec<String>,
        /// Directory for the downloads.
        #[arg(long)]
        output: PathBuf,
        /// Local address: the first is bound, the second (if any) is the second path's
        /// source IP (noq cannot pick a source port per path).
        #[arg(long)]
        local: Vec<SocketAddr>,
        /// initial_max_path_id to advertise (0 = multipath off).
        #[arg(long, default_value_t = 4)]
        max_path_id: u32,
        /// Open the second path with status backup.
        #[arg(long)]
        backup: bool,
        /// Close the second path this many ms after it was opened.
        #[arg(long)]
        abandon_after_ms: Option<u64>,
        /// Print one JSON line of per-path statistics at the end.
        #[arg(long)]
        json: bool,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
    },
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match cli.cmd {
        Cmd::Server { listen, root, max_path_id } => rt.block_on(server(listen, root, max_path_id)),
        Cmd::Client { urls, output, local, max_path_id, backup, abandon_after_ms, json, timeout } => {
            let opts = ClientOpts { urls, output, local, max_path_id, backup, abandon_after_ms, json };
            match rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(timeout), client(opts)).await
            }) {
                Ok(r) => r,
                Err(_) => bail!("timed out after {timeout}s"),
            }
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn transport(max_path_id: u32) -> TransportConfig {
    let mut t = TransportConfig::default();
    t.max_idle_timeout(Some(IdleTimeout::from(VarInt::from_u32(30_000))));
    // Keep noq's default receive windows: with 16 MiB stream / 32 MiB connection windows
    // noq 1.4.0's own client aborts a 5 MB loopback download with INTERNAL_ERROR "too many
    // gaps in stream buffer" (its assembler's MAX_CHUNKS limit), even on a single path.
    t.send_window(32 << 20);
    t.keep_alive_interval(Some(Duration::from_secs(5)));
    if max_path_id > 0 {
        // noq advertises initial_max_path_id = max_concurrent_multipath_paths - 1.
        t.max_concurrent_multipath_paths(max_path_id + 1);
    }
    t
}

// ------------------------------------------------------------------------------------
// Server

async fn server(listen: SocketAddr, root: PathBuf, max_path_id: u32) -> Result<()> {
    let cert = rcgen::generate_simple_self_signed(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ])?;
    let cert_der = CertificateDer::from(cert.cert);
    let key = PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(vec![cert_der], key.into())?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    tls.max_early_data_size = 0;
    if std::env::var_os("SSLKEYLOGFILE").is_some() {
        tls.key_log = Arc::new(rustls::KeyLogFile::new());
    }
    let mut cfg = ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls)?));
    cfg.transport_config(Arc::new(transport(max_path_id)));
    let endpoint = Endpoint::server(cfg, listen)?;
    let bound = endpoint.local_addr()?;
    eprintln!("listening on {bound}");
    println!("listening on {bound}");
    use std::io::Write;
    std::io::stdout().flush()?;

    let root = Arc::new(root);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            inc = endpoint.accept() => {
                let Some(inc) = inc else { break };
                let root = root.clone();
                tokio::spawn(async move {
                    match inc.await {
                        Ok(conn) => serve_conn(conn, root).await,
                        Err(e) => eprintln!("handshake failed: {e}"),
                    }
                });
            }
        }
    }
    endpoint.close(VarInt::from_u32(0), b"bye");
    Ok(())
}

async fn serve_conn(conn: Connection, root: Arc<PathBuf>) {
    let remote = conn
        .path(PathId::ZERO)
        .and_then(|p| p.remote_address().ok())
        .map(|a| a.to_string())
        .unwrap_or_default();
    eprintln!(
        "connection from {remote} handshake completed alpn={} multipath={}",
        alpn_of(&conn),
        conn.is_multipath_enabled()
    );
    spawn_path_logger(&conn, "server");
    loop {
        match conn.accept_bi().await {
            Ok((send, recv)) => {
                let root = root.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve_stream(send, recv, &root).await {
                        eprintln!("stream error: {e:#}");
                    }
                });
            }
            Err(e) => {
                eprintln!("connection from {remote} ended: {e}");
                break;
            }
        }
    }
    if conn.is_multipath_enabled() {
        eprintln!("server path stats: {}", path_summary(&conn, 0..16));
    }
}

async fn serve_stream(mut send: noq::SendStream, mut recv: noq::RecvStream, root: &FsPath) -> Result<()> {
    let req = recv.read_to_end(4096).await.context("reading request")?;
    let req = String::from_utf8_lossy(&req);
    let line = req.lines().next().unwrap_or("");
    let name = line.strip_prefix("GET ").map(str::trim).unwrap_or("");
    let name = name.trim_start_matches('/');
    let file = if name.is_empty() || name.split('/').any(|c| c == ".." || c.is_empty()) {
        None
    } else {
        Some(root.join(name))
    };
    let data = match file {
        Some(f) => tokio::fs::read(&f).await.ok(),
        None => None,
    };
    match data {
        Some(data) => {
            send.write_all(&data).await?;
            send.finish()?;
            let _ = send.stopped().await;
        }
        None => {
            eprintln!("not found: {line:?}");
            let _ = send.reset(VarInt::from_u32(ERR_NOT_FOUND));
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------
// Client

struct ClientOpts {
    urls: Vec<String>,
    output: PathBuf,
    local: Vec<SocketAddr>,
    max_path_id: u32,
    backup: bool,
    abandon_after_ms: Option<u64>,
    json: bool,
}

fn parse_url(url: &str) -> Result<(String, SocketAddr, String)> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| anyhow!("URL must start with https://: {url}"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr: SocketAddr = match authority.parse() {
        Ok(a) => a,
        Err(_) => {
            use std::net::ToSocketAddrs;
            authority
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| anyhow!("cannot resolve {authority}"))?
        }
    };
    let host = authority
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(authority)
        .trim_matches(|c| c == '[' || c == ']')
        .to_string();
    Ok((host, addr, path.to_string()))
}

async fn client(o: ClientOpts) -> Result<()> {
    let mut server: Option<(String, SocketAddr)> = None;
    let mut paths = Vec::new();
    for u in &o.urls {
        let (host, addr, path) = parse_url(u)?;
        match &server {
            Some((_, a)) if *a != addr => bail!("all URLs must name the same server"),
            _ => server = Some((host, addr)),
        }
        paths.push(path);
    }
    let (host, server_addr) = server.unwrap();
    std::fs::create_dir_all(&o.output)?;

    let first = o.local.first().copied().unwrap_or_else(|| {
        if server_addr.is_ipv6() {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 0)
        } else {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)
        }
    });
    let second_ip = o.local.get(1).map(|a| a.ip()).filter(|ip| *ip != first.ip());
    if let Some(second) = o.local.get(1) {
        if second.port() != 0 {
            eprintln!("note: noq picks only the source IP of a path; port of --local {second} is ignored");
        }
    }
    // Two different local IPs: bind the wildcard so the socket can send from both
    // (noq passes the path's local IP with IP_PKTINFO).
    let bind = match second_ip {
        Some(_) if first.is_ipv4() => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), first.port()),
        Some(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), first.port()),
        None => first,
    };

    let mut tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(provider())))
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    if std::env::var_os("SSLKEYLOGFILE").is_some() {
        tls.key_log = Arc::new(rustls::KeyLogFile::new());
    }
    let mut cfg = ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls)?));
    cfg.transport_config(Arc::new(transport(o.max_path_id)));
    let endpoint = Endpoint::client(bind)?;
    eprintln!("bound {}", endpoint.local_addr()?);

    let server_name = if host.parse::<IpAddr>().is_ok() { "localhost".to_string() } else { host };
    let start = Instant::now();
    let conn = endpoint
        .connect_with(cfg, server_addr, &server_name)?
        .await
        .context("handshake")?;
    let multipath = conn.is_multipath_enabled();
    eprintln!(
        "handshake completed alpn={} multipath={} in {:?}",
        alpn_of(&conn),
        multipath,
        start.elapsed()
    );
    spawn_path_logger(&conn, "client");

    // Handles keep each path's stats alive even after it is abandoned.
    let mut handles: BTreeMap<u32, noq::Path> = BTreeMap::new();
    if let Some(p) = conn.path(PathId::ZERO) {
        handles.insert(0, p);
    }

    if multipath {
        // noq does not announce a path's initial status to the peer (no PATH_BACKUP
        // frame for `open_path(.., Backup)`), so open it Available and switch it to
        // Backup right away: that change is sent as PATH_BACKUP.
        let status = PathStatus::Available;
        let tuple = FourTuple::new(server_addr, second_ip);
        let open = open_and_mark(&conn, tuple, status, o.backup);
        eprintln!(
            "opening path {:?} to {server_addr} from {} backup={}",
            open.path_id(),
            second_ip.map(|i| i.to_string()).unwrap_or_else(|| "(same socket)".into()),
            o.backup
        );
        match tokio::time::timeout(Duration::from_secs(10), open_path_retry(&conn, tuple, status, o.backup, open)).await {
            Ok(Ok(path)) => {
                let id = path_num(path.id());
                eprintln!("path {id} open after {:?}", start.elapsed());
                if let Some(ms) = o.abandon_after_ms {
                    let p = path.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        match p.close() {
                            Ok(()) => eprintln!("closed path {id} after {ms} ms"),
                            Err(e) => eprintln!("closing path {id} failed: {e:?}"),
                        }
                    });
                }
                handles.insert(id, path);
            }
            Ok(Err(e)) => eprintln!("opening second path failed: {e:?}"),
            Err(_) => eprintln!("opening second path timed out"),
        }
    }

    let mut tasks = Vec::new();
    for p in paths {
        let conn = conn.clone();
        let out = o.output.clone();
        tasks.push(tokio::spawn(async move { fetch(conn, &p, &out).await }));
    }
    let mut total = 0u64;
    let mut err = None;
    for t in tasks {
        match t.await? {
            Ok(n) => total += n,
            Err(e) => {
                eprintln!("download failed: {e:#}");
                err.get_or_insert(e);
            }
        }
    }
    let elapsed = start.elapsed();
    eprintln!(
        "downloaded {total} bytes in {:.3}s ({:.1} Mbit/s)",
        elapsed.as_secs_f64(),
        total as f64 * 8.0 / elapsed.as_secs_f64() / 1e6
    );

    let mut json_paths = Vec::new();
    for (id, p) in &handles {
        let s = p.stats();
        eprintln!(
            "path {id}: tx_bytes={} rx_bytes={} rtt={:?} lost_packets={} sent_packets={} cwnd={}",
            s.udp_tx.bytes, s.udp_rx.bytes, s.rtt, s.lost_packets, s.sent_packets, s.cwnd
        );
        json_paths.push(serde_json::json!({
            "path_id": id,
            "tx_bytes": s.udp_tx.bytes,
            "rx_bytes": s.udp_rx.bytes,
            "rtt_ms": (s.rtt.as_secs_f64() * 1e6).round() / 1e3,
            "lost_packets": s.lost_packets,
        }));
    }
    conn.close(VarInt::from_u32(0), b"done");
    let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
    if o.json {
        println!(
            "{}",
            serde_json::json!({ "multipath": multipath, "paths": json_paths, "bytes": total })
        );
    }
    match err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

async fn fetch(conn: Connection, path: &str, out: &FsPath) -> Result<u64> {
    let name = path.rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or("index.html");
    let (mut send, mut recv) = conn.open_bi().await?;
    send.write_all(format!("GET {path}\r\n").as_bytes()).await?;
    send.finish()?;
    let mut file = tokio::fs::File::create(out.join(name)).await?;
    let mut n = 0u64;
    while let Some(chunk) = recv
        .read_chunk(usize::MAX)
        .await
        .with_context(|| format!("reading {path}"))?
    {
        n += chunk.len() as u64;
        file.write_all(&chunk).await?;
    }
    file.flush().await?;
    Ok(n)
}

/// `open_path`, then (with `backup`) mark the new path backup at once, which sends
/// PATH_BACKUP: noq does not announce a path's initial status by itself.
fn open_and_mark(conn: &Connection, tuple: FourTuple, status: PathStatus, backup: bool) -> noq::OpenPath {
    let open = conn.open_path(tuple, status);
    if backup {
        if let Some(p) = open.path_id().and_then(|id| conn.path(id)) {
            match p.set_status(PathStatus::Backup) {
                Ok(_) => eprintln!("path {} set to backup", p.id()),
                Err(e) => eprintln!("setting path {} to backup failed: {e:?}", p.id()),
            }
        }
    }
    open
}

/// `open_path` fails with `RemoteCidsExhausted` until the peer has issued connection IDs
/// for the new path ID (PATH_NEW_CONNECTION_ID, sent right after the handshake): retry.
async fn open_path_retry(
    conn: &Connection,
    tuple: FourTuple,
    status: PathStatus,
    backup: bool,
    first: noq::OpenPath,
) -> Result<noq::Path, noq::PathError> {
    let mut open = first;
    loop {
        match open.await {
            Err(noq::PathError::RemoteCidsExhausted) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                open = open_and_mark(conn, tuple, status, backup);
            }
            r => return r,
        }
    }
}

// ------------------------------------------------------------------------------------
// Helpers

fn path_num(id: PathId) -> u32 {
    id.to_string().parse().unwrap_or(u32::MAX)
}

fn alpn_of(conn: &Connection) -> String {
    conn.handshake_data()
        .and_then(|h| h.downcast::<noq::crypto::rustls::HandshakeData>().ok())
        .and_then(|h| h.protocol)
        .map(|p| String::from_utf8_lossy(&p).into_owned())
        .unwrap_or_else(|| "none".into())
}

fn path_summary(conn: &Connection, ids: std::ops::Range<u32>) -> String {
    let mut parts = Vec::new();
    for id in ids {
        if let Some(s) = conn.path_stats(PathId::from(id)) {
            parts.push(format!("[{id}: tx={} rx={}]", s.udp_tx.bytes, s.udp_rx.bytes));
        }
    }
    parts.join(" ")
}

fn spawn_path_logger(conn: &Connection, who: &'static str) {
    let mut events = conn.path_events();
    let weak = conn.weak_handle();
    tokio::spawn(async move {
        use tokio_stream::StreamExt;
        while let Some(ev) = events.next().await {
            match ev {
                Ok(PathEvent::Established { id, .. }) => {
                    let remote = weak
                        .upgrade()
                        .and_then(|c| c.path(id))
                        .and_then(|p| p.remote_address().ok())
                        .map(|a| a.to_string())
                        .unwrap_or_default();
                    eprintln!("{who}: path {id} established remote={remote}")
                }
                Ok(PathEvent::Abandoned { id, reason, .. }) => {
                    eprintln!("{who}: path {id} abandoned: {reason:?}")
                }
                Ok(PathEvent::Discarded { id, path_stats, .. }) => eprintln!(
                    "{who}: path {id} discarded tx={} rx={}",
                    path_stats.udp_tx.bytes, path_stats.udp_rx.bytes
                ),
                Ok(PathEvent::RemoteStatus { id, status, .. }) => {
                    // noq schedules by the local status only: follow the peer's
                    // PATH_BACKUP / PATH_STATUS_AVAILABLE so a backup path stays idle.
                    let res = weak.upgrade().and_then(|c| c.path(id)).map(|p| p.set_status(status));
                    eprintln!("{who}: path {id} remote status {status:?} (local set: {res:?})")
                }
                Ok(other) => eprintln!("{who}: path event {other:?}"),
                Err(e) => eprintln!("{who}: path events lagged: {e:?}"),
            }
        }
    });
}

#[derive(Debug)]
struct AcceptAnyCert(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
