//! A run of one path's received datagrams opened on a thread of its own (issue C2's receive
//! seam, over C1's split): [`Connection::begin_recv_run`] checks the path out of the table
//! with its seat at the board and the batch's keys (with the connection: under its lock, with
//! threads); [`RecvRun::open`] removes header protection, decrypts, decodes packet numbers and
//! handles the path's own frames holding nothing of the connection (on the path's thread);
//! [`Connection::end_recv_run`] checks the path back in and applies the opened packets' other
//! frames to the shared side, in order (with the connection again). It is the work of
//! [`Connection::handle_datagrams`] split at the points where a runtime with a thread per
//! path takes and releases its lock.
//!
//! A run opens only what the batch way opens: 1-RTT packets in the current key phase, to one
//! of the path's connection IDs, on a validated path from its address. At the first datagram
//! that needs more (another key phase, an unknown CID, a migration, an undecryptable packet)
//! the run stops; that datagram and those after it go the general way in `end_recv_run`,
//! after the opened ones, so packet order holds.

use std::net::SocketAddr;

use smallvec::SmallVec;

use crate::cid::ConnectionId;
use crate::error::TransportError;
use crate::recovery::received::Ecn;
use crate::time::Instant;

use super::board::Seat;
use super::recv_batch::{NotOpened, OpenRun, OpenedAt, RecvLease};
use super::Connection;

/// One path's run of received datagrams, checked out of its connection to be opened on
/// another thread. Holds nothing of the connection: it is `Send`. Must go back through
/// [`Connection::end_recv_run`] (the path is out of the table until then).
pub struct RecvRun {
    /// The path, checked out with its seat at the board (`None` once handed back).
    run: Option<OpenRun>,
    /// The keys of the current phase and what the path needs for its own frames.
    lease: RecvLease,
    /// The peer's address on the path.
    remote: SocketAddr,
    /// The ECN codepoint the run's datagrams arrived with.
    ecn: Option<u8>,
    /// Our connection IDs that route to the path, when the run began.
    cids: SmallVec<[ConnectionId; 4]>,
    /// A cleared fixed bit is allowed (we advertised grease_quic_bit, RFC 9287 §3).
    grease_ok: bool,
    /// The packets opened so far, in order; their frames wait for the shared side.
    opened: Vec<OpenedAt>,
    /// The datagram each of `opened` lies in (its index in the run's slice).
    opened_in: Vec<usize>,
    /// Datagrams handled so far (opened, dropped as duplicates, or the one in error).
    handled: usize,
    /// A connection error in datagram `handled - 1` (the connection closes when the run
    /// ends, after the packets before it are applied).
    error: Option<TransportError>,
    /// The run stopped before datagram `handled`: it and the rest need the connection.
    stopped: bool,
}

impl std::fmt::Debug for RecvRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvRun").field("handled", &self.handled).field("stopped", &self.stopped).finish()
    }
}

impl Drop for RecvRun {
    fn drop(&mut self) {
        debug_assert!(
            self.run.is_none() || std::thread::panicking(),
            "a RecvRun must go back through Connection::end_recv_run"
        );
    }
}

/// What is left of a [`RecvRun`] once [`Connection::end_recv_run`] has checked its path back
/// in: the lists of its opened packets and the keys it leased, nothing of the connection.
/// Dropping it frees them (and drops its references to the keys, counts every path thread
/// shares), work the connection's lock need not cover: drop it once the lock is released.
#[must_use = "drop it once the connection's lock is released (freeing it is work the lock need not cover)"]
#[derive(Debug)]
pub struct SpentRecvRun(RecvRun);

impl SpentRecvRun {
    /// The datagrams the run handled (opened, dropped as duplicates, or the one in error).
    pub fn handled(&self) -> usize {
        self.0.handled
    }
}

impl RecvRun {
    /// Opens the datagrams of `datagrams` not handled yet, in order, in place, holding
    /// nothing of the connection; stops at the first one that needs the connection. Returns
    /// how many are handled (opened or dropped); pass the same slice to
    /// [`Connection::end_recv_run`].
    pub fn open(&mut self, now: Instant, datagrams: &mut [&mut [u8]]) -> usize {
        let Some(OpenRun { half, seat, .. }) = self.run.as_mut() else { return self.handled };
        let start = self.handled;
        let first_new = self.opened.len();
        // Room for every datagram left at once: grown push by push, the packets' records
        // (about 300 bytes each) were copied to a new place at 4, 8, 16, 32 and 64 of them,
        // a realloc and a copy as large as a fifth of the run's stream data (2026-12-04:
        // a uprobe on memmove put 5-20 kB copies from here above every other).
        let more = datagrams.len().saturating_sub(start);
        self.opened.reserve(more);
        self.opened_in.reserve(more);
        // Bytes of the datagrams not opened yet: how much stream data the run may still bring.
        let mut left: usize = datagrams.iter().skip(start).map(|d| d.len()).sum();
        for (k, d) in datagrams.iter_mut().enumerate().skip(start) {
            if self.stopped {
                break;
            }
            let hint = left;
            left -= d.len();
            // A short header (RFC 9000 §17.3.1) to one of the path's CIDs; it runs to the
            // end of the datagram, so the datagram holds this one packet.
            let first = d.first().copied().unwrap_or(0x80);
            let fixed_ok = first & 0x40 != 0 || self.grease_ok;
            let dcid = d.get(1..1 + self.lease.cid_len).and_then(ConnectionId::try_from_slice);
            let Some(dcid) = dcid.filter(|c| first & 0x80 == 0 && fixed_ok && self.cids.contains(c)) else {
                self.stopped = true;
                break;
            };
            match half.path.open_packet(now, &self.lease, (self.remote, self.ecn), d, seat, hint) {
                Ok((pn, payload, own)) => {
                    self.opened.push(OpenedAt { path_id: half.path.id, pn, payload, dcid, own });
                    self.opened_in.push(k);
                    self.handled += 1;
                }
                Err(NotOpened::Dropped) => self.handled += 1,
                Err(NotOpened::General) => self.stopped = true,
                Err(NotOpened::Error(e)) => {
                    self.error = Some(e);
                    self.handled += 1;
                    self.stopped = true;
                }
            }
        }
        // The run's stream data goes to its packets; the path holds no buffer between runs
        // (`recv_arena.rs`).
        let opened = &mut self.opened[first_new..];
        half.path.recv_arena.finish(|bufs| {
            for o in opened.iter_mut() {
                o.own.attach_run(bufs);
            }
        });
        // Here, off the connection's lock, rather than frame by frame under it.
        super::recv_join::join_stream_pieces(opened.iter_mut().map(|o| &mut o.own));
        self.handled
    }
}

impl Connection {
    /// Checks path `path_id` out of the table, with its seat at the board and the keys of
    /// the current phase, so that a run of its datagrams from `remote` can be opened on
    /// another thread ([`RecvRun::open`]). `None` when the connection is not established
    /// with 1-RTT keys, its handshake spaces are not yet discarded, or the path does not
    /// exist: hand the datagrams to
    /// [`Connection::handle_datagrams`] instead.
    pub fn begin_recv_run(&mut self, path_id: u64, remote: SocketAddr, ecn: Option<u8>) -> Option<RecvRun> {
        self.debug_assert_mail_delivered();
        if self.shared.initial.is_some() || self.shared.handshake.is_some() {
            // The handshake's timers and packets are the primary path's, read by whichever
            // thread handles them: no path leaves the table until they are discarded.
            return None;
        }
        let lease = self.lease_recv_keys()?;
        let slot = self.path_index(path_id)?;
        let cids = self.shared.local_cids.get(&path_id)?.active.values().map(|c| c.cid).collect();
        super::touch!(self, recv_seats);
        let seat = Seat::take(self.paths.board(), slot);
        let half = self.paths.check_out(slot)?;
        Some(RecvRun {
            run: Some(OpenRun { half, seat, first: 0 }),
            lease,
            remote,
            ecn,
            cids,
            grease_ok: self.shared.config.grease_quic_bit,
            opened: Vec::new(),
            opened_in: Vec::new(),
            handled: 0,
            error: None,
            stopped: false,
        })
    }

    /// A run comes back: its path is checked in and publishes what its work changed, the
    /// opened packets' frames are applied to the shared side in order, then the datagrams
    /// of `datagrams` (the slice given to [`RecvRun::open`], arrived at `local` from the
    /// path's peer) the run did not handle go the general way. Returns what is left of the
    /// run, to be dropped once the connection's lock is released.
    pub fn end_recv_run(
        &mut self,
        now: Instant,
        local: SocketAddr,
        mut run: RecvRun,
        datagrams: &mut [&mut [u8]],
    ) -> SpentRecvRun {
        let ecn = run.ecn;
        // (`RecvRun::open` gave the run's stream data to its packets.)
        self.end_run(&mut run.run, &mut []);
        // Mail that came for the path while it was out.
        self.deliver_mail_or_close(now);
        super::touch!(self, recv_batches);
        let remote = run.remote;
        let ecn_bits = ecn.and_then(Ecn::from_bits);
        let (done, rest) = datagrams.split_at_mut(run.handled.min(datagrams.len()));
        self.shared.stats.rx_datagrams += done.len() as u64;
        // The opened packets are applied where the run keeps them, each with its datagram
        // (read-only from now on). (Every index is below `handled`; a shorter slice than
        // `open` was given would leave the packets past its end unapplied.)
        let datagrams_of: SmallVec<[&[u8]; 64]> =
            run.opened_in.iter().map_while(|&k| done.get(k).map(|d| &**d)).collect();
        let n = datagrams_of.len();
        #[cfg(debug_assertions)]
        {
            self.shared.touches.recv_opened += n as u64;
        }
        self.apply_opened_in(now, ecn_bits, &mut run.opened[..n], &datagrams_of);
        if let Some(e) = run.error.take() {
            // (The run stopped at it: every packet opened before it was applied.)
            self.host().close_with_error(now, e);
        }
        if rest.is_empty() {
            self.after_datagrams(now);
        } else {
            self.handle_datagrams(now, local, remote, ecn, rest);
        }
        SpentRecvRun(run)
    }
}
