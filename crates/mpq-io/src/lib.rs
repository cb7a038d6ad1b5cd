//! UDP I/O through quinn-udp (GSO send, recvmmsg + GRO receive, ECN) and a single-thread
//! event loop that drives a sans-IO [`Driver`] with real time, and a runtime with a thread
//! per path ([`path_threads::PathThreads`]), and the shard runtime ([`shards::Shards`]: N
//! independent endpoints, a thread each).
//!
//! The runtimes own the sockets and the clock; the protocol code only sees datagrams, an
//! [`mpq_proto::Instant`] and timers.

pub mod address_watch;
mod clock;
mod endpoint_app;
mod event_loop;
pub mod path_threads;
pub mod shards;
mod socket;
pub mod spin_lock;

pub use clock::Clock;
pub use endpoint_app::EndpointApp;
pub use event_loop::{Driver, EventLoop, LoopStats};
/// What a [`Driver`] hands the loop to send: the protocol core's transmit, as is.
pub use mpq_proto::conn::Transmit;
pub use path_threads::thread_cpu_time;
pub use socket::UdpSocket;
