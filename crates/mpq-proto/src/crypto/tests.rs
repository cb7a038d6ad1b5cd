//! An in-memory handshake between two [`TlsSession`]s whose CRYPTO bytes travel in real
//! protected packets, then 1-RTT key updates in both directions.

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::quic::{KeyChange, Keys};

use super::*;
use crate::packet::header::{write_long_header, write_short_header, LongType};
use crate::packet::number::{decode_pn, encode_pn_len};
use crate::packet::protect::{open_payload, remove_header_protection, seal_packet, ProtectError};
use crate::packet::{parse_packet, PacketKind};
use crate::{ConnectionId, Level, Side, TransportErrorCode, VERSION_1};

const ALPN: &[u8] = b"hq-interop";

fn configs(client_alpn: &[u8]) -> (Arc<rustls::ClientConfig>, Arc<rustls::ServerConfig>) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert: CertificateDer<'static> = ck.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(ck.signing_key.serialize_der().into());
    let prov = Arc::new(crate::crypto::backend::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.clone()).unwrap();
    let mut cc = rustls::ClientConfig::builder_with_provider(prov.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cc.alpn_protocols = vec![client_alpn.to_vec()];
    let mut sc = rustls::ServerConfig::builder_with_provider(prov)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    sc.alpn_protocols = vec![ALPN.to_vec()];
    sc.max_early_data_size = 0;
    (Arc::new(cc), Arc::new(sc))
}

/// One endpoint: its TLS session, the keys per level and the packet numbers it used.
struct Peer {
    tls: TlsSession,
    side: Side,
    write_level: Level,
    initial: Keys,
    handshake: Option<Keys>,
    one_rtt: Option<OneRttKeys>,
    next_pn: [u64; 3],
    largest_rx: [Option<u64>; 3],
}

const DCID: [u8; 8] = [0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08];

impl Peer {
    fn new(tls: TlsSession, side: Side) -> Self {
        Self {
            tls,
            side,
            write_level: Level::Initial,
            initial: initial_keys(&ConnectionId::new(&DCID), side, crate::VERSION_1),
            handshake: None,
            one_rtt: None,
            next_pn: [0; 3],
            largest_rx: [None; 3],
        }
    }

    fn space(level: Level) -> usize {
        match level {
            Level::Initial => 0,
            Level::Handshake => 1,
            _ => 2,
        }
    }

    /// Runs `write_handshake` until it has nothing more, sealing each batch at the level it
    /// belongs to and switching levels on key changes. Returns the datagram.
    fn flush(&mut self) -> Vec<u8> {
        let mut datagram = vec![];
        loop {
            let mut buf = vec![];
            let change = self.tls.write_handshake(&mut buf);
            if !buf.is_empty() {
                self.seal(&mut datagram, self.write_level, &buf);
            }
            match change {
                None => break,
                Some(KeyChange::Handshake { keys }) => {
                    self.handshake = Some(keys);
                    self.write_level = Level::Handshake;
                }
                Some(KeyChange::OneRtt { keys, next }) => {
                    self.one_rtt = Some(OneRttKeys::new(keys, next));
                    self.write_level = Level::OneRtt;
                }
            }
        }
        datagram
    }

    /// Seals `payload` (raw CRYPTO bytes here: no frame layer) as one packet at `level`.
    fn seal(&mut self, out: &mut Vec<u8>, level: Level, payload: &[u8]) -> u64 {
        let space = Self::space(level);
        let pn = self.next_pn[space];
        self.next_pn[space] += 1;
        let pn_len = encode_pn_len(pn, None);
        let cid = ConnectionId::new(&DCID);
        let (start, len_off, pn_off) = match level {
            Level::Initial | Level::Handshake => {
                let ty = if level == Level::Initial { LongType::Initial } else { LongType::Handshake };
                let o = write_long_header(out, ty, VERSION_1, &cid, &cid, &[], pn, pn_len);
                (o.header_start, Some(o.len_offset), o.pn_offset)
            }
            _ => {
                let start = out.len();
                let phase = self.one_rtt.as_ref().unwrap().key_phase();
                (start, None, write_short_header(out, &cid, phase, false, pn, pn_len))
            }
        };
        out.extend_from_slice(payload);
        let (key, hp) = match level {
            Level::Initial => (&*self.initial.local.packet, &*self.initial.local.header),
            Level::Handshake => {
                let k = self.handshake.as_ref().unwrap();
                (&*k.local.packet, &*k.local.header)
            }
            _ => {
                let k = self.one_rtt.as_ref().unwrap();
                (k.local_key(), k.local_header_key())
            }
        };
        seal_packet(out, start, len_off, pn_off, pn_len, pn, key, hp, None).unwrap();
        if level == Level::OneRtt {
            self.one_rtt.as_mut().unwrap().on_packet_sealed(pn).unwrap();
        }
        pn
    }

    /// Opens every packet of `datagram`, feeding handshake bytes to TLS; returns 1-RTT
    /// payloads with their packet numbers.
    fn receive(&mut self, mut datagram: Vec<u8>) -> Result<Vec<(u64, Vec<u8>)>, crate::TransportError> {
        let mut app = vec![];
        let mut rest = &mut datagram[..];
        while !rest.is_empty() {
            let h = parse_packet(rest, DCID.len()).unwrap();
            let (pkt, tail) = std::mem::take(&mut rest).split_at_mut(h.packet_len);
            rest = tail;
            let level = match h.kind {
                PacketKind::Initial => Level::Initial,
                PacketKind::Handshake => Level::Handshake,
                PacketKind::Short => Level::OneRtt,
                k => panic!("unexpected {k:?}"),
            };
            if level != Level::Initial && self.keys_missing(level) {
                // Keys for the next level appear once TLS has produced them.
                let out = self.flush();
                assert!(out.is_empty() || level == Level::OneRtt);
            }
            let space = Self::space(level);
            if level == Level::OneRtt {
                let keys = self.one_rtt.as_mut().unwrap();
                let u = remove_header_protection(pkt, h.pn_offset, keys.remote_header_key()).unwrap();
                let pn = decode_pn(self.largest_rx[space], u.truncated_pn, u.pn_len);
                let choice = keys.remote_key_for(u.key_phase(), pn);
                let Some(key) = keys.remote_key(choice) else {
                    continue;
                };
                match open_payload(pkt, h.pn_offset, u.pn_len, pn, key, None) {
                    Ok(plain) => {
                        app.push((pn, plain.to_vec()));
                        keys.on_remote_authenticated(choice, pn)?;
                    }
                    Err(_) => {
                        keys.on_decrypt_failed()?;
                        continue;
                    }
                }
                self.largest_rx[space] = self.largest_rx[space].max(Some(pn));
                continue;
            }
            let keys = if level == Level::Initial { &self.initial } else { self.handshake.as_ref().unwrap() };
            let u = remove_header_protection(pkt, h.pn_offset, &*keys.remote.header).unwrap();
            let pn = decode_pn(self.largest_rx[space], u.truncated_pn, u.pn_len);
            let plain = open_payload(pkt, h.pn_offset, u.pn_len, pn, &*keys.remote.packet, None).unwrap();
            self.largest_rx[space] = self.largest_rx[space].max(Some(pn));
            // Each level's bytes go to TLS on their own, in order.
            self.tls.read_handshake(level, plain)?;
        }
        Ok(app)
    }

    fn keys_missing(&self, level: Level) -> bool {
        match level {
            Level::Handshake => self.handshake.is_none(),
            _ => self.one_rtt.is_none(),
        }
    }

    fn keys(&mut self) -> &mut OneRttKeys {
        self.one_rtt.as_mut().unwrap()
    }

    /// Seals one 1-RTT packet carrying `payload`.
    fn send_app(&mut self, payload: &[u8]) -> (u64, Vec<u8>) {
        let mut d = vec![];
        let pn = self.seal(&mut d, Level::OneRtt, payload);
        (pn, d)
    }
}

fn handshake(client_alpn: &[u8]) -> Result<(Peer, Peer), crate::TransportError> {
    handshake_with(client_alpn, false)
}

/// The handshake with a client that keeps its secrets for another version (`may_upgrade`).
fn handshake_with(client_alpn: &[u8], may_upgrade: bool) -> Result<(Peer, Peer), crate::TransportError> {
    let (cc, sc) = configs(client_alpn);
    let ctp = b"client transport parameters".to_vec();
    let stp = b"server transport parameters".to_vec();
    let name = ServerName::try_from("localhost").unwrap();
    let mut client = Peer::new(TlsSession::client(cc, name, ctp, crate::VERSION_1, may_upgrade).unwrap(), Side::Client);
    let mut server = Peer::new(TlsSession::server(sc, stp, crate::VERSION_1).unwrap(), Side::Server);
    let mut to_server = client.flush();
    for _ in 0..6 {
        if to_server.is_empty() {
            break;
        }
        server.receive(to_server)?;
        let to_client = server.flush();
        if !to_client.is_empty() {
            client.receive(to_client)?;
        }
        to_server = client.flush();
    }
    Ok((client, server))
}

#[test]
fn handshake_reaches_one_rtt() {
    let (mut client, mut server) = handshake(ALPN).unwrap();
    assert_eq!(client.side, Side::Client);
    assert_eq!(server.side, Side::Server);
    for p in [&client, &server] {
        assert!(!p.tls.is_handshaking());
        assert!(p.one_rtt.is_some());
        assert_eq!(p.tls.alpn(), Some(ALPN));
        assert!(p.tls.negotiated_cipher_suite().is_some());
        assert!(p.handshake.is_some());
    }
    assert_eq!(client.tls.peer_transport_params(), Some(&b"server transport parameters"[..]));
    assert_eq!(server.tls.peer_transport_params(), Some(&b"client transport parameters"[..]));
    // 1-RTT data both ways.
    let (_, d) = client.send_app(b"hello server");
    assert_eq!(server.receive(d).unwrap(), [(0, b"hello server".to_vec())]);
    let (_, d) = server.send_app(b"hello client");
    assert_eq!(client.receive(d).unwrap()[0].1, b"hello client");
}

#[test]
fn alpn_mismatch_is_a_crypto_error() {
    let err = handshake(b"h3").err().expect("handshake must fail");
    // no_application_protocol (120) → CRYPTO_ERROR 0x0178 (RFC 9001 §8.1).
    assert_eq!(err.code, TransportErrorCode::crypto(120));
}

#[test]
fn key_update_initiated_by_client_then_server() {
    let (mut c, mut s) = handshake(ALPN).unwrap();
    // Phase 0 traffic; nobody may initiate before an ack of a current-phase packet.
    let (c0, d) = c.send_app(b"c0!");
    s.receive(d).unwrap();
    let (s0, d_s0) = s.send_app(b"s0 (ack c0)");
    s.keys().on_ack_sent(c0);
    assert!(!c.keys().can_initiate());
    assert!(!c.keys().initiate_update());
    c.receive(d_s0).unwrap();
    c.keys().on_packet_acked(c0);
    assert!(c.keys().can_initiate());
    // A server packet of phase 0 that will arrive after the update.
    let (_s1, late) = s.send_app(b"s1 late, phase 0");

    // Client initiates: its packets now carry phase 1 and the server follows.
    assert!(c.keys().initiate_update());
    assert!(c.keys().key_phase());
    assert!(!c.keys().can_initiate());
    let (c1, d) = c.send_app(b"c1 phase 1");
    assert_eq!(s.keys().remote_key_for(true, c1), RemoteKeyChoice::Next);
    assert_eq!(s.receive(d).unwrap()[0].1, b"c1 phase 1");
    assert!(s.keys().key_phase(), "server followed the update");
    assert!(s.keys().has_previous());
    // The late phase-0 packet still opens on the client with the previous key.
    assert_eq!(c.keys().remote_key_for(false, 1), RemoteKeyChoice::Previous);
    assert_eq!(c.receive(late).unwrap()[0].1, b"s1 late, phase 0");
    // The server answers in phase 1 and acknowledges c1.
    let (s2, d) = s.send_app(b"s2 phase 1, ack c1");
    s.keys().on_ack_sent(c1);
    assert_eq!(c.receive(d).unwrap()[0].1, b"s2 phase 1, ack c1");
    c.keys().on_packet_acked(c1);
    assert!(c.keys().can_initiate());
    let _ = s0;

    // Now the server initiates the next update (phase 0 again, third generation).
    let (c2, d) = c.send_app(b"c2 ack s2");
    c.keys().on_ack_sent(s2);
    s.receive(d).unwrap();
    s.keys().on_packet_acked(s2);
    s.keys().discard_previous();
    assert!(s.keys().initiate_update());
    assert!(!s.keys().key_phase());
    let (s3, d) = s.send_app(b"s3 phase 0, gen 2");
    assert_eq!(c.keys().remote_key_for(false, s3), RemoteKeyChoice::Next);
    assert_eq!(c.receive(d).unwrap()[0].1, b"s3 phase 0, gen 2");
    assert!(!c.keys().key_phase());
    let (_, d) = c.send_app(b"c3 gen 2");
    assert_eq!(s.receive(d).unwrap()[0].1, b"c3 gen 2");
    let _ = c2;

    // A generation-2 packet does not open with generation 0 keys even though the phase bit
    // matches: the server's previous key (generation 1) and current differ from gen 0.
    assert_eq!(c.keys().decrypt_failures(), 0);
    assert_eq!(s.keys().decrypt_failures(), 0);
}

#[test]
fn consecutive_update_without_ack_is_key_update_error() {
    let (mut c, mut s) = handshake(ALPN).unwrap();
    let (c0, d) = c.send_app(b"c0!");
    s.receive(d).unwrap();
    let (_, d) = s.send_app(b"s0!");
    c.receive(d).unwrap();
    c.keys().on_packet_acked(c0);
    // The server never sent an ACK of a phase-0 client packet: a client update is then a
    // second update without confirmation from the server's point of view.
    assert!(c.keys().initiate_update());
    let (_, d) = c.send_app(b"c1!");
    let err = s.receive(d).unwrap_err();
    assert_eq!(err.code, TransportErrorCode::KEY_UPDATE_ERROR);
}

#[test]
fn key_order_violations_are_key_update_errors() {
    let (mut c, mut s) = handshake(ALPN).unwrap();
    let (c0, d) = c.send_app(b"c0!");
    s.receive(d).unwrap();
    s.keys().on_ack_sent(c0);
    let (_, d) = s.send_app(b"s0!");
    c.receive(d).unwrap();
    c.keys().on_packet_acked(c0);
    let (c1, d1) = c.send_app(b"c1 phase 0");
    let (c2, d2) = c.send_app(b"c2 phase 0");
    // c2 arrives first and is authenticated in phase 0.
    s.receive(d2).unwrap();
    c.keys().initiate_update();
    // A phase-1 packet must have a higher number than phase-0 ones; a numerically lower
    // packet under newer keys is a violation. Forge one with pn c1 < c2 by resetting the
    // client's counter.
    c.next_pn[2] = c1;
    let (_, d) = c.send_app(b"c1' phase 1");
    let err = s.receive(d).unwrap_err();
    assert_eq!(err.code, TransportErrorCode::KEY_UPDATE_ERROR);
    let _ = (d1, c2);

    // Previous-key packet newer than the first current-phase packet.
    let mut k = OneRttKeys::new_insecure_null();
    k.on_remote_authenticated(RemoteKeyChoice::Current, 0).unwrap();
    k.on_ack_sent(0);
    k.on_remote_authenticated(RemoteKeyChoice::Next, 10).unwrap();
    assert!(k.has_previous());
    assert_eq!(k.remote_key_for(false, 5), RemoteKeyChoice::Previous);
    k.on_remote_authenticated(RemoteKeyChoice::Previous, 5).unwrap();
    let err = k.on_remote_authenticated(RemoteKeyChoice::Previous, 11).unwrap_err();
    assert_eq!(err.code, TransportErrorCode::KEY_UPDATE_ERROR);
    // And a current-phase packet older than one seen under the previous keys.
    let err = k.on_remote_authenticated(RemoteKeyChoice::Current, 4).unwrap_err();
    assert_eq!(err.code, TransportErrorCode::KEY_UPDATE_ERROR);
}

#[test]
fn old_phase_does_not_decrypt_with_new_keys() {
    let (mut c, mut s) = handshake(ALPN).unwrap();
    let (c0, d) = c.send_app(b"c0!");
    s.receive(d).unwrap();
    s.keys().on_ack_sent(c0);
    c.keys().on_packet_acked(c0);
    c.keys().initiate_update();
    let (pn, mut d) = c.send_app(b"phase 1");
    // Try the server's current (phase 0) key directly: authentication fails.
    let h = parse_packet(&d, DCID.len()).unwrap();
    let keys = s.keys();
    let u = remove_header_protection(&mut d, h.pn_offset, keys.remote_header_key()).unwrap();
    assert!(u.key_phase());
    let cur = keys.remote_key(RemoteKeyChoice::Current).unwrap();
    assert_eq!(open_payload(&mut d, h.pn_offset, u.pn_len, pn, cur, None), Err(ProtectError::Crypto));
    assert_eq!(keys.on_decrypt_failed(), Ok(()));
    assert_eq!(keys.decrypt_failures(), 1);
}

#[test]
fn aead_limits() {
    let (mut c, _s) = handshake(ALPN).unwrap();
    let k = c.keys();
    // AES-128-GCM limits from RFC 9001 §6.6.
    assert_eq!(k.confidentiality_limit(), 1 << 23);
    assert_eq!(k.integrity_limit(), 1 << 52);
    assert!(!k.should_update());
    // The null cipher never reaches a limit; exercise the counters' logic on it.
    let mut n = OneRttKeys::new_insecure_null();
    for pn in 0..10 {
        n.on_packet_sealed(pn).unwrap();
        n.on_decrypt_failed().unwrap();
    }
    assert_eq!((n.sealed_in_phase(), n.decrypt_failures()), (10, 10));
    n.on_packet_acked(3);
    assert!(n.initiate_update());
    assert_eq!(n.sealed_in_phase(), 0, "a new key starts a new count");
    assert_eq!(n.decrypt_failures(), 10, "failures count across keys");
}

/// Each path keeps its own key-phase marks; a key update reaches the marks of a path that
/// did not take part lazily, through the epoch (RFC 10069 §2.5: one key
/// phase, packet numbers per path).
#[test]
fn key_phase_marks_are_per_path_and_follow_updates_lazily() {
    use crate::crypto::key_update::PathKeyMarks;
    let mut k = OneRttKeys::new_insecure_null();
    let (mut a, mut b, mut c) = (PathKeyMarks::default(), PathKeyMarks::default(), PathKeyMarks::default());
    for (m, pn) in [(&mut a, 5), (&mut b, 7), (&mut c, 4)] {
        assert_eq!(k.remote_key_for_path(false, m, pn), RemoteKeyChoice::Current);
        k.on_remote_authenticated_path(RemoteKeyChoice::Current, m, pn).unwrap();
    }
    assert!(b.ack_covers_remote_phase(k.epoch(), 7));
    k.on_remote_phase_acked();
    // The peer updates on path A.
    assert_eq!(k.remote_key_for_path(true, &mut a, 6), RemoteKeyChoice::Next);
    k.on_remote_authenticated_path(RemoteKeyChoice::Next, &mut a, 6).unwrap();
    assert_eq!(k.epoch(), 1);
    // Path B has not seen the update: an old-phase packet above its last one is still of
    // the previous phase (B's numbers, not A's, decide).
    assert_eq!(k.remote_key_for_path(false, &mut b, 8), RemoteKeyChoice::Previous);
    k.on_remote_authenticated_path(RemoteKeyChoice::Previous, &mut b, 8).unwrap();
    assert_eq!(k.remote_key_for_path(true, &mut b, 9), RemoteKeyChoice::Current);
    k.on_remote_authenticated_path(RemoteKeyChoice::Current, &mut b, 9).unwrap();
    assert_eq!(k.remote_key_for_path(false, &mut b, 3), RemoteKeyChoice::Previous);
    // New keys for a number below one the old keys opened on this path: KEY_UPDATE_ERROR.
    let err = k.on_remote_authenticated_path(RemoteKeyChoice::Current, &mut b, 2).unwrap_err();
    assert_eq!(err.code, TransportErrorCode::KEY_UPDATE_ERROR);
    // A second update; path C was idle through both: nothing of it is left in the
    // previous phase, so its low numbers are not held against the new keys.
    assert!(a.ack_covers_remote_phase(k.epoch(), 6));
    k.on_remote_phase_acked();
    k.on_remote_authenticated_path(RemoteKeyChoice::Next, &mut a, 20).unwrap();
    assert_eq!(k.epoch(), 2);
    assert_eq!(k.remote_key_for_path(false, &mut c, 1), RemoteKeyChoice::Current);
    k.on_remote_authenticated_path(RemoteKeyChoice::Current, &mut c, 1).unwrap();
    // Our side: an acknowledgement confirms the phase only for a packet sealed in it, on
    // the path that sealed it.
    k.on_packet_sealed_path(&mut b, 100).unwrap();
    k.on_packet_acked_path(&mut a, 150);
    assert!(!k.can_initiate(), "path A sealed nothing in this phase");
    k.on_packet_acked_path(&mut b, 99);
    assert!(!k.can_initiate(), "packet 99 of path B is older than the phase");
    k.on_packet_acked_path(&mut b, 100);
    assert!(k.can_initiate());
}

/// Seals `payload` as packet `pn` with `key` and returns ciphertext and tag.
fn seal_with(key: &dyn rustls::quic::PacketKey, pn: u64, path: Option<u32>) -> Vec<u8> {
    let mut buf = b"some payload bytes".to_vec();
    let tag = match path {
        Some(p) => key.encrypt_in_place_for_path(p, pn, b"header", &mut buf),
        None => key.encrypt_in_place(pn, b"header", &mut buf),
    }
    .unwrap();
    buf.extend_from_slice(tag.as_ref());
    buf
}

/// The header protection mask of `hp` for a fixed sample.
fn mask_of(hp: &dyn rustls::quic::HeaderProtectionKey) -> (u8, [u8; 4]) {
    let (mut first, mut pn) = (0xc3u8, [0u8; 4]);
    hp.encrypt_in_place(&[7; 16], &mut first, &mut pn).unwrap();
    (first, pn)
}

/// The keys `version_keys` derives from captured secrets are rustls's own when asked for
/// the session's version (v1 here): the same derivation with the other labels gives v2's.
#[test]
fn captured_secrets_derive_the_keys_rustls_derives() {
    let (client, server) = handshake_with(ALPN, true).unwrap();
    let hs = client.tls.handshake_keys_for(Side::Client, VERSION_1).expect("captured handshake secrets");
    let theirs = client.handshake.as_ref().unwrap();
    assert_eq!(seal_with(&*hs.local.packet, 3, None), seal_with(&*theirs.local.packet, 3, None));
    assert_eq!(seal_with(&*hs.remote.packet, 9, None), seal_with(&*theirs.remote.packet, 9, None));
    assert_eq!(mask_of(&*hs.local.header), mask_of(&*theirs.local.header));
    let (mut ours, mut next) = client.tls.one_rtt_keys_for(Side::Client, VERSION_1).expect("captured 1-RTT secrets");
    let theirs = server.one_rtt.as_ref().unwrap();
    // Client's local = server's remote, with and without a path ID in the nonce.
    assert_eq!(
        seal_with(&*ours.local.packet, 5, None),
        seal_with(theirs.remote_key(RemoteKeyChoice::Current).unwrap(), 5, None)
    );
    assert_eq!(
        seal_with(&*ours.local.packet, 5, Some(3)),
        seal_with(theirs.remote_key(RemoteKeyChoice::Current).unwrap(), 5, Some(3))
    );
    assert_eq!(mask_of(&*ours.remote.header), mask_of(theirs.local_header_key()));
    // The next phase ("quic ku") matches the server's pre-derived next keys.
    let next_set = next.next_packet_keys();
    assert_eq!(
        seal_with(&*next_set.local, 1, None),
        seal_with(theirs.remote_key(RemoteKeyChoice::Next).unwrap(), 1, None)
    );
    // v2 labels give other keys.
    let v2 = client.tls.handshake_keys_for(Side::Client, crate::VERSION_2).unwrap();
    assert_ne!(seal_with(&*v2.local.packet, 3, None), seal_with(&*hs.local.packet, 3, None));
    ours = client.tls.one_rtt_keys_for(Side::Client, crate::VERSION_2).unwrap().0;
    assert_ne!(
        seal_with(&*ours.local.packet, 5, None),
        seal_with(theirs.remote_key(RemoteKeyChoice::Current).unwrap(), 5, None)
    );
    // A session made without `may_upgrade` keeps nothing.
    let (plain, _) = handshake(ALPN).unwrap();
    assert!(plain.tls.handshake_keys_for(Side::Client, VERSION_1).is_none());
}
