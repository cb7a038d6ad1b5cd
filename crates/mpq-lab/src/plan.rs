//! The plan of an experiment: its scenarios (class × design point × repetition, each with its
//! own seed) and, in each scenario, its runs (every combination of the factors, and the
//! single-path baselines the multipath runs are compared with). Run IDs are stable: the same
//! file gives the same IDs, which is how an interrupted experiment resumes.

use std::collections::BTreeMap;
use std::time::Duration;

use mpq_sim::bottleneck::Bottleneck;
use mpq_sim::scenario::{Scenario, Workload};
use mpq_sim::LinkConfig;
use serde::{Deserialize, Serialize};

use crate::design::{points, Point};
use crate::experiment::{ack_policy_name, path_params, Class, Experiment, WorkloadPlan, MPTCP_TLS, QUIC, TCP_TLS};
use crate::file::PathSpec;
use crate::quantity::{Quantity, Unit};
use crate::shard::Shard;

/// What a run is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The multipath connection under test (or a single-path one, with `paths: 1`).
    #[default]
    Multipath,
    /// The same workload on one path alone.
    Baseline,
}

/// One simulator run.
#[derive(Debug, Clone, Serialize)]
pub struct RunSpec {
    /// Unique, stable ID: `CLASS/POINT/rREP/ROLE-...`.
    pub id: String,
    /// Multipath run or baseline.
    pub role: Role,
    /// Topology indices of the paths, in the order the simulator gets them: the initial
    /// path first.
    pub path_indices: Vec<usize>,
    /// The path the connection starts on (topology index).
    pub initial_path: usize,
    /// Scheduler name.
    pub scheduler: String,
    /// Congestion controller name.
    pub cc: String,
    /// ACK policy name.
    pub ack_policy: String,
    /// Most ranges per ACK frame (`None`: the protocol's default).
    pub ack_ranges: Option<usize>,
    /// mpq's packet number spaces when compared (`factors.pn_space`): `per-path`
    /// (RFC 10069) or `single` (seed 003's experiment; multipath runs only); empty: per path,
    /// not compared.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pn_space: String,
    /// HyStart++ in mpq's slow start when the file sets it (`factors.hystart`): `on` or
    /// `off`; empty: the default (on), not set.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hystart: String,
    /// Download size, or request size.
    pub size: u64,
    /// Transport: `quic` (mpq), `mptcp-tls` or `tcp-tls` (the kernel's, kernel testbed only),
    /// `quic:NAME` (an implementation folder).
    pub transport: String,
    /// Extra `mpq perf` options for both ends (`factors.options`; kernel testbed only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub options: String,
    /// mpq's runtime on the kernel testbed (`single`, `per-path`, `shard`; empty: the
    /// experiment's, or not mpq's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub runtime: String,
    /// Receive steering on the namespace testbed (`default`, `rps`, `rfs`; empty: the
    /// kernel's settings, not compared).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub steering: String,
    /// IDs of the baselines of this run's paths (topology order), for the aggregation benefit.
    pub baselines: Vec<String>,
}

/// A scenario: one network (design point) and repetition, with its runs.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedScenario {
    /// `CLASS/POINT/rREP`.
    pub id: String,
    /// Class name.
    pub class: String,
    /// Design point within the class.
    pub point: usize,
    /// Repetition (0-based).
    pub repetition: u32,
    /// Seed of every run of the scenario.
    pub seed: u64,
    /// Values of the varied link parameters.
    pub params: BTreeMap<String, String>,
    /// Each path's link, in `mpq sim --link` form, topology order.
    pub links: Vec<String>,
    /// Path failures: topology index and time in seconds.
    pub fail: Vec<(usize, f64)>,
    /// The shared bottleneck's link (`mpq sim --bottleneck` form), if the class has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<String>,
    /// A competing flow crosses the bottleneck.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub competitor: bool,
    /// Runs: baselines first.
    pub runs: Vec<RunSpec>,
    #[serde(skip)]
    link_configs: Vec<LinkConfig>,
    #[serde(skip)]
    bottleneck_config: Option<LinkConfig>,
}

/// The whole plan.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Experiment name.
    pub experiment: String,
    /// Scenarios in order.
    pub scenarios: Vec<PlannedScenario>,
}

/// SplitMix64 finaliser: spreads nearby inputs over the whole range.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The seed of repetition `rep` of point `point` of class `class` (indices), from the file's
/// seed: stable, and different for every scenario.
pub fn scenario_seed(file_seed: u64, class: usize, point: usize, rep: u32) -> u64 {
    mix(mix(mix(file_seed ^ mix(class as u64)) ^ point as u64) ^ u64::from(rep))
}

/// The link spec of `path` (whose dimensions are named `{dim}.rate`, ...) at design point `p`.
fn link_spec(path: &PathSpec, dim: &str, p: &Point) -> String {
    let mut v: BTreeMap<&str, Quantity> = BTreeMap::new();
    for (name, _, value) in path_params(path) {
        if let Some(value) = value {
            let q = p.get(&format!("{dim}.{name}")).copied().unwrap_or_else(|| value.at(0.0));
            v.insert(name, q);
        }
    }
    let mut s = format!("{}/{}", v["rate"], v["rtt"]);
    if let Some(q) = v.get("queue") {
        s += &format!("/queue={q}");
    }
    if let Some(q) = v.get("loss") {
        s += &format!("/loss={q}");
    }
    if let (Some(gb), Some(bg)) = (v.get("gilbert_elliott.p_gb"), v.get("gilbert_elliott.p_bg")) {
        let bad = v.get("gilbert_elliott.loss_bad").copied().unwrap_or(Quantity { value: 1.0, unit: Unit::Fraction });
        let good = v.get("gilbert_elliott.loss_good").copied().unwrap_or(Quantity { value: 0.0, unit: Unit::Fraction });
        s += &format!("/loss=ge:{gb},{bg},{bad},{good}");
    }
    if let Some(q) = v.get("jitter") {
        s += &format!("/jitter={q}");
    }
    s
}

impl Plan {
    /// Expands `exp` into its scenarios and runs.
    pub fn new(exp: &Experiment) -> Result<Plan, String> {
        let mut scenarios = Vec::new();
        for (ci, class) in exp.classes.iter().enumerate() {
            for (pi, p) in points(class).iter().enumerate() {
                let links: Vec<String> =
                    class.paths.iter().enumerate().map(|(i, path)| link_spec(path, &format!("path{i}"), p)).collect();
                let parse =
                    |s: &String| s.parse::<LinkConfig>().map_err(|e| format!("class {}, point {pi}: {e}", class.name));
                let link_configs = links.iter().map(parse).collect::<Result<Vec<_>, _>>()?;
                let bottleneck = class.bottleneck.as_ref().map(|b| link_spec(&b.link, "bottleneck", p));
                let bottleneck_config = bottleneck.as_ref().map(parse).transpose()?;
                for rep in 0..exp.repetitions {
                    let id = format!("{}/{pi:04}/r{rep}", class.name);
                    let runs = runs(exp, class, &id);
                    scenarios.push(PlannedScenario {
                        id,
                        class: class.name.clone(),
                        point: pi,
                        repetition: rep,
                        seed: scenario_seed(exp.seed, ci, pi, rep),
                        params: p.iter().map(|(k, q)| (k.clone(), q.to_string())).collect(),
                        links: links.clone(),
                        fail: class.fail.iter().map(|&(i, t)| (i, t.as_secs_f64())).collect(),
                        bottleneck: bottleneck.clone(),
                        competitor: class.bottleneck.as_ref().is_some_and(|b| b.competitor),
                        runs,
                        link_configs: link_configs.clone(),
                        bottleneck_config: bottleneck_config.clone(),
                    });
                }
            }
        }
        Ok(Plan { experiment: exp.name.clone(), scenarios })
    }

    /// The scenarios `--limit` and `--shard` select: the first `limit` of the plan, then
    /// those of the slice. Positions are plan positions.
    pub fn select(&self, limit: Option<usize>, shard: Option<Shard>) -> Vec<usize> {
        let n = limit.unwrap_or(usize::MAX).min(self.scenarios.len());
        (0..n).filter(|&k| shard.is_none_or(|s| s.contains(k))).collect()
    }

    /// Total number of runs.
    pub fn run_count(&self) -> usize {
        self.scenarios.iter().map(|s| s.runs.len()).sum()
    }
}

fn size_tag(size: u64) -> String {
    format!("s{size}")
}

/// The runs of one scenario: baselines (deduplicated) first, then every factor combination.
fn runs(exp: &Experiment, class: &Class, sid: &str) -> Vec<RunSpec> {
    let n_all = class.paths.len();
    let counts = if exp.path_counts.is_empty() { vec![n_all] } else { exp.path_counts.clone() };
    let sizes = match &exp.workload {
        WorkloadPlan::Download { sizes } => sizes.clone(),
        WorkloadPlan::ReqResp { size, .. } => vec![*size],
    };
    let mut baselines: Vec<RunSpec> = Vec::new();
    let mut multi = Vec::new();
    for &size in &sizes {
        for &n in &counts {
            for &initial in exp.initial_paths.iter().filter(|&&i| i < n) {
                for sched in &exp.schedulers {
                    for cc in &exp.ccs {
                        let acks = exp.ack_policies.iter().flat_map(|&a| exp.ack_ranges.iter().map(move |&r| (a, r)));
                        for (ack, ranges) in acks {
                            let bcc = exp.baseline_cc.unwrap_or(*cc).to_string();
                            let mut ids = Vec::new();
                            if exp.baselines && n > 1 {
                                for p in 0..n {
                                    let id = format!("{sid}/sp{p}-{bcc}-{}", size_tag(size));
                                    if !baselines.iter().any(|b| b.id == id) {
                                        baselines.push(RunSpec {
                                            id: id.clone(),
                                            role: crate::plan::Role::Baseline,
                                            path_indices: vec![p],
                                            initial_path: p,
                                            scheduler: sched.to_string(),
                                            cc: bcc.clone(),
                                            ack_policy: ack_policy_name(ack).into(),
                                            // Baselines keep the protocol's default.
                                            ack_ranges: None,
                                            pn_space: String::new(),
                                            hystart: String::new(),
                                            size,
                                            transport: QUIC.into(),
                                            options: String::new(),
                                            runtime: String::new(),
                                            steering: String::new(),
                                            baselines: Vec::new(),
                                        });
                                    }
                                    ids.push(id);
                                }
                            }
                            let mut order = vec![initial];
                            order.extend((0..n).filter(|&p| p != initial));
                            multi.push(RunSpec {
                                id: format!(
                                    "{sid}/mp-{sched}-{cc}-{}{}-n{n}-i{initial}-{}",
                                    ack_policy_name(ack),
                                    ranges.map_or_else(String::new, |r| format!("-r{r}")),
                                    size_tag(size)
                                ),
                                role: Role::Multipath,
                                path_indices: order,
                                initial_path: initial,
                                scheduler: sched.to_string(),
                                cc: cc.to_string(),
                                ack_policy: ack_policy_name(ack).into(),
                                ack_ranges: ranges,
                                pn_space: String::new(),
                                hystart: String::new(),
                                size,
                                transport: QUIC.into(),
                                options: String::new(),
                                runtime: String::new(),
                                steering: String::new(),
                                baselines: ids,
                            });
                        }
                    }
                }
            }
        }
    }
    for kernel in [MPTCP_TLS, TCP_TLS] {
        if exp.transports.iter().any(|t| t == kernel) {
            own_settings_runs(exp, kernel, TCP_TLS, "kernel", sid, &sizes, &counts, &mut baselines, &mut multi);
            // Their congestion control column names the kernel's, when the file sets it.
            if let Some(cc) = &exp.kernel_cc {
                for r in baselines
                    .iter_mut()
                    .chain(multi.iter_mut())
                    .filter(|r| r.transport == kernel || (r.transport == TCP_TLS && r.cc == "kernel"))
                {
                    r.cc = format!("kernel {cc}");
                }
            }
        }
    }
    for imp in &exp.implementations {
        let t = format!("{}{}", crate::implementation::PREFIX, imp.name);
        own_settings_runs(exp, &t, &t, "default", sid, &sizes, &counts, &mut baselines, &mut multi);
    }
    if !exp.transports.iter().any(|t| t == QUIC) {
        // Only the kernel's transports: mpq's runs and their baselines go.
        baselines.retain(|r| r.transport != QUIC);
        multi.retain(|r| r.transport != QUIC);
    }
    baselines.extend(multi);
    crate::plan_variants::every_variant(exp, baselines)
}

/// The packet number space designs `factors.pn_space` may name: RFC 10069's, then seed
/// 003's alternative.
pub const PN_SPACES: [&str; 2] = ["per-path", "single"];

/// The runs of a transport that brings its own scheduler and congestion control, in a
/// scenario: one per size, path count and initial path, and its baselines (`baseline`, on
/// each path alone). For MPTCP+TLS (against TCP+TLS), TCP+TLS (which uses the initial path
/// only) and an implementation folder `quic:NAME` (against itself; one without multipath
/// gets every path too and uses the initial one, and its rows say `multipath: false`).
/// Their scheduler, congestion control and ACK policy columns say `setting` (`kernel`,
/// `default`).
#[allow(clippy::too_many_arguments)]
fn own_settings_runs(
    exp: &Experiment,
    transport: &str,
    baseline: &str,
    setting: &str,
    sid: &str,
    sizes: &[u64],
    counts: &[usize],
    baselines: &mut Vec<RunSpec>,
    multi: &mut Vec<RunSpec>,
) {
    let spec = |role, id: String, transport: &str, path_indices: Vec<usize>, size, baselines| RunSpec {
        id,
        role,
        initial_path: path_indices[0],
        path_indices,
        scheduler: setting.into(),
        cc: setting.into(),
        ack_policy: setting.into(),
        ack_ranges: None,
        pn_space: String::new(),
        hystart: String::new(),
        size,
        transport: transport.into(),
        options: String::new(),
        runtime: String::new(),
        steering: String::new(),
        baselines,
    };
    for &size in sizes {
        for &n in counts {
            let mut ids = Vec::new();
            if exp.baselines && n > 1 {
                for p in 0..n {
                    let id = format!("{sid}/sp{p}-{baseline}-{}", size_tag(size));
                    if !baselines.iter().any(|b| b.id == id) {
                        baselines.push(spec(Role::Baseline, id.clone(), baseline, vec![p], size, Vec::new()));
                    }
                    ids.push(id);
                }
            }
            for &initial in exp.initial_paths.iter().filter(|&&i| i < n) {
                let mut order = vec![initial];
                order.extend((0..n).filter(|&p| p != initial));
                let id = format!("{sid}/{transport}-n{n}-i{initial}-{}", size_tag(size));
                multi.push(spec(Role::Multipath, id, transport, order, size, ids.clone()));
            }
        }
    }
}

impl PlannedScenario {
    /// The simulator scenario of `run`: the run's paths in its order (initial first), the
    /// failures of those paths, the workload, the protocol settings and the scenario's seed.
    pub fn sim_scenario(&self, exp: &Experiment, run: &RunSpec) -> Result<Scenario, String> {
        let links = run.path_indices.iter().map(|&i| self.link_configs[i].clone()).collect();
        let mut s = Scenario::download(links, run.size);
        if let WorkloadPlan::ReqResp { size, interval, count } = exp.workload {
            s.workload = Workload::ReqResp { size, interval, count };
        }
        s.scheduler = run.scheduler.parse()?;
        s.cc = run.cc.parse()?;
        s.ack_policy = run.ack_policy.parse()?;
        if let Some(n) = run.ack_ranges {
            s.ack_ranges = n;
        }
        s.single_pn_space = run.pn_space == "single";
        if run.hystart == "off" {
            s.hystart = false;
        }
        s.fail = self
            .fail
            .iter()
            .filter_map(|&(i, t)| {
                run.path_indices.iter().position(|&p| p == i).map(|k| (k, Duration::from_secs_f64(t)))
            })
            .collect();
        s.seed = self.seed;
        s.max_time = exp.max_time;
        s.bottleneck = self.bottleneck_config.clone().map(|link| Bottleneck { link, competitor: self.competitor });
        Ok(s)
    }

    /// The `mpq sim` command line that repeats `run` (for manifests).
    pub fn sim_command(&self, exp: &Experiment, run: &RunSpec) -> String {
        let mut c = String::from("mpq sim");
        for &i in &run.path_indices {
            c += &format!(" --link {}", self.links[i]);
        }
        match exp.workload {
            WorkloadPlan::Download { .. } => c += &format!(" --size {}B", run.size),
            WorkloadPlan::ReqResp { size, interval, count } => {
                let iv = Quantity { value: interval.as_secs_f64(), unit: Unit::Seconds };
                c += &format!(" --workload reqresp:{size}B@{iv}x{count}");
            }
        }
        c += &format!(" --scheduler {} --cc {} --ack-policy {}", run.scheduler, run.cc, run.ack_policy);
        if let Some(n) = run.ack_ranges {
            c += &format!(" --ack-ranges {n}");
        }
        if run.pn_space == "single" {
            c += " --single-pn-space";
        }
        if run.hystart == "off" {
            c += " --no-hystart";
        }
        if let Some(b) = &self.bottleneck {
            c += &format!(" --bottleneck {b}");
            if self.competitor {
                c += " --competitor";
            }
        }
        for &(i, t) in &self.fail {
            if let Some(k) = run.path_indices.iter().position(|&p| p == i) {
                c += &format!(" --fail-link {k}@{}", Quantity { value: t, unit: Unit::Seconds });
            }
        }
        if let Some(t) = exp.max_time {
            c += &format!(" --max-time {}", Quantity { value: t.as_secs_f64(), unit: Unit::Seconds });
        }
        c + &format!(" --seed {}", self.seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn plan(yaml: &str) -> (Experiment, Plan) {
        let exp = Experiment::from_text(Path::new("p.yaml"), yaml.to_owned()).unwrap();
        let plan = Plan::new(&exp).unwrap();
        (exp, plan)
    }

    const THREE_PATHS: &str = "\
name: p
seed: 3
repetitions: 2
workload: {download: 1MB}
factors: {paths: [1, 3], initial_path: [0, 2], scheduler: [minrtt, ecf]}
baselines: {cc: cubic}
topology:
  paths:
    - {rate: 10mbit, rtt: [10ms, 20ms], queue: 20ms}
    - {rate: 20mbit, rtt: 30ms, loss: 1%}
    - {rate: 5mbit, rtt: 50ms, gilbert_elliott: {p_gb: 1%, p_bg: 10%}, jitter: 1ms}
  events: [{path: 2, fail_at: 2s}]
";

    #[test]
    fn scenarios_cross_points_and_repetitions_with_distinct_seeds() {
        let (_, p) = plan(THREE_PATHS);
        let ids: Vec<&str> = p.scenarios.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["main/0000/r0", "main/0000/r1", "main/0001/r0", "main/0001/r1"]);
        let mut seeds: Vec<u64> = p.scenarios.iter().map(|s| s.seed).collect();
        seeds.dedup();
        assert_eq!(seeds.len(), 4);
        assert_eq!(p.scenarios[0].seed, scenario_seed(3, 0, 0, 0));
        assert_eq!(
            p.scenarios[0].links,
            ["10mbit/10ms/queue=20ms", "20mbit/30ms/loss=1%", "5mbit/50ms/loss=ge:1%,10%,100%,0%/jitter=1ms"]
        );
        assert_eq!(p.scenarios[2].links[0], "10mbit/20ms/queue=20ms");
    }

    #[test]
    fn runs_cross_factors_and_share_baselines() {
        let (_, p) = plan(THREE_PATHS);
        let runs: Vec<&str> = p.scenarios[0].runs.iter().map(|r| r.id.rsplit('/').next().unwrap()).collect();
        // paths=1 only starts on path 0 (path 2 is not among its paths) and needs no baseline;
        // paths=3 starts on 0 or 2; both schedulers; three baselines shared by all.
        assert_eq!(
            runs,
            [
                "sp0-cubic-s1000000",
                "sp1-cubic-s1000000",
                "sp2-cubic-s1000000",
                "mp-minrtt-cubic-same-path-n1-i0-s1000000",
                "mp-ecf-cubic-same-path-n1-i0-s1000000",
                "mp-minrtt-cubic-same-path-n3-i0-s1000000",
                "mp-ecf-cubic-same-path-n3-i0-s1000000",
                "mp-minrtt-cubic-same-path-n3-i2-s1000000",
                "mp-ecf-cubic-same-path-n3-i2-s1000000",
            ]
        );
        let r = &p.scenarios[0].runs[7];
        assert_eq!(r.path_indices, [2, 0, 1]);
        assert_eq!(r.baselines.len(), 3);
        assert!(p.scenarios[0].runs[3].baselines.is_empty());
        assert_eq!(p.run_count(), 4 * 9);
    }

    #[test]
    fn sim_scenario_puts_the_initial_path_first_and_maps_failures() {
        let (exp, p) = plan(THREE_PATHS);
        let sc = &p.scenarios[0];
        let run = &sc.runs[7];
        let s = sc.sim_scenario(&exp, run).unwrap();
        assert_eq!(s.links.len(), 3);
        assert_eq!(s.links[0].rate_bps, 5_000_000, "path 2 first");
        assert_eq!(s.fail, [(0, Duration::from_secs(2))]);
        assert_eq!(s.seed, sc.seed);
        assert_eq!(s.size, 1_000_000);
        let base = sc.runs.iter().find(|r| r.id.ends_with("sp1-cubic-s1000000")).unwrap();
        assert!(sc.sim_scenario(&exp, base).unwrap().fail.is_empty(), "path 1 alone never fails");
        let cmd = sc.sim_command(&exp, run);
        assert!(cmd
            .starts_with("mpq sim --link 5mbit/50ms/loss=ge:1%,10%,100%,0%/jitter=1ms --link 10mbit/10ms/queue=20ms"));
        assert!(cmd.ends_with(&format!("--fail-link 0@2000ms --seed {}", sc.seed)), "{cmd}");
    }

    #[test]
    fn limit_and_shard_select_scenarios() {
        let (_, p) = plan(THREE_PATHS);
        assert_eq!(p.select(None, None), [0, 1, 2, 3]);
        assert_eq!(p.select(Some(3), None), [0, 1, 2]);
        assert_eq!(p.select(Some(3), Some(Shard { index: 1, count: 2 })), [0, 2]);
        assert_eq!(p.select(None, Some(Shard { index: 2, count: 2 })), [1, 3]);
        assert_eq!(p.select(Some(0), None), Vec::<usize>::new());
    }

    const TWO_PATHS_NETNS: &str = "\
name: t
testbed: netns
workload: {download: 1MB}
factors: {initial_path: [0, 1], transport: [quic, mptcp-tls]}
baselines: {cc: cubic}
topology:
  paths: [{rate: 10mbit, rtt: 10ms}, {rate: 20mbit, rtt: 30ms}]
";

    #[test]
    fn mptcp_runs_start_from_each_initial_path_against_tcp_baselines() {
        let (_, p) = plan(TWO_PATHS_NETNS);
        let runs = &p.scenarios[0].runs;
        let ids: Vec<&str> = runs.iter().map(|r| r.id.rsplit('/').next().unwrap()).collect();
        assert_eq!(
            ids,
            [
                "sp0-cubic-s1000000",
                "sp1-cubic-s1000000",
                "sp0-tcp-tls-s1000000",
                "sp1-tcp-tls-s1000000",
                "mp-minrtt-cubic-same-path-n2-i0-s1000000",
                "mp-minrtt-cubic-same-path-n2-i1-s1000000",
                "mptcp-tls-n2-i0-s1000000",
                "mptcp-tls-n2-i1-s1000000",
            ]
        );
        let mptcp = &runs[7];
        assert_eq!((mptcp.transport.as_str(), mptcp.path_indices.as_slice()), ("mptcp-tls", &[1, 0][..]));
        assert!(mptcp.baselines.iter().all(|b| b.contains("-tcp-tls-")), "{:?}", mptcp.baselines);
        assert!(runs[..2].iter().chain(&runs[4..6]).all(|r| r.transport == "quic"));
        // Only MPTCP: mpq's runs and their baselines go.
        let (_, p) = plan(&TWO_PATHS_NETNS.replace("transport: [quic, mptcp-tls]", "transport: [mptcp-tls]"));
        assert!(p.scenarios[0].runs.iter().all(|r| r.transport != "quic"));
        assert_eq!(p.scenarios[0].runs.len(), 4);
    }

    #[test]
    fn implementation_folders_get_a_run_per_initial_path_and_their_own_baselines() {
        let (_, p) =
            plan(&TWO_PATHS_NETNS.replace("transport: [quic, mptcp-tls]", "transport: [quic:noq, quic:quinn]"));
        let runs = &p.scenarios[0].runs;
        let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
        let sid = &p.scenarios[0].id;
        for t in ["quic:noq", "quic:quinn"] {
            for p in 0..2 {
                assert!(ids.contains(&format!("{sid}/sp{p}-{t}-s1000000").as_str()), "{ids:?}");
            }
            let mp: Vec<&RunSpec> = runs.iter().filter(|r| r.transport == t && r.role == Role::Multipath).collect();
            assert_eq!(mp.len(), 2, "{ids:?}");
            assert_eq!(mp[1].path_indices, vec![1, 0]);
            assert_eq!(mp[1].baselines, vec![format!("{sid}/sp0-{t}-s1000000"), format!("{sid}/sp1-{t}-s1000000")]);
        }
        // No mpq perf runs: quic is not listed.
        assert_eq!(runs.len(), 8);
    }

    #[test]
    fn option_sets_multiply_mpqs_runs_and_the_kernels_where_they_apply() {
        let yaml = TWO_PATHS_NETNS
            .replace(
                "transport: [quic, mptcp-tls]",
                "transport: [quic, tcp-tls], options: ['', '--cipher  chacha20', '--window 12500']",
            )
            .replace("initial_path: [0, 1]", "initial_path: [0]");
        let (_, p) = plan(&yaml);
        let runs = &p.scenarios[0].runs;
        let sid = &p.scenarios[0].id;
        let quic: Vec<&RunSpec> = runs.iter().filter(|r| r.transport == "quic").collect();
        // 2 baselines + 1 multipath run, for each of the three sets.
        assert_eq!(quic.len(), 9);
        let mp = quic.iter().find(|r| r.role == Role::Multipath && r.id.ends_with("-o1")).unwrap();
        assert_eq!(mp.options, "--cipher chacha20");
        assert!(mp.baselines.iter().all(|b| b.ends_with("-o1")), "{:?}", mp.baselines);
        assert!(mp.baselines.iter().all(|b| runs.iter().any(|r| &r.id == b && r.options == mp.options)));
        // TCP+TLS: no --window set (QUIC only); from path 0, against TCP+TLS on each path.
        let tcp: Vec<&RunSpec> = runs.iter().filter(|r| r.transport != "quic").collect();
        assert_eq!(tcp.len(), 6, "{:?}", tcp.iter().map(|r| &r.id).collect::<Vec<_>>());
        assert!(tcp.iter().all(|r| !r.options.contains("--window")));
        assert!(runs.iter().any(|r| r.id == format!("{sid}/tcp-tls-n2-i0-s1000000-o0") && r.role == Role::Multipath));
        for (set, expect) in [
            ("[quic]", "need testbed: netns"),
            ("['--bytes 5']", "set by the lab"),
            ("['x']", "starts with an option"),
            ("['--no-gso', ' --no-gso']", "listed twice"),
        ] {
            let yaml = TWO_PATHS_NETNS.replace("transport: [quic, mptcp-tls]", &format!("options: {set}"));
            let yaml = if set == "[quic]" {
                yaml.replace("options: [quic]", "options: ['--no-gso']").replace("netns", "sim")
            } else {
                yaml
            };
            let e = Experiment::from_text(Path::new("t.yaml"), yaml).unwrap_err().to_string();
            assert!(e.contains(expect) && e.contains("factors.options"), "{set}: {e}");
        }
    }

    #[test]
    fn steerings_repeat_every_run_with_its_own_baselines() {
        let yaml = TWO_PATHS_NETNS
            .replace("transport: [quic, mptcp-tls]", "transport: [quic, mptcp-tls], steering: [default, rfs]")
            .replace("initial_path: [0, 1]", "initial_path: [0]");
        let (_, p) = plan(&yaml);
        let runs = &p.scenarios[0].runs;
        // (2 QUIC baselines + 2 TCP+TLS baselines + mpq + MPTCP) × 2 steerings.
        assert_eq!(runs.len(), 12);
        for st in ["default", "rfs"] {
            let mine: Vec<&RunSpec> = runs.iter().filter(|r| r.steering == st).collect();
            assert_eq!(mine.len(), 6);
            assert!(mine.iter().all(|r| r.id.ends_with(&format!("-{st}"))));
            let mptcp = mine.iter().find(|r| r.transport == "mptcp-tls" && r.role == Role::Multipath).unwrap();
            assert!(mptcp.baselines.iter().all(|b| runs.iter().any(|r| &r.id == b && r.steering == st)));
        }
        // One value: no suffix, but the runs carry it.
        let (_, p) = plan(&TWO_PATHS_NETNS.replace("transport: [quic, mptcp-tls]", "steering: [rps]"));
        assert!(p.scenarios[0].runs.iter().all(|r| r.steering == "rps" && !r.id.ends_with("-rps")));
        for (set, expect) in [("[xps]", "expected one of default, rps, rfs"), ("[rps, rps]", "listed twice")] {
            let yaml = TWO_PATHS_NETNS.replace("transport: [quic, mptcp-tls]", &format!("steering: {set}"));
            let e = Experiment::from_text(Path::new("t.yaml"), yaml).unwrap_err().to_string();
            assert!(e.contains(expect) && e.contains("factors.steering"), "{set}: {e}");
        }
        let e = Experiment::from_text(
            Path::new("t.yaml"),
            TWO_PATHS_NETNS.replace("transport: [quic, mptcp-tls]", "steering: [rfs]").replace("netns", "sim"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("needs testbed: netns"), "{e}");
    }

    #[test]
    fn hystart_settings_repeat_every_mpq_run_with_baselines_of_the_same_setting() {
        let (exp0, p0) = plan(THREE_PATHS);
        let yaml = THREE_PATHS.replace("scheduler: [minrtt, ecf]", "scheduler: [minrtt, ecf], hystart: [on, off]");
        let (exp, p) = plan(&yaml);
        let (s0, s) = (&p0.scenarios[0], &p.scenarios[0]);
        // Single-path baselines too: slow start is every path's.
        assert_eq!(s.runs.len(), 2 * s0.runs.len());
        for r in &s.runs {
            assert!(r.id.ends_with(&format!("-hystart-{}", r.hystart)), "{}", r.id);
            for b in &r.baselines {
                let base = s.runs.iter().find(|x| &x.id == b).unwrap_or_else(|| panic!("{}: no baseline {b}", r.id));
                assert_eq!(base.hystart, r.hystart, "{}: compared with a baseline of its setting", r.id);
            }
            let sim = s.sim_scenario(&exp, r).unwrap();
            assert_eq!(sim.hystart, r.hystart == "on", "{}", r.id);
            assert_eq!(s.sim_command(&exp, r).contains("--no-hystart"), r.hystart == "off");
            assert_eq!(
                crate::netns_exec::protocol_args(&exp, r).iter().any(|a| a == "--no-hystart"),
                r.hystart == "off"
            );
        }
        // Unset: the simulator's default (on), nothing recorded; one setting: no suffix.
        assert!(s0.runs.iter().all(|r| r.hystart.is_empty() && s0.sim_scenario(&exp0, r).unwrap().hystart));
        let (exp1, p1) = plan(&THREE_PATHS.replace("scheduler: [minrtt, ecf]", "hystart: [off]"));
        let s1 = &p1.scenarios[0];
        assert!(s1.runs.iter().all(|r| r.hystart == "off" && !r.id.contains("hystart")));
        assert!(s1.runs.iter().all(|r| !s1.sim_scenario(&exp1, r).unwrap().hystart));
        for (set, expect) in [("[yes]", "expected on or off"), ("[on, on]", "listed twice")] {
            let yaml = THREE_PATHS.replace("scheduler: [minrtt, ecf]", &format!("hystart: {set}"));
            let e = Experiment::from_text(Path::new("t.yaml"), yaml).unwrap_err().to_string();
            assert!(e.contains(expect) && e.contains("factors.hystart"), "{set}: {e}");
        }
    }

    #[test]
    fn pn_spaces_repeat_only_mpqs_multipath_runs() {
        let yaml = THREE_PATHS.replace("scheduler: [minrtt, ecf]", "pn_space: [per-path, single]");
        let (exp, p) = plan(&yaml);
        let s = &p.scenarios[0];
        let ids: Vec<&str> = s.runs.iter().map(|r| r.id.rsplit('/').next().unwrap()).collect();
        // The baselines once (one path is one space either way), each multipath run twice.
        assert_eq!(ids.iter().filter(|i| i.starts_with("sp")).count(), 3);
        for (id, r) in ids.iter().zip(&s.runs).filter(|(i, _)| i.starts_with("mp-")) {
            assert!(id.ends_with(&format!("-{}", r.pn_space)), "{id}");
            assert!(r.baselines.iter().all(|b| s.runs.iter().any(|x| &x.id == b)), "{id}: baselines exist");
            let sim = s.sim_scenario(&exp, r).unwrap();
            assert_eq!(sim.single_pn_space, r.pn_space == "single");
            assert_eq!(s.sim_command(&exp, r).contains("--single-pn-space"), r.pn_space == "single");
        }
        let per_path = s.runs.iter().filter(|r| r.pn_space == "per-path").count();
        assert_eq!((per_path, s.runs.iter().filter(|r| r.pn_space == "single").count()), (3, 3));
        // The default: no suffix, nothing recorded.
        let (_, p) = plan(&THREE_PATHS.replace("scheduler: [minrtt, ecf]", "pn_space: [per-path]"));
        assert!(p.scenarios[0].runs.iter().all(|r| r.pn_space.is_empty() && !r.id.ends_with("-per-path")));
        for (set, expect) in [("[both]", "expected per-path or single"), ("[single, single]", "listed twice")] {
            let yaml = THREE_PATHS.replace("scheduler: [minrtt, ecf]", &format!("pn_space: {set}"));
            let e = Experiment::from_text(Path::new("t.yaml"), yaml).unwrap_err().to_string();
            assert!(e.contains(expect) && e.contains("factors.pn_space"), "{set}: {e}");
        }
    }

    /// The lab's per-path runtime is a thread per path however many (seed 000's mcMPQUIC),
    /// unless the run's options set the path threads themselves; single is one loop.
    #[test]
    fn the_per_path_runtime_asks_for_a_thread_per_path_unless_the_options_say_otherwise() {
        let yaml = TWO_PATHS_NETNS.replace(
            "transport: [quic, mptcp-tls]",
            "transport: [quic], runtime: [single, per-path], options: ['', '--path-threads 1']",
        );
        let (exp, p) = plan(&yaml);
        let mp: Vec<&RunSpec> = p.scenarios[0].runs.iter().filter(|r| r.role == Role::Multipath).collect();
        assert_eq!(mp.len(), 2 * 2 * 2, "initial paths x runtimes x option sets");
        for r in mp {
            let args = crate::netns_exec::protocol_args(&exp, r).join(" ");
            let expect = match (r.runtime.as_str(), r.options.is_empty()) {
                ("per-path", true) => "--threads per-path --path-threads paths",
                ("per-path", false) => "--threads per-path",
                _ => "--threads single",
            };
            assert!(args.contains(expect), "{}: {args}", r.id);
            // Once: the runtime's, or the options' (which every runtime gets).
            let once = r.runtime == "per-path" || !r.options.is_empty();
            assert_eq!(args.matches("--path-threads").count(), usize::from(once), "{}: {args}", r.id);
        }
    }

    #[test]
    fn kernel_cc_names_the_kernels_congestion_control_in_its_runs() {
        let (exp, p) = plan(&format!("kernel_cc: cubic\n{TWO_PATHS_NETNS}"));
        let runs = &p.scenarios[0].runs;
        for r in runs {
            let expect = if r.transport == "quic" { "cubic" } else { "kernel cubic" };
            assert_eq!(r.cc, expect, "{}", r.id);
        }
        let mptcp = runs.iter().find(|r| r.transport == "mptcp-tls").unwrap();
        assert_eq!(
            crate::netns_exec::protocol_args(&exp, mptcp),
            ["--transport", "mptcp-tls", "--tcp-cc", "cubic"].map(String::from)
        );
        let quic = runs.iter().find(|r| r.transport == "quic" && r.role == Role::Multipath).unwrap();
        assert!(!crate::netns_exec::protocol_args(&exp, quic).contains(&"--tcp-cc".to_owned()));
        for (yaml, expect) in [
            (format!("kernel_cc: 'cubic; rm'\n{TWO_PATHS_NETNS}"), "not a congestion control name"),
            (
                format!(
                    "kernel_cc: cubic\n{}",
                    TWO_PATHS_NETNS.replace("transport: [quic, mptcp-tls]", "transport: [quic]")
                ),
                "list tcp-tls or mptcp-tls",
            ),
        ] {
            let e = Experiment::from_text(Path::new("t.yaml"), yaml).unwrap_err().to_string();
            assert!(e.contains(expect) && e.contains("kernel_cc"), "{e}");
        }
    }

    #[test]
    fn the_kernels_transports_need_the_kernel_testbed() {
        for (yaml, expect) in [
            (TWO_PATHS_NETNS.replace("testbed: netns", "testbed: sim"), "needs testbed: netns"),
            (TWO_PATHS_NETNS.replace("mptcp-tls]", "tcp]"), "expected quic, mptcp-tls"),
            (TWO_PATHS_NETNS.replace("mptcp-tls]", "quic:picoquic]"), "no implementation \"picoquic\""),
            (TWO_PATHS_NETNS.replace("mptcp-tls]", "quic:noq]").replace("netns", "sim"), "needs testbed: netns"),
            (TWO_PATHS_NETNS.replace("mptcp-tls]", "quic]"), "listed twice"),
        ] {
            let e = Experiment::from_text(Path::new("t.yaml"), yaml).unwrap_err().to_string();
            assert!(e.contains(expect) && e.contains("factors.transport"), "{e}");
        }
    }
}
