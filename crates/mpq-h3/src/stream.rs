//! Streams for h3: a send half that takes one buffer at a time, a receive half that
//! yields chunks, and a bidirectional stream of both.

use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use h3::quic::{self, StreamErrorIncoming, StreamId, WriteBuf};

use crate::errors::{h3_stream_id, stream_error};

/// The most one [`quic::RecvStream::poll_data`] returns: large enough that a bulk download
/// costs few calls, small enough that a stream does not hold much unread memory.
const READ_CHUNK: usize = 64 * 1024;

/// The sending half of a stream, for h3.
pub struct SendStream<B: Buf> {
    stream: mpq_api::SendStream,
    /// What h3 handed over and the stream's send buffer has not taken yet.
    writing: Option<WriteBuf<B>>,
}

impl<B: Buf> std::fmt::Debug for SendStream<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendStream").field("id", &self.stream.id()).field("pending", &self.writing.is_some()).finish()
    }
}

impl<B: Buf> SendStream<B> {
    pub(crate) fn new(stream: mpq_api::SendStream) -> Self {
        Self { stream, writing: None }
    }

    /// Moves what is pending into the stream's send buffer, waiting for room.
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        if let Some(data) = &mut self.writing {
            while data.has_remaining() {
                let n = ready!(self.stream.poll_write(cx, data.chunk())).map_err(stream_error)?;
                data.advance(n);
            }
        }
        self.writing = None;
        Poll::Ready(Ok(()))
    }
}

impl<B: Buf> quic::SendStream<B> for SendStream<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.poll_flush(cx)
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        if self.writing.is_some() {
            // h3 calls `poll_ready` until it is ready before sending more: this is a bug in
            // the caller, reported as h3's internal error (the connection closes with
            // H3_INTERNAL_ERROR) rather than a panic.
            return Err(StreamErrorIncoming::ConnectionErrorIncoming {
                connection_error: quic::ConnectionErrorIncoming::InternalError(
                    "send_data called before the previous data was taken".into(),
                ),
            });
        }
        self.writing = Some(data.into());
        Ok(())
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        // What is still pending goes before the FIN.
        ready!(self.poll_flush(cx))?;
        Poll::Ready(self.stream.finish().map_err(stream_error))
    }

    fn reset(&mut self, reset_code: u64) {
        self.writing = None;
        // (A stream already reset, finished and acknowledged, or on a closed connection has
        // nothing left to reset.)
        let _ = self.stream.reset(reset_code);
    }

    fn send_id(&self) -> StreamId {
        h3_stream_id(self.stream.id())
    }
}

impl<B: Buf> quic::SendStreamUnframed<B> for SendStream<B> {
    fn poll_send<D: Buf>(&mut self, cx: &mut Context<'_>, buf: &mut D) -> Poll<Result<usize, StreamErrorIncoming>> {
        // Framed data handed over earlier goes first, in order.
        ready!(self.poll_flush(cx))?;
        let n = ready!(self.stream.poll_write(cx, buf.chunk())).map_err(stream_error)?;
        buf.advance(n);
        Poll::Ready(Ok(n))
    }
}

/// The receiving half of a stream, for h3.
#[derive(Debug)]
pub struct RecvStream {
    stream: mpq_api::RecvStream,
    /// Reused between reads; each chunk returned is split off it.
    buf: BytesMut,
}

impl RecvStream {
    pub(crate) fn new(stream: mpq_api::RecvStream) -> Self {
        Self { stream, buf: BytesMut::new() }
    }
}

impl quic::RecvStream for RecvStream {
    type Buf = Bytes;

    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.buf.resize(READ_CHUNK, 0);
        let r = ready!(self.stream.poll_read(cx, &mut self.buf)).map_err(stream_error)?;
        Poll::Ready(Ok(r.map(|n| self.buf.split_to(n).freeze())))
    }

    fn stop_sending(&mut self, error_code: u64) {
        // (A stream already read to its end or reset has nothing left to stop.)
        let _ = self.stream.stop(error_code);
    }

    fn recv_id(&self) -> StreamId {
        h3_stream_id(self.stream.id())
    }
}

/// A bidirectional stream (a request), for h3.
#[derive(Debug)]
pub struct BidiStream<B: Buf> {
    send: SendStream<B>,
    recv: RecvStream,
}

impl<B: Buf> BidiStream<B> {
    pub(crate) fn new((send, recv): (mpq_api::SendStream, mpq_api::RecvStream)) -> Self {
        Self { send: SendStream::new(send), recv: RecvStream::new(recv) }
    }
}

impl<B: Buf> quic::BidiStream<B> for BidiStream<B> {
    type SendStream = SendStream<B>;
    type RecvStream = RecvStream;

    fn split(self) -> (SendStream<B>, RecvStream) {
        (self.send, self.recv)
    }
}

impl<B: Buf> quic::SendStream<B> for BidiStream<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.send.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_finish(cx)
    }

    fn reset(&mut self, reset_code: u64) {
        self.send.reset(reset_code)
    }

    fn send_id(&self) -> StreamId {
        self.send.send_id()
    }
}

impl<B: Buf> quic::SendStreamUnframed<B> for BidiStream<B> {
    fn poll_send<D: Buf>(&mut self, cx: &mut Context<'_>, buf: &mut D) -> Poll<Result<usize, StreamErrorIncoming>> {
        self.send.poll_send(cx, buf)
    }
}

impl<B: Buf> quic::RecvStream for BidiStream<B> {
    type Buf = Bytes;

    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.recv.poll_data(cx)
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.recv.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.recv.recv_id()
    }
}
