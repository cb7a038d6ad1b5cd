//! A checked experiment: the file parsed ([`crate::file`]), every cross-key rule verified,
//! names resolved into the protocol's types. [`Experiment::load`] is the one way in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mpq_proto::cc::CcAlgorithm;
use mpq_proto::conn::AckPolicy;
use mpq_proto::sched::SchedulerKind;

use crate::error::{FileError, LabError, Result};
use crate::file::{DesignKind, DesignSpec, ExperimentFile, PathSpec, Testbed, TopologySpec};
use crate::param::{Param, ParamKind, ParamValue};
use crate::quantity::{Kind, Quantity, Unit};

/// A varied link parameter: one axis of a class's design.
#[derive(Debug, Clone, PartialEq)]
pub struct Dim {
    /// `path0.rate`, `path1.gilbert_elliott.p_gb`, ...
    pub name: String,
    /// Where it is in the file (`topology.paths[0].rate`), for errors.
    pub key: String,
    /// Its values.
    pub value: ParamValue,
    /// What it takes (to read list-design values).
    pub kind: Kind,
}

/// A checked design.
#[derive(Debug, Clone, PartialEq)]
pub enum Design {
    /// Every combination of the dimensions' levels.
    Grid,
    /// Listed points: dimension name → value.
    List(Vec<BTreeMap<String, Quantity>>),
    /// WSP over the dimensions.
    Wsp {
        /// Number of points.
        points: usize,
        /// Seed of the candidates.
        seed: u64,
        /// Number of candidates.
        candidates: usize,
    },
}

/// A class of scenarios: its paths, events and design.
#[derive(Debug, Clone)]
pub struct Class {
    /// Name (`main` when the file has no classes).
    pub name: String,
    /// The paths as written.
    pub paths: Vec<PathSpec>,
    /// Path failures: topology index and time.
    pub fail: Vec<(usize, Duration)>,
    /// A bottleneck shared by the paths, if the topology has one.
    pub bottleneck: Option<ClassBottleneck>,
    /// The varied link parameters (the bottleneck's included, as `bottleneck.rate`, ...).
    pub dims: Vec<Dim>,
    /// How points are chosen.
    pub design: Design,
}

/// A class's shared bottleneck (`topology.bottleneck` and `topology.competitor`, checked).
#[derive(Debug, Clone)]
pub struct ClassBottleneck {
    /// Its link parameters, as written.
    pub link: PathSpec,
    /// A competing single-path download crosses it.
    pub competitor: bool,
}

/// The client's traffic.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadPlan {
    /// Downloads, one run per size.
    Download {
        /// Sizes in bytes.
        sizes: Vec<u64>,
    },
    /// Request/response traffic.
    ReqResp {
        /// Request and response size.
        size: u64,
        /// Time between requests.
        interval: Duration,
        /// Number of requests.
        count: u64,
    },
}

/// A checked experiment file.
#[derive(Debug, Clone)]
pub struct Experiment {
    /// The file.
    pub path: PathBuf,
    /// Its text (kept to locate errors and to store with the results).
    pub text: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Master seed.
    pub seed: u64,
    /// Classes, in file order.
    pub classes: Vec<Class>,
    /// Workload.
    pub workload: WorkloadPlan,
    /// Schedulers to run.
    pub schedulers: Vec<SchedulerKind>,
    /// Congestion controllers to run.
    pub ccs: Vec<CcAlgorithm>,
    /// ACK policies to run.
    pub ack_policies: Vec<AckPolicy>,
    /// ACK-range limits to run (`None`: the protocol's default, every range kept).
    pub ack_ranges: Vec<Option<usize>>,
    /// Packet number spaces of mpq's multipath runs (`per-path`, `single`), at least one.
    pub pn_spaces: Vec<String>,
    /// HyStart++ settings of mpq's runs (`on`, `off`); empty: the default (on), not a factor.
    pub hystarts: Vec<String>,
    /// Path counts to run (empty: all the class's paths).
    pub path_counts: Vec<usize>,
    /// Initial paths to run.
    pub initial_paths: Vec<usize>,
    /// Transports to run (`quic`, `mptcp-tls`, `quic:NAME`).
    pub transports: Vec<String>,
    /// The implementation folders the `quic:NAME` transports name, in their order.
    pub implementations: Vec<crate::implementation::Implementation>,
    /// Sets of extra `mpq perf` options (`factors.options`; one empty set by default).
    pub options: Vec<String>,
    /// Repetitions of each scenario.
    pub repetitions: u32,
    /// Headline metrics.
    pub metrics: Vec<String>,
    /// Run single-path baselines.
    pub baselines: bool,
    /// Congestion controller of the baselines (`None`: the run's).
    pub baseline_cc: Option<CcAlgorithm>,
    /// Virtual-time limit of each run (wall-clock on the kernel testbed).
    pub max_time: Option<Duration>,
    /// Where the runs happen.
    pub testbed: Testbed,
    /// mpq's runtime on the kernel testbed (`single` or `per-path`).
    pub runtime: String,
    /// The runtimes mpq's runs compare (`factors.runtime`; `[runtime]` by default).
    pub runtimes: Vec<String>,
    /// The receive steerings every run is repeated with (`factors.steering`; `[""]`, the
    /// kernel's settings, by default).
    pub steerings: Vec<String>,
    /// Scripts run on the hosts before and after every run (SSH testbed).
    pub scripts: Scripts,
    /// The TCP congestion control of the kernel's transports (`kernel_cc`), if set.
    pub kernel_cc: Option<String>,
}

/// The experiment's pre- and post-run scripts, as files that exist.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scripts {
    /// Before the endpoints start: on the client's host, on the server's.
    pub pre: RoleScripts,
    /// After both ended.
    pub post: RoleScripts,
}

/// Script files per role, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoleScripts {
    /// On the client's host.
    pub client: Vec<PathBuf>,
    /// On the server's host.
    pub server: Vec<PathBuf>,
}

impl Scripts {
    /// Every script, each once, in a stable order.
    pub fn all(&self) -> Vec<&PathBuf> {
        let mut v: Vec<&PathBuf> =
            self.pre.client.iter().chain(&self.pre.server).chain(&self.post.client).chain(&self.post.server).collect();
        v.sort();
        v.dedup();
        v
    }
}

/// Resolves the file's scripts against its directory; each must exist, and only the SSH
/// testbed runs them.
fn check_scripts(c: &Checker<'_>, spec: &crate::file::ScriptsSpec, testbed: Testbed) -> Result<Scripts> {
    let dir = c.path.parent().unwrap_or(Path::new("."));
    let mut out = Scripts::default();
    for (when, from, to) in [("pre", &spec.pre, &mut out.pre), ("post", &spec.post, &mut out.post)] {
        for (role, names, into) in [("client", &from.client, &mut to.client), ("server", &from.server, &mut to.server)]
        {
            for (i, name) in names.iter().enumerate() {
                let key = format!("scripts.{when}.{role}[{i}]");
                if testbed != Testbed::Ssh {
                    return Err(c.err(&key, "scripts run on the hosts of the SSH testbed: they need testbed: ssh"));
                }
                let path = dir.join(name);
                if !path.is_file() {
                    return Err(c.err(
                        &key,
                        format!("{} is not a file (paths are relative to the experiment file)", path.display()),
                    ));
                }
                into.push(path);
            }
        }
    }
    Ok(out)
}

/// mpq's runtimes on the kernel testbed: one event loop, a thread per path, one
/// single-path connection per path (`mpq perf --shard N`).
pub const RUNTIMES: &[&str] = &["single", "per-path", "shard"];

/// The transport of mpq's runs.
pub const QUIC: &str = "quic";
/// MPTCP with TLS 1.3 over it (`mpq perf --transport mptcp-tls`); its baselines are TCP+TLS.
pub const MPTCP_TLS: &str = "mptcp-tls";
/// TCP with TLS 1.3 (the baselines of MPTCP+TLS runs).
pub const TCP_TLS: &str = "tcp-tls";

/// Largest number of points a grid may have.
pub const MAX_GRID_POINTS: usize = 1_000_000;

/// The canonical name of an ACK policy (as `mpq sim --ack-policy` takes it).
pub fn ack_policy_name(a: AckPolicy) -> &'static str {
    match a {
        AckPolicy::SamePath => "same-path",
        AckPolicy::LowestRtt => "lowest-rtt",
        AckPolicy::AllPaths => "all-paths",
    }
}

/// Checks run while loading: every error names its key and line.
struct Checker<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Checker<'_> {
    fn err(&self, key: &str, message: impl Into<String>) -> LabError {
        FileError::at(self.path, self.text, key, message).into()
    }

    fn fixed<K: ParamKind>(&self, p: &Param<K>, key: &str) -> Result<Quantity> {
        match &p.value {
            ParamValue::Fixed(q) => Ok(*q),
            _ => Err(self.err(key, "must be a single value here, not a list or a range")),
        }
    }

    fn names<T>(
        &self,
        list: &[String],
        key: &str,
        default: T,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Vec<T>> {
        if list.is_empty() {
            return Ok(vec![default]);
        }
        list.iter().enumerate().map(|(i, s)| parse(s).map_err(|e| self.err(&format!("{key}[{i}]"), e))).collect()
    }
}

/// The link parameters of a path, by name, with their kinds.
pub fn path_params(p: &PathSpec) -> Vec<(&'static str, Kind, Option<&ParamValue>)> {
    let ge = p.gilbert_elliott.as_ref();
    vec![
        ("rate", Kind::Rate, Some(&p.rate.value)),
        ("rtt", Kind::Time, Some(&p.rtt.value)),
        ("queue", Kind::Queue, p.queue.as_ref().map(|q| &q.value)),
        ("loss", Kind::Probability, p.loss.as_ref().map(|q| &q.value)),
        ("gilbert_elliott.p_gb", Kind::Probability, ge.map(|g| &g.p_gb.value)),
        ("gilbert_elliott.p_bg", Kind::Probability, ge.map(|g| &g.p_bg.value)),
        ("gilbert_elliott.loss_bad", Kind::Probability, ge.and_then(|g| g.loss_bad.as_ref()).map(|q| &q.value)),
        ("gilbert_elliott.loss_good", Kind::Probability, ge.and_then(|g| g.loss_good.as_ref()).map(|q| &q.value)),
        ("jitter", Kind::Time, p.jitter.as_ref().map(|q| &q.value)),
    ]
}

impl Experiment {
    /// Reads, parses and checks an experiment file.
    pub fn load(path: &Path) -> Result<Experiment> {
        let text = std::fs::read_to_string(path).map_err(LabError::io(format!("reading {}", path.display())))?;
        Self::from_text(path, text)
    }

    /// Parses and checks `text` (read from `path`, which errors name).
    pub fn from_text(path: &Path, text: String) -> Result<Experiment> {
        let file: ExperimentFile = serde_norway::from_str(&text).map_err(|e| FileError::from_yaml(path, &e))?;
        let c = Checker { path, text: &text };
        let exp = check(&c, file)?;
        Ok(Experiment { path: path.to_owned(), text, ..exp })
    }

    /// The largest number of paths any run uses.
    pub fn max_paths(&self) -> usize {
        self.classes.iter().map(|c| c.paths.len()).max().unwrap_or(0)
    }
}

fn check(c: &Checker<'_>, f: ExperimentFile) -> Result<Experiment> {
    if f.name.is_empty() || !f.name.chars().all(|ch| ch.is_ascii_alphanumeric() || "._-".contains(ch)) {
        return Err(
            c.err("name", format!("{:?}: use letters, digits, '.', '_' and '-' only (it names a directory)", f.name))
        );
    }
    if f.repetitions == 0 {
        return Err(c.err("repetitions", "must be at least 1"));
    }
    // Classes.
    let mut raw_classes: Vec<(String, String, TopologySpec, DesignSpec, String)> = Vec::new();
    if f.classes.is_empty() {
        let Some(t) = f.topology.clone() else {
            return Err(c.err("", "missing `topology` (or `classes`, each with a topology)"));
        };
        raw_classes.push(("main".into(), "topology".into(), t, f.design.clone(), "design".into()));
    }
    for (i, cl) in f.classes.iter().enumerate() {
        let key = format!("classes[{i}]");
        if cl.name.is_empty() || !cl.name.chars().all(|ch| ch.is_ascii_alphanumeric() || "._-".contains(ch)) {
            return Err(
                c.err(&format!("{key}.name"), format!("{:?}: use letters, digits, '.', '_' and '-' only", cl.name))
            );
        }
        if f.classes[..i].iter().any(|o| o.name == cl.name) {
            return Err(c.err(&format!("{key}.name"), format!("class {:?} is defined twice", cl.name)));
        }
        let (topo, tkey) = match (&cl.topology, &f.topology) {
            (Some(t), _) => (t.clone(), format!("{key}.topology")),
            (None, Some(t)) => (t.clone(), "topology".into()),
            (None, None) => return Err(c.err(&key, "this class needs a `topology` (the file has none)")),
        };
        let (design, dkey) = match &cl.design {
            Some(d) => (d.clone(), format!("{key}.design")),
            None => (f.design.clone(), "design".into()),
        };
        raw_classes.push((cl.name.clone(), tkey, topo, design, dkey));
    }
    let mut classes = Vec::new();
    for (ci, (name, tkey, topo, design, dkey)) in raw_classes.into_iter().enumerate() {
        classes.push(check_class(c, ci, name, &tkey, topo, &design, &dkey, f.seed)?);
    }
    let max_paths = classes.iter().map(|cl| cl.paths.len()).min().unwrap_or(0);
    // Workload.
    let workload = match (&f.workload.download, &f.workload.reqresp) {
        (Some(d), None) => {
            let sizes = if f.factors.file_size.is_empty() {
                vec![c.fixed(d, "workload.download")?.value as u64]
            } else {
                f.factors
                    .file_size
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        Kind::Size
                            .parse(s)
                            .map(|q| q.value as u64)
                            .map_err(|e| c.err(&format!("factors.file_size[{i}]"), e))
                    })
                    .collect::<Result<Vec<_>>>()?
            };
            if let Some(i) = sizes.iter().position(|&s| s == 0) {
                return Err(c.err(&format!("factors.file_size[{i}]"), "a download needs at least one byte"));
            }
            if sizes == [0] {
                return Err(c.err("workload.download", "a download needs at least one byte"));
            }
            WorkloadPlan::Download { sizes }
        }
        (None, Some(r)) => {
            if !f.factors.file_size.is_empty() {
                return Err(
                    c.err("factors.file_size", "file sizes apply to downloads, not to request/response traffic")
                );
            }
            let size = c.fixed(&r.size, "workload.reqresp.size")?.value as u64;
            if !(8..=mpq_sim::scenario::MAX_REQUEST_SIZE).contains(&size) {
                return Err(c.err(
                    "workload.reqresp.size",
                    format!("{size} B is outside 8 B..={} B", mpq_sim::scenario::MAX_REQUEST_SIZE),
                ));
            }
            let interval = Duration::from_secs_f64(c.fixed(&r.interval, "workload.reqresp.interval")?.value);
            if interval.is_zero() {
                return Err(c.err("workload.reqresp.interval", "must be above zero"));
            }
            let count = match (r.count, &r.duration) {
                (Some(n), None) if n > 0 => n,
                (Some(_), None) => return Err(c.err("workload.reqresp.count", "at least one request is needed")),
                (None, Some(d)) => {
                    let d = c.fixed(d, "workload.reqresp.duration")?.value;
                    ((d / interval.as_secs_f64()).floor() as u64).max(1)
                }
                _ => return Err(c.err("workload.reqresp", "give exactly one of `count` and `duration`")),
            };
            WorkloadPlan::ReqResp { size, interval, count }
        }
        _ => return Err(c.err("workload", "give exactly one of `download` and `reqresp`")),
    };
    // Factors.
    let fa = &f.factors;
    let schedulers = c.names(&fa.scheduler, "factors.scheduler", SchedulerKind::default(), |s| s.parse())?;
    let ccs = c.names(&fa.cc, "factors.cc", CcAlgorithm::Cubic, |s| s.parse())?;
    let ack_policies = c.names(&fa.ack_policy, "factors.ack_policy", AckPolicy::default(), |s| s.parse())?;
    let most_ranges = mpq_proto::conn::DEFAULT_MAX_ACK_RANGES;
    for (i, &n) in fa.ack_ranges.iter().enumerate() {
        if !(1..=most_ranges).contains(&n) {
            return Err(c.err(
                &format!("factors.ack_ranges[{i}]"),
                format!("{n} ranges: an ACK frame reports 1 to {most_ranges} ranges"),
            ));
        }
    }
    let ack_ranges =
        if fa.ack_ranges.is_empty() { vec![None] } else { fa.ack_ranges.iter().map(|&n| Some(n)).collect() };
    for (i, s) in fa.pn_space.iter().enumerate() {
        let key = format!("factors.pn_space[{i}]");
        if !crate::plan::PN_SPACES.contains(&s.as_str()) {
            return Err(c.err(&key, format!("unknown packet number space {s:?}; expected per-path or single")));
        }
        if fa.pn_space[..i].contains(s) {
            return Err(c.err(&key, format!("{s} is listed twice")));
        }
    }
    let pn_spaces =
        if fa.pn_space.is_empty() { vec![crate::plan::PN_SPACES[0].to_owned()] } else { fa.pn_space.clone() };
    for (i, h) in fa.hystart.iter().enumerate() {
        let key = format!("factors.hystart[{i}]");
        if h != "on" && h != "off" {
            return Err(c.err(&key, format!("{h:?}: expected on or off (HyStart++ in mpq's slow start)")));
        }
        if fa.hystart[..i].contains(h) {
            return Err(c.err(&key, format!("{h} is listed twice")));
        }
    }
    let hystarts = fa.hystart.clone();
    for (i, &n) in fa.paths.iter().enumerate() {
        if n == 0 || n > max_paths {
            return Err(c.err(&format!("factors.paths[{i}]"), format!("{n} paths: the topology has {max_paths}")));
        }
    }
    let most = fa.paths.iter().copied().max().unwrap_or(max_paths);
    let initial_paths = if fa.initial_path.is_empty() { vec![0] } else { fa.initial_path.clone() };
    let transports = if fa.transport.is_empty() { vec![QUIC.to_owned()] } else { fa.transport.clone() };
    let mut implementations = Vec::new();
    for (i, t) in transports.iter().enumerate() {
        let key = format!("factors.transport[{i}]");
        if let Some(name) = crate::implementation::name_of(t) {
            let imp = crate::implementation::root(c.path.parent().unwrap_or(Path::new(".")))
                .and_then(|root| crate::implementation::Implementation::open(&root, name))
                .map_err(|e| c.err(&key, e))?;
            implementations.push(imp);
        } else if t != QUIC && t != MPTCP_TLS && t != TCP_TLS {
            return Err(c.err(
                &key,
                format!(
                    "unknown transport {t:?}; expected quic, mptcp-tls (whose baselines are TCP+TLS), tcp-tls or quic:NAME (a folder of implementations/)"
                ),
            ));
        }
        if t != QUIC && !f.testbed.is_kernel() {
            return Err(c.err(&key, format!("{t} runs over real kernels: it needs testbed: netns (or ssh)")));
        }
        if transports[..i].contains(t) {
            return Err(c.err(&key, format!("{t} is listed twice")));
        }
    }
    let options = check_options(c, &fa.options, f.testbed)?;
    for (i, &p) in fa.initial_path.iter().enumerate() {
        if p >= most {
            return Err(c.err(
                &format!("factors.initial_path[{i}]"),
                format!("path {p} does not exist: runs have at most {most} paths (0..={})", most.saturating_sub(1)),
            ));
        }
    }
    for (i, m) in f.metrics.iter().enumerate() {
        if !crate::metrics::METRICS.contains(&m.as_str()) {
            return Err(c.err(
                &format!("metrics[{i}]"),
                format!("unknown metric {m:?}; expected one of {}", crate::metrics::METRICS.join(", ")),
            ));
        }
    }
    let baseline_cc = match &f.baselines.cc {
        Some(s) => Some(s.parse::<CcAlgorithm>().map_err(|e| c.err("baselines.cc", e))?),
        None => None,
    };
    let max_time = match &f.max_time {
        Some(p) => {
            let t = c.fixed(p, "max_time")?.value;
            if t <= 0.0 {
                return Err(c.err("max_time", "must be above zero"));
            }
            Some(Duration::from_secs_f64(t))
        }
        None => None,
    };
    let scripts = check_scripts(c, &f.scripts, f.testbed)?;
    let kernel_cc = f.kernel_cc.clone();
    if let Some(cc) = &kernel_cc {
        if cc.is_empty() || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(c.err("kernel_cc", format!("{cc:?} is not a congestion control name (e.g. cubic, reno, bbr)")));
        }
        if !transports.iter().any(|t| t == MPTCP_TLS || t == TCP_TLS) {
            return Err(c.err("kernel_cc", "it sets the kernel's TCP: list tcp-tls or mptcp-tls in factors.transport"));
        }
    }
    let steerings = if fa.steering.is_empty() { vec![String::new()] } else { fa.steering.clone() };
    for (i, s) in fa.steering.iter().enumerate() {
        let key = format!("factors.steering[{i}]");
        if !crate::steering::STEERINGS.contains(&s.as_str()) {
            return Err(c.err(
                &key,
                format!("unknown steering {s:?}; expected one of {}", crate::steering::STEERINGS.join(", ")),
            ));
        }
        if f.testbed != Testbed::Netns {
            return Err(c.err(&key, "steering is set on the namespace testbed's interfaces: it needs testbed: netns"));
        }
        if fa.steering[..i].contains(s) {
            return Err(c.err(&key, format!("{s} is listed twice")));
        }
    }
    if !["single", "per-path"].contains(&f.runtime.as_str()) {
        return Err(c.err("runtime", format!("unknown runtime {:?}; expected single or per-path", f.runtime)));
    }
    let runtimes = if fa.runtime.is_empty() { vec![f.runtime.clone()] } else { fa.runtime.clone() };
    for (i, r) in fa.runtime.iter().enumerate() {
        let key = format!("factors.runtime[{i}]");
        if !RUNTIMES.contains(&r.as_str()) {
            return Err(c.err(&key, format!("unknown runtime {r:?}; expected single, per-path or shard")));
        }
        if !f.testbed.is_kernel() {
            return Err(c.err(&key, "runtimes are mpq's on real kernels: they need testbed: netns (or ssh)"));
        }
        if fa.runtime[..i].contains(r) {
            return Err(c.err(&key, format!("{r} is listed twice")));
        }
    }
    Ok(Experiment {
        path: PathBuf::new(),
        text: String::new(),
        name: f.name,
        description: f.description,
        seed: f.seed,
        classes,
        workload,
        schedulers,
        ccs,
        ack_policies,
        ack_ranges,
        pn_spaces,
        hystarts,
        path_counts: fa.paths.clone(),
        initial_paths,
        transports,
        implementations,
        options,
        repetitions: f.repetitions,
        metrics: f.metrics,
        baselines: f.baselines.single_path,
        baseline_cc,
        max_time,
        testbed: f.testbed,
        runtime: f.runtime,
        runtimes,
        steerings,
        scripts,
        kernel_cc,
    })
}

/// The `mpq perf` options the lab sets itself on the kernel testbed (an option set may not).
const LAB_OPTIONS: &[&str] = &[
    "--connect",
    "--listen",
    "--bytes",
    "--duration",
    "--json",
    "--local",
    "--server-addr",
    "--path-mode",
    "--transport",
    "--tcp-cc",
    "--cc",
    "--scheduler",
    "--ack-policy",
    "--ack-ranges",
    "--threads",
    "--qlog-dir",
    "--no-multipath",
];

/// `factors.options`: option sets of `mpq perf` for the kernel testbed; each normalised to
/// single spaces. Values are mpq's to check: a bad one fails its runs with mpq's message.
fn check_options(c: &Checker<'_>, sets: &[String], testbed: Testbed) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for (i, set) in sets.iter().enumerate() {
        let key = format!("factors.options[{i}]");
        if !testbed.is_kernel() {
            return Err(c.err(&key, "option sets are `mpq perf` options: they need testbed: netns (or ssh)"));
        }
        let words: Vec<&str> = set.split_whitespace().collect();
        if let Some(w) = words.first().filter(|w| !w.starts_with("--")) {
            return Err(c.err(&key, format!("{w:?}: an option set starts with an option (--name)")));
        }
        if let Some(w) = words.iter().find(|w| LAB_OPTIONS.contains(&w.split('=').next().unwrap_or(w))) {
            return Err(c.err(
                &key,
                format!("{w} is set by the lab from the run (factors, paths, workload); use the factor instead"),
            ));
        }
        let set = words.join(" ");
        if out.contains(&set) {
            return Err(c.err(&key, format!("{set:?} is listed twice")));
        }
        out.push(set);
    }
    if out.is_empty() {
        out.push(String::new());
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn check_class(
    c: &Checker<'_>,
    index: usize,
    name: String,
    tkey: &str,
    topo: TopologySpec,
    design: &DesignSpec,
    dkey: &str,
    file_seed: u64,
) -> Result<Class> {
    if topo.paths.is_empty() {
        return Err(c.err(&format!("{tkey}.paths"), "at least one path is needed"));
    }
    if topo.paths.len() > 255 {
        return Err(c.err(&format!("{tkey}.paths"), "at most 255 paths are supported"));
    }
    let mut dims = Vec::new();
    for (i, p) in topo.paths.iter().enumerate() {
        check_link(c, p, &format!("path{i}"), &format!("{tkey}.paths[{i}]"), &mut dims)?;
    }
    if topo.competitor && topo.bottleneck.is_none() {
        return Err(c.err(
            &format!("{tkey}.competitor"),
            "a competitor crosses the shared bottleneck: add `bottleneck` to the topology",
        ));
    }
    let bottleneck = match &topo.bottleneck {
        None => None,
        Some(b) => {
            let bkey = format!("{tkey}.bottleneck");
            let mut link = b.clone();
            link.name.get_or_insert_with(|| "bottleneck".into());
            let unlimited = match &link.rate.value {
                ParamValue::Fixed(q) => q.value == 0.0,
                ParamValue::Values(v) => v.iter().any(|q| q.value == 0.0),
                ParamValue::Range(r) => r.min.value == 0.0,
            };
            if unlimited {
                return Err(c.err(
                    &format!("{bkey}.rate"),
                    "a bottleneck needs a finite rate above zero (0 and inf mean no limit)",
                ));
            }
            check_link(c, &link, "bottleneck", &bkey, &mut dims)?;
            Some(ClassBottleneck { link, competitor: topo.competitor })
        }
    };
    let mut fail = Vec::new();
    for (i, e) in topo.events.iter().enumerate() {
        let ekey = format!("{tkey}.events[{i}]");
        if e.path >= topo.paths.len() {
            return Err(c.err(
                &format!("{ekey}.path"),
                format!("path {} does not exist (0..={})", e.path, topo.paths.len() - 1),
            ));
        }
        fail.push((e.path, Duration::from_secs_f64(c.fixed(&e.fail_at, &format!("{ekey}.fail_at"))?.value)));
    }
    let not_for = |k: &str, what: &str| c.err(&format!("{dkey}.{k}"), format!("only a {what} design takes `{k}`"));
    if design.kind != DesignKind::Wsp {
        if design.points.is_some() {
            return Err(not_for("points", "wsp"));
        }
        if design.seed.is_some() {
            return Err(not_for("seed", "wsp"));
        }
        if design.candidates.is_some() {
            return Err(not_for("candidates", "wsp"));
        }
    }
    if design.kind != DesignKind::List && !design.scenarios.is_empty() {
        return Err(not_for("scenarios", "list"));
    }
    let design = match design.kind {
        DesignKind::Grid => {
            let mut total: usize = 1;
            for d in &dims {
                let levels = match &d.value {
                    ParamValue::Range(r) => match r.levels {
                        Some(l) => l as usize,
                        None => {
                            return Err(
                                c.err(&d.key, "a range in a grid design needs `levels` (how many values to take)")
                            )
                        }
                    },
                    ParamValue::Values(v) => v.len(),
                    ParamValue::Fixed(_) => 1,
                };
                total = total.saturating_mul(levels);
            }
            if total > MAX_GRID_POINTS {
                return Err(
                    c.err(dkey, format!("the grid has {total} points; at most {MAX_GRID_POINTS} (use a wsp design)"))
                );
            }
            Design::Grid
        }
        DesignKind::Wsp => {
            let points =
                design.points.ok_or_else(|| c.err(dkey, "a wsp design needs `points` (how many scenarios)"))?;
            if points == 0 {
                return Err(c.err(&format!("{dkey}.points"), "must be at least 1"));
            }
            if dims.is_empty() {
                return Err(c.err(dkey, "a wsp design needs at least one path parameter given as a range or a list"));
            }
            let candidates = design.candidates.unwrap_or((20 * points).max(1000));
            if candidates < points {
                return Err(c.err(
                    &format!("{dkey}.candidates"),
                    format!("{candidates} candidates cannot give {points} points"),
                ));
            }
            if candidates > 200_000 {
                return Err(c.err(&format!("{dkey}.candidates"), "at most 200000"));
            }
            // Each class draws its own candidates.
            let seed = design.seed.unwrap_or(file_seed).wrapping_add(index as u64);
            Design::Wsp { points, seed, candidates }
        }
        DesignKind::List => {
            if design.scenarios.is_empty() {
                return Err(c.err(dkey, "a list design needs `scenarios`: one map of dimension values per scenario"));
            }
            let mut list = Vec::new();
            for (i, point) in design.scenarios.iter().enumerate() {
                let skey = format!("{dkey}.scenarios[{i}]");
                let mut values = BTreeMap::new();
                for (k, v) in point {
                    let Some(d) = dims.iter().find(|d| &d.name == k) else {
                        let known: Vec<_> = dims.iter().map(|d| d.name.as_str()).collect();
                        return Err(c.err(
                            &format!("{skey}.{k}"),
                            format!("not a varied parameter; expected one of: {}", known.join(", ")),
                        ));
                    };
                    let q = match v {
                        serde_norway::Value::String(s) => d.kind.parse(s),
                        serde_norway::Value::Number(n) => {
                            n.as_f64().map_or(Err("not a number".into()), |x| d.kind.from_number(x))
                        }
                        _ => Err(format!("expected {}", d.kind.expected())),
                    }
                    .map_err(|e| c.err(&format!("{skey}.{k}"), e))?;
                    values.insert(k.clone(), q.rounded());
                }
                if let Some(d) = dims.iter().find(|d| !values.contains_key(&d.name)) {
                    return Err(c.err(&skey, format!("missing `{}`", d.name)));
                }
                list.push(values);
            }
            Design::List(list)
        }
    };
    Ok(Class { name, paths: topo.paths, fail, bottleneck, dims, design })
}

/// Checks the link `p` (at `key` in the file) and adds its varied parameters to `dims`, named
/// `{name}.rate`, ...
fn check_link(c: &Checker<'_>, p: &PathSpec, name: &str, key: &str, dims: &mut Vec<Dim>) -> Result<()> {
    if p.loss.is_some() && p.gilbert_elliott.is_some() {
        return Err(
            c.err(&format!("{key}.gilbert_elliott"), "give either `loss` (Bernoulli) or `gilbert_elliott`, not both")
        );
    }
    if let Some(q) = &p.queue {
        if q.value.varies() && matches!(q.value.at(0.0).unit, Unit::Unlimited) {
            return Err(c.err(&format!("{key}.queue"), "inf cannot be one of several values"));
        }
    }
    for (param, kind, value) in path_params(p) {
        if let Some(v) = value.filter(|v| v.varies()) {
            dims.push(Dim { name: format!("{name}.{param}"), key: format!("{key}.{param}"), value: v.clone(), kind });
        }
    }
    Ok(())
}
