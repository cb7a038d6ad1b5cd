//! Packet keys for a QUIC version other than the one the TLS session was created with.
//!
//! rustls fixes the QUIC version of a session when it is created, and the version picks the
//! HKDF labels of every packet key ("quic key" in v1, "quicv2 key" in v2, RFC 9369 §3.3.2).
//! A client that starts in v1 and is upgraded to v2 by compatible version negotiation
//! (RFC 9368 §2.1) learns the new version after its ClientHello is sent, so its session
//! keeps deriving v1 keys. The TLS secrets themselves do not depend on the QUIC version, so
//! this module captures them (through rustls's [`KeyLog`] hook, the only public way out)
//! and derives the keys of the negotiated version itself, with ring, like rustls's own
//! ring provider does.

use std::sync::{Arc, Mutex};

use ring::aead;
use rustls::crypto::cipher::{Iv, Nonce};
use rustls::crypto::tls13::{HkdfExpander, OkmBlock};
use rustls::quic::{DirectionalKeys, HeaderProtectionKey, Keys, PacketKey, PacketKeySet, Tag};
use rustls::{CipherSuite, KeyLog, Side, SupportedCipherSuite};

use crate::packet::version::VERSION_2;

/// The TLS traffic secrets of one connection, as rustls logs them.
#[derive(Default)]
struct Captured {
    client_handshake: Option<Vec<u8>>,
    server_handshake: Option<Vec<u8>>,
    client_traffic: Option<Vec<u8>>,
    server_traffic: Option<Vec<u8>>,
}

/// A [`KeyLog`] that keeps the handshake and first application traffic secrets of its one
/// connection and passes everything on to the key log the application configured (so
/// SSLKEYLOGFILE keeps working).
pub struct SecretCapture {
    inner: Arc<dyn KeyLog>,
    captured: Mutex<Captured>,
}

impl std::fmt::Debug for SecretCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretCapture").finish_non_exhaustive()
    }
}

const CLIENT_HS: &str = "CLIENT_HANDSHAKE_TRAFFIC_SECRET";
const SERVER_HS: &str = "SERVER_HANDSHAKE_TRAFFIC_SECRET";
const CLIENT_AP: &str = "CLIENT_TRAFFIC_SECRET_0";
const SERVER_AP: &str = "SERVER_TRAFFIC_SECRET_0";

impl SecretCapture {
    /// A capture that forwards to `inner`.
    pub fn new(inner: Arc<dyn KeyLog>) -> Self {
        Self { inner, captured: Mutex::new(Captured::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Captured> {
        // A poisoned lock only means another thread panicked while logging; the secrets
        // written before are still whole byte vectors.
        self.captured.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The Handshake keys of `version` for `side`, once rustls derived the secrets.
    pub fn handshake_keys(&self, suite: SupportedCipherSuite, side: Side, version: u32) -> Option<Keys> {
        let c = self.lock();
        keys(suite, side, version, c.client_handshake.as_deref()?, c.server_handshake.as_deref()?)
    }

    /// The first 1-RTT keys of `version` for `side` and the secrets of the next key phase.
    pub fn one_rtt_keys(&self, suite: SupportedCipherSuite, side: Side, version: u32) -> Option<(Keys, NextSecrets)> {
        let c = self.lock();
        let (client, server) = (c.client_traffic.as_deref()?, c.server_traffic.as_deref()?);
        let keys = keys(suite, side, version, client, server)?;
        let mut next =
            NextSecrets { suite: Suite::of(suite)?, side, version, client: client.to_vec(), server: server.to_vec() };
        next.update();
        Some((keys, next))
    }
}

impl KeyLog for SecretCapture {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        if self.inner.will_log(label) {
            self.inner.log(label, client_random, secret);
        }
        let mut c = self.lock();
        let slot = match label {
            CLIENT_HS => &mut c.client_handshake,
            SERVER_HS => &mut c.server_handshake,
            CLIENT_AP => &mut c.client_traffic,
            SERVER_AP => &mut c.server_traffic,
            _ => return,
        };
        *slot = Some(secret.to_vec());
    }

    fn will_log(&self, label: &str) -> bool {
        matches!(label, CLIENT_HS | SERVER_HS | CLIENT_AP | SERVER_AP) || self.inner.will_log(label)
    }
}

/// What a TLS 1.3 cipher suite is made of, for QUIC packet protection (RFC 9001 §5).
#[derive(Clone, Copy)]
struct Suite {
    tls: &'static rustls::Tls13CipherSuite,
    aead: &'static aead::Algorithm,
    hp: &'static aead::quic::Algorithm,
    confidentiality_limit: u64,
    integrity_limit: u64,
}

impl Suite {
    /// The suites QUIC allows (RFC 9001 §5.3); `None` for any other.
    fn of(suite: SupportedCipherSuite) -> Option<Self> {
        let tls = suite.tls13()?;
        // RFC 9001 §6.6: AEAD usage limits.
        let (aead, hp, confidentiality_limit, integrity_limit) = match tls.common.suite {
            CipherSuite::TLS13_AES_128_GCM_SHA256 => (&aead::AES_128_GCM, &aead::quic::AES_128, 1 << 23, 1 << 52),
            CipherSuite::TLS13_AES_256_GCM_SHA384 => (&aead::AES_256_GCM, &aead::quic::AES_256, 1 << 23, 1 << 52),
            CipherSuite::TLS13_CHACHA20_POLY1305_SHA256 => {
                (&aead::CHACHA20_POLY1305, &aead::quic::CHACHA20, u64::MAX, 1 << 36)
            }
            _ => return None,
        };
        Some(Self { tls, aead, hp, confidentiality_limit, integrity_limit })
    }

    fn expander(&self, secret: &[u8]) -> Box<dyn HkdfExpander> {
        self.tls.hkdf_provider.expander_for_okm(&OkmBlock::new(secret))
    }
}

/// The labels of `version` (RFC 9001 §5.1, RFC 9369 §3.3.2): key, iv, hp, ku.
fn labels(version: u32) -> [&'static [u8]; 4] {
    if version == VERSION_2 {
        [b"quicv2 key", b"quicv2 iv", b"quicv2 hp", b"quicv2 ku"]
    } else {
        [b"quic key", b"quic iv", b"quic hp", b"quic ku"]
    }
}

/// HKDF-Expand-Label (RFC 8446 §7.1) with an empty context into `out`.
fn expand_label(expander: &dyn HkdfExpander, label: &[u8], out: &mut [u8]) -> Option<()> {
    let len = (out.len() as u16).to_be_bytes();
    let label_len = [(6 + label.len()) as u8];
    let info: [&[u8]; 5] = [&len, &label_len, b"tls13 ", label, &[0]];
    expander.expand_slice(&info, out).ok()
}

fn packet_key(suite: &Suite, version: u32, secret: &[u8]) -> Option<Box<dyn PacketKey>> {
    let [key_label, iv_label, _, _] = labels(version);
    let expander = suite.expander(secret);
    let mut key = [0u8; 32];
    let key = &mut key[..suite.aead.key_len()];
    expand_label(&*expander, key_label, key)?;
    let mut iv = [0u8; 12];
    expand_label(&*expander, iv_label, &mut iv)?;
    let key = aead::LessSafeKey::new(aead::UnboundKey::new(suite.aead, key).ok()?);
    Some(Box::new(RingPacketKey {
        key,
        iv: Iv::from(iv),
        confidentiality_limit: suite.confidentiality_limit,
        integrity_limit: suite.integrity_limit,
    }))
}

fn directional(suite: &Suite, version: u32, secret: &[u8]) -> Option<DirectionalKeys> {
    let [_, _, hp_label, _] = labels(version);
    let expander = suite.expander(secret);
    let mut hp = [0u8; 32];
    let hp = &mut hp[..suite.hp.key_len()];
    expand_label(&*expander, hp_label, hp)?;
    let header = Box::new(RingHeaderKey(aead::quic::HeaderProtectionKey::new(suite.hp, hp).ok()?));
    Some(DirectionalKeys { header, packet: packet_key(suite, version, secret)? })
}

/// Packet and header keys of `version` from the two traffic secrets of a level.
fn keys(suite: SupportedCipherSuite, side: Side, version: u32, client: &[u8], server: &[u8]) -> Option<Keys> {
    let suite = Suite::of(suite)?;
    let (local, remote) = match side {
        Side::Client => (client, server),
        Side::Server => (server, client),
    };
    Some(Keys { local: directional(&suite, version, local)?, remote: directional(&suite, version, remote)? })
}

/// The secrets of the next 1-RTT key phase, updated with the key update label of the
/// connection's version (RFC 9001 §6.1, RFC 9369 §3.3.2: "quicv2 ku").
pub struct NextSecrets {
    suite: Suite,
    side: Side,
    version: u32,
    client: Vec<u8>,
    server: Vec<u8>,
}

impl NextSecrets {
    fn update(&mut self) {
        let ku = labels(self.version)[3];
        for s in [&mut self.client, &mut self.server] {
            let mut next = vec![0u8; s.len()];
            // The expander's hash output length is the secret's length: it cannot fail.
            if expand_label(&*self.suite.expander(s), ku, &mut next).is_some() {
                *s = next;
            }
        }
    }

    /// The packet keys of the next phase; moves these secrets one phase on.
    pub fn next_packet_keys(&mut self) -> PacketKeySet {
        let (local, remote) = match self.side {
            Side::Client => (&self.client, &self.server),
            Side::Server => (&self.server, &self.client),
        };
        // The suite was checked when these secrets were made (`Suite::of`) and the secrets
        // have its hash length, so key sizes match and HKDF outputs stay far below their
        // limit: derivation cannot fail, whatever the peer sent.
        let derive = |secret| packet_key(&self.suite, self.version, secret).expect("keys of a checked QUIC suite");
        let set = PacketKeySet { local: derive(local), remote: derive(remote) };
        self.update();
        set
    }
}

/// An AEAD packet key on ring, nonce as in RFC 9001 §5.3 (and RFC 10069 §2.4 for a path).
struct RingPacketKey {
    key: aead::LessSafeKey,
    iv: Iv,
    confidentiality_limit: u64,
    integrity_limit: u64,
}

impl RingPacketKey {
    fn seal(&self, nonce: Nonce, header: &[u8], payload: &mut [u8]) -> Result<Tag, rustls::Error> {
        let tag = self
            .key
            .seal_in_place_separate_tag(aead::Nonce::assume_unique_for_key(nonce.0), aead::Aad::from(header), payload)
            .map_err(|_| rustls::Error::EncryptError)?;
        Ok(Tag::from(tag.as_ref()))
    }

    fn open<'a>(&self, nonce: Nonce, header: &[u8], payload: &'a mut [u8]) -> Result<&'a [u8], rustls::Error> {
        let plain = self
            .key
            .open_in_place(aead::Nonce::assume_unique_for_key(nonce.0), aead::Aad::from(header), payload)
            .map_err(|_| rustls::Error::DecryptError)?;
        Ok(plain)
    }
}

impl PacketKey for RingPacketKey {
    fn encrypt_in_place(&self, pn: u64, header: &[u8], payload: &mut [u8]) -> Result<Tag, rustls::Error> {
        self.seal(Nonce::new(&self.iv, pn), header, payload)
    }

    fn encrypt_in_place_for_path(
        &self,
        path_id: u32,
        pn: u64,
        header: &[u8],
        payload: &mut [u8],
    ) -> Result<Tag, rustls::Error> {
        self.seal(Nonce::for_path(path_id, &self.iv, pn), header, payload)
    }

    fn decrypt_in_place<'a>(&self, pn: u64, header: &[u8], payload: &'a mut [u8]) -> Result<&'a [u8], rustls::Error> {
        self.open(Nonce::new(&self.iv, pn), header, payload)
    }

    fn decrypt_in_place_for_path<'a>(
        &self,
        path_id: u32,
        pn: u64,
        header: &[u8],
        payload: &'a mut [u8],
    ) -> Result<&'a [u8], rustls::Error> {
        self.open(Nonce::for_path(path_id, &self.iv, pn), header, payload)
    }

    fn tag_len(&self) -> usize {
        self.key.algorithm().tag_len()
    }

    fn confidentiality_limit(&self) -> u64 {
        self.confidentiality_limit
    }

    fn integrity_limit(&self) -> u64 {
        self.integrity_limit
    }
}

/// Header protection on ring (RFC 9001 §5.4.1).
struct RingHeaderKey(aead::quic::HeaderProtectionKey);

impl RingHeaderKey {
    fn xor(&self, sample: &[u8], first: &mut u8, pn: &mut [u8], masked: bool) -> Result<(), rustls::Error> {
        let mask =
            self.0.new_mask(sample).map_err(|_| rustls::Error::General("bad header protection sample".into()))?;
        let (first_mask, pn_mask) = (mask[0], &mask[1..]);
        // Long headers protect 4 low bits of the first byte, short headers 5.
        let bits = if *first & 0x80 != 0 { 0x0f } else { 0x1f };
        let plain_first = if masked { *first ^ (first_mask & bits) } else { *first };
        let pn_len = usize::from(plain_first & 0x03) + 1;
        if pn.len() > pn_mask.len() {
            return Err(rustls::Error::General("packet number field too long".into()));
        }
        *first ^= first_mask & bits;
        pn.iter_mut().zip(pn_mask).take(pn_len).for_each(|(b, m)| *b ^= m);
        Ok(())
    }
}

impl HeaderProtectionKey for RingHeaderKey {
    fn encrypt_in_place(&self, sample: &[u8], first: &mut u8, pn: &mut [u8]) -> Result<(), rustls::Error> {
        self.xor(sample, first, pn, false)
    }

    fn decrypt_in_place(&self, sample: &[u8], first: &mut u8, pn: &mut [u8]) -> Result<(), rustls::Error> {
        self.xor(sample, first, pn, true)
    }

    fn sample_len(&self) -> usize {
        self.0.algorithm().sample_len()
    }
}
