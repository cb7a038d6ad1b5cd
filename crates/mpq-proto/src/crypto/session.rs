//! The TLS 1.3 handshake for QUIC (RFC 9001 §4), driven through rustls's QUIC API.

use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::quic::{self, KeyChange, Keys};

use super::version_keys::{NextSecrets, SecretCapture};
use crate::packet::version::tls_version;
use crate::{Level, TransportError, TransportErrorCode};

/// TLS alert `internal_error`, reported when rustls fails without naming an alert.
const ALERT_INTERNAL_ERROR: u8 = 80;

/// One side's TLS session: consumes and produces the bytes carried in CRYPTO frames and
/// hands out packet keys as the handshake advances.
pub struct TlsSession {
    conn: quic::Connection,
    /// A client that may be upgraded to another version keeps the TLS secrets, to derive
    /// that version's keys (see [`super::version_keys`]).
    capture: Option<Arc<SecretCapture>>,
}

impl std::fmt::Debug for TlsSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSession").field("handshaking", &self.is_handshaking()).finish_non_exhaustive()
    }
}

impl TlsSession {
    /// A client session. `config` must offer TLS 1.3 only and set ALPN protocols (QUIC has
    /// no ALPN-less mode, RFC 9001 §8.1); `transport_params` is our encoded RFC 9000 §18
    /// extension body.
    ///
    /// `version` is the QUIC version of the client's first Initial. With `may_upgrade`, the
    /// session keeps its secrets so that the connection can switch to another version the
    /// server picks by compatible version negotiation (RFC 9368 §2.1): the configuration is
    /// copied for this connection, with a key log that captures the secrets and passes
    /// everything on to the configured one.
    pub fn client(
        config: Arc<rustls::ClientConfig>,
        server_name: ServerName<'static>,
        transport_params: Vec<u8>,
        version: u32,
        may_upgrade: bool,
    ) -> Result<Self, rustls::Error> {
        let (config, capture) = if may_upgrade {
            let capture = Arc::new(SecretCapture::new(config.key_log.clone()));
            let mut own = (*config).clone();
            own.key_log = capture.clone();
            (Arc::new(own), Some(capture))
        } else {
            (config, None)
        };
        let conn = quic::ClientConnection::new(config, tls_version(version), server_name, transport_params)?;
        Ok(Self { conn: conn.into(), capture })
    }

    /// A server session for a connection in `version` (the negotiated version: a server
    /// picks it before the session exists, RFC 9368 §2.1). `config.max_early_data_size`
    /// must be 0 or `u32::MAX` (rustls rejects other values for QUIC).
    pub fn server(
        config: Arc<rustls::ServerConfig>,
        transport_params: Vec<u8>,
        version: u32,
    ) -> Result<Self, rustls::Error> {
        let conn = quic::ServerConnection::new(config, tls_version(version), transport_params)?;
        Ok(Self { conn: conn.into(), capture: None })
    }

    /// Handshake keys of `version` for `side`, when the session was created for another
    /// version and kept its secrets; `None` otherwise.
    pub fn handshake_keys_for(&self, side: crate::Side, version: u32) -> Option<Keys> {
        let suite = self.conn.negotiated_cipher_suite()?;
        self.capture.as_ref()?.handshake_keys(suite, super::rustls_side(side), version)
    }

    /// First 1-RTT keys of `version` and the secrets of the following key phases, like
    /// [`TlsSession::handshake_keys_for`].
    pub fn one_rtt_keys_for(&self, side: crate::Side, version: u32) -> Option<(Keys, NextSecrets)> {
        let suite = self.conn.negotiated_cipher_suite()?;
        self.capture.as_ref()?.one_rtt_keys(suite, super::rustls_side(side), version)
    }

    /// Feeds in-order CRYPTO frame data received at `level`.
    ///
    /// rustls tracks the expected read level itself, so `level` serves diagnostics only; but
    /// each level's bytes must be delivered separately and before the next level's (joined,
    /// rustls fails with `KeyEpochWithPendingFragment`).
    ///
    /// Errors are CRYPTO_ERROR (0x0100 + TLS alert, RFC 9001 §4.8) and close the connection.
    pub fn read_handshake(&mut self, level: Level, data: &[u8]) -> Result<(), TransportError> {
        self.conn.read_hs(data).map_err(|e| {
            let alert = self.conn.alert().map_or(ALERT_INTERNAL_ERROR, u8::from);
            tracing::debug!(?level, error = %e, alert, "TLS handshake failed");
            TransportError::new(TransportErrorCode::crypto(alert), e.to_string())
        })
    }

    /// Appends handshake bytes to send to `out` and returns the key change that follows them,
    /// if any.
    ///
    /// The bytes belong to the *current write level*, which the caller tracks: Initial at
    /// first, then the level of the last [`KeyChange`] returned (Handshake, then 1-RTT for
    /// post-handshake messages). Call in a loop until it returns `None`, sending each batch of
    /// bytes at the level current before acting on the returned key change.
    pub fn write_handshake(&mut self, out: &mut Vec<u8>) -> Option<KeyChange> {
        self.conn.write_hs(out)
    }

    /// The peer's encoded transport parameters, once received.
    pub fn peer_transport_params(&self) -> Option<&[u8]> {
        self.conn.quic_transport_parameters()
    }

    /// The negotiated application protocol, once known.
    pub fn alpn(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    /// True until the TLS handshake has completed on this side.
    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// The negotiated cipher suite, once known.
    pub fn negotiated_cipher_suite(&self) -> Option<rustls::SupportedCipherSuite> {
        self.conn.negotiated_cipher_suite()
    }

    /// True when the handshake resumed an earlier session (a TLS 1.3 PSK handshake).
    pub fn is_resumed(&self) -> bool {
        self.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
    }

    /// 0-RTT keys: on a client that offers early data, the keys to send it; on a server that
    /// accepted it, the keys to read it.
    pub fn zero_rtt_keys(&self) -> Option<quic::DirectionalKeys> {
        self.conn.zero_rtt_keys()
    }

    /// Client: the server accepted our early data (its EncryptedExtensions carried
    /// `early_data`, RFC 8446 §4.2.10). False on a server and before that message.
    pub fn is_early_data_accepted(&self) -> bool {
        match &self.conn {
            quic::Connection::Client(c) => c.is_early_data_accepted(),
            quic::Connection::Server(_) => false,
        }
    }

    /// The TLS alert rustls wants to send, if the handshake failed.
    pub fn alert(&self) -> Option<u8> {
        self.conn.alert().map(u8::from)
    }
}
