//! Every packet on every path: the lowest latency and the highest robustness money can buy,
//! at the cost of the paths' capacity.

use super::{eligible, minrtt, Decision, PathScheduler, PathSnapshot, SchedContext};

/// Sends on the lowest-RTT path that can send and copies onto every other eligible path,
/// whether or not it can send at this instant (its pacer or window may hold it for a few
/// milliseconds): a copy waits in that path's inbox for its window and pacer, and is skipped
/// if the original was acknowledged meanwhile (its data already arrived).
#[derive(Debug, Default)]
pub struct Redundant;

impl PathScheduler for Redundant {
    fn schedule(&mut self, paths: &[PathSnapshot], _ctx: &SchedContext) -> Decision {
        let Some(first) = minrtt::pick(paths) else { return Decision::Wait };
        let copies = eligible(paths).into_iter().filter(|p| p.id != first.id).map(|p| p.id).collect();
        Decision::Send { path: first.id, copies }
    }

    fn name(&self) -> &'static str {
        "redundant"
    }
}
