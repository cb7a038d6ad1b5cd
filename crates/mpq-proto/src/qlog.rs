//! qlog (draft-ietf-quic-qlog-main-schema, draft-ietf-quic-qlog-quic-events): the core emits
//! typed events with their time; the runtime decides where they go (a JSON-SEQ file, memory).
//!
//! Emitting is a callback, not I/O: the core stays sans-IO and pays nothing without a sink.

use crate::time::Instant;

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
pub fn packet_type_name(level: crate::types::Level) -> &'static str {
    match level {
        crate::types::Level::Initial => "initial",
        crate::types::Level::Handshake => "handshake",
        crate::types::Level::ZeroRtt => "0RTT",
        crate::types::Level::OneRtt => "1RTT",
    }
}
