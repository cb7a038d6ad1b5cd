//! `mpq-proto`: a sans-IO implementation of QUIC v1 (RFC 9000, 9001, 9002) and of the
//! multipath extension (RFC 10069).
//!
//! The crate performs no I/O, reads no clock and draws no ambient randomness: every input
//! carries a [`time::Instant`] and every endpoint is given a seeded RNG. A runtime (the
//! simulator in `mpq-sim`, the UDP event loops in `mpq-io`) feeds datagrams and timeouts in
//! and takes datagrams and events out.

pub mod cc;
pub mod cid;
pub mod coding;
pub mod conn;
pub mod crypto;
pub mod endpoint;
pub mod error;
pub mod frame;
pub mod packet;
pub mod path_manager;
mod prefetch;
pub mod qlog;
pub mod range_set;
pub mod recovery;
pub mod sched;
pub mod stream;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod time;
pub mod token;
pub mod transport_params;
pub mod types;

pub use cid::ConnectionId;
pub use error::{TransportError, TransportErrorCode};
pub use time::Instant;
pub use types::{Dir, Level, Side, SpaceId, StreamId};

pub use packet::version::{VERSION_1, VERSION_2};

/// Smallest maximum datagram size every QUIC path must support (RFC 9000 §14).
pub const MIN_INITIAL_SIZE: usize = 1200;
