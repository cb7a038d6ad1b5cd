//! Commands on an SSH host through the system's OpenSSH client (`ssh`, `scp`): the user's
//! configuration, agent and keys work as they do by hand, and nothing ever asks for a
//! password (BatchMode): a host that needs one fails with SSH's message.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use super::hosts::Host;

/// How often a wait looks for Ctrl-C.
const STOP_POLL: Duration = Duration::from_millis(100);

#[allow(clippy::disallowed_methods)] // the SSH testbed runs in real time
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

/// One host, reached over SSH.
#[derive(Debug, Clone)]
pub struct Remote {
    /// The host.
    pub host: Host,
    /// Its role (`client` or `server`), for messages.
    pub role: &'static str,
    /// The control socket of a shared SSH connection ([`Remote::share`]), once there is one.
    pub control: Option<std::path::PathBuf>,
}

impl Remote {
    /// `ssh ... DEST -- SCRIPT`: `script` runs in the login shell of the host (`sh -c`).
    pub fn command(&self, script: &str) -> Command {
        let mut c = Command::new("ssh");
        c.args(self.options());
        if let Some(p) = self.host.port {
            c.args(["-p", &p.to_string()]);
        }
        c.arg("--").arg(self.host.destination()).arg(script);
        c
    }

    /// The host's options, and the shared connection's socket if there is one (SSH falls
    /// back to a connection of its own when the socket is gone).
    fn options(&self) -> Vec<String> {
        let mut o = self.host.common_options();
        if let Some(p) = &self.control {
            o.extend(["-o".into(), "ControlMaster=no".into(), "-o".into(), format!("ControlPath={}", p.display())]);
        }
        o
    }

    /// Opens one SSH connection that later commands share (OpenSSH's ControlMaster, its
    /// socket at `socket`): a run's dozen commands then cost no new key exchange each. The
    /// connection ends after a minute without commands, or at [`Remote::unshare`].
    pub fn share(&mut self, socket: &Path) -> Result<(), String> {
        let log = socket.with_extension("log");
        let stderr = std::fs::File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let mut c = Command::new("ssh");
        c.args(self.host.common_options())
            .args(["-o", "ControlMaster=yes", "-o", "ControlPersist=60"])
            .arg("-o")
            .arg(format!("ControlPath={}", socket.display()));
        if let Some(p) = self.host.port {
            c.args(["-p", &p.to_string()]);
        }
        c.arg("--").arg(self.host.destination()).arg("true");
        // (The master stays in the background holding the command's standard streams:
        // nothing of them may be a pipe this process reads to its end.)
        let child = c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr).spawn().map_err(|e| {
            format!(
                "starting ssh to the {} host {}: {e} (is OpenSSH's client installed?)",
                self.role, self.host.hostname
            )
        })?;
        let out = wait_output(child, Duration::from_secs(60))
            .map_err(|e| format!("connecting to the {} host {}: {e}", self.role, self.host.hostname))?;
        if !out.status.success() {
            let out = Output { stderr: std::fs::read(&log).unwrap_or_default(), ..out };
            return Err(self.failure("connecting", &out));
        }
        self.control = Some(socket.to_owned());
        Ok(())
    }

    /// Ends the shared connection, if any.
    pub fn unshare(&mut self) {
        if let Some(p) = self.control.take() {
            let _ = Command::new("ssh")
                .args(self.host.common_options())
                .arg("-o")
                .arg(format!("ControlPath={}", p.display()))
                .args(["-O", "exit", "--", &self.host.destination()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }

    /// Starts `script` with its output piped back.
    pub fn spawn(&self, script: &str) -> Result<Child, String> {
        self.command(script).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| {
            format!(
                "starting ssh to the {} host {}: {e} (is OpenSSH's client installed?)",
                self.role, self.host.hostname
            )
        })
    }

    /// Runs `script` with `input` on its standard input, at most `limit`; its output. A
    /// non-zero exit is an error that quotes the end of its standard error.
    pub fn run(&self, script: &str, input: &[u8], limit: Duration) -> Result<Output, String> {
        let mut child =
            self.command(script).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(
                |e| {
                    format!(
                        "starting ssh to the {} host {}: {e} (is OpenSSH's client installed?)",
                        self.role, self.host.hostname
                    )
                },
            )?;
        if let Some(mut stdin) = child.stdin.take() {
            // (A script that does not read its input closes the pipe: not an error.)
            let _ = stdin.write_all(input);
        }
        let out = wait_output(child, limit)
            .map_err(|e| format!("on the {} host {}: `{script}`: {e}", self.role, self.host.hostname))?;
        if !out.status.success() {
            return Err(self.failure(script, &out));
        }
        Ok(out)
    }

    /// The message of a failed command: SSH's own (exit 255) says the host could not be
    /// reached or logged into.
    fn failure(&self, what: &str, out: &Output) -> String {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = tail[tail.len().saturating_sub(3)..].join(" | ");
        if out.status.code() == Some(255) {
            format!(
                "cannot reach or log into the {} host {} over SSH ({tail}); check `ssh {}` works without a password",
                self.role,
                self.host.hostname,
                self.host.destination()
            )
        } else {
            format!("on the {} host {}: `{what}` failed ({}): {tail}", self.role, self.host.hostname, out.status)
        }
    }

    /// `scp` with this host's options: `-P PORT` (scp's spelling), quiet, recursive.
    fn scp(&self) -> Command {
        let mut c = Command::new("scp");
        c.args(["-q", "-r"]).args(self.options());
        if let Some(p) = self.host.port {
            c.args(["-P", &p.to_string()]);
        }
        c
    }

    /// Copies the local files or directories `from` into the host's directory `to`.
    pub fn copy_to(&self, from: &[&Path], to: &str, limit: Duration) -> Result<(), String> {
        let mut c = self.scp();
        c.arg("--").args(from).arg(format!("{}:{to}", self.host.destination()));
        self.scp_run(c, &format!("copying {} files to {to}", from.len()), limit)
    }

    /// Copies the host's file or directory `from` to the local `to`.
    pub fn copy_from(&self, from: &str, to: &Path, limit: Duration) -> Result<(), String> {
        let mut c = self.scp();
        c.arg("--").arg(format!("{}:{from}", self.host.destination())).arg(to);
        self.scp_run(c, &format!("copying {from} back"), limit)
    }

    fn scp_run(&self, mut c: Command, what: &str, limit: Duration) -> Result<(), String> {
        let child = c
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting scp: {e} (is OpenSSH's client installed?)"))?;
        let out = wait_output(child, limit).map_err(|e| format!("{what} (the {} host): {e}", self.role))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(self.failure(what, &out))
        }
    }
}

/// Waits for `child` at most `limit` while draining its output; kills it after that, or when
/// the user interrupts the experiment (SIGINT, SIGTERM, SIGHUP once caught).
pub fn wait_output(mut child: Child, limit: Duration) -> Result<Output, String> {
    let (stdout, stderr) = crate::netns_exec::drain(&mut child);
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let start = wall_clock();
    let status = loop {
        match rx.recv_timeout(STOP_POLL) {
            Ok(Ok(s)) => break s,
            Ok(Err(e)) => return Err(format!("waiting: {e}")),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Err("its waiter died".into()),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        let why = if crate::testbed::sys::stop_requested() {
            "interrupted".to_owned()
        } else if start.elapsed() >= limit {
            format!("no answer within {limit:?}; stopped")
        } else {
            continue;
        };
        // Not reaped yet (the waiter has not returned): the pid is still the child's.
        let _ = crate::testbed::sys::kill(pid, libc::SIGKILL);
        let _ = rx.recv();
        return Err(why);
    };
    Ok(Output { status, stdout: stdout.join().unwrap_or_default(), stderr: stderr.join().unwrap_or_default() })
}
