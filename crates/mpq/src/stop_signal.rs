//! Ctrl-C (SIGINT), SIGTERM and SIGHUP stop the commands that run an endpoint (`mpq server`,
//! `mpq client`, `mpq perf server|client`) cleanly instead of killing them where they stand.
//!
//! Killed, an endpoint sent its peers nothing: they waited for their idle timeout (30 s by
//! default) to learn the connection was gone, and each connection's qlog file lost what its
//! buffer still held, usually the end of the trace and with it the close. Stopped by a
//! signal while it works, the endpoint closes every connection (a CONNECTION_CLOSE each,
//! RFC 9000 §10.2) and waits for them to drain, a few seconds at most; a drained connection
//! is dropped, and its qlog file with it, flushed. A second signal ends the process at once,
//! and so does a signal that comes when no work is waiting for one (a client printing its
//! results): what the signal's default action did.
//!
//! The signals are caught on a thread of their own (`signal-hook`), which wakes the
//! command's future: the executor itself stays one thread with timers, with nothing to
//! poll. A second signal while the connections drain ends the process from that thread. A signal the process was started with ignored stays ignored: `nohup` ignores
//! SIGHUP, and a shell script's background job SIGINT (stop such a server with SIGTERM).

use std::future::{poll_fn, Future};
use std::io::Write;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// How long a stopping endpoint waits at most for its connections to drain. (Draining lasts
/// three PTOs, RFC 9000 §10.2: tens of milliseconds on a LAN, a second on a slow path; a
/// peer that stopped answering is not waited for longer than this.)
pub const DRAIN_LIMIT: Duration = Duration::from_secs(3);

/// The signals that stop a command.
const STOP_SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

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

/// Writes `line` to stderr, ignoring failure: on the way out the reader may be gone (a
/// `| tee` that Ctrl-C ended too, a terminal that hung up), and `eprintln!` would panic
/// there, before the connections are closed.
pub fn note(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// What the signal thread and the command's future share.
#[derive(Default)]
struct Board {
    /// The first stop signal that came (0: none yet).
    came: AtomicI32,
    /// A future waits for it ([`StopSignals::or_stop`]).
    armed: AtomicBool,
    /// That future's waker.
    waker: Mutex<Option<Waker>>,
}

/// The stop signals, caught.
pub struct StopSignals {
    board: Arc<Board>,
    /// The signal already reported to the command (a second one ends the process).
    reported: Option<Stop>,
}

impl StopSignals {
    /// Catches the stop signals from now on (those not ignored when the process started).
    pub fn listen() -> std::io::Result<Self> {
        let wanted: Vec<i32> = STOP_SIGNALS.into_iter().filter(|&s| !ignored(s)).collect();
        let mut signals = signal_hook::iterator::Signals::new(&wanted)?;
        let board = Arc::new(Board::default());
        let seen = board.clone();
        std::thread::Builder::new().name("mpq-signals".into()).spawn(move || {
            for sig in signals.forever() {
                let first = seen.came.compare_exchange(0, sig, Ordering::AcqRel, Ordering::Acquire).is_ok();
                if !first || !seen.armed.load(Ordering::Acquire) {
                    note(format_args!("{}: stopping at once", Stop(sig).name()));
                    std::process::exit(Stop(sig).exit_status());
                }
                if let Some(w) = seen.waker.lock().ok().and_then(|mut w| w.take()) {
                    w.wake();
                }
            }
        })?;
        Ok(Self { board, reported: None })
    }

    /// The first stop signal, once (`cx` is woken when it comes).
    fn poll_stop(&mut self, cx: &mut Context<'_>) -> Poll<Stop> {
        if self.reported.is_some() {
            // (A second signal ends the process from the signal thread.)
            return Poll::Pending;
        }
        // The waker first, then the look: a signal in between still wakes it.
        if let Ok(mut w) = self.board.waker.lock() {
            *w = Some(cx.waker().clone());
        }
        match self.board.came.load(Ordering::Acquire) {
            0 => Poll::Pending,
            sig => {
                self.reported = Some(Stop(sig));
                Poll::Ready(Stop(sig))
            }
        }
    }

    /// `work`'s output, or the stop signal that came before it ended (`work` is dropped).
    /// Only while this waits does a first signal stop the work rather than the process.
    pub async fn or_stop<F: Future>(&mut self, work: F) -> Result<F::Output, Stop> {
        let board = self.board.clone();
        let _armed = Armed::new(&board);
        let mut work = pin!(work);
        poll_fn(|cx| {
            if let Poll::Ready(v) = work.as_mut().poll(cx) {
                return Poll::Ready(Ok(v));
            }
            self.poll_stop(cx).map(Err)
        })
        .await
    }

    /// A server's life: `serve` each connection `ep` accepts until a stop signal, then close
    /// every connection with `code` ([`close_code`]) and "server shutting down" and drain.
    pub async fn serve(&mut self, ep: &mpq_api::Endpoint, code: u64, mut serve: impl FnMut(mpq_api::Connection)) {
        let accepting = async {
            while let Some(conn) = ep.accept().await {
                serve(conn);
            }
        };
        if let Err(stop) = self.or_stop(accepting).await {
            note(format_args!("{}: closing the connections and stopping", stop.name()));
            close_and_drain(ep, code, b"server shutting down").await;
        }
    }
}

/// A client's work stopped by `stop`: its connections closed with `code` ([`close_code`])
/// and "interrupted", and drained; the error `main` exits with.
pub async fn interrupted(ep: &mpq_api::Endpoint, code: u64, stop: Stop) -> Interrupted {
    close_and_drain(ep, code, b"interrupted").await;
    Interrupted(stop)
}

/// The application error code of a close without error: HTTP/3's H3_NO_ERROR (RFC 9114
/// §8.1) over `h3`, else 0 (hq-interop and perf define none).
pub fn close_code(h3: bool) -> u64 {
    if h3 {
        h3::error::Code::H3_NO_ERROR.value()
    } else {
        0
    }
}

/// Closes every connection of `ep` with the application's `code` and `reason`, and waits
/// (at most [`DRAIN_LIMIT`]) for them to drain, so that the peers learn of the close (and
/// a server counts no connection as lost at the end of a perf run).
pub async fn close_and_drain(ep: &mpq_api::Endpoint, code: u64, reason: &[u8]) {
    ep.close(code, reason);
    if !drained_within_limit(ep).await {
        tracing::warn!("connections still draining after {DRAIN_LIMIT:?}: stopping without them");
    }
}

/// Waits for the closed connections of `ep` to drain, at most [`DRAIN_LIMIT`]; whether
/// they did. A process about to exit need not wait out the whole closing period: RFC 9000
/// §10.2 lets an endpoint that closes its UDP socket end it early. Three PTOs can be long
/// where one round trip of the handshake took a retransmission: a server's Initial resent
/// after its 1 s PTO gives an RTT sample of a second (RFC 9002 §5.3 lets Initial ACKs'
/// delay go unsubtracted), and a few later samples of a millisecond leave the smoothed RTT
/// near 0.9 s and the closing period near 10 s. Until the limit the endpoint still answers
/// a peer that missed its CONNECTION_CLOSE.
pub async fn drained_within_limit(ep: &mpq_api::Endpoint) -> bool {
    tokio::time::timeout(DRAIN_LIMIT, ep.wait_idle()).await.is_ok()
}

/// While it lives, a first signal is the waiting future's to report.
struct Armed<'a>(&'a Board);

impl<'a> Armed<'a> {
    fn new(board: &'a Board) -> Self {
        board.armed.store(true, Ordering::Release);
        Self(board)
    }
}

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        self.0.armed.store(false, Ordering::Release);
    }
}

/// Whether the process started with `sig` ignored (it then stays so).
fn ignored(sig: i32) -> bool {
    #[allow(unsafe_code)]
    // SAFETY: `sigaction` with a null new action only writes the current one into `old`, a
    // valid, writable `struct sigaction` (all zeros is a valid value of it).
    let (rc, old) = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        let rc = libc::sigaction(sig, std::ptr::null(), &mut old);
        (rc, old)
    };
    rc == 0 && old.sa_sigaction == libc::SIG_IGN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_are_the_shells() {
        assert_eq!(Stop(libc::SIGINT).exit_status(), 130);
        assert_eq!(Stop(libc::SIGTERM).exit_status(), 143);
        assert_eq!(Stop(libc::SIGINT).name(), "SIGINT");
    }

    #[test]
    fn a_signal_reported_once_is_not_reported_again() {
        let mut s = StopSignals { board: Arc::new(Board::default()), reported: None };
        let mut cx = Context::from_waker(Waker::noop());
        assert!(s.poll_stop(&mut cx).is_pending());
        s.board.came.store(libc::SIGTERM, Ordering::Release);
        assert_eq!(s.poll_stop(&mut cx), Poll::Ready(Stop(libc::SIGTERM)));
        assert!(s.poll_stop(&mut cx).is_pending(), "the same signal reported twice");
    }
}
