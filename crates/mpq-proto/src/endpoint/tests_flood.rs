//! Floods of Initials (RFC 9000 §8, §21.1): junk creates no state, valid-looking Initials
//! from many spoofed sources are answered statelessly, and a real client still connects.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::crypto::initial::initial_keys;
use crate::packet::header::{write_long_header, LongType};
use crate::packet::protect::seal_packet;
use crate::testing::{configs, Pair};

const SERVER: &str = "10.0.0.2:443";

/// The i-th spoofed source: all distinct, none the pair's client (10.0.0.1).
fn source(i: u32) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::from(0x0b00_0000 + i), 1024 + (i % 50_000) as u16))
}

/// 1200 random bytes shaped like a client Initial (type, version 1, 8-byte CIDs, Length)
/// that do not decrypt.
fn junk_initial(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut d = vec![0u8; crate::MIN_INITIAL_SIZE];
    rng.fill_bytes(&mut d);
    d[0] = 0xc0 | (d[0] & 0x0f);
    d[1..5].copy_from_slice(&crate::VERSION_1.to_be_bytes());
    d[5] = 8;
    d[14] = 8;
    d[23] = 0; // token length
    let len = (crate::MIN_INITIAL_SIZE - 26) as u16;
    d[24..26].copy_from_slice(&(0x4000 | len).to_be_bytes());
    d
}

/// A correctly protected 1200-byte client Initial with a random DCID. Its CRYPTO data starts
/// at offset 1000, so the server's TLS waits for the rest: a connection created for it would
/// be held until it times out, the most expensive thing a spoofed source can ask for.
fn valid_initial(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut c = [0u8; 16];
    rng.fill_bytes(&mut c);
    let (dcid, scid) = (ConnectionId::new(&c[..8]), ConnectionId::new(&c[8..]));
    let keys = initial_keys(&dcid, Side::Client, crate::VERSION_1);
    let mut out = Vec::with_capacity(crate::MIN_INITIAL_SIZE);
    let o = write_long_header(&mut out, LongType::Initial, crate::VERSION_1, &dcid, &scid, &[], 0, 4);
    crate::frame::encode_crypto_header(&mut out, 1000, 100);
    out.extend_from_slice(&[0x16; 100]);
    out.resize(crate::MIN_INITIAL_SIZE - 16, 0); // PADDING up to the minimum size
    seal_packet(&mut out, 0, Some(o.len_offset), o.pn_offset, 4, 0, &*keys.local.packet, &*keys.local.header, None)
        .expect("seal");
    out
}

fn server(mode: RetryMode, tweak: impl FnOnce(&mut EndpointConfig)) -> Endpoint {
    let (_, sc) = configs(Default::default());
    let mut cfg = EndpointConfig::with_seed(2);
    cfg.retry = mode;
    tweak(&mut cfg);
    Endpoint::new(cfg, Some(sc))
}

fn drain(ep: &mut Endpoint, now: Instant) -> usize {
    let mut buf = Vec::new();
    let mut n = 0;
    while ep.poll_transmit(now, &mut buf).is_some() {
        n += 1;
    }
    n
}

#[test]
fn junk_initials_from_many_sources_create_no_state() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for mode in [RetryMode::Never, RetryMode::Auto] {
        let mut ep = server(mode, |_| {});
        let now = Instant::ZERO;
        for i in 0..10_000 {
            let mut d = junk_initial(&mut rng);
            assert!(ep.handle_datagram(now, SERVER.parse().unwrap(), source(i), None, &mut d).is_none());
        }
        assert!(ep.is_empty(), "{mode}: {} connections", ep.len());
        assert_eq!(ep.stats().initials_undecryptable, 10_000);
        assert_eq!(ep.stats().retries_sent, 0, "junk is not answered");
        assert_eq!(drain(&mut ep, now), 0);
        assert!(ep.accept().is_none());
    }
}

#[test]
fn handshakes_are_bounded_in_total_and_per_address() {
    // Not the endpoint's seed (2): the same stream would make an Initial's random DCID equal
    // to a connection ID the endpoint issued, routing it to that connection.
    let mut rng = ChaCha8Rng::seed_from_u64(20);
    let now = Instant::ZERO;
    let local: SocketAddr = SERVER.parse().unwrap();
    // Per address: one source sending valid Initials gets at most max_handshakes_per_ip.
    let mut ep = server(RetryMode::Never, |c| c.max_handshakes_per_ip = 5);
    for _ in 0..50 {
        ep.handle_datagram(now, local, source(7), None, &mut valid_initial(&mut rng));
    }
    assert_eq!(ep.len(), 5);
    assert_eq!(ep.stats().initials_over_limit, 45);
    // In total.
    let mut ep = server(RetryMode::Never, |c| c.max_handshakes = 40);
    for i in 0..100 {
        ep.handle_datagram(now, local, source(i), None, &mut valid_initial(&mut rng));
    }
    assert_eq!(ep.len(), 40);
    assert_eq!(ep.handshakes_counted(), 40);
    // Once those handshakes are gone (here: closed by the application and drained), the
    // room comes back.
    for h in ep.handles() {
        ep.connection_mut(h).unwrap().close(now, 0, b"");
    }
    let later = now + Duration::from_secs(5);
    ep.handle_timeout(later);
    while ep.poll_event().is_some() {}
    assert!(ep.is_empty());
    ep.handle_datagram(later, local, source(1000), None, &mut valid_initial(&mut rng));
    assert_eq!(ep.len(), 1);
    assert_eq!(ep.handshakes_counted(), 1);
}

#[test]
fn legitimate_client_connects_during_a_flood_of_valid_initials() {
    let mut pair = Pair::new(Default::default());
    pair.server.set_retry_mode(RetryMode::Auto);
    let threshold = EndpointConfig::with_seed(0).retry_threshold;
    let rng = std::cell::RefCell::new(ChaCha8Rng::seed_from_u64(3));
    let local = pair.server_addr;
    let sent = std::cell::Cell::new(0u32);
    let flood = |pair: &mut Pair, n: u32| {
        for _ in 0..n {
            let mut d = valid_initial(&mut rng.borrow_mut());
            pair.server.handle_datagram(pair.now, local, source(sent.get()), None, &mut d);
            sent.set(sent.get() + 1);
        }
    };
    // The flood starts before the client's first Initial arrives and goes on throughout
    // (the pair drains the server's Retries towards the spoofed sources at every step).
    flood(&mut pair, 5_000);
    let ok = pair.run_until(Duration::from_secs(5), |p| {
        flood(p, 100);
        p.client.connection(p.client_conn).is_some_and(|c| c.is_established())
    });
    flood(&mut pair, 10_000u32.saturating_sub(sent.get()));
    assert!(ok, "the client did not connect during the flood");
    assert!(sent.get() >= 10_000);
    let stats = pair.server.stats();
    // Only the first `threshold` spoofed Initials got a connection; the others were answered
    // with a stateless Retry (or not at all while the response queue was full), the
    // legitimate client included.
    assert_eq!(pair.server.len(), threshold + 1, "{stats:?}");
    assert!(stats.retries_sent > 5_000, "{stats:?}");
    assert_eq!(stats.retry_tokens_accepted, 1, "{stats:?}");
    assert_eq!(stats.initials_over_limit, 0, "{stats:?}");
}

#[test]
fn always_mode_holds_no_state_for_a_flood() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut ep = server(RetryMode::Always, |_| {});
    let now = Instant::ZERO;
    for i in 0..2_000 {
        ep.handle_datagram(now, SERVER.parse().unwrap(), source(i), None, &mut valid_initial(&mut rng));
    }
    assert!(ep.is_empty());
    assert_eq!(ep.stats().retries_sent, 2_000);
    // Each Retry is smaller than the Initial it answers: no amplification.
    let mut buf = Vec::new();
    let mut n = 0;
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        assert!(t.size < 200, "{}", t.size);
        n += 1;
    }
    assert_eq!(n, 2_000);
}

/// The used-token filter stays bounded: when full, tokens are refused (treated as no token)
/// until expired entries can be forgotten.
#[test]
fn used_token_filter_is_bounded() {
    let mut g = retry::ServerGuard::new(TokenKey::new(&[1; 32]), RetryMode::Auto);
    let t0 = Instant::ZERO;
    let token = |i: u32| {
        let mut t = vec![0x4e];
        t.extend_from_slice(&i.to_be_bytes());
        t.extend_from_slice(&[0; 40]);
        t
    };
    let mut accepted = 0;
    for i in 0..20_000 {
        accepted += usize::from(g.first_use(&token(i), t0, t0 + Duration::from_secs(10)));
    }
    assert!((16_000..20_000).contains(&accepted), "{accepted}");
    assert!(!g.first_use(&token(0), t0, t0 + Duration::from_secs(10)), "a replay");
    // Once the remembered tokens expired, room comes back.
    let later = t0 + Duration::from_secs(11);
    assert!(g.first_use(&token(30_000), later, later + Duration::from_secs(10)));
    assert!(!g.first_use(&[0x4e, 1], later, later), "too short to name");
}
