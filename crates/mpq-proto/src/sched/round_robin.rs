//! Round robin over the eligible paths that can send.

use super::{eligible, Decision, PathScheduler, PathSnapshot, SchedContext};

/// Takes the eligible paths that can send in turn, by path ID.
#[derive(Debug, Default)]
pub struct RoundRobin {
    last: Option<u64>,
}

impl PathScheduler for RoundRobin {
    fn schedule(&mut self, paths: &[PathSnapshot], _ctx: &SchedContext) -> Decision {
        let mut ready: Vec<u64> = eligible(paths).into_iter().filter(|p| p.can_send).map(|p| p.id).collect();
        ready.sort_unstable();
        let next = match self.last {
            Some(l) => ready.iter().copied().find(|&id| id > l).or_else(|| ready.first().copied()),
            None => ready.first().copied(),
        };
        match next {
            Some(id) => {
                self.last = Some(id);
                Decision::send(id)
            }
            None => Decision::Wait,
        }
    }

    /// With a thread per path, every path that can send takes its turn when its thread
    /// comes: a rotation across threads would only send each thread to wake the next.
    fn schedule_for(&mut self, path: u64, paths: &[PathSnapshot], ctx: &SchedContext) -> Decision {
        if super::ready(path, paths) {
            self.last = Some(path);
            return Decision::send(path);
        }
        self.schedule(paths, ctx)
    }

    fn name(&self) -> &'static str {
        "round-robin"
    }
}
