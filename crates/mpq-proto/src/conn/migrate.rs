//! Active connection migration by the client (RFC 9000 §9) on a connection without
//! multipath: the client moves its one path to another local address (a new interface, or a
//! new port), keeping the server's address. With multipath a move is a new path from the new
//! address and the old one abandoned (RFC 10069 §3), which `open_path` and `abandon_path` do.
//!
//! The server sees packets from a new address and validates it (RFC 9000 §9.3, the other
//! side of this: `multipath.rs::on_peer_address_change`); the client answers its
//! PATH_CHALLENGE on the new path like any other. Also here: whether a datagram came on
//! another 4-tuple than its path's ([`Connection::rx_moved`]).

use std::net::SocketAddr;

use crate::time::Instant;
use crate::types::Side;

use super::events::PathError;
use super::Connection;

impl Connection {
    /// Client: moves the connection to send from `local` (a socket the runtime has bound)
    /// to the same server address (RFC 9000 §9). The path switches to a connection ID it
    /// has not used (§9.5), the old one is retired, and its congestion controller and RTT
    /// estimate start over (§9.4: the new path's capacity is unknown). Packets from the
    /// server keep arriving on the old address until the server moves too, and are taken
    /// there meanwhile.
    ///
    /// Errors: not a client, the handshake not yet confirmed (§9: "MUST NOT initiate
    /// connection migration before the handshake is confirmed"), the server sent
    /// disable_active_migration (§18.2), multipath is negotiated, the server has issued no
    /// spare connection ID yet ([`PathError::NoConnectionId`]: try again later), or the
    /// connection is closed.
    pub fn migrate(&mut self, now: Instant, local: SocketAddr) -> Result<(), PathError> {
        if self.is_closed() {
            return Err(PathError::Closed);
        }
        if self.shared.side != Side::Client {
            return Err(PathError::ServerCannotOpen);
        }
        if !self.shared.handshake_confirmed {
            return Err(PathError::HandshakeNotConfirmed);
        }
        if self.shared.mp.enabled {
            return Err(PathError::MultipathNegotiated);
        }
        if self.shared.peer_params.as_ref().is_some_and(|p| p.disable_active_migration) {
            return Err(PathError::MigrationDisabled);
        }
        let pi = self.primary_path();
        let Some(path) = self.paths.get(pi) else { return Err(PathError::UnknownPath) };
        if path.local == Some(local) {
            return Ok(());
        }
        let path_id = path.id;
        let Some(cids) = self.shared.peer_cids.get_mut(&path_id) else { return Err(PathError::NoConnectionId) };
        if !cids.switch_to_unused() {
            return Err(PathError::NoConnectionId);
        }
        // The client checks the new path with a PATH_CHALLENGE of its own (RFC 9000 §9.1:
        // probing; §8.2.1: in a 1200-byte datagram), sent again until answered. Besides
        // telling the client the path works, it gives the server the bytes its
        // anti-amplification limit needs (§9.3: the server validates the new address): a
        // downloading client sends only small ACKs, and when the server's first, small
        // challenge to the new address was lost, neither side had anything left to send.
        let challenge = self.shared.new_challenge();
        let config = &self.shared.config;
        let Some(path) = self.paths.get_mut(pi) else { return Err(PathError::UnknownPath) };
        let from = path.local;
        path.local = Some(local);
        path.challenge = Some(challenge);
        path.rtt = crate::recovery::rtt::RttEstimator::new(config.initial_rtt);
        path.cc = crate::cc::build(config.cc, &config.cc_config, u64::from(path.mtu));
        path.pacer = crate::recovery::pacer::Pacer::new();
        // (ECN is validated again on the new network path, RFC 9000 §13.4.2.)
        path.ecn.restart();
        self.paths.publish(pi);
        self.shared.migrated_to = Some(local);
        tracing::debug!(from = ?from, to = %local, "migrated to a new local address");
        self.host().qlog_path(now, path_id, "migrated");
        Ok(())
    }

    /// Client after a migration: the first datagram at the new local address shows the
    /// server moved too (it validated the address and sends there).
    pub(super) fn note_arrival_after_migration(&mut self, local: SocketAddr) {
        if self.shared.migrated_to == Some(local) {
            self.shared.migrated_to = None;
            tracing::debug!(%local, "migration followed: the server sends to the new address");
        }
    }

    /// Whether a datagram arrived on another 4-tuple than path `pi`'s: from another peer
    /// address, or (a server) at another of our addresses, as when a client moves to our
    /// preferred_address (RFC 9000 §9.6). Addresses compare with IPv4-mapped IPv6 ones as
    /// the IPv4 ones they are, and an unspecified local address (a wildcard socket that
    /// does not report the destination) matches any.
    pub(crate) fn rx_moved(&self, pi: usize, rx: &super::recv::Rx) -> bool {
        let Some(path) = self.paths.get(pi) else { return false };
        if !same_addr(path.remote, rx.remote) {
            return true;
        }
        self.shared.side == Side::Server && local_moved(path.local, rx.local)
    }
}

/// Whether a datagram that came to `local` came to another of our addresses than the
/// path's (`path_local`): IPv4-mapped IPv6 addresses compare as the IPv4 ones they are, and
/// an unspecified address (a wildcard socket that does not report the destination) matches
/// any.
pub(crate) fn local_moved(path_local: Option<SocketAddr>, local: SocketAddr) -> bool {
    path_local.is_some_and(|l| !l.ip().is_unspecified() && !local.ip().is_unspecified() && !same_addr(l, local))
}

/// Whether two socket addresses name the same one: an IPv4-mapped IPv6 address (a
/// dual-stack socket's view of an IPv4 peer) is the IPv4 address it maps.
pub(crate) fn same_addr(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port() && a.ip().to_canonical() == b.ip().to_canonical()
}
