//! The receive batch seam (issue C1): a batch of datagrams (a GRO batch, or one datagram) is
//! opened path by path without the connection's shared state, then its frames are applied to
//! the shared side once, in packet order.
//!
//! *Opening* is the path's work ([`PathState::open_packet`]): header protection removed and
//! the payload decrypted with a leased key generation ([`RecvLease`]), the packet number
//! decoded against the path's own received ranges, the path's key-phase marks updated,
//! duplicates dropped, the path's counters kept, and its own frames handled (its ACKs,
//! PATH_CHALLENGE, PING, PADDING: `conn/path_frames.rs`). *Applying* is the shared work: the
//! other frames (streams, other paths' ACKs, control frames) and the fates of the path's
//! ACKs where those frames stand, then the packet recorded for acknowledgement.
//!
//! Only the steady state takes this way: 1-RTT packets of an established connection, on a
//! known, validated path, from its address, in the current key phase. Anything else (the
//! handshake, a new path, a migration, a key update, the previous phase, undecryptable
//! packets) goes through the general per-packet path ([`Connection::handle_datagram_one`]),
//! after what the batch opened before it was applied, so packet order holds.

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::cid::ConnectionId;
use crate::crypto::key_update::{HeaderKeys, KeyGeneration};
use crate::error::TransportError;
use crate::packet::number::decode_pn;
use crate::packet::protect::{apply_header_protection, open_payload, remove_header_protection};
use crate::recovery::received::Ecn;
use crate::time::Instant;
use crate::types::{Level, Side, SpaceId};

use super::board::Seat;
use super::host::Host;
use super::path::PathState;
use super::path_ack::AckParams;
use super::path_frames::{OwnFrames, Walked};
use super::path_table::PathHalf;
use super::{Connection, State};

/// The 1-RTT keys a batch opens packets with (the current generation only: packets of
/// another phase leave the batch).
pub(super) struct RecvLease {
    header: Arc<HeaderKeys>,
    generation: Arc<KeyGeneration>,
    multipath: bool,
    /// What a path needs to handle its own ACKs (`conn/path_frames.rs`).
    ack: AckParams,
    /// The paths handle their own frames while opening (only once the handshake is
    /// confirmed, which fixes everything in `ack`).
    walk: bool,
    /// Length of our CIDs (the short header's).
    pub(super) cid_len: usize,
}

/// Where [`Connection::open`] left a packet: the plaintext's place in its datagram.
pub(super) struct OpenedAt {
    pub(super) path_id: u64,
    pub(super) pn: u64,
    pub(super) payload: std::ops::Range<usize>,
    pub(super) dcid: ConnectionId,
    pub(super) own: OwnFrames,
}

/// The packets opened in a batch, and the datagram each lies in (read-only once opened),
/// inline up to the largest GRO batch (64 segments), so a batch allocates nothing. The
/// shared side applies them where they are: an opened packet is large (its path's ACK fates
/// and STREAM frames inline), and each move of it under the connection's lock cost about
/// as much as its bookkeeping there.
#[derive(Default)]
pub(super) struct OpenedBatch<'a> {
    pub(super) packets: SmallVec<[OpenedAt; 64]>,
    pub(super) datagrams: SmallVec<[&'a [u8]; 64]>,
}

impl<'a> OpenedBatch<'a> {
    /// Adds packet `o`, opened in datagram `d`.
    pub(super) fn push(&mut self, o: OpenedAt, d: &'a [u8]) {
        self.packets.push(o);
        self.datagrams.push(d);
    }

    fn len(&self) -> usize {
        self.packets.len()
    }

    fn clear(&mut self) {
        self.packets.clear();
        self.datagrams.clear();
    }
}

/// Why a datagram left the batch.
pub(super) enum NotOpened {
    /// For the general path, untouched.
    General,
    /// A duplicate: nothing more to do.
    Dropped,
    /// A connection error.
    Error(TransportError),
}

/// A path opening a run of datagrams alone: checked out of the table, with its seat.
pub(super) struct OpenRun {
    pub(super) half: PathHalf,
    pub(super) seat: Seat,
    /// Where the run's first packet is in the batch's opened packets.
    pub(super) first: usize,
}

/// The last destination CID seen in the batch and its path (most batches are one path).
#[derive(Clone, Copy)]
struct Route {
    dcid: ConnectionId,
    path_id: u64,
    slot: usize,
}

impl Connection {
    /// Processes several datagrams from `remote` that arrived at `local` (a GRO batch, all
    /// routed to this connection), in order. Each is decrypted in place. Equivalent to
    /// [`Connection::handle_datagram`] on each in turn, but the connection's shared state is
    /// met once for the batch, not once per packet.
    pub fn handle_datagrams(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        ecn: Option<u8>,
        datagrams: &mut [&mut [u8]],
    ) {
        self.debug_assert_mail_delivered();
        if self.shared.state == State::Drained {
            return;
        }
        if self.shared.migrated_to.is_some() {
            self.note_arrival_after_migration(local);
        }
        let Some(mut lease) = self.lease_recv_keys() else {
            for d in datagrams.iter_mut() {
                super::touch!(self, recv_general);
                self.handle_datagram_one(now, local, remote, ecn, d);
            }
            self.after_datagrams(now);
            return;
        };
        super::touch!(self, recv_batches);
        let ecn_bits = ecn.and_then(Ecn::from_bits);
        let mut opened = OpenedBatch::default();
        let mut route: Option<Route> = None;
        // The path opening the current run of datagrams, checked out with its seat (one per
        // run: a GRO batch is usually one path's), back before anything else runs.
        let mut run: Option<OpenRun> = None;
        // Bytes of the datagrams not opened yet: how much stream data the run may still bring.
        let mut left: usize = datagrams.iter().map(|d| d.len()).sum();
        for d in datagrams.iter_mut() {
            if self.shared.state == State::Drained {
                self.end_run(&mut run, &mut opened.packets);
                return;
            }
            let d: &mut [u8] = d;
            let hint = left;
            left -= d.len();
            match self.open(now, &lease, &mut route, (&mut run, &mut opened), (local, remote, ecn), (d, hint)) {
                Ok(o) => {
                    super::touch!(self, recv_opened);
                    self.shared.stats.rx_datagrams += 1;
                    // The datagram is the packet's from now on (read-only).
                    opened.push(o, d);
                }
                // A duplicate: dropped without a word, as the general path does.
                Err(NotOpened::Dropped) => self.shared.stats.rx_datagrams += 1,
                Err(NotOpened::General) => {
                    super::touch!(self, recv_general);
                    self.end_run(&mut run, &mut opened.packets);
                    self.apply_opened(now, ecn_bits, &mut opened);
                    self.handle_datagram_one(now, local, remote, ecn, d);
                    // The general path may have changed what the batch relied on: the routes,
                    // and the keys (a key update): lease the new generation.
                    route = None;
                    if !self.recv_lease_valid(&lease) {
                        if let Some(l) = self.lease_recv_keys() {
                            lease = l;
                        }
                    }
                }
                Err(NotOpened::Error(e)) => {
                    self.shared.stats.rx_datagrams += 1;
                    self.end_run(&mut run, &mut opened.packets);
                    self.apply_opened(now, ecn_bits, &mut opened);
                    self.host().close_with_error(now, e);
                }
            }
        }
        self.end_run(&mut run, &mut opened.packets);
        self.apply_opened(now, ecn_bits, &mut opened);
        self.after_datagrams(now);
    }

    /// The path that opened the last run of datagrams comes back: the stream data it copied
    /// goes to the run's packets (from `opened[first..]`), and it publishes what its work
    /// changed and is checked in.
    pub(super) fn end_run(&mut self, run: &mut Option<OpenRun>, opened: &mut [OpenedAt]) {
        if let Some(OpenRun { mut half, seat, first }) = run.take() {
            half.path.recv_arena.finish(|bufs| {
                for o in opened.iter_mut().skip(first) {
                    o.own.attach_run(bufs);
                }
            });
            super::recv_join::join_stream_pieces(opened.iter_mut().skip(first).map(|o| &mut o.own));
            seat.give_back(self.paths.board_mut(), &half.path);
            self.paths.check_in(half);
        }
    }

    /// The keys for a batch, if the connection is in the state the batch handles.
    pub(super) fn lease_recv_keys(&self) -> Option<RecvLease> {
        if self.shared.state != State::Established || !self.shared.handshake_complete {
            return None;
        }
        let keys = self.shared.one_rtt.as_ref()?;
        Some(RecvLease {
            header: keys.header_keys().clone(),
            generation: keys.current().clone(),
            multipath: self.shared.mp.enabled,
            ack: self.shared.ack_params(),
            walk: self.shared.handshake_confirmed,
            cid_len: self.shared.local_cid_len,
        })
    }

    fn recv_lease_valid(&self, lease: &RecvLease) -> bool {
        self.shared.state == State::Established
            && self.shared.one_rtt.as_ref().is_some_and(|k| k.epoch() == lease.generation.epoch)
    }

    /// One datagram of the batch: the shared side's checks (the lease still valid, a short
    /// header) and its route to a path (by destination CID, cached for the batch); then
    /// the path opens it alone ([`PathState::open_packet`]), checked out of the table with
    /// its seat at the board for the run of datagrams to it, back when the run ends.
    fn open(
        &mut self,
        now: Instant,
        lease: &RecvLease,
        route: &mut Option<Route>,
        (run, opened): (&mut Option<OpenRun>, &mut OpenedBatch<'_>),
        (local, remote, ecn): (SocketAddr, SocketAddr, Option<u8>),
        (d, hint): (&mut [u8], usize),
    ) -> Result<OpenedAt, NotOpened> {
        if !self.recv_lease_valid(lease) {
            return Err(NotOpened::General);
        }
        // A short header (RFC 9000 §17.3.1): fixed bit set, long-header bit clear. It runs
        // to the end of the datagram, so the datagram holds this one packet.
        let first = *d.first().ok_or(NotOpened::General)?;
        // The fixed bit may be 0 when we advertised grease_quic_bit (RFC 9287 §3).
        if first & 0x80 != 0 || (first & 0x40 == 0 && !self.shared.config.grease_quic_bit) {
            return Err(NotOpened::General);
        }
        let dcid = ConnectionId::try_from_slice(d.get(1..1 + lease.cid_len).ok_or(NotOpened::General)?)
            .ok_or(NotOpened::General)?;
        let r = match *route {
            Some(r) if r.dcid == dcid => r,
            _ => {
                let path_id = self.path_of_dcid(&dcid).ok_or(NotOpened::General)?;
                let slot = self.path_index(path_id).ok_or(NotOpened::General)?;
                let r = Route { dcid, path_id, slot };
                *route = Some(r);
                r
            }
        };
        // At another of our addresses (a client moving to our preferred_address): the
        // general way, which sees the move.
        if self.shared.side == Side::Server
            && self.paths.get(r.slot).is_some_and(|p| super::migrate::local_moved(p.local, local))
        {
            return Err(NotOpened::General);
        }
        if run.as_ref().is_some_and(|o| o.half.slot != r.slot) {
            self.end_run(run, &mut opened.packets);
        }
        if run.is_none() {
            if self.paths.get(r.slot).is_none_or(|p| p.id != r.path_id) {
                return Err(NotOpened::General);
            }
            super::touch!(self, recv_seats);
            let seat = Seat::take(self.paths.board(), r.slot);
            let half = self.paths.check_out(r.slot).ok_or(NotOpened::General)?;
            *run = Some(OpenRun { half, seat, first: opened.len() });
        }
        let Some(OpenRun { half, seat, .. }) = run.as_mut() else { return Err(NotOpened::General) };
        let (pn, payload, own) = half.path.open_packet(now, lease, (remote, ecn), d, seat, hint)?;
        Ok(OpenedAt { path_id: r.path_id, pn, payload, dcid, own })
    }
}

impl PathState {
    /// The path's own part of one datagram routed to it, with nothing of the connection but
    /// the lease and its seat at the board: header protection, decryption, the packet
    /// number against its received ranges, its key-phase marks, duplicates, its counters,
    /// then its own frames ([`PathState::walk_own_frames`]). When every frame was walked,
    /// the path also does what is left of the packet that is its own: the data of its
    /// STREAM frames is copied into the path's arena (`hint`: the bytes of the run's
    /// datagrams from this one on), so the shared side keeps it without a copy, and the
    /// packet is recorded for acknowledgement (it arrived with codepoint `ecn`). Returns the
    /// packet number, where the plaintext frames are in `d`, and what the path did with its
    /// frames.
    pub(super) fn open_packet(
        &mut self,
        now: Instant,
        lease: &RecvLease,
        (remote, ecn): (SocketAddr, Option<u8>),
        d: &mut [u8],
        seat: &mut Seat,
        hint: usize,
    ) -> Result<(u64, Range<usize>, OwnFrames), NotOpened> {
        // Validated (no amplification accounting), from the path's own address (no
        // migration or probing).
        if !self.validated || self.remote != remote {
            return Err(NotOpened::General);
        }
        let pn_offset = 1 + lease.cid_len;
        let Ok(hdr) = remove_header_protection(d, pn_offset, &*lease.header.remote) else {
            return Err(NotOpened::General);
        };
        if hdr.key_phase() != lease.generation.phase() {
            // Another key phase: restore the protection and leave it to the general path.
            // Cannot fail: the same key and sample just removed the protection.
            let _ = apply_header_protection(d, 0, pn_offset, hdr.pn_len, &*lease.header.remote);
            return Err(NotOpened::General);
        }
        let largest = self.data.received.largest().map(|(pn, _)| pn);
        let pn = decode_pn(largest, hdr.truncated_pn, hdr.pn_len);
        let nonce_path = (lease.multipath && self.data.single.is_none()).then_some(self.id as u32);
        let datagram_len = d.len();
        let opened = open_payload(d, pn_offset, hdr.pn_len, pn, &*lease.generation.remote, nonce_path);
        let payload_start = pn_offset + hdr.pn_len;
        let payload_len = match opened {
            Ok(p) => p.len(),
            Err(_) => {
                // Undecryptable (maybe a stateless reset): the general path counts it
                // against the integrity limit and checks for a reset token.
                // Cannot fail: the same key and sample just removed the protection.
                let _ = apply_header_protection(d, 0, pn_offset, hdr.pn_len, &*lease.header.remote);
                return Err(NotOpened::General);
            }
        };
        // Reserved bits must be zero once protection is removed (RFC 9000 §17.3.1).
        if hdr.first_byte & 0x18 != 0 {
            return Err(NotOpened::Error(TransportError::protocol_violation("reserved header bits set")));
        }
        self.key_marks.on_current_authenticated(lease.generation.epoch, pn).map_err(NotOpened::Error)?;
        self.stats.rx_bytes += datagram_len as u64;
        if self.data.received.is_duplicate(pn) {
            return Err(NotOpened::Dropped);
        }
        let payload = payload_start..payload_start + payload_len;
        let mut own = if lease.walk {
            self.walk_own_frames(now, &d[payload.clone()], &lease.ack, lease.multipath, seat)
        } else {
            OwnFrames::default()
        };
        if own.fast {
            let plaintext = &d[payload.clone()];
            for item in &mut own.items {
                if let Walked::Stream(s) = item {
                    s.in_run = Some(self.recv_arena.take(&plaintext[s.range.clone()], hint));
                }
            }
            // Nothing the shared side does with the packet can fail but its STREAM frames,
            // and a failure closes the connection: record it now, off the connection's lock
            // (its ACK offer is published when the path is checked in).
            self.data.received.on_packet(pn, own.ack_eliciting, now, ecn.and_then(Ecn::from_bits));
            self.data.on_packet_recorded();
            own.recorded = true;
        }
        Ok((pn, payload, own))
    }
}

impl Connection {
    /// The shared part of the opened packets, in order: their frames, then each packet
    /// recorded for acknowledgement.
    pub(super) fn apply_opened(&mut self, now: Instant, ecn: Option<Ecn>, opened: &mut OpenedBatch<'_>) {
        self.apply_opened_in(now, ecn, &mut opened.packets, &opened.datagrams);
        opened.clear();
    }

    /// [`Connection::apply_opened`] on packets `opened`, the `k`-th opened in datagram
    /// `datagrams[k]`.
    pub(super) fn apply_opened_in(
        &mut self,
        now: Instant,
        ecn: Option<Ecn>,
        opened: &mut [OpenedAt],
        datagrams: &[&[u8]],
    ) {
        debug_assert_eq!(opened.len(), datagrams.len());
        if opened.is_empty() {
            return;
        }
        super::touch!(self, recv_applies);
        self.shared.idle_anchor = now;
        self.shared.idle_anchor_from_recv = true;
        // The paths that recorded packets publish their ACK offers once, after the batch.
        let mut recorded: SmallVec<[usize; 2]> = SmallVec::new();
        // By reference: an opened packet is large (its path's ACK fates inline), and moving
        // each out of the batch cost as much as the packet's stream data copy.
        for (o, d) in opened.iter_mut().zip(datagrams) {
            let skip = match self.shared.state {
                State::Established | State::Handshake => false,
                State::Closing { .. } => {
                    // As the general path does for a datagram in the closing state.
                    self.shared.on_datagram_while_closing();
                    true
                }
                State::Draining { .. } | State::Drained => true,
            };
            // Frames of an earlier packet may have discarded the path; an earlier packet
            // of the batch may have been this one (a duplicate datagram).
            // (A packet its path recorded while opening it was a duplicate there if at all.)
            let pi = self
                .path_index(o.path_id)
                .filter(|&pi| o.own.recorded || !self.paths[pi].data.received.is_duplicate(o.pn));
            let Some(pi) = pi.filter(|_| !skip) else {
                // The packet is not processed, but what its path already did with its ACKs
                // stands: their packets left the ledger, so their frames' fate is due.
                for f in o.own.fates.drain(..) {
                    self.host().apply_fates(now, o.path_id, f);
                }
                self.finish_host_work(now);
                continue;
            };
            let Some((mut host, path)) = self.host_for(pi) else { continue };
            if host.apply_opened_packet(now, path, pi, (o, d), ecn) && !recorded.contains(&pi) {
                recorded.push(pi);
            }
            // One thread: what the packet's frames asked of other paths and of the whole
            // connection is done before the next packet.
            self.finish_host_work(now);
        }
        // The stream data held back by the batch's last frames (`Streams::on_stream_piece`).
        self.shared.streams.flush_pieces();
        for slot in recorded {
            self.paths.publish_offer(slot);
        }
    }
}

impl Host<'_> {
    /// The frames of a packet its path walked whole ([`OwnFrames::fast`]), in order: the
    /// fates of its ACKs and its STREAM frames, whose data was copied when the packet was
    /// opened. Errors as [`Host::process_frames`] gives them.
    fn apply_walked(
        &mut self,
        now: Instant,
        path_id: u64,
        items: &mut SmallVec<[Walked; 1]>,
        fates: &mut super::recv::WalkedFates<'_>,
    ) -> Result<(), TransportError> {
        for item in items.drain(..) {
            match item {
                Walked::Fates => {
                    super::touch!(self, acks_in_batch);
                    if let Some(f) = fates.next() {
                        self.apply_fates(now, path_id, f);
                    }
                }
                Walked::Stream(s) => {
                    let Some(piece) = s.data else { continue };
                    super::touch!(self, recv_stream_pieces);
                    // Checked now; stored with the frames that continue it
                    // ([`crate::stream::Streams::flush_pieces`]).
                    self.shared
                        .streams
                        .on_stream_piece(s.id, s.offset, piece, s.fin)
                        .map_err(|e| e.or_frame(u64::from(s.ty)))?;
                }
            }
        }
        Ok(())
    }

    /// The shared part of one packet `path` (in `slot`) opened: its frames, with the fates
    /// of the ACKs the path handled where they stand, then the packet recorded for
    /// acknowledgement. Other paths are reached by mail only. Returns whether the packet
    /// was recorded (its path's ACK offer is then due).
    fn apply_opened_packet(
        &mut self,
        now: Instant,
        path: &mut PathState,
        slot: usize,
        (o, d): (&mut OpenedAt, &[u8]),
        ecn: Option<Ecn>,
    ) -> bool {
        let payload = &d[o.payload.clone()];
        let mut fates = o.own.fates.drain(..);
        self.on_packet_received(now, path, slot);
        self.shared.packets_in_phase += 1;
        let processed = if o.own.only_own {
            // Nothing for the shared side but the fates of the path's ACKs.
            for f in fates {
                super::touch!(self, acks_in_batch);
                self.apply_fates(now, o.path_id, f);
            }
            Ok(o.own.ack_eliciting)
        } else if o.own.fast {
            // The path walked every frame: its ACKs' fates and the stream data, in frame
            // order, nothing parsed again.
            self.apply_walked(now, o.path_id, &mut o.own.items, &mut fates).map(|()| o.own.ack_eliciting)
        } else {
            // Whatever these frames do to a stream follows the data held back before them.
            self.shared.streams.flush_pieces();
            self.process_frames(now, Level::OneRtt, path, slot, &o.dcid, payload, Some((o.own.walked, &mut fates)))
        };
        match processed {
            Ok(ack_eliciting) => {
                // (The packet's size on the wire is its datagram's: a short header runs to
                // the end.)
                self.shared.qlog_packet_received(now, Level::OneRtt, o.path_id, o.pn, d.len(), payload);
                if ack_eliciting {
                    self.note_heard(now, path, slot);
                }
                if o.own.recorded {
                    // Recorded by its path, whose offer went out at its check-in.
                    return false;
                }
                self.record_received(now, path, SpaceId::Data, o.pn, ack_eliciting, ecn);
                true
            }
            Err(e) => {
                self.close_with_error(now, e);
                false
            }
        }
    }
}
