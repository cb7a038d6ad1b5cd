//! What the shared half of a connection answers by itself, without any path.

use super::space::PacketSpace;
use super::{ConnShared, State};
use crate::types::SpaceId;

impl ConnShared {
    /// True once the connection is closing, draining or drained.
    pub(crate) fn is_closed(&self) -> bool {
        !matches!(self.state, State::Handshake | State::Established)
    }

    /// The Initial or Handshake packet number space, while its keys are kept (`None` for the
    /// data spaces, which are the paths').
    pub(crate) fn handshake_space_mut(&mut self, id: SpaceId) -> Option<&mut PacketSpace> {
        match id {
            SpaceId::Initial => self.initial.as_mut(),
            SpaceId::Handshake => self.handshake.as_mut(),
            SpaceId::Data => None,
        }
    }

    /// Connection-wide frames wait to be sent on whichever path goes next: HANDSHAKE_DONE,
    /// NEW_TOKEN, 1-RTT CRYPTO, CID advertisements and retirements, multipath control. (Not
    /// stream data or the streams' control frames, which the stream table answers for.)
    pub(crate) fn connection_frames_waiting(&self) -> bool {
        #[cfg(test)]
        if !self.injected.is_empty() {
            return true;
        }
        self.handshake_done_pending
            || self.tokens.new_token_pending
            || self.one_rtt_crypto.has_pending()
            || !self.mp.pending.is_empty()
            || self.mp.paths_blocked.is_some()
            || !self.mp.cids_blocked.is_empty()
            || self.local_cids.values().any(|l| !l.to_advertise.is_empty())
            || self.peer_cids.values().any(|p| !p.to_retire.is_empty())
    }

    /// Connection-wide frames or stream data are waiting to be sent.
    pub(crate) fn has_app_space_data(&self) -> bool {
        // Stream data first: in a bulk transfer it answers at once, before the scans of
        // every path's CID tables.
        (self.handshake_complete && self.streams.has_pending_data())
            || self.ping_pending
            || (self.handshake_complete && self.datagrams.has_unpinned())
            || self.connection_frames_waiting()
    }

    /// A send batch leased now would be *quiet* (`conn/send/lease.rs`): the handshake is
    /// complete and nothing connection-wide waits, so its packets carry only their path's
    /// frames and stream data. (A PING the key update asks for is not counted: every packet
    /// checks for it ahead of its data, lease or not.)
    pub(crate) fn quiet_for_lease(&self) -> bool {
        self.handshake_complete
            && !self.streams.has_control_pending()
            && !self.connection_frames_waiting()
            // Datagrams are written with the host: a batch is not built alone while any wait.
            && self.datagrams.send_is_empty()
    }
}

impl ConnShared {
    /// The stream limits the peer's transport parameters set (RFC 9000 §18.2), applied to
    /// the stream table: at the handshake, or from those remembered with a ticket for 0-RTT.
    pub(crate) fn apply_peer_stream_limits(&mut self, tp: &crate::transport_params::TransportParameters) {
        self.streams.set_peer_params(
            tp.initial_max_data,
            tp.initial_max_stream_data_bidi_local,
            tp.initial_max_stream_data_bidi_remote,
            tp.initial_max_stream_data_uni,
            tp.initial_max_streams_bidi,
            tp.initial_max_streams_uni,
        );
    }

    /// The Source Connection ID of our long-header packets: our first CID of path 0 (empty
    /// if we use zero-length CIDs).
    pub(crate) fn long_header_scid(&self) -> crate::cid::ConnectionId {
        self.local_cids
            .get(&0)
            .and_then(|l| l.active.values().next())
            .map_or_else(crate::cid::ConnectionId::default, |c| c.cid)
    }
}
