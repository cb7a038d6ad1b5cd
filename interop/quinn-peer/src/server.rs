//! The hq-interop server: one task per connection, one per request stream.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use quinn::{Endpoint, ServerConfig, VarInt};

/// HTTP/0.9 error for an unknown file (as in the QUIC interop runner's servers).
const ERR_NOT_FOUND: u32 = 0x10;

/// `quinn-peer server` options.
#[derive(clap::Args)]
pub struct Opts {
    /// UDP address to listen on (port 0: any free port, printed as "listening on").
    #[arg(long, default_value = "127.0.0.1:4433")]
    listen: SocketAddr,
    /// Directory whose files are served.
    #[arg(long)]
    root: PathBuf,
    /// Certificate chain (PEM).
    #[arg(long)]
    cert: PathBuf,
    /// Private key (PEM).
    #[arg(long)]
    key: PathBuf,
    /// Write TLS secrets here (NSS key log format); default: $SSLKEYLOGFILE if set.
    #[arg(long)]
    keylog: Option<PathBuf>,
    /// Validate every client's address with a Retry first (RFC 9000 §8.1.2).
    #[arg(long)]
    retry: bool,
    /// Accept 0-RTT from resuming clients (tickets allow early data).
    #[arg(long = "0rtt")]
    zero_rtt: bool,
}

/// Serves until SIGTERM or Ctrl-C.
pub async fn run(o: Opts) -> Result<()> {
    let crypto = crate::tls::server(&o.cert, &o.key, o.keylog.as_deref(), o.zero_rtt)?;
    let mut cfg = ServerConfig::with_crypto(Arc::new(crypto));
    cfg.transport_config(Arc::new(crate::transport()));
    let endpoint = Endpoint::server(cfg, o.listen).with_context(|| format!("binding {}", o.listen))?;
    crate::announce(endpoint.local_addr()?)?;

    let root = Arc::new(o.root);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            inc = endpoint.accept() => {
                let Some(inc) = inc else { break };
                if o.retry && !inc.remote_address_validated() {
                    eprintln!("{}: Retry sent", inc.remote_address());
                    let _ = inc.retry();
                    continue;
                }
                let root = root.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve_conn(inc, root).await {
                        eprintln!("connection failed: {e:#}");
                    }
                });
            }
        }
    }
    endpoint.close(VarInt::from_u32(0), b"bye");
    endpoint.wait_idle().await;
    Ok(())
}

async fn serve_conn(inc: quinn::Incoming, root: Arc<PathBuf>) -> Result<()> {
    let remote = inc.remote_address();
    // 0.5-RTT: take streams before the handshake completes, so requests sent in 0-RTT
    // are seen as such (quinn does not report 0-RTT acceptance on the server side).
    let connecting = inc.accept()?;
    let (conn, established) =
        connecting.into_0rtt().unwrap_or_else(|_| unreachable!("a server can always take 0.5-RTT"));
    let confirmed = Arc::new(AtomicBool::new(false));
    {
        let (conn, confirmed) = (conn.clone(), confirmed.clone());
        tokio::spawn(async move {
            if established.await {
                confirmed.store(true, Ordering::SeqCst);
                eprintln!("{remote}: handshake completed {}", crate::tls::describe(&conn));
                eprintln!("{remote}: negotiated quic_version=00000001");
            }
        });
    }
    loop {
        match conn.accept_bi().await {
            Ok((send, recv)) => {
                if !confirmed.load(Ordering::SeqCst) {
                    eprintln!("{remote}: request data in 0-RTT (stream {})", send.id());
                }
                let root = root.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve_stream(send, recv, &root).await {
                        eprintln!("stream error: {e:#}");
                    }
                });
            }
            Err(e) => {
                eprintln!("{remote}: connection ended: {e}");
                return Ok(());
            }
        }
    }
}

async fn serve_stream(mut send: quinn::SendStream, mut recv: quinn::RecvStream, root: &std::path::Path) -> Result<()> {
    let req = recv.read_to_end(4096).await.context("reading request")?;
    let req = String::from_utf8_lossy(&req);
    let line = req.lines().next().unwrap_or("");
    let file = line.strip_prefix("GET ").and_then(|n| crate::file_under(root, n));
    let data = match file {
        Some(f) => tokio::fs::read(&f).await.ok(),
        None => None,
    };
    match data {
        Some(data) => {
            send.write_all(&data).await?;
            send.finish()?;
            let _ = send.stopped().await;
            eprintln!("stream {}: {line} -> {} bytes", send.id(), data.len());
        }
        None => {
            eprintln!("stream {}: not found: {line:?}", send.id());
            let _ = send.reset(VarInt::from_u32(ERR_NOT_FOUND));
        }
    }
    Ok(())
}
