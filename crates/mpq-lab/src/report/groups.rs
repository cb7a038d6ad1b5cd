//! How the report groups rows: a multipath run's *variant* (the protocol settings that vary
//! in the results), whether it started on the better or the worse path (seed 002 split its
//! EBen CDFs that way), and the label of a baseline.

use std::collections::BTreeSet;

use crate::metrics::Row;
use crate::plan::Role;

/// Which settings of multipath rows vary across a set of rows; a variant label names only
/// those.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Varying {
    scheduler: bool,
    cc: bool,
    ack_policy: bool,
    ack_ranges: bool,
    pn_space: bool,
    hystart: bool,
    paths: bool,
    size: bool,
    transport: bool,
    options: bool,
    runtime: bool,
    steering: bool,
}

impl Varying {
    /// The settings that take more than one value among the multipath rows of `rows`.
    pub fn of(rows: &[Row]) -> Varying {
        fn many<T: Ord>(rows: &[&Row], f: impl Fn(&Row) -> T) -> bool {
            rows.iter().map(|r| f(r)).collect::<BTreeSet<T>>().len() > 1
        }
        let mp: Vec<&Row> = rows.iter().filter(|r| r.role == Role::Multipath).collect();
        Varying {
            scheduler: many(&mp, |r| r.scheduler.clone()),
            cc: many(&mp, |r| r.cc.clone()),
            ack_policy: many(&mp, |r| r.ack_policy.clone()),
            ack_ranges: many(&mp, |r| r.ack_ranges),
            pn_space: many(&mp, |r| r.pn_space.clone()),
            hystart: many(&mp, |r| r.hystart.clone()),
            paths: many(&mp, |r| r.paths),
            size: many(&mp, |r| r.size),
            transport: many(&mp, |r| transport(r).to_owned()),
            options: many(&mp, |r| r.options.clone()),
            runtime: many(&mp, |r| r.runtime.clone()),
            steering: many(&mp, |r| r.steering.clone()),
        }
    }

    /// The variant of a multipath row: the varying settings joined by `/`, or the scheduler
    /// and congestion controller when nothing varies.
    pub fn label(&self, r: &Row) -> String {
        let mut parts = Vec::new();
        if self.transport {
            parts.push(transport(r).to_owned());
        }
        if self.scheduler {
            parts.push(r.scheduler.clone());
        }
        if self.cc {
            parts.push(r.cc.clone());
        }
        if self.ack_policy {
            parts.push(format!("ack {}", r.ack_policy));
        }
        if self.ack_ranges {
            parts.push(r.ack_ranges.map_or_else(|| "all ACK ranges".into(), |n| format!("{n} ACK ranges")));
        }
        if self.pn_space {
            parts.push(if r.pn_space == "single" { "one PN space".into() } else { "PN space per path".into() });
        }
        if self.hystart {
            parts.push(format!("HyStart++ {}", if r.hystart == "off" { "off" } else { "on" }));
        }
        if self.paths {
            parts.push(format!("{} paths", r.paths));
        }
        if self.size {
            parts.push(size_label(r.size));
        }
        if self.runtime {
            parts.push(r.runtime.clone());
        }
        if self.steering {
            parts.push(format!("steering {}", r.steering));
        }
        if self.options {
            parts.push(if r.options.is_empty() { "defaults".to_owned() } else { r.options.clone() });
        }
        if parts.is_empty() {
            format!("{} {}", r.scheduler, r.cc)
        } else {
            parts.join(" / ")
        }
    }
}

/// A byte count as the experiment files write it (`20MB`, `256KB`, `750B`).
pub fn size_label(bytes: u64) -> String {
    match bytes {
        b if b >= 1_000_000 && b % 1_000_000 == 0 => format!("{}MB", b / 1_000_000),
        b if b >= 1_000 && b % 1_000 == 0 => format!("{}KB", b / 1_000),
        b => format!("{b}B"),
    }
}

/// Where a multipath run started, compared with its single-path baselines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Start {
    /// On the path whose baseline had the highest goodput.
    Best,
    /// On another path.
    Worse,
    /// Unknown: no baselines, or a single path.
    Unknown,
}

impl Start {
    /// Of a multipath row, from its baselines (topology order of its paths).
    pub fn of(r: &Row) -> Start {
        let mut paths = r.path_indices.clone();
        paths.sort_unstable();
        if paths.len() < 2 || r.baseline_goodput_bps.len() != paths.len() {
            return Start::Unknown;
        }
        let Some(i) = paths.iter().position(|&p| p == r.initial_path) else { return Start::Unknown };
        let best = r.baseline_goodput_bps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if r.baseline_goodput_bps[i] >= best {
            Start::Best
        } else {
            Start::Worse
        }
    }

    /// Legend text.
    pub fn label(self) -> &'static str {
        match self {
            Start::Best => "started on the best path",
            Start::Worse => "started on the worse path",
            Start::Unknown => "",
        }
    }
}

/// The box-plot group of any row: a multipath row's variant, or `path I alone / CC` for a
/// baseline (with the size when sizes vary, as baselines run once per size).
pub fn group_label(v: &Varying, r: &Row) -> String {
    match r.role {
        Role::Multipath => v.label(r),
        Role::Baseline if v.size => {
            format!("path {} alone / {}{} / {}", r.initial_path, baseline_kind(r), hystart_of(v, r), size_label(r.size))
        }
        Role::Baseline => format!("path {} alone / {}{}", r.initial_path, baseline_kind(r), hystart_of(v, r)),
    }
}

/// What ran a baseline: mpq's congestion controller, or the transport (`tcp-tls`,
/// `quic:quinn`) when it was not mpq's.
/// ` / HyStart++ on|off` when the setting varies and the row has one, else nothing.
fn hystart_of(v: &Varying, r: &Row) -> String {
    if v.hystart && !r.hystart.is_empty() {
        format!(" / HyStart++ {}", r.hystart)
    } else {
        String::new()
    }
}

fn baseline_kind(r: &Row) -> &str {
    if transport(r) == crate::experiment::QUIC {
        &r.cc
    } else {
        &r.transport
    }
}

/// A row's transport; rows made before the column existed ran mpq's QUIC.
pub(crate) fn transport(r: &Row) -> &str {
    if r.transport.is_empty() {
        crate::experiment::QUIC
    } else {
        &r.transport
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testrows::row;

    #[test]
    fn labels_name_only_what_varies() {
        let mut a = row("c/0000/r0/mp-a", Role::Multipath, 0, 10e6, Some(0.5));
        let mut b = a.clone();
        b.scheduler = "ecf".into();
        let v = Varying::of(&[a.clone(), b.clone()]);
        assert_eq!(v.label(&a), "minrtt");
        assert_eq!(v.label(&b), "ecf");
        a.size = 256_000;
        b.size = 20_000_000;
        let v = Varying::of(&[a.clone(), b.clone()]);
        assert_eq!(v.label(&a), "minrtt / 256KB");
        let v = Varying::of(std::slice::from_ref(&a));
        assert_eq!(v.label(&a), "minrtt olia");
        let base = row("c/0000/r0/sp1", Role::Baseline, 1, 5e6, None);
        assert_eq!(group_label(&v, &base), "path 1 alone / cubic");
        let v = Varying::of(&[a.clone(), b.clone()]);
        assert_eq!(group_label(&v, &base), "path 1 alone / cubic / 1MB", "baselines split by size");
        let mut c = a.clone();
        c.transport = "quic:noq".into();
        let v = Varying::of(&[a.clone(), c.clone()]);
        assert_eq!((v.label(&a), v.label(&c)), ("quic".into(), "quic:noq".into()));
        let mut quinn_base = base.clone();
        quinn_base.transport = "quic:quinn".into();
        assert_eq!(group_label(&v, &quinn_base), "path 1 alone / quic:quinn");
        // HyStart++ compared: variants and baselines say which.
        let (mut on, mut off) = (a.clone(), a.clone());
        (on.hystart, off.hystart) = ("on".into(), "off".into());
        let v = Varying::of(&[on.clone(), off.clone()]);
        assert_eq!((v.label(&on), v.label(&off)), ("HyStart++ on".into(), "HyStart++ off".into()));
        let mut base_off = base.clone();
        base_off.hystart = "off".into();
        assert_eq!(group_label(&v, &base_off), "path 1 alone / cubic / HyStart++ off");
    }

    #[test]
    fn start_compares_the_initial_paths_baseline() {
        let mut r = row("c/0000/r0/mp", Role::Multipath, 1, 10e6, Some(0.1));
        r.baseline_goodput_bps = vec![4e6, 8e6];
        assert_eq!(Start::of(&r), Start::Best);
        r.initial_path = 0;
        assert_eq!(Start::of(&r), Start::Worse);
        r.baseline_goodput_bps.clear();
        assert_eq!(Start::of(&r), Start::Unknown);
    }

    #[test]
    fn sizes() {
        assert_eq!(size_label(20_000_000), "20MB");
        assert_eq!(size_label(512_000), "512KB");
        assert_eq!(size_label(750), "750B");
        assert_eq!(size_label(1_500_000), "1500KB");
    }
}
