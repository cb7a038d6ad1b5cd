//! HTTP/3 (RFC 9114) over mpq: the QUIC traits of the [`h3`] crate (`h3::quic`)
//! implemented on [`mpq_api`]'s connections and streams, so that `h3::client` and
//! `h3::server` run on mpq — over one path or several (RFC 10069), in any of mpq-api's
//! runtimes, on any executor (the futures are woken by mpq's runtime).
//!
//! ```no_run
//! # async fn demo(conn: mpq_api::Connection) -> Result<(), Box<dyn std::error::Error>> {
//! let (mut driver, mut send_request) = h3::client::new(mpq_h3::Connection::new(conn)).await?;
//! let request = http::Request::get("https://example.org/index.html").body(())?;
//! let mut stream = send_request.send_request(request).await?;
//! stream.finish().await?;
//! let response = stream.recv_response().await?;
//! # let _ = (&mut driver, response); Ok(()) }
//! ```
//!
//! The connection must have been made with ALPN `h3` (RFC 9114 §3.1).

mod connection;
mod errors;
mod stream;

pub use connection::{Connection, Opener};
pub use stream::{BidiStream, RecvStream, SendStream};

/// The ALPN protocol ID of HTTP/3 (RFC 9114 §3.1).
pub const ALPN: &[u8] = b"h3";

#[cfg(test)]
mod tests;
