//! What a run measured, as one row of results: completion time, goodput, per-path bytes and
//! shares, retransmissions, request delays, simulator cost, and the experimental aggregation
//! benefit (EBen) of "Multipath QUIC: Design and Evaluation" (CoNEXT 2017, §4.1) against the
//! scenario's single-path baselines.

use mpq_sim::scenario::ScenarioResult;
use serde::{Deserialize, Serialize};

use crate::plan::{PlannedScenario, Role, RunSpec};

/// Metric names an experiment file may list under `metrics`.
pub const METRICS: &[&str] = &[
    "completion_s",
    "cpu_client_s",
    "cpu_server_s",
    "cpu_cores",
    "cpu_cores_server",
    "throughput_bps",
    "goodput_bps",
    "path_bytes",
    "path_share",
    "retransmitted_bytes",
    "lost_packets",
    "spurious_loss_est",
    "ack_frames",
    "ranges_per_ack",
    "competitor_goodput_bps",
    "delay_p50_ms",
    "delay_p90_ms",
    "delay_p99_ms",
    "delay_max_ms",
    "delay_after_failure_max_ms",
    "requests_answered",
    "requests",
    "eben",
    "sim_wall_s",
];

/// One run's results (one line of `results.jsonl`, one row of `results.csv`). `Default` is
/// a row with nothing measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Run ID (unique in the experiment).
    pub run_id: String,
    /// Experiment name.
    pub experiment: String,
    /// Scenario ID (`CLASS/POINT/rREP`).
    pub scenario: String,
    /// Class name.
    pub class: String,
    /// Design point within the class.
    pub point: usize,
    /// Repetition.
    pub repetition: u32,
    /// Seed of the run.
    pub seed: u64,
    /// `multipath` or `baseline`.
    pub role: Role,
    /// Paths used (topology indices, initial first).
    pub path_indices: Vec<usize>,
    /// Number of paths used.
    pub paths: usize,
    /// Initial path (topology index).
    pub initial_path: usize,
    /// Scheduler.
    pub scheduler: String,
    /// Congestion controller.
    pub cc: String,
    /// ACK policy.
    pub ack_policy: String,
    /// Most ranges per ACK frame, when the run limited them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_ranges: Option<usize>,
    /// mpq's packet number spaces (`per-path` or `single`), when the experiment compares
    /// them (`factors.pn_space`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pn_space: String,
    /// HyStart++ in mpq's slow start (`on` or `off`), when the experiment sets it
    /// (`factors.hystart`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hystart: String,
    /// `download` or `reqresp`.
    pub workload: String,
    /// Transport: `quic` (mpq), or on the kernel testbed `mptcp-tls` and `tcp-tls`.
    #[serde(default = "quic")]
    pub transport: String,
    /// Extra `mpq perf` options of the run (`factors.options`), if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub options: String,
    /// mpq's runtime, when the experiment compares them (`factors.runtime`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub runtime: String,
    /// Receive steering on the namespace testbed, when the experiment sets one
    /// (`factors.steering`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub steering: String,
    /// Download size (or request size), bytes.
    pub size: u64,
    /// Every path's link (`mpq sim --link` form), topology order.
    pub links: Vec<String>,
    /// The bottleneck all paths share (`mpq sim --bottleneck` form), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<String>,
    /// The workload completed.
    pub completed: bool,
    /// Every byte matched what the server sent.
    pub data_ok: bool,
    /// The connection negotiated multipath.
    pub multipath: bool,
    /// Why the run or the connection failed, if it did.
    pub error: Option<String>,
    /// Completion time in seconds (from the client's first packet).
    pub completion_s: Option<f64>,
    /// Application bytes received.
    pub bytes: u64,
    /// Goodput in bit/s: bytes over the completion time (or the time the run stopped).
    pub goodput_bps: f64,
    /// Bytes the network delivered server → client on each path (topology order; 0 for
    /// paths not used).
    pub path_bytes: Vec<u64>,
    /// Each path's share of `path_bytes`.
    pub path_share: Vec<f64>,
    /// Bytes in packets the data sender (the server) declared lost: what it retransmitted
    /// (headers included).
    pub retransmitted_bytes: u64,
    /// Packets the server declared lost.
    pub lost_packets: u64,
    /// Packets the network dropped server → client.
    pub dropped_packets: u64,
    /// Estimate of spurious loss declarations: packets declared lost beyond those the
    /// network dropped (0 if fewer). Drops not yet declared at the end offset it.
    pub spurious_loss_est: u64,
    /// ACK and PATH_ACK frames the data receiver (the client) sent, on all paths.
    #[serde(default)]
    pub ack_frames: u64,
    /// ACK ranges per ACK frame of the client ("The Packet Number Space Debate in Multipath
    /// QUIC" compares them); empty without ACK frames.
    #[serde(default)]
    pub ranges_per_ack: Option<f64>,
    /// Goodput of the competing single-path flow at the shared bottleneck over this run's
    /// duration, bit/s; empty without a competitor.
    #[serde(default)]
    pub competitor_goodput_bps: Option<f64>,
    /// Requests issued (request/response).
    pub requests_sent: u64,
    /// Requests answered.
    pub requests_answered: u64,
    /// Median request delay in ms (answered requests).
    pub delay_p50_ms: Option<f64>,
    /// 90th percentile request delay in ms.
    pub delay_p90_ms: Option<f64>,
    /// 99th percentile request delay in ms.
    pub delay_p99_ms: Option<f64>,
    /// Largest request delay in ms.
    pub delay_max_ms: Option<f64>,
    /// Largest delay of the requests answered after the first path failure, in ms.
    pub delay_after_failure_max_ms: Option<f64>,
    /// Every request of a request/response run, in the order sent: when it was sent and its
    /// delay (the time series of seed 002's figure 11). Empty for downloads; rows written
    /// before this field existed read as empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<RequestPoint>,
    /// Run IDs of the baselines of this run's paths (topology order).
    pub baseline_runs: Vec<String>,
    /// Goodputs of those baselines, bit/s (empty until all of them ran).
    pub baseline_goodput_bps: Vec<f64>,
    /// Experimental aggregation benefit; empty when undefined (no baselines, or the best
    /// baseline moved nothing).
    pub eben: Option<f64>,
    /// Kernel testbed only: IP bit/s the client's path interfaces received, from their
    /// counters, the run's first and last second left out (seed 000 §5.1); empty for runs
    /// too short to trim ([`crate::ifstats`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_bps: Option<f64>,
    /// CPU seconds (user + system) of the client process, with what it started and waited
    /// for (kernel testbed only: wait4's resource usage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_client_s: Option<f64>,
    /// Kernel testbed only: CPU seconds of each of the client's threads by thread name
    /// (`mpq`, `mpq-path-N`, `mpq-shard-K`...; same-named threads summed), sampled from
    /// `/proc` every 100 ms while it ran ([`crate::ifstats`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_client: Option<std::collections::BTreeMap<String, f64>>,
    /// Kernel testbed only (`mpq perf` runs): the same for the server's threads, until it
    /// was stopped after the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_server: Option<std::collections::BTreeMap<String, f64>>,
    /// CPU seconds of the server process until it was stopped after the run (kernel testbed
    /// only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_server_s: Option<f64>,
    /// Kernel testbed only: each core's busy share (0-1) over the client's run on the machine
    /// that ran the client, in core order (`/proc/stat`, [`crate::ifstats::core_busy`]). On
    /// the namespace testbed that machine runs the server and the link emulator too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cores: Option<Vec<f64>>,
    /// SSH testbed only: the same for the server's host, over the server's run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cores_server: Option<Vec<f64>>,
    /// Kernel testbed with `--profile` only: the client's CPU profile, % of its samples per
    /// category (packet I/O, crypto, connection management, locking, application, ACK
    /// handling, other; [`crate::profile`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_client: Option<std::collections::BTreeMap<String, f64>>,
    /// The server's CPU profile, as `profile_client`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_server: Option<std::collections::BTreeMap<String, f64>>,
    /// Simulator events.
    pub events: u64,
    /// Hash of every link delivery and drop (equal for identical runs).
    pub trace_hash: u64,
    /// Wall-clock time of the simulation, seconds.
    pub sim_wall_s: f64,
}

/// One request of a request/response run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RequestPoint {
    /// When the client sent it, seconds from the start of the run.
    pub sent_s: f64,
    /// From sending the request to receiving the whole response, ms; empty if never answered.
    pub delay_ms: Option<f64>,
}

/// Percentile `p` (0-100) of sorted `v`, nearest rank.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Experimental aggregation benefit of a multipath goodput `gm` over single-path goodputs
/// `gs` (one per path): `(gm - max) / (sum - max)` when `gm >= max`, else
/// `(gm - max) / max`. 0: as good as the best path alone; 1: the sum of the paths; -1:
/// nothing transferred. `None` when undefined: no baselines, a best baseline of 0, or
/// `gm > max` while the other paths alone moved nothing.
pub fn eben(gm: f64, gs: &[f64]) -> Option<f64> {
    let max = gs.iter().copied().fold(None, |m: Option<f64>, g| Some(m.map_or(g, |m| m.max(g))))?;
    if max <= 0.0 {
        return None;
    }
    if gm >= max {
        let rest = gs.iter().sum::<f64>() - max;
        if rest <= 0.0 {
            return (gm == max).then_some(0.0);
        }
        Some((gm - max) / rest)
    } else {
        Some((gm - max) / max)
    }
}

/// The row of `run` in `scenario`, from the simulator's result (`Err`: the run could not be
/// made or panicked). EBen is left empty; [`fill_eben`] sets it.
pub fn row(
    experiment: &str,
    scenario: &PlannedScenario,
    run: &RunSpec,
    workload: &str,
    result: Result<&ScenarioResult, &str>,
    wall_s: f64,
) -> Row {
    let n = scenario.links.len();
    let mut r = Row {
        run_id: run.id.clone(),
        experiment: experiment.to_owned(),
        scenario: scenario.id.clone(),
        class: scenario.class.clone(),
        point: scenario.point,
        repetition: scenario.repetition,
        seed: scenario.seed,
        role: run.role,
        path_indices: run.path_indices.clone(),
        paths: run.path_indices.len(),
        initial_path: run.initial_path,
        scheduler: run.scheduler.clone(),
        cc: run.cc.clone(),
        ack_policy: run.ack_policy.clone(),
        ack_ranges: run.ack_ranges,
        pn_space: run.pn_space.clone(),
        hystart: run.hystart.clone(),
        workload: workload.to_owned(),
        transport: run.transport.clone(),
        options: run.options.clone(),
        runtime: run.runtime.clone(),
        steering: run.steering.clone(),
        size: run.size,
        links: scenario.links.clone(),
        bottleneck: scenario.bottleneck.clone(),
        path_bytes: vec![0; n],
        path_share: vec![0.0; n],
        baseline_runs: run.baselines.clone(),
        sim_wall_s: wall_s,
        ..Row::default()
    };
    let res = match result {
        Ok(res) => res,
        Err(e) => {
            r.error = Some(e.to_owned());
            return r;
        }
    };
    r.completed = res.completed;
    r.data_ok = res.data_ok;
    r.multipath = res.multipath;
    r.error = res.error.clone();
    r.completion_s = res.completion_s;
    r.bytes = res.bytes;
    r.goodput_bps = res.goodput_bps;
    // The simulator numbers paths in the run's order; map them back to the topology.
    for l in &res.links {
        if let Some(&topo) = run.path_indices.get(l.path) {
            r.path_bytes[topo] = l.down_bytes;
        }
        r.dropped_packets += l.down_dropped;
    }
    let total: u64 = r.path_bytes.iter().sum();
    if total > 0 {
        r.path_share = r.path_bytes.iter().map(|&b| b as f64 / total as f64).collect();
    }
    r.retransmitted_bytes = res.server_paths.iter().map(|p| p.lost_bytes).sum();
    r.lost_packets = res.server_paths.iter().map(|p| p.lost_packets).sum();
    r.spurious_loss_est = r.lost_packets.saturating_sub(r.dropped_packets);
    r.ack_frames = res.paths.iter().map(|p| p.acks_sent).sum();
    let ranges: u64 = res.paths.iter().map(|p| p.ack_ranges_sent).sum();
    r.ranges_per_ack = (r.ack_frames > 0).then(|| ranges as f64 / r.ack_frames as f64);
    r.competitor_goodput_bps = res.competitor.as_ref().map(|c| c.goodput_bps);
    r.requests_sent = res.requests_sent;
    r.requests_answered = res.requests_answered;
    let mut delays: Vec<f64> = res.requests.iter().filter_map(|q| q.delay_ms).collect();
    delays.sort_by(f64::total_cmp);
    r.delay_p50_ms = percentile(&delays, 50.0);
    r.delay_p90_ms = percentile(&delays, 90.0);
    r.delay_p99_ms = percentile(&delays, 99.0);
    r.delay_max_ms = delays.last().copied();
    r.delay_after_failure_max_ms = res.max_delay_after_failure_ms;
    r.requests = res.requests.iter().map(|q| RequestPoint { sent_s: q.sent_s, delay_ms: q.delay_ms }).collect();
    r.events = res.events;
    r.trace_hash = res.trace_hash;
    r
}

fn quic() -> String {
    crate::experiment::QUIC.into()
}

/// Sets `row`'s baseline goodputs and EBen from the rows of its baselines
/// ([`Row::baseline_runs`]; `find` looks a run ID up); leaves EBen empty if a baseline is
/// missing.
pub fn fill_eben<'a>(row: &mut Row, find: impl Fn(&str) -> Option<&'a Row>) {
    let gs: Option<Vec<f64>> = row.baseline_runs.iter().map(|id| find(id).map(|b| b.goodput_bps)).collect();
    match gs {
        Some(gs) if !gs.is_empty() => {
            row.eben = eben(row.goodput_bps, &gs);
            row.baseline_goodput_bps = gs;
        }
        _ => {
            row.eben = None;
            row.baseline_goodput_bps = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    #[test]
    fn eben_on_known_numbers() {
        // Paths alone: 10 and 4 Mbit/s.
        let gs = [10e6, 4e6];
        assert!(close(eben(10e6, &gs), 0.0), "as good as the best path");
        assert!(close(eben(14e6, &gs), 1.0), "the sum of the paths");
        assert!(close(eben(12e6, &gs), 0.5), "half the second path's goodput added");
        assert!(close(eben(16e6, &gs), 1.5), "better than the sum");
        assert!(close(eben(5e6, &gs), -0.5), "half the best path");
        assert!(close(eben(0.0, &gs), -1.0), "nothing transferred");
        // Order does not matter.
        assert!(close(eben(12e6, &[4e6, 10e6]), 0.5));
        // Three paths: max 10, rest 6.
        assert!(close(eben(13e6, &[10e6, 4e6, 2e6]), 0.5));
    }

    #[test]
    fn eben_undefined_cases() {
        assert_eq!(eben(1e6, &[]), None);
        assert_eq!(eben(1e6, &[0.0, 0.0]), None);
        assert!(close(eben(10e6, &[10e6, 0.0]), 0.0));
        assert_eq!(eben(12e6, &[10e6, 0.0]), None);
        assert!(close(eben(5e6, &[10e6, 0.0]), -0.5));
    }

    #[test]
    fn percentiles_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 90.0), Some(90.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&[7.0], 50.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 0.0), Some(1.0));
    }
}
