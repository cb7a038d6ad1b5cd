//! Spreads data in proportion to each path's estimated bandwidth (users with a 4G and a 5G
//! link ask for this: picoquic #1999).

use std::collections::BTreeMap;

use super::{eligible, Decision, PathScheduler, PathSnapshot, SchedContext};

/// Deficit round robin weighted by `delivery_rate`: every decision credits each eligible path
/// with its share of a quantum, sending debits the path that sent, and the path with the
/// largest credit among those that can send goes next.
#[derive(Debug, Default)]
pub struct Weighted {
    credit: BTreeMap<u64, f64>,
}

/// Bytes shared out per decision: about one full datagram.
const QUANTUM: f64 = 1500.0;

impl PathScheduler for Weighted {
    fn schedule(&mut self, paths: &[PathSnapshot], _ctx: &SchedContext) -> Decision {
        let pool = eligible(paths);
        let rate = |p: &PathSnapshot| {
            if p.delivery_rate > 0.0 {
                p.delivery_rate
            } else {
                p.cwnd as f64 / p.srtt.as_secs_f64().max(1e-6)
            }
        };
        let total: f64 = pool.iter().map(|p| rate(p)).sum();
        if total <= 0.0 {
            return Decision::Wait;
        }
        self.credit.retain(|id, _| pool.iter().any(|p| p.id == *id));
        for p in &pool {
            let c = self.credit.entry(p.id).or_default();
            // Bounded so that a path that could not send for a while does not hog later.
            *c = (*c + QUANTUM * rate(p) / total).min(64.0 * QUANTUM);
        }
        pool.iter()
            .filter(|p| p.can_send)
            .max_by(|a, b| self.credit[&a.id].total_cmp(&self.credit[&b.id]).then(b.id.cmp(&a.id)))
            .map_or(Decision::Wait, |p| Decision::send(p.id))
    }

    fn on_sent(&mut self, path: u64, bytes: u64) {
        if let Some(c) = self.credit.get_mut(&path) {
            *c -= bytes as f64;
            *c = c.max(-64.0 * QUANTUM);
        }
    }

    fn name(&self) -> &'static str {
        "weighted"
    }
}
