//! What the endpoint wrapper (`data/ssh-endpoint.sh`) recorded on an SSH host: the
//! interface counters, the endpoint's threads and the host's cores every 0.1 s (`samples`),
//! and the CPU time
//! of the endpoint from the shell's `times` (`cpu`). Read with the namespace testbed's
//! parsers ([`crate::ifstats`]), so that both testbeds measure alike.

use std::collections::BTreeMap;

use crate::ifstats::{core_busy, rx_bytes, thread_cpu};

/// The samples of one endpoint.
#[derive(Debug, Default, PartialEq)]
pub struct HostSamples {
    /// `(seconds since the first sample, bytes received on the interfaces)`.
    pub rx: Vec<(f64, u64)>,
    /// Bytes received on each interface between the first and the last sample, in the
    /// order asked.
    pub per_interface: Vec<u64>,
    /// CPU seconds per thread name (threads of one name summed), as last seen.
    pub threads: BTreeMap<String, f64>,
    /// Each of the host's cores' busy share (0-1) between the first and the last sample
    /// ([`core_busy`]); empty with fewer than two samples of them.
    pub cores: Vec<f64>,
}

/// Parses a `samples` file for the interfaces `ifaces`. Lines it does not know are skipped
/// (a sample cut short by the endpoint's exit is partial, not wrong).
pub fn parse(text: &str, ifaces: &[String]) -> HostSamples {
    let mut lines = text.lines();
    let ticks = lines.next().and_then(|l| l.trim().parse::<f64>().ok()).filter(|&t| t > 0.0).unwrap_or(100.0);
    let mut out = HostSamples::default();
    let mut first: Option<(f64, Vec<u64>)> = None;
    let mut last: Vec<u64> = vec![0; ifaces.len()];
    let mut table = String::new();
    let mut at: Option<f64> = None;
    let mut per_tid: BTreeMap<String, (String, f64)> = BTreeMap::new();
    // The first and the latest complete sample of /proc/stat's core lines.
    let (mut first_stat, mut last_stat, mut stat) = (None::<String>, None::<String>, String::new());
    let end_stat = |stat: &mut String, first: &mut Option<String>, last: &mut Option<String>| {
        // (A sample cut short by the endpoint's exit has fewer core lines than the first.)
        match first {
            None if !stat.is_empty() => *first = Some(stat.clone()),
            Some(f) if stat.lines().count() == f.lines().count() => *last = Some(stat.clone()),
            _ => {}
        }
        stat.clear();
    };
    let mut flush = |at: Option<f64>, table: &mut String, out: &mut HostSamples| {
        if let Some(t) = at {
            if !table.is_empty() {
                let each: Vec<u64> = ifaces.iter().map(|i| rx_bytes(table, std::slice::from_ref(i))).collect();
                let t0 = first.get_or_insert_with(|| (t, each.clone())).0;
                out.rx.push((t - t0, each.iter().sum()));
                last = each;
            }
        }
        table.clear();
    };
    for line in lines {
        if let Some(t) = line.strip_prefix("@ ") {
            flush(at, &mut table, &mut out);
            end_stat(&mut stat, &mut first_stat, &mut last_stat);
            at = t.trim().parse::<f64>().ok();
        } else if let Some(row) = line.strip_prefix("N ") {
            table.push_str(row);
            table.push('\n');
        } else if let Some(row) = line.strip_prefix("S ") {
            stat.push_str(row);
            stat.push('\n');
        } else if let Some(line) = line.strip_prefix("T ") {
            if let (Some(tid), Some((name, cpu))) = (line.split_whitespace().next(), thread_cpu(line, ticks)) {
                per_tid.insert(tid.to_owned(), (name, cpu));
            }
        }
    }
    flush(at, &mut table, &mut out);
    end_stat(&mut stat, &mut first_stat, &mut last_stat);
    if let (Some(a), Some(b)) = (&first_stat, &last_stat) {
        out.cores = core_busy(a, b);
    }
    if let Some((_, f)) = &first {
        out.per_interface = last.iter().zip(f).map(|(l, f)| l.saturating_sub(*f)).collect();
    }
    for (name, cpu) in per_tid.into_values() {
        *out.threads.entry(name).or_default() += cpu;
    }
    out
}

/// The CPU seconds (user + system) of the shell's children from its `times` output (two
/// lines, `XmY.Zs XmY.Zs` each: the shell's own, then its children's).
pub fn children_cpu(times: &str) -> Option<f64> {
    let line = times.lines().filter(|l| !l.trim().is_empty()).nth(1)?;
    line.split_whitespace().map(minutes_seconds).sum()
}

/// `1m2.5s` as 62.5.
fn minutes_seconds(s: &str) -> Option<f64> {
    let (m, rest) = s.split_once('m')?;
    let secs = rest.strip_suffix('s')?;
    Some(m.parse::<f64>().ok()? * 60.0 + secs.parse::<f64>().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(a: u64, b: u64) -> String {
        format!(
            "N Inter-|   Receive |  Transmit\nN  face |bytes    packets\nN     lo: 5 1 0 0 0 0 0 0 5 1 0 0 0 0 0 0\nN   eth1: {a} 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0\nN   eth2: {b} 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        )
    }

    #[test]
    fn samples_give_the_rate_per_interface_and_cpu_per_thread() {
        let text = format!(
            "100\n@ 1000.0\n{}S cpu0 10 0 0 90 0 0 0 0\nS cpu1 0 0 0 100 0 0 0 0\nT 11 (mpq) S 1 1 1 0 -1 0 0 0 0 0 10 5 0 0\n@ 1000.5\n{}S cpu0 20 0 0 130 0 0 0 0\nS cpu1 50 0 0 100 0 0 0 0\nT 11 (mpq) S 1 1 1 0 -1 0 0 0 0 0 20 5 0 0\nT 12 (mpq-path-1) S 1 1 1 0 -1 0 0 0 0 0 30 10 0 0\n@ 1001.0\n{}S cpu0 40 0 0 160 0 0 0 0\nS cpu1 100 0 0 100 0 0 0 0\n",
            table(100, 1000),
            table(600, 1500),
            table(1100, 9000)
        );
        let s = parse(&text, &["eth1".into(), "eth2".into()]);
        assert_eq!(s.rx, vec![(0.0, 1100), (0.5, 2100), (1.0, 10100)]);
        assert_eq!(s.per_interface, vec![1000, 8000]);
        assert_eq!(s.threads.get("mpq"), Some(&0.25));
        assert_eq!(s.threads.get("mpq-path-1"), Some(&0.4));
        // Cores from the first to the last sample: cpu0 30 of 100 ticks busy, cpu1 all 100.
        assert_eq!(s.cores, vec![0.3, 1.0]);
    }

    #[test]
    fn partial_and_empty_samples_are_not_errors() {
        assert_eq!(parse("", &["eth1".into()]), HostSamples::default());
        // A sample cut after its time stamp, and lines of nothing known.
        let text = format!("100\n@ 5.0\n{}@ 5.1\ngarbage\n", table(7, 0));
        let s = parse(&text, &["eth1".into()]);
        assert_eq!(s.rx, vec![(0.0, 7)]);
        assert_eq!(s.per_interface, vec![0]);
    }

    #[test]
    fn the_childrens_cpu_time_is_the_second_line_of_times() {
        assert_eq!(children_cpu("0m0.000000s 0m0.004000s\n1m2.500000s 0m0.250000s\n"), Some(62.75));
        assert_eq!(children_cpu("0m0.001s 0m0.002s\n0m1.5s 0m0.5s\n"), Some(2.0));
        assert_eq!(children_cpu("0m0.001s 0m0.002s\n"), None);
        assert_eq!(children_cpu("x\ny\n"), None);
    }
}
