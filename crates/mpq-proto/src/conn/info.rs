//! What the handshake negotiated, for logs and tools (`mpq -v`).

use std::net::SocketAddr;

use super::Connection;

/// The outcome of a completed handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeInfo {
    /// The negotiated QUIC version: v1 (RFC 9000) or v2 (RFC 9369).
    pub version: u32,
    /// TLS 1.3 cipher suite, e.g. `TLS13_AES_128_GCM_SHA256`.
    pub cipher_suite: String,
    /// Negotiated ALPN protocol (lossily decoded).
    pub alpn: String,
    /// The TLS session was resumed.
    pub resumed: bool,
    /// What became of 0-RTT (early data).
    pub early_data: super::ZeroRttState,
    /// Both sides offered multipath (RFC 10069).
    pub multipath: bool,
    /// Open paths: (path ID, peer address).
    pub paths: Vec<(u64, SocketAddr)>,
}

impl std::fmt::Display for HandshakeInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "QUIC {}, {}, ALPN {:?}, {}, 0-RTT {}, multipath {}, paths [",
            crate::packet::version::name(self.version),
            self.cipher_suite,
            self.alpn,
            if self.resumed { "resumed session" } else { "full handshake" },
            self.early_data.name(),
            if self.multipath { "negotiated" } else { "not negotiated" },
        )?;
        for (i, (id, addr)) in self.paths.iter().enumerate() {
            write!(f, "{}{id}: {addr}", if i > 0 { ", " } else { "" })?;
        }
        write!(f, "]")
    }
}

impl Connection {
    /// What the handshake negotiated, once it completed (`None` before).
    pub fn handshake_info(&self) -> Option<HandshakeInfo> {
        if !self.shared.handshake_complete {
            return None;
        }
        Some(HandshakeInfo {
            version: self.shared.version.current,
            cipher_suite: self
                .shared
                .tls
                .negotiated_cipher_suite()
                .map_or_else(|| "unknown cipher suite".to_string(), |s| format!("{:?}", s.suite())),
            alpn: self.shared.tls.alpn().map(|a| String::from_utf8_lossy(a).into_owned()).unwrap_or_default(),
            resumed: self.shared.tls.is_resumed(),
            early_data: self.shared.zero_rtt.state,
            multipath: self.shared.mp.enabled,
            paths: self.paths.iter().filter(|p| p.is_open()).map(|p| (p.id, p.remote)).collect(),
        })
    }
}
