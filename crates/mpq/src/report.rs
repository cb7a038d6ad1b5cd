//! The JSON summaries the tools print: per-path statistics (`mpq client --json`, `mpq perf`)
//! and a server's account of each finished connection.

use mpq_proto::conn::{ConnectionError, ConnectionStats};
use mpq_proto::endpoint::{ConnectionHandle, Endpoint};

/// The per-path part of the JSON summaries: every field of [`mpq_proto::conn::PathStats`]
/// (path_id, tx_bytes, rx_bytes, rtt_ms, lost_packets, cwnd, pmtu and the PMTU probes,
/// pacing_rate, state, backup,
/// the cross-path ACK and flow-control counters, ECN state and CE marks, ...).
pub fn paths_json(stats: &ConnectionStats) -> Vec<serde_json::Value> {
    stats.paths.iter().map(|p| serde_json::to_value(p).unwrap_or_default()).collect()
}

/// A server's one-line account of a finished connection, on stderr: `connection ended: `
/// and a JSON object (`peer`, `error`, `multipath`, `key_updates`, `reinjected_chunks`,
/// `paths` as in `mpq client --json`).
pub fn connection_end(ep: &Endpoint, h: ConnectionHandle, error: &ConnectionError) {
    let Some(c) = ep.connection(h) else { return };
    let stats = c.stats();
    let line = serde_json::json!({
        "peer": c.remote_address().to_string(),
        "error": error.to_string(),
        "multipath": c.is_multipath(),
        "key_updates": stats.key_updates,
        "reinjected_chunks": stats.reinjected_chunks,
        "paths": paths_json(&stats),
    });
    eprintln!("connection ended: {line}");
}
