//! The CLI's applications in the shard runtime (`--shard N`, [`mpq_io::shards::Shards`]):
//! one endpoint and one application per shard, each on a thread of its own.

use anyhow::Result;
use mpq_io::shards::Shards;
use mpq_io::{Clock, UdpSocket};
use mpq_proto::endpoint::Endpoint;

use crate::cli::Common;
use crate::runner::{App, RunStats, Runner};

/// Runs `shards[k]` (an endpoint, from [`runner::endpoints`], and its application) over
/// `sockets[k]`, each shard on a thread of its own, until every application has stopped.
/// All shards share one clock, so their instants compare. Returns each application with its
/// thread's account, in shard order.
pub fn run<A: App + Send + 'static>(
    sockets: Vec<Vec<UdpSocket>>,
    shards: Vec<(Endpoint, A)>,
    common: &Common,
) -> Result<Vec<(A, RunStats)>> {
    let drivers: Vec<Runner<A>> = shards.into_iter().map(|(ep, app)| Runner::new(ep, app)).collect();
    let rt = Shards::new(sockets, Clock::new())?.pin_to(common.cpus.clone());
    let done = rt.run(drivers)?;
    Ok(done
        .into_iter()
        .map(|(runner, report)| (runner.app, RunStats { io: report.io, threads: vec![report] }))
        .collect())
}
