//! What a path leases for a batch of packets (issue C1's send seam): the current 1-RTT key
//! generation and the header protection keys, reference-counted, with an allowance of
//! packets under the confidentiality limit (RFC 9001 §6.6); the peer's connection ID of the
//! path; the connection-wide control frames waiting to be sent (flow control, CIDs,
//! multipath control, HANDSHAKE_DONE, NEW_TOKEN, 1-RTT CRYPTO), encoded, up to one packet's
//! worth ([`LeasedControl`]); and, when nothing else connection-wide waits (the lease is
//! *quiet*), stream data as reference-counted slices of the send buffers ([`BatchData`]:
//! data to resend and new data, of one stream or several), its connection credit counted.
//!
//! The path builds, seals and records the whole batch with the lease alone: STREAM chunks
//! come from the data lease, control frames, keys and CID from the lease, and what the batch
//! did for the shared side (packets sealed, ACKs sent, whether something ack-eliciting left,
//! the sizes of the packets with stream data for the scheduler) is counted in it. Then the
//! lease is returned once: unused data goes back to its streams, control frames no packet
//! carried are handed back like lost ones, the key state and the scheduler learn what the
//! batch did. A lease that is not quiet (a datagram waits, or more control frames than a
//! packet holds), or a batch whose leased data runs out while the stream table may hold
//! more, goes on with the host, which renews the lease or hands out chunks one by one.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::crypto::key_update::{HeaderKeys, KeyGeneration};
use crate::stream::BatchData;
use crate::types::SpaceId;

use super::super::space::SentFrames;
use super::super::Connection;

/// Connection-wide control frames a batch carries, encoded when its lease was taken (with
/// the connection), so that the batch can be built alone. They go into the first packet of
/// the batch with room for them, whole; what no packet took is handed back when the lease
/// returns and sent again like a lost frame (RFC 9000 §13.3: the frames carry their latest
/// value when they are resent).
#[derive(Debug, Default)]
pub(crate) struct LeasedControl {
    /// The frames, encoded back to back.
    pub bytes: Vec<u8>,
    /// What they are, for the packet's ledger entry (retransmission, acknowledgement).
    pub frames: SentFrames,
}

/// The paths whose ACKs a path carries, by slot, each with the IDs of all its carriers.
pub(crate) type AckSlots = SmallVec<[(usize, SmallVec<[u64; 4]>); 2]>;

/// What a path holds for one batch.
#[derive(Debug)]
pub(crate) struct SendLease {
    /// The generation the batch seals with.
    pub generation: Arc<KeyGeneration>,
    /// Header protection keys.
    pub header: Arc<HeaderKeys>,
    /// Packets the batch may still seal with this generation.
    pub allowance: u64,
    /// First packet number sealed in the batch.
    pub first_pn: Option<u64>,
    /// Packets sealed in the batch.
    pub sealed: u64,
    /// (path ID, largest acknowledged) of every (PATH_)ACK frame sent in the batch.
    pub acks_sent: SmallVec<[(u64, u64); 4]>,
    /// The peer's connection ID the path's 1-RTT packets carry (looked up once per batch).
    pub dcid: Option<crate::cid::ConnectionId>,
    /// Multipath is on: the path ID enters the nonce.
    pub multipath: bool,
    /// Nothing connection-wide waits to be sent: the batch's packets carry only the path's
    /// own frames and stream data.
    pub quiet: bool,
    /// Connection-wide control frames for the batch's packets.
    pub control: LeasedControl,
    /// When the lease was taken nothing was left to send but what it holds: a batch built
    /// alone that spends it is over, with no need to ask the host for more.
    pub all_leased: bool,
    /// Stream data for the batch.
    pub data: Option<BatchData>,
    /// No more stream data can be leased in this batch (take chunks one by one).
    pub data_unavailable: bool,
    /// An ack-eliciting packet left in the batch (the idle timer restarts, RFC 9000 §10.1;
    /// the handshake PTO anchor moves).
    pub ack_eliciting_sent: bool,
    /// Sizes of the batch's packets with stream data, in order, for the scheduler.
    pub stream_packets: SmallVec<[u32; 16]>,
    /// The paths whose ACKs this path carries in the batch (the ACK policy's choice, fixed
    /// for the batch), by slot, each with the IDs of all its carriers. With ACKs on their
    /// own path, the default, only the path itself: its packets read no other path's ACK
    /// state.
    pub ack_slots: AckSlots,
}

impl std::fmt::Debug for HeaderKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeaderKeys(..)")
    }
}

impl SendLease {
    /// Records a packet sealed under the lease.
    pub fn on_sealed(&mut self, pn: u64, acks: &[(u64, u64)]) {
        self.first_pn.get_or_insert(pn);
        self.sealed += 1;
        self.allowance -= 1;
        self.acks_sent.extend_from_slice(acks);
    }

    /// Stream data left in the data lease.
    pub fn has_data(&self) -> bool {
        self.data.as_ref().is_some_and(|d| !d.is_spent())
    }

    /// Leased control frames wait for a packet.
    pub fn has_control(&self) -> bool {
        !self.control.bytes.is_empty()
    }
}

impl Connection {
    /// Path `pi` returns its lease at the end of a batch sent at `now`: unused stream data
    /// goes back to its stream; the idle timer, the scheduler and the key state learn what
    /// the batch did.
    pub(super) fn return_lease(&mut self, now: crate::time::Instant, pi: usize) {
        let Some(mut lease) = self.paths.get_mut(pi).and_then(|p| p.send_lease.take()) else { return };
        if let Some(d) = lease.data.take() {
            self.shared.streams.return_stream_data(d);
        }
        if lease.has_control() {
            // No packet of the batch had room for them: back to their queues.
            self.shared.on_frames_lost(SpaceId::Data, std::mem::take(&mut lease.control.frames));
        }
        if lease.ack_eliciting_sent {
            // RFC 9000 §10.1: sending an ack-eliciting packet restarts the idle timer, but
            // only the first one after a receipt.
            if self.shared.idle_anchor_from_recv {
                self.shared.idle_anchor = now;
                self.shared.idle_anchor_from_recv = false;
            }
            self.shared.last_send_anchor = now;
        }
        let path_id = self.paths[pi].id;
        for &size in &lease.stream_packets {
            self.shared.scheduler.on_sent(path_id, u64::from(size));
        }
        let Some(keys) = self.shared.one_rtt.as_mut() else { return };
        if lease.generation.epoch != keys.current().epoch {
            // The keys were updated during the batch (not possible with one thread; a
            // path's thread may hold an old lease): its packets count for the old phase,
            // which is over.
            return;
        }
        if let Some(first) = lease.first_pn {
            keys.on_packets_sealed_path(&mut self.paths[pi].key_marks, first, lease.sealed);
        }
        self.shared.packets_in_phase += lease.sealed;
        self.on_acks_sent(pi, &lease.acks_sent);
    }

    /// (PATH_)ACK frames path `pi` sent in the current key phase, as (acknowledged path ID,
    /// Largest Acknowledged): one that covers a packet the peer sent in the current phase
    /// lets the peer update again (RFC 9001 §6.2). The acknowledged path's marks say whether
    /// it does: the path's own here; those of an ACK it carried for another path are that
    /// path's to check when it reads its mail (`PathState::on_ack_carried`).
    pub(super) fn on_acks_sent(&mut self, pi: usize, acks: &[(u64, u64)]) {
        let Some(epoch) = self.shared.one_rtt.as_ref().map(|k| k.epoch()) else { return };
        let Some(path) = self.paths.get_mut(pi) else { return };
        let own = path.id;
        let covers =
            acks.iter().any(|&(p, largest)| p == own && path.key_marks.ack_covers_remote_phase(epoch, largest));
        if covers {
            if let Some(k) = self.shared.one_rtt.as_mut() {
                k.on_remote_phase_acked();
            }
        }
    }
}
