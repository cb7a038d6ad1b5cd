//! Multipath sending policy support: the path table the scheduler sees, and opportunistic
//! reinjection of data stuck on a slow path.

use crate::sched::PathSnapshot;
use crate::time::Instant;
use std::time::Duration;

use super::super::board::PathView;
use super::super::mail::ReinjectRequest;
use super::super::Connection;

/// When the newest packet in flight on a path is expected to be acknowledged, from now: its
/// smoothed RTT, or its minimum RTT plus the time its bytes in flight take to drain at its
/// delivery rate if that is longer (a filling queue).
fn queue_delay(v: &PathView) -> Duration {
    let drain = v.delivery_rate.filter(|r| *r > 0.0).map_or(Duration::ZERO, |r| secs(v.bytes_in_flight as f64 / r));
    v.srtt.max(v.min_rtt + drain)
}

/// `seconds` as a duration, bounded (a tiny measured rate must not overflow the clock).
fn secs(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds.clamp(0.0, 3600.0))
}

impl Connection {
    /// Opportunistic reinjection (MPTCP's opportunistic retransmission): when no new data can
    /// be sent (all sent, or flow control waits for data stuck behind a slow path), a path
    /// with window takes copies of the STREAM data still in flight on a path whose RTT is
    /// much longer, so the end of a transfer (or the receiver's window) does not wait for the
    /// slow path. Returns true if something was queued.
    pub(super) fn reinject(&mut self, now: Instant) -> bool {
        if self.paths.len() < 2 || !self.shared.handshake_complete {
            return false;
        }
        // The fast path: the lowest RTT among the usable paths with an empty inbox (the board).
        let mut fast: Option<(usize, Duration, Duration)> = None;
        for (pi, v) in self.paths.views() {
            let usable = v.is_active() && !v.potentially_failed && self.paths.inbox(pi).dup_chunks.is_empty();
            if !usable || !self.shared.peer_cids.get(&v.id).is_some_and(|c| c.has_cid()) {
                continue;
            }
            if fast.is_none_or(|(_, r, _)| v.srtt < r) {
                fast = Some((pi, v.srtt, v.rttvar));
            }
        }
        let Some((fi, fast_rtt, fast_rttvar)) = fast else { return false };
        if !self.can_send_data(now, fi) {
            return false;
        }
        let Some(fast_view) = self.paths.view(fi).copied() else { return false };
        let room = fast_view.cwnd.saturating_sub(fast_view.bytes_in_flight);
        // What the fast path sends per second: its window per RTT.
        let fast_rate = Some(fast_view.cwnd as f64 / fast_view.srtt.as_secs_f64().max(1e-6));
        // How long what the fast path holds takes to arrive (judged as the slow path is).
        let fast_queue = queue_delay(&fast_view);
        let mut budget = room as usize;
        let mut queued = false;
        // While copies arrive late (the paths' estimates said slow where they were not),
        // only a failing path is copied from, but for a probe now and then
        // (`copy_feedback.rs`).
        let mut allowance = self.shared.copy_feedback.allowance(now);
        // A probe's copies: about one chunk per packet of the fast path.
        let per_chunk = usize::from(fast_view.mtu).max(1);
        for qi in self.paths.slots() {
            if qi == fi || budget == 0 {
                continue;
            }
            let Some(&qv) = self.paths.view(qi) else { continue };
            // Only from a path clearly slower or failing: by a third of the fast path's RTT
            // (hysteresis), and by more than the RTT variation allows (RFC 6298's margin of
            // 4 x RTTVAR), so that paths of equal delay whose smoothed RTTs wander apart with
            // their queues or jitter (loopback, a shared bottleneck) do not copy each other's
            // data. (Non-overlapping RTT bands, a looser test, let a 20 ms / 40 ms pair under
            // the weighted scheduler copy so much that a flow-limited download took 4.3 s
            // instead of 3.0 s.)
            let apart = qv.srtt.saturating_sub(fast_rtt);
            let clearly_slower = apart > fast_rtt / 3 && apart > 4 * qv.rttvar.max(fast_rttvar);
            // Or its queue says so: while a deep queue fills, the smoothed RTT lags behind
            // the delay its newest packets will see and the RTT variation swells with the
            // growth, so the test above waits until the slow path has delivered almost
            // everything (0.61 Mbit/s with 0.9 s of queue next to 97 Mbit/s: its smoothed
            // RTT 0.58 s, RTTVAR 0.14 s, while its newest packet was 1.0 s from arriving;
            // the download ended 12 % after the fast path alone). What a path holds takes
            // its bytes in flight over its delivery rate to drain, after its minimum RTT;
            // both paths are judged so, and the slow one only when its newest packet
            // arrives more than one more such delay after what the fast path sends now
            // (queues of similar paths, measured so, wander apart too: a third, as above,
            // had 94 and 76 Mbit/s paths of 0.18 s with deep queues copy each other's data
            // and end later). And only when its delivery rate is under half the fast path's:
            // a path the sender leaves short of data (flow control, the application)
            // measures a rate below what it drains, which made two equal 20 Mbit/s, 10 ms
            // paths with 4 ms of jitter copy each other's data in a flow-limited download.
            let rates_apart = match (qv.delivery_rate, fast_view.delivery_rate) {
                (Some(slow), Some(fast)) => 2.0 * slow < fast,
                _ => false,
            };
            let tail_apart = queue_delay(&qv).saturating_sub(fast_queue);
            let backlogged = rates_apart && tail_apart > fast_queue && tail_apart > 4 * fast_rttvar;
            let failed = qv.potentially_failed;
            if !(failed || (allowance > 0 && (clearly_slower || backlogged))) {
                continue;
            }
            let ask = if failed { budget } else { budget.min(allowance.saturating_mul(per_chunk)) };
            // The slow path reads its own ledger for what is still in flight on it and
            // hands copies to the fast path's inbox (mail, handled at once here).
            let before = self.paths.inbox(fi).dup_chunks.len();
            let to_id = fast_view.id;
            self.paths.post(qi).reinject = Some(ReinjectRequest { to: fi, to_id, fast_rtt, fast_rate, budget: ask });
            self.deliver_mail_or_close(now);
            let added = self.paths.inbox(fi).dup_chunks.iter().skip(before);
            let (n, used) = added.fold((0, 0), |(n, b), c| (n + 1, b + c.len + 32));
            if !failed {
                self.shared.copy_feedback.on_copies_queued(now, n);
                allowance = allowance.saturating_sub(n);
            }
            queued |= used > 0;
            budget = budget.saturating_sub(used);
        }
        queued
    }

    /// What the schedulers see of every path that may carry application data.
    ///
    /// Everything but `can_send` comes from the board; whether a path can send now (window,
    /// pacer) is asked of the path itself, as its own thread would decide it.
    pub(super) fn path_snapshots(&mut self, now: Instant) -> Vec<PathSnapshot> {
        let mut out = Vec::with_capacity(self.paths.len());
        for pi in self.paths.slots() {
            let Some(&v) = self.paths.view(pi) else { continue };
            if !v.is_active() || !self.shared.peer_cids.get(&v.id).is_some_and(|c| c.has_cid()) {
                continue;
            }
            let can_send = self.can_send_data(now, pi);
            out.push(PathSnapshot {
                id: v.id,
                srtt: v.srtt,
                rttvar: v.rttvar,
                min_rtt: v.min_rtt,
                rtt_sampled: v.rtt_sampled,
                cwnd: v.cwnd,
                bytes_in_flight: v.bytes_in_flight,
                mtu: u64::from(v.mtu),
                can_send,
                backup: v.backup,
                potentially_failed: v.potentially_failed,
                delivery_rate: crate::recovery::pacer::Pacer::rate(v.cwnd, v.srtt),
                bytes_sent: v.data_bytes_sent,
            });
        }
        out
    }
}
