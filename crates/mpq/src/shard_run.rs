//! The CLI's applications in the shard runtime (`--shard N`, [`mpq_io::shards::Shards`]):
//! one endpoint and one application per shard, each on a thread of its own.

use std::net::SocketAddr;

use anyhow::Result;
use mpq_io::shards::Shards;
use mpq_io::{Clock, UdpSocket};
use mpq_proto::endpoint::Endpoint;

use crate::cli::Common;
use crate::runner::{self, App, RunStats, Runner};

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

/// A server's shards: every shard binds every listening address (SO_REUSEPORT; the first
/// shard picks the ports that port 0 leaves open, the others bind the same), `on_bound` sees
/// the addresses, and the shards serve until killed (or one fails).
pub fn serve<A: App + Send + 'static>(
    listen: &[SocketAddr],
    shards: Vec<(Endpoint, A)>,
    common: &Common,
    on_bound: impl FnOnce(&[SocketAddr]),
) -> Result<()> {
    let first = runner::bind(listen, common)?;
    let bound: Vec<SocketAddr> = first.iter().map(UdpSocket::local_addr).collect();
    let mut sockets = vec![first];
    for _ in 1..shards.len() {
        sockets.push(runner::bind(&bound, common)?);
    }
    on_bound(&bound);
    run(sockets, shards, common)?;
    Ok(())
}

/// Runs a server's endpoints (one, or one per shard from [`runner::endpoints`]) with an
/// application each from `app`, in the runtime `common` names, until killed.
pub fn run_server<A: App + Send + 'static>(
    listen: &[SocketAddr],
    endpoints: Vec<Endpoint>,
    mut app: impl FnMut() -> A,
    common: &Common,
    on_bound: impl FnOnce(&[SocketAddr]),
) -> Result<()> {
    if common.shard.is_some() {
        let shards = endpoints.into_iter().map(|ep| (ep, app())).collect();
        return serve(listen, shards, common, on_bound);
    }
    let ep = endpoints.into_iter().next().ok_or_else(|| anyhow::anyhow!("no endpoint to serve"))?;
    runner::run(listen, ep, app(), common, on_bound)?;
    Ok(())
}
