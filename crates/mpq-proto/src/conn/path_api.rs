//! The application's handle on multipath: open, abandon and prioritise paths.

use std::net::SocketAddr;

use crate::time::Instant;

use super::{Connection, PathError, PathStatus};

impl Connection {
    /// True once both sides offered multipath (initial_max_path_id) and the handshake
    /// completed (draft-ietf-quic-multipath-21 §2).
    pub fn is_multipath(&self) -> bool {
        false
    }

    /// Opens a new path from `local` (`None`: the runtime's default socket) to `remote`
    /// and starts validating it (client only). Returns its path ID.
    pub fn open_path(
        &mut self,
        _now: Instant,
        _local: Option<SocketAddr>,
        _remote: SocketAddr,
        _status: PathStatus,
    ) -> Result<u64, PathError> {
        Err(PathError::MultipathNotNegotiated)
    }

    /// Abandons a path (PATH_ABANDON with `error_code`).
    pub fn abandon_path(&mut self, _now: Instant, _id: u64, _error_code: u64) -> Result<(), PathError> {
        Err(PathError::UnknownPath)
    }

    /// Advises the peer how to use a path for sending to us (PATH_STATUS_BACKUP/AVAILABLE).
    pub fn set_path_status(&mut self, _now: Instant, _id: u64, _status: PathStatus) -> Result<(), PathError> {
        Err(PathError::UnknownPath)
    }

    /// IDs of the paths that are open (not abandoned).
    pub fn path_ids(&self) -> Vec<u64> {
        self.paths.iter().map(|p| p.id).collect()
    }
}
