//! ECF, Earliest Completion First (Lim et al., "ECF: An MPTCP Path Scheduler to Manage
//! Heterogeneous Paths", CoNEXT 2017), a scheduler that avoids the slow path when it would
//! finish last (De Coninck, "Integrating a Multipath Transport Protocol in my Application",
//! WOS'22, names it with BLEST, which maps here too).
//!
//! When the fastest path f has no window, sending on the next fastest path s that can send
//! only helps if the data would arrive earlier than by waiting for f. With k bytes queued,
//! n = 1 + k / cwnd_f rounds on f, delta = max(rttvar_f, rttvar_s) and beta = 0.25, ECF waits
//! for f when
//!   n * srtt_f < (1 + beta) * (srtt_s + delta)          (f finishes before s delivers), and
//!   (k / cwnd_s) * srtt_s >= 2 * srtt_f + delta          (s would need longer than f's wait).
//! Otherwise it sends on s.

use super::{eligible, Decision, PathScheduler, PathSnapshot, SchedContext};

/// The ECF scheduler.
#[derive(Debug, Default)]
pub struct Ecf;

/// ECF's hysteresis factor.
const BETA: f64 = 0.25;

impl PathScheduler for Ecf {
    fn schedule(&mut self, paths: &[PathSnapshot], ctx: &SchedContext) -> Decision {
        let pool = eligible(paths);
        let by_rtt = |p: &&&PathSnapshot| (!p.rtt_sampled, p.srtt, p.id);
        let Some(fast) = pool.iter().min_by_key(by_rtt) else { return Decision::Wait };
        if fast.can_send {
            return Decision::send(fast.id);
        }
        let Some(slow) = pool.iter().filter(|p| p.can_send).min_by_key(by_rtt) else { return Decision::Wait };
        let k = ctx.queued_bytes as f64;
        let (srtt_f, srtt_s) = (fast.srtt.as_secs_f64(), slow.srtt.as_secs_f64());
        let delta = fast.rttvar.max(slow.rttvar).as_secs_f64();
        let n = 1.0 + k / (fast.cwnd.max(1) as f64);
        let wait_wins = n * srtt_f < (1.0 + BETA) * (srtt_s + delta);
        let slow_long = (k / slow.cwnd.max(1) as f64) * srtt_s >= 2.0 * srtt_f + delta;
        if wait_wins && slow_long {
            Decision::Wait
        } else {
            Decision::send(slow.id)
        }
    }

    fn name(&self) -> &'static str {
        "ecf"
    }
}
