//! qlog events of the connection. Each helper returns at once when no sink is installed.

use serde_json::json;

use crate::qlog::packet_type_name;
use crate::time::Instant;
use crate::types::{Level, SpaceId};

use super::host::Host;
use super::path::PathState;
use super::space::SentFrames;
use super::{CloseFrame, ConnShared};

impl ConnShared {
    /// qlog `transport:packet_sent` and `recovery:metrics_updated` for a packet of `path`.
    pub(crate) fn qlog_packet_sent(
        &mut self,
        now: Instant,
        level: Level,
        path: &PathState,
        pn: u64,
        size: usize,
        frames: &SentFrames,
    ) {
        let Some(q) = self.qlog.as_mut() else { return };
        let mut fr = Vec::new();
        for (path_id, l) in &frames.acks {
            fr.push(json!({"frame_type": "ack", "path_id": path_id, "largest_acknowledged": l}));
        }
        for c in frames.crypto() {
            fr.push(json!({"frame_type": "crypto", "offset": c.start, "length": c.end - c.start}));
        }
        for s in &frames.stream {
            fr.push(
                json!({"frame_type": "stream", "stream_id": s.id.0, "offset": s.offset, "length": s.len, "fin": s.fin}),
            );
        }
        for c in frames.control() {
            fr.push(json!({"frame_type": format!("{c:?}")}));
        }
        q.emit(
            now,
            "transport:packet_sent",
            json!({"header": {"packet_type": packet_type_name(level), "packet_number": pn, "path_id": path.id}, "raw": {"length": size}, "frames": fr}),
        );
        let cwnd = path.cc.window();
        let inflight = path.bytes_in_flight;
        let srtt = path.rtt.smoothed().as_secs_f64() * 1e3;
        q.emit(
            now,
            "recovery:metrics_updated",
            json!({"congestion_window": cwnd, "bytes_in_flight": inflight, "smoothed_rtt": srtt, "path_id": path.id}),
        );
    }
}

impl Host<'_> {
    /// A multipath (RFC 10069) path event (qlog `path_assigned` / `path_updated`).
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

impl ConnShared {
    pub(crate) fn qlog_packet_received(&mut self, now: Instant, level: Level, path_id: u64, pn: u64, size: usize) {
        let Some(q) = self.qlog.as_mut() else { return };
        q.emit(now, "transport:packet_received", json!({"header": {"packet_type": packet_type_name(level), "packet_number": pn, "path_id": path_id}, "raw": {"payload_length": size}}));
    }

    pub(crate) fn qlog_packet_lost(&mut self, now: Instant, space: SpaceId, path_id: u64, pn: u64) {
        let Some(q) = self.qlog.as_mut() else { return };
        let ty = match space {
            SpaceId::Initial => "initial",
            SpaceId::Handshake => "handshake",
            SpaceId::Data => "1RTT",
        };
        q.emit(
            now,
            "recovery:packet_lost",
            json!({"header": {"packet_type": ty, "packet_number": pn, "path_id": path_id}}),
        );
    }

    pub(crate) fn qlog_state(&mut self, now: Instant, state: &str) {
        let Some(q) = self.qlog.as_mut() else { return };
        q.emit(now, "connectivity:connection_state_updated", json!({"new": state}));
    }

    pub(crate) fn qlog_closed(&mut self, now: Instant, close: &CloseFrame) {
        let Some(q) = self.qlog.as_mut() else { return };
        let owner = "local";
        let data = match close.frame_type {
            Some(_) => {
                json!({"owner": owner, "connection_code": close.error_code, "reason": String::from_utf8_lossy(&close.reason)})
            }
            None => {
                json!({"owner": owner, "application_code": close.error_code, "reason": String::from_utf8_lossy(&close.reason)})
            }
        };
        q.emit(now, "connectivity:connection_closed", data);
    }

    pub(crate) fn qlog_pto(&mut self, now: Instant, space: SpaceId, path_id: u64) {
        let Some(q) = self.qlog.as_mut() else { return };
        q.emit(
            now,
            "recovery:loss_timer_updated",
            json!({"event_type": "expired", "timer_type": "pto", "packet_number_space": format!("{space:?}"), "path_id": path_id}),
        );
    }

    pub(crate) fn qlog_key_update(&mut self, now: Instant, trigger: &str) {
        let Some(q) = self.qlog.as_mut() else { return };
        q.emit(now, "security:key_updated", json!({"key_type": "1RTT", "trigger": trigger}));
    }
}
