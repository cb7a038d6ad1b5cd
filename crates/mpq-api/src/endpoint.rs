//! The endpoint: sockets, a runtime, and the connections it starts and accepts.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use mpq_io::path_threads::{PathThreadLimit, PathThreads, Runtime, RuntimeGuard, ThreadReport};
use mpq_io::{Clock, UdpSocket};
use mpq_proto::conn::{ClientConfig, ServerConfig};
use mpq_proto::endpoint::EndpointConfig;

use crate::connection::{Connecting, Connection};
use crate::driver::{register, ApiDriver};
use crate::Error;

/// How an endpoint's connections are driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Threads {
    /// One runtime thread drives every connection and path.
    #[default]
    Single,
    /// A thread per path, each with a socket connected to the path's peer.
    PerPath,
    /// N independent endpoints ("shards"), each with its own sockets and one runtime thread
    /// that drives its connections (seed 000's shardQUIC baseline; at most 256). A client
    /// puts its connections on the shards in turn, each shard from its own port. A server's
    /// shards share its listening addresses (SO_REUSEPORT) and the kernel hands each
    /// datagram to the shard that owns its connection ID (a BPF program on the group; the
    /// first byte of every connection ID names its shard), a new connection's first packets
    /// to the shard its addresses hash to. Linux only for a server of more than one shard.
    Shards(usize),
}

/// Settings of an endpoint.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The runtime.
    pub threads: Threads,
    /// Pin the runtime's threads to these CPUs in turn (empty: no pinning).
    pub cpus: Vec<usize>,
    /// With [`Threads::PerPath`], how many threads the paths get: by default as many as
    /// the CPUs the endpoint may use, paths beyond sharing them, each new path joining the
    /// thread that drives the fewest ([`PathThreadLimit`]).
    pub path_threads: PathThreadLimit,
    /// Seed of the endpoint's connection IDs and tokens (`None`: drawn from the system).
    pub seed: Option<u64>,
    /// Client connections keep a path alive when the operating system takes its local
    /// address away (a DHCP lease renewed with another address): on a socket bound to a
    /// wildcard address, a connection without multipath migrates to the address the routing
    /// table now picks, one with multipath opens a path from there and abandons the old one
    /// (RFC 9000 §9, RFC 10069; `mpq_io::address_watch`, checked every 250 ms). Set, a
    /// connection whose address went away ends at its idle timeout.
    pub ignore_address_changes: bool,
}

/// What the handles share: the runtime and its driver.
pub(crate) struct Inner {
    pub rt: Runtime<ApiDriver>,
    /// Its shard (0 unless [`Threads::Shards`]).
    pub shard: usize,
}

impl Inner {
    /// The driver, locked; the runtime sends what changed when the guard goes.
    /// [`Error::RuntimeFailed`] once the runtime failed.
    pub fn lock(&self) -> Result<RuntimeGuard<'_, ApiDriver>, Error> {
        self.rt.lock().map_err(|_| Error::RuntimeFailed)
    }

    /// The protocol's time now.
    pub fn now(&self) -> mpq_proto::Instant {
        self.rt.clock().now()
    }
}

/// A QUIC endpoint: the sockets it is bound to, a runtime on threads of its own, and the
/// connections it starts ([`Endpoint::connect`]) and, as a server, accepts
/// ([`Endpoint::accept`]). Clones share it; the runtime stops when the endpoint and every
/// connection and stream of it are dropped.
#[derive(Clone)]
pub struct Endpoint {
    /// Shard 0's runtime (the only one unless [`Threads::Shards`]).
    pub(crate) inner: Arc<Inner>,
    /// Every shard's runtime, shard 0 first.
    shards: Arc<Vec<Arc<Inner>>>,
    /// The shard of the next connection a client starts.
    next: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("local", &self.local_addrs()).finish()
    }
}

impl Endpoint {
    /// A client endpoint bound to `addrs` (port 0 picks one; the first address carries
    /// connections' first path, the others can open more with
    /// [`Connection::open_path`]).
    pub fn client(addrs: &[SocketAddr], options: Options) -> Result<Self, Error> {
        Self::bind(addrs, None, options)
    }

    /// A server endpoint listening on `addrs`, accepting connections with `config`.
    pub fn server(addrs: &[SocketAddr], config: ServerConfig, options: Options) -> Result<Self, Error> {
        Self::bind(addrs, Some(config), options)
    }

    fn bind(addrs: &[SocketAddr], server: Option<ServerConfig>, options: Options) -> Result<Self, Error> {
        if addrs.is_empty() {
            return Err(Error::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to bind")));
        }
        let sockets = addrs.iter().map(|a| UdpSocket::bind_shared(*a)).collect::<Result<Vec<_>, _>>()?;
        Self::with_sockets(sockets, server, options)
    }

    /// The sockets of shards 1.. for [`Threads::Shards`], shard 0 holding `first`: a
    /// server's bind the same addresses (SO_REUSEPORT, so `first` must be bound with
    /// [`UdpSocket::bind_shared`]), a client's the same IP addresses on ports of their own,
    /// shard k's starting at the k-th address (cycling): its connections start from its
    /// first socket, so a client's connections spread over its addresses as over its shards.
    fn shard_sockets(first: &[UdpSocket], n: usize, server: bool) -> Result<Vec<Vec<UdpSocket>>, Error> {
        let bound: Vec<SocketAddr> = first.iter().map(UdpSocket::local_addr).collect();
        (1..n)
            .map(|k| {
                let start = if server { 0 } else { k % bound.len() };
                bound[start..]
                    .iter()
                    .chain(&bound[..start])
                    .map(|a| {
                        let r = if server {
                            UdpSocket::join_shared(*a)
                        } else {
                            UdpSocket::bind(SocketAddr::new(a.ip(), 0))
                        };
                        r.map_err(|e| {
                            Error::Io(std::io::Error::new(e.kind(), format!("binding a shard's socket at {a}: {e}")))
                        })
                    })
                    .collect()
            })
            .collect()
    }

    /// An endpoint on sockets the caller bound (to size their buffers, say): a server when
    /// `server` is given, else a client. With [`Threads::PerPath`] they must be bound with
    /// [`UdpSocket::bind_shared`], so that each path's connected socket can share the address.
    /// With [`Threads::Shards`] they are shard 0's and the endpoint binds the other shards'
    /// alike (a server's on the same addresses, so they too must be bound shared).
    pub fn with_sockets(
        sockets: Vec<UdpSocket>,
        server: Option<ServerConfig>,
        options: Options,
    ) -> Result<Self, Error> {
        if sockets.is_empty() {
            return Err(Error::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no socket")));
        }
        let n = match options.threads {
            Threads::Shards(n) if !(1..=256).contains(&n) => {
                return Err(Error::InvalidArgument(format!("{n} shards: give 1 to 256")));
            }
            Threads::Shards(n) => n,
            _ => 1,
        };
        let is_server = server.is_some();
        let mut all = vec![sockets];
        all.extend(Self::shard_sockets(&all[0], n, is_server)?);
        if is_server && n > 1 {
            // Unlike the CLI's shard runtime, these shards do not pass each other's datagrams
            // on: without the kernel's steering, another path of a connection would land on
            // a shard that does not know it.
            mpq_io::shards::steer(&all).map_err(Error::Io)?;
        }
        // One clock for every shard, so that their instants compare.
        let clock = Clock::new();
        // The shards share the stateless-reset and token secrets (a token or a reset is good
        // whichever shard checks it); each draws its own connection IDs.
        let base = endpoint_config(options.seed.unwrap_or_else(system_seed));
        let mut shards = Vec::with_capacity(n);
        for (k, sockets) in all.into_iter().enumerate() {
            let mut config = base.clone();
            config.seed = base.seed.wrapping_add((k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            if n > 1 {
                // The first byte of every connection ID names its shard (the steering's key).
                config.cid_prefix = Some(k as u8);
            }
            let endpoint = mpq_proto::endpoint::Endpoint::new(config, server.clone());
            let mut rt = PathThreads::new(sockets, clock)?.pin_to(shard_cpus(&options.cpus, k, n));
            if options.threads != Threads::PerPath {
                rt = rt.single_thread();
            }
            rt = rt.path_thread_limit(options.path_threads);
            let mut driver = ApiDriver::new(endpoint);
            if !options.ignore_address_changes {
                driver.set_bound(rt.local_addrs());
            }
            // (Shards' threads are named as the CLI's shard runtime names them.)
            let rt = if matches!(options.threads, Threads::Shards(_)) {
                rt.spawn_named(&format!("mpq-shard-{k}"), driver)?
            } else {
                rt.spawn(driver)?
            };
            shards.push(Arc::new(Inner { rt, shard: k }));
        }
        let shards = Arc::new(shards);
        Ok(Self { inner: shards[0].clone(), shards, next: Arc::new(AtomicUsize::new(0)) })
    }

    /// The runtime's threads alive now, over every shard: each shard's own thread and, with
    /// [`Threads::PerPath`], a thread per path of its connections (a connection's path
    /// threads end soon after it is gone).
    pub fn runtime_threads(&self) -> usize {
        self.shards.iter().map(|s| s.rt.threads()).sum()
    }

    /// The number of shards (1 unless [`Threads::Shards`]).
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Gives every connection made from now on a qlog sink from `factory` (`None` from it:
    /// no qlog for that connection), as it is created: the files hold whole connections.
    pub fn set_qlog_factory(&self, factory: mpq_proto::endpoint::QlogFactory) -> Result<(), Error> {
        if self.shards.len() == 1 {
            self.inner.lock()?.endpoint.set_qlog_factory(factory);
            return Ok(());
        }
        // The shards share the one factory.
        let shared = Arc::new(Mutex::new(factory));
        for inner in self.shards.iter() {
            let f = shared.clone();
            inner.lock()?.endpoint.set_qlog_factory(Box::new(move |c| f.lock().ok().and_then(|mut f| f(c))));
        }
        Ok(())
    }

    /// A server's address validation (RFC 9000 §8.1.2): when to answer a new client with a
    /// Retry before creating any state for it.
    pub fn set_retry_mode(&self, mode: mpq_proto::token::RetryMode) -> Result<(), Error> {
        for inner in self.shards.iter() {
            inner.lock()?.endpoint.set_retry_mode(mode);
        }
        Ok(())
    }

    /// The most connections a server holds at once (each shard's, with
    /// [`Threads::Shards`]); the Initials of new clients beyond it are dropped.
    pub fn set_max_connections(&self, n: usize) -> Result<(), Error> {
        for inner in self.shards.iter() {
            inner.lock()?.endpoint.set_max_connections(n);
        }
        Ok(())
    }

    /// The bound addresses, in the order given (shard 0's: a server's shards share them).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.inner.rt.local_addrs()
    }

    /// Starts a connection to `remote`, checking the server's certificate for
    /// `server_name`; the returned future completes when the handshake does.
    /// With [`Threads::Shards`], the connections go to the shards in turn. A connection that
    /// attempts 0-RTT holds its first flight until the application's first call that sends
    /// (see [`Connecting::into_0rtt`]), so that early requests leave with the ClientHello.
    pub fn connect(&self, remote: SocketAddr, server_name: &str, config: &ClientConfig) -> Result<Connecting, Error> {
        let inner = &self.shards[self.next.fetch_add(1, Ordering::Relaxed) % self.shards.len()];
        let now = inner.now();
        let mut g = inner.lock()?;
        if g.closed.is_some() {
            return Err(Error::EndpointClosed);
        }
        let h = g.endpoint.connect(now, config, remote, server_name).map_err(|e| Error::Connect(e.to_string()))?;
        let gen = g.fresh(h);
        g.watch(h);
        let early =
            g.endpoint.connection(h).is_some_and(|c| c.zero_rtt_state() == mpq_proto::conn::ZeroRttState::Pending);
        if early {
            // 0-RTT: the first flight waits for the application's next call that has
            // something to send (after `into_0rtt`, its first write: see `Connection::with`),
            // so that the requests leave with the ClientHello. On loopback the handshake
            // completes in about a millisecond, often before a request written after the
            // flight left, and the runtime's thread may send it at any moment.
            if let Some(c) = g.endpoint.connection_mut(h) {
                c.hold_first_flight(true);
            }
            g.quiet();
        }
        drop(g);
        Ok(Connecting::new(Connection::new(inner.clone(), h, gen)))
    }

    /// The next connection a client opened to this server, once its handshake completed;
    /// `None` once the endpoint is closed.
    pub fn accept(&self) -> Accept {
        Accept { shards: self.shards.clone(), next: 0 }
    }

    /// Closes every connection with `error_code` and `reason`, and accepts no more.
    pub fn close(&self, error_code: u64, reason: &[u8]) {
        for inner in self.shards.iter() {
            let now = inner.now();
            // (A failed runtime has nothing left to close.)
            let Ok(mut g) = inner.lock() else { continue };
            g.closed = Some((error_code, reason.to_vec()));
            for h in g.endpoint.handles() {
                if let Some(c) = g.endpoint.connection_mut(h) {
                    c.close(now, error_code, reason);
                }
            }
            // (Woken as the guard goes, after the lock.)
            let d = &mut *g;
            d.wakes.append(&mut d.accept_wakers);
        }
    }

    /// Waits until every connection of the endpoint is drained (after [`Endpoint::close`],
    /// so that the peers learn of the close before the endpoint goes).
    pub fn wait_idle(&self) -> WaitIdle {
        WaitIdle { shards: self.shards.clone() }
    }

    /// Stops the runtime (every shard's) now if this is the last handle of the endpoint,
    /// returning each of its threads' figures; `None` (the runtime goes on) while
    /// connections or streams still hold it.
    pub fn shutdown(self) -> Option<Result<Vec<ThreadReport>, Error>> {
        let Self { inner, shards, .. } = self;
        drop(inner);
        let shards = Arc::into_inner(shards)?;
        // Connections and streams hold their shard's runtime: all or nothing.
        if shards.iter().any(|i| Arc::strong_count(i) > 1) {
            return None;
        }
        let mut reports = Vec::new();
        let sharded = shards.len() > 1;
        for inner in shards {
            let inner = Arc::into_inner(inner)?;
            let k = inner.shard;
            match inner.rt.stop() {
                Ok(r) => reports.extend(r.into_iter().map(|mut r| {
                    r.shard = sharded.then_some(k);
                    r
                })),
                Err(e) => return Some(Err(Error::Io(e))),
            }
        }
        Some(Ok(reports))
    }
}

/// A seed from the system's randomness.
fn system_seed() -> u64 {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 8];
    // (Only fails where the system has no randomness at all.)
    ring::rand::SystemRandom::new().fill(&mut b).expect("the system's random number generator");
    u64::from_le_bytes(b)
}

/// Shard `k`'s share of `cpus` (of `n` shards): every CPU when there is one shard, else
/// the k-th in turn.
fn shard_cpus(cpus: &[usize], k: usize, n: usize) -> Vec<usize> {
    if n == 1 || cpus.is_empty() {
        return cpus.to_vec();
    }
    vec![cpus[k % cpus.len()]]
}

/// The endpoint's configuration: its seed (connection IDs, tokens), and its token key from
/// the system's randomness.
fn endpoint_config(seed: u64) -> EndpointConfig {
    use ring::rand::SecureRandom;
    let rng = ring::rand::SystemRandom::new();
    let mut config = EndpointConfig::with_seed(seed);
    // The Retry/NEW_TOKEN key gets its own 256 bits, not ones derived from a 64-bit seed.
    let _ = rng.fill(&mut config.token_secret);
    config
}

/// The future of [`Endpoint::accept`].
pub struct Accept {
    shards: Arc<Vec<Arc<Inner>>>,
    /// The shard looked at first (they take turns, so no shard's clients wait behind
    /// another's).
    next: usize,
}

impl Future for Accept {
    type Output = Option<Connection>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let n = self.shards.len();
        let mut closed = 0;
        for i in 0..n {
            let k = (self.next + i) % n;
            let inner = self.shards[k].clone();
            // A failed runtime accepts no more connections.
            let Ok(mut g) = inner.lock() else {
                closed += 1;
                continue;
            };
            if let Some(h) = g.incoming.pop_front() {
                let gen = g.conns.get(&h).map_or(0, |s| s.gen);
                drop(g);
                self.next = k + 1;
                return Poll::Ready(Some(Connection::new(inner, h, gen)));
            }
            if g.closed.is_some() {
                closed += 1;
                continue;
            }
            register(&mut g.accept_wakers, cx.waker());
        }
        if closed == n {
            return Poll::Ready(None);
        }
        Poll::Pending
    }
}

/// The future of [`Endpoint::wait_idle`].
pub struct WaitIdle {
    shards: Arc<Vec<Arc<Inner>>>,
}

impl Future for WaitIdle {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut busy = false;
        for inner in self.shards.iter() {
            // A failed runtime's connections are gone.
            let Ok(mut g) = inner.lock() else { continue };
            if g.endpoint.is_empty() {
                continue;
            }
            busy = true;
            // Woken by any connection's change; each is looked at again.
            for h in g.endpoint.handles() {
                if let Some(st) = g.conns.get_mut(&h) {
                    register(&mut st.general, cx.waker());
                }
            }
        }
        if busy {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}
