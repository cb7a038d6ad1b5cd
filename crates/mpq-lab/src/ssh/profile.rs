//! `mpq lab run --profile` on the SSH testbed: as on the namespace testbed, a system-wide
//! `perf record -a -e cpu-clock -g` on each host for the length of a run, and each
//! endpoint's profile is its process's samples (`perf report --pid`, run on the host that
//! recorded them, where the symbols are), categorised here by the repository's map
//! ([`crate::profile`]). The recording stays on the host, in the run's directory (removed
//! with it); the report text comes back with the run's logs (`logs/perf-report.txt`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::remote::Remote;
use crate::netns_exec::shell_word;

/// How long `perf record` may take to start writing before the run goes on without it.
const START_LIMIT: Duration = Duration::from_secs(10);
/// How long stopping the recording and reporting may take (perf writes and reads the file).
const REPORT_LIMIT: Duration = Duration::from_secs(120);

/// The command that checks a host has perf.
pub const CHECK: &str = "perf --version";

/// A recording on one host, in the run's directory `dir`.
pub struct HostRecording<'a> {
    remote: &'a Remote,
    dir: String,
    /// Stopped and reported: nothing left to stop.
    done: bool,
}

impl<'a> HostRecording<'a> {
    /// Starts `perf record` on `remote`'s host into `dir/perf.data` (its pid in
    /// `dir/perf.pid`) and waits, bounded, until it writes.
    pub fn start(remote: &'a Remote, dir: &str) -> Result<HostRecording<'a>, String> {
        // --no-buildid-cache: the report runs there, on the binaries where they are; perf's
        // default would copy each one into the host's ~/.debug and keep it.
        let script = format!(
            "cd {dir} && (perf record -a -e cpu-clock -g --quiet --no-buildid-cache -o perf.data > logs/perf-record.log 2>&1 & echo $! > perf.pid) && \
             i=0; while [ ! -s perf.data ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; [ -s perf.data ] || {{ cat logs/perf-record.log; exit 1; }}"
        );
        let rec = HostRecording { remote, dir: dir.to_owned(), done: false };
        remote.run(&script, b"", START_LIMIT).map_err(|e| {
            format!(
                "starting perf record on the {} host (is perf installed there, and may it record every CPU?): {e}",
                remote.role
            )
        })?;
        Ok(rec)
    }

    /// Stops the recording (SIGINT, as Ctrl-C stops perf), waits for it to finish the file,
    /// and returns the categorised profile of the endpoint whose pid is in `dir/pid` (written
    /// by the endpoint wrapper), keeping perf's report in `logs/perf-report.txt`.
    pub fn stop(mut self) -> Result<BTreeMap<String, f64>, String> {
        self.done = true;
        let args: Vec<String> = crate::profile::REPORT_ARGS.iter().map(|a| shell_word(a)).collect();
        let script = format!(
            "cd {} && p=$(cat perf.pid) && kill -INT $p 2>/dev/null; while kill -0 $p 2>/dev/null; do sleep 0.05; done; \
             perf {} --pid $(cat pid) -i perf.data > logs/perf-report.txt 2> logs/perf-report.err && cat logs/perf-report.txt",
            self.dir,
            args.join(" "),
        );
        let out = self.remote.run(&script, b"", REPORT_LIMIT).map_err(|e| {
            format!("perf report on the {} host (logs/perf-report.err in the run's logs): {e}", self.remote.role)
        })?;
        Ok(crate::profile::of_process(&String::from_utf8_lossy(&out.stdout)))
    }
}

impl Drop for HostRecording<'_> {
    /// A recording not stopped (the run failed) is stopped, so that no perf outlives it.
    fn drop(&mut self) {
        if !self.done {
            let _ = self.remote.run(
                &format!("cd {} && kill -INT $(cat perf.pid) 2>/dev/null; true", self.dir),
                b"",
                Duration::from_secs(10),
            );
        }
    }
}
