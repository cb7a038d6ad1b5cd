//! Datagram Packetization Layer PMTU Discovery (DPLPMTUD, RFC 8899; RFC 9000 §14.3) of one
//! path: which probe size to send next, what a probe's acknowledgement or loss teaches, and
//! when losses of full-size packets mean a black hole. Sans-IO and clock-free: the path
//! hands in the packets' fates and the time.
//!
//! The search (RFC 8899 §5.3.2 leaves its strategy open) first probes the ceiling, since
//! most paths carry it (a link's full MTU), then searches by bisection between the largest
//! size acknowledged and the smallest that failed, down to the byte: a datagram of the
//! search's result gets through, one byte more did not.

use std::time::Duration;

use crate::time::Instant;

/// BASE_PLPMTU: every QUIC path carries 1200-byte UDP payloads (RFC 9000 §14.1, RFC 8899
/// §5.1.2), so the search starts, and a black hole falls back, there.
pub const BASE_PLPMTU: u16 = 1200;
/// MAX_PROBES: a probe size fails after this many consecutive lost probes (RFC 8899 §5.1.2).
pub const MAX_PROBES: u8 = 3;
/// PMTU_RAISE_TIMER: a completed search probes for a larger PMTU again after this long
/// (RFC 8899 §5.1.1: 600 s).
pub const PMTU_RAISE_TIMER: Duration = Duration::from_secs(600);
/// Loss episodes of packets larger than BASE_PLPMTU, with no such packet acknowledged in
/// between, that make a black hole (RFC 8899 §4.3: the PL detects a reduced PMTU from its
/// own loss signals). A congestion episode acknowledges full-size packets around its losses
/// and so never reaches this.
pub const BLACK_HOLE_EPISODES: u32 = 3;
/// Consecutive probe timeouts with a PLPMTU above the base that also make a black hole: when
/// every full-size packet vanishes, nothing is acknowledged and no loss is ever declared, so
/// the PTO is the only signal left.
pub const BLACK_HOLE_PTOS: u32 = 2;

/// Where the search is (RFC 8899 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmtudPhase {
    /// Off: the PLPMTU is what the configuration and the peer allow, taken on trust.
    Disabled,
    /// BASE: not searching yet (the path is not validated or the handshake not confirmed).
    Base,
    /// SEARCHING: probes of larger sizes are being sent.
    Searching,
    /// SEARCH_COMPLETE: the PLPMTU is the largest size found; the raise timer runs.
    SearchComplete,
}

/// What a packet's fate changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmtuChange {
    /// The PLPMTU became this (larger after an acknowledged probe, the base after a black
    /// hole).
    Updated {
        /// The size before.
        old: u16,
        /// The size now.
        new: u16,
        /// The search is complete.
        done: bool,
    },
}

/// The DPLPMTUD state of one path.
#[derive(Debug, Clone)]
pub struct Pmtud {
    phase: PmtudPhase,
    /// The PLPMTU: largest UDP payload sent on the path outside probes.
    plpmtu: u16,
    /// Largest size to search: min(our limit, the peer's max_udp_payload_size).
    ceiling: u16,
    /// Our own limit (`TransportConfig::max_udp_payload_size`).
    local_max: u16,
    /// Largest size known to get through.
    lo: u16,
    /// Smallest size known to fail (or one past the ceiling).
    hi: u32,
    /// Size being probed and the probes of it lost in a row.
    probe_size: u16,
    probes_lost: u8,
    /// The probe in flight: packet number and size.
    in_flight: Option<(u64, u16)>,
    /// SEARCH_COMPLETE until then (the raise timer).
    raise_at: Option<Instant>,
    /// Loss episodes of large packets since one was acknowledged (black hole detection).
    suspicious: u32,
    /// Probes sent and acknowledged, and black holes found (statistics).
    pub probes_sent: u64,
    /// Probes acknowledged.
    pub probes_acked: u64,
    /// Black holes detected.
    pub black_holes: u64,
}

impl Pmtud {
    /// A path's state: searching (once started) up to `local_max`, or disabled, keeping
    /// `local_max` to be used on trust once the peer's limit is known.
    pub fn new(enabled: bool, local_max: u16) -> Self {
        let local_max = local_max.max(BASE_PLPMTU);
        Self {
            phase: if enabled { PmtudPhase::Base } else { PmtudPhase::Disabled },
            plpmtu: BASE_PLPMTU,
            ceiling: local_max,
            local_max,
            lo: BASE_PLPMTU,
            hi: u32::from(local_max) + 1,
            probe_size: 0,
            probes_lost: 0,
            in_flight: None,
            raise_at: None,
            suspicious: 0,
            probes_sent: 0,
            probes_acked: 0,
            black_holes: 0,
        }
    }

    /// Where the search is.
    pub fn phase(&self) -> PmtudPhase {
        self.phase
    }

    /// The PLPMTU: the largest datagram to send outside probes.
    pub fn plpmtu(&self) -> u16 {
        self.plpmtu
    }

    /// The search's upper bound.
    pub fn ceiling(&self) -> u16 {
        self.ceiling
    }

    /// The packet number of the probe in flight.
    pub fn probe_in_flight(&self) -> Option<u64> {
        self.in_flight.map(|(pn, _)| pn)
    }

    /// The peer's max_udp_payload_size transport parameter: we never send more (RFC 9000
    /// §18.2: "the maximum size of UDP payloads ... the endpoint is willing to receive").
    /// Disabled, the PLPMTU jumps to the ceiling at once (the old, trusting behaviour).
    pub fn set_peer_limit(&mut self, peer_max: u64) {
        let peer = u16::try_from(peer_max).unwrap_or(u16::MAX).max(BASE_PLPMTU);
        self.ceiling = self.local_max.min(peer);
        self.hi = self.hi.min(u32::from(self.ceiling) + 1);
        if self.phase == PmtudPhase::Disabled {
            self.plpmtu = self.ceiling;
        }
        if self.plpmtu > self.ceiling {
            self.plpmtu = self.ceiling;
        }
    }

    /// BASE → SEARCHING: the path is validated (so BASE_PLPMTU gets through, RFC 9000
    /// §8.2.1) and may carry probes.
    pub fn start(&mut self) {
        if self.phase == PmtudPhase::Base {
            self.search_from_base();
        }
    }

    /// A new search from the base.
    fn search_from_base(&mut self) {
        self.plpmtu = BASE_PLPMTU;
        self.lo = BASE_PLPMTU;
        self.hi = u32::from(self.ceiling) + 1;
        self.begin_search();
    }

    /// SEARCHING towards `hi` from `lo`, or SEARCH_COMPLETE if nothing is left between.
    fn begin_search(&mut self) {
        self.in_flight = None;
        self.probes_lost = 0;
        self.raise_at = None;
        self.phase = PmtudPhase::Searching;
        self.next_probe_size(None);
    }

    /// Picks the next size to probe; completes the search when `lo` and `hi` meet.
    fn next_probe_size(&mut self, now: Option<Instant>) -> bool {
        self.probes_lost = 0;
        if u32::from(self.lo) + 1 >= self.hi {
            self.phase = PmtudPhase::SearchComplete;
            self.probe_size = 0;
            // The raise timer only matters when something larger may exist.
            self.raise_at = if self.lo < self.ceiling { now.map(|t| t + PMTU_RAISE_TIMER) } else { None };
            return true;
        }
        // The ceiling first (one round trip on the common path), then bisection.
        self.probe_size =
            if self.hi > u32::from(self.ceiling) { self.ceiling } else { ((u32::from(self.lo) + self.hi) / 2) as u16 };
        false
    }

    /// The size of the probe to send now, if one is due (SEARCHING with none in flight;
    /// SEARCH_COMPLETE whose raise timer expired goes back to SEARCHING, RFC 8899 §5.2).
    pub fn probe_due(&mut self, now: Instant) -> Option<u16> {
        match self.phase {
            PmtudPhase::SearchComplete if self.raise_at.is_some_and(|t| now >= t) => {
                self.hi = u32::from(self.ceiling) + 1;
                self.begin_search();
            }
            _ => {}
        }
        (self.phase == PmtudPhase::Searching && self.in_flight.is_none() && self.probe_size > self.plpmtu)
            .then_some(self.probe_size)
    }

    /// The size [`Self::probe_due`] would return now, changing nothing.
    pub fn peek_probe(&self, now: Instant) -> Option<u16> {
        match self.phase {
            PmtudPhase::Searching => {
                (self.in_flight.is_none() && self.probe_size > self.plpmtu).then_some(self.probe_size)
            }
            // The raise timer's new search probes the ceiling first.
            PmtudPhase::SearchComplete => self.raise_at.filter(|&t| now >= t).map(|_| self.ceiling),
            _ => None,
        }
    }

    /// A probe of `size` bytes left as packet `pn`.
    pub fn on_probe_sent(&mut self, pn: u64, size: u16) {
        self.in_flight = Some((pn, size));
        self.probes_sent += 1;
    }

    /// A packet of the path's data space was acknowledged. Returns the PLPMTU's change if
    /// it was the probe.
    pub fn on_acked(&mut self, now: Instant, pn: u64, size: u32) -> Option<PmtuChange> {
        if size > u32::from(BASE_PLPMTU) {
            // A large packet got through: no black hole.
            self.suspicious = 0;
        }
        let (probe_pn, probe_size) = self.in_flight?;
        if probe_pn != pn {
            return None;
        }
        self.in_flight = None;
        self.probes_acked += 1;
        self.lo = self.lo.max(probe_size);
        let old = self.plpmtu;
        self.plpmtu = self.plpmtu.max(probe_size);
        let done = self.next_probe_size(Some(now));
        Some(PmtuChange::Updated { old, new: self.plpmtu, done })
    }

    /// Packets of the path's data space were declared lost: (number, size) of each. A lost
    /// probe counts toward its size's MAX_PROBES; other losses of large packets may show a
    /// black hole (RFC 8899 §4.3), answered by falling back to BASE_PLPMTU and searching
    /// again (RFC 8899 §5.2, the ERROR state's way out).
    pub fn on_lost(&mut self, now: Instant, lost: impl Iterator<Item = (u64, u32)>) -> Option<PmtuChange> {
        let mut large = false;
        let mut change = None;
        for (pn, size) in lost {
            if self.in_flight.is_some_and(|(p, _)| p == pn) {
                if self.on_probe_lost(now) {
                    // The search ended on a failed size: the PLPMTU stays, now final.
                    change = Some(PmtuChange::Updated { old: self.plpmtu, new: self.plpmtu, done: true });
                }
            } else if size > u32::from(BASE_PLPMTU) {
                large = true;
            }
        }
        if large && self.plpmtu > BASE_PLPMTU && self.phase != PmtudPhase::Disabled {
            self.suspicious += 1;
            if self.suspicious >= BLACK_HOLE_EPISODES {
                return Some(self.black_hole());
            }
        }
        change
    }

    /// The probe in flight was lost: the same size again, or after MAX_PROBES the search
    /// goes on below it. Returns true if that completed the search.
    fn on_probe_lost(&mut self, now: Instant) -> bool {
        let Some((_, size)) = self.in_flight.take() else { return false };
        self.probes_lost += 1;
        if self.probes_lost < MAX_PROBES {
            return false;
        }
        self.hi = self.hi.min(u32::from(size));
        self.next_probe_size(Some(now))
    }

    /// A probe timeout fired, the `pto_count`-th in a row (RFC 9002 §6.2.1): with nothing
    /// acknowledged, full-size packets may all be vanishing.
    pub fn on_pto(&mut self, pto_count: u32) -> Option<PmtuChange> {
        if pto_count >= BLACK_HOLE_PTOS && self.plpmtu > BASE_PLPMTU && self.phase != PmtudPhase::Disabled {
            return Some(self.black_hole());
        }
        None
    }

    /// A black hole: back to BASE_PLPMTU and a new search (RFC 8899 §5.2: a PLPMTU that
    /// stops working is replaced by the base, then searched up again).
    fn black_hole(&mut self) -> PmtuChange {
        let old = self.plpmtu;
        self.black_holes += 1;
        self.suspicious = 0;
        self.search_from_base();
        PmtuChange::Updated { old, new: self.plpmtu, done: false }
    }

    /// The path moved to a new network path (a NAT rebinding): what was learnt of the old
    /// one does not hold: discovery starts again from the base (RFC 8899 §5.2).
    pub fn restart(&mut self) -> Option<PmtuChange> {
        if self.phase == PmtudPhase::Disabled || self.phase == PmtudPhase::Base {
            return None;
        }
        let old = self.plpmtu;
        self.search_from_base();
        (old != self.plpmtu).then_some(PmtuChange::Updated { old, new: self.plpmtu, done: false })
    }
}

#[cfg(test)]
#[path = "pmtud_tests.rs"]
mod tests;
