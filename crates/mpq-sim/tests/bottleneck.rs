//! Scenarios with a shared bottleneck ([`mpq_sim::bottleneck`]): the bottleneck caps the paths
//! together, and a competitor takes its part of it.

use mpq_sim::bottleneck::Bottleneck;
use mpq_sim::scenario::{Scenario, ScenarioResult};
use mpq_sim::LinkConfig;

fn link(s: &str) -> LinkConfig {
    s.parse().unwrap()
}

/// 2 MB over two fast access links, with or without a 10 Mbit/s bottleneck behind them.
fn run(bottleneck: Option<Bottleneck>) -> ScenarioResult {
    let mut s = Scenario::download(vec![link("100mbit/4ms/queue=6ms"), link("100mbit/8ms/queue=12ms")], 2_000_000);
    s.seed = 3;
    s.bottleneck = bottleneck;
    let r = s.run().unwrap();
    assert!(r.completed && r.data_ok, "{r:#?}");
    assert!(r.multipath);
    r
}

fn bn(competitor: bool) -> Option<Bottleneck> {
    Some(Bottleneck { link: link("10mbit/16ms/queue=30ms"), competitor })
}

#[test]
fn the_bottleneck_caps_both_paths_together() {
    let free = run(None);
    assert!(free.goodput_bps > 30e6, "without a bottleneck: {:.1} Mbit/s", free.goodput_bps / 1e6);
    assert!(free.competitor.is_none());
    let capped = run(bn(false));
    assert!(capped.competitor.is_none(), "no competitor asked for");
    assert!(capped.goodput_bps <= 10e6, "{:.2} Mbit/s through 10 Mbit/s", capped.goodput_bps / 1e6);
    assert!(capped.goodput_bps > 6e6, "{:.2} Mbit/s", capped.goodput_bps / 1e6);
    // Both paths carried data (the access links are the paths' own links).
    assert!(capped.links.iter().all(|l| l.down_bytes > 0), "{:?}", capped.links);
}

#[test]
fn a_competitor_shares_the_bottleneck() {
    let alone = run(bn(false));
    let shared = run(bn(true));
    let c = shared.competitor.clone().expect("competitor result");
    assert!(c.bytes > 100_000, "{c:?}");
    assert!((c.goodput_bps - c.bytes as f64 * 8.0 / shared.duration_s).abs() < 1e-6, "goodput over the run's duration");
    // Together they fit in the bottleneck; the multipath flow is slower than alone.
    assert!(shared.goodput_bps + c.goodput_bps <= 10e6, "{} + {}", shared.goodput_bps, c.goodput_bps);
    assert!(shared.goodput_bps < alone.goodput_bps);
    let json = serde_json::to_value(&shared).unwrap();
    assert!(json["competitor"]["goodput_bps"].as_f64().unwrap() > 0.0);
    assert!(serde_json::to_value(&alone).unwrap().get("competitor").is_none());
}
