//! `mpq perf client --0rtt`: before the measured connection, one connection completes its
//! handshake, takes the server's session tickets and closes; the measured connection then
//! resumes the session and sends from its first flight, in 0-RTT packets (RFC 9001 §4.6):
//! its requests, or with `--datagrams` its datagrams (RFC 9221 §3).

use std::time::Duration;

use mpq_proto::conn::{ClientConfig, Event};
use mpq_proto::endpoint::{ConnectionHandle, Endpoint};
use mpq_proto::Instant;

/// How long the ticket connection stays open after its handshake is confirmed, in its
/// smoothed RTTs: the tickets (NewSessionTicket in 1-RTT CRYPTO frames) leave the server
/// with HANDSHAKE_DONE, and one more round trip covers a packet of them lost or reordered.
const RTTS_AFTER_CONFIRMATION: u32 = 2;
/// The least of that wait (a loopback RTT is microseconds).
const MIN_WAIT: Duration = Duration::from_millis(5);

/// The connection that fetches the session tickets, and how far it has come.
#[derive(Debug, Default)]
pub struct TicketConnection {
    wanted: bool,
    handle: Option<ConnectionHandle>,
    /// When its handshake was confirmed, and how long to wait from then.
    confirmed: Option<(Instant, Duration)>,
    done: bool,
    error: Option<String>,
}

impl TicketConnection {
    /// `wanted`: `--0rtt` was given (otherwise ready at once).
    pub fn new(wanted: bool) -> Self {
        Self { wanted, ..Self::default() }
    }

    /// The tickets are in (or none were wanted): the measured connection may start.
    pub fn is_ready(&self) -> bool {
        !self.wanted || self.done
    }

    /// True if `h` is the ticket connection.
    pub fn owns(&self, h: ConnectionHandle) -> bool {
        self.wanted && self.handle == Some(h)
    }

    /// When [`TicketConnection::poll`] wants to run again.
    pub fn timeout(&self) -> Option<Instant> {
        let (at, wait) = self.confirmed.filter(|_| !self.done)?;
        at.checked_add(wait)
    }

    /// An event of the ticket connection.
    pub fn on_event(&mut self, now: Instant, ep: &Endpoint, ev: &Event) {
        match ev {
            Event::HandshakeConfirmed => {
                let rtt = self
                    .handle
                    .and_then(|h| ep.connection(h))
                    .and_then(|c| c.stats().paths.first().map(|p| p.rtt_ms))
                    .unwrap_or(0.0);
                let wait = Duration::from_secs_f64(rtt.max(0.0) / 1e3) * RTTS_AFTER_CONFIRMATION;
                self.confirmed = Some((now, wait.max(MIN_WAIT)));
            }
            Event::ConnectionLost(e) if !self.done => {
                self.error = Some(format!("the first connection (for the session ticket --0rtt needs) failed: {e}"));
            }
            _ => {}
        }
    }

    /// Opens the ticket connection, and closes it once the tickets had time to arrive.
    /// An error ends the run.
    pub fn poll(
        &mut self,
        now: Instant,
        ep: &mut Endpoint,
        config: &ClientConfig,
        server: std::net::SocketAddr,
    ) -> Result<(), String> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.is_ready() {
            return Ok(());
        }
        let h = match self.handle {
            Some(h) => h,
            None => {
                let h = ep.connect(now, config, server, "localhost").map_err(|e| e.to_string())?;
                self.handle = Some(h);
                h
            }
        };
        if self.timeout().is_some_and(|t| now >= t) {
            if let Some(c) = ep.connection_mut(h) {
                c.close(now, 0, b"ticket taken");
            }
            self.done = true;
        }
        Ok(())
    }
}
