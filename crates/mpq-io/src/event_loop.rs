//! The single-thread event loop: wait for readiness or the next timer, receive batches,
//! hand datagrams to the driver, send what it produces, fire timers.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::time::Duration;

use mio::{Events, Interest, Poll, Token};
use quinn_udp::RecvMeta;

use crate::{Clock, UdpSocket};

/// One datagram or GSO batch the driver wants sent.
#[derive(Debug, Clone, Copy)]
pub struct Transmit {
    /// Destination.
    pub destination: SocketAddr,
    /// Local address to send from; `None`: the loop's first socket.
    pub source: Option<SocketAddr>,
    /// Bytes in the buffer.
    pub size: usize,
    /// Segment size when the buffer holds several datagrams.
    pub segment_size: Option<usize>,
    /// ECN codepoint.
    pub ecn: Option<u8>,
}

/// What the event loop drives (a QUIC endpoint plus its application).
pub trait Driver {
    /// A datagram from `remote` arrived at the local address `local` (decrypted in place by
    /// the protocol code).
    fn handle_datagram(
        &mut self,
        now: mpq_proto::Instant,
        local: SocketAddr,
        remote: SocketAddr,
        ecn: Option<u8>,
        data: &mut [u8],
    );
    /// Timers due at or before `now`.
    fn handle_timeout(&mut self, now: mpq_proto::Instant);
    /// Earliest timer.
    fn poll_timeout(&mut self) -> Option<mpq_proto::Instant>;
    /// Next datagram or GSO batch, written into `buf`.
    fn poll_transmit(&mut self, now: mpq_proto::Instant, buf: &mut Vec<u8>) -> Option<Transmit>;
    /// Application work after each round of I/O; `Break` stops the loop.
    fn on_wake(&mut self, now: mpq_proto::Instant) -> ControlFlow<()>;
}

/// Counters of the loop, for the perf tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoopStats {
    /// Datagrams received.
    pub rx_datagrams: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// sendmsg calls.
    pub tx_calls: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// recvmmsg calls that returned data.
    pub rx_calls: u64,
}

/// Size of one receive buffer: a full GRO batch.
const RX_BUF: usize = 64 * 1024;
/// Receive batches per wake-up before sending gets a turn.
const RX_BUDGET: usize = 16;

/// A single-thread loop over one socket.
pub struct EventLoop {
    socket: UdpSocket,
    poll: Poll,
    clock: Clock,
    rx: Vec<Vec<u8>>,
    tx: Vec<u8>,
    pending: Option<Transmit>,
    /// Counters.
    pub stats: LoopStats,
}

impl EventLoop {
    /// A loop over `socket`.
    pub fn new(mut socket: UdpSocket, clock: Clock) -> io::Result<Self> {
        let poll = Poll::new()?;
        poll.registry().register(socket.mio(), Token(0), Interest::READABLE | Interest::WRITABLE)?;
        Ok(Self {
            socket,
            poll,
            clock,
            rx: (0..quinn_udp::BATCH_SIZE).map(|_| vec![0u8; RX_BUF]).collect(),
            tx: Vec::with_capacity(RX_BUF),
            pending: None,
            stats: LoopStats::default(),
        })
    }

    /// The socket's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.socket.local_addr()
    }

    /// Most GSO segments the socket supports.
    pub fn max_gso_segments(&self) -> usize {
        self.socket.max_gso_segments()
    }

    /// Runs until the driver returns `Break` or an I/O error occurs.
    pub fn run(&mut self, driver: &mut dyn Driver) -> io::Result<()> {
        let mut events = Events::with_capacity(64);
        loop {
            let now = self.clock.now();
            driver.handle_timeout(now);
            if driver.on_wake(now).is_break() {
                return Ok(());
            }
            let blocked = self.flush(driver)?;
            let timeout = driver.poll_timeout().map(|t| self.clock.until(t));
            // Ready to send but blocked only by the socket: wait for writability.
            let timeout = if blocked { timeout.map(|t| t.min(Duration::from_millis(5))) } else { timeout };
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            self.receive(driver)?;
        }
    }

    /// Receives batches until the socket is empty or the budget is spent.
    fn receive(&mut self, driver: &mut dyn Driver) -> io::Result<()> {
        let mut meta = [RecvMeta::default(); quinn_udp::BATCH_SIZE];
        for _ in 0..RX_BUDGET {
            let n = {
                let mut slices: Vec<IoSliceMut<'_>> = self.rx.iter_mut().map(|b| IoSliceMut::new(b)).collect();
                self.socket.recv(&mut slices, &mut meta)?
            };
            if n == 0 {
                break;
            }
            self.stats.rx_calls += 1;
            let now = self.clock.now();
            let local = self.socket.local_addr();
            for (m, buf) in meta.iter().zip(self.rx.iter_mut()).take(n) {
                let stride = m.stride.max(1);
                for d in buf[..m.len].chunks_mut(stride) {
                    self.stats.rx_datagrams += 1;
                    self.stats.rx_bytes += d.len() as u64;
                    driver.handle_datagram(now, local, m.addr, m.ecn.map(|e| e as u8), d);
                }
            }
            self.flush(driver)?;
        }
        Ok(())
    }

    /// Sends everything the driver has; returns true if the socket would block.
    fn flush(&mut self, driver: &mut dyn Driver) -> io::Result<bool> {
        loop {
            let t = match self.pending.take() {
                Some(t) => t,
                None => {
                    let now = self.clock.now();
                    match driver.poll_transmit(now, &mut self.tx) {
                        Some(t) => t,
                        None => return Ok(false),
                    }
                }
            };
            let seg = t.segment_size.filter(|&s| s < t.size);
            match self.socket.send(t.destination, &self.tx[..t.size], seg, t.ecn) {
                Ok(true) => {
                    self.stats.tx_calls += 1;
                    self.stats.tx_bytes += t.size as u64;
                }
                Ok(false) => {
                    self.pending = Some(t);
                    return Ok(true);
                }
                // A datagram the kernel refuses (e.g. unreachable destination) is a loss.
                Err(e) => tracing::debug!(%e, "send failed"),
            }
        }
    }
}
