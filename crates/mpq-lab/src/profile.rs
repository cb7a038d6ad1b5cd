//! Categorised CPU profiles of a kernel-testbed run's endpoints (seed 000 §5.4, seed 001
//! §4.2): `perf record -a -e cpu-clock -g` for the run, then `perf report`'s self time per
//! symbol of each endpoint's process summed by the regex map `data/perf-categories.tsv` (the
//! same map `scripts/perf_categories.py` reads) into the report categories: packet I/O,
//! crypto, connection management, locking, application, ACK handling, other.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

/// The regex map, one rule per line (see the file's header).
const MAP: &str = include_str!("../data/perf-categories.tsv");
/// Where unmatched kernel symbols go.
pub const KERNEL: &str = "kernel UDP, syscalls, scheduling";
/// The report category of [`KERNEL`].
const KERNEL_REPORT: &str = "packet I/O";
/// Where unmatched user symbols go (also a report category).
pub const OTHER: &str = "other";

/// One rule of the map.
#[derive(Debug)]
pub struct Rule {
    /// The fine category.
    pub name: String,
    /// The report category it adds to.
    pub report: String,
    /// Matching kernel symbols count here too.
    pub kernel: bool,
    /// The pattern (case-insensitive).
    pub pattern: regex::Regex,
}

/// The map's rules, parsed once.
pub fn rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| parse(MAP).expect("data/perf-categories.tsv parses (a unit test checks it)"))
}

/// Parses a map (`name \t report \t kernel|user \t regex` per line; `#` comments).
pub fn parse(text: &str) -> Result<Vec<Rule>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#')) {
        let f: Vec<&str> = line.split('\t').collect();
        let [name, report, kernel, pattern] = f[..] else {
            return Err(format!("line {}: expected 4 tab-separated columns, got {}", i + 1, f.len()));
        };
        let kernel = match kernel {
            "kernel" => true,
            "user" => false,
            k => return Err(format!("line {}: {k:?}: expected kernel or user", i + 1)),
        };
        let pattern = regex::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .build()
            .map_err(|e| format!("line {}: {e}", i + 1))?;
        out.push(Rule { name: name.into(), report: report.into(), kernel, pattern });
    }
    Ok(out)
}

/// One symbol of a flat profile: its share of the samples (%), whether it is the kernel's.
#[derive(Debug, Clone, PartialEq)]
pub struct Symbol {
    /// Share of all samples, %.
    pub share: f64,
    /// A kernel symbol (`[k]`).
    pub kernel: bool,
    /// The symbol.
    pub name: String,
}

/// The symbols of `perf report --no-children --sort sym --stdio` output.
pub fn parse_report(text: &str) -> Vec<Symbol> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let (share, rest) = line.split_once('%')?;
            let share: f64 = share.trim().parse().ok()?;
            let rest = rest.trim_start();
            let kind = rest.strip_prefix('[')?.chars().next()?;
            let name = rest.get(3..)?.trim();
            Some(Symbol { share, kernel: kind == 'k', name: name.to_owned() })
        })
        .collect()
}

/// The shares (%) per report category of `symbols` (every category present, 0 if none).
pub fn categorise(symbols: &[Symbol]) -> BTreeMap<String, f64> {
    let mut totals: BTreeMap<String, f64> = rules().iter().map(|r| (r.report.clone(), 0.0)).collect();
    totals.insert(KERNEL_REPORT.into(), 0.0);
    totals.insert(OTHER.into(), 0.0);
    for s in symbols {
        let rule = rules().iter().find(|r| r.pattern.is_match(&s.name)).filter(|r| !s.kernel || r.kernel);
        let category = match rule {
            Some(r) => r.report.as_str(),
            None if s.kernel => KERNEL_REPORT,
            None => OTHER,
        };
        *totals.entry(category.to_owned()).or_default() += s.share;
    }
    totals
}

/// A system-wide `perf record -a -e cpu-clock -g` for the length of a run: unlike `perf
/// record -p`, it sees the threads an endpoint starts after recording began (the per-path
/// runtime's path threads, a shard's threads); each endpoint's profile is then its process
/// ID's samples ([`Recording::of_pid`]).
pub struct Recorder {
    child: Child,
    /// The perf.data file.
    pub data: PathBuf,
}

impl Recorder {
    /// Starts recording every CPU into `data`.
    pub fn system_wide(data: &Path) -> Result<Recorder, String> {
        // --no-buildid-cache: the report reads the binaries where they are; perf's default
        // copies every binary it sees into ~/.debug, tens of MB a build, and never removes them.
        let child = Command::new("perf")
            .args(["record", "-a", "-e", "cpu-clock", "-g", "--quiet", "--no-buildid-cache", "-o"])
            .arg(data)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting perf record (is perf installed? Debian: linux-perf): {e}"))?;
        Ok(Recorder { child, data: data.to_owned() })
    }

    /// Stops recording (SIGINT, as Ctrl-C stops perf) and waits for the file.
    pub fn stop(mut self) -> Result<Recording, String> {
        let _ = crate::testbed::sys::kill(self.child.id(), libc::SIGINT);
        let status = self.child.wait().map_err(|e| format!("waiting for perf record: {e}"))?;
        if !self.data.is_file() {
            return Err(format!("perf record wrote no {} ({status})", self.data.display()));
        }
        Ok(Recording { data: self.data.clone() })
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A finished recording.
pub struct Recording {
    /// The perf.data file.
    pub data: PathBuf,
}

impl Recording {
    /// The profile of process `pid` (all its threads) by report category, % of its samples.
    pub fn of_pid(&self, pid: u32) -> Result<BTreeMap<String, f64>, String> {
        let out = Command::new("perf")
            .args(REPORT_ARGS)
            .args(["--pid", &pid.to_string(), "-i"])
            .arg(&self.data)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running perf report: {e}"))?;
        if !out.status.success() {
            return Err(format!("perf report failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(of_process(&String::from_utf8_lossy(&out.stdout)))
    }
}

/// `perf report`'s arguments for a flat profile by symbol that [`parse_report`] reads (then
/// `--pid PID -i FILE`).
pub const REPORT_ARGS: [&str; 9] =
    ["report", "--no-children", "--sort", "sym", "--stdio", "-g", "none", "--percent-limit", "0"];

/// The profile by report category of one process's `perf report --pid` output (shares of
/// the whole recording's samples), rescaled to % of the process's own samples.
pub fn of_process(report: &str) -> BTreeMap<String, f64> {
    let mut p = categorise(&parse_report(report));
    let total: f64 = p.values().sum();
    if total > 0.0 {
        p.values_mut().for_each(|v| *v *= 100.0 / total);
    }
    p
}

/// Whether `perf` can be run here.
pub fn available() -> bool {
    Command::new("perf")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_map_parses_into_the_report_categories() {
        let reports: std::collections::BTreeSet<&str> = rules().iter().map(|r| r.report.as_str()).collect();
        assert_eq!(
            reports.into_iter().collect::<Vec<_>>(),
            ["ACK handling", "application", "connection management", "crypto", "locking", "packet I/O"]
        );
        assert!(parse("a\tb\tnot-a-kind\tx").unwrap_err().contains("kernel or user"));
        assert!(parse("a\tb\tuser").unwrap_err().contains("4 tab-separated"));
        assert!(parse("a\tb\tuser\t(").is_err());
    }

    #[test]
    fn a_flat_report_sums_by_category() {
        let report = "# Samples: 1K of event 'cpu-clock'
#
    30.00%  [.] aes_gcm_enc_update_vaes_avx2
    20.00%  [k] _copy_from_iter
    10.00%  [k] udp_sendmsg
     8.00%  [.] mpq_proto::recovery::Recovery::on_ack_received
     7.00%  [.] mpq_proto::conn::Connection::poll_transmit
     5.00%  [k] futex_wait
     5.00%  [.] mpq_io::socket::UdpSocket::send
     5.00%  [.] mpq::perf::PerfServer::on_stream
     4.00%  [k] aes_encrypt
     6.00%  [.] 0x00007f0000001234
";
        let symbols = parse_report(report);
        assert_eq!(symbols.len(), 10);
        assert_eq!(symbols[1], Symbol { share: 20.0, kernel: true, name: "_copy_from_iter".into() });
        let c = categorise(&symbols);
        let get = |k: &str| c[k];
        assert_eq!(get("crypto"), 30.0);
        // Kernel copies are the connection's work (copies); a kernel symbol matching a
        // user-only rule (aes_encrypt) counts as the kernel's packet I/O.
        assert_eq!(get("connection management"), 20.0 + 7.0);
        assert_eq!(get("packet I/O"), 10.0 + 5.0 + 4.0);
        assert_eq!(get("ACK handling"), 8.0);
        assert_eq!(get("locking"), 5.0);
        assert_eq!(get("application"), 5.0);
        assert_eq!(get("other"), 6.0);
        assert!((c.values().sum::<f64>() - 100.0).abs() < 1e-9);
    }
}
