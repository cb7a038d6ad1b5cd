//! Ctrl-C (SIGINT), SIGTERM and SIGHUP stop the commands that run an endpoint (`mpq server`,
//! `mpq client`, `mpq perf server|client`) cleanly instead of killing them where they stand.
//!
//! Killed, an endpoint sent its peers nothing: they waited for their idle timeout (30 s by
//! default) to learn the connection was gone, and each connection's qlog file lost what its
//! buffer still held, usually the end of the trace and with it the close. Stopped by a
//! signal, the endpoint closes every connection (a CONNECTION_CLOSE each, RFC 9000 §10.2)
//! and waits for them to drain, a few seconds at most; a drained connection is dropped, and
//! its qlog file with it, flushed. A second signal during that wait ends the process at once.
//!
//! Listening replaces the signals' default action for the rest of the process, and also
//! for a process started in the background by a shell that ignores SIGINT for it (before,
//! such a server could only be stopped by SIGTERM or SIGKILL).

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};

/// How long a stopping endpoint waits at most for its connections to drain. (Draining lasts
/// three PTOs, RFC 9000 §10.2: tens of milliseconds on a LAN, a second on a slow path; a
/// peer that stopped answering is not waited for longer than this.)
pub const DRAIN_LIMIT: Duration = Duration::from_secs(3);

/// A stop signal that came, by its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stop(pub i32);

impl Stop {
    /// The signal's name (`SIGINT`, ...).
    pub fn name(self) -> &'static str {
        match self.0 {
            libc::SIGINT => "SIGINT",
            libc::SIGTERM => "SIGTERM",
            libc::SIGHUP => "SIGHUP",
            _ => "a signal",
        }
    }

    /// The exit status of a command the signal interrupted: 128 + its number, what a shell
    /// reports for a process the signal killed (130 for Ctrl-C).
    pub fn exit_status(self) -> i32 {
        128 + self.0
    }
}

/// A command's work interrupted by a stop signal before it ended (its connections closed);
/// `main` exits with [`Stop::exit_status`].
#[derive(Debug)]
pub struct Interrupted(pub Stop);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted by {} (connections closed)", self.0.name())
    }
}

impl std::error::Error for Interrupted {}

/// The stop signals, listened for.
pub struct StopSignals(Vec<(Signal, i32)>);

impl StopSignals {
    /// Listens for SIGINT, SIGTERM and SIGHUP from now on. Called inside the executor (its
    /// I/O driver delivers them: `api_runtime::executor`).
    pub fn listen() -> std::io::Result<Self> {
        let kinds = [
            (SignalKind::interrupt(), libc::SIGINT),
            (SignalKind::terminate(), libc::SIGTERM),
            (SignalKind::hangup(), libc::SIGHUP),
        ];
        let mut signals = Vec::with_capacity(kinds.len());
        for (kind, n) in kinds {
            signals.push((signal(kind)?, n));
        }
        Ok(Self(signals))
    }

    /// The first signal that came since the last look, if any (else `cx` is woken at the next).
    fn poll_stop(&mut self, cx: &mut Context<'_>) -> Poll<Stop> {
        for (s, n) in &mut self.0 {
            // (`None`: the executor is going away; nothing more will come on it.)
            if let Poll::Ready(Some(())) = s.poll_recv(cx) {
                return Poll::Ready(Stop(*n));
            }
        }
        Poll::Pending
    }

    /// `work`'s output, or the stop signal that came before it ended (`work` is dropped).
    pub async fn or_stop<F: Future>(&mut self, work: F) -> Result<F::Output, Stop> {
        let mut work = pin!(work);
        poll_fn(|cx| {
            if let Poll::Ready(v) = work.as_mut().poll(cx) {
                return Poll::Ready(Ok(v));
            }
            self.poll_stop(cx).map(Err)
        })
        .await
    }

    /// Closes every connection of `ep` with the application's `code` and `reason`, and waits
    /// (at most [`DRAIN_LIMIT`]) for them to drain; another stop signal meanwhile ends the
    /// process at once.
    pub async fn close(&mut self, ep: &mpq_api::Endpoint, code: u64, reason: &[u8]) {
        ep.close(code, reason);
        match self.or_stop(tokio::time::timeout(DRAIN_LIMIT, ep.wait_idle())).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => {
                tracing::warn!("connections still draining after {DRAIN_LIMIT:?}: stopping without them");
            }
            Err(again) => {
                eprintln!("{} again: stopping at once", again.name());
                std::process::exit(again.exit_status());
            }
        }
    }
}
