//! One run of an implementation folder (`transport: quic:NAME`, [`crate::implementation`])
//! on a kernel testbed [`crate::netns_exec`] built: a file of the run's size in a fresh
//! `WWW`, a certificate for the server's addresses, `run-server.sh` in the server namespace
//! and `run-client.sh` in the client namespace with the interop runner's variables
//! (`implementations/README.md`), the download checked byte for byte.
//!
//! The completion time is the client process's: from its start to its exit, handshake and
//! start-up included (an implementation reports nothing finer in a common form), so compare
//! implementations with each other, `quic:mpq` included, rather than with `mpq perf` runs
//! (`transport: quic`), which count from the handshake's completion.

use std::io::{BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rand::{RngCore, SeedableRng};

use crate::experiment::Experiment;
use crate::implementation::Implementation;
use crate::netns_exec::{interrupted, Measured};
use crate::plan::RunSpec;
use crate::testbed::{control, state::State, sys};

/// The UDP port servers listen on (each run has fresh namespaces, so it is always free).
const PORT: u16 = 443;
/// The name of the file a run downloads.
pub(crate) const FILE: &str = "bulk";
/// How long a server may take to bind its port (Python start-up included).
const SERVER_BIND_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the server's port is looked for: the implementations print nothing common
/// when they are ready, so the socket table is the only signal.
const BIND_POLL: Duration = Duration::from_millis(20);
/// How long a server may take to exit after SIGTERM before it is killed.
const SERVER_STOP_GRACE: Duration = Duration::from_secs(2);
/// A path "carries" a run's data when it delivered at least this share of the bytes.
const CARRYING_SHARE: f64 = 0.01;

#[allow(clippy::disallowed_methods)] // the kernel testbed runs in real time
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

/// A process group (an endpoint and anything it started), stopped when dropped.
struct Group {
    child: Child,
    reaped: bool,
}

/// Starts `cmd` as the leader of a new process group.
fn spawn_group(mut cmd: Command, what: &str) -> Result<Child, String> {
    cmd.process_group(0).spawn().map_err(|e| format!("starting the {what}: {e}"))
}

impl Group {
    fn new(child: Child) -> Group {
        Group { child, reaped: false }
    }

    /// Whether the leader has exited (reaping it: see [`Group::stop`]).
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        match sys::wait_cpu(self.child.id(), true) {
            Ok(Some((status, _))) => {
                self.reaped = true;
                Some(status)
            }
            _ => None,
        }
    }

    /// SIGTERM to the group, SIGKILL after a grace period; the leader's CPU seconds (with
    /// what it waited for), unless it was reaped before.
    fn stop(&mut self) -> Option<f64> {
        if self.reaped {
            let _ = sys::kill_group(self.child.id(), libc::SIGKILL);
            return None;
        }
        let pid = self.child.id();
        let _ = sys::kill_group(pid, libc::SIGTERM);
        let deadline = wall_clock() + SERVER_STOP_GRACE;
        let mut done = None;
        while done.is_none() && wall_clock() < deadline {
            done = sys::wait_cpu(pid, true).ok().flatten();
            if done.is_none() {
                std::thread::sleep(BIND_POLL);
            }
        }
        let _ = sys::kill_group(pid, libc::SIGKILL);
        if done.is_none() {
            done = sys::wait_cpu(pid, false).ok().flatten();
        }
        self.reaped = true;
        done.map(|(_, cpu)| cpu)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The run's scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `run` with `imp` on the testbed `state` (named `name`); `logs`: where the
/// endpoints' logs, qlog files and TLS secrets go (else a scratch directory).
pub(crate) fn measure(
    exp: &Experiment,
    run: &RunSpec,
    seed: u64,
    state: &State,
    imp: &Implementation,
    logs: Option<PathBuf>,
    mpq: &Path,
) -> Result<Measured, String> {
    let scratch = Scratch(std::env::temp_dir().join(format!("mpq-lab-{}", state.name)));
    let _ = std::fs::remove_dir_all(&scratch.0);
    let dir = |sub: &str| -> Result<PathBuf, String> {
        let d = scratch.0.join(sub);
        std::fs::create_dir_all(&d).map_err(|e| format!("creating {}: {e}", d.display()))?;
        Ok(d)
    };
    let (www, downloads, certs) = (dir("www")?, dir("downloads")?, dir("certs")?);
    let logs = match logs {
        Some(d) => d,
        None => dir("logs")?,
    };
    write_file(&www.join(FILE), run.size, seed)?;
    write_certs(&certs, &state.paths.iter().map(|p| p.server.clone()).collect::<Vec<_>>())?;

    let env = |role: &str| -> Vec<(String, String)> {
        let role_logs = logs.join(role);
        let _ = std::fs::create_dir_all(&role_logs);
        [
            ("ROLE", role.to_owned()),
            ("TESTCASE", "goodput".to_owned()),
            ("CERTS", certs.display().to_string()),
            ("LOGS", role_logs.display().to_string()),
            ("QLOGDIR", role_logs.join("qlog").display().to_string()),
            ("SSLKEYLOGFILE", role_logs.join("keys.log").display().to_string()),
            ("MPQ", mpq.display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    };
    let endpoint = |ns: &str, role: &str, extra: Vec<(String, String)>| -> Result<Command, String> {
        let out = |f: &str| {
            std::fs::File::create(logs.join(role).join(f)).map_err(|e| format!("creating the {role}'s log: {e}"))
        };
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, "bash"])
            .arg(imp.script(role))
            .envs(env(role))
            .envs(extra)
            .stdin(Stdio::null())
            .stdout(out("stdout.log")?)
            .stderr(out("stderr.log")?);
        Ok(c)
    };

    let server_cmd = endpoint(
        &state.server_ns,
        "server",
        vec![
            ("WWW".into(), www.display().to_string()),
            ("IP".into(), "0.0.0.0".into()),
            ("PORT".into(), PORT.to_string()),
        ],
    )?;
    let mut server = Group::new(spawn_group(server_cmd, &format!("{} server", imp.name))?);
    wait_bound(&mut server, PORT).map_err(|e| format!("{e}: {}", log_tail(&logs.join("server"))))?;

    let client_ips: Vec<&str> = state.paths.iter().map(|p| p.client.as_str()).collect();
    let url = format!("https://{}:{PORT}/{FILE}", state.paths[0].server);
    let client_cmd = endpoint(
        &state.client_ns,
        "client",
        vec![
            ("REQUESTS".into(), url),
            ("DOWNLOADS".into(), downloads.display().to_string()),
            ("CLIENT_IPS".into(), client_ips.join(" ")),
        ],
    )?;
    let command = format!(
        "ip netns exec {} env ROLE=client TESTCASE=goodput CLIENT_IPS='{}' REQUESTS=https://{}:{PORT}/{FILE} ... bash {}",
        state.client_ns,
        client_ips.join(" "),
        state.paths[0].server,
        imp.script("client").display()
    );
    let start = wall_clock();
    let client = spawn_group(client_cmd, &format!("{} client", imp.name))?;
    let limit = exp.max_time.unwrap_or(crate::netns_exec::DEFAULT_RUN_LIMIT);
    let counters = crate::ifstats::sample(client.id(), state.paths.iter().map(|p| p.interface.clone()).collect());
    let pids = (server.child.id(), client.id());
    let (status, client_cpu) = wait_group(client, limit)?;
    let sampled = counters.join().unwrap_or_default();
    let throughput = crate::ifstats::trimmed_rate(&sampled.rx);
    let duration = start.elapsed().as_secs_f64();
    let server_cpu = server.stop();
    if !status.success() {
        let why = if status.code() == Some(127) { "does not support the test case" } else { "failed" };
        return Err(format!("the {} client {why} ({status}): {}", imp.name, log_tail(&logs.join("client"))));
    }
    let got = downloads.join(FILE);
    let bytes = std::fs::metadata(&got).map(|m| m.len()).unwrap_or(0);
    let same = bytes == run.size && same_content(&www.join(FILE), &got)?;
    let links = crate::netns_exec::PathCounters::of_emulator(
        &control::stats(&state.name).map_err(|e| format!("the emulator's counters: {e}"))?,
    );
    let carrying = carrying_paths(&links.delivered);
    let client = serde_json::json!({
        "bytes": bytes,
        "duration_s": duration,
        "goodput_bps": if duration > 0.0 { bytes as f64 * 8.0 / duration } else { 0.0 },
        "multipath": imp.paths_used(state.paths.len()) > 1 && carrying > 1,
        "cpu_s": client_cpu,
        "throughput_bps": throughput,
        "threads_cpu_s": sampled.threads,
        "cores": sampled.cores,
    });
    let server = Some(serde_json::json!({ "cpu_s": server_cpu }));
    Ok(Measured { client, server, links, command, verified: Some(same), pids })
}

/// How many paths carried a run's data: those that delivered at least [`CARRYING_SHARE`] of
/// the bytes.
pub(crate) fn carrying_paths(delivered: &[u64]) -> usize {
    let total: u64 = delivered.iter().sum();
    delivered.iter().filter(|&&b| total > 0 && b as f64 >= CARRYING_SHARE * total as f64).count()
}

/// Waits until a UDP socket of the server's namespace is bound to `port` (read from the
/// server's `/proc/PID/net/udp*`, which show its namespace's sockets).
fn wait_bound(server: &mut Group, port: u16) -> Result<(), String> {
    let want = format!(":{port:04X}");
    let pid = server.child.id();
    let start = wall_clock();
    loop {
        let bound = ["udp", "udp6"].iter().any(|t| {
            std::fs::read_to_string(format!("/proc/{pid}/net/{t}")).is_ok_and(|s| {
                s.lines().skip(1).any(|l| l.split_whitespace().nth(1).is_some_and(|a| a.ends_with(&want)))
            })
        });
        if bound {
            return Ok(());
        }
        if let Some(status) = server.exited() {
            return Err(format!("the server exited ({status}) before it listened"));
        }
        if interrupted() {
            return Err("interrupted".into());
        }
        if start.elapsed() > SERVER_BIND_TIMEOUT {
            return Err(format!("the server did not bind UDP port {port} within {SERVER_BIND_TIMEOUT:?}"));
        }
        std::thread::sleep(BIND_POLL);
    }
}

/// Waits for the client at most `limit` (or until Ctrl-C); kills its group after that, and
/// whatever of the group outlived it in any case.
fn wait_group(child: Child, limit: Duration) -> Result<(std::process::ExitStatus, f64), String> {
    let pgid = child.id();
    let kill_group = || {
        let _ = sys::kill_group(pgid, libc::SIGKILL);
    };
    let done = crate::netns_exec::wait_cpu_limited(pgid, limit, kill_group);
    kill_group();
    done
}

/// Writes `size` pseudo-random bytes (from `seed`) to `path`: incompressible, and the same
/// for every implementation of a scenario.
fn write_file(path: &Path, size: u64, seed: u64) -> Result<(), String> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ size);
    let f = std::fs::File::create(path).map_err(|e| format!("creating {}: {e}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    let mut buf = vec![0u8; 64 * 1024];
    let mut left = size;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        rng.fill_bytes(&mut buf[..n]);
        w.write_all(&buf[..n]).map_err(|e| format!("writing {}: {e}", path.display()))?;
        left -= n as u64;
    }
    w.flush().map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Writes `cert.pem` and `priv.key` (the server's, self-signed for `localhost` and every
/// server address of the testbed) and `ca.pem` (the same certificate: the clients' trust
/// anchor) into `dir`.
pub(crate) fn write_certs(dir: &Path, servers: &[String]) -> Result<(), String> {
    let mut names = vec!["localhost".to_owned()];
    names.extend(servers.iter().cloned());
    let ck = rcgen::generate_simple_self_signed(names).map_err(|e| format!("generating a certificate: {e}"))?;
    let pem = ck.cert.pem();
    for (file, text) in [("cert.pem", &pem), ("ca.pem", &pem), ("priv.key", &ck.signing_key.serialize_pem())] {
        std::fs::write(dir.join(file), text).map_err(|e| format!("writing {file}: {e}"))?;
    }
    Ok(())
}

/// Whether two files have the same bytes.
fn same_content(a: &Path, b: &Path) -> Result<bool, String> {
    let open =
        |p: &Path| std::fs::File::open(p).map(BufReader::new).map_err(|e| format!("reading {}: {e}", p.display()));
    let (mut a, mut b) = (open(a)?, open(b)?);
    let (mut x, mut y) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let n = read_full(&mut a, &mut x)?;
        let m = read_full(&mut b, &mut y)?;
        if n != m || x[..n] != y[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<usize, String> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("comparing the download: {e}")),
        }
    }
    Ok(n)
}

/// The last lines of an endpoint's logs, for errors.
fn log_tail(dir: &Path) -> String {
    let text = ["stderr.log", "stdout.log"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(dir.join(f)).ok())
        .collect::<Vec<_>>()
        .join("\n");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
    if tail.is_empty() {
        format!("no output (logs in {})", dir.display())
    } else {
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_seeded_and_sized_and_compared_byte_for_byte() {
        let d = tempfile::tempdir().unwrap();
        let (a, b, c) = (d.path().join("a"), d.path().join("b"), d.path().join("c"));
        write_file(&a, 200_001, 7).unwrap();
        write_file(&b, 200_001, 7).unwrap();
        write_file(&c, 200_001, 8).unwrap();
        assert_eq!(std::fs::metadata(&a).unwrap().len(), 200_001);
        assert!(same_content(&a, &b).unwrap());
        assert!(!same_content(&a, &c).unwrap());
        let mut short = std::fs::read(&a).unwrap();
        short.pop();
        std::fs::write(&c, &short).unwrap();
        assert!(!same_content(&a, &c).unwrap());
    }
}
