//! quinn-peer: an HTTP/0.9 (ALPN `hq-interop`) client and server on quinn, the QUIC stack
//! from crates.io, for the mpq interop suite (interop/test_interop.py).
//!
//! It covers the QUIC interop runner's cases quinn supports: handshake, transfer, retry,
//! resumption, zerortt, keyupdate, chacha20 and (client side) connection migration by
//! rebinding to a new socket. quinn speaks QUIC v1 only. Its log lines follow the other
//! peers' ("listening on", "handshake completed alpn=... resumed=... used_0rtt=...",
//! "negotiated quic_version=...") so the suite checks all peers the same way.

// An interop peer, not the sans-IO core: reading the clock is fine here.
#![allow(clippy::disallowed_methods)]

mod client;
mod server;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};

/// The QUIC interop runner's application protocol: HTTP/0.9 over QUIC.
const ALPN: &[u8] = b"hq-interop";

#[derive(Parser)]
#[command(name = "quinn-peer", about = "hq-interop client and server on quinn")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the files under --root over hq-interop.
    Server(server::Opts),
    /// Download URLs (https://HOST:PORT/name) into --output.
    Client(client::Opts),
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
    // A 0-RTT client runs on one thread: the connection's driver, spawned by `connect`, then
    // first runs once the requests are queued, and the first flight carries them in 0-RTT.
    // On two workers the driver could send the Initial alone first; quinn then held the
    // requests until the handshake completed and sent them in 1-RTT (the interop suite's
    // zerortt cases failed about 1 run in 12 so).
    let rt = match &cli.cmd {
        Cmd::Client(o) if o.zero_rtt => tokio::runtime::Builder::new_current_thread().enable_all().build()?,
        _ => tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?,
    };
    match cli.cmd {
        Cmd::Server(o) => rt.block_on(server::run(o)),
        Cmd::Client(o) => {
            let secs = o.timeout;
            match rt.block_on(async { tokio::time::timeout(Duration::from_secs_f64(secs), client::run(o)).await }) {
                Ok(r) => r,
                Err(_) => bail!("timed out after {secs}s"),
            }
        }
    }
}

/// Transport settings both roles share: windows large enough for loopback transfers.
fn transport() -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    t.max_idle_timeout(Some(quinn::IdleTimeout::from(quinn::VarInt::from_u32(30_000))));
    t.stream_receive_window(quinn::VarInt::from_u32(8 << 20));
    t.receive_window(quinn::VarInt::from_u32(32 << 20));
    t.send_window(32 << 20);
    t
}

/// Prints "listening on ADDR" on stdout (the harness waits for it) and stderr.
fn announce(addr: SocketAddr) -> Result<()> {
    use std::io::Write;
    eprintln!("listening on {addr}");
    println!("listening on {addr}");
    std::io::stdout().flush()?;
    Ok(())
}

/// `name` under `root`, or None for a name that could leave it.
fn file_under(root: &std::path::Path, name: &str) -> Option<PathBuf> {
    let name = name.trim().trim_start_matches('/');
    if name.is_empty() || name.split('/').any(|c| c == ".." || c.is_empty()) {
        return None;
    }
    Some(root.join(name))
}
