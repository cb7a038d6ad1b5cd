//! HyStart++ (RFC 9406): leaves the initial slow start when the round trip time starts to grow,
//! before the window overshoots into the bottleneck's queue.
//!
//! Why mpq needs it: standard slow start doubles the window every round trip until a packet
//! is lost, so behind a deep buffer (seed 002's high-BDP class has queues of up to 2 s) the
//! window grows to many times the path's bandwidth-delay product, the queue fills, and the
//! path's delay grows by the whole queue before the first loss (then hundreds of packets are
//! lost at once). With several paths that delay is everybody's problem: the receiver's
//! flow-control window waits for data queued on the slowest path. HyStart++ watches the
//! minimum RTT of each round and, once it rose by a threshold, grows the window by a quarter
//! of the standard rate for a few rounds (Conservative Slow Start) and then hands over to
//! congestion avoidance.
//!
//! Used for the initial slow start only (RFC 9406 §4.2: after a loss or persistent
//! congestion the slow start threshold ends slow start). Rounds are delimited by packet
//! numbers in the path's own application data space (RFC 9406 §4.2 `windowEnd`, QUIC's
//! packet numbers for TCP's sequence numbers): a round ends when a packet numbered at or
//! above the next packet number to send at the round's start is acknowledged. Each path has
//! its own controller, packet number space and RTT estimator, so its own HyStart++.
//!
//! The controller sees each ACK (PATH_ACK) frame once, through [`HyStart::on_ack_frame`]:
//! the round check and the RTT sample (one per frame, as RFC 9406 counts samples per ACK),
//! and each newly acknowledged packet through [`HyStart::growth`] (how much it grows the
//! window: `cwnd += N` in slow start, `N / CSS_GROWTH_DIVISOR` in CSS; no `L` cap, the
//! sender paces, RFC 9406 §4.2).
//!
//! One departure from the RFC: the RTT dropping below the CSS baseline (which sends CSS
//! back to slow start, RFC 9406 §4.2) does not count when the sender was app-limited in
//! this round or the previous one, see [`HyStart::on_ack_frame`].

use std::time::Duration;

/// RFC 9406 §4.3: MIN_RTT_THRESH.
const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
/// RFC 9406 §4.3: MAX_RTT_THRESH.
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
/// RFC 9406 §4.3: MIN_RTT_DIVISOR.
const MIN_RTT_DIVISOR: u32 = 8;
/// RFC 9406 §4.3: N_RTT_SAMPLE, RTT samples a round needs before it can end slow start.
const N_RTT_SAMPLE: u32 = 8;
/// RFC 9406 §4.3: CSS_GROWTH_DIVISOR.
pub(crate) const CSS_GROWTH_DIVISOR: u64 = 4;
/// RFC 9406 §4.3: CSS_ROUNDS.
const CSS_ROUNDS: u32 = 5;

/// Where HyStart++ is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Standard slow start, watching the RTT.
    SlowStart,
    /// Conservative Slow Start, in its `rounds`-th round (0: the round it started in),
    /// against the minimum RTT that started it (`cssBaselineMinRtt`).
    Css { rounds: u32, baseline: Duration },
    /// Done: congestion avoidance, or a loss ended slow start, or disabled.
    Off,
}

/// How a newly acknowledged packet in the initial slow start grows the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Growth {
    /// By the bytes acknowledged (standard slow start).
    Full,
    /// By the bytes acknowledged divided by [`CSS_GROWTH_DIVISOR`].
    Conservative,
}

/// HyStart++ state of one path.
#[derive(Debug, Clone)]
pub(crate) struct HyStart {
    phase: Phase,
    /// `windowEnd`: the current round ends when this packet number or a larger one is
    /// acknowledged (none before the first acknowledgement).
    window_end: Option<u64>,
    /// `lastRoundMinRTT`.
    last_round_min_rtt: Option<Duration>,
    /// `currentRoundMinRTT`.
    current_round_min_rtt: Option<Duration>,
    /// `rttSampleCount`: RTT samples taken in the current round.
    samples: u32,
    /// An app-limited acknowledgement (the sender short of data or flow-control credit)
    /// came in the current round, and in the previous one.
    limited: (bool, bool),
}

impl HyStart {
    /// Watching a new path's initial slow start; `enabled: false` leaves standard slow start.
    pub fn new(enabled: bool) -> Self {
        Self {
            phase: if enabled { Phase::SlowStart } else { Phase::Off },
            window_end: None,
            last_round_min_rtt: None,
            current_round_min_rtt: None,
            samples: 0,
            limited: (false, false),
        }
    }

    /// A packet sent while the sender was short of data or of flow-control credit was
    /// acknowledged: the queue may have drained meanwhile, so this round's and the next
    /// round's lower RTTs do not prove the rise spurious.
    pub fn on_app_limited_ack(&mut self) {
        self.limited.0 = true;
    }

    /// Slow start ended another way (a loss or an ECN mark, RFC 9406 §4.2): HyStart++ has
    /// nothing more to do.
    pub fn stop(&mut self) {
        self.phase = Phase::Off;
    }

    /// An ACK frame newly acknowledged packets up to `largest_acked` (packet number) while
    /// `next_pn` is the next packet number the path will send (`SND.NXT`), with an RTT
    /// `sample` if it gave one (RFC 9406 §4.2). Returns true when slow start ends now (CSS
    /// ran its CSS_ROUNDS rounds): the caller sets the slow start threshold to the window.
    pub fn on_ack_frame(&mut self, largest_acked: u64, next_pn: u64, sample: Option<Duration>) -> bool {
        if self.phase == Phase::Off {
            return false;
        }
        // A new round: at the start, or once `windowEnd` is acknowledged.
        if self.window_end.is_none_or(|end| largest_acked >= end) {
            self.window_end = Some(next_pn);
            self.last_round_min_rtt = self.current_round_min_rtt.take();
            self.samples = 0;
            self.limited = (false, self.limited.0);
            if let Phase::Css { rounds, baseline } = self.phase {
                // "If CSS_ROUNDS rounds are complete, enter congestion avoidance": the round
                // CSS started in counts as the first.
                if rounds + 1 >= CSS_ROUNDS {
                    self.phase = Phase::Off;
                    return true;
                }
                self.phase = Phase::Css { rounds: rounds + 1, baseline };
            }
        }
        let Some(sample) = sample else { return false };
        let current = self.current_round_min_rtt.map_or(sample, |m| m.min(sample));
        self.current_round_min_rtt = Some(current);
        self.samples = self.samples.saturating_add(1);
        if self.samples < N_RTT_SAMPLE {
            return false;
        }
        match self.phase {
            Phase::SlowStart => {
                if let Some(last) = self.last_round_min_rtt {
                    let thresh = (last / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
                    if current >= last + thresh {
                        self.phase = Phase::Css { rounds: 0, baseline: current };
                    }
                }
            }
            // The RTT went back down: the rise was not the queue, slow start resumes (RFC
            // 9406 §4.2). Unless the sender paused (flow control, no data) in this round or
            // the last: the queue then drained, and going back to slow start would double a
            // window that already filled it. (A flow-control stall of 200 ms on a
            // 79 Mbit/s, 82 ms path with 247 ms of queue sent it back to slow start, and its
            // window grew to 5.3 MB and lost 1171 packets.)
            Phase::Css { baseline, .. } if current < baseline && self.limited == (false, false) => {
                self.phase = Phase::SlowStart
            }
            _ => {}
        }
        false
    }

    /// How a newly acknowledged packet grows the window in slow start.
    pub fn growth(&self) -> Growth {
        match self.phase {
            Phase::Css { .. } => Growth::Conservative,
            _ => Growth::Full,
        }
    }

    /// True until the initial slow start is over.
    pub fn active(&self) -> bool {
        self.phase != Phase::Off
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// One round: `n` ACK frames, each acknowledging one of the packets numbered from
    /// `first` on and giving an RTT sample of `rtt_ms`, while the packets of the next round
    /// are numbered from `first + n` on. Returns the packet number after the round's and
    /// whether an ACK ended slow start.
    fn round(h: &mut HyStart, first: u64, n: u64, rtt_ms: u64) -> (u64, bool) {
        let mut exit = false;
        for pn in first..first + n {
            exit |= h.on_ack_frame(pn, first + n, Some(ms(rtt_ms)));
        }
        (first + n, exit)
    }

    /// RFC 9406 §4.2: a round's minimum RTT at least lastRoundMinRTT + RttThresh (with 8
    /// samples) enters CSS, which grows by a quarter (CSS_GROWTH_DIVISOR, §4.3) and after
    /// CSS_ROUNDS rounds enters congestion avoidance.
    #[test]
    fn a_rising_rtt_enters_css_and_css_rounds_later_congestion_avoidance() {
        let mut h = HyStart::new(true);
        let (pn, _) = round(&mut h, 0, 10, 100);
        let (pn, _) = round(&mut h, pn, 10, 100);
        // Against 100 ms the threshold is 12.5 ms: 110 ms is not enough.
        let (mut pn, _) = round(&mut h, pn, 10, 110);
        assert_eq!(h.growth(), Growth::Full);
        // Against 110 ms it is 13.75 ms: 130 ms is, from the eighth sample of the round on.
        for k in 0..10 {
            assert!(!h.on_ack_frame(pn + k, pn + 10, Some(ms(130))));
            let want = if k < 7 { Growth::Full } else { Growth::Conservative };
            assert_eq!(h.growth(), want, "sample {}", k + 1);
        }
        pn += 10;
        // The round CSS started in was the first of five: four more, and the ACK that
        // ends the fifth ends slow start.
        for _ in 0..4 {
            let (next, exit) = round(&mut h, pn, 10, 130);
            assert!(!exit);
            assert_eq!(h.growth(), Growth::Conservative);
            pn = next;
        }
        assert!(h.on_ack_frame(pn, pn + 10, Some(ms(130))));
        assert!(!h.active());
        assert_eq!(h.growth(), Growth::Full, "off: the caller is in congestion avoidance");
        assert!(!h.on_ack_frame(pn + 10, pn + 20, Some(ms(500))));
    }

    /// RFC 9406 §4.2/§4.3: RttThresh = max(MIN_RTT_THRESH, min(lastRoundMinRTT /
    /// MIN_RTT_DIVISOR, MAX_RTT_THRESH)): 4 ms at small RTTs, 16 ms at large ones.
    #[test]
    fn thresholds_are_clamped_between_4_and_16_ms() {
        for (base, rise, css) in [(10, 3, false), (10, 4, true), (400, 15, false), (400, 16, true), (80, 9, false)] {
            let mut h = HyStart::new(true);
            let (pn, _) = round(&mut h, 0, 8, base);
            round(&mut h, pn, 8, base + rise);
            assert_eq!(h.growth() == Growth::Conservative, css, "base {base} ms, rise {rise} ms");
        }
    }

    /// RFC 9406 §4.2: rounds are delimited by `windowEnd`, the next sequence number (here
    /// packet number) at the round's start: acknowledging it, or anything above it, starts
    /// the next round; acknowledging anything below it keeps the round.
    #[test]
    fn rounds_end_when_window_end_is_acknowledged() {
        let mut h = HyStart::new(true);
        let (pn, _) = round(&mut h, 0, 8, 50);
        assert_eq!(h.window_end, Some(8));
        // Packet 8 acknowledged while 40 is the next to send: a new round that lasts
        // through the ACKs of 9..15, however large their RTTs.
        for k in 0..8 {
            h.on_ack_frame(pn + k, 40, Some(ms(50 + 20 * k)));
        }
        assert_eq!((h.window_end, h.current_round_min_rtt, h.samples), (Some(40), Some(ms(50)), 8));
        assert_eq!(h.growth(), Growth::Full);
        // Packet 40 starts the next.
        h.on_ack_frame(40, 64, Some(ms(90)));
        assert_eq!((h.window_end, h.last_round_min_rtt, h.samples), (Some(64), Some(ms(50)), 1));
    }

    /// RFC 9406 §4.2: N_RTT_SAMPLE samples are needed before a decision; an ACK frame
    /// without an RTT sample does not count, nor do the other packets it acknowledges
    /// (one sample per ACK).
    #[test]
    fn eight_samples_per_round_and_acks_without_samples_do_not_count() {
        let mut h = HyStart::new(true);
        let (pn, _) = round(&mut h, 0, 8, 50);
        for k in 0..7 {
            h.on_ack_frame(pn + k, pn + 100, Some(ms(90)));
        }
        for k in 7..40 {
            h.on_ack_frame(pn + k, pn + 100, None);
        }
        assert_eq!(h.growth(), Growth::Full, "seven samples");
        h.on_ack_frame(pn + 40, pn + 100, Some(ms(90)));
        assert_eq!(h.growth(), Growth::Conservative, "the eighth");
    }

    /// RFC 9406 §4.2: in CSS, a round's minimum RTT below cssBaselineMinRtt means the rise
    /// was spurious: back to standard slow start (with HyStart++).
    #[test]
    fn the_rtt_going_back_down_resumes_slow_start() {
        let mut h = HyStart::new(true);
        let (pn, _) = round(&mut h, 0, 8, 50);
        let (pn, _) = round(&mut h, pn, 8, 60);
        assert_eq!(h.growth(), Growth::Conservative);
        let (pn, _) = round(&mut h, pn, 8, 50);
        assert_eq!(h.growth(), Growth::Full);
        // HyStart++ still watches: the next rise enters CSS again.
        round(&mut h, pn, 8, 60);
        assert_eq!(h.growth(), Growth::Conservative);
    }

    /// The departure from RFC 9406 §4.2: after an app-limited acknowledgement (the sender
    /// paused, the queue drained) a lower RTT in that round or the next does not send CSS
    /// back to slow start.
    #[test]
    fn a_pause_keeps_conservative_slow_start() {
        let mut h = HyStart::new(true);
        let (pn, _) = round(&mut h, 0, 8, 50);
        let (pn, _) = round(&mut h, pn, 8, 60);
        assert_eq!(h.growth(), Growth::Conservative);
        // A round whose first ACK reports a packet the sender sent short of data.
        h.on_ack_frame(pn, pn + 8, Some(ms(50)));
        h.on_app_limited_ack();
        let (pn, _) = round(&mut h, pn + 1, 7, 50);
        assert_eq!(h.growth(), Growth::Conservative, "the round of the pause");
        let (pn, _) = round(&mut h, pn, 8, 50);
        assert_eq!(h.growth(), Growth::Conservative, "the round after");
        round(&mut h, pn, 8, 50);
        assert_eq!(h.growth(), Growth::Full, "a round without a pause: back to slow start");
    }

    /// RFC 9406 §4.2: a loss (or ECN mark) in slow start or CSS ends HyStart++; disabled, it
    /// never slows slow start down.
    #[test]
    fn a_loss_or_disabling_leaves_standard_slow_start() {
        let mut h = HyStart::new(true);
        let (pn, _) = round(&mut h, 0, 8, 50);
        round(&mut h, pn, 8, 60);
        assert_eq!(h.growth(), Growth::Conservative);
        h.stop();
        assert!(!h.active());
        assert_eq!(h.growth(), Growth::Full);
        let mut off = HyStart::new(false);
        assert!(!off.active());
        let (pn, _) = round(&mut off, 0, 8, 50);
        assert_eq!(round(&mut off, pn, 8, 100), (16, false));
        assert_eq!(off.growth(), Growth::Full);
    }
}
