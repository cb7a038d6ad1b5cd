//! Driving TLS: CRYPTO data in and out, keys per level, transport parameters,
//! handshake completion and confirmation, key discard (RFC 9001 §4).

use rand::Rng;
use rustls::quic::KeyChange;

use crate::crypto::key_update::OneRttKeys;
use crate::error::{TransportError, TransportErrorCode};
use crate::time::Instant;
use crate::transport_params::{TransportParameters, VersionInformation};
use crate::types::{Level, Side, SpaceId};

use super::config::TransportConfig;
use super::host::Host;
use super::{Connection, Event, State};
use crate::cid::ConnectionId;
use crate::stream::Streams;

/// Our transport parameters (RFC 9000 §18.2), built before the connection exists because
/// TLS needs them at construction. `version` is the connection's version: for a client the
/// version of its first Initial, for a server the negotiated one (RFC 9368 §3: the Chosen
/// Version).
pub(crate) fn local_transport_params(
    side: Side,
    config: &TransportConfig,
    local_cid: ConnectionId,
    reset_token: [u8; 16],
    orig_dst_cid: ConnectionId,
    version: u32,
) -> TransportParameters {
    let s = Streams::new(side, &config.streams).local_params();
    let mut tp = TransportParameters {
        max_idle_timeout: config.max_idle_timeout.as_millis() as u64,
        // Never below the QUIC minimum, which every peer may send (RFC 9000 §18.2).
        max_udp_payload_size: u64::from(config.max_recv_udp_payload_size.max(1200)),
        initial_max_data: s.max_data,
        initial_max_stream_data_bidi_local: s.max_stream_data_bidi_local,
        initial_max_stream_data_bidi_remote: s.max_stream_data_bidi_remote,
        initial_max_stream_data_uni: s.max_stream_data_uni,
        initial_max_streams_bidi: s.max_streams_bidi,
        initial_max_streams_uni: s.max_streams_uni,
        ack_delay_exponent: u64::from(config.ack_delay_exponent),
        max_ack_delay: config.max_ack_delay.as_millis() as u64,
        active_connection_id_limit: config.active_connection_id_limit,
        initial_source_connection_id: Some(local_cid),
        // RFC 9221 §3: 0 (omitted) means DATAGRAM frames are not supported.
        max_datagram_frame_size: config.datagrams.max_frame_size,
        initial_max_path_id: config.initial_max_path_id,
        // RFC 9368 §3: the client lists the versions it accepts being moved to, the server
        // every version it supports.
        version_information: Some(VersionInformation {
            chosen: version,
            available: match side {
                Side::Client => super::version::client_available(config),
                Side::Server => config.versions.clone(),
            },
        }),
        grease_quic_bit: config.grease_quic_bit,
        // Only offered with multipath: the single space is a multipath experiment.
        single_packet_number_space: config.single_packet_number_space && config.initial_max_path_id.is_some(),
        ..TransportParameters::default()
    };
    if side == Side::Server {
        tp.original_destination_connection_id = Some(orig_dst_cid);
        tp.stateless_reset_token = Some(reset_token);
        tp.disable_active_migration = config.disable_active_migration;
    }
    tp
}

/// The TLS secrets of a client moved to another version were not captured: cannot happen
/// for a session made with `may_upgrade`, which every client that may switch gets.
fn missing_keys() -> TransportError {
    TransportError::new(TransportErrorCode::INTERNAL_ERROR, "no secrets for the negotiated version's keys")
}

impl Connection {
    /// Pulls handshake bytes and key changes out of TLS until it has nothing more.
    pub(crate) fn drive_tls(&mut self, now: Instant) -> Result<(), TransportError> {
        self.take_peer_params()?;
        loop {
            let mut out = Vec::new();
            let change = self.shared.tls.write_handshake(&mut out);
            if !out.is_empty() {
                let space = self.shared.write_level.space();
                let stream = if space == SpaceId::Data {
                    Some(&mut self.shared.one_rtt_crypto)
                } else {
                    self.space_mut(space, 0).map(|s| &mut s.crypto)
                };
                match stream {
                    Some(s) => s.write(&out),
                    None => {
                        return Err(TransportError::new(
                            TransportErrorCode::INTERNAL_ERROR,
                            "TLS wrote at a discarded level",
                        ))
                    }
                }
            }
            // A client moved to another version derives that version's keys itself: its TLS
            // session was made for the original one (see `crypto::version_keys`).
            let (side, version) = (self.shared.side, self.shared.version.current);
            let rederive = side == Side::Client && version != self.shared.version.original;
            match change {
                Some(KeyChange::Handshake { keys }) => {
                    let keys = if rederive { self.shared.tls.handshake_keys_for(side, version) } else { Some(keys) };
                    let Some(keys) = keys else { return Err(missing_keys()) };
                    self.shared.handshake_keys = Some(keys);
                    self.shared.write_level = Level::Handshake;
                }
                Some(KeyChange::OneRtt { keys, next }) => {
                    let keys = if rederive {
                        let (keys, next) = self.shared.tls.one_rtt_keys_for(side, version).ok_or_else(missing_keys)?;
                        OneRttKeys::new_versioned(keys, next)
                    } else {
                        OneRttKeys::new(keys, next)
                    };
                    self.shared.one_rtt = Some(keys);
                    self.shared.write_level = Level::OneRtt;
                }
                None => {
                    if out.is_empty() {
                        break;
                    }
                }
            }
        }
        self.take_peer_params()?;
        self.note_zero_rtt_decision();
        if self.shared.side == Side::Server && self.shared.one_rtt.is_some() && !self.shared.handshake_complete {
            // The server knows both sides' transport parameters once it has sent its
            // Finished: multipath is on, and its CIDs for every path ID go out in 0.5-RTT
            // packets with that flight, so the client may open paths as soon as its own
            // handshake completes (RFC 10069 §3: "after completing the handshake"), one
            // round trip earlier than if they waited for the server's completion.
            self.on_handshake_complete_multipath(now);
        }
        if !self.shared.handshake_complete && !self.shared.tls.is_handshaking() {
            self.on_handshake_complete(now)?;
        }
        Ok(())
    }

    /// Applies the peer's transport parameters once TLS has this connection's own.
    ///
    /// A client that holds a session ticket sees, from TLS, the parameters remembered with
    /// the ticket (for 0-RTT) until the server's EncryptedExtensions replace them: those
    /// describe an earlier connection (its connection IDs, above all) and must not be taken
    /// for this one's. The server's arrive before its Finished, so once the 1-RTT keys are
    /// installed they are this connection's.
    fn take_peer_params(&mut self) -> Result<(), TransportError> {
        if self.shared.peer_params.is_some() || (self.shared.side == Side::Client && self.shared.one_rtt.is_none()) {
            return Ok(());
        }
        if let Some(raw) = self.shared.tls.peer_transport_params() {
            let raw = raw.to_vec();
            self.on_peer_params(&raw)?;
        }
        Ok(())
    }

    /// Validates and applies the peer's transport parameters (RFC 9000 §7.3, §7.4).
    fn on_peer_params(&mut self, raw: &[u8]) -> Result<(), TransportError> {
        let tp = TransportParameters::decode(self.shared.side.peer(), raw)?;
        self.shared.check_peer_version_information(&tp)?;
        // Authenticate the connection IDs used during the handshake (RFC 9000 §7.3).
        if tp.initial_source_connection_id != self.shared.peer_initial_scid {
            return Err(TransportError::transport_parameter("initial_source_connection_id mismatch"));
        }
        if self.shared.side == Side::Client {
            if tp.original_destination_connection_id != Some(self.shared.orig_dst_cid) {
                return Err(TransportError::transport_parameter("original_destination_connection_id mismatch"));
            }
            // RFC 9000 §7.3: after a Retry the server names the Retry's Source CID; without
            // one it must not send the parameter. Absent or mismatched: the error below.
            match (self.shared.tokens.retry_scid, tp.retry_source_connection_id) {
                (None, Some(_)) => {
                    return Err(TransportError::transport_parameter("retry_source_connection_id without a Retry"))
                }
                (Some(_), None) => {
                    return Err(TransportError::transport_parameter("retry_source_connection_id missing after a Retry"))
                }
                (Some(ours), Some(theirs)) if ours != theirs => {
                    return Err(TransportError::transport_parameter("retry_source_connection_id mismatch"))
                }
                _ => {}
            }
            if let Some(token) = tp.stateless_reset_token {
                if let Some(p) = self.shared.peer_cids.get_mut(&0) {
                    p.set_initial_reset_token(token);
                }
            }
            // RFC 9000 §5.1.1: the connection ID of preferred_address has sequence number 1.
            if let (Some(pa), Some(p)) = (tp.preferred_address, self.shared.peer_cids.get_mut(&0)) {
                p.on_new_cid(1, 0, pa.connection_id, pa.stateless_reset_token)?;
            }
        }
        if let Some(max) = tp.initial_max_path_id {
            // RFC 10069 §2.1.
            if max > super::multipath::MAX_PATH_ID_LIMIT {
                return Err(TransportError::transport_parameter("initial_max_path_id above 2^32-1"));
            }
            let zero_len =
                self.shared.local_cid_len == 0 || self.shared.peer_initial_scid.is_some_and(|c| c.is_empty());
            if zero_len && self.shared.config.initial_max_path_id.is_some() {
                return Err(TransportError::protocol_violation("multipath with zero-length connection IDs"));
            }
        }
        // The end of a client's 0-RTT: checked limits, or its data lost (RFC 9000 §7.4.1).
        self.settle_zero_rtt(&tp)?;
        self.shared.apply_peer_stream_limits(&tp);
        // Effective idle timeout: the minimum of the non-zero values (RFC 9000 §10.1).
        let peer_idle = Some(std::time::Duration::from_millis(tp.max_idle_timeout)).filter(|d| !d.is_zero());
        self.shared.idle_timeout = match (self.shared.idle_timeout, peer_idle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for p in self.paths.iter_mut() {
            // RFC 9000 §18.2: never more than the peer's max_udp_payload_size; PMTU
            // discovery searches up to it (or, off, the path takes it on trust now).
            p.set_peer_udp_limit(tp.max_udp_payload_size, false);
            // RFC 9287 §3.1: the peer accepts a cleared QUIC Bit.
            p.grease = tp.grease_quic_bit.then(|| self.shared.rng.random());
        }
        self.paths.publish_all();
        self.shared.peer_params = Some(tp);
        Ok(())
    }

    fn on_handshake_complete(&mut self, now: Instant) -> Result<(), TransportError> {
        if self.shared.peer_params.is_none() {
            return Err(TransportError::new(TransportErrorCode::crypto(109), "missing transport parameters"));
        }
        self.shared.handshake_complete = true;
        if self.shared.state == State::Handshake {
            self.shared.state = State::Established;
        }
        self.shared.events.push_back(Event::Connected);
        self.shared.qlog_version_information(now);
        self.shared.qlog_state(now, "handshake_completed");
        if self.shared.side == Side::Server {
            // RFC 9001 §4.1.2: the server's handshake is confirmed once it completes.
            self.shared.handshake_done_pending = true;
            self.host().confirm_handshake(now);
            self.deliver_mail_or_close(now);
        }
        self.host().issue_cids(now);
        self.on_handshake_complete_multipath(now);
        Ok(())
    }
}

impl Host<'_> {
    /// Feeds in-order CRYPTO bytes of `level` to TLS. What TLS answers, and the keys and
    /// handshake progress it yields, the connection takes after the packet
    /// (`Connection::drive_tls`, a follow-up): that may touch every path.
    pub(crate) fn on_crypto_data(&mut self, level: Level, data: &[u8]) -> Result<(), TransportError> {
        self.shared.tls.read_handshake(level, data)?;
        self.shared.followups.drive_tls = true;
        Ok(())
    }

    /// RFC 9001 §4.1.2 and §4.9.2: confirmed handshakes discard Handshake keys.
    pub(crate) fn confirm_handshake(&mut self, now: Instant) {
        if self.shared.handshake_confirmed {
            return;
        }
        self.shared.handshake_confirmed = true;
        self.shared.handshake_confirmed_at = Some(now);
        self.discard_space(now, SpaceId::Handshake);

        // RFC 9000 §8.1.3: a token for the client's next connection.
        self.queue_new_token();
        self.maybe_signal_new_path_allowed();
        self.shared.events.push_back(Event::HandshakeConfirmed);
        self.shared.qlog_state(now, "handshake_confirmed");
    }

    /// Drops the keys and state of a packet number space (RFC 9001 §4.9, RFC 9002 §6.4):
    /// its packets leave the bytes in flight without being declared lost.
    pub(crate) fn discard_space(&mut self, _now: Instant, id: SpaceId) {
        let space = match id {
            SpaceId::Initial => {
                self.shared.initial_keys = None;
                self.shared.version.original_initial_keys = None;
                self.shared.initial.take()
            }
            SpaceId::Handshake => {
                self.shared.handshake_keys = None;
                self.shared.handshake.take()
            }
            SpaceId::Data => return,
        };
        if let Some(mut s) = space {
            let in_flight: u64 =
                s.loss.discard_all().into_iter().filter(|(_, p)| p.in_flight).map(|(_, p)| u64::from(p.size)).sum();
            // The primary path carried the handshake: it takes the bytes out of its flight
            // and restarts its PTO backoff (RFC 9002 §6.2.2) itself (mail).
            if let Some(slot) = self.primary_slot() {
                let mail = self.post(slot);
                *mail.discarded_in_flight.get_or_insert(0) += in_flight;
            }
        }
    }
}
