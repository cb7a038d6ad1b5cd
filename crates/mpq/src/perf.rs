//! `mpq perf`: goodput measurement. The client opens N bidirectional streams and asks for a
//! number of bytes on each (8-byte big-endian request, `u64::MAX` for "until I close"); the
//! server sends that much from a static buffer.
//!
//! With `--datagrams` the client sends DATAGRAM frames (RFC 9221) instead for the duration,
//! then asks on a stream ([`DATAGRAM_REPORT`] as the request) how many the server received:
//! the answer is 16 bytes, the count and the payload bytes, big-endian.

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::time::Duration;

use anyhow::{bail, Result};
use mpq_proto::conn::{ClientConfig, DatagramConfig, DatagramError, Event, ZeroRttState};
use mpq_proto::endpoint::{ConnectionHandle, Endpoint};
use mpq_proto::{Dir, Instant, StreamId};
use serde_json::json;

use crate::cli::PerfClientArgs;
use crate::idle_conns::IdleConnections;
use crate::runner::{self, App};

/// What the server sends: zeros (the payload is encrypted anyway), handed to the stream
/// without copying ([`mpq_proto::conn::Connection::write_bytes`]).
pub(crate) static ZEROS: [u8; 1024 * 1024] = [0; 1024 * 1024];

/// The request a `--datagrams` client sends on a stream at the end: "how many of my
/// datagrams arrived".
pub const DATAGRAM_REPORT: u64 = u64::MAX - 1;

/// Datagrams the client keeps queued in the connection while it measures (the connection
/// drops the oldest beyond its queue bound; this stays well below it).
const DATAGRAM_BACKLOG: usize = 64;

/// After the last datagram is queued, wait this long for those in flight before asking
/// for the count.
const DATAGRAM_GRACE: Duration = Duration::from_millis(250);

/// The perf client in the CLI's own driver: one connection, its request streams (or
/// datagrams, or request/response runs), and the figures it prints.
pub(crate) struct PerfClient {
    config: ClientConfig,
    server: SocketAddr,
    streams: u64,
    per_stream: u64,
    duration: Option<Duration>,
    /// Print goodput every second.
    progress: bool,
    conn: Option<ConnectionHandle>,
    ids: Vec<StreamId>,
    open: Vec<bool>,
    bytes: u64,
    start: Option<Instant>,
    last_report: (Instant, u64),
    end: Option<Instant>,
    error: Option<String>,
    stats: Option<mpq_proto::conn::ConnectionStats>,
    multipath: bool,
    qlog_dir: Option<std::path::PathBuf>,
    paths: runner::ClientPaths,
    idle: IdleConnections,
    common: crate::cli::Common,
    /// `--datagrams`: the datagram measurement.
    dgram: Option<DatagramRun>,
    /// When `poll` wants to run again without I/O.
    wake: Option<Instant>,
    /// `--request-size`: the request/response run.
    pub(crate) reqs: Option<crate::perf_reqresp::RequestRun>,
    /// When the client first ran (the origin of request times).
    pub(crate) launched: Option<Instant>,
    /// `--0rtt`: the connection that takes the session tickets first.
    ticket: crate::perf_ticket::TicketConnection,
    /// What became of the measured connection's 0-RTT, at its end.
    zero_rtt: ZeroRttState,
}

/// The client's datagram measurement (`--datagrams`).
struct DatagramRun {
    /// The payload of every datagram.
    payload: bytes::Bytes,
    /// `--datagram-path`.
    path: Option<u64>,
    /// Datagrams handed to the connection.
    queued: u64,
    /// When the last one was queued (the sending phase ended).
    sent_until: Option<Instant>,
    /// The stream asking for the server's count, and the answer so far.
    report: Option<(StreamId, Vec<u8>)>,
    /// The server's count: (datagrams, payload bytes).
    received: Option<(u64, u64)>,
    /// The client's datagram counters at the end.
    stats: Option<mpq_proto::conn::DatagramStats>,
    /// Datagrams the server sent us (a peer that echoes them), and their payload bytes.
    echoed: (u64, u64),
}

impl DatagramRun {
    /// One round of the datagram measurement; `Some(result)` ends the run.
    fn poll(
        &mut self,
        now: Instant,
        start: Instant,
        duration: Duration,
        c: &mut mpq_proto::conn::Connection,
    ) -> Option<Result<(), String>> {
        while let Some(d) = c.recv_datagram() {
            self.echoed.0 += 1;
            self.echoed.1 += d.data.len() as u64;
        }
        if self.sent_until.is_none() {
            if now - start < duration {
                while c.datagram_send_queue_len() < DATAGRAM_BACKLOG {
                    match c.send_datagram(self.payload.clone(), self.path) {
                        Ok(()) => self.queued += 1,
                        // The pinned path is not open yet (or failed): the datagrams wait.
                        Err(DatagramError::UnknownPath) => break,
                        Err(DatagramError::TooLarge { max }) => {
                            return Some(Err(format!(
                                "--datagram-size {}: at most {max} bytes fit one packet on this path",
                                self.payload.len()
                            )))
                        }
                        Err(e) => return Some(Err(format!("cannot send datagrams: {e}"))),
                    }
                }
                return None;
            }
            self.sent_until = Some(now);
        }
        if self.report.is_none() {
            if now - self.sent_until.unwrap_or(now) < DATAGRAM_GRACE {
                return None;
            }
            let id = c.open_stream(Dir::Bi)?;
            let _ = c.write(id, &DATAGRAM_REPORT.to_be_bytes());
            let _ = c.finish(id);
            self.report = Some((id, Vec::new()));
        }
        let (id, answer) = self.report.as_mut()?;
        let mut b = [0u8; 16];
        while let Ok(r) = c.read(*id, &mut b) {
            answer.extend_from_slice(&b[..r.len]);
            if r.len == 0 || r.fin {
                break;
            }
        }
        if answer.len() < 16 {
            return None;
        }
        let n = u64::from_be_bytes(answer[..8].try_into().unwrap_or([0; 8]));
        let bytes = u64::from_be_bytes(answer[8..16].try_into().unwrap_or([0; 8]));
        self.received = Some((n, bytes));
        self.stats = Some(c.datagram_stats());
        Some(Ok(()))
    }
}

impl App for PerfClient {
    fn timeout(&self) -> Option<Instant> {
        // Datagrams: back soon to keep the connection's queue topped up (and to ask for
        // the count after the grace period).
        [self.paths.timeout(), self.wake, self.ticket.timeout()].into_iter().flatten().min()
    }

    fn poll(&mut self, now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
        self.launched.get_or_insert(now);
        if !self.idle.is_ready() {
            if let Err(e) = self.idle.poll(now, ep, &self.config, self.server) {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
            if !self.idle.is_ready() {
                return ControlFlow::Continue(());
            }
        }
        while let Some((h, ev)) = ep.poll_event() {
            self.on_event(now, ep, h, ev);
        }
        if self.error.is_some() {
            return ControlFlow::Break(());
        }
        if let Err(e) = self.ticket.poll(now, ep, &self.config, self.server) {
            self.error = Some(e);
            return ControlFlow::Break(());
        }
        if !self.ticket.is_ready() {
            return ControlFlow::Continue(());
        }
        if self.conn.is_none() {
            match ep.connect(now, &self.config, self.server, "localhost") {
                Ok(h) => {
                    runner::attach_qlog(ep, h, &self.qlog_dir);
                    self.conn = Some(h);
                }
                Err(e) => {
                    self.error = Some(e.to_string());
                    return ControlFlow::Break(());
                }
            }
        }
        while let Some((h, ev)) = ep.poll_event() {
            self.on_event(now, ep, h, ev);
        }
        if self.error.is_some() {
            return ControlFlow::Break(());
        }
        let Some(h) = self.conn else { return ControlFlow::Continue(()) };
        self.paths.poll(now, ep, h);
        let Some(c) = ep.connection_mut(h) else { return ControlFlow::Break(()) };
        self.multipath = c.is_multipath();
        self.zero_rtt = c.zero_rtt_state();
        // With --0rtt, a resumed connection works from its first flight (0-RTT).
        if !c.is_established() && self.zero_rtt != ZeroRttState::Pending {
            // The core's handshake timeout (--handshake-timeout) ends a silent attempt.
            return ControlFlow::Continue(());
        }
        let start = *self.start.get_or_insert(now);
        if self.last_report.0 == Instant::ZERO {
            self.last_report = (now, 0);
        }
        if let Some(rr) = self.reqs.as_mut() {
            let done = rr.poll(now, c);
            self.wake = rr.next_due();
            if done {
                self.end = Some(now);
                self.bytes = rr.bytes();
                self.stats = Some(c.stats());
                c.close(now, 0, b"done");
                return ControlFlow::Break(());
            }
            return ControlFlow::Continue(());
        }
        if let Some(d) = self.dgram.as_mut() {
            let duration = self.duration.unwrap_or_default();
            self.wake = now.checked_add(Duration::from_millis(1));
            let Some(result) = d.poll(now, start, duration, c) else { return ControlFlow::Continue(()) };
            if let Err(e) = result {
                self.error = Some(e);
            }
            self.end = Some(d.sent_until.unwrap_or(now));
            self.bytes = d.received.map_or(0, |r| r.1);
            self.stats = Some(c.stats());
            c.close(now, 0, b"done");
            return ControlFlow::Break(());
        }
        while (self.ids.len() as u64) < self.streams {
            let Some(id) = c.open_stream(Dir::Bi) else { break };
            let _ = c.write(id, &self.per_stream.to_be_bytes());
            let _ = c.finish(id);
            self.ids.push(id);
            self.open.push(true);
        }
        for (i, id) in self.ids.iter().enumerate() {
            while self.open[i] {
                // The data is only counted: take it where it lies in the receive buffer
                // (quinn's perf client does the same with read_chunk).
                match c.read_with(*id, usize::MAX, |_| {}) {
                    Ok(r) => {
                        self.bytes += r.len as u64;
                        if r.fin {
                            self.open[i] = false;
                        }
                        if r.len == 0 {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        }
        if now - self.last_report.0 >= Duration::from_secs(1) && self.progress {
            let (t0, b0) = self.last_report;
            let secs = (now - t0).as_secs_f64();
            let el = (now - start).as_secs_f64();
            println!("{el:6.2} s  {:9.1} Mbit/s", (self.bytes - b0) as f64 * 8.0 / secs / 1e6);
            self.last_report = (now, self.bytes);
        }
        let timed_out = self.duration.is_some_and(|d| now - start >= d);
        let complete = self.duration.is_none() && self.open.iter().all(|o| !o) && !self.ids.is_empty();
        if timed_out || complete {
            self.end = Some(now);
            self.stats = Some(c.stats());
            c.close(now, 0, b"done");
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

impl PerfClient {
    /// One event of the endpoint: an idle connection's, the ticket connection's, or the
    /// measured one's (a loss before the end is the run's error).
    fn on_event(&mut self, now: Instant, ep: &Endpoint, h: ConnectionHandle, ev: Event) {
        if self.idle.owns(h) {
            self.idle.on_event(&ev);
            return;
        }
        if self.ticket.owns(h) {
            self.ticket.on_event(now, ep, &ev);
            return;
        }
        if Some(h) != self.conn {
            return;
        }
        if let Event::ConnectionLost(e) = &ev {
            if self.end.is_none() && self.error.is_none() {
                self.error = Some(runner::describe_loss(e, self.server, &self.common));
            }
        }
        if ev == Event::Connected {
            runner::log_handshake(ep, h);
        }
        self.paths.on_event(now, &ev);
    }

    /// A measurement of one connection to `server` (`per_stream` bytes asked on each of
    /// `args.streams` streams, or for `duration`).
    pub(crate) fn new(
        args: &PerfClientArgs,
        config: ClientConfig,
        paths: runner::ClientPaths,
        server: SocketAddr,
        per_stream: u64,
        duration: Option<Duration>,
    ) -> Self {
        PerfClient {
            paths,
            multipath: false,
            config,
            server,
            streams: args.streams,
            per_stream,
            duration,
            progress: !args.json && args.common.shard.is_none(),
            conn: None,
            ids: Vec::new(),
            open: Vec::new(),
            bytes: 0,
            start: None,
            last_report: (Instant::ZERO, 0),
            end: None,
            error: None,
            stats: None,
            qlog_dir: args.common.qlog_dir.clone(),
            idle: IdleConnections::new(args.idle_connections),
            common: args.common.clone(),
            dgram: args.datagrams.then(|| DatagramRun {
                payload: bytes::Bytes::from(vec![0u8; args.datagram_size]),
                path: args.datagram_path,
                queued: 0,
                sent_until: None,
                report: None,
                received: None,
                stats: None,
                echoed: (0, 0),
            }),
            wake: None,
            reqs: args.request_size.map(|size| {
                let ms = Duration::from_secs_f64(args.request_interval.max(0.0) / 1e3);
                crate::perf_reqresp::RequestRun::new(size, ms, args.requests)
            }),
            launched: None,
            ticket: crate::perf_ticket::TicketConnection::new(args.zero_rtt),
            zero_rtt: ZeroRttState::NotAttempted,
        }
    }

    /// What one measured connection did: bytes, start and end (if it started), its
    /// statistics, whether it used multipath, and why it failed.
    pub(crate) fn outcome(&self) -> ClientOutcome {
        ClientOutcome {
            bytes: self.bytes,
            start: self.start,
            end: self.end,
            stats: self.stats.clone().unwrap_or_default(),
            multipath: self.multipath,
            error: self.error.clone(),
        }
    }
}

/// What one measured connection did ([`PerfClient::outcome`]).
pub(crate) struct ClientOutcome {
    pub bytes: u64,
    pub start: Option<Instant>,
    pub end: Option<Instant>,
    pub stats: mpq_proto::conn::ConnectionStats,
    pub multipath: bool,
    pub error: Option<String>,
}

/// The median of `v` (0 when empty).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// CPU time used by this process (user + system), in seconds.
pub(crate) fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass.
    #[allow(unsafe_code)]
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// What each stream asks for: (bytes per stream, `u64::MAX` for a timed run; the run's
/// duration), from `--streams`, `--bytes` and `--duration`, checked.
fn workload(args: &PerfClientArgs) -> Result<(u64, Option<Duration>)> {
    if args.streams == 0 {
        bail!("--streams 0: at least one stream is needed");
    }
    Ok(match args.bytes {
        Some(0) => bail!("--bytes 0: nothing to measure; give a positive byte count"),
        Some(total) => (total.div_ceil(args.streams), None),
        None => {
            let d = runner::seconds("--duration", args.duration)?;
            if d.is_zero() {
                bail!("--duration 0: give a positive number of seconds");
            }
            (u64::MAX, Some(d))
        }
    })
}

/// Runs one measurement and prints the result.
pub fn client(args: PerfClientArgs) -> Result<()> {
    if args.request_size.is_some() {
        if args.transport != crate::cli::Transport::Quic || args.common.shard.is_some() {
            bail!("--request-size runs over one QUIC connection: not with --transport tcp-tls/mptcp-tls or --shard");
        }
        if args.requests == 0 || !(args.request_interval >= 0.0 && args.request_interval.is_finite()) {
            bail!("--requests must be at least 1 and --request-interval a number of milliseconds >= 0");
        }
    }
    if args.transport != crate::cli::Transport::Quic {
        let (per_stream, duration) = workload(&args)?;
        return crate::perf_tcp::client(args, per_stream, duration);
    }
    let mut transport = runner::transport_config(&args.common)?;
    if args.datagrams {
        transport.datagrams = DatagramConfig::enabled();
        if args.datagram_size == 0 {
            bail!("--datagram-size 0: give a positive payload size");
        }
    }
    let transport = runner::shared(transport);
    let tls = crate::tls::client_config(&args.common, None, true, b"perf", args.zero_rtt)?;
    let streams = args.streams;
    let (per_stream, duration) = workload(&args)?;
    let config = ClientConfig { tls, transport };
    if let Some(n) = args.common.shard {
        if args.zero_rtt {
            bail!("--0rtt measures one resumed connection: not with --shard");
        }
        return crate::perf_shard::client(&args, config, duration, n as usize);
    }
    let sockets = runner::bind(&runner::client_locals(&args.paths, args.connect)?, &args.common)?;
    let bound: Vec<SocketAddr> = sockets.iter().map(|s| s.local_addr()).collect();
    let paths = runner::ClientPaths::new(&args.paths, &bound, args.connect)?;
    let app = PerfClient::new(&args, config, paths, args.connect, per_stream, duration);
    let cpu0 = cpu_seconds();
    let mut endpoint = runner::endpoint(None);
    // The idle connections and the measured one must fit under the endpoint's limit.
    endpoint.set_max_connections(args.idle_connections.saturating_add(1).max(4096));
    let (app, run) = runner::run_on(sockets, endpoint, app, &args.common)?;
    let io = run.io;
    let cpu = cpu_seconds() - cpu0;
    if let Some(e) = app.error {
        bail!("perf run failed: {e}");
    }
    let (Some(start), Some(end)) = (app.start, app.end) else { bail!("the measurement never started") };
    let secs = (end - start).as_secs_f64().max(1e-9);
    let goodput = app.bytes as f64 * 8.0 / secs;
    let stats = app.stats.unwrap_or_default();
    let paths = crate::report::paths_json(&stats);
    if let Some(d) = &app.dgram {
        let (received, received_bytes) = d.received.unwrap_or_default();
        let c = d.stats.clone().unwrap_or_default();
        let sent = c.total.sent;
        let lost = sent.saturating_sub(received);
        let loss = if sent > 0 { lost as f64 / sent as f64 } else { 0.0 };
        let per_path: serde_json::Map<String, serde_json::Value> = c
            .paths
            .iter()
            .map(|(id, p)| {
                (id.to_string(), json!({"sent": p.sent, "acked": p.acked, "lost": p.lost, "dropped": p.dropped_send}))
            })
            .collect();
        if args.json {
            let out = json!({
                "mode": "datagrams",
                "zero_rtt": app.zero_rtt.name(),
                "goodput_bps": goodput,
                "duration_s": secs,
                "bytes": received_bytes,
                "datagram_size": args.datagram_size,
                "datagram_path": args.datagram_path,
                "datagrams": {
                    "queued": d.queued,
                    "sent": sent,
                    "sent_0rtt": c.total.sent_0rtt,
                    "received": received,
                    "lost": lost,
                    "loss_ratio": loss,
                    "lost_detected": c.total.lost,
                    "acked": c.total.acked,
                    "dropped_send": c.total.dropped_send,
                    "echoed": d.echoed.0,
                    "echoed_bytes": d.echoed.1,
                    "paths": per_path,
                },
                "cpu_s": cpu,
                "cpu_util": cpu / secs,
                "multipath": app.multipath,
                "rx_datagrams": io.rx_datagrams,
                "tx_calls": io.tx_calls,
                "paths": paths,
                "threads": crate::report::threads_json(&run.threads),
            });
            println!("{out}");
        } else {
            println!(
                "datagrams of {} bytes for {secs:.2} s: sent {sent}, received {received}, lost {lost} ({:.2} %), \
                 goodput {:.1} Mbit/s, client CPU {:.0} %",
                args.datagram_size,
                100.0 * loss,
                goodput / 1e6,
                100.0 * cpu / secs
            );
            if args.zero_rtt {
                println!("  0-RTT {}: {} datagrams in 0-RTT packets", app.zero_rtt.name(), c.total.sent_0rtt);
            }
            for (id, p) in &c.paths {
                println!(
                    "  path {id}: sent {}, acknowledged {}, lost {}, dropped {}",
                    p.sent, p.acked, p.lost, p.dropped_send
                );
            }
        }
        return app.paths.finish();
    }
    if let Some(rr) = &app.reqs {
        let origin = app.launched.unwrap_or(start);
        let (first, last) = rr.span().unwrap_or((start, end));
        let span = (last - first).as_secs_f64().max(1e-9);
        let mut out = rr.json(origin);
        if let Some(o) = out.as_object_mut() {
            o.insert("mode".into(), json!("reqresp"));
            o.insert("transport".into(), json!("quic"));
            o.insert("bytes".into(), json!(rr.bytes()));
            o.insert("duration_s".into(), json!(span));
            o.insert("goodput_bps".into(), json!(rr.bytes() as f64 * 8.0 / span));
            o.insert("cpu_s".into(), json!(cpu));
            o.insert("multipath".into(), json!(app.multipath));
            o.insert("zero_rtt".into(), json!(app.zero_rtt.name()));
            o.insert("paths".into(), json!(paths));
            o.insert("threads".into(), json!(crate::report::threads_json(&run.threads)));
        }
        if args.json {
            println!("{out}");
        } else {
            let delays: Vec<f64> = out["requests"]
                .as_array()
                .map(|l| l.iter().filter_map(|r| r["delay_ms"].as_f64()).collect())
                .unwrap_or_default();
            let max = delays.iter().copied().fold(0.0, f64::max);
            println!(
                "{} of {} requests answered over {span:.2} s; delay median {:.1} ms, max {max:.1} ms",
                out["requests_answered"],
                out["requests_sent"],
                median(&delays)
            );
            crate::report::print_paths(&stats, secs);
        }
        return app.paths.finish();
    }
    if args.json {
        let out = json!({
            "transport": "quic",
            "zero_rtt": app.zero_rtt.name(),
            "goodput_bps": goodput,
            "duration_s": secs,
            "bytes": app.bytes,
            "streams": streams,
            "cpu_s": cpu,
            "cpu_util": cpu / secs,
            "key_updates": stats.key_updates,
            "multipath": app.multipath,
            "rx_datagrams": io.rx_datagrams,
            "idle_connections": args.idle_connections,
            "idle_connections_lost": app.idle.lost(),
            "tx_calls": io.tx_calls,
            "paths": paths,
            "threads": crate::report::threads_json(&run.threads),
        });
        println!("{out}");
    } else {
        println!(
            "{} bytes in {secs:.2} s: {:.1} Mbit/s, client CPU {:.0} %",
            app.bytes,
            goodput / 1e6,
            100.0 * cpu / secs
        );
        if args.zero_rtt {
            println!("0-RTT {} (the requests left in the first flight)", app.zero_rtt.name());
        }
        crate::report::print_paths(&stats, secs);
        crate::report::print_threads(&run.threads, secs);
    }
    // After the summary, so that its statistics show what happened.
    app.paths.finish()
}
