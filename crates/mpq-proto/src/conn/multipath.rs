//! Multipath (RFC 10069): negotiation, path IDs and their connection IDs,
//! path validation, status, abandonment and the multipath frames.
//!
//! The per-path packet number spaces, recovery and congestion control live in
//! [`super::path::PathState`]; this module manages the path table and what the connection
//! tells the peer about it.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::RngCore;

use crate::cid::ConnectionId;
use crate::error::TransportError;
use crate::frame::NewConnectionId;
use crate::time::Instant;
use crate::types::{Side, SpaceId};

use super::board::PathView;
use super::cids::PeerCids;
use super::events::PathEvent;
use super::host::Host;
use super::mail::{AbandonOrder, ChallengeAnswer};
use super::path::{Challenge, OldPathChallenge, PathPhase, PathState};
use super::path_ack::Fated;
use super::recv::Rx;
use super::space::Control;
use super::ConnShared;
use super::{Connection, EndpointEvent, Event, State};

/// Largest path ID RFC 10069 allows (§2.1: a 32-bit value).
pub(crate) const MAX_PATH_ID_LIMIT: u64 = u32::MAX as u64;
/// PATH_ABANDON error code: the path's validation failed or it stopped working (RFC 10069 §4.2.1).
pub(crate) const PATH_UNSTABLE_OR_POOR: u64 = 0x3e76;
/// PATH_ABANDON error code: no room for another path (RFC 10069 §4.2.1).
pub(crate) const PATH_RESOURCE_LIMIT_REACHED: u64 = 0x3e75;
/// Most connection IDs we issue per path ID.
const MAX_CIDS_PER_PATH: u64 = 4;
/// Consecutive PTOs after which a potentially failed path is abandoned, when another path works.
pub(crate) const DEAD_PATH_PTOS: u32 = 4;
/// Path IDs the peer may close without ever using them (PATH_ABANDON for an ID with no
/// path, RFC 10069 §3.4), beyond one per path ID it did use and one per `UNUSED_PATH_ID_REFILL` of
/// multipath operation. Each one costs us a MAX_PATH_ID and fresh CIDs; past this
/// allowance it is abuse (RFC 9000 §21.9) and closes the connection with
/// PROTOCOL_VIOLATION. A client retrying a path over a dead interface burns such IDs too
/// (none of its packets reach us), but at most one per validation timeout of seconds:
/// the time-based part keeps it well inside the allowance.
pub(crate) const UNUSED_PATH_ID_ALLOWANCE: u64 = 16;
/// One more unused path ID allowed per this much time.
pub(crate) const UNUSED_PATH_ID_REFILL: Duration = Duration::from_secs(1);
/// Statistics of discarded paths kept for [`Connection::stats`]; older ones are dropped so
/// that a peer opening and abandoning paths all day does not grow our memory.
const MAX_CLOSED_PATH_STATS: usize = 64;

/// Connection-wide multipath state.
#[derive(Debug, Default)]
pub(crate) struct MultipathState {
    /// Both sides sent initial_max_path_id and the handshake completed.
    pub enabled: bool,
    /// Largest path ID we allow (our initial_max_path_id, raised with MAX_PATH_ID).
    pub local_max: u64,
    /// Largest path ID the peer allows.
    pub peer_max: u64,
    /// The peer's initial_max_path_id: MAX_PATH_ID may not go below it.
    pub peer_initial_max: u64,
    /// Next path ID the client uses to open a path.
    pub next_path_id: u64,
    /// Highest PATH_STATUS sequence number received per path ID, with the status (backup).
    pub peer_status: BTreeMap<u64, (u64, bool)>,
    /// Our latest status advice per path ID: sequence number and backup.
    pub local_status: BTreeMap<u64, (u64, bool)>,
    /// Multipath control frames to send (PATH_ABANDON, PATH_STATUS_*, MAX_PATH_ID).
    pub pending: Vec<Control>,
    /// PATHS_BLOCKED to send, with the peer's limit.
    pub paths_blocked: Option<u64>,
    /// The limit a PATHS_BLOCKED was last sent for.
    pub paths_blocked_sent: Option<u64>,
    /// PATH_CIDS_BLOCKED frames to send: path ID and next sequence number expected.
    pub cids_blocked: Vec<(u64, u64)>,
    /// The path ID `NewPathAllowed` was last signalled for.
    pub allowed_signalled: Option<u64>,
    /// Path IDs the peer closed (PATH_ABANDON) without ever using them.
    pub unused_closed: u64,
    /// When multipath was negotiated (the time-based part of the unused-ID allowance).
    pub since: Option<Instant>,
    /// Connection IDs issued, all path IDs together (a measure of the work a peer causes).
    pub cids_issued: u64,
    /// Both sides offered one packet number space for all paths: its counter, which every
    /// path joins (`TransportConfig::single_packet_number_space`).
    pub single_space: Option<super::space::SingleSpace>,
}

impl Connection {
    /// Called when the handshake completes (a server: once it has sent its Finished, see
    /// `drive_tls`): turns multipath on if both sides offered it. Once on, later calls do
    /// nothing (completion issues CIDs anyway).
    pub(crate) fn on_handshake_complete_multipath(&mut self, now: Instant) {
        if self.shared.mp.enabled {
            return;
        }
        let (Some(local), Some(peer)) = (
            self.shared.config.initial_max_path_id,
            self.shared.peer_params.as_ref().and_then(|p| p.initial_max_path_id),
        ) else {
            return;
        };
        self.shared.mp.enabled = true;
        let peer_single = self.shared.peer_params.as_ref().is_some_and(|p| p.single_packet_number_space);
        if self.shared.config.single_packet_number_space && peer_single {
            // Only path 0 exists (paths open once the handshake is complete): it goes on
            // numbering from where it is, now for every path.
            let counter = super::space::SingleSpace::default();
            for p in self.paths.iter_mut() {
                p.data.join_single_space(counter.clone());
            }
            self.shared.mp.single_space = Some(counter);
            tracing::debug!(side = ?self.shared.side, "one packet number space for all paths");
        }
        // Other paths may carry a path's ACKs from now on: they read its offers.
        self.paths.enable_offers();
        self.shared.mp.local_max = local.min(MAX_PATH_ID_LIMIT);
        self.shared.mp.peer_max = peer;
        self.shared.mp.peer_initial_max = peer;
        self.shared.mp.next_path_id = 1;
        self.shared.mp.since = Some(now);
        tracing::debug!(side = ?self.shared.side, local, peer, "multipath negotiated");
        self.host().issue_cids(now);
        self.shared.maybe_signal_new_path_allowed();
    }

    /// Whether a packet on the unknown path `id` may create a path (server side, RFC 10069 §3.1).
    pub(crate) fn may_accept_path(&self, id: u64) -> bool {
        self.may_accept_path_later(id)
            && self.shared.state == State::Established
            && self.shared.peer_cids.get(&id).is_some_and(|p| p.has_cid())
    }

    /// Whether a packet on the unknown path `id` may create a path once the handshake is
    /// complete and the client's CIDs for it have arrived (both may trail the new path's
    /// first packets: the server turns multipath on with its Finished).
    pub(crate) fn may_accept_path_later(&self, id: u64) -> bool {
        self.shared.mp.enabled
            && self.shared.side == Side::Server
            && id <= self.shared.mp.local_max
            && !self.shared.path_id_closed(id)
            && (self.paths.len() as u64) < self.shared.config.max_concurrent_paths
            && matches!(self.shared.state, State::Handshake | State::Established)
    }

    /// Whether a packet on the unknown path `id` opens a path we will refuse for lack of
    /// room (RFC 10069 §3.1: we then say so with PATH_ABANDON rather than let validation time out).
    pub(crate) fn would_refuse_path(&self, id: u64) -> bool {
        self.shared.mp.enabled
            && self.shared.side == Side::Server
            && self.shared.state == State::Established
            && id <= self.shared.mp.local_max
            && !self.shared.path_id_closed(id)
            && (self.paths.len() as u64) >= self.shared.config.max_concurrent_paths
    }

    /// Refuses the path the peer opened on `id` with an authenticated packet: PATH_ABANDON
    /// goes out on another path and the ID is closed.
    pub(crate) fn refuse_path(&mut self, now: Instant, id: u64) {
        tracing::debug!(side = ?self.shared.side, id, "no room for the peer's new path: abandoning it");
        self.shared.mp.pending.push(Control::PathAbandon(id, PATH_RESOURCE_LIMIT_REACHED));
        self.host().retire_path_id(now, id);
    }

    /// Creates the state of a path the peer opened with an authenticated packet.
    pub(crate) fn accept_path(&mut self, now: Instant, id: u64, rx: &Rx) -> Option<usize> {
        if !self.may_accept_path(id) {
            return None;
        }
        let mut path = PathState::new(id, rx.remote, &self.shared.config, false);
        if let Some(counter) = &self.shared.mp.single_space {
            path.data.join_single_space(counter.clone());
        }
        path.grease = self.shared.grease_key();
        path.local = Some(rx.local);
        path.phase = PathPhase::Validating;
        path.amp_received = rx.datagram_len as u64;
        path.stats.rx_bytes = rx.datagram_len as u64;
        path.challenge = Some(self.shared.new_challenge());
        // Each path discovers its own PMTU from the base (RFC 8899 §5.2), within the
        // peer's limit (RFC 9000 §18.2).
        path.set_peer_udp_limit(self.shared.peer_udp_limit(), self.shared.handshake_confirmed);
        path.peer_backup = self.shared.mp.peer_status.get(&id).is_some_and(|s| s.1);
        // The key-phase marks its first packet left while it was authenticated.
        if let Some((_, marks)) = self.shared.new_path_marks.take().filter(|(p, _)| *p == id) {
            path.key_marks = marks;
        }
        let slot = self.paths.insert(path);
        tracing::debug!(side = ?self.shared.side, id, remote = %rx.remote, "peer opened a path");
        self.shared.events.push_back(Event::Path(PathEvent::Opened { id, remote: rx.remote }));
        self.host().qlog_path(now, id, "new");
        Some(slot)
    }

    pub(crate) fn new_challenge_pub(&mut self) -> Challenge {
        self.shared.new_challenge()
    }

    /// An authenticated, newest packet of a known path came from another address: NAT
    /// rebinding (RFC 10069 §3.1.2, RFC 9000 §9.3). The path moves there and is validated again.
    pub(crate) fn on_peer_address_change(&mut self, now: Instant, pi: usize, rx: &Rx) {
        if !self.shared.handshake_confirmed {
            return;
        }
        let challenge = self.shared.new_challenge();
        let old_data = self.shared.new_challenge().data;
        let path = &mut self.paths[pi];
        if super::migrate::same_addr(path.remote, rx.remote) {
            tracing::info!(id = path.id, from = ?path.local, to = %rx.local, "the peer moved to another of our addresses");
        } else {
            // info: a move is rare and worth seeing at -v (the interop suite checks for it).
            tracing::info!(id = path.id, from = %path.remote, to = %rx.remote, "peer address changed");
        }
        if path.validated {
            // RFC 9000 §9.3.3: the previously active path gets a PATH_CHALLENGE.
            path.old_challenge =
                Some(OldPathChallenge { remote: path.remote, local: path.local, data: old_data, send_pending: true });
        }
        path.rebind_from.get_or_insert(path.remote);
        path.remote = rx.remote;
        path.local = Some(rx.local);
        path.validated = false;
        path.amp_received = rx.datagram_len as u64;
        path.amp_sent = 0;
        path.challenge = Some(challenge);
        let id = path.id;
        self.paths.publish(pi);
        // RFC 9000 §9.5: "an endpoint MUST NOT reuse a connection ID when sending to more
        // than one destination address" (reuse is allowed only after a NAT rebinding, which
        // cannot be told from an active migration here): a spare ID of the peer's, if any.
        if let Some(cids) = self.shared.peer_cids.get_mut(&id) {
            cids.switch_to_unused();
        }
        self.host().qlog_path(now, id, "rebinding");
    }

    /// Drops the state of an abandoned path once its three PTOs passed.
    pub(crate) fn discard_path(&mut self, now: Instant, pi: usize) {
        let path = self.paths.remove(pi);
        let id = path.id;
        if self.shared.closed_paths.len() >= MAX_CLOSED_PATH_STATS {
            self.shared.closed_paths.pop_front();
        }
        self.shared.closed_paths.push_back(path.snapshot());
        self.shared.next_path_cursor = 0;
        self.shared.events.push_back(Event::Path(PathEvent::Closed { id }));
        self.host().qlog_path(now, id, "closed");
        self.host().retire_path_id(now, id);
    }
}

/// True when every frame of the packet is a probing frame (RFC 9000 §9.1: PATH_CHALLENGE,
/// PATH_RESPONSE, NEW_CONNECTION_ID, PADDING; with multipath PATH_NEW_CONNECTION_ID too).
/// A malformed payload counts as non-probing: it is rejected when processed anyway.
pub(crate) fn is_probing(payload: &[u8]) -> bool {
    use crate::frame::Frame;
    crate::frame::iter_frames(payload).all(|f| {
        matches!(
            f,
            Ok(Frame::Padding { .. } | Frame::PathChallenge(_) | Frame::PathResponse(_) | Frame::NewConnectionId(_))
        )
    })
}

impl Host<'_> {
    /// Keeps enough of our connection IDs with the peer (RFC 9000 §5.1.1), for path 0 and,
    /// with multipath, proactively for every path ID both sides allow (RFC 10069 §3.2.1).
    pub(crate) fn issue_cids(&mut self, _now: Instant) {
        if self.shared.local_cid_len == 0 {
            return;
        }
        let peer_limit = self.shared.peer_params.as_ref().map(|p| p.active_connection_id_limit).unwrap_or(2);
        let want = peer_limit.min(if self.shared.mp.enabled { MAX_CIDS_PER_PATH } else { 8 });
        let mut ids = vec![0];
        if self.shared.mp.enabled {
            // Path IDs already closed are never reused.
            let limit = self.usable_path_id_limit();
            ids.extend(self.shared.closed_ids.open_ids(limit));
        }
        for id in ids {
            if self.path_slot(id).is_some_and(|i| !self.view(i).is_some_and(PathView::is_open)) {
                continue;
            }
            loop {
                let have = self.shared.local_cids.get(&id).map_or(0, |l| l.active.len() as u64);
                if have >= want {
                    break;
                }
                let cid = self.random_cid();
                if self.shared.local_cids.values().any(|l| l.active.values().any(|c| c.cid == cid)) {
                    continue;
                }
                let token = self.shared.reset_key.token(&cid);
                self.shared.local_cids.entry(id).or_default().issue(cid, token, true);
                self.shared.endpoint_events.push_back(EndpointEvent::NewCid(cid));
                self.shared.mp.cids_issued += 1;
            }
        }
    }

    /// PATH_RESPONSE (RFC 9000 §8.2.3): validates the path when it echoes our challenge.
    pub(crate) fn on_path_response(&mut self, data: [u8; 8]) {
        // The response may arrive on any path of ours; it validates the path it answers,
        // found by the challenge payload that path published on the board. That path
        // handles the answer itself (mail).
        let target = self.views().find(|(_, v)| v.challenge == Some(data)).map(|(slot, _)| slot);
        let (slot, recheck) = match target {
            Some(slot) => (slot, Some(self.new_challenge())),
            None if self.shared.preferred_probe.is_some_and(|p| p.data == data) => {
                // The server answered at its preferred address (RFC 9000 §9.6.1): the path
                // moves at the next send.
                if let Some(p) = self.shared.preferred_probe.as_mut() {
                    p.validated = true;
                }
                return;
            }
            None => {
                // Maybe the previous peer address still answers (RFC 9000 §9.3.3): its next
                // non-probing packet from there moves the path back (on_peer_address_change).
                let old = self.views().find(|(_, v)| v.old_challenge == Some(data));
                let Some((slot, _)) = old else { return };
                (slot, None)
            }
        };
        self.post(slot).push_challenge_answer(ChallengeAnswer { data, recheck });
    }

    /// Abandons the path in slot `pi` (RFC 10069 §3.4): PATH_ABANDON goes out (on another path), the
    /// peer's CIDs for it are retired, in-flight frames are resent elsewhere, the state stays
    /// for three PTOs to acknowledge late packets. The path stops itself when the connection
    /// delivers the mail posted here.
    pub(crate) fn abandon(&mut self, now: Instant, pi: usize, error_code: u64, by_peer: bool) {
        if !self.view(pi).is_some_and(|v| v.is_open()) {
            return;
        }
        if !self.views().any(|(i, v)| i != pi && v.is_open()) {
            // RFC 10069 §3.4: the last path is going: the connection cannot continue. Close it on this
            // path while the peer's CIDs for it are still at hand, so CONNECTION_CLOSE can
            // be sent (a PATH_ABANDON would add nothing).
            let id = self.view(pi).map_or(0, |v| v.id);
            tracing::debug!(side = ?self.shared.side, id, error_code, by_peer, "last path abandoned: closing");
            self.shared.events.push_back(Event::Path(PathEvent::Abandoned { id, error_code, by_peer }));
            let err = TransportError::new(crate::error::TransportErrorCode::NO_ERROR, "last path abandoned");
            self.close_with_error(now, err);
            return;
        }
        let keep = 3 * self.max_pto();
        // The path stops itself (mail), then `on_abandoned` does the shared part.
        self.post(pi).abandon = Some(AbandonOrder { keep, by_peer, error_code });
    }

    /// The path ID `id` is used up (RFC 10069 §3.4): its CIDs go, it is never used again, and the
    /// peer gets another one with MAX_PATH_ID. Every table keyed by path ID forgets it, so
    /// that a peer cycling through path IDs does not grow them.
    fn retire_path_id(&mut self, now: Instant, id: u64) {
        self.shared.closed_ids.insert(id);
        if let Some(l) = self.shared.local_cids.remove(&id) {
            for c in l.active.values() {
                self.shared.endpoint_events.push_back(EndpointEvent::RetireCid(c.cid));
            }
        }
        self.shared.peer_cids.remove(&id);
        self.shared.mp.peer_status.remove(&id);
        self.shared.mp.local_status.remove(&id);
        self.shared.mp.cids_blocked.retain(|(p, _)| *p != id);
        if self.shared.mp.enabled && self.shared.mp.local_max < MAX_PATH_ID_LIMIT && !self.shared.is_closed() {
            self.shared.mp.local_max += 1;
            self.shared.mp.pending.retain(|c| !matches!(c, Control::MaxPathId(_)));
            self.shared.mp.pending.push(Control::MaxPathId(self.shared.mp.local_max));
            self.issue_cids(now);
        }
    }

    /// (PATH_)NEW_CONNECTION_ID (RFC 9000 §19.15, RFC 10069 §4.4).
    pub(crate) fn on_new_cid_frame(&mut self, _now: Instant, f: &NewConnectionId) -> Result<(), TransportError> {
        let id = match f.path_id {
            None => 0,
            Some(id) => {
                self.check_mp_path_id(id)?;
                id
            }
        };
        // CIDs are unique across the connection, whatever their path ID (RFC 10069 §3.2.1).
        if self.shared.peer_cids.iter().any(|(pid, p)| *pid != id && p.active.values().any(|c| c.cid == f.cid)) {
            return Err(TransportError::protocol_violation("connection ID issued for two path IDs"));
        }
        if self.path_slot(id).is_some_and(|i| !self.view(i).is_some_and(PathView::is_open)) {
            return Ok(()); // abandoned: ignore (RFC 10069 §4)
        }
        if self.path_id_closed(id) {
            return Ok(()); // a path ID already closed
        }
        let limit = self.shared.config.active_connection_id_limit;
        let cids = self.shared.peer_cids.entry(id).or_insert_with(|| PeerCids::empty(limit));
        cids.on_new_cid(f.seq, f.retire_prior_to, f.cid, f.reset_token)?;
        self.maybe_signal_new_path_allowed();
        Ok(())
    }

    /// (PATH_)RETIRE_CONNECTION_ID: retires one of our CIDs of `target` and issues a
    /// replacement while the path is open.
    pub(crate) fn on_retire_cid_frame(
        &mut self,
        now: Instant,
        target: u64,
        seq: u64,
        packet_path: u64,
        dcid: &ConnectionId,
    ) -> Result<(), TransportError> {
        let Some(l) = self.shared.local_cids.get_mut(&target) else {
            if self.path_id_closed(target) {
                return Ok(()); // late, for a path that no longer exists (RFC 10069 §4)
            }
            return Err(TransportError::protocol_violation("RETIRE_CONNECTION_ID for an unissued sequence number"));
        };
        // The packet's own CID may only be named if it belongs to the same path ID.
        let own = if packet_path == target { *dcid } else { ConnectionId::EMPTY };
        if let Some(cid) = l.retire(seq, &own)? {
            self.shared.endpoint_events.push_back(EndpointEvent::RetireCid(cid));
            self.issue_cids(now);
        }
        Ok(())
    }

    /// PATH_ABANDON from the peer (RFC 10069 §3.4).
    pub(crate) fn on_path_abandon_frame(
        &mut self,
        now: Instant,
        id: u64,
        error_code: u64,
    ) -> Result<(), TransportError> {
        let Some(pi) = self.path_slot(id) else {
            // A path ID with no state (never used, or already discarded): it is closed for
            // good. Answer in kind (RFC 10069 §3.4) so that the peer forgets it too.
            if !self.path_id_closed(id) {
                // Each such ID gets replaced (MAX_PATH_ID, fresh CIDs): a peer burning IDs
                // it never uses would have us issue CIDs without end (RFC 9000 §21.9).
                self.shared.mp.unused_closed += 1;
                let used = (self.shared.closed_ids.len() + self.path_count() as u64)
                    .saturating_sub(self.shared.mp.unused_closed);
                let elapsed = self.shared.mp.since.map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
                let earned = (elapsed.as_millis() / UNUSED_PATH_ID_REFILL.as_millis()) as u64;
                if self.shared.mp.unused_closed > used + UNUSED_PATH_ID_ALLOWANCE + earned {
                    return Err(TransportError::protocol_violation("too many unused path IDs abandoned"));
                }
                tracing::debug!(side = ?self.shared.side, id, "peer abandoned an unused path ID");
                self.shared.mp.pending.push(Control::PathAbandon(id, error_code));
                self.retire_path_id(now, id);
            }
            return Ok(());
        };
        if !self.view(pi).is_some_and(|v| v.is_open()) {
            // We abandoned it first: the path keeps its state for three PTOs from the
            // peer's answer (mail).
            let keep = 3 * self.max_pto();
            self.post(pi).abandon = Some(AbandonOrder { keep, by_peer: true, error_code });
            return Ok(());
        }
        self.abandon(now, pi, error_code, true);
        Ok(())
    }

    /// PATH_STATUS_BACKUP / PATH_STATUS_AVAILABLE (RFC 10069 §3.3, §4.3): the newest sequence number wins.
    pub(crate) fn on_path_status_frame(&mut self, id: u64, seq: u64, backup: bool) {
        // A closed path ID keeps no status: the table holds only IDs still usable.
        if self.path_id_closed(id) || self.shared.mp.peer_status.get(&id).is_some_and(|(s, _)| seq <= *s) {
            return;
        }
        self.shared.mp.peer_status.insert(id, (seq, backup));
        if let Some(slot) = self.path_slot(id) {
            // The path takes its new status itself (mail).
            self.post(slot).peer_backup = Some(backup);
        }
    }

    /// MAX_PATH_ID (RFC 10069 §4.6).
    pub(crate) fn on_max_path_id_frame(&mut self, now: Instant, max: u64) -> Result<(), TransportError> {
        self.check_mp()?;
        if max > MAX_PATH_ID_LIMIT || max < self.shared.mp.peer_initial_max {
            return Err(TransportError::protocol_violation("invalid MAX_PATH_ID"));
        }
        if max > self.shared.mp.peer_max {
            self.shared.mp.peer_max = max;
            self.issue_cids(now);
            self.maybe_signal_new_path_allowed();
        }
        Ok(())
    }

    /// PATH_CIDS_BLOCKED (RFC 10069 §4.7): a sequence number beyond what we issued is a violation;
    /// otherwise top the path's CIDs up.
    pub(crate) fn on_path_cids_blocked_frame(
        &mut self,
        now: Instant,
        id: u64,
        next_seq: u64,
    ) -> Result<(), TransportError> {
        if self.path_id_closed(id) || self.path_slot(id).is_some_and(|i| !self.view(i).is_some_and(PathView::is_open)) {
            return Ok(()); // late, for a path that is gone (RFC 10069 §4)
        }
        let issued = self.shared.local_cids.get(&id).map_or(0, |l| l.next_seq);
        if next_seq > issued {
            return Err(TransportError::protocol_violation("PATH_CIDS_BLOCKED beyond the issued sequence numbers"));
        }
        self.issue_cids(now);
        if let Some(l) = self.shared.local_cids.get_mut(&id) {
            // Re-advertise what is active in case the frames were lost.
            let seqs: Vec<u64> = l.active.keys().copied().filter(|s| *s >= next_seq).collect();
            l.to_advertise.extend(seqs);
        }
        Ok(())
    }

    /// The largest PTO of all paths (closing, draining, key updates and path state
    /// retention use it, RFC 10069 §2.5, §2.6, §3.4).
    pub(crate) fn max_pto(&self) -> Duration {
        self.board.max_pto(self.peer_max_ack_delay())
    }

    /// An authenticated packet arrived on `path` (in `slot`) at `now`: its counters, and a
    /// potentially failed path is alive again.
    pub(crate) fn on_packet_received(&mut self, now: Instant, path: &mut PathState, slot: usize) {
        path.stats.rx_packets += 1;
        path.last_recv = Some(now);
        if path.potentially_failed {
            path.potentially_failed = false;
            let id = path.id;
            self.board.publish(slot, path.view());
            tracing::debug!(id, "path recovered");
            self.shared.events.push_back(Event::Path(PathEvent::Recovered { id }));
        }
    }
}

impl ConnShared {
    /// Multipath frames are only valid once negotiated (RFC 10069 §2), else PROTOCOL_VIOLATION.
    pub(crate) fn check_mp(&self) -> Result<(), TransportError> {
        if self.mp.enabled {
            Ok(())
        } else {
            Err(TransportError::protocol_violation("multipath frame without multipath"))
        }
    }

    /// A path ID above our advertised maximum is a PROTOCOL_VIOLATION (RFC 10069 §4).
    pub(crate) fn check_mp_path_id(&self, id: u64) -> Result<(), TransportError> {
        self.check_mp()?;
        if id > self.mp.local_max {
            return Err(TransportError::protocol_violation("path ID above our MAX_PATH_ID"));
        }
        Ok(())
    }

    /// Path IDs both sides allow, within the configured budget of concurrent paths.
    fn usable_path_id_limit(&self) -> u64 {
        if !self.mp.enabled {
            return 0;
        }
        // Pre-issue CIDs only for as many fresh path IDs as we would accept paths. Path IDs
        // are used in order, so with IDs 0..=k used, `closed` of them gone and at most
        // `max_concurrent_paths` paths (path 0 included, as `may_accept_path` counts them),
        // the highest ID a new path could still get is `closed + max_concurrent_paths - 1`.
        // (Without the `- 1`, CIDs went out for an ID whose path the server then dropped.)
        let closed = self.closed_ids.len();
        let budget = (closed + self.config.max_concurrent_paths).saturating_sub(1);
        self.mp.local_max.min(self.mp.peer_max).min(budget)
    }

    /// The path ID was used by a path whose state is gone: it is never used again (RFC 10069 §3.4).
    /// Path IDs may be opened in any order, so this is a set, not a high-water mark.
    fn path_id_closed(&self, id: u64) -> bool {
        self.closed_ids.contains(id)
    }

    /// Emits `NewPathAllowed` once per path ID when the client could open it.
    pub(crate) fn maybe_signal_new_path_allowed(&mut self) {
        if !self.mp.enabled || self.side != Side::Client {
            return;
        }
        let id = self.closed_ids.next_open(self.mp.next_path_id);
        if self.mp.allowed_signalled == Some(id) {
            return;
        }
        if self.handshake_complete
            && id <= self.mp.peer_max
            && id <= self.mp.local_max
            && self.peer_cids.get(&id).is_some_and(|p| p.has_cid())
            && self.local_cids.get(&id).is_some_and(|l| !l.active.is_empty() && l.advertised)
        {
            self.mp.allowed_signalled = Some(id);
            self.events.push_back(Event::Path(PathEvent::NewPathAllowed));
        }
    }

    pub(super) fn new_challenge(&mut self) -> Challenge {
        let mut data = [0u8; 8];
        self.rng.fill_bytes(&mut data);
        Challenge { data, send_pending: true, sent_at: None, fail_at: None, full_size: false }
    }

    /// A multipath control frame was lost: resend it unless superseded (RFC 10069 §4.2–§4.7).
    pub(crate) fn on_mp_control_lost(&mut self, c: Control) {
        match c {
            Control::PathAbandon(..) => self.mp.pending.push(c),
            Control::PathStatus(id, seq) if self.mp.local_status.get(&id).is_some_and(|(s, _)| *s == seq) => {
                self.mp.pending.push(c)
            }
            Control::MaxPathId(v) if v == self.mp.local_max => self.mp.pending.push(c),
            _ => {}
        }
    }
}

impl Host<'_> {
    /// Path validation timed out.
    pub(crate) fn on_validation_failed(&mut self, now: Instant, path: &mut PathState, slot: usize) {
        path.challenge = None;
        if let Some(old) = path.rebind_from.take() {
            // The rebinding did not check out: go back to the address that worked.
            path.remote = old;
            path.validated = true;
            self.board.publish(slot, path.view());
            return;
        }
        if !self.shared.mp.enabled {
            // A client's check of the address it migrated to (the only path: nothing to
            // abandon it for): the path stays, and loss recovery and the idle timeout judge it.
            tracing::debug!(id = path.id, "no answer to the challenge after the migration");
            self.board.publish(slot, path.view());
            return;
        }
        tracing::debug!(id = path.id, "path validation failed");
        self.board.publish(slot, path.view());
        self.abandon(now, slot, PATH_UNSTABLE_OR_POOR, false);
    }
}

impl Host<'_> {
    /// The shared part of a path's abandonment, after the path stopped itself: our
    /// PATH_ABANDON queued, the peer's CIDs for it retired (RFC 10069 §3.4), the frames it had in
    /// flight back in the send queues, the application told.
    pub(crate) fn on_abandoned(&mut self, now: Instant, id: u64, order: AbandonOrder, send_abandon: bool, lost: Fated) {
        let (error_code, by_peer) = (order.error_code, order.by_peer);
        if send_abandon {
            self.shared.mp.pending.push(Control::PathAbandon(id, error_code));
        }
        // The peer's CIDs of an abandoned path count as retired (RFC 10069 §3.4).
        self.shared.peer_cids.remove(&id);
        for (_, p) in lost {
            self.shared.on_frames_lost(SpaceId::Data, p.frames);
        }
        tracing::debug!(side = ?self.shared.side, id, error_code, by_peer, "path abandoned");
        self.shared.events.push_back(Event::Path(PathEvent::Abandoned { id, error_code, by_peer }));
        self.qlog_path(now, id, "abandoned");
    }
}
