//! Address validation inside a connection (RFC 9000 §8.1): the client's handling of Retry
//! (RFC 9000 §17.2.5, RFC 9001 §5.8, RFC 9002 §6.3), and NEW_TOKEN tokens (§8.1.3): the
//! server issues one once the handshake is confirmed, the client keeps it for a later
//! connection to the same server.

use crate::cid::ConnectionId;
use crate::packet::header::{verify_retry, ParsedPacket};
use crate::time::Instant;
use crate::token::{TokenKey, TokenStore};
use crate::types::Side;

use super::{ConnShared, Connection};

/// What a connection knows about address validation tokens.
#[derive(Debug, Default)]
pub(crate) struct AddressTokens {
    /// Client: the token every Initial carries (a Retry token, or a stored NEW_TOKEN token).
    pub initial_token: Vec<u8>,
    /// Client: the Source CID of the Retry we accepted. Server: the DCID the client used
    /// after our Retry. Either way what retry_source_connection_id must be (RFC 9000 §7.3).
    pub retry_scid: Option<ConnectionId>,
    /// Client: where NEW_TOKEN tokens go, and the server name they are for.
    pub store: Option<(TokenStore, String)>,
    /// Server: the key NEW_TOKEN tokens are sealed with (None: issue none).
    pub issuer: Option<TokenKey>,
    /// Server: a NEW_TOKEN frame is due (after confirmation, or because one was lost).
    pub new_token_pending: bool,
}

impl Connection {
    /// A Retry packet (`pkt` is the whole packet) reached this connection.
    pub(super) fn on_retry(&mut self, now: Instant, parsed: &ParsedPacket, pkt: &[u8]) {
        // RFC 9000 §17.2.5.2: only a client acts on Retry, at most once per connection
        // attempt, and never after it processed an Initial from the server.
        let acceptable = self.shared.side == Side::Client
            && !self.shared.got_server_cid
            && self.shared.tokens.retry_scid.is_none()
            // A Retry comes in the version of our Initial (its tag key depends on it, RFC 9369
            // §3.3.3); compatible version negotiation happens after it (RFC 9368 §2.4).
            && parsed.version == self.shared.version.current
            // "A client MUST discard a Retry packet with a zero-length Retry Token field."
            && !parsed.token.is_empty()
            // §17.2.5.1: a Retry whose SCID equals the DCID we sent is discarded.
            && parsed.scid != self.shared.orig_dst_cid
            // RFC 9001 §5.8: the integrity tag, computed over the DCID we sent.
            && verify_retry(pkt, &self.shared.orig_dst_cid);
        if !acceptable {
            self.shared.stats.dropped_packets += 1;
            return;
        }
        tracing::debug!(scid = ?parsed.scid, token_len = parsed.token.len(), "Retry received");
        self.shared.tokens.retry_scid = Some(parsed.scid);
        self.shared.tokens.initial_token = pkt[parsed.token.clone()].to_vec();
        // §17.2.5.2: the next Initial goes to the Retry's Source CID, protected with keys
        // derived from it (RFC 9001 §5.2).
        if let Some(p) = self.shared.peer_cids.get_mut(&0) {
            p.set_initial(parsed.scid);
        }
        let version = self.shared.version.current;
        self.shared.initial_keys = Some(crate::crypto::initial::initial_keys(&parsed.scid, Side::Client, version));
        self.reset_initial_recovery(now);
        self.shared.qlog_retry_received(now, pkt.len(), &parsed.scid);
    }

    /// RFC 9002 §6.3: a Retry is neither an acknowledgement nor a loss. The Initial packets
    /// sent so far leave the books without an RTT sample or a congestion signal, loss
    /// recovery restarts (timers and PTO backoff), and their CRYPTO data goes again in new
    /// Initial packets. Packet numbers keep increasing (RFC 9000 §17.2.5.3).
    fn reset_initial_recovery(&mut self, _now: Instant) {
        // RFC 9000 §17.2.5.3: the server kept nothing of the 0-RTT packets either; their
        // data goes again, in 0-RTT packets to the new connection ID.
        self.requeue_zero_rtt();
        let pi = self.primary_path();
        let Some(space) = self.shared.initial.as_mut() else { return };
        let mut freed = 0u64;
        for (_, p) in space.loss.discard_all() {
            if p.in_flight {
                freed += u64::from(p.size);
            }
        }
        space.crypto.retransmit_unacked();
        space.probes = 0;
        let path = &mut self.paths[pi];
        path.bytes_in_flight = path.bytes_in_flight.saturating_sub(freed);
        path.pto_count = 0;
        path.cc = crate::cc::build(self.shared.config.cc, &self.shared.config.cc_config, u64::from(path.mtu));
        path.pacer = crate::recovery::pacer::Pacer::new();
        self.paths.publish(pi);
    }
}

impl ConnShared {
    /// Server: seals a fresh NEW_TOKEN token for the client's address `ip` (on the primary
    /// path), if one is due. Each (re)transmission gets a fresh token rather than a copy of
    /// the lost one.
    pub(super) fn take_new_token(&mut self, now: Instant, ip: std::net::IpAddr) -> Option<Vec<u8>> {
        if !self.tokens.new_token_pending {
            return None;
        }
        let key = self.tokens.issuer.clone()?;
        self.tokens.new_token_pending = false;
        Some(key.seal_new_token(&mut self.rng, ip, now))
    }
}

impl ConnShared {
    /// A NEW_TOKEN frame (checked: from a server, not empty) arrived: keep the token for
    /// the next connection to this server (RFC 9000 §8.1.3).
    pub(super) fn on_new_token(&mut self, token: &[u8]) {
        if let Some((store, name)) = &self.tokens.store {
            store.insert(name, token.to_vec());
        }
    }

    /// Server: the handshake is confirmed, tell the client a token for later connections.
    pub(super) fn queue_new_token(&mut self) {
        if self.side == Side::Server && self.tokens.issuer.is_some() {
            self.tokens.new_token_pending = true;
        }
    }
}
