//! Writes seed inputs for the codec fuzz targets into fuzz/seeds/<target>/ (then merged into
//! fuzz/corpus/<target>/ with `cargo fuzz cmin`, see fuzz/README.md): the datagrams of a real
//! handshake and transfer (`packet`), the plaintext frame payloads of a multipath transfer
//! on the null cipher plus one of each multipath and stream-control frame (`frame`), and
//! transport parameters as each side sends them (`transport_params`).
//!
//! Run: `cargo run --release --example gen_seeds` in fuzz/.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mpq_fuzz::FuzzFrame;
use mpq_proto::cid::ConnectionId;
use mpq_proto::conn::{ClientConfig, PathStatus, ServerConfig, TransportConfig};
use mpq_proto::packet::header::{parse_packet, PacketKind};
use mpq_proto::testing::Pair;
use mpq_proto::time::Instant;
use mpq_proto::transport_params::TransportParameters;
use mpq_proto::{Dir, Side};

fn write(dir: &Path, name: &str, data: &[u8]) {
    std::fs::create_dir_all(dir).expect("mkdir");
    std::fs::write(dir.join(name), data).expect("write");
}

/// Runs both endpoints of `pair` with zero latency, recording every datagram, until quiet.
fn exchange(pair: &mut Pair, rounds: usize, log: &mut Vec<Vec<u8>>) {
    let mut buf = Vec::new();
    for _ in 0..rounds {
        let mut any = false;
        for to_server in [true, false] {
            loop {
                let ep = if to_server { &mut pair.client } else { &mut pair.server };
                let Some(t) = ep.poll_transmit(pair.now, &mut buf) else { break };
                any = true;
                let seg = t.segment_size.unwrap_or(t.size).max(1);
                let default_src = if to_server { pair.client_addr } else { pair.server_addr };
                let src = t.source.unwrap_or(default_src);
                for d in buf[..t.size].chunks(seg) {
                    log.push(d.to_vec());
                    let mut d = d.to_vec();
                    pair.inject(to_server, src, t.destination, &mut d);
                }
            }
        }
        if !any {
            let next = [pair.client.poll_timeout(), pair.server.poll_timeout()].into_iter().flatten().min();
            // Quiet when only the idle timer is left.
            let Some(next) = next.filter(|n| *n < pair.now + Duration::from_secs(1)) else { break };
            pair.now = pair.now.max(next);
            pair.client.handle_timeout(pair.now);
            pair.server.handle_timeout(pair.now);
        }
    }
}

fn main() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let (c, s) = mpq_proto::testing::tls_configs(mpq_proto::testing::TEST_ALPN);
    let transport = Arc::new(TransportConfig { initial_max_path_id: Some(4), ..TransportConfig::default() });
    let cc = ClientConfig { tls: c, transport: transport.clone() };
    let sc = ServerConfig { tls: s, transport };

    // `packet`: real datagrams of a handshake and a small transfer (real keys).
    let mut pair = Pair::from_configs(&cc, sc.clone());
    let mut log = Vec::new();
    exchange(&mut pair, 500, &mut log);
    let h = pair.client_conn;
    if let Some(conn) = pair.client.connection_mut(h) {
        if let Some(id) = conn.open_stream(Dir::Bi) {
            let _ = conn.write(id, &[7u8; 3000]);
            let _ = conn.finish(id);
        }
    }
    exchange(&mut pair, 500, &mut log);
    for (i, d) in log.iter().enumerate().take(40) {
        write(&seeds.join("packet"), &format!("pair-{i:03}"), d);
    }

    // `transport_params`: what each side sends.
    for (side, name) in [(Side::Client, "client"), (Side::Server, "server")] {
        let mut tp = TransportParameters {
            initial_source_connection_id: Some(ConnectionId::new(&[1; 8])),
            initial_max_path_id: Some(4),
            initial_max_data: 1 << 20,
            initial_max_streams_bidi: 100,
            ..TransportParameters::default()
        };
        if side == Side::Server {
            tp.original_destination_connection_id = Some(ConnectionId::new(&[2; 16]));
            tp.stateless_reset_token = Some([3; 16]);
        }
        let mut out = Vec::new();
        tp.encode(&mut out);
        write(&seeds.join("transport_params"), name, &out);
        let mut out = Vec::new();
        tp.encode_with_grease(&mut out, 2);
        write(&seeds.join("transport_params"), &format!("{name}-grease"), &out);
    }

    // `frame`: plaintext payloads of a multipath transfer on the null cipher.
    let mut pair = Pair::handshaken_null(&cc, sc, 1).expect("handshake");
    let mut log = Vec::new();
    let h = pair.client_conn;
    let now = pair.now;
    if let Some(conn) = pair.client.connection_mut(h) {
        let _ =
            conn.open_path(now, Some(SocketAddr::from(([10, 0, 1, 9], 4433))), pair.server_addr, PathStatus::Backup);
        if let Some(id) = conn.open_stream(Dir::Bi) {
            let _ = conn.write(id, &[9u8; 5000]);
            let _ = conn.finish(id);
        }
        if let Some(id) = conn.open_stream(Dir::Uni) {
            let _ = conn.reset_stream(id, 7);
        }
    }
    exchange(&mut pair, 500, &mut log);
    let now = pair.now + Duration::from_millis(1);
    pair.now = now;
    if let Some(conn) = pair.client.connection_mut(h) {
        let ids = conn.path_ids();
        if let Some(&last) = ids.last() {
            let _ = conn.abandon_path(now, last, 0);
        }
        conn.close(now, 0, b"bye");
    }
    exchange(&mut pair, 500, &mut log);
    let mut n = 0;
    for d in &log {
        let Ok(p) = parse_packet(d, 8) else { continue };
        if p.kind != PacketKind::Short || d.len() < p.pn_offset + 1 + 16 {
            continue;
        }
        let pn_len = usize::from(d[0] & 3) + 1;
        let end = p.packet_len.min(d.len()) - 16;
        if p.pn_offset + pn_len < end {
            write(&seeds.join("frame"), &format!("null-pair-{n:03}"), &d[p.pn_offset + pn_len..end]);
            n += 1;
        }
    }
    // One of each frame the transfer did not need.
    let extra: Vec<(&str, FuzzFrame)> = vec![
        ("path_abandon", FuzzFrame::PathAbandon { path: 1, code: 0 }),
        ("path_status", FuzzFrame::PathStatus { path: 1, seq: 2, backup: true }),
        ("max_path_id", FuzzFrame::MaxPathId(6)),
        ("paths_blocked", FuzzFrame::PathsBlocked(4)),
        ("path_cids_blocked", FuzzFrame::PathCidsBlocked { path: 2, next_seq: 3 }),
        (
            "path_new_cid",
            FuzzFrame::NewConnectionId {
                path: Some(2),
                seq: 1,
                retire_prior_to: 0,
                cid_len: 8,
                cid_seed: 5,
                token_seed: 1,
            },
        ),
        ("path_retire_cid", FuzzFrame::RetireConnectionId { path: Some(1), seq: 0 }),
        (
            "path_ack_ecn",
            FuzzFrame::Ack {
                path: Some(1),
                largest: 20,
                delay: 3,
                first: 2,
                ranges: vec![(1, 3)],
                ecn: Some((5, 0, 1)),
            },
        ),
        ("stop_sending", FuzzFrame::StopSending { id: mpq_fuzz::Sid { index: 0, uni: false, server: false }, code: 3 }),
        ("new_token", FuzzFrame::NewToken { len: 32 }),
        ("datagram", FuzzFrame::Datagram { len: 10, explicit_len: true }),
        ("streams_blocked", FuzzFrame::StreamsBlocked { uni: true, limit: 3 }),
        ("close", FuzzFrame::ConnectionClose { app: false, code: 10, frame_type: 8, reason_len: 4 }),
    ];
    for (name, f) in extra {
        let mut out = Vec::new();
        f.encode(&mut out, 1 << 16);
        write(&seeds.join("frame"), name, &out);
    }
    let _ = Instant::ZERO;
    println!("seeds written to {}", seeds.display());
}
