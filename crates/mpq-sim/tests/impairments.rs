//! Loss, duplication, reordering, jitter, link failures and determinism.

mod common;

use std::net::SocketAddr;

use common::*;
use mpq_sim::{LinkEvent, LinkId, LossModel, NodeId, Simulator};

fn pair(seed: u64, spec: &str, sender: impl FnOnce(SocketAddr, SocketAddr) -> Sender) -> (Simulator, NodeId, LinkId) {
    let (a, b) = (addr("10.0.0.1:1"), addr("10.0.0.2:1"));
    let mut sim = Simulator::new(seed);
    let s = sim.add_node(sender(a, b));
    let r = sim.add_node(Sink::default());
    sim.add_address(s, a);
    sim.add_address(r, b);
    let (ab, _) = sim.connect_symmetric(a, b, spec.parse().unwrap());
    (sim, r, ab)
}

const N: u32 = 100_000;

#[test]
fn bernoulli_loss_rate() {
    let (mut sim, r, ab) = pair(3, "0/10ms/loss=1%", |a, b| Sender::burst(a, b, N, 100));
    sim.run_until(at_ms(1000));
    let st = sim.link_stats(ab);
    // Expected 1000, sigma ~31.5: allow ~5 sigma.
    assert!((840..=1160).contains(&st.dropped_loss), "{}", st.dropped_loss);
    assert_eq!(sim.node::<Sink>(r).rx.len() as u64, u64::from(N) - st.dropped_loss);
    assert_eq!(st.delivered_packets + st.dropped_loss, u64::from(N));
}

#[test]
fn gilbert_elliott_mean_loss() {
    let model = LossModel::GilbertElliott { p_gb: 0.01, p_bg: 0.1, loss_good: 0.0, loss_bad: 1.0 };
    let (mut sim, _, ab) = pair(4, "0/10ms/loss=ge:1%,10%", |a, b| Sender::burst(a, b, N, 100));
    assert_eq!(sim.link_config(ab).loss, model);
    sim.run_until(at_ms(1000));
    let rate = sim.link_stats(ab).dropped_loss as f64 / f64::from(N);
    // Stationary loss 1/11; bursts (mean length 10) make the estimate noisier (sigma ~0.004).
    assert!((rate - model.mean_loss()).abs() < 0.015, "{rate}");
}

#[test]
fn duplication_count() {
    let (mut sim, r, ab) = pair(5, "0/10ms/dup=1%", |a, b| Sender::burst(a, b, N, 100));
    sim.run_until(at_ms(1000));
    let st = sim.link_stats(ab);
    assert!((840..=1160).contains(&st.duplicated), "{}", st.duplicated);
    let rx = &sim.node::<Sink>(r).rx;
    assert_eq!(rx.len() as u64, u64::from(N) + st.duplicated);
    assert_eq!(st.delivered_packets, rx.len() as u64);
    let dups = rx.windows(2).filter(|w| w[0].seq == w[1].seq).count();
    assert_eq!(dups as u64, st.duplicated);
}

#[test]
fn reordering_count() {
    // 0.1 ms between packets; a reordered packet is held 10 ms and overtaken by ~100.
    let (mut sim, r, ab) = pair(6, "100mbit/10ms/reorder=1%", |a, b| Sender::burst(a, b, 20_000, 1250));
    sim.run_until(at_ms(10_000));
    let st = sim.link_stats(ab);
    let sink = sim.node::<Sink>(r);
    assert_eq!(sink.rx.len(), 20_000);
    assert_eq!(sink.late() as u64, st.reordered);
    // Expected 200, sigma ~14.
    assert!((140..=260).contains(&st.reordered), "{}", st.reordered);
}

#[test]
fn jitter_keeps_order_unless_allowed() {
    let (mut sim, r, _) = pair(8, "10mbit/20ms/jitter=5ms", |a, b| Sender::paced(a, b, 2000, 1250, ms(1)));
    sim.run_until(at_ms(10_000));
    let rx = &sim.node::<Sink>(r).rx;
    assert_eq!(rx.len(), 2000);
    assert_eq!(sim.node::<Sink>(r).late(), 0);
    let lat: Vec<_> = rx.iter().map(|x| x.at - at_ms(u64::from(x.seq))).collect();
    assert!(lat.iter().all(|&l| l >= ms(6) && l <= ms(16)), "latency outside 1 + 10 ± 5 ms");
    assert!(lat.iter().any(|&l| l < ms(8)) && lat.iter().any(|&l| l > ms(14)));

    let (mut sim, r, _) =
        pair(8, "10mbit/20ms/jitter=5ms/jitter_reorder", |a, b| Sender::paced(a, b, 2000, 1250, ms(1)));
    sim.run_until(at_ms(10_000));
    assert!(sim.node::<Sink>(r).late() > 100);
}

#[test]
fn mtu_drops_larger_packets() {
    let (mut sim, r, ab) = pair(1, "10mbit/20ms/mtu=1200", |a, b| Sender::burst(a, b, 5, 1201));
    sim.run_until(at_ms(1000));
    assert_eq!(sim.node::<Sink>(r).rx.len(), 0);
    assert_eq!(sim.link_stats(ab).dropped_mtu, 5);
    let (mut sim, r, _) = pair(1, "10mbit/20ms/mtu=1200", |a, b| Sender::burst(a, b, 5, 1200));
    sim.run_until(at_ms(1000));
    assert_eq!(sim.node::<Sink>(r).rx.len(), 5);
}

#[test]
fn down_drops_everything_until_up() {
    // One packet per ms; 0.1 ms serialization + 10 ms propagation.
    let (mut sim, r, ab) = pair(1, "100mbit/20ms", |a, b| Sender::paced(a, b, 1000, 1250, ms(1)));
    sim.schedule(at_ms(300), ab, LinkEvent::Down);
    sim.schedule(at_ms(600), ab, LinkEvent::Up);
    sim.run_until(at_ms(450));
    assert!(!sim.link_is_up(ab));
    sim.run_until(at_ms(2000));
    assert!(sim.link_is_up(ab));
    let rx = &sim.node::<Sink>(r).rx;
    // Sent at 0..=289 ms arrived before the failure; 290..=299 were in flight and are lost;
    // 300..=599 were offered to a down link; from 600 on everything arrives.
    let seqs: Vec<u32> = rx.iter().map(|x| x.seq).collect();
    let expected: Vec<u32> = (0..290).chain(600..1000).collect();
    assert_eq!(seqs, expected);
    assert!(rx.iter().all(|x| x.at < at_ms(300) || x.at > at_ms(610)));
    let st = sim.link_stats(ab);
    assert_eq!(st.dropped_down, 310);
    assert_eq!(st.delivered_packets, 690);
}

#[test]
fn blackhole_loses_new_packets_but_delivers_in_flight() {
    let (mut sim, r, ab) = pair(1, "100mbit/20ms", |a, b| Sender::paced(a, b, 1000, 1250, ms(1)));
    sim.schedule(at_ms(500), ab, LinkEvent::Blackhole);
    sim.schedule(at_ms(800), ab, LinkEvent::SetLoss(LossModel::None));
    sim.run_until(at_ms(2000));
    let seqs: Vec<u32> = sim.node::<Sink>(r).rx.iter().map(|x| x.seq).collect();
    let expected: Vec<u32> = (0..500).chain(800..1000).collect();
    assert_eq!(seqs, expected);
    assert_eq!(sim.link_stats(ab).dropped_loss, 300);
}

fn lossy_run(seed: u64) -> (u64, usize) {
    let spec = "20mbit/30ms/loss=2%/jitter=1ms/dup=0.5%/reorder=0.5%/queue=50p";
    let (mut sim, r, _) =
        pair(seed, spec, |a, b| Sender::paced(a, b, 10_000, 1200, std::time::Duration::from_micros(400)));
    sim.run_until(at_ms(10_000));
    (sim.trace_hash(), sim.node::<Sink>(r).rx.len())
}

#[test]
fn same_seed_same_run_different_seed_different_run() {
    let a = lossy_run(11);
    assert_eq!(a, lossy_run(11));
    let b = lossy_run(12);
    assert_ne!(a.0, b.0);
}
