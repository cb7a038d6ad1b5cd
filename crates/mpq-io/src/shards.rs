//! The shard runtime: N independent endpoints, each with its own sockets, event loop and
//! thread (seed 000's shardQUIC baseline: as many connections as paths, sharing nothing).
//!
//! A client runs one connection per shard, each from a socket of its own. A server's shards
//! bind the same listening addresses with SO_REUSEPORT, and the kernel picks a shard for
//! each datagram by a hash of its addresses, so a connection stays with the shard its first
//! Initial reached. Its other paths (multipath) or a new client address (NAT rebinding) may
//! hash to another shard: every shard's connection IDs start with its index
//! ([`mpq_proto::endpoint::EndpointConfig::cid_prefix`]), and a shard that receives a
//! datagram for another's connection ([`mpq_proto::endpoint::Endpoint::cid_owner`]) passes
//! it to that shard's inbox and wakes it.

use std::io;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use mpq_proto::Instant;

use crate::path_threads::{pin_current_thread, EndpointDriver, ThreadReport};
use crate::{Clock, Driver, EventLoop, Transmit, UdpSocket};

/// Datagrams one shard's inbox holds; a shard that falls this far behind loses the rest
/// (as a full socket buffer would), and loss recovery resends them.
const MAX_INBOX: usize = 4096;

/// The shard runtime over one set of sockets per shard.
#[derive(Debug)]
pub struct Shards {
    sockets: Vec<Vec<UdpSocket>>,
    clock: Clock,
    cpus: Vec<usize>,
    /// Ask the kernel to deliver datagrams to their shard ([`steer`]).
    steering: bool,
}

/// A datagram received by one shard for a connection of another.
struct Forwarded {
    local: SocketAddr,
    remote: SocketAddr,
    ecn: Option<u8>,
    data: Vec<u8>,
}

/// What other shards pass to one shard.
struct Inbox {
    queue: Mutex<Vec<Forwarded>>,
    waker: mio::Waker,
}

/// What the shards share: their inboxes and the stop signal.
struct Board {
    inboxes: Vec<Inbox>,
    /// Set when a shard failed: the others end too (a server's dead shard would still get
    /// its share of the datagrams from the kernel).
    stop: AtomicBool,
    /// Datagrams dropped because an inbox was full.
    dropped: AtomicU64,
}

impl Board {
    fn stop_all(&self) {
        self.stop.store(true, Ordering::Release);
        for i in &self.inboxes {
            let _ = i.waker.wake();
        }
    }
}

impl Shards {
    /// One shard per entry of `sockets` (each a list of sockets, one per local address).
    /// The endpoints handed to [`Shards::run`] must use CID prefixes 0..N in that order
    /// when shards share a port.
    pub fn new(sockets: Vec<Vec<UdpSocket>>, clock: Clock) -> io::Result<Self> {
        if sockets.is_empty() || sockets.len() > 256 || sockets.iter().any(|s| s.is_empty()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the shard runtime needs 1 to 256 shards, each with a socket",
            ));
        }
        Ok(Self { sockets, clock, cpus: Vec::new(), steering: true })
    }

    /// Pins shard `k`'s thread to `cpus[k % cpus.len()]` (nothing if empty).
    pub fn pin_to(mut self, cpus: Vec<usize>) -> Self {
        self.cpus = cpus;
        self
    }

    /// Leaves every datagram where the kernel's hash puts it (the shards pass on what is not
    /// theirs): for comparisons and tests of that path.
    pub fn without_steering(mut self) -> Self {
        self.steering = false;
        self
    }

    /// Runs shard `k` with `drivers[k]`, each on a thread of its own, until every driver
    /// has stopped (or one shard failed: then the others stop too and its error is
    /// returned). Returns the drivers with each thread's report, in shard order.
    pub fn run<D: EndpointDriver>(self, drivers: Vec<D>) -> io::Result<Vec<(D, ThreadReport)>> {
        if drivers.len() != self.sockets.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "one driver per shard"));
        }
        if self.steering {
            if let Err(e) = steer(&self.sockets) {
                tracing::warn!(%e, "the shards pass datagrams on to each other instead");
            }
        }
        let mut loops = Vec::new();
        for sockets in self.sockets {
            loops.push(EventLoop::with_sockets(sockets, self.clock)?);
        }
        let inboxes = loops
            .iter()
            .map(|l| Ok(Inbox { queue: Mutex::new(Vec::new()), waker: l.waker()? }))
            .collect::<io::Result<Vec<_>>>()?;
        let board = Board { inboxes, stop: AtomicBool::new(false), dropped: AtomicU64::new(0) };
        let cpus = self.cpus;
        let results: Vec<io::Result<(D, ThreadReport)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = loops
                .into_iter()
                .zip(drivers)
                .enumerate()
                .map(|(k, (ev, driver))| {
                    let board = &board;
                    let cpu = (!cpus.is_empty()).then(|| cpus[k % cpus.len()]);
                    std::thread::Builder::new()
                        .name(format!("mpq-shard-{k}"))
                        .spawn_scoped(scope, move || run_shard(k, ev, driver, board, cpu))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| match h {
                    Ok(h) => h.join().unwrap_or_else(|_| Err(io::Error::other("a shard thread panicked"))),
                    Err(e) => {
                        board.stop_all();
                        Err(e)
                    }
                })
                .collect()
        });
        let dropped = board.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            tracing::debug!(dropped, "datagrams dropped at full shard inboxes");
        }
        results.into_iter().collect()
    }
}

/// Where shards share addresses (a server's), has the kernel deliver each datagram to the
/// shard that owns its connection ID ([`UdpSocket::steer_by_cid_prefix`]), so that passing
/// datagrams between shards is the exception. A new connection's first packets go to shard
/// `a % N` when they come to the `a`-th of at least N addresses (clients spread over the
/// addresses spread over the shards), else where the kernel's hash puts them. Without
/// steering (another system, or the kernel refuses) the shards still pass datagrams on.
/// `shards[k]` are shard k's sockets, bound in shard order (the group's order). Also for
/// runtimes built of other parts (the application API's shards).
pub fn steer(shards: &[Vec<UdpSocket>]) -> io::Result<()> {
    let n = shards.len();
    if n < 2 {
        return Ok(());
    }
    let addresses = shards[0].len();
    for (a, socket) in shards[0].iter().enumerate() {
        let shared = shards[1..].iter().all(|s| s.get(a).is_some_and(|o| o.local_addr() == socket.local_addr()));
        if !shared {
            continue;
        }
        let long_headers = if addresses >= n { (a % n) as u32 } else { u32::MAX };
        #[cfg(target_os = "linux")]
        socket.steer_by_cid_prefix(long_headers).map_err(|e| {
            io::Error::new(e.kind(), format!("the kernel does not steer {} to shards: {e}", socket.local_addr()))
        })?;
        #[cfg(not(target_os = "linux"))]
        {
            let _ = long_headers;
            return Err(io::Error::new(io::ErrorKind::Unsupported, "steering datagrams to shards needs Linux"));
        }
    }
    Ok(())
}

/// One shard's thread: its event loop until its driver stops or another shard fails.
fn run_shard<D: EndpointDriver>(
    k: usize,
    mut ev: EventLoop,
    driver: D,
    board: &Board,
    cpu: Option<usize>,
) -> io::Result<(D, ThreadReport)> {
    if let Some(cpu) = cpu {
        pin_current_thread(cpu);
    }
    let cpu0 = crate::thread_cpu_time();
    let mut sharded = Sharded { inner: driver, me: k, board, taken: Vec::new(), forwarded: 0 };
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| ev.run(&mut sharded)));
    let result = match result {
        Ok(r) => r,
        Err(_) => Err(io::Error::other(format!("shard {k} panicked"))),
    };
    if let Err(e) = result {
        board.stop_all();
        return Err(e);
    }
    tracing::debug!(shard = k, forwarded = sharded.forwarded, "shard ended");
    let report = ThreadReport {
        shard: Some(k),
        forwarded: sharded.forwarded,
        cpu: crate::thread_cpu_time() - cpu0,
        io: ev.stats,
        ..ThreadReport::default()
    };
    Ok((sharded.inner, report))
}

/// A shard's driver: passes datagrams of other shards' connections on, and takes in what
/// they passed to it.
struct Sharded<'a, D> {
    inner: D,
    me: usize,
    board: &'a Board,
    /// The inbox's contents, taken out under its lock and handled after.
    taken: Vec<Forwarded>,
    /// Datagrams this shard passed to others.
    forwarded: u64,
}

impl<D: EndpointDriver> Sharded<'_, D> {
    /// The other shard that owns `datagram`, if any.
    fn owner(&mut self, datagram: &[u8]) -> Option<usize> {
        let owner = usize::from(self.inner.endpoint().cid_owner(datagram)?);
        (owner < self.board.inboxes.len() && owner != self.me).then_some(owner)
    }

    fn forward(&mut self, owner: usize, local: SocketAddr, remote: SocketAddr, ecn: Option<u8>, data: &[u8]) {
        let inbox = &self.board.inboxes[owner];
        {
            let mut q = inbox.queue.lock().unwrap_or_else(|p| p.into_inner());
            if q.len() >= MAX_INBOX {
                self.board.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            q.push(Forwarded { local, remote, ecn, data: data.to_vec() });
        }
        self.forwarded += 1;
        let _ = inbox.waker.wake();
    }
}

impl<D: EndpointDriver> Driver for Sharded<'_, D> {
    fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        ecn: Option<u8>,
        data: &mut [u8],
    ) {
        match self.owner(data) {
            Some(owner) => self.forward(owner, local, remote, ecn, data),
            None => self.inner.handle_datagram(now, local, remote, ecn, data),
        }
    }

    fn handle_datagrams(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        ecn: Option<u8>,
        datagrams: &mut [&mut [u8]],
    ) {
        // Runs of this shard's datagrams go on as runs; the others are passed on one by one.
        let mut start = 0;
        for i in 0..datagrams.len() {
            let Some(owner) = self.owner(datagrams[i]) else { continue };
            if start < i {
                self.inner.handle_datagrams(now, local, remote, ecn, &mut datagrams[start..i]);
            }
            self.forward(owner, local, remote, ecn, datagrams[i]);
            start = i + 1;
        }
        if start < datagrams.len() {
            self.inner.handle_datagrams(now, local, remote, ecn, &mut datagrams[start..]);
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now);
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.inner.poll_timeout()
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.inner.poll_transmit(now, buf)
    }

    fn on_wake(&mut self, now: Instant) -> ControlFlow<()> {
        if self.board.stop.load(Ordering::Acquire) {
            return ControlFlow::Break(());
        }
        {
            let mut q = self.board.inboxes[self.me].queue.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::swap(&mut *q, &mut self.taken);
        }
        for mut f in self.taken.drain(..) {
            self.inner.handle_datagram(now, f.local, f.remote, f.ecn, &mut f.data);
        }
        self.inner.on_wake(now)
    }

    fn take_wakes(&mut self) -> Vec<std::task::Waker> {
        self.inner.take_wakes()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    use mpq_proto::endpoint::{Endpoint, EndpointConfig};

    use super::*;

    /// Records the datagrams that reach it, until `received` counts `expected` over all shards.
    struct Recorder {
        endpoint: Endpoint,
        got: Vec<Vec<u8>>,
        received: Arc<AtomicUsize>,
        expected: usize,
        clock: Clock,
    }

    impl Driver for Recorder {
        fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: SocketAddr, _: Option<u8>, data: &mut [u8]) {
            self.got.push(data.to_vec());
            self.received.fetch_add(1, Ordering::SeqCst);
        }
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_timeout(&mut self) -> Option<Instant> {
            Some(self.clock.now() + std::time::Duration::from_millis(5))
        }
        fn poll_transmit(&mut self, _: Instant, _: &mut Vec<u8>) -> Option<Transmit> {
            None
        }
        fn on_wake(&mut self, _: Instant) -> ControlFlow<()> {
            // A deadline, so that a lost datagram fails the test rather than hanging it.
            if self.received.load(Ordering::SeqCst) >= self.expected
                || self.clock.now() > Instant::ZERO + std::time::Duration::from_secs(20)
            {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
    }

    impl EndpointDriver for Recorder {
        fn endpoint(&mut self) -> &mut Endpoint {
            &mut self.endpoint
        }
    }

    /// Two shards share a port; short-header datagrams for shard 1's connection IDs come
    /// from 32 client sockets. Without the kernel's steering its hash hands some to shard 0
    /// (all 32 avoiding it has odds of 2^-32), which passes them on; with it, all go to
    /// shard 1 at once. Either way every one of them must end up at shard 1.
    #[test]
    fn datagrams_reach_the_shard_that_owns_their_connection_id() {
        let forwarded = shard_one_gets_all(false);
        assert!(forwarded > 0, "the kernel's hash sent none to shard 0: {forwarded}");
        assert_eq!(shard_one_gets_all(true), 0, "the kernel steered every datagram to its shard");
    }

    /// The test above with or without steering; returns how many datagrams shard 0 passed on.
    fn shard_one_gets_all(steered: bool) -> u64 {
        let first = UdpSocket::bind_shared("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = first.local_addr();
        let second = UdpSocket::join_shared(addr).unwrap();
        let clock = Clock::new();
        let received = Arc::new(AtomicUsize::new(0));
        let clients: Vec<_> = (0..32).map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
        let groups = vec![vec![first], vec![second]];
        if steered {
            // Steered before the first datagram is sent: `run` attaches the program too, but
            // the sender starts before it, and a datagram that arrived first was hashed by the
            // kernel to shard 0 (CI saw one forwarded). Attaching again replaces the program.
            steer(&groups).unwrap();
        }
        let drivers = (0..2u8)
            .map(|k| {
                let mut c = EndpointConfig::with_seed(u64::from(k));
                c.cid_prefix = Some(k);
                Recorder {
                    endpoint: Endpoint::new(c, None),
                    got: Vec::new(),
                    received: received.clone(),
                    expected: clients.len(),
                    clock,
                }
            })
            .collect();
        let sender = std::thread::spawn(move || {
            for (i, c) in clients.iter().enumerate() {
                // Short header, DCID 01 i i i i i i i (prefix 1 = shard 1), some payload.
                let mut d = vec![0x40u8, 1];
                d.extend_from_slice(&[i as u8; 7]);
                d.extend_from_slice(&[0xaa; 40]);
                c.send_to(&d, addr).unwrap();
            }
        });
        let mut rt = Shards::new(groups, clock).unwrap();
        if !steered {
            rt = rt.without_steering();
        }
        let done = rt.run(drivers).unwrap();
        sender.join().unwrap();
        assert!(done[0].0.got.is_empty(), "shard 0 kept another shard's datagrams");
        let mut at_one: Vec<u8> = done[1].0.got.iter().map(|d| d[2]).collect();
        at_one.sort_unstable();
        assert_eq!(at_one, (0..32).collect::<Vec<u8>>());
        assert_eq!(done[1].1.shard, Some(1));
        done[0].1.forwarded
    }
}
