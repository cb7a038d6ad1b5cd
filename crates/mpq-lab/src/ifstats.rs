//! Throughput from interface counters (seed 000 §5.1): while a kernel-testbed run's client
//! lives, its namespace's received bytes on the paths' interfaces are sampled from
//! `/proc/PID/net/dev` (which shows the namespace of PID), and the rate is taken over the
//! run with its first and last second trimmed, so that neither the handshake and slow start
//! nor the close weigh in. IP bytes, headers included: what the link carried, where goodput
//! counts what the application got. The same sampler reads the CPU time of each of the
//! client's threads (`/proc/PID/task/TID/stat`), the last value seen per thread name, and
//! the busy share of each of the machine's cores over the run (`/proc/stat`, which no
//! namespace hides: the whole machine's cores, whatever runs on them).

use std::collections::BTreeMap;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the counters are read.
const INTERVAL: Duration = Duration::from_millis(100);
/// What is trimmed at each end of a run.
pub const TRIM_S: f64 = 1.0;

#[allow(clippy::disallowed_methods)] // the kernel testbed runs in real time
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

/// What the sampler saw of a process.
#[derive(Debug, Default)]
pub struct Samples {
    /// `(seconds since the start, bytes received on the interfaces)`.
    pub rx: Vec<(f64, u64)>,
    /// CPU seconds per thread name (threads of one name summed), as last seen: up to one
    /// interval short of the whole.
    pub threads: BTreeMap<String, f64>,
    /// Each core's busy share (0-1) between the first and the last sample ([`core_busy`]);
    /// empty when `/proc/stat` could not be read twice.
    pub cores: Vec<f64>,
}

/// Samples process `pid` every [`INTERVAL`] until `/proc/PID/net/dev` goes away (the process
/// exited): bytes received on `ifaces`, and its threads' CPU times.
pub fn sample(pid: u32, ifaces: Vec<String>) -> JoinHandle<Samples> {
    std::thread::spawn(move || {
        let start = wall_clock();
        let ticks = crate::testbed::sys::clock_ticks();
        let mut out = Samples::default();
        let mut per_tid: BTreeMap<u32, (String, f64)> = BTreeMap::new();
        let first_stat = std::fs::read_to_string("/proc/stat").ok();
        let mut last_stat = None;
        while let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/dev")) {
            last_stat = std::fs::read_to_string("/proc/stat").ok();
            out.rx.push((start.elapsed().as_secs_f64(), rx_bytes(&text, &ifaces)));
            if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
                for t in tasks.flatten() {
                    let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
                    if let Some((name, cpu)) =
                        std::fs::read_to_string(t.path().join("stat")).ok().and_then(|s| thread_cpu(&s, ticks))
                    {
                        per_tid.insert(tid, (name, cpu));
                    }
                }
            }
            std::thread::sleep(INTERVAL);
        }
        for (name, cpu) in per_tid.into_values() {
            *out.threads.entry(name).or_default() += cpu;
        }
        if let (Some(a), Some(b)) = (first_stat, last_stat) {
            out.cores = core_busy(&a, &b);
        }
        out
    })
}

/// Each core's busy share (0-1) between two readings of `/proc/stat`: of the time its
/// `cpuN` line counted in between, what was not idle or waiting for I/O (user, nice,
/// system, irq, softirq, steal; guest time is inside user's already). Cores in order of
/// their number; a core missing from either reading, or whose counters did not advance,
/// counts as 0 (an offline core).
pub fn core_busy(before: &str, after: &str) -> Vec<f64> {
    let (a, b) = (core_ticks(before), core_ticks(after));
    let n = a.keys().chain(b.keys()).max().map_or(0, |&m| m + 1);
    (0..n)
        .map(|k| match (a.get(&k), b.get(&k)) {
            (Some(&(busy0, total0)), Some(&(busy1, total1))) if total1 > total0 => {
                (busy1.saturating_sub(busy0) as f64 / (total1 - total0) as f64).clamp(0.0, 1.0)
            }
            _ => 0.0,
        })
        .collect()
}

/// `(busy ticks, total ticks)` of each `cpuN` line of a `/proc/stat` text, by core number.
fn core_ticks(stat: &str) -> BTreeMap<usize, (u64, u64)> {
    stat.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let core: usize = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            // user nice system idle iowait irq softirq steal (guest, guest_nice: in user).
            let v: Vec<u64> = f.take(8).map(|x| x.parse().unwrap_or(0)).collect();
            if v.len() < 4 {
                return None;
            }
            let total: u64 = v.iter().sum();
            let idle = v[3] + v.get(4).copied().unwrap_or(0);
            Some((core, (total - idle, total)))
        })
        .collect()
}

/// A thread's name and CPU seconds (user + system) from its `/proc/.../stat` line.
pub fn thread_cpu(stat: &str, ticks: f64) -> Option<(String, f64)> {
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_owned();
    // After the name: state (field 3), ..., utime (14), stime (15).
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((name, (utime + stime) / ticks))
}

/// Bytes received on `ifaces` in a `/proc/net/dev` table.
pub fn rx_bytes(table: &str, ifaces: &[String]) -> u64 {
    table
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(name, _)| ifaces.iter().any(|i| i == name.trim()))
        .filter_map(|(_, counters)| counters.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// The receive rate in bit/s between the first sample at least [`TRIM_S`] after the first
/// and the last sample at least [`TRIM_S`] before the last; `None` when the samples do not
/// span more than twice that plus one interval (a run too short to trim).
pub fn trimmed_rate(samples: &[(f64, u64)]) -> Option<f64> {
    let (&(t0, _), &(t1, _)) = (samples.first()?, samples.last()?);
    let a = samples.iter().find(|s| s.0 >= t0 + TRIM_S)?;
    let b = samples.iter().rev().find(|s| s.0 <= t1 - TRIM_S)?;
    (b.0 - a.0 >= INTERVAL.as_secs_f64()).then(|| (b.1.saturating_sub(a.1)) as f64 * 8.0 / (b.0 - a.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_named_interfaces_only() {
        let table = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0
 path0: 1000000     700    0    0    0     0          0         0    50000     300    0    0    0     0       0          0
 path1:  250000     200    0    0    0     0          0         0    10000     100    0    0    0     0       0          0
";
        assert_eq!(rx_bytes(table, &["path0".into(), "path1".into()]), 1_250_000);
        assert_eq!(rx_bytes(table, &["path1".into()]), 250_000);
        assert_eq!(rx_bytes(table, &["path9".into()]), 0);
    }

    #[test]
    fn a_threads_stat_line_gives_its_name_and_cpu_time() {
        let stat = "4242 (mpq-path-1) S 4200 4200 4200 0 -1 4194368 120 0 0 0 250 75 0 0 20 0 9 0 1234 0 0";
        assert_eq!(thread_cpu(stat, 100.0), Some(("mpq-path-1".into(), 3.25)));
        // A name with spaces and parentheses: the last ')' ends it.
        let odd = "7 (a (b) c) R 1 1 1 0 -1 0 0 0 0 0 10 10 0 0";
        assert_eq!(thread_cpu(odd, 100.0), Some(("a (b) c".into(), 0.2)));
        assert_eq!(thread_cpu("garbage", 100.0), None);
    }

    #[test]
    fn core_use_is_the_busy_share_of_each_cores_ticks_between_two_readings() {
        let before = "cpu  300 0 100 1000 0 0 0 0 0 0\ncpu0 100 0 50 500 0 0 0 0 0 0\ncpu1 200 0 50 500 0 0 0 0 0 0\nintr 1 2 3\n";
        // cpu0: 30 busy (user 20, system 5, softirq 5) of 100; cpu1: 90 of 100 (iowait is idle).
        let after = "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 120 0 55 560 10 0 5 0 0 0\ncpu1 280 5 55 505 5 0 0 0 0 0\n";
        let c = core_busy(before, after);
        assert_eq!(c.len(), 2);
        assert!((c[0] - 0.30).abs() < 1e-9, "{c:?}");
        assert!((c[1] - 0.90).abs() < 1e-9, "{c:?}");
        // A core that went away, or whose counters stood still, is 0; garbage is nothing.
        assert_eq!(core_busy(before, "cpu1 200 0 50 500 0 0 0 0\n"), vec![0.0, 0.0]);
        assert!(core_busy("garbage", "cpuX 1 2 3 4").is_empty());
        // Old kernels' four fields only.
        assert_eq!(core_busy("cpu0 0 0 0 0\n", "cpu0 1 0 1 2\n"), vec![0.5]);
    }

    #[test]
    fn the_rate_leaves_out_the_first_and_last_second() {
        // 10 Mbit/s in the middle, nothing in the first and last second.
        let mut samples = Vec::new();
        for k in 0..=50 {
            let t = k as f64 * 0.1;
            let bytes = ((t - 1.0).clamp(0.0, 3.0) * 1_250_000.0) as u64;
            samples.push((t, bytes));
        }
        let r = trimmed_rate(&samples).unwrap();
        assert!((r - 10e6).abs() < 1e3, "{r}");
        // Two seconds of samples: nothing left once trimmed.
        assert_eq!(trimmed_rate(&samples[..21]), None);
        assert_eq!(trimmed_rate(&[]), None);
    }
}
