//! The client's side of a server's preferred address (RFC 9000 §9.6.1): once the handshake
//! is confirmed, a connection validates the preferred address of its path's family from
//! its current local address, with the connection ID the server gave for it, while its
//! traffic stays on the handshake address; when the server answers, the path moves there (new remote address and connection ID, congestion control and RTT
//! started over, §9.4); if it does not after three tries, the connection stays where it is
//! (§9.6.1: "If path validation fails, the client MUST continue sending all future packets
//! to the server's original IP address").
//!
//! With multipath (RFC 10069, with initial_max_path_id's rules) the preferred_address's connection ID
//! belongs to path ID 0, and switching to the preferred address from the same local address
//! is a migration of path 0: that path is the one that validates and moves, whichever path
//! the connection counts as primary, and the other paths stay where they are.

use std::net::SocketAddr;

use crate::cid::ConnectionId;
use crate::time::Instant;
use crate::types::Side;

use super::Connection;

/// How many PATH_CHALLENGEs the preferred address gets before the client gives up on it.
const TRIES: u8 = 3;

/// The validation of the server's preferred address under way.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PreferredProbe {
    /// The preferred address of the path's family.
    pub remote: SocketAddr,
    /// The connection ID of preferred_address (sequence number 1), for the probes and the
    /// path once it moves.
    pub cid: ConnectionId,
    /// The challenge's data.
    pub data: [u8; 8],
    /// A probe is to be sent.
    pub send_pending: bool,
    /// Probes sent.
    pub tries: u8,
    /// When to send again, or give up.
    pub retry_at: Option<Instant>,
    /// The server answered: the path moves at the next send.
    pub validated: bool,
}

impl Connection {
    /// Server: the connection ID sent in preferred_address gets sequence number 1, right
    /// after the handshake's (RFC 9000 §5.1.1); it counts toward the client's
    /// active_connection_id_limit like any other.
    pub(crate) fn issue_preferred_address_cid(&mut self, cid: ConnectionId, reset_token: [u8; 16]) {
        if let Some(cids) = self.shared.local_cids.get_mut(&0) {
            let seq = cids.issue(cid, reset_token, false);
            debug_assert_eq!(seq, 1, "the preferred_address connection ID is the second issued");
        }
    }

    /// The slot of the path that moves to the preferred address: path ID 0 with multipath
    /// (its connection ID is path 0's), else the one path. None if path 0 is gone.
    fn preferred_path_slot(&self) -> Option<usize> {
        if !self.shared.mp.enabled {
            return Some(self.primary_path());
        }
        (0..self.paths.slot_bound()).find(|&pi| self.paths.get(pi).is_some_and(|p| p.id == 0 && p.is_open()))
    }

    /// Client, handshake confirmed, once: starts validating the server's preferred address if
    /// it sent one of the path's family and the configuration allows it.
    fn maybe_start_preferred_probe(&mut self) {
        if self.shared.side != Side::Client || !self.shared.handshake_confirmed || self.shared.preferred_decided {
            return;
        }
        self.shared.preferred_decided = true;
        if !self.shared.config.use_preferred_address {
            return;
        }
        let Some(pa) = self.shared.peer_params.as_ref().and_then(|p| p.preferred_address) else { return };
        let Some(pi) = self.preferred_path_slot() else { return };
        let current = self.paths[pi].remote;
        let remote = match current {
            SocketAddr::V4(_) => pa.address_v4.map(SocketAddr::V4),
            SocketAddr::V6(_) => pa.address_v6.map(SocketAddr::V6),
        };
        let Some(remote) = remote.filter(|r| *r != current && !r.ip().is_unspecified() && r.port() != 0) else {
            return;
        };
        let data = self.shared.new_challenge().data;
        tracing::debug!(%remote, "validating the server's preferred address");
        self.shared.preferred_probe = Some(PreferredProbe {
            remote,
            cid: pa.connection_id,
            data,
            send_pending: true,
            tries: 0,
            retry_at: None,
            validated: false,
        });
    }

    /// Before the paths send (client): starts the validation, or moves the path once the
    /// server answered.
    pub(super) fn preferred_address_step(&mut self, now: Instant) {
        self.maybe_start_preferred_probe();
        if self.shared.preferred_probe.is_some_and(|p| p.validated) {
            if let Some(p) = self.shared.preferred_probe.take() {
                self.move_to_preferred_address(now, p);
            }
        }
    }

    /// The probe to send now, if one is due: (destination, connection ID, challenge data).
    /// Marks it sent and arms the retry.
    pub(super) fn take_preferred_probe(&mut self, now: Instant) -> Option<(usize, SocketAddr, ConnectionId, [u8; 8])> {
        self.shared.preferred_probe.filter(|p| p.send_pending && !p.validated)?;
        let Some(pi) = self.preferred_path_slot() else {
            // Path 0 was abandoned before the probe went out: nothing moves.
            self.shared.preferred_probe = None;
            return None;
        };
        let retry = self.paths.get(pi)?.challenge_retry(self.shared.peer_max_ack_delay());
        let p = self.shared.preferred_probe.as_mut()?;
        p.send_pending = false;
        p.tries += 1;
        p.retry_at = Some(now + retry);
        Some((pi, p.remote, p.cid, p.data))
    }

    /// When the probe is to be sent again or given up.
    pub(super) fn preferred_probe_deadline(&self) -> Option<Instant> {
        self.shared.preferred_probe.as_ref().filter(|p| !p.send_pending && !p.validated).and_then(|p| p.retry_at)
    }

    /// The probe's timer: another try, or after the last one, the connection stays on the
    /// handshake address.
    pub(super) fn preferred_probe_timer(&mut self, now: Instant) {
        let Some(p) = self.shared.preferred_probe.as_mut() else { return };
        if p.validated || p.send_pending || p.retry_at.is_none_or(|t| now < t) {
            return;
        }
        if p.tries < TRIES {
            p.send_pending = true;
        } else {
            tracing::debug!(remote = %p.remote, "the preferred address did not answer: staying on the handshake address");
            self.shared.preferred_probe = None;
        }
    }

    /// Client: a datagram from the preferred address being validated is let in (its
    /// PATH_RESPONSE), though the path does not use that address yet.
    pub(super) fn is_preferred_address_probed(&self, remote: SocketAddr) -> bool {
        self.shared.preferred_probe.as_ref().is_some_and(|p| p.remote == remote)
    }

    /// The server answered at its preferred address: the path moves there, to the
    /// preferred_address's connection ID (the old one retired), with congestion control,
    /// RTT and pacing started over (RFC 9000 §9.4: a new path's capacity is unknown).
    fn move_to_preferred_address(&mut self, now: Instant, p: PreferredProbe) {
        let Some(pi) = self.preferred_path_slot() else { return };
        let Some(cids) = self.shared.peer_cids.get_mut(&0) else { return };
        if !cids.switch_to_cid(&p.cid) && !cids.switch_to_unused() {
            tracing::debug!("no unused connection ID for the preferred address: staying");
            return;
        }
        let config = &self.shared.config;
        let Some(path) = self.paths.get_mut(pi) else { return };
        let from = path.remote;
        path.remote = p.remote;
        path.rtt = crate::recovery::rtt::RttEstimator::new(config.initial_rtt);
        path.cc = crate::cc::build(config.cc, &config.cc_config, u64::from(path.mtu));
        path.pacer = crate::recovery::pacer::Pacer::new();
        // (ECN is validated again on the new network path, RFC 9000 §13.4.2.)
        path.ecn.restart();
        let id = path.id;
        self.paths.publish(pi);
        tracing::debug!(%from, to = %p.remote, "moved to the server's preferred address");
        self.host().qlog_path(now, id, "preferred_address");
    }
}
