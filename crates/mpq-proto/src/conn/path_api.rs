//! The application's handle on multipath: open, abandon and prioritise paths.

use std::net::SocketAddr;

use crate::time::Instant;

use super::events::PathEvent;
use super::path::{PathPhase, PathState};
use super::space::Control;
use super::{Connection, Event, PathError, PathStatus};

impl Connection {
    /// True once both sides offered multipath (initial_max_path_id) and the handshake
    /// completed (RFC 10069 §2).
    pub fn is_multipath(&self) -> bool {
        self.shared.mp.enabled
    }

    /// Opens a new path from `local` (`None`: the runtime's default socket) to `remote`
    /// and starts validating it (client only, RFC 10069 §3, §3.1). Returns its path ID; a
    /// [`PathEvent::Validated`] follows when the peer answers the PATH_CHALLENGE.
    ///
    /// When the peer's path ID limit is the obstacle, PATHS_BLOCKED is sent; when it has
    /// not issued a CID for the next path ID, PATH_CIDS_BLOCKED is.
    pub fn open_path(
        &mut self,
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        status: PathStatus,
    ) -> Result<u64, PathError> {
        if self.is_closed() {
            return Err(PathError::Closed);
        }
        // RFC 10069 §3: paths may be used once the handshake is complete (the client's
        // completion: it has the server's parameters and 1-RTT keys); opening one is not a
        // migration, which RFC 9000 §9 holds back until the handshake is confirmed.
        if !self.shared.mp.enabled || !self.shared.handshake_complete {
            return Err(PathError::MultipathNotNegotiated);
        }
        if self.shared.side != super::Side::Client {
            return Err(PathError::ServerCannotOpen);
        }
        if self.paths.len() as u64 >= self.shared.config.max_concurrent_paths {
            return Err(PathError::TooManyPaths);
        }
        if remote == self.shared.handshake_remote
            && self.shared.peer_params.as_ref().is_some_and(|p| p.disable_active_migration)
        {
            return Err(PathError::MigrationDisabled);
        }
        // The peer may have abandoned path IDs we never used: they are closed for good.
        self.shared.mp.next_path_id = self.shared.closed_ids.next_open(self.shared.mp.next_path_id);
        let id = self.shared.mp.next_path_id;
        if id > self.shared.mp.peer_max {
            if self.shared.mp.paths_blocked_sent != Some(self.shared.mp.peer_max) {
                self.shared.mp.paths_blocked = Some(self.shared.mp.peer_max);
            }
            return Err(PathError::NoPathId);
        }
        if id > self.shared.mp.local_max {
            // Our own limit is in the way (RFC 10069 §3.2.1: send MAX_PATH_ID). The path table has room
            // (checked above), so allow the ID; the peer needs it to issue CIDs for it.
            self.shared.mp.local_max = id;
            self.shared.mp.pending.retain(|c| !matches!(c, Control::MaxPathId(_)));
            self.shared.mp.pending.push(Control::MaxPathId(id));
            self.host().issue_cids(now);
            return Err(PathError::NoConnectionId);
        }
        let has_peer_cid = self.shared.peer_cids.get(&id).is_some_and(|p| p.has_cid());
        if !has_peer_cid {
            if !self.shared.mp.cids_blocked.iter().any(|(p, _)| *p == id) {
                self.shared.mp.cids_blocked.push((id, 0));
            }
            return Err(PathError::NoConnectionId);
        }
        if self.shared.local_cids.get(&id).is_none_or(|l| l.active.is_empty()) {
            self.host().issue_cids(now);
            return Err(PathError::NoConnectionId);
        }
        // The server cannot answer on a path ID it holds none of our CIDs for (RFC 10069 §3.1:
        // "a receiver may delay PATH_RESPONSE while it has no CID"). Wait until one of our
        // PATH_NEW_CONNECTION_IDs for it has been sent (`NewPathAllowed` says when): usually
        // in the packet with our Finished, ahead of anything sent on the new path. If it is
        // lost, the server holds the new path's packets until the resent frame arrives
        // (`Connection::hold_early`). Before, the client waited for the frame's
        // acknowledgement, a round trip on the first path. (The chaos sweep's case, a lossy
        // handshake path that lost those frames while the server dropped every packet of
        // the new path, is `path_opens_even_if_its_cids_are_late_seed_11623035763058037611`.)
        if self.shared.local_cids.get(&id).is_some_and(|l| !l.advertised) {
            return Err(PathError::NoConnectionId);
        }
        self.shared.mp.next_path_id += 1;
        let mut path = PathState::new(id, remote, &self.shared.config, true);
        if let Some(counter) = &self.shared.mp.single_space {
            path.data.join_single_space(counter.clone());
        }
        path.grease = self.shared.grease_key();
        path.local = local;
        path.phase = PathPhase::Validating;
        // Each path discovers its own PMTU from the base (RFC 8899 §5.2), within the
        // peer's limit (RFC 9000 §18.2).
        path.set_peer_udp_limit(self.shared.peer_udp_limit(), self.shared.handshake_confirmed);
        path.challenge = Some(self.new_challenge_pub());
        path.peer_backup = self.shared.mp.peer_status.get(&id).is_some_and(|s| s.1);
        self.paths.insert(path);
        if status == PathStatus::Backup {
            self.queue_path_status(id, true);
        }
        tracing::debug!(id, %remote, ?local, "opening path");
        self.shared.events.push_back(Event::Path(PathEvent::Opened { id, remote }));
        self.host().qlog_path(now, id, "new");
        self.shared.maybe_signal_new_path_allowed();
        Ok(id)
    }

    /// Abandons a path (PATH_ABANDON with `error_code`, RFC 10069 §3.4). Abandoning the last open path
    /// closes the connection.
    pub fn abandon_path(&mut self, now: Instant, id: u64, error_code: u64) -> Result<(), PathError> {
        if self.is_closed() {
            return Err(PathError::Closed);
        }
        // (From the board: the path may be checked out, on its own thread; the abandon
        // reaches it by mail.)
        let Some(pi) = self.path_index(id).filter(|&i| self.paths.board().get(i).is_some_and(|v| v.is_open())) else {
            return Err(PathError::UnknownPath);
        };
        if !self.shared.mp.enabled {
            return Err(PathError::MultipathNotNegotiated);
        }
        self.host().abandon(now, pi, error_code, false);
        self.deliver_mail_or_close(now);
        Ok(())
    }

    /// Advises the peer how to use a path for sending to us (PATH_STATUS_BACKUP or
    /// PATH_STATUS_AVAILABLE, RFC 10069 §3.3). Any path ID up to the limit may be named, even
    /// one not in use yet (§4.3).
    pub fn set_path_status(&mut self, _now: Instant, id: u64, status: PathStatus) -> Result<(), PathError> {
        if !self.shared.mp.enabled {
            return Err(PathError::MultipathNotNegotiated);
        }
        let closed = |i: usize| !self.paths.board().get(i).is_some_and(|v| v.is_open());
        if id > self.shared.mp.peer_max || self.path_index(id).is_some_and(closed) {
            return Err(PathError::UnknownPath);
        }
        self.queue_path_status(id, status == PathStatus::Backup);
        Ok(())
    }

    /// Whether path `id` is validated and carries data (`Some(true)`), is still being
    /// validated (`Some(false)`), or is unknown or abandoned (`None`). Read from the board,
    /// so a path out on its own thread answers too.
    pub fn path_validated(&self, id: u64) -> Option<bool> {
        let (_, v) = self.paths.board().iter().find(|(_, v)| v.id == id && v.is_open())?;
        Some(v.is_active())
    }

    /// IDs of the paths that are open (not abandoned).
    pub fn path_ids(&self) -> Vec<u64> {
        // (From the board: a path checked out to its own thread is still open.)
        self.paths.board().iter().filter(|(_, v)| v.is_open()).map(|(_, v)| v.id).collect()
    }

    /// Every open path's addresses, for a runtime that gives each path a socket and a
    /// thread of its own: (path ID, our address when known, the peer's address).
    pub fn path_addresses(&self) -> Vec<(u64, Option<SocketAddr>, SocketAddr)> {
        self.paths.board().iter().filter(|(_, v)| v.is_open()).map(|(_, v)| (v.id, v.local, v.remote)).collect()
    }

    /// The path a short-header datagram is for, by its destination connection ID (a
    /// runtime routing a batch to the path's thread); `None` for a long header or a
    /// connection ID that is not ours.
    pub fn path_of_datagram(&self, datagram: &[u8]) -> Option<u64> {
        let first = *datagram.first()?;
        if first & 0x80 != 0 {
            return None;
        }
        let dcid = datagram.get(1..1 + self.shared.local_cid_len)?;
        self.shared
            .local_cids
            .iter()
            .find(|(_, l)| l.active.values().any(|c| c.cid.as_slice() == dcid))
            .map(|(id, _)| *id)
    }

    fn queue_path_status(&mut self, id: u64, backup: bool) {
        let seq = self.shared.mp.local_status.get(&id).map_or(0, |(s, _)| s + 1);
        self.shared.mp.local_status.insert(id, (seq, backup));
        self.shared.mp.pending.retain(|c| !matches!(c, Control::PathStatus(p, _) if *p == id));
        self.shared.mp.pending.push(Control::PathStatus(id, seq));
    }
}
