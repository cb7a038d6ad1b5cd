//! The processes of a kernel-testbed run: programs started in a namespace, killed and reaped
//! when dropped ([`Reaped`]); the server's port and its `connection ended:` reports; output
//! drained so that nothing blocks on a pipe; bounded waits that also stop on Ctrl-C; and the
//! quoting of command lines for manifests. Shared by the namespace and the SSH testbeds.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::testbed::sys;

/// How long the server may take to say which port it listens on.
const SERVER_READY_TIMEOUT: Duration = Duration::from_secs(10);

#[allow(clippy::disallowed_methods)] // the kernel testbed runs in real time
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

/// The `ip netns exec NS PROGRAM ARGS...` command.
pub(crate) fn in_namespace(ns: &str, program: &Path, args: &[String]) -> Command {
    let mut c = Command::new("ip");
    c.arg("netns").arg("exec").arg(ns).arg(program).args(args);
    c
}

/// Kills a child process (and reaps it) when dropped, so that no endpoint outlives its run.
pub(crate) struct Reaped {
    /// The process.
    pub(crate) child: Child,
    /// Set once reaped: its pid may name another process after that.
    reaped: bool,
}

impl Reaped {
    /// Takes charge of `child`.
    pub(crate) fn new(child: Child) -> Reaped {
        Reaped { child, reaped: false }
    }

    /// `mpq ARGS...` in namespace `ns`, its standard output to `stdout`, nothing read from
    /// it and its standard error dropped.
    pub(crate) fn spawn(ns: &str, mpq: &Path, args: &[String], stdout: Stdio, what: &str) -> Result<Reaped, String> {
        let child = in_namespace(ns, mpq, args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {what}: {e}"))?;
        Ok(Reaped::new(child))
    }

    /// Kills and reaps the process: the CPU seconds it used (wait4's resource usage).
    pub(crate) fn stop(&mut self) -> Option<f64> {
        if std::mem::replace(&mut self.reaped, true) {
            return None;
        }
        let _ = self.child.kill();
        sys::wait_cpu(self.child.id(), false).ok().flatten().map(|(_, cpu)| cpu)
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Reads the server's standard output up to its `listening on ADDR:PORT` line; returns the
/// port. The rest of its output is drained by a thread.
pub(crate) fn server_port(server: &mut Child) -> Result<u16, String> {
    let stdout = server.stdout.take().ok_or("the server's output")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if !sent {
                if let Some(port) = line.strip_prefix("listening on ").and_then(|a| a.rsplit(':').next()) {
                    let _ = tx.send(port.parse::<u16>().ok());
                    sent = true;
                }
            }
        }
    });
    match rx.recv_timeout(SERVER_READY_TIMEOUT) {
        Ok(Some(port)) => Ok(port),
        Ok(None) => Err("the server printed an address without a port".into()),
        Err(_) => {
            let status = server.try_wait().ok().flatten();
            Err(match status {
                Some(s) => format!("the server exited ({s}) before it listened"),
                None => format!("the server did not listen within {SERVER_READY_TIMEOUT:?}"),
            })
        }
    }
}

/// Drains the server's standard error; sends the JSON of each `connection ended:` line.
pub(crate) fn server_reports(server: &mut Child) -> mpsc::Receiver<serde_json::Value> {
    server_reports_and_tail(server).0
}

/// Lines of a server's standard error kept for a failed run's error message.
const SERVER_TAIL_LINES: usize = 3;

/// The last lines a server wrote to its standard error, kept by the thread that reads them.
pub(crate) type ServerTail = std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>;

/// [`server_reports`], and the last lines the server wrote to its standard error (what a
/// failed run's error shows of the server's side).
pub(crate) fn server_reports_and_tail(server: &mut Child) -> (mpsc::Receiver<serde_json::Value>, ServerTail) {
    let (tx, rx) = mpsc::channel();
    let tail = ServerTail::default();
    if let Some(stderr) = server.stderr.take() {
        let kept = tail.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(v) = line.find("connection ended: ").and_then(|i| {
                    serde_json::from_str::<serde_json::Value>(&line[i + "connection ended: ".len()..]).ok()
                }) {
                    let _ = tx.send(v);
                }
                if let Ok(mut t) = kept.lock() {
                    if t.len() == SERVER_TAIL_LINES {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            }
        });
    }
    (rx, tail)
}

/// Threads that read `child`'s standard output and error to their ends (so that it never
/// blocks on a full pipe); each gives what it read.
pub(crate) fn drain(child: &mut Child) -> (std::thread::JoinHandle<Vec<u8>>, std::thread::JoinHandle<Vec<u8>>) {
    fn read_all(r: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    }
    (read_all(child.stdout.take()), read_all(child.stderr.take()))
}

/// How often a wait for the client looks for Ctrl-C.
const STOP_POLL: Duration = Duration::from_millis(100);

/// Waits for `child` at most `limit`, collecting its output and the CPU seconds it used;
/// kills it after that, or when the user interrupts the experiment ([`interrupted`]).
pub(crate) fn wait_limited(mut child: Child, limit: Duration) -> Result<(std::process::Output, f64), String> {
    let pid = child.id();
    let (stdout, stderr) = drain(&mut child);
    let (status, cpu) = wait_cpu_limited(pid, limit, || {
        let _ = sys::kill(pid, libc::SIGKILL);
    })?;
    let out = std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    };
    Ok((out, cpu))
}

/// Waits for the child `pid` (which nothing else waits for) at most `limit`: its status and
/// CPU seconds ([`sys::wait_cpu`]). After `limit`, or when the user interrupts the
/// experiment ([`interrupted`]), calls `kill` and says why.
pub(crate) fn wait_cpu_limited(
    pid: u32,
    limit: Duration,
    kill: impl Fn(),
) -> Result<(std::process::ExitStatus, f64), String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(sys::wait_cpu(pid, false));
    });
    let start = wall_clock();
    loop {
        match rx.recv_timeout(STOP_POLL) {
            Ok(Ok(Some(done))) => return Ok(done),
            Ok(Ok(None)) => return Err("waiting for the client: no status".into()),
            Ok(Err(e)) => return Err(format!("waiting for the client: {e}")),
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err("the client's waiter died".into()),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let why = if interrupted() {
            "interrupted".to_owned()
        } else if start.elapsed() >= limit {
            format!("the run did not finish within {limit:?} (max_time); the client was killed")
        } else {
            continue;
        };
        kill();
        let _ = rx.recv_timeout(Duration::from_secs(5));
        return Err(why);
    }
}

/// Whether the user asked the experiment to stop (Ctrl-C, SIGTERM, SIGHUP: building a
/// testbed catches them so that it can always clean up).
pub fn interrupted() -> bool {
    sys::stop_requested()
}

/// The last `n` non-empty lines of `text`, joined with " | ".
pub(crate) fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// `s` quoted for a shell when it needs it (manifests only).
pub(crate) fn shell_word(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:=@,".contains(&b)) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
