//! Lowest RTT first among the paths with window available (the default scheduler).

use super::{eligible, Decision, PathScheduler, PathSnapshot, SchedContext};

/// Sends on the eligible path with the lowest smoothed RTT that can send; paths without an
/// RTT sample yet rank after measured ones.
#[derive(Debug, Default)]
pub struct MinRtt;

/// The MinRtt choice among `paths`, as a reusable building block.
pub(crate) fn pick(paths: &[PathSnapshot]) -> Option<&PathSnapshot> {
    eligible(paths).into_iter().filter(|p| p.can_send).min_by_key(|p| (!p.rtt_sampled, p.srtt, p.id))
}

impl PathScheduler for MinRtt {
    fn schedule(&mut self, paths: &[PathSnapshot], _ctx: &SchedContext) -> Decision {
        pick(paths).map_or(Decision::Wait, |p| Decision::send(p.id))
    }

    fn name(&self) -> &'static str {
        "minrtt"
    }
}
