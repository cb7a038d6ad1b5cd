//! `mpq perf client --request-size BYTES`: the interactive workload of seed 002 §4.3 and
//! seed 004 (the simulator's `ReqRespClient`) over real sockets. Every `--request-interval`
//! the client sends a request of `--request-size` bytes (the 8-byte size the perf server
//! answers with, then padding) on a new bidirectional stream, and the server answers with
//! that many bytes; each request's delay runs from its slot in the schedule to the last byte
//! of its answer. A stream per request: a lost answer does not hold up the next ones.

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::json;

/// One request.
#[derive(Debug, Clone)]
struct Request {
    /// Its slot in the schedule.
    sent_at: Instant,
    /// When the last byte of its answer arrived.
    answered_at: Option<Instant>,
    /// Answer bytes received.
    received: u64,
}

/// The request/response run of one connection.
#[derive(Debug)]
pub(crate) struct RequestRun {
    interval: Duration,
    count: u64,
    /// What every request carries: the answer's size, then zeros.
    body: Bytes,
    /// Every request issued, in order.
    requests: Vec<Request>,
}

impl RequestRun {
    /// `count` requests of `size` bytes (at least the 8-byte header), one every `interval`.
    pub(crate) fn new(size: u64, interval: Duration, count: u64) -> Self {
        let size = size.max(8);
        let mut body = vec![0u8; usize::try_from(size).unwrap_or(usize::MAX)];
        body[..8].copy_from_slice(&size.to_be_bytes());
        RequestRun { interval, count, body: body.into(), requests: Vec::new() }
    }

    /// Issues the requests on `conn`, the first at `first` and one every interval after it
    /// (each in a task of its own, so that a slow answer delays no later request), and
    /// waits for every answer. Fails when the connection is lost.
    pub(crate) async fn run(&mut self, conn: &mpq_api::Connection, first: Instant) -> Result<(), mpq_api::Error> {
        let mut tasks = Vec::new();
        for i in 0..self.count {
            // The slot, not the time this loop got there: a late wake must not shift the
            // schedule (the delay then includes the lateness).
            let slot = first + self.interval * u32::try_from(i).unwrap_or(u32::MAX);
            tokio::time::sleep_until(slot.into()).await;
            self.requests.push(Request { sent_at: slot, answered_at: None, received: 0 });
            let (conn, body) = (conn.clone(), self.body.clone());
            tasks.push(tokio::spawn(async move { ask(&conn, body).await }));
        }
        let mut lost = None;
        for (req, t) in self.requests.iter_mut().zip(tasks) {
            match t.await {
                Ok(Ok((received, at))) => {
                    req.received = received;
                    req.answered_at = Some(at);
                }
                Ok(Err((received, e))) => {
                    req.received = received;
                    if matches!(e, mpq_api::Error::Closed(_) | mpq_api::Error::Gone) {
                        lost.get_or_insert(e);
                    }
                }
                Err(_) => {}
            }
        }
        lost.map_or(Ok(()), Err)
    }

    /// Answer bytes received.
    pub(crate) fn bytes(&self) -> u64 {
        self.requests.iter().map(|r| r.received).sum()
    }

    /// From the first request's slot to the last answer.
    pub(crate) fn span(&self) -> Option<(Instant, Instant)> {
        let first = self.requests.first()?.sent_at;
        let last = self.requests.iter().filter_map(|r| r.answered_at).max()?;
        Some((first, last))
    }

    /// The JSON of the run: counts, and every request's slot (seconds since `origin`, the
    /// client's start) and delay in ms (null if unanswered).
    pub(crate) fn json(&self, origin: Instant) -> serde_json::Value {
        let answered = self.requests.iter().filter(|r| r.answered_at.is_some()).count();
        let list: Vec<serde_json::Value> = self
            .requests
            .iter()
            .map(|r| {
                json!({
                    "sent_s": r.sent_at.saturating_duration_since(origin).as_secs_f64(),
                    "delay_ms": r.answered_at.map(|a| (a - r.sent_at).as_secs_f64() * 1e3),
                })
            })
            .collect();
        json!({
            "request_size": self.body.len(),
            "interval_ms": self.interval.as_secs_f64() * 1e3,
            "requests_sent": self.requests.len(),
            "requests_answered": answered,
            "requests": list,
        })
    }
}

/// One request on a stream of its own: the answer's byte count and when its last byte
/// arrived, or what it got before the error.
async fn ask(conn: &mpq_api::Connection, body: Bytes) -> Result<(u64, Instant), (u64, mpq_api::Error)> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| (0, e))?;
    send.write_chunk(body).await.map_err(|e| (0, e))?;
    send.finish().map_err(|e| (0, e))?;
    let mut received = 0u64;
    loop {
        match recv.read_chunk(usize::MAX).await {
            Ok(Some(b)) => received += b.len() as u64,
            Ok(None) => return Ok((received, crate::perf_client::now())),
            Err(e) => return Err((received, e)),
        }
    }
}
