//! Retry and NEW_TOKEN over the in-memory pair (RFC 9000 §8.1, §17.2.5, RFC 9001 §5.8,
//! RFC 9002 §6.3).

use std::time::Duration;

use rand::SeedableRng;

use super::tests::{client, run_upload, transport_code};
use super::*;
use crate::error::TransportErrorCode;
use crate::packet::header::write_retry;
use crate::testing::Pair;
use crate::token::RetryMode;

fn pair(mode: RetryMode) -> Pair {
    let mut p = Pair::new(TransportConfig::default());
    p.server.set_retry_mode(mode);
    p
}

fn server_conn(p: &Pair) -> Option<&Connection> {
    p.server.handles().last().and_then(|h| p.server.connection(*h))
}

/// Runs until both sides completed the handshake (or one of them failed).
fn run_handshake(p: &mut Pair) -> bool {
    p.run_until(Duration::from_secs(5), |p| {
        let c = p.client.connection(p.client_conn);
        if c.is_none_or(|c| c.is_closed()) {
            return true;
        }
        c.is_some_and(|c| c.is_established()) && server_conn(p).is_some_and(|s| s.is_established())
    });
    p.client.connection(p.client_conn).is_some_and(|c| c.is_established())
}

/// A Retry from "the server" to the pair's client, built here: Source CID `scid`, `token`,
/// with a correct integrity tag for the client's original DCID.
fn forged_retry(p: &mut Pair, scid: &[u8], token: &[u8]) -> Vec<u8> {
    let c = client(p);
    let ours = c.local_cids().next().expect("client CID");
    let odcid = c.orig_dst_cid();
    let mut out = Vec::new();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    write_retry(&mut out, crate::VERSION_1, &ours, &ConnectionId::new(scid), &odcid, token, &mut rng);
    out
}

fn deliver_to_client(p: &mut Pair, mut d: Vec<u8>) {
    let (now, c, s) = (p.now, p.client_addr, p.server_addr);
    p.client.handle_datagram(now, c, s, None, &mut d);
}

/// Drops the first `n` datagrams from the server to the client.
fn drop_first_from_server(p: &mut Pair, n: u64) {
    let mut seen = 0;
    p.drop = Box::new(move |_, to_server| {
        if to_server {
            return false;
        }
        seen += 1;
        seen <= n
    });
}

#[test]
fn handshake_through_retry() {
    let mut p = pair(RetryMode::Always);
    assert!(run_handshake(&mut p), "client: {:?}", client(&mut p).error());
    let stats = p.server.stats();
    assert_eq!(stats.retries_sent, 1, "{stats:?}");
    assert_eq!(stats.retry_tokens_accepted, 1, "{stats:?}");
    let odcid = client(&mut p).orig_dst_cid();
    let retry_scid = client(&mut p).shared.tokens.retry_scid.expect("the client took the Retry");
    let s = server_conn(&p).expect("server connection");
    // The server names the client's first DCID, and the Retry's CID (RFC 9000 §7.3), and
    // counts the address as validated (§8.1.2).
    assert_eq!(s.orig_dst_cid(), odcid);
    assert_eq!(s.shared.tokens.retry_scid, Some(retry_scid));
    assert!(s.paths[0].validated);
    // RFC 9002 §6.3: the Retry gave no RTT sample and no loss.
    let c = client(&mut p).stats();
    assert_eq!(c.paths[0].lost_packets, 0, "{c:?}");
    run_upload(&mut p, 100_000, Duration::from_secs(5));
}

#[test]
fn no_retry_in_never_and_auto_modes_without_load() {
    for mode in [RetryMode::Never, RetryMode::Auto] {
        let mut p = pair(mode);
        assert!(run_handshake(&mut p));
        assert_eq!(p.server.stats().retries_sent, 0, "{mode}");
        assert!(client(&mut p).shared.tokens.retry_scid.is_none());
    }
}

#[test]
fn missing_or_wrong_retry_source_connection_id_is_a_transport_parameter_error() {
    for wrong in [None, Some(ConnectionId::new(&[0xab; 8]))] {
        let mut p = pair(RetryMode::Always);
        p.server.set_tp_retry_scid_override(Some(wrong));
        assert!(!run_handshake(&mut p));
        let err = client(&mut p).error().cloned();
        assert_eq!(transport_code(err), TransportErrorCode::TRANSPORT_PARAMETER_ERROR.0, "{wrong:?}");
    }
}

#[test]
fn second_retry_is_ignored() {
    let mut p = pair(RetryMode::Always);
    assert!(p.run_until(Duration::from_secs(1), |p| p.client.connection(p.client_conn).is_some_and(|c| c
        .shared
        .tokens
        .retry_scid
        .is_some())));
    let first = client(&mut p).shared.tokens.retry_scid.unwrap();
    let token = client(&mut p).shared.tokens.initial_token.clone();
    let again = forged_retry(&mut p, &[0x77; 8], b"another token");
    deliver_to_client(&mut p, again);
    let c = client(&mut p);
    assert_eq!(c.shared.tokens.retry_scid, Some(first));
    assert_eq!(c.shared.tokens.initial_token, token);
    assert_eq!(c.shared.peer_cids[&0].current().cid, first);
    assert!(run_handshake(&mut p));
}

#[test]
fn retry_with_a_bad_tag_or_our_own_dcid_is_ignored() {
    let mut p = pair(RetryMode::Never);
    let odcid = client(&mut p).orig_dst_cid();
    let mut bad_tag = forged_retry(&mut p, &[0x66; 8], b"token");
    let n = bad_tag.len();
    bad_tag[n - 1] ^= 1;
    deliver_to_client(&mut p, bad_tag);
    // RFC 9000 §17.2.5.1: a Retry whose SCID is the DCID the client sent.
    let same = forged_retry(&mut p, &odcid, b"token");
    deliver_to_client(&mut p, same);
    let empty_token = forged_retry(&mut p, &[0x66; 8], b"");
    deliver_to_client(&mut p, empty_token);
    assert!(client(&mut p).shared.tokens.retry_scid.is_none());
    assert!(client(&mut p).shared.tokens.initial_token.is_empty());
    assert!(run_handshake(&mut p));
    // A sound one is taken (so the three above were refused for their flaw).
    let mut q = pair(RetryMode::Never);
    let good = forged_retry(&mut q, &[0x66; 8], b"token");
    deliver_to_client(&mut q, good);
    assert_eq!(client(&mut q).shared.tokens.retry_scid, Some(ConnectionId::new(&[0x66; 8])));
}

#[test]
fn retry_resends_the_same_crypto_data_without_counting_a_loss() {
    let mut p = pair(RetryMode::Never);
    // The client's first Initial is "answered" by our Retry before the server sees it.
    let sent_before = client(&mut p).shared.initial.as_ref().map(|s| s.crypto.offsets().0);
    let r = forged_retry(&mut p, &[0x55; 8], b"opaque token");
    // Let the first flight leave, then answer it.
    let mut buf = Vec::new();
    let now = p.now;
    while p.client.poll_transmit(now, &mut buf).is_some() {}
    assert!(client(&mut p).paths[0].bytes_in_flight > 0);
    deliver_to_client(&mut p, r);
    let c = client(&mut p);
    assert_eq!(c.shared.tokens.initial_token, b"opaque token");
    assert_eq!(c.paths[0].bytes_in_flight, 0, "the first Initial is neither in flight nor lost");
    assert_eq!(c.stats().paths[0].lost_packets, 0);
    assert_eq!(c.shared.initial.as_ref().map(|s| s.crypto.offsets().0), sent_before);
    assert_eq!(c.shared.peer_cids[&0].current().cid, ConnectionId::new(&[0x55; 8]));
    // The next Initial carries the token, goes to the new CID and restarts at CRYPTO offset 0.
    assert!(p.client.poll_transmit(now, &mut buf).is_some());
    let h = crate::packet::header::parse_packet(&buf, 8).expect("Initial");
    assert_eq!(h.kind, crate::packet::header::PacketKind::Initial);
    assert_eq!(&buf[h.token.clone()], b"opaque token");
    assert_eq!(h.dcid, ConnectionId::new(&[0x55; 8]));
    assert!(client(&mut p).shared.initial.as_ref().unwrap().loss.outstanding() > 0);
}

#[test]
fn invalid_retry_token_closes_with_invalid_token() {
    let mut p = pair(RetryMode::Always);
    // The server's real Retry is lost; a Retry with a token the server never sealed arrives.
    drop_first_from_server(&mut p, 1);
    assert!(p.run_until(Duration::from_millis(100), |p| p.server.stats().retries_sent == 1));
    let mut fake = vec![0x52];
    fake.extend_from_slice(&[0x11; 60]);
    let r = forged_retry(&mut p, &[0x44; 8], &fake);
    deliver_to_client(&mut p, r);
    assert!(!run_handshake(&mut p));
    let err = client(&mut p).error().cloned();
    match err {
        Some(ConnectionError::ConnectionClosed(t)) => assert_eq!(t.code, TransportErrorCode::INVALID_TOKEN),
        other => panic!("expected INVALID_TOKEN from the server, got {other:?}"),
    }
    assert_eq!(p.server.stats().invalid_token_closes, 1);
    assert!(p.server.is_empty(), "no state for an invalid token");
}

#[test]
fn new_token_lets_the_next_connection_skip_retry() {
    let mut p = pair(RetryMode::Always);
    assert!(run_handshake(&mut p));
    assert!(p.run_until(Duration::from_secs(1), |p| p.client.token_store().count("localhost") == 1));
    assert_eq!(p.server.stats().retries_sent, 1);
    // A second connection to the same server name uses the token once.
    let cc = p.client_config.clone();
    let (now, addr) = (p.now, p.server_addr);
    p.client_conn = p.client.connect(now, &cc, addr, "localhost").expect("connect");
    assert_eq!(p.client.token_store().count("localhost"), 0, "a token is used once");
    assert!(!client(&mut p).shared.tokens.initial_token.is_empty());
    let ok = run_handshake(&mut p);
    let cerr = client(&mut p).error().cloned();
    assert!(ok, "{cerr:?} {:?} {:?}", p.server.stats(), server_conn(&p).map(|s| s.error()));
    let stats = p.server.stats();
    assert_eq!(stats.retries_sent, 1, "no Retry for the second connection: {stats:?}");
    assert_eq!(stats.new_tokens_accepted, 1, "{stats:?}");
    assert!(client(&mut p).shared.tokens.retry_scid.is_none());
    // The token validated the address: no amplification limit from the first packet.
    assert!(server_conn(&p).expect("second server connection").paths[0].validated);
}

#[test]
fn lost_new_token_is_sent_again() {
    let mut p = pair(RetryMode::Never);
    assert!(run_handshake(&mut p));
    assert!(p.run_until(Duration::from_secs(1), |p| p.client.token_store().count("localhost") == 1));
    // Every NEW_TOKEN sent so far is declared lost: a fresh one is queued.
    let s = p.server.handles()[0];
    let conn = p.server.connection_mut(s).unwrap();
    let mut lost = space::SentFrames::default();
    lost.push_control(space::Control::NewToken);
    conn.shared.on_frames_lost(SpaceId::Data, lost);
    assert!(conn.shared.tokens.new_token_pending);
    assert!(p.run_until(Duration::from_secs(1), |p| p.client.token_store().count("localhost") == 2));
}

/// RFC 9001 Appendix A.4: the client that sent DCID 8394c8f03e515708 (and an empty SCID)
/// accepts this exact Retry, and switches to its Source CID and token.
#[test]
fn client_accepts_the_rfc9001_a4_retry() {
    let hex =
        |s: &str| (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect::<Vec<u8>>();
    let odcid = ConnectionId::new(&hex("8394c8f03e515708"));
    let (tls, _) = crate::testing::tls_configs(crate::testing::TEST_ALPN);
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let remote: std::net::SocketAddr = "192.0.2.1:443".parse().unwrap();
    let mut conn = Connection::new(ConnectionInit {
        side: Side::Client,
        config: Arc::new(TransportConfig::default()),
        tls: TlsSession::client(tls, name, Vec::new(), crate::VERSION_1, false).unwrap(),
        now: Instant::ZERO,
        remote,
        local_cid: ConnectionId::EMPTY,
        peer_cid: odcid,
        orig_dst_cid: odcid,
        reset_key: ResetTokenKey::new(&[0; 32]),
        seed: 1,
        address_validated: false,
        tokens: AddressTokens::default(),
        original_version: crate::VERSION_1,
        version: crate::VERSION_1,
    });
    let mut retry = hex("ff000000010008f067a5502a4262b5746f6b656e04a265ba2eff4d829058fb3f0f2496ba");
    let mut tampered = retry.clone();
    tampered[20] ^= 1;
    conn.handle_datagram(Instant::ZERO, "0.0.0.0:1".parse().unwrap(), remote, None, &mut tampered);
    assert!(conn.shared.tokens.retry_scid.is_none(), "a bad tag is ignored");
    conn.handle_datagram(Instant::ZERO, "0.0.0.0:1".parse().unwrap(), remote, None, &mut retry);
    assert_eq!(conn.shared.tokens.retry_scid, Some(ConnectionId::new(&hex("f067a5502a4262b5"))));
    assert_eq!(conn.shared.tokens.initial_token, b"token");
}

/// RFC 9000 §8.1.3: a NEW_TOKEN-kind token the server cannot validate (another server's,
/// an old key's, another address's) is treated as no token: no INVALID_TOKEN close.
#[test]
fn unusable_new_token_is_treated_as_no_token() {
    let key = crate::token::TokenKey::new(&[0x99; 32]);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let foreign = key.seal_new_token(&mut rng, "10.0.0.1".parse().unwrap(), Instant::ZERO);
    for (mode, retries) in [(RetryMode::Never, 0), (RetryMode::Always, 1)] {
        let mut p = pair(mode);
        client(&mut p).shared.tokens.initial_token = foreign.clone();
        assert!(run_handshake(&mut p), "{mode}");
        let stats = p.server.stats();
        assert_eq!(stats.retries_sent, retries, "{mode}: {stats:?}");
        assert_eq!(stats.new_tokens_accepted + stats.invalid_token_closes, 0, "{mode}: {stats:?}");
        if mode == RetryMode::Never {
            // Not validated by the token: the server learnt it from the handshake instead.
            assert!(client(&mut p).shared.tokens.retry_scid.is_none());
        }
    }
}

/// RFC 9000 §8.1.4: a NEW_TOKEN token is accepted once; a replay of it is treated as no token.
#[test]
fn new_token_is_accepted_only_once() {
    let mut p = pair(RetryMode::Always);
    assert!(run_handshake(&mut p));
    assert!(p.run_until(Duration::from_secs(1), |p| p.client.token_store().count("localhost") == 1));
    let token = p.client.token_store().take("localhost").expect("token");
    let cc = p.client_config.clone();
    for (i, expected_retries) in [(0, 1), (1, 2)] {
        p.client.token_store().insert("localhost", token.clone());
        let (now, addr) = (p.now, p.server_addr);
        p.client_conn = p.client.connect(now, &cc, addr, "localhost").expect("connect");
        assert!(run_handshake(&mut p), "connection {i}");
        let stats = p.server.stats();
        assert_eq!(stats.retries_sent, expected_retries, "connection {i}: {stats:?}");
    }
    let stats = p.server.stats();
    assert_eq!((stats.new_tokens_accepted, stats.new_tokens_replayed), (1, 1), "{stats:?}");
}
