//! mpq's application API: an [`Endpoint`] that connects and accepts, [`Connection`]s with
//! their paths, and [`SendStream`] / [`RecvStream`] handles. Every handle may be cloned or
//! moved to any thread. Every call that waits returns a future that any executor can drive
//! (they are woken by the runtime, not by a particular async runtime); [`Wait::wait`] drives
//! one on the calling thread, for blocking programs. With the `tokio` feature the streams
//! implement tokio's `AsyncRead` and `AsyncWrite`. A stream handle, and a connection's
//! datagram reads, answer `Pending` once (waking their task at once) after 64 answers in a
//! row that did not wait, as tokio's own resources do: a task reading data that is always
//! there cannot starve the other tasks of its executor thread.
//!
//! The endpoint runs the protocol (`mpq-proto`) in the runtime chosen by [`Options`]: one
//! thread for everything, or a thread per path (`mpq_io::path_threads`, docs/runtimes.md).
//! The application's calls take the same lock as the runtime's threads, do their work on
//! the connection and wake the runtime when they gave it something to send.
//!
//! Moving much data: write with [`SendStream::write_chunk`] (no copy) and read with
//! [`RecvStream::read_chunk`] (the packets' own buffers); build the program with an
//! allocator that keeps freed memory for reuse across threads (mimalloc, jemalloc), as the
//! `mpq` tool does: the application's thread allocates stream buffers that the runtime's
//! thread frees, and glibc's allocator answered that by shrinking and regrowing its heap
//! (page faults) for every buffer.
//!
//! ```no_run
//! use mpq_api::{Endpoint, Options, Wait};
//! # fn demo(client: mpq_api::ClientConfig) -> Result<(), mpq_api::Error> {
//! let ep = Endpoint::client(&["0.0.0.0:0".parse().unwrap()], Options::default())?;
//! let conn = ep.connect("192.0.2.1:4433".parse().unwrap(), "example.org", &client)?.wait()?;
//! let (mut send, mut recv) = conn.open_bi().wait()?;
//! send.write_all(b"hello").wait()?;
//! send.finish()?;
//! let reply = recv.read_to_end(1 << 20).wait()?;
//! # Ok(()) }
//! ```

mod block;
mod connection;
mod coop;
mod datagram;
mod driver;
mod due;
mod endpoint;
mod error;
mod stream;

pub use block::Wait;
pub use connection::{Connecting, Connection, FinalReport};
pub use datagram::ReadDatagram;
pub use endpoint::{Endpoint, Options, Threads};
pub use error::Error;
pub use stream::{RecvStream, SendStream};

/// How many threads the paths get in the per-path runtime ([`Options::path_threads`]).
pub use mpq_io::path_threads::PathThreadLimit;
/// Per-thread figures of a runtime.
pub use mpq_io::path_threads::ThreadReport;
/// The protocol's configuration and statistics types, as the API takes and returns them.
pub use mpq_proto::conn::{
    ClientConfig, ConnectionError, ConnectionStats, Datagram, DatagramConfig, DatagramCounters, DatagramError,
    DatagramStats, HandshakeInfo, PathEvent, PathStats, PathStatus, ServerConfig, TransportConfig, ZeroRttState,
};
/// A client's path manager: which address pairs carry paths ([`Connection::set_path_manager`]).
pub use mpq_proto::path_manager::{PathManagerConfig, PathMode};
/// Stream identifiers and directions.
pub use mpq_proto::{Dir, StreamId};

#[cfg(test)]
mod tests_failure;
#[cfg(test)]
mod tests_zero_rtt;
