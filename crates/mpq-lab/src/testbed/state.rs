//! A testbed's state file, `/run/mpq-lab/NAME.json` (or `$MPQ_LAB_RUN_DIR/NAME.json`):
//! written before anything is created and updated as the testbed comes up, so that `down`
//! (and an interrupted `up`) knows what to remove. The emulator reads its configuration
//! from it too; the link and event specs are kept as text and parsed again.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plan::{Names, Plan};

/// Where state files, logs and control sockets live.
pub fn run_dir() -> PathBuf {
    std::env::var_os("MPQ_LAB_RUN_DIR").map_or_else(|| PathBuf::from("/run/mpq-lab"), PathBuf::from)
}

/// One path, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathRecord {
    /// The client's address.
    pub client: String,
    /// The server's address.
    pub server: String,
    /// The `--link` spec.
    pub link: String,
    /// The interfaces' MTU.
    pub mtu: usize,
    /// The interface of the path in the client and server namespaces.
    pub interface: String,
}

/// A testbed's shared bottleneck and the competitor's path through it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BottleneckRecord {
    /// The `--bottleneck` spec (one link for both directions).
    pub link: String,
    /// The competitor's path: its own subnet pair, no limit or delay of its own, through the
    /// bottleneck (not an MPTCP endpoint, not one of `paths`).
    pub competitor: PathRecord,
}

/// How far `up` got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Namespaces and links are being built (or `up` died while building them).
    Building,
    /// The emulator is running: the testbed is usable.
    Ready,
}

/// What a testbed consists of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The testbed's name.
    pub name: String,
    /// The client's namespace.
    pub client_ns: String,
    /// The server's namespace.
    pub server_ns: String,
    /// The router's namespace (veths, TUN devices, emulator).
    pub router_ns: String,
    /// The paths, in `--link` order.
    pub paths: Vec<PathRecord>,
    /// The shared bottleneck every path crosses, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<BottleneckRecord>,
    /// The scripted events (`--event` form).
    pub events: Vec<String>,
    /// The seed of the links' random processes.
    pub seed: u64,
    /// Whether the emulator runs in the real-time scheduling class.
    #[serde(default)]
    pub realtime: bool,
    /// Whether MPTCP's path manager was configured (subflow endpoints, limits).
    #[serde(default)]
    pub mptcp: bool,
    /// How far `up` got.
    pub phase: Phase,
    /// The emulator's process ID, once started.
    pub emulator_pid: Option<u32>,
    /// When the emulator's clock started (Unix time, nanoseconds): event times count from it.
    pub started_unix_ns: Option<u64>,
}

impl State {
    /// The state of a testbed about to be built from `plan`.
    pub fn new(
        plan: &Plan,
        links: &[String],
        bottleneck: Option<String>,
        events: Vec<String>,
        seed: u64,
        realtime: bool,
    ) -> Self {
        let n = &plan.names;
        let record = |p: &super::plan::PathPlan, link: String| PathRecord {
            client: p.client.to_string(),
            server: p.server.to_string(),
            link,
            mtu: p.mtu,
            interface: p.endpoint_if(),
        };
        State {
            name: n.name.clone(),
            client_ns: n.client_ns(),
            server_ns: n.server_ns(),
            router_ns: n.router_ns(),
            paths: plan.paths.iter().zip(links).map(|(p, l)| record(p, l.clone())).collect(),
            bottleneck: bottleneck
                .zip(plan.competitor.as_ref())
                .map(|(link, c)| BottleneckRecord { link, competitor: record(c, super::plan::COMPETITOR_LINK.into()) }),
            events,
            seed,
            realtime,
            mptcp: plan.mptcp,
            phase: Phase::Building,
            emulator_pid: None,
            started_unix_ns: None,
        }
    }

    /// The state file of testbed `name`.
    pub fn file(name: &str) -> PathBuf {
        run_dir().join(format!("{name}.json"))
    }

    /// The emulator's control socket.
    pub fn control_socket(name: &str) -> PathBuf {
        run_dir().join(format!("{name}.sock"))
    }

    /// The emulator's log (its standard error).
    pub fn log_file(name: &str) -> PathBuf {
        run_dir().join(format!("{name}.log"))
    }

    /// Creates the state file, failing with `AlreadyExists` if testbed `name` has one: two
    /// `up`s of one name cannot both go ahead.
    pub fn claim(&self) -> io::Result<()> {
        let dir = run_dir();
        fs::create_dir_all(&dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        fs::OpenOptions::new().write(true).create_new(true).open(Self::file(&self.name))?;
        self.save()
    }

    /// Writes the state file (atomically: a reader never sees half of it).
    pub fn save(&self) -> io::Result<()> {
        let dir = run_dir();
        fs::create_dir_all(&dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        let path = Self::file(&self.name);
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(io::Error::other)?;
        fs::write(&tmp, text + "\n")?;
        fs::rename(&tmp, &path)
    }

    /// Reads testbed `name`'s state file; `Ok(None)` if there is none.
    pub fn load(name: &str) -> io::Result<Option<State>> {
        Self::load_file(&Self::file(name))
    }

    /// Reads a state file; `Ok(None)` if it does not exist.
    pub fn load_file(path: &Path) -> io::Result<Option<State>> {
        match fs::read_to_string(path) {
            Ok(t) => serde_json::from_str(&t)
                .map(Some)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
        }
    }

    /// The names of the testbeds with a state file.
    pub fn list() -> Vec<String> {
        let Ok(rd) = fs::read_dir(run_dir()) else { return Vec::new() };
        let mut v: Vec<String> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".json")).map(str::to_owned))
            .filter(|n| Names::new(n).is_ok())
            .collect();
        v.sort();
        v
    }

    /// Removes the state file, the control socket and the log of testbed `name` (those
    /// that exist).
    pub fn remove_files(name: &str) {
        for p in [Self::file(name), Self::control_socket(name), Self::log_file(name)] {
            let _ = fs::remove_file(p);
        }
    }
}
