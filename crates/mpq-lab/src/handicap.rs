//! The handshake's handicap: how much later a multipath download started on a path other
//! than the best one can first get data over the best path than the single-path baseline on
//! that path can, by the protocol's rules alone, and the EBen a multipath run would have with
//! that time credited.
//!
//! Why: seed 002's EBen compares a connection that must start on its initial path with the
//! best path alone. Started on the worse path, the server may use another path only once it
//! holds the client's Finished (RFC 9001 §5.7: no 1-RTT packet is processed before the
//! handshake completes), which took 1.5 round trips and three 1200-byte datagrams of the
//! initial path, and once it validated the client's address there (RFC 10069 §3.1, RFC 9000
//! §8.2: one round trip of that path); the baseline's server starts after 1.5 round trips and
//! three datagrams of the best path. The difference is paid by every implementation of the
//! RFCs, whatever its scheduler. Crediting it tells the runs the protocol's rules make lose
//! from the ones mpq could still win (`docs/lab-tuning.md`, "Tuning the defaults (2026-12-01)").

use std::time::Duration;

use mpq_sim::LinkConfig;

use crate::metrics::{eben, Row};

/// Size of each of the handshake's three datagrams (the client's two are padded to it, RFC
/// 9000 §14.1; the server's flight fills one in mpq).
const HANDSHAKE_DATAGRAM_BYTES: f64 = 1200.0;

/// Round-trip propagation time and one handshake datagram's serialization time on `link`.
fn rtt_and_datagram(link: &LinkConfig) -> (f64, f64) {
    let rtt = 2.0 * link.delay.as_secs_f64();
    let ser = if link.rate_bps == 0 { 0.0 } else { HANDSHAKE_DATAGRAM_BYTES * 8.0 / link.rate_bps as f64 };
    (rtt, ser)
}

/// How much later than the single-path baseline on path `best` a multipath connection started
/// on path `initial` can first send data on `best` (zero when it started there).
pub fn handshake_handicap(links: &[LinkConfig], initial: usize, best: usize) -> Duration {
    if initial == best {
        return Duration::ZERO;
    }
    let (Some(w), Some(b)) = (links.get(initial), links.get(best)) else { return Duration::ZERO };
    let ((rtt_w, ser_w), (rtt_b, ser_b)) = (rtt_and_datagram(w), rtt_and_datagram(b));
    // Multipath: the Finished reaches the server after 1.5 RTTs and three datagrams of the
    // initial path, then one round trip of `best` validates the client's address there.
    let multipath = 1.5 * rtt_w + 3.0 * ser_w + rtt_b;
    // The baseline: 1.5 RTTs and three datagrams of `best`.
    let single = 1.5 * rtt_b + 3.0 * ser_b;
    Duration::from_secs_f64((multipath - single).clamp(0.0, 3600.0))
}

/// The path a baseline run used, from its run ID (`…/sp{path}-…`, `plan.rs`).
fn baseline_path(run_id: &str) -> Option<usize> {
    let last = run_id.rsplit('/').next()?;
    let digits: String = last.strip_prefix("sp")?.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The EBen of multipath download `row` had it not paid the handshake's handicap against its
/// best baseline; `None` when the run has no EBen, did not complete, or its links or
/// baselines cannot be read.
pub fn credited_eben(row: &Row) -> Option<f64> {
    row.eben?;
    let completion = row.completion_s.filter(|_| row.completed)?;
    let gs = &row.baseline_goodput_bps;
    let (best_at, _) = gs.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1))?;
    let best = baseline_path(row.baseline_runs.get(best_at)?)?;
    let links: Vec<LinkConfig> = row.links.iter().map(|l| l.parse()).collect::<Result<_, _>>().ok()?;
    let handicap = handshake_handicap(&links, row.initial_path, best).as_secs_f64();
    let credited = (completion - handicap).max(1e-9);
    eben(row.bytes as f64 * 8.0 / credited, gs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links(specs: &[&str]) -> Vec<LinkConfig> {
        specs.iter().map(|s| s.parse().unwrap()).collect()
    }

    /// The worse-path start of `docs/lab-tuning.md`'s example: 1.5 × 318.4 ms + three datagrams at
    /// 2.56 Mbit/s (11.2 ms) + 5.2 ms, less 1.5 × 5.2 ms + three at 96 Mbit/s (0.3 ms).
    #[test]
    fn the_handicap_of_a_start_on_the_slow_path() {
        let l = links(&["96.124102mbit/5.175ms", "2.563496mbit/318.425ms"]);
        let h = handshake_handicap(&l, 1, 0).as_secs_f64();
        let want =
            1.5 * 0.318425 + 3.0 * 9600.0 / 2_563_496.0 + 0.005175 - 1.5 * 0.005175 - 3.0 * 9600.0 / 96_124_102.0;
        assert!((h - want).abs() < 1e-6, "{h} vs {want}");
        assert!((0.48..0.49).contains(&h), "{h}");
        assert_eq!(handshake_handicap(&l, 0, 0), Duration::ZERO, "started on the best path");
        // A start on a path no slower to handshake over than the best one costs nothing.
        let same = links(&["50mbit/20ms", "50mbit/20ms"]);
        assert!(handshake_handicap(&same, 1, 0) <= Duration::from_millis(20));
    }

    #[test]
    fn baseline_paths_come_from_run_ids() {
        assert_eq!(baseline_path("high-bdp-no-loss/0001/r0/sp1-cubic-s20000000"), Some(1));
        assert_eq!(baseline_path("c/0001/r0/sp12-olia-s1000"), Some(12));
        assert_eq!(baseline_path("c/0001/r0/mp-minrtt-cubic-same-path-n2-i0-s20000000"), None);
    }

    /// A run that lost to the best path by less than its handicap wins once credited; one
    /// that lost by more still loses.
    #[test]
    fn crediting_the_handicap_changes_only_what_it_explains() {
        let mut r = Row { completed: true, workload: "download".into(), ..Row::default() };
        r.links = vec!["96.124102mbit/5.175ms".into(), "2.563496mbit/318.425ms".into()];
        r.initial_path = 1;
        r.bytes = 20_000_000;
        r.baseline_runs = vec!["s/0/r0/sp0-cubic-s20000000".into(), "s/0/r0/sp1-cubic-s20000000".into()];
        r.baseline_goodput_bps = vec![160e6 / 1.75, 160e6 / 66.4];
        for (completion, wins) in [(2.218, true), (2.4, false)] {
            r.completion_s = Some(completion);
            r.goodput_bps = 160e6 / completion;
            r.eben = eben(r.goodput_bps, &r.baseline_goodput_bps);
            assert!(r.eben.unwrap() < 0.0);
            let credited = credited_eben(&r).unwrap();
            assert_eq!(credited >= 0.0, wins, "completion {completion}: credited EBen {credited}");
        }
        r.completed = false;
        assert_eq!(credited_eben(&r), None, "an incomplete run has no credited EBen");
    }
}
