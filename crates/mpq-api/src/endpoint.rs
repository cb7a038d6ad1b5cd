//! The endpoint: sockets, a runtime, and the connections it starts and accepts.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use mpq_io::path_threads::{PathThreads, Runtime, RuntimeGuard, ThreadReport};
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
}

/// Settings of an endpoint.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The runtime.
    pub threads: Threads,
    /// Pin the runtime's threads to these CPUs in turn (empty: no pinning).
    pub cpus: Vec<usize>,
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
    pub(crate) inner: Arc<Inner>,
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

    /// An endpoint on sockets the caller bound (to size their buffers, say): a server when
    /// `server` is given, else a client. With [`Threads::PerPath`] they must be bound with
    /// [`UdpSocket::bind_shared`], so that each path's connected socket can share the address.
    pub fn with_sockets(
        sockets: Vec<UdpSocket>,
        server: Option<ServerConfig>,
        options: Options,
    ) -> Result<Self, Error> {
        if sockets.is_empty() {
            return Err(Error::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no socket")));
        }
        let endpoint = mpq_proto::endpoint::Endpoint::new(endpoint_config(options.seed), server);
        let mut rt = PathThreads::new(sockets, Clock::new())?.pin_to(options.cpus);
        if options.threads == Threads::Single {
            rt = rt.single_thread();
        }
        let mut driver = ApiDriver::new(endpoint);
        if !options.ignore_address_changes {
            driver.set_bound(rt.local_addrs());
        }
        let rt = rt.spawn(driver)?;
        Ok(Self { inner: Arc::new(Inner { rt }) })
    }

    /// Gives every connection made from now on a qlog sink from `factory` (`None` from it:
    /// no qlog for that connection), as it is created: the files hold whole connections.
    pub fn set_qlog_factory(&self, factory: mpq_proto::endpoint::QlogFactory) -> Result<(), Error> {
        self.inner.lock()?.endpoint.set_qlog_factory(factory);
        Ok(())
    }

    /// A server's address validation (RFC 9000 §8.1.2): when to answer a new client with a
    /// Retry before creating any state for it.
    pub fn set_retry_mode(&self, mode: mpq_proto::token::RetryMode) -> Result<(), Error> {
        self.inner.lock()?.endpoint.set_retry_mode(mode);
        Ok(())
    }

    /// The bound addresses, in the order given.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.inner.rt.local_addrs()
    }

    /// Starts a connection to `remote`, checking the server's certificate for
    /// `server_name`; the returned future completes when the handshake does.
    pub fn connect(&self, remote: SocketAddr, server_name: &str, config: &ClientConfig) -> Result<Connecting, Error> {
        let now = self.inner.now();
        let mut g = self.inner.lock()?;
        if g.closed {
            return Err(Error::EndpointClosed);
        }
        let h = g.endpoint.connect(now, config, remote, server_name).map_err(|e| Error::Connect(e.to_string()))?;
        let gen = g.fresh(h);
        g.watch(h);
        drop(g);
        Ok(Connecting::new(Connection::new(self.inner.clone(), h, gen)))
    }

    /// The next connection a client opened to this server, once its handshake completed;
    /// `None` once the endpoint is closed.
    pub fn accept(&self) -> Accept {
        Accept { inner: self.inner.clone() }
    }

    /// Closes every connection with `error_code` and `reason`, and accepts no more.
    pub fn close(&self, error_code: u64, reason: &[u8]) {
        let now = self.inner.now();
        // (A failed runtime has nothing left to close.)
        let Ok(mut g) = self.inner.lock() else { return };
        g.closed = true;
        for h in g.endpoint.handles() {
            if let Some(c) = g.endpoint.connection_mut(h) {
                c.close(now, error_code, reason);
            }
        }
        for w in g.accept_wakers.drain(..) {
            w.wake();
        }
    }

    /// Waits until every connection of the endpoint is drained (after [`Endpoint::close`],
    /// so that the peers learn of the close before the endpoint goes).
    pub fn wait_idle(&self) -> WaitIdle {
        WaitIdle { inner: self.inner.clone() }
    }

    /// Stops the runtime now if this is the last handle of the endpoint, returning each of its
    /// threads' figures; `None` (the runtime goes on) while connections or streams still hold
    /// it.
    pub fn shutdown(self) -> Option<Result<Vec<ThreadReport>, Error>> {
        let inner = Arc::into_inner(self.inner)?;
        Some(inner.rt.stop().map_err(Error::Io))
    }
}

/// The endpoint's configuration: its seed (connection IDs, tokens) and its token key from
/// the system's randomness, unless the seed is given.
fn endpoint_config(seed: Option<u64>) -> EndpointConfig {
    use ring::rand::SecureRandom;
    let rng = ring::rand::SystemRandom::new();
    let seed = seed.unwrap_or_else(|| {
        let mut b = [0u8; 8];
        // (Only fails where the system has no randomness at all.)
        rng.fill(&mut b).expect("the system's random number generator");
        u64::from_le_bytes(b)
    });
    let mut config = EndpointConfig::with_seed(seed);
    // The Retry/NEW_TOKEN key gets its own 256 bits, not ones derived from a 64-bit seed.
    let _ = rng.fill(&mut config.token_secret);
    config
}

/// The future of [`Endpoint::accept`].
pub struct Accept {
    inner: Arc<Inner>,
}

impl Future for Accept {
    type Output = Option<Connection>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // A failed runtime accepts no more connections.
        let Ok(mut g) = self.inner.lock() else { return Poll::Ready(None) };
        if let Some(h) = g.incoming.pop_front() {
            let gen = g.conns.get(&h).map_or(0, |s| s.gen);
            drop(g);
            return Poll::Ready(Some(Connection::new(self.inner.clone(), h, gen)));
        }
        if g.closed {
            return Poll::Ready(None);
        }
        register(&mut g.accept_wakers, cx.waker());
        Poll::Pending
    }
}

/// The future of [`Endpoint::wait_idle`].
pub struct WaitIdle {
    inner: Arc<Inner>,
}

impl Future for WaitIdle {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // A failed runtime's connections are gone.
        let Ok(mut g) = self.inner.lock() else { return Poll::Ready(()) };
        if g.endpoint.is_empty() {
            return Poll::Ready(());
        }
        // Woken by any connection's change; each is looked at again.
        let handles = g.endpoint.handles();
        for h in handles {
            if let Some(st) = g.conns.get_mut(&h) {
                register(&mut st.general, cx.waker());
            }
        }
        Poll::Pending
    }
}
