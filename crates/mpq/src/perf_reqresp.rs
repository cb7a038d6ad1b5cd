//! `mpq perf client --request-size BYTES`: the interactive workload of seed 002 §4.3 and
//! seed 004 (the simulator's `ReqRespClient`) over real sockets. Every `--request-interval`
//! the client sends a request of `--request-size` bytes (the 8-byte size the perf server
//! answers with, then padding) on a new bidirectional stream, and the server answers with
//! that many bytes; each request's delay runs from its slot in the schedule to the last byte
//! of its answer. A stream per request: a lost answer does not hold up the next ones.

use std::time::Duration;

use mpq_proto::conn::Connection;
use mpq_proto::{Dir, Instant, StreamId};
use serde_json::json;

/// One request.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// Its slot in the schedule.
    sent_at: Instant,
    /// When the last byte of its answer arrived.
    answered_at: Option<Instant>,
    /// Answer bytes received.
    received: u64,
    stream: Option<StreamId>,
    written: usize,
}

/// The request/response run of one connection.
#[derive(Debug)]
pub(crate) struct RequestRun {
    interval: Duration,
    count: u64,
    /// What every request carries: the answer's size, then zeros.
    body: Vec<u8>,
    /// The next request's slot (the first: when the handshake completed).
    next_due: Option<Instant>,
    /// Every request issued so far, in order.
    requests: Vec<Request>,
}

impl RequestRun {
    /// `count` requests of `size` bytes (at least the 8-byte header), one every `interval`.
    pub(crate) fn new(size: u64, interval: Duration, count: u64) -> Self {
        let size = size.max(8);
        let mut body = vec![0u8; usize::try_from(size).unwrap_or(usize::MAX)];
        body[..8].copy_from_slice(&size.to_be_bytes());
        RequestRun { interval, count, body, next_due: None, requests: Vec::new() }
    }

    /// When the next request is due, while some are left to issue.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.next_due.filter(|_| (self.requests.len() as u64) < self.count)
    }

    /// One round: issues what is due, writes requests, reads answers. True once every
    /// request was answered.
    pub(crate) fn poll(&mut self, now: Instant, c: &mut Connection) -> bool {
        let due = *self.next_due.get_or_insert(now);
        // Catch up from the slot, not from now: a late poll must not shift the schedule.
        let mut next = due;
        while next <= now && (self.requests.len() as u64) < self.count {
            self.requests.push(Request { sent_at: next, answered_at: None, received: 0, stream: None, written: 0 });
            next += self.interval;
        }
        self.next_due = Some(next);
        for req in self.requests.iter_mut().filter(|r| r.answered_at.is_none()) {
            if req.stream.is_none() {
                // Streams open in request order: if this one cannot (the peer's limit), no
                // later one can; its delay includes the wait.
                match c.open_stream(Dir::Bi) {
                    Some(id) => req.stream = Some(id),
                    None => break,
                }
            }
            let Some(id) = req.stream else { continue };
            if req.written < self.body.len() {
                if let Ok(w) = c.write(id, &self.body[req.written..]) {
                    req.written += w;
                }
                if req.written == self.body.len() {
                    let _ = c.finish(id);
                }
            }
            while let Ok(r) = c.read_with(id, usize::MAX, |_| {}) {
                req.received += r.len as u64;
                if r.fin {
                    req.answered_at = Some(now);
                    break;
                }
                if r.len == 0 {
                    break;
                }
            }
        }
        self.requests.len() as u64 >= self.count && self.requests.iter().all(|r| r.answered_at.is_some())
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
                    "sent_s": (r.sent_at - origin).as_secs_f64(),
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
