//! The kernel testbed end to end (`mpq lab testbed up`, traffic from threads inside its
//! namespaces, `down`): measured RTT, loss and rate against the configured link, a TCP
//! transfer, and a scripted outage. Needs root; see common/testbed.rs for skipping.

use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;

use mpq_lab::testbed::{control, probe};
use mpq_sim::LinkConfig;

#[path = "common/testbed.rs"]
mod testbed;

use testbed::{available, name, one_at_a_time, Testbed};

fn at(ip: std::net::Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(ip, port))
}

/// Runs a measurement of the emulator up to [`ATTEMPTS`] times, on a fresh testbed each,
/// until one passes; the last attempt's failure is the test's. The emulator, the probes and
/// whatever else runs share two cores of a virtual machine, and a stall of the machine
/// shows in a rate, an RTT or a gap as if the emulator had made it: on 2026-12-02, with the
/// tests one at a time, one run in three failed one of these checks (a median RTT of 36-43
/// ms against 30.1 modelled, a rate more than 3 % off, losses outside the outage's gap) and
/// the next run passed it. An emulator that gets a figure wrong fails every attempt.
fn in_attempts(once: fn()) {
    for attempt in 1..ATTEMPTS {
        if std::panic::catch_unwind(once).is_ok() {
            return;
        }
        eprintln!("attempt {attempt} of {ATTEMPTS} failed (above): measuring again on a fresh testbed");
    }
    once();
}

/// See [`in_attempts`].
const ATTEMPTS: usize = 3;

/// The RTT the link model gives a probe of `payload` UDP bytes on a symmetric `spec`. (These
/// tests run one at a time: an emulator carrying another test's 100 Mbit/s on the same two
/// cores delays this one's packets.)
fn model_rtt_ms(spec: &str, payload: usize) -> f64 {
    let c: LinkConfig = spec.parse().unwrap();
    (c.delay * 2 + c.serialization_time(payload + probe::UDP_OVERHEAD) * 2).as_secs_f64() * 1e3
}

/// Nothing arrives before the model says (50 µs for clock reads), and the median is within
/// 4 % of the model plus [`WAKEUP_ALLOWANCE_MS`].
fn assert_rtt_fits_model(label: &str, r: &probe::RttStats, model: f64) {
    assert!(r.min_ms >= model - 0.05, "{label}: min RTT {:.3} ms below the model's {model:.3}", r.min_ms);
    let limit = model * 1.04 + WAKEUP_ALLOWANCE_MS;
    assert!(r.median_ms <= limit, "{label}: median RTT {:.3} ms, model {model:.3}, limit {limit:.3}", r.median_ms);
}

/// What a round trip's thread wakeups may add to a probe's RTT, whatever the link's delay:
/// the emulator's path thread wakes twice each way (a packet readable, then due), the echo
/// and the probe once each, and on this 2-vCPU virtual machine each wake can be late by a
/// tenth of a millisecond or more. A relative bound alone failed all three attempts of a CI
/// run on 2026-12-04 (medians 20.9-21.2 ms against 20.07 modelled, +0.9 ms, on an hour the
/// whole machine was slow; +0.1-0.3 ms usually), while an emulator that got the delay wrong
/// would be milliseconds off, and one that left out the serialization time fails the
/// minimum's check.
const WAKEUP_ALLOWANCE_MS: f64 = 0.5;

#[test]
fn two_paths_deliver_the_configured_rtt_loss_and_rate() {
    if !available() {
        return;
    }
    let _alone = one_at_a_time();
    in_attempts(two_paths_deliver_the_configured_rtt_loss_and_rate_once);
}

fn two_paths_deliver_the_configured_rtt_loss_and_rate_once() {
    const P0: &str = "100mbit/20ms/queue=20ms";
    // Path 1 loses 5 % client to server only.
    const P1: &str = "20mbit/40ms/loss=5%|20mbit/40ms";
    let tb = Testbed::up(&name("meas"), &["--link", P0, "--link", P1, "--seed", "3"]);
    let (cns, sns) = (tb.field("client_ns"), tb.field("server_ns"));
    let ((c0, s0), (c1, s1)) = (tb.path(0), tb.path(1));

    // RTT, both paths at once: 100 probes of 64 bytes, 10 ms apart.
    let e0 = probe::echo(&sns, at(s0, 7000)).unwrap();
    let e1 = probe::echo(&sns, at(s1, 7000)).unwrap();
    let (cns2, cns3) = (cns.clone(), cns.clone());
    let r0 = std::thread::spawn(move || {
        probe::rtt(&cns2, c0, at(s0, 7000), 100, Duration::from_millis(10), 64, Duration::from_secs(2))
    });
    let r1 = std::thread::spawn(move || {
        probe::rtt(&cns3, c1, at(s1, 7000), 100, Duration::from_millis(10), 64, Duration::from_secs(2))
    });
    let (r0, r1) = (r0.join().unwrap().unwrap(), r1.join().unwrap().unwrap());
    drop((e0, e1));
    eprintln!("RTT path 0: {r0:?}\nRTT path 1: {r1:?}");
    for (r, spec) in [(&r0, P0), (&r1, "20mbit/40ms")] {
        assert_rtt_fits_model(spec, r, model_rtt_ms(spec, 64));
    }
    assert_eq!(r0.received, 100, "{r0:?}");
    // 5 % of path 1's probes are lost on the way out.
    assert!((85..100).contains(&r1.received), "{r1:?}");

    // Loss: 10,000 datagrams at 5 Mbit/s on path 1. The sink must see exactly what the
    // model let through (nothing lost elsewhere), and that must be 5 % within the spread
    // of 10,000 draws (sd 0.22 %; seeded, so the same every run).
    let before = control::stats(&tb.name).unwrap().paths[1].c2s.clone();
    let sink = probe::sink(&sns, at(s1, 7001), Duration::from_millis(300), false).unwrap();
    let b = probe::blast(&cns, c1, at(s1, 7001), 100, 5e6, 10_000).unwrap();
    let got = sink.finish_within(Duration::from_secs(10)).unwrap();
    let after = control::stats(&tb.name).unwrap().paths[1].c2s.clone();
    assert_eq!(after.sent_packets - before.sent_packets, b.sent, "every datagram crossed path 1's link");
    let model_lost = after.dropped_loss - before.dropped_loss;
    assert_eq!(after.dropped_queue, before.dropped_queue, "no queue drops at a quarter of the rate");
    assert_eq!(b.sent - got.unique, model_lost, "lost outside the model: {got:?}");
    let loss = model_lost as f64 / b.sent as f64;
    eprintln!("loss: {model_lost} of {} ({:.2} %), configured 5 %", b.sent, loss * 100.0);
    assert!((loss - 0.05).abs() < 0.01, "loss {loss:.4}, configured 0.05");

    // Rate: 1500-byte packets offered at 125 Mbit/s for 2 s into path 0's 100 Mbit/s.
    let sink = probe::sink(&sns, at(s0, 7002), Duration::from_millis(300), false).unwrap();
    let b = probe::blast(&cns, c0, at(s0, 7002), 1472, 125e6, (125e6 * 2.0 / 12_000.0) as u64).unwrap();
    let got = sink.finish_within(Duration::from_secs(10)).unwrap();
    assert!(b.offered_bps > 110e6, "the sender offered only {:.1} Mbit/s", b.offered_bps / 1e6);
    let rate = got.rate_bps;
    eprintln!("rate: {:.2} Mbit/s measured, {:.2} offered, link 100", rate / 1e6, b.offered_bps / 1e6);
    assert!((rate / 100e6 - 1.0).abs() < 0.03, "measured {:.2} Mbit/s on a 100 Mbit/s link", rate / 1e6);

    // TCP: 10 MB over path 0 within the link's rate.
    let tsink = probe::tcp_sink(&sns, at(s0, 7003)).unwrap();
    probe::tcp_send(&cns, c0, at(s0, 7003), 10_000_000, Duration::from_secs(30)).unwrap();
    let t = tsink.stop().unwrap();
    assert_eq!(t.bytes, 10_000_000);
    eprintln!("TCP: {:.2} Mbit/s", t.goodput_bps / 1e6);
    assert!(t.goodput_bps < 100e6 * 1.01 && t.goodput_bps > 50e6, "TCP goodput {:.1} Mbit/s", t.goodput_bps / 1e6);

    // The emulator's own view: path 0 carried the blast at its rate, nothing was dropped
    // on the way into it.
    let s = control::stats(&tb.name).unwrap();
    assert!(s.paths[0].c2s.dropped_queue > 0, "the blast above the rate filled the queue");
    assert_eq!(s.paths.iter().map(|p| p.kernel_drops).sum::<u64>(), 0);
}

#[test]
fn a_scripted_outage_drops_what_is_sent_during_it() {
    if !available() {
        return;
    }
    let _alone = one_at_a_time();
    in_attempts(a_scripted_outage_drops_what_is_sent_during_it_once);
}

fn a_scripted_outage_drops_what_is_sent_during_it_once() {
    // 10 ms RTT, no rate limit; path 0 down from 1 s to 2 s after the emulator started.
    let tb = Testbed::up(&name("outage"), &["--link", "inf/10ms", "--event", "0@1s:down", "--event", "0@2s:up"]);
    let started = tb.json["started_unix_ns"].as_u64().unwrap();
    let (cns, sns) = (tb.field("client_ns"), tb.field("server_ns"));
    let (c, s) = tb.path(0);
    let sink = probe::sink(&sns, at(s, 7000), Duration::from_secs(60), true).unwrap();
    // One datagram a millisecond until 2.6 s after the start.
    let now_s = (probe::unix_now_ns() - started) as f64 / 1e9;
    let count = ((2.6 - now_s) * 1000.0).max(0.0) as u64;
    assert!(count > 2000, "the testbed took {now_s:.2} s to come up");
    let b = probe::blast(&cns, c, at(s, 7000), 100, 1000.0 * 128.0 * 8.0, count).unwrap();
    let got = sink.finish_within(Duration::from_millis(500)).unwrap();
    // Send times (in the datagrams) relative to the emulator's start. A datagram sent at t
    // reaches the link microseconds later and needs 5 ms to cross it: it is lost if sent
    // between 0.995 s (in flight when the link goes down) and 2 s (offered while down).
    let rel = |ns: u64| ns.saturating_sub(started) as f64 / 1e9;
    let margin = 0.02;
    let mut sent_at = vec![None; b.sent as usize];
    for &(seq, ns) in &got.received {
        let t = rel(ns);
        assert!(
            !(0.995 + margin..2.0 - margin).contains(&t),
            "datagram {seq} sent at {t:.3} s arrived during the outage"
        );
        sent_at[seq as usize] = Some(t);
    }
    let lost: Vec<usize> = (0..sent_at.len()).filter(|&q| sent_at[q].is_none()).collect();
    let (first, last) = (lost[0], lost[lost.len() - 1]);
    // One gap, around the outage: the datagrams on either side were sent near its ends.
    assert_eq!(lost.len(), last - first + 1, "losses outside one gap: {lost:?}");
    let before = first.checked_sub(1).and_then(|q| sent_at[q]).expect("a datagram before the gap");
    let after = sent_at.get(last + 1).copied().flatten().expect("a datagram after the gap");
    assert!(before >= 0.995 - margin, "datagrams were lost from {before:.3} s on");
    assert!(after <= 2.0 + margin, "datagrams were lost until {after:.3} s");
    eprintln!("outage: {} lost, from {before:.4} s to {after:.4} s", lost.len());
    // One datagram a millisecond for about 1 s.
    assert!((950..=1060).contains(&lost.len()), "{} lost", lost.len());
    let st = control::stats(&tb.name).unwrap();
    assert_eq!(st.paths[0].c2s.dropped_down, lost.len() as u64);
    assert!(st.paths[0].c2s.up && st.paths[0].s2c.up);
}

#[test]
fn a_shared_bottleneck_carries_every_path_and_the_competitor_at_its_rate_and_delay() {
    if !available() {
        return;
    }
    let _alone = one_at_a_time();
    in_attempts(a_shared_bottleneck_carries_every_path_and_the_competitor_at_its_rate_and_delay_once);
}

fn a_shared_bottleneck_carries_every_path_and_the_competitor_at_its_rate_and_delay_once() {
    // Two fast access links into a 20 Mbit/s bottleneck; the competitor's path crosses the
    // bottleneck alone.
    const BN: &str = "20mbit/20ms/queue=20ms";
    let tb = Testbed::up(&name("bneck"), &["--link", "100mbit/10ms", "--link", "100mbit/30ms", "--bottleneck", BN]);
    assert_eq!(tb.json["bottleneck"], BN);
    let comp = &tb.json["competitor"];
    let (cc, cs): (std::net::Ipv4Addr, std::net::Ipv4Addr) =
        (comp["client"].as_str().unwrap().parse().unwrap(), comp["server"].as_str().unwrap().parse().unwrap());
    assert_eq!((cc.to_string(), cs.to_string()), ("10.3.1.2".into(), "10.3.2.2".into()));
    let (cns, sns) = (tb.field("client_ns"), tb.field("server_ns"));
    let ((c0, s0), (c1, s1)) = (tb.path(0), tb.path(1));

    // RTT: a path's own link and the bottleneck, both ways; the competitor's the bottleneck's.
    for (c, s, own) in [(c0, s0, Some("100mbit/10ms")), (cc, cs, None)] {
        let echo = probe::echo(&sns, at(s, 7000)).unwrap();
        let r = probe::rtt(&cns, c, at(s, 7000), 30, Duration::from_millis(10), 64, Duration::from_secs(2)).unwrap();
        drop(echo);
        let model = model_rtt_ms(BN, 64) + own.map_or(0.0, |o| model_rtt_ms(o, 64));
        eprintln!("RTT {c}: {r:?}, model {model:.3} ms");
        assert_rtt_fits_model(&c.to_string(), &r, model);
    }

    // Rate: 12 Mbit/s offered on each path and on the competitor's at once, 36 in all,
    // into the 20 Mbit/s bottleneck: together they get its rate. (Not in equal shares:
    // paced senders into a full tail-drop queue lock into phases, and the flow whose packets
    // come just after a departure takes the free places; a first run gave 1.0, 11.7 and 7.4.)
    let flows = [(c0, s0), (c1, s1), (cc, cs)];
    let sinks: Vec<_> =
        flows.iter().map(|&(_, s)| probe::sink(&sns, at(s, 7001), Duration::from_millis(300), true).unwrap()).collect();
    let blasts: Vec<_> = flows
        .iter()
        .map(|&(c, s)| {
            let ns = cns.clone();
            std::thread::spawn(move || probe::blast(&ns, c, at(s, 7001), 1472, 12e6, 2000).unwrap())
        })
        .collect();
    for b in blasts {
        let b = b.join().unwrap();
        assert!(b.offered_bps > 11e6, "the sender offered only {:.1} Mbit/s", b.offered_bps / 1e6);
    }
    let reports: Vec<_> = sinks.into_iter().map(|s| s.finish_within(Duration::from_secs(10)).unwrap()).collect();
    let rates: Vec<f64> = reports.iter().map(|r| r.rate_bps).collect();
    // Together over the time all three received: each sink's own rate is over its own span,
    // and a flow that started late or ran on alone (a busy machine delays a sender's thread)
    // gets more than its share there, so the sum of those rates can exceed the bottleneck's
    // (CI once measured 26.5 Mbit/s so).
    let total = probe::common_window_rate_bps(&reports).expect("the three flows overlapped");
    eprintln!(
        "rates {:?} Mbit/s, together {:.2} while all three received",
        rates.iter().map(|r| r / 1e6).collect::<Vec<_>>(),
        total / 1e6
    );
    assert!((total / 20e6 - 1.0).abs() < 0.05, "together {:.2} Mbit/s through a 20 Mbit/s bottleneck", total / 1e6);
    for r in &rates {
        assert!(*r > 0.0, "a flow got nothing through the bottleneck: {rates:?}");
    }
    let st = control::stats(&tb.name).unwrap();
    let bn = st.bottleneck.as_ref().expect("the bottleneck's counters");
    assert!(bn.c2s.dropped_queue > 0, "the bottleneck's queue overflowed: {bn:?}");
    assert_eq!(bn.c2s.rate_bps, 20_000_000);
    for p in st.paths.iter().chain(&st.competitor) {
        assert_eq!(p.c2s.dropped_queue, 0, "an access link dropped: {p:?}");
        assert_eq!(p.kernel_drops, 0);
    }
    assert_eq!(st.paths.len(), 2);
    assert!(st.competitor.as_ref().unwrap().c2s.delivered_bytes > 1_000_000);
    // Run-time events reach the paths, not the competitor's path.
    assert!(control::event(&tb.name, "2:down").is_err());
    control::event(&tb.name, "1:rate=5mbit").unwrap();
    assert_eq!(control::stats(&tb.name).unwrap().paths[1].c2s.rate_bps, 5_000_000);
}
