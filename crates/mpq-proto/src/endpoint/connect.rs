//! Opening client connections ([`Endpoint::connect`]), and opening one again in another
//! version when the server answered its first flight with a Version Negotiation packet
//! (incompatible version negotiation, RFC 9368 §2.2 and RFC 9000 §6.2): the new attempt
//! takes the place of the old one under the same handle, so the application sees one
//! connection that took a round trip longer to set up.

use std::net::SocketAddr;

use rand::{Rng, RngCore};

use crate::cid::ConnectionId;
use crate::conn::{ClientConfig, Connection, ConnectionInit};
use crate::crypto::session::TlsSession;
use crate::time::Instant;
use crate::types::Side;

use super::{ConnectError, ConnectionHandle, Endpoint};

/// How a client connection was opened: what a new attempt needs.
pub(super) struct ClientStart {
    config: ClientConfig,
    server_name: String,
    remote: SocketAddr,
}

impl Endpoint {
    /// Opens a client connection to `remote`.
    pub fn connect(
        &mut self,
        now: Instant,
        config: &ClientConfig,
        remote: SocketAddr,
        server_name: &str,
    ) -> Result<ConnectionHandle, ConnectError> {
        if self.len() >= self.config.max_connections {
            return Err(ConnectError::TooManyConnections);
        }
        let start = ClientStart { config: config.clone(), server_name: server_name.to_string(), remote };
        let (mut conn, local_cid) = self.client_attempt(now, &start, config.transport.initial_version)?;
        // Before the first packet is built: the qlog then holds the whole connection.
        if let Some(sink) = self.qlog_factory.as_mut().and_then(|f| f(&conn)) {
            conn.set_qlog(sink);
        }
        let h = self.insert(conn);
        self.route(local_cid, h.0);
        if let Some(slot) = self.connections[h.0].as_mut() {
            slot.client = Some(Box::new(start));
        }
        Ok(h)
    }

    /// A client connection attempt in `version`, its first flight produced; and its CID.
    fn client_attempt(
        &mut self,
        now: Instant,
        start: &ClientStart,
        version: u32,
    ) -> Result<(Connection, ConnectionId), ConnectError> {
        let ClientStart { config, server_name, remote } = start;
        let name = rustls::pki_types::ServerName::try_from(server_name.clone())
            .map_err(|_| ConnectError::InvalidServerName(server_name.clone()))?;
        let local_cid = self.new_cid();
        // RFC 9000 §7.2: the first DCID is random and at least 8 bytes.
        let mut odcid = [0u8; 16];
        self.rng.fill_bytes(&mut odcid);
        let orig_dst_cid = ConnectionId::new(&odcid);
        let mut transport = config.transport.clone();
        if transport.initial_version != version {
            std::sync::Arc::make_mut(&mut transport).initial_version = version;
        }
        let tp =
            crate::conn::local_transport_params(Side::Client, &transport, local_cid, [0; 16], orig_dst_cid, version);
        let tp_bytes = self.encode_params(&tp);
        // A client that offers other versions may be moved to one (RFC 9368 §2.1).
        let may_upgrade = crate::conn::version::client_available(&transport).len() > 1;
        let tls = TlsSession::client(config.tls.clone(), name, tp_bytes, version, may_upgrade)?;
        let seed = self.rng.random();
        // RFC 9000 §8.1.3: a NEW_TOKEN token from an earlier connection to this server.
        let tokens = crate::conn::AddressTokens {
            initial_token: self.token_store.take(server_name).unwrap_or_default(),
            store: Some((self.token_store.clone(), server_name.clone())),
            ..Default::default()
        };
        let mut conn = Connection::new(ConnectionInit {
            side: Side::Client,
            config: transport,
            tls,
            now,
            remote: *remote,
            local_cid,
            peer_cid: orig_dst_cid,
            orig_dst_cid,
            reset_key: self.reset_key.clone(),
            seed,
            address_validated: false,
            tokens,
            original_version: version,
            version,
        });
        conn.set_cid_prefix(self.config.cid_prefix);
        conn.start(now);
        Ok((conn, local_cid))
    }

    /// After connection `idx` took input: if a Version Negotiation packet ended its attempt
    /// and named a version both sides speak, a new attempt in that version takes its place
    /// (RFC 9368 §2.2): new CIDs, new TLS session and first flight, the version it came from
    /// kept for the downgrade check (§4), the qlog file carried over. If the new attempt
    /// cannot be made, the old one stays closed (VersionMismatch).
    pub(super) fn restart_after_version_negotiation(&mut self, now: Instant, idx: usize) {
        let Some(slot) = self.connections[idx].as_mut() else { return };
        let Some(version) = slot.conn.take_version_restart() else { return };
        let Some(start) = slot.client.take() else { return };
        let from = slot.conn.version_original();
        let mut attempt = match self.client_attempt(now, &start, version) {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(%e, "no new connection attempt after version negotiation");
                return;
            }
        };
        attempt.0.set_negotiated_from(from);
        tracing::debug!(
            "incompatible version negotiation: {} -> {}",
            crate::packet::version::name(from),
            crate::packet::version::name(version)
        );
        let Some(slot) = self.connections[idx].as_mut() else { return };
        if let Some(q) = slot.conn.take_qlog() {
            attempt.0.set_qlog(q);
        }
        slot.conn = attempt.0;
        slot.client = Some(start);
        for cid in std::mem::take(&mut slot.routes) {
            if self.routes.get(&cid) == Some(&idx) {
                self.routes.remove(&cid);
            }
        }
        self.route(attempt.1, idx);
        self.schedule.mark_may_send(idx);
    }
}
