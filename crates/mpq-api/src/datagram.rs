//! Unreliable datagrams (RFC 9221) on a connection: queued for a path or for the scheduler,
//! read as they arrive, with their counters. Both ends must enable them
//! (`TransportConfig::datagrams`, `DatagramConfig::enabled()`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use mpq_proto::conn::{Datagram, DatagramStats};

use crate::connection::{gone, Connection};
use crate::Error;

impl Connection {
    /// Queues `data` as one DATAGRAM frame: on path `path`, or (`None`) on whichever path
    /// the scheduler sends new data on next. Never retransmitted; a full queue drops its
    /// oldest datagram (counted in [`Connection::datagram_stats`]). A resumed client in 0-RTT
    /// ([`crate::Connecting::into_0rtt`]) may send them already when the server allowed them
    /// in the connection that gave the ticket (RFC 9221 §3). Refused
    /// ([`Error::Datagram`]) before the handshake otherwise, when the peer does not support
    /// them, for an unknown path, or above [`Connection::max_datagram_size`].
    pub fn send_datagram(&self, data: impl Into<Bytes>, path: Option<u64>) -> Result<(), Error> {
        let data = data.into();
        self.with(|c, _, _| Ok(c.send_datagram(data, path)?))
    }

    /// Queues several datagrams as [`Connection::send_datagram`] does, in order, under one
    /// lock and with one wake of the runtime (a sender of many small datagrams would
    /// otherwise wake it for each). Stops at the first refused: how many were queued, or
    /// the error when the first was refused.
    pub fn send_datagrams(
        &self,
        datagrams: impl IntoIterator<Item = Bytes>,
        path: Option<u64>,
    ) -> Result<usize, Error> {
        self.with(|c, _, _| {
            let mut queued = 0;
            for d in datagrams {
                match c.send_datagram(d, path) {
                    Ok(()) => queued += 1,
                    Err(e) if queued == 0 => return Err(e.into()),
                    Err(_) => break,
                }
            }
            Ok(queued)
        })
    }

    /// Largest datagram payload [`Connection::send_datagram`] accepts now for `path` (`None`:
    /// one that fits every open path); `None` when datagrams cannot be sent (yet).
    pub fn max_datagram_size(&self, path: Option<u64>) -> Result<Option<usize>, Error> {
        self.peek(|c| c.max_datagram_size(path))
    }

    /// The next datagram the peer sent (with the path that carried it), oldest first; waits
    /// for one. Fails once the connection is closed and none is left.
    pub fn read_datagram(&self) -> ReadDatagram {
        ReadDatagram { conn: self.clone() }
    }

    /// Datagrams queued by [`Connection::send_datagram`] and not sent yet: a sender keeps
    /// it below the queue's bound (`DatagramConfig::send_queue_len`), where the oldest are
    /// dropped, to send as fast as the paths allow without losing any in the queue.
    pub fn datagram_send_queue_len(&self) -> Result<usize, Error> {
        self.peek(|c| c.datagram_send_queue_len())
    }

    /// Datagram counters, for the connection and per path.
    pub fn datagram_stats(&self) -> Result<DatagramStats, Error> {
        self.peek(|c| c.datagram_stats())
    }
}

/// The future of [`Connection::read_datagram`].
pub struct ReadDatagram {
    conn: Connection,
}

impl Future for ReadDatagram {
    type Output = Result<Datagram, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `None`: the connection's reads of datagrams answered many in a row, and this one
        // yields instead (`coop.rs`).
        let answer = self.conn.poll_general(cx, |c, st| {
            if st.datagram_reads.yield_now() {
                return Some(None);
            }
            let answer = match c {
                Some(c) => match c.recv_datagram() {
                    Some(d) => Some(Ok(d)),
                    None if st.error.is_some() || st.drained => Some(Err(gone(Some(st)))),
                    None => None,
                },
                None => Some(Err(gone(Some(st)))),
            };
            st.datagram_reads.count(answer.is_some());
            answer.map(Some)
        });
        match answer {
            Poll::Ready(Some(v)) => Poll::Ready(v),
            Poll::Ready(None) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
