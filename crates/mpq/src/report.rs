//! The JSON summaries the tools print: per-path statistics (`mpq client --json`, `mpq perf`)
//! and a server's account of each finished connection.

use mpq_io::path_threads::ThreadReport;
use mpq_proto::conn::ConnectionStats;

/// The per-path part of the JSON summaries: every field of [`mpq_proto::conn::PathStats`]
/// (path_id, tx_bytes, rx_bytes, rtt_ms, lost_packets, cwnd, pmtu and the PMTU probes,
/// pacing_rate, state, backup,
/// the cross-path ACK and flow-control counters, ECN state and CE marks, ...).
pub fn paths_json(stats: &ConnectionStats) -> Vec<serde_json::Value> {
    stats.paths.iter().map(|p| serde_json::to_value(p).unwrap_or_default()).collect()
}

/// Prints a connection's `connection ended: {json}` line (stderr) from its final report.
pub fn final_report(end: &mpq_api::FinalReport) {
    let line = serde_json::json!({
        "peer": end.remote.to_string(),
        "error": end.error.to_string(),
        "multipath": end.multipath,
        "key_updates": end.stats.key_updates,
        "reinjected_chunks": end.stats.reinjected_chunks,
        "copies_acked_first": end.stats.copies_acked_first,
        "copies_acked_late": end.stats.copies_acked_late,
        "paths": paths_json(&end.stats),
    });
    eprintln!("connection ended: {line}");
}

/// Each runtime thread's account for the JSON summaries: `role` (`main`, or `path` for a
/// path thread with its `paths` and, when it drove one, its `path_id`), `cpu_s`, its socket counters, the batches it opened and
/// built without the lock, and how often and how long it waited for the lock.
pub fn threads_json(threads: &[ThreadReport]) -> Vec<serde_json::Value> {
    threads
        .iter()
        .map(|t| {
            serde_json::json!({
                "role": if !t.paths.is_empty() { "path" } else if t.shard.is_some() { "shard" } else { "main" },
                "path_id": t.path_id,
                "paths": t.paths,
                "shard": t.shard,
                "forwarded": t.forwarded,
                "cpu_s": t.cpu.as_secs_f64(),
                "rx_datagrams": t.io.rx_datagrams,
                "tx_bytes": t.io.tx_bytes,
                "runs_opened": t.runs_opened,
                "batches_built": t.batches_built,
                "lock_takes": t.lock_takes,
                "lock_wait_s": t.lock_wait.as_secs_f64(),
                "lock_held_s": t.lock_held.as_secs_f64(),
            })
        })
        .collect()
}

/// One line per path, for the text summaries of a multipath run (nothing for one path).
pub fn print_paths(stats: &ConnectionStats, secs: f64) {
    if stats.paths.len() < 2 {
        return;
    }
    for p in &stats.paths {
        println!(
            "  path {}: {:.1} MB received ({:.1} Mbit/s), RTT {:.2} ms, cwnd {} kB, {} packets lost, {}",
            p.path_id,
            p.rx_bytes as f64 / 1e6,
            p.rx_bytes as f64 * 8.0 / secs.max(1e-9) / 1e6,
            p.rtt_ms,
            p.cwnd / 1000,
            p.lost_packets,
            p.state
        );
    }
}

/// One line per runtime thread, for the text summaries (nothing for a single thread).
pub fn print_threads(threads: &[ThreadReport], secs: f64) {
    if threads.len() < 2 {
        return;
    }
    for t in threads {
        let who = match (t.path_id, t.shard) {
            (Some(p), _) => format!("path {p} thread"),
            (None, Some(k)) => format!("shard {k} thread"),
            (None, None) if !t.paths.is_empty() => {
                let ids: Vec<String> = t.paths.iter().map(u64::to_string).collect();
                format!("paths {} thread", ids.join(","))
            }
            (None, None) => "main thread".to_string(),
        };
        println!(
            "  {who}: CPU {:.0} %, {} datagrams in, {:.1} MB out, {} receive runs and {} send batches without the lock, lock waited {:.1} ms and held {:.1} ms",
            100.0 * t.cpu.as_secs_f64() / secs.max(1e-9),
            t.io.rx_datagrams,
            t.io.tx_bytes as f64 / 1e6,
            t.runs_opened,
            t.batches_built,
            t.lock_wait.as_secs_f64() * 1e3,
            t.lock_held.as_secs_f64() * 1e3
        );
    }
}

/// A server's accounts of a connection it accepted: its handshake in the log now, and its
/// `connection ended` line ([`final_report`]) from a task when it closes.
pub fn follow_server_connection(conn: &mpq_api::Connection) {
    if let Ok(Some(info)) = conn.handshake_info() {
        tracing::info!(peer = ?conn.remote_address().ok(), "server handshake complete: {info}");
    }
    let ending = conn.clone();
    tokio::spawn(async move {
        ending.closed().await;
        if let Some(end) = ending.final_report() {
            final_report(&end);
        }
    });
}
