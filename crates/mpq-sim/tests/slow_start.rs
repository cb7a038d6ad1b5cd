//! The initial slow start behind a deep buffer, end to end: HyStart++ (RFC 9406) against
//! standard slow start, read back from the server's qlog (window and RTT samples).

mod common;

use std::time::Duration;

use common::mp::{flow_limited, Qlog, Run, MB};
use mpq_proto::cc::CcConfig;
use mpq_proto::conn::TransportConfig;
use mpq_sim::apps::DownloadClient;
use mpq_sim::LinkConfig;

/// Largest congestion window (bytes) and largest queueing delay (latest RTT sample above the
/// minimum, ms) of path 0 in a qlog.
fn peaks(q: &Qlog) -> (u64, f64) {
    let mut peak = (0, 0.0f64);
    for (_, name, data) in q.lock().unwrap().iter() {
        if *name != "recovery:metrics_updated" || data["path_id"].as_u64().unwrap_or(0) != 0 {
            continue;
        }
        if let Some(w) = data["congestion_window"].as_u64() {
            peak.0 = peak.0.max(w);
        }
        if let (Some(r), Some(min)) = (data["latest_rtt"].as_f64(), data["min_rtt"].as_f64()) {
            peak.1 = peak.1.max(r - min);
        }
    }
    peak
}

/// A 20 MB download over one 50 Mbit/s, 40 ms path with 2 s of queue, the receiver's windows
/// large enough not to matter; `hystart` on the server (the sender) or not.
fn run(hystart: bool, seed: u64) -> (u64, f64, f64) {
    let links: Vec<LinkConfig> = vec!["50mbit/40ms/queue=2000ms".parse().unwrap()];
    let server = TransportConfig { cc_config: CcConfig { hystart, ..CcConfig::default() }, ..Default::default() };
    let client = flow_limited(64 * MB, TransportConfig::default());
    let mut r = Run::new(&links, seed, client, server, true, |c, s, extra| {
        DownloadClient::new(c, s, 20 * MB).with_paths(extra)
    });
    assert!(r.run_to_completion(Duration::from_secs(60)), "{}", r.describe());
    r.assert_complete();
    let (cwnd, rtt) = peaks(&r.server_qlog);
    (cwnd, rtt, r.app().done_at.unwrap().since_epoch().as_secs_f64())
}

/// Standard slow start doubles the window until the 2 s queue (12.5 MB at 50 Mbit/s) is
/// nearly full of this download (a 12 MB window, 0.9 s of queueing); HyStart++ sees the RTT
/// rise a round or two past the bandwidth-delay product (250 kB), grows a quarter as fast
/// for five rounds and stops (a 1.9 MB window, 0.27 s), and the download is no slower.
#[test]
fn hystart_leaves_slow_start_before_a_deep_queue_fills_seed_71() {
    let seed = 71;
    let (w_std, rtt_std, t_std) = run(false, seed);
    let (w_hy, rtt_hy, t_hy) = run(true, seed);
    println!(
        "seed {seed}: standard slow start: window {w_std} B, RTT up to {rtt_std:.0} ms, {t_std:.3} s; \
         HyStart++: {w_hy} B, {rtt_hy:.0} ms, {t_hy:.3} s"
    );
    assert!(w_std > 8_000_000 && rtt_std > 600.0, "standard slow start fills the queue");
    assert!(w_hy < w_std / 4, "HyStart++ leaves slow start: window {w_hy} vs {w_std}");
    assert!(rtt_hy < rtt_std / 3.0, "queueing delay: {rtt_hy:.0} ms vs {rtt_std:.0} ms");
    assert!(t_hy <= t_std * 1.05, "not slower: {t_hy:.3} s vs {t_std:.3} s");
}
