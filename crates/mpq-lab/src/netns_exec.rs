//! Runs one planned run on the kernel testbed (`testbed: netns`): the run's paths become a
//! testbed (network namespaces joined through the user-space link emulator, [`crate::testbed`]),
//! `mpq perf server` and `mpq perf client` run in its namespaces over the real kernel and the
//! runtime the experiment names, and the row is filled from the client's JSON summary, the
//! server's account of the connection and the emulator's link counters. The testbed is taken
//! down after every run, whatever happened, so that runs do not share queues or state.
//!
//! Times are wall-clock: the completion time is the client's, from the handshake's completion
//! to the last byte (the simulator's counts from the first packet), and scripted path failures
//! count from the emulator's start, a few milliseconds before the client's first packet.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::experiment::{Experiment, WorkloadPlan, QUIC};
use crate::manifest::{fnv1a_hex, Manifest};
use crate::metrics::{row, Row};
use crate::netns_competitor::{competitor_rate, Competitor};
pub use crate::netns_process::interrupted;
pub(crate) use crate::netns_process::{
    drain, in_namespace, last_lines, server_port, server_reports, server_reports_and_tail, shell_word,
    wait_cpu_limited, wait_limited, Reaped,
};
use crate::plan::{Plan, PlannedScenario, RunSpec};
use crate::testbed::control;
use crate::testbed::lifecycle::{self, Launcher, UpOptions};

/// How long a run may take when the experiment sets no `max_time`.
pub(crate) const DEFAULT_RUN_LIMIT: Duration = Duration::from_secs(300);
/// How long the server may take, after the client finished, to report the connection.
const SERVER_REPORT_TIMEOUT: Duration = Duration::from_secs(3);

#[allow(clippy::disallowed_methods)] // the kernel testbed runs in real time
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

/// Checks, before anything runs, that the plan can run on the kernel testbed: the
/// request/response workload over mpq's QUIC in one connection only (`mpq perf client
/// --request-size`), at most 8 paths; and that this host can build testbeds (root, `ip`,
/// `/dev/net/tun`). A shared bottleneck (and its competitor) is the testbed's too.
pub fn check(exp: &Experiment, plan: &Plan) -> Result<(), String> {
    check_workload(exp)?;
    for s in &plan.scenarios {
        if s.competitor {
            if let Some(t) = exp.transports.iter().find(|t| crate::implementation::name_of(t).is_some()) {
                return Err(format!(
                    "{}: class {}: the competitor at the shared bottleneck runs with mpq's own transports only, not with the implementation folder {t}",
                    exp.path.display(),
                    s.class
                ));
            }
        }
        if s.links.len() > 8 {
            return Err(format!("{}: class {}: the kernel testbed has at most 8 paths", exp.path.display(), s.class));
        }
    }
    crate::testbed::host::preflight()
}

/// The request/response workload runs as `mpq perf client --request-size`: mpq's QUIC in
/// the single or per-path runtime only.
pub(crate) fn check_workload(exp: &Experiment) -> Result<(), String> {
    if let WorkloadPlan::ReqResp { .. } = exp.workload {
        if let Some(t) = exp.transports.iter().find(|t| t.as_str() != QUIC) {
            return Err(format!(
                "{}: the request/response workload runs over mpq's QUIC only (mpq perf --request-size), not {t}",
                exp.path.display()
            ));
        }
        if exp.runtimes.iter().any(|r| r == "shard") {
            return Err(format!(
                "{}: the request/response workload runs over one connection: not in the shard runtime",
                exp.path.display()
            ));
        }
    }
    Ok(())
}

/// The client's workload options: `--bytes SIZE`, or the request/response schedule.
pub(crate) fn workload_args(exp: &Experiment, run: &RunSpec) -> Vec<String> {
    match exp.workload {
        WorkloadPlan::Download { .. } => vec!["--bytes".into(), run.size.to_string()],
        WorkloadPlan::ReqResp { interval, count, .. } => vec![
            "--request-size".into(),
            run.size.to_string(),
            "--request-interval".into(),
            format!("{}", interval.as_secs_f64() * 1e3),
            "--requests".into(),
            count.to_string(),
        ],
    }
}

/// The workload's name in rows.
pub(crate) fn workload_name(exp: &Experiment) -> &'static str {
    match exp.workload {
        WorkloadPlan::Download { .. } => "download",
        WorkloadPlan::ReqResp { .. } => "reqresp",
    }
}

/// Sets up and builds every implementation folder the experiment names (their
/// `setup-env.sh` and `build.sh`, idempotent), before the first run.
pub fn prepare(exp: &Experiment, mpq: &Path) -> Result<(), String> {
    for imp in &exp.implementations {
        eprintln!("preparing implementation {} ({})", imp.name, imp.dir.display());
        imp.prepare(mpq)?;
    }
    Ok(())
}

/// The testbed name of a run: unique to this process and run, within the 24 characters a
/// testbed name may have.
fn testbed_name(run: &RunSpec) -> String {
    format!("lab{}-{}", std::process::id(), &fnv1a_hex(&run.id)[..8])
}

/// The transport and protocol settings of `run` as `mpq perf` options (both ends take
/// them). The kernel's transports take none of mpq's settings: the kernel chooses.
pub(crate) fn protocol_args(exp: &Experiment, run: &RunSpec) -> Vec<String> {
    let options = run.options.split_whitespace().map(String::from);
    if run.transport != QUIC {
        let cc = exp.kernel_cc.iter().flat_map(|cc| ["--tcp-cc".to_owned(), cc.clone()]);
        return ["--transport".to_owned(), run.transport.clone()].into_iter().chain(cc).chain(options).collect();
    }
    let mut a = vec![
        "--cc".into(),
        run.cc.clone(),
        "--scheduler".into(),
        run.scheduler.clone(),
        "--ack-policy".into(),
        run.ack_policy.clone(),
    ];
    match if run.runtime.is_empty() { exp.runtime.as_str() } else { run.runtime.as_str() } {
        // One single-path connection per path (each from its own address, so over its own
        // path), the server sharded alike.
        "shard" => a.extend(["--shard".into(), run.path_indices.len().to_string()]),
        // A thread per path however many (seed 000's mcMPQUIC), unless the run's options
        // say otherwise: mpq's default stops at the CPUs' count.
        "per-path" if !run.options.split_whitespace().any(|o| o.starts_with("--path-threads")) => {
            a.extend(["--threads".into(), "per-path".into(), "--path-threads".into(), "paths".into()])
        }
        rt => a.extend(["--threads".into(), rt.to_owned()]),
    }
    if let Some(n) = run.ack_ranges {
        a.extend(["--ack-ranges".into(), n.to_string()]);
    }
    if run.pn_space == "single" {
        a.push("--single-pn-space".into());
    }
    if run.hystart == "off" {
        a.push("--no-hystart".into());
    }
    a.extend(options);
    a
}

/// Takes the testbed down when dropped.
struct TestbedDown(String);

impl Drop for TestbedDown {
    fn drop(&mut self) {
        if let Err(e) = lifecycle::down(&self.0) {
            eprintln!("taking testbed {} down: {e}", self.0);
        }
    }
}

/// What one run on the testbed measured.
pub(crate) struct Measured {
    /// The client's JSON summary (`bytes`, `duration_s`, `goodput_bps`, `multipath`, and
    /// from `mpq perf` its `paths`).
    pub(crate) client: serde_json::Value,
    /// The server's `connection ended:` JSON, if it came in time.
    pub(crate) server: Option<serde_json::Value>,
    /// What each path carried to the client, in the run's path order.
    pub(crate) links: PathCounters,
    /// The client's command line.
    pub(crate) command: String,
    /// Whether the download was checked byte for byte and matched (`None`: only its length
    /// was checked, as `mpq perf` does).
    pub(crate) verified: Option<bool>,
    /// The server's and the client's process IDs (for their profiles).
    pub(crate) pids: (u32, u32),
}

/// What the paths carried server -> client, in the run's path order: from the link emulator
/// on the namespace testbed, from the client host's interface counters over SSH.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PathCounters {
    /// Bytes delivered to the client on each path.
    pub(crate) delivered: Vec<u64>,
    /// Packets the network dropped (queue, loss, outage, MTU), all paths together; 0 when
    /// unknown.
    pub(crate) dropped: u64,
}

impl PathCounters {
    /// The server -> client counters of the emulator's report.
    /// The shared bottleneck's server -> client drops count too unless a competitor sent
    /// anything (then whose packets it dropped is not known).
    pub(crate) fn of_emulator(report: &control::Report) -> PathCounters {
        let drops = |l: &control::LinkReport| l.dropped_queue + l.dropped_loss + l.dropped_down + l.dropped_mtu;
        let alone = report.competitor.as_ref().is_none_or(|c| c.c2s.sent_packets == 0);
        let bottleneck = report.bottleneck.as_ref().filter(|_| alone).map_or(0, |b| drops(&b.s2c));
        PathCounters {
            delivered: report.paths.iter().map(|p| p.s2c.delivered_bytes).collect(),
            dropped: report.paths.iter().map(|p| drops(&p.s2c)).sum::<u64>() + bottleneck,
        }
    }
}

/// Runs `run` of `scenario` on a fresh testbed with the `mpq` binary `mpq`; returns its row
/// (EBen not set) and manifest. Anything that fails becomes the row's error.
pub fn execute(
    exp: &Experiment,
    scenario: &PlannedScenario,
    run: &RunSpec,
    qlog: Option<&Path>,
    profile: Option<&Path>,
    mpq: &Path,
) -> (Row, Manifest) {
    let start = wall_clock();
    let name = testbed_name(run);
    let profile = profile.map(|d| d.join(run.id.replace('/', "_")));
    let outcome = match &profile {
        None => measure(exp, scenario, run, qlog, mpq, &name),
        Some(d) => std::fs::create_dir_all(d)
            .map_err(|e| format!("creating {}: {e}", d.display()))
            .and_then(|()| crate::profile::Recorder::system_wide(&d.join("perf.data")))
            .and_then(|recorder| {
                let mut m = measure(exp, scenario, run, qlog, mpq, &name)?;
                match recorder.stop() {
                    Ok(recording) => add_profiles(&mut m, &recording),
                    Err(e) => eprintln!("warning: {e}"),
                }
                Ok(m)
            }),
    };
    let (r, command) = row_of(exp, scenario, run, outcome, start.elapsed().as_secs_f64());
    (r, Manifest::of_run(exp, scenario, run, format!("netns (Linux {})", kernel_release()), command))
}

/// The row of a kernel-testbed run that took `wall_s` (EBen not set) and the client's command
/// line: what it measured, or its error.
pub(crate) fn row_of(
    exp: &Experiment,
    scenario: &PlannedScenario,
    run: &RunSpec,
    outcome: Result<Measured, String>,
    wall_s: f64,
) -> (Row, String) {
    match outcome {
        Ok(m) => (fill(row(&exp.name, scenario, run, workload_name(exp), Err(""), wall_s), run, &m), m.command),
        Err(e) => (row(&exp.name, scenario, run, workload_name(exp), Err(&e), wall_s), String::new()),
    }
}

/// The running kernel's release (`uname -r`), for manifests.
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map_or_else(|_| "unknown".into(), |s| s.trim().to_owned())
}

fn measure(
    exp: &Experiment,
    scenario: &PlannedScenario,
    run: &RunSpec,
    qlog: Option<&Path>,
    mpq: &Path,
    name: &str,
) -> Result<Measured, String> {
    let links: Vec<String> = run.path_indices.iter().map(|&i| scenario.links[i].clone()).collect();
    // The scenario's failures of this run's paths, in the run's path order.
    let events: Vec<String> = scenario
        .fail
        .iter()
        .filter_map(|&(i, t)| run.path_indices.iter().position(|&p| p == i).map(|k| format!("{k}@{t}s:down")))
        .collect();
    let opts = UpOptions {
        name: name.to_owned(),
        links,
        bottleneck: scenario.bottleneck.clone(),
        events,
        seed: scenario.seed,
        realtime: false,
    };
    let launcher =
        Launcher { program: mpq.to_owned(), args: ["lab", "testbed", "emulator", "--name"].map(String::from).to_vec() };
    let state = lifecycle::up(&opts, &launcher)?;
    let _down = TestbedDown(name.to_owned());
    // (Restores what it changed system-wide when the run ends, before the testbed goes.)
    let ifaces: Vec<String> = state.paths.iter().map(|p| p.interface.clone()).collect();
    let _steering = crate::steering::apply(&run.steering, &[&state.client_ns, &state.server_ns], &ifaces)?;
    if let Some(name) = crate::implementation::name_of(&run.transport) {
        let imp = exp
            .implementations
            .iter()
            .find(|i| i.name == name)
            .ok_or_else(|| format!("{name}: not among the experiment's implementations"))?;
        let logs = qlog.map(|d| d.join(run.id.replace('/', "_")));
        return crate::netns_external::measure(exp, run, scenario.seed, &state, imp, logs, mpq);
    }
    let proto = protocol_args(exp, run);
    let qlog_dir = |role: &str| -> Option<PathBuf> {
        qlog.map(|d| d.join(run.id.replace('/', "_")).join(role)).filter(|d| std::fs::create_dir_all(d).is_ok())
    };

    // The server: every address of the server namespace, a port the kernel picks.
    let mut server_args: Vec<String> = vec!["perf".into(), "server".into(), "--listen".into(), "0.0.0.0:0".into()];
    server_args.extend(proto.iter().cloned());
    if let Some(d) = qlog_dir("server").filter(|_| run.transport == QUIC) {
        server_args.extend(["--qlog-dir".into(), d.display().to_string()]);
    }
    let mut server = Reaped::new(
        in_namespace(&state.server_ns, mpq, &server_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the server ({}): {e}", mpq.display()))?,
    );
    let port = server_port(&mut server.child)?;
    let (ended, server_tail) = server_reports_and_tail(&mut server.child);
    // The server's threads' CPU, until it is stopped (no interface of its own to count).
    let server_threads = crate::ifstats::sample(server.child.id(), Vec::new());

    // The client: path 0's server address, one local address per path (the testbed routes
    // by source address, so path k's packets take path k's links).
    let mut client_args: Vec<String> = vec![
        "perf".into(),
        "client".into(),
        "--connect".into(),
        format!("{}:{port}", state.paths[0].server),
        "--json".into(),
    ];
    client_args.extend(workload_args(exp, run));
    // (One TCP+TLS connection: from the initial path's address only.)
    let locals = if run.transport == crate::experiment::TCP_TLS { &state.paths[..1] } else { &state.paths[..] };
    for p in locals {
        client_args.extend(["--local".into(), format!("{}:0", p.client)]);
    }
    if state.paths.len() == 1 && run.transport == QUIC {
        client_args.push("--no-multipath".into());
    }
    client_args.extend(proto.iter().cloned());
    if let Some(d) = qlog_dir("client").filter(|_| run.transport == QUIC) {
        client_args.extend(["--qlog-dir".into(), d.display().to_string()]);
    }
    let command = format!(
        "ip netns exec {} {} {}",
        state.client_ns,
        mpq.display(),
        client_args.iter().map(|a| shell_word(a)).collect::<Vec<_>>().join(" ")
    );
    // The competing download through the shared bottleneck starts with the run's connection,
    // as in the simulator, and is stopped when the run ends.
    let _competitor = match (&state.bottleneck, scenario.competitor) {
        (Some(b), true) => Some(Competitor::start(&state, &b.competitor, mpq)?),
        _ => None,
    };
    let before = match &state.bottleneck {
        Some(_) => Some(control::stats(name).map_err(|e| format!("the emulator's counters: {e}"))?),
        None => None,
    };
    let started = wall_clock();
    let client = in_namespace(&state.client_ns, mpq, &client_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the client: {e}"))?;
    let limit = exp.max_time.unwrap_or(DEFAULT_RUN_LIMIT);
    let counters = crate::ifstats::sample(client.id(), state.paths.iter().map(|p| p.interface.clone()).collect());
    let client_pid = client.id();
    let (out, client_cpu) = wait_limited(client, limit)?;
    let elapsed = started.elapsed().as_secs_f64();
    let after = match &before {
        Some(_) => Some(control::stats(name).map_err(|e| format!("the emulator's counters: {e}"))?),
        None => None,
    };
    let sampled = counters.join().unwrap_or_default();
    let throughput = crate::ifstats::trimmed_rate(&sampled.rx);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // The server's side too: whether it still ran, and what it said last.
        let status = match server.child.try_wait() {
            Ok(Some(s)) => format!("ended ({s})"),
            _ => "running".to_string(),
        };
        let said = server_tail.lock().map(|t| t.iter().cloned().collect::<Vec<_>>().join(" | ")).unwrap_or_default();
        return Err(format!(
            "the client failed ({}): {}; the server was {status}, its last lines: {said}",
            out.status,
            last_lines(&stderr, 3)
        ));
    }
    let mut client: serde_json::Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| format!("no JSON summary from the client: {}", last_lines(&stderr, 3)))?;
    let mut server_report = ended.recv_timeout(SERVER_REPORT_TIMEOUT).ok();
    let server_cpu = server.stop();
    if let Some(o) = client.as_object_mut() {
        // (The first scripted failure of the run's paths, for the delay after it.)
        let failure = scenario.fail.iter().filter(|(i, _)| run.path_indices.contains(i)).map(|&(_, t)| t);
        o.insert("failure_s".into(), serde_json::json!(failure.reduce(f64::min)));
        o.insert("cpu_s".into(), serde_json::json!(client_cpu));
        o.insert("throughput_bps".into(), serde_json::json!(throughput));
        o.insert("threads_cpu_s".into(), serde_json::json!(sampled.threads));
        o.insert("cores".into(), serde_json::json!(sampled.cores));
        if scenario.competitor {
            let rate = competitor_rate(before.as_ref(), after.as_ref(), elapsed);
            o.insert("competitor_bps".into(), serde_json::json!(rate));
        }
    }
    let server_threads = server_threads.join().unwrap_or_default().threads;
    // The server's CPU time comes from the kernel (wait4), not from its report: keep it when
    // the report did not come in time (the client's one CONNECTION_CLOSE dropped by a full
    // emulated queue leaves the server waiting for its idle timeout).
    if server_report.is_none() && server_cpu.is_some() {
        server_report = Some(serde_json::json!({}));
    }
    if let (Some(serde_json::Value::Object(o)), Some(cpu)) = (&mut server_report, server_cpu) {
        o.insert("cpu_s".into(), serde_json::json!(cpu));
        o.insert("threads_cpu_s".into(), serde_json::json!(server_threads));
    }
    let links = match after {
        Some(a) => PathCounters::of_emulator(&a),
        None => PathCounters::of_emulator(&control::stats(name).map_err(|e| format!("the emulator's counters: {e}"))?),
    };
    let pids = (server.child.id(), client_pid);
    Ok(Measured { client, server: server_report, links, command, verified: None, pids })
}

/// Puts each endpoint's categorised profile from a finished system-wide recording into its
/// JSON (`profile`). A profile that failed or caught no sample is left out with a warning:
/// the run itself stands.
fn add_profiles(m: &mut Measured, recording: &crate::profile::Recording) {
    let (server_pid, client_pid) = m.pids;
    let mut server = m.server.take().unwrap_or_else(|| serde_json::json!({}));
    for (json, pid, role) in [(&mut m.client, client_pid, "client"), (&mut server, server_pid, "server")] {
        match recording.of_pid(pid) {
            Ok(p) if p.values().sum::<f64>() > 0.0 => {
                if let Some(o) = json.as_object_mut() {
                    o.insert("profile".into(), serde_json::json!(p));
                }
            }
            Ok(_) => eprintln!("warning: {}: no samples of the {role} (pid {pid})", recording.data.display()),
            Err(e) => eprintln!("warning: {}: {e}", recording.data.display()),
        }
    }
    m.server = Some(server);
}

/// The `profile` of an endpoint's JSON ([`add_profiles`]).
fn profile_of(v: &serde_json::Value) -> Option<std::collections::BTreeMap<String, f64>> {
    v.get("profile").and_then(|p| serde_json::from_value(p.clone()).ok())
}

/// The request/response columns from the client's report (`mpq perf client --request-size
/// --json`): counts, delay percentiles, each request's slot and delay, and the longest delay
/// of an answer that arrived after the first scripted failure (`failure_s`, seconds from the
/// emulator's start, which is within milliseconds of the client's).
fn fill_requests(r: &mut Row, client: &serde_json::Value) {
    let list = client.get("requests").and_then(serde_json::Value::as_array).cloned().unwrap_or_default();
    r.requests = list
        .iter()
        .filter_map(|q| {
            Some(crate::metrics::RequestPoint {
                sent_s: q.get("sent_s")?.as_f64()?,
                delay_ms: q.get("delay_ms").and_then(serde_json::Value::as_f64),
            })
        })
        .collect();
    r.requests_sent = r.requests.len() as u64;
    r.requests_answered = r.requests.iter().filter(|q| q.delay_ms.is_some()).count() as u64;
    let mut delays: Vec<f64> = r.requests.iter().filter_map(|q| q.delay_ms).collect();
    delays.sort_by(f64::total_cmp);
    r.delay_p50_ms = crate::metrics::percentile(&delays, 50.0);
    r.delay_p90_ms = crate::metrics::percentile(&delays, 90.0);
    r.delay_p99_ms = crate::metrics::percentile(&delays, 99.0);
    r.delay_max_ms = delays.last().copied();
    r.delay_after_failure_max_ms = client.get("failure_s").and_then(serde_json::Value::as_f64).and_then(|f| {
        r.requests
            .iter()
            .filter_map(|q| q.delay_ms.filter(|d| q.sent_s + d / 1e3 > f))
            .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.max(d))))
    });
}

/// An endpoint's CPU seconds per thread name (`threads_cpu_s` of its JSON), if any.
fn threads_of(v: &serde_json::Value) -> Option<std::collections::BTreeMap<String, f64>> {
    v.get("threads_cpu_s")
        .and_then(|t| serde_json::from_value::<std::collections::BTreeMap<String, f64>>(t.clone()).ok())
        .filter(|t| !t.is_empty())
}

/// An endpoint's per-core busy shares (`cores` of its JSON), if any.
fn cores_of(v: &serde_json::Value) -> Option<Vec<f64>> {
    v.get("cores").and_then(|c| serde_json::from_value::<Vec<f64>>(c.clone()).ok()).filter(|c| !c.is_empty())
}

/// Fills `r` (a row with nothing measured) from what the run measured.
pub(crate) fn fill(mut r: Row, run: &RunSpec, m: &Measured) -> Row {
    r.error = None;
    let num = |v: &serde_json::Value, k: &str| v.get(k).and_then(serde_json::Value::as_f64);
    let int = |v: &serde_json::Value, k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    r.bytes = int(&m.client, "bytes");
    r.goodput_bps = num(&m.client, "goodput_bps").unwrap_or(0.0);
    r.completion_s = num(&m.client, "duration_s");
    r.multipath = m.client.get("multipath").and_then(serde_json::Value::as_bool).unwrap_or(false);
    r.completed = if m.client.get("mode").and_then(serde_json::Value::as_str) == Some("reqresp") {
        fill_requests(&mut r, &m.client);
        r.requests_sent > 0 && r.requests_answered == r.requests_sent
    } else {
        r.bytes >= run.size
    };
    // mpq perf checks the length of what it received, not every byte's value; the
    // implementation folders' downloads are compared byte for byte.
    r.data_ok = r.completed && m.verified.unwrap_or(true);
    if !r.completed && r.workload == "reqresp" {
        r.error = Some(format!("{} of {} requests answered", r.requests_answered, r.requests_sent));
    } else if !r.completed {
        r.error = Some(format!("the client received {} of {} bytes", r.bytes, run.size));
    } else if !r.data_ok {
        r.error = Some("the downloaded file differs from the served one".into());
    }
    // Bytes each path delivered server -> client, mapped back to the topology's order.
    for (k, &b) in m.links.delivered.iter().enumerate() {
        if let Some(&topo) = run.path_indices.get(k) {
            r.path_bytes[topo] = b;
        }
    }
    r.dropped_packets = m.links.dropped;
    let total: u64 = r.path_bytes.iter().sum();
    if total > 0 {
        r.path_share = r.path_bytes.iter().map(|&b| b as f64 / total as f64).collect();
    }
    let paths =
        |v: &serde_json::Value| v.get("paths").and_then(serde_json::Value::as_array).cloned().unwrap_or_default();
    // (Only from a real report: without one the server's losses are unknown, not zero.)
    if let Some(s) = m.server.as_ref().filter(|s| s.get("paths").is_some()) {
        r.lost_packets = paths(s).iter().map(|p| int(p, "lost_packets")).sum();
        r.retransmitted_bytes = paths(s).iter().map(|p| int(p, "lost_bytes")).sum();
        r.spurious_loss_est = r.lost_packets.saturating_sub(r.dropped_packets);
    }
    r.throughput_bps = num(&m.client, "throughput_bps");
    r.competitor_goodput_bps = num(&m.client, "competitor_bps");
    r.profile_client = profile_of(&m.client);
    r.profile_server = m.server.as_ref().and_then(profile_of);
    r.cpu_client_s = num(&m.client, "cpu_s");
    r.threads_client = threads_of(&m.client);
    r.threads_server = m.server.as_ref().and_then(threads_of);
    r.cpu_server_s = m.server.as_ref().and_then(|s| num(s, "cpu_s"));
    r.cpu_cores = cores_of(&m.client);
    r.cpu_cores_server = m.server.as_ref().and_then(cores_of);
    r.ack_frames = paths(&m.client).iter().map(|p| int(p, "acks_sent")).sum();
    let ranges: u64 = paths(&m.client).iter().map(|p| int(p, "ack_ranges_sent")).sum();
    r.ranges_per_ack = (r.ack_frames > 0).then(|| ranges as f64 / r.ack_frames as f64);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::control::{LinkReport, PathReport};

    fn link(delivered: u64, dropped: u64) -> LinkReport {
        LinkReport {
            up: true,
            rate_bps: 0,
            delay_ms: 0.0,
            loss: 0.0,
            sent_packets: 0,
            sent_bytes: 0,
            delivered_packets: 0,
            delivered_bytes: delivered,
            dropped_queue: dropped,
            dropped_loss: 0,
            dropped_down: 0,
            dropped_mtu: 0,
            duplicated: 0,
            reordered: 0,
        }
    }

    fn run(paths: Vec<usize>, size: u64) -> RunSpec {
        RunSpec {
            id: "c/0/r0/multipath".into(),
            role: crate::plan::Role::Multipath,
            path_indices: paths.clone(),
            initial_path: paths[0],
            scheduler: "lowest-rtt".into(),
            cc: "cubic".into(),
            ack_policy: "same-path".into(),
            ack_ranges: None,
            pn_space: String::new(),
            hystart: String::new(),
            size,
            transport: QUIC.into(),
            options: String::new(),
            runtime: String::new(),
            steering: String::new(),
            baselines: vec![],
        }
    }

    fn empty_row(n: usize) -> Row {
        Row { path_bytes: vec![0; n], path_share: vec![0.0; n], ..Row::default() }
    }

    #[test]
    fn a_row_takes_the_clients_summary_the_servers_losses_and_the_links_counters_in_topology_order() {
        let m = Measured {
            client: serde_json::json!({
                "bytes": 1000, "goodput_bps": 8000.0, "duration_s": 1.0, "multipath": true,
                "paths": [{"acks_sent": 3, "ack_ranges_sent": 6}, {"acks_sent": 1, "ack_ranges_sent": 1}],
            }),
            server: Some(
                serde_json::json!({"paths": [{"lost_packets": 4, "lost_bytes": 5000}, {"lost_packets": 1, "lost_bytes": 1200}]}),
            ),
            links: PathCounters::of_emulator(&control::Report {
                uptime_s: 1.0,
                in_flight: 0,
                not_ipv4: 0,
                write_errors: 0,
                // The run's path 0 is topology path 1.
                paths: vec![
                    PathReport { c2s: link(0, 0), s2c: link(300, 2), kernel_drops: 0 },
                    PathReport { c2s: link(0, 0), s2c: link(900, 1), kernel_drops: 0 },
                ],
                bottleneck: None,
                competitor: None,
            }),
            command: String::new(),
            verified: None,
            pids: (0, 0),
        };
        let r = fill(empty_row(2), &run(vec![1, 0], 1000), &m);
        assert!(r.completed && r.data_ok && r.multipath && r.error.is_none());
        assert_eq!(r.path_bytes, vec![900, 300]);
        assert!((r.path_share[0] - 0.75).abs() < 1e-9);
        assert_eq!((r.dropped_packets, r.lost_packets, r.retransmitted_bytes, r.spurious_loss_est), (3, 5, 6200, 2));
        assert_eq!((r.ack_frames, r.ranges_per_ack), (4, Some(7.0 / 4.0)));
        assert_eq!((r.completion_s, r.goodput_bps), (Some(1.0), 8000.0));
    }

    #[test]
    fn a_shared_bottlenecks_drops_count_unless_a_competitor_sent_and_its_rate_is_its_delivered_bytes() {
        use crate::testbed::control::BottleneckReport;
        let report = |competitor_sent: u64, competitor_delivered: u64| {
            let mut c = PathReport { c2s: link(0, 0), s2c: link(competitor_delivered, 0), kernel_drops: 0 };
            c.c2s.sent_packets = competitor_sent;
            control::Report {
                uptime_s: 1.0,
                in_flight: 0,
                not_ipv4: 0,
                write_errors: 0,
                paths: vec![PathReport { c2s: link(0, 0), s2c: link(500, 2), kernel_drops: 0 }],
                bottleneck: Some(BottleneckReport { c2s: link(0, 1), s2c: link(0, 7) }),
                competitor: Some(c),
            }
        };
        assert_eq!(PathCounters::of_emulator(&report(0, 0)).dropped, 9);
        assert_eq!(PathCounters::of_emulator(&report(3, 0)).dropped, 2);
        let (before, after) = (report(3, 1_000), report(90, 251_000));
        assert_eq!(competitor_rate(Some(&before), Some(&after), 2.0), Some(1_000_000.0));
        assert_eq!(competitor_rate(None, Some(&after), 2.0), None);
        let m = Measured {
            client: serde_json::json!({"bytes": 1000, "goodput_bps": 1.0, "duration_s": 2.0, "competitor_bps": 5e6}),
            server: None,
            links: PathCounters::default(),
            command: String::new(),
            verified: None,
            pids: (0, 0),
        };
        assert_eq!(fill(empty_row(1), &run(vec![0], 1000), &m).competitor_goodput_bps, Some(5e6));
    }

    #[test]
    fn a_short_download_is_an_incomplete_run_with_an_error() {
        let m = Measured {
            client: serde_json::json!({"bytes": 10, "goodput_bps": 1.0, "duration_s": 2.0}),
            server: None,
            links: PathCounters::default(),
            command: String::new(),
            verified: None,
            pids: (0, 0),
        };
        let r = fill(empty_row(1), &run(vec![0], 1000), &m);
        assert!(!r.completed && !r.data_ok);
        assert!(r.error.as_deref().unwrap().contains("10 of 1000"), "{:?}", r.error);
    }

    #[test]
    fn a_download_with_other_bytes_is_complete_but_not_ok() {
        let m = Measured {
            client: serde_json::json!({"bytes": 1000, "goodput_bps": 1.0, "duration_s": 2.0}),
            server: None,
            links: PathCounters::default(),
            command: String::new(),
            verified: Some(false),
            pids: (0, 0),
        };
        let r = fill(empty_row(1), &run(vec![0], 1000), &m);
        assert!(r.completed && !r.data_ok);
        assert!(r.error.as_deref().unwrap().contains("differs"), "{:?}", r.error);
    }

    #[test]
    fn testbed_names_fit_and_differ_per_run() {
        let a = testbed_name(&run(vec![0], 1));
        let mut other = run(vec![0], 1);
        other.id = "c/0/r0/baseline-p0".into();
        let b = testbed_name(&other);
        assert_ne!(a, b);
        for n in [a, b] {
            crate::testbed::plan::Names::new(&n).unwrap();
        }
    }

    #[test]
    fn shell_words_quote_what_a_shell_would_split() {
        assert_eq!(shell_word("--bytes"), "--bytes");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }
}
