//! The connection's QUIC version: which one its long headers carry, the client's switch to
//! the version a server picked by compatible version negotiation (RFC 9368 §2.1, between v1
//! and v2: RFC 9369 §4), and the check of the peer's `version_information` that makes the
//! negotiation tamper-proof (RFC 9368 §4).

use rustls::quic::Keys;
use serde_json::json;

use crate::error::TransportError;
use crate::packet::header::ParsedPacket;
use crate::packet::version::{self, VERSION_1, VERSION_2};
use crate::time::Instant;
use crate::transport_params::{TransportParameters, VersionInformation};
use crate::types::Side;

use super::config::TransportConfig;
use super::{ConnShared, Connection};

/// Whether a connection in version `from` may continue in `to` after the client's first
/// flight: the first flights must be compatible (RFC 9368 §2.2). RFC 9369 §4: v1 and v2
/// are compatible with each other.
pub fn compatible(from: u32, to: u32) -> bool {
    from == to || matches!((from, to), (VERSION_1, VERSION_2) | (VERSION_2, VERSION_1))
}

/// The versions a client offers in its `version_information` (RFC 9368 §3), most
/// preferred first: the configured versions compatible with the version of its first
/// Initial, which is always among them (its Chosen Version must be, RFC 9368 §3).
pub fn client_available(config: &TransportConfig) -> Vec<u32> {
    let initial = config.initial_version;
    let mut v: Vec<u32> = Vec::with_capacity(config.versions.len() + 1);
    for &x in config.versions.iter().chain(std::iter::once(&initial)) {
        if compatible(initial, x) && !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

/// The version a server continues a connection in whose client's first Initial was in
/// `original` (RFC 9368 §2.3: the server chooses among the versions the client offers
/// that are compatible with its first flight). `client` is the client's
/// version_information when the server could read it from the first packet.
///
/// By default the client's order decides: the connection moves only if the client ranks
/// another version the server accepts above the one it started in (a client that starts in
/// v1 for compatibility but prefers v2). With `prefer_server_version_order` the server's
/// `versions` order decides instead. Without version_information (a client that does not
/// implement RFC 9368), the connection stays in the client's version.
pub fn server_choice(original: u32, client: Option<&VersionInformation>, config: &TransportConfig) -> u32 {
    let Some(info) = client else { return original };
    // RFC 9368 §4: a Chosen Version other than the packet's is an error the connection
    // reports once it reads the parameters; no switch on such a first flight.
    if info.chosen != original {
        return original;
    }
    let acceptable = |v: u32| compatible(original, v) && config.versions.contains(&v);
    let offered = |v: u32| v == original || info.available.contains(&v);
    let choice = if config.prefer_server_version_order {
        config.versions.iter().copied().find(|&v| offered(v) && acceptable(v))
    } else {
        info.available.iter().copied().take_while(|&v| v != original).find(|&v| acceptable(v))
    };
    choice.unwrap_or(original)
}

/// The version a client starts a new connection attempt in after a Version Negotiation
/// packet listing `offered` (incompatible version negotiation, RFC 9368 §2.2, RFC 9000
/// §6.2): its most preferred configured version the server lists. `None`: no version in
/// common, the attempt ends.
pub fn incompatible_choice(config: &TransportConfig, offered: &[u32]) -> Option<u32> {
    config.versions.iter().copied().find(|v| offered.contains(v))
}

/// The version state of one connection.
pub(crate) struct VersionState {
    /// The version of the client's first Initial ("original version", RFC 9368 §1.2).
    pub original: u32,
    /// The version of the packets sent now: the negotiated version once known.
    pub current: u32,
    /// Client: the server's first authenticated packet fixed the version; packets of other
    /// versions are dropped from then on (RFC 9368 §2.1).
    pub settled: bool,
    /// Server that switched: the Initial keys of the original version, to read the client's
    /// first flight, which was protected with them.
    pub original_initial_keys: Option<Keys>,
    /// Client: this attempt began after a Version Negotiation packet ended one in this
    /// version (RFC 9368 §2.2); the server's version_information must confirm the choice
    /// (§4), and no second Version Negotiation packet is acted on (RFC 9000 §6.2).
    pub negotiated_from: Option<u32>,
    /// Client: a Version Negotiation packet ended the attempt; the endpoint starts a new one
    /// in this version ([`Connection::take_version_restart`]).
    pub restart_in: Option<u32>,
}

impl VersionState {
    /// A connection whose client started in `original` and that now uses `current`.
    pub fn new(original: u32, current: u32) -> Self {
        Self { original, current, settled: false, original_initial_keys: None, negotiated_from: None, restart_in: None }
    }
}

/// What [`Connection::packet_version`] decided about a long header packet.
pub(crate) enum VersionFit {
    /// The packet is in a version this connection reads now.
    Fits,
    /// Client: the server answered in another version it offered; try it.
    Switch(u32),
    /// Drop the packet.
    Drop,
}

/// The connection's version and Initial keys before a tentative switch, to restore if
/// the packet that caused it does not authenticate.
pub(crate) struct SwitchUndo {
    current: u32,
    initial_keys: Option<Keys>,
}

impl ConnShared {
    /// The Initial keys that open a packet of `version`.
    pub(crate) fn initial_keys_for(&self, version: u32) -> Option<&Keys> {
        if version != self.version.current && version == self.version.original {
            if let Some(k) = &self.version.original_initial_keys {
                return Some(k);
            }
        }
        self.initial_keys.as_ref()
    }

    /// The DCID the Initial keys come from (RFC 9001 §5.2: after a Retry, the DCID the client
    /// chose then).
    fn initial_keys_dcid(&self) -> crate::cid::ConnectionId {
        self.tokens.retry_scid.unwrap_or(self.orig_dst_cid)
    }

    /// qlog `transport:version_information` (qlog QUIC schema): the versions both sides
    /// offered and the one in use.
    pub(crate) fn qlog_version_information(&mut self, now: Instant) {
        if self.qlog.is_none() {
            return;
        }
        let hex = |v: &u32| format!("{v:08x}");
        let ours: Vec<String> = match self.side {
            Side::Client => client_available(&self.config).iter().map(hex).collect(),
            Side::Server => self.config.versions.iter().map(hex).collect(),
        };
        let theirs: Option<Vec<String>> = self
            .peer_params
            .as_ref()
            .and_then(|p| p.version_information.as_ref())
            .map(|v| v.available.iter().map(hex).collect());
        let (client, server) = match self.side {
            Side::Client => (Some(ours), theirs),
            Side::Server => (theirs, Some(ours)),
        };
        let mut data = json!({"chosen_version": hex(&self.version.current)});
        if let Some(c) = client {
            data["client_versions"] = c.into();
        }
        if let Some(s) = server {
            data["server_versions"] = s.into();
        }
        if let Some(q) = self.qlog.as_mut() {
            q.emit(now, "transport:version_information", data);
        }
    }

    /// Checks the peer's `version_information` (RFC 9368 §4), with VERSION_NEGOTIATION_ERROR.
    pub(crate) fn check_peer_version_information(&self, tp: &TransportParameters) -> Result<(), TransportError> {
        let v = &self.version;
        match (self.side, &tp.version_information) {
            // RFC 9368 §4: "clients MUST validate that the server's Chosen Version is equal
            // to the negotiated version; if they do not match, the client MUST close the
            // connection with a version negotiation error".
            (Side::Client, Some(info)) if info.chosen != v.current => {
                Err(TransportError::version_negotiation("server's chosen version is not the version in use"))
            }
            // RFC 9368 §4: after incompatible version negotiation the client checks that it
            // "would have selected the same version if it had received a Version Negotiation
            // packet listing the server's Available Versions plus the negotiated version":
            // else the Version Negotiation packet was forged to force a worse version. "In
            // particular, if ... the server's Available Versions field is empty, the client
            // MUST close the connection."
            (Side::Client, Some(info))
                if v.negotiated_from.is_some()
                    && (info.available.is_empty()
                        || incompatible_choice(&self.config, &[info.available.as_slice(), &[v.current]].concat())
                            != Some(v.current)) =>
            {
                Err(TransportError::version_negotiation(
                    "the server's versions contradict its Version Negotiation packet",
                ))
            }
            // "If a client has reacted to a Version Negotiation packet and the server's
            // Version Information was missing, the client MUST close the connection with a
            // version negotiation error" (a server without RFC 9368 cannot confirm it).
            (Side::Client, None) if v.negotiated_from.is_some() => Err(TransportError::version_negotiation(
                "no version_information to confirm the Version Negotiation packet",
            )),
            // RFC 9368 §4: servers validate that the client's Chosen Version matches the
            // version of the client's first flight (the long header that carried it).
            (Side::Server, Some(info)) if info.chosen != v.original => {
                Err(TransportError::version_negotiation("client's chosen version is not the version of its Initial"))
            }
            // RFC 9368 §3: a client's Available Versions include its Chosen Version, and the
            // server only moves to one of them (§2.3); anything else is a downgrade.
            (Side::Server, Some(info)) if v.current != v.original && !info.available.contains(&v.current) => {
                Err(TransportError::version_negotiation("negotiated version not offered by the client"))
            }
            // A version change happened on the strength of unauthenticated packets; only the
            // peer's version_information authenticates it (RFC 9368 §4), so it is required.
            (_, None) if v.current != v.original => {
                Err(TransportError::version_negotiation("version changed without version_information"))
            }
            _ => Ok(()),
        }
    }
}

impl Connection {
    /// Client: the version a Version Negotiation packet asked this ended attempt to start
    /// again in (RFC 9368 §2.2), once; the endpoint replaces the connection with a new
    /// attempt under the same handle.
    pub(crate) fn take_version_restart(&mut self) -> Option<u32> {
        self.shared.version.restart_in.take()
    }

    /// Client: this attempt follows one in version `from` that a Version Negotiation packet
    /// ended (checked against the server's version_information, RFC 9368 §4).
    pub(crate) fn set_negotiated_from(&mut self, from: u32) {
        self.shared.version.negotiated_from = Some(from);
    }

    /// The version of this attempt's first Initial (RFC 9368's original version).
    pub(crate) fn version_original(&self) -> u32 {
        self.shared.version.original
    }

    /// The qlog sink, taken away (to follow the connection into its next attempt).
    pub(crate) fn take_qlog(&mut self) -> Option<Box<dyn crate::qlog::QlogSink>> {
        self.shared.qlog.take()
    }

    /// Whether a long header packet of `parsed.version` belongs to this connection now.
    pub(crate) fn packet_version(&self, parsed: &ParsedPacket) -> VersionFit {
        let v = &self.shared.version;
        if parsed.version == v.current {
            return VersionFit::Fits;
        }
        match self.shared.side {
            // The server reads the client's first flight in the original version until
            // the client switches too (its later packets come in the negotiated version).
            Side::Server if parsed.version == v.original && v.original_initial_keys.is_some() => VersionFit::Fits,
            Side::Server => VersionFit::Drop,
            // RFC 9368 §2.1: the client learns the negotiated version from the server's
            // first packets, which may use any version it offered in version_information.
            Side::Client
                if !v.settled
                    && self.shared.config.versions.contains(&parsed.version)
                    && compatible(v.current, parsed.version) =>
            {
                VersionFit::Switch(parsed.version)
            }
            Side::Client => VersionFit::Drop,
        }
    }

    /// Moves the client to `to` before opening a packet of that version: its Initial keys
    /// change with the version (RFC 9369 §3.3.1). Undone with [`Connection::undo_switch`]
    /// if the packet does not authenticate (a forged packet must not move the connection).
    pub(crate) fn try_switch(&mut self, to: u32) -> SwitchUndo {
        let dcid = self.shared.initial_keys_dcid();
        let keys = self.shared.initial_keys.is_some().then(|| crate::crypto::initial_keys(&dcid, Side::Client, to));
        let undo = SwitchUndo { current: self.shared.version.current, initial_keys: self.shared.initial_keys.take() };
        self.shared.initial_keys = keys;
        self.shared.version.current = to;
        undo
    }

    /// Restores the state before [`Connection::try_switch`].
    pub(crate) fn undo_switch(&mut self, undo: SwitchUndo) {
        self.shared.version.current = undo.current;
        self.shared.initial_keys = undo.initial_keys;
    }

    /// A long header packet from the server authenticated in the current version: it is
    /// the negotiated version from now on (RFC 9368 §2.1).
    pub(crate) fn settle_version(&mut self, switched: bool) {
        if self.shared.side == Side::Client && !self.shared.version.settled {
            self.shared.version.settled = true;
            if switched {
                let v = &self.shared.version;
                tracing::debug!(
                    "compatible version negotiation: {} -> {} (the server's choice)",
                    version::name(v.original),
                    version::name(v.current)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(chosen: u32, available: &[u32]) -> VersionInformation {
        VersionInformation { chosen, available: available.to_vec() }
    }

    fn server(versions: &[u32], own_order: bool) -> TransportConfig {
        TransportConfig { versions: versions.to_vec(), prefer_server_version_order: own_order, ..Default::default() }
    }

    #[test]
    fn v1_and_v2_are_compatible_both_ways_and_nothing_else_is() {
        assert!(compatible(VERSION_1, VERSION_2) && compatible(VERSION_2, VERSION_1));
        assert!(compatible(VERSION_1, VERSION_1));
        assert!(!compatible(VERSION_1, 0x1a2a_3a4a) && !compatible(0xff00_001d, VERSION_1));
    }

    #[test]
    fn client_offers_its_versions_in_order_with_its_initial_version() {
        let c = |initial, versions: &[u32]| TransportConfig {
            initial_version: initial,
            versions: versions.to_vec(),
            ..Default::default()
        };
        assert_eq!(client_available(&TransportConfig::default()), [VERSION_1, VERSION_2]);
        assert_eq!(client_available(&c(VERSION_1, &[VERSION_2, VERSION_1])), [VERSION_2, VERSION_1]);
        assert_eq!(client_available(&c(VERSION_2, &[VERSION_1])), [VERSION_1, VERSION_2]);
        assert_eq!(client_available(&c(VERSION_2, &[VERSION_2, 0x1a2a_3a4a])), [VERSION_2]);
        assert_eq!(client_available(&c(VERSION_1, &[VERSION_1, VERSION_2, VERSION_1])), [VERSION_1, VERSION_2]);
    }

    #[test]
    fn server_choice_follows_the_client_by_default_and_its_own_order_when_asked() {
        let both = server(&[VERSION_1, VERSION_2], false);
        // No version_information (a v1 peer without RFC 9368): stay.
        assert_eq!(server_choice(VERSION_1, None, &both), VERSION_1);
        // The client's order: v1 first stays, v2 first moves.
        assert_eq!(server_choice(VERSION_1, Some(&info(VERSION_1, &[VERSION_1, VERSION_2])), &both), VERSION_1);
        assert_eq!(server_choice(VERSION_1, Some(&info(VERSION_1, &[VERSION_2, VERSION_1])), &both), VERSION_2);
        // Not a version the server accepts: stay.
        let v1_only = server(&[VERSION_1], false);
        assert_eq!(server_choice(VERSION_1, Some(&info(VERSION_1, &[VERSION_2, VERSION_1])), &v1_only), VERSION_1);
        // The server's order.
        let prefers_v2 = server(&[VERSION_2, VERSION_1], true);
        assert_eq!(server_choice(VERSION_1, Some(&info(VERSION_1, &[VERSION_1, VERSION_2])), &prefers_v2), VERSION_2);
        assert_eq!(server_choice(VERSION_1, Some(&info(VERSION_1, &[VERSION_1])), &prefers_v2), VERSION_1);
        let prefers_v1 = server(&[VERSION_1, VERSION_2], true);
        assert_eq!(server_choice(VERSION_2, Some(&info(VERSION_2, &[VERSION_2, VERSION_1])), &prefers_v1), VERSION_1);
        // A Chosen Version that is not the Initial's version: no switch (the connection
        // closes with VERSION_NEGOTIATION_ERROR when it reads the parameters).
        assert_eq!(server_choice(VERSION_1, Some(&info(VERSION_2, &[VERSION_2])), &prefers_v2), VERSION_1);
        // Reserved (greased) versions in the client's list are skipped.
        let grease = 0x1a2a_3a4a;
        assert_eq!(server_choice(VERSION_1, Some(&info(VERSION_1, &[grease, VERSION_2, VERSION_1])), &both), VERSION_2);
    }
}
