//! The experiment file as written: serde structures with `deny_unknown_fields`, so that a
//! misspelt key is an error naming the key, its line and the keys allowed there. Values are
//! checked as they are read (see [`crate::param`]); checks that span several keys are in
//! [`crate::experiment`]. `docs/lab-experiment-files.md` documents every key.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::param::{Param, ProbabilityKind, QueueKind, RateKind, SizeKind, TimeKind};

/// A whole experiment file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentFile {
    /// Short name (results go to `lab-results/NAME` by default).
    pub name: String,
    /// What the experiment is about.
    #[serde(default)]
    pub description: String,
    /// Where the runs happen.
    #[serde(default)]
    pub testbed: Testbed,
    /// Master seed: every run's seed derives from it, the class, the scenario and the
    /// repetition.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// The network, unless every class brings its own.
    pub topology: Option<TopologySpec>,
    /// Groups of scenarios, each with its own network ranges and its own design.
    #[serde(default)]
    pub classes: Vec<ClassSpec>,
    /// What the client does.
    pub workload: WorkloadSpec,
    /// Protocol settings and workload sizes to cross with every design point.
    #[serde(default)]
    pub factors: FactorsSpec,
    /// How design points are chosen over the varied link parameters.
    #[serde(default)]
    pub design: DesignSpec,
    /// Runs of each scenario, each with its own seed.
    #[serde(default = "one")]
    pub repetitions: u32,
    /// The metrics the experiment is about (every metric is recorded anyway).
    #[serde(default)]
    pub metrics: Vec<String>,
    /// Single-path runs to compare with.
    #[serde(default)]
    pub baselines: BaselineSpec,
    /// Stop each run after this much virtual time (default: generous, from the workload);
    /// on the kernel testbed, wall-clock time (default 300 s).
    pub max_time: Option<Param<TimeKind>>,
    /// The runtime of mpq's endpoints on the kernel testbed: `single` (one event loop) or
    /// `per-path` (a thread per path; the default). The simulator ignores it.
    #[serde(default = "default_runtime")]
    pub runtime: String,
    /// Scripts run on the hosts before and after every run (SSH testbed).
    #[serde(default)]
    pub scripts: ScriptsSpec,
    /// The kernel's TCP congestion control for the TCP+TLS and MPTCP+TLS runs (`mpq perf
    /// --tcp-cc`, e.g. `cubic`); default: the kernel's default, whatever it is.
    pub kernel_cc: Option<String>,
}

fn default_seed() -> u64 {
    1
}

fn one() -> u32 {
    1
}

fn default_runtime() -> String {
    "per-path".into()
}

/// Where the runs happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Testbed {
    /// The deterministic simulator (virtual time, the real protocol code).
    #[default]
    Sim,
    /// The kernel testbed (`mpq lab testbed`): network namespaces, the user-space link
    /// emulator, `mpq perf` over real sockets in real time; needs root.
    Netns,
    /// Two hosts reached over SSH (`mpq lab run --hosts FILE`): `mpq perf` over their real
    /// network, which the lab does not shape (the topology describes it).
    Ssh,
}

impl Testbed {
    /// Whether runs happen over real kernels in real time (the namespace or SSH testbed).
    pub fn is_kernel(self) -> bool {
        matches!(self, Testbed::Netns | Testbed::Ssh)
    }
}

/// Scripts run before and after every run (the SSH testbed), per role, in order.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptsSpec {
    /// Before the endpoints start.
    #[serde(default)]
    pub pre: RoleScriptsSpec,
    /// After both endpoints ended.
    #[serde(default)]
    pub post: RoleScriptsSpec,
}

/// Script files per role (paths relative to the experiment file).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleScriptsSpec {
    /// On the client's host.
    #[serde(default)]
    pub client: Vec<String>,
    /// On the server's host.
    #[serde(default)]
    pub server: Vec<String>,
}

/// One class of scenarios (e.g. seed 002's low-BDP-no-loss).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    /// Name, used in run IDs and results.
    pub name: String,
    /// The class's network (instead of the file's `topology`).
    pub topology: Option<TopologySpec>,
    /// The class's design (instead of the file's `design`).
    pub design: Option<DesignSpec>,
}

/// Client and server joined by parallel paths.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// One link per path (used in both directions); path 0 is the first.
    pub paths: Vec<PathSpec>,
    /// Scripted events.
    #[serde(default)]
    pub events: Vec<EventSpec>,
    /// A bottleneck every path crosses after its own link (which becomes an access link): a
    /// link like a path's, used in both directions behind every path's own link. Its rate
    /// must be finite (a bottleneck without a limit is no bottleneck).
    pub bottleneck: Option<PathSpec>,
    /// With a bottleneck: run a competing single-path CUBIC download through it (default:
    /// no).
    #[serde(default)]
    pub competitor: bool,
}

/// One path's link.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathSpec {
    /// Optional name, for the reader.
    pub name: Option<String>,
    /// Capacity.
    pub rate: Param<RateKind>,
    /// Round-trip propagation delay (each direction gets half).
    pub rtt: Param<TimeKind>,
    /// Tail-drop queue limit (default: none, the queue grows without bound).
    pub queue: Option<Param<QueueKind>>,
    /// Bernoulli loss probability, each direction.
    pub loss: Option<Param<ProbabilityKind>>,
    /// Gilbert-Elliott (bursty) loss instead of `loss`.
    pub gilbert_elliott: Option<GilbertElliottSpec>,
    /// Uniform random extra delay of each packet, 0 to this.
    pub jitter: Option<Param<TimeKind>>,
}

/// Two-state bursty loss: good and bad states with their own loss probabilities.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GilbertElliottSpec {
    /// Probability of moving from the good to the bad state, per packet.
    pub p_gb: Param<ProbabilityKind>,
    /// Probability of moving from the bad to the good state, per packet.
    pub p_bg: Param<ProbabilityKind>,
    /// Loss probability in the bad state (default 100 %).
    pub loss_bad: Option<Param<ProbabilityKind>>,
    /// Loss probability in the good state (default 0).
    pub loss_good: Option<Param<ProbabilityKind>>,
}

/// A scripted event.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    /// The path it happens to (topology index).
    pub path: usize,
    /// From this time on the path loses everything, both directions.
    pub fail_at: Param<TimeKind>,
}

/// What the client does: exactly one of `download` and `reqresp`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Download this many bytes on one stream.
    pub download: Option<Param<SizeKind>>,
    /// Interactive request/response traffic.
    pub reqresp: Option<ReqRespSpec>,
}

/// Request/response traffic: `size`-byte requests every `interval`, each answered with
/// `size` bytes; `count` requests, or as many as fit in `duration`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReqRespSpec {
    /// Request and response size.
    pub size: Param<SizeKind>,
    /// Time between two requests.
    pub interval: Param<TimeKind>,
    /// Number of requests.
    pub count: Option<u64>,
    /// Or: issue requests for this long.
    pub duration: Option<Param<TimeKind>>,
}

/// Settings crossed with every design point: each is a list, every combination runs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactorsSpec {
    /// Multipath schedulers (default: minrtt).
    #[serde(default)]
    pub scheduler: Vec<String>,
    /// Congestion controllers (default: cubic).
    #[serde(default)]
    pub cc: Vec<String>,
    /// Where PATH_ACKs go (default: same-path).
    #[serde(default)]
    pub ack_policy: Vec<String>,
    /// Most ranges one ACK frame reports, e.g. [4, 8, 16, 32] (default: every range kept).
    #[serde(default)]
    pub ack_ranges: Vec<usize>,
    /// Packet number spaces of mpq's multipath runs, compared: `per-path` (RFC 10069) and
    /// `single` (one for all paths, seed 003's experiment) (default: per-path).
    #[serde(default)]
    pub pn_space: Vec<String>,
    /// HyStart++ (RFC 9406) in mpq's slow start, compared: `on` (the default) and `off`
    /// (classic slow start to the first loss).
    #[serde(default)]
    pub hystart: Vec<String>,
    /// Numbers of paths: the first N of the topology (default: all).
    #[serde(default)]
    pub paths: Vec<usize>,
    /// Paths the connection starts on (default: 0).
    #[serde(default)]
    pub initial_path: Vec<usize>,
    /// Download sizes, instead of the workload's (downloads only).
    #[serde(default)]
    pub file_size: Vec<String>,
    /// Transports, on the kernel testbed (default: quic): `quic` (mpq, with the baselines of
    /// the other factors), `mptcp-tls` (MPTCP+TLS over the same paths from each initial path,
    /// against TCP+TLS baselines on each path).
    #[serde(default)]
    pub transport: Vec<String>,
    /// Extra `mpq perf` options for both ends of mpq's runs on the kernel testbed (QUIC,
    /// TCP+TLS, MPTCP+TLS; not `quic:NAME` folders), one set per entry, e.g. `["",
    /// "--cipher chacha20", "--no-gso --no-gro", "--window 125000"]` (default: none).
    #[serde(default)]
    pub options: Vec<String>,
    /// mpq's runtimes on the kernel testbed, compared: `single`, `per-path`, `shard` (one
    /// single-path connection per path, seed 000's shardQUIC) (default: the file's
    /// `runtime`).
    #[serde(default)]
    pub runtime: Vec<String>,
    /// Receive steering on the namespace testbed's endpoint interfaces, compared:
    /// `default`, `rps`, `rfs` (seed 000 experiment 3; default: the kernel's settings).
    #[serde(default)]
    pub steering: Vec<String>,
}

/// The kind of design.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DesignKind {
    /// Every combination of the dimensions' levels.
    #[default]
    Grid,
    /// The points listed in `scenarios`.
    List,
    /// A WSP space-filling design of `points` points.
    Wsp,
}

/// How design points are chosen over the varied link parameters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DesignSpec {
    /// grid, list or wsp.
    #[serde(rename = "type", default)]
    pub kind: DesignKind,
    /// WSP: number of points.
    pub points: Option<usize>,
    /// WSP: seed of the candidate points (default: the file's seed).
    pub seed: Option<u64>,
    /// WSP: number of candidate points (default: 20 per point, at least 1000).
    pub candidates: Option<usize>,
    /// List: one map per point, from dimension name (`path0.rate`) to value.
    #[serde(default)]
    pub scenarios: Vec<BTreeMap<String, serde_norway::Value>>,
}

/// Single-path baselines.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineSpec {
    /// Run the workload on each path alone (for the experimental aggregation benefit).
    #[serde(default = "yes")]
    pub single_path: bool,
    /// Congestion controller of the baselines (default: the multipath run's).
    pub cc: Option<String>,
}

fn yes() -> bool {
    true
}

impl Default for BaselineSpec {
    fn default() -> Self {
        Self { single_path: true, cc: None }
    }
}
