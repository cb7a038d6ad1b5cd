//! What the commands built on the application API (mpq-api) share: the endpoint from the
//! command line's options, and the executor their futures run on.

use std::net::SocketAddr;

use anyhow::Result;

use crate::cli::{Common, Threads};

/// An mpq-api endpoint on `addrs` for the runtime and settings of `common` (a server with
/// `server`): sockets bound and sized like every other command's (with --shard, shard 0's;
/// the endpoint binds the other shards' alike), qlog files if asked for.
pub fn endpoint(
    addrs: &[SocketAddr],
    server: Option<mpq_proto::conn::ServerConfig>,
    common: &Common,
) -> Result<mpq_api::Endpoint> {
    let vantage = if server.is_some() { "server" } else { "client" };
    // (Shared sockets whatever the runtime: the API's runtime with a thread per path needs
    // them, and they cost nothing to the single one.)
    let per_path = Common { threads: Threads::PerPath, ..common.clone() };
    let sockets = crate::runner::bind(addrs, &per_path)?;
    let options = mpq_api::Options {
        threads: match (common.shard, common.threads) {
            (Some(n), _) => mpq_api::Threads::Shards(n as usize),
            (None, Threads::Single) => mpq_api::Threads::Single,
            (None, Threads::PerPath) => mpq_api::Threads::PerPath,
        },
        cpus: common.cpus.clone(),
        path_threads: common.path_threads,
        seed: None,
        // A client follows its local address changes, as `mpq client` does.
        ignore_address_changes: false,
    };
    let ep = mpq_api::Endpoint::with_sockets(sockets, server, options)?;
    if let Some(factory) = crate::runner::qlog_factory(&common.qlog_dir, vantage) {
        ep.set_qlog_factory(factory)?;
    }
    Ok(ep)
}

/// The executor of the API's futures: one thread, with timers (the API's futures are woken
/// by mpq's runtime threads, which do the protocol's work, and stop signals by their own:
/// `stop_signal`).
pub fn executor() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_time().build()?)
}

/// Catches the stop signals (`stop_signal`) from now on.
pub fn stop_signals() -> Result<crate::stop_signal::StopSignals> {
    crate::stop_signal::StopSignals::listen().map_err(|e| anyhow::anyhow!("cannot catch Ctrl-C and SIGTERM: {e}"))
}
