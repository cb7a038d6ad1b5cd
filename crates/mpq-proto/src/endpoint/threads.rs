//! The endpoint's side of a runtime that drives each path of a connection from a thread of
//! its own (issue C2): the connection's receive and send seams (`Connection::begin_recv_run`,
//! `Connection::poll_path_transmit`) reached by handle, with the endpoint's bookkeeping
//! (routes of new connection IDs, timers, events) done after each step as after any other
//! I/O. The runtime holds the endpoint's lock for these calls and releases it between a
//! step's begin and end.

use std::net::SocketAddr;

use crate::conn::{PathTransmit, RecvRun, SendBatch, SpentRecvRun, Transmit};
use crate::time::Instant;

use super::{ConnectionHandle, Endpoint};

impl Endpoint {
    /// Hands connection `h`'s sending to threads of its paths (`on`), or back to
    /// [`Endpoint::poll_transmit`] (`!on`). The endpoint's own answers (stateless resets,
    /// Version Negotiation, Retry) still come from `poll_transmit`.
    pub fn set_path_threads(&mut self, h: ConnectionHandle, on: bool) {
        if let Some(slot) = self.connections.get_mut(h.0).and_then(|c| c.as_mut()) {
            slot.path_threads = on;
            self.schedule.touch(h.0);
        }
    }

    /// A connection with path threads that something happened to (a datagram, a timer,
    /// the application) since it was last returned, found by [`Endpoint::poll_transmit`]:
    /// its threads may have work. Also a connection that was removed (its handle no longer
    /// names it, or names a new connection): its threads should end. Call after
    /// `poll_transmit` returned `None`.
    pub fn poll_path_thread_wake(&mut self) -> Option<ConnectionHandle> {
        self.path_thread_wakes.pop_front()
    }

    /// The earliest timer path `path_id` of connection `h` waits for
    /// ([`crate::conn::Connection::poll_path_timeout`]): a path thread sleeps until then at
    /// most. With path threads, [`Endpoint::poll_timeout`] covers only the connection-wide
    /// timers of such a connection.
    pub fn poll_path_timeout(&mut self, h: ConnectionHandle, path_id: u64) -> Option<Instant> {
        let slot = self.connections.get_mut(h.0).and_then(|c| c.as_mut())?;
        slot.conn.poll_path_timeout(path_id)
    }

    /// Fires connection `h`'s timers that are due at `now`, whichever they are (a path
    /// thread woken by its path's timer: [`Endpoint::handle_timeout`] fires only the
    /// timers it waits for).
    pub fn handle_connection_timeout(&mut self, now: Instant, h: ConnectionHandle) {
        let Some(slot) = self.connections.get_mut(h.0).and_then(|c| c.as_mut()) else { return };
        if slot.conn.poll_timeout().is_some_and(|t| t <= now) {
            slot.conn.handle_timeout(now);
            self.after_io(h.0);
        }
    }

    /// Whether connection `h`'s paths are driven by threads of their own.
    pub fn has_path_threads(&self, h: ConnectionHandle) -> bool {
        self.connections.get(h.0).and_then(|c| c.as_ref()).is_some_and(|s| s.path_threads)
    }

    /// The connection a datagram is routed to by its destination connection ID, and for
    /// a short header the path it is for.
    pub fn route_datagram(&self, datagram: &[u8]) -> Option<(ConnectionHandle, Option<u64>)> {
        let idx = self.route_of(datagram)?;
        let conn = &self.connections[idx].as_ref()?.conn;
        Some((ConnectionHandle(idx), conn.path_of_datagram(datagram)))
    }

    /// Length of the connection IDs this endpoint issues (what a short header's destination
    /// CID is made of).
    pub fn cid_len(&self) -> usize {
        self.config.cid_len
    }

    /// [`crate::conn::Connection::begin_recv_run`] on connection `h`.
    pub fn begin_recv_run(
        &mut self,
        h: ConnectionHandle,
        path_id: u64,
        remote: SocketAddr,
        ecn: Option<u8>,
    ) -> Option<RecvRun> {
        let slot = self.connections.get_mut(h.0).and_then(|c| c.as_mut())?;
        slot.conn.begin_recv_run(path_id, remote, ecn)
    }

    /// [`crate::conn::Connection::end_recv_run`] on connection `h`. If the connection went
    /// away meanwhile (it cannot while a path is out: runtimes end a run before anything
    /// else), the run is dropped with it and `None` returned. What is left of the run is
    /// for the caller to drop once the endpoint's lock is released.
    pub fn end_recv_run(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        local: SocketAddr,
        run: RecvRun,
        datagrams: &mut [&mut [u8]],
    ) -> Option<SpentRecvRun> {
        let Some(slot) = self.connections.get_mut(h.0).and_then(|c| c.as_mut()) else {
            std::mem::forget(run);
            return None;
        };
        let spent = slot.conn.end_recv_run(now, local, run, datagrams);
        self.after_io(h.0);
        self.schedule.mark_may_send(h.0);
        Some(spent)
    }

    /// [`crate::conn::Connection::poll_path_transmit`] on connection `h` (`Gone` if the
    /// connection is gone).
    pub fn poll_path_transmit(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        path_id: u64,
        buf: &mut Vec<u8>,
    ) -> PathTransmit {
        let Some(slot) = self.connections.get_mut(h.0).and_then(|c| c.as_mut()) else {
            return PathTransmit::Gone;
        };
        self.connection_polls += 1;
        let t = slot.conn.poll_path_transmit(now, path_id, buf);
        self.after_io(h.0);
        t
    }

    /// [`crate::conn::Connection::end_send_batch`] on connection `h`.
    pub fn end_send_batch(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        batch: SendBatch,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        let Some(slot) = self.connections.get_mut(h.0).and_then(|c| c.as_mut()) else {
            std::mem::forget(batch);
            return None;
        };
        let t = slot.conn.end_send_batch(now, batch, buf);
        self.after_io(h.0);
        t
    }
}
