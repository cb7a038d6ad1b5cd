//! Multipath sending policy support: the path table the scheduler sees, and opportunistic
//! reinjection of data stuck on a slow path.

use crate::sched::PathSnapshot;
use crate::time::Instant;

use super::super::Connection;

impl Connection {
    /// Opportunistic reinjection (MPTCP's opportunistic retransmission): when no new data can
    /// be sent (all sent, or flow control waits for data stuck behind a slow path), a path
    /// with window takes copies of the STREAM data still in flight on a path whose RTT is
    /// much longer, so the end of a transfer (or the receiver's window) does not wait for the
    /// slow path. Returns true if something was queued.
    pub(super) fn reinject(&mut self, now: Instant) -> bool {
        if self.paths.len() < 2 || !self.handshake_complete {
            return false;
        }
        let usable =
            |p: &super::super::path::PathState| p.is_active() && !p.potentially_failed && p.dup_chunks.is_empty();
        let mut fast: Option<usize> = None;
        for pi in self.paths.slots() {
            if !usable(&self.paths[pi]) || !self.peer_cids.get(&self.paths[pi].id).is_some_and(|c| c.has_cid()) {
                continue;
            }
            if fast.is_none_or(|f| self.paths[pi].rtt.smoothed() < self.paths[f].rtt.smoothed()) {
                fast = Some(pi);
            }
        }
        let Some(fi) = fast else { return false };
        if !self.can_send_data(now, fi) {
            return false;
        }
        let fast_rtt = self.paths[fi].rtt.smoothed();
        let room = self.paths[fi].cc.window().saturating_sub(self.paths[fi].bytes_in_flight);
        let mut budget = room as usize;
        let mut queued = false;
        for qi in self.paths.slots() {
            if qi == fi || budget == 0 {
                continue;
            }
            let q = &self.paths[qi];
            // Only from a path clearly slower (4/3 hysteresis) or failing.
            if !(q.potentially_failed || q.rtt.smoothed() > fast_rtt + fast_rtt / 3) {
                continue;
            }
            let from = q.reinjected_below;
            let slow_rtt = q.rtt.smoothed();
            let failing = q.potentially_failed;
            let mut last = None;
            let mut chunks = Vec::new();
            for (pn, p) in q.data.loss.iter_outstanding() {
                if pn < from {
                    continue;
                }
                if budget == 0 {
                    break;
                }
                // Only what a copy on the fast path would deliver clearly earlier (by a
                // quarter of its RTT) than the slow path is expected to.
                if !failing && now + fast_rtt + fast_rtt / 4 >= p.time_sent + slow_rtt {
                    continue;
                }
                last = Some(pn);
                for c in &p.frames.stream {
                    if self.streams.chunk_buffered(c) {
                        budget = budget.saturating_sub(c.len + 32);
                        chunks.push(*c);
                    }
                }
            }
            if let Some(l) = last {
                self.paths[qi].reinjected_below = l + 1;
            }
            if !chunks.is_empty() {
                queued = true;
                self.stats.reinjected_chunks += chunks.len() as u64;
                self.paths[fi].dup_chunks.extend(chunks);
            }
        }
        queued
    }

    /// What the schedulers see of every path that may carry application data.
    pub(super) fn path_snapshots(&mut self, now: Instant) -> Vec<PathSnapshot> {
        let mut out = Vec::with_capacity(self.paths.len());
        for pi in self.paths.slots() {
            let p = &self.paths[pi];
            if !p.is_active() || !self.peer_cids.get(&p.id).is_some_and(|c| c.has_cid()) {
                continue;
            }
            let can_send = self.can_send_data(now, pi);
            let p = &self.paths[pi];
            let srtt = p.rtt.smoothed();
            let cwnd = p.cc.window();
            out.push(PathSnapshot {
                id: p.id,
                srtt,
                rttvar: p.rtt.rttvar(),
                min_rtt: p.rtt.min(),
                rtt_sampled: p.rtt.has_sample(),
                cwnd,
                bytes_in_flight: p.bytes_in_flight,
                mtu: u64::from(p.mtu),
                can_send,
                backup: p.peer_backup,
                potentially_failed: p.potentially_failed,
                delivery_rate: crate::recovery::pacer::Pacer::rate(cwnd, srtt),
                bytes_sent: p.data_bytes_sent,
            });
        }
        out
    }
}
