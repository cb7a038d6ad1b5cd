//! Stream-to-path pinning, as in mcMPQUIC, the multicore MPQUIC of Ingenzi's "Enhancing the
//! performance of a single connection using Multi-Path QUIC" (UCLouvain, 2024), where each
//! path, and so each thread, serves its own streams: a stream stays on one path while the set
//! of paths is stable, so its data never waits for the slowest path.

use super::{eligible, minrtt, Decision, PathScheduler, PathSnapshot, SchedContext};
use crate::types::StreamId;

/// Assigns stream i to the (i mod n)-th eligible path in path-ID order; a stream whose path
/// is not eligible (failed, backup) may use any path.
#[derive(Debug, Default)]
pub struct Pinned;

/// The path stream `stream` is pinned to.
pub(crate) fn assigned(stream: StreamId, paths: &[PathSnapshot]) -> Option<u64> {
    let mut ids: Vec<u64> = eligible(paths).into_iter().map(|p| p.id).collect();
    if ids.is_empty() {
        return None;
    }
    ids.sort_unstable();
    Some(ids[((stream.0 >> 2) % ids.len() as u64) as usize])
}

impl PathScheduler for Pinned {
    fn schedule(&mut self, paths: &[PathSnapshot], _ctx: &SchedContext) -> Decision {
        minrtt::pick(paths).map_or(Decision::Wait, |p| Decision::send(p.id))
    }

    fn stream_allowed(&self, stream: StreamId, path: u64, paths: &[PathSnapshot]) -> bool {
        assigned(stream, paths).is_none_or(|p| p == path)
    }

    /// With a thread per path each path serves its own streams (mcMPQUIC's design): any
    /// eligible path that can send goes; `stream_allowed` keeps the streams apart.
    fn schedule_for(&mut self, path: u64, paths: &[PathSnapshot], ctx: &SchedContext) -> Decision {
        if super::ready(path, paths) {
            return Decision::send(path);
        }
        self.schedule(paths, ctx)
    }

    fn name(&self) -> &'static str {
        "pinned"
    }
}
