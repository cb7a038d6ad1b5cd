//! Multi-address nodes, multiple paths, shared bottlenecks, node access.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use mpq_proto::Instant;
use mpq_sim::{Datagram, LinkConfig, LinkEvent, Node, Simulator};

#[test]
fn two_paths_through_one_bottleneck_share_its_rate() {
    let (c1, c2, s) = (addr("10.0.1.1:1"), addr("10.0.2.1:1"), addr("10.0.0.1:443"));
    let mut sim = Simulator::new(1);
    let n1 = sim.add_node(Sender::burst(c1, s, 500, 1250));
    let n2 = sim.add_node(Sender::burst(c2, s, 500, 1250));
    let srv = sim.add_node(Sink::default());
    sim.add_address(n1, c1);
    sim.add_address(n2, c2);
    sim.add_address(srv, s);
    // Fast access links (0.1 ms per packet, 1 ms one-way) into a 10 Mbit/s bottleneck.
    let acc1 = sim.add_link("100mbit/2ms".parse().unwrap());
    let acc2 = sim.add_link("100mbit/2ms".parse().unwrap());
    let bn = sim.add_link("10mbit/20ms".parse().unwrap());
    let back = sim.add_link("100mbit/20ms".parse().unwrap());
    sim.connect_via(c1, s, &[acc1, bn], &[back]);
    sim.connect_via(c2, s, &[acc2, bn], &[back]);

    sim.run_until(at_ms(511));
    let rx = &sim.node::<Sink>(srv).rx;
    let from1 = rx.iter().filter(|r| r.from == c1).count();
    let from2 = rx.iter().filter(|r| r.from == c2).count();
    // ~1 packet per ms through the bottleneck in total, split evenly.
    assert!((495..=500).contains(&(from1 + from2)), "{from1} + {from2}");
    assert!(from1.abs_diff(from2) <= 1, "{from1} vs {from2}");

    sim.run_until(at_ms(5000));
    let rx = &sim.node::<Sink>(srv).rx;
    assert_eq!(rx.len(), 1000);
    let last = rx.last().unwrap().at;
    // 1000 packets at 1 ms each behind a 1.1 ms access hop, plus 10 ms propagation.
    assert!(last >= at_ms(1010) && last <= at_ms(1012), "{last:?}");
    assert_eq!(sim.link_stats(bn).delivered_packets, 1000);
    assert_eq!(sim.link_stats(acc1).delivered_packets, 500);
}

/// A client that sends one datagram per ms alternately from each of its addresses to each
/// server address (a crude two-path scheduler), and counts echoes per path.
struct TwoPathClient {
    paths: Vec<(SocketAddr, SocketAddr)>,
    next: Instant,
    sent: u32,
    count: u32,
    echoes: Vec<u32>,
}

impl Node for TwoPathClient {
    fn handle_datagram(&mut self, _: Instant, from: SocketAddr, to: SocketAddr, _: &[u8]) {
        let i = self.paths.iter().position(|&p| p == (to, from)).unwrap();
        self.echoes[i] += 1;
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        if self.sent == self.count || now < self.next {
            return None;
        }
        let (src, dst) = self.paths[self.sent as usize % self.paths.len()];
        self.sent += 1;
        self.next += ms(1);
        let mut data = vec![0; 1200];
        data[..4].copy_from_slice(&self.sent.to_le_bytes());
        Some(Datagram { src, dst, data })
    }
    fn poll_timeout(&self) -> Option<Instant> {
        (self.sent < self.count).then_some(self.next)
    }
}

#[test]
fn two_path_client_with_failing_path() {
    let (c_wifi, c_lte) = (addr("192.168.1.2:5000"), addr("10.64.0.2:5000"));
    let (s1, s2) = (addr("203.0.113.1:443"), addr("203.0.113.2:443"));
    let mut sim = Simulator::new(9);
    let client = sim.add_node(TwoPathClient {
        paths: vec![(c_wifi, s1), (c_lte, s2)],
        next: Instant::ZERO,
        sent: 0,
        count: 1000,
        echoes: vec![0, 0],
    });
    let server = sim.add_node(Echo::default());
    sim.add_address(client, c_wifi);
    sim.add_address(client, c_lte);
    sim.add_address(server, s1);
    sim.add_address(server, s2);
    let (wifi_up, _) = sim.connect_symmetric(c_wifi, s1, "50mbit/20ms".parse().unwrap());
    sim.connect_symmetric(c_lte, s2, "10mbit/80ms/loss=0%".parse().unwrap());
    sim.schedule(at_ms(500), wifi_up, LinkEvent::Down);
    sim.run_until(at_ms(3000));
    let echoes = &sim.node::<TwoPathClient>(client).echoes;
    // Wi-Fi carried even-numbered sends up to its failure at 500 ms (minus those in flight).
    assert!((240..=250).contains(&echoes[0]), "{echoes:?}");
    assert_eq!(echoes[1], 500);
    assert!(sim.link_stats(wifi_up).dropped_down >= 250);
}

#[test]
fn with_node_wakes_the_node() {
    let (a, b) = (addr("10.0.0.1:1"), addr("10.0.0.2:1"));
    let mut sim = Simulator::new(1);
    let s = sim.add_node(Sender::burst(a, b, 0, 100));
    let r = sim.add_node(Sink::default());
    sim.add_address(s, a);
    sim.add_address(r, b);
    sim.connect_symmetric(a, b, LinkConfig::new(0, ms(5)));
    sim.run_until(at_ms(100));
    assert!(sim.node::<Sink>(r).rx.is_empty());
    // Nothing pending: the simulator is idle until told otherwise.
    assert_eq!(sim.next_event_time(), None);
    sim.with_node(s, |n: &mut Sender| {
        n.count = 3;
        n.next = at_ms(100);
    });
    sim.run_until(at_ms(200));
    let rx = &sim.node::<Sink>(r).rx;
    assert_eq!(rx.len(), 3);
    assert!(rx.iter().all(|x| x.at == at_ms(105)));
}

/// A node whose deadline keeps moving: only the latest one may fire.
struct Rearm {
    deadline: Option<Instant>,
    fired: Vec<Instant>,
}

impl Node for Rearm {
    fn handle_datagram(&mut self, now: Instant, _: SocketAddr, _: SocketAddr, _: &[u8]) {
        // Each datagram pushes the deadline 50 ms out.
        self.deadline = Some(now + ms(50));
    }
    fn handle_timeout(&mut self, now: Instant) {
        assert!(self.deadline.is_some_and(|d| d <= now), "fired early or stale");
        self.fired.push(now);
        self.deadline = None;
    }
    fn poll_transmit(&mut self, _: Instant) -> Option<Datagram> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }
}

#[test]
fn stale_timers_are_ignored() {
    let (a, b) = (addr("10.0.0.1:1"), addr("10.0.0.2:1"));
    let mut sim = Simulator::new(1);
    let s = sim.add_node(Sender::paced(a, b, 10, 100, ms(10)));
    let r = sim.add_node(Rearm { deadline: None, fired: vec![] });
    sim.add_address(s, a);
    sim.add_address(r, b);
    sim.connect_symmetric(a, b, LinkConfig::new(0, ms(1)));
    sim.run_until(at_ms(1000));
    // Datagrams arrive at 1, 11, ..., 91 ms; only the last deadline (141 ms) fires.
    assert_eq!(sim.node::<Rearm>(r).fired, [at_ms(141)]);
}

#[test]
fn run_while_stops_on_condition_or_time() {
    let (a, b) = (addr("10.0.0.1:1"), addr("10.0.0.2:1"));
    let mut sim = Simulator::new(1);
    let s = sim.add_node(Sender::paced(a, b, 100, 100, ms(1)));
    let r = sim.add_node(Sink::default());
    sim.add_address(s, a);
    sim.add_address(r, b);
    sim.connect_symmetric(a, b, LinkConfig::new(0, ms(10)));
    let done = sim.run_while(|sim| sim.node::<Sink>(r).rx.len() < 50, at_ms(1000));
    assert!(done);
    assert_eq!(sim.now(), at_ms(59));
    let done = sim.run_while(|sim| sim.node::<Sink>(r).rx.len() < 1000, at_ms(500));
    assert!(!done);
    assert_eq!(sim.now(), at_ms(500));
    assert_eq!(sim.node::<Sink>(r).rx.len(), 100);
}

#[test]
fn bulk_transfer_is_cheap() {
    // ~50 MB each way in 1250-byte datagrams over a 1 Gbit/s path with echoes: the event
    // count stays proportional to the packet count.
    let (a, b) = (addr("10.0.0.1:1"), addr("10.0.0.2:1"));
    let mut sim = Simulator::new(1);
    let n = 40_000;
    let s = sim.add_node(Sender::paced(a, b, n, 1250, Duration::from_micros(10)));
    let e = sim.add_node(Echo::default());
    sim.add_address(s, a);
    sim.add_address(e, b);
    sim.connect_symmetric(a, b, "1gbit/20ms/queue=1mb".parse().unwrap());
    sim.run_until(at_ms(2000));
    assert_eq!(sim.stats().delivered, 2 * u64::from(n));
    assert!(sim.stats().events <= 3 * u64::from(n) + 10, "{}", sim.stats().events);
}

/// A buggy node that never advances its deadline.
struct Stuck;

impl Node for Stuck {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: SocketAddr, _: &[u8]) {}
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_transmit(&mut self, _: Instant) -> Option<Datagram> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Some(at_ms(5))
    }
}

#[test]
#[should_panic(expected = "without making progress")]
fn a_node_stuck_on_one_instant_panics_instead_of_hanging() {
    let mut sim = Simulator::new(1);
    sim.add_node(Stuck);
    sim.run_until(at_ms(10));
}
