//! Stream handles: the sending and the receiving half of a stream, each usable from any
//! thread, with futures for what waits (room in the send buffer, data to read).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use mpq_proto::stream::StreamError;
use mpq_proto::StreamId;

use crate::connection::Connection;
use crate::coop::Budget;
use crate::driver::register;
use crate::Error;

/// The sending half of a stream.
#[derive(Debug)]
pub struct SendStream {
    conn: Connection,
    id: StreamId,
    /// Writes answered in a row without waiting (the handle yields now and then: `coop.rs`).
    budget: Budget,
}

/// Most bytes a read takes from the connection at once (see [`RecvStream`]).
const READ_AHEAD: usize = 256 * 1024;

/// The receiving half of a stream.
///
/// A read takes what arrived from the connection in one go, up to 256 KiB, and
/// hands it out from the handle: the chunks are the packets' own buffers (no copy), and a
/// reader that works a packet's worth at a time takes the connection's lock once per batch
/// instead of once per packet, while the runtime's threads wait for it.
#[derive(Debug)]
pub struct RecvStream {
    conn: Connection,
    id: StreamId,
    /// The end of the stream was read.
    done: bool,
    /// Data taken from the connection and not yet read, in order.
    ahead: VecDeque<Bytes>,
    /// What comes after `ahead`: the stream's end, or the error the connection answered.
    after: Option<Result<(), Error>>,
    /// Reads answered in a row without waiting (the handle yields now and then: `coop.rs`).
    budget: Budget,
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
    let (c, st) = match conn.parts(&mut g) {
        (Some(c), Some(st)) => (c, st),
        // Drained and gone, its state may still say why it closed (a reader that came
        // after the drain was told only "gone").
        (_, st) => return Poll::Ready(Err(crate::connection::gone(st.map(|s| &*s)))),
    };
    if let Some(e) = &st.error {
        return Poll::Ready(Err(Error::Closed(e.clone())));
    }
    // The runtime is woken (when the guard goes) only if this call gave it something to
    // send: a reader that takes a chunk per packet would otherwise wake it for every one.
    let released = crate::connection::release_first_flight(c);
    let before = c.streams_want_to_send();
    let result = f(c);
    let quiet = !released && (before || !c.streams_want_to_send());
    let outcome = match result {
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
    };
    if quiet {
        g.quiet();
    }
    outcome
}

impl SendStream {
    pub(crate) fn new(conn: Connection, id: StreamId) -> Self {
        Self { conn, id, budget: Budget::default() }
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
        let id = self.id;
        self.poll_send(cx, |c| match c.write(id, buf) {
            Ok(0) => Err(StreamError::Blocked),
            r => r,
        })
    }

    /// Hands a prefix of `data` to the stream without copying it (the stream keeps a
    /// reference until the peer acknowledged it), waiting while the send buffer is full (or
    /// flow control leaves no room); returns how many bytes were taken.
    pub fn poll_write_bytes(&mut self, cx: &mut Context<'_>, data: &Bytes) -> Poll<Result<usize, Error>> {
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let id = self.id;
        self.poll_send(cx, |c| match c.write_bytes(id, data) {
            Ok(0) => Err(StreamError::Blocked),
            r => r,
        })
    }

    /// A write's poll: `f` on the connection (`Blocked`: wait for room), the handle's
    /// budget spent by each answer (it yields now and then: `coop.rs`).
    fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        f: impl FnOnce(&mut mpq_proto::conn::Connection) -> Result<usize, StreamError>,
    ) -> Poll<Result<usize, Error>> {
        std::task::ready!(self.budget.poll_proceed(cx));
        let answer = poll_stream(&self.conn, self.id, Half::Send, cx, f);
        self.budget.spent(answer)
    }

    /// Writes all of `data` without copying it (see [`SendStream::poll_write_bytes`]),
    /// waiting for room as needed.
    pub fn write_chunk(&mut self, data: Bytes) -> WriteChunk<'_> {
        WriteChunk { stream: self, data }
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
        Self { conn, id, done: false, ahead: VecDeque::new(), after: None, budget: Budget::default() }
    }

    /// The stream's ID.
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// Reads what arrived into `buf`, waiting while nothing has; `Ok(None)` at the end of
    /// the stream.
    pub fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<Result<Option<usize>, Error>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(Some(0)));
        }
        match self.poll_ahead(cx) {
            Poll::Ready(Ok(true)) => {}
            Poll::Ready(Ok(false)) => return Poll::Ready(Ok(None)),
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        let mut n = 0;
        while n < buf.len() {
            let Some(chunk) = self.ahead.front_mut() else { break };
            let k = chunk.len().min(buf.len() - n);
            buf[n..n + k].copy_from_slice(&chunk[..k]);
            n += k;
            if k == chunk.len() {
                self.ahead.pop_front();
            } else {
                chunk.advance(k);
            }
        }
        Poll::Ready(Ok(Some(n)))
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
        if max == 0 {
            return Poll::Ready(Ok(Some(Bytes::new())));
        }
        match self.poll_ahead(cx) {
            Poll::Ready(Ok(true)) => {}
            Poll::Ready(Ok(false)) => return Poll::Ready(Ok(None)),
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        let chunk = self.ahead.front_mut().expect("poll_ahead answered data");
        if chunk.len() > max {
            return Poll::Ready(Ok(Some(chunk.split_to(max))));
        }
        Poll::Ready(Ok(self.ahead.pop_front()))
    }

    /// Makes sure data waits in `ahead`, taking what arrived from the connection (up to
    /// [`READ_AHEAD`] bytes) if none does: `Ok(true)` when some waits, `Ok(false)` at the
    /// end of the stream (which it then marks read), the error that comes after the data
    /// taken, or `Pending` with the waker registered.
    fn poll_ahead(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool, Error>> {
        // The handle's budget, spent by each read's answer (it yields now and then: `coop.rs`).
        std::task::ready!(self.budget.poll_proceed(cx));
        let answer = self.fill_ahead(cx);
        self.budget.spent(answer)
    }

    /// [`RecvStream::poll_ahead`] but for the budget.
    fn fill_ahead(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool, Error>> {
        if !self.ahead.is_empty() {
            return Poll::Ready(Ok(true));
        }
        if self.done {
            return Poll::Ready(Ok(false));
        }
        match self.after.take() {
            Some(Ok(())) => {
                self.done = true;
                return Poll::Ready(Ok(false));
            }
            // (Not marked read: the next call asks the connection again, as without data.)
            Some(Err(e)) => return Poll::Ready(Err(e)),
            None => {}
        }
        let (id, ahead) = (self.id, &mut self.ahead);
        let r = poll_stream(&self.conn, id, Half::Recv, cx, |c| {
            let mut taken = 0;
            loop {
                match c.read_chunk(id, READ_AHEAD - taken) {
                    Ok((o, chunk)) => {
                        if let Some(chunk) = chunk.filter(|c| !c.is_empty()) {
                            taken += chunk.len();
                            ahead.push_back(chunk);
                        }
                        if o.fin {
                            return Ok(Some(Ok(())));
                        }
                        if o.len == 0 || taken >= READ_AHEAD {
                            return if taken == 0 { Err(StreamError::Blocked) } else { Ok(None) };
                        }
                    }
                    // Data taken before the error is read first.
                    Err(e) if taken > 0 && e != StreamError::Blocked => return Ok(Some(Err(Error::Stream(e)))),
                    Err(StreamError::Blocked) if taken > 0 => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
        });
        match r {
            Poll::Ready(Ok(after)) => {
                self.after = after;
                self.fill_ahead(cx)
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
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
        self.conn.with(|c, _, _| Ok(c.stop_sending(id, error_code)?))?;
        // What was taken ahead is discarded with the rest.
        self.ahead.clear();
        self.after = None;
        Ok(())
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

/// The future of [`SendStream::write_chunk`].
pub struct WriteChunk<'a> {
    stream: &'a mut SendStream,
    data: Bytes,
}

impl Future for WriteChunk<'_> {
    type Output = Result<(), Error>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        while !this.data.is_empty() {
            match this.stream.poll_write_bytes(cx, &this.data) {
                Poll::Ready(Ok(n)) => this.data.advance(n),
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
