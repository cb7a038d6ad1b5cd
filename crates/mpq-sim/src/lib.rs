//! Deterministic discrete-event network simulator (virtual time, seeded RNG) that runs the
//! real mpq protocol code.
//!
//! - [`Node`]: what a simulated endpoint implements (sans-IO: datagrams and timeouts in,
//!   datagrams out).
//! - [`LinkConfig`]: one direction of a link (rate, delay, jitter, tail-drop queue, loss,
//!   duplication, reordering, MTU), parseable from strings like `"10mbit/180ms/loss=1%/queue=100ms"`
//!   (the delay in a string is the RTT; each direction gets half).
//! - [`Simulator`]: nodes with addresses, routes `(src, dst) → [links]` (links may be shared,
//!   e.g. a bottleneck), scripted [`LinkEvent`]s, and a virtual clock.
//! - [`QuicNode`]: the real QUIC endpoint as a node, with one or more local addresses, driven
//!   by a [`SimApp`] ([`apps`]: download and request/response clients, their server).
//! - [`topology`]: ready-made multipath networks (parallel paths, shared bottleneck).
//! - [`nat`]: address translation with scripted rebinding (a NAT that changes a host's port).
//! - [`bottleneck`]: a scenario's shared bottleneck and competing flow.
//! - [`qlog_file`]: qlog files (JSON-SEQ), one per connection (`mpq sim --qlog-dir`, `mpq lab run --qlog`).
//! - [`scenario`]: one-call experiments returning a JSON-serializable result (`mpq sim`).
//!
//! # Example
//!
//! ```
//! use std::net::SocketAddr;
//! use std::time::Duration;
//! use mpq_proto::Instant;
//! use mpq_sim::{Datagram, LinkConfig, Node, Simulator};
//!
//! /// Sends one datagram at start and counts what it receives.
//! struct Toy { me: SocketAddr, peer: SocketAddr, pending: bool, got: Vec<Instant> }
//!
//! impl Node for Toy {
//!     fn handle_datagram(&mut self, now: Instant, _: SocketAddr, _: SocketAddr, _: &[u8]) {
//!         self.got.push(now);
//!     }
//!     fn handle_timeout(&mut self, _now: Instant) {}
//!     fn poll_transmit(&mut self, _now: Instant) -> Option<Datagram> {
//!         std::mem::take(&mut self.pending)
//!             .then(|| Datagram { src: self.me, dst: self.peer, data: vec![0; 1250] })
//!     }
//!     fn poll_timeout(&self) -> Option<Instant> { None }
//! }
//!
//! let a: SocketAddr = "10.0.0.1:4433".parse().unwrap();
//! let b: SocketAddr = "10.0.0.2:4433".parse().unwrap();
//! let mut sim = Simulator::new(42);
//! let na = sim.add_node(Toy { me: a, peer: b, pending: true, got: vec![] });
//! let nb = sim.add_node(Toy { me: b, peer: a, pending: false, got: vec![] });
//! sim.add_address(na, a);
//! sim.add_address(nb, b);
//! // 10 Mbit/s, 20 ms RTT: 10 ms each way.
//! sim.connect_symmetric(a, b, "10mbit/20ms".parse().unwrap());
//! sim.run_until(Instant::ZERO + Duration::from_secs(1));
//! // 1 ms serialization + 10 ms propagation.
//! assert_eq!(sim.node::<Toy>(nb).got, [Instant::ZERO + Duration::from_millis(11)]);
//! ```

pub mod link;
pub mod nat;
pub mod node;
pub mod sim;
pub mod spec;

pub use link::{DropReason, Fate, Link, LinkConfig, LinkEvent, LinkStats, LossModel, QueueLimit};
pub use nat::{Nat, NatId};
pub use node::{Datagram, Node};
pub use sim::{LinkId, NodeId, SimStats, Simulator};
pub use spec::ParseLinkError;
pub mod apps;
pub mod bottleneck;
pub mod qlog_file;
pub mod quic;
pub mod scenario;
pub mod topology;

pub use quic::{ConnectionHook, QuicNode, SimApp};
