//! What the commands share: transport settings from the command line, sockets bound and
//! sized, the path manager's plan, qlog files, and connection errors in words.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use mpq_io::UdpSocket;
use mpq_proto::cc::CcConfig;
use mpq_proto::conn::{PathStatus, TransportConfig};
use mpq_proto::path_manager::PathManagerConfig;

use crate::cli::{Common, PathArgs, Threads};
use mpq_sim::qlog_file::QlogFile;

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

/// The local addresses a client binds: the given ones, or one wildcard of the server's family.
pub fn client_locals(args: &PathArgs, server: SocketAddr) -> Result<Vec<SocketAddr>> {
    if !args.locals.is_empty() {
        return Ok(args.locals.clone());
    }
    Ok(vec![if server.is_ipv6() { "[::]:0".parse()? } else { "0.0.0.0:0".parse()? }])
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
