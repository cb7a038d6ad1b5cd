//! INSECURE hooks for the fuzz targets (cargo feature `fuzzing`, off by default).
//!
//! The state-machine fuzz targets inject packets of their own into a handshaken connection
//! pair. Sealing them under the real 1-RTT keys would need the TLS secrets; instead both
//! sides switch to the null cipher ([`crate::crypto::null`]) once the handshake is over, so a
//! target writes a short-header packet as plain bytes plus a zero tag. To keep the pair
//! consistent, a forged packet takes its packet number from the connection it impersonates
//! ([`Connection::fuzz_forge_slot`]): the peer's ACK of it is then an ACK of a packet that
//! connection "sent", not a protocol violation.

use std::net::SocketAddr;

use super::space::SentFrames;
use super::Connection;
use crate::cid::ConnectionId;
use crate::crypto::key_update::OneRttKeys;
use crate::recovery::sent::SentPacket;
use crate::time::Instant;

/// Where and how a fuzz target forges a 1-RTT packet as if this connection sent it.
#[derive(Debug, Clone, Copy)]
pub struct ForgeSlot {
    /// The DCID this connection currently sends to on the path.
    pub dcid: ConnectionId,
    /// A packet number this connection reserved (and recorded as sent) for the forgery.
    pub pn: u64,
    /// The path's local address (`None`: the runtime's default socket).
    pub local: Option<SocketAddr>,
    /// The path's peer address.
    pub remote: SocketAddr,
    /// The Key Phase bit this connection currently sends.
    pub key_phase: bool,
}

impl Connection {
    /// INSECURE, fuzzing only: replaces the 1-RTT keys (every generation, both directions)
    /// with the null cipher, in phase 0. Call it on both sides of a pair at the same moment,
    /// with no 1-RTT packet in flight, or those packets fail to open.
    pub fn insecure_use_null_one_rtt_keys(&mut self) {
        if self.one_rtt.is_some() {
            self.one_rtt = Some(OneRttKeys::new_insecure_null());
            self.packets_in_phase = 0;
            self.key_discard_at = None;
            self.key_discard_pending = false;
            self.phase_acked_at = None;
        }
    }

    /// Fuzzing only: IDs of the paths with state (open, closing or draining), in table order.
    pub fn fuzz_path_ids(&self) -> Vec<u64> {
        self.paths.iter().map(|p| p.id).collect()
    }

    /// Fuzzing only: reserves the next packet number of path `path_id` for a packet a fuzz
    /// target forges in this connection's name. The number is recorded as sent (no frames to
    /// retransmit, not ack-eliciting, not in flight) so that the peer may acknowledge it.
    /// `None` if the path or 1-RTT keys are missing.
    pub fn fuzz_forge_slot(&mut self, now: Instant, path_id: u64) -> Option<ForgeSlot> {
        let key_phase = self.one_rtt.as_ref()?.key_phase();
        let dcid = self.peer_cids.get(&path_id).filter(|c| c.has_cid())?.current().cid;
        let pi = self.path_index(path_id)?;
        let path = &mut self.paths[pi];
        let pn = path.data.take_pn();
        let sent = SentPacket {
            time_sent: now,
            size: 0,
            ack_eliciting: false,
            in_flight: false,
            ecn: false,
            frames: SentFrames::default(),
        };
        path.data.loss.on_packet_sent(pn, sent);
        Some(ForgeSlot { dcid, pn, local: path.local, remote: path.remote, key_phase })
    }

    /// Fuzzing only: bytes held in receive buffers (stream reassembly and the 1-RTT CRYPTO
    /// stream) and entries in per-path tables, for memory invariants.
    pub fn fuzz_footprint(&self) -> Footprint {
        Footprint {
            paths: self.paths.len(),
            peer_cid_paths: self.peer_cids.len(),
            local_cid_paths: self.local_cids.len(),
            local_cids: self.local_cids.values().map(|l| l.active.len()).sum(),
            peer_cids: self.peer_cids.values().map(|p| p.active.len() + p.to_retire.len()).sum(),
            events: self.events.len(),
            closed_paths: self.closed_paths.len(),
        }
    }
}

/// Sizes of a connection's peer-driven tables (see [`Connection::fuzz_footprint`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Paths with state.
    pub paths: usize,
    /// Path IDs with a table of peer-issued CIDs.
    pub peer_cid_paths: usize,
    /// Path IDs with a table of CIDs we issued.
    pub local_cid_paths: usize,
    /// CIDs we issued and did not see retired.
    pub local_cids: usize,
    /// Peer-issued CIDs held or queued for retirement.
    pub peer_cids: usize,
    /// Undelivered application events.
    pub events: usize,
    /// Statistics of closed paths kept.
    pub closed_paths: usize,
}
