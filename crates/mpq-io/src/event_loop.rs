//! The single-thread event loop: wait for readiness or the next timer, receive batches,
//! hand datagrams to the driver, send what it produces, fire timers.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::time::Duration;

use mio::{Events, Interest, Poll, Token};
use mpq_proto::conn::Transmit;
use quinn_udp::RecvMeta;

use crate::{Clock, UdpSocket};

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
    /// The datagrams of one GRO batch (same addresses and ECN codepoint), in order. By
    /// default each goes to [`Driver::handle_datagram`].
    fn handle_datagrams(
        &mut self,
        now: mpq_proto::Instant,
        local: SocketAddr,
        remote: SocketAddr,
        ecn: Option<u8>,
        datagrams: &mut [&mut [u8]],
    ) {
        for d in datagrams.iter_mut() {
            self.handle_datagram(now, local, remote, ecn, d);
        }
    }
    /// Timers due at or before `now`.
    fn handle_timeout(&mut self, now: mpq_proto::Instant);
    /// Earliest timer.
    fn poll_timeout(&mut self) -> Option<mpq_proto::Instant>;
    /// Next datagram or GSO batch, written into `buf`. A `source` of `None` sends from the
    /// loop's first socket; the path ID is not the loop's concern.
    fn poll_transmit(&mut self, now: mpq_proto::Instant, buf: &mut Vec<u8>) -> Option<Transmit>;
    /// Application work after each round of I/O; `Break` stops the loop.
    fn on_wake(&mut self, now: mpq_proto::Instant) -> ControlFlow<()>;
    /// The wakers of the application's futures that the driver's work made ready, to be
    /// woken by the runtime once it has let go of whatever guards the driver (its lock, in
    /// the runtimes with several threads). Waking one is a system call that often
    /// interrupts another CPU; done under the lock, it made up about half of a receiving
    /// path thread's hold time at two paths, and the woken thread's first
    /// act, taking the same lock, only waited. A driver that defers its wakes must hand
    /// them out here; the default has none.
    fn take_wakes(&mut self) -> Vec<std::task::Waker> {
        Vec::new()
    }
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
    /// Datagrams the kernel refused as larger than the route's MTU (EMSGSIZE): PMTU probes
    /// above the local interface's MTU, dropped as lost.
    pub tx_too_big: u64,
}

/// Size of one receive buffer: a full GRO batch.
const RX_BUF: usize = 64 * 1024;
/// Receive batches per wake-up before sending gets a turn.
const RX_BUDGET: usize = 16;

/// The token of [`EventLoop::waker`] (sockets are numbered from 0).
const WAKER: Token = Token(usize::MAX);

/// A single-thread loop over one or more sockets (one per local address: multipath).
pub struct EventLoop {
    sockets: Vec<UdpSocket>,
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
    pub fn new(socket: UdpSocket, clock: Clock) -> io::Result<Self> {
        Self::with_sockets(vec![socket], clock)
    }

    /// A loop over several sockets; the first is the default for transmits without a
    /// source address.
    pub fn with_sockets(mut sockets: Vec<UdpSocket>, clock: Clock) -> io::Result<Self> {
        if sockets.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an event loop needs a socket"));
        }
        let poll = Poll::new()?;
        for (i, s) in sockets.iter_mut().enumerate() {
            poll.registry().register(s.mio(), Token(i), Interest::READABLE | Interest::WRITABLE)?;
        }
        Ok(Self {
            sockets,
            poll,
            clock,
            rx: (0..quinn_udp::BATCH_SIZE).map(|_| vec![0u8; RX_BUF]).collect(),
            tx: Vec::with_capacity(RX_BUF),
            pending: None,
            stats: LoopStats::default(),
        })
    }

    /// A waker that makes the loop's wait return at once (for the shard runtime's inboxes;
    /// one per loop).
    pub(crate) fn waker(&self) -> io::Result<mio::Waker> {
        mio::Waker::new(self.poll.registry(), WAKER)
    }

    /// The first socket's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.sockets[0].local_addr()
    }

    /// Every socket's address, in order.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.sockets.iter().map(|s| s.local_addr()).collect()
    }

    /// Most GSO segments every socket supports.
    pub fn max_gso_segments(&self) -> usize {
        self.sockets.iter().map(|s| s.max_gso_segments()).min().unwrap_or(1)
    }

    /// The socket a transmit leaves from: the one bound to its source address, else one
    /// bound to the wildcard address on the same port (sending with the source IP), else
    /// the first.
    fn socket_for(&self, source: Option<SocketAddr>) -> (usize, Option<std::net::IpAddr>) {
        let Some(src) = source else { return (0, None) };
        if let Some(i) = self.sockets.iter().position(|s| s.local_addr() == src) {
            return (i, None);
        }
        let wildcard = self.sockets.iter().position(|s| {
            let l = s.local_addr();
            l.ip().is_unspecified() && l.port() == src.port()
        });
        match wildcard {
            Some(i) => (i, Some(src.ip())),
            None => (0, None),
        }
    }

    /// Runs until the driver returns `Break` or an I/O error occurs.
    pub fn run(&mut self, driver: &mut dyn Driver) -> io::Result<()> {
        let mut events = Events::with_capacity(64);
        loop {
            let now = self.clock.now();
            driver.handle_timeout(now);
            let stop = driver.on_wake(now).is_break();
            // (Nothing guards the driver here: the wakes go at once.)
            driver.take_wakes().into_iter().for_each(std::task::Waker::wake);
            if stop {
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

    /// Receives batches from every socket until they are empty or the budget is spent.
    fn receive(&mut self, driver: &mut dyn Driver) -> io::Result<()> {
        let mut meta = [RecvMeta::default(); quinn_udp::BATCH_SIZE];
        for si in 0..self.sockets.len() {
            for _ in 0..RX_BUDGET {
                let n = {
                    let mut slices: Vec<IoSliceMut<'_>> = self.rx.iter_mut().map(|b| IoSliceMut::new(b)).collect();
                    self.sockets[si].recv(&mut slices, &mut meta)?
                };
                if n == 0 {
                    break;
                }
                self.stats.rx_calls += 1;
                let now = self.clock.now();
                let bound = self.sockets[si].local_addr();
                for (m, buf) in meta.iter().zip(self.rx.iter_mut()).take(n) {
                    // On a wildcard socket the destination IP (IP_PKTINFO) names the path.
                    let local = match m.dst_ip {
                        Some(ip) if bound.ip().is_unspecified() => SocketAddr::new(ip, bound.port()),
                        _ => bound,
                    };
                    let stride = m.stride.max(1);
                    let mut batch: smallvec::SmallVec<[&mut [u8]; 64]> = buf[..m.len].chunks_mut(stride).collect();
                    self.stats.rx_datagrams += batch.len() as u64;
                    self.stats.rx_bytes += m.len as u64;
                    driver.handle_datagrams(now, local, m.addr, m.ecn.map(|e| e as u8), &mut batch);
                }
                self.flush(driver)?;
            }
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
            let (si, src_ip) = self.socket_for(t.source);
            match self.sockets[si].send_from(t.destination, src_ip, &self.tx[..t.size], seg, t.ecn) {
                Ok(true) => {
                    self.stats.tx_calls += 1;
                    self.stats.tx_bytes += t.size as u64;
                }
                Ok(false) => {
                    self.pending = Some(t);
                    return Ok(true);
                }
                // A datagram larger than the route's MTU (EMSGSIZE: the socket never
                // fragments, see `UdpSocket::bind`) is most often a PMTU probe: dropped, it
                // is lost like any probe the network drops, and the path's search goes on
                // below that size. Any other datagram the kernel refuses (e.g. unreachable
                // destination) is a loss too; loss recovery, and for full-size packets the
                // black-hole detection, take it from there.
                Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                    self.stats.tx_too_big += 1;
                    tracing::trace!(size = t.size, segment = ?seg, "datagram larger than the route's MTU dropped");
                }
                Err(e) => tracing::debug!(%e, "send failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends one datagram from each of its two sockets to a peer socket, then records what
    /// arrives back and on which local address.
    struct Echo {
        peer: SocketAddr,
        sources: Vec<SocketAddr>,
        sent: usize,
        got: Vec<(SocketAddr, SocketAddr, Vec<u8>)>,
    }

    impl Driver for Echo {
        fn handle_datagram(
            &mut self,
            _now: mpq_proto::Instant,
            local: SocketAddr,
            remote: SocketAddr,
            _ecn: Option<u8>,
            data: &mut [u8],
        ) {
            self.got.push((local, remote, data.to_vec()));
        }
        fn handle_timeout(&mut self, _now: mpq_proto::Instant) {}
        fn poll_timeout(&mut self) -> Option<mpq_proto::Instant> {
            None
        }
        fn poll_transmit(&mut self, _now: mpq_proto::Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
            let src = *self.sources.get(self.sent)?;
            self.sent += 1;
            buf.clear();
            buf.extend_from_slice(src.to_string().as_bytes());
            Some(Transmit {
                destination: self.peer,
                source: Some(src),
                path_id: 0,
                size: buf.len(),
                segment_size: None,
                ecn: None,
            })
        }
        fn on_wake(&mut self, _now: mpq_proto::Instant) -> ControlFlow<()> {
            if self.got.len() >= 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
    }

    #[test]
    fn transmits_leave_from_their_source_and_receipts_name_their_socket() {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let b = UdpSocket::bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let (la, lb) = (a.local_addr(), b.local_addr());
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut ev = EventLoop::with_sockets(vec![a, b], Clock::new()).unwrap();
        assert_eq!(ev.local_addrs(), vec![la, lb]);
        let peer_addr = peer.local_addr().unwrap();
        let echo = std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            for _ in 0..2 {
                let (n, from) = peer.recv_from(&mut buf).unwrap();
                // The payload names the source the driver asked for: it must match.
                assert_eq!(std::str::from_utf8(&buf[..n]).unwrap(), from.to_string());
                peer.send_to(&buf[..n], from).unwrap();
            }
        });
        let mut d = Echo { peer: peer_addr, sources: vec![lb, la], sent: 0, got: Vec::new() };
        ev.run(&mut d).unwrap();
        echo.join().unwrap();
        let mut locals: Vec<SocketAddr> = d.got.iter().map(|g| g.0).collect();
        locals.sort();
        assert_eq!(locals, vec![la, lb]);
        assert!(d.got.iter().all(|(local, remote, data)| *remote == peer_addr && data == local.to_string().as_bytes()));
    }
}
