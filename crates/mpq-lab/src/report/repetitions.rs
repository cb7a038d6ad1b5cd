//! Repetitions in the report: when scenarios were repeated (`repetitions` > 1 in the
//! experiment file), the figures and tables show one value per scenario and run, the median
//! over its repetitions, rather than every repetition as if it were another scenario.
//!
//! [`medians`] turns the rows of `CLASS/POINT/rK/RUN` for every `K` into one row
//! `CLASS/POINT/RUN` whose numbers are the medians over the repetitions: goodput, completion
//! time (completed repetitions), baseline goodputs, path shares and request-delay
//! percentiles. Its EBen is that of the median runs, as seed 002 analysed its three
//! repetitions ("we analyze the median run"): the multipath run's median goodput against the
//! median goodput of each single-path baseline, not the median of the repetitions' own EBens.
//! The two differ where one run's luck decides (a loss early in slow start can make the same
//! 20 MB download over a lossy long path take 4 s or 40 s): each repetition's EBen pairs one
//! lucky or unlucky multipath run with one lucky or unlucky baseline. It completed only if
//! every repetition did; its request time series is the first repetition's.

use std::collections::BTreeMap;

use crate::metrics::Row;

use super::stats::median;

/// The greatest number of repetitions of any run in `rows` (1 for none).
pub fn count(rows: &[Row]) -> usize {
    let mut n: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for r in rows {
        *n.entry(key(r)).or_default() += 1;
    }
    n.into_values().max().unwrap_or(1)
}

/// A run's identity across repetitions: its scenario without the repetition
/// (`CLASS/POINT`), and the run's name.
fn key(r: &Row) -> (&str, &str) {
    let name = r.run_id.strip_prefix(r.scenario.as_str()).map_or(r.run_id.as_str(), |n| n.trim_start_matches('/'));
    let is_rep = |s: &str| s.strip_prefix('r').is_some_and(|n| n.parse::<u32>().is_ok());
    let base = r.scenario.rsplit_once('/').filter(|(_, rep)| is_rep(rep)).map_or(r.scenario.as_str(), |(b, _)| b);
    (base, name)
}

/// The median of `f` over `rows` where it is defined.
fn med(rows: &[&Row], f: impl Fn(&Row) -> Option<f64>) -> Option<f64> {
    median(&rows.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
}

/// Element-wise medians of equally long vectors (the first row's length).
fn med_vec(rows: &[&Row], f: impl Fn(&Row) -> &Vec<f64>) -> Vec<f64> {
    let n = f(rows[0]).len();
    if rows.iter().any(|r| f(r).len() != n) {
        return Vec::new();
    }
    (0..n).map(|i| med(rows, |r| Some(f(r)[i])).unwrap_or(0.0)).collect()
}

/// Element-wise medians of the repetitions that have the vector (all equally long), if any.
fn med_opt_vec(rows: &[&Row], f: impl Fn(&Row) -> Option<&Vec<f64>>) -> Option<Vec<f64>> {
    let have: Vec<&Vec<f64>> = rows.iter().filter_map(|r| f(r)).collect();
    let n = have.first()?.len();
    if n == 0 || have.iter().any(|v| v.len() != n) {
        return None;
    }
    (0..n).map(|i| median(&have.iter().map(|v| v[i]).collect::<Vec<_>>())).collect()
}

/// One row per run (class, point, run name) with the medians over its repetitions (see the
/// [module docs](self)); rows of unrepeated runs come back unchanged.
pub fn medians(rows: &[Row]) -> Vec<Row> {
    let mut groups: BTreeMap<(&str, &str), Vec<&Row>> = BTreeMap::new();
    for r in rows {
        groups.entry(key(r)).or_default().push(r);
    }
    groups
        .into_values()
        .map(|mut reps| {
            if reps.len() == 1 {
                return reps[0].clone();
            }
            reps.sort_by_key(|r| r.repetition);
            let first = reps[0];
            let (scenario, name) = key(first);
            let scenario = scenario.to_owned();
            let completed: Vec<&Row> = reps.iter().copied().filter(|r| r.completed).collect();
            let goodput_bps = med(&reps, |r| Some(r.goodput_bps)).unwrap_or(0.0);
            let baseline_goodput_bps = med_vec(&reps, |r| &r.baseline_goodput_bps);
            // The median runs' EBen (module docs), for the runs that have one.
            let eben = if reps.iter().any(|r| r.eben.is_some()) {
                crate::metrics::eben(goodput_bps, &baseline_goodput_bps)
            } else {
                None
            };
            Row {
                run_id: format!("{scenario}/{name}"),
                scenario,
                completed: reps.iter().all(|r| r.completed),
                data_ok: reps.iter().all(|r| r.data_ok),
                multipath: reps.iter().all(|r| r.multipath),
                error: reps.iter().find_map(|r| r.error.clone()),
                goodput_bps,
                completion_s: med(&completed, |r| r.completion_s),
                eben,
                baseline_goodput_bps,
                path_share: med_vec(&reps, |r| &r.path_share),
                cpu_cores: med_opt_vec(&reps, |r| r.cpu_cores.as_ref()),
                competitor_goodput_bps: med(&reps, |r| r.competitor_goodput_bps),
                delay_p50_ms: med(&reps, |r| r.delay_p50_ms),
                delay_p90_ms: med(&reps, |r| r.delay_p90_ms),
                delay_p99_ms: med(&reps, |r| r.delay_p99_ms),
                delay_max_ms: med(&reps, |r| r.delay_max_ms),
                ..first.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Role;
    use crate::report::testrows::scenario;

    /// Scenario `a/0000` in repetition `rep`.
    fn rep(rep: u32, single: [f64; 2], multi: [f64; 2]) -> Vec<Row> {
        scenario("a", 0, single, multi)
            .into_iter()
            .map(|mut r| {
                r.repetition = rep;
                r.scenario = format!("a/0000/r{rep}");
                r.run_id = r.run_id.replace("/r0/", &format!("/r{rep}/"));
                r
            })
            .collect()
    }

    #[test]
    fn repetitions_collapse_into_medians() {
        let mut rows = rep(0, [8e6, 4e6], [10e6, 9e6]);
        rows.extend(rep(1, [8e6, 4e6], [12e6, 4e6]));
        rows.extend(rep(2, [10e6, 4e6], [14e6, 8e6]));
        rows[11].completed = false;
        // Per-core use of multipath run i0 in two of its repetitions only.
        rows[2].cpu_cores = Some(vec![0.2, 0.9]);
        rows[6].cpu_cores = Some(vec![0.4, 0.5]);
        assert_eq!(count(&rows), 3);
        let m = medians(&rows);
        assert_eq!(m.len(), 4, "two baselines and two multipath runs");
        let ids: Vec<&str> = m.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(ids, ["a/0000/mp-i0", "a/0000/mp-i1", "a/0000/sp0", "a/0000/sp1"]);
        assert!(m.iter().all(|r| r.scenario == "a/0000"));
        let i0 = &m[0];
        assert_eq!(i0.role, Role::Multipath);
        assert_eq!(i0.goodput_bps, 12e6);
        // The median runs: 12 Mbit/s against 8 and 4.
        assert_eq!(i0.eben, Some(1.0));
        assert_eq!(i0.baseline_goodput_bps, [8e6, 4e6]);
        assert!(i0.completed);
        assert_eq!(
            i0.cpu_cores.as_ref().map(|c| c.iter().map(|x| (x * 100.0).round()).collect::<Vec<_>>()),
            Some(vec![30.0, 70.0])
        );
        assert_eq!(m[1].cpu_cores, None, "no repetition measured it");
        let i1 = &m[1];
        // The median runs: 8 Mbit/s against 8 (of 8, 8, 10) and 4, EBen 0, where the
        // repetitions' own EBens (0.25, -0.5, -0.2) have the median -0.2; one repetition did
        // not complete.
        assert_eq!(i1.goodput_bps, 8e6);
        assert_eq!(i1.eben, Some(0.0));
        assert!(!i1.completed);
        assert_eq!(m[2].goodput_bps, 8e6);
    }

    #[test]
    fn unrepeated_rows_are_unchanged() {
        let rows = rep(0, [8e6, 4e6], [10e6, 9e6]);
        assert_eq!(count(&rows), 1);
        let mut m = medians(&rows);
        m.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        let mut sorted = rows.clone();
        sorted.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        assert_eq!(m, sorted);
        assert_eq!(count(&[]), 1);
    }
}

#[cfg(test)]
mod report_tests {
    use crate::metrics::Row;
    use crate::report::figure::Plot;
    use crate::report::model::build;
    use crate::report::render;
    use crate::report::testrows::scenario;

    /// Points `0..n` of class `a`, each repeated `reps` times; repetition `k` of a point has
    /// multipath goodputs scaled by `1 + k / 10`.
    fn repeated(points: usize, reps: u32) -> Vec<Row> {
        let mut rows = Vec::new();
        for p in 0..points {
            for k in 0..reps {
                let f = 1.0 + f64::from(k) / 10.0;
                for mut r in scenario("a", p, [8e6, 4e6], [9e6 * f, 7e6 * f]) {
                    r.repetition = k;
                    r.scenario = format!("a/{p:04}/r{k}");
                    r.run_id = r.run_id.replace("/r0/", &format!("/r{k}/"));
                    r.baseline_runs = r.baseline_runs.iter().map(|b| b.replace("/r0/", &format!("/r{k}/"))).collect();
                    rows.push(r);
                }
            }
        }
        rows
    }

    #[test]
    fn the_report_shows_medians_and_says_how_many_repetitions() {
        let rows = repeated(4, 3);
        let m = build(&rows);
        assert_eq!((m.rows, m.repetitions), (48, 3));
        let cdf = m.figures.iter().find(|f| f.id == "eben-cdf-a").unwrap();
        let Plot::Cdf { series, .. } = &cdf.plot else { panic!() };
        // One value per scenario and initial path, not one per repetition.
        assert_eq!(series.iter().map(|s| s.points.len()).sum::<usize>(), 8);
        // Path 0 start: goodputs 9, 9.9, 10.8 Mbit/s; the median 9.9 gives EBen 0.475.
        let s = &m.summary[0];
        assert_eq!((s.runs, s.eben_n), (8, 8));
        assert!((s.goodput_median_bps.unwrap() - (9.9e6 + 7.7e6) / 2.0).abs() < 1.0);
        assert_eq!(m.scenarios.lines.len(), 4, "one table line per scenario");
        assert_eq!(m.scenarios.lines[0].id, "a/0000");
        let (g, e, _) = m.scenarios.lines[0].cells[0].unwrap();
        assert!((g - 9.9e6).abs() < 1.0 && (e.unwrap() - 0.475).abs() < 1e-9, "{g} {e:?}");
        let page = render(&rows, "r").unwrap();
        assert!(page.contains("Each scenario ran 3 times"), "the page says how many repetitions");
        // Without repetitions, no such note and every run counts.
        let once = build(&repeated(4, 1));
        assert_eq!(once.repetitions, 1);
        assert_eq!(once.scenarios.lines[0].id, "a/0000/r0");
        assert!(!render(&repeated(4, 1), "r").unwrap().contains("Each scenario ran"));
    }
}
