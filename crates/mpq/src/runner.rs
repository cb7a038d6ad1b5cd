//! Glue between the UDP event loop and a QUIC endpoint with an application on top.

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use mpq_io::path_threads::{PathThreads, ThreadReport};
use mpq_io::{Clock, EndpointApp, EventLoop, UdpSocket};
use mpq_proto::cc::CcConfig;
use mpq_proto::conn::TransportConfig;
use mpq_proto::endpoint::{ConnectionHandle, Endpoint, EndpointConfig};
use mpq_proto::Instant;

use crate::cli::{Common, PathArgs, Threads};
use mpq_proto::conn::{Event, PathEvent, PathStatus};
use mpq_proto::path_manager::{PathManager, PathManagerConfig};
use mpq_sim::qlog_file::QlogFile;

/// Application logic run by the event loop after every round of I/O.
pub trait App {
    /// Accept connections, move stream data, drain events. `Break` ends the run.
    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()>;
    /// When the application wants `poll` again even without I/O (e.g. to retry a path).
    fn timeout(&self) -> Option<Instant> {
        None
    }
}

/// An endpoint and its application as one [`Driver`].
pub struct Runner<A> {
    /// The QUIC endpoint.
    pub endpoint: Endpoint,
    /// The application.
    pub app: A,
    stopping: bool,
}

impl<A> Runner<A> {
    /// `app` on top of `endpoint`.
    pub fn new(endpoint: Endpoint, app: A) -> Self {
        Self { endpoint, app, stopping: false }
    }
}

impl<A: App + Send> EndpointApp for Runner<A> {
    fn endpoint(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }

    fn app_timeout(&mut self) -> Option<Instant> {
        if self.stopping {
            // The app is done: wake at once for the final round. Waiting for a timer instead
            // hung the client after its connection drained (no timer left at all).
            return Some(Instant::ZERO);
        }
        self.app.timeout()
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

/// Transport settings from the command line; refuses values that cannot work.
pub fn transport_config(common: &Common) -> Result<TransportConfig> {
    if let Some(cc) = &common.tcp_cc {
        anyhow::bail!("--tcp-cc {cc} applies to the kernel's TCP (--transport tcp-tls or mptcp-tls); QUIC takes --cc");
    }
    // With PMTU discovery --mtu is the search's ceiling; without, the size used on trust.
    let defaults = TransportConfig::default();
    let mtu = common.mtu.unwrap_or(if common.no_pmtud { 1200 } else { defaults.max_udp_payload_size });
    if mtu < 1200 {
        anyhow::bail!("--mtu {mtu}: QUIC needs UDP payloads of at least 1200 bytes (RFC 9000 §14)");
    }
    if mtu > 65_527 {
        anyhow::bail!("--mtu {mtu}: a UDP payload is at most 65527 bytes");
    }
    let handshake_timeout = seconds("--handshake-timeout", common.handshake_timeout)?;
    let mut t = TransportConfig {
        cc: common.cc.parse().map_err(anyhow::Error::msg)?,
        cc_config: CcConfig { hystart: !common.no_hystart, ..defaults.cc_config },
        scheduler: common.scheduler.parse().map_err(anyhow::Error::msg)?,
        ack_policy: common.ack_policy.parse().map_err(anyhow::Error::msg)?,
        initial_max_path_id: if common.no_multipath { None } else { Some(common.max_path_id.min(u32::MAX.into())) },
        max_udp_payload_size: mtu,
        pmtud: !common.no_pmtud,
        max_recv_udp_payload_size: mtu.max(defaults.max_recv_udp_payload_size),
        max_idle_timeout: Duration::from_secs(common.idle_timeout),
        // (The core keeps each batch under 64 KiB at the path's current size.)
        max_gso_segments: 44,
        handshake_timeout: Some(handshake_timeout).filter(|d| !d.is_zero()),
        use_preferred_address: !common.no_preferred_address,
        ..TransportConfig::default()
    };
    if let Some(n) = common.key_update_every {
        t.key_update_interval = n.max(1);
    }
    if common.no_gso {
        t.max_gso_segments = 1;
    }
    if let Some(w) = common.window {
        if w == 0 {
            anyhow::bail!("--window 0: a receive window of 0 bytes lets nothing through");
        }
        t.streams.stream_receive_window = w;
        t.streams.receive_window = w;
        t.streams.max_stream_window = w;
        t.streams.max_connection_window = w;
    }
    if let Some(n) = common.ack_ranges {
        t.max_ack_ranges = n as usize;
    }
    t.single_packet_number_space = common.single_pn_space;
    apply_versions(&mut t, common)?;
    Ok(t)
}

/// `--quic-version`, `--versions` and `--no-grease-quic-bit` (see their help in `cli`).
fn apply_versions(t: &mut TransportConfig, common: &Common) -> Result<()> {
    use mpq_proto::packet::version::{is_implemented, name};
    if let Some(list) = &common.versions {
        if list.is_empty() {
            anyhow::bail!("--versions: give at least one version (v1, v2)");
        }
        if let Some(v) = list.iter().find(|v| !is_implemented(**v)) {
            anyhow::bail!("--versions: {} is not a version mpq speaks (v1, v2)", name(*v));
        }
        t.versions = list.clone();
        // The order given is the server's preference (RFC 9368 §2.3).
        t.prefer_server_version_order = true;
    } else if let Some(v) = common.quic_version {
        t.versions = vec![v];
    }
    if let Some(v) = common.quic_version {
        if !is_implemented(v) {
            anyhow::bail!("--quic-version: {} is not a version mpq speaks (v1, v2)", name(v));
        }
        t.initial_version = v;
    } else if !t.versions.contains(&mpq_proto::VERSION_1) {
        t.initial_version = t.versions[0];
    }
    t.grease_quic_bit = !common.no_grease_quic_bit;
    Ok(())
}

/// A command-line duration in seconds: finite and not negative.
pub fn seconds(flag: &str, secs: f64) -> Result<Duration> {
    if !(0.0..=1e9).contains(&secs) {
        anyhow::bail!("{flag} {secs}: expected a number of seconds (0 or more)");
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Why a client's connection ended, in words that say what to check.
pub fn describe_loss(e: &mpq_proto::conn::ConnectionError, server: SocketAddr, common: &Common) -> String {
    use mpq_proto::conn::ConnectionError as E;
    match e {
        E::HandshakeTimeout { peer_answered: false } => format!(
            "no answer from {server} within {} s (is a QUIC server listening on that address and UDP port? \
             --handshake-timeout sets the wait)",
            common.handshake_timeout
        ),
        E::HandshakeTimeout { peer_answered: true } => {
            format!("the handshake with {server} did not complete within {} s", common.handshake_timeout)
        }
        E::VersionMismatch => {
            let v = mpq_proto::packet::version::name(common.quic_version.unwrap_or(mpq_proto::VERSION_1));
            format!("{server} does not speak QUIC {v}: its Version Negotiation did not list it (try --quic-version v1)")
        }
        E::TimedOut => format!("{server} stopped answering (idle timeout of {} s)", common.idle_timeout),
        other => other.to_string(),
    }
}

/// Logs (at `-v`) what the handshake of connection `h` negotiated.
pub fn log_handshake(ep: &Endpoint, h: ConnectionHandle) {
    let Some(c) = ep.connection(h) else { return };
    let side = if c.side().is_client() { "client" } else { "server" };
    match c.handshake_info() {
        Some(info) => tracing::info!(peer = %c.remote_address(), "{side} handshake complete: {info}"),
        None => tracing::info!(peer = %c.remote_address(), "{side} handshake complete"),
    }
}

/// An endpoint configuration seeded from the operating system's RNG.
pub fn endpoint_config() -> EndpointConfig {
    use ring::rand::SecureRandom;
    let mut seed = [0u8; 8];
    let rng = ring::rand::SystemRandom::new();
    let _ = rng.fill(&mut seed);
    let mut config = EndpointConfig::with_seed(u64::from_le_bytes(seed));
    // The Retry/NEW_TOKEN key gets its own 256 bits, not ones derived from a 64-bit seed.
    let _ = rng.fill(&mut config.token_secret);
    config
}

/// An endpoint seeded from the operating system's RNG.
pub fn endpoint(server: Option<mpq_proto::conn::ServerConfig>) -> Endpoint {
    Endpoint::new(endpoint_config(), server)
}

/// The endpoints of a run: one, or with `--shard N` one per shard. Shards share their
/// stateless reset and token secrets (a client's token or a reset is good whichever shard
/// sees it), draw from RNGs of their own, and prefix their connection IDs with their index
/// (so that a shard passes another's datagrams to it).
pub fn endpoints(server: Option<mpq_proto::conn::ServerConfig>, common: &Common) -> Vec<Endpoint> {
    let config = endpoint_config();
    let Some(n) = common.shard else { return vec![Endpoint::new(config, server)] };
    (0..n)
        .map(|k| {
            let mut c = config.clone();
            c.seed = config.seed.wrapping_add(k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            c.cid_prefix = Some(k as u8);
            Endpoint::new(c, server.clone())
        })
        .collect()
}

/// Binds every address (port 0 picks one) for the runtime `common` names; a failure says
/// which address and what to do.
pub fn bind(addrs: &[SocketAddr], common: &Common) -> Result<Vec<UdpSocket>> {
    addrs
        .iter()
        .map(|a| {
            // The runtime with a thread per path gives each path a socket that shares its
            // local address with the one bound here.
            let shared = common.threads == Threads::PerPath || common.shard.is_some();
            let bound = if shared { UdpSocket::bind_shared(*a) } else { UdpSocket::bind(*a) };
            let socket = bound.map_err(|e| match e.kind() {
                std::io::ErrorKind::AddrInUse => {
                    anyhow::anyhow!("cannot bind {a}: the address is already in use (another process has that UDP port; pick another port)")
                }
                std::io::ErrorKind::AddrNotAvailable => {
                    anyhow::anyhow!("cannot bind {a}: no local interface has that address")
                }
                std::io::ErrorKind::PermissionDenied => {
                    anyhow::anyhow!("cannot bind {a}: permission denied (ports below 1024 need privileges)")
                }
                _ => anyhow::anyhow!("cannot bind {a}: {e}"),
            })?;
            size_buffers(&socket, common)?;
            if common.no_gro {
                socket.set_gro(false).map_err(|e| anyhow::anyhow!("cannot turn UDP GRO off (--no-gro): {e}"))?;
            }
            Ok(socket)
        })
        .collect()
}

/// `--rcvbuf` and `--sndbuf` on one socket; says so when the kernel gives less.
fn size_buffers(socket: &UdpSocket, common: &Common) -> Result<()> {
    if common.rcvbuf.is_none() && common.sndbuf.is_none() {
        return Ok(());
    }
    let (recv, send) = socket
        .set_buffer_sizes(common.rcvbuf, common.sndbuf)
        .map_err(|e| anyhow::anyhow!("cannot set the socket buffer sizes (--rcvbuf/--sndbuf): {e}"))?;
    // Linux reports twice what it grants (the rest is its bookkeeping).
    // Once per flag, not once per socket.
    static WARNED: [std::sync::Once; 2] = [std::sync::Once::new(), std::sync::Once::new()];
    let checks = [
        ("--rcvbuf", common.rcvbuf, recv / 2, "net.core.rmem_max"),
        ("--sndbuf", common.sndbuf, send / 2, "net.core.wmem_max"),
    ];
    for (i, (flag, asked, got, sysctl)) in checks.into_iter().enumerate() {
        if let Some(asked) = asked.filter(|&a| got < a) {
            WARNED[i].call_once(|| {
                eprintln!("warning: {flag} {asked}: the kernel gave {got} bytes (raise {sysctl} to allow more)")
            });
        }
    }
    Ok(())
}

/// What a run did: the sockets' counters summed, and each thread's account.
#[derive(Debug, Default)]
pub struct RunStats {
    /// Socket counters over every thread.
    pub io: mpq_io::LoopStats,
    /// One entry per thread, the main thread's first.
    pub threads: Vec<ThreadReport>,
}

/// Runs `app` over the given sockets (bound by [`bind`] with the same `common`) in the
/// runtime `common` names, until it stops; returns the app and what the run did.
pub fn run_on<A: App + Send + 'static>(
    sockets: Vec<UdpSocket>,
    endpoint: Endpoint,
    app: A,
    common: &Common,
) -> Result<(A, RunStats)> {
    let runner = Runner::new(endpoint, app);
    match common.threads {
        Threads::Single => {
            if let Some(&cpu) = common.cpus.first() {
                mpq_io::path_threads::pin_current_thread(cpu);
            }
            let mut ev = EventLoop::with_sockets(sockets, Clock::new())?;
            let mut runner = runner;
            let cpu0 = mpq_io::thread_cpu_time();
            ev.run(&mut runner)?;
            let report =
                ThreadReport { cpu: mpq_io::thread_cpu_time() - cpu0, io: ev.stats, ..ThreadReport::default() };
            Ok((runner.app, RunStats { io: ev.stats, threads: vec![report] }))
        }
        Threads::PerPath => {
            let rt = PathThreads::new(sockets, Clock::new())?
                .pin_to(common.cpus.clone())
                .socket_buffers(common.rcvbuf, common.sndbuf);
            let rt = if common.no_gro { rt.without_gro() } else { rt };
            let (runner, threads) = rt.run(runner)?;
            let mut io = mpq_io::LoopStats::default();
            for t in &threads {
                io.rx_datagrams += t.io.rx_datagrams;
                io.rx_bytes += t.io.rx_bytes;
                io.rx_calls += t.io.rx_calls;
                io.tx_calls += t.io.tx_calls;
                io.tx_bytes += t.io.tx_bytes;
                io.tx_too_big += t.io.tx_too_big;
            }
            Ok((runner.app, RunStats { io, threads }))
        }
    }
}

/// How long a migration waiting for a spare connection ID from the server waits to try again.
const MIGRATE_RETRY: Duration = Duration::from_millis(50);

/// The path manager's configuration the path options ask for (--local, --server-addr,
/// --path-mode, --max-paths, --backup-paths), over the bound local sockets (the first is
/// the default socket) and the server's addresses.
pub fn path_manager_config(args: &PathArgs, bound: &[SocketAddr], server: SocketAddr) -> Result<PathManagerConfig> {
    let mut locals: Vec<Option<SocketAddr>> = vec![None];
    locals.extend(bound.iter().skip(1).map(|a| Some(*a)));
    let mut remotes = vec![server];
    remotes.extend(args.server_addrs.iter().copied().filter(|a| *a != server));
    Ok(PathManagerConfig {
        locals,
        remotes,
        mode: args.path_mode.parse().map_err(anyhow::Error::msg)?,
        max_paths: args.max_paths.max(1),
        reopen_backoff: Duration::from_millis(500),
        status: if args.backup_paths { PathStatus::Backup } else { PathStatus::Available },
    })
}

/// A client's multipath side: the path manager fed with the connection's path events.
pub struct ClientPaths {
    manager: PathManager,
    abandon_after: Option<Duration>,
    /// When the extra paths are due to be abandoned (`abandon_after` after the first one
    /// was validated).
    abandon_at: Option<Instant>,
    abandoned: bool,
    /// Paths abandoned as asked (PATH_ABANDON queued).
    abandoned_ids: Vec<u64>,
    /// Why an abandonment or a migration asked for on the command line failed.
    error: Option<String>,
    /// `--migrate-after-ms`: when, after the handshake is confirmed, and to which local
    /// address (the second bound one) the connection migrates.
    migrate_after: Option<Duration>,
    migrate_at: Option<Instant>,
    migrate_to: Option<SocketAddr>,
    migrated: bool,
    /// Follows the operating system's changes of the paths' local addresses.
    watch: mpq_io::address_watch::AddressWatch,
}

impl ClientPaths {
    /// Paths over the bound local sockets (the first is the default socket) and the server's
    /// addresses.
    pub fn new(args: &PathArgs, bound: &[SocketAddr], server: SocketAddr) -> Result<Self> {
        let config = path_manager_config(args, bound, server)?;
        let migrate_to = bound.get(1).copied();
        if args.migrate_after_ms.is_some() && migrate_to.is_none() {
            anyhow::bail!("--migrate-after-ms needs a second --local address to move to");
        }
        Ok(Self {
            manager: PathManager::new(config),
            abandon_after: args.abandon_after_ms.map(Duration::from_millis),
            abandon_at: None,
            abandoned: false,
            abandoned_ids: Vec::new(),
            error: None,
            migrate_after: args.migrate_after_ms.map(Duration::from_millis),
            migrate_at: None,
            migrate_to,
            migrated: false,
            watch: mpq_io::address_watch::AddressWatch::new(bound),
        })
    }

    /// Feeds a connection event (path events, and the handshake's confirmation for
    /// `--migrate-after-ms`).
    pub fn on_event(&mut self, now: Instant, ev: &Event) {
        if let (Event::HandshakeConfirmed, Some(after)) = (ev, self.migrate_after) {
            self.migrate_at.get_or_insert(now + after);
        }
        if let Event::Path(pe) = ev {
            tracing::info!(?pe, "path event");
            self.watch.on_event(pe);
            if let (Some(after), PathEvent::Validated { id }) = (self.abandon_after, pe) {
                if *id != 0 && self.abandon_at.is_none() {
                    self.abandon_at = Some(now + after);
                }
            }
            self.manager.on_event(now, pe);
        }
    }

    /// Opens the paths that are missing; abandons the extra ones, or migrates, when asked to.
    pub fn poll(&mut self, now: Instant, ep: &mut Endpoint, h: ConnectionHandle) {
        self.maybe_migrate(now, ep, h);
        if let Some(c) = ep.connection_mut(h) {
            self.watch.poll(now, c);
        }
        if self.manager.pairs().len() < 2 {
            return;
        }
        let Some(c) = ep.connection_mut(h).filter(|c| c.is_multipath() && !c.is_closed()) else { return };
        if self.abandon_after.is_some() {
            if self.abandoned {
                return;
            }
            if self.abandon_at.is_some_and(|at| now >= at) {
                self.abandoned = true;
                for id in c.path_ids().into_iter().filter(|&id| id != 0) {
                    match c.abandon_path(now, id, 0) {
                        Ok(()) => {
                            eprintln!("abandoned path {id} (PATH_ABANDON queued)");
                            self.abandoned_ids.push(id);
                        }
                        Err(e) => {
                            eprintln!("abandoning path {id} failed: {e}");
                            self.error.get_or_insert_with(|| format!("abandoning path {id}: {e}"));
                        }
                    }
                }
                return;
            }
        }
        self.manager.poll(now, c);
    }

    /// `--migrate-after-ms`: moves the connection to the second local address once due
    /// (again a little later while the server has issued no spare connection ID).
    fn maybe_migrate(&mut self, now: Instant, ep: &mut Endpoint, h: ConnectionHandle) {
        let (Some(at), Some(to)) = (self.migrate_at, self.migrate_to) else { return };
        if self.migrated || now < at {
            return;
        }
        let Some(c) = ep.connection_mut(h).filter(|c| !c.is_closed()) else { return };
        match c.migrate(now, to) {
            Ok(()) => {
                self.migrated = true;
                eprintln!("migrated to {to} (new connection ID; the server validates the address)");
            }
            Err(mpq_proto::conn::PathError::NoConnectionId) => self.migrate_at = Some(now + MIGRATE_RETRY),
            Err(e) => {
                self.migrated = true;
                self.error.get_or_insert_with(|| format!("--migrate-after-ms: {e}"));
            }
        }
    }

    /// When to poll again: a retry, the scheduled abandonment or migration.
    pub fn timeout(&self) -> Option<Instant> {
        let abandon = self.abandon_at.filter(|_| !self.abandoned);
        let migrate = self.migrate_at.filter(|_| !self.migrated);
        [self.manager.poll_timeout(), abandon, migrate, self.watch.timeout()].into_iter().flatten().min()
    }

    /// Checks at the end of a run that what the command line asked for happened: an
    /// abandonment that failed is an error; one that never came due is a warning.
    pub fn finish(&self) -> Result<()> {
        if let Some(e) = &self.error {
            anyhow::bail!("{e}");
        }
        if self.abandon_after.is_some() && self.abandoned_ids.is_empty() {
            eprintln!("warning: --abandon-after-ms: no path was abandoned (none opened, or the run ended first)");
        }
        if self.migrate_after.is_some() && !self.migrated {
            eprintln!("warning: --migrate-after-ms: the connection did not migrate (the run ended first)");
        }
        Ok(())
    }
}

/// The local addresses a client binds: the given ones, or one wildcard of the server's family.
pub fn client_locals(args: &PathArgs, server: SocketAddr) -> Result<Vec<SocketAddr>> {
    if !args.locals.is_empty() {
        return Ok(args.locals.clone());
    }
    Ok(vec![if server.is_ipv6() { "[::]:0".parse()? } else { "0.0.0.0:0".parse()? }])
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

/// Makes a qlog file in `dir` (if any) for each connection an endpoint creates, named after
/// the connection's original destination CID, from the `vantage` point ("client" or "server").
pub fn qlog_factory(dir: &Option<PathBuf>, vantage: &'static str) -> Option<mpq_proto::endpoint::QlogFactory> {
    let dir = dir.clone()?;
    Some(Box::new(move |c| match QlogFile::create(&dir, &c.orig_dst_cid().to_string(), vantage) {
        Ok(f) => Some(Box::new(f) as Box<dyn mpq_proto::qlog::QlogSink>),
        Err(e) => {
            tracing::warn!(%e, "cannot create qlog file");
            None
        }
    }))
}

/// Client and server configs share this transport config.
pub fn shared(t: TransportConfig) -> Arc<TransportConfig> {
    Arc::new(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        common: Common,
    }

    fn config(args: &[&str]) -> Result<TransportConfig> {
        let t = T::try_parse_from(std::iter::once("mpq").chain(args.iter().copied()))?;
        transport_config(&t.common)
    }

    #[test]
    fn single_pn_space_reaches_the_transport_config() {
        assert!(!config(&[]).unwrap().single_packet_number_space);
        assert!(config(&["--single-pn-space"]).unwrap().single_packet_number_space);
    }

    #[test]
    fn ack_ranges_reach_the_transport_config() {
        assert_eq!(config(&[]).unwrap().max_ack_ranges, mpq_proto::conn::DEFAULT_MAX_ACK_RANGES);
        assert_eq!(config(&["--ack-ranges", "8"]).unwrap().max_ack_ranges, 8);
        let e = config(&["--ack-ranges", "0"]).unwrap_err().to_string();
        assert!(e.contains("--ack-ranges"), "{e}");
    }

    #[test]
    fn window_and_gso_options_reach_the_transport_config() {
        let d = config(&[]).unwrap();
        assert!(d.max_gso_segments > 1);
        assert!(d.streams.max_connection_window > d.streams.receive_window, "auto-tuning by default");
        assert_eq!(config(&["--no-gso"]).unwrap().max_gso_segments, 1);
        let s = config(&["--window", "12500"]).unwrap().streams;
        assert_eq!(
            [s.stream_receive_window, s.receive_window, s.max_stream_window, s.max_connection_window],
            [12_500; 4],
            "fixed windows, no auto-tuning"
        );
        let e = config(&["--window", "0"]).unwrap_err().to_string();
        assert!(e.contains("--window 0"), "{e}");
    }
}
