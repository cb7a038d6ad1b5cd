//! Connection configuration: transport knobs shared by both sides, plus the TLS configs.

use std::sync::Arc;
use std::time::Duration;

use crate::cc::{CcAlgorithm, CcConfig};
use crate::stream::StreamsConfig;

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
    /// Largest UDP payload we send once the path is known to carry it. Without PMTU
    /// discovery this is taken on trust, so the default is the QUIC minimum.
    pub max_udp_payload_size: u16,
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
    /// Largest number of datagrams returned in one GSO batch by `poll_transmit`.
    pub max_gso_segments: usize,
    /// Multipath: the initial_max_path_id to advertise (None disables multipath).
    pub initial_max_path_id: Option<u64>,
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self {
            max_idle_timeout: Duration::from_secs(30),
            streams: StreamsConfig::default(),
            cc: CcAlgorithm::Cubic,
            cc_config: CcConfig::default(),
            max_udp_payload_size: 1200,
            initial_rtt: Duration::from_millis(333),
            max_ack_delay: Duration::from_millis(25),
            ack_delay_exponent: 3,
            ack_eliciting_threshold: 2,
            active_connection_id_limit: 4,
            key_update_interval: 100_000,
            pacing: true,
            max_gso_segments: 10,
            initial_max_path_id: None,
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
