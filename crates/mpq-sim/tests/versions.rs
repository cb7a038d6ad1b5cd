//! QUIC v2 (RFC 9369) in the simulator (`Scenario::quic_version`, `mpq sim --quic-version`):
//! a multipath download in v2 end to end, every byte checked, and a version mpq does not
//! speak refused before anything runs.

use mpq_sim::scenario::{Scenario, ScenarioError};
use mpq_sim::LinkConfig;

fn link(s: &str) -> LinkConfig {
    s.parse().unwrap()
}

/// Both endpoints speak only v2: a client Initial in v1 would be answered with Version
/// Negotiation listing v2 only, and the client (v2 only too) would give up, so a completed
/// byte-exact download shows the whole connection ran in v2, over both paths.
#[test]
fn v2_multipath_download_seed7_completes_byte_exact_on_both_paths() {
    let links = vec![link("50mbit/20ms/queue=30ms"), link("20mbit/60ms/queue=90ms")];
    let s = Scenario { seed: 7, quic_version: mpq_proto::VERSION_2, ..Scenario::download(links, 4_000_000) };
    let r = s.run().expect("the v2 download runs");
    assert!(r.completed && r.data_ok, "{r:#?}");
    assert!(r.multipath, "multipath negotiated in v2: {r:#?}");
    assert!(r.paths.iter().filter(|p| p.rx_bytes > 100_000).count() == 2, "both paths carried data: {r:#?}");
}

#[test]
fn a_version_mpq_does_not_speak_is_refused() {
    let s = Scenario { quic_version: 0x1a2a_3a4a, ..Scenario::download(vec![link("10mbit/10ms")], 1_000) };
    match s.run() {
        Err(ScenarioError::Invalid(m)) => assert!(m.contains("not one mpq speaks"), "{m}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}
