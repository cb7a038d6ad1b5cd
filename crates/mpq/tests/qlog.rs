//! The qlog files `mpq` writes, read back by the `qlog` crate (cloudflare/quiche's data model,
//! 0.16: the last release on qlog 0.3, the version qvis reads) after a multipath download
//! in the simulator whose first path fails, so that the log holds PATH_ACKs, PATH_ABANDONs,
//! PATH_NEW_CONNECTION_IDs, losses and PTOs besides the handshake and the data.
//!
//! Every record must parse with the crate's types, except what qlog 0.3 does not define,
//! which is checked here by hand against the names mpq gives it (see `mpq_proto::qlog`):
//! - the RFC 10069 frames (`path_ack`, `path_abandon`, ...), which the crate's frame enum
//!   rejects: each is checked by hand, then stands in for the crate's `unknown` frame so that
//!   the rest of its record is still parsed by the crate;
//! - `connectivity:path_updated`, mpq's path event: checked by hand, and parsed as the
//!   crate's generic `JsonEvent`;
//! - `security:key_updated`, whose `new` key the crate requires while mpq leaves keys out of
//!   its logs: checked by hand (this run has no key update; the check is for runs that do).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// Runs a two-path download whose path 0 fails at 200 ms, with qlog files in `dir`; returns
/// the files. 6 MB lasts long enough for the dead path to be abandoned (with HyStart++, 3 MB
/// finished in 1.36 s, before it was).
fn multipath_run(dir: &Path) -> Vec<PathBuf> {
    let d = dir.to_str().expect("utf-8 temp dir");
    let out = common::mpq(&["sim", "--size", "6MB", "--fail-link", "0@200ms", "--qlog-dir", d]);
    assert!(out.status.success(), "mpq sim failed: {}", common::text(&out.stderr));
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("qlog dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sqlog"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "one file per connection end: {files:?}");
    files
}

/// A JSON-SEQ file's records (RFC 7464: each starts with RS), header first.
fn records(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("qlog file");
    let mut parts = text.split('\x1e');
    assert_eq!(parts.next(), Some(""), "{}: the file starts with a record separator", path.display());
    parts.map(|r| r.trim_end().to_string()).collect()
}

/// The multipath frames of RFC 10069 §4 as mpq names them, each with its codepoint (what
/// it becomes as the crate's `unknown` frame) and the fields it must have.
fn multipath_frame(frame_type: &str) -> Option<(u64, &'static [&'static str])> {
    Some(match frame_type {
        "path_ack" => (0x3e, &["path_id", "ack_delay", "acked_ranges"]),
        "path_abandon" => (0x3e75, &["path_id", "error_code"]),
        "path_status_backup" => (0x3e76, &["path_id", "path_status_sequence_number"]),
        "path_status_available" => (0x3e77, &["path_id", "path_status_sequence_number"]),
        "path_new_connection_id" => {
            (0x3e78, &["path_id", "sequence_number", "retire_prior_to", "connection_id_length", "connection_id"])
        }
        "path_retire_connection_id" => (0x3e79, &["path_id", "sequence_number"]),
        "max_path_id" => (0x3e7a, &["maximum_path_id"]),
        "paths_blocked" => (0x3e7b, &["maximum_path_id"]),
        "path_cids_blocked" => (0x3e7c, &["path_id", "next_sequence_number"]),
        _ => return None,
    })
}

/// Checks the multipath frames of an event by hand and puts the crate's `unknown` frame in
/// their place; returns the multipath frame types seen.
fn replace_multipath_frames(event: &mut Value, at: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let Some(frames) = event["data"].get_mut("frames").and_then(Value::as_array_mut) else { return seen };
    for f in frames {
        let ty = f["frame_type"].as_str().unwrap_or_default().to_string();
        let Some((codepoint, fields)) = multipath_frame(&ty) else { continue };
        for field in fields {
            assert!(f.get(*field).is_some(), "{at}: {ty} lacks {field}: {f}");
        }
        if let Some(id) = f.get("path_id") {
            assert!(id.is_u64(), "{at}: {ty}'s path_id is not an integer: {f}");
        }
        if ty == "path_ack" {
            // The ranges as the ACK frame of the schema has them: [smallest, largest] pairs.
            let ranges: Vec<(u64, u64)> = serde_json::from_value(f["acked_ranges"].clone())
                .unwrap_or_else(|e| panic!("{at}: path_ack ranges: {e}: {f}"));
            assert!(!ranges.is_empty() && ranges.iter().all(|(a, b)| a <= b), "{at}: {f}");
        }
        *f = json!({"frame_type": "unknown", "raw_frame_type": codepoint});
        seen.push(ty);
    }
    seen
}

/// What one file held, for the coverage checks.
#[derive(Debug, Default)]
struct Seen {
    events: BTreeSet<String>,
    frames: BTreeSet<String>,
    header_path_ids: BTreeSet<u64>,
}

/// Parses every record of `path` with the crate (or by hand, see the file's comment).
fn parse_with_qlog_crate(path: &Path) -> Seen {
    let recs = records(path);
    let header: qlog::QlogSeq =
        serde_json::from_str(&recs[0]).unwrap_or_else(|e| panic!("{}: header: {e}: {}", path.display(), recs[0]));
    assert_eq!(header.qlog_version, qlog::QLOG_VERSION);
    assert_eq!(header.qlog_format, "JSON-SEQ");
    let vantage = if path.to_string_lossy().ends_with("_client.sqlog") {
        qlog::VantagePointType::Client
    } else {
        qlog::VantagePointType::Server
    };
    assert_eq!(header.trace.vantage_point.ty, vantage);

    let mut seen = Seen::default();
    for (i, rec) in recs.iter().enumerate().skip(1) {
        let at = format!("{} record {i}", path.display());
        let mut v: Value = serde_json::from_str(rec).unwrap_or_else(|e| panic!("{at}: not JSON: {e}: {rec}"));
        let name = v["name"].as_str().unwrap_or_else(|| panic!("{at}: no name: {rec}")).to_string();
        seen.events.insert(name.clone());
        for f in v["data"]["frames"].as_array().into_iter().flatten() {
            seen.frames.insert(f["frame_type"].as_str().unwrap_or_default().to_string());
        }
        if let Some(id) = v["data"]["header"].get("path_id") {
            seen.header_path_ids.insert(id.as_u64().unwrap_or_else(|| panic!("{at}: path_id {id}")));
        } else if name.starts_with("transport:packet_") && v["data"]["header"]["packet_type"] != "retry" {
            panic!("{at}: a packet header without its path_id: {rec}");
        }
        if name == "transport:packet_sent" || name == "transport:packet_received" {
            // qvis's congestion graph counts bytes from it.
            assert!(v["data"]["raw"]["length"].is_u64(), "{at}: no raw.length: {rec}");
        }
        match name.as_str() {
            "connectivity:path_updated" => {
                let d = &v["data"];
                assert!(d["path_id"].is_u64(), "{at}: {rec}");
                let states = ["new", "validated", "potentially_failed", "rebinding", "abandoned", "closed"];
                assert!(states.iter().any(|s| d["state"] == *s), "{at}: unknown path state: {rec}");
                let _: qlog::events::JsonEvent =
                    serde_json::from_value(v).unwrap_or_else(|e| panic!("{at}: generic event: {e}: {rec}"));
            }
            "security:key_updated" => {
                let d = &v["data"];
                assert!(d["key_type"] == "client_1rtt_secret" || d["key_type"] == "server_1rtt_secret", "{at}: {rec}");
                assert!(d["trigger"] == "local_update" || d["trigger"] == "remote_update", "{at}: {rec}");
                assert!(d.get("new").is_none() && d.get("old").is_none(), "{at}: keys in the log: {rec}");
            }
            _ => {
                let n_frames = v["data"]["frames"].as_array().map(Vec::len);
                replace_multipath_frames(&mut v, &at);
                let ev: qlog::events::Event =
                    serde_json::from_value(v).unwrap_or_else(|e| panic!("{at}: the qlog crate rejects it: {e}: {rec}"));
                // The crate read every frame, and not as one it could not name.
                use qlog::events::EventData;
                let frames: Option<Vec<qlog::events::quic::QuicFrame>> = match &ev.data {
                    EventData::PacketSent(p) => p.frames.as_ref().map(|f| f.to_vec()),
                    EventData::PacketReceived(p) => p.frames.clone(),
                    _ => None,
                };
                if let Some(frames) = frames {
                    assert_eq!(Some(frames.len()), n_frames, "{at}: {rec}");
                    for f in &frames {
                        if let qlog::events::quic::QuicFrame::Unknown { raw_frame_type, .. } = f {
                            assert!(*raw_frame_type >= 0x3e, "{at}: a frame the crate cannot name: {rec}");
                        }
                    }
                }
            }
        }
    }
    seen
}

#[test]
fn qlog_files_parse_with_the_qlog_crate() {
    let dir = tempfile::tempdir().expect("temp dir");
    for path in multipath_run(dir.path()) {
        let seen = parse_with_qlog_crate(&path);
        let at = path.display();
        // The run is what the test says it is: both paths, multipath frames, the handshake,
        // data, and loss recovery (the server is the one that sends data, and loses it).
        assert!(seen.header_path_ids.contains(&0) && seen.header_path_ids.contains(&1), "{at}: paths {seen:?}");
        for f in ["crypto", "ack", "stream", "path_ack", "path_new_connection_id", "path_abandon", "padding"] {
            assert!(seen.frames.contains(f), "{at}: no {f} frame: {:?}", seen.frames);
        }
        for e in [
            "transport:packet_sent",
            "transport:packet_received",
            "recovery:metrics_updated",
            "recovery:loss_timer_updated",
            "connectivity:connection_state_updated",
            "connectivity:path_updated",
        ] {
            assert!(seen.events.contains(e), "{at}: no {e} event: {:?}", seen.events);
        }
        if path.to_string_lossy().ends_with("_server.sqlog") {
            assert!(seen.frames.contains("handshake_done"), "{at}: {:?}", seen.frames);
            assert!(seen.events.contains("recovery:packet_lost"), "{at}: {:?}", seen.events);
        }
    }
}

/// A name as the qlog schema writes them (snake case: `handshake_done`, `path_id`), or a
/// packet type (`0RTT`, `1RTT`).
fn is_schema_name(s: &str) -> bool {
    s == "0RTT"
        || s == "1RTT"
        || (!s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'))
}

/// What a Rust `Debug` rendering looks like: `NewCid(0, 1)`, `Some(3)`, `HandshakeDone`,
/// `Initial`, `PathState { .. }`.
fn looks_like_debug(s: &str) -> bool {
    let camel = s.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && s.chars().nth(1).is_some_and(|c| c.is_ascii_lowercase());
    camel || s.contains('(') || s.contains('{') || s.contains("::")
}

/// Every key and string value of `v`, with where it is.
fn walk<'a>(v: &'a Value, at: &str, out: &mut Vec<(String, &'a str, Option<&'a str>)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                out.push((at.to_string(), k.as_str(), x.as_str()));
                walk(x, &format!("{at}.{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                walk(x, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// No Rust `Debug` strings anywhere in a whole transfer's qlog: every key is a schema name,
/// every enumerated value (frame and packet types, states, triggers...) is one, and no other
/// string looks like a `Debug` rendering (reason phrases, free text from the peer, aside).
#[test]
fn no_debug_strings_in_qlog() {
    let dir = tempfile::tempdir().expect("temp dir");
    const ENUMERATED: &[&str] = &[
        "frame_type",
        "packet_type",
        "state",
        "new",
        "old",
        "trigger",
        "owner",
        "key_type",
        "event_type",
        "timer_type",
        "packet_number_space",
        "error_space",
        "stream_type",
    ];
    for path in multipath_run(dir.path()) {
        let mut checked = 0;
        for (i, rec) in records(&path).iter().enumerate().skip(1) {
            let v: Value = serde_json::from_str(rec).expect("JSON");
            let mut items = Vec::new();
            walk(&v["data"], "data", &mut items);
            let name = v["name"].as_str().unwrap_or_default();
            assert!(name.split(':').all(is_schema_name), "{} record {i}: event name {name:?}", path.display());
            for (at, key, value) in items {
                let here = format!("{} record {i} ({name}) {at}.{key}", path.display());
                assert!(is_schema_name(key), "{here}: key {key:?}");
                let Some(s) = value else { continue };
                if ENUMERATED.contains(&key) {
                    assert!(is_schema_name(s), "{here}: value {s:?} is not a schema name");
                } else if key != "reason" {
                    assert!(!looks_like_debug(s), "{here}: value {s:?} looks like Rust Debug output");
                }
                checked += 1;
            }
        }
        assert!(checked > 1000, "{}: only {checked} strings checked", path.display());
    }
}

/// The checks above catch what they are meant to: the names the qlog used to have.
#[test]
fn debug_detector_catches_the_old_names() {
    for old in ["NewCid(0, 1)", "HandshakeDone", "Data", "Initial", "Some(3)", "PathState { id: 1 }"] {
        assert!(looks_like_debug(old) || !is_schema_name(old), "{old}");
        assert!(!is_schema_name(old), "{old}");
    }
    for ok in ["handshake_done", "path_ack", "1RTT", "application_data"] {
        assert!(is_schema_name(ok) && !looks_like_debug(ok), "{ok}");
    }
}
