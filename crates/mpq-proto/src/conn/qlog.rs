//! qlog events of the connection, with the names and fields of qlog 0.3 (see [`crate::qlog`]).
//! Each helper returns at once when no sink is installed.

use serde_json::{json, Value};

use crate::qlog::{frames_json, packet_number_space_name, packet_type_name};
use crate::time::Instant;
use crate::types::{Level, SpaceId};

use super::events::ConnectionError;
use super::host::Host;
use super::path::PathState;
use super::{CloseFrame, ConnShared};

/// qlog's milliseconds (its RTTs and delays are float milliseconds).
fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// qlog `transport:packet_sent` and `recovery:metrics_updated` for a packet `path` sent,
/// built from the path alone, so that a path building a batch alone records its own events
/// (handed to the sink when the batch returns).
pub(crate) fn packet_sent_events(
    level: Level,
    path: &PathState,
    pn: u64,
    size: usize,
    frames: Option<Vec<Value>>,
) -> [(&'static str, Value); 2] {
    let sent = json!({
        "header": {"packet_type": packet_type_name(level), "packet_number": pn, "path_id": path.id},
        "raw": {"length": size},
        "frames": frames.unwrap_or_default(),
    });
    let mut metrics = json!({
        "min_rtt": ms(path.rtt.min()),
        "smoothed_rtt": ms(path.rtt.smoothed()),
        "latest_rtt": ms(path.rtt.latest()),
        "rtt_variance": ms(path.rtt.rttvar()),
        "pto_count": path.pto_count,
        "congestion_window": path.cc.window(),
        "bytes_in_flight": path.bytes_in_flight,
        "path_id": path.id,
    });
    // Before the first loss the threshold is "infinite" (u64::MAX): qlog has no such value.
    let ssthresh = path.cc.ssthresh();
    if ssthresh != u64::MAX {
        metrics["ssthresh"] = ssthresh.into();
    }
    [("transport:packet_sent", sent), ("recovery:metrics_updated", metrics)]
}

impl ConnShared {
    /// qlog `PacketHeader`: long headers carry the version (a hex string in qlog's QUIC
    /// schema), which tells v1 from v2 (RFC 9369) and shows a compatible version negotiation.
    fn qlog_header(&self, level: Level, pn: u64, path_id: u64) -> Value {
        let mut h = json!({"packet_type": packet_type_name(level), "packet_number": pn, "path_id": path_id});
        if level != Level::OneRtt {
            h["version"] = format!("{:08x}", self.version.current).into();
        }
        h
    }

    /// The qlog frames of a packet about to be sealed, read from its plaintext `payload` (the
    /// bytes after the packet number); `None` without a sink, so that a connection without
    /// qlog decodes nothing.
    pub(crate) fn qlog_sent_frames(&self, payload: &[u8]) -> Option<Vec<Value>> {
        self.qlog.as_ref()?;
        Some(frames_json(payload, self.config.ack_delay_exponent))
    }

    /// qlog `transport:packet_sent` and `recovery:metrics_updated` for a packet of `path`;
    /// `frames` from [`Self::qlog_sent_frames`] before the packet was sealed.
    pub(crate) fn qlog_packet_sent(
        &mut self,
        now: Instant,
        level: Level,
        path: &PathState,
        pn: u64,
        size: usize,
        frames: Option<Vec<Value>>,
    ) {
        if self.qlog.is_none() {
            return;
        }
        let header = self.qlog_header(level, pn, path.id);
        let Some(q) = self.qlog.as_mut() else { return };
        let mut events = packet_sent_events(level, path, pn, size, frames);
        // (A long header's also names the version.)
        events[0].1["header"] = header;
        for (name, data) in events {
            q.emit(now, name, data);
        }
    }

    /// Emits, in order, the qlog events a path recorded while it built a batch alone.
    pub(crate) fn qlog_emit_recorded(&mut self, events: Vec<(Instant, &'static str, Value)>) {
        let Some(q) = self.qlog.as_mut() else { return };
        for (now, name, data) in events {
            q.emit(now, name, data);
        }
    }

    /// qlog `transport:packet_received` for an authenticated packet whose frames were
    /// processed: `payload` is its plaintext, `length` the packet's size on the wire.
    pub(crate) fn qlog_packet_received(
        &mut self,
        now: Instant,
        level: Level,
        path_id: u64,
        pn: u64,
        length: usize,
        payload: &[u8],
    ) {
        if self.qlog.is_none() {
            return;
        }
        let exponent = self.peer_ack_delay_exponent();
        let frames = frames_json(payload, exponent);
        let header = self.qlog_header(level, pn, path_id);
        let Some(q) = self.qlog.as_mut() else { return };
        q.emit(
            now,
            "transport:packet_received",
            json!({
                "header": header,
                "raw": {"length": length, "payload_length": payload.len()},
                "frames": frames,
            }),
        );
    }

    /// qlog `transport:packet_received` for a Retry packet (`length` bytes, from the server's
    /// new connection ID `scid`).
    pub(crate) fn qlog_retry_received(&mut self, now: Instant, length: usize, scid: &crate::cid::ConnectionId) {
        let Some(q) = self.qlog.as_mut() else { return };
        q.emit(
            now,
            "transport:packet_received",
            json!({"header": {"packet_type": "retry", "scid": scid.to_string()}, "raw": {"length": length}}),
        );
    }

    /// qlog `recovery:packet_lost`.
    pub(crate) fn qlog_packet_lost(&mut self, now: Instant, space: SpaceId, path_id: u64, pn: u64) {
        let Some(q) = self.qlog.as_mut() else { return };
        let ty = match space {
            SpaceId::Initial => Level::Initial,
            SpaceId::Handshake => Level::Handshake,
            SpaceId::Data => Level::OneRtt,
        };
        q.emit(
            now,
            "recovery:packet_lost",
            json!({"header": {"packet_type": packet_type_name(ty), "packet_number": pn, "path_id": path_id}}),
        );
    }

    /// qlog `connectivity:connection_state_updated`; `state` is one of the schema's
    /// `ConnectionState` values (`handshake_completed`, `handshake_confirmed`, ...).
    pub(crate) fn qlog_state(&mut self, now: Instant, state: &'static str) {
        let Some(q) = self.qlog.as_mut() else { return };
        q.emit(now, "connectivity:connection_state_updated", json!({"new": state}));
    }

    /// qlog `connectivity:connection_closed` for a close we start (CONNECTION_CLOSE sent).
    pub(crate) fn qlog_closed(&mut self, now: Instant, close: &CloseFrame) {
        let Some(q) = self.qlog.as_mut() else { return };
        let reason = String::from_utf8_lossy(&close.reason);
        let data = match close.frame_type {
            Some(_) => json!({
                "owner": "local",
                "connection_code": close.error_code,
                "reason": reason,
                "trigger": if close.error_code == 0 { "clean" } else { "error" },
            }),
            None => {
                json!({"owner": "local", "application_code": close.error_code, "reason": reason, "trigger": "application"})
            }
        };
        q.emit(now, "connectivity:connection_closed", data);
        q.emit(now, "connectivity:connection_state_updated", json!({"new": "closing"}));
    }

    /// qlog `connectivity:connection_closed` for an end the peer or a timer chose: a
    /// CONNECTION_CLOSE received, a stateless reset, a timeout.
    pub(crate) fn qlog_lost(&mut self, now: Instant, err: &ConnectionError) {
        let Some(q) = self.qlog.as_mut() else { return };
        let data = match err {
            ConnectionError::ConnectionClosed(e) => json!({
                "owner": "remote",
                "connection_code": e.code.0,
                "reason": e.reason,
                "trigger": if e.code.0 == 0 { "clean" } else { "error" },
            }),
            ConnectionError::ApplicationClosed { code, reason } => {
                json!({"owner": "remote", "application_code": code, "reason": reason, "trigger": "application"})
            }
            ConnectionError::TimedOut => json!({"trigger": "idle_timeout"}),
            ConnectionError::HandshakeTimeout { .. } => json!({"trigger": "handshake_timeout"}),
            ConnectionError::Reset => json!({"owner": "remote", "trigger": "stateless_reset"}),
            ConnectionError::VersionMismatch => json!({"owner": "remote", "trigger": "version_mismatch"}),
            ConnectionError::TransportError(e) => {
                json!({"owner": "local", "connection_code": e.code.0, "reason": e.reason, "trigger": "error"})
            }
            ConnectionError::LocallyClosed => json!({"owner": "local", "trigger": "application"}),
        };
        q.emit(now, "connectivity:connection_closed", data);
    }

    /// qlog `recovery:loss_timer_updated`: the PTO of `space` on path `path_id` expired.
    /// qlog `connectivity:mtu_updated` (qlog 0.3's QUIC schema: old, new, done) of a path
    /// whose PMTU discovery changed its datagram size.
    pub(crate) fn qlog_mtu_updated(&mut self, now: Instant, path_id: u64, change: crate::recovery::pmtud::PmtuChange) {
        let Some(q) = self.qlog.as_mut() else { return };
        let crate::recovery::pmtud::PmtuChange::Updated { old, new, done } = change;
        q.emit(now, "connectivity:mtu_updated", json!({"old": old, "new": new, "done": done, "path_id": path_id}));
    }

    pub(crate) fn qlog_pto(&mut self, now: Instant, space: SpaceId, path_id: u64) {
        let Some(q) = self.qlog.as_mut() else { return };
        q.emit(
            now,
            "recovery:loss_timer_updated",
            json!({
                "event_type": "expired",
                "timer_type": "pto",
                "packet_number_space": packet_number_space_name(space),
                "path_id": path_id,
            }),
        );
    }

    /// qlog `security:key_updated` for a 1-RTT key update (RFC 9001 §6): both directions'
    /// keys change, so one event for each; `trigger` is `local_update` or `remote_update`.
    ///
    /// The keys themselves stay out of the log (qlog's `old` and `new`), as quiche leaves
    /// them out: a qlog file is shared for debugging.
    pub(crate) fn qlog_key_update(&mut self, now: Instant, trigger: &'static str) {
        let Some(q) = self.qlog.as_mut() else { return };
        for key_type in ["client_1rtt_secret", "server_1rtt_secret"] {
            q.emit(now, "security:key_updated", json!({"key_type": key_type, "trigger": trigger}));
        }
    }
}

impl Host<'_> {
    /// A multipath (RFC 10069) path event, `connectivity:path_updated`: qlog 0.3 has no path
    /// events, so this one is mpq's, with the path's `path_id`, its new `state` (`new`,
    /// `validated`, `potentially_failed`, `rebinding`, `abandoned`, `closed`) and its
    /// addresses.
    pub(crate) fn qlog_path(&mut self, now: Instant, path_id: u64, state: &str) {
        if self.shared.qlog.is_none() {
            return;
        }
        let (remote, local) = match self.path_slot(path_id).and_then(|i| self.view(i)) {
            Some(p) => (p.remote.to_string(), p.local.map(|l| l.to_string())),
            None => (String::new(), None),
        };
        let Some(q) = self.shared.qlog.as_mut() else { return };
        q.emit(
            now,
            "connectivity:path_updated",
            json!({"path_id": path_id, "state": state, "peer": remote, "local": local}),
        );
    }
}
