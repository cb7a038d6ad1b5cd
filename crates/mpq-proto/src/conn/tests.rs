//! Connection tests over the in-memory pair: handshake, transfers under loss, key updates,
//! close and idle timeout, malformed input.

use std::time::Duration;

use super::*;
use crate::endpoint::ConnectionHandle;
use crate::testing::Pair;
use crate::types::Dir;

/// A one-way upload from client to server on a unidirectional stream, checked byte for byte.
pub(super) struct Upload {
    data: Vec<u8>,
    sent: usize,
    finished: bool,
    stream: Option<StreamId>,
    server: Option<ConnectionHandle>,
    server_stream: Option<StreamId>,
    pub(super) received: Vec<u8>,
    fin: bool,
    /// Mix the zero-copy calls (`write_bytes`, `read_with`) with the copying ones.
    zero_copy: bool,
    /// Read calls made (zero-copy mode alternates the read calls).
    reads: u64,
}

impl Upload {
    pub(super) fn new(len: usize) -> Self {
        let data = (0..len).map(|i| (i * 31 % 251) as u8).collect();
        Self {
            data,
            sent: 0,
            finished: false,
            stream: None,
            server: None,
            server_stream: None,
            received: Vec::new(),
            fin: false,
            zero_copy: false,
            reads: 0,
        }
    }

    pub(super) fn pump(&mut self, pair: &mut Pair) {
        while let Some((_, e)) = pair.client.poll_event() {
            if let Event::ConnectionLost(e) = e {
                panic!("client connection lost: {e}");
            }
        }
        let c = pair.client.connection_mut(pair.client_conn).expect("client");
        if c.is_established() {
            if self.stream.is_none() {
                self.stream = c.open_stream(Dir::Uni);
            }
            if let Some(id) = self.stream {
                while self.sent < self.data.len() {
                    // Zero-copy writes of odd 10 kB pieces, copied writes of the rest.
                    let piece = if self.zero_copy && self.sent / 10_000 % 2 == 1 {
                        let end = (self.sent / 10_000 + 1) * 10_000;
                        c.write_bytes(
                            id,
                            &bytes::Bytes::copy_from_slice(&self.data[self.sent..end.min(self.data.len())]),
                        )
                    } else {
                        c.write(id, &self.data[self.sent..])
                    };
                    match piece {
                        Ok(0) | Err(_) => break,
                        Ok(n) => self.sent += n,
                    }
                }
                if self.sent == self.data.len() && !self.finished {
                    c.finish(id).expect("finish");
                    self.finished = true;
                }
            }
        }
        if let Some(h) = pair.server.accept() {
            self.server = Some(h);
        }
        while pair.server.poll_event().is_some() {}
        let Some(h) = self.server else { return };
        let Some(s) = pair.server.connection_mut(h) else { return };
        if self.server_stream.is_none() {
            self.server_stream = s.accept_stream(Dir::Uni);
        }
        if let Some(id) = self.server_stream {
            let mut buf = vec![0u8; 65536];
            loop {
                self.reads += 1;
                let r = if self.zero_copy && self.reads.is_multiple_of(2) {
                    let received = &mut self.received;
                    s.read_with(id, 7000, |piece| received.extend_from_slice(piece))
                } else {
                    s.read(id, &mut buf).inspect(|r| self.received.extend_from_slice(&buf[..r.len]))
                };
                let Ok(r) = r else { break };
                if r.fin {
                    self.fin = true;
                    break;
                }
                if r.len == 0 {
                    break;
                }
            }
        }
    }
}

/// Runs until the client's handshake is confirmed; false if it was not within 2 s.
pub(super) fn confirm_handshake(pair: &mut Pair) -> bool {
    let mut confirmed = false;
    pair.run_until(Duration::from_secs(2), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            confirmed |= e == Event::HandshakeConfirmed;
        }
        confirmed
    })
}

pub(super) fn client(pair: &mut Pair) -> &mut Connection {
    pair.client.connection_mut(pair.client_conn).expect("client")
}

pub(super) fn run_upload(pair: &mut Pair, len: usize, limit: Duration) -> Upload {
    let mut up = Upload::new(len);
    let ok = pair.run_until(limit, |p| {
        up.pump(p);
        up.fin
    });
    assert!(ok, "upload of {len} bytes did not finish (received {})", up.received.len());
    up.assert_intact();
    up
}

impl Upload {
    /// The server read the stream's FIN.
    pub(super) fn is_done(&self) -> bool {
        self.fin
    }

    /// Everything arrived, with its FIN, byte for byte.
    pub(super) fn assert_intact(&self) {
        assert!(self.fin, "no FIN after {} bytes", self.received.len());
        assert_eq!(self.received.len(), self.data.len());
        if let Some(i) = self.received.iter().zip(&self.data).position(|(a, b)| a != b) {
            let end = (i + 8).min(self.data.len());
            panic!("data corrupted at offset {i}: got {:?} want {:?}", &self.received[i..end], &self.data[i..end]);
        }
    }
}

#[test]
fn handshake_completes_and_confirms() {
    let mut pair = Pair::new(TransportConfig::default());
    let mut client_events = Vec::new();
    let ok = pair.run_until(Duration::from_secs(2), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            client_events.push(e);
        }
        client_events.contains(&Event::HandshakeConfirmed)
    });
    assert!(ok, "client events: {client_events:?}");
    assert!(client_events.contains(&Event::Connected));
    let c = client(&mut pair);
    assert_eq!(c.alpn(), Some(crate::testing::TEST_ALPN));
    assert!(c.is_established());
    // One round trip for the handshake: well under a second of virtual time.
    assert!(pair.now < Instant::from_nanos(200_000_000), "handshake took {:?}", pair.now);
}

#[test]
fn transfer_one_megabyte() {
    let mut pair = Pair::new(TransportConfig::default());
    run_upload(&mut pair, 1_000_000, Duration::from_secs(30));
}

#[test]
fn transfer_survives_loss() {
    let mut pair = Pair::new(TransportConfig::default());
    // Drop every 7th datagram in both directions, handshake included.
    pair.drop = Box::new(|n, _| n % 7 == 0);
    run_upload(&mut pair, 500_000, Duration::from_secs(60));
    let stats = client(&mut pair).stats();
    assert!(stats.paths[0].lost_packets > 0, "no loss detected: {stats:?}");
}

#[test]
fn zero_copy_writes_and_reads_survive_loss() {
    let mut pair = Pair::new(TransportConfig::default());
    pair.drop = Box::new(|n, _| n % 9 == 0);
    let mut up = Upload::new(300_001);
    up.zero_copy = true;
    let ok = pair.run_until(Duration::from_secs(60), |p| {
        up.pump(p);
        up.fin
    });
    assert!(ok, "upload did not finish (received {})", up.received.len());
    up.assert_intact();
    assert!(up.reads > 20, "only {} reads", up.reads);
}

#[test]
fn transfer_crosses_key_updates() {
    // (Updates are three PTOs apart, RFC 9001 §6.5: a short PTO lets a short transfer
    // cross several.)
    let cfg = TransportConfig {
        key_update_interval: 100,
        max_ack_delay: Duration::from_millis(1),
        ..TransportConfig::default()
    };
    let mut pair = Pair::new(cfg);
    pair.latency = Duration::from_millis(1);
    run_upload(&mut pair, 20_000_000, Duration::from_secs(30));
    let updates = client(&mut pair).stats().key_updates;
    // Two: the second goes back to Key Phase 0 with a third generation of keys.
    assert!(updates >= 2, "only {updates} key updates");
}

#[test]
fn application_close_reaches_the_peer() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    let now = pair.now;
    client(&mut pair).close(now, 42, b"bye");
    let mut server_err = None;
    let ok = pair.run_until(Duration::from_secs(5), |p| {
        while let Some((_, e)) = p.server.poll_event() {
            if let Event::ConnectionLost(err) = e {
                server_err = Some(err);
            }
        }
        server_err.is_some()
    });
    assert!(ok);
    assert_eq!(server_err, Some(ConnectionError::ApplicationClosed { code: 42, reason: "bye".into() }));
    // Both sides drain and are removed.
    assert!(pair.run_until(Duration::from_secs(10), |p| {
        while p.client.poll_event().is_some() {}
        while p.server.poll_event().is_some() {}
        p.client.is_empty() && p.server.is_empty()
    }));
}

#[test]
fn idle_timeout_closes_silently() {
    let cfg = TransportConfig { max_idle_timeout: Duration::from_secs(1), ..TransportConfig::default() };
    let mut pair = Pair::new(cfg);
    assert!(pair
        .run_until(Duration::from_secs(2), |p| p.client.connection(p.client_conn).is_some_and(|c| c.is_established())));
    // Cut the link: nothing gets through any more.
    pair.drop = Box::new(|_, _| true);
    let mut err = None;
    assert!(pair.run_until(Duration::from_secs(10), |p| {
        while let Some((_, e)) = p.client.poll_event() {
            if let Event::ConnectionLost(e) = e {
                err = Some(e);
            }
        }
        err.is_some()
    }));
    assert_eq!(err, Some(ConnectionError::TimedOut));
}

/// Runs until the client reports the end of its connection; returns the error and when.
fn client_lost(pair: &mut Pair, limit: Duration) -> Option<(ConnectionError, Instant)> {
    let mut err = None;
    pair.run_until(limit, |p| {
        while let Some((_, e)) = p.client.poll_event() {
            if let Event::ConnectionLost(e) = e {
                err = Some((e, p.now));
            }
        }
        err.is_some()
    });
    err
}

/// A client whose server never answers gives up after the handshake timeout (1 s here),
/// not the idle timeout (30 s), and says that nothing came back.
#[test]
fn handshake_timeout_ends_an_unanswered_connection() {
    let cfg = TransportConfig { handshake_timeout: Some(Duration::from_secs(1)), ..TransportConfig::default() };
    let mut pair = Pair::new(cfg);
    pair.drop = Box::new(|_, _| true);
    let (err, at) = client_lost(&mut pair, Duration::from_secs(60)).expect("connection lost");
    assert_eq!(err, ConnectionError::HandshakeTimeout { peer_answered: false });
    assert_eq!(at, Instant::ZERO + Duration::from_secs(1));
    assert_eq!(err.to_string(), "no answer from the peer");
    assert!(pair.client.is_empty() || pair.client.connection(pair.client_conn).is_none_or(|c| c.is_closed()));

    // A server whose client sends its first flight and then falls silent: the server gives
    // up on the half-open handshake too, knowing the peer was there.
    let cfg = TransportConfig { handshake_timeout: Some(Duration::from_secs(1)), ..TransportConfig::default() };
    let mut pair = Pair::new(cfg);
    let mut to_server = 0;
    pair.drop = Box::new(move |_, up| {
        if up {
            to_server += 1;
        }
        !up || to_server > 1
    });
    let mut err = None;
    pair.run_until(Duration::from_secs(60), |p| {
        while let Some((_, e)) = p.server.poll_event() {
            if let Event::ConnectionLost(e) = e {
                err = Some((e, p.now));
            }
        }
        err.is_some()
    });
    let (err, at) = err.expect("server connection lost");
    assert_eq!(err, ConnectionError::HandshakeTimeout { peer_answered: true });
    assert!(at <= Instant::ZERO + Duration::from_millis(1100), "at {at:?}");
}

/// The handshake timeout stops counting once the handshake completed.
#[test]
fn handshake_timeout_does_not_end_an_established_connection() {
    let cfg = TransportConfig { handshake_timeout: Some(Duration::from_millis(500)), ..TransportConfig::default() };
    let mut pair = Pair::new(cfg);
    assert!(pair
        .run_until(Duration::from_secs(2), |p| p.client.connection(p.client_conn).is_some_and(|c| c.is_established())));
    assert_eq!(client_lost(&mut pair, Duration::from_secs(3)), None);
}

#[test]
fn garbage_datagrams_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut pair = Pair::new(TransportConfig::default());
    assert!(pair
        .run_until(Duration::from_secs(2), |p| p.client.connection(p.client_conn).is_some_and(|c| c.is_established())));
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let server_cid = client(&mut pair).shared.peer_cids[&0].current().cid;
    for i in 0..2000 {
        let len = rng.random_range(1..1500);
        let mut d: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        if i % 2 == 0 && d.len() > 1 + server_cid.len() {
            // Short header with a valid CID, so it reaches the connection's decryption.
            d[0] = 0x40 | (d[0] & 0x3f);
            d[1..1 + server_cid.len()].copy_from_slice(&server_cid);
        }
        let now = pair.now;
        let addr = pair.client_addr;
        pair.server.handle_datagram(now, pair.server_addr, addr, None, &mut d);
    }
    // The connection survives and still moves data.
    run_upload(&mut pair, 100_000, Duration::from_secs(10));
}

#[test]
fn bulk_data_leaves_in_gso_batches() {
    let cfg = TransportConfig { max_udp_payload_size: 1452, max_gso_segments: 10, ..TransportConfig::default() };
    let mut pair = Pair::new(cfg);
    // A short RTT: the pace (1.25 windows per RTT) lets half the window (the pacer's largest
    // bucket) out in one burst; at the pair's usual 20 ms it would be paced in bursts of 2 ms
    // worth.
    pair.latency = Duration::from_micros(50);
    assert!(confirm_handshake(&mut pair));
    // PMTU discovery raises the paths from 1200 bytes to the 1452 configured (one probe:
    // the pair carries any size).
    // (The probe's ACK waits for the server's max_ack_delay.)
    let until = pair.now + Duration::from_millis(50);
    pair.run_until(Duration::from_millis(50), |p| p.now >= until);
    assert_eq!(client(&mut pair).stats().paths[0].pmtu, 1452, "{:?}", client(&mut pair).stats().paths[0]);
    assert_eq!(client(&mut pair).stats().paths[0].pmtu_probes_sent, 1);
    let now = pair.now;
    let c = client(&mut pair);
    let id = c.open_stream(Dir::Uni).expect("stream");
    assert!(c.write(id, &vec![7u8; 200_000]).expect("write") > 100_000);
    let mut buf = Vec::new();
    let t = c.poll_transmit(now, &mut buf).expect("transmit");
    // Half the initial window leaves as one batch of equal 1452-byte segments.
    assert_eq!(t.segment_size, Some(1452));
    assert!(t.size >= 5 * 1452, "batch of {} bytes", t.size);
    assert_eq!(t.size % 1452, 0);
}

/// Sends raw frame bytes from the client in a valid 1-RTT packet and returns the error the
/// server closed with.
fn server_error_for(frames: &[u8]) -> Option<ConnectionError> {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    client(&mut pair).shared.injected = frames.to_vec();
    server_error(&mut pair)
}

/// Runs until the server's connection ends; returns why.
pub(super) fn server_error(pair: &mut Pair) -> Option<ConnectionError> {
    let mut err = None;
    pair.run_until(Duration::from_secs(5), |p| {
        while let Some((_, e)) = p.server.poll_event() {
            if let Event::ConnectionLost(e) = e {
                err = Some(e);
            }
        }
        err.is_some()
    });
    err
}

/// Runs until the client's connection ends or `limit` passes; returns why it ended.
pub(super) fn client_error(pair: &mut Pair, limit: Duration) -> Option<ConnectionError> {
    let mut err = None;
    pair.run_until(limit, |p| {
        while let Some((_, e)) = p.client.poll_event() {
            if let Event::ConnectionLost(e) = e {
                err = Some(e);
            }
        }
        err.is_some()
    });
    err
}

pub(super) fn transport_code(e: Option<ConnectionError>) -> u64 {
    match e {
        Some(ConnectionError::TransportError(t)) => t.code.0,
        other => panic!("expected a transport error, got {other:?}"),
    }
}

#[test]
fn malformed_frames_get_the_rfc_error() {
    use crate::error::TransportErrorCode as C;
    let cases: &[(&str, &[u8], C)] = &[
        ("unknown frame type", &[0x40, 0x99], C::FRAME_ENCODING_ERROR),
        ("HANDSHAKE_DONE from a client", &[0x1e], C::PROTOCOL_VIOLATION),
        ("NEW_TOKEN from a client", &[0x07, 0x01, 0xaa], C::PROTOCOL_VIOLATION),
        ("STREAM longer than the packet", &[0x0a, 0x00, 0x40, 0xff, 1, 2, 3], C::FRAME_ENCODING_ERROR),
        ("MAX_STREAMS above 2^60", &[0x12, 0xd0, 0, 0, 0, 0, 0, 0, 1], C::FRAME_ENCODING_ERROR),
        ("truncated varint", &[0x10, 0xc0, 0x01], C::FRAME_ENCODING_ERROR),
        ("ACK of an unsent packet", &[0x02, 0x40, 0xff, 0x00, 0x00, 0x00], C::PROTOCOL_VIOLATION),
        ("STREAM on the server's unidirectional stream", &[0x0a, 0x03, 0x01, 0xaa], C::STREAM_STATE_ERROR),
        ("stream beyond MAX_STREAMS", &[0x0a, 0x80, 0x00, 0x10, 0x00, 0x01, 0xaa], C::STREAM_LIMIT_ERROR),
        ("RETIRE_CONNECTION_ID never issued", &[0x19, 0x30], C::PROTOCOL_VIOLATION),
        ("multipath frame without multipath", &[0x7e, 0x7a, 0x05], C::PROTOCOL_VIOLATION),
        ("DATAGRAM not negotiated", &[0x31, 0x01, 0xaa], C::PROTOCOL_VIOLATION),
    ];
    for (what, frames, code) in cases {
        assert_eq!(transport_code(server_error_for(frames)), code.0, "{what}");
    }
}

/// A batch seals with leased keys; the confidentiality limit (RFC 9001 §6.6) still holds in
/// the middle of a batch: no key seals more packets than its limit, the connection closes
/// with AEAD_LIMIT_REACHED, and its CONNECTION_CLOSE still reaches the peer.
#[test]
fn confidentiality_limit_is_enforced_within_a_batch() {
    // Paced bursts would stop the batch before the limit: a short RTT lets half the window
    // out (the pacer's largest bucket), and the limit leaves room for two data packets and
    // the close.
    let mut pair = Pair::new(TransportConfig { key_update_interval: u64::MAX, ..TransportConfig::default() });
    pair.latency = Duration::from_micros(50);
    assert!(confirm_handshake(&mut pair));
    let now = pair.now;
    let c = client(&mut pair);
    let id = c.open_stream(Dir::Uni).expect("stream");
    c.write(id, &[1u8; 100_000]).expect("write");
    let keys = c.shared.one_rtt.as_mut().expect("1-RTT keys");
    let limit = keys.sealed_in_phase() + 18;
    keys.set_confidentiality_limit(limit);
    let mut buf = Vec::new();
    let mut datagrams = 0;
    while let Some(t) = c.poll_transmit(now, &mut buf) {
        datagrams += t.segment_size.map_or(1, |s| t.size.div_ceil(s));
        assert!(datagrams < 100, "kept sending past the limit");
    }
    let sealed = c.shared.one_rtt.as_ref().expect("1-RTT keys").sealed_in_phase();
    // Data up to the reserve, then one CONNECTION_CLOSE from it.
    assert_eq!(sealed, limit - CLOSE_RESERVE_FOR_TESTS + 1, "data stops where the close reserve starts");
    match c.error() {
        Some(ConnectionError::TransportError(t)) => {
            assert_eq!(t.code, crate::error::TransportErrorCode::AEAD_LIMIT_REACHED, "{t}")
        }
        other => panic!("expected AEAD_LIMIT_REACHED, got {other:?}"),
    }
    // The peer learns why.
    match server_error(&mut pair) {
        Some(ConnectionError::ConnectionClosed(t)) => {
            assert_eq!(t.code, crate::error::TransportErrorCode::AEAD_LIMIT_REACHED)
        }
        other => panic!("the server saw {other:?}"),
    }
    let sealed = client(&mut pair).shared.one_rtt.as_ref().expect("1-RTT keys").sealed_in_phase();
    assert!(sealed <= limit, "{sealed} packets sealed under a limit of {limit}");
}

const CLOSE_RESERVE_FOR_TESTS: u64 = 16;

/// STREAM frames take a receive path of their own (without the general `Frame`); their
/// errors still name the frame type, including one after other frames in the packet.
#[test]
fn stream_frame_errors_name_the_frame_type() {
    use crate::error::TransportErrorCode as C;
    let cases: &[(&[u8], C, u64)] = &[
        (&[0x0a, 0x00, 0x40, 0xff, 1, 2, 3], C::FRAME_ENCODING_ERROR, 0x0a),
        (&[0x01, 0x0f, 0x03, 0x01, 0x01, 0xaa], C::STREAM_STATE_ERROR, 0x0f),
        (&[0x0e, 0xc0], C::FRAME_ENCODING_ERROR, 0x0e),
        // Offset + length beyond 2^62-1 (RFC 9000 §19.8).
        (&[0x0e, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0xaa], C::FRAME_ENCODING_ERROR, 0x0e),
    ];
    for &(frames, code, ty) in cases {
        match server_error_for(frames) {
            Some(ConnectionError::TransportError(t)) => {
                assert_eq!((t.code.0, t.frame_type), (code.0, Some(ty)), "{frames:02x?}: {t}")
            }
            other => panic!("{frames:02x?}: expected a transport error, got {other:?}"),
        }
    }
}

#[test]
fn frames_in_the_wrong_packet_type_are_protocol_violations() {
    use crate::error::TransportErrorCode as C;
    let cases: &[(&str, &[u8])] = &[
        ("STREAM in a Handshake packet", &[0x0a, 0x00, 0x01, 0xaa]),
        ("MAX_DATA in a Handshake packet", &[0x10, 0x40, 0xff]),
        ("HANDSHAKE_DONE in a Handshake packet", &[0x1e]),
        ("PATH_CHALLENGE in a Handshake packet", &[0x1a, 1, 2, 3, 4, 5, 6, 7, 8]),
    ];
    for (what, frames) in cases {
        let mut pair = Pair::new(TransportConfig::default());
        // The client's first Handshake packet (its Finished) carries the frame.
        client(&mut pair).shared.injected_handshake = frames.to_vec();
        assert_eq!(transport_code(server_error(&mut pair)), C::PROTOCOL_VIOLATION.0, "{what}");
    }
}

/// A sender that never fills its window (1 kB every 50 ms) keeps its initial window: the
/// window grows only on acknowledgements of congestion-limited flights (RFC 9002 §7.8).
#[test]
fn application_limited_window_does_not_grow() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    let id = client(&mut pair).open_stream(Dir::Uni).expect("stream");
    let mut initial = 0;
    for round in 0..60 {
        // (The initial window follows the datagram size, RFC 9002 §7.2: read once PMTU
        // discovery has found the pair's 1472 bytes.)
        if round == 10 {
            let p = client(&mut pair).stats().paths[0].clone();
            assert_eq!(p.pmtu, 1472, "{p:?}");
            initial = p.cwnd;
        }
        client(&mut pair).write(id, &[7u8; 1000]).expect("write");
        let until = pair.now + Duration::from_millis(50);
        pair.run_until(Duration::from_millis(50), |p| p.now >= until);
        while pair.server.poll_event().is_some() {}
    }
    let p = client(&mut pair).stats().paths[0].clone();
    assert!(p.tx_bytes > 60_000, "{p:?}");
    assert_eq!(p.cwnd, initial, "the window grew while the sender was application-limited");
}

/// `handshake_info` reports what was negotiated, on both sides, once the handshake is done.
#[test]
fn handshake_info_reports_the_negotiation() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(client(&mut pair).handshake_info().is_none());
    assert!(confirm_handshake(&mut pair));
    let info = client(&mut pair).handshake_info().expect("client info");
    assert_eq!(info.version, crate::VERSION_1);
    assert!(info.cipher_suite.starts_with("TLS13_"), "{info}");
    assert!(!info.alpn.is_empty() && !info.resumed && !info.multipath);
    assert_eq!(info.paths, vec![(0, pair.server_addr)]);
    let h = pair.server.handles()[0];
    let s = pair.server.connection(h).and_then(|c| c.handshake_info()).expect("server info");
    assert_eq!((s.cipher_suite, s.alpn), (info.cipher_suite, info.alpn));
}

/// A second connection with the same client config resumes the first one's TLS session.
/// rustls then reports the old session's transport parameters from the ClientHello on; the
/// client must wait for the server's own (EncryptedExtensions) or it checks the server's
/// initial_source_connection_id against the wrong value (RFC 9000 §7.3) and fails the
/// handshake with TRANSPORT_PARAMETER_ERROR. Found while building fuzz pairs.
#[test]
fn resumed_handshake_uses_the_new_transport_parameters() {
    let (cc, sc) = crate::testing::configs(TransportConfig::default());
    for attempt in 0..3 {
        let mut pair = Pair::from_configs(&cc, sc.clone());
        let h = pair.client_conn;
        let done = pair.run_until(Duration::from_secs(2), |p| {
            p.client.connection(h).is_some_and(|c| c.is_established() || c.is_closed())
        });
        let conn = pair.client.connection(h).expect("client connection");
        assert!(done && conn.is_established(), "attempt {attempt}: {:?}", conn.error());
        assert_eq!(
            conn.shared.peer_params.as_ref().and_then(|p| p.initial_source_connection_id),
            conn.shared.peer_initial_scid
        );
        // Session tickets arrive after the handshake: let them in before the next attempt.
        pair.run_until(Duration::from_millis(200), |_| false);
    }
}

/// The batch seams (issue C1): in a steady bulk transfer delivered in GRO batches, the
/// receiver opens every 1-RTT datagram on its path alone and meets the shared state once per
/// batch (not per packet), and the sender seals every 1-RTT data packet under its batch's
/// key lease. Key updates (every 200 packets here) cross the transfer and still leave the
/// general per-packet way to the few packets of a new key phase.
#[test]
fn bulk_transfer_meets_the_shared_state_once_per_batch() {
    for key_update_interval in [u64::MAX, 200] {
        // Without pacing the sender writes bursts (with it, a paced burst may be one packet).
        // (Updates are three PTOs apart, RFC 9001 §6.5: a short PTO lets the transfer cross
        // several.)
        let max_ack_delay = Duration::from_millis(1);
        let cfg = TransportConfig { key_update_interval, pacing: false, max_ack_delay, ..TransportConfig::default() };
        let mut pair = Pair::new(cfg);
        pair.latency = Duration::from_millis(1);
        pair.gro = Some(Duration::from_millis(2));
        assert!(confirm_handshake(&mut pair));
        let h = pair.server.handles()[0];
        let before_rx = pair.server.connection(h).expect("server").shared.touches;
        let before_tx = client(&mut pair).shared.touches;
        run_upload(&mut pair, 20_000_000, Duration::from_secs(30));
        let rx = pair.server.connection(h).expect("server").shared.touches;
        let tx = client(&mut pair).shared.touches;
        let (batches, applies) = (rx.recv_batches - before_rx.recv_batches, rx.recv_applies - before_rx.recv_applies);
        let (opened, general) = (rx.recv_opened - before_rx.recv_opened, rx.recv_general - before_rx.recv_general);
        let what = format!("interval {key_update_interval}: receiver {rx:?}, sender {tx:?}");
        assert!(opened > 1_000, "{what}");
        // Datagrams came several per batch, and each batch met the shared state about once.
        assert!(opened > 3 * batches, "batches of one? {what}");
        assert!(applies <= batches + general, "{what}");
        // Each run of datagrams to one path was opened at one seat taken from the board.
        let seats = rx.recv_seats - before_rx.recv_seats;
        assert!(seats > 0 && seats <= batches + general, "{seats} seats: {what}");
        // A run's STREAM frames, one stream's consecutive bytes, were joined by the path:
        // the shared side checked about one piece per run, not one per packet.
        let pieces = rx.recv_stream_pieces - before_rx.recv_stream_pieces;
        assert!(pieces > 0 && pieces <= seats + general, "{pieces} stream pieces, {seats} runs: {what}");
        // Only the first packets of a new key phase (and a straggler of the handshake, such
        // as the packet carrying HANDSHAKE_DONE's acknowledgement) went the general way.
        let updates = client(&mut pair).stats().key_updates;
        assert!(general <= 2 + 2 * updates, "{general} general datagrams, {updates} key updates: {what}");
        if key_update_interval == 200 {
            assert!(updates >= 2, "{what}");
        }
        // The sender: every 1-RTT packet of the transfer was sealed under a lease, several
        // per lease.
        let (leases, leased) = (tx.send_leases - before_tx.send_leases, tx.send_leased - before_tx.send_leased);
        assert_eq!(tx.send_unleased, before_tx.send_unleased, "{what}");
        assert!(leased > 2 * leases, "{what}");
        // Every batch after the handshake was built by its path itself.
        let path_batches = tx.send_path_batches - before_tx.send_path_batches;
        assert!(path_batches >= leases && path_batches > 0, "{path_batches} batches built by the path: {what}");
        // Most batches of the steady transfer were built alone, holding nothing of the
        // connection. The others: batches with no room in the window for new data (ACKs
        // only), and those around a key update (its PING, the new phase's first packets).
        let alone = tx.send_alone_batches - before_tx.send_alone_batches;
        assert!(alone * 4 >= path_batches * 3, "{alone} of {path_batches} batches built alone: {what}");
        // The sender's ACKs: its path handled them while opening the batches (loss
        // detection, RTT, window); the shared side only applied their packets' fates. Only
        // ACKs in packets of the general way (the new key phases' first) went through the
        // shared side whole.
        // Its stream data came from per-batch leases, not chunk by chunk from the stream
        // table, and its packets did not look at the connection-wide frames (none waited).
        let data_leases = tx.send_data_leases - before_tx.send_data_leases;
        let unleased_chunks = tx.send_chunks_unleased - before_tx.send_chunks_unleased;
        // (Connection-wide frames taken into a lease are written once for the batch, not
        // per packet: those writes are not counted here.)
        let control_leases = tx.send_control_leases - before_tx.send_control_leases;
        let conn_frames = tx.send_connection_frames - before_tx.send_connection_frames - control_leases;
        assert!(data_leases <= leases + 2 * updates + 4, "{what}");
        assert!(unleased_chunks <= 2 + updates, "{unleased_chunks} chunks one by one: {what}");
        assert!(conn_frames <= 2 + 2 * updates, "{conn_frames} packets wrote connection frames: {what}");
        // The receiver's own batches (its ACKs, and the flow-control credit it hands out
        // as the data is read, leased with the keys): built alone too, but those around a
        // key update.
        let rx_batches = rx.send_path_batches - before_rx.send_path_batches;
        let rx_alone = rx.send_alone_batches - before_rx.send_alone_batches;
        let rx_control = rx.send_control_leases - before_rx.send_control_leases;
        assert!(rx_alone * 4 >= rx_batches * 3, "{rx_alone} of {rx_batches} receiver batches alone: {what}");
        let fates = tx.fates_applied - before_tx.fates_applied;
        let by_path = tx.acks_in_batch - before_tx.acks_in_batch;
        assert!(by_path > 0 && by_path * 2 > fates, "{what}");
        assert!(fates - by_path <= 2 + 2 * updates, "{by_path} of {fates} ACKs handled by the path: {what}");
        eprintln!(
            "interval {key_update_interval}: receiver {batches} batches, {opened} datagrams opened alone, \
             {applies} shared applies, {general} general; sender {leases} leases, {leased} packets leased, \
             {by_path} of {fates} ACKs handled by their path, {data_leases} data leases, {unleased_chunks} chunks \
             one by one, {conn_frames} packets with connection frames, {alone} of {path_batches} batches built \
             alone; receiver {rx_alone} of {rx_batches} batches alone, {rx_control} with leased control frames"
        );
    }
}

/// A receive batch holding the same datagram twice (a duplicating network, or an attacker
/// replaying within one GRO batch): the second copy is dropped as a duplicate, the data
/// arrives once, and the stream stays intact.
#[test]
fn duplicate_datagrams_within_one_batch_count_once() {
    // (No PMTU probe: the first datagram must be the stream's.)
    let mut pair = Pair::new(TransportConfig { pmtud: false, ..TransportConfig::default() });
    assert!(confirm_handshake(&mut pair));
    let now = pair.now;
    let id = client(&mut pair).open_stream(Dir::Uni).expect("stream");
    client(&mut pair).write(id, &[9u8; 3000]).expect("write");
    let mut buf = Vec::new();
    let t = pair.client.poll_transmit(now, &mut buf).expect("a datagram");
    let seg = t.segment_size.unwrap_or(t.size);
    let mut batch: Vec<Vec<u8>> = Vec::new();
    for d in buf[..t.size].chunks(seg) {
        batch.push(d.to_vec());
        batch.push(d.to_vec());
    }
    let copies = batch.len();
    let h = pair.server.handles()[0];
    let before = pair.server.connection(h).expect("server").stats().paths[0].rx_packets;
    let (src, dst) = (pair.client_addr, pair.server_addr);
    pair.inject_batch(true, src, dst, &mut batch);
    let server = pair.server.connection_mut(h).expect("server");
    assert!(!server.is_closed(), "{:?}", server.error());
    let after = server.stats().paths[0].rx_packets;
    assert_eq!(after - before, (copies / 2) as u64, "each packet counted once");
    let sid = server.accept_stream(Dir::Uni).expect("stream");
    let mut got = vec![0u8; 8000];
    let n = server.read(sid, &mut got).expect("read").len;
    assert!(n >= 1000 && got[..n].iter().all(|&b| b == 9), "{n} bytes");
}

/// Every ACK frame a path sends is counted with the ranges it reported: a transfer without
/// loss or reordering acknowledges one contiguous range per frame.
#[test]
fn ack_frames_and_their_ranges_are_counted() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    run_upload(&mut pair, 500_000, Duration::from_secs(10));
    let h = pair.server.handles()[0];
    let stats = pair.server.connection(h).expect("server").stats();
    let p = &stats.paths[0];
    assert!(p.acks_sent > 10, "the receiver acknowledged: {p:?}");
    assert_eq!(p.ack_ranges_sent, p.acks_sent, "one range per ACK without loss: {p:?}");
}

/// `max_ack_ranges` bounds the ranges of every ACK frame (RFC 9000 §13.2.4): with loss
/// leaving gaps, the receiver reports at most that many, the highest first, and the transfer
/// still completes intact; without the bound the same run reports more.
#[test]
fn ack_frames_report_at_most_max_ack_ranges() {
    let mut most = Vec::new();
    for max_ack_ranges in [2, DEFAULT_MAX_ACK_RANGES] {
        let mut pair = Pair::new(TransportConfig { max_ack_ranges, ..TransportConfig::default() });
        assert!(confirm_handshake(&mut pair));
        // Drop every 5th datagram to the server: gaps in what it receives.
        pair.drop = Box::new(|n, to_server| to_server && n % 5 == 0);
        run_upload(&mut pair, 300_000, Duration::from_secs(60));
        let h = pair.server.handles()[0];
        let p = pair.server.connection(h).expect("server").stats().paths[0].clone();
        assert!(p.acks_sent > 10, "{p:?}");
        most.push((p.ack_ranges_sent, p.acks_sent));
    }
    let [(limited, acks), (unlimited, acks_unlimited)] = most[..] else { unreachable!() };
    assert!(limited <= 2 * acks, "at most 2 ranges per ACK: {limited} ranges in {acks} ACKs");
    assert!(limited > acks, "gaps were reported: {limited} ranges in {acks} ACKs");
    assert!(unlimited > 4 * acks_unlimited, "unbounded, more ranges: {unlimited} in {acks_unlimited} ACKs");
}
