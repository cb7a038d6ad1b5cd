//! The emulator's core: the simulator's link model ([`mpq_sim::Link`]) driven by whatever
//! clock the caller passes in. It decides each packet's fate with [`Link::offer`], holds
//! the packet until the delivery time, checks it with [`Link::arrive`] (a link that went
//! down since loses it) and applies scripted [`LinkEvent`]s at their time, exactly as the
//! simulator's event loop does. No I/O and no clock: the real-time loop
//! ([`super::run`]) and the tests (a fake clock) drive it.
//!
//! With a shared bottleneck ([`Emulator::with_bottleneck`]) every path's packets cross two
//! links, as on the simulator's [`Topology::shared_bottleneck`](mpq_sim::topology::Topology::shared_bottleneck):
//! client to server their path's own (access) link and then the bottleneck, server to client
//! the bottleneck and then the access link. A packet leaving one hop is offered to the next
//! at the instant the model delivers it, not when the loop gets to it.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;
use std::time::Duration;

use mpq_proto::Instant;
use mpq_sim::{Fate, Link, LinkConfig, LinkEvent, LinkStats};

use crate::testbed::spec::Direction;

/// One path as the emulator sees it: its two links and the client's subnet (what tells
/// the directions apart).
#[derive(Debug, Clone)]
pub struct PathSetup {
    /// Client to server.
    pub c2s: LinkConfig,
    /// Server to client.
    pub s2c: LinkConfig,
    /// The client's subnet: packets to it go server to client, all others client to server.
    pub client_subnet: (Ipv4Addr, u8),
}

/// A link event due at a time, on one direction of a path.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedEvent {
    /// When (on the emulator's clock).
    pub at: Instant,
    /// The path.
    pub path: usize,
    /// The direction.
    pub dir: Direction,
    /// The change.
    pub event: LinkEvent,
}

struct Pending {
    at: Instant,
    seq: u64,
    path: usize,
    dir: Direction,
    /// The link it is crossing: 0 the first of its direction, 1 the second (with a bottleneck).
    hop: u8,
    epoch: u32,
    packet: Vec<u8>,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    /// Reversed, so the max-heap pops the earliest (time, arrival order) first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// Counters of packets the link model never saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Unmodelled {
    /// Packets that were not IPv4 (dropped: the testbed routes only IPv4 through the emulator).
    pub not_ipv4: u64,
}

/// The emulator: links, packets in flight, scripted events.
pub struct Emulator {
    paths: Vec<(PathSetup, [Link; 2])>,
    /// The link every path crosses after its own (client to server) or before it (server to
    /// client), indexed by direction.
    bottleneck: Option<[Link; 2]>,
    pending: BinaryHeap<Pending>,
    seq: u64,
    events: Vec<TimedEvent>,
    next_event: usize,
    pool: Vec<Vec<u8>>,
    /// Packets dropped before the model (see [`Unmodelled`]).
    pub unmodelled: Unmodelled,
}

/// How many spare packet buffers the emulator keeps for reuse.
const POOL: usize = 4096;

impl Emulator {
    /// An emulator for `paths`, its random processes seeded with `seed` (path `i`'s client
    /// to server link on stream `2i`, server to client on `2i + 1`: the simulator's link
    /// numbering for paths built with `connect_symmetric`), and scripted `events`.
    pub fn new(paths: Vec<PathSetup>, seed: u64, events: Vec<TimedEvent>) -> Self {
        Self::with_first_path(0, paths, seed, events)
    }

    /// Path `index` of a testbed alone, as [`new`](Self::new) would build it among the
    /// others (same random streams), with the events of `events` that concern it; in the
    /// result it is path 0. The real-time emulator runs one of these per path, each on a
    /// thread of its own.
    pub fn single_path(index: usize, path: PathSetup, seed: u64, events: &[TimedEvent]) -> Self {
        let events = events.iter().filter(|e| e.path == index).map(|e| TimedEvent { path: 0, ..e.clone() }).collect();
        Self::with_first_path(index, vec![path], seed, events)
    }

    /// An emulator whose `paths` all cross `bottleneck` (both directions alike), as the
    /// simulator's [`Topology::shared_bottleneck`](mpq_sim::topology::Topology::shared_bottleneck)
    /// builds them: the bottleneck's client to server link on random stream 0, its server to
    /// client link on 1, path `i`'s links on `2i + 2` and `2i + 3` (the simulator's
    /// competitor path is the last of `paths`). `events` change the paths' own links.
    pub fn with_bottleneck(paths: Vec<PathSetup>, bottleneck: LinkConfig, seed: u64, events: Vec<TimedEvent>) -> Self {
        let links = [Link::new(bottleneck.clone(), seed, 0), Link::new(bottleneck, seed, 1)];
        let mut emu = Self::with_first_path(1, paths, seed, events);
        emu.bottleneck = Some(links);
        emu
    }

    fn with_first_path(first: usize, paths: Vec<PathSetup>, seed: u64, mut events: Vec<TimedEvent>) -> Self {
        let paths = paths
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let k = (first + i) as u64;
                let links = [Link::new(p.c2s.clone(), seed, 2 * k), Link::new(p.s2c.clone(), seed, 2 * k + 1)];
                (p, links)
            })
            .collect();
        // Stable: events at the same time keep their command-line order.
        events.sort_by_key(|e| e.at);
        Emulator {
            paths,
            bottleneck: None,
            pending: BinaryHeap::new(),
            seq: 0,
            events,
            next_event: 0,
            pool: Vec::new(),
            unmodelled: Unmodelled::default(),
        }
    }

    /// The number of paths.
    pub fn paths(&self) -> usize {
        self.paths.len()
    }

    /// The direction of `packet` (an IPv4 packet) on `path`, or `None` if it is not IPv4.
    pub fn direction(&self, path: usize, packet: &[u8]) -> Option<Direction> {
        if packet.len() < 20 || packet[0] >> 4 != 4 {
            return None;
        }
        let dst = u32::from_be_bytes([packet[16], packet[17], packet[18], packet[19]]);
        let (net, len) = self.paths[path].0.client_subnet;
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len.min(32))) };
        Some(if dst & mask == u32::from(net) & mask { Direction::S2c } else { Direction::C2s })
    }

    /// A buffer for the next packet (from the pool when one is free).
    pub fn buffer(&mut self) -> Vec<u8> {
        self.pool.pop().unwrap_or_default()
    }

    fn recycle(&mut self, mut b: Vec<u8>) {
        if self.pool.len() < POOL {
            b.clear();
            self.pool.push(b);
        }
    }

    /// A packet entered `path` at `now`: the link of its direction decides its fate (after
    /// the events due by `now` are applied). Returns its direction, `None` if it was not
    /// IPv4 (dropped).
    pub fn offer(&mut self, now: Instant, path: usize, packet: Vec<u8>) -> Option<Direction> {
        self.apply_due_events(now);
        let Some(dir) = self.direction(path, &packet) else {
            self.unmodelled.not_ipv4 += 1;
            self.recycle(packet);
            return None;
        };
        self.forward(now, path, dir, 0, packet);
        Some(dir)
    }

    /// The links a packet of `dir` crosses, in order: the path's own, and the bottleneck
    /// after it (client to server) or before it (server to client).
    fn hops(&self) -> u8 {
        if self.bottleneck.is_some() {
            2
        } else {
            1
        }
    }

    fn link(&mut self, path: usize, dir: Direction, hop: u8) -> &mut Link {
        let own = hop == 0 && dir == Direction::C2s || hop == 1 && dir == Direction::S2c;
        match &mut self.bottleneck {
            Some(b) if !own => &mut b[dir.index()],
            _ => &mut self.paths[path].1[dir.index()],
        }
    }

    /// Offers `packet` to hop `hop` of its direction at `now` (the simulator's `forward`):
    /// held until the link delivers it, twice if the link duplicates it.
    fn forward(&mut self, now: Instant, path: usize, dir: Direction, hop: u8, packet: Vec<u8>) {
        let link = self.link(path, dir, hop);
        match link.offer(now, packet.len()) {
            Fate::Drop(_) => self.recycle(packet),
            Fate::Deliver { at, duplicate } => {
                let epoch = link.epoch();
                if duplicate {
                    let mut copy = self.buffer();
                    copy.extend_from_slice(&packet);
                    self.seq += 1;
                    self.pending.push(Pending { at, seq: self.seq, path, dir, hop, epoch, packet: copy });
                }
                self.seq += 1;
                self.pending.push(Pending { at, seq: self.seq, path, dir, hop, epoch, packet });
            }
        }
    }

    fn apply_due_events(&mut self, now: Instant) {
        while let Some(e) = self.events.get(self.next_event).filter(|e| e.at <= now) {
            if let Some((_, links)) = self.paths.get_mut(e.path) {
                links[e.dir.index()].apply(e.at, &e.event);
            }
            self.next_event += 1;
        }
    }

    /// Applies `event` to `dir` of `path` at `now` (a run-time change); false if there is
    /// no such path.
    pub fn apply_now(&mut self, now: Instant, path: usize, dir: Direction, event: &LinkEvent) -> bool {
        self.apply_due_events(now);
        match self.paths.get_mut(path) {
            Some((_, links)) => {
                links[dir.index()].apply(now, event);
                true
            }
            None => false,
        }
    }

    /// When something is next due (a packet's delivery or a scripted event).
    pub fn next_deadline(&self) -> Option<Instant> {
        let p = self.pending.peek().map(|p| p.at);
        let e = self.events.get(self.next_event).map(|e| e.at);
        match (p, e) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Time from `now` to the next deadline (zero if overdue), `None` if nothing is due.
    pub fn time_to_next(&self, now: Instant) -> Option<Duration> {
        self.next_deadline().map(|t| t.saturating_duration_since(now))
    }

    /// Does everything due by `now`, in time order (an event before a delivery at the same
    /// time, as in the simulator, where scripted events are queued first): events are
    /// applied, and each packet that arrives is passed to `deliver(path, packet)` (twice
    /// if duplicated). Returns the number of packets delivered.
    pub fn advance(&mut self, now: Instant, mut deliver: impl FnMut(usize, &[u8])) -> usize {
        let mut n = 0;
        loop {
            let event_at = self.events.get(self.next_event).map(|e| e.at);
            let packet_at = self.pending.peek().map(|p| p.at);
            match (event_at, packet_at) {
                (Some(e), p) if e <= now && p.is_none_or(|p| e <= p) => self.apply_due_events(e),
                (_, Some(p)) if p <= now => {
                    let Some(pkt) = self.pending.pop() else { break };
                    let hops = self.hops();
                    let link = self.link(pkt.path, pkt.dir, pkt.hop);
                    if !link.arrive(pkt.epoch, pkt.packet.len()) {
                        self.recycle(pkt.packet);
                    } else if pkt.hop + 1 < hops {
                        // On to the next link, at the instant this one delivered it.
                        self.forward(pkt.at, pkt.path, pkt.dir, pkt.hop + 1, pkt.packet);
                    } else {
                        deliver(pkt.path, &pkt.packet);
                        n += 1;
                        self.recycle(pkt.packet);
                    }
                }
                _ => break,
            }
        }
        n
    }

    /// The counters of `dir` of `path`.
    pub fn stats(&self, path: usize, dir: Direction) -> &LinkStats {
        &self.paths[path].1[dir.index()].stats
    }

    /// The current configuration of `dir` of `path` (events change it).
    pub fn config(&self, path: usize, dir: Direction) -> &LinkConfig {
        &self.paths[path].1[dir.index()].config
    }

    /// The shared bottleneck's counters and configuration in `dir`, if there is one.
    pub fn bottleneck(&self, dir: Direction) -> Option<&Link> {
        self.bottleneck.as_ref().map(|b| &b[dir.index()])
    }

    /// Whether `dir` of `path` is up.
    pub fn is_up(&self, path: usize, dir: Direction) -> bool {
        self.paths[path].1[dir.index()].is_up()
    }

    /// Packets held (queued or propagating).
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests;
