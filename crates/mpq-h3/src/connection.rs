//! A connection for h3: accepting the peer's streams and opening ours.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Buf;
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming};

use crate::errors::{connection_error, stream_error};
use crate::stream::{BidiStream, RecvStream, SendStream};

/// An mpq connection as h3's [`quic::Connection`]: give it to `h3::client::new` or
/// `h3::server::builder().build`. It is a handle: the connection stays reachable through
/// the [`mpq_api::Connection`] it was made from (paths, statistics, close).
#[derive(Debug, Clone)]
pub struct Connection {
    conn: mpq_api::Connection,
}

impl Connection {
    /// Wraps a connection established with ALPN [`crate::ALPN`].
    pub fn new(conn: mpq_api::Connection) -> Self {
        Self { conn }
    }

    /// The mpq connection.
    pub fn inner(&self) -> &mpq_api::Connection {
        &self.conn
    }
}

/// Polls a future made afresh for this poll. mpq-api's accept and open futures hold no
/// state of their own (each poll looks at the connection and registers the waker), so a
/// new one per poll is the same as keeping one.
fn poll_once<F: Future + Unpin>(mut f: F, cx: &mut Context<'_>) -> Poll<F::Output> {
    Pin::new(&mut f).poll(cx)
}

impl<B: Buf> quic::Connection<B> for Connection {
    type RecvStream = RecvStream;
    type OpenStreams = Opener;

    fn poll_accept_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<RecvStream, ConnectionErrorIncoming>> {
        poll_once(self.conn.accept_uni(), cx).map(|r| r.map(RecvStream::new).map_err(connection_error))
    }

    fn poll_accept_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<BidiStream<B>, ConnectionErrorIncoming>> {
        poll_once(self.conn.accept_bi(), cx).map(|r| r.map(BidiStream::new).map_err(connection_error))
    }

    fn opener(&self) -> Opener {
        Opener { conn: self.conn.clone() }
    }
}

impl<B: Buf> quic::OpenStreams<B> for Connection {
    type BidiStream = BidiStream<B>;
    type SendStream = SendStream<B>;

    fn poll_open_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<BidiStream<B>, StreamErrorIncoming>> {
        open_bidi(&self.conn, cx)
    }

    fn poll_open_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<SendStream<B>, StreamErrorIncoming>> {
        open_send(&self.conn, cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        self.conn.close(code.value(), reason);
    }
}

/// Opens streams on a connection (h3 keeps one per request sender).
#[derive(Debug, Clone)]
pub struct Opener {
    conn: mpq_api::Connection,
}

impl<B: Buf> quic::OpenStreams<B> for Opener {
    type BidiStream = BidiStream<B>;
    type SendStream = SendStream<B>;

    fn poll_open_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<BidiStream<B>, StreamErrorIncoming>> {
        open_bidi(&self.conn, cx)
    }

    fn poll_open_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<SendStream<B>, StreamErrorIncoming>> {
        open_send(&self.conn, cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        self.conn.close(code.value(), reason);
    }
}

fn open_bidi<B: Buf>(
    conn: &mpq_api::Connection,
    cx: &mut Context<'_>,
) -> Poll<Result<BidiStream<B>, StreamErrorIncoming>> {
    poll_once(conn.open_bi(), cx).map(|r| r.map(BidiStream::new).map_err(stream_error))
}

fn open_send<B: Buf>(
    conn: &mpq_api::Connection,
    cx: &mut Context<'_>,
) -> Poll<Result<SendStream<B>, StreamErrorIncoming>> {
    poll_once(conn.open_uni(), cx).map(|r| r.map(SendStream::new).map_err(stream_error))
}
