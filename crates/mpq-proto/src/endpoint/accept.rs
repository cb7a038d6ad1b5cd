//! A server accepting new connections: a long-header packet for no known connection
//! (RFC 9000 §5.2.2) is answered with Version Negotiation (§6, RFC 9368), a Retry or an
//! INVALID_TOKEN close (§8.1), or becomes a new connection; client tokens are checked here.

use std::net::SocketAddr;

use super::*;

impl Endpoint {
    /// Answers a client packet in a version this server does not accept with a Version
    /// Negotiation packet listing the versions it does, plus one reserved version (RFC 9000
    /// §6.1, §15: greasing, so that clients keep ignoring versions they don't know).
    pub(super) fn send_version_negotiation(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        data: &[u8],
        dcid: std::ops::Range<usize>,
        scid: std::ops::Range<usize>,
        versions: &[u32],
    ) {
        // RFC 9000 §6.1: answer only datagrams large enough to be an Initial.
        if data.len() < crate::MIN_INITIAL_SIZE {
            return;
        }
        let (Some(dcid), Some(scid)) = (data.get(dcid), data.get(scid)) else { return };
        let refused = data.get(1..5).map_or(0, |v| u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
        tracing::debug!(
            "Version Negotiation sent: {} refused, offering {:?}",
            crate::packet::version::name(refused),
            versions.iter().map(|v| crate::packet::version::name(*v)).collect::<Vec<_>>()
        );
        let mut list = versions.to_vec();
        list.push(self.rng.random::<u32>() & 0xf0f0_f0f0 | 0x0a0a_0a0a);
        let mut out = Vec::new();
        header::write_version_negotiation(&mut out, dcid, scid, &list, &mut self.rng);
        self.responses.push_back((Some(local), remote, out));
    }

    pub(super) fn handle_unknown_long(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        ecn: Option<u8>,
        data: &mut [u8],
    ) -> Option<ConnectionHandle> {
        let server = self.server.clone()?;
        // RFC 9287 §3: a server that advertises grease_quic_bit accepts a first Initial with
        // the bit cleared (a client may remember the parameter from an earlier connection).
        let opts = header::ParseOptions { allow_grease_quic_bit: server.transport.grease_quic_bit };
        let parsed = match header::parse_packet_with(data, self.config.cid_len, opts) {
            Err(header::HeaderError::UnsupportedVersion { dcid, scid, .. }) => {
                self.send_version_negotiation(local, remote, data, dcid, scid, &server.transport.versions);
                return None;
            }
            Ok(p)
                if p.kind != header::PacketKind::VersionNegotiation
                    && !server.transport.versions.contains(&p.version) =>
            {
                // A version we implement but this server does not accept (RFC 9000 §6.1).
                let (dcid, scid) = cid_ranges(data);
                self.send_version_negotiation(local, remote, data, dcid, scid, &server.transport.versions);
                return None;
            }
            other => other,
        };
        let parsed = parsed.ok()?;
        if parsed.kind != header::PacketKind::Initial || data.len() < crate::MIN_INITIAL_SIZE {
            return None; // RFC 9000 §14.1: servers drop small Initial datagrams.
        }
        if parsed.dcid.len() < 8 {
            return None; // RFC 9000 §7.2
        }
        // Nothing is created for an Initial that does not decrypt (junk, or spoofed
        // datagrams that merely look like Initials).
        if !retry::initial_decrypts(data, &parsed) {
            self.guard.stats.initials_undecryptable += 1;
            return None;
        }
        let (orig_dst_cid, retry_scid, validated) = match self.check_token(now, remote, &parsed, data) {
            Some(v) => v,
            None => {
                self.send_invalid_token_close(local, remote, &parsed);
                return None;
            }
        };
        let limits = self.limits();
        if !validated && self.guard.should_retry(&self.connections, remote.ip(), &limits) {
            self.send_retry(now, local, remote, &parsed);
            return None;
        }
        if self.live >= self.config.max_connections || !self.guard.admit(&self.connections, remote.ip(), &limits) {
            self.guard.stats.initials_over_limit += 1;
            return None;
        }
        let local_cid = self.new_cid();
        let reset_token = self.reset_key.token(&local_cid);
        // RFC 9368 §2.3: the server may move the connection to another compatible version.
        let version = version_select::negotiated_version(data, &parsed, &server.transport);
        if version != parsed.version {
            tracing::debug!(
                "compatible version negotiation: {} -> {}",
                crate::packet::version::name(parsed.version),
                crate::packet::version::name(version)
            );
        }
        let mut tp = crate::conn::local_transport_params(
            Side::Server,
            &server.transport,
            local_cid,
            reset_token,
            orig_dst_cid,
            version,
        );
        // RFC 9000 §9.6: the preferred addresses, with a connection ID of their own (sequence
        // number 1, §5.1.1) and its stateless reset token.
        let preferred = server.transport.preferred_address.map(|pa| {
            let cid = self.new_cid();
            let token = self.reset_key.token(&cid);
            tp.preferred_address = Some(crate::transport_params::PreferredAddress {
                address_v4: pa.v4,
                address_v6: pa.v6,
                connection_id: cid,
                stateless_reset_token: token,
            });
            (cid, token)
        });
        // RFC 9000 §7.3: after a Retry, the server names the CID it chose in the Retry.
        tp.retry_source_connection_id = retry_scid;
        #[cfg(test)]
        if let (Some(o), Some(_)) = (self.guard.tp_retry_scid_override, retry_scid) {
            tp.retry_source_connection_id = o;
        }
        let tp_bytes = self.encode_params(&tp);
        // The client sealed any 0-RTT packets with keys of the version it started in (the
        // labels differ per version, RFC 9369 §3.3.2): a connection moved to another
        // version declines early data, and the client sends that data again in 1-RTT.
        let tls_config = if version != parsed.version && server.tls.max_early_data_size > 0 {
            let mut c = (*server.tls).clone();
            c.max_early_data_size = 0;
            std::sync::Arc::new(c)
        } else {
            server.tls.clone()
        };
        let tls = match TlsSession::server(tls_config, tp_bytes, version) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(%e, "cannot create TLS server session");
                return None;
            }
        };
        let seed = self.rng.random();
        let tokens = crate::conn::AddressTokens {
            retry_scid,
            issuer: self.config.new_tokens.then(|| self.guard.key.clone()),
            ..Default::default()
        };
        let mut conn = Connection::new(ConnectionInit {
            side: Side::Server,
            config: server.transport.clone(),
            tls,
            now,
            remote,
            local_cid,
            peer_cid: parsed.scid,
            orig_dst_cid,
            reset_key: self.reset_key.clone(),
            seed,
            address_validated: validated,
            tokens,
            original_version: parsed.version,
            version,
        });
        conn.set_first_path_local(local);
        if let Some((cid, token)) = preferred {
            conn.issue_preferred_address_cid(cid, token);
        }
        let h = self.insert(conn);
        self.guard.track(h.0, orig_dst_cid, remote.ip());
        self.route(local_cid, h.0);
        if let Some((cid, _)) = preferred {
            self.route(cid, h.0);
        }
        // Retransmitted client Initials still carry this DCID (after a Retry: the Retry's CID).
        self.route(parsed.dcid, h.0);
        self.incoming.push_back(h);
        if let Some(slot) = self.connections[h.0].as_mut() {
            // Before the first datagram: the qlog then holds the whole connection, whatever
            // happens before the application first looks at it (a runtime may receive the
            // rest of the handshake and a new path's first packets in the same wake).
            if let Some(sink) = self.qlog_factory.as_mut().and_then(|f| f(&slot.conn)) {
                slot.conn.set_qlog(sink);
            }
            slot.conn.handle_datagram(now, local, remote, ecn, data);
        }
        self.after_io(h.0);
        Some(h)
    }

    pub(super) fn limits(&self) -> retry::Limits {
        retry::Limits {
            retry_threshold: self.config.retry_threshold,
            max_handshakes: self.config.max_handshakes,
            max_per_ip: self.config.max_handshakes_per_ip,
        }
    }

    /// The token of a client Initial that decrypted (RFC 9000 §8.1): the original DCID, the
    /// Retry CID (if it follows a Retry) and whether the address is validated. `None`: an
    /// invalid Retry token, for which the connection is refused with INVALID_TOKEN.
    pub(super) fn check_token(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        parsed: &header::ParsedPacket,
        data: &[u8],
    ) -> Option<(ConnectionId, Option<ConnectionId>, bool)> {
        let token = &data[parsed.token.clone()];
        if token.is_empty() {
            return Some((parsed.dcid, None, false));
        }
        match self.guard.key.check(token, remote, &parsed.dcid, now, &self.config.token_lifetimes) {
            TokenCheck::Retry { orig_dst_cid } => {
                self.guard.stats.retry_tokens_accepted += 1;
                Some((orig_dst_cid, Some(parsed.dcid), true))
            }
            TokenCheck::NewToken => {
                // A replayed token (the same one used before) validates nothing.
                let expires = now + self.config.token_lifetimes.new_token;
                if !self.guard.first_use(token, now, expires) {
                    self.guard.stats.new_tokens_replayed += 1;
                    return Some((parsed.dcid, None, false));
                }
                self.guard.stats.new_tokens_accepted += 1;
                Some((parsed.dcid, None, true))
            }
            // RFC 9000 §8.1.3: a token we cannot use, not from a Retry: as if absent.
            TokenCheck::Ignore => Some((parsed.dcid, None, false)),
            TokenCheck::InvalidRetry => None,
        }
    }

    /// Answers a client Initial with a Retry: no state is kept (RFC 9000 §8.1.2).
    pub(super) fn send_retry(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        parsed: &header::ParsedPacket,
    ) {
        if self.responses.len() >= retry::MAX_QUEUED_RESPONSES {
            return;
        }
        // §17.2.5.1: a CID of our choosing, different from the client's DCID.
        let mut scid = self.new_cid();
        while scid == parsed.dcid {
            scid = self.new_cid();
        }
        let out = retry::write_retry(&self.guard.key, &mut self.rng, now, remote, parsed, &scid);
        self.guard.stats.retries_sent += 1;
        tracing::debug!(%remote, odcid = ?parsed.dcid, "Retry sent");
        self.responses.push_back((Some(local), remote, out));
    }

    /// RFC 9000 §8.1.2: an Initial with a Retry token that fails validation (but that
    /// otherwise decrypts) is closed at once with INVALID_TOKEN, statelessly.
    pub(super) fn send_invalid_token_close(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        parsed: &header::ParsedPacket,
    ) {
        if self.responses.len() >= retry::MAX_QUEUED_RESPONSES {
            return;
        }
        let scid = self.new_cid();
        if let Some(out) = retry::write_invalid_token_close(parsed, &scid) {
            self.guard.stats.invalid_token_closes += 1;
            self.responses.push_back((Some(local), remote, out));
        }
    }
}
