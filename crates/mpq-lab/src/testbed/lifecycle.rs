//! Bringing a testbed up and down.
//!
//! `up` records the testbed in its state file before it creates anything, builds it step
//! by step, starts the emulator in the router namespace and waits (bounded) until it is
//! ready. Whatever stops it half-way (a failed step, the emulator not starting, SIGINT,
//! SIGTERM or SIGHUP, a panic) removes what it built before it returns; if `up` itself is
//! killed, the state file lets `down` finish the job. `down` stops every process inside
//! the testbed's namespaces (the emulator and anything the user started there), deletes
//! the namespaces (which takes the veths and TUN devices with them) and the files, and
//! works from the names alone when the state file is gone.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;

use super::host::{self, Deadline};
use super::plan::{Names, Plan, PREFIX};
use super::spec::{EventSpec, PathSpec};
use super::state::{Phase, State};
use super::sys;

/// How `up` starts the emulator: `ip netns exec ROUTER_NS PROGRAM ARGS... NAME`.
#[derive(Debug, Clone)]
pub struct Launcher {
    /// The program (normally the running `mpq`).
    pub program: PathBuf,
    /// The arguments before the testbed's name (e.g. `lab testbed emulator --name`).
    pub args: Vec<String>,
}

/// What to build.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// The testbed's name.
    pub name: String,
    /// One link spec per path ([`PathSpec`] form).
    pub links: Vec<String>,
    /// A bottleneck every path crosses (one [`PathSpec`] for both directions, with a rate),
    /// and with it the competitor's path.
    pub bottleneck: Option<String>,
    /// Scripted events (`PATH[.DIR]@TIME:ACTION`).
    pub events: Vec<String>,
    /// The seed of the links' random processes.
    pub seed: u64,
    /// Run the emulator in the real-time scheduling class (see docs/lab-testbed.md).
    pub realtime: bool,
}

/// How long `up` waits for the emulator to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `down` lets processes exit after SIGTERM before it kills them.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Checks `opts` without changing the system (it reads whether the kernel has MPTCP): the
/// plan and the state to record.
pub fn prepare(opts: &UpOptions) -> Result<(Plan, State), String> {
    let names = Names::new(&opts.name)?;
    let specs = opts
        .links
        .iter()
        .map(|l| PathSpec::parse(l))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--link {e}"))?;
    let mtus = specs.iter().map(|s| s.mtu()).collect::<Result<Vec<_>, _>>().map_err(|e| format!("--link {e}"))?;
    let mut plan = Plan::new(names, &mtus)?;
    let bottleneck = match &opts.bottleneck {
        None => None,
        Some(b) => {
            let spec = PathSpec::parse(b).map_err(|e| format!("--bottleneck {e}"))?;
            if spec.c2s != spec.s2c {
                return Err(format!("--bottleneck {b:?}: one link for both directions (no C2S|S2C)"));
            }
            if spec.c2s.rate_bps == 0 {
                return Err(format!(
                    "--bottleneck {b:?}: give it a rate (e.g. 20mbit/20ms): a link without a limit is no bottleneck"
                ));
            }
            plan = plan.with_competitor()?;
            Some(spec.text)
        }
    };
    // MPTCP's path manager is set up whenever the kernel has MPTCP: it touches only MPTCP
    // sockets, and then `mptcpize`d programs and `mpq perf --transport mptcp-tls` use every
    // path without a flag to remember.
    plan.mptcp = host::has_mptcp();
    for e in &opts.events {
        let ev = EventSpec::parse_scripted(e).map_err(|e| format!("--event {e}"))?;
        if ev.path >= specs.len() {
            return Err(format!("--event {e:?}: there is no path {} (paths 0..{})", ev.path, specs.len()));
        }
    }
    let links: Vec<String> = specs.iter().map(|s| s.text.clone()).collect();
    let state = State::new(&plan, &links, bottleneck, opts.events.clone(), opts.seed, opts.realtime);
    Ok((plan, state))
}

/// Removes what `up` built unless disarmed: on an early return, an error or a panic.
struct Undo<'a> {
    name: &'a str,
    armed: bool,
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        if self.armed {
            if let Err(e) = down(self.name) {
                eprintln!("cleaning up testbed {}: {e}", self.name);
            }
        }
    }
}

/// Builds the testbed and starts its emulator; returns its state (phase `Ready`).
pub fn up(opts: &UpOptions, launcher: &Launcher) -> Result<State, String> {
    let (plan, mut state) = prepare(opts)?;
    host::preflight()?;
    let name = plan.names.name.as_str();
    if let Some(ns) = plan.names.all_ns().iter().find(|ns| host::namespace_exists(ns)) {
        return Err(format!(
            "namespace {ns} exists (left by a testbed that was not taken down?): `mpq lab testbed down --name {name}` first"
        ));
    }
    sys::catch_stop_signals(true);
    match state.claim() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(format!("testbed {name} exists: `mpq lab testbed down --name {name}` first"));
        }
        r => r.map_err(|e| format!("recording the testbed: {e}"))?,
    }
    let mut undo = Undo { name, armed: true };
    let fail_at: Option<usize> = std::env::var("MPQ_TESTBED_FAIL_AT_STEP").ok().and_then(|s| s.parse().ok());
    for (i, step) in plan.steps().iter().enumerate() {
        if sys::stop_requested() {
            return Err("interrupted; the testbed was removed".into());
        }
        if fail_at == Some(i) {
            return Err(format!("{step}: failure injected by MPQ_TESTBED_FAIL_AT_STEP={i}; the testbed was removed"));
        }
        host::run_step(step).map_err(|e| format!("{e}; the testbed was removed"))?;
    }
    let (pid, started) = start_emulator(&mut state, launcher)?;
    state.emulator_pid = Some(pid);
    state.started_unix_ns = Some(started);
    state.phase = Phase::Ready;
    state.save().map_err(|e| format!("recording the testbed: {e}"))?;
    undo.armed = false;
    Ok(state)
}

/// Starts the emulator in the router namespace, records its pid, and waits for its ready
/// line; returns its pid and clock start.
fn start_emulator(state: &mut State, launcher: &Launcher) -> Result<(u32, u64), String> {
    let log_path = State::log_file(&state.name);
    let log = std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &state.router_ns])
        .arg(&launcher.program)
        .args(&launcher.args)
        .arg(&state.name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log));
    // Its own process group: a Ctrl-C meant for `up` does not reach it, and it outlives `up`.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().map_err(|e| format!("starting the emulator: {e}"))?;
    // `ip netns exec` execs the program: the child's pid is the emulator's.
    let pid = child.id();
    state.emulator_pid = Some(pid);
    state.save().map_err(|e| format!("recording the testbed: {e}"))?;
    let stdout = child.stdout.take();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        if let Some(out) = stdout {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        let _ = tx.send(line);
    });
    // Reap it when it exits, so that a process that started it and lives on holds no zombie.
    std::thread::spawn(move || child.wait());
    let deadline = Deadline::after(READY_TIMEOUT);
    let line = loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(l) => break l,
            Err(mpsc::RecvTimeoutError::Disconnected) => break String::new(),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if sys::stop_requested() {
                    return Err("interrupted; the testbed was removed".into());
                }
                if deadline.passed() {
                    return Err(format!(
                        "the emulator did not get ready within {READY_TIMEOUT:?}; the testbed was removed. Its log: {}",
                        log_tail(&log_path)
                    ));
                }
            }
        }
    };
    match line.trim().strip_prefix("ready ").and_then(|s| s.parse::<u64>().ok()) {
        Some(started) => Ok((pid, started)),
        None => {
            // Its log is removed with the testbed: read it first.
            std::thread::sleep(Duration::from_millis(50));
            Err(format!("the emulator failed to start; the testbed was removed. Its log: {}", log_tail(&log_path)))
        }
    }
}

fn log_tail(path: &std::path::Path) -> String {
    let t = std::fs::read_to_string(path).unwrap_or_default();
    let t = t.trim();
    if t.is_empty() {
        return "(empty)".into();
    }
    t.lines().rev().take(10).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// What `up` prints: one JSON object with `client_ns`, `server_ns` and `paths`
/// (`{"client": IP, "server": IP, ...}` each), and what else a user may need (with a shared
/// bottleneck: `bottleneck` and the `competitor` path's addresses).
pub fn summary(state: &State) -> serde_json::Value {
    json!({
        "name": state.name,
        "client_ns": state.client_ns,
        "server_ns": state.server_ns,
        "router_ns": state.router_ns,
        "paths": state.paths.iter().map(|p| json!({
            "client": p.client,
            "server": p.server,
            "interface": p.interface,
            "mtu": p.mtu,
            "link": p.link,
        })).collect::<Vec<_>>(),
        "bottleneck": state.bottleneck.as_ref().map(|b| &b.link),
        "competitor": state.bottleneck.as_ref().map(|b| json!({
            "client": b.competitor.client,
            "server": b.competitor.server,
            "interface": b.competitor.interface,
            "mtu": b.competitor.mtu,
        })),
        "events": state.events,
        "seed": state.seed,
        "realtime": state.realtime,
        "mptcp": state.mptcp,
        "emulator_pid": state.emulator_pid,
        "started_unix_ns": state.started_unix_ns,
        "control": State::control_socket(&state.name),
    })
}

/// What `down` removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Removed {
    /// Namespaces deleted.
    pub namespaces: Vec<String>,
    /// Processes stopped (the emulator included).
    pub processes: Vec<u32>,
    /// Whether a state file was there.
    pub state_file: bool,
}

/// Takes testbed `name` down: stops the processes in its namespaces (the emulator too),
/// deletes the namespaces and its files. Works without a state file (from the names), and
/// on a half-built testbed. An error says what is left.
pub fn down(name: &str) -> Result<Removed, String> {
    let names = Names::new(name)?;
    let state = State::load(name).ok().flatten();
    let mut removed = Removed { state_file: state.is_some(), ..Removed::default() };
    let mut pids = Vec::new();
    if let Some(pid) = state.as_ref().and_then(|s| s.emulator_pid) {
        // Only if that pid is still our emulator (pids are reused).
        if host::alive(pid) && host::cmdline(pid).is_some_and(|c| c.contains("emulator") && c.contains(name)) {
            pids.push(pid);
        }
    }
    let namespaces: Vec<String> = names.all_ns().into_iter().filter(|ns| host::namespace_exists(ns)).collect();
    for ns in &namespaces {
        for p in host::pids_in(ns) {
            if !pids.contains(&p) && p != std::process::id() {
                pids.push(p);
            }
        }
    }
    let stuck = host::stop_processes(&pids, STOP_GRACE);
    removed.processes = pids.into_iter().filter(|p| !stuck.contains(p)).collect();
    let mut errors = Vec::new();
    if !stuck.is_empty() {
        errors.push(format!("processes {stuck:?} did not exit"));
    }
    for ns in namespaces {
        match host::ip(&["netns", "del", &ns]) {
            Ok(()) => removed.namespaces.push(ns),
            Err(e) if !host::namespace_exists(&ns) => drop(e),
            Err(e) => errors.push(e),
        }
    }
    State::remove_files(name);
    if errors.is_empty() {
        Ok(removed)
    } else {
        Err(errors.join("; "))
    }
}

/// Every testbed there is: those with a state file and those whose namespaces are left.
pub fn all_names() -> Vec<String> {
    let mut v = State::list();
    for ns in host::namespaces() {
        if ns.starts_with(PREFIX) {
            if let Some(n) = Names::of_namespace(&ns) {
                if Names::new(&n).is_ok() && !v.contains(&n) {
                    v.push(n);
                }
            }
        }
    }
    v.sort();
    v
}

/// One line per testbed for `mpq lab testbed list`: name, phase, emulator, paths.
pub fn describe(name: &str) -> String {
    match State::load(name) {
        Ok(Some(s)) => {
            let emu = match s.emulator_pid {
                Some(p) if host::alive(p) => format!("emulator pid {p}"),
                Some(p) => format!("emulator pid {p} NOT RUNNING"),
                None => "no emulator".into(),
            };
            let paths: Vec<String> =
                s.paths.iter().map(|p| format!("{}<->{} {}", p.client, p.server, p.link)).collect();
            let phase = match s.phase {
                Phase::Ready => "ready",
                Phase::Building => "building (or its `up` died)",
            };
            format!("{name}: {phase}, {emu}, paths: {}", paths.join(", "))
        }
        Ok(None) => {
            format!("{name}: namespaces without a state file (left over): `mpq lab testbed down --name {name}`")
        }
        Err(e) => format!("{name}: unreadable state file: {e}"),
    }
}
