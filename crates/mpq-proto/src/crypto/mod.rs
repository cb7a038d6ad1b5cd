//! The crypto adapter over rustls's QUIC API: Initial keys, the TLS handshake driver, 1-RTT
//! key updates, and a null cipher for simulations.
//!
//! Everything that touches rustls's QUIC types lives here and in [`crate::packet::protect`],
//! so that moving to rustls 0.24 (where the packet calls take `path_id: Option<u32>`)
//! touches few places.

/// rustls's crypto provider module for the whole stack (the `aws-lc-rs` feature, default):
/// `backend::default_provider()` and `backend::cipher_suite::*`. Measured on the development
/// machine (Xeon with AVX-512 and VAES, rustls 0.23.46, 1452-byte packets, medians of 9
/// interleaved runs): AES-128-GCM seal + open 346 ns with aws-lc-rs 1.19 against 404 ns with
/// ring 0.17.14; ChaCha20-Poly1305 a tie. Both keep rustls's multipath nonce API
/// (`encrypt_in_place_for_path`). ring stays the crate for our own primitives (Retry
/// integrity tag, reset tokens, address tokens).
#[cfg(feature = "aws-lc-rs")]
pub use rustls::crypto::aws_lc_rs as backend;
/// rustls's crypto provider module for the whole stack: ring (the `aws-lc-rs` feature is off).
#[cfg(not(feature = "aws-lc-rs"))]
pub use rustls::crypto::ring as backend;

pub mod client_hello;
pub mod initial;
pub mod key_update;
pub mod null;
pub mod session;
pub mod version_keys;

pub use initial::initial_keys;
pub use key_update::{OneRttKeys, RemoteKeyChoice};
pub use null::{insecure_null_keys, null_header_key, null_packet_key};
pub use session::TlsSession;

/// Converts our [`Side`](crate::Side) into rustls's.
pub(crate) fn rustls_side(side: crate::Side) -> rustls::Side {
    match side {
        crate::Side::Client => rustls::Side::Client,
        crate::Side::Server => rustls::Side::Server,
    }
}

#[cfg(test)]
mod tests;
