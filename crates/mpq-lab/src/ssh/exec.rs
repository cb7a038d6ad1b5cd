//! Runs planned runs on two hosts over SSH (`testbed: ssh`, `mpq lab run --hosts FILE`), as
//! seed 000's framework does on its bare-metal testbed: before the first run the lab makes a
//! directory of its own on each host and copies `mpq`, the endpoint wrapper and the
//! experiment's scripts into it; per run it writes the run's variables, runs the pre-run
//! scripts, starts `mpq perf server` on the server's host and `mpq perf client` on the
//! client's (path k from the client's k-th address to the server's k-th), stops the server,
//! runs the post-run scripts, copies the hosts' `logs/` back (`OUT/logs/RUN/ROLE/`) and
//! removes the run's directory; the lab's directory goes when the experiment ends, whatever
//! happened.
//!
//! The network is the hosts' own: the lab neither shapes nor counts it in the middle. Each
//! path's bytes come from the client's interface counters, throughput from the same
//! counters with the first and last second trimmed, CPU from the endpoints' `times` and
//! their threads' `/proc` stat lines, each host's per-core use from its `/proc/stat`
//! (`data/ssh-endpoint.sh`).

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use super::hosts::Hosts;
use super::remote::{wait_output, Remote};
use super::samples;
use crate::experiment::{Experiment, QUIC, TCP_TLS};
use crate::manifest::Manifest;
use crate::metrics::Row;
use crate::netns_exec::{
    last_lines, protocol_args, row_of, server_port, server_reports, shell_word, Measured, PathCounters,
    DEFAULT_RUN_LIMIT,
};
use crate::plan::{Plan, PlannedScenario, RunSpec};

/// The endpoint wrapper, copied to every host.
const ENDPOINT_SCRIPT: &str = include_str!("../../data/ssh-endpoint.sh");
/// How long a short command on a host may take (SSH's connection included).
pub(super) const COMMAND_LIMIT: Duration = Duration::from_secs(30);
/// How long copying the binary to a host may take.
const COPY_LIMIT: Duration = Duration::from_secs(300);
/// How long one pre- or post-run script may take.
const SCRIPT_LIMIT: Duration = Duration::from_secs(120);
/// How long the server may take, after the client finished, to report the connection.
const SERVER_REPORT_TIMEOUT: Duration = Duration::from_secs(3);

#[allow(clippy::disallowed_methods)] // the SSH testbed runs in real time
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

/// Checks, before anything runs, that the plan can run on these hosts: downloads, or
/// request/response over mpq's QUIC in one connection; implementation folders only where the
/// hosts file says where they are on both hosts; no
/// shared bottleneck or scripted failure (nothing between the hosts is the lab's), no more
/// paths than the hosts have address pairs, and one network per class (the topology
/// describes the hosts' network; it cannot vary it).
pub fn check(exp: &Experiment, plan: &Plan, hosts: &Hosts) -> Result<(), String> {
    let file = exp.path.display();
    crate::netns_exec::check_workload(exp)?;
    if let Some(imp) = exp.implementations.first() {
        for (role, h) in [("server", &hosts.server), ("client", &hosts.client)] {
            if h.implementations.is_none() {
                return Err(format!(
                    "{file}: transport quic:{} runs the implementation folder on each host: give the {role} host's `implementations:` in the hosts file (the implementations/ folder of a checkout of this repository there)",
                    imp.name
                ));
            }
        }
    }
    for s in &plan.scenarios {
        if s.bottleneck.is_some() || !s.fail.is_empty() {
            return Err(format!(
                "{file}: class {}: the SSH testbed runs over the hosts' own network, which the lab does not shape: no bottleneck or events (use testbed: netns)",
                s.class
            ));
        }
        if s.links.len() > hosts.paths() {
            return Err(format!(
                "{file}: class {}: {} paths, but the hosts file gives {} address pairs",
                s.class,
                s.links.len(),
                hosts.paths()
            ));
        }
        if let Some(other) = plan.scenarios.iter().find(|o| o.class == s.class && o.links != s.links) {
            return Err(format!(
                "{file}: class {}: scenarios {} and {} differ in their links, but the SSH testbed's network is what the hosts have: give fixed link values (they describe it)",
                s.class, s.id, other.id
            ));
        }
    }
    Ok(())
}

/// The lab's directories on both hosts, ready for runs; removed when dropped.
pub struct SshTestbed {
    pub(super) hosts: Hosts,
    pub(super) server: Remote,
    pub(super) client: Remote,
    /// The lab's directory on the server's host and on the client's.
    pub(super) bases: [String; 2],
    /// The hosts' kernel releases (server, client), for manifests.
    releases: [String; 2],
    /// The scripts' names on the hosts (`scripts/K-NAME`), by local path.
    scripts: Vec<(PathBuf, String)>,
    /// Where the hosts' logs go: `LOGS/RUN/ROLE/`.
    logs: PathBuf,
    /// The local directory of the shared connections' sockets.
    _sockets: tempfile::TempDir,
    /// Record each endpoint's CPU profile on its host (`--profile`).
    profile: bool,
}

/// A name safe in shell words and paths: `[A-Za-z0-9._-]`, anything else as `_`.
fn safe_name(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect()
}

impl SshTestbed {
    /// Makes the lab's directory on both hosts and copies `mpq` (which must run there: same
    /// architecture and a compatible C library), the endpoint wrapper and the experiment's
    /// scripts into it; checks the hosts file's interfaces exist, and with `profile` that
    /// both hosts have perf. Logs go to `logs`.
    pub fn prepare(
        exp: &Experiment,
        mpq: &Path,
        hosts: Hosts,
        logs: &Path,
        profile: bool,
    ) -> Result<SshTestbed, String> {
        let sockets = tempfile::Builder::new()
            .prefix("mpq-ssh-ctl-")
            .tempdir()
            .map_err(|e| format!("a directory for SSH's control sockets: {e}"))?;
        // Unique to this process and experiment: the process ID, and the random part of the
        // local directory's name.
        let random =
            sockets.path().file_name().map_or_else(String::new, |n| n.to_string_lossy().replace("mpq-ssh-ctl-", ""));
        let unique = format!("{}-{}", std::process::id(), safe_name(&random));
        let dir = format!("mpq-lab-{}-{unique}", safe_name(&exp.name));
        let server = Remote { host: hosts.server.clone(), role: "server", control: None };
        let client = Remote { host: hosts.client.clone(), role: "client", control: None };
        // (Named by role too: both roles may be one host, or share a file system.)
        let bases =
            [format!("{}/{dir}-server", hosts.server.workdir), format!("{}/{dir}-client", hosts.client.workdir)];
        let scripts: Vec<(PathBuf, String)> = exp
            .scripts
            .all()
            .into_iter()
            .enumerate()
            .map(|(k, p)| {
                let name = p.file_name().map_or_else(|| "script".into(), |n| safe_name(&n.to_string_lossy()));
                (p.clone(), format!("scripts/{k}-{name}"))
            })
            .collect();
        // From here on, Drop removes whatever was made.
        let mut tb = SshTestbed {
            hosts,
            server,
            client,
            bases: bases.clone(),
            releases: [String::new(), String::new()],
            scripts,
            logs: logs.to_owned(),
            _sockets: sockets,
            profile,
        };
        for (k, r) in [&mut tb.server, &mut tb.client].into_iter().enumerate() {
            let base = &bases[k];
            eprintln!("preparing the {} host {} ({base})", r.role, r.host.hostname);
            r.share(&tb._sockets.path().join(r.role))?;
            let out = r.run(
                &format!("mkdir -p {base}/scripts {base}/runs && cat > {base}/endpoint.sh && uname -r"),
                ENDPOINT_SCRIPT.as_bytes(),
                COMMAND_LIMIT,
            )?;
            tb.releases[k] = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            let ifaces: Vec<String> = r.host.interfaces.iter().map(|i| shell_word(i)).collect();
            let missing = r.run(
                &format!("for i in {}; do [ -e /sys/class/net/$i ] || echo $i; done", ifaces.join(" ")),
                b"",
                COMMAND_LIMIT,
            )?;
            let missing = String::from_utf8_lossy(&missing.stdout).split_whitespace().collect::<Vec<_>>().join(", ");
            if !missing.is_empty() {
                return Err(format!(
                    "the {} host {} has no interface {missing} (the hosts file's {}.interfaces)",
                    r.role, r.host.hostname, r.role
                ));
            }
            r.copy_to(&[mpq], &format!("{base}/mpq"), COPY_LIMIT)?;
            for (local, name) in &tb.scripts {
                r.copy_to(&[local], &format!("{base}/{name}"), COMMAND_LIMIT)?;
            }
            r.run(&format!("{base}/mpq --version"), b"", COMMAND_LIMIT).map_err(|e| {
                format!("{e}; the copied mpq does not run there (build it for that host's architecture and C library)")
            })?;
            for imp in &exp.implementations {
                super::external::prepare(r, imp, base)?;
            }
            if profile {
                r.run(super::profile::CHECK, b"", COMMAND_LIMIT).map_err(|e| {
                    format!("--profile needs perf on the {} host (Debian: apt-get install linux-perf): {e}", r.role)
                })?;
            }
        }
        Ok(tb)
    }

    /// Runs `run` of `scenario`: its row (EBen not set) and manifest. Anything that fails
    /// becomes the row's error.
    pub fn execute(
        &self,
        exp: &Experiment,
        scenario: &PlannedScenario,
        run: &RunSpec,
        qlog: Option<&Path>,
    ) -> (Row, Manifest) {
        let start = wall_clock();
        let outcome = self.measure(exp, scenario, run, qlog);
        let (r, command) = row_of(exp, scenario, run, outcome, start.elapsed().as_secs_f64());
        let testbed = format!(
            "ssh (server {} Linux {}, client {} Linux {})",
            self.hosts.server.hostname, self.releases[0], self.hosts.client.hostname, self.releases[1]
        );
        (r, Manifest::of_run(exp, scenario, run, testbed, command))
    }

    /// The run's variables for the scripts (`variables.json`, seed 000 §4.4).
    fn variables(&self, role: &str, run: &RunSpec, seed: u64, dir: &str) -> serde_json::Value {
        let host = if role == "server" { &self.hosts.server } else { &self.hosts.client };
        let pick = |v: &[String]| -> Vec<String> { run.path_indices.iter().map(|&i| v[i].clone()).collect() };
        let ips =
            |h: &super::hosts::Host| -> Vec<String> { pick(&h.ips.iter().map(|a| a.to_string()).collect::<Vec<_>>()) };
        serde_json::json!({
            "role": role,
            "run_id": run.id,
            "hostname": host.hostname,
            "ips": ips(host),
            "interfaces": pick(&host.interfaces),
            "server_ips": ips(&self.hosts.server),
            "client_ips": ips(&self.hosts.client),
            "transport": run.transport,
            "options": run.options,
            "bytes": run.size,
            "seed": seed,
            "log_dir": format!("{dir}/logs"),
        })
    }

    /// Runs the scripts `which` of `role` on its host in the run's directory `dir`, with the
    /// variables in the environment too (MPQ_LAB_ROLE, MPQ_LAB_WHEN, MPQ_LAB_RUN,
    /// MPQ_LAB_LOGS, MPQ_LAB_VARIABLES); each one's output goes to `logs/WHEN-K-NAME.log`.
    fn scripts(
        &self,
        r: &Remote,
        base: &str,
        dir: &str,
        when: &str,
        which: &[PathBuf],
        run: &RunSpec,
    ) -> Result<(), String> {
        for local in which {
            let Some((_, name)) = self.scripts.iter().find(|(p, _)| p == local) else { continue };
            let log = format!("logs/{when}-{}.log", name.trim_start_matches("scripts/"));
            let script = format!(
                "cd {dir} && MPQ_LAB_ROLE={} MPQ_LAB_WHEN={when} MPQ_LAB_RUN={} MPQ_LAB_LOGS={dir}/logs MPQ_LAB_VARIABLES={dir}/variables.json sh {base}/{name} > {log} 2>&1",
                r.role,
                shell_word(&run.id)
            );
            r.run(&script, b"", SCRIPT_LIMIT).map_err(|e| {
                format!("the {when}-run script {} on the {} host: {e} (its output: {log})", local.display(), r.role)
            })?;
        }
        Ok(())
    }

    fn measure(
        &self,
        exp: &Experiment,
        scenario: &PlannedScenario,
        run: &RunSpec,
        qlog: Option<&Path>,
    ) -> Result<Measured, String> {
        let run_dir = safe_name(&run.id);
        let dirs = [format!("{}/runs/{run_dir}", self.bases[0]), format!("{}/runs/{run_dir}", self.bases[1])];
        let remotes = [&self.server, &self.client];
        // The run's directories go at the end, also when the run fails.
        let _cleanup = RunDirs { remotes, dirs: dirs.clone() };
        for (k, r) in remotes.into_iter().enumerate() {
            let vars = self.variables(r.role, run, scenario.seed, &dirs[k]);
            r.run(
                &format!("mkdir -p {0}/logs && cat > {0}/variables.json", dirs[k]),
                vars.to_string().as_bytes(),
                COMMAND_LIMIT,
            )?;
        }
        self.scripts(&self.server, &self.bases[0], &dirs[0], "pre", &exp.scripts.pre.server, run)?;
        self.scripts(&self.client, &self.bases[1], &dirs[1], "pre", &exp.scripts.pre.client, run)?;
        // (Recording before either endpoint starts, so that it sees all their threads.)
        let recordings = if self.profile {
            Some((
                super::profile::HostRecording::start(&self.server, &dirs[0])?,
                super::profile::HostRecording::start(&self.client, &dirs[1])?,
            ))
        } else {
            None
        };
        let implementation = crate::implementation::name_of(&run.transport)
            .map(|name| exp.implementations.iter().find(|i| i.name == name).ok_or(format!("no implementation {name}")))
            .transpose()?;
        let result = match implementation {
            Some(imp) => self.external(exp, run, imp, &dirs),
            None => self.endpoints(exp, run, qlog.is_some(), &dirs),
        };
        let result = result.map(|mut m| {
            if let Some((server_rec, client_rec)) = recordings {
                add_profiles(&mut m, [server_rec.stop(), client_rec.stop()], run);
            }
            m
        });
        // Post-run scripts and logs also after a failed run: they may say why.
        let post = self
            .scripts(&self.client, &self.bases[1], &dirs[1], "post", &exp.scripts.post.client, run)
            .and_then(|()| self.scripts(&self.server, &self.bases[0], &dirs[0], "post", &exp.scripts.post.server, run));
        let collected = self.collect(run, qlog, &dirs);
        let m = result?;
        post?;
        collected?;
        Ok(m)
    }

    /// Starts the server, runs the client, stops the server; what they measured.
    fn endpoints(&self, exp: &Experiment, run: &RunSpec, qlog: bool, dirs: &[String; 2]) -> Result<Measured, String> {
        let (sb, cb) = (&self.bases[0], &self.bases[1]);
        let proto: Vec<String> = protocol_args(exp, run).iter().map(|a| shell_word(a)).collect();
        let path_ip = |h: &super::hosts::Host, k: usize| h.ips[run.path_indices[k]];
        let quic_logs = |on: bool| if on && run.transport == QUIC { " --qlog-dir logs/qlog" } else { "" };
        let listen = if path_ip(&self.hosts.server, 0).is_ipv6() { "[::]:0" } else { "0.0.0.0:0" };
        let mut server = Endpoint {
            remote: &self.server,
            dir: dirs[0].clone(),
            finished: false,
            child: Some(self.server.spawn(&format!(
                "cd {} && exec sh {sb}/endpoint.sh {sb}/mpq perf server --listen {listen} {}{}",
                dirs[0],
                proto.join(" "),
                quic_logs(qlog)
            ))?),
        };
        let child = server.child.as_mut().ok_or("the server")?;
        let port = server_port(child).map_err(|e| format!("the server on {}: {e}", self.hosts.server.hostname))?;
        let ended = server_reports(child);

        let paths = run.path_indices.len();
        let mut client_args: Vec<String> = vec![
            "--connect".into(),
            std::net::SocketAddr::new(path_ip(&self.hosts.server, 0), port).to_string(),
            "--json".into(),
        ];
        client_args.extend(crate::netns_exec::workload_args(exp, run));
        // Path k from the client's k-th address to the server's k-th: on real hosts each
        // path's addresses are on their own network.
        let locals = if run.transport == TCP_TLS { 1 } else { paths };
        for k in 0..locals {
            client_args
                .extend(["--local".into(), std::net::SocketAddr::new(path_ip(&self.hosts.client, k), 0).to_string()]);
        }
        if run.transport == QUIC {
            if paths == 1 {
                client_args.push("--no-multipath".into());
            } else {
                for k in 1..paths {
                    client_args.extend([
                        "--server-addr".into(),
                        std::net::SocketAddr::new(path_ip(&self.hosts.server, k), port).to_string(),
                    ]);
                }
                client_args.extend(["--path-mode".into(), "pairs".into()]);
            }
        }
        let client_line = format!(
            "{cb}/mpq perf client {} {}{}",
            client_args.iter().map(|a| shell_word(a)).collect::<Vec<_>>().join(" "),
            proto.join(" "),
            quic_logs(qlog)
        );
        let command = format!("ssh {} {client_line}", self.hosts.client.destination());
        let mut client = Endpoint {
            remote: &self.client,
            dir: dirs[1].clone(),
            finished: false,
            child: Some(self.client.spawn(&format!("cd {} && exec sh {cb}/endpoint.sh {client_line}", dirs[1]))?),
        };
        let limit = exp.max_time.unwrap_or(DEFAULT_RUN_LIMIT);
        let out = match client.child.take() {
            Some(c) => wait_output(c, limit).map_err(|e| format!("the client (max_time {limit:?}): {e}"))?,
            None => return Err("the client".into()),
        };
        // (Killed at max_time, or failed to wait: the guard stops it on its host.)
        client.finished = true;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let _ = std::fs::create_dir_all(self.run_logs(run))
            .and_then(|()| std::fs::write(self.run_logs(run).join("client-stderr.log"), stderr.as_bytes()));
        if !out.status.success() {
            return Err(format!("the client failed ({}): {}", out.status, last_lines(&stderr, 3)));
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let mut client_json: serde_json::Value = stdout
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .ok_or_else(|| format!("no JSON summary from the client: {}", last_lines(&stderr, 3)))?;
        let mut server_report = ended.recv_timeout(SERVER_REPORT_TIMEOUT).ok();
        server.stop()?;

        let on_hosts = self.read_samples(run, dirs)?;
        on_hosts.add_to(&mut client_json, server_report.as_mut());
        let links = PathCounters { delivered: on_hosts.client.per_interface.clone(), dropped: 0 };
        Ok(Measured { client: client_json, server: server_report, links, command, verified: None, pids: (0, 0) })
    }

    /// What the endpoint wrapper measured on both hosts in the run's directories `dirs`
    /// (server's, client's), once both endpoints ended.
    pub(super) fn read_samples(&self, run: &RunSpec, dirs: &[String; 2]) -> Result<OnHosts, String> {
        let read = |r: &Remote, dir: &str, ifaces: &[String]| -> Result<(Option<f64>, samples::HostSamples), String> {
            let out = r.run(&format!("cd {dir} && cat cpu && echo @@ && cat samples"), b"", COMMAND_LIMIT)?;
            let out = String::from_utf8_lossy(&out.stdout);
            let (cpu, sampled) = out.split_once("@@\n").unwrap_or((&out, ""));
            Ok((samples::children_cpu(cpu), samples::parse(sampled, ifaces)))
        };
        let ifaces: Vec<String> = run.path_indices.iter().map(|&i| self.hosts.client.interfaces[i].clone()).collect();
        let (client_cpu, client) = read(&self.client, &dirs[1], &ifaces)?;
        let (server_cpu, server) = read(&self.server, &dirs[0], &[])?;
        Ok(OnHosts { client_cpu, client, server_cpu, server })
    }

    /// `LOGS/RUN` (the run ID with `/` as `_`).
    fn run_logs(&self, run: &RunSpec) -> PathBuf {
        self.logs.join(safe_name(&run.id))
    }

    /// Copies each host's `logs/` to `LOGS/RUN/ROLE/`, and with `--qlog` its qlog files to
    /// `QLOG/RUN/ROLE/`.
    fn collect(&self, run: &RunSpec, qlog: Option<&Path>, dirs: &[String; 2]) -> Result<(), String> {
        let local = self.run_logs(run);
        std::fs::create_dir_all(&local).map_err(|e| format!("creating {}: {e}", local.display()))?;
        for (k, r) in [&self.server, &self.client].into_iter().enumerate() {
            let to = local.join(r.role);
            let _ = std::fs::remove_dir_all(&to);
            r.copy_from(&format!("{}/logs", dirs[k]), &to, COPY_LIMIT)?;
            if let Some(q) = qlog {
                let from = to.join("qlog");
                if from.is_dir() {
                    let into = q.join(run.id.replace('/', "_")).join(r.role);
                    std::fs::create_dir_all(&into).map_err(|e| format!("creating {}: {e}", into.display()))?;
                    for f in std::fs::read_dir(&from).map_err(|e| format!("{}: {e}", from.display()))?.flatten() {
                        let _ = std::fs::copy(f.path(), into.join(f.file_name()));
                    }
                }
            }
        }
        Ok(())
    }
}

impl Drop for SshTestbed {
    fn drop(&mut self) {
        for (k, r) in [&self.server, &self.client].into_iter().enumerate() {
            if let Err(e) = r.run(&format!("rm -rf {}", self.bases[k]), b"", COMMAND_LIMIT) {
                eprintln!("warning: removing {} on the {} host: {e}", self.bases[k], r.role);
            }
        }
        self.server.unshare();
        self.client.unshare();
    }
}

/// Puts each endpoint's profile (server's, client's) into its JSON; a profile that failed
/// or caught nothing is left out with a warning: the run itself stands.
fn add_profiles(
    m: &mut Measured,
    profiles: [Result<std::collections::BTreeMap<String, f64>, String>; 2],
    run: &RunSpec,
) {
    for (json, p) in [m.server.as_mut(), Some(&mut m.client)].into_iter().zip(profiles) {
        match (json, p) {
            (Some(serde_json::Value::Object(o)), Ok(p)) if p.values().sum::<f64>() > 0.0 => {
                o.insert("profile".into(), serde_json::json!(p));
            }
            (_, Err(e)) => eprintln!("warning: {}: {e}", run.id),
            (Some(_), Ok(_)) => eprintln!("warning: {}: a profile caught no sample of its endpoint", run.id),
            (None, Ok(_)) => {}
        }
    }
}

/// What the endpoint wrapper measured on the hosts ([`SshTestbed::read_samples`]).
pub(super) struct OnHosts {
    /// The client's CPU seconds (`times`).
    pub client_cpu: Option<f64>,
    /// The client host's samples: interfaces, threads, cores.
    pub client: samples::HostSamples,
    /// The server's CPU seconds.
    pub server_cpu: Option<f64>,
    /// The server host's samples.
    pub server: samples::HostSamples,
}

impl OnHosts {
    /// Puts CPU, throughput, threads and cores into the endpoints' JSON (the server's only
    /// if it has one and its CPU time was read).
    pub fn add_to(&self, client: &mut serde_json::Value, server: Option<&mut serde_json::Value>) {
        if let Some(o) = client.as_object_mut() {
            o.insert("cpu_s".into(), serde_json::json!(self.client_cpu));
            o.insert("throughput_bps".into(), serde_json::json!(crate::ifstats::trimmed_rate(&self.client.rx)));
            o.insert("threads_cpu_s".into(), serde_json::json!(self.client.threads));
            o.insert("cores".into(), serde_json::json!(self.client.cores));
        }
        if let (Some(serde_json::Value::Object(o)), Some(cpu)) = (server, self.server_cpu) {
            o.insert("cpu_s".into(), serde_json::json!(cpu));
            o.insert("threads_cpu_s".into(), serde_json::json!(self.server.threads));
            o.insert("cores".into(), serde_json::json!(self.server.cores));
        }
    }
}

/// A run's directories on both hosts, removed when dropped.
struct RunDirs<'a> {
    remotes: [&'a Remote; 2],
    dirs: [String; 2],
}

impl Drop for RunDirs<'_> {
    fn drop(&mut self) {
        for (r, d) in self.remotes.iter().zip(&self.dirs) {
            let _ = r.run(&format!("rm -rf {d}"), b"", COMMAND_LIMIT);
        }
    }
}

/// An endpoint running on a host through the wrapper: stopped (by the process ID it wrote)
/// when dropped, so that none outlives its run even when the SSH connection does not say.
pub(super) struct Endpoint<'a> {
    pub remote: &'a Remote,
    /// The run's directory, where the wrapper wrote `pid`.
    pub dir: String,
    /// The local `ssh` process, until waited for.
    pub child: Option<Child>,
    /// Whether it ended (by itself or stopped): nothing left to stop.
    pub finished: bool,
}

impl Endpoint<'_> {
    /// Stops the endpoint and waits for its wrapper to finish (it then writes `cpu`).
    pub fn stop(&mut self) -> Result<(), String> {
        self.finished = true;
        // (Its children too: an implementation's run script may not `exec` its program.)
        self.remote.run(
            &format!("p=$(cat {}/pid) && {{ pkill -TERM -P $p; kill $p; }} 2>/dev/null; true", self.dir),
            b"",
            COMMAND_LIMIT,
        )?;
        if let Some(c) = self.child.take() {
            wait_output(c, COMMAND_LIMIT).map_err(|e| format!("the {} after it was stopped: {e}", self.remote.role))?;
        }
        Ok(())
    }
}

impl Drop for Endpoint<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTS: &str = "server: {hostname: s, ips: [10.0.1.1, 10.0.2.1], interfaces: [a, b]}\n\
                         client: {hostname: c, ips: [10.0.1.2, 10.0.2.2], interfaces: [a, b]}\n";

    fn checked(yaml: &str) -> Result<(), String> {
        let exp = Experiment::from_text(Path::new("x.yaml"), yaml.into()).map_err(|e| e.to_string())?;
        let plan = Plan::new(&exp).map_err(|e| e.to_string())?;
        check(&exp, &plan, &Hosts::parse(HOSTS).unwrap())
    }

    const BASE: &str = "name: s\ntestbed: ssh\nworkload: {download: 1MB}\nfactors: {runtime: [single, shard], transport: [quic, mptcp-tls]}\n";

    #[test]
    fn fixed_links_within_the_hosts_paths_run() {
        checked(&format!("{BASE}topology: {{paths: [{{rate: 1gbit, rtt: 1ms}}, {{rate: 1gbit, rtt: 1ms}}]}}\n"))
            .unwrap();
    }

    #[test]
    fn what_the_lab_cannot_do_to_the_hosts_network_is_refused() {
        let two = "{rate: 1gbit, rtt: 1ms}";
        let e = checked(&format!("{BASE}topology: {{paths: [{two}, {two}, {two}]}}\n")).unwrap_err();
        assert!(e.contains("3 paths, but the hosts file gives 2 address pairs"), "{e}");
        let e = checked(&format!(
            "{BASE}design: {{type: wsp, points: 3, seed: 1}}\ntopology: {{paths: [{{rate: {{min: 1mbit, max: 9mbit}}, rtt: 1ms}}]}}\n"
        ))
        .unwrap_err();
        assert!(e.contains("differ in their links"), "{e}");
        let e = checked(&format!("{BASE}topology: {{paths: [{two}, {two}], events: [{{path: 0, fail_at: 1s}}]}}\n"))
            .unwrap_err();
        assert!(e.contains("no bottleneck or events"), "{e}");
    }

    #[test]
    fn scripts_and_folders_belong_to_their_testbeds() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pre.sh"), "true\n").unwrap();
        let file = dir.path().join("x.yaml");
        let load = |yaml: String| Experiment::from_text(&file, yaml).map(|_| ()).map_err(|e| e.to_string());
        let topo = "topology: {paths: [{rate: 1gbit, rtt: 1ms}]}\n";
        load(format!("{BASE}scripts: {{pre: {{client: [pre.sh]}}}}\n{topo}")).unwrap();
        let e = load(format!("{BASE}scripts: {{post: {{server: [nope.sh]}}}}\n{topo}")).unwrap_err();
        assert!(e.contains("scripts.post.server[0]") && e.contains("is not a file"), "{e}");
        let netns = BASE.replace("testbed: ssh", "testbed: netns");
        let e = load(format!("{netns}scripts: {{pre: {{client: [pre.sh]}}}}\n{topo}")).unwrap_err();
        assert!(e.contains("need testbed: ssh"), "{e}");
        // Implementation folders run on the SSH testbed too, where the hosts file says where
        // they are on both hosts.
        let exp = Experiment::from_text(&file, format!("{}{topo}", BASE.replace("mptcp-tls", "quic:noq"))).unwrap();
        let plan = Plan::new(&exp).unwrap();
        let e = check(&exp, &plan, &Hosts::parse(HOSTS).unwrap()).unwrap_err();
        assert!(e.contains("give the server host's `implementations:`"), "{e}");
        let both =
            HOSTS.replace("interfaces: [a, b]}", "interfaces: [a, b], implementations: /srv/mpq/implementations}");
        check(&exp, &plan, &Hosts::parse(&both).unwrap()).unwrap();
        let one = HOSTS.replacen("interfaces: [a, b]}", "interfaces: [a, b], implementations: /x}", 1);
        let e = check(&exp, &plan, &Hosts::parse(&one).unwrap()).unwrap_err();
        assert!(e.contains("give the client host's `implementations:`"), "{e}");
    }
}
