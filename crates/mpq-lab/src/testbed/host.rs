//! What the testbed asks of the host: the checks before building (root, iproute2, TUN),
//! running a build step, listing namespaces and their processes, and stopping processes
//! with a bounded wait.

use std::io;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::plan::Step;
use super::sys;

/// Why the testbed cannot be built here, said so that the user knows what to do.
pub fn preflight() -> Result<(), String> {
    if sys::effective_uid() != 0 {
        return Err(
            "the testbed creates network namespaces and TUN devices: run it as root (sudo mpq lab testbed ...)".into(),
        );
    }
    match Command::new("ip").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(s) if s.success() => {}
        Ok(s) => {
            return Err(format!("`ip -V` failed ({s}): is iproute2 installed correctly? (apt-get install iproute2)"))
        }
        Err(e) => return Err(format!("cannot run `ip` ({e}): install iproute2 (apt-get install iproute2)")),
    }
    if !Path::new("/dev/net/tun").exists() {
        return Err("/dev/net/tun is missing: load the tun module (modprobe tun)".into());
    }
    Ok(())
}

/// Whether the kernel has MPTCP (`net.mptcp` sysctls exist; namespaces share the kernel).
pub fn has_mptcp() -> bool {
    Path::new("/proc/sys/net/mptcp/enabled").exists()
}

/// Runs `ip` with `args`; the error carries its standard error.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
}

/// Carries out one build step.
pub fn run_step(step: &Step) -> Result<(), String> {
    match step {
        Step::Ip(args) => ip(&args.iter().map(String::as_str).collect::<Vec<_>>()),
        Step::Sysctl { ns, key, value } => sysctl(ns, key, value).map_err(|e| format!("{step}: {e}")),
    }
}

/// Writes `/proc/sys/KEY` inside namespace `ns`, from a thread that enters it (the file
/// belongs to the namespace of the thread that opens it).
fn sysctl(ns: &str, key: &str, value: &str) -> io::Result<()> {
    let (ns, path, value) = (ns.to_owned(), format!("/proc/sys/{}", key.replace('.', "/")), value.to_owned());
    std::thread::spawn(move || {
        sys::enter_netns(&ns)?;
        std::fs::write(&path, value)
    })
    .join()
    .map_err(|_| io::Error::other("sysctl thread panicked"))?
}

/// The network namespaces that exist (`ip netns list`, without their IDs).
pub fn namespaces() -> Vec<String> {
    let Ok(rd) = std::fs::read_dir("/run/netns") else { return Vec::new() };
    let mut v: Vec<String> = rd.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
    v.sort();
    v
}

/// Whether namespace `ns` exists.
pub fn namespace_exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

/// The processes in namespace `ns` (`ip netns pids`).
pub fn pids_in(ns: &str) -> Vec<u32> {
    let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).stderr(Stdio::null()).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout).split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

/// Whether process `pid` is alive: it exists and is not a zombie (a zombie has exited and
/// waits for its parent, holding nothing).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses, which may itself hold spaces.
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|st| st != "Z" && st != "X"),
        Err(_) => false,
    }
}

/// The command line of process `pid`, its arguments joined by spaces.
pub fn cmdline(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// Stops `pids`: SIGTERM, up to `grace` for them to exit, then SIGKILL and up to one more
/// second. Returns those still alive after that.
pub fn stop_processes(pids: &[u32], grace: Duration) -> Vec<u32> {
    for &p in pids {
        let _ = sys::kill(p, libc::SIGTERM);
    }
    let left = wait_gone(pids, grace);
    for &p in &left {
        let _ = sys::kill(p, libc::SIGKILL);
    }
    wait_gone(&left, Duration::from_secs(1))
}

/// Polls until none of `pids` is alive or `limit` passes; returns the live ones.
fn wait_gone(pids: &[u32], limit: Duration) -> Vec<u32> {
    let deadline = Deadline::after(limit);
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || deadline.passed() {
            return left;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A point in wall-clock time to poll against.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(std::time::Instant);

impl Deadline {
    /// `d` from now.
    #[allow(clippy::disallowed_methods)] // bounded waits for the host's processes
    pub fn after(d: Duration) -> Self {
        Deadline(std::time::Instant::now() + d)
    }

    /// Whether it has passed.
    #[allow(clippy::disallowed_methods)] // bounded waits for the host's processes
    pub fn passed(&self) -> bool {
        std::time::Instant::now() >= self.0
    }
}

/// Unix time in nanoseconds: what the emulator announces its start in, and what probe
/// packets carry (comparable across namespaces and processes).
#[allow(clippy::disallowed_methods)] // the host's clock, for times users and probes compare
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
