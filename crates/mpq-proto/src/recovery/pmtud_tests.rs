//! The DPLPMTUD state machine against a model path that drops every datagram above its
//! MTU: the search ends on the exact size, lost probes count toward MAX_PROBES, black holes
//! fall back to the base.

use super::*;

const T0: Instant = Instant::ZERO;

/// Runs a search over a path carrying at most `path_mtu` bytes until it completes; returns
/// the probes sent.
fn search(p: &mut Pmtud, path_mtu: u16) -> u64 {
    let mut pn = 0;
    for _ in 0..200 {
        let Some(size) = p.probe_due(T0) else { break };
        pn += 1;
        p.on_probe_sent(pn, size);
        if size <= path_mtu {
            p.on_acked(T0, pn, u32::from(size));
        } else {
            p.on_lost(T0, std::iter::once((pn, u32::from(size))));
        }
    }
    p.probes_sent
}

#[test]
fn the_search_converges_on_the_exact_path_mtu() {
    for (ceiling, path_mtu) in [(1472, 1252), (1472, 1372), (1472, 1472), (1472, 1300), (9000, 8972), (9000, 1472)] {
        let mut p = Pmtud::new(true, ceiling);
        p.set_peer_limit(65_527);
        assert_eq!(p.phase(), PmtudPhase::Base);
        assert_eq!(p.probe_due(T0), None, "no probe before the path is validated");
        p.start();
        let probes = search(&mut p, path_mtu);
        assert_eq!(p.phase(), PmtudPhase::SearchComplete, "{ceiling} {path_mtu}");
        assert_eq!(p.plpmtu(), path_mtu.min(ceiling), "ceiling {ceiling}, path {path_mtu}");
        // One probe when the ceiling gets through; else MAX_PROBES at the ceiling and a
        // bisection of at most log2(ceiling - base) + 1 sizes.
        let bound = if path_mtu >= ceiling { 1 } else { 3 + 3 * 14 };
        assert!(probes <= bound, "{probes} probes for {path_mtu}");
    }
}

#[test]
fn the_peers_max_udp_payload_size_caps_the_search() {
    let mut p = Pmtud::new(true, 9000);
    p.set_peer_limit(1400);
    assert_eq!(p.ceiling(), 1400);
    p.start();
    assert_eq!(p.probe_due(T0), Some(1400), "the ceiling first");
    search(&mut p, 9000);
    assert_eq!(p.plpmtu(), 1400);
    assert_eq!(p.probes_sent, 1);
    // A peer limit below the base is invalid (RFC 9000 §18.2) and never lowers us below it.
    let mut p = Pmtud::new(true, 1472);
    p.set_peer_limit(1000);
    assert_eq!(p.ceiling(), BASE_PLPMTU);
    p.start();
    assert_eq!(p.probe_due(T0), None, "nothing to search");
}

#[test]
fn disabled_takes_the_limits_on_trust() {
    let mut p = Pmtud::new(false, 1452);
    assert_eq!(p.plpmtu(), BASE_PLPMTU);
    p.set_peer_limit(1350);
    assert_eq!((p.phase(), p.plpmtu()), (PmtudPhase::Disabled, 1350));
    p.start();
    assert_eq!(p.probe_due(T0), None);
    assert_eq!(p.on_pto(5), None, "no black hole detection when off");
}

#[test]
fn a_size_fails_only_after_max_probes_losses() {
    let mut p = Pmtud::new(true, 1472);
    p.set_peer_limit(65_527);
    p.start();
    for i in 0..u64::from(MAX_PROBES) {
        assert_eq!(p.probe_due(T0), Some(1472), "probe {i} of the ceiling");
        p.on_probe_sent(i, 1472);
        assert_eq!(p.probe_due(T0), None, "one probe in flight at a time");
        p.on_lost(T0, std::iter::once((i, 1472)));
    }
    assert_eq!(p.probe_due(T0), Some((1200 + 1472) / 2), "bisection below the failed size");
}

#[test]
fn the_raise_timer_searches_again() {
    let mut p = Pmtud::new(true, 1472);
    p.set_peer_limit(65_527);
    p.start();
    let mut pn = 0;
    while let Some(size) = p.probe_due(T0) {
        pn += 1;
        p.on_probe_sent(pn, size);
        if size <= 1400 {
            p.on_acked(T0, pn, u32::from(size));
        } else {
            p.on_lost(T0, std::iter::once((pn, u32::from(size))));
        }
    }
    assert_eq!(p.plpmtu(), 1400);
    assert_eq!(p.probe_due(T0 + PMTU_RAISE_TIMER - Duration::from_secs(1)), None);
    assert_eq!(p.probe_due(T0 + PMTU_RAISE_TIMER), Some(1472), "the ceiling again");
    assert_eq!(p.phase(), PmtudPhase::Searching);
    assert_eq!(p.plpmtu(), 1400, "the PLPMTU stays while searching");
}

#[test]
fn losses_of_large_packets_with_none_acknowledged_are_a_black_hole() {
    let mut p = Pmtud::new(true, 1472);
    p.set_peer_limit(65_527);
    p.start();
    search(&mut p, 1472);
    assert_eq!(p.plpmtu(), 1472);
    // Congestion: large packets acknowledged between the loss episodes.
    for i in 0..10 {
        assert_eq!(p.on_lost(T0, [(100 + i, 1472), (101 + i, 1472)].into_iter()), None);
        p.on_acked(T0, 200 + i, 1472);
    }
    // Small packets only get through: the third episode is a black hole.
    assert_eq!(p.on_lost(T0, std::iter::once((300, 1472))), None);
    p.on_acked(T0, 301, 80);
    assert_eq!(p.on_lost(T0, std::iter::once((302, 1472))), None);
    let change = p.on_lost(T0, std::iter::once((303, 1472)));
    assert_eq!(change, Some(PmtuChange::Updated { old: 1472, new: BASE_PLPMTU, done: false }));
    assert_eq!((p.plpmtu(), p.black_holes), (BASE_PLPMTU, 1));
    // And the search starts again, finding the smaller MTU now.
    search(&mut p, 1300);
    assert_eq!(p.plpmtu(), 1300);
}

#[test]
fn consecutive_timeouts_above_the_base_are_a_black_hole() {
    let mut p = Pmtud::new(true, 1472);
    p.set_peer_limit(65_527);
    p.start();
    assert_eq!(p.on_pto(BLACK_HOLE_PTOS), None, "at the base already");
    search(&mut p, 1472);
    assert_eq!(p.on_pto(1), None);
    assert!(p.on_pto(BLACK_HOLE_PTOS).is_some());
    assert_eq!(p.plpmtu(), BASE_PLPMTU);
    assert_eq!(p.phase(), PmtudPhase::Searching);
}

#[test]
fn a_new_network_path_restarts_the_search() {
    let mut p = Pmtud::new(true, 1472);
    p.set_peer_limit(65_527);
    assert_eq!(p.restart(), None, "not started");
    p.start();
    search(&mut p, 1472);
    assert!(p.restart().is_some());
    assert_eq!(p.probe_due(T0), Some(1472));
}
