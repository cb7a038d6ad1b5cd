//! The interface between the simulator and a simulated endpoint.

use std::any::Any;
use std::net::SocketAddr;

use mpq_proto::Instant;

/// A UDP datagram as it travels through the simulated network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// Source address (one of the sending node's addresses, chosen by the node).
    pub src: SocketAddr,
    /// Destination address.
    pub dst: SocketAddr,
    /// UDP payload.
    pub data: Vec<u8>,
}

/// A simulated endpoint, driven sans-IO style by the [`Simulator`](crate::Simulator).
///
/// After every event that touches a node (a datagram delivery, a timer expiry, a
/// [`wake`](crate::Simulator::wake)), the simulator drains [`poll_transmit`](Node::poll_transmit)
/// until it returns `None` and then re-arms the node's single timer from
/// [`poll_timeout`](Node::poll_timeout).
///
/// The `Any` supertrait lets tests get the concrete type back with
/// [`Simulator::node`](crate::Simulator::node) / [`node_mut`](crate::Simulator::node_mut).
pub trait Node: Any {
    /// A datagram arrived on one of the node's addresses (`to`), sent from `from`.
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, to: SocketAddr, data: &[u8]);
    /// [`handle_datagram`](Node::handle_datagram) with a payload the node may change: the
    /// simulator is done with the datagram, so a node that works on the bytes in place (a
    /// QUIC endpoint decrypts them there) needs no copy of its own. By default, the same.
    fn handle_datagram_in_place(&mut self, now: Instant, from: SocketAddr, to: SocketAddr, data: &mut [u8]) {
        self.handle_datagram(now, from, to, data);
    }
    /// The node's own timer fired (the instant returned by `poll_timeout` was reached).
    fn handle_timeout(&mut self, now: Instant);
    /// Next datagram the node wants to send, with the local source address chosen by the node.
    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram>;
    /// Earliest time the node wants `handle_timeout` to be called, if any.
    fn poll_timeout(&self) -> Option<Instant>;
}
