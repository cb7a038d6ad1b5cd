//! Toy nodes for the simulator tests.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use mpq_proto::Instant;
use mpq_sim::{Datagram, Node};

pub fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn at_ms(n: u64) -> Instant {
    Instant::ZERO + ms(n)
}

/// Sends `count` datagrams of `size` bytes (sequence number in the first 4 bytes), one every
/// `interval` starting at `start` (all at once if `interval` is zero).
pub struct Sender {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub count: u32,
    pub size: usize,
    pub interval: Duration,
    pub next: Instant,
    pub sent: u32,
}

impl Sender {
    pub fn burst(src: SocketAddr, dst: SocketAddr, count: u32, size: usize) -> Self {
        Self::paced(src, dst, count, size, Duration::ZERO)
    }

    pub fn paced(src: SocketAddr, dst: SocketAddr, count: u32, size: usize, interval: Duration) -> Self {
        Self { src, dst, count, size, interval, next: Instant::ZERO, sent: 0 }
    }
}

impl Node for Sender {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: SocketAddr, _: &[u8]) {}
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        if self.sent >= self.count || now < self.next {
            return None;
        }
        let mut data = vec![0xab; self.size];
        data[..4].copy_from_slice(&self.sent.to_le_bytes());
        self.sent += 1;
        self.next += self.interval;
        Some(Datagram { src: self.src, dst: self.dst, data })
    }
    fn poll_timeout(&self) -> Option<Instant> {
        (self.sent < self.count).then_some(self.next)
    }
}

/// One received datagram.
#[derive(Clone, Copy, Debug)]
pub struct Rx {
    pub at: Instant,
    pub seq: u32,
    pub from: SocketAddr,
    pub to: SocketAddr,
}

/// Records everything it receives.
#[derive(Default)]
pub struct Sink {
    pub rx: Vec<Rx>,
}

impl Sink {
    /// Packets that arrived after one with a higher sequence number (from the same sender).
    pub fn late(&self) -> usize {
        let mut max = std::collections::HashMap::new();
        let mut late = 0;
        for r in &self.rx {
            let m = max.entry(r.from).or_insert(r.seq);
            if r.seq < *m {
                late += 1;
            }
            *m = (*m).max(r.seq);
        }
        late
    }
}

impl Node for Sink {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, to: SocketAddr, data: &[u8]) {
        let seq = u32::from_le_bytes(data[..4].try_into().unwrap());
        self.rx.push(Rx { at: now, seq, from, to });
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_transmit(&mut self, _: Instant) -> Option<Datagram> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
}

/// Sends a `size`-byte ping every `interval` and records the round-trip time of each echo.
pub struct Pinger {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub size: usize,
    pub interval: Duration,
    pub remaining: u32,
    pub next: Instant,
    pub sent_at: Vec<Instant>,
    pub rtts: Vec<Duration>,
}

impl Node for Pinger {
    fn handle_datagram(&mut self, now: Instant, _: SocketAddr, _: SocketAddr, data: &[u8]) {
        let seq = u32::from_le_bytes(data[..4].try_into().unwrap()) as usize;
        self.rtts.push(now - self.sent_at[seq]);
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        if self.remaining == 0 || now < self.next {
            return None;
        }
        self.remaining -= 1;
        self.next += self.interval;
        let mut data = vec![0; self.size];
        data[..4].copy_from_slice(&(self.sent_at.len() as u32).to_le_bytes());
        self.sent_at.push(now);
        Some(Datagram { src: self.src, dst: self.dst, data })
    }
    fn poll_timeout(&self) -> Option<Instant> {
        (self.remaining > 0).then_some(self.next)
    }
}

/// Echoes every datagram back to its sender from the address it arrived on.
#[derive(Default)]
pub struct Echo {
    pub outbox: VecDeque<Datagram>,
}

impl Node for Echo {
    fn handle_datagram(&mut self, _: Instant, from: SocketAddr, to: SocketAddr, data: &[u8]) {
        self.outbox.push_back(Datagram { src: to, dst: from, data: data.to_vec() });
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_transmit(&mut self, _: Instant) -> Option<Datagram> {
        self.outbox.pop_front()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
}

pub mod mp;
