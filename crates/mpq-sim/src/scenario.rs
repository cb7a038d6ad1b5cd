//! One-call experiments: a [`Scenario`] (paths, workload, scheduler, congestion control,
//! failures, seed) runs the real QUIC stack over a [`Topology::parallel`] network (or access
//! links into a shared bottleneck, see [`crate::bottleneck`]) in virtual
//! time and returns a [`ScenarioResult`] that serializes to JSON.
//!
//! The client connects over path 0 and, once the handshake completes, asks the core to open
//! one path per other link (see [`PathOpener`](crate::apps::PathOpener)). A core or peer
//! without multipath refuses; the run then uses path 0 only and says so
//! ([`ScenarioResult::multipath`], [`ScenarioResult::path_errors`]).
//!
//! # Example
//!
//! ```
//! use mpq_sim::scenario::Scenario;
//!
//! let s = Scenario::download(vec!["50mbit/20ms/queue=30ms".parse().unwrap()], 200_000);
//! let r = s.run().unwrap();
//! assert!(r.completed && r.data_ok);
//! assert_eq!(r.bytes, 200_000);
//! println!("{}", r.goodput_bps);
//! ```

use std::rc::Rc;
use std::time::Duration;

use mpq_proto::cc::{CcAlgorithm, CcConfig};
use mpq_proto::conn::{AckPolicy, ConnectionStats, PathStats, TransportConfig, DEFAULT_MAX_ACK_RANGES};
use mpq_proto::endpoint::{Endpoint, EndpointConfig};
use mpq_proto::qlog::QlogSink;
use mpq_proto::sched::SchedulerKind;
use mpq_proto::Instant;
use serde::Serialize;

use crate::apps::{DownloadClient, DownloadServer, PathOpener, ReqRespClient};
use crate::bottleneck::{self, Bottleneck, CompetitorResult};
use crate::link::LinkConfig;
use crate::quic::{QuicNode, SimApp};
use crate::sim::{NodeId, Simulator};
use crate::topology::Topology;

/// Largest request/response size: the client keeps one request in memory.
pub const MAX_REQUEST_SIZE: u64 = 16 * 1024 * 1024;

/// What the client does.
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// Download [`Scenario::size`] bytes on one stream.
    Download,
    /// Interactive traffic, as in the handover experiment of "Multipath QUIC: Design and
    /// Evaluation" (CoNEXT 2017, §4.3): `count` requests of `size` bytes, one every `interval`,
    /// each answered with `size` bytes (see [`ReqRespClient`](crate::apps::ReqRespClient)).
    ReqResp {
        /// Request and response size in bytes (at least 8).
        size: u64,
        /// Time between two requests.
        interval: Duration,
        /// Number of requests.
        count: u64,
    },
}

/// A complete experiment; see the [module docs](self).
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// One link per path, path 0 first (it carries the handshake). Each is used in both
    /// directions.
    pub links: Vec<LinkConfig>,
    /// Bytes to download ([`Workload::Download`]).
    pub size: u64,
    /// Multipath packet scheduler.
    pub scheduler: SchedulerKind,
    /// Congestion controller of every path.
    pub cc: CcAlgorithm,
    /// HyStart++ (RFC 9406) in every path's initial slow start ([`CcConfig::hystart`]).
    pub hystart: bool,
    /// Where PATH_ACKs go.
    pub ack_policy: AckPolicy,
    /// Most ranges in one ACK frame, both endpoints ([`TransportConfig::max_ack_ranges`]).
    pub ack_ranges: usize,
    /// One packet number space for all paths, both endpoints
    /// ([`TransportConfig::single_packet_number_space`]).
    pub single_pn_space: bool,
    /// Link failures: path index and the time (from the start) from which its link loses
    /// everything in both directions.
    pub fail: Vec<(usize, Duration)>,
    /// The client's traffic.
    pub workload: Workload,
    /// Seed of the links' random processes and of both endpoints.
    pub seed: u64,
    /// Stop after this much virtual time; `None` picks a generous limit from the workload
    /// ([`time_limit`](Self::time_limit)).
    pub max_time: Option<Duration>,
    /// Offer multipath (on both endpoints) when there is more than one link (the default).
    /// Off, the client still asks for the extra paths and records the refusals.
    pub multipath: bool,
    /// A bottleneck shared by every path, behind [`links`](Self::links) (which become access
    /// links), with or without a competing flow (see [`crate::bottleneck`]).
    pub bottleneck: Option<Bottleneck>,
    /// The QUIC version of the connection: v1 (RFC 9000, the default: the endpoints'
    /// default settings, which start in v1 and stay there) or v2 (RFC 9369: both endpoints
    /// speak only v2, the client's first Initial included).
    pub quic_version: u32,
}

/// Why a scenario could not run or failed its check.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The scenario is inconsistent (no link, failure of a missing link, ...).
    #[error("invalid scenario: {0}")]
    Invalid(String),
    /// Received data differs from what the server sent: a bug in the stack.
    #[error("received data differs from the pattern at byte {offset}")]
    CorruptData {
        /// Offset of the first wrong byte (in the download, or in the failing response).
        offset: u64,
        /// Everything else the run measured.
        result: Box<ScenarioResult>,
    },
}

/// One request of a request/response run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestStat {
    /// When it was issued, in seconds from the start.
    pub sent_s: f64,
    /// Issued → whole response received, in milliseconds; `None` if never answered.
    pub delay_ms: Option<f64>,
}

/// What the network saw on one path's own links (ground truth, independent of the core).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkUsage {
    /// Path index.
    pub path: usize,
    /// Bytes delivered client → server.
    pub up_bytes: u64,
    /// Bytes delivered server → client.
    pub down_bytes: u64,
    /// Packets dropped client → server (queue, loss, failure).
    pub up_dropped: u64,
    /// Packets dropped server → client.
    pub down_dropped: u64,
}

/// The outcome of [`Scenario::run`]. Times are virtual and count from the client's first
/// packet.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    /// `"download"` or `"reqresp"`.
    pub workload: &'static str,
    /// The download completed, or every request was answered.
    pub completed: bool,
    /// Application bytes the client received (download bytes, or response bytes).
    pub bytes: u64,
    /// When the workload completed, in seconds; `None` if it did not.
    pub completion_s: Option<f64>,
    /// Time the goodput is measured over: the completion time, or the time the run stopped.
    pub duration_s: f64,
    /// `bytes * 8 / duration_s`.
    pub goodput_bps: f64,
    /// Every received byte matched what the server sent.
    pub data_ok: bool,
    /// Largest request delay in milliseconds (request/response runs with an answer only).
    pub max_delay_ms: Option<f64>,
    /// Largest delay of the requests answered after the first link failure (request/response
    /// runs with a failure only): what the handover figure of "Multipath QUIC: Design and
    /// Evaluation" (CoNEXT 2017, Fig. 11) is about.
    pub max_delay_after_failure_ms: Option<f64>,
    /// Requests issued.
    pub requests_sent: u64,
    /// Requests whose whole response arrived.
    pub requests_answered: u64,
    /// Every request (request/response runs only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<RequestStat>,
    /// The connection negotiated multipath.
    pub multipath: bool,
    /// IDs of the extra paths the client opened.
    pub paths_opened: Vec<u64>,
    /// Why extra paths could not be opened (one entry per refused attempt).
    pub path_errors: Vec<String>,
    /// How the connection failed, if it did.
    pub error: Option<String>,
    /// The client's per-path statistics.
    pub paths: Vec<PathStats>,
    /// The server's per-path statistics (the sender of a download: its `lost_bytes` are the
    /// bytes it had to retransmit). Empty if the server had no connection left at the end.
    pub server_paths: Vec<PathStats>,
    /// Per-path link counters.
    pub links: Vec<LinkUsage>,
    /// Datagrams the hosts sent from an address they do not own (should be 0: a non-zero
    /// count means the core picked a wrong source address).
    pub unknown_sources: u64,
    /// Datagrams the network could not route (sent between addresses with no path).
    pub unroutable: u64,
    /// The seed the run used.
    pub seed: u64,
    /// Simulator events processed (a cost measure).
    pub events: u64,
    /// Hash of every link delivery and drop: equal for identical runs.
    pub trace_hash: u64,
    /// The competing flow at a shared bottleneck, if the scenario has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub competitor: Option<CompetitorResult>,
}

/// Makes a qlog sink for a new connection, given its vantage point (`"client"` or
/// `"server"`) and its original destination connection ID (hex); `None` for no qlog.
pub type QlogFactory = Rc<dyn Fn(&str, &str) -> Option<Box<dyn QlogSink>>>;

/// Where a run stands, for progress displays.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Virtual time.
    pub now: Duration,
    /// The run stops at this virtual time at the latest.
    pub time_limit: Duration,
    /// Application bytes received so far.
    pub bytes: u64,
    /// Requests answered so far.
    pub requests_answered: u64,
}

/// Optional observers of a run.
#[derive(Default)]
pub struct RunHooks<'a> {
    /// Called for each connection (client and server) to get a qlog sink.
    pub qlog: Option<QlogFactory>,
    /// Called every 100 ms of virtual time.
    pub progress: Option<&'a mut dyn FnMut(&Progress)>,
}

/// How often [`RunHooks::progress`] is called, in virtual time.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

impl Scenario {
    /// Downloads `size` bytes over `links` with the default scheduler (min-RTT), CUBIC,
    /// same-path ACKs, no failure, seed 1 and an automatic time limit.
    pub fn download(links: Vec<LinkConfig>, size: u64) -> Self {
        Self {
            links,
            size,
            scheduler: SchedulerKind::default(),
            cc: CcAlgorithm::Cubic,
            hystart: CcConfig::default().hystart,
            ack_policy: AckPolicy::default(),
            ack_ranges: DEFAULT_MAX_ACK_RANGES,
            single_pn_space: false,
            fail: Vec::new(),
            workload: Workload::Download,
            seed: 1,
            max_time: None,
            multipath: true,
            bottleneck: None,
            quic_version: mpq_proto::VERSION_1,
        }
    }

    /// The request/response workload ([`Workload::ReqResp`]) over `links` (other settings as in
    /// [`download`](Self::download)).
    pub fn reqresp(links: Vec<LinkConfig>, size: u64, interval: Duration, count: u64) -> Self {
        Self { workload: Workload::ReqResp { size, interval, count }, ..Self::download(links, 0) }
    }

    /// The virtual time after which the run stops: [`max_time`](Self::max_time), or 60 s
    /// plus ten times the download's transfer time at the best rate a link allows (its
    /// rate, or under random loss what a loss-based congestion controller can reach there,
    /// [`achievable_bps`]), or 60 s plus
    /// the request schedule. The 60 s cover the handshake and, on a dead path, the 30 s idle
    /// timeout that ends the connection. A shared bottleneck slower than the fastest link
    /// counts instead of it.
    pub fn time_limit(&self) -> Duration {
        if let Some(t) = self.max_time {
            return t;
        }
        let base = Duration::from_secs(60);
        match self.workload {
            Workload::Download => {
                let best = self.links.iter().map(achievable_bps).max();
                let bn = self.bottleneck.as_ref().map(|b| b.link.rate_bps).filter(|&r| r > 0);
                let best = match (best, bn) {
                    (Some(b), Some(r)) => Some(b.min(r)),
                    (b, _) => b,
                };
                let secs = self.size as f64 * 8.0 / best.unwrap_or(1) as f64;
                base + Duration::from_secs_f64((10.0 * secs).min(1e7))
            }
            Workload::ReqResp { interval, count, .. } => {
                base + interval.saturating_mul(u32::try_from(count).unwrap_or(u32::MAX))
            }
        }
    }

    /// The transport settings both endpoints use: multipath offered (with one path ID per
    /// link) when there is more than one link and [`multipath`](Self::multipath) is on.
    pub fn transport(&self) -> TransportConfig {
        let n = self.links.len() as u64;
        let defaults = TransportConfig::default();
        // (v1 keeps the defaults, so that the reference scenarios stay byte for byte.)
        let (initial_version, versions) = if self.quic_version == mpq_proto::VERSION_1 {
            (defaults.initial_version, defaults.versions.clone())
        } else {
            (self.quic_version, vec![self.quic_version])
        };
        TransportConfig {
            cc: self.cc,
            cc_config: CcConfig { hystart: self.hystart, ..defaults.cc_config },
            scheduler: self.scheduler,
            ack_policy: self.ack_policy,
            max_ack_ranges: self.ack_ranges,
            single_packet_number_space: self.single_pn_space,
            initial_max_path_id: (n > 1 && self.multipath).then(|| n - 1),
            max_concurrent_paths: defaults.max_concurrent_paths.max(n),
            initial_version,
            versions,
            ..defaults
        }
    }

    fn validate(&self) -> Result<(), ScenarioError> {
        let bad = |m: String| Err(ScenarioError::Invalid(m));
        if self.links.is_empty() {
            return bad("at least one link is needed".into());
        }
        if !mpq_proto::packet::version::is_implemented(self.quic_version) {
            return bad(format!(
                "QUIC version {} is not one mpq speaks (v1, v2)",
                mpq_proto::packet::version::name(self.quic_version)
            ));
        }
        if self.links.len() > 255 {
            return bad(format!("{} links; at most 255 are supported", self.links.len()));
        }
        for &(i, _) in &self.fail {
            if i >= self.links.len() {
                return bad(format!(
                    "cannot fail link {i}: there are {} links (0..={})",
                    self.links.len(),
                    self.links.len() - 1
                ));
            }
        }
        if let Workload::ReqResp { size, interval, count } = self.workload {
            if interval.is_zero() {
                return bad("the request interval must be positive".into());
            }
            if count == 0 {
                return bad("at least one request is needed".into());
            }
            if !(8..=MAX_REQUEST_SIZE).contains(&size) {
                return bad(format!("request size {size} B is outside 8 B..={MAX_REQUEST_SIZE} B"));
            }
        }
        if self.max_time.is_some_and(|t| t.is_zero()) {
            return bad("the time limit must be positive".into());
        }
        if self.ack_ranges == 0 {
            return bad("an ACK frame reports at least one range (ack ranges 0)".into());
        }
        Ok(())
    }

    /// Runs the scenario. Deterministic: the same scenario gives the same result (and
    /// [`trace_hash`](ScenarioResult::trace_hash)).
    pub fn run(&self) -> Result<ScenarioResult, ScenarioError> {
        self.run_with(RunHooks::default())
    }

    /// [`run`](Self::run) with qlog output and progress reports.
    pub fn run_with(&self, mut hooks: RunHooks<'_>) -> Result<ScenarioResult, ScenarioError> {
        self.validate()?;
        let mut topo = bottleneck::topology(&self.links, self.bottleneck.as_ref(), self.seed);
        let competitor =
            self.bottleneck.as_ref().filter(|b| b.competitor).map(|_| bottleneck::add_competitor(&mut topo, self.seed));
        for &(i, t) in &self.fail {
            topo.fail_path(i, Instant::ZERO + t);
        }
        let (client_cfg, server_cfg) = mpq_proto::testing::seeded_configs(self.transport(), self.seed);
        let client_ep = Endpoint::new(EndpointConfig::with_seed(self.seed), None);
        let server_ep = Endpoint::new(EndpointConfig::with_seed(self.seed.wrapping_add(1)), Some(server_cfg));
        let mut server = topo.server_node(server_ep, DownloadServer::default());
        attach_qlog(&mut server, &hooks.qlog, "server");
        let server_id = topo.add_server(server);
        let server_addr = topo.paths[0].server;
        let extra = topo.extra_path_pairs();
        let limit = self.time_limit();
        let mut run = match self.workload {
            Workload::Download => {
                let app = DownloadClient::new(client_cfg, server_addr, self.size).with_paths(extra);
                let mut node = topo.client_node(client_ep, app);
                attach_qlog(&mut node, &hooks.qlog, "client");
                let id = topo.add_client(node);
                drive(&mut topo.sim, limit, &mut hooks, |sim| {
                    let a = &sim.node::<QuicNode<DownloadClient>>(id).app;
                    (a.finished(), a.received, 0)
                });
                Outcome::from_download(&topo.sim, id)
            }
            Workload::ReqResp { size, interval, count } => {
                let app = ReqRespClient::new(client_cfg, server_addr, size, interval, count).with_paths(extra);
                let mut node = topo.client_node(client_ep, app);
                attach_qlog(&mut node, &hooks.qlog, "client");
                let id = topo.add_client(node);
                drive(&mut topo.sim, limit, &mut hooks, |sim| {
                    let a = &sim.node::<QuicNode<ReqRespClient>>(id).app;
                    let bytes = a.requests.iter().map(|r| r.received).sum();
                    (a.finished(), bytes, a.answered() as u64)
                });
                Outcome::from_reqresp(&topo.sim, id)
            }
        };
        let server = topo.sim.node::<QuicNode<DownloadServer>>(server_id);
        run.unknown_sources += server.unknown_sources();
        run.server_stats =
            server.endpoint.handles().first().and_then(|&h| server.endpoint.connection(h)).map(|c| c.stats());
        let first_failure = self.fail.iter().map(|&(_, t)| t).min();
        let mut result = run.finish(self, &topo, first_failure);
        result.competitor = competitor.map(|id| bottleneck::competitor_result(&topo.sim, id, result.duration_s));
        match run.corrupt_at {
            Some(offset) => Err(ScenarioError::CorruptData { offset, result: Box::new(result) }),
            None => Ok(result),
        }
    }
}

fn attach_qlog<A: SimApp>(node: &mut QuicNode<A>, factory: &Option<QlogFactory>, vantage: &'static str) {
    let Some(f) = factory.clone() else { return };
    node.set_connection_hook(Box::new(move |_, c| {
        if let Some(sink) = f(vantage, &c.orig_dst_cid().to_string()) {
            c.set_qlog(sink);
        }
    }));
}

/// Runs until `status` says finished or the limit, reporting progress between slices.
fn drive(
    sim: &mut Simulator,
    limit: Duration,
    hooks: &mut RunHooks<'_>,
    status: impl Fn(&Simulator) -> (bool, u64, u64),
) {
    let end = Instant::ZERO + limit;
    loop {
        let slice_end = (sim.now() + PROGRESS_EVERY).min(end);
        let finished = sim.run_while(|s| !status(s).0, slice_end);
        if let Some(p) = hooks.progress.as_mut() {
            let (_, bytes, requests_answered) = status(sim);
            p(&Progress { now: sim.now().since_epoch(), time_limit: limit, bytes, requests_answered });
        }
        if finished || sim.now() >= end {
            return;
        }
    }
}

/// What the client app measured, independent of its type.
struct Outcome {
    workload: &'static str,
    done_at: Option<Instant>,
    bytes: u64,
    corrupt_at: Option<u64>,
    requests: Vec<(Instant, Option<Instant>)>,
    error: Option<String>,
    multipath: bool,
    opener: PathOpener,
    stats: Option<ConnectionStats>,
    server_stats: Option<ConnectionStats>,
    unknown_sources: u64,
}

fn live_stats<A: SimApp>(
    node: &QuicNode<A>,
    h: Option<mpq_proto::endpoint::ConnectionHandle>,
) -> Option<ConnectionStats> {
    h.and_then(|h| node.endpoint.connection(h)).map(|c| c.stats())
}

impl Outcome {
    fn from_download(sim: &Simulator, id: NodeId) -> Self {
        let node = sim.node::<QuicNode<DownloadClient>>(id);
        let a = &node.app;
        Outcome {
            workload: "download",
            done_at: a.done_at,
            bytes: a.received,
            corrupt_at: a.corrupt_at,
            requests: Vec::new(),
            error: a.error.clone(),
            multipath: a.is_multipath(),
            opener: a.paths().clone(),
            stats: a.final_stats().cloned().or_else(|| live_stats(node, a.handle())),
            server_stats: None,
            unknown_sources: node.unknown_sources(),
        }
    }

    fn from_reqresp(sim: &Simulator, id: NodeId) -> Self {
        let node = sim.node::<QuicNode<ReqRespClient>>(id);
        let a = &node.app;
        Outcome {
            workload: "reqresp",
            done_at: a.done_at,
            bytes: a.requests.iter().map(|r| r.received).sum(),
            corrupt_at: a.corrupt_at.map(|(_, off)| off),
            requests: a.requests.iter().map(|r| (r.sent_at, r.answered_at)).collect(),
            error: a.error().map(str::to_owned),
            multipath: a.is_multipath(),
            opener: a.paths().clone(),
            stats: a.final_stats().cloned().or_else(|| live_stats(node, a.handle())),
            server_stats: None,
            unknown_sources: node.unknown_sources(),
        }
    }

    fn finish(&mut self, scenario: &Scenario, topo: &Topology, first_failure: Option<Duration>) -> ScenarioResult {
        let sim = &topo.sim;
        let secs = |t: Instant| t.since_epoch().as_secs_f64();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let duration_s = secs(self.done_at.unwrap_or(sim.now()));
        let requests: Vec<RequestStat> = self
            .requests
            .iter()
            .map(|&(sent, answered)| RequestStat { sent_s: secs(sent), delay_ms: answered.map(|a| ms(a - sent)) })
            .collect();
        let max_of =
            |it: &mut dyn Iterator<Item = f64>| it.fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.max(d))));
        let max_delay_ms = max_of(&mut requests.iter().filter_map(|r| r.delay_ms));
        let max_delay_after_failure_ms = first_failure.and_then(|f| {
            let f = Instant::ZERO + f;
            max_of(&mut self.requests.iter().filter_map(|&(s, a)| a.filter(|&a| a > f).map(|a| ms(a - s))))
        });
        let links = topo
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let (up, down) = (sim.link_stats(p.own.0), sim.link_stats(p.own.1));
                LinkUsage {
                    path: i,
                    up_bytes: up.delivered_bytes,
                    down_bytes: down.delivered_bytes,
                    up_dropped: up.dropped(),
                    down_dropped: down.dropped(),
                }
            })
            .collect();
        let answered = self.requests.iter().filter(|r| r.1.is_some()).count() as u64;
        ScenarioResult {
            workload: self.workload,
            completed: self.done_at.is_some(),
            bytes: self.bytes,
            completion_s: self.done_at.map(secs),
            duration_s,
            goodput_bps: if duration_s > 0.0 { self.bytes as f64 * 8.0 / duration_s } else { 0.0 },
            data_ok: self.corrupt_at.is_none(),
            max_delay_ms,
            max_delay_after_failure_ms,
            requests_sent: self.requests.len() as u64,
            requests_answered: answered,
            requests,
            multipath: self.multipath,
            paths_opened: self.opener.opened.iter().map(|p| p.0).collect(),
            path_errors: self.opener.errors.iter().map(|(l, r, e)| format!("{l} -> {r}: {e}")).collect(),
            error: self.error.clone(),
            paths: self.stats.take().map(|s| s.paths).unwrap_or_default(),
            server_paths: self.server_stats.take().map(|s| s.paths).unwrap_or_default(),
            links,
            unknown_sources: self.unknown_sources,
            unroutable: sim.stats().unroutable,
            seed: scenario.seed,
            events: sim.stats().events,
            trace_hash: sim.trace_hash(),
            competitor: None,
        }
    }
}

/// The rate a loss-based congestion controller can sustain on `link`: its serialization rate
/// (an unlimited link counts as 10 Gbit/s) or, under random loss, the Mathis et al. bound
/// `1.22 * MSS / (RTT * sqrt(p))` ("The Macroscopic Behavior of the TCP Congestion Avoidance
/// Algorithm", CCR 1997) with a 1200-byte MSS and the RTT with a full queue, whichever is
/// lower. A run's time limit comes from it, so that a download over lossy links is not cut
/// off while it progresses at the pace the loss allows (a 2 %-loss, 400 ms path moves about
/// 0.2 Mbit/s, however fast its link).
pub fn achievable_bps(link: &crate::link::LinkConfig) -> u64 {
    use crate::link::QueueLimit;
    const MSS_BITS: f64 = 1200.0 * 8.0;
    let rate = if link.rate_bps == 0 { 10_000_000_000 } else { link.rate_bps };
    let p = link.loss.mean_loss();
    if p <= 0.0 {
        return rate;
    }
    let queue = match link.queue_limit {
        QueueLimit::Delay(d) => d.as_secs_f64(),
        QueueLimit::Bytes(b) => b as f64 * 8.0 / rate as f64,
        QueueLimit::Packets(n) => n as f64 * 1500.0 * 8.0 / rate as f64,
        QueueLimit::Unlimited => 0.0,
    };
    // A path of no delay still has a round trip of a packet's serialization each way.
    let rtt = (2.0 * link.delay.as_secs_f64() + queue).max(2.0 * MSS_BITS / rate as f64);
    let mathis = 1.22 * MSS_BITS / (rtt * p.min(1.0).sqrt());
    (mathis as u64).clamp(1, rate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::LinkConfig;

    fn link(s: &str) -> LinkConfig {
        s.parse().expect("link spec")
    }

    #[test]
    fn a_lossless_link_allows_its_rate_and_a_lossy_one_what_loss_allows() {
        assert_eq!(achievable_bps(&link("50mbit/20ms/queue=30ms")), 50_000_000);
        // 2 % loss, 400 ms with a 100 ms queue: 1.22 * 9600 / (0.5 * 0.1414) = 166 kbit/s.
        let lossy = achievable_bps(&link("100mbit/400ms/loss=2%/queue=100ms"));
        assert!((160_000..=172_000).contains(&lossy), "{lossy}");
        // Light loss on a slow link: the link's rate is the limit.
        assert_eq!(achievable_bps(&link("1mbit/10ms/loss=0.01%")), 1_000_000);
    }

    #[test]
    fn a_lossy_download_gets_the_time_its_loss_needs() {
        let fast = Scenario::download(vec![link("100mbit/400ms/queue=100ms")], 20_000_000);
        let lossy = Scenario::download(vec![link("100mbit/400ms/loss=2%/queue=100ms")], 20_000_000);
        assert_eq!(fast.time_limit(), Duration::from_secs(60) + Duration::from_secs(16));
        // 20 MB at about 166 kbit/s is about 960 s; ten times that and the 60 s.
        let t = lossy.time_limit().as_secs();
        assert!((9_000..=10_500).contains(&t), "{t} s");
        // With a lossless second path the better one counts.
        let both = Scenario::download(
            vec![link("100mbit/400ms/loss=2%/queue=100ms"), link("10mbit/20ms/queue=30ms")],
            20_000_000,
        );
        assert_eq!(both.time_limit(), Duration::from_secs(60) + Duration::from_secs(160));
    }
}
