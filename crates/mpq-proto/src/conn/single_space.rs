//! One packet number space for all paths: the single-space design that "The Packet Number
//! Space Debate in Multipath QUIC" (seed 003) compares with RFC 10069's space per path
//! (§1), as picoquic implemented it from the early multipath drafts. An experiment switch,
//! not a standard: `TransportConfig::single_packet_number_space` on both endpoints (the
//! private transport parameter [`crate::transport_params::id::SINGLE_PACKET_NUMBER_SPACE`]),
//! in effect once multipath is negotiated.
//!
//! - **Numbers**: every path draws its packet numbers from one counter shared by the paths'
//!   spaces (`PacketSpace::peek_pn`, atomic, so paths on other threads never draw the same
//!   one). Each path keeps its own ledger, RTT, loss detection and window: seed 003 §3,
//!   "all the algorithms (loss detection, multipath-specific decisions, ...) remain the same
//!   regardless of the packet number space design used".
//! - **Nonce**: numbers are unique over the connection, so packets are sealed with the plain
//!   QUIC nonce (RFC 10069 §2.4 puts the path ID in it only for spaces per path).
//! - **Receiving**: a path records the packets that arrive on it (a packet belongs to the
//!   path its connection ID names, so duplicates are caught there), and every ACK frame a
//!   path writes reports the union of what all paths received, from the others' ACK offers
//!   (`PathState::write_single_space_ack`): one ACK frame, never PATH_ACK.
//! - **Acknowledgements**: an ACK frame arriving on any path acknowledges packets of every
//!   path; each path handles it against its own ledger ([`Host::on_single_space_ack`]).

use crate::error::TransportError;
use crate::frame::AckFrame;
use crate::time::Instant;
use crate::types::SpaceId;

use super::host::Host;
use super::path::PathState;

impl Host<'_> {
    /// An ACK frame (not PATH_ACK) of the single space arrived on `path` (in `slot`): a
    /// number above every number drawn is a PROTOCOL_VIOLATION (RFC 9000 §13.1), as one a
    /// path never sent is with spaces per path; otherwise every other open path gets the
    /// frame by mail and `path` handles it now.
    pub(super) fn on_single_space_ack(
        &mut self,
        now: Instant,
        path: &mut PathState,
        slot: usize,
        ack: &AckFrame<'_>,
    ) -> Result<(), TransportError> {
        let drawn = path.data.single.as_ref().map_or(0, |c| c.load(std::sync::atomic::Ordering::Relaxed));
        if ack.largest >= drawn.max(path.data.next_pn) {
            return Err(TransportError::protocol_violation("ACK of an unsent packet number"));
        }
        let others: Vec<usize> = self.views().filter(|&(j, v)| j != slot && v.is_open()).map(|(j, _)| j).collect();
        for j in others {
            self.post(j).push_path_ack(ack.to_owned_frame());
        }
        self.on_ack_frame(now, SpaceId::Data, path, slot, ack)
    }
}

#[cfg(test)]
mod tests;
