//! Connection configuration: transport knobs shared by both sides, plus the TLS configs.

use std::sync::Arc;

use crate::sched::SchedulerKind;
use std::time::Duration;

use crate::cc::{CcAlgorithm, CcConfig};
use crate::stream::StreamsConfig;

/// Default of [`TransportConfig::max_ack_ranges`]: every range a path keeps of the packets
/// it received.
pub const DEFAULT_MAX_ACK_RANGES: usize = crate::recovery::received::DEFAULT_MAX_RANGES;

/// Transport settings for one connection. The defaults suit the open Internet; the lab
/// overrides them per experiment.
#[derive(Debug, Clone)]
pub struct TransportConfig {
    /// Idle timeout we advertise (RFC 9000 §10.1); the effective one is the min of both sides.
    pub max_idle_timeout: Duration,
    /// Stream and connection flow-control windows and stream limits.
    pub streams: StreamsConfig,
    /// Congestion controller for each path.
    pub cc: CcAlgorithm,
    /// Congestion controller parameters.
    pub cc_config: CcConfig,
    /// Largest UDP payload we send. With [`pmtud`](Self::pmtud) (the default) it is the
    /// ceiling of each path's search (RFC 8899 MAX_PLPMTU, also bounded by the peer's
    /// max_udp_payload_size); without, it is used on trust once the handshake is done, so it
    /// must then be what every path carries (1200 always is). Default 1472: an Ethernet
    /// MTU over IPv4 (an IPv6 path finds its 1452 by the search).
    pub max_udp_payload_size: u16,
    /// Datagram Packetization Layer PMTU Discovery (RFC 8899, RFC 9000 §14.3) on each path:
    /// paths start at 1200 bytes and probe up to [`max_udp_payload_size`](Self::max_udp_payload_size)
    /// once validated (`docs/pmtud.md`). On by default.
    pub pmtud: bool,
    /// Largest UDP payload we are willing to receive, advertised to the peer as the
    /// max_udp_payload_size transport parameter (RFC 9000 §18.2) so that its path MTU
    /// discovery stops there. The default is an Ethernet MTU's worth over IPv4 (1472).
    pub max_recv_udp_payload_size: u16,
    /// RTT assumed before the first sample (RFC 9002 §6.2.2: 333 ms).
    pub initial_rtt: Duration,
    /// Largest ACK delay we advertise (max_ack_delay).
    pub max_ack_delay: Duration,
    /// ack_delay_exponent we advertise.
    pub ack_delay_exponent: u8,
    /// Ack-eliciting packets received before an ACK is sent immediately (RFC 9000 §13.2.2).
    pub ack_eliciting_threshold: u64,
    /// How many peer connection IDs we are willing to store (active_connection_id_limit).
    pub active_connection_id_limit: u64,
    /// Initiate a key update after this many 1-RTT packets sent or received in one key
    /// phase (RFC 9001 §6); counting received packets lets a receiver that sends few packets
    /// rotate too. Updates also start at 75 % of the AEAD confidentiality limit.
    pub key_update_interval: u64,
    /// Pace packets (RFC 9002 §7.7).
    pub pacing: bool,
    /// Server: send disable_active_migration (RFC 9000 §18.2). With multipath it forbids
    /// new paths to the server's handshake address only (RFC 10069 §2.2).
    pub disable_active_migration: bool,
    /// Server: the addresses offered in preferred_address (RFC 9000 §9.6, §18.2), one per
    /// family; `None`: not sent. The endpoint must receive on them. A client that moves to
    /// one is followed: the path's local address changes and the path is validated again.
    pub preferred_address: Option<PreferredAddressConfig>,
    /// Client: move to the server's preferred address (RFC 9000 §9.6.1) once the handshake is
    /// confirmed and the address is validated, on connections without multipath.
    pub use_preferred_address: bool,
    /// Mark packets ECT(0) once the handshake is confirmed and react to CE marks, on each
    /// path that passes ECN validation (RFC 9000 §13.4).
    pub ecn: bool,
    /// Largest number of datagrams returned in one GSO batch by `poll_transmit`.
    pub max_gso_segments: usize,
    /// Multipath: the initial_max_path_id to advertise (None disables multipath). A value
    /// of N allows path IDs 0..=N at the start (RFC 10069 §2.1).
    pub initial_max_path_id: Option<u64>,
    /// DATAGRAM frames (RFC 9221): what we advertise and the queues' bounds. Off by default
    /// ([`DatagramConfig::max_frame_size`](super::DatagramConfig::max_frame_size) 0).
    pub datagrams: super::DatagramConfig,
    /// Multipath: which path carries the next packet of new data.
    pub scheduler: SchedulerKind,
    /// Multipath: where PATH_ACK frames go.
    pub ack_policy: AckPolicy,
    /// Most ranges one ACK or PATH_ACK frame reports, the highest first (RFC 9000 §13.2.4
    /// lets a receiver limit them; packets below the lowest reported range are then
    /// acknowledged later or never, and the sender may declare them lost). At least 1; the
    /// default, [`DEFAULT_MAX_ACK_RANGES`], is every range a path keeps.
    pub max_ack_ranges: usize,
    /// Multipath experiment switch: one application packet number space for all paths
    /// instead of one per path (RFC 10069 §1), as in the early multipath drafts and
    /// picoquic's mode that "The Packet Number Space Debate in Multipath QUIC" (seed 003)
    /// compares. Not standard: used only if both endpoints offer it (the private transport
    /// parameter [`crate::transport_params::id::SINGLE_PACKET_NUMBER_SPACE`]); then every
    /// path numbers its packets from one counter, seals them with the plain nonce, and
    /// every ACK frame reports what arrived on all paths (`conn/single_space.rs`).
    pub single_packet_number_space: bool,
    /// Multipath: send MAX_DATA and MAX_STREAM_DATA on every path, so a lossy path cannot
    /// hold back the peer's flow control (MPQUIC sends WINDOW_UPDATE frames on all paths:
    /// De Coninck and Bonaventure, "Multipath QUIC: Design and Evaluation", CoNEXT 2017, §3).
    pub flow_control_on_all_paths: bool,
    /// Multipath: most path IDs ever opened or accepted by this connection, and the limit
    /// on what the peer can make us allocate (path state is created only for IDs we allowed).
    pub max_concurrent_paths: u64,
    /// Give up on a connection whose handshake has not completed this long after it was
    /// created, with [`ConnectionError::HandshakeTimeout`](super::ConnectionError). Separate
    /// from the idle timeout, which a peer that answers now and then keeps from firing, and
    /// which a client would otherwise wait out in full against an address where nothing
    /// listens. `None` (the default): only the idle timeout applies.
    pub handshake_timeout: Option<Duration>,
    /// The QUIC versions this endpoint accepts, most preferred first (default: v1 then v2,
    /// [`crate::VERSION_1`], [`crate::VERSION_2`]). A server answers a client Initial of
    /// another version with a Version Negotiation packet listing these (RFC 9000 §6.1); a
    /// client offers them in its version_information (RFC 9368 §3) and lets the server
    /// move the connection to any of them that is compatible with its first flight
    /// (RFC 9368 §2.1).
    pub versions: Vec<u32>,
    /// Client: the version of the first Initial (default v1, which every QUIC server
    /// speaks; a server that prefers v2, or a client whose `versions` put v2 first, upgrade
    /// the connection by compatible version negotiation, RFC 9368 §2.1). Offered even if
    /// missing from `versions`.
    pub initial_version: u32,
    /// Server: which order picks the version of a connection among those both sides
    /// accept (compatible version negotiation, RFC 9368 §2.3). Off (the default): the
    /// client's, so a connection moves only if the client ranks another version above the
    /// one it started in, and a client that prefers its own version (every client that
    /// does not offer others, every v1-only client) is never moved. On: the server's
    /// `versions` order, e.g. v2 first to move every client that offers v2 to v2.
    /// `mpq server --versions` turns it on.
    pub prefer_server_version_order: bool,
    /// Advertise grease_quic_bit (RFC 9287 §3) and so accept packets whose QUIC Bit (the
    /// fixed bit, 0x40) is 0; when the peer advertises it too, send some packets with the
    /// bit cleared, at random, so that middleboxes cannot ossify on it. On by default.
    pub grease_quic_bit: bool,
}

/// Where a multipath endpoint sends its PATH_ACK frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AckPolicy {
    /// On the path whose packets they acknowledge.
    #[default]
    SamePath,
    /// On the path with the lowest smoothed RTT.
    LowestRtt,
    /// On every path ("The Packet Number Space Debate in Multipath QUIC", §3.2, found that
    /// duplicating ACKs on the paths steadies RTT estimates and speeds transfers up).
    AllPaths,
}

impl std::str::FromStr for AckPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "same" | "same-path" => Ok(AckPolicy::SamePath),
            "lowest-rtt" | "fastest" | "minrtt" => Ok(AckPolicy::LowestRtt),
            "all" | "all-paths" => Ok(AckPolicy::AllPaths),
            other => Err(format!("unknown ACK policy {other:?} (expected same-path, lowest-rtt or all-paths)")),
        }
    }
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self {
            max_idle_timeout: Duration::from_secs(30),
            streams: StreamsConfig::default(),
            cc: CcAlgorithm::Cubic,
            cc_config: CcConfig::default(),
            max_udp_payload_size: 1472,
            pmtud: true,
            max_recv_udp_payload_size: 1472,
            initial_rtt: Duration::from_millis(333),
            max_ack_delay: Duration::from_millis(25),
            ack_delay_exponent: 3,
            ack_eliciting_threshold: 2,
            active_connection_id_limit: 4,
            key_update_interval: 100_000,
            pacing: true,
            disable_active_migration: false,
            preferred_address: None,
            use_preferred_address: true,
            ecn: true,
            max_gso_segments: 10,
            initial_max_path_id: None,
            datagrams: super::DatagramConfig::default(),
            scheduler: SchedulerKind::MinRtt,
            ack_policy: AckPolicy::SamePath,
            max_ack_ranges: DEFAULT_MAX_ACK_RANGES,
            single_packet_number_space: false,
            flow_control_on_all_paths: true,
            max_concurrent_paths: 8,
            handshake_timeout: None,
            versions: vec![crate::VERSION_1, crate::VERSION_2],
            initial_version: crate::VERSION_1,
            prefer_server_version_order: false,
            grease_quic_bit: true,
        }
    }
}

/// Settings a client needs to open a connection.
#[derive(Clone)]
pub struct ClientConfig {
    /// rustls client configuration (TLS 1.3 only, ALPN set).
    pub tls: Arc<rustls::ClientConfig>,
    /// Transport settings.
    pub transport: Arc<TransportConfig>,
}

/// Settings a server applies to every accepted connection.
#[derive(Clone)]
pub struct ServerConfig {
    /// rustls server configuration (TLS 1.3 only, ALPN set, max_early_data_size 0).
    pub tls: Arc<rustls::ServerConfig>,
    /// Transport settings.
    pub transport: Arc<TransportConfig>,
}

/// A server's preferred addresses (RFC 9000 §9.6): where it would rather the client send,
/// one address per family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PreferredAddressConfig {
    /// The IPv4 address and port, if any.
    pub v4: Option<std::net::SocketAddrV4>,
    /// The IPv6 address and port, if any.
    pub v6: Option<std::net::SocketAddrV6>,
}

impl PreferredAddressConfig {
    /// The configuration offering `addrs` (at most one per family).
    pub fn from_addrs(addrs: &[std::net::SocketAddr]) -> Result<Self, String> {
        let mut out = Self::default();
        for a in addrs {
            match a {
                std::net::SocketAddr::V4(v4) if out.v4.is_none() => out.v4 = Some(*v4),
                std::net::SocketAddr::V6(v6) if out.v6.is_none() => out.v6 = Some(*v6),
                _ => return Err(format!("{a}: preferred_address holds one address per family")),
            }
        }
        Ok(out)
    }
}
