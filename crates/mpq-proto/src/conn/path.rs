//! Per-path state: everything that belongs to one network path and nothing that the whole
//! connection shares, so that a runtime can drive a path from its own thread.

use std::net::SocketAddr;
use std::time::Duration;

use crate::cc::{self, CongestionController};
use crate::recovery::pacer::Pacer;
use crate::recovery::rtt::RttEstimator;

use super::config::TransportConfig;
use super::space::PacketSpace;

/// Counters of one path, exposed to applications and the perf tool.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PathStats {
    /// Path ID (0 for the handshake path).
    pub path_id: u64,
    /// UDP payload bytes sent on the path.
    pub tx_bytes: u64,
    /// UDP payload bytes received on the path.
    pub rx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Packets received (authenticated).
    pub rx_packets: u64,
    /// Packets declared lost.
    pub lost_packets: u64,
    /// Bytes in packets declared lost.
    pub lost_bytes: u64,
    /// Congestion events (loss episodes).
    pub congestion_events: u64,
    /// Smoothed RTT in milliseconds.
    pub rtt_ms: f64,
    /// Minimum RTT in milliseconds.
    pub min_rtt_ms: f64,
    /// Congestion window in bytes.
    pub cwnd: u64,
    /// Bytes in flight.
    pub bytes_in_flight: u64,
    /// Probe timeouts that fired.
    pub pto_count: u64,
}

/// State of one path.
#[derive(Debug)]
pub(crate) struct PathState {
    /// Path ID (draft-ietf-quic-multipath-21 §2); 0 is the handshake path.
    pub id: u64,
    /// The peer's address on this path.
    pub remote: SocketAddr,
    /// The application data packet number space of this path.
    pub data: PacketSpace,
    /// RTT estimator.
    pub rtt: RttEstimator,
    /// Congestion controller.
    pub cc: Box<dyn CongestionController>,
    /// Pacer.
    pub pacer: Pacer,
    /// Bytes in flight on this path, over every packet number space it carries.
    pub bytes_in_flight: u64,
    /// Consecutive PTOs without an acknowledgement (RFC 9002 §6.2.1).
    pub pto_count: u32,
    /// Largest datagram we send on this path.
    pub mtu: u16,
    /// The peer's address is validated (RFC 9000 §8.1): the 3x amplification limit is lifted.
    pub validated: bool,
    /// Bytes received from the peer before validation (amplification budget).
    pub amp_received: u64,
    /// Bytes sent to the peer before validation.
    pub amp_sent: u64,
    /// PATH_RESPONSE payloads to send (at most a few, newest wins).
    pub path_responses: Vec<[u8; 8]>,
    /// Counters.
    pub stats: PathStats,
}

impl PathState {
    /// A new path towards `remote`.
    pub fn new(id: u64, remote: SocketAddr, config: &TransportConfig, validated: bool) -> Self {
        let mtu = crate::MIN_INITIAL_SIZE as u16;
        Self {
            id,
            remote,
            data: PacketSpace::new(config.ack_eliciting_threshold),
            rtt: RttEstimator::new(config.initial_rtt),
            cc: cc::build(config.cc, &config.cc_config, u64::from(mtu)),
            pacer: Pacer::new(),
            bytes_in_flight: 0,
            pto_count: 0,
            mtu,
            validated,
            amp_received: 0,
            amp_sent: 0,
            path_responses: Vec::new(),
            stats: PathStats { path_id: id, ..Default::default() },
        }
    }

    /// Bytes we may still send before the address is validated (RFC 9000 §8.1), or
    /// `u64::MAX` once it is.
    pub fn amplification_budget(&self) -> u64 {
        if self.validated {
            u64::MAX
        } else {
            (self.amp_received * 3).saturating_sub(self.amp_sent)
        }
    }

    /// Probe timeout base (RFC 9002 §6.2.1) without max_ack_delay.
    pub fn pto_base(&self) -> Duration {
        self.rtt.pto_base()
    }

    /// Refreshes the derived statistics.
    pub fn snapshot(&self) -> PathStats {
        let mut s = self.stats.clone();
        s.rtt_ms = self.rtt.smoothed().as_secs_f64() * 1e3;
        s.min_rtt_ms = self.rtt.min().as_secs_f64() * 1e3;
        s.cwnd = self.cc.window();
        s.bytes_in_flight = self.bytes_in_flight;
        s
    }
}
