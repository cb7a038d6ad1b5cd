//! Testbeds for the tests (`mpq lab testbed up`, the built binary), taken down on drop,
//! also when the test fails. They need root; without it a test is skipped with a message,
//! unless `MPQ_REQUIRE_NETNS` is set (the test command sets it), which makes that a failure.
#![allow(dead_code)] // each test file uses its own subset

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use mpq_lab::testbed::host;

/// Whether this test can build testbeds; prints why not (or panics under MPQ_REQUIRE_NETNS).
pub fn available() -> bool {
    let why = if mpq_lab::testbed::sys::effective_uid() != 0 {
        Some("not root")
    } else if !Path::new("/dev/net/tun").exists() {
        Some("no /dev/net/tun")
    } else if Command::new("ip").arg("-V").output().is_err() {
        Some("no `ip` (iproute2)")
    } else {
        None
    };
    match why {
        None => true,
        Some(w) if std::env::var_os("MPQ_REQUIRE_NETNS").is_some() => {
            panic!("MPQ_REQUIRE_NETNS is set but the testbed cannot run here: {w}")
        }
        Some(w) => {
            eprintln!("skipped: the kernel testbed needs root, iproute2 and TUN ({w}); MPQ_REQUIRE_NETNS=1 makes this a failure");
            false
        }
    }
}

/// This test's turn among the file's measuring tests: real transfers and the emulator's
/// timing share the machine's two cores, and a second test at the same time would slow them
/// down. (A test that failed holding the turn poisons it; the next may still run.)
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A testbed name unique to this process and test.
pub fn name(short: &str) -> String {
    format!("t{}-{short}", std::process::id())
}

/// Runs this build's `mpq` with `args`.
pub fn mpq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mpq"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("mpq: {e}"))
}

/// A testbed that is up; `down` on drop.
pub struct Testbed {
    /// Its name.
    pub name: String,
    /// What `up` printed.
    pub json: serde_json::Value,
}

impl Testbed {
    /// `mpq lab testbed up --name NAME ARGS...`; panics (after cleaning up) if it fails.
    pub fn up(name: &str, args: &[&str]) -> Testbed {
        let mut a = vec!["lab", "testbed", "up", "--name", name];
        a.extend_from_slice(args);
        // Down on drop even if `up` printed nothing usable.
        let mut tb = Testbed { name: name.to_owned(), json: serde_json::Value::Null };
        let out = mpq(&a);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "mpq {}: {}", a.join(" "), String::from_utf8_lossy(&out.stderr));
        tb.json = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("up printed {stdout:?}: {e}"));
        tb
    }

    /// A string field of the `up` JSON.
    pub fn field(&self, key: &str) -> String {
        self.json[key].as_str().unwrap_or_else(|| panic!("no {key} in {}", self.json)).to_owned()
    }

    /// Client and server address of path `i`.
    pub fn path(&self, i: usize) -> (std::net::Ipv4Addr, std::net::Ipv4Addr) {
        let p = &self.json["paths"][i];
        let ip = |k: &str| p[k].as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("path {i}: {p}"));
        (ip("client"), ip("server"))
    }

    /// The emulator's pid.
    pub fn emulator_pid(&self) -> u32 {
        self.json["emulator_pid"].as_u64().unwrap_or_else(|| panic!("no emulator_pid in {}", self.json)) as u32
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let out = mpq(&["lab", "testbed", "down", "--name", &self.name]);
        if !out.status.success() {
            eprintln!("down {}: {}", self.name, String::from_utf8_lossy(&out.stderr));
        }
    }
}

/// Asserts nothing of testbed `name` is left: namespaces, state file, processes.
pub fn assert_gone(name: &str, pids: &[u32]) {
    let ns: Vec<String> =
        host::namespaces().into_iter().filter(|n| n.starts_with(&format!("mpqlab-{name}-"))).collect();
    assert!(ns.is_empty(), "namespaces left: {ns:?}");
    let state = mpq_lab::testbed::state::State::file(name);
    assert!(!state.exists(), "{} left", state.display());
    assert!(!mpq_lab::testbed::state::State::control_socket(name).exists(), "control socket left");
    for &p in pids {
        assert!(!host::alive(p), "process {p} still running");
    }
}

/// Polls `cond` every millisecond until it holds or `limit` passes; whether it held.
pub fn poll_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = host::Deadline::after(limit);
    loop {
        if cond() {
            return true;
        }
        if deadline.passed() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Checks a row's per-core use (`cpu_cores`, or `key`): one share in 0..=1 per core of this
/// machine, and enough busy time over the run for the CPU seconds `spent` of what ran on it.
pub fn check_cores(r: &serde_json::Value, key: &str, spent: f64) {
    let cores: Vec<f64> =
        r[key].as_array().unwrap_or_else(|| panic!("{key}: {r}")).iter().map(|c| c.as_f64().unwrap()).collect();
    let online = std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .count();
    assert_eq!(cores.len(), online, "one share per core: {r}");
    assert!(cores.iter().all(|c| (0.0..=1.0).contains(c)), "{key}: {r}");
    let busy_s = cores.iter().sum::<f64>() * r["sim_wall_s"].as_f64().unwrap();
    assert!(busy_s + 0.3 >= spent, "{key}: {busy_s} s busy for {spent} s of CPU: {r}");
}
