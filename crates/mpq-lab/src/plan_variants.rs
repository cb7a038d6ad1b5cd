//! The run factors that repeat a scenario's runs as variants of each other (`factors.options`,
//! `runtime`, `steering`, `pn_space`, `hystart`): each takes the planned runs and returns
//! them once per setting, suffixing the IDs of runs and of their baselines when a factor has
//! several values, so that every run is compared with baselines of its own variant.

use crate::experiment::{Experiment, QUIC};
use crate::plan::Role;
use crate::plan::{RunSpec, PN_SPACES};

/// `runs` expanded by every variant factor of `exp`, in a fixed order (options, runtime,
/// steering, packet number space, HyStart++), so that IDs are stable.
pub(crate) fn every_variant(exp: &Experiment, runs: Vec<RunSpec>) -> Vec<RunSpec> {
    with_hystarts(exp, with_pn_spaces(exp, with_steerings(exp, with_runtimes(exp, with_options(exp, runs)))))
}

/// mpq's QUIC runs, multipath and single-path alike (slow start is every path's), once per
/// HyStart++ setting of `factors.hystart` (with several, run IDs and their baselines' IDs end
/// in `-hystart-on` / `-hystart-off`, so that a run is compared with baselines of its
/// setting); the other transports' runs once.
fn with_hystarts(exp: &Experiment, runs: Vec<RunSpec>) -> Vec<RunSpec> {
    let mut out = Vec::new();
    for r in runs {
        if r.transport != QUIC || exp.hystarts.is_empty() {
            out.push(r);
        } else if exp.hystarts.len() == 1 {
            out.push(RunSpec { hystart: exp.hystarts[0].clone(), ..r });
        } else {
            for h in &exp.hystarts {
                out.push(RunSpec { hystart: h.clone(), ..suffixed(&r, &format!("hystart-{h}")) });
            }
        }
    }
    out
}

/// mpq's multipath runs once per packet number space design of `factors.pn_space` (with
/// several, their IDs end in `-DESIGN`); the single-path baselines, where both designs are
/// one space, and the other transports' runs once.
fn with_pn_spaces(exp: &Experiment, runs: Vec<RunSpec>) -> Vec<RunSpec> {
    if exp.pn_spaces.iter().map(String::as_str).eq([PN_SPACES[0]]) {
        return runs;
    }
    let mut out = Vec::new();
    for r in runs {
        if r.transport != QUIC || r.role != Role::Multipath {
            out.push(r);
        } else if exp.pn_spaces.len() == 1 {
            out.push(RunSpec { pn_space: exp.pn_spaces[0].clone(), ..r });
        } else {
            for s in &exp.pn_spaces {
                out.push(RunSpec { id: format!("{}-{s}", r.id), pn_space: s.clone(), ..r.clone() });
            }
        }
    }
    out
}

/// Every run once per receive steering of `factors.steering` (with several, run IDs and
/// their baselines' IDs end in `-STEERING`, so that a run is compared with baselines under
/// the same steering).
fn with_steerings(exp: &Experiment, runs: Vec<RunSpec>) -> Vec<RunSpec> {
    if exp.steerings.len() <= 1 {
        let only = exp.steerings.first().cloned().unwrap_or_default();
        return runs.into_iter().map(|r| RunSpec { steering: only.clone(), ..r }).collect();
    }
    runs.iter()
        .flat_map(|r| exp.steerings.iter().map(move |s| RunSpec { steering: s.clone(), ..suffixed(r, s) }))
        .collect()
}

/// `r` as one variant of several: its ID and its baselines' IDs end in `-SUFFIX`, so that it
/// is compared with baselines of the same variant.
fn suffixed(r: &RunSpec, suffix: &str) -> RunSpec {
    RunSpec {
        id: format!("{}-{suffix}", r.id),
        baselines: r.baselines.iter().map(|b| format!("{b}-{suffix}")).collect(),
        ..r.clone()
    }
}

/// mpq's QUIC runs once per runtime of `factors.runtime` (with several, run IDs and their
/// baselines' IDs end in `-RUNTIME`, so that a run is compared with baselines of its
/// runtime); the other transports' runs once.
fn with_runtimes(exp: &Experiment, runs: Vec<RunSpec>) -> Vec<RunSpec> {
    let mut out = Vec::new();
    for r in runs {
        if r.transport != QUIC || exp.runtimes.len() <= 1 {
            out.push(r);
            continue;
        }
        for rt in &exp.runtimes {
            out.push(RunSpec { runtime: rt.clone(), ..suffixed(&r, rt) });
        }
    }
    out
}

/// The `mpq perf` options that apply to the kernel's transports too (TCP+TLS, MPTCP+TLS).
const KERNEL_TRANSPORT_OPTIONS: &[&str] =
    &["--cipher", "--rcvbuf", "--sndbuf", "--handshake-timeout", "--idle-timeout"];

/// Whether every option of `set` applies to the kernel's transports.
fn kernel_set(set: &str) -> bool {
    set.split_whitespace()
        .filter(|w| w.starts_with("--"))
        .all(|w| KERNEL_TRANSPORT_OPTIONS.contains(&w.split('=').next().unwrap_or(w)))
}

/// Every run of `runs` once per option set of `factors.options`: `mpq perf`'s QUIC runs with
/// every set, its TCP+TLS and MPTCP+TLS runs with the sets whose options all apply to them
/// (`--cipher`, `--rcvbuf`, `--sndbuf`, the timeouts), an implementation folder's runs once,
/// without options. With several sets, run IDs and their baselines' IDs end in `-oI` (the
/// set's index), so that a run is compared with baselines run with the same options.
fn with_options(exp: &Experiment, runs: Vec<RunSpec>) -> Vec<RunSpec> {
    let mut out = Vec::new();
    for r in runs {
        if crate::implementation::name_of(&r.transport).is_some() {
            out.push(r);
            continue;
        }
        for (i, set) in exp.options.iter().enumerate() {
            if r.transport != QUIC && !kernel_set(set) {
                continue;
            }
            if exp.options.len() == 1 {
                out.push(RunSpec { options: set.clone(), ..r.clone() });
                continue;
            }
            out.push(RunSpec { options: set.clone(), ..suffixed(&r, &format!("o{i}")) });
        }
    }
    out
}
