//! Stream handles: the sending and the receiving half of a stream, each usable from any
//! thread, with futures for what waits (room in the send buffer, data to read).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use mpq_proto::stream::StreamError;
use mpq_proto::StreamId;

use crate::connection::Connection;
use crate::driver::register;
use crate::Error;

/// The sending half of a stream.
#[derive(Debug)]
pub struct SendStream {
    conn: Connection,
    id: StreamId,
}

/// The receiving half of a stream.
#[derive(Debug)]
pub struct RecvStream {
    conn: Connection,
    id: StreamId,
    /// The end of the stream was read.
    done: bool,
}

/// Which of a stream's waker lists a pending call registers in.
enum Half {
    Send,
    Recv,
}

/// Runs `f` on the connection under the lock; if it answers `Blocked`, registers the waker
/// for the stream's half and returns `Pending`.
fn poll_stream<T>(
    conn: &Connection,
    id: StreamId,
    half: Half,
    cx: &mut Context<'_>,
    f: impl FnOnce(&mut mpq_proto::conn::Connection) -> Result<T, StreamError>,
) -> Poll<Result<T, Error>> {
    let inner = conn.inner().clone();
    let mut g = match inner.lock() {
        Ok(g) => g,
        Err(e) => return Poll::Ready(Err(e)),
    };
    let (c, st) = conn.parts(&mut g);
    let (Some(c), Some(st)) = (c, st) else {
        return Poll::Ready(Err(Error::Gone));
    };
    if let Some(e) = &st.error {
        return Poll::Ready(Err(Error::Closed(e.clone())));
    }
    crate::connection::release_first_flight(c);
    match f(c) {
        Err(StreamError::Blocked) => {
            let list = match half {
                Half::Send => st.writable.entry(id).or_default(),
                Half::Recv => st.readable.entry(id).or_default(),
            };
            register(list, cx.waker());
            Poll::Pending
        }
        Ok(v) => Poll::Ready(Ok(v)),
        Err(e) => Poll::Ready(Err(Error::Stream(e))),
    }
}

impl SendStream {
    pub(crate) fn new(conn: Connection, id: StreamId) -> Self {
        Self { conn, id }
    }

    /// The stream's ID.
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// Writes some of `buf` into the stream's send buffer, waiting while it is full (or flow
    /// control leaves no room); returns how many bytes were taken.
    pub fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<Result<usize, Error>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        poll_stream(&self.conn, self.id, Half::Send, cx, |c| match c.write(self.id, buf) {
            Ok(0) => Err(StreamError::Blocked),
            r => r,
        })
    }

    /// [`SendStream::poll_write`] as a future.
    pub fn write<'a>(&'a mut self, buf: &'a [u8]) -> Write<'a> {
        Write { stream: self, buf }
    }

    /// Writes all of `buf`, waiting for room as needed.
    pub fn write_all<'a>(&'a mut self, buf: &'a [u8]) -> WriteAll<'a> {
        WriteAll { stream: self, buf }
    }

    /// Ends the stream (FIN) after what was written.
    pub fn finish(&mut self) -> Result<(), Error> {
        let id = self.id;
        self.conn.with(|c, _, _| Ok(c.finish(id)?))
    }

    /// Abandons the stream (RESET_STREAM with `error_code`).
    pub fn reset(&mut self, error_code: u64) -> Result<(), Error> {
        let id = self.id;
        self.conn.with(|c, _, _| Ok(c.reset_stream(id, error_code)?))
    }
}

impl RecvStream {
    pub(crate) fn new(conn: Connection, id: StreamId) -> Self {
        Self { conn, id, done: false }
    }

    /// The stream's ID.
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// Reads what arrived into `buf`, waiting while nothing has; `Ok(None)` at the end of
    /// the stream.
    pub fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<Result<Option<usize>, Error>> {
        if self.done {
            return Poll::Ready(Ok(None));
        }
        let id = self.id;
        let r = poll_stream(&self.conn, id, Half::Recv, cx, |c| match c.read(id, buf) {
            Ok(o) if o.len == 0 && !o.fin => Err(StreamError::Blocked),
            r => r,
        });
        r.map(|r| {
            r.map(|o| {
                if o.fin {
                    self.done = true;
                }
                (o.len > 0 || !o.fin).then_some(o.len)
            })
        })
    }

    /// [`RecvStream::poll_read`] as a future.
    pub fn read<'a>(&'a mut self, buf: &'a mut [u8]) -> Read<'a> {
        Read { stream: self, buf }
    }

    /// Takes up to `max` bytes that arrived, in order, as one buffer, waiting while nothing
    /// has; `Ok(None)` at the end of the stream. The buffer is the one the bytes were copied
    /// into when their packet was opened (no copy here while the stream holds its data as
    /// chunks), so the application works on it without holding the connection: with a thread
    /// per path, the path threads go on receiving meanwhile.
    pub fn poll_read_chunk(&mut self, cx: &mut Context<'_>, max: usize) -> Poll<Result<Option<Bytes>, Error>> {
        if self.done {
            return Poll::Ready(Ok(None));
        }
        let id = self.id;
        let r = poll_stream(&self.conn, id, Half::Recv, cx, |c| match c.read_chunk(id, max) {
            Ok((o, None)) if !o.fin => Err(StreamError::Blocked),
            r => r,
        });
        r.map(|r| {
            r.map(|(o, chunk)| {
                if o.fin {
                    self.done = true;
                }
                chunk.filter(|c| !c.is_empty())
            })
        })
    }

    /// [`RecvStream::poll_read_chunk`] as a future.
    pub fn read_chunk(&mut self, max: usize) -> ReadChunk<'_> {
        ReadChunk { stream: self, max }
    }

    /// Reads the whole stream, up to `limit` bytes (more is an error).
    pub fn read_to_end(&mut self, limit: usize) -> ReadToEnd<'_> {
        ReadToEnd { stream: self, out: Vec::new(), limit }
    }

    /// Asks the peer to stop sending (STOP_SENDING with `error_code`).
    pub fn stop(&mut self, error_code: u64) -> Result<(), Error> {
        let id = self.id;
        self.conn.with(|c, _, _| Ok(c.stop_sending(id, error_code)?))
    }
}

/// The future of [`SendStream::write`].
pub struct Write<'a> {
    stream: &'a mut SendStream,
    buf: &'a [u8],
}

impl Future for Write<'_> {
    type Output = Result<usize, Error>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.stream.poll_write(cx, this.buf)
    }
}

/// The future of [`SendStream::write_all`].
pub struct WriteAll<'a> {
    stream: &'a mut SendStream,
    buf: &'a [u8],
}

impl Future for WriteAll<'_> {
    type Output = Result<(), Error>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        while !this.buf.is_empty() {
            match this.stream.poll_write(cx, this.buf) {
                Poll::Ready(Ok(n)) => this.buf = &this.buf[n..],
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// The future of [`RecvStream::read`].
pub struct Read<'a> {
    stream: &'a mut RecvStream,
    buf: &'a mut [u8],
}

impl Future for Read<'_> {
    type Output = Result<Option<usize>, Error>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.stream.poll_read(cx, this.buf)
    }
}

/// The future of [`RecvStream::read_chunk`].
pub struct ReadChunk<'a> {
    stream: &'a mut RecvStream,
    max: usize,
}

impl Future for ReadChunk<'_> {
    type Output = Result<Option<Bytes>, Error>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let max = this.max;
        this.stream.poll_read_chunk(cx, max)
    }
}

/// The future of [`RecvStream::read_to_end`].
pub struct ReadToEnd<'a> {
    stream: &'a mut RecvStream,
    out: Vec<u8>,
    limit: usize,
}

impl Future for ReadToEnd<'_> {
    type Output = Result<Vec<u8>, Error>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match this.stream.poll_read(cx, &mut chunk) {
                Poll::Ready(Ok(Some(n))) => {
                    if this.out.len() + n > this.limit {
                        return Poll::Ready(Err(Error::TooLong(this.limit)));
                    }
                    this.out.extend_from_slice(&chunk[..n]);
                }
                Poll::Ready(Ok(None)) => return Poll::Ready(Ok(std::mem::take(&mut this.out))),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(feature = "tokio")]
mod tokio_io {
    //! tokio's `AsyncRead` / `AsyncWrite` over the streams' polls.

    use std::io;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::{RecvStream, SendStream};

    fn io_error(e: crate::Error) -> io::Error {
        io::Error::other(e)
    }

    impl tokio::io::AsyncRead for RecvStream {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            match RecvStream::poll_read(this, cx, buf.initialize_unfilled()) {
                Poll::Ready(Ok(Some(n))) => {
                    buf.advance(n);
                    Poll::Ready(Ok(()))
                }
                Poll::Ready(Ok(None)) => Poll::Ready(Ok(())),
                Poll::Ready(Err(e)) => Poll::Ready(Err(io_error(e))),
                Poll::Pending => Poll::Pending,
            }
        }
    }

    impl tokio::io::AsyncWrite for SendStream {
        fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            SendStream::poll_write(self.get_mut(), cx, buf).map_err(io_error)
        }

        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            // What is written is the runtime's to send; nothing waits in the handle.
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(self.get_mut().finish().map_err(io_error))
        }
    }
}
