//! The server's defences for new connections (RFC 9000 §8.1, §21.1): an Initial creates
//! connection state only once it decrypts, handshakes in progress are bounded per client
//! IP address and in total, and a stateless Retry validates the client's address first
//! (always, or in `auto` mode once many handshakes are in progress).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use crate::cid::ConnectionId;
use crate::crypto::initial::initial_keys;
use crate::error::TransportErrorCode;
use crate::frame::{ConnectionClose, Frame};
use crate::packet::header::{self, LongType, ParsedPacket};
use crate::packet::number::decode_pn;
use crate::packet::protect::{open_payload, remove_header_protection, seal_packet};
use crate::time::Instant;
use crate::token::{RetryMode, TokenKey};
use crate::types::Side;

/// Most endpoint-generated datagrams (Retry, INVALID_TOKEN closes) waiting to be sent: a
/// flood cannot grow the queue when the runtime drains it slowly.
pub(super) const MAX_QUEUED_RESPONSES: usize = 4096;

/// Counters of what the server did with new connection attempts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct EndpointStats {
    /// Initials dropped because they did not decrypt with the keys of their DCID.
    pub initials_undecryptable: u64,
    /// Initials dropped because a handshake limit (total, per IP address, connections) was reached.
    pub initials_over_limit: u64,
    /// Retry packets sent.
    pub retries_sent: u64,
    /// Initials with a valid Retry token.
    pub retry_tokens_accepted: u64,
    /// Initials with a valid NEW_TOKEN token.
    pub new_tokens_accepted: u64,
    /// Initials with a NEW_TOKEN token used before (treated as no token).
    pub new_tokens_replayed: u64,
    /// Connections closed at once with INVALID_TOKEN (a bad Retry token, RFC 9000 §8.1.2).
    pub invalid_token_closes: u64,
}

/// Most NEW_TOKEN tokens remembered as used. Beyond it (after forgetting expired ones),
/// tokens are refused rather than accepted twice: the client then gets a Retry at worst.
const MAX_USED_TOKENS: usize = 16_384;

/// One connection counted as a handshake in progress.
struct Handshake {
    idx: usize,
    /// Tells a reused connection slot apart from the connection counted.
    odcid: ConnectionId,
    ip: IpAddr,
}

/// Handshakes in progress, by client IP address. Entries are pruned lazily (only when a
/// limit looks reached), so that the endpoint's polling paths need not report handshake
/// completion: the cost is one scan of at most `max_handshakes` entries at that moment.
pub(super) struct ServerGuard {
    pub key: TokenKey,
    pub mode: RetryMode,
    handshakes: Vec<Handshake>,
    per_ip: HashMap<IpAddr, usize>,
    /// NEW_TOKEN tokens already used, by token ID, with their expiry (RFC 9000 §8.1.4:
    /// servers MUST prevent or limit replay; NEW_TOKEN tokens SHOULD NOT be accepted twice).
    used_tokens: HashMap<[u8; 12], Instant>,
    /// No sweep of `used_tokens` before this time (bounds the sweeps' cost when full).
    next_sweep: Instant,
    pub stats: EndpointStats,
    /// Tests: what the server puts in retry_source_connection_id after a Retry
    /// (`Some(None)`: leave it out), to check the client's verification.
    #[cfg(test)]
    pub tp_retry_scid_override: Option<Option<ConnectionId>>,
    /// Tests: what this endpoint sends as version_information (`Some(None)`: leave it out),
    /// to check the peer's verification (RFC 9368 §4).
    #[cfg(test)]
    pub tp_version_override: Option<Option<crate::transport_params::VersionInformation>>,
}

/// The limits [`ServerGuard`] applies (from the endpoint configuration).
pub(super) struct Limits {
    pub retry_threshold: usize,
    pub max_handshakes: usize,
    pub max_per_ip: usize,
}

impl ServerGuard {
    pub fn new(key: TokenKey, mode: RetryMode) -> Self {
        Self {
            key,
            mode,
            handshakes: Vec::new(),
            per_ip: HashMap::new(),
            used_tokens: HashMap::new(),
            next_sweep: Instant::ZERO,
            stats: EndpointStats::default(),
            #[cfg(test)]
            tp_retry_scid_override: None,
            #[cfg(test)]
            tp_version_override: None,
        }
    }

    /// Records the use of NEW_TOKEN token `token`, valid until `expires`; false if it was
    /// used before (a replay) or cannot be tracked (then it is treated as no token).
    pub fn first_use(&mut self, token: &[u8], now: Instant, expires: Instant) -> bool {
        let Some(id) = crate::token::token_id(token) else { return false };
        if self.used_tokens.contains_key(&id) {
            return false;
        }
        if self.used_tokens.len() >= MAX_USED_TOKENS {
            if now < self.next_sweep {
                return false;
            }
            self.used_tokens.retain(|_, e| *e >= now);
            self.next_sweep = now + std::time::Duration::from_secs(1);
            if self.used_tokens.len() >= MAX_USED_TOKENS {
                return false;
            }
        }
        self.used_tokens.insert(id, expires);
        true
    }

    /// Forgets connections that finished their handshake, closed or were removed.
    fn prune(&mut self, conns: &[Option<super::Slot>]) {
        let per_ip = &mut self.per_ip;
        self.handshakes.retain(|h| {
            let live = conns
                .get(h.idx)
                .and_then(|c| c.as_ref())
                .map(|s| &s.conn)
                .is_some_and(|c| c.orig_dst_cid() == h.odcid && c.is_handshaking() && !c.is_drained());
            if !live {
                if let Some(n) = per_ip.get_mut(&h.ip) {
                    *n -= 1;
                    if *n == 0 {
                        per_ip.remove(&h.ip);
                    }
                }
            }
            live
        });
    }

    /// Handshakes in progress in total and from `ip`, pruned first if a limit looks reached.
    fn in_progress(&mut self, conns: &[Option<super::Slot>], ip: IpAddr, limits: &Limits) -> (usize, usize) {
        let retry_limit = if self.mode == RetryMode::Auto { limits.retry_threshold } else { usize::MAX };
        let total_limit = retry_limit.min(limits.max_handshakes);
        let from_ip = |s: &Self| s.per_ip.get(&ip).copied().unwrap_or(0);
        if self.handshakes.len() >= total_limit || from_ip(self) >= limits.max_per_ip {
            self.prune(conns);
        }
        (self.handshakes.len(), from_ip(self))
    }

    /// Whether an Initial without a valid token gets a Retry instead of a connection.
    pub fn should_retry(&mut self, conns: &[Option<super::Slot>], ip: IpAddr, limits: &Limits) -> bool {
        match self.mode {
            RetryMode::Never => false,
            RetryMode::Always => true,
            RetryMode::Auto => self.in_progress(conns, ip, limits).0 >= limits.retry_threshold,
        }
    }

    /// Whether one more handshake from `ip` fits the limits.
    pub fn admit(&mut self, conns: &[Option<super::Slot>], ip: IpAddr, limits: &Limits) -> bool {
        let (total, from_ip) = self.in_progress(conns, ip, limits);
        total < limits.max_handshakes && from_ip < limits.max_per_ip
    }

    /// Counts the new connection in slot `idx` as a handshake in progress.
    pub fn track(&mut self, idx: usize, odcid: ConnectionId, ip: IpAddr) {
        self.handshakes.push(Handshake { idx, odcid, ip });
        *self.per_ip.entry(ip).or_default() += 1;
    }

    /// Handshakes currently counted (some may have finished since the last prune).
    #[cfg(test)]
    pub fn counted(&self) -> usize {
        self.handshakes.len()
    }
}

/// True if the first packet of `datagram`, a client Initial, decrypts with the Initial keys
/// derived from its DCID (RFC 9001 §5.2). Anyone can compute these keys, so this proves
/// nothing about the sender, but junk costs no connection state, no TLS session and no
/// qlog file. Works on a copy: the datagram is decrypted again by the connection.
pub(super) fn initial_decrypts(datagram: &[u8], parsed: &ParsedPacket) -> bool {
    let keys = initial_keys(&parsed.dcid, Side::Server, parsed.version);
    let mut pkt = datagram[..parsed.packet_len.min(datagram.len())].to_vec();
    let Ok(hdr) = remove_header_protection(&mut pkt, parsed.pn_offset, &*keys.remote.header) else {
        return false;
    };
    // A first Initial: nothing received in this space yet.
    let pn = decode_pn(None, hdr.truncated_pn, hdr.pn_len);
    open_payload(&mut pkt, parsed.pn_offset, hdr.pn_len, pn, &*keys.remote.packet, None).is_ok()
}

/// A Retry (RFC 9000 §17.2.5) answering the client Initial `parsed` from `client`, with
/// `retry_scid` as our new CID and a token binding the client's address, that CID, the
/// Initial's DCID and the time.
pub(super) fn write_retry(
    key: &TokenKey,
    rng: &mut dyn rand::RngCore,
    now: Instant,
    client: SocketAddr,
    parsed: &ParsedPacket,
    retry_scid: &ConnectionId,
) -> Vec<u8> {
    let token = key.seal_retry(rng, client, &parsed.dcid, retry_scid, now);
    let mut out = Vec::with_capacity(64 + token.len());
    header::write_retry(&mut out, parsed.version, &parsed.scid, retry_scid, &parsed.dcid, &token, rng);
    out
}

/// An Initial packet closing the connection with INVALID_TOKEN (RFC 9000 §8.1.2), sent
/// without creating state: protected with the Initial keys of the client's DCID, so the
/// client (which derived the same keys) can read it. `scid` is any CID of ours.
pub(super) fn write_invalid_token_close(parsed: &ParsedPacket, scid: &ConnectionId) -> Option<Vec<u8>> {
    let keys = initial_keys(&parsed.dcid, Side::Server, parsed.version);
    let mut out = Vec::with_capacity(128);
    let (pn, pn_len) = (0, 1);
    let o = header::write_long_header(&mut out, LongType::Initial, parsed.version, &parsed.scid, scid, &[], pn, pn_len);
    Frame::ConnectionClose(ConnectionClose {
        error_code: TransportErrorCode::INVALID_TOKEN.0,
        frame_type: Some(0),
        reason: b"invalid Retry token",
    })
    .encode(&mut out);
    seal_packet(
        &mut out,
        o.header_start,
        Some(o.len_offset),
        o.pn_offset,
        pn_len,
        pn,
        &*keys.local.packet,
        &*keys.local.header,
        None,
    )
    .ok()?;
    Some(out)
}
