//! A path's PMTU discovery (RFC 8899, RFC 9000 §14.3) as the path drives it: the datagram
//! size its packets, congestion window and pacer use follows the search
//! ([`crate::recovery::pmtud`]); the fates of its packets feed the search; a probe is a
//! path-local packet (`send/pmtu_probe.rs`), so that a batch built alone can carry one.

use crate::recovery::pmtud::PmtuChange;
use crate::time::Instant;

use super::path::{PathPhase, PathState};
use super::path_recovery::Packets;

impl PathState {
    /// The datagram size of the path's packets becomes `mtu`; the congestion controller
    /// scales its windows with it (RFC 9002 §7.2: they count in max_datagram_size).
    pub(crate) fn set_mtu(&mut self, mtu: u16) {
        if mtu != self.mtu {
            self.mtu = mtu;
            self.cc.set_max_datagram_size(u64::from(mtu));
        }
    }

    /// Applies a change of the search's PLPMTU to the path; returns it for the qlog.
    pub(crate) fn apply_pmtu(&mut self, change: Option<PmtuChange>) -> Option<PmtuChange> {
        if let Some(PmtuChange::Updated { new, done, .. }) = change {
            tracing::debug!(path = self.id, mtu = new, done, "PMTU updated");
            self.set_mtu(new);
        }
        change
    }

    /// The peer's max_udp_payload_size is known (RFC 9000 §18.2: never send more); with
    /// discovery off the path takes its limit on trust now. `confirmed`: the handshake is
    /// confirmed, so the search may start (probes are 1-RTT packets).
    pub(crate) fn set_peer_udp_limit(&mut self, peer_max: u64, confirmed: bool) {
        self.pmtud.set_peer_limit(peer_max);
        if confirmed {
            self.pmtud.start();
        }
        let mtu = self.pmtud.plpmtu();
        self.set_mtu(mtu);
    }

    /// The fates of packets of the path's data space, for the search: an acknowledged
    /// probe raises the PLPMTU, lost probes count toward MAX_PROBES, lost large packets
    /// may show a black hole.
    pub(crate) fn pmtu_on_fates(&mut self, now: Instant, acked: &Packets, lost: &Packets) -> Option<PmtuChange> {
        let mut change = None;
        for (pn, p) in acked {
            change = self.pmtud.on_acked(now, *pn, p.size).or(change);
        }
        if !lost.is_empty() {
            change = self.pmtud.on_lost(now, lost.iter().map(|(pn, p)| (*pn, p.size))).or(change);
        }
        self.apply_pmtu(change)
    }

    /// A PMTU probe may go out now on this path: one of this size is due, the path is
    /// validated and active (so it carries BASE_PLPMTU, RFC 9000 §8.2.1), no PTO probe
    /// waits, and the congestion window has room for it (a probe is in flight like any
    /// ack-eliciting packet; only its loss is not congestion, RFC 9000 §14.4).
    pub(crate) fn wants_pmtu_probe(&self, now: Instant) -> Option<u16> {
        if !self.validated || self.phase != PathPhase::Active || self.data.probes > 0 || self.potentially_failed {
            return None;
        }
        let size = self.pmtud.peek_probe(now)?;
        (self.bytes_in_flight + u64::from(size) <= self.cc.window()).then_some(size)
    }

    /// [`Self::wants_pmtu_probe`], committing the search to it (the raise timer's return to
    /// SEARCHING).
    pub(crate) fn pmtu_probe_due(&mut self, now: Instant) -> Option<u16> {
        self.wants_pmtu_probe(now)?;
        self.pmtud.probe_due(now)
    }
}

impl super::ConnShared {
    /// The peer's max_udp_payload_size (RFC 9000 §18.2; its default before the transport
    /// parameters arrive).
    pub(crate) fn peer_udp_limit(&self) -> u64 {
        self.peer_params
            .as_ref()
            .map_or(crate::transport_params::DEFAULT_MAX_UDP_PAYLOAD_SIZE, |p| p.max_udp_payload_size)
    }
}
