//! Token-bucket pacer (RFC 9002 §7.7): spreads a congestion window over an RTT instead of
//! sending it in one burst. Nanosecond accounting keeps it exact at multi-gigabit rates.

use std::time::Duration;

use crate::time::Instant;

/// Burst allowance: at least this many packets. One: at low rates (where 2 ms of the pace
/// is less than a packet) every packet keeps its place in the pace. A slow link with a
/// small buffer drops the rest of a burst it cannot hold, and a window of a few packets
/// sent back to back then loses packets every round trip: a 1 Mbit/s, 390 ms path with
/// 20 ms of queue (two packets) delivered 0.08 Mbit/s with bursts of ten, 0.62 with two
/// and 0.68 with one; a 10 Mbit/s, 18 ms path with 1.6 ms of queue (not two packets)
/// delivered 0.29 Mbit/s with two and 3.45 with one.
const MIN_BURST_PACKETS: u64 = 1;
/// The first flight may leave at once: an initial window's worth (RFC 9002 §7.2, §7.7),
/// before any RTT sample could tell the pace.
const INITIAL_BURST_PACKETS: u64 = 10;
/// Burst allowance: at most this many packets.
const MAX_BURST_PACKETS: u64 = 128;
/// Burst allowance: the bytes the pace allows in this long (keeps timer wake-ups coarse at
/// high rates, where timers finer than a few hundred microseconds are not dependable).
const BURST_INTERVAL: Duration = Duration::from_millis(2);

/// Pacing state of one path.
#[derive(Debug, Clone, Default)]
pub struct Pacer {
    /// Bytes that may be sent now. Fractional: a path polled every few microseconds earns
    /// less than a byte per poll, and truncating that would starve it.
    tokens: f64,
    last: Option<Instant>,
    /// Bytes of the first flight's allowance (INITIAL_BURST_PACKETS) not sent yet. Until they
    /// are, and while the path has no RTT sample, a refill does not clamp the bucket below
    /// them: the allowance must survive a query with nothing sent (a server's ACK of the
    /// first of two Initials), else the bucket shrank to the pace of the initial 333 ms RTT,
    /// one packet in 27 ms, and a 6-datagram certificate flight took 160 ms on loopback.
    initial_left: u64,
    /// Bytes left of the full GSO batch the bucket last let go at a fast pace
    /// ([`Pacer::delay`]).
    burst_left: u64,
}

impl Pacer {
    /// A pacer with a full bucket.
    pub fn new() -> Self {
        Self::default()
    }

    /// Pacing rate in bytes per second: 1.25 × cwnd / srtt (RFC 9002 §7.7).
    pub fn rate(window: u64, srtt: Duration) -> f64 {
        let srtt = srtt.as_secs_f64().max(1e-6);
        1.25 * window as f64 / srtt
    }

    /// The bucket: BURST_INTERVAL of the pace, but never more than half the window (a window
    /// of a few packets on a path of a few milliseconds would otherwise leave in one burst:
    /// on a 69 Mbit/s, 1.7 ms path with 0.25 ms of queue, less than two packets, the minimum
    /// window's second packet was dropped every round trip, and a 20 MB download stalled at
    /// 0.8 Mbit/s; it takes 17.8 s with half the window, 68 s with the window less a packet).
    fn capacity(rate: f64, mtu: u64, window: u64) -> u64 {
        let burst = (rate * BURST_INTERVAL.as_secs_f64()) as u64;
        burst.min(window / 2).clamp(MIN_BURST_PACKETS * mtu, MAX_BURST_PACKETS * mtu)
    }

    fn refill(&mut self, now: Instant, rate: f64, capacity: u64, mtu: u64, first_flight: bool) {
        match self.last {
            None => {
                self.initial_left = INITIAL_BURST_PACKETS * mtu;
                self.tokens = capacity.max(self.initial_left) as f64;
            }
            Some(last) => {
                let add = now.saturating_duration_since(last).as_secs_f64() * rate;
                let initial = if first_flight { self.initial_left } else { 0 };
                self.tokens = (self.tokens + add).min(capacity.max(initial) as f64);
            }
        }
        self.last = Some(now);
    }

    /// When a packet of `bytes` may be sent: `None` for now, else the earliest time.
    /// `first_flight`: the path has no RTT sample yet, so `srtt` is the initial guess and the
    /// first initial window's worth of bytes may go at once (RFC 9002 §7.7).
    ///
    /// `batch`: the bytes of a full GSO batch. When the bucket can hold one (a fast pace: 2
    /// ms of it are a batch or more), packets go a batch at a time: the first once the
    /// bucket holds a whole batch, the rest of that batch after it; so a sender that comes
    /// back every few microseconds sends full batches, not the packet or two earned since
    /// it last looked. A thread per path does come back that often (issue C2): its batches
    /// were a quarter the size of one event loop's (13 against 54 kB per sendmsg over 8
    /// loopback paths, 2026-12-02; 54 kB for both after this). The pace over a burst
    /// interval is the same; at slower paces a packet goes as soon as the bucket holds it
    /// (`MIN_BURST_PACKETS`).
    #[allow(clippy::too_many_arguments)]
    pub fn delay(
        &mut self,
        now: Instant,
        bytes: u64,
        mtu: u64,
        batch: u64,
        window: u64,
        srtt: Duration,
        first_flight: bool,
    ) -> Option<Instant> {
        let rate = Self::rate(window, srtt);
        let capacity = Self::capacity(rate, mtu, window);
        self.refill(now, rate, capacity, mtu, first_flight);
        let packet = bytes.min(capacity) as f64;
        let fast = capacity >= batch.max(bytes);
        // At a fast pace a packet goes within a batch the bucket held when it began.
        if fast && self.burst_left >= bytes && self.tokens >= packet {
            return None;
        }
        self.burst_left = 0;
        let need = if fast { batch as f64 } else { packet };
        if self.tokens >= need {
            if fast {
                self.burst_left = batch;
            }
            return None;
        }
        let missing = need - self.tokens;
        let wait = Duration::from_secs_f64(missing / rate);
        Some(now + wait.max(Duration::from_micros(1)))
    }

    /// A packet of `bytes` was sent.
    pub fn on_sent(&mut self, _now: Instant, bytes: u64) {
        self.tokens = (self.tokens - bytes as f64).max(0.0);
        self.burst_left = self.burst_left.saturating_sub(bytes);
        self.initial_left = self.initial_left.saturating_sub(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_flight_survives_a_small_packet_sent_before_it() {
        // A server ACKs the first of a client's two Initials (41 bytes), then 22 ms later,
        // with the second, sends its handshake flight: six 1200-byte datagrams. No RTT
        // sample yet: 333 ms and a 12 kB window pace one packet per 27 ms, but the first
        // flight's allowance of ten packets lets all six go at once (RFC 9002 §7.7).
        let (window, srtt, mtu) = (12_000u64, Duration::from_millis(333), 1200u64);
        let mut p = Pacer::new();
        assert_eq!(p.delay(Instant::ZERO, 41, mtu, mtu, window, srtt, true), None);
        p.on_sent(Instant::ZERO, 41);
        let t = Instant::ZERO + Duration::from_millis(22);
        for i in 0..6 {
            assert_eq!(p.delay(t, mtu, mtu, mtu, window, srtt, true), None, "datagram {i} of the flight was paced");
            p.on_sent(t, mtu);
        }
        // The allowance is one initial window, not more: the rest is paced.
        for _ in 0..3 {
            assert_eq!(p.delay(t, mtu, mtu, mtu, window, srtt, true), None);
            p.on_sent(t, mtu);
        }
        assert!(p.delay(t, mtu, mtu, mtu, window, srtt, true).is_some(), "paced after the initial window");
        // Once the path has an RTT sample the pace rules: a bucket queried before anything
        // was sent holds what the pace allows, not the first flight's allowance.
        let mut q = Pacer::new();
        assert_eq!(q.delay(Instant::ZERO, 41, mtu, mtu, window, srtt, true), None);
        assert_eq!(q.delay(t, mtu, mtu, mtu, window, srtt, false), None);
        q.on_sent(t, mtu);
        assert!(q.delay(t, mtu, mtu, mtu, window, srtt, false).is_some(), "a sampled path is paced");
    }

    #[test]
    fn paces_at_the_target_rate() {
        // 100 kB window over 10 ms: 12.5 MB/s target.
        let (window, srtt, mtu) = (100_000u64, Duration::from_millis(10), 1200u64);
        let mut p = Pacer::new();
        let mut now = Instant::ZERO;
        let end = Instant::ZERO + Duration::from_secs(1);
        let mut sent = 0u64;
        while now < end {
            match p.delay(now, mtu, mtu, mtu, window, srtt, false) {
                None => {
                    p.on_sent(now, mtu);
                    sent += mtu;
                }
                Some(t) => now = t,
            }
        }
        let target = Pacer::rate(window, srtt);
        let err = (sent as f64 - target).abs() / target;
        assert!(err < 0.02, "sent {sent} vs target {target}");
    }

    #[test]
    fn burst_is_bounded() {
        let mut p = Pacer::new();
        let mut n = 0;
        while p.delay(Instant::ZERO, 1200, 1200, 1200, 1_000_000, Duration::from_millis(100), false).is_none() {
            p.on_sent(Instant::ZERO, 1200);
            n += 1;
        }
        assert!((10..=128).contains(&n), "first burst of {n}");
        // Later bursts: what 2 ms of the pace allow, at least two packets. Here 12.5 MB/s
        // (1 MB over 100 ms): 25 kB, 20 packets.
        let later = Instant::ZERO + Duration::from_secs(1);
        let mut m = 0;
        while p.delay(later, 1200, 1200, 1200, 1_000_000, Duration::from_millis(100), false).is_none() {
            p.on_sent(later, 1200);
            m += 1;
        }
        assert_eq!(m, 20, "burst of {m}");
        // At 1 Mbit/s-like rates, one packet.
        let mut q = Pacer::new();
        let _ = q.delay(Instant::ZERO, 1200, 1200, 1200, 12_000, Duration::from_millis(400), false);
        q.on_sent(Instant::ZERO, 12_000);
        let mut k = 0;
        while q.delay(later, 1200, 1200, 1200, 12_000, Duration::from_millis(400), false).is_none() {
            q.on_sent(later, 1200);
            k += 1;
        }
        assert_eq!(k, 1, "slow-path burst of {k}");
        // A short path at the minimum window: 2 ms of the pace (1.25 x 2944 B / 1.9 ms) would
        // be the whole window; the bucket holds half of it, one packet, and the next waits
        // for the pace (0.76 ms), not a buffer too small for two.
        let mut r = Pacer::new();
        let srtt = Duration::from_micros(1900);
        let _ = r.delay(Instant::ZERO, 1472, 1472, 1472, 2944, srtt, false);
        r.on_sent(Instant::ZERO, 14_720);
        let mut k = 0;
        while r.delay(later, 1472, 1472, 1472, 2944, srtt, false).is_none() {
            r.on_sent(later, 1472);
            k += 1;
        }
        assert_eq!(k, 1, "minimum-window burst of {k}");
        let next = r.delay(later, 1472, 1472, 1472, 2944, srtt, false).unwrap();
        assert!((next - later).as_secs_f64() > 0.7e-3, "{:?}", next - later);
    }
}

#[cfg(test)]
mod poll_rate_tests {
    use super::*;

    /// Polling far more often than a byte's worth of time must not slow the pace down.
    #[test]
    fn frequent_polls_do_not_starve_the_bucket() {
        let (window, srtt, mtu) = (28_800u64, Duration::from_millis(100), 1200u64);
        let mut p = Pacer::new();
        let mut now = Instant::ZERO;
        let mut sent = 0u64;
        let end = Instant::ZERO + Duration::from_secs(1);
        while now < end {
            if p.delay(now, mtu, mtu, mtu, window, srtt, false).is_none() {
                p.on_sent(now, mtu);
                sent += mtu;
            }
            now += Duration::from_micros(1);
        }
        let target = Pacer::rate(window, srtt);
        assert!((sent as f64) > 0.9 * target, "sent {sent} B/s at a target of {target}");
    }

    /// A sender that comes back every 20 µs to a fast pace (1 Gbit/s: 2 ms of it are 250 kB)
    /// sends full batches of 44 packets once the first burst is spent, not the packet or two
    /// earned since it last looked, and keeps the pace.
    #[test]
    fn a_fast_pace_polled_often_lets_full_batches_go() {
        let (mtu, segments) = (1452u64, 44u64);
        let batch = mtu * segments;
        let (window, srtt) = (1_000_000u64, Duration::from_millis(10));
        let rate = Pacer::rate(window, srtt);
        let mut p = Pacer::new();
        let mut now = Instant::ZERO;
        let end = Instant::ZERO + Duration::from_secs(1);
        let (mut sent, mut batches) = (0u64, Vec::new());
        while now < end {
            let mut n = 0;
            while n < segments && p.delay(now, mtu, mtu, batch, window, srtt, false).is_none() {
                p.on_sent(now, mtu);
                n += 1;
            }
            if n > 0 {
                batches.push(n);
                sent += n * mtu;
            }
            now += Duration::from_micros(20);
        }
        let steady = &batches[batches.len() / 2..];
        assert!(steady.iter().all(|&n| n == segments), "batches {:?}", &steady[..steady.len().min(20)]);
        assert!((sent as f64 - rate).abs() / rate < 0.05, "sent {sent} B/s at a pace of {rate}");
    }

    /// At a pace where the bucket cannot hold a full batch, a packet still goes as soon as
    /// the bucket holds it.
    #[test]
    fn a_slow_pace_does_not_wait_for_a_batch() {
        let (mtu, batch) = (1200u64, 1200 * 44);
        let (window, srtt) = (100_000u64, Duration::from_millis(100)); // 1.25 MB/s: 2.5 kB per 2 ms
        let mut p = Pacer::new();
        let later = Instant::ZERO + Duration::from_secs(1);
        let _ = p.delay(Instant::ZERO, mtu, mtu, batch, window, srtt, false);
        p.on_sent(Instant::ZERO, 100_000);
        while p.delay(later, mtu, mtu, batch, window, srtt, false).is_none() {
            p.on_sent(later, mtu);
        }
        let next = p.delay(later, mtu, mtu, batch, window, srtt, false).expect("paced");
        let one_packet = Duration::from_secs_f64(mtu as f64 / Pacer::rate(window, srtt));
        assert!(next - later <= one_packet + Duration::from_micros(2), "{:?} > {one_packet:?}", next - later);
    }
}
