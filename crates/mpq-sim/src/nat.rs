//! Network address translation with scripted rebinding: a host's address, as the rest of the
//! network sees it, changes at given times (a NAT that lost its mapping and picked a new
//! port, or a new public address).
//!
//! A [`Nat`] sits at the edge of the host that owns its `inside` address:
//!
//! - **outbound**: a datagram the host sends from `inside` leaves with the source address the
//!   NAT maps it to at that moment ([`Nat::outside_at`]), and is routed as coming from there;
//! - **inbound**: a datagram arriving for the current outside address is delivered to
//!   `inside`; one arriving for an outside address the NAT used before (or will use later) is
//!   dropped, as a NAT that forgot the old mapping does.
//!
//! The host itself never sees its outside address: its socket stays bound to `inside`. Install
//! NATs with [`Simulator::add_nat`](crate::Simulator::add_nat), and give the simulator routes
//! for every outside address (e.g. [`Topology::rebind`](crate::topology::Topology::rebind)).
//! The mapping is a pure function of time, so runs stay deterministic.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use mpq_proto::Instant;
//! use mpq_sim::nat::Nat;
//!
//! let inside = "10.0.0.1:5000".parse().unwrap();
//! let t = Instant::ZERO + Duration::from_secs(2);
//! // The host is seen as itself until 2 s, then from port 6000.
//! let nat = Nat::new(inside, inside).rebind_at(t, "10.0.0.1:6000".parse().unwrap());
//! assert_eq!(nat.outside_at(Instant::ZERO), inside);
//! assert_eq!(nat.outside_at(t).port(), 6000);
//! ```

use std::net::SocketAddr;

use mpq_proto::Instant;

/// Handle of a NAT added with [`Simulator::add_nat`](crate::Simulator::add_nat).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NatId(pub(crate) u32);

/// Counters of one [`Nat`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NatStats {
    /// Datagrams from `inside` sent out under a translated (or identical) address.
    pub outbound: u64,
    /// Datagrams to the current outside address delivered to `inside`.
    pub inbound: u64,
    /// Datagrams to a stale (or not yet used) outside address, dropped.
    pub dropped_stale: u64,
    /// Bytes of `inbound`, per mapping (index into [`Nat::mappings`]).
    pub inbound_bytes: Vec<u64>,
    /// Bytes of `outbound`, per mapping.
    pub outbound_bytes: Vec<u64>,
}

/// What a NAT does with an arriving datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Inbound {
    /// Not addressed to this NAT.
    NotMine,
    /// Deliver to this (inside) address.
    To(SocketAddr),
    /// Addressed to an outside address this NAT does not map now: drop.
    Stale,
}

/// One host address behind a NAT whose mapping changes at scripted times; see the
/// [module docs](self).
#[derive(Clone, Debug, PartialEq)]
pub struct Nat {
    inside: SocketAddr,
    /// `(from, outside)`, sorted by time; the first starts at [`Instant::ZERO`].
    mappings: Vec<(Instant, SocketAddr)>,
    /// Counters.
    pub stats: NatStats,
}

impl Nat {
    /// `inside` is seen as `outside` from the start (`outside == inside` for a host that is
    /// not translated until its first rebinding).
    pub fn new(inside: SocketAddr, outside: SocketAddr) -> Self {
        Self {
            inside,
            mappings: vec![(Instant::ZERO, outside)],
            stats: NatStats { inbound_bytes: vec![0], outbound_bytes: vec![0], ..NatStats::default() },
        }
    }

    /// From `at` on, `inside` is seen as `outside`, and the previous outside address no
    /// longer reaches it.
    ///
    /// # Panics
    /// If `at` is not after the previous rebinding, or `outside` was already used by this
    /// NAT (a stale address must stay recognisable as stale).
    pub fn rebind_at(mut self, at: Instant, outside: SocketAddr) -> Self {
        self.push_mapping(at, outside);
        self
    }

    pub(crate) fn push_mapping(&mut self, at: Instant, outside: SocketAddr) {
        let (last, _) = *self.mappings.last().expect("a NAT always has a mapping");
        assert!(at > last, "rebindings must be in time order ({at:?} after {last:?})");
        assert!(self.mappings.iter().all(|&(_, o)| o != outside), "outside address {outside} reused");
        self.mappings.push((at, outside));
        self.stats.inbound_bytes.push(0);
        self.stats.outbound_bytes.push(0);
    }

    /// The translated host's own address.
    pub fn inside(&self) -> SocketAddr {
        self.inside
    }

    /// Every mapping: from when, which outside address.
    pub fn mappings(&self) -> &[(Instant, SocketAddr)] {
        &self.mappings
    }

    fn index_at(&self, t: Instant) -> usize {
        self.mappings.partition_point(|&(from, _)| from <= t).saturating_sub(1)
    }

    /// The outside address of `inside` at time `t`.
    pub fn outside_at(&self, t: Instant) -> SocketAddr {
        self.mappings[self.index_at(t)].1
    }

    /// Source address for a datagram `inside` sends at `now` (`None`: not from `inside`).
    pub(crate) fn outbound(&mut self, now: Instant, src: SocketAddr, len: usize) -> Option<SocketAddr> {
        if src != self.inside {
            return None;
        }
        let i = self.index_at(now);
        self.stats.outbound += 1;
        self.stats.outbound_bytes[i] += len as u64;
        Some(self.mappings[i].1)
    }

    /// Fate of a datagram for `dst` arriving at `now`.
    pub(crate) fn inbound(&mut self, now: Instant, dst: SocketAddr, len: usize) -> Inbound {
        let i = self.index_at(now);
        if dst == self.mappings[i].1 {
            self.stats.inbound += 1;
            self.stats.inbound_bytes[i] += len as u64;
            return Inbound::To(self.inside);
        }
        if self.mappings.iter().any(|&(_, o)| o == dst) {
            self.stats.dropped_stale += 1;
            return Inbound::Stale;
        }
        Inbound::NotMine
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::node::{Datagram, Node};
    use crate::{LinkConfig, Simulator};

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn at_ms(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn mapping_follows_the_schedule() {
        let inside = a("10.0.0.1:5000");
        let mut nat = Nat::new(inside, inside).rebind_at(at_ms(100), a("10.0.0.1:6000"));
        assert_eq!(nat.outside_at(at_ms(99)), inside);
        assert_eq!(nat.outside_at(at_ms(100)), a("10.0.0.1:6000"));
        assert_eq!(nat.outbound(at_ms(0), inside, 10), Some(inside));
        assert_eq!(nat.outbound(at_ms(150), inside, 10), Some(a("10.0.0.1:6000")));
        assert_eq!(nat.outbound(at_ms(150), a("10.0.0.9:1"), 10), None);
        // Before the rebinding the new port is not mapped; after it the old one is not.
        assert_eq!(nat.inbound(at_ms(50), a("10.0.0.1:6000"), 10), Inbound::Stale);
        assert_eq!(nat.inbound(at_ms(50), inside, 10), Inbound::To(inside));
        assert_eq!(nat.inbound(at_ms(150), inside, 10), Inbound::Stale);
        assert_eq!(nat.inbound(at_ms(150), a("10.0.0.1:6000"), 7), Inbound::To(inside));
        assert_eq!(nat.inbound(at_ms(150), a("10.0.0.2:443"), 10), Inbound::NotMine);
        assert_eq!(nat.stats.dropped_stale, 2);
        assert_eq!(nat.stats.inbound_bytes, [10, 7]);
        assert_eq!(nat.stats.outbound_bytes, [10, 10]);
    }

    #[test]
    #[should_panic(expected = "reused")]
    fn an_outside_address_cannot_come_back() {
        let inside = a("10.0.0.1:5000");
        let _ = Nat::new(inside, inside).rebind_at(at_ms(1), a("10.0.0.1:6000")).rebind_at(at_ms(2), inside);
    }

    /// Sends one datagram to `peer` every 10 ms and records where answers come from.
    struct Client {
        me: SocketAddr,
        peer: SocketAddr,
        next: Instant,
        got: Vec<(Instant, SocketAddr, SocketAddr)>,
    }

    impl Node for Client {
        fn handle_datagram(&mut self, now: Instant, from: SocketAddr, to: SocketAddr, _: &[u8]) {
            self.got.push((now, from, to));
        }
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
            if now < self.next || now >= at_ms(200) {
                return None;
            }
            self.next = now + Duration::from_millis(10);
            Some(Datagram { src: self.me, dst: self.peer, data: vec![0; 100] })
        }
        fn poll_timeout(&self) -> Option<Instant> {
            Some(self.next).filter(|&t| t < at_ms(200))
        }
    }

    /// Answers every datagram to the address it came from, and records that address.
    #[derive(Default)]
    struct Echo {
        seen: Vec<(Instant, SocketAddr)>,
        out: Vec<Datagram>,
    }

    impl Node for Echo {
        fn handle_datagram(&mut self, now: Instant, from: SocketAddr, to: SocketAddr, data: &[u8]) {
            self.seen.push((now, from));
            self.out.push(Datagram { src: to, dst: from, data: data.to_vec() });
        }
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_transmit(&mut self, _: Instant) -> Option<Datagram> {
            self.out.pop()
        }
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
    }

    /// Both directions through a rebinding NAT in the simulator: the server sees the new
    /// source from the rebinding on, answers reach the client at its own address, and
    /// answers in flight to the old mapping are lost.
    #[test]
    fn rebinding_in_the_simulator() {
        let (inside, new_out, server) = (a("10.0.0.1:5000"), a("10.0.0.1:6000"), a("10.0.0.2:443"));
        let mut sim = Simulator::new(1);
        let c = sim.add_node(Client { me: inside, peer: server, next: Instant::ZERO, got: vec![] });
        let s = sim.add_node(Echo::default());
        sim.add_address(c, inside);
        sim.add_address(s, server);
        // 10 ms each way, no serialization. Requests go out every 10 ms; from the rebinding
        // at 95 ms on, they leave from the new port. The answers to the requests of 80 and
        // 90 ms reach the NAT at 100 and 110 ms, addressed to the old mapping: dropped.
        let link = LinkConfig::new(0, Duration::from_millis(10));
        let (up, down) = sim.connect_symmetric(inside, server, link);
        sim.connect_via(new_out, server, &[up], &[down]);
        let nat = sim.add_nat(Nat::new(inside, inside).rebind_at(at_ms(95), new_out));
        sim.run_until(at_ms(400));

        let echo = sim.node::<Echo>(s);
        assert_eq!(echo.seen.len(), 20);
        for &(t, from) in &echo.seen {
            let expect = if t <= at_ms(100) { inside } else { new_out };
            assert_eq!(from, expect, "at {t:?}");
        }
        let client = sim.node::<Client>(c);
        assert_eq!(client.got.len(), 18, "{:?}", client.got);
        assert!(client.got.iter().all(|&(_, from, to)| from == server && to == inside));
        assert!(!client.got.iter().any(|&(t, ..)| t == at_ms(100) || t == at_ms(110)));
        let st = &sim.nat(nat).stats;
        assert_eq!((st.outbound, st.inbound, st.dropped_stale), (20, 18, 2));
        assert_eq!(st.inbound_bytes, [800, 1000]);
        assert_eq!(st.outbound_bytes, [1000, 1000]);
        assert_eq!(sim.stats().nat_dropped, 2);
    }
}
