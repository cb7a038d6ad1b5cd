//! `mpq perf client`'s measurement of one connection, on mpq's application API: its
//! connection (resumed in 0-RTT with `--0rtt`), its paths, and the workload: request
//! streams counted as they arrive, datagrams (`--datagrams`), or a request/response run
//! (`--request-size`). [`crate::perf`] prints the figures.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use bytes::Bytes;
use mpq_proto::conn::{ClientConfig, ConnectionStats, DatagramError, DatagramStats, ZeroRttState};

use crate::cli::PerfClientArgs;
use crate::perf::DATAGRAM_REPORT;
use crate::perf_reqresp::RequestRun;

/// Datagrams the client keeps queued in the connection while it measures: well below the
/// queue's bound (1024 by default, where the oldest would be dropped), and enough for
/// [`DATAGRAM_REFILL`] at several Gbit/s.
const DATAGRAM_BACKLOG: usize = 512;

/// How often the datagram queue is topped up (the API has no "queue drained" wake).
const DATAGRAM_REFILL: Duration = Duration::from_millis(1);

/// After the last datagram is queued, wait this long for those in flight before asking
/// for the count.
const DATAGRAM_GRACE: Duration = Duration::from_millis(250);

/// How long the ticket connection of `--0rtt` stays open after its handshake, in smoothed
/// RTTs: the tickets (NewSessionTicket in 1-RTT CRYPTO frames) leave the server with
/// HANDSHAKE_DONE a round trip after the client's Finished, and one more round trip covers
/// a packet of them lost or reordered.
const TICKET_RTTS: u32 = 3;

/// The least of that wait (a loopback RTT is microseconds).
const TICKET_MIN_WAIT: Duration = Duration::from_millis(5);

/// The wall clock the measurement is timed by (the CLI's; the sans-IO core reads none).
#[allow(clippy::disallowed_methods)]
pub(crate) fn now() -> Instant {
    Instant::now()
}

/// One connection's measurement: where to, what to ask for, and how.
pub(crate) struct Measurement<'a> {
    /// The client endpoint (with `--shard N`, of N shards).
    pub ep: &'a mpq_api::Endpoint,
    /// The command line.
    pub args: &'a PerfClientArgs,
    /// TLS and transport settings.
    pub config: &'a ClientConfig,
    /// The server address this connection goes to.
    pub server: SocketAddr,
    /// Bytes each stream asks for (`u64::MAX` for a timed run).
    pub per_stream: u64,
    /// A timed run's length (`--duration`); `None` when `--bytes` was given.
    pub duration: Option<Duration>,
    /// Print the goodput every second.
    pub progress: bool,
    /// A shard's connection: one path, no path options.
    pub one_path: bool,
}

/// What one measured connection did.
pub(crate) struct Measured {
    /// Bytes received: answers on the streams, or the datagrams' payload the server counted.
    pub bytes: u64,
    /// When the connection could carry requests (handshake done, or 0-RTT at once).
    pub start: Instant,
    /// When the last byte arrived, the duration ended, or the datagrams stopped.
    pub end: Instant,
    /// The connection's figures at the end.
    pub stats: ConnectionStats,
    /// Multipath was negotiated.
    pub multipath: bool,
    /// What became of 0-RTT.
    pub zero_rtt: ZeroRttState,
    /// `--datagrams`: that measurement's figures.
    pub dgram: Option<DatagramOutcome>,
    /// `--request-size`: every request's timing.
    pub reqs: Option<RequestRun>,
    /// An abandonment or migration asked for on the command line that failed.
    pub path_error: Option<String>,
}

/// The datagram measurement's figures (`--datagrams`).
pub(crate) struct DatagramOutcome {
    /// Datagrams handed to the connection.
    pub queued: u64,
    /// When the last one was queued (the sending phase ended).
    pub sent_until: Instant,
    /// The server's count: (datagrams, payload bytes).
    pub received: (u64, u64),
    /// The client's datagram counters at the end.
    pub stats: DatagramStats,
    /// Datagrams the server sent us (a peer that echoes them), and their payload bytes.
    pub echoed: (u64, u64),
}

impl Measurement<'_> {
    /// A connection's error as the run's: what to check when the server never answered.
    fn lost(&self, e: mpq_api::Error) -> anyhow::Error {
        match e {
            mpq_api::Error::Closed(e) => {
                anyhow!("{}", crate::runner::describe_loss(&e, self.server, &self.args.common))
            }
            e => anyhow!("{e}"),
        }
    }

    /// Connects, runs the workload, and closes the connection (its statistics taken first).
    pub async fn run(&self) -> Result<Measured> {
        let conn = self.connect().await?;
        let paths = crate::api_paths::PathTasks::start(self.ep, &conn, self.server, &self.args.paths, self.one_path)?;
        let start = now();
        let mut m = Measured {
            bytes: 0,
            start,
            end: start,
            stats: ConnectionStats::default(),
            multipath: false,
            zero_rtt: ZeroRttState::NotAttempted,
            dgram: None,
            reqs: None,
            path_error: None,
        };
        let outcome = self.workload(&conn, &mut m).await;
        m.zero_rtt = conn.zero_rtt().unwrap_or(m.zero_rtt);
        m.multipath = conn.is_multipath().unwrap_or(false);
        let stats = conn.stats();
        conn.close(0, b"done");
        m.path_error = paths.finish().await;
        outcome?;
        m.stats = stats.map_err(|e| self.lost(e))?;
        Ok(m)
    }

    /// The workload the options ask for, its figures into `m`.
    async fn workload(&self, conn: &mpq_api::Connection, m: &mut Measured) -> Result<()> {
        let args = self.args;
        if let Some(size) = args.request_size {
            let interval = Duration::from_secs_f64(args.request_interval.max(0.0) / 1e3);
            let mut run = RequestRun::new(size, interval, args.requests);
            let r = run.run(conn, m.start).await;
            m.end = now();
            m.bytes = run.bytes();
            m.reqs = Some(run);
            return r.map_err(|e| self.lost(e));
        }
        if args.datagrams {
            let d = self.datagrams(conn, m.start).await?;
            m.end = d.sent_until;
            m.bytes = d.received.1;
            m.dgram = Some(d);
            return Ok(());
        }
        let (bytes, end) = self.streams(conn, m.start).await?;
        m.bytes = bytes;
        m.end = end;
        Ok(())
    }

    /// The measured connection: with `--0rtt`, a first connection takes the server's
    /// session tickets and this one resumes the session, usable at once in 0-RTT.
    async fn connect(&self) -> Result<mpq_api::Connection> {
        let (ep, server) = (self.ep, self.server);
        if !self.args.zero_rtt {
            let conn = ep.connect(server, "localhost", self.config)?.await.map_err(|e| self.lost(e))?;
            crate::api_client::log_handshake(&conn, server);
            return Ok(conn);
        }
        self.take_tickets().await?;
        match ep.connect(server, "localhost", self.config)?.into_0rtt() {
            Ok(early) => {
                tracing::info!(peer = %server, "0-RTT attempted: the requests go at once");
                let done = early.clone();
                tokio::spawn(async move {
                    if done.established().await.is_ok() {
                        crate::api_client::log_handshake(&done, server);
                    }
                });
                Ok(early)
            }
            Err(connecting) => {
                let conn = connecting.await.map_err(|e| self.lost(e))?;
                crate::api_client::log_handshake(&conn, server);
                Ok(conn)
            }
        }
    }

    /// `--0rtt`: a connection that completes its handshake, stays open long enough for the
    /// session tickets to arrive, and closes.
    async fn take_tickets(&self) -> Result<()> {
        let failed =
            |e: mpq_api::Error| anyhow!("the first connection (for the session ticket --0rtt needs) failed: {e}");
        let conn = self.ep.connect(self.server, "localhost", self.config)?.await.map_err(failed)?;
        let rtt = conn.stats().map_err(failed)?.paths.first().map_or(0.0, |p| p.rtt_ms);
        let wait = Duration::from_secs_f64(rtt.max(0.0) / 1e3) * TICKET_RTTS;
        tokio::time::sleep(wait.max(TICKET_MIN_WAIT)).await;
        conn.close(0, b"ticket taken");
        Ok(())
    }

    /// `--streams` request streams, their answers counted as they arrive (taken where they
    /// lie, not copied), until every answer ended or the duration passed; the goodput
    /// printed every second with `progress`. The bytes and the end.
    async fn streams(&self, conn: &mpq_api::Connection, start: Instant) -> Result<(u64, Instant)> {
        let counted = Arc::new(AtomicU64::new(0));
        let mut tasks: Vec<_> = (0..self.args.streams)
            .map(|_| {
                let (conn, counted, ask) = (conn.clone(), counted.clone(), self.per_stream);
                tokio::spawn(async move {
                    let (mut send, mut recv) = conn.open_bi().await?;
                    send.write_all(&ask.to_be_bytes()).await?;
                    send.finish()?;
                    while let Some(b) = recv.read_chunk(usize::MAX).await? {
                        counted.fetch_add(b.len() as u64, Ordering::Relaxed);
                    }
                    Ok::<(), mpq_api::Error>(())
                })
            })
            .collect();
        let deadline = self.duration.map(|d| start + d);
        let mut report = (start, 0u64);
        let mut failure = None;
        let mut i = 0;
        while i < tasks.len() {
            let tick = report.0 + Duration::from_secs(1);
            let wake = [deadline, self.progress.then_some(tick)].into_iter().flatten().min();
            let done = match wake {
                Some(at) => tokio::time::timeout_at(at.into(), &mut tasks[i]).await.ok(),
                None => Some((&mut tasks[i]).await),
            };
            let now = now();
            match done {
                Some(Ok(Ok(()))) => i += 1,
                // (Task i has ended either way: it is not among those aborted and awaited
                // below, where awaiting it again panicked, "JoinHandle polled after
                // completion", whenever the server closed the connection mid-run.)
                Some(Ok(Err(e))) => {
                    failure = Some(self.lost(e));
                    i += 1;
                    break;
                }
                Some(Err(e)) => {
                    failure = Some(anyhow!("a stream's task: {e}"));
                    i += 1;
                    break;
                }
                None => {}
            }
            if deadline.is_some_and(|d| now >= d) {
                break;
            }
            if self.progress && now >= tick {
                let bytes = counted.load(Ordering::Relaxed);
                let secs = (now - report.0).as_secs_f64();
                let el = (now - start).as_secs_f64();
                println!("{el:6.2} s  {:9.1} Mbit/s", (bytes - report.1) as f64 * 8.0 / secs / 1e6);
                report = (now, bytes);
            }
        }
        let end = now();
        let bytes = counted.load(Ordering::Relaxed);
        for t in tasks.drain(i..) {
            // (A timed run's streams are still open: their tasks go, and their handles.)
            t.abort();
            let _ = t.await;
        }
        match failure {
            Some(e) => Err(e),
            None => Ok((bytes, end)),
        }
    }

    /// `--datagrams`: datagrams of `--datagram-size` bytes for the duration, the queue kept
    /// topped up; then, after a grace period for those in flight, the server's count asked
    /// for on a stream ([`DATAGRAM_REPORT`]).
    async fn datagrams(&self, conn: &mpq_api::Connection, start: Instant) -> Result<DatagramOutcome> {
        let echoed = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let echo = {
            let (conn, echoed) = (conn.clone(), echoed.clone());
            tokio::spawn(async move {
                while let Ok(d) = conn.read_datagram().await {
                    echoed.0.fetch_add(1, Ordering::Relaxed);
                    echoed.1.fetch_add(d.data.len() as u64, Ordering::Relaxed);
                }
            })
        };
        let outcome = match self.send_datagrams(conn, start).await {
            Ok((queued, until)) => self.datagram_report(conn, queued, until).await,
            Err(e) => Err(e),
        };
        echo.abort();
        let _ = echo.await;
        let mut outcome = outcome?;
        outcome.echoed = (echoed.0.load(Ordering::Relaxed), echoed.1.load(Ordering::Relaxed));
        Ok(outcome)
    }

    /// The sending phase of `--datagrams`: the datagrams queued, and when it ended.
    async fn send_datagrams(&self, conn: &mpq_api::Connection, start: Instant) -> Result<(u64, Instant)> {
        let args = self.args;
        let payload = Bytes::from(vec![0u8; args.datagram_size]);
        let until = start + self.duration.unwrap_or_default();
        let mut queued = 0u64;
        while now() < until {
            let queue = conn.datagram_send_queue_len().map_err(|e| self.lost(e))?;
            let room = DATAGRAM_BACKLOG.saturating_sub(queue);
            let sent = match room {
                0 => Ok(0),
                n => conn.send_datagrams(std::iter::repeat_n(payload.clone(), n), args.datagram_path),
            };
            match sent {
                Ok(n) => queued += n as u64,
                // The pinned path is not open yet (or failed): the datagrams wait.
                Err(mpq_api::Error::Datagram(DatagramError::UnknownPath)) => {}
                Err(mpq_api::Error::Datagram(DatagramError::TooLarge { max })) => {
                    bail!("--datagram-size {}: at most {max} bytes fit one packet on this path", args.datagram_size)
                }
                Err(e @ (mpq_api::Error::Closed(_) | mpq_api::Error::Gone)) => return Err(self.lost(e)),
                Err(e) => bail!("cannot send datagrams: {e}"),
            }
            tokio::time::sleep(DATAGRAM_REFILL.min(until.saturating_duration_since(now()))).await;
        }
        Ok((queued, now()))
    }

    /// Asks the server how many datagrams arrived (16 bytes: the count and the payload
    /// bytes, big-endian), after the grace period.
    async fn datagram_report(
        &self,
        conn: &mpq_api::Connection,
        queued: u64,
        sent_until: Instant,
    ) -> Result<DatagramOutcome> {
        tokio::time::sleep(DATAGRAM_GRACE).await;
        let ask = async {
            let (mut send, mut recv) = conn.open_bi().await?;
            send.write_all(&DATAGRAM_REPORT.to_be_bytes()).await?;
            send.finish()?;
            recv.read_to_end(16).await
        };
        let answer = ask.await.map_err(|e| self.lost(e))?;
        if answer.len() < 16 {
            bail!("the server's datagram count is {} bytes long, not 16: is it `mpq perf server`?", answer.len());
        }
        let word = |k: usize| u64::from_be_bytes(answer[k..k + 8].try_into().unwrap_or([0; 8]));
        let stats = conn.datagram_stats().map_err(|e| self.lost(e))?;
        Ok(DatagramOutcome { queued, sent_until, received: (word(0), word(8)), stats, echoed: (0, 0) })
    }
}

/// `--idle-connections N`: before the measured connection starts, N more connections to
/// the same server complete their handshakes and stay idle, so that the measurement shows
/// what a server pays for the connections it merely holds. At most [`IDLE_IN_FLIGHT`]
/// handshakes at once.
pub(crate) async fn open_idle(
    ep: &mpq_api::Endpoint,
    config: &ClientConfig,
    server: SocketAddr,
    n: usize,
) -> Result<Vec<mpq_api::Connection>> {
    let started = now();
    let limit = Duration::from_secs(60 + n as u64 / 100);
    let mut open = Vec::with_capacity(n);
    while open.len() < n {
        let batch = IDLE_IN_FLIGHT.min(n - open.len());
        let mut attempts = Vec::with_capacity(batch);
        for _ in 0..batch {
            attempts
                .push(ep.connect(server, "localhost", config).map_err(|e| anyhow!("opening an idle connection: {e}"))?);
        }
        let left = limit.saturating_sub(started.elapsed());
        let Ok(done) = tokio::time::timeout(left, crate::api_client::join_all(attempts)).await else {
            bail!("only {} of {n} idle connections completed their handshake", open.len());
        };
        let failed = done.iter().filter(|r| r.is_err()).count();
        if failed > 0 {
            bail!("{failed} of the idle connections failed during their handshake");
        }
        open.extend(done.into_iter().flatten());
    }
    if n > 0 {
        eprintln!("idle connections: {} established in {:.1} s", open.len(), started.elapsed().as_secs_f64());
    }
    Ok(open)
}

/// Handshakes in flight at once while the idle connections are being opened: enough to go
/// fast, few enough to stay under a server's per-address handshake limits.
const IDLE_IN_FLIGHT: usize = 16;
