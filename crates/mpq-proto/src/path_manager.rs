//! The client's path manager: which (local, remote) address pairs should carry a path, and
//! opening them, again after failure, as multipath allows.
//!
//! Sans-IO like the rest of the crate: the runtime feeds it the connection's path events and
//! calls [`PathManager::poll`] after each round of I/O and at [`PathManager::poll_timeout`].

use std::net::SocketAddr;
use std::time::Duration;

use crate::conn::{Connection, PathError, PathEvent, PathStatus};
use crate::time::Instant;

/// How local and remote addresses combine into paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PathMode {
    /// Every local address with every remote address.
    #[default]
    Mesh,
    /// The i-th local address with the i-th remote address (a single address on either
    /// side pairs with all of the other side's).
    Pairs,
}

impl std::str::FromStr for PathMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "mesh" | "full-mesh" => Ok(PathMode::Mesh),
            "pairs" | "pair" => Ok(PathMode::Pairs),
            other => Err(format!("unknown path mode {other:?} (expected mesh or pairs)")),
        }
    }
}

/// What the path manager is told to do.
#[derive(Debug, Clone)]
pub struct PathManagerConfig {
    /// Local addresses (`None`: the runtime's default socket). The first one carries the
    /// handshake.
    pub locals: Vec<Option<SocketAddr>>,
    /// The server's addresses; the first one is the handshake's.
    pub remotes: Vec<SocketAddr>,
    /// How they combine.
    pub mode: PathMode,
    /// Most paths at once, the handshake path included.
    pub max_paths: usize,
    /// Wait this long before reopening a pair whose path failed or could not be opened.
    pub reopen_backoff: Duration,
    /// Status the extra paths are opened with (advice to the peer, PATH_STATUS_*).
    pub status: PathStatus,
}

/// Something that can open paths: a [`Connection`], or a mock in tests.
pub trait PathOpener {
    /// See [`Connection::open_path`].
    fn open_path(
        &mut self,
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        status: PathStatus,
    ) -> Result<u64, PathError>;
}

impl PathOpener for Connection {
    fn open_path(
        &mut self,
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        status: PathStatus,
    ) -> Result<u64, PathError> {
        Connection::open_path(self, now, local, remote, status)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct PairState {
    /// The path serving this pair.
    path: Option<u64>,
    /// Do not try (again) before then.
    retry_at: Option<Instant>,
}

/// Keeps one path per configured address pair.
#[derive(Debug)]
pub struct PathManager {
    config: PathManagerConfig,
    pairs: Vec<(Option<SocketAddr>, SocketAddr)>,
    state: Vec<PairState>,
    /// A `NewPathAllowed` arrived since the last poll: retry blocked pairs at once.
    allowed: bool,
}

impl PathManager {
    /// A manager whose first pair is the handshake path (path 0).
    pub fn new(config: PathManagerConfig) -> Self {
        let pairs = Self::pairs_of(&config);
        let mut state = vec![PairState::default(); pairs.len()];
        if let Some(s) = state.first_mut() {
            s.path = Some(0);
        }
        Self { config, pairs, state, allowed: false }
    }

    fn pairs_of(c: &PathManagerConfig) -> Vec<(Option<SocketAddr>, SocketAddr)> {
        let locals: Vec<Option<SocketAddr>> = if c.locals.is_empty() { vec![None] } else { c.locals.clone() };
        let mut out = Vec::new();
        match c.mode {
            PathMode::Mesh => {
                for l in &locals {
                    for r in &c.remotes {
                        out.push((*l, *r));
                    }
                }
            }
            PathMode::Pairs => {
                let n = locals.len().max(c.remotes.len());
                for i in 0..n {
                    let l = locals[if locals.len() == 1 { 0 } else { i.min(locals.len() - 1) }];
                    let r = c.remotes[if c.remotes.len() == 1 { 0 } else { i.min(c.remotes.len() - 1) }];
                    if !out.contains(&(l, r)) {
                        out.push((l, r));
                    }
                }
            }
        }
        // Local addresses of another family than the remote cannot reach it.
        out.retain(|(l, r)| l.is_none_or(|l| l.is_ipv4() == r.is_ipv4()));
        out.truncate(c.max_paths.max(1));
        out
    }

    /// The address pairs the manager keeps paths on.
    pub fn pairs(&self) -> &[(Option<SocketAddr>, SocketAddr)] {
        &self.pairs
    }

    /// The path serving pair `i`, if any.
    pub fn path_of_pair(&self, i: usize) -> Option<u64> {
        self.state.get(i).and_then(|s| s.path)
    }

    /// Feeds a path event of the connection.
    pub fn on_event(&mut self, now: Instant, event: &PathEvent) {
        match event {
            PathEvent::NewPathAllowed => self.allowed = true,
            PathEvent::Abandoned { id, .. } | PathEvent::Closed { id } => {
                for s in &mut self.state {
                    if s.path == Some(*id) {
                        s.path = None;
                        s.retry_at = Some(now + self.config.reopen_backoff);
                    }
                }
            }
            _ => {}
        }
    }

    /// Opens the paths that are missing and may be opened now.
    pub fn poll(&mut self, now: Instant, conn: &mut dyn PathOpener) {
        let allowed = std::mem::take(&mut self.allowed);
        for i in 0..self.pairs.len() {
            let s = self.state[i];
            if s.path.is_some() {
                continue;
            }
            if s.retry_at.is_some_and(|t| now < t) && !allowed {
                continue;
            }
            let (local, remote) = self.pairs[i];
            match conn.open_path(now, local, remote, self.config.status) {
                Ok(id) => {
                    tracing::info!(id, ?local, %remote, "path opened");
                    self.state[i] = PairState { path: Some(id), retry_at: None };
                }
                Err(e) => {
                    tracing::debug!(%e, ?local, %remote, "cannot open path yet");
                    self.state[i].retry_at = Some(now + self.config.reopen_backoff);
                    if matches!(e, PathError::MultipathNotNegotiated | PathError::Closed) {
                        // Nothing else will work either until the connection changes.
                        break;
                    }
                }
            }
        }
    }

    /// When `poll` should run again for a retry.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.state.iter().filter(|s| s.path.is_none()).filter_map(|s| s.retry_at).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Mock {
        next: u64,
        fail: Option<PathError>,
        opened: Vec<(Option<SocketAddr>, SocketAddr)>,
    }

    impl PathOpener for Mock {
        fn open_path(
            &mut self,
            _now: Instant,
            local: Option<SocketAddr>,
            remote: SocketAddr,
            _status: PathStatus,
        ) -> Result<u64, PathError> {
            if let Some(e) = self.fail {
                return Err(e);
            }
            self.next += 1;
            self.opened.push((local, remote));
            Ok(self.next)
        }
    }

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn config(mode: PathMode, max_paths: usize) -> PathManagerConfig {
        PathManagerConfig {
            locals: vec![Some(a("10.0.0.1:1")), Some(a("10.0.1.1:1"))],
            remotes: vec![a("10.0.0.2:443"), a("10.0.1.2:443")],
            mode,
            max_paths,
            reopen_backoff: Duration::from_millis(500),
            status: PathStatus::Available,
        }
    }

    #[test]
    fn mesh_opens_every_pair_but_the_handshake_one_up_to_the_cap() {
        let mut m = PathManager::new(config(PathMode::Mesh, 3));
        assert_eq!(m.pairs().len(), 3);
        let mut c = Mock::default();
        m.poll(Instant::ZERO, &mut c);
        assert_eq!(
            c.opened,
            vec![(Some(a("10.0.0.1:1")), a("10.0.1.2:443")), (Some(a("10.0.1.1:1")), a("10.0.0.2:443"))]
        );
        m.poll(Instant::ZERO, &mut c);
        assert_eq!(c.opened.len(), 2, "opened twice");
    }

    #[test]
    fn pairs_mode_zips_addresses() {
        let m = PathManager::new(config(PathMode::Pairs, 8));
        assert_eq!(
            m.pairs(),
            &[(Some(a("10.0.0.1:1")), a("10.0.0.2:443")), (Some(a("10.0.1.1:1")), a("10.0.1.2:443"))]
        );
        let mut one_remote = config(PathMode::Pairs, 8);
        one_remote.remotes.truncate(1);
        assert_eq!(PathManager::new(one_remote).pairs().len(), 2);
    }

    #[test]
    fn reopens_after_abandon_once_the_backoff_passed() {
        let mut m = PathManager::new(config(PathMode::Pairs, 8));
        let mut c = Mock::default();
        m.poll(Instant::ZERO, &mut c);
        assert_eq!(m.path_of_pair(1), Some(1));
        let t = Instant::ZERO + Duration::from_secs(1);
        m.on_event(t, &PathEvent::Abandoned { id: 1, error_code: 0, by_peer: false });
        m.poll(t, &mut c);
        assert_eq!(c.opened.len(), 1, "reopened before the backoff");
        assert_eq!(m.poll_timeout(), Some(t + Duration::from_millis(500)));
        m.poll(t + Duration::from_millis(500), &mut c);
        assert_eq!(m.path_of_pair(1), Some(2));
    }

    #[test]
    fn blocked_pairs_retry_on_new_path_allowed() {
        let mut m = PathManager::new(config(PathMode::Pairs, 8));
        let mut c = Mock { fail: Some(PathError::NoConnectionId), ..Default::default() };
        m.poll(Instant::ZERO, &mut c);
        assert_eq!(m.path_of_pair(1), None);
        c.fail = None;
        m.poll(Instant::ZERO, &mut c);
        assert_eq!(m.path_of_pair(1), None, "retried before the backoff or an event");
        m.on_event(Instant::ZERO, &PathEvent::NewPathAllowed);
        m.poll(Instant::ZERO, &mut c);
        assert_eq!(m.path_of_pair(1), Some(1));
    }
}
