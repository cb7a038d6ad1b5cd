//! Per-path state: everything that belongs to one network path and nothing that the whole
//! connection shares, so that a runtime can drive a path from its own thread.

use std::net::SocketAddr;
use std::time::Duration;

use crate::cc::{self, CongestionController};
use crate::recovery::ecn::EcnState;
use crate::recovery::pacer::Pacer;
use crate::recovery::rtt::RttEstimator;
use crate::time::Instant;

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
    /// Congestion events: reductions of the congestion window (one per recovery period,
    /// RFC 9002 §7.3.2, however many packets it lost; persistent congestion counts too).
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
    /// Liveness probes (two PINGs each) sent because the peer went silent on the path while
    /// heard on another.
    pub liveness_probes: u64,
    /// PATH_ACK frames this path carried for packets of other paths.
    pub acks_for_other_paths: u64,
    /// ACK and PATH_ACK frames sent in this path's packets (its own and those it carried for
    /// other paths; the handshake spaces' on the path that carries them).
    pub acks_sent: u64,
    /// ACK ranges those frames reported (divide by `acks_sent` for ranges per ACK, the measure
    /// of "The Packet Number Space Debate in Multipath QUIC").
    pub ack_ranges_sent: u64,
    /// Copies of MAX_DATA / MAX_STREAM_DATA first sent on another path
    /// (`TransportConfig::flow_control_on_all_paths`).
    pub flow_control_copies: u64,
    /// ECN: "testing", "unknown", "capable" or "failed" (RFC 9000 §13.4.2).
    pub ecn: &'static str,
    /// Packets the network marked CE, as the peer reported them.
    pub ecn_ce: u64,
    /// PATH_ACK frames received on this path that acknowledged packets of other paths.
    pub rx_acks_for_other_paths: u64,
    /// Pacing rate in bytes per second (cwnd / smoothed RTT).
    pub pacing_rate: f64,
    /// Largest datagram sent on the path now (its PLPMTU, RFC 8899).
    pub pmtu: u16,
    /// PMTU probes sent.
    pub pmtu_probes_sent: u64,
    /// PMTU probes acknowledged.
    pub pmtu_probes_acked: u64,
    /// Black holes detected (the PMTU fell back to 1200 bytes).
    pub pmtu_black_holes: u64,
    /// Lifecycle: "validating", "active", "abandoned".
    pub state: &'static str,
    /// The peer asked us to use this path only as a backup.
    pub backup: bool,
}

/// Where a path is in its life (RFC 10069 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathPhase {
    /// Waiting for path validation; carries only path-local frames.
    Validating,
    /// Validated: carries application data.
    Active,
    /// PATH_ABANDON sent or received: nothing more is sent; the state is kept until
    /// `discard_at` to acknowledge late packets (on other paths).
    Abandoned,
}

/// An outstanding PATH_CHALLENGE of ours (RFC 9000 §8.2).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Challenge {
    /// Its payload.
    pub data: [u8; 8],
    /// A (re)transmission is due.
    pub send_pending: bool,
    /// When the last one was sent.
    pub sent_at: Option<Instant>,
    /// Validation fails if no PATH_RESPONSE arrives by then (set on first send).
    pub fail_at: Option<Instant>,
    /// The last datagram carrying it had at least 1200 bytes (RFC 9000 §8.2.1: a path is
    /// only validated once that size is known to get through).
    pub full_size: bool,
}

/// A PATH_CHALLENGE to the address a path used before an apparent migration
/// (RFC 9000 §9.3.3): if the peer is still there, its answer and its next packets bring the
/// path back; if a forwarded or spoofed packet moved the path, this is how we find out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OldPathChallenge {
    /// The previous peer address.
    pub remote: SocketAddr,
    /// The local address we used with it.
    pub local: Option<SocketAddr>,
    /// The challenge payload.
    pub data: [u8; 8],
    /// Not sent yet.
    pub send_pending: bool,
}

/// A PATH_RESPONSE owed to an address the path does not use: the PATH_CHALLENGE came in a
/// probing packet from elsewhere, and the answer must go back where it came from
/// (RFC 9000 §8.2.2) without moving the path (§9.3).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OffPathResponse {
    /// Where the challenge came from.
    pub remote: SocketAddr,
    /// The local address it arrived at.
    pub local: SocketAddr,
    /// The challenge payload.
    pub data: [u8; 8],
    /// Most bytes we may send there: three times what came from it (RFC 9000 §8.1).
    pub budget: usize,
}

/// State of one path.
#[derive(Debug)]
pub(crate) struct PathState {
    /// Path ID (RFC 10069 §1); 0 is the handshake path.
    pub id: u64,
    /// Key of the QUIC Bit greasing of this path's short headers (RFC 9287), drawn from the
    /// connection's generator once the peer advertised grease_quic_bit (`conn/grease.rs`);
    /// `None`: the bit stays set. Held by the path so that it needs nothing else to write
    /// a header.
    pub grease: Option<u64>,
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
    /// The rate its acknowledgements show data arriving at (for reinjection).
    pub delivery: crate::recovery::delivery::DeliveryRate,
    /// Consecutive PTOs without an acknowledgement (RFC 9002 §6.2.1).
    pub pto_count: u32,
    /// Largest datagram we send on this path: the PLPMTU of its PMTU discovery.
    pub mtu: u16,
    /// PMTU discovery of this path (RFC 8899; `conn/path_pmtu.rs`).
    pub pmtud: crate::recovery::pmtud::Pmtud,
    /// The peer's address is validated (RFC 9000 §8.1): the 3x amplification limit is lifted.
    pub validated: bool,
    /// Bytes received from the peer before validation (amplification budget).
    pub amp_received: u64,
    /// Bytes sent to the peer before validation.
    pub amp_sent: u64,
    /// PATH_RESPONSE payloads to send (at most a few, newest wins).
    pub path_responses: Vec<[u8; 8]>,
    /// Where the stream data of the packets this path opens is copied (`recv_arena.rs`).
    pub recv_arena: super::recv_arena::RecvArena,
    /// PATH_RESPONSEs to send to other addresses (at most a few, newest wins).
    pub off_path_responses: Vec<OffPathResponse>,
    /// Counters.
    pub stats: PathStats,
    /// Local address the path sends from (`None`: the runtime's default socket).
    pub local: Option<SocketAddr>,
    /// Lifecycle.
    pub phase: PathPhase,
    /// Our PATH_CHALLENGE in flight, if validating.
    pub challenge: Option<Challenge>,
    /// The peer advised us to use this path only as a backup (PATH_STATUS_BACKUP).
    pub peer_backup: bool,
    /// A PTO fired with no sign of life since, "potentially failed" (De Coninck and
    /// Bonaventure, "Multipath QUIC: Design and Evaluation", CoNEXT 2017, §4.3): not scheduled
    /// for new data.
    pub potentially_failed: bool,
    /// ECN validation of the packets we send on this path.
    pub ecn: crate::recovery::ecn::EcnValidator,
    /// The datagrams of the batch being written are marked ECT(0).
    pub ecn_batch: bool,
    /// When a packet last filled the congestion window: acknowledgements of packets sent
    /// long after that are of an application-limited flight (RFC 9002 §7.8).
    pub window_full_at: Option<Instant>,
    /// Last time a packet arrived on this path.
    pub last_recv: Option<Instant>,
    /// Last time an ack-eliciting 1-RTT packet arrived on this path: the peer sent
    /// something of its own, not just acknowledgements.
    pub last_eliciting_recv: Option<Instant>,
    /// When the last liveness probe was sent (`path_timers.rs`): one per silence.
    pub liveness_probed_at: Option<Instant>,
    /// When an abandoned path's state is dropped.
    pub discard_at: Option<Instant>,
    /// We sent (or queued) our PATH_ABANDON for it.
    pub abandon_sent: bool,
    /// Pacing holds ack-eliciting packets back until then.
    pub pacing_until: Option<Instant>,
    /// Where the peer was before a NAT rebinding, until the new address is validated.
    pub rebind_from: Option<SocketAddr>,
    /// The challenge to the previous address after an apparent migration, until answered
    /// or the next migration.
    pub old_challenge: Option<OldPathChallenge>,
    /// Its packets in flight already copied onto a faster path (reinjection), or passed
    /// with nothing to copy; ranges below the oldest packet in flight are dropped, and at
    /// most [`MAX_REINJECTED_RANGES`] kept.
    pub reinjected: crate::range_set::RangeSet,
    /// Bytes of new application data sent (for the schedulers).
    pub data_bytes_sent: u64,
    /// Its packet numbers in the current key phase (RFC 9001 §6; one phase for all paths,
    /// RFC 10069 §2.5).
    pub key_marks: crate::crypto::key_update::PathKeyMarks,
    /// A batch of this path is being written (1-RTT keys are leased at its first packet).
    pub in_batch: bool,
    /// The 1-RTT keys leased for the batch being written.
    pub send_lease: Option<super::send::SendLease>,
    /// The other paths' ACK offers this path carried: (path ID, offer version), at most
    /// [`super::mail::MAX_CARRIED_RECORDS`].
    pub carried_acks: smallvec::SmallVec<[(u64, u64); 4]>,
}

impl PathState {
    /// A new path towards `remote`.
    pub fn new(id: u64, remote: SocketAddr, config: &TransportConfig, validated: bool) -> Self {
        let mtu = crate::MIN_INITIAL_SIZE as u16;
        Self {
            id,
            grease: None,
            remote,
            data: PacketSpace::new(config.ack_eliciting_threshold),
            rtt: RttEstimator::new(config.initial_rtt),
            cc: cc::build(config.cc, &config.cc_config, u64::from(mtu)),
            pacer: Pacer::new(),
            bytes_in_flight: 0,
            pto_count: 0,
            mtu,
            pmtud: crate::recovery::pmtud::Pmtud::new(config.pmtud, config.max_udp_payload_size),
            validated,
            amp_received: 0,
            amp_sent: 0,
            path_responses: Vec::new(),
            recv_arena: super::recv_arena::RecvArena::default(),
            off_path_responses: Vec::new(),
            stats: PathStats { path_id: id, ..Default::default() },
            local: None,
            phase: PathPhase::Active,
            challenge: None,
            peer_backup: false,
            potentially_failed: false,
            last_recv: None,
            last_eliciting_recv: None,
            liveness_probed_at: None,
            discard_at: None,
            abandon_sent: false,
            pacing_until: None,
            rebind_from: None,
            old_challenge: None,
            reinjected: Default::default(),
            delivery: Default::default(),
            data_bytes_sent: 0,
            key_marks: Default::default(),
            in_batch: false,
            send_lease: None,
            carried_acks: smallvec::SmallVec::new(),
            ecn: Default::default(),
            ecn_batch: false,
            window_full_at: None,
        }
    }

    /// True unless abandoned.
    pub fn is_open(&self) -> bool {
        self.phase != PathPhase::Abandoned
    }

    /// True when the path may carry application data (the connection reads it from the
    /// board, `PathView::is_active`).
    #[cfg(test)]
    pub fn is_active(&self) -> bool {
        self.phase == PathPhase::Active
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
        s.pacing_rate = crate::recovery::pacer::Pacer::rate(s.cwnd, self.rtt.smoothed());
        s.state = match self.phase {
            PathPhase::Validating => "validating",
            PathPhase::Active => "active",
            PathPhase::Abandoned => "abandoned",
        };
        s.backup = self.peer_backup;
        s.pmtu = self.mtu;
        s.pmtu_probes_sent = self.pmtud.probes_sent;
        s.pmtu_probes_acked = self.pmtud.probes_acked;
        s.pmtu_black_holes = self.pmtud.black_holes;
        s.ecn = match self.ecn.state() {
            EcnState::Testing => "testing",
            EcnState::Unknown => "unknown",
            EcnState::Capable => "capable",
            EcnState::Failed => "failed",
        };
        s
    }
}
