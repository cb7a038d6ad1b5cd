//! A QUIC [`Endpoint`] as a simulator [`Node`], driven by a small application ([`SimApp`]).
//!
//! The endpoint is the real protocol code; the node only converts between the simulator's
//! datagrams and the endpoint's transmits (splitting GSO batches into datagrams).

use std::collections::VecDeque;
use std::net::SocketAddr;

use mpq_proto::endpoint::Endpoint;
use mpq_proto::Instant;

use crate::node::{Datagram, Node};

/// Application logic run on top of a simulated endpoint.
pub trait SimApp: 'static {
    /// Called after every input (datagram, timeout): accept connections, read and write
    /// streams, drain events.
    fn poll(&mut self, now: Instant, endpoint: &mut Endpoint);
}

/// A simulated host running one QUIC endpoint and one application.
pub struct QuicNode<A: SimApp> {
    /// The protocol endpoint.
    pub endpoint: Endpoint,
    /// The application.
    pub app: A,
    /// Source address of everything the node sends.
    pub local: SocketAddr,
    queue: VecDeque<Datagram>,
    buf: Vec<u8>,
    timeout: Option<Instant>,
    started: bool,
}

impl<A: SimApp> QuicNode<A> {
    /// A node sending from `local`.
    pub fn new(endpoint: Endpoint, app: A, local: SocketAddr) -> Self {
        Self {
            endpoint,
            app,
            local,
            queue: VecDeque::new(),
            buf: Vec::with_capacity(65536),
            timeout: None,
            started: false,
        }
    }

    fn after_input(&mut self, now: Instant) {
        self.app.poll(now, &mut self.endpoint);
        self.timeout = self.endpoint.poll_timeout();
    }
}

impl<A: SimApp> Node for QuicNode<A> {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, to: SocketAddr, data: &[u8]) {
        let mut d = data.to_vec();
        self.endpoint.handle_datagram(now, to, from, None, &mut d);
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
                Some(t) => {
                    let seg = t.segment_size.unwrap_or(t.size).max(1);
                    for d in self.buf[..t.size].chunks(seg) {
                        self.queue.push_back(Datagram {
                            src: t.source.unwrap_or(self.local),
                            dst: t.destination,
                            data: d.to_vec(),
                        });
                    }
                }
                None => {
                    // Sending changes timers (PTO, pacing): re-arm once the burst is over.
                    self.app.poll(now, &mut self.endpoint);
                    self.timeout = self.endpoint.poll_timeout();
                    if let Some(t) = self.endpoint.poll_transmit(now, &mut self.buf) {
                        let seg = t.segment_size.unwrap_or(t.size).max(1);
                        for d in self.buf[..t.size].chunks(seg) {
                            self.queue.push_back(Datagram {
                                src: t.source.unwrap_or(self.local),
                                dst: t.destination,
                                data: d.to_vec(),
                            });
                        }
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
