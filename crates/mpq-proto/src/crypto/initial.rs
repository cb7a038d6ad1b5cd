//! Initial packet keys (RFC 9001 §5.2, RFC 9369 §3.3.1).

use rustls::quic::{Keys, Suite};

use super::rustls_side;
use crate::{ConnectionId, Side};

/// The QUIC suite Initial packets always use: AES-128-GCM with SHA-256 (RFC 9001 §5.2),
/// whatever the handshake negotiates later.
pub fn initial_suite() -> Suite {
    super::backend::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|s| s.quic_suite())
        .expect("TLS13_AES_128_GCM_SHA256 supports QUIC")
}

/// Initial keys for `side`, derived from the Destination Connection ID of the client's first
/// Initial packet (`dcid`; after a Retry, the DCID the client then chose). `local` seals our
/// packets, `remote` opens the peer's.
///
/// `version` picks the salt and labels: v2 has its own (RFC 9369 §3.3.1-§3.3.2). After a
/// compatible version negotiation both sides derive the negotiated version's keys from the
/// same client DCID (RFC 9368 §2.1 with RFC 9369 §4).
pub fn initial_keys(dcid: &ConnectionId, side: Side, version: u32) -> Keys {
    initial_suite().keys(dcid, rustls_side(side), crate::packet::version::tls_version(version))
}
