//! The qlog frame objects: every frame the codec knows gets the schema's name (or its
//! RFC 10069 name in snake case) and the fields qlog gives it.

use super::*;
use crate::cid::ConnectionId;
use crate::frame::{ConnectionClose, NewConnectionId};
use crate::types::StreamId;

/// One frame of every kind the codec decodes, with the `frame_type` qlog must give it.
fn every_frame() -> Vec<(Frame<'static>, &'static str)> {
    let cid = NewConnectionId {
        path_id: None,
        seq: 3,
        retire_prior_to: 1,
        cid: ConnectionId::new(&[0xab, 0xcd]),
        reset_token: [7; 16],
    };
    vec![
        (Frame::Padding { len: 5 }, "padding"),
        (Frame::Ping, "ping"),
        (Frame::ResetStream { id: StreamId(4), error_code: 9, final_size: 100 }, "reset_stream"),
        (Frame::StopSending { id: StreamId(4), error_code: 9 }, "stop_sending"),
        (Frame::Crypto { offset: 10, data: b"hello" }, "crypto"),
        (Frame::NewToken { token: b"tok" }, "new_token"),
        (Frame::Stream { id: StreamId(8), offset: 1000, fin: true, data: b"abc" }, "stream"),
        (Frame::MaxData(1 << 20), "max_data"),
        (Frame::MaxStreamData { id: StreamId(8), max: 4096 }, "max_stream_data"),
        (Frame::MaxStreams { dir: Dir::Uni, count: 7 }, "max_streams"),
        (Frame::DataBlocked(99), "data_blocked"),
        (Frame::StreamDataBlocked { id: StreamId(8), limit: 50 }, "stream_data_blocked"),
        (Frame::StreamsBlocked { dir: Dir::Bi, limit: 3 }, "streams_blocked"),
        (Frame::NewConnectionId(cid), "new_connection_id"),
        (Frame::NewConnectionId(NewConnectionId { path_id: Some(2), ..cid }), "path_new_connection_id"),
        (Frame::RetireConnectionId { path_id: None, seq: 2 }, "retire_connection_id"),
        (Frame::RetireConnectionId { path_id: Some(1), seq: 2 }, "path_retire_connection_id"),
        (Frame::PathChallenge([1, 2, 3, 4, 5, 6, 7, 8]), "path_challenge"),
        (Frame::PathResponse([8, 7, 6, 5, 4, 3, 2, 1]), "path_response"),
        (
            Frame::ConnectionClose(ConnectionClose { error_code: 0x0a, frame_type: Some(0x08), reason: b"bad" }),
            "connection_close",
        ),
        (Frame::HandshakeDone, "handshake_done"),
        (Frame::Datagram { data: b"dgram" }, "datagram"),
        (Frame::PathAbandon { path_id: 1, error_code: 0x3e75 }, "path_abandon"),
        (Frame::PathStatus { path_id: 1, seq: 4, backup: true }, "path_status_backup"),
        (Frame::PathStatus { path_id: 1, seq: 5, backup: false }, "path_status_available"),
        (Frame::MaxPathId(6), "max_path_id"),
        (Frame::PathsBlocked(6), "paths_blocked"),
        (Frame::PathCidsBlocked { path_id: 2, next_seq: 3 }, "path_cids_blocked"),
    ]
}

/// Encoded, decoded back and logged: each frame has its qlog name, in wire order.
#[test]
fn every_frame_has_its_qlog_name() {
    let frames = every_frame();
    let mut payload = Vec::new();
    for (f, _) in &frames {
        f.encode(&mut payload);
    }
    let logged = frames_json(&payload, 3);
    let names: Vec<&str> = logged.iter().map(|f| f["frame_type"].as_str().unwrap_or("<none>")).collect();
    let expected: Vec<&str> = frames.iter().map(|(_, n)| *n).collect();
    assert_eq!(names, expected);
}

/// The fields of the frames whose qlog form is more than a copy of the wire fields.
#[test]
fn frame_fields_follow_the_schema() {
    let of = |f: &Frame<'_>| {
        let mut b = Vec::new();
        f.encode(&mut b);
        frames_json(&b, 3).remove(0)
    };
    let stream = of(&Frame::Stream { id: StreamId(8), offset: 1000, fin: true, data: b"abc" });
    assert_eq!(stream, json!({"frame_type": "stream", "stream_id": 8, "offset": 1000, "length": 3, "fin": true}));
    let cid = of(&Frame::NewConnectionId(NewConnectionId {
        path_id: Some(2),
        seq: 3,
        retire_prior_to: 1,
        cid: ConnectionId::new(&[0xab, 0xcd]),
        reset_token: [7; 16],
    }));
    assert_eq!(cid["path_id"], 2);
    assert_eq!(cid["connection_id"], "abcd");
    assert_eq!(cid["connection_id_length"], 2);
    assert!(cid.get("stateless_reset_token").is_none(), "reset tokens stay out of logs: {cid}");
    let streams = of(&Frame::MaxStreams { dir: Dir::Uni, count: 7 });
    assert_eq!(streams["stream_type"], "unidirectional");
    let close =
        of(&Frame::ConnectionClose(ConnectionClose { error_code: 0x0a, frame_type: Some(0x08), reason: b"bad" }));
    assert_eq!(close["error_space"], "transport_error");
    assert_eq!(close["trigger_frame_type"], 8);
    assert_eq!(close["reason"], "bad");
    let app = of(&Frame::ConnectionClose(ConnectionClose { error_code: 1, frame_type: None, reason: b"" }));
    assert_eq!(app["error_space"], "application_error");
}

/// ACK ranges are closed pairs, lowest first, and the delay is scaled by the sender's
/// exponent into milliseconds; PATH_ACK adds its path ID.
#[test]
fn ack_ranges_and_delay() {
    // ACK: largest 10, delay 8, one more range, first range 2 (8..=10); gap 1, length 0
    // (the next largest is 10 - 2 - 1 - 2 = 5: 5..=5).
    let ack = frames_json(&[0x02, 10, 8, 1, 2, 1, 0], 3).remove(0);
    assert_eq!(ack["frame_type"], "ack");
    assert_eq!(ack["acked_ranges"], json!([[5, 5], [8, 10]]));
    // 8 << 3 = 64 µs.
    assert_eq!(ack["ack_delay"], 0.064);
    assert!(ack.get("path_id").is_none());
    // PATH_ACK with ECN (0x3f) for path 1: largest 4, delay 0, first range 4; ECN 1, 2, 3.
    let path_ack = frames_json(&[0x3f, 1, 4, 0, 0, 4, 1, 2, 3], 3).remove(0);
    assert_eq!(path_ack["frame_type"], "path_ack");
    assert_eq!(path_ack["path_id"], 1);
    assert_eq!(path_ack["acked_ranges"], json!([[0, 4]]));
    assert_eq!(
        (path_ack["ect0"].clone(), path_ack["ect1"].clone(), path_ack["ce"].clone()),
        (json!(1), json!(2), json!(3))
    );
}

/// A frame type the codec does not know ends the list as `unknown`, with its type.
#[test]
fn undecodable_frame_is_unknown() {
    // PING, then frame type 0x21 (unassigned).
    let logged = frames_json(&[0x01, 0x21, 0x00], 3);
    assert_eq!(logged, vec![json!({"frame_type": "ping"}), json!({"frame_type": "unknown", "raw_frame_type": 0x21})]);
}
