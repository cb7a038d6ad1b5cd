//! The emulator core against a fake clock, and against the simulator itself: the same
//! packets at the same instants must meet the same fates at the same times.

use std::net::{Ipv4Addr, SocketAddr};

use mpq_sim::{Datagram, LinkConfig, LinkEvent, LossModel, Node, Simulator};

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn at(d: Duration) -> Instant {
    Instant::ZERO + d
}

/// An IPv4 packet of `len` bytes from `src` to `dst` (only what the emulator reads is set).
fn packet(len: usize, src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut p = vec![0u8; len.max(20)];
    p[0] = 0x45;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p
}

const CLIENT: [u8; 4] = [10, 1, 1, 2];
const SERVER: [u8; 4] = [10, 1, 2, 2];

fn path(c2s: &str, s2c: &str) -> PathSetup {
    PathSetup { c2s: c2s.parse().unwrap(), s2c: s2c.parse().unwrap(), client_subnet: (Ipv4Addr::new(10, 1, 1, 0), 24) }
}

/// Drives `emu` like the real-time loop: offers `(time, len)` client-to-server packets in
/// order, advancing to each offer time first, then runs until nothing is left. Returns the
/// delivery times.
fn drive(emu: &mut Emulator, sends: &[(Duration, usize)]) -> Vec<(Instant, usize)> {
    let mut out = Vec::new();
    for &(t, len) in sends {
        let now = at(t);
        // Everything due before the offer, at its own time, as a prompt loop would.
        while let Some(d) = emu.next_deadline().filter(|&d| d <= now) {
            emu.advance(d, |_, p| out.push((d, p.len())));
        }
        emu.offer(now, 0, packet(len, CLIENT, SERVER));
    }
    while let Some(d) = emu.next_deadline() {
        emu.advance(d, |_, p| out.push((d, p.len())));
    }
    out
}

#[test]
fn a_packet_arrives_after_serialization_and_propagation() {
    // 1250 bytes at 50 Mbit/s: 200 µs on the wire, then 10 ms (half the 20 ms RTT).
    let mut emu = Emulator::new(vec![path("50mbit/20ms", "50mbit/20ms")], 1, vec![]);
    assert_eq!(emu.offer(Instant::ZERO, 0, packet(1250, CLIENT, SERVER)), Some(Direction::C2s));
    assert_eq!(emu.next_deadline(), Some(at(Duration::from_micros(10_200))));
    let mut got = Vec::new();
    assert_eq!(emu.advance(at(Duration::from_micros(10_199)), |_, p| got.push(p.len())), 0);
    assert_eq!(emu.advance(at(Duration::from_micros(10_200)), |_, p| got.push(p.len())), 1);
    assert_eq!(got, [1250]);
    assert_eq!(emu.stats(0, Direction::C2s).delivered_packets, 1);
    assert_eq!(emu.next_deadline(), None);
}

#[test]
fn directions_are_told_apart_by_the_client_subnet() {
    let mut emu = Emulator::new(vec![path("10mbit/20ms", "1mbit/100ms")], 1, vec![]);
    assert_eq!(emu.offer(Instant::ZERO, 0, packet(100, SERVER, CLIENT)), Some(Direction::S2c));
    assert_eq!(emu.offer(Instant::ZERO, 0, packet(100, CLIENT, SERVER)), Some(Direction::C2s));
    // Client address k to server address j != k: still client to server.
    assert_eq!(emu.offer(Instant::ZERO, 0, packet(100, CLIENT, [10, 2, 2, 2])), Some(Direction::C2s));
    assert_eq!(emu.stats(0, Direction::S2c).sent_packets, 1);
    assert_eq!(emu.stats(0, Direction::C2s).sent_packets, 2);
    // Each direction has its own delay: 50 ms back, 10 ms forward.
    let mut times = Vec::new();
    while let Some(d) = emu.next_deadline() {
        emu.advance(d, |_, p| times.push((d, p[16])));
    }
    assert!(times.iter().any(|&(d, _)| d >= at(ms(50))), "{times:?}");
    // Not IPv4: dropped and counted, the links never see it.
    let mut v6 = vec![0u8; 60];
    v6[0] = 0x60;
    assert_eq!(emu.offer(Instant::ZERO, 0, v6), None);
    assert_eq!(emu.offer(Instant::ZERO, 0, vec![0x45; 10]), None);
    assert_eq!(emu.unmodelled.not_ipv4, 2);
}

#[test]
fn the_queue_and_the_rate_pace_a_burst() {
    // 1 Mbit/s, 1250-byte packets: 10 ms each. A 3-packet queue takes 3 of a burst of 5.
    let mut emu = Emulator::new(vec![path("1mbit/0ms/queue=3p", "1mbit")], 1, vec![]);
    let got = drive(&mut emu, &[(ms(0), 1250); 5]);
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [at(ms(10)), at(ms(20)), at(ms(30))]);
    assert_eq!(emu.stats(0, Direction::C2s).dropped_queue, 2);
}

#[test]
fn a_scripted_outage_loses_what_is_sent_and_in_flight_during_it() {
    let down = TimedEvent { at: at(ms(100)), path: 0, dir: Direction::C2s, event: LinkEvent::Down };
    let up = TimedEvent { at: at(ms(200)), path: 0, dir: Direction::C2s, event: LinkEvent::Up };
    let mut emu = Emulator::new(vec![path("0/40ms", "0/40ms")], 1, vec![up, down]);
    // 20 ms one way: sent at 90 ms, still in flight at 100 ms (lost); at 150 ms, during the
    // outage (lost); at 70 and 210 ms, delivered.
    let got = drive(&mut emu, &[(ms(70), 100), (ms(90), 100), (ms(150), 100), (ms(210), 100)]);
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [at(ms(90)), at(ms(230))]);
    let s = emu.stats(0, Direction::C2s);
    assert_eq!((s.sent_packets, s.delivered_packets, s.dropped_down), (4, 2, 2));
    // The other direction was never down.
    assert!(emu.is_up(0, Direction::S2c));
}

#[test]
fn a_scripted_rate_change_applies_to_later_packets() {
    let ev = TimedEvent { at: at(ms(50)), path: 0, dir: Direction::C2s, event: LinkEvent::SetRate(10_000_000) };
    let mut emu = Emulator::new(vec![path("1mbit", "1mbit")], 1, vec![ev]);
    // 1250 bytes: 10 ms at 1 Mbit/s, 1 ms at 10 Mbit/s.
    let got = drive(&mut emu, &[(ms(0), 1250), (ms(60), 1250)]);
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [at(ms(10)), at(ms(61))]);
    assert_eq!(emu.config(0, Direction::C2s).rate_bps, 10_000_000);
}

#[test]
fn run_time_events_and_duplicates() {
    let mut emu = Emulator::new(vec![path("0/dup=100%", "0")], 1, vec![]);
    let got = drive(&mut emu, &[(ms(0), 100)]);
    assert_eq!(got.len(), 2, "a duplicated packet is delivered twice");
    assert!(emu.apply_now(at(ms(1)), 0, Direction::C2s, &LinkEvent::Blackhole));
    assert!(!emu.apply_now(at(ms(1)), 7, Direction::C2s, &LinkEvent::Blackhole));
    assert!(drive(&mut emu, &[(ms(2), 100)]).is_empty());
    assert_eq!(emu.stats(0, Direction::C2s).dropped_loss, 1);
}

/// Sends datagrams of given sizes at given times to `peer`, as a simulator node.
struct Sender {
    me: SocketAddr,
    peer: SocketAddr,
    sends: Vec<(Instant, usize)>,
    next: usize,
}

impl Node for Sender {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: SocketAddr, _: &[u8]) {}
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        let &(t, len) = self.sends.get(self.next)?;
        (t <= now).then(|| {
            self.next += 1;
            Datagram { src: self.me, dst: self.peer, data: vec![0; len] }
        })
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.sends.get(self.next).map(|s| s.0)
    }
}

/// Records what arrives.
#[derive(Default)]
struct Receiver {
    got: Vec<(Instant, usize)>,
}

impl Node for Receiver {
    fn handle_datagram(&mut self, now: Instant, _: SocketAddr, _: SocketAddr, data: &[u8]) {
        self.got.push((now, data.len()));
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_transmit(&mut self, _: Instant) -> Option<Datagram> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
}

/// The same traffic through the simulator (its link 0 is the client-to-server direction of
/// its first `connect_symmetric` pair, random stream 0, as the emulator's path 0) and through
/// the emulator: identical arrival times and sizes, identical counters.
fn same_as_simulator(spec: &str, events: &[(Duration, LinkEvent)], sends: &[(Duration, usize)], seed: u64) {
    let cfg: LinkConfig = spec.parse().unwrap();
    let a: SocketAddr = "10.1.1.2:1".parse().unwrap();
    let b: SocketAddr = "10.1.2.2:1".parse().unwrap();
    let mut sim = Simulator::new(seed);
    let sends_at: Vec<(Instant, usize)> = sends.iter().map(|&(t, l)| (at(t), l)).collect();
    let na = sim.add_node(Sender { me: a, peer: b, sends: sends_at, next: 0 });
    let nb = sim.add_node(Receiver::default());
    sim.add_address(na, a);
    sim.add_address(nb, b);
    let (ab, _) = sim.connect_symmetric(a, b, cfg.clone());
    for (t, e) in events {
        sim.schedule(at(*t), ab, e.clone());
    }
    sim.run_until(at(Duration::from_secs(100)));
    let timed =
        events.iter().map(|(t, e)| TimedEvent { at: at(*t), path: 0, dir: Direction::C2s, event: e.clone() }).collect();
    let mut emu = Emulator::new(
        vec![PathSetup { c2s: cfg.clone(), s2c: cfg, client_subnet: (Ipv4Addr::new(10, 1, 1, 0), 24) }],
        seed,
        timed,
    );
    let got = drive(&mut emu, sends);
    assert!(got.len() > sends.len() / 10, "{spec}: only {} of {} arrived", got.len(), sends.len());
    assert_eq!(got, sim.node::<Receiver>(nb).got, "{spec}: arrivals differ");
    assert_eq!(emu.stats(0, Direction::C2s), sim.link_stats(ab), "{spec}: counters differ");
}

/// A pseudo-random send pattern: bursts and gaps, sizes 40 to 1500 bytes.
fn pattern(n: usize, seed: u64) -> Vec<(Duration, usize)> {
    use rand::{Rng, SeedableRng};
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut t = Duration::ZERO;
    (0..n)
        .map(|_| {
            t += Duration::from_micros(if r.random_bool(0.7) { 0 } else { r.random_range(0..3000) });
            (t, r.random_range(40..=1500))
        })
        .collect()
}

#[test]
fn the_emulator_core_matches_the_simulator_packet_for_packet() {
    let sends = pattern(3000, 9);
    for spec in [
        "20mbit/30ms/queue=15ms",
        "5mbit/10ms/queue=20kb/loss=2%",
        "50mbit/40ms/queue=50p/loss=ge:1%,20%,50%,0.1%/jitter=3ms",
        "10mbit/20ms/jitter=5ms/jitter_reorder/dup=1%/reorder=2%,7ms/mtu=1400",
        "inf/5ms/loss=10%",
    ] {
        same_as_simulator(spec, &[], &sends, 42);
    }
    let events = [
        (ms(300), LinkEvent::SetRate(2_000_000)),
        (ms(700), LinkEvent::Down),
        (ms(900), LinkEvent::Up),
        (ms(1100), LinkEvent::SetLoss(LossModel::Bernoulli(0.2))),
        (ms(1300), LinkEvent::SetDelay(ms(1))),
        (ms(1500), LinkEvent::SetMtu(600)),
    ];
    same_as_simulator("10mbit/20ms/queue=30ms", &events, &sends, 7);
}

#[test]
fn a_path_alone_behaves_as_among_the_others() {
    // Path 1 of a two-path emulator and path 1 built alone: the same losses, the same times.
    let p = || path("5mbit/10ms/loss=20%/jitter=1ms", "5mbit/10ms/loss=20%");
    let mut p1 = p();
    p1.client_subnet = (Ipv4Addr::new(10, 2, 1, 0), 24);
    let ev = TimedEvent { at: at(ms(100)), path: 1, dir: Direction::C2s, event: LinkEvent::SetRate(1_000_000) };
    let other = TimedEvent { at: at(ms(100)), path: 0, dir: Direction::C2s, event: LinkEvent::Down };
    let mut both = Emulator::new(vec![p(), p1.clone()], 5, vec![ev.clone(), other.clone()]);
    let mut alone = Emulator::single_path(1, p1, 5, &[ev, other]);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (i, (t, len)) in pattern(500, 3).into_iter().enumerate() {
        // Every third packet goes server to client.
        let pkt = if i % 3 == 0 {
            packet(len, [10, 2, 2, 2], [10, 2, 1, 2])
        } else {
            packet(len, [10, 2, 1, 2], [10, 2, 2, 2])
        };
        let now = at(t);
        both.advance(now, |p, x| a.push((now, p, x.len())));
        alone.advance(now, |_, x| b.push((now, 1, x.len())));
        both.offer(now, 1, pkt.clone());
        alone.offer(now, 0, pkt);
    }
    assert!(!a.is_empty());
    assert_eq!(a, b);
    for d in Direction::BOTH {
        assert_eq!(both.stats(1, d), alone.stats(0, d));
    }
    assert_eq!(alone.config(0, Direction::C2s).rate_bps, 1_000_000);
    assert!(alone.is_up(0, Direction::C2s), "path 0's event does not reach path 1");
}

/// Three flows through a shared bottleneck, in the simulator (links added in the order of
/// `Topology::shared_bottleneck`: the bottleneck's two directions, then each path's two) and
/// in the emulator built with [`Emulator::with_bottleneck`]: path 0 client to server, path 1
/// server to client, and the competitor's path (no limit, no delay) client to server. The
/// same arrivals at the same times, and the same counters on every link.
#[test]
fn a_shared_bottleneck_matches_the_simulators_packet_for_packet() {
    let bn: LinkConfig = "8mbit/20ms/queue=15ms/loss=1%".parse().unwrap();
    let access: [LinkConfig; 3] = [
        "20mbit/10ms/queue=20ms/jitter=1ms".parse().unwrap(),
        "30mbit/30ms/queue=10ms/dup=1%".parse().unwrap(),
        LinkConfig::new(0, Duration::ZERO),
    ];
    let seed = 11;
    let c = |k: u8| -> SocketAddr { SocketAddr::from(([10, k, 1, 2], 1)) };
    let s = |k: u8| -> SocketAddr { SocketAddr::from(([10, k, 2, 2], 1)) };
    // (path, from the client?, pattern seed)
    let flows = [(0usize, true, 21u64), (1, false, 22), (2, true, 23)];
    let mut sim = Simulator::new(seed);
    let bn_up = sim.add_link(bn.clone());
    let bn_down = sim.add_link(bn.clone());
    let mut own = Vec::new();
    for a in &access {
        own.push((sim.add_link(a.clone()), sim.add_link(a.clone())));
    }
    let mut receivers = Vec::new();
    for &(p, up, ps) in &flows {
        let k = p as u8 + 1;
        let (src, dst) = if up { (c(k), s(k)) } else { (s(k), c(k)) };
        sim.connect_via(c(k), s(k), &[own[p].0, bn_up], &[bn_down, own[p].1]);
        let sends = pattern(1500, ps).into_iter().map(|(t, l)| (at(t), l)).collect();
        let tx = sim.add_node(Sender { me: src, peer: dst, sends, next: 0 });
        let rx = sim.add_node(Receiver::default());
        sim.add_address(tx, src);
        sim.add_address(rx, dst);
        receivers.push(rx);
    }
    sim.run_until(at(Duration::from_secs(100)));

    let setups = access
        .iter()
        .enumerate()
        .map(|(p, a)| PathSetup {
            c2s: a.clone(),
            s2c: a.clone(),
            client_subnet: (Ipv4Addr::new(10, p as u8 + 1, 1, 0), 24),
        })
        .collect();
    let mut emu = Emulator::with_bottleneck(setups, bn, seed, vec![]);
    // Every flow's offers in time order (flow order at equal times).
    let mut sends: Vec<(Duration, usize, usize)> = flows
        .iter()
        .enumerate()
        .flat_map(|(f, &(_, _, ps))| pattern(1500, ps).into_iter().map(move |(t, l)| (t, f, l)))
        .collect();
    sends.sort_by_key(|&(t, f, _)| (t, f));
    let mut got: Vec<Vec<(Instant, usize)>> = vec![Vec::new(); flows.len()];
    let mut record = |emu: &mut Emulator, d: Instant| {
        emu.advance(d, |path, p| {
            let f = flows.iter().position(|&(fp, _, _)| fp == path).unwrap();
            got[f].push((d, p.len()));
        });
    };
    for &(t, f, len) in &sends {
        let now = at(t);
        while let Some(d) = emu.next_deadline().filter(|&d| d <= now) {
            record(&mut emu, d);
        }
        let (p, up, _) = flows[f];
        let k = p as u8 + 1;
        let pkt =
            if up { packet(len, [10, k, 1, 2], [10, k, 2, 2]) } else { packet(len, [10, k, 2, 2], [10, k, 1, 2]) };
        emu.offer(now, p, pkt);
    }
    while let Some(d) = emu.next_deadline() {
        record(&mut emu, d);
    }
    for (f, rx) in receivers.iter().enumerate() {
        let want = &sim.node::<Receiver>(*rx).got;
        assert!(want.len() > 300, "flow {f}: only {} arrived", want.len());
        assert_eq!(&got[f], want, "flow {f}: arrivals differ");
    }
    let bottleneck = |d: Direction| emu.bottleneck(d).unwrap().stats.clone();
    assert_eq!(bottleneck(Direction::C2s), *sim.link_stats(bn_up));
    assert_eq!(bottleneck(Direction::S2c), *sim.link_stats(bn_down));
    assert!(
        bottleneck(Direction::C2s).dropped_queue > 0,
        "the bottleneck never filled: {:?}",
        bottleneck(Direction::C2s)
    );
    for (p, (up, down)) in own.iter().enumerate() {
        assert_eq!(emu.stats(p, Direction::C2s), sim.link_stats(*up), "path {p} c2s");
        assert_eq!(emu.stats(p, Direction::S2c), sim.link_stats(*down), "path {p} s2c");
    }
}
