//! Result rows for the report's unit tests.

use crate::metrics::{eben, RequestPoint, Row};
use crate::plan::Role;

/// A row of a two-path scenario: a baseline on `path`, or a multipath run started on it.
pub fn row(id: &str, role: Role, path: usize, goodput: f64, eben: Option<f64>) -> Row {
    let scenario = id.rsplit_once('/').map_or(id, |(s, _)| s).to_owned();
    let class = scenario.split('/').next().unwrap_or("c").to_owned();
    let multipath = role == Role::Multipath;
    Row {
        run_id: id.into(),
        experiment: "test".into(),
        scenario,
        class,
        point: 0,
        repetition: 0,
        seed: 1,
        role,
        path_indices: if multipath { vec![path, 1 - path] } else { vec![path] },
        paths: if multipath { 2 } else { 1 },
        initial_path: path,
        scheduler: "minrtt".into(),
        cc: if multipath { "olia".into() } else { "cubic".into() },
        ack_policy: "same-path".into(),
        ack_ranges: None,
        workload: "download".into(),
        size: 1_000_000,
        links: vec!["10mbit/20ms".into(), "5mbit/40ms".into()],
        completed: true,
        data_ok: true,
        multipath,
        completion_s: Some(8e6 / goodput),
        bytes: 1_000_000,
        goodput_bps: goodput,
        path_bytes: vec![0, 0],
        path_share: vec![0.0, 0.0],
        eben,
        sim_wall_s: 0.01,
        ..Row::default()
    }
}

/// The rows of scenario `CLASS/POINT/r0`: each path alone at `single` bit/s, and a multipath
/// run started on each path at `multi` bit/s, with their EBen.
pub fn scenario(class: &str, point: usize, single: [f64; 2], multi: [f64; 2]) -> Vec<Row> {
    let s = format!("{class}/{point:04}/r0");
    let mut out = vec![
        row(&format!("{s}/sp0"), Role::Baseline, 0, single[0], None),
        row(&format!("{s}/sp1"), Role::Baseline, 1, single[1], None),
    ];
    for (i, &g) in multi.iter().enumerate() {
        let mut r = row(&format!("{s}/mp-i{i}"), Role::Multipath, i, g, eben(g, &single));
        r.baseline_runs = vec![format!("{s}/sp0"), format!("{s}/sp1")];
        r.baseline_goodput_bps = single.to_vec();
        out.push(r);
    }
    out
}

/// A request/response multipath row with `n` requests every 0.4 s, delays from `delay`.
pub fn reqresp(id: &str, n: usize, delay: impl Fn(usize) -> Option<f64>) -> Row {
    let mut r = row(id, Role::Multipath, 0, 1e4, None);
    r.workload = "reqresp".into();
    r.requests = (0..n).map(|i| RequestPoint { sent_s: 0.4 * i as f64, delay_ms: delay(i) }).collect();
    let mut d: Vec<f64> = r.requests.iter().filter_map(|q| q.delay_ms).collect();
    d.sort_by(f64::total_cmp);
    r.delay_p50_ms = crate::metrics::percentile(&d, 50.0);
    r.delay_max_ms = d.last().copied();
    r
}
