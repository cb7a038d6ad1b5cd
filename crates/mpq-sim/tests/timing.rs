//! Serialization, propagation and tail-drop timing.

mod common;

use std::time::Duration;

use common::*;
use mpq_proto::Instant;
use mpq_sim::{LinkConfig, LinkId, NodeId, Simulator};

/// A sender at 10.0.0.1 connected to a sink at 10.0.0.2 by `spec` (both directions).
fn pair(
    spec: &str,
    sender: impl FnOnce(std::net::SocketAddr, std::net::SocketAddr) -> Sender,
) -> (Simulator, NodeId, LinkId) {
    let (a, b) = (addr("10.0.0.1:1"), addr("10.0.0.2:1"));
    let mut sim = Simulator::new(1);
    let s = sim.add_node(sender(a, b));
    let r = sim.add_node(Sink::default());
    sim.add_address(s, a);
    sim.add_address(r, b);
    let (ab, _) = sim.connect_symmetric(a, b, spec.parse().unwrap());
    (sim, r, ab)
}

#[test]
fn burst_arrives_at_line_rate_plus_one_way_delay() {
    let (mut sim, r, ab) = pair("10mbit/20ms", |a, b| Sender::burst(a, b, 1000, 1250));
    sim.run_until(at_ms(5000));
    let rx = &sim.node::<Sink>(r).rx;
    assert_eq!(rx.len(), 1000);
    // 1250 B at 10 Mbit/s = 1 ms each; one-way delay is half the 20 ms RTT.
    assert_eq!(rx[0].at, at_ms(1 + 10));
    let last = rx.last().unwrap().at;
    assert!(last >= at_ms(1009) && last <= at_ms(1011), "last arrival {last:?}");
    assert_eq!(last, at_ms(1010));
    assert!(rx.windows(2).all(|w| w[1].at - w[0].at == ms(1) && w[1].seq == w[0].seq + 1));
    let st = sim.link_stats(ab);
    assert_eq!((st.sent_packets, st.delivered_packets, st.dropped()), (1000, 1000, 0));
    assert_eq!(st.delivered_bytes, 1_250_000);
}

#[test]
fn burst_tail_drop() {
    // The queue counts every packet not yet fully serialized (including the one on the wire).
    for (spec, accepted) in [
        ("10mbit/20ms/queue=64kb", 51),   // floor(64000 / 1250)
        ("10mbit/20ms/queue=100ms", 100), // 10 Mbit/s * 100 ms = 125000 B = 100 packets
        ("10mbit/20ms/queue=10p", 10),
        ("10mbit/20ms/queue=125000b", 100),
    ] {
        let (mut sim, r, ab) = pair(spec, |a, b| Sender::burst(a, b, 1000, 1250));
        sim.run_until(at_ms(5000));
        let rx = &sim.node::<Sink>(r).rx;
        assert_eq!(rx.len(), accepted, "{spec}");
        // Tail drop: the first packets survive.
        assert!(rx.iter().enumerate().all(|(i, r)| r.seq == i as u32), "{spec}");
        let st = sim.link_stats(ab);
        assert_eq!(st.dropped_queue, 1000 - accepted as u64, "{spec}");
        assert_eq!(st.dropped(), st.dropped_queue);
    }
}

#[test]
fn paced_overload_drops_what_a_tail_drop_queue_must() {
    // Offered load 2x the link rate: a packet every 0.5 ms, 1 ms to serialize each.
    let limit = 20;
    let spec = format!("10mbit/20ms/queue={limit}p");
    let (mut sim, r, ab) = pair(&spec, |a, b| Sender::paced(a, b, 1000, 1250, Duration::from_micros(500)));
    sim.run_until(at_ms(5000));

    // Reference model: FIFO server, capacity `limit` packets including the one in service.
    let mut finishes: Vec<u64> = Vec::new(); // in microseconds
    let mut busy = 0u64;
    let mut accepted = Vec::new();
    for i in 0..1000u64 {
        let t = i * 500;
        let backlog = finishes.iter().filter(|&&f| f > t).count();
        if backlog < limit {
            busy = busy.max(t) + 1000;
            finishes.push(busy);
            accepted.push((i as u32, busy + 10_000));
        }
    }
    let rx = &sim.node::<Sink>(r).rx;
    let got: Vec<(u32, u64)> = rx.iter().map(|r| (r.seq, r.at.as_nanos() / 1000)).collect();
    assert_eq!(got, accepted);
    // Sanity: about half of the packets beyond the queue fill are dropped.
    assert!((500..=530).contains(&got.len()), "{}", got.len());
    assert_eq!(sim.link_stats(ab).dropped_queue, 1000 - got.len() as u64);
}

#[test]
fn ping_pong_rtt() {
    let (c, s) = (addr("10.0.0.1:1"), addr("10.0.0.2:1"));
    let mut sim = Simulator::new(7);
    let p = sim.add_node(Pinger {
        src: c,
        dst: s,
        size: 1250,
        interval: ms(100),
        remaining: 10,
        next: Instant::ZERO,
        sent_at: vec![],
        rtts: vec![],
    });
    let e = sim.add_node(Echo::default());
    sim.add_address(p, c);
    sim.add_address(e, s);
    sim.connect_symmetric(c, s, "10mbit/20ms".parse().unwrap());
    sim.run_until(at_ms(2000));
    let rtts = &sim.node::<Pinger>(p).rtts;
    assert_eq!(rtts.len(), 10);
    // 2 x one-way delay (10 ms) + 2 x serialization (1 ms).
    assert!(rtts.iter().all(|&r| r == ms(22)), "{rtts:?}");

    // Asymmetric: 5 ms out, 15 ms back, unlimited rate.
    let mut sim = Simulator::new(7);
    let p = sim.add_node(Pinger {
        src: c,
        dst: s,
        size: 100,
        interval: ms(100),
        remaining: 3,
        next: Instant::ZERO,
        sent_at: vec![],
        rtts: vec![],
    });
    let e = sim.add_node(Echo::default());
    sim.add_address(p, c);
    sim.add_address(e, s);
    sim.connect(c, s, LinkConfig::new(0, ms(5)), LinkConfig::new(0, ms(15)));
    sim.run_until(at_ms(1000));
    assert_eq!(sim.node::<Pinger>(p).rtts, [ms(20); 3]);
}

#[test]
fn rate_and_delay_changes_apply_to_later_packets() {
    use mpq_sim::LinkEvent;
    let (mut sim, r, ab) = pair("10mbit/20ms", |a, b| Sender::paced(a, b, 10, 1250, ms(100)));
    sim.schedule(at_ms(250), ab, LinkEvent::SetRate(1_000_000));
    sim.schedule(at_ms(550), ab, LinkEvent::SetDelay(ms(50)));
    sim.run_until(at_ms(5000));
    let lat: Vec<Duration> = sim.node::<Sink>(r).rx.iter().map(|x| x.at - at_ms(100 * u64::from(x.seq))).collect();
    assert_eq!(&lat[..3], [ms(11); 3]);
    assert_eq!(&lat[3..6], [ms(20); 3]); // 10 ms serialization at 1 Mbit/s
    assert_eq!(&lat[6..], [ms(60); 4]);
}

#[test]
fn unroutable_and_unknown_host_are_counted() {
    let (a, b, c) = (addr("10.0.0.1:1"), addr("10.0.0.2:1"), addr("10.0.0.3:1"));
    let mut sim = Simulator::new(1);
    let s = sim.add_node(Sender::burst(a, c, 3, 100));
    sim.add_address(s, a);
    sim.connect_symmetric(a, b, LinkConfig::default());
    sim.run_until(at_ms(10));
    assert_eq!(sim.stats().unroutable, 3);
    // Routed, but nobody owns the destination.
    let mut sim = Simulator::new(1);
    let s = sim.add_node(Sender::burst(a, b, 2, 100));
    sim.add_address(s, a);
    sim.connect_symmetric(a, b, LinkConfig::default());
    sim.run_until(at_ms(10));
    assert_eq!((sim.stats().no_host, sim.stats().delivered), (2, 0));
}
