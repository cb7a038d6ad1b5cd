//! Seeded TLS for simulated runs: every random draw of a handshake comes from a ChaCha20
//! stream seeded by the run, and the certificate's key from the same stream, so two runs
//! with the same seed send the same bytes, not only packets of the same sizes.
//!
//! It also keeps the simulator off aws-lc's own generator, whose first use seeds it from CPU
//! jitter: 30-40 ms of one core per process (`jent_*` under `tree_jitter_initialize_once`
//! in a `perf record` of `mpq sim`), a seventh of a 20 MB two-path run.
//!
//! **Never for a network**: the keys are predictable by design.
//!
//! What draws randomness in a TLS 1.3 handshake, and where it comes from here:
//! - the hellos' randoms, the client's legacy session ID, the server's session ticket
//!   nonces: rustls's [`SecureRandom`] of the provider, [`ThreadStream`];
//! - the key shares: X25519 through `SeededX25519` (the first group of the provider, the
//!   one a client sends a share for; the others stay listed, so the hellos keep their sizes);
//! - the certificate: an Ed25519 key from the stream (its signatures need no randomness).
//!
//! With the ring backend (`--no-default-features`) ring draws the key shares itself (its
//! generator cannot be replaced); the rest is seeded, and ring's generator costs no start-up.

use std::cell::RefCell;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rustls::crypto::{CryptoProvider, GetRandomFailed, SecureRandom};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

thread_local! {
    /// The calling thread's stream. A simulation runs on one thread, and the configs made
    /// for it reseed it ([`seeded_configs`](super::seeded_configs)); rustls wants its sources
    /// `'static`, and one per run would have to be leaked.
    static STREAM: RefCell<ChaCha20Rng> = RefCell::new(ChaCha20Rng::seed_from_u64(0));
}

/// Restarts the calling thread's stream from `seed`.
pub fn reseed(seed: u64) {
    STREAM.with(|s| *s.borrow_mut() = ChaCha20Rng::seed_from_u64(seed));
}

/// The calling thread's ChaCha20 stream as rustls's source of randomness.
#[derive(Debug)]
pub struct ThreadStream;

impl SecureRandom for ThreadStream {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        STREAM.with(|s| s.try_borrow_mut().map(|mut s| s.fill_bytes(buf)).map_err(|_| GetRandomFailed))
    }
}

/// The PKCS#8 v1 encoding of an Ed25519 private key (RFC 8410 §7) without its 32 bytes.
const ED25519_PKCS8_PREFIX: [u8; 16] =
    [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];

/// The stack's provider with its randomness and its X25519 key shares drawn from the
/// calling thread's stream.
pub fn seeded_provider() -> CryptoProvider {
    let mut provider = crate::crypto::backend::default_provider();
    #[cfg(feature = "aws-lc-rs")]
    if let Some(first) = provider.kx_groups.first_mut() {
        if first.name() == rustls::NamedGroup::X25519 {
            *first = &x25519::SeededX25519;
        }
    }
    provider.secure_random = &ThreadStream;
    provider
}

/// A self-signed Ed25519 certificate for `localhost` (serial 1, rcgen's fixed validity)
/// and its key, the key drawn from the calling thread's stream.
pub fn seeded_certificate() -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
    let mut der = ED25519_PKCS8_PREFIX.to_vec();
    let mut secret = [0u8; 32];
    // Fails only if the stream is borrowed, which nothing does while calling this; a zero
    // key would still be a valid Ed25519 key.
    let _ = ThreadStream.fill(&mut secret);
    der.extend_from_slice(&secret);
    let key = PrivatePkcs8KeyDer::from(der);
    let key_pair = rcgen::KeyPair::try_from(&key).expect("an Ed25519 PKCS#8 key");
    (super::localhost_certificate(&key_pair), PrivateKeyDer::Pkcs8(key))
}

/// X25519 key shares from the seeded stream, with aws-lc-rs's X25519.
#[cfg(feature = "aws-lc-rs")]
mod x25519 {
    use aws_lc_rs::agreement::{self, PrivateKey, UnparsedPublicKey, X25519};
    use rustls::crypto::{ActiveKeyExchange, SecureRandom, SharedSecret, SupportedKxGroup};
    use rustls::{Error, NamedGroup, PeerMisbehaved};

    use super::ThreadStream;

    /// X25519 (RFC 7748) whose private keys are drawn from the calling thread's stream.
    #[derive(Debug)]
    pub(super) struct SeededX25519;

    impl SupportedKxGroup for SeededX25519 {
        fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, Error> {
            let mut secret = [0u8; 32];
            ThreadStream.fill(&mut secret)?;
            let private = PrivateKey::from_private_key(&X25519, &secret)
                .map_err(|_| Error::General("X25519 key from seeded bytes".into()))?;
            let public =
                private.compute_public_key().map_err(|_| Error::General("X25519 public key".into()))?.as_ref().to_vec();
            Ok(Box::new(SeededShare { private, public }))
        }

        fn name(&self) -> NamedGroup {
            NamedGroup::X25519
        }
    }

    /// One handshake's X25519 share.
    struct SeededShare {
        private: PrivateKey,
        public: Vec<u8>,
    }

    impl ActiveKeyExchange for SeededShare {
        fn complete(self: Box<Self>, peer: &[u8]) -> Result<SharedSecret, Error> {
            // An all-zero shared secret (a low-order peer point) is refused by aws-lc, as
            // RFC 8446 §7.4.2 requires; the peer's share is then invalid.
            agreement::agree(
                &self.private,
                UnparsedPublicKey::new(&X25519, peer),
                Error::from(PeerMisbehaved::InvalidKeyShare),
                |secret| Ok(SharedSecret::from(secret)),
            )
        }

        fn pub_key(&self) -> &[u8] {
            &self.public
        }

        fn group(&self) -> NamedGroup {
            NamedGroup::X25519
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{seeded_configs, Pair};
    use crate::conn::TransportConfig;

    /// Every datagram the pair sends until the client's handshake is confirmed.
    fn handshake_bytes(seed: u64) -> Vec<Vec<u8>> {
        let (cc, sc) = seeded_configs(TransportConfig::default(), seed);
        let mut pair = Pair::from_configs(&cc, sc);
        let mut sent = Vec::new();
        let h = pair.client_conn;
        let deadline = pair.now + Duration::from_secs(2);
        for _ in 0..1000 {
            pair.flush();
            sent.extend(pair.in_flight.iter().map(|d| d.5.clone()));
            if pair.client.connection(h).is_some_and(|c| c.is_handshake_confirmed()) {
                return sent;
            }
            if !pair.step(deadline) {
                break;
            }
        }
        panic!("the seeded handshake (seed {seed}) did not complete");
    }

    /// The same seed gives the same bytes on the wire (hellos, key shares, certificate
    /// and everything encrypted under the keys they lead to); another seed other bytes of
    /// the same sizes.
    #[test]
    fn a_seeded_handshake_sends_the_same_bytes_for_the_same_seed() {
        let a = handshake_bytes(7);
        assert!(a.len() >= 4, "a handshake takes a few datagrams, got {}", a.len());
        assert_eq!(a, handshake_bytes(7));
        let b = handshake_bytes(8);
        assert_ne!(a, b);
        let sizes = |v: &[Vec<u8>]| v.iter().map(Vec::len).collect::<Vec<_>>();
        assert_eq!(sizes(&a), sizes(&b));
    }

    /// The seeded certificate is a valid Ed25519 certificate of the seed's key: the same
    /// seed, the same certificate.
    #[test]
    fn the_certificate_follows_the_seed() {
        use super::{reseed, seeded_certificate};
        let of = |seed| {
            reseed(seed);
            seeded_certificate().0
        };
        let (a, b, c) = (of(1), of(1), of(2));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.len(), c.len());
    }
}
