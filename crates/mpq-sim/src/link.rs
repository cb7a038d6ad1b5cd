//! Directed links: serialization at a rate, a tail-drop queue, propagation delay, jitter,
//! random loss, duplication, reordering, MTU, and scripted changes.

use std::collections::VecDeque;
use std::time::Duration;

use mpq_proto::Instant;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Capacity of a link's tail-drop queue.
///
/// The queue holds every accepted packet whose serialization has not finished yet, including
/// the one currently being serialized. A packet that would exceed the limit is dropped,
/// except that an idle link (nothing queued or being serialized) always takes one packet,
/// however small the limit: like a router's packet in service or tc's `pfifo`, a queue has
/// room for at least one packet. A limit below one packet (e.g. `queue=5ms` at 0.3 Mbit/s,
/// 185 bytes) therefore means "no queueing beyond the packet on the wire", not "drop
/// everything".
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum QueueLimit {
    /// No limit (the default).
    #[default]
    Unlimited,
    /// At most this many bytes (on-wire sizes, see [`LinkConfig::overhead`]).
    Bytes(u64),
    /// At most `rate * delay` bytes: a newly accepted packet finishes serialization at most
    /// this long after it arrived. Tracks [`LinkEvent::SetRate`]. Unlimited on an unlimited-rate link.
    Delay(Duration),
    /// At most this many packets.
    Packets(usize),
}

/// Random loss process, applied after a packet has been accepted by the queue (the packet
/// still occupies the link; it is lost "on the wire").
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum LossModel {
    /// No random loss (the default).
    #[default]
    None,
    /// Each packet is lost independently with this probability.
    Bernoulli(f64),
    /// Two-state Markov (Gilbert-Elliott) bursty loss. Before each packet the state moves
    /// good→bad with probability `p_gb` or bad→good with `p_bg`; the packet is then lost with
    /// `loss_good` or `loss_bad`. Mean loss is
    /// `(p_bg * loss_good + p_gb * loss_bad) / (p_gb + p_bg)`.
    GilbertElliott {
        /// Probability of moving from the good to the bad state.
        p_gb: f64,
        /// Probability of moving from the bad to the good state.
        p_bg: f64,
        /// Loss probability in the good state.
        loss_good: f64,
        /// Loss probability in the bad state.
        loss_bad: f64,
    },
}

impl LossModel {
    /// Long-run mean loss probability of the model.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli(p) => p,
            LossModel::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => {
                if p_gb + p_bg == 0.0 {
                    loss_good
                } else {
                    (p_bg * loss_good + p_gb * loss_bad) / (p_gb + p_bg)
                }
            }
        }
    }
}

/// Configuration of one direction of a link.
///
/// `delay` is the **one-way** propagation delay. The compact string form (see the
/// [`FromStr`](std::str::FromStr) impl) quotes the path RTT instead, as research papers do, and
/// halves it: `"50mbit/20ms"` has `delay == 10ms`, so a duplex path built from that string with
/// the same config in both directions has a 20 ms propagation RTT.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Serialization rate in bits per second; 0 means unlimited (no serialization, no queue).
    pub rate_bps: u64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Each packet's delay is drawn uniformly from `delay ± jitter` (never below zero).
    /// Packets are still delivered in order unless `jitter_reorder` is set.
    pub jitter: Duration,
    /// Let jitter reorder packets (off by default: a jittered packet never overtakes).
    pub jitter_reorder: bool,
    /// Tail-drop queue capacity. It always has room for one packet when the link is idle
    /// (see [`QueueLimit`]), however small the limit.
    pub queue_limit: QueueLimit,
    /// Random loss.
    pub loss: LossModel,
    /// Probability that a packet is delivered twice (the copy arrives right after it).
    pub duplicate: f64,
    /// Probability that a packet gets `reorder_delay` extra delay (and so is overtaken).
    pub reorder: f64,
    /// Extra delay of a reordered packet.
    pub reorder_delay: Duration,
    /// Packets whose on-wire size exceeds this are dropped.
    pub mtu: usize,
    /// Bytes added to each datagram's payload size for serialization, queue accounting and the
    /// MTU check (e.g. 28 for IPv4 + UDP headers). Default 0.
    pub overhead: usize,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            rate_bps: 0,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            jitter_reorder: false,
            queue_limit: QueueLimit::Unlimited,
            loss: LossModel::None,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(10),
            mtu: usize::MAX,
            overhead: 0,
        }
    }
}

impl LinkConfig {
    /// A link with the given rate (bits/s, 0 = unlimited) and **one-way** delay, no loss,
    /// unlimited queue.
    pub fn new(rate_bps: u64, one_way_delay: Duration) -> Self {
        Self { rate_bps, delay: one_way_delay, ..Self::default() }
    }

    /// Sets the queue limit.
    pub fn with_queue(mut self, q: QueueLimit) -> Self {
        self.queue_limit = q;
        self
    }

    /// Sets the loss model.
    pub fn with_loss(mut self, loss: LossModel) -> Self {
        self.loss = loss;
        self
    }

    /// Sets the MTU.
    pub fn with_mtu(mut self, mtu: usize) -> Self {
        self.mtu = mtu;
        self
    }

    /// Time a packet of `wire_bytes` occupies the link (zero on an unlimited link).
    pub fn serialization_time(&self, wire_bytes: usize) -> Duration {
        serialization(wire_bytes as u64, self.rate_bps)
    }
}

fn serialization(bytes: u64, rate_bps: u64) -> Duration {
    if rate_bps == 0 {
        return Duration::ZERO;
    }
    let ns = (u128::from(bytes) * 8 * 1_000_000_000).div_ceil(u128::from(rate_bps));
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

/// A scripted change to a link, applied with [`Simulator::schedule`](crate::Simulator::schedule).
///
/// Rate and delay changes apply to packets offered after the change; packets already queued
/// keep their schedule.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkEvent {
    /// The link fails: every packet offered while down is dropped, and so is everything queued
    /// or in flight at the moment it goes down.
    Down,
    /// The link comes back (with an empty queue).
    Up,
    /// Sets the rate (bits/s, 0 = unlimited).
    SetRate(u64),
    /// Sets the loss model.
    SetLoss(LossModel),
    /// Sets the one-way propagation delay.
    SetDelay(Duration),
    /// The link silently loses everything from now on (loss = 100 %), while packets already in
    /// flight are still delivered. Undo with `SetLoss`.
    Blackhole,
    /// Sets the MTU (packets offered from now on whose on-wire size exceeds it are dropped,
    /// silently: a PMTU black hole, e.g. a route change onto a tunnel).
    SetMtu(usize),
}

/// Why a link dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The tail-drop queue was full.
    Queue,
    /// Random loss (including a blackhole).
    Loss,
    /// The link was down.
    Down,
    /// The packet was larger than the MTU.
    Mtu,
}

/// Per-link counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets offered to the link.
    pub sent_packets: u64,
    /// Payload bytes offered to the link.
    pub sent_bytes: u64,
    /// Packets that reached the far end (duplicates included).
    pub delivered_packets: u64,
    /// Payload bytes that reached the far end (duplicates included).
    pub delivered_bytes: u64,
    /// Packets dropped by the tail-drop queue.
    pub dropped_queue: u64,
    /// Packets lost randomly.
    pub dropped_loss: u64,
    /// Packets dropped because the link was (or went) down.
    pub dropped_down: u64,
    /// Packets dropped for exceeding the MTU.
    pub dropped_mtu: u64,
    /// Extra copies created by duplication.
    pub duplicated: u64,
    /// Packets given the extra reordering delay.
    pub reordered: u64,
}

impl LinkStats {
    /// Total packets dropped for any reason.
    pub fn dropped(&self) -> u64 {
        self.dropped_queue + self.dropped_loss + self.dropped_down + self.dropped_mtu
    }

    pub(crate) fn count_drop(&mut self, reason: DropReason) {
        match reason {
            DropReason::Queue => self.dropped_queue += 1,
            DropReason::Loss => self.dropped_loss += 1,
            DropReason::Down => self.dropped_down += 1,
            DropReason::Mtu => self.dropped_mtu += 1,
        }
    }
}

/// What happens to a packet offered to a link.
#[derive(Debug, PartialEq)]
pub enum Fate {
    /// The packet is dropped (and counted) at once.
    Drop(DropReason),
    /// Arrives at the far end at `at`; a duplicate, if any, arrives at the same time, after it.
    /// The caller hands it over at `at` only if [`Link::arrive`] still accepts it then.
    Deliver {
        /// When the packet reaches the far end.
        at: Instant,
        /// Whether a copy arrives right after it.
        duplicate: bool,
    },
}

/// Runtime state of a directed link: the link model itself, clock-agnostic.
///
/// The simulator drives it in virtual time; the kernel testbed's emulator (mpq-lab's
/// `testbed::emulator`) drives the same code with the wall clock mapped onto
/// [`Instant`]. A driver calls [`offer`](Self::offer) when a packet enters the link, keeps
/// the packet until the [`Fate::Deliver`] time, then asks [`arrive`](Self::arrive) with
/// the [`epoch`](Self::epoch) it saw at offer time whether it still gets through, and calls
/// [`apply`](Self::apply) for scripted [`LinkEvent`]s at their time.
pub struct Link {
    /// The link's current configuration ([`LinkEvent`]s change it).
    pub config: LinkConfig,
    /// Its counters.
    pub stats: LinkStats,
    up: bool,
    /// Bumped when the link goes down; in-flight packets of an older epoch are dropped.
    epoch: u32,
    rng: ChaCha8Rng,
    ge_bad: bool,
    /// When the transmitter becomes idle.
    busy_until: Instant,
    /// (serialization end, on-wire size) of every accepted packet not yet serialized.
    backlog: VecDeque<(Instant, u64)>,
    backlog_bytes: u64,
    /// Latest scheduled in-order arrival, to keep jitter from reordering.
    last_arrival: Instant,
}

impl Link {
    /// A link in state "up" with an empty queue. Its random processes (loss, jitter,
    /// duplication, reordering) draw from ChaCha8 seeded with `seed`, on stream `stream`
    /// (distinct links of one run use distinct streams).
    pub fn new(config: LinkConfig, seed: u64, stream: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        Self {
            config,
            stats: LinkStats::default(),
            up: true,
            epoch: 0,
            rng,
            ge_bad: false,
            busy_until: Instant::ZERO,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            last_arrival: Instant::ZERO,
        }
    }

    /// Whether the link is up.
    pub fn is_up(&self) -> bool {
        self.up
    }

    /// The link's epoch: bumped each time it goes down. A packet offered in an older epoch
    /// was on the wire when the link failed and is lost (see [`arrive`](Self::arrive)).
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Applies a scripted change at `now`.
    pub fn apply(&mut self, now: Instant, ev: &LinkEvent) {
        match ev {
            LinkEvent::Down => {
                if self.up {
                    self.up = false;
                    self.epoch = self.epoch.wrapping_add(1);
                    self.backlog.clear();
                    self.backlog_bytes = 0;
                    self.busy_until = now;
                    self.last_arrival = now;
                }
            }
            LinkEvent::Up => self.up = true,
            LinkEvent::SetRate(r) => self.config.rate_bps = *r,
            LinkEvent::SetLoss(l) => self.config.loss = *l,
            LinkEvent::SetDelay(d) => self.config.delay = *d,
            LinkEvent::Blackhole => self.config.loss = LossModel::Bernoulli(1.0),
            LinkEvent::SetMtu(m) => self.config.mtu = *m,
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (p >= 1.0 || self.rng.random::<f64>() < p)
    }

    fn lose(&mut self) -> bool {
        match self.config.loss {
            LossModel::None => false,
            LossModel::Bernoulli(p) => self.chance(p),
            LossModel::GilbertElliott { p_gb, p_bg, loss_good, loss_bad } => {
                let flip = if self.ge_bad { p_bg } else { p_gb };
                if self.chance(flip) {
                    self.ge_bad = !self.ge_bad;
                }
                self.chance(if self.ge_bad { loss_bad } else { loss_good })
            }
        }
    }

    fn fits(&self, wire: u64) -> bool {
        // An idle transmitter takes any packet (see `QueueLimit`): otherwise a limit smaller
        // than one packet would drop everything and no transfer could ever complete.
        if self.backlog.is_empty() {
            return true;
        }
        let cap = match self.config.queue_limit {
            QueueLimit::Unlimited => return true,
            QueueLimit::Packets(n) => return self.backlog.len() < n,
            QueueLimit::Bytes(b) => b,
            QueueLimit::Delay(d) => {
                if self.config.rate_bps == 0 {
                    return true;
                }
                let b = u128::from(self.config.rate_bps) * d.as_nanos() / 8_000_000_000;
                u64::try_from(b).unwrap_or(u64::MAX)
            }
        };
        self.backlog_bytes + wire <= cap
    }

    /// Offers a packet of `len` payload bytes at `now` and decides its fate. Updates every
    /// counter except the delivery ones (counted on arrival, since a link may go down first).
    pub fn offer(&mut self, now: Instant, len: usize) -> Fate {
        self.stats.sent_packets += 1;
        self.stats.sent_bytes += len as u64;
        let fate = self.fate(now, len);
        if let Fate::Drop(r) = fate {
            self.stats.count_drop(r);
        }
        fate
    }

    fn fate(&mut self, now: Instant, len: usize) -> Fate {
        if !self.up {
            return Fate::Drop(DropReason::Down);
        }
        let wire = len.saturating_add(self.config.overhead);
        if wire > self.config.mtu {
            return Fate::Drop(DropReason::Mtu);
        }
        let wire = wire as u64;
        let finish = if self.config.rate_bps == 0 {
            now
        } else {
            while let Some(&(end, size)) = self.backlog.front() {
                if end > now {
                    break;
                }
                self.backlog.pop_front();
                self.backlog_bytes -= size;
            }
            if !self.fits(wire) {
                return Fate::Drop(DropReason::Queue);
            }
            let end = self.busy_until.max(now) + serialization(wire, self.config.rate_bps);
            self.busy_until = end;
            self.backlog.push_back((end, wire));
            self.backlog_bytes += wire;
            end
        };
        if self.lose() {
            return Fate::Drop(DropReason::Loss);
        }
        let mut delay = self.config.delay.as_nanos() as i128;
        let j = self.config.jitter.as_nanos() as i128;
        if j > 0 {
            delay += self.rng.random_range(-j..=j);
        }
        let mut at =
            Instant::from_nanos(u64::try_from(i128::from(finish.as_nanos()) + delay.max(0)).unwrap_or(u64::MAX));
        if self.chance(self.config.reorder) {
            self.stats.reordered += 1;
            at += self.config.reorder_delay;
        } else if !self.config.jitter_reorder {
            at = at.max(self.last_arrival);
            self.last_arrival = at;
        }
        let duplicate = self.chance(self.config.duplicate);
        if duplicate {
            self.stats.duplicated += 1;
        }
        Fate::Deliver { at, duplicate }
    }

    /// A packet of `len` payload bytes offered in `epoch` reaches the far end now: true if
    /// it gets through (counted as delivered), false if the link went down since it was
    /// offered (counted as dropped, [`DropReason::Down`]).
    pub fn arrive(&mut self, epoch: u32, len: usize) -> bool {
        if self.epoch != epoch {
            self.stats.count_drop(DropReason::Down);
            return false;
        }
        self.stats.delivered_packets += 1;
        self.stats.delivered_bytes += len as u64;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_rounds_up() {
        let c = LinkConfig::new(10_000_000, Duration::ZERO);
        assert_eq!(c.serialization_time(1250), Duration::from_millis(1));
        assert_eq!(serialization(1, 3), Duration::from_nanos(2_666_666_667));
        assert_eq!(serialization(1500, 0), Duration::ZERO);
    }

    #[test]
    fn tail_drop_by_packets_and_bytes() {
        let mut l = Link::new(LinkConfig::new(8_000, Duration::ZERO).with_queue(QueueLimit::Packets(2)), 1, 0);
        let t0 = Instant::ZERO;
        assert!(matches!(l.offer(t0, 1), Fate::Deliver { .. }));
        assert!(matches!(l.offer(t0, 1), Fate::Deliver { .. }));
        assert_eq!(l.offer(t0, 1), Fate::Drop(DropReason::Queue));
        // After the first packet's 1 ms serialization there is room for one more.
        let t1 = t0 + Duration::from_millis(1);
        assert!(matches!(l.offer(t1, 1), Fate::Deliver { .. }));
        assert_eq!(l.offer(t1, 1), Fate::Drop(DropReason::Queue));

        let mut l = Link::new(LinkConfig::new(8_000, Duration::ZERO).with_queue(QueueLimit::Bytes(10)), 1, 0);
        assert!(matches!(l.offer(t0, 6), Fate::Deliver { .. }));
        assert_eq!(l.offer(t0, 5), Fate::Drop(DropReason::Queue));
        assert!(matches!(l.offer(t0, 4), Fate::Deliver { .. }));
    }

    /// A queue smaller than one packet still takes a packet when the link is idle (a router's
    /// packet in service): `0.296mbit/20.7ms/queue=5ms` (185 bytes) used to drop every
    /// 1200-byte packet, so nothing could ever cross it.
    #[test]
    fn queue_smaller_than_a_packet_holds_one_packet() {
        let cfg: LinkConfig = "0.296mbit/20.7ms/queue=5.0ms".parse().expect("spec");
        let t0 = Instant::ZERO;
        for q in [cfg.queue_limit, QueueLimit::Bytes(0), QueueLimit::Packets(0)] {
            let mut l = Link::new(LinkConfig { queue_limit: q, ..cfg.clone() }, 1, 0);
            assert!(matches!(l.offer(t0, 1200), Fate::Deliver { .. }), "{q:?}: idle link dropped a packet");
            // While it is being serialized (32 ms) the queue is full.
            assert_eq!(l.offer(t0 + Duration::from_millis(1), 1200), Fate::Drop(DropReason::Queue), "{q:?}");
            // Once it is on the wire the link is idle again.
            let done = t0 + cfg.serialization_time(1200);
            assert!(matches!(l.offer(done, 1200), Fate::Deliver { .. }), "{q:?}");
        }
    }

    #[test]
    fn gilbert_elliott_mean() {
        let m = LossModel::GilbertElliott { p_gb: 0.01, p_bg: 0.1, loss_good: 0.0, loss_bad: 1.0 };
        assert!((m.mean_loss() - 0.01 / 0.11).abs() < 1e-12);
    }
}
