//! Glue between the UDP event loop and a QUIC endpoint with an application on top.

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use mpq_io::{Clock, Driver, EventLoop, Transmit, UdpSocket};
use mpq_proto::conn::TransportConfig;
use mpq_proto::endpoint::{ConnectionHandle, Endpoint, EndpointConfig};
use mpq_proto::Instant;

use crate::cli::Common;
use crate::qlog_file::QlogFile;

/// Application logic run by the event loop after every round of I/O.
pub trait App {
    /// Accept connections, move stream data, drain events. `Break` ends the run.
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()>;
}

/// An endpoint and its application as one [`Driver`].
pub struct Runner<A> {
    /// The QUIC endpoint.
    pub endpoint: Endpoint,
    /// The application.
    pub app: A,
    stopping: bool,
}

impl<A: App> Driver for Runner<A> {
    fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        ecn: Option<u8>,
        data: &mut [u8],
    ) {
        self.endpoint.handle_datagram(now, local, remote, ecn, data);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.endpoint.poll_timeout()
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.endpoint.poll_transmit(now, buf).map(|t| Transmit {
            destination: t.destination,
            source: t.source,
            size: t.size,
            segment_size: t.segment_size,
            ecn: t.ecn,
        })
    }

    fn on_wake(&mut self, now: Instant) -> ControlFlow<()> {
        if self.stopping {
            return ControlFlow::Break(());
        }
        if self.app.poll(now, &mut self.endpoint).is_break() {
            // One more round so that a final CONNECTION_CLOSE leaves the socket.
            self.stopping = true;
        }
        ControlFlow::Continue(())
    }
}

/// Transport settings from the command line.
pub fn transport_config(common: &Common) -> Result<TransportConfig> {
    let mut t = TransportConfig {
        cc: common.cc.parse().map_err(anyhow::Error::msg)?,
        max_udp_payload_size: common.mtu.max(1200),
        max_idle_timeout: Duration::from_secs(common.idle_timeout),
        // GSO batches stay under 64 KiB.
        max_gso_segments: (65_000 / usize::from(common.mtu.max(1200))).min(44),
        initial_max_path_id: Some(7),
        ..TransportConfig::default()
    };
    if let Some(n) = common.key_update_every {
        t.key_update_interval = n.max(1);
    }
    Ok(t)
}

/// An endpoint seeded from the operating system's RNG.
pub fn endpoint(server: Option<mpq_proto::conn::ServerConfig>) -> Endpoint {
    use ring::rand::SecureRandom;
    let mut seed = [0u8; 8];
    let _ = ring::rand::SystemRandom::new().fill(&mut seed);
    Endpoint::new(EndpointConfig::with_seed(u64::from_le_bytes(seed)), server)
}

/// Binds `addr` and runs `app` until it stops; returns the app and loop counters.
pub fn run<A: App>(
    addr: SocketAddr,
    endpoint: Endpoint,
    app: A,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(A, mpq_io::LoopStats)> {
    let socket = UdpSocket::bind(addr).with_context(|| format!("binding {addr}"))?;
    let mut ev = EventLoop::new(socket, Clock::new())?;
    on_bound(ev.local_addr());
    let mut runner = Runner { endpoint, app, stopping: false };
    ev.run(&mut runner)?;
    Ok((runner.app, ev.stats))
}

/// Attaches a qlog file to a connection when a directory was given.
pub fn attach_qlog(ep: &mut Endpoint, h: ConnectionHandle, dir: &Option<PathBuf>) {
    let Some(dir) = dir else { return };
    let Some(c) = ep.connection_mut(h) else { return };
    let vantage = if c.side().is_client() { "client" } else { "server" };
    match QlogFile::create(dir, &c.orig_dst_cid().to_string(), vantage) {
        Ok(f) => c.set_qlog(Box::new(f)),
        Err(e) => tracing::warn!(%e, "cannot create qlog file"),
    }
}

/// Client and server configs share this transport config.
pub fn shared(t: TransportConfig) -> Arc<TransportConfig> {
    Arc::new(t)
}
