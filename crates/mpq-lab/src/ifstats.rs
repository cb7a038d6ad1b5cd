//! Throughput from interface counters (seed 000 §5.1): while a kernel-testbed run's client
//! lives, its namespace's received bytes on the paths' interfaces are sampled from
//! `/proc/PID/net/dev` (which shows the namespace of PID), and the rate is taken over the
//! run with its first and last second trimmed, so that neither the handshake and slow start
//! nor the close weigh in. IP bytes, headers included: what the link carried, where goodput
//! counts what the application got. The same sampler reads the CPU time of each of the
//! client's threads (`/proc/PID/task/TID/stat`), the last value seen per thread name.

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
}

/// Samples process `pid` every [`INTERVAL`] until `/proc/PID/net/dev` goes away (the process
/// exited): bytes received on `ifaces`, and its threads' CPU times.
pub fn sample(pid: u32, ifaces: Vec<String>) -> JoinHandle<Samples> {
    std::thread::spawn(move || {
        let start = wall_clock();
        let ticks = crate::testbed::sys::clock_ticks();
        let mut out = Samples::default();
        let mut per_tid: BTreeMap<u32, (String, f64)> = BTreeMap::new();
        while let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/dev")) {
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
        out
    })
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
