//! qlog: the core emits typed events with their time; the runtime decides where they go (a
//! JSON-SEQ file, memory).
//!
//! Emitting is a callback, not I/O: the core stays sans-IO and pays nothing without a sink.
//!
//! # Format
//!
//! Events follow qlog version 0.3 (`"qlog_version": "0.3"`, the JSON-SEQ format of
//! draft-ietf-quic-qlog-main-schema-01 and its QUIC events: `transport:packet_sent`,
//! `recovery:metrics_updated`, `connectivity:connection_state_updated`, ...). It is the newest
//! qlog that qvis reads (its loader accepts `qlog_version` "0.3" and its graphs look events
//! up by the categories `transport` and `recovery`), and the one the `qlog` crate models up
//! to its 0.16 release; later drafts renamed the events `quic:...`, which qvis does not know.
//!
//! Frames are the schema's frame objects (`{"frame_type": "stream", "stream_id": 0, ...}`),
//! read back from the packet's bytes, so the log shows what went on the wire. The multipath
//! frames of RFC 10069 §4, which qlog 0.3 does not define, are written the same way: the
//! frame's name in snake case as `frame_type` (`path_ack`, `path_abandon`,
//! `path_new_connection_id`, ...), its Path Identifier as `path_id`, and its other fields
//! under the names the schema gives the single-path frame they extend (PATH_ACK has the
//! fields of ACK) or their RFC 10069 names in snake case. Packet headers, recovery metrics and
//! loss timers carry the `path_id` of their path the same way.

use serde_json::{json, Value};

use crate::coding::Reader;
use crate::frame::Frame;
use crate::time::Instant;
use crate::types::{Dir, Level, SpaceId};

/// Receives qlog events from one connection.
pub trait QlogSink: Send {
    /// One event: `name` is the qlog event name (e.g. `transport:packet_sent`), `data` its data
    /// object; `time` is the connection's clock.
    fn emit(&mut self, time: Instant, name: &'static str, data: serde_json::Value);
}

/// A sink that keeps events in memory (tests, or a runtime that writes them later).
#[derive(Debug, Default)]
pub struct MemorySink {
    /// Events as (time, name, data).
    pub events: Vec<(Instant, &'static str, serde_json::Value)>,
}

impl QlogSink for MemorySink {
    fn emit(&mut self, time: Instant, name: &'static str, data: serde_json::Value) {
        self.events.push((time, name, data));
    }
}

/// qlog's name for a packet type at an encryption level.
pub fn packet_type_name(level: Level) -> &'static str {
    match level {
        Level::Initial => "initial",
        Level::Handshake => "handshake",
        Level::ZeroRtt => "0RTT",
        Level::OneRtt => "1RTT",
    }
}

/// qlog's name for a packet number space (`PacketNumberSpace`).
pub fn packet_number_space_name(space: SpaceId) -> &'static str {
    match space {
        SpaceId::Initial => "initial",
        SpaceId::Handshake => "handshake",
        SpaceId::Data => "application_data",
    }
}

/// qlog's name for a stream type (`StreamType`).
fn stream_type_name(dir: Dir) -> &'static str {
    match dir {
        Dir::Bi => "bidirectional",
        Dir::Uni => "unidirectional",
    }
}

/// Bytes as lowercase hex, qlog's `hexstring`.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(2 * bytes.len()), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The qlog frame object of `frame`. `ack_delay_exponent` is the one of the frame's sender
/// (RFC 9000 §18.2): it turns an ACK's encoded delay into qlog's milliseconds.
///
/// Stateless reset tokens and NEW_TOKEN tokens are left out (qlog makes them optional): a
/// qlog file is shared for debugging, and either would let its reader forge a reset or
/// claim an address.
pub fn frame_json(frame: &Frame<'_>, ack_delay_exponent: u8) -> Value {
    match frame {
        Frame::Padding { len } => json!({"frame_type": "padding", "length": len, "payload_length": len}),
        Frame::Ping => json!({"frame_type": "ping"}),
        Frame::Ack(a) => {
            // qlog lists ranges as closed [smallest, largest] pairs, lowest first.
            let mut ranges: Vec<[u64; 2]> = a.iter().map(|r| [r.start, r.end - 1]).collect();
            ranges.reverse();
            let delay_us = a.delay.checked_shl(u32::from(ack_delay_exponent)).unwrap_or(u64::MAX);
            let mut o = json!({
                "frame_type": if a.path_id.is_some() { "path_ack" } else { "ack" },
                "ack_delay": delay_us as f64 / 1e3,
                "acked_ranges": ranges,
            });
            if let Some(p) = a.path_id {
                o["path_id"] = p.into();
            }
            if let Some(e) = a.ecn {
                o["ect0"] = e.ect0.into();
                o["ect1"] = e.ect1.into();
                o["ce"] = e.ce.into();
            }
            o
        }
        Frame::ResetStream { id, error_code, final_size } => json!({
            "frame_type": "reset_stream", "stream_id": id.0, "error_code": error_code, "final_size": final_size,
        }),
        Frame::StopSending { id, error_code } => {
            json!({"frame_type": "stop_sending", "stream_id": id.0, "error_code": error_code})
        }
        Frame::Crypto { offset, data } => json!({"frame_type": "crypto", "offset": offset, "length": data.len()}),
        Frame::NewToken { token } => {
            json!({"frame_type": "new_token", "token": {"type": "resumption", "raw": {"length": token.len()}}})
        }
        Frame::Stream { id, offset, fin, data } => json!({
            "frame_type": "stream", "stream_id": id.0, "offset": offset, "length": data.len(), "fin": fin,
        }),
        Frame::MaxData(m) => json!({"frame_type": "max_data", "maximum": m}),
        Frame::MaxStreamData { id, max } => json!({"frame_type": "max_stream_data", "stream_id": id.0, "maximum": max}),
        Frame::MaxStreams { dir, count } => {
            json!({"frame_type": "max_streams", "stream_type": stream_type_name(*dir), "maximum": count})
        }
        Frame::DataBlocked(l) => json!({"frame_type": "data_blocked", "limit": l}),
        Frame::StreamDataBlocked { id, limit } => {
            json!({"frame_type": "stream_data_blocked", "stream_id": id.0, "limit": limit})
        }
        Frame::StreamsBlocked { dir, limit } => {
            json!({"frame_type": "streams_blocked", "stream_type": stream_type_name(*dir), "limit": limit})
        }
        Frame::NewConnectionId(n) => {
            let mut o = json!({
                "frame_type": if n.path_id.is_some() { "path_new_connection_id" } else { "new_connection_id" },
                "sequence_number": n.seq,
                "retire_prior_to": n.retire_prior_to,
                "connection_id_length": n.cid.len(),
                "connection_id": hex(&n.cid),
            });
            if let Some(p) = n.path_id {
                o["path_id"] = p.into();
            }
            o
        }
        Frame::RetireConnectionId { path_id, seq } => match path_id {
            Some(p) => json!({"frame_type": "path_retire_connection_id", "path_id": p, "sequence_number": seq}),
            None => json!({"frame_type": "retire_connection_id", "sequence_number": seq}),
        },
        Frame::PathChallenge(d) => json!({"frame_type": "path_challenge", "data": hex(d)}),
        Frame::PathResponse(d) => json!({"frame_type": "path_response", "data": hex(d)}),
        Frame::ConnectionClose(c) => {
            let mut o = json!({
                "frame_type": "connection_close",
                "error_space": if c.frame_type.is_some() { "transport_error" } else { "application_error" },
                "error_code": c.error_code,
                "reason": String::from_utf8_lossy(c.reason),
            });
            if let Some(t) = c.frame_type {
                o["trigger_frame_type"] = t.into();
            }
            o
        }
        Frame::HandshakeDone => json!({"frame_type": "handshake_done"}),
        Frame::Datagram { data } => json!({"frame_type": "datagram", "length": data.len()}),
        Frame::PathAbandon { path_id, error_code } => {
            json!({"frame_type": "path_abandon", "path_id": path_id, "error_code": error_code})
        }
        Frame::PathStatus { path_id, seq, backup } => json!({
            "frame_type": if *backup { "path_status_backup" } else { "path_status_available" },
            "path_id": path_id,
            "path_status_sequence_number": seq,
        }),
        Frame::MaxPathId(m) => json!({"frame_type": "max_path_id", "maximum_path_id": m}),
        Frame::PathsBlocked(m) => json!({"frame_type": "paths_blocked", "maximum_path_id": m}),
        Frame::PathCidsBlocked { path_id, next_seq } => {
            json!({"frame_type": "path_cids_blocked", "path_id": path_id, "next_sequence_number": next_seq})
        }
    }
}

/// The qlog frame objects of a packet's plaintext payload, in order. A frame that does not
/// decode (possible only for a received packet the connection then rejects) ends the list as
/// an `unknown` frame with its type, as the schema has it for frames it cannot name.
pub fn frames_json(payload: &[u8], ack_delay_exponent: u8) -> Vec<Value> {
    let mut r = Reader::new(payload);
    let mut out = Vec::new();
    while !r.is_empty() {
        match Frame::decode(&mut r) {
            Ok(f) => out.push(frame_json(&f, ack_delay_exponent)),
            Err(e) => {
                out.push(json!({"frame_type": "unknown", "raw_frame_type": e.frame_type.unwrap_or(0)}));
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
