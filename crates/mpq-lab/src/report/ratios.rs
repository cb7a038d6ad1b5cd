//! Completion-time ratios of the kernel's transports against mpq's, pair by pair (seed 002
//! figure 3: "the delay to receive this file over TCP divided by the time required with
//! QUIC", single path and multipath): above 1, mpq was faster.
//!
//! A single-path pair is a scenario's TCP+TLS baseline and its QUIC baseline on the same path
//! (and size); a multipath pair is a scenario's MPTCP+TLS run and an mpq run from the same
//! initial path (and size), once per mpq variant. Only pairs where both completed count; the
//! caption says how many were left out.

use std::collections::BTreeMap;

use crate::experiment::{MPTCP_TLS, QUIC, TCP_TLS};
use crate::metrics::Row;
use crate::plan::Role;

use super::figure::{Figure, Plot, Series};
use super::groups::{transport, Varying};
use super::model::slug;
use super::stats::{median, share_at_least};

/// The ratio axis ends here; larger ratios are drawn at it (the CDF still counts them).
pub const RATIO_AXIS_MAX: f64 = 4.0;

/// One series of ratios and what it left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Ratios {
    /// Legend label.
    pub label: String,
    /// Kernel transport's completion time over mpq's, per pair.
    pub ratios: Vec<f64>,
    /// Pairs where one side did not complete.
    pub incomplete: usize,
}

impl Ratios {
    /// `label: n pairs, mpq no slower in k (p %), median m` for the caption.
    pub fn describe(&self) -> String {
        let n = self.ratios.len();
        let no_slower = self.ratios.iter().filter(|&&r| r >= 1.0).count();
        let share = share_at_least(&self.ratios, 1.0).unwrap_or(0.0) * 100.0;
        let med = median(&self.ratios).map_or_else(|| "-".into(), |m| format!("{m:.2}"));
        let left = if self.incomplete > 0 {
            format!(", {} pair(s) with an incomplete run left out", self.incomplete)
        } else {
            String::new()
        };
        format!("{}: {n} pairs, mpq no slower in {no_slower} ({share:.0} %), median {med}{left}", self.label)
    }
}

/// Where a pair meets: scenario, path (initial path for multipath runs) and size.
type Key = (String, usize, u64);

fn key(r: &Row) -> Key {
    (r.scenario.clone(), r.initial_path, r.size)
}

fn completion(r: &Row) -> Option<f64> {
    r.completion_s.filter(|&c| r.completed && r.data_ok && c > 0.0)
}

/// Pairs `kernel` rows with `mpq` rows by key; the ratio of their completion times.
fn pair(label: String, kernel: &[&Row], mpq: &[&Row]) -> Option<Ratios> {
    let by: BTreeMap<Key, &Row> = kernel.iter().map(|r| (key(r), *r)).collect();
    let mut out = Ratios { label, ratios: Vec::new(), incomplete: 0 };
    for m in mpq {
        let Some(k) = by.get(&key(m)) else { continue };
        match (completion(k), completion(m)) {
            (Some(tk), Some(tm)) => out.ratios.push(tk / tm),
            _ => out.incomplete += 1,
        }
    }
    (!out.ratios.is_empty() || out.incomplete > 0).then_some(out)
}

/// The series of a class's rows: single path (TCP+TLS / QUIC baselines), then multipath
/// (MPTCP+TLS / mpq, one series per mpq variant). Empty when the rows have no such pairs.
pub fn of_class(rows: &[&Row]) -> Vec<Ratios> {
    let is = |r: &&&Row, role: Role, t: &str| r.role == role && r.workload != "reqresp" && transport(r) == t;
    let tcp: Vec<&Row> = rows.iter().filter(|r| is(r, Role::Baseline, TCP_TLS)).copied().collect();
    let quic: Vec<&Row> = rows.iter().filter(|r| is(r, Role::Baseline, QUIC)).copied().collect();
    let mptcp: Vec<&Row> = rows.iter().filter(|r| is(r, Role::Multipath, MPTCP_TLS)).copied().collect();
    let mpq: Vec<Row> = rows.iter().filter(|r| is(r, Role::Multipath, QUIC)).map(|r| (*r).clone()).collect();
    let mut out = Vec::new();
    out.extend(pair("single path, TCP+TLS / QUIC".into(), &tcp, &quic));
    if !mptcp.is_empty() {
        // mpq's variants among mpq's own runs (the transport is not what varies here).
        let v = Varying::of(&mpq);
        let mut variants: Vec<String> = Vec::new();
        for r in &mpq {
            let l = v.label(r);
            if !variants.contains(&l) {
                variants.push(l);
            }
        }
        for variant in variants {
            let of: Vec<&Row> = mpq.iter().filter(|r| v.label(r) == variant).collect();
            out.extend(pair(format!("multipath, MPTCP+TLS / mpq {variant}"), &mptcp, &of));
        }
    }
    out
}

/// The figure of a class: CDFs of the ratios, the counts in the caption.
pub fn figure(class: &str, rows: &[&Row]) -> Option<Figure> {
    let all = of_class(rows);
    if all.iter().all(|s| s.ratios.is_empty()) {
        return None;
    }
    let beyond = all.iter().flat_map(|s| &s.ratios).filter(|&&r| r > RATIO_AXIS_MAX).count();
    let note = if beyond > 0 {
        format!(" {beyond} ratio(s) above {RATIO_AXIS_MAX} are drawn at the right edge.")
    } else {
        String::new()
    };
    let counts: Vec<String> = all.iter().map(Ratios::describe).collect();
    Some(Figure {
        id: format!("time-ratio-cdf-{}", slug(class)),
        title: format!("Completion time, kernel transport / mpq, {class}"),
        caption: format!(
            "Class {class}: CDF of the kernel transport's completion time over mpq's, pair by pair (seed 002, \
             figure 3): single path, TCP+TLS over QUIC on the same path; multipath, MPTCP+TLS over mpq from the \
             same initial path. Above 1, mpq was faster. {}.{note}",
            counts.join("; ")
        ),
        x_label: "completion time ratio (kernel / mpq)".into(),
        y_label: "CDF".into(),
        plot: Plot::Cdf {
            series: all
                .into_iter()
                .filter(|s| !s.ratios.is_empty())
                .map(|s| Series { label: s.label, points: s.ratios.into_iter().map(|r| (r, 0.0)).collect() })
                .collect(),
            x_max: Some(RATIO_AXIS_MAX),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testrows::row;

    fn with(mut r: Row, transport: &str, cc: &str, completion: Option<f64>) -> Row {
        r.transport = transport.into();
        r.cc = cc.into();
        r.completion_s = completion;
        r.completed = completion.is_some();
        r
    }

    #[test]
    fn pairs_meet_by_scenario_and_path_and_each_mpq_variant_gets_a_series() {
        let s = "c/0000/r0";
        let rows = vec![
            with(row(&format!("{s}/sp0"), Role::Baseline, 0, 1e6, None), QUIC, "cubic", Some(2.0)),
            with(row(&format!("{s}/sp1"), Role::Baseline, 1, 1e6, None), QUIC, "cubic", Some(4.0)),
            with(row(&format!("{s}/sp0-tcp"), Role::Baseline, 0, 1e6, None), TCP_TLS, "kernel cubic", Some(3.0)),
            with(row(&format!("{s}/sp1-tcp"), Role::Baseline, 1, 1e6, None), TCP_TLS, "kernel cubic", Some(2.0)),
            with(row(&format!("{s}/mp-olia-i0"), Role::Multipath, 0, 1e6, None), QUIC, "olia", Some(2.0)),
            with(row(&format!("{s}/mp-cubic-i0"), Role::Multipath, 0, 1e6, None), QUIC, "cubic", Some(1.0)),
            with(row(&format!("{s}/mp-olia-i1"), Role::Multipath, 1, 1e6, None), QUIC, "olia", None),
            with(row(&format!("{s}/mptcp-i0"), Role::Multipath, 0, 1e6, None), MPTCP_TLS, "kernel cubic", Some(1.5)),
            with(row(&format!("{s}/mptcp-i1"), Role::Multipath, 1, 1e6, None), MPTCP_TLS, "kernel cubic", Some(1.5)),
            // Another scenario's MPTCP run pairs with nothing here.
            with(row("c/0001/r0/mptcp-i0", Role::Multipath, 0, 1e6, None), MPTCP_TLS, "kernel cubic", Some(9.0)),
        ];
        let refs: Vec<&Row> = rows.iter().collect();
        let series = of_class(&refs);
        let by: BTreeMap<&str, &Ratios> = series.iter().map(|s| (s.label.as_str(), s)).collect();
        assert_eq!(by["single path, TCP+TLS / QUIC"].ratios, vec![1.5, 0.5]);
        assert_eq!(by["multipath, MPTCP+TLS / mpq olia"].ratios, vec![0.75]);
        assert_eq!(by["multipath, MPTCP+TLS / mpq olia"].incomplete, 1);
        assert_eq!(by["multipath, MPTCP+TLS / mpq cubic"].ratios, vec![1.5]);
        assert_eq!(series.len(), 3);
        assert_eq!(
            by["single path, TCP+TLS / QUIC"].describe(),
            "single path, TCP+TLS / QUIC: 2 pairs, mpq no slower in 1 (50 %), median 1.00"
        );
        assert!(by["multipath, MPTCP+TLS / mpq olia"]
            .describe()
            .ends_with("1 pair(s) with an incomplete run left out"));
        let f = figure("c", &refs).unwrap();
        assert_eq!(f.id, "time-ratio-cdf-c");
        assert!(f.caption.contains("mpq no slower in 1 (100 %)"), "{}", f.caption);
    }

    #[test]
    fn rows_without_kernel_transports_have_no_figure() {
        let rows = crate::report::testrows::scenario("c", 0, [1e6, 2e6], [2.5e6, 2.5e6]);
        let refs: Vec<&Row> = rows.iter().collect();
        assert!(of_class(&refs).is_empty());
        assert!(figure("c", &refs).is_none());
    }
}
