//! A [`Scenario`](crate::scenario::Scenario)'s shared bottleneck: the paths' links become
//! access links into one bottleneck link ([`Topology::shared_bottleneck`]), optionally crossed
//! by a competing single-path CUBIC download whose goodput the result reports.
//!
//! The competitor's own access link has no rate limit and no delay, so its RTT is the
//! bottleneck's; it starts with the scenario's connection and downloads until the run ends.
//!
//! # Example
//!
//! ```
//! use mpq_sim::bottleneck::Bottleneck;
//! use mpq_sim::scenario::Scenario;
//!
//! let access = vec!["100mbit/4ms".parse().unwrap(), "100mbit/4ms".parse().unwrap()];
//! let mut s = Scenario::download(access, 300_000);
//! s.bottleneck = Some(Bottleneck { link: "10mbit/16ms/queue=20ms".parse().unwrap(), competitor: true });
//! let r = s.run().unwrap();
//! assert!(r.completed);
//! assert!(r.competitor.unwrap().bytes > 0);
//! ```

use std::time::Duration;

use mpq_proto::conn::TransportConfig;
use mpq_proto::endpoint::{Endpoint, EndpointConfig};
use serde::Serialize;

use crate::apps::{DownloadClient, DownloadServer};
use crate::link::LinkConfig;
use crate::quic::QuicNode;
use crate::sim::{NodeId, Simulator};
use crate::topology::Topology;

/// The shared bottleneck of a scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Bottleneck {
    /// The bottleneck link (used in both directions). A path's RTT is its own link's plus
    /// this one's; for this link to be the bottleneck, the paths' links must be faster.
    pub link: LinkConfig,
    /// Run a competing single-path download through the bottleneck.
    pub competitor: bool,
}

/// What the competing flow got.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompetitorResult {
    /// Application bytes the competitor received while the scenario's run lasted.
    pub bytes: u64,
    /// `bytes * 8` over the scenario's duration (its completion time, or the time it stopped).
    pub goodput_bps: f64,
}

/// The competitor downloads this much: more than any run lasts.
const COMPETITOR_SIZE: u64 = 1 << 40;

/// The network of a scenario over `links`: parallel paths, or access links into `bottleneck`.
pub fn topology(links: &[LinkConfig], bottleneck: Option<&Bottleneck>, seed: u64) -> Topology {
    match bottleneck {
        None => Topology::parallel(links, seed),
        Some(b) => Topology::shared_bottleneck(links, b.link.clone(), LinkConfig::new(0, Duration::ZERO), seed),
    }
}

/// Adds the competitor's server and client (single path, CUBIC) to a
/// [`Topology::shared_bottleneck`]; returns the client's node.
///
/// # Panics
/// If `topo` has no competitor path.
pub fn add_competitor(topo: &mut Topology, seed: u64) -> NodeId {
    let comp = topo.competitor.clone().expect("a shared-bottleneck topology");
    let (client_cfg, server_cfg) = mpq_proto::testing::seeded_configs(TransportConfig::default(), seed.wrapping_add(4));
    let ep = |s: u64, cfg| Endpoint::new(EndpointConfig::with_seed(s), cfg);
    let server = QuicNode::new(ep(seed.wrapping_add(3), Some(server_cfg)), DownloadServer::default(), comp.server);
    topo.add_competitor_server(server);
    let app = DownloadClient::new(client_cfg, comp.server, COMPETITOR_SIZE);
    topo.add_competitor_client(QuicNode::new(ep(seed.wrapping_add(2), None), app, comp.client))
}

/// What the competitor client `id` received, as a goodput over `duration_s`.
pub fn competitor_result(sim: &Simulator, id: NodeId, duration_s: f64) -> CompetitorResult {
    let bytes = sim.node::<QuicNode<DownloadClient>>(id).app.received;
    CompetitorResult { bytes, goodput_bps: if duration_s > 0.0 { bytes as f64 * 8.0 / duration_s } else { 0.0 } }
}
