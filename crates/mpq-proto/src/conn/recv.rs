//! Receiving: datagrams are split into packets, packets are unprotected and their frames
//! dispatched (RFC 9000 §12, RFC 9001 §5).

use std::net::SocketAddr;

use crate::cid::ConnectionId;
use crate::crypto::key_update::RemoteKeyChoice;
use crate::error::{TransportError, TransportErrorCode};
use crate::frame::{frame_type as ft, AckFrame, ConnectionClose, Frame, StreamFrame};
use crate::packet::header::{parse_packet_with, PacketKind, ParsedPacket};
use crate::packet::number::decode_pn;
use crate::packet::protect::remove_header_protection;
use crate::recovery::received::Ecn;
use crate::time::Instant;
use crate::types::{Level, Side, SpaceId};

use super::events::ConnectionError;
use super::host::Host;
use super::path::{OffPathResponse, PathState};
use super::path_ack::PacketFates;
use super::path_frames::MAX_PENDING_PATH_RESPONSES;
use super::ConnShared;
use super::{Connection, State};

/// The fates of the own ACK frames a path walked in a packet, in frame order.
pub(super) type WalkedFates<'a> = smallvec::Drain<'a, [PacketFates; 1]>;

/// Most 1-RTT packets a server keeps while its handshake is incomplete or a new path
/// waits for the client's CIDs, and their bytes (the oldest go first).
const MAX_EARLY_ONE_RTT: usize = 16;
const MAX_EARLY_ONE_RTT_BYTES: usize = 32 * 1024;

/// A packet kept to process later (0-RTT before its keys, or a held 1-RTT packet).
pub(crate) struct EarlyPacket {
    pub(super) rx: Rx,
    pub(super) bytes: Vec<u8>,
    pub(super) is_last: bool,
}

/// A 1-RTT packet that reached the server before the client's Finished (RFC 9001 §5.7), or
/// on a new path before the client's CIDs for it: its path ID and since when it has waited
/// for those CIDs.
pub(crate) struct HeldOneRtt {
    packet: EarlyPacket,
    path_id: u64,
    /// When it was held or, if that was before the handshake completed, the first batch
    /// after completion that still could not process it.
    held_at: Instant,
    /// Held before the handshake completed, and not looked at since.
    before_completion: bool,
}

impl Connection {
    /// Processes a datagram from `remote` that arrived at the local address `local` and was
    /// routed to this connection. `data` is decrypted in place. (A batch of one: see
    /// [`Connection::handle_datagrams`].)
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        ecn: Option<u8>,
        data: &mut [u8],
    ) {
        self.handle_datagrams(now, local, remote, ecn, &mut [data]);
    }

    /// The general way for one datagram: every packet type, every state.
    pub(super) fn handle_datagram_one(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        ecn: Option<u8>,
        data: &mut [u8],
    ) {
        if self.shared.state == State::Drained {
            return;
        }
        self.shared.stats.rx_datagrams += 1;
        let ecn = ecn.and_then(Ecn::from_bits);
        let mut offset = 0;
        let total = data.len();
        let mut first = true;
        let mut first_dcid = None;
        while offset < total {
            let buf = &mut data[offset..];
            let parsed = match parse_packet_with(buf, self.shared.local_cid_len, self.shared.parse_options()) {
                Ok(p) => p,
                Err(_) => {
                    self.shared.stats.dropped_packets += 1;
                    break;
                }
            };
            let len = parsed.packet_len.min(buf.len());
            offset += len;
            // RFC 9000 §12.2: packets coalesced after the first with another Destination
            // Connection ID are ignored (a sender must not coalesce them).
            if *first_dcid.get_or_insert(parsed.dcid) != parsed.dcid {
                self.shared.stats.dropped_packets += 1;
                continue;
            }
            let is_last = offset >= total;
            let rx = Rx { local, remote, ecn, datagram_len: if first { total } else { 0 } };
            first = false;
            self.handle_packet(now, &rx, &parsed, &mut buf[..len], is_last);
            if self.shared.state == State::Drained {
                return;
            }
        }
    }

    /// After a batch of datagrams: 1-RTT packets kept while the handshake was incomplete,
    /// and the timer that drops the previous key.
    pub(super) fn after_datagrams(&mut self, now: Instant) {
        if self.shared.state == State::Drained {
            return;
        }
        self.process_held_zero_rtt(now);
        // Only the held packets that can be processed now are taken (those of a new path
        // whose CIDs have not arrived stay untouched); a replayed packet may bring the CIDs
        // another waits for, hence the loop (each round takes at least one).
        while self.shared.handshake_complete {
            let (ready, waiting): (Vec<_>, Vec<_>) =
                std::mem::take(&mut self.shared.early_one_rtt).into_iter().partition(|h| {
                    self.path_index(h.path_id).is_some()
                        || !self.may_accept_path_later(h.path_id)
                        || self.may_accept_path(h.path_id)
                });
            self.shared.early_one_rtt = waiting;
            // Those held for the handshake's end that still wait (for their path's CIDs)
            // start their wait for them now.
            for h in self.shared.early_one_rtt.iter_mut().filter(|h| h.before_completion) {
                h.before_completion = false;
                h.held_at = now;
            }
            if ready.is_empty() {
                break;
            }
            for HeldOneRtt { packet: mut p, .. } in ready {
                let Ok(parsed) = parse_packet_with(&p.bytes, self.shared.local_cid_len, self.shared.parse_options())
                else {
                    continue;
                };
                self.handle_packet(now, &p.rx, &parsed, &mut p.bytes, p.is_last);
                if self.shared.state == State::Drained {
                    return;
                }
            }
        }
        self.arm_key_discard(now);
    }

    /// Keeps a 1-RTT packet to process later (`after_datagrams`), evicting the oldest when
    /// the bounds are reached.
    fn hold_early(&mut self, now: Instant, path_id: u64, rx: Rx, pkt: &[u8], is_last: bool) {
        // A new path's packet is worth keeping while the client still validates the path
        // (RFC 9000 §8.2.4: at least six initial RTTs); its retries replace it. What waits
        // for the handshake's end is kept until then, however long the client's Finished
        // takes on a slow or lossy path: those are the client's first 1-RTT packets, with its
        // CIDs and requests. The count and byte bounds still apply.
        let keep = 6 * self.shared.config.initial_rtt;
        let before_completion = !self.shared.handshake_complete;
        let held = &mut self.shared.early_one_rtt;
        let before = held.len();
        held.retain(|h| h.before_completion || now.saturating_duration_since(h.held_at) < keep);
        self.shared.stats.dropped_packets += (before - held.len()) as u64;
        if pkt.len() > MAX_EARLY_ONE_RTT_BYTES {
            self.shared.stats.dropped_packets += 1;
            return;
        }
        while held.len() >= MAX_EARLY_ONE_RTT
            || held.iter().map(|h| h.packet.bytes.len()).sum::<usize>() + pkt.len() > MAX_EARLY_ONE_RTT_BYTES
        {
            held.remove(0);
            self.shared.stats.dropped_packets += 1;
        }
        held.push(HeldOneRtt {
            packet: EarlyPacket { rx, bytes: pkt.to_vec(), is_last },
            path_id,
            held_at: now,
            before_completion,
        });
    }

    /// The path ID a destination CID of ours belongs to.
    pub(super) fn path_of_dcid(&self, dcid: &ConnectionId) -> Option<u64> {
        self.shared.local_cids.iter().find(|(_, l)| l.active.values().any(|c| c.cid == *dcid)).map(|(id, _)| *id)
    }

    pub(super) fn handle_packet(
        &mut self,
        now: Instant,
        rx: &Rx,
        parsed: &ParsedPacket,
        pkt: &mut [u8],
        is_last: bool,
    ) {
        let level = match parsed.kind {
            PacketKind::Initial => Level::Initial,
            PacketKind::Handshake => Level::Handshake,
            PacketKind::Short => Level::OneRtt,
            PacketKind::VersionNegotiation => {
                self.on_version_negotiation(now, parsed, pkt);
                return;
            }
            PacketKind::Retry => return self.on_retry(now, parsed, pkt),
            // A server opens 0-RTT if its TLS accepted early data (`conn/zero_rtt.rs`).
            PacketKind::ZeroRtt => {
                if !self.take_zero_rtt(rx, pkt, is_last) {
                    return;
                }
                Level::ZeroRtt
            }
        };
        // RFC 9368 §2.1: long headers carry the connection's version, or one it may switch to.
        let switch_to = match parsed.kind {
            PacketKind::Short => None,
            _ => match self.packet_version(parsed) {
                super::version::VersionFit::Fits => None,
                super::version::VersionFit::Switch(v) => Some(v),
                super::version::VersionFit::Drop => {
                    self.shared.stats.dropped_packets += 1;
                    return;
                }
            },
        };
        // RFC 9000 §7.2: once an Initial was accepted, later Initials with a different
        // Source Connection ID MUST be discarded (the server's records the client's SCID
        // from the first Initial; the client's, the server's from the first it processed).
        if level == Level::Initial && self.shared.peer_initial_scid.is_some_and(|scid| scid != parsed.scid) {
            self.shared.stats.dropped_packets += 1;
            return;
        }
        // Long headers belong to the handshake path; short ones to the path of their CID.
        let path_id = if level == Level::OneRtt {
            match self.path_of_dcid(&parsed.dcid) {
                Some(id) => id,
                None => {
                    self.shared.stats.dropped_packets += 1;
                    return;
                }
            }
        } else {
            0
        };
        let known = self.path_index(path_id);
        if known.is_some_and(|pi| self.paths.is_out(pi)) {
            // The path is checked out to its own thread, which receives its datagrams itself
            // (a runtime with a thread per path routes none of them elsewhere): one that
            // comes here meanwhile is dropped like a lost packet, and its sender resends.
            self.shared.stats.dropped_packets += 1;
            return;
        }
        if let Some(pi) = known {
            let path = &mut self.paths[pi];
            if rx.datagram_len > 0 && path.remote == rx.remote {
                let amp_changed = !path.validated;
                if amp_changed {
                    path.amp_received += rx.datagram_len as u64;
                }
                path.stats.rx_bytes += rx.datagram_len as u64;
                if amp_changed {
                    self.paths.publish(pi);
                }
            }
            let path = &self.paths[pi];
            // RFC 9000 §9: no migration during the handshake; and only clients migrate: a
            // client discards packets from a server address it does not know. Its paths
            // (multipath included) go to addresses it chose itself, each path's in
            // `remote`, so a packet of a path from elsewhere is from an unknown address.
            let probed = level == Level::OneRtt && self.is_preferred_address_probed(rx.remote);
            if path.remote != rx.remote && (level != Level::OneRtt || self.shared.side == Side::Client) && !probed {
                self.shared.stats.dropped_packets += 1;
                return;
            }
        } else if !self.may_accept_path(path_id) {
            if level == Level::OneRtt && self.may_accept_path_later(path_id) {
                // A new path's first packets may overtake the client's Finished or its CIDs
                // for the path (sent on the first path just before): keep them until those
                // arrive (RFC 10069 §3.1 lets a receiver delay PATH_RESPONSE while it has no
                // CID). Their datagram counts for the new path's amplification limit then.
                self.hold_early(now, path_id, *rx, pkt, is_last);
                return;
            }
            self.shared.stats.dropped_packets += 1;
            if self.would_refuse_path(path_id)
                && matches!(self.unprotect(now, level, path_id, parsed, pkt), Ok(Some(_)))
            {
                self.refuse_path(now, path_id);
            }
            return;
        }
        // RFC 9001 §5.7: a server must not process 1-RTT packets before its handshake
        // completes. They can overtake a lost or reordered Finished, and with multipath they
        // carry frames that are only valid afterwards, so keep a few and process them then
        // (their datagram already counted for the amplification limit above).
        if level == Level::OneRtt && self.shared.side == Side::Server && !self.shared.handshake_complete {
            self.hold_early(now, path_id, Rx { datagram_len: 0, ..*rx }, pkt, is_last);
            return;
        }
        // Closing: answer with CONNECTION_CLOSE, process nothing (RFC 9000 §10.2.1), and
        // answer ever fewer datagrams (exponential backoff on the number received): each
        // answer costs us a packet, and a peer or spoofer could otherwise make us send one
        // per datagram.
        if matches!(self.shared.state, State::Closing { .. }) {
            if rx.datagram_len > 0 {
                self.shared.on_datagram_while_closing();
            }
            return;
        }
        if matches!(self.shared.state, State::Draining { .. }) {
            return;
        }
        let undo = switch_to.map(|v| self.try_switch(v));
        let opened = self.unprotect(now, level, path_id, parsed, pkt);
        match (&opened, undo) {
            (Ok(Some(_)), undo) if level != Level::OneRtt => self.settle_version(undo.is_some()),
            (_, Some(undo)) => self.undo_switch(undo),
            _ => {}
        }
        match opened {
            Ok(Some((pn, header_len, payload_len, _key_phase))) => {
                let payload = &pkt[header_len..header_len + payload_len];
                self.on_packet_authenticated(now, rx, level, path_id, parsed, pn, payload);
            }
            Ok(None) => {
                self.shared.stats.dropped_packets += 1;
                // RFC 9000 §10.3.1: an undecryptable packet ending in a known reset token.
                if level == Level::OneRtt && is_last && pkt.len() >= 21 {
                    let mut token = [0u8; 16];
                    token.copy_from_slice(&pkt[pkt.len() - 16..]);
                    if self.shared.peer_cids.values().any(|p| p.is_reset_token(&token)) {
                        tracing::debug!("stateless reset received");
                        self.host().enter_draining(now, ConnectionError::Reset);
                        self.set_drained(None);
                    }
                }
            }
            Err(e) => self.host().close_with_error(now, e),
        }
    }

    /// Removes header and packet protection. `Ok(None)` means "drop the packet".
    /// Returns the full packet number, the header length and the plaintext length.
    fn unprotect(
        &mut self,
        now: Instant,
        level: Level,
        path_id: u64,
        parsed: &ParsedPacket,
        pkt: &mut [u8],
    ) -> Result<Option<(u64, usize, usize, bool)>, TransportError> {
        let space_id = level.space();
        let pi = self.path_index(path_id);
        let largest = match pi {
            Some(pi) => match self.space_mut(space_id, pi) {
                Some(s) => s.received.largest().map(|(pn, _)| pn),
                None => return Ok(None),
            },
            // A new path: its packet number space starts empty.
            None => None,
        };
        // (With one packet number space for all paths the plain nonce serves.)
        let multipath = self.shared.mp.enabled && self.shared.mp.single_space.is_none();
        let hp = match level {
            Level::Initial => self.shared.initial_keys_for(parsed.version).map(|k| &*k.remote.header),
            Level::Handshake => self.shared.handshake_keys.as_ref().map(|k| &*k.remote.header),
            Level::OneRtt => self.shared.one_rtt.as_ref().map(|k| k.remote_header_key()),
            Level::ZeroRtt => self.shared.zero_rtt.keys().map(|k| &*k.header),
        };
        let Some(hp) = hp else { return Ok(None) };
        let Ok(hdr) = remove_header_protection(pkt, parsed.pn_offset, hp) else {
            return Ok(None);
        };
        let pn = decode_pn(largest, hdr.truncated_pn, hdr.pn_len);
        let header_len = parsed.pn_offset + hdr.pn_len;
        let (header, payload) = pkt.split_at_mut(header_len);
        let key_phase = hdr.first_byte & 0x04 != 0;
        let plain_len = match level {
            Level::Initial | Level::Handshake | Level::ZeroRtt => {
                let key = match level {
                    Level::Initial => self.shared.initial_keys_for(parsed.version).map(|k| &*k.remote.packet),
                    Level::Handshake => self.shared.handshake_keys.as_ref().map(|k| &*k.remote.packet),
                    // 0-RTT packets belong to path 0, whose nonce is the plain one.
                    _ => self.shared.zero_rtt.keys().map(|k| &*k.packet),
                };
                let Some(key) = key else { return Ok(None) };
                match key.decrypt_in_place(pn, header, payload) {
                    Ok(p) => p.len(),
                    Err(_) => return Ok(None),
                }
            }
            _ => {
                let Some(keys) = self.shared.one_rtt.as_mut() else { return Ok(None) };
                let mut new_marks = crate::crypto::key_update::PathKeyMarks::default();
                let marks = match pi {
                    Some(pi) => &mut self.paths[pi].key_marks,
                    None => &mut new_marks,
                };
                let choice = keys.remote_key_for_path(key_phase, marks, pn);
                let Some(key) = keys.remote_key(choice) else { return Ok(None) };
                // RFC 10069 §2.4: the path ID is part of the nonce.
                let opened = if multipath {
                    key.decrypt_in_place_for_path(path_id as u32, pn, header, payload)
                } else {
                    key.decrypt_in_place(pn, header, payload)
                };
                let len = match opened {
                    Ok(p) => p.len(),
                    Err(_) => {
                        // RFC 9001 §6.6: failed decryptions count against the integrity limit.
                        keys.on_decrypt_failed()?;
                        return Ok(None);
                    }
                };
                keys.on_remote_authenticated_path(choice, marks, pn)?;
                if pi.is_none() {
                    self.shared.new_path_marks = Some((path_id, new_marks));
                }
                if choice == RemoteKeyChoice::Next {
                    self.on_peer_key_update(now);
                }
                len
            }
        };
        // Reserved bits must be zero once protection is removed (RFC 9000 §17.2, §17.3.1).
        let reserved = if level == Level::OneRtt { 0x18 } else { 0x0c };
        if hdr.first_byte & reserved != 0 {
            return Err(TransportError::protocol_violation("reserved header bits set"));
        }
        Ok(Some((pn, header_len, plain_len, key_phase)))
    }

    #[allow(clippy::too_many_arguments)]
    fn on_packet_authenticated(
        &mut self,
        now: Instant,
        rx: &Rx,
        level: Level,
        path_id: u64,
        parsed: &ParsedPacket,
        pn: u64,
        payload: &[u8],
    ) {
        let space_id = level.space();
        let pi = match self.path_index(path_id) {
            Some(pi) => pi,
            None => match self.accept_path(now, path_id, rx) {
                Some(pi) => pi,
                None => return,
            },
        };
        let Some(space) = self.space_mut(space_id, pi) else { return };
        if space.received.is_duplicate(pn) {
            return;
        }
        let newest = space.received.largest().is_none_or(|(l, _)| pn > l);
        self.shared.idle_anchor = now;
        self.shared.idle_anchor_from_recv = true;
        // RFC 9000 §9.3: only the highest-numbered non-probing packet moves a path to a new
        // peer address (probing packets may come from anywhere the peer tries).
        // (A client's path moves only by its own decision: a server's packet from elsewhere
        // is the answer to a probe of its preferred address.)
        let server = self.shared.side == Side::Server;
        // (Looked at once per packet: again only after the path moved.)
        let mut moved = level == Level::OneRtt && self.rx_moved(pi, rx);
        if moved && server && newest && !super::multipath::is_probing(payload) {
            self.on_peer_address_change(now, pi, rx);
            moved = self.rx_moved(pi, rx);
        }
        if let Some((mut host, path)) = self.host_for(pi) {
            host.on_packet_received(now, path, pi);
        }
        if level == Level::OneRtt {
            self.shared.packets_in_phase += 1;
            self.on_one_rtt_received();
        }
        match (self.shared.side, level) {
            (Side::Server, Level::Handshake) => {
                // RFC 9000 §8.1: a Handshake packet proves the client owns its address;
                // RFC 9001 §4.9.1: the server then discards Initial keys.
                self.paths[pi].validated = true;
                self.paths.publish(pi);
                self.host().discard_space(now, SpaceId::Initial);
                self.deliver_mail_or_close(now);
            }
            (Side::Client, Level::Initial) if !self.shared.got_server_cid => {
                self.shared.got_server_cid = true;
                if let Some(p) = self.shared.peer_cids.get_mut(&0) {
                    p.set_initial(parsed.scid);
                }
                self.shared.peer_initial_scid = Some(parsed.scid);
            }
            _ => {}
        }
        // A packet that did not move its path (probing, or older than the newest) from
        // another address: PATH_RESPONSEs go back there (RFC 9000 §8.2.2).
        self.shared.probe_from = moved.then_some(*rx);
        // The frames, with this path and the shared half; other paths by mail.
        let Some((mut host, path)) = self.host_for(pi) else { return };
        let processed = host.process_frames(now, level, path, pi, &parsed.dcid, payload, None);
        host.shared.probe_from = None;
        match processed {
            Ok(ack_eliciting) => {
                host.record_received(now, path, space_id, pn, ack_eliciting, rx.ecn);
                if ack_eliciting && space_id == SpaceId::Data {
                    host.note_heard(now, path, pi);
                }
                if space_id == SpaceId::Data && host.board.offers_on {
                    host.board.publish_offer(pi, path.ack_offer());
                }
                host.shared.qlog_packet_received(now, level, path_id, pn, parsed.packet_len, payload);
            }
            Err(e) => host.close_with_error(now, e),
        }
        self.finish_host_work(now);
    }

    fn on_version_negotiation(&mut self, now: Instant, parsed: &ParsedPacket, pkt: &[u8]) {
        // RFC 9000 §6.2: only a client that has received nothing else acts on it (an
        // earlier Version Negotiation packet included: an attempt that began after one
        // ignores the next), and a list that includes our version is ignored.
        if self.shared.side != Side::Client
            || self.shared.got_server_cid
            || self.shared.version.negotiated_from.is_some()
            || self.shared.version.restart_in.is_some()
        {
            return;
        }
        let versions = &pkt[parsed.pn_offset.min(pkt.len())..];
        // RFC 9368 §4: a list with the original version is ignored (it cannot be genuine).
        let original = self.shared.version.original.to_be_bytes();
        if versions.chunks_exact(4).any(|v| v == original) {
            return;
        }
        let offered: Vec<u32> = crate::packet::header::negotiation_versions(versions).collect();
        // RFC 9368 §2.2: the server wants another version; the client starts a new
        // connection attempt in the version it prefers among those listed, if any
        // ([`Connection::take_version_restart`]: the endpoint does it). This one ends.
        let choice = super::version::incompatible_choice(&self.shared.config, &offered);
        tracing::debug!(
            offered = ?offered.iter().map(|v| crate::packet::version::name(*v)).collect::<Vec<_>>(),
            restart_in = ?choice.map(crate::packet::version::name),
            "version negotiation: the server does not speak our version"
        );
        self.shared.version.restart_in = choice;
        self.host().enter_draining(now, ConnectionError::VersionMismatch);
        self.set_drained(None);
    }
}

/// Where a datagram came from and arrived.
#[derive(Clone, Copy)]
pub(crate) struct Rx {
    /// Local address it arrived at.
    pub local: SocketAddr,
    /// The peer's address.
    pub remote: SocketAddr,
    /// ECN codepoint.
    pub ecn: Option<Ecn>,
    /// Size of the whole datagram for its first packet, 0 for the coalesced ones after it.
    pub datagram_len: usize,
}

#[cfg(test)]
#[path = "tests_recv_levels.rs"]
mod tests;

impl Host<'_> {
    /// The peer sent an ack-eliciting 1-RTT packet on `path` (in `slot`) now: noted on the
    /// path and published, for the other paths' dead-path checks (`PathState::on_pto`).
    pub(super) fn note_heard(&mut self, now: Instant, path: &mut PathState, slot: usize) {
        path.last_eliciting_recv = Some(now);
        self.board.publish_heard(slot, path.last_eliciting_recv);
    }

    /// A packet of `space_id` (the path's data space, or a handshake space), its frames
    /// processed, is recorded for acknowledgement.
    pub(super) fn record_received(
        &mut self,
        now: Instant,
        path: &mut PathState,
        space_id: SpaceId,
        pn: u64,
        ack_eliciting: bool,
        ecn: Option<Ecn>,
    ) {
        let space = match space_id {
            SpaceId::Data => Some(&mut path.data),
            _ => self.shared.handshake_space_mut(space_id),
        };
        if let Some(space) = space {
            space.received.on_packet(pn, ack_eliciting, now, ecn);
            space.on_packet_recorded();
        }
    }

    /// Dispatches every frame of a packet; returns whether the packet was ack-eliciting.
    /// `walked`: the path already handled its own frames before this payload offset while
    /// opening the packet in a receive batch (`conn/path_frames.rs`); the fates of its own
    /// ACK frames there, in order, are applied where those frames stand.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn process_frames(
        &mut self,
        now: Instant,
        level: Level,
        path: &mut PathState,
        slot: usize,
        dcid: &ConnectionId,
        payload: &[u8],
        mut walked: Option<(usize, &mut WalkedFates<'_>)>,
    ) -> Result<bool, TransportError> {
        let path_id = path.id;
        if payload.is_empty() {
            // RFC 9000 §12.4: a packet with no frames is a PROTOCOL_VIOLATION.
            return Err(TransportError::protocol_violation("packet without frames"));
        }
        let mut ack_eliciting = false;
        let mut r = crate::coding::Reader::new(payload);
        while let Some(&byte) = r.peek_rest().first() {
            let at = r.position();
            let own_walked = walked.as_ref().is_some_and(|(end, _)| at < *end);
            if StreamFrame::is_stream_type(byte) {
                // The common frame of a transfer, handled without the general `Frame`
                // (same checks and errors as `Frame::decode` and `on_frame`).
                let ty = u64::from(byte);
                let _ = r.u8();
                let s = StreamFrame::decode(ty, &mut r).map_err(|e| e.with_frame(ty))?;
                if !matches!(level, Level::ZeroRtt | Level::OneRtt) {
                    return Err(
                        TransportError::protocol_violation("frame not allowed at this encryption level").with_frame(ty)
                    );
                }
                ack_eliciting = true;
                self.shared.streams.on_stream_frame(s.id, s.offset, s.data, s.fin).map_err(|e| e.or_frame(ty))?;
                continue;
            }
            match u64::from(byte) {
                ft::PADDING => {
                    // The zero bytes after it belong to it (RFC 9000 §19.1).
                    let n = r.peek_rest().iter().take_while(|b| **b == 0).count();
                    let _ = r.bytes(n);
                    continue;
                }
                ty @ (ft::ACK | ft::ACK_ECN | ft::PATH_ACK | ft::PATH_ACK_ECN) => {
                    // Also without the general `Frame`: most packets of a transfer carry one.
                    let _ = r.u8();
                    let is_path_ack = matches!(ty, ft::PATH_ACK | ft::PATH_ACK_ECN);
                    let ecn = matches!(ty, ft::ACK_ECN | ft::PATH_ACK_ECN);
                    let ack = AckFrame::decode(&mut r, is_path_ack, ecn).map_err(|e| e.with_frame(ty))?;
                    let allowed = if is_path_ack { level == Level::OneRtt } else { level != Level::ZeroRtt };
                    if !allowed {
                        return Err(TransportError::protocol_violation("frame not allowed at this encryption level")
                            .with_frame(ty));
                    }
                    if own_walked && path.owns_ack(ack.path_id, self.shared.mp.enabled) {
                        // The path handled it while opening the packet: its shared part now.
                        super::touch!(self, acks_in_batch);
                        if let Some(f) = walked.as_mut().and_then(|(_, f)| f.next()) {
                            self.apply_fates(now, path_id, f);
                        }
                        continue;
                    }
                    self.on_ack_received(now, level, path, slot, &ack).map_err(|e| e.or_frame(ty))?;
                    if self.shared.is_closed() {
                        break;
                    }
                    continue;
                }
                _ => {}
            }
            let frame = Frame::decode(&mut r)?;
            if !frame.allowed_in(level) {
                return Err(TransportError::protocol_violation("frame not allowed at this encryption level")
                    .with_frame(frame.ty()));
            }
            ack_eliciting |= frame.is_ack_eliciting();
            if own_walked && matches!(frame, Frame::PathChallenge(_)) {
                // Answered by the path while opening the packet.
                continue;
            }
            let ty = frame.ty();
            if let Frame::Datagram { data } = frame {
                // RFC 9221 §3: the size limit is on the frame as it came on the wire.
                let wire_len = r.position() - at;
                self.on_datagram_frame(path_id, data, wire_len).map_err(|e| e.or_frame(ty))?;
                continue;
            }
            self.on_frame(now, level, path, slot, dcid, frame).map_err(|e| e.or_frame(ty))?;
            if self.shared.is_closed() {
                break;
            }
        }
        Ok(ack_eliciting)
    }

    fn on_frame(
        &mut self,
        now: Instant,
        level: Level,
        path: &mut PathState,
        slot: usize,
        dcid: &ConnectionId,
        frame: Frame<'_>,
    ) -> Result<(), TransportError> {
        let path_id = path.id;
        match frame {
            Frame::Padding { .. } | Frame::Ping => {}
            Frame::Ack(ack) => self.on_ack_received(now, level, path, slot, &ack)?,
            Frame::Crypto { offset, data } if level == Level::OneRtt => {
                self.shared.one_rtt_crypto.on_recv(offset, data)?;
                while let Some(bytes) = self.shared.one_rtt_crypto.take_contiguous() {
                    self.on_crypto_data(level, &bytes)?;
                }
            }
            Frame::Crypto { offset, data } => {
                if self.shared.handshake_space_mut(level.space()).is_none() && self.shared.handshake_complete {
                    // The server drops its Handshake keys as its handshake completes (RFC 9001
                    // §4.9.2), which can be in the middle of the client's packet carrying
                    // Finished: CRYPTO frames after it (retransmitted handshake data) belong
                    // to a level that is gone, and like packets of that level are dropped.
                    return Ok(());
                }
                let space = self
                    .shared
                    .handshake_space_mut(level.space())
                    .ok_or_else(|| TransportError::protocol_violation("CRYPTO at a discarded level"))?;
                space.crypto.on_recv(offset, data)?;
                while let Some(bytes) =
                    self.shared.handshake_space_mut(level.space()).and_then(|s| s.crypto.take_contiguous())
                {
                    self.on_crypto_data(level, &bytes)?;
                }
            }
            Frame::NewToken { token } => {
                if self.shared.side == Side::Server {
                    return Err(TransportError::protocol_violation("NEW_TOKEN sent by a client"));
                }
                if token.is_empty() {
                    return Err(TransportError::frame_encoding("empty NEW_TOKEN"));
                }
                self.on_new_token(token);
            }
            Frame::Stream { id, offset, fin, data } => self.shared.streams.on_stream_frame(id, offset, data, fin)?,
            Frame::ResetStream { id, error_code, final_size } => {
                self.shared.streams.on_reset_stream(id, error_code, final_size)?
            }
            Frame::StopSending { id, error_code } => self.shared.streams.on_stop_sending(id, error_code)?,
            Frame::MaxData(max) => self.shared.streams.on_max_data(max),
            Frame::MaxStreamData { id, max } => self.shared.streams.on_max_stream_data(id, max)?,
            Frame::MaxStreams { dir, count } => self.shared.streams.on_max_streams(dir, count),
            Frame::DataBlocked(limit) => self.shared.streams.on_data_blocked(limit),
            Frame::StreamDataBlocked { id, limit } => self.shared.streams.on_stream_data_blocked(id, limit)?,
            Frame::StreamsBlocked { dir, limit } => self.shared.streams.on_streams_blocked(dir, limit),
            Frame::NewConnectionId(f) => self.on_new_cid_frame(now, &f)?,
            Frame::RetireConnectionId { path_id: target, seq } => {
                let target = match target {
                    None => 0,
                    Some(id) => {
                        self.check_mp_path_id(id)?;
                        id
                    }
                };
                self.on_retire_cid_frame(now, target, seq, path_id, dcid)?;
            }
            Frame::PathChallenge(data) => {
                if let Some(rx) = self.shared.probe_from {
                    if path.off_path_responses.len() >= MAX_PENDING_PATH_RESPONSES {
                        path.off_path_responses.remove(0);
                    }
                    let budget = 3 * rx.datagram_len;
                    path.off_path_responses.push(OffPathResponse { remote: rx.remote, local: rx.local, data, budget });
                } else {
                    path.queue_path_response(data);
                }
            }
            Frame::PathResponse(data) => self.on_path_response(data),
            Frame::ConnectionClose(c) => self.on_connection_close(now, &c),
            Frame::HandshakeDone => {
                if self.shared.side == Side::Server {
                    return Err(TransportError::protocol_violation("HANDSHAKE_DONE sent by a client"));
                }
                self.confirm_handshake(now);
            }
            Frame::Datagram { data } => {
                // (`process_frames` passes them with their wire length; this is the same
                // check with the frame's length form.)
                let len = crate::frame::datagram_header_len(Some(data.len())) + data.len();
                self.on_datagram_frame(path_id, data, len)?;
            }
            Frame::PathAbandon { path_id: id, error_code } => {
                self.check_mp_path_id(id)?;
                self.on_path_abandon_frame(now, id, error_code)?;
            }
            Frame::PathStatus { path_id: id, seq, backup } => {
                self.check_mp_path_id(id)?;
                self.on_path_status_frame(id, seq, backup);
            }
            Frame::MaxPathId(max) => self.on_max_path_id_frame(now, max)?,
            Frame::PathsBlocked(max) => {
                // RFC 10069 §4.7: it names the limit in force, which cannot be above ours.
                self.check_mp_path_id(max)?;
                self.shared.stats.paths_blocked_received += 1;
                tracing::debug!(max, "peer is blocked by our MAX_PATH_ID");
            }
            Frame::PathCidsBlocked { path_id: id, next_seq } => {
                self.check_mp_path_id(id)?;
                self.shared.stats.path_cids_blocked_received += 1;
                self.on_path_cids_blocked_frame(now, id, next_seq)?;
            }
        }
        Ok(())
    }

    /// An ACK or PATH_ACK frame arrived on `path` (in `slot`) at `level`.
    fn on_ack_received(
        &mut self,
        now: Instant,
        level: Level,
        path: &mut PathState,
        slot: usize,
        ack: &crate::frame::AckFrame<'_>,
    ) -> Result<(), TransportError> {
        let path_id = path.id;
        // An ACK frame is a PATH_ACK for path 0 (RFC 10069 §2.3).
        let acked_path = match ack.path_id {
            None => 0,
            Some(id) => {
                self.check_mp_path_id(id)?;
                id
            }
        };
        if level != Level::OneRtt {
            // The handshake spaces are the primary path's, which carries the handshake.
            return self.on_ack_frame(now, level.space(), path, slot, ack);
        }
        if path.data.single.is_some() {
            // One space for all paths: whatever path a PATH_ACK names (mpq sends none then),
            // its numbers are the space's.
            return self.on_single_space_ack(now, path, slot, ack);
        }
        if acked_path == path_id {
            return self.on_ack_frame(now, SpaceId::Data, path, slot, ack);
        }
        path.stats.rx_acks_for_other_paths += 1;
        // PATH_ACKs naming an unknown or discarded path are ignored.
        let Some(target) = self.path_slot(acked_path) else { return Ok(()) };
        // Another path's packets: that path handles the frame itself (mail, delivered after
        // this packet; a PATH_ACK of a packet it never sent closes the connection then).
        self.post(target).push_path_ack(ack.to_owned_frame());
        Ok(())
    }

    fn on_connection_close(&mut self, now: Instant, c: &ConnectionClose<'_>) {
        let reason = String::from_utf8_lossy(c.reason).into_owned();
        let err = match c.frame_type {
            Some(ft) => ConnectionError::ConnectionClosed(TransportError {
                code: TransportErrorCode(c.error_code),
                frame_type: Some(ft),
                reason,
            }),
            None => ConnectionError::ApplicationClosed { code: c.error_code, reason },
        };
        self.enter_draining(now, err);
    }
}

impl ConnShared {
    /// A datagram arrived while closing: the 1st, 2nd, 4th, 8th... are answered with
    /// CONNECTION_CLOSE (RFC 9000 §10.2.1).
    pub(super) fn on_datagram_while_closing(&mut self) {
        if let State::Closing { send_pending, received, answer_at, .. } = &mut self.state {
            *received += 1;
            if *received >= *answer_at {
                *send_pending = true;
                *answer_at = answer_at.saturating_mul(2);
            }
        }
    }
}
