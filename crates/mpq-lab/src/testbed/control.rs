//! The emulator's control socket (`/run/mpq-lab/NAME.sock`, a Unix stream socket): one
//! request line, one JSON line back, then the connection closes.
//!
//! - `stats`: every link's configuration now and its counters ([`Report`]), the shared
//!   bottleneck's and the competitor path's too when the testbed has them.
//! - `event PATH[.DIR]:ACTION`: applies a link event at once (the `--event` actions).

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use mpq_sim::{LinkConfig, LinkStats};
use serde::{Deserialize, Serialize};

use super::state::State;

/// One direction of a path: its configuration now and its counters since the start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkReport {
    /// Whether the link is up.
    pub up: bool,
    /// Rate in bit/s (0: unlimited).
    pub rate_bps: u64,
    /// One-way delay in milliseconds.
    pub delay_ms: f64,
    /// Mean loss of the loss model.
    pub loss: f64,
    /// Packets offered to the link.
    pub sent_packets: u64,
    /// Bytes (IP packets) offered to the link.
    pub sent_bytes: u64,
    /// Packets delivered (duplicates included).
    pub delivered_packets: u64,
    /// Bytes delivered.
    pub delivered_bytes: u64,
    /// Packets dropped by the tail-drop queue.
    pub dropped_queue: u64,
    /// Packets lost by the loss model (blackhole included).
    pub dropped_loss: u64,
    /// Packets dropped because the link was or went down.
    pub dropped_down: u64,
    /// Packets dropped for exceeding the MTU.
    pub dropped_mtu: u64,
    /// Copies created by duplication.
    pub duplicated: u64,
    /// Packets given the reordering delay.
    pub reordered: u64,
}

impl LinkReport {
    /// The report of a link with `config`, `stats` and state `up`.
    pub fn new(config: &LinkConfig, stats: &LinkStats, up: bool) -> Self {
        LinkReport {
            up,
            rate_bps: config.rate_bps,
            delay_ms: config.delay.as_secs_f64() * 1e3,
            loss: config.loss.mean_loss(),
            sent_packets: stats.sent_packets,
            sent_bytes: stats.sent_bytes,
            delivered_packets: stats.delivered_packets,
            delivered_bytes: stats.delivered_bytes,
            dropped_queue: stats.dropped_queue,
            dropped_loss: stats.dropped_loss,
            dropped_down: stats.dropped_down,
            dropped_mtu: stats.dropped_mtu,
            duplicated: stats.duplicated,
            reordered: stats.reordered,
        }
    }
}

/// One path's two directions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathReport {
    /// Client to server.
    pub c2s: LinkReport,
    /// Server to client.
    pub s2c: LinkReport,
    /// Packets the kernel dropped on their way into the emulator (the TUN device's queue
    /// was full: the emulator fell behind). Not part of the model; should stay 0.
    pub kernel_drops: u64,
}

/// The answer to `stats`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Seconds since the emulator's clock started.
    pub uptime_s: f64,
    /// Packets held in queues or propagating.
    pub in_flight: usize,
    /// Packets dropped because they were not IPv4.
    pub not_ipv4: u64,
    /// Packets the emulator could not write back (write errors).
    pub write_errors: u64,
    /// Every path.
    pub paths: Vec<PathReport>,
    /// The shared bottleneck, if the testbed has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<BottleneckReport>,
    /// The competitor's path (to the shared bottleneck), if the testbed has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub competitor: Option<PathReport>,
}

/// The shared bottleneck's two directions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BottleneckReport {
    /// Client to server (after each path's own link).
    pub c2s: LinkReport,
    /// Server to client (before each path's own link).
    pub s2c: LinkReport,
}

/// How long a client waits for the emulator's answer.
const TIMEOUT: Duration = Duration::from_secs(3);

/// Sends `line` to testbed `name`'s emulator and returns its answer.
pub fn request(name: &str, line: &str) -> io::Result<String> {
    let path = State::control_socket(name);
    let mut s = UnixStream::connect(&path).map_err(|e| {
        io::Error::new(e.kind(), format!("{}: {e} (is testbed {name} up and its emulator running?)", path.display()))
    })?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    let ctx = |e: io::Error| io::Error::new(e.kind(), format!("request {line:?} to {}: {e}", path.display()));
    s.write_all(format!("{line}\n").as_bytes()).map_err(ctx)?;
    let mut answer = String::new();
    BufReader::new(s).read_line(&mut answer).map_err(ctx)?;
    if answer.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the emulator closed the connection without answering",
        ));
    }
    Ok(answer.trim_end().to_owned())
}

/// The `stats` of testbed `name`.
pub fn stats(name: &str) -> io::Result<Report> {
    let a = request(name, "stats")?;
    serde_json::from_str(&a).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{e}: {a}")))
}

/// Applies `event` (`PATH[.DIR]:ACTION`) to testbed `name` at once.
pub fn event(name: &str, event: &str) -> io::Result<()> {
    let a = request(name, &format!("event {event}"))?;
    let v: serde_json::Value =
        serde_json::from_str(&a).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{e}: {a}")))?;
    match v.get("error").and_then(|e| e.as_str()) {
        Some(e) => Err(io::Error::new(io::ErrorKind::InvalidInput, e.to_owned())),
        None => Ok(()),
    }
}
