//! Running the built `mpq` binary in tests: bounded waits (a process that hangs is killed and
//! the test fails) and servers that say where they listen.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// This build's `mpq`.
pub fn mpq() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mpq"))
}

/// Waits for `child` at most `limit`; kills it and panics if it is still running then.
/// Returns its output and how long it ran.
#[allow(clippy::disallowed_methods)] // a wall-clock bound on a real process
pub fn wait_bounded(mut child: Child, limit: Duration, what: &str) -> (Output, Duration) {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return (child.wait_with_output().expect("output"), start.elapsed());
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!("{what}: still running after {limit:?}; stderr: {}", String::from_utf8_lossy(&out.stderr));
        }
        // Polling a child process: no notification exists short of a signal handler.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `mpq` with `args` to its end, its output captured, within `limit` (see
/// [`wait_bounded`]; `what` names it in the panic).
pub fn run_bounded<S: AsRef<std::ffi::OsStr>>(args: &[S], limit: Duration, what: &str) -> Output {
    let child =
        mpq().args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn mpq");
    wait_bounded(child, limit, what).0
}

/// Starts `mpq` with `args` (a server) and reads its first line, `listening on ADDR`;
/// returns the process and the address.
pub fn spawn_listening(args: &[&str]) -> (Child, String) {
    let mut cmd = mpq();
    cmd.args(args);
    listening(cmd)
}

/// [`spawn_listening`] for a server command the caller set up (its arguments, its
/// environment).
pub fn listening(mut cmd: Command) -> (Child, String) {
    let mut server =
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn server");
    let mut line = String::new();
    BufReader::new(server.stdout.take().expect("stdout")).read_line(&mut line).expect("listening line");
    let addr = line.trim().strip_prefix("listening on ").expect("listening on ADDR").to_string();
    (server, addr)
}
