//! Packet schedulers: which path carries the next packet of new application data.
//!
//! Scheduling is separate from congestion control. The connection asks its scheduler each
//! time it could send a packet of new data (stream data, flow-control updates) and at least
//! one path has congestion window and pacing credit. Path-local traffic (PATH_CHALLENGE,
//! PATH_RESPONSE, the ACKs of a path, PTO probes) never goes through the scheduler.
//!
//! A scheduler sees [`PathSnapshot`]s, plain values, so every algorithm can be unit-tested
//! over synthetic tables and can run unchanged against the atomics a threaded runtime
//! publishes.

mod ecf;
mod minrtt;
mod pinned;
mod redundant;
mod round_robin;
mod rtt_probe;
#[cfg(test)]
mod tests;
mod weighted;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use smallvec::SmallVec;

use crate::types::StreamId;

/// What a scheduler knows about one path when it decides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathSnapshot {
    /// Path ID.
    pub id: u64,
    /// Smoothed RTT (the configured initial RTT until the first sample).
    pub srtt: Duration,
    /// RTT variation.
    pub rttvar: Duration,
    /// Minimum RTT seen (the initial RTT until the first sample).
    pub min_rtt: Duration,
    /// False until the path produced its first RTT sample.
    pub rtt_sampled: bool,
    /// Congestion window in bytes.
    pub cwnd: u64,
    /// Bytes in flight.
    pub bytes_in_flight: u64,
    /// Largest datagram the path carries.
    pub mtu: u64,
    /// The congestion window and the pacer allow an ack-eliciting packet on this path now.
    pub can_send: bool,
    /// The peer asked us not to use this path while a non-backup path works
    /// (PATH_STATUS_BACKUP, RFC 10069 §3.3), or local policy set it.
    pub backup: bool,
    /// The path hit a retransmission timeout and showed no life since, "potentially failed"
    /// (De Coninck and Bonaventure, "Multipath QUIC: Design and Evaluation", CoNEXT 2017,
    /// §4.3): it is not used for new data until it does.
    pub potentially_failed: bool,
    /// Estimated delivery rate in bytes per second (cwnd / srtt when nothing better exists).
    pub delivery_rate: f64,
    /// Bytes of application data sent on this path so far.
    pub bytes_sent: u64,
}

/// Connection-wide facts a scheduler may use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedContext {
    /// Bytes of stream data waiting to be sent (new and retransmissions), across all streams.
    pub queued_bytes: u64,
}

/// The scheduler's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Send the next packet on `path`; also send a copy of its frames on each path in
    /// `copies` that has window (redundant scheduling, RTT probing of new paths).
    Send {
        /// Path that carries the packet.
        path: u64,
        /// Paths that carry a copy.
        copies: SmallVec<[u64; 2]>,
    },
    /// Send no new data now even though some path could (e.g. BLEST/ECF waiting for the
    /// fast path's window). The connection asks again after the next ACK or timer.
    Wait,
}

impl Decision {
    /// Send on `path` without copies.
    pub fn send(path: u64) -> Self {
        Decision::Send { path, copies: SmallVec::new() }
    }
}

/// A packet scheduler (one per connection).
pub trait PathScheduler: Send + fmt::Debug {
    /// Picks the path for the next packet of new data. `paths` holds every validated,
    /// non-abandoned path (including ones that cannot send now, which matters to BLEST and
    /// ECF); the connection only calls this when at least one of them has `can_send`.
    /// Returning a path whose `can_send` is false is treated as [`Decision::Wait`].
    fn schedule(&mut self, paths: &[PathSnapshot], ctx: &SchedContext) -> Decision;

    /// A runtime with a thread per path (issue C2) asks from each path's thread whether new
    /// data goes on `path` now, instead of asking the connection for its next pick:
    /// `Send` naming `path` sends there, naming another path sends that path's thread to
    /// work, `Wait` sends nothing. By default the answer is [`PathScheduler::schedule`]'s;
    /// schedulers whose pick only rotates (round-robin) or matters only per stream
    /// (pinned) let every eligible path that can send go.
    fn schedule_for(&mut self, _path: u64, paths: &[PathSnapshot], ctx: &SchedContext) -> Decision {
        self.schedule(paths, ctx)
    }

    /// `bytes` of a packet carrying new data went out on `path` (round-robin and weighted
    /// schedulers keep their accounting here).
    fn on_sent(&mut self, _path: u64, _bytes: u64) {}

    /// Whether data of `stream` may go on `path` (stream-to-path pinning). `paths` is the
    /// same table `schedule` saw.
    fn stream_allowed(&self, _stream: StreamId, _path: u64, _paths: &[PathSnapshot]) -> bool {
        true
    }

    /// Name, as accepted by [`SchedulerKind::from_str`].
    fn name(&self) -> &'static str;
}

/// The paths that may carry new data: not potentially failed and, when any usable path is
/// not backup, not backup either (RFC 10069 §3.3). When every path is
/// potentially failed, all of them are returned: sending is the only way to learn that a
/// path came back.
pub fn eligible(paths: &[PathSnapshot]) -> SmallVec<[&PathSnapshot; 8]> {
    let alive: SmallVec<[&PathSnapshot; 8]> = paths.iter().filter(|p| !p.potentially_failed).collect();
    let pool = if alive.is_empty() { paths.iter().collect() } else { alive };
    if pool.iter().any(|p| !p.backup) {
        pool.into_iter().filter(|p| !p.backup).collect()
    } else {
        pool
    }
}

/// `path` is eligible for new data ([`eligible`]) and can send now.
pub(crate) fn ready(path: u64, paths: &[PathSnapshot]) -> bool {
    eligible(paths).iter().any(|p| p.id == path && p.can_send)
}

/// The schedulers [`build`] knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchedulerKind {
    /// Lowest smoothed RTT among the paths with window available (the default).
    #[default]
    MinRtt,
    /// Paths in turn.
    RoundRobin,
    /// Spread in proportion to each path's estimated bandwidth.
    Weighted,
    /// Every packet on every path.
    Redundant,
    /// Min-RTT, but duplicate on paths whose RTT is still unknown (the MPQUIC scheduler of
    /// De Coninck and Bonaventure, CoNEXT 2017, §3).
    RttProbe,
    /// Avoids slow paths when waiting for the fast one finishes sooner (ECF, Lim et al.,
    /// CoNEXT 2017).
    Ecf,
    /// Each stream stays on one path (the stream-to-path pinning of mcMPQUIC).
    Pinned,
}

impl FromStr for SchedulerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "minrtt" | "min-rtt" | "lowest-rtt" => SchedulerKind::MinRtt,
            "rr" | "round-robin" | "roundrobin" => SchedulerKind::RoundRobin,
            "weighted" | "wrr" => SchedulerKind::Weighted,
            "redundant" => SchedulerKind::Redundant,
            "rtt-probe" | "rttprobe" | "duplicate-unknown" => SchedulerKind::RttProbe,
            "ecf" | "blest" => SchedulerKind::Ecf,
            "pinned" | "stream-pinned" => SchedulerKind::Pinned,
            other => {
                return Err(format!(
                    "unknown scheduler {other:?} (expected minrtt, round-robin, weighted, redundant, rtt-probe, \
                     ecf or pinned)"
                ))
            }
        })
    }
}

impl fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SchedulerKind::MinRtt => "minrtt",
            SchedulerKind::RoundRobin => "round-robin",
            SchedulerKind::Weighted => "weighted",
            SchedulerKind::Redundant => "redundant",
            SchedulerKind::RttProbe => "rtt-probe",
            SchedulerKind::Ecf => "ecf",
            SchedulerKind::Pinned => "pinned",
        })
    }
}

pub use ecf::Ecf;
pub use minrtt::MinRtt;
pub use pinned::Pinned;
pub use redundant::Redundant;
pub use round_robin::RoundRobin;
pub use rtt_probe::RttProbe;
pub use weighted::Weighted;

/// Builds a scheduler.
pub fn build(kind: SchedulerKind) -> Box<dyn PathScheduler> {
    match kind {
        SchedulerKind::MinRtt => Box::new(MinRtt),
        SchedulerKind::RoundRobin => Box::new(RoundRobin::default()),
        SchedulerKind::Weighted => Box::new(Weighted::default()),
        SchedulerKind::Redundant => Box::new(Redundant),
        SchedulerKind::RttProbe => Box::new(RttProbe),
        SchedulerKind::Ecf => Box::new(Ecf),
        SchedulerKind::Pinned => Box::new(Pinned),
    }
}
