//! Address validation tokens (RFC 9000 §8.1): the tokens a server puts in Retry packets and
//! NEW_TOKEN frames, and the store where a client keeps NEW_TOKEN tokens for later
//! connections.
//!
//! A token is stateless: everything the server needs to validate it is inside, sealed with
//! an AEAD (AES-256-GCM from `ring`, already used for packet protection) under a key only the
//! endpoint holds. Layout:
//!
//! ```text
//! kind (1) | nonce (12) | AEAD( issued-at (8) [| ODCID length (1) | ODCID] ) | tag (16)
//! ```
//!
//! The kind byte is in the clear so that a token that fails to open can still be told
//! apart: a bad Retry token closes the connection with INVALID_TOKEN (§8.1.2), a bad
//! NEW_TOKEN token is treated as no token (§8.1.3). What the token is bound to goes into the
//! AEAD's associated data, not the ciphertext: the client address (IP and port for Retry
//! tokens, which come back within one round trip; IP only for NEW_TOKEN tokens, since a
//! client's port changes between connections), and for Retry tokens the connection ID the
//! server chose in the Retry, which the client must use as the DCID of its next Initial.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngCore;
use ring::aead;

use crate::cid::{ConnectionId, MAX_CID_LEN};
use crate::time::Instant;

const KIND_RETRY: u8 = 0x52; // 'R'
const KIND_NEW_TOKEN: u8 = 0x4e; // 'N'
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
/// Longest token we produce: kind, nonce, time, ODCID length and ODCID, tag.
pub const MAX_TOKEN_LEN: usize = 1 + NONCE_LEN + 8 + 1 + MAX_CID_LEN + TAG_LEN;

/// When the server sends Retry packets (RFC 9000 §8.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetryMode {
    /// Never: every Initial that decrypts may create a connection (up to the handshake limits).
    Never,
    /// When the handshakes in progress reach the endpoint's `retry_threshold`: no extra
    /// round trip normally, stateless address validation under load or attack.
    #[default]
    Auto,
    /// Always validate the client's address with a Retry first (one more round trip).
    Always,
}

impl std::str::FromStr for RetryMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "never" | "off" => Ok(RetryMode::Never),
            "auto" => Ok(RetryMode::Auto),
            "always" | "on" => Ok(RetryMode::Always),
            other => Err(format!("unknown retry mode {other:?} (expected never, auto or always)")),
        }
    }
}

impl std::fmt::Display for RetryMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RetryMode::Never => "never",
            RetryMode::Auto => "auto",
            RetryMode::Always => "always",
        })
    }
}

/// What a token in a client Initial turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenCheck {
    /// A valid Retry token: the client's address is validated, and this is the DCID of the
    /// client's first Initial (original_destination_connection_id, RFC 9000 §7.3).
    Retry {
        /// The DCID of the Initial the Retry answered.
        orig_dst_cid: ConnectionId,
    },
    /// A valid NEW_TOKEN token: the client's address is validated.
    NewToken,
    /// A Retry token that failed: wrong address or CID, expired, forged or from another key.
    /// RFC 9000 §8.1.2: close with INVALID_TOKEN.
    InvalidRetry,
    /// Anything else that failed (including NEW_TOKEN tokens of another server or an old key):
    /// RFC 9000 §8.1.3: proceed as if there were no token.
    Ignore,
}

/// Validity periods of tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenLifetimes {
    /// Retry tokens come back within one round trip (RFC 9000 §8.1.3 "SHOULD ... only be
    /// accepted for a short time").
    pub retry: Duration,
    /// NEW_TOKEN tokens are for later connections: longer.
    pub new_token: Duration,
}

impl Default for TokenLifetimes {
    fn default() -> Self {
        Self { retry: Duration::from_secs(10), new_token: Duration::from_secs(24 * 3600) }
    }
}

/// The endpoint's token sealing key.
#[derive(Clone)]
pub struct TokenKey(Arc<aead::LessSafeKey>);

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(..)")
    }
}

impl TokenKey {
    /// A key from 32 secret bytes.
    pub fn new(secret: &[u8; 32]) -> Self {
        let key = aead::UnboundKey::new(&aead::AES_256_GCM, secret).expect("32-byte AES-256 key");
        Self(Arc::new(aead::LessSafeKey::new(key)))
    }

    /// A Retry token for a client at `client` whose Initial had DCID `orig_dst_cid`, answered
    /// by a Retry with source CID `retry_scid`.
    pub fn seal_retry(
        &self,
        rng: &mut dyn RngCore,
        client: SocketAddr,
        orig_dst_cid: &ConnectionId,
        retry_scid: &ConnectionId,
        now: Instant,
    ) -> Vec<u8> {
        let mut plain = Vec::with_capacity(9 + orig_dst_cid.len());
        plain.extend_from_slice(&now.as_nanos().to_be_bytes());
        plain.push(orig_dst_cid.len() as u8);
        plain.extend_from_slice(orig_dst_cid);
        self.seal(rng, KIND_RETRY, &retry_aad(client, retry_scid), plain)
    }

    /// A NEW_TOKEN token for a client at IP address `client`.
    pub fn seal_new_token(&self, rng: &mut dyn RngCore, client: IpAddr, now: Instant) -> Vec<u8> {
        self.seal(rng, KIND_NEW_TOKEN, &new_token_aad(client), now.as_nanos().to_be_bytes().to_vec())
    }

    fn seal(&self, rng: &mut dyn RngCore, kind: u8, aad: &[u8], mut plain: Vec<u8>) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        rng.fill_bytes(&mut nonce);
        let mut full_aad = Vec::with_capacity(1 + aad.len());
        full_aad.push(kind);
        full_aad.extend_from_slice(aad);
        // A random 96-bit nonce per token: collisions are negligible for far more tokens
        // than one key ever seals (the key lives as long as the endpoint).
        self.0
            .seal_in_place_append_tag(aead::Nonce::assume_unique_for_key(nonce), aead::Aad::from(&full_aad), &mut plain)
            .expect("a few bytes cannot exceed the AEAD limit");
        let mut out = Vec::with_capacity(1 + NONCE_LEN + plain.len());
        out.push(kind);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&plain);
        out
    }

    /// Validates the token of a client Initial from `client` whose DCID is `dcid`, at `now`.
    pub fn check(
        &self,
        token: &[u8],
        client: SocketAddr,
        dcid: &ConnectionId,
        now: Instant,
        lifetimes: &TokenLifetimes,
    ) -> TokenCheck {
        let (kind, invalid) = match token.first() {
            Some(&KIND_RETRY) => (KIND_RETRY, TokenCheck::InvalidRetry),
            Some(&KIND_NEW_TOKEN) => (KIND_NEW_TOKEN, TokenCheck::Ignore),
            // Not ours (another server's format): as if absent. A client that returns a Retry
            // token always returns one of our Retry tokens, whose kind byte is intact.
            _ => return TokenCheck::Ignore,
        };
        if token.len() < 1 + NONCE_LEN + 8 + TAG_LEN || token.len() > MAX_TOKEN_LEN {
            return invalid;
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&token[1..1 + NONCE_LEN]);
        let mut aad = vec![kind];
        if kind == KIND_RETRY {
            aad.extend_from_slice(&retry_aad(client, dcid));
        } else {
            aad.extend_from_slice(&new_token_aad(client.ip()));
        }
        let mut sealed = token[1 + NONCE_LEN..].to_vec();
        let Ok(plain) =
            self.0.open_in_place(aead::Nonce::assume_unique_for_key(nonce), aead::Aad::from(&aad), &mut sealed)
        else {
            return invalid;
        };
        let mut t = [0u8; 8];
        t.copy_from_slice(&plain[..8]);
        let issued = Instant::from_nanos(u64::from_be_bytes(t));
        let lifetime = if kind == KIND_RETRY { lifetimes.retry } else { lifetimes.new_token };
        // A token from the future was not sealed by this endpoint's clock: reject it too.
        if issued > now || now.saturating_duration_since(issued) > lifetime {
            return invalid;
        }
        if kind == KIND_NEW_TOKEN {
            return if plain.len() == 8 { TokenCheck::NewToken } else { invalid };
        }
        let odcid = &plain[8..];
        match odcid.split_first() {
            Some((&len, cid)) if usize::from(len) == cid.len() && cid.len() <= MAX_CID_LEN => {
                TokenCheck::Retry { orig_dst_cid: ConnectionId::new(cid) }
            }
            _ => invalid,
        }
    }
}

/// What tells one sealed token from every other: its random nonce (for replay filters).
pub fn token_id(token: &[u8]) -> Option<[u8; NONCE_LEN]> {
    token.get(1..1 + NONCE_LEN).and_then(|n| n.try_into().ok())
}

fn addr_bytes(out: &mut Vec<u8>, ip: IpAddr) {
    // IPv4-mapped IPv6 and IPv4 are the same client: dual-stack sockets report either.
    match ip.to_canonical() {
        IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
        IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
    }
}

fn retry_aad(client: SocketAddr, retry_scid: &ConnectionId) -> Vec<u8> {
    let mut aad = Vec::with_capacity(16 + 2 + 1 + retry_scid.len());
    addr_bytes(&mut aad, client.ip());
    aad.extend_from_slice(&client.port().to_be_bytes());
    aad.push(retry_scid.len() as u8);
    aad.extend_from_slice(retry_scid);
    aad
}

fn new_token_aad(client: IpAddr) -> Vec<u8> {
    let mut aad = Vec::with_capacity(16);
    addr_bytes(&mut aad, client);
    aad
}

/// Most server names a [`TokenStore`] remembers, and tokens per name: a server sending
/// NEW_TOKEN frames without end cannot grow a client's memory.
const STORE_MAX_NAMES: usize = 256;
const STORE_MAX_PER_NAME: usize = 2;

/// Where a client keeps NEW_TOKEN tokens (RFC 9000 §8.1.3), keyed by server name, for its
/// next connections to the same server. Cloning shares the store: a runtime can keep one
/// across endpoints, or read it out with [`TokenStore::export`] to persist it.
#[derive(Clone, Default)]
pub struct TokenStore(Arc<Mutex<HashMap<String, Vec<Vec<u8>>>>>);

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenStore").field("names", &self.lock().len()).finish()
    }
}

impl TokenStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Vec<u8>>>> {
        // A panic while holding the lock leaves a map that is still consistent.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers a token from `server_name` (the newest replace the oldest beyond a few).
    pub fn insert(&self, server_name: &str, token: Vec<u8>) {
        let mut map = self.lock();
        if !map.contains_key(server_name) && map.len() >= STORE_MAX_NAMES {
            // Forget some server to stay bounded; which one matters little.
            if let Some(k) = map.keys().next().cloned() {
                map.remove(&k);
            }
        }
        let v = map.entry(server_name.to_string()).or_default();
        if v.len() >= STORE_MAX_PER_NAME {
            v.remove(0);
        }
        v.push(token);
    }

    /// Takes the newest token for `server_name`. A token is used once: RFC 9000 §8.1.3 says
    /// a client SHOULD NOT reuse one, as that would let observers link its connections.
    pub fn take(&self, server_name: &str) -> Option<Vec<u8>> {
        let mut map = self.lock();
        let v = map.get_mut(server_name)?;
        let t = v.pop();
        if v.is_empty() {
            map.remove(server_name);
        }
        t
    }

    /// Number of tokens held for `server_name`.
    pub fn count(&self, server_name: &str) -> usize {
        self.lock().get(server_name).map_or(0, |v| v.len())
    }

    /// Every token held, by server name (to persist them).
    pub fn export(&self) -> Vec<(String, Vec<u8>)> {
        let map = self.lock();
        map.iter().flat_map(|(k, v)| v.iter().map(move |t| (k.clone(), t.clone()))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rng() -> rand_chacha::ChaCha8Rng {
        rand_chacha::ChaCha8Rng::seed_from_u64(7)
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    const T0: Instant = Instant::from_nanos(5_000_000_000);

    #[test]
    fn retry_token_round_trip_and_binding() {
        let key = TokenKey::new(&[3; 32]);
        let lt = TokenLifetimes::default();
        let odcid = ConnectionId::new(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let scid = ConnectionId::new(&[9; 8]);
        let client = addr("192.0.2.1:4433");
        let tok = key.seal_retry(&mut rng(), client, &odcid, &scid, T0);
        assert!(tok.len() <= MAX_TOKEN_LEN);
        assert_eq!(key.check(&tok, client, &scid, T0, &lt), TokenCheck::Retry { orig_dst_cid: odcid });
        // Another port, another IP, another DCID: all invalid Retry tokens.
        assert_eq!(key.check(&tok, addr("192.0.2.1:4434"), &scid, T0, &lt), TokenCheck::InvalidRetry);
        assert_eq!(key.check(&tok, addr("192.0.2.2:4433"), &scid, T0, &lt), TokenCheck::InvalidRetry);
        assert_eq!(key.check(&tok, client, &odcid, T0, &lt), TokenCheck::InvalidRetry);
        // Another key.
        assert_eq!(TokenKey::new(&[4; 32]).check(&tok, client, &scid, T0, &lt), TokenCheck::InvalidRetry);
    }

    #[test]
    fn retry_token_expires() {
        let key = TokenKey::new(&[3; 32]);
        let lt = TokenLifetimes::default();
        let scid = ConnectionId::new(&[9; 8]);
        let client = addr("[2001:db8::1]:1");
        let tok = key.seal_retry(&mut rng(), client, &ConnectionId::new(&[1; 8]), &scid, T0);
        assert!(matches!(key.check(&tok, client, &scid, T0 + lt.retry, &lt), TokenCheck::Retry { .. }));
        let late = T0 + lt.retry + Duration::from_nanos(1);
        assert_eq!(key.check(&tok, client, &scid, late, &lt), TokenCheck::InvalidRetry);
        // Before it was issued: not from this clock.
        assert_eq!(key.check(&tok, client, &scid, Instant::ZERO, &lt), TokenCheck::InvalidRetry);
    }

    #[test]
    fn tampered_tokens_fail() {
        let key = TokenKey::new(&[3; 32]);
        let lt = TokenLifetimes::default();
        let scid = ConnectionId::new(&[9; 8]);
        let client = addr("192.0.2.1:4433");
        let tok = key.seal_retry(&mut rng(), client, &ConnectionId::new(&[1; 8]), &scid, T0);
        for i in 1..tok.len() {
            let mut t = tok.clone();
            t[i] ^= 0x40;
            assert_eq!(key.check(&t, client, &scid, T0, &lt), TokenCheck::InvalidRetry, "byte {i}");
        }
        // Flipping the kind byte turns it into a NEW_TOKEN-kind token that fails: ignored.
        let mut t = tok.clone();
        t[0] = KIND_NEW_TOKEN;
        assert_eq!(key.check(&t, client, &scid, T0, &lt), TokenCheck::Ignore);
        assert_eq!(key.check(&tok[..20], client, &scid, T0, &lt), TokenCheck::InvalidRetry);
        assert_eq!(key.check(&[], client, &scid, T0, &lt), TokenCheck::Ignore);
        assert_eq!(key.check(&[0xff; 40], client, &scid, T0, &lt), TokenCheck::Ignore);
    }

    #[test]
    fn new_token_binds_ip_not_port_and_lives_longer() {
        let key = TokenKey::new(&[3; 32]);
        let lt = TokenLifetimes::default();
        let any_cid = ConnectionId::new(&[7; 8]);
        let tok = key.seal_new_token(&mut rng(), addr("192.0.2.1:1").ip(), T0);
        let later = T0 + Duration::from_secs(3600);
        assert_eq!(key.check(&tok, addr("192.0.2.1:5555"), &any_cid, later, &lt), TokenCheck::NewToken);
        assert_eq!(key.check(&tok, addr("[::ffff:192.0.2.1]:5"), &any_cid, later, &lt), TokenCheck::NewToken);
        assert_eq!(key.check(&tok, addr("192.0.2.9:1"), &any_cid, later, &lt), TokenCheck::Ignore);
        let expired = T0 + lt.new_token + Duration::from_secs(1);
        assert_eq!(key.check(&tok, addr("192.0.2.1:1"), &any_cid, expired, &lt), TokenCheck::Ignore);
        let mut t = tok.clone();
        t[5] ^= 1;
        assert_eq!(key.check(&t, addr("192.0.2.1:1"), &any_cid, later, &lt), TokenCheck::Ignore);
    }

    #[test]
    fn store_is_bounded_and_single_use() {
        let s = TokenStore::default();
        for i in 0..10u8 {
            s.insert("a", vec![i]);
        }
        assert_eq!(s.count("a"), STORE_MAX_PER_NAME);
        assert_eq!(s.take("a"), Some(vec![9]));
        assert_eq!(s.take("a"), Some(vec![8]));
        assert_eq!(s.take("a"), None);
        for i in 0..(STORE_MAX_NAMES + 10) {
            s.insert(&format!("n{i}"), vec![1]);
        }
        assert_eq!(s.export().len(), STORE_MAX_NAMES);
    }
}
