//! A QUIC [`Endpoint`] as a simulator [`Node`], driven by a small application ([`SimApp`]).
//!
//! The endpoint is the real protocol code; the node only converts between the simulator's
//! datagrams and the endpoint's transmits (splitting GSO batches into datagrams) and picks the
//! source address of each transmit among the node's local addresses.

use std::collections::VecDeque;
use std::net::SocketAddr;

use mpq_proto::conn::{Connection, Transmit};
use mpq_proto::endpoint::{ConnectionHandle, Endpoint};
use mpq_proto::Instant;

use crate::node::{Datagram, Node};

/// Application logic run on top of a simulated endpoint.
pub trait SimApp: 'static {
    /// Called after every input (datagram, timeout): accept connections, read and write
    /// streams, drain events.
    fn poll(&mut self, now: Instant, endpoint: &mut Endpoint);

    /// When the application wants [`poll`](Self::poll) to run again even if nothing arrives
    /// (e.g. the next request of a paced workload). The default never asks.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
}

/// Called once for every connection a node's endpoint creates, before it sends anything
/// (e.g. to attach a qlog sink).
pub type ConnectionHook = Box<dyn FnMut(ConnectionHandle, &mut Connection)>;

/// A simulated host running one QUIC endpoint and one application.
///
/// A host may own several addresses ([`add_local`](Self::add_local)), one per interface of a
/// multipath client. Each transmit leaves from the address the endpoint chose
/// ([`Transmit::source`]); `None` means the first local address, the host's default socket.
pub struct QuicNode<A: SimApp> {
    /// The protocol endpoint.
    pub endpoint: Endpoint,
    /// The application.
    pub app: A,
    locals: Vec<SocketAddr>,
    unknown_sources: u64,
    hook: Option<ConnectionHook>,
    /// Connections already given to the hook.
    hooked: Vec<ConnectionHandle>,
    queue: VecDeque<Datagram>,
    buf: Vec<u8>,
    timeout: Option<Instant>,
    started: bool,
}

impl<A: SimApp> QuicNode<A> {
    /// A node whose default (first) local address is `local`.
    pub fn new(endpoint: Endpoint, app: A, local: SocketAddr) -> Self {
        Self {
            endpoint,
            app,
            locals: vec![local],
            unknown_sources: 0,
            hook: None,
            hooked: Vec::new(),
            queue: VecDeque::new(),
            buf: Vec::with_capacity(65536),
            timeout: None,
            started: false,
        }
    }

    /// Adds a local address (an extra interface). The simulator must also be told that the
    /// address belongs to this node ([`Simulator::add_address`](crate::Simulator::add_address))
    /// for datagrams to reach it.
    pub fn add_local(&mut self, addr: SocketAddr) {
        if !self.locals.contains(&addr) {
            self.locals.push(addr);
        }
    }

    /// The node's local addresses, the default one first.
    pub fn locals(&self) -> &[SocketAddr] {
        &self.locals
    }

    /// The default local address, used when a transmit names no source.
    pub fn local(&self) -> SocketAddr {
        self.locals[0]
    }

    /// Transmits whose source address is not one of [`locals`](Self::locals). They are sent
    /// anyway (a real socket would refuse them; here they show up as unroutable unless a
    /// route exists), and counted so that tests can catch a core choosing a wrong source.
    pub fn unknown_sources(&self) -> u64 {
        self.unknown_sources
    }

    /// Installs a hook run once for each connection of the endpoint (see [`ConnectionHook`]).
    /// A client connection reaches it before its first packet; a server connection right
    /// after the datagram that created it.
    pub fn set_connection_hook(&mut self, hook: ConnectionHook) {
        self.hook = Some(hook);
    }

    fn run_hook(&mut self) {
        let Some(hook) = self.hook.as_mut() else { return };
        let handles = self.endpoint.handles();
        // Handles are reused after a connection is dropped: forget the ones that are gone.
        self.hooked.retain(|h| handles.contains(h));
        for h in handles {
            if self.hooked.contains(&h) {
                continue;
            }
            self.hooked.push(h);
            if let Some(c) = self.endpoint.connection_mut(h) {
                hook(h, c);
            }
        }
    }

    /// The application's turn after input. The timer is not re-armed here: the simulator
    /// drains [`poll_transmit`](Node::poll_transmit) after every input before it reads
    /// the timer ([`Node`]'s contract), and the drain's last call re-arms it. A second
    /// reading here was a tenth of a simulated download's instructions.
    fn after_input(&mut self, now: Instant) {
        self.run_hook();
        self.app.poll(now, &mut self.endpoint);
        self.run_hook();
    }

    fn rearm(&mut self) {
        self.timeout = match (self.endpoint.poll_timeout(), self.app.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    fn enqueue(&mut self, t: &Transmit) {
        let src = match t.source {
            None => self.locals[0],
            Some(s) => {
                if !self.locals.contains(&s) {
                    self.unknown_sources += 1;
                }
                s
            }
        };
        let seg = t.segment_size.unwrap_or(t.size).max(1);
        for d in self.buf[..t.size].chunks(seg) {
            self.queue.push_back(Datagram { src, dst: t.destination, data: d.to_vec() });
        }
    }
}

impl<A: SimApp> Node for QuicNode<A> {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, to: SocketAddr, data: &[u8]) {
        self.handle_datagram_in_place(now, from, to, &mut data.to_vec());
    }

    fn handle_datagram_in_place(&mut self, now: Instant, from: SocketAddr, to: SocketAddr, data: &mut [u8]) {
        self.endpoint.handle_datagram(now, to, from, None, data);
        self.after_input(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        self.after_input(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        if !self.started {
            // The first poll lets the application act before any input (e.g. connect).
            self.started = true;
            self.after_input(now);
        }
        if self.queue.is_empty() {
            match self.endpoint.poll_transmit(now, &mut self.buf) {
                Some(t) => self.enqueue(&t),
                None => {
                    // Sending changes timers (PTO, pacing) and may unblock the application
                    // (acknowledged data frees send buffer): let it act, then re-arm once the
                    // burst is over. Every drain ends here, so the timer is always fresh
                    // when the simulator reads it.
                    self.app.poll(now, &mut self.endpoint);
                    self.rearm();
                    if let Some(t) = self.endpoint.poll_transmit(now, &mut self.buf) {
                        self.enqueue(&t);
                    }
                }
            }
        }
        self.queue.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.timeout
    }
}
