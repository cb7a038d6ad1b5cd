//! Mail between the paths of a connection: what one path's processing (or the shared side's)
//! asks of another path, as messages that path handles itself, never as writes into it.
//!
//! Each message names the path it is for (mail left for a path whose slot was reused since
//! is dropped).
//!
//! - **ACK offers** (on the board): a path whose ACK is pending publishes an [`AckOffer`], a
//!   copy of what its ACK would say. A path that carries it (ACK placement under the
//!   lowest-RTT and all-paths policies, or for a path that cannot send, RFC 10069
//!   §3.1, §5.5) encodes the PATH_ACK from the offer and mails back
//!   [`AckCarried`]; the owner then counts the ACK as sent. The carrier remembers the
//!   offer's version it carried, so it does not carry the same one twice before the owner
//!   reads its mail.
//! - **PATH_ACKs received on another path** (RFC 10069 §3.1, §5.4): the path
//!   they acknowledge processes them itself (its ledger, RTT, loss detection, window), then
//!   the shared side applies its packets' fates; a PATH_ACK of an unsent packet number
//!   closes the connection as on the path itself.
//! - **Acknowledged ACKs**: when a packet that carried another path's PATH_ACK is
//!   acknowledged, that path gets the Largest Acknowledged of the ACK and prunes its own
//!   received ranges (RFC 9000 §13.2.4).
//! - **Challenge answers**: a PATH_RESPONSE may arrive on any path (RFC 9000 §8.2.2 and
//!   RFC 10069 §3.1); the path whose challenge it answers (found by the
//!   challenge data it published on the board) validates itself.
//! - **Abandon** (RFC 10069 §3.4): the path stops, hands back what it had
//!   in flight and keeps its state for three PTOs.
//! - **Reinjection requests**: a path much slower than another gives copies of the STREAM
//!   chunks still in flight on it, read from its own ledger, to the faster path's inbox.
//!
//! With one thread the connection delivers mail after the work that posted it: after each
//! received packet whose frames (applied on a `Host`, `conn/host.rs`) posted it, at the end
//! of the send batch that posted it, or at once after a timer or an application call
//! ([`Connection::deliver_mail`]); the results are the same as if the sender had written
//! into the path, which the reference scenarios check bit-for-bit. With a thread per path (issue C2) a path handles its mail at the start of
//! its next batch. Every message is safe to handle late: an ACK carried while the owner has
//! not heard of it yet may be sent once more by the owner (a duplicate ACK is harmless,
//! RFC 9000 §13.2); pruning later only means larger ACK frames meanwhile; a late challenge
//! answer or abandon behaves as if the frame had arrived later; a late reinjection request
//! copies what is still in flight then.
//!
//! Every part of the mail is bounded: a flood of frames from the peer cannot make it grow.

use std::time::Duration;

use smallvec::SmallVec;

use crate::error::TransportError;
use crate::frame::{EcnCounts, OwnedAckFrame};
use crate::range_set::RangeSet;
use crate::stream::StreamChunk;
use crate::time::Instant;

use super::board::Seat;
use super::config::TransportConfig;
use super::host::Host;
use super::path::{Challenge, PathPhase, PathState};
use super::path_ack::Fated;
use super::Connection;

/// Most acknowledged-ACK notices waiting for one path; beyond it they are merged into the
/// newest (pruning below the larger of two is what both ask for).
pub(crate) const MAX_ACKS_ACKED: usize = 8;
/// Most records a carrier keeps of the ACK offers it carried (one per owner path; the
/// oldest owner goes first).
pub(crate) const MAX_CARRIED_RECORDS: usize = 8;
/// Most received (PATH_)ACK frames waiting for the path they acknowledge (the oldest go:
/// later ACK frames repeat what is still unacknowledged).
pub(crate) const MAX_PATH_ACKS: usize = 4;
/// Most challenge answers waiting for one path (one challenge is outstanding at a time).
pub(crate) const MAX_CHALLENGE_ANSWERS: usize = 2;

/// What a path's pending ACK would say, published for the paths that may carry it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AckOffer {
    /// The owner's path ID.
    pub path_id: u64,
    /// Bumped by every packet the owner records: a carrier carries each version once.
    pub version: u64,
    /// An ACK is pending. Always, except with one packet number space for all paths,
    /// where every path publishes what it received for the others' ACK frames to report
    /// (`conn/single_space.rs`).
    pub pending: bool,
    /// Path IDs that already carried this version (the owner's record).
    pub carried_on: SmallVec<[u64; 4]>,
    /// Packet numbers to acknowledge.
    pub ranges: RangeSet,
    /// Largest packet number received and when (for the ACK Delay field).
    pub largest: Option<(u64, Instant)>,
    /// ECN counts, once any ECN-marked packet arrived.
    pub ecn: Option<EcnCounts>,
    /// An ACK should go out without waiting (RFC 9000 §13.2.1).
    pub immediate: bool,
    /// Receive time of the first ack-eliciting packet not yet acknowledged.
    pub first_eliciting_at: Option<Instant>,
}

impl AckOffer {
    /// The ACK must go out now, given our max_ack_delay (RFC 9000 §13.2.1).
    pub fn due(&self, now: Instant, max_ack_delay: Duration) -> bool {
        self.immediate || self.first_eliciting_at.is_some_and(|t| t + max_ack_delay <= now)
    }

    /// The ACK Delay to report now: time since the largest packet arrived.
    pub fn ack_delay(&self, now: Instant) -> Duration {
        self.largest.map_or(Duration::ZERO, |(_, t)| now - t)
    }
}

/// "Your ACK went out on my path."
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AckCarried {
    /// The owner's path ID (a notice for a path that is gone is dropped).
    pub owner: u64,
    /// The carrier's path ID.
    pub carrier: u64,
    /// The version of the offer it carried.
    pub version: u64,
    /// When.
    pub at: Instant,
    /// Every path meant to carry this ACK (the ACK policy's choice at the carrier's batch):
    /// once all did, the ACK counts as sent.
    pub carriers: SmallVec<[u64; 4]>,
    /// Its Largest Acknowledged (for the key update's bookkeeping).
    pub largest: Option<u64>,
}

/// "The peer has the PATH_ACK of yours I carried."
pub(crate) type AckAcked = u64;

/// A PATH_RESPONSE arrived that may answer this path's challenge (or the one to its previous
/// address).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChallengeAnswer {
    /// The response's payload.
    pub data: [u8; 8],
    /// A fresh challenge in case the answered one was sent in a datagram under 1200 bytes
    /// (RFC 9000 §8.2.1; drawn by the shared side, which owns the randomness). `None` for
    /// an answer meant for the challenge to the previous address.
    pub recheck: Option<Challenge>,
}

/// "Stop: you are abandoned."
#[derive(Debug, Clone, Copy)]
pub(crate) struct AbandonOrder {
    /// How long to keep the state for late packets (three PTOs, RFC 10069 §3.4).
    pub keep: Duration,
    /// The order answers the peer's PATH_ABANDON: a path we abandoned first keeps its state
    /// three PTOs from now.
    pub by_peer: bool,
    /// The error code of the PATH_ABANDON (ours or the peer's).
    pub error_code: u64,
}

/// Most ranges of packet numbers a path remembers as copied onto a faster path.
pub(crate) const MAX_REINJECTED_RANGES: usize = 64;

/// "Give the path in `to` copies of what is stuck on you."
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReinjectRequest {
    /// The fast path's slot.
    pub to: usize,
    /// The fast path's ID (the copies are dropped if another path holds the slot by then).
    pub to_id: u64,
    /// Its RTT.
    pub fast_rtt: Duration,
    /// The rate it sends at (bytes per second; window over RTT), if known.
    pub fast_rate: Option<f64>,
    /// Bytes the fast path's window has room for.
    pub budget: usize,
}

impl ReinjectRequest {
    /// How long the fast path takes to send `bytes` of copies.
    fn fast_drain(&self, bytes: u64) -> Duration {
        match self.fast_rate {
            Some(r) if r > 0.0 => Duration::from_secs_f64((bytes as f64 / r).min(3600.0)),
            _ => Duration::ZERO,
        }
    }
}

/// The mail waiting for one path.
#[derive(Debug, Default)]
pub(crate) struct Mail {
    /// The path ID it is for: mail for a path whose slot was reused since is dropped.
    pub owner: Option<u64>,
    /// PATH_ACK frames for its packets that arrived on other paths (RFC 10069
    /// §3.1: they may come on any path).
    pub path_acks: SmallVec<[OwnedAckFrame; 1]>,
    /// Its ACK went out on other paths.
    pub acks_carried: SmallVec<[AckCarried; 2]>,
    /// Its PATH_ACKs carried by other paths were acknowledged (their Largest Acknowledged).
    pub acks_acked: SmallVec<[AckAcked; 4]>,
    /// PATH_RESPONSEs that may answer its challenges.
    pub challenge_answers: SmallVec<[ChallengeAnswer; 1]>,
    /// It is abandoned.
    pub abandon: Option<AbandonOrder>,
    /// A faster path asks for copies of its data in flight.
    pub reinject: Option<ReinjectRequest>,
    /// The peer's newest status advice for it (PATH_STATUS_BACKUP / _AVAILABLE, RFC 10069
    /// §3.3): true for backup.
    pub peer_backup: Option<bool>,
    /// Handshake packet number spaces were discarded (RFC 9002 §6.4): the bytes their
    /// packets still had in flight on this path (the primary) leave its bytes in flight,
    /// and its PTO backoff restarts (§6.2.2).
    pub discarded_in_flight: Option<u64>,
}

impl Mail {
    /// Nothing waiting.
    pub fn is_empty(&self) -> bool {
        self.path_acks.is_empty()
            && self.acks_carried.is_empty()
            && self.acks_acked.is_empty()
            && self.challenge_answers.is_empty()
            && self.abandon.is_none()
            && self.reinject.is_none()
            && self.peer_backup.is_none()
            && self.discarded_in_flight.is_none()
    }

    /// Posts a PATH_ACK for the path's packets (bounded, oldest dropped).
    pub fn push_path_ack(&mut self, ack: OwnedAckFrame) {
        if self.path_acks.len() >= MAX_PATH_ACKS {
            self.path_acks.remove(0);
        }
        self.path_acks.push(ack);
    }

    /// Posts an "ACK carried" notice. One per carrier is kept (a newer one replaces it), so
    /// the box holds at most as many as the connection has paths (`max_concurrent_paths`,
    /// our limit, not the peer's); none is ever dropped, since a carrier does not carry the
    /// same version twice and a lost notice would leave the owner's ACK pending.
    pub fn push_ack_carried(&mut self, m: AckCarried) {
        match self.acks_carried.iter_mut().find(|o| o.carrier == m.carrier) {
            Some(o) => *o = m,
            None => self.acks_carried.push(m),
        }
    }

    /// Posts an acknowledged ACK (bounded, merged into the newest beyond the bound).
    pub fn push_ack_acked(&mut self, largest: AckAcked) {
        let full = self.acks_acked.len() >= MAX_ACKS_ACKED;
        match self.acks_acked.last_mut() {
            Some(last) if full => *last = (*last).max(largest),
            _ => self.acks_acked.push(largest),
        }
    }

    /// Posts a challenge answer (bounded, extra answers dropped: at most one can match).
    pub fn push_challenge_answer(&mut self, a: ChallengeAnswer) {
        if self.challenge_answers.len() < MAX_CHALLENGE_ANSWERS {
            self.challenge_answers.push(a);
        }
    }
}

/// What a path did with a challenge answer, for the shared side.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ChallengeOutcome {
    /// It answers neither of the path's challenges.
    NotMine,
    /// The previous address still answers (RFC 9000 §9.3.3).
    OldAddressAnswers,
    /// The address is validated but the challenge went in a small datagram: challenging
    /// again, padded.
    Rechecking,
    /// Validated; `newly_active` if the path just became usable for data.
    Validated {
        /// The path was validating and is active now.
        newly_active: bool,
    },
}

/// What abandoning did to a path, for the shared side.
#[derive(Debug)]
pub(crate) enum AbandonOutcome {
    /// It was abandoned already (its state deadline may have moved).
    AlreadyAbandoned,
    /// It is abandoned now.
    Abandoned {
        /// Our PATH_ABANDON still has to be sent.
        send_abandon: bool,
        /// Its packets in flight, whose frames go back to the send queues.
        lost: Fated,
    },
}

impl PathState {
    /// The path's pending ACK as an offer to the paths that may carry it; `None` when no
    /// ACK is pending (with one packet number space for all paths: what the path received,
    /// pending or not).
    pub(crate) fn ack_offer(&self) -> Option<AckOffer> {
        let s = &self.data;
        let pending = s.ack_pending;
        (pending || s.single.is_some()).then(|| AckOffer {
            path_id: self.id,
            version: s.ack_version,
            pending,
            carried_on: s.ack_carried_on.clone(),
            ranges: s.received.ranges().clone(),
            largest: s.received.largest(),
            ecn: s.received.ecn_counts(),
            immediate: pending && s.received.wants_immediate_ack(),
            first_eliciting_at: s.received.ack_deadline(Duration::ZERO).filter(|_| pending),
        })
    }

    /// This path carried version `version` of the ACK offer of path `owner`.
    pub(crate) fn has_carried(&self, owner: u64, version: u64) -> bool {
        self.carried_acks.contains(&(owner, version))
    }

    /// This path already carried the ACK `offer` stands for (by the owner's record, or by its
    /// own while the owner has not read its mail yet).
    pub(crate) fn carried_offer(&self, offer: &AckOffer) -> bool {
        offer.carried_on.contains(&self.id) || self.has_carried(offer.path_id, offer.version)
    }

    /// Records that this path carried version `version` of path `owner`'s ACK offer, so
    /// that it does not carry it again before the owner reads its mail.
    pub(crate) fn note_carried(&mut self, owner: u64, version: u64) {
        self.carried_acks.retain(|(o, _)| *o != owner);
        if self.carried_acks.len() >= MAX_CARRIED_RECORDS {
            self.carried_acks.remove(0);
        }
        self.carried_acks.push((owner, version));
    }

    /// Another path carried this path's ACK. Once every path meant to carry the current
    /// version did, the ACK counts as sent (a notice about an older version is stale: newer
    /// packets arrived since). Returns whether the ACK covered a packet the peer sent in the
    /// current key phase (`epoch`), which lets the peer update its keys again (RFC 9001
    /// §6.2), stale or not.
    pub(crate) fn on_ack_carried(&mut self, m: &AckCarried, epoch: Option<u64>) -> bool {
        if m.owner != self.id {
            return false;
        }
        let covers = match (epoch, m.largest) {
            (Some(e), Some(l)) => self.key_marks.ack_covers_remote_phase(e, l),
            _ => false,
        };
        self.count_ack_carried(m);
        covers
    }

    fn count_ack_carried(&mut self, m: &AckCarried) {
        let s = &mut self.data;
        if !s.ack_pending || m.version != s.ack_version {
            return;
        }
        if !s.ack_carried_on.contains(&m.carrier) {
            s.ack_carried_on.push(m.carrier);
        }
        if m.carriers.iter().all(|c| s.ack_carried_on.contains(c)) {
            s.ack_pending = false;
            s.ack_carried_on.clear();
            s.received.on_ack_sent(m.at);
        }
    }

    /// A PATH_RESPONSE that may answer this path's challenge, or the one to the address it
    /// used before an apparent migration.
    pub(crate) fn on_challenge_answer(&mut self, a: ChallengeAnswer, config: &TransportConfig) -> ChallengeOutcome {
        if self.challenge.is_none_or(|c| c.data != a.data) {
            if self.old_challenge.is_some_and(|c| c.data == a.data) {
                // The peer is still reachable at the address it had before (RFC 9000
                // §9.3.3): its next non-probing packet from there moves the path back.
                self.old_challenge = None;
                return ChallengeOutcome::OldAddressAnswers;
            }
            return ChallengeOutcome::NotMine;
        }
        let full_size = self.challenge.is_some_and(|c| c.full_size);
        if !full_size {
            // The address is validated, but the anti-amplification limit kept the challenge
            // under 1200 bytes: challenge again, padded now that the limit is lifted
            // (RFC 9000 §8.2.1, RFC 10069 §3.1).
            let Some(recheck) = a.recheck else { return ChallengeOutcome::NotMine };
            self.validated = true;
            self.challenge = Some(recheck);
            return ChallengeOutcome::Rechecking;
        }
        self.challenge = None;
        self.validated = true;
        if self.rebind_from.take().is_some() {
            // RFC 10069 §5.1 (RFC 9000 §9.4): after a rebinding, the new address gets fresh
            // congestion and RTT state.
            self.cc = crate::cc::build(config.cc, &config.cc_config, u64::from(self.mtu));
            self.rtt = crate::recovery::rtt::RttEstimator::new(config.initial_rtt);
            // The new network path may treat ECN differently: validate it again.
            self.ecn.restart();
            // Nor is its PMTU known: back to the base and search again (RFC 8899 §5.2).
            let change = self.pmtud.restart();
            self.apply_pmtu(change);
        }
        let newly_active = self.phase == PathPhase::Validating;
        if newly_active {
            self.phase = PathPhase::Active;
        }
        ChallengeOutcome::Validated { newly_active }
    }

    /// The path is abandoned (RFC 10069 §3.4): nothing more is sent on it,
    /// its packets in flight are handed back, its state stays until `now + keep` to
    /// acknowledge late packets.
    pub(crate) fn on_abandon(&mut self, now: Instant, order: AbandonOrder) -> AbandonOutcome {
        if !self.is_open() {
            if order.by_peer {
                // We abandoned it first: keep its state for three PTOs from the peer's answer.
                let until = now + order.keep;
                self.discard_at = Some(self.discard_at.map_or(until, |t| t.max(until)));
            }
            return AbandonOutcome::AlreadyAbandoned;
        }
        self.phase = PathPhase::Abandoned;
        self.challenge = None;
        self.discard_at = Some(now + order.keep);
        self.path_responses.clear();
        self.off_path_responses.clear();
        self.data.probes = 0;
        let send_abandon = !self.abandon_sent;
        self.abandon_sent = true;
        let lost = self.data.loss.discard_all();
        self.bytes_in_flight = 0;
        AbandonOutcome::Abandoned { send_abandon, lost }
    }

    /// Copies of the STREAM chunks still in flight on this (slow) path that a copy on the
    /// fast path would deliver clearly earlier, within the request's budget, read from the
    /// path's own ledger; `buffered` says which chunks still wait for acknowledgement.
    /// Returns the chunks and the budget they used.
    ///
    /// The newest packets go first: the slow path delivers what it holds in the order it
    /// sent it, so the copies that gain the most are of its tail, and the fast path copying
    /// backwards meets the slow path draining forwards. Copying the oldest first (as this
    /// did before) spent the fast path on data the slow path was about to deliver anyway
    /// while the tail still waited: with the rate-based timing below, a 29 Mbit/s, 190 ms
    /// path next to an 82 Mbit/s one finished 3 % later than with the smoothed RTT's.
    pub(crate) fn reinjection_copies(
        &mut self,
        now: Instant,
        req: &ReinjectRequest,
        buffered: impl Fn(&StreamChunk) -> bool,
    ) -> (Vec<StreamChunk>, usize) {
        let slow_rtt = self.rtt.smoothed();
        let rate = self.delivery.rate().filter(|r| *r > 0.0);
        let failing = self.potentially_failed;
        // When a copy sent now would be acknowledged, "clearly earlier" by a quarter of the
        // fast path's RTT; each copy queues behind the ones before it.
        let fast_ack = now + req.fast_rtt + req.fast_rtt / 4;
        let mut copied_bytes = 0u64;
        let mut budget = req.budget;
        let mut chunks = Vec::new();
        // The walk starts below the newest packets when they were all copied before: on
        // each call it would pass them again (with a lookup each, that was a tenth of a
        // simulated two-path download), and what they hold is not ahead of older packets.
        let newest = self.data.loss.iter_outstanding().next_back().map(|(pn, _)| pn);
        let top = match (self.reinjected.iter().next_back(), newest) {
            (Some(r), Some(n)) if r.contains(&n) => r.start,
            _ => u64::MAX,
        };
        // Bytes in flight on this path sent up to the packet at hand (inclusive): the
        // ledger's count, less the skipped tail's.
        let loss = &self.data.loss;
        let tail: u64 = loss.iter_outstanding_from(top).map(|(_, p)| p.flight_bytes()).sum();
        let mut ahead = loss.in_flight_bytes() - tail;
        debug_assert_eq!(ahead, self.data.loss.iter_outstanding_below(top).map(|(_, p)| p.flight_bytes()).sum::<u64>());
        // The other copied packets' ranges, walked down alongside the ledger.
        let mut copied_before = self.reinjected.iter().rev().peekable();
        let mut copied_now: SmallVec<[u64; 16]> = SmallVec::new();
        for (pn, p) in self.data.loss.iter_outstanding_below(top).rev() {
            let its_ahead = ahead;
            ahead -= p.flight_bytes();
            if budget == 0 {
                break;
            }
            while copied_before.next_if(|r| r.start > pn).is_some() {}
            if copied_before.peek().is_some_and(|r| r.contains(&pn)) {
                continue;
            }
            let bytes: u64 = p.frames.stream.iter().filter(|c| buffered(c)).map(|c| c.len as u64).sum();
            if bytes == 0 {
                // Nothing to copy, now or later (acknowledged data stays so): passed like
                // a copied packet from now on, so that the copied ranges around it join.
                copied_now.push(pn);
                continue;
            }
            let copy_acked = fast_ack + req.fast_drain(copied_bytes + bytes);
            if !failing && copy_acked >= expected_ack(now, p.time_sent, its_ahead, slow_rtt, rate) {
                // Older packets are expected still earlier.
                break;
            }
            for c in p.frames.stream.iter().filter(|c| buffered(c)) {
                budget = budget.saturating_sub(c.len + 32);
                chunks.push(*c);
            }
            copied_bytes += bytes;
            copied_now.push(pn);
        }
        drop(copied_before);
        for pn in copied_now {
            self.reinjected.insert_one(pn);
        }
        // Forget what left the ledger, and bound the rest: a range forgotten early only
        // allows a second copy.
        let oldest = self.data.loss.iter_outstanding().next().map_or(u64::MAX, |(pn, _)| pn);
        self.reinjected.remove(0..oldest);
        while self.reinjected.len() > MAX_REINJECTED_RANGES {
            self.reinjected.pop_min();
        }
        (chunks, req.budget - budget)
    }
}

impl Connection {
    /// One thread: every operation delivers the mail it posted before it returns, so none
    /// is waiting when the next one starts (checked in debug builds).
    pub(crate) fn debug_assert_mail_delivered(&self) {
        // (Mail for a checked-out path waits for its check-in.)
        debug_assert!(!self.paths.has_mail_waiting_here(), "mail posted but not delivered");
    }

    /// Hands the mail waiting for the paths to them (one thread: at once, in slot order),
    /// then does the shared side's part of what they did. Fails, leaving the rest of the
    /// mail waiting, if a PATH_ACK in it acknowledged a packet never sent.
    fn deliver_mail(&mut self, now: Instant) -> Result<(), TransportError> {
        // A path checked out (its work on another thread) reads its mail once it is back.
        let mut out: SmallVec<[usize; 2]> = SmallVec::new();
        let mut result = Ok(());
        while let Some(slot) = self.paths.take_mail_waiting() {
            if self.paths.is_out(slot) {
                out.push(slot);
                continue;
            }
            let mail = std::mem::take(&mut self.paths.inbox_mut(slot).mail);
            let Some((mut host, path)) = self.host_for(slot) else { continue };
            if mail.is_empty() || mail.owner.is_some_and(|o| o != path.id) {
                continue;
            }
            if let Err(e) = host.handle_mail(now, path, slot, mail) {
                result = Err(e);
                break;
            }
        }
        for slot in out {
            self.paths.keep_mail_waiting(slot);
        }
        result
    }

    /// Delivers the mail waiting ([`Connection::deliver_mail`]). A PATH_ACK in it that
    /// acknowledged a packet never sent closes the connection (PROTOCOL_VIOLATION naming the
    /// frame); the mail still waiting then is dropped, the paths' work being over (a fuzzer
    /// found it left behind for the next operation).
    pub(crate) fn deliver_mail_or_close(&mut self, now: Instant) {
        if let Err(e) = self.deliver_mail(now) {
            self.host().close_with_error(now, e);
            while let Some(slot) = self.paths.take_mail_waiting() {
                self.paths.inbox_mut(slot).mail = Mail::default();
            }
        }
    }
}

impl Host<'_> {
    /// `path` (in `slot`) handles its mail, then the shared side does its part of what the
    /// path did.
    fn handle_mail(
        &mut self,
        now: Instant,
        path: &mut PathState,
        slot: usize,
        mail: Mail,
    ) -> Result<(), TransportError> {
        if !mail.path_acks.is_empty() {
            let params = self.shared.ack_params();
            let id = path.id;
            for ack in &mail.path_acks {
                let mut seat = Seat::take(self.board, slot);
                // A failure names the frame, as on the path it arrived on.
                let frame = ack.as_frame();
                let fates = path.on_path_ack(now, &frame, &params, &mut seat).map_err(|e| e.or_frame(frame.ty()))?;
                seat.give_back(self.board, path);
                self.apply_fates(now, id, fates);
                if self.shared.is_closed() {
                    return Ok(());
                }
            }
        }
        // Only what the notices change needs a new offer.
        let offer_changed = !mail.acks_acked.is_empty() || !mail.acks_carried.is_empty();
        for largest in mail.acks_acked {
            path.data.received.on_ack_of_ack(largest);
        }
        let epoch = self.shared.one_rtt.as_ref().map(|k| k.epoch());
        let mut phase_acked = false;
        for m in &mail.acks_carried {
            phase_acked |= path.on_ack_carried(m, epoch);
        }
        if phase_acked {
            if let Some(k) = self.shared.one_rtt.as_mut() {
                k.on_remote_phase_acked();
            }
        }
        if let Some(req) = mail.reinject {
            let streams = &self.shared.streams;
            let (chunks, _) = path.reinjection_copies(now, &req, |c| streams.chunk_buffered(c));
            if !chunks.is_empty() && self.view(req.to).is_some_and(|v| v.id == req.to_id) {
                self.shared.stats.reinjected_chunks += chunks.len() as u64;
                self.board.inbox_mut(req.to).push_reinjected(chunks);
            }
        }
        for a in mail.challenge_answers {
            let id = path.id;
            match path.on_challenge_answer(a, &self.shared.config) {
                ChallengeOutcome::NotMine => {}
                ChallengeOutcome::OldAddressAnswers => tracing::debug!(id, "previous peer address still answers"),
                ChallengeOutcome::Rechecking => {
                    tracing::debug!(id, "address validated; checking 1200-byte datagrams")
                }
                ChallengeOutcome::Validated { newly_active } => {
                    if newly_active {
                        tracing::debug!(side = ?self.shared.side, id, "path validated");
                        self.shared.events.push_back(super::Event::Path(super::PathEvent::Validated { id }));
                        self.qlog_path(now, id, "validated");
                    }
                }
            }
            self.board.publish(slot, path.view());
        }
        if let Some(backup) = mail.peer_backup {
            if path.peer_backup != backup {
                path.peer_backup = backup;
                let id = path.id;
                self.board.publish(slot, path.view());
                self.shared.events.push_back(super::Event::Path(super::PathEvent::StatusChanged { id, backup }));
            }
        }
        if let Some(bytes) = mail.discarded_in_flight {
            path.bytes_in_flight = path.bytes_in_flight.saturating_sub(bytes);
            path.pto_count = 0;
            self.board.publish(slot, path.view());
        }
        if let Some(order) = mail.abandon {
            let outcome = path.on_abandon(now, order);
            self.board.publish(slot, path.view());
            if let AbandonOutcome::Abandoned { send_abandon, lost } = outcome {
                self.board.inbox_mut(slot).clear();
                self.on_abandoned(now, path.id, order, send_abandon, lost);
            }
        }
        if offer_changed && self.board.offers_on {
            self.board.publish_offer(slot, path.ack_offer());
        }
        Ok(())
    }
}

/// When the acknowledgement of a packet sent at `sent` on a path is expected, `ahead` bytes
/// in flight on the path up to and including it: one smoothed RTT after it left, or, when
/// the path's delivery rate is known, later if the bytes in flight up to it take longer to
/// be acknowledged at that rate (a path acknowledges what it holds in order, at the rate of
/// its bottleneck, whether the bytes are still queued or already on their way). The
/// smoothed RTT lags a queue that is still filling: a packet sent into a 0.5 s queue of a
/// 2.3 Mbit/s path is acknowledged 0.7 s later while its smoothed RTT says 0.3 s, so a copy
/// on a fast path that would have arrived first was not sent.
fn expected_ack(now: Instant, sent: Instant, ahead: u64, srtt: Duration, rate: Option<f64>) -> Instant {
    let by_rtt = sent + srtt;
    let Some(rate) = rate else { return by_rtt };
    // Bounded so that a tiny measured rate cannot overflow the clock.
    let drain = Duration::from_secs_f64((ahead as f64 / rate).min(3600.0));
    by_rtt.max(now + drain)
}
