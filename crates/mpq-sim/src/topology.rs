//! Ready-made networks for multipath experiments: a client and a server joined by parallel
//! paths, or by access links that meet at a shared bottleneck with a competing flow.
//!
//! Addresses (path `i`, for `i < 256`; path 256 and up continue in `10.1.x`, `10.2.x`, ...):
//!
//! | host | address |
//! | --- | --- |
//! | client, interface `i` | `10.0.{i}.1:5000` |
//! | server, interface `i` | `10.0.{i}.2:443` |
//! | competitor client ([`Topology::shared_bottleneck`]) | `10.200.0.1:5000` |
//! | competitor server ([`Topology::shared_bottleneck`]) | `10.200.0.2:443` |
//!
//! The **client address selects the path**: a datagram between client address `i` and any
//! server address crosses path `i`, in both directions. So the network behaves the same
//! whether the server answers from the address a path was opened to or from its default one.
//!
//! # Example
//!
//! ```
//! use mpq_proto::Instant;
//! use mpq_sim::topology::Topology;
//! use std::time::Duration;
//!
//! let links = ["50mbit/20ms".parse().unwrap(), "10mbit/180ms".parse().unwrap()];
//! let mut topo = Topology::parallel(&links, 7);
//! assert_eq!(topo.paths[1].client.to_string(), "10.0.1.1:5000");
//! assert_eq!(topo.paths[1].server.to_string(), "10.0.1.2:443");
//! // Path 0 loses everything from 3 s on, in both directions.
//! topo.fail_path(0, Instant::ZERO + Duration::from_secs(3));
//! ```

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use mpq_proto::Instant;

use crate::link::{LinkConfig, LinkEvent};
use crate::nat::{Nat, NatId};
use crate::node::Node;
use crate::quic::{QuicNode, SimApp};
use crate::sim::{LinkId, NodeId, Simulator};

/// Client port on every client interface.
pub const CLIENT_PORT: u16 = 5000;
/// Server port on every server interface.
pub const SERVER_PORT: u16 = 443;

/// Client address of path `i`.
pub fn client_addr(i: usize) -> SocketAddr {
    host(i, 1, CLIENT_PORT)
}

/// Server address of path `i`.
pub fn server_addr(i: usize) -> SocketAddr {
    host(i, 2, SERVER_PORT)
}

fn host(i: usize, last: u8, port: u16) -> SocketAddr {
    let hi = u8::try_from((i >> 8) & 0xff).unwrap_or(u8::MAX);
    let lo = (i & 0xff) as u8;
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, hi, lo, last), port))
}

/// One path of a [`Topology`]: its two end addresses and the links it crosses.
#[derive(Debug, Clone, PartialEq)]
pub struct TopoPath {
    /// The client's address on this path.
    pub client: SocketAddr,
    /// The server's address on this path.
    pub server: SocketAddr,
    /// Links from client to server, in order.
    pub up: Vec<LinkId>,
    /// Links from server to client, in order.
    pub down: Vec<LinkId>,
    /// The links only this path uses, `(client→server, server→client)`: failing them fails
    /// this path and nothing else.
    pub own: (LinkId, LinkId),
}

/// A simulator pre-wired with hosts' addresses and links, ready for nodes.
///
/// Build it, add nodes with [`add_client`](Self::add_client) /
/// [`add_server`](Self::add_server) (which give them their addresses), then run
/// [`sim`](Self::sim).
pub struct Topology {
    /// The simulator (no nodes yet when built).
    pub sim: Simulator,
    /// The paths between the client and the server, path 0 first (the handshake path).
    pub paths: Vec<TopoPath>,
    /// The single-path competitor's path ([`shared_bottleneck`](Self::shared_bottleneck) only).
    pub competitor: Option<TopoPath>,
    /// The shared bottleneck `(client→server, server→client)`
    /// ([`shared_bottleneck`](Self::shared_bottleneck) only).
    pub bottleneck: Option<(LinkId, LinkId)>,
}

impl Topology {
    /// A client and a server joined by one symmetric link per entry of `links` (the same
    /// config in both directions, so `"50mbit/20ms"` is a 20 ms RTT path). Random processes
    /// are seeded with `seed`.
    pub fn parallel(links: &[LinkConfig], seed: u64) -> Topology {
        let mut sim = Simulator::new(seed);
        let mut paths = Vec::with_capacity(links.len());
        for (i, cfg) in links.iter().enumerate() {
            let up = sim.add_link(cfg.clone());
            let down = sim.add_link(cfg.clone());
            paths.push(TopoPath {
                client: client_addr(i),
                server: server_addr(i),
                up: vec![up],
                down: vec![down],
                own: (up, down),
            });
        }
        let mut topo = Topology { sim, paths, competitor: None, bottleneck: None };
        topo.route_paths();
        topo
    }

    /// A multipath client whose access links (one per entry of `access`, symmetric) all lead
    /// into one shared `bottleneck` (symmetric too), behind which sits the server; and a
    /// single-path competitor client, on its own `competitor_access` link, downloading from
    /// its own server through the same bottleneck. A path's RTT is its access RTT plus the
    /// bottleneck's. For the bottleneck to be the bottleneck, make the access links faster.
    pub fn shared_bottleneck(
        access: &[LinkConfig],
        bottleneck: LinkConfig,
        competitor_access: LinkConfig,
        seed: u64,
    ) -> Topology {
        let mut sim = Simulator::new(seed);
        let bn_up = sim.add_link(bottleneck.clone());
        let bn_down = sim.add_link(bottleneck);
        let mut paths = Vec::with_capacity(access.len());
        for (i, cfg) in access.iter().enumerate() {
            let up = sim.add_link(cfg.clone());
            let down = sim.add_link(cfg.clone());
            paths.push(TopoPath {
                client: client_addr(i),
                server: server_addr(i),
                up: vec![up, bn_up],
                down: vec![bn_down, down],
                own: (up, down),
            });
        }
        let c_up = sim.add_link(competitor_access.clone());
        let c_down = sim.add_link(competitor_access);
        let competitor = TopoPath {
            client: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 200, 0, 1), CLIENT_PORT)),
            server: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 200, 0, 2), SERVER_PORT)),
            up: vec![c_up, bn_up],
            down: vec![bn_down, c_down],
            own: (c_up, c_down),
        };
        sim.connect_via(competitor.client, competitor.server, &competitor.up, &competitor.down);
        let mut topo = Topology { sim, paths, competitor: Some(competitor), bottleneck: Some((bn_up, bn_down)) };
        topo.route_paths();
        topo
    }

    /// Routes every (client address, server address) pair over the client address's path.
    fn route_paths(&mut self) {
        for p in &self.paths {
            for s in self.paths.iter().map(|q| q.server) {
                self.sim.connect_via(p.client, s, &p.up, &p.down);
            }
        }
    }

    /// The client's addresses, path order.
    pub fn client_addrs(&self) -> Vec<SocketAddr> {
        self.paths.iter().map(|p| p.client).collect()
    }

    /// The server's addresses, path order.
    pub fn server_addrs(&self) -> Vec<SocketAddr> {
        self.paths.iter().map(|p| p.server).collect()
    }

    /// `(client, server)` address pairs of the paths after the first: what a multipath client
    /// opens once the handshake (on path 0) completes.
    pub fn extra_path_pairs(&self) -> Vec<(SocketAddr, SocketAddr)> {
        self.paths.iter().skip(1).map(|p| (p.client, p.server)).collect()
    }

    /// Adds the client host and gives it every client address.
    pub fn add_client<N: Node>(&mut self, node: N) -> NodeId {
        let id = self.sim.add_node(node);
        for a in self.client_addrs() {
            self.sim.add_address(id, a);
        }
        id
    }

    /// Adds the server host and gives it every server address.
    pub fn add_server<N: Node>(&mut self, node: N) -> NodeId {
        let id = self.sim.add_node(node);
        for a in self.server_addrs() {
            self.sim.add_address(id, a);
        }
        id
    }

    /// A [`QuicNode`] for the client: default address on path 0, one local address per path.
    pub fn client_node<A: SimApp>(&self, endpoint: mpq_proto::endpoint::Endpoint, app: A) -> QuicNode<A> {
        Self::quic_node(endpoint, app, self.client_addrs())
    }

    /// A [`QuicNode`] for the server: default address on path 0, one local address per path.
    pub fn server_node<A: SimApp>(&self, endpoint: mpq_proto::endpoint::Endpoint, app: A) -> QuicNode<A> {
        Self::quic_node(endpoint, app, self.server_addrs())
    }

    fn quic_node<A: SimApp>(endpoint: mpq_proto::endpoint::Endpoint, app: A, addrs: Vec<SocketAddr>) -> QuicNode<A> {
        let mut it = addrs.into_iter();
        // A topology always has a first path to default to, except an empty one: fall back
        // to an unroutable address rather than panic.
        let first = it.next().unwrap_or_else(|| client_addr(0));
        let mut node = QuicNode::new(endpoint, app, first);
        for a in it {
            node.add_local(a);
        }
        node
    }

    /// Adds the competitor's client host.
    ///
    /// # Panics
    /// If the topology has no competitor (only [`shared_bottleneck`](Self::shared_bottleneck)
    /// has one).
    pub fn add_competitor_client<N: Node>(&mut self, node: N) -> NodeId {
        let addr = self.competitor.as_ref().expect("this topology has no competitor").client;
        let id = self.sim.add_node(node);
        self.sim.add_address(id, addr);
        id
    }

    /// Adds the competitor's server host.
    ///
    /// # Panics
    /// If the topology has no competitor.
    pub fn add_competitor_server<N: Node>(&mut self, node: N) -> NodeId {
        let addr = self.competitor.as_ref().expect("this topology has no competitor").server;
        let id = self.sim.add_node(node);
        self.sim.add_address(id, addr);
        id
    }

    /// NAT rebinding of path `path`'s client address: from `at` on the server sees the
    /// client's datagrams on that path coming from `outside` (e.g. the same IP with another
    /// port), and only datagrams sent to `outside` reach the client, which keeps its own
    /// address (see [`crate::nat`]). The new address is routed over the same links as the
    /// path. Call again for further rebindings of the same path, later in time.
    ///
    /// # Panics
    /// If there is no such path, `at` is not after the path's previous rebinding, or
    /// `outside` was used before.
    pub fn rebind(&mut self, path: usize, at: Instant, outside: SocketAddr) -> NatId {
        let p = self.paths[path].clone();
        for s in self.server_addrs() {
            self.sim.connect_via(outside, s, &p.up, &p.down);
        }
        match self.sim.nat_of(p.client) {
            Some(id) => {
                self.sim.rebind_nat(id, at, outside);
                id
            }
            None => self.sim.add_nat(Nat::new(p.client, p.client).rebind_at(at, outside)),
        }
    }

    /// Makes `link` lose every packet offered from `at` on (packets already on the wire still
    /// arrive): a radio link that went out of range, as in the handover experiment of
    /// "Multipath QUIC: Design and Evaluation" (CoNEXT 2017, §4.3).
    pub fn fail_link(&mut self, link: LinkId, at: Instant) {
        self.sim.schedule(at, link, LinkEvent::Blackhole);
    }

    /// Fails both directions of path `path`'s own links from `at` on (see
    /// [`fail_link`](Self::fail_link)); a shared bottleneck is left alone.
    ///
    /// # Panics
    /// If there is no such path.
    pub fn fail_path(&mut self, path: usize, at: Instant) {
        let (up, down) = self.paths[path].own;
        self.fail_link(up, at);
        self.fail_link(down, at);
    }

    /// Takes both directions of path `path`'s own links down from `from` to `to` (packets
    /// queued or in flight when they go down are lost; see [`LinkEvent::Down`]), then brings
    /// them back up.
    ///
    /// # Panics
    /// If there is no such path.
    pub fn outage(&mut self, path: usize, from: Instant, to: Instant) {
        let (up, down) = self.paths[path].own;
        for l in [up, down] {
            self.sim.schedule(from, l, LinkEvent::Down);
            self.sim.schedule(to, l, LinkEvent::Up);
        }
    }
}
