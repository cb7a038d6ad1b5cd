//! The answer of De Coninck and Bonaventure ("Multipath QUIC: Design and Evaluation", CoNEXT 2017,
//! §3) to a new path whose RTT is unknown: keep the data on the measured paths and duplicate it
//! onto the new one until its RTT is sampled, so that the new path neither delays data nor stays
//! unmeasured.

use super::{eligible, Decision, PathScheduler, PathSnapshot, SchedContext};

/// MinRtt over the paths with an RTT sample; paths without one get copies (which wait there
/// for the path's window and pacer).
#[derive(Debug, Default)]
pub struct RttProbe;

impl PathScheduler for RttProbe {
    fn schedule(&mut self, paths: &[PathSnapshot], _ctx: &SchedContext) -> Decision {
        let pool = eligible(paths);
        // Copies wait in their path's inbox for its window and pacer.
        let unsampled: Vec<u64> = pool.iter().filter(|p| !p.rtt_sampled).map(|p| p.id).collect();
        let best = pool.iter().filter(|p| p.rtt_sampled && p.can_send).min_by_key(|p| (p.srtt, p.id));
        match best {
            Some(p) => Decision::Send { path: p.id, copies: unsampled.into_iter().collect() },
            None => match pool.iter().find(|p| !p.rtt_sampled && p.can_send).map(|p| p.id).as_ref() {
                Some(&id) => Decision::send(id),
                None => Decision::Wait,
            },
        }
    }

    fn name(&self) -> &'static str {
        "rtt-probe"
    }
}
