//! What the report shows, computed from result rows: the figures (EBen CDFs per class and per
//! variant, box plots of completion time and goodput, request delay over time), a summary per
//! class and variant, and the per-scenario table.

use std::collections::{BTreeMap, BTreeSet};

use crate::metrics::Row;
use crate::plan::Role;

use super::figure::{BoxGroup, Figure, Plot, Series};
use super::groups::{group_label, Start, Varying};
use super::stats::{median, share_at_least};

/// EBen CDFs end at this value; larger ones (a multipath run far above the sum of the paths
/// alone, when a path alone did poorly) are drawn at it.
pub const EBEN_AXIS_MAX: f64 = 2.0;

/// The caption's note on EBen values beyond [`EBEN_AXIS_MAX`], if any.
fn beyond_axis(series: &[Series]) -> String {
    let n = series.iter().flat_map(|s| &s.points).filter(|p| p.0 > EBEN_AXIS_MAX).count();
    if n == 0 {
        String::new()
    } else {
        format!(" {n} value(s) above {EBEN_AXIS_MAX} are drawn at the right edge.")
    }
}

/// At most this many request-delay time series figures (one per scenario).
pub const MAX_TIME_SERIES: usize = 24;

/// One line of the summary table: a class and a multipath variant.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryLine {
    /// Class.
    pub class: String,
    /// Variant.
    pub variant: String,
    /// Multipath runs.
    pub runs: usize,
    /// Runs that did not complete, or delivered wrong data, or failed.
    pub failed: usize,
    /// Runs with an EBen.
    pub eben_n: usize,
    /// Share of those with EBen ≥ 0.
    pub eben_nonneg: Option<f64>,
    /// Share of those with EBen ≥ 0 once credited with the handshake's handicap against the
    /// best baseline ([`crate::handicap`]): the runs the protocol's rules alone do not explain.
    pub eben_nonneg_credited: Option<f64>,
    /// Median EBen.
    pub eben_median: Option<f64>,
    /// Lowest EBen and the run that had it.
    pub eben_worst: Option<(f64, String)>,
    /// Median completion time of the completed runs, s.
    pub completion_median_s: Option<f64>,
    /// Median goodput, bit/s.
    pub goodput_median_bps: Option<f64>,
}

/// One scenario's line of the per-scenario table.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioLine {
    /// Scenario ID.
    pub id: String,
    /// Its links (`mpq sim --link` form).
    pub links: Vec<String>,
    /// Per column of [`ScenarioTable::baseline_columns`]: goodput of that path alone, bit/s.
    pub baselines: Vec<Option<f64>>,
    /// Per column of [`ScenarioTable::columns`]: goodput (bit/s), EBen and whether it completed.
    pub cells: Vec<Option<(f64, Option<f64>, bool)>>,
}

/// The per-scenario table.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScenarioTable {
    /// Baseline columns: a path alone (with its size when sizes vary).
    pub baseline_columns: Vec<String>,
    /// Multipath columns: variant and initial path.
    pub columns: Vec<String>,
    /// Scenarios in ID order.
    pub lines: Vec<ScenarioLine>,
}

/// Everything the page shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportModel {
    /// Experiment name(s).
    pub title: String,
    /// Rows read.
    pub rows: usize,
    /// Repetitions of each scenario (the most of any run); above 1, figures and tables show
    /// per-scenario medians over them ([`super::repetitions`]).
    pub repetitions: usize,
    /// Runs that failed (ID and why).
    pub failures: Vec<(String, String)>,
    /// Figures in page order.
    pub figures: Vec<Figure>,
    /// Summary per class and variant.
    pub summary: Vec<SummaryLine>,
    /// Per-scenario table.
    pub scenarios: ScenarioTable,
    /// Notes on what was left out (e.g. time series beyond [`MAX_TIME_SERIES`]).
    pub notes: Vec<String>,
}

/// A figure ID from free text: lower-case letters and digits, other runs of characters as `-`.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_owned()
}

/// EBen, completion time and goodput mean something for downloads; request/response runs
/// are judged by their request delays.
fn is_download(r: &Row) -> bool {
    r.workload != "reqresp"
}

fn why_failed(r: &Row) -> Option<String> {
    if let Some(e) = &r.error {
        return Some(e.clone());
    }
    if !r.completed {
        return Some("did not complete before the run's time limit".into());
    }
    (!r.data_ok).then(|| "wrong data delivered".into())
}

/// Classes in order of first appearance in `rows`.
fn classes(rows: &[Row]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    rows.iter().filter(|r| seen.insert(r.class.clone())).map(|r| r.class.clone()).collect()
}

/// Builds the report's content from `rows`. Rows are taken in run-ID order (runs finish,
/// and are appended, in an order that differs between parallel runs), so the same results
/// always give the same page: classes and variants in the order of their first run ID.
pub fn build(rows: &[Row]) -> ReportModel {
    let rows_read = rows.len();
    let mut sorted = rows.to_vec();
    sorted.sort_by(|a, b| a.run_id.cmp(&b.run_id));
    let failures: Vec<(String, String)> =
        sorted.iter().filter_map(|r| why_failed(r).map(|w| (r.run_id.clone(), w))).collect();
    let repetitions = super::repetitions::count(&sorted);
    if repetitions > 1 {
        sorted = super::repetitions::medians(&sorted);
        sorted.sort_by(|a, b| a.run_id.cmp(&b.run_id));
    }
    let rows = sorted.as_slice();
    let v = Varying::of(rows);
    let classes = classes(rows);
    let mut variants: Vec<String> = Vec::new();
    for r in rows.iter().filter(|r| r.role == Role::Multipath) {
        let l = v.label(r);
        if !variants.contains(&l) {
            variants.push(l);
        }
    }
    let mut names: Vec<String> = rows.iter().map(|r| r.experiment.clone()).collect();
    names.dedup();
    let mut figures = Vec::new();
    let mut summary = Vec::new();
    for class in &classes {
        let in_class: Vec<&Row> = rows.iter().filter(|r| &r.class == class).collect();
        figures.extend(eben_cdf_of_class(class, &in_class, &v));
        for variant in &variants {
            let mp: Vec<&Row> =
                in_class.iter().copied().filter(|r| r.role == Role::Multipath && &v.label(r) == variant).collect();
            if !mp.is_empty() {
                summary.push(summary_line(class, variant, &mp));
            }
        }
        figures.extend(boxes_of_class(class, &in_class, &v));
        figures.extend(super::ratios::figure(class, &in_class));
        figures.extend(super::cores::figure(class, &in_class, &v));
    }
    if classes.len() > 1 {
        for variant in &variants {
            figures.extend(eben_cdf_of_variant(variant, rows, &classes, &v));
        }
    }
    let (series, notes) = time_series(rows, &v);
    figures.extend(series);
    ReportModel {
        title: names.join(", "),
        rows: rows_read,
        repetitions,
        failures,
        figures,
        summary,
        scenarios: scenario_table(rows, &v),
        notes,
    }
}

fn eben_cdf_of_class(class: &str, rows: &[&Row], v: &Varying) -> Option<Figure> {
    let mut by: BTreeMap<(String, Start), Vec<f64>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.role == Role::Multipath && is_download(r)) {
        if let Some(e) = r.eben {
            by.entry((v.label(r), Start::of(r))).or_default().push(e);
        }
    }
    if by.is_empty() {
        return None;
    }
    let series: Vec<Series> = by
        .into_iter()
        .map(|((variant, start), vals)| Series {
            label: if start == Start::Unknown { variant } else { format!("{variant}, {}", start.label()) },
            points: vals.into_iter().map(|e| (e, 0.0)).collect(),
        })
        .collect();
    let note = beyond_axis(&series);
    Some(Figure {
        id: format!("eben-cdf-{}", slug(class)),
        title: format!("EBen, {class}"),
        caption: format!(
            "Class {class}: CDF of the experimental aggregation benefit of each multipath run over the \
             single-path baselines of its scenario (seed 002, figures 4-8): 0 is as good as the best path \
             alone, 1 the sum of the paths, -1 nothing transferred; split by the path the connection started on.{note}"
        ),
        x_label: "EBen".into(),
        y_label: "CDF".into(),
        plot: Plot::Cdf { series, x_max: Some(EBEN_AXIS_MAX) },
    })
}

fn eben_cdf_of_variant(variant: &str, rows: &[Row], classes: &[String], v: &Varying) -> Option<Figure> {
    let series: Vec<Series> = classes
        .iter()
        .filter_map(|c| {
            let vals: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| &r.class == c && r.role == Role::Multipath && is_download(r) && v.label(r) == variant)
                .filter_map(|r| r.eben.map(|e| (e, 0.0)))
                .collect();
            (!vals.is_empty()).then(|| Series { label: c.clone(), points: vals })
        })
        .collect();
    let note = beyond_axis(&series);
    (!series.is_empty()).then(|| Figure {
        id: format!("eben-cdf-variant-{}", slug(variant)),
        title: format!("EBen per class, {variant}"),
        caption: format!("Variant {variant}: CDF of EBen in each class (both initial paths).{note}"),
        x_label: "EBen".into(),
        y_label: "CDF".into(),
        plot: Plot::Cdf { series, x_max: Some(EBEN_AXIS_MAX) },
    })
}

fn boxes_of_class(class: &str, rows: &[&Row], v: &Varying) -> Vec<Figure> {
    let mut order: Vec<String> = Vec::new();
    let mut completion: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut goodput: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    // Baselines first (path order), then the variants.
    let mut sorted: Vec<&&Row> = rows.iter().collect();
    sorted.sort_by_key(|r| (r.role == Role::Multipath, r.initial_path));
    for r in sorted {
        let g = group_label(v, r);
        if !order.contains(&g) {
            order.push(g.clone());
        }
        if !is_download(r) {
            if let Some(d) = r.delay_p50_ms {
                completion.entry(g.clone()).or_default().push(d);
            }
            if let Some(d) = r.delay_max_ms {
                goodput.entry(g).or_default().push(d);
            }
            continue;
        }
        if let (true, Some(c)) = (r.completed, r.completion_s) {
            completion.entry(g.clone()).or_default().push(c);
        }
        goodput.entry(g).or_default().push(r.goodput_bps / 1e6);
    }
    if rows.iter().all(|r| !is_download(r)) {
        return delay_boxes(class, &order, &completion, &goodput);
    }
    let groups = |m: &BTreeMap<String, Vec<f64>>| -> Vec<BoxGroup> {
        order.iter().map(|g| BoxGroup { label: g.clone(), values: m.get(g).cloned().unwrap_or_default() }).collect()
    };
    let spread = |m: &BTreeMap<String, Vec<f64>>| {
        let all = m.values().flatten().copied().filter(|&x| x > 0.0);
        let (lo, hi) = all.fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
        lo.is_finite() && hi / lo > 20.0
    };
    let mut out = Vec::new();
    if !completion.is_empty() {
        out.push(Figure {
            id: format!("completion-box-{}", slug(class)),
            title: format!("Completion time, {class}"),
            caption: format!(
                "Class {class}: completion time of the completed runs of each variant and of each path alone \
                 (box: quartiles and median; whiskers: the last values within 1.5 IQR; circles: the extremes \
                 beyond them)."
            ),
            x_label: String::new(),
            y_label: "completion time (s)".into(),
            plot: Plot::Boxes { log: spread(&completion), groups: groups(&completion) },
        });
    }
    out.push(Figure {
        id: format!("goodput-box-{}", slug(class)),
        title: format!("Goodput, {class}"),
        caption: format!(
            "Class {class}: goodput of every run (application bytes over the completion time, or over the time \
             the run stopped) per variant and per path alone."
        ),
        x_label: String::new(),
        y_label: "goodput (Mbit/s)".into(),
        plot: Plot::Boxes { log: spread(&goodput), groups: groups(&goodput) },
    });
    out
}

/// Box plots of a request/response class: median and largest request delay per run.
fn delay_boxes(
    class: &str,
    order: &[String],
    p50: &BTreeMap<String, Vec<f64>>,
    max: &BTreeMap<String, Vec<f64>>,
) -> Vec<Figure> {
    let groups = |m: &BTreeMap<String, Vec<f64>>| -> Vec<BoxGroup> {
        order.iter().map(|g| BoxGroup { label: g.clone(), values: m.get(g).cloned().unwrap_or_default() }).collect()
    };
    let fig = |id: &str, what: &str, m| Figure {
        id: format!("{id}-box-{}", slug(class)),
        title: format!("{what} request delay, {class}"),
        caption: format!(
            "Class {class}: the {} request delay of each run (answered requests), per variant and per path alone.",
            what.to_lowercase()
        ),
        x_label: String::new(),
        y_label: "delay (ms)".into(),
        plot: Plot::Boxes { groups: groups(m), log: false },
    };
    vec![fig("delay-p50", "Median", p50), fig("delay-max", "Largest", max)]
}

fn run_label(v: &Varying, r: &Row) -> String {
    match r.role {
        Role::Multipath => format!("{}, start on path {}", v.label(r), r.initial_path),
        Role::Baseline => group_label(v, r),
    }
}

fn time_series(rows: &[Row], v: &Varying) -> (Vec<Figure>, Vec<String>) {
    let mut by: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for r in rows.iter().filter(|r| !r.requests.is_empty()) {
        by.entry(r.scenario.as_str()).or_default().push(r);
    }
    let mut notes = Vec::new();
    if by.len() > MAX_TIME_SERIES {
        notes.push(format!(
            "Request delay over time is drawn for the first {MAX_TIME_SERIES} of {} scenarios with requests.",
            by.len()
        ));
    }
    let figs = by
        .into_iter()
        .take(MAX_TIME_SERIES)
        .map(|(scenario, runs)| {
            let series = runs
                .iter()
                .map(|r| Series {
                    label: run_label(v, r),
                    points: r.requests.iter().filter_map(|q| q.delay_ms.map(|d| (q.sent_s, d))).collect(),
                })
                .collect();
            let unanswered: usize =
                runs.iter().map(|r| r.requests.iter().filter(|q| q.delay_ms.is_none()).count()).sum();
            let links = runs[0].links.join(", ");
            Figure {
                id: format!("delay-{}", slug(scenario)),
                title: format!("Request delay, {scenario}"),
                caption: format!(
                    "Scenario {scenario} ({links}): delay from sending each request to receiving its whole response, \
                     by the time the request was sent (seed 002, figure 11); {unanswered} request(s) never answered \
                     are not drawn."
                ),
                x_label: "request sent at (s)".into(),
                y_label: "delay (ms)".into(),
                plot: Plot::Lines(series),
            }
        })
        .collect();
    (figs, notes)
}

fn summary_line(class: &str, variant: &str, mp: &[&Row]) -> SummaryLine {
    let ebens: Vec<(f64, &str)> =
        mp.iter().filter(|r| is_download(r)).filter_map(|r| r.eben.map(|e| (e, r.run_id.as_str()))).collect();
    let values: Vec<f64> = ebens.iter().map(|e| e.0).collect();
    let credited: Vec<f64> =
        mp.iter().filter(|r| is_download(r)).filter_map(|r| crate::handicap::credited_eben(r).or(r.eben)).collect();
    let worst = ebens.iter().min_by(|a, b| a.0.total_cmp(&b.0)).map(|&(e, id)| (e, id.to_owned()));
    let completions: Vec<f64> = mp.iter().filter(|r| r.completed).filter_map(|r| r.completion_s).collect();
    SummaryLine {
        class: class.to_owned(),
        variant: variant.to_owned(),
        runs: mp.len(),
        failed: mp.iter().filter(|r| why_failed(r).is_some()).count(),
        eben_n: values.len(),
        eben_nonneg: share_at_least(&values, 0.0),
        eben_nonneg_credited: share_at_least(&credited, 0.0),
        eben_median: median(&values),
        eben_worst: worst,
        completion_median_s: median(&completions),
        goodput_median_bps: median(&mp.iter().map(|r| r.goodput_bps).collect::<Vec<_>>()),
    }
}

fn scenario_table(rows: &[Row], v: &Varying) -> ScenarioTable {
    let mut columns: Vec<String> = Vec::new();
    let column = |r: &Row| format!("{}, start on path {}", v.label(r), r.initial_path);
    let mut mp: Vec<&Row> = rows.iter().filter(|r| r.role == Role::Multipath).collect();
    mp.sort_by_key(|r| r.initial_path);
    for r in &mp {
        let c = column(r);
        if !columns.contains(&c) {
            columns.push(c);
        }
    }
    let mut baseline_columns: Vec<String> = Vec::new();
    let mut base: Vec<&Row> = rows.iter().filter(|r| r.role == Role::Baseline).collect();
    base.sort_by_key(|r| r.initial_path);
    for r in &base {
        let c = group_label(v, r);
        if !baseline_columns.contains(&c) {
            baseline_columns.push(c);
        }
    }
    let mut by: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        by.entry(r.scenario.as_str()).or_default().push(r);
    }
    let lines = by
        .into_iter()
        .map(|(id, runs)| {
            let links = runs[0].links.clone();
            let mut baselines = vec![None; baseline_columns.len()];
            let mut cells = vec![None; columns.len()];
            for r in runs {
                match r.role {
                    Role::Baseline => {
                        if let Some(i) = baseline_columns.iter().position(|c| *c == group_label(v, r)) {
                            baselines[i] = Some(r.goodput_bps);
                        }
                    }
                    Role::Multipath => {
                        if let Some(i) = columns.iter().position(|c| *c == column(r)) {
                            cells[i] = Some((r.goodput_bps, r.eben, why_failed(r).is_none()));
                        }
                    }
                }
            }
            ScenarioLine { id: id.to_owned(), links, baselines, cells }
        })
        .collect();
    ScenarioTable { baseline_columns, columns, lines }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testrows::scenario;

    #[test]
    fn slugs() {
        assert_eq!(slug("low-bdp/0042/r0"), "low-bdp-0042-r0");
        assert_eq!(slug("minrtt / ack all-paths"), "minrtt-ack-all-paths");
    }

    #[test]
    fn model_of_two_classes() {
        let mut rows = scenario("a", 0, [8e6, 4e6], [10e6, 9e6]);
        rows.extend(scenario("a", 1, [8e6, 4e6], [7e6, 12e6]));
        rows.extend(scenario("b", 0, [8e6, 8e6], [16e6, 4e6]));
        let m = build(&rows);
        let ids: Vec<&str> = m.figures.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "eben-cdf-a",
                "completion-box-a",
                "goodput-box-a",
                "eben-cdf-b",
                "completion-box-b",
                "goodput-box-b",
                "eben-cdf-variant-minrtt-olia"
            ]
        );
        assert_eq!(m.summary.len(), 2);
        let a = &m.summary[0];
        // EBen in class a: 0.5, 0.25, -0.125, 1.0.
        assert_eq!((a.runs, a.eben_n), (4, 4));
        assert_eq!(a.eben_nonneg, Some(0.75));
        assert_eq!(a.eben_median, Some(0.375));
        assert_eq!(a.eben_worst.as_ref().map(|w| w.0), Some(-0.125));
        assert_eq!(m.scenarios.columns, ["minrtt olia, start on path 0", "minrtt olia, start on path 1"]);
        assert_eq!(m.scenarios.lines.len(), 3);
        assert_eq!(m.scenarios.baseline_columns, ["path 0 alone / cubic", "path 1 alone / cubic"]);
        assert_eq!(m.scenarios.lines[0].baselines, [Some(8e6), Some(4e6)]);
        assert!(m.failures.is_empty());
        // The order of the rows does not matter.
        let mut reversed = rows.clone();
        reversed.reverse();
        assert_eq!(build(&reversed), m);
    }
}
