//! The crypto adapter over rustls's QUIC API: Initial keys, the TLS handshake driver, 1-RTT
//! key updates, and a null cipher for simulations.
//!
//! Everything that touches rustls's QUIC types lives here and in [`crate::packet::protect`],
//! so that moving to rustls 0.24 (where the packet calls take `path_id: Option<u32>`)
//! touches few places.

pub mod initial;
pub mod key_update;
pub mod null;
pub mod session;

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
