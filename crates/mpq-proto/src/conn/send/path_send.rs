//! The send side of a path driven by a thread of its own (issue C2), the counterpart of the
//! receive seam in `conn/recv_run.rs`: a runtime with a thread per path asks the connection
//! what its path sends now ([`Connection::poll_path_transmit`], under the connection's lock),
//! builds a batch the path can build alone without the lock ([`SendBatch::build`]) and hands
//! it back ([`Connection::end_send_batch`], under the lock again), which finishes it with the
//! host if it needs more. Connection-wide traffic (the handshake's datagrams, answers to
//! other addresses, CONNECTION_CLOSE) is written under the lock by whichever path's thread
//! asks first: there is no fixed control thread.
//!
//! What goes on the path is decided as [`Connection::poll_transmit`] decides it for every
//! path at once: the path's own traffic first, then new data if the scheduler sends it here
//! ([`crate::sched::PathScheduler::schedule_for`]). When the scheduler prefers another path,
//! the answer names it so that the runtime can wake that path's thread.

use crate::time::Instant;

use super::super::{Connection, State, Transmit};
use super::alone::AloneBatch;
use super::path_packet::BatchWritten;
use crate::sched::{Decision, SchedContext};

/// What a path's thread does next, as [`Connection::poll_path_transmit`] answers.
#[derive(Debug)]
pub enum PathTransmit {
    /// Nothing for this path now: wait for a datagram, a timer or a wake.
    Idle,
    /// New data waits and the scheduler sends it on this other path: wake its thread.
    Elsewhere(u64),
    /// A datagram or GSO batch written with the connection into the buffer: send it.
    Ready(Transmit),
    /// A batch to build without the connection ([`SendBatch::build`]), then to hand back
    /// ([`Connection::end_send_batch`]).
    Batch(SendBatch),
    /// The path is gone (abandoned and discarded) or the connection is over: the thread
    /// may stop.
    Gone,
}

/// A send batch its path builds holding nothing of the connection: the path is checked out
/// of the table with its lease. It may go to another thread; it must come back through
/// [`Connection::end_send_batch`] (the path is out of the table until then).
#[derive(Debug)]
pub struct SendBatch {
    alone: AloneBatch,
    allow_data: bool,
    ecn: bool,
}

impl SendBatch {
    /// Writes, seals and records the batch, appending its datagrams to `buf` (the buffer
    /// given to [`Connection::poll_path_transmit`], which left it empty).
    pub fn build(&mut self, now: Instant, buf: &mut Vec<u8>) {
        self.alone.build(now, buf);
    }

    /// The path's ID.
    pub fn path_id(&self) -> u64 {
        self.alone.path_id()
    }
}

impl Connection {
    /// What path `path_id` sends now, for a runtime that drives each path from a thread of
    /// its own. `buf` is cleared; a [`PathTransmit::Ready`] transmit is in it, and a
    /// [`PathTransmit::Batch`] is built into it.
    pub fn poll_path_transmit(&mut self, now: Instant, path_id: u64, buf: &mut Vec<u8>) -> PathTransmit {
        self.debug_assert_mail_delivered();
        buf.clear();
        match self.shared.state {
            State::Drained => return PathTransmit::Gone,
            State::Draining { .. } => return PathTransmit::Idle,
            State::Closing { .. } => return self.poll_close(now, buf).map_or(PathTransmit::Idle, PathTransmit::Ready),
            _ => {}
        }
        if self.shared.zero_rtt.flight_held {
            // (As in `poll_transmit`: a held first flight waits for the application.)
            return PathTransmit::Idle;
        }
        let Some(pi) = self.path_index(path_id) else { return PathTransmit::Gone };
        if let Some(t) = self.before_paths_send(now, buf) {
            return PathTransmit::Ready(t);
        }
        if self.paths.get(pi).is_none_or(|p| !p.is_open()) {
            // Out on another thread (a runtime drives a path from one thread only, so not
            // expected) or abandoned, waiting for its discard.
            return PathTransmit::Idle;
        }
        if !self.shared.mp.enabled {
            if pi != self.primary_path() {
                return PathTransmit::Idle;
            }
            return self.path_batch(now, buf, pi, true);
        }
        if self.path_has_local_traffic(now, pi) {
            match self.path_batch(now, buf, pi, false) {
                PathTransmit::Idle => {}
                other => return other,
            }
        }
        if !self.wants_to_send_data() {
            // Nothing new: this path, if fast, may speed up data stuck on a slower one (the
            // copies land in the fast path's inbox: its own traffic).
            if self.reinject(now) && self.path_has_local_traffic(now, pi) {
                return self.path_batch(now, buf, pi, false);
            }
            return PathTransmit::Idle;
        }
        let snaps = self.path_snapshots(now);
        if !snaps.iter().any(|s| s.can_send) {
            return PathTransmit::Idle;
        }
        let ctx = SchedContext { queued_bytes: self.shared.streams.queued_bytes() };
        let copies = match self.shared.scheduler.schedule_for(path_id, &snaps, &ctx) {
            Decision::Send { path, copies } if path == path_id => copies,
            Decision::Send { path, .. } if snaps.iter().any(|s| s.id == path && s.can_send) => {
                return PathTransmit::Elsewhere(path)
            }
            _ => return PathTransmit::Idle,
        };
        self.shared.sched_snapshots = snaps;
        if copies.is_empty() {
            return self.path_batch(now, buf, pi, true);
        }
        // Copies (redundant scheduling): the chunks are recorded with the host, and the
        // copies wait in the other paths' inboxes, their own traffic.
        self.shared.collect_chunks = true;
        let t = self.path_batch(now, buf, pi, true);
        self.shared.collect_chunks = false;
        let chunks = std::mem::take(&mut self.shared.batch_chunks);
        for q in copies {
            if let Some(qi) = self.path_index(q).filter(|_| q != path_id) {
                self.paths.inbox_mut(qi).push_dup_chunks(chunks.iter().copied());
            }
        }
        t
    }

    /// A batch of path `pi` handed back after [`SendBatch::build`]: the path is checked in,
    /// the batch goes on with the host if it needs more, and ends. Returns what to send
    /// (the datagrams in `buf`).
    pub fn end_send_batch(&mut self, now: Instant, batch: SendBatch, buf: &mut Vec<u8>) -> Option<Transmit> {
        let SendBatch { alone, allow_data, ecn } = batch;
        let pi = alone.slot();
        let b = self.end_alone_batch(alone);
        let t = self.finish_path_batch(now, buf, pi, allow_data, ecn, b);
        self.end_batch(now, pi);
        t
    }

    /// Begins a batch of path `pi`: built alone if it can be (returned to be built without
    /// the connection), else written here.
    pub(super) fn path_batch(&mut self, now: Instant, buf: &mut Vec<u8>, pi: usize, allow_data: bool) -> PathTransmit {
        self.paths[pi].in_batch = true;
        let ecn = self.batch_ecn(pi);
        let t = if self.handshake_on(pi) {
            self.write_handshake_batch(now, buf, pi, allow_data, ecn)
        } else {
            if let Some(alone) = self.start_path_batch(now, pi, allow_data) {
                return PathTransmit::Batch(SendBatch { alone, allow_data, ecn });
            }
            self.finish_path_batch(now, buf, pi, allow_data, ecn, BatchWritten::default())
        };
        self.end_batch(now, pi);
        t.map_or(PathTransmit::Idle, PathTransmit::Ready)
    }

    /// Whether path `path_id`'s window has room, as its view on the board shows it (for a
    /// runtime deciding whether to wake the path's thread; the thread asks the path itself).
    pub fn path_window_open(&self, path_id: u64) -> bool {
        self.path_index(path_id)
            .and_then(|pi| self.paths.view(pi))
            .is_some_and(|v| v.is_active() && v.window_has_room())
    }

    /// New application data waits to be sent (stream data, DATAGRAM frames, connection-wide
    /// control frames), for a runtime deciding whether to wake path threads.
    /// False while the first flight is held: nothing leaves before the application lets it.
    pub fn wants_to_send(&self) -> bool {
        !self.shared.zero_rtt.flight_held && self.wants_to_send_data()
    }
}
