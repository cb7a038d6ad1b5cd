//! Receiving a stateless reset (RFC 9000 §10.3.1) that the endpoint could not route by
//! connection ID: its destination CID is random, so the endpoint finds the connection by
//! the token at its end and hands the datagram here to be checked.

use crate::packet::header;
use crate::time::Instant;

use super::{Connection, ConnectionError, State};

impl Connection {
    /// Reset tokens of the peer connection IDs this connection currently sends to, one per
    /// path at most. RFC 9000 §10.3.1: an endpoint MUST NOT check for tokens of connection IDs
    /// it has not used or that were retired, so only the IDs in use count.
    pub fn peer_reset_tokens_in_use(&self) -> Vec<[u8; header::RESET_TOKEN_LEN]> {
        if matches!(self.shared.state, State::Draining { .. } | State::Drained) {
            return Vec::new();
        }
        let mut tokens: Vec<_> = self
            .paths
            .iter()
            .filter_map(|p| self.shared.peer_cids.get(&p.id))
            .filter_map(|c| c.current().reset_token)
            .collect();
        tokens.sort_unstable();
        tokens.dedup();
        tokens
    }

    /// A datagram that no connection ID routed ends with one of this connection's tokens:
    /// if the token matches (compared in constant time), the peer has reset the connection and
    /// it drains without sending anything (RFC 9000 §10.3.1). Returns true if it was a reset.
    pub fn handle_stateless_reset(&mut self, now: Instant, datagram: &[u8]) -> bool {
        let matched = self.peer_reset_tokens_in_use().iter().any(|token| header::is_stateless_reset(datagram, token));
        if !matched {
            return false;
        }
        tracing::debug!(side = ?self.shared.side, "stateless reset received");
        self.host().enter_draining(now, ConnectionError::Reset);
        self.set_drained(None);
        true
    }
}
