//! A client connection's path options on mpq's application API, shared by `mpq client`
//! and `mpq perf client`: the path manager over `--local` / `--server-addr`, and the
//! handover (`--abandon-after-ms`) and migration (`--migrate-after-ms`) asked for.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Result;
use mpq_proto::conn::PathError;
use tokio::task::JoinHandle;

use crate::cli::PathArgs;

/// How often a migration asked for with --migrate-after-ms is tried again while the
/// connection cannot move yet (no spare connection ID, handshake not confirmed).
const MIGRATE_RETRY: Duration = Duration::from_millis(50);

/// The tasks carrying out a connection's path options ([`PathTasks::start`]).
pub struct PathTasks {
    abandoning: Option<JoinHandle<Result<bool, String>>>,
    migration: Option<JoinHandle<Result<(), String>>>,
}

impl PathTasks {
    /// On `conn` (to `server`, from the endpoint `ep`): keeps the extra paths open (the
    /// path manager, unless `one_path`: a shard's connection keeps to its one path), and
    /// starts the abandonment and the migration asked for.
    pub fn start(
        ep: &mpq_api::Endpoint,
        conn: &mpq_api::Connection,
        server: SocketAddr,
        args: &PathArgs,
        one_path: bool,
    ) -> Result<Self> {
        if !one_path {
            let plan = crate::runner::path_manager_config(args, &ep.local_addrs(), server)?;
            if mpq_proto::path_manager::PathManager::new(plan.clone()).pairs().len() > 1 {
                conn.set_path_manager(Some(plan)).map_err(|e| anyhow::anyhow!("{e}"))?;
            }
        }
        let abandoning = args
            .abandon_after_ms
            .filter(|_| !one_path)
            .map(|ms| tokio::spawn(abandon_after(conn.clone(), Duration::from_millis(ms))));
        let migration = match args.migrate_after_ms.filter(|_| !one_path) {
            Some(ms) => {
                let Some(&to) = ep.local_addrs().get(1) else {
                    anyhow::bail!("--migrate-after-ms needs a second --local address to move to");
                };
                Some(tokio::spawn(migrate(conn.clone(), to, Duration::from_millis(ms))))
            }
            None => None,
        };
        Ok(Self { abandoning, migration })
    }

    /// At the end of the run: what failed of what the command line asked for (an
    /// abandonment or a migration refused); one that never came due is a warning.
    pub async fn finish(self) -> Option<String> {
        let mut path_error = None;
        if let Some(a) = self.abandoning {
            // (Done, or the run ended before the time came: then there is nothing to wait for.)
            if !a.is_finished() {
                a.abort();
            }
            match a.await {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) | Err(_) => {
                    eprintln!(
                        "warning: --abandon-after-ms: no path was abandoned (none opened, or the run ended first)"
                    )
                }
                Ok(Err(e)) => path_error = Some(e),
            }
        }
        if let Some(m) = self.migration {
            if !m.is_finished() {
                m.abort();
                eprintln!("warning: --migrate-after-ms: the connection did not migrate (the run ended first)");
            } else if let Ok(Err(e)) = m.await {
                path_error.get_or_insert(e);
            }
        }
        path_error
    }
}

/// --abandon-after-ms: once the first extra path is validated and `after` has passed,
/// stops the path manager and abandons every path but the first (PATH_ABANDON), a
/// handover test; `Ok(false)` when the connection ended first. The path events are logged.
async fn abandon_after(conn: mpq_api::Connection, after: Duration) -> Result<bool, String> {
    loop {
        match conn.path_event().await {
            Ok(e) => {
                tracing::info!(pe = ?e, "path event");
                if matches!(e, mpq_api::PathEvent::Validated { id } if id != 0) {
                    break;
                }
            }
            Err(_) => return Ok(false),
        }
    }
    tokio::time::sleep(after).await;
    // (Else the manager would open them again.)
    if conn.set_path_manager(None).is_err() {
        return Ok(false);
    }
    let ids = conn.path_ids().map_err(|e| format!("--abandon-after-ms: {e}"))?;
    let mut abandoned = false;
    for id in ids.into_iter().filter(|&id| id != 0) {
        match conn.abandon_path(id, 0) {
            Ok(()) => {
                eprintln!("abandoned path {id} (PATH_ABANDON queued)");
                abandoned = true;
            }
            Err(e) => {
                eprintln!("abandoning path {id} failed: {e}");
                return Err(format!("abandoning path {id}: {e}"));
            }
        }
    }
    Ok(abandoned)
}

/// --migrate-after-ms: moves the connection to `to` once `after` has passed, trying again
/// while it cannot move yet.
async fn migrate(conn: mpq_api::Connection, to: SocketAddr, after: Duration) -> Result<(), String> {
    tokio::time::sleep(after).await;
    loop {
        match conn.migrate(to) {
            Ok(()) => {
                eprintln!("migrated to {to} (new connection ID; the server validates the address)");
                return Ok(());
            }
            Err(mpq_api::Error::Path(PathError::NoConnectionId | PathError::HandshakeNotConfirmed)) => {
                tokio::time::sleep(MIGRATE_RETRY).await;
            }
            Err(e) => return Err(format!("--migrate-after-ms: {e}")),
        }
    }
}
