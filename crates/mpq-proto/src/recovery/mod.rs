//! Loss recovery (RFC 9002): RTT estimation, ACK generation state, the sent-packet ledger
//! with loss detection, and pacing. All of it is per path and per packet number space, with
//! no reference to connection-wide state, so a path can live on its own thread.

pub mod delivery;
pub mod ecn;
pub mod loss;
pub mod pacer;
pub mod pmtud;
pub mod received;
pub mod rtt;
pub mod sent;

/// Timer granularity assumed by loss detection (RFC 9002 §6.1.2: 1 ms).
pub const GRANULARITY: std::time::Duration = std::time::Duration::from_millis(1);
