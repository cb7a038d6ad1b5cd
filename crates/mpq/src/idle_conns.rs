//! `mpq perf client --idle-connections N`: before the measured connection starts, open N
//! more connections to the same server, complete their handshakes and leave them idle, so
//! that the measurement shows what a server pays for the connections it merely holds.

use std::time::Duration;

use mpq_proto::conn::{ClientConfig, Event};
use mpq_proto::endpoint::{ConnectionHandle, Endpoint};
use mpq_proto::Instant;

/// Handshakes in flight at once while the idle connections are being opened: enough to go
/// fast, few enough to stay under a server's per-address handshake limits.
const IN_FLIGHT: usize = 16;

/// The idle connections and how far their opening has come.
#[derive(Debug, Default)]
pub struct IdleConnections {
    target: usize,
    handles: Vec<ConnectionHandle>,
    connected: usize,
    lost: usize,
    /// Every handshake done: the measurement may start.
    ready: bool,
    started: Option<Instant>,
}

impl IdleConnections {
    /// `target` connections to open (0: ready at once).
    pub fn new(target: usize) -> Self {
        Self { target, ready: target == 0, ..Self::default() }
    }

    /// True once every idle connection completed its handshake.
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// True if `h` is one of the idle connections.
    pub fn owns(&self, h: ConnectionHandle) -> bool {
        self.target > 0 && self.handles.contains(&h)
    }

    /// Idle connections that ended before the run did.
    pub fn lost(&self) -> usize {
        self.lost
    }

    /// Counts an event of an idle connection.
    pub fn on_event(&mut self, ev: &Event) {
        match ev {
            Event::Connected => self.connected += 1,
            Event::ConnectionLost(e) => {
                self.lost += 1;
                tracing::warn!(%e, "an idle connection ended");
            }
            _ => {}
        }
    }

    /// Opens more connections while fewer than [`IN_FLIGHT`] handshakes are under way and
    /// drains their events. Errors when a connection fails before the target is reached.
    pub fn poll(
        &mut self,
        now: Instant,
        ep: &mut Endpoint,
        config: &ClientConfig,
        server: std::net::SocketAddr,
    ) -> Result<(), String> {
        let started = *self.started.get_or_insert(now);
        while let Some((_, ev)) = ep.poll_event() {
            self.on_event(&ev);
        }
        if self.lost > 0 {
            return Err(format!("{} of the idle connections failed during their handshake", self.lost));
        }
        while self.handles.len() < self.target && self.handles.len() - self.connected < IN_FLIGHT {
            let h =
                ep.connect(now, config, server, "localhost").map_err(|e| format!("opening an idle connection: {e}"))?;
            self.handles.push(h);
        }
        if self.connected >= self.target {
            self.ready = true;
            eprintln!("idle connections: {} established in {:.1} s", self.connected, (now - started).as_secs_f64());
        } else if now - started > Duration::from_secs(60 + self.target as u64 / 100) {
            return Err(format!(
                "only {} of {} idle connections completed their handshake",
                self.connected, self.target
            ));
        }
        Ok(())
    }
}
