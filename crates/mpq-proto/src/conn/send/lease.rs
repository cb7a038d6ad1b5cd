//! The keys a path leases for a batch of packets (issue C1's send seam, first part): the
//! current 1-RTT key generation and the header protection keys, reference-counted, with an
//! allowance of packets under the confidentiality limit (RFC 9001 §6.6). The path seals the
//! whole batch with them without touching the connection's key state, then returns the lease
//! once: how many packets it sealed, the first packet number, and the ACKs it sent (which
//! allow the peer's next key update, RFC 9001 §6.2). The lease also carries the peer's
//! connection ID of the path, so the batch's headers need no lookup.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::crypto::key_update::{HeaderKeys, KeyGeneration};

use super::super::Connection;

/// 1-RTT keys held by a path for one batch.
#[derive(Debug)]
pub(crate) struct KeyLease {
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
}

impl std::fmt::Debug for HeaderKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeaderKeys(..)")
    }
}

impl KeyLease {
    /// Records a packet sealed under the lease.
    pub fn on_sealed(&mut self, pn: u64, acks: &[(u64, u64)]) {
        self.first_pn.get_or_insert(pn);
        self.sealed += 1;
        self.allowance -= 1;
        self.acks_sent.extend_from_slice(acks);
    }
}

impl Connection {
    /// Path `pi` leases the 1-RTT keys for a batch (nothing without 1-RTT keys).
    pub(super) fn lease_keys(&mut self, pi: usize) {
        let Some(keys) = self.shared.one_rtt.as_ref() else { return };
        let path_id = self.paths[pi].id;
        let lease = KeyLease {
            dcid: self.shared.peer_cids.get(&path_id).map(|c| c.current().cid),
            generation: keys.current().clone(),
            header: keys.header_keys().clone(),
            allowance: keys.seal_allowance(),
            first_pn: None,
            sealed: 0,
            acks_sent: SmallVec::new(),
        };
        self.paths[pi].key_lease = Some(lease);
        super::super::touch!(self, send_leases);
    }

    /// Path `pi` returns its lease: the connection's key state learns what the batch did.
    pub(super) fn return_keys(&mut self, pi: usize) {
        let Some(lease) = self.paths.get_mut(pi).and_then(|p| p.key_lease.take()) else { return };
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
        self.on_acks_sent(&lease.acks_sent);
    }

    /// (PATH_)ACK frames sent in the current key phase, as (acknowledged path ID, Largest
    /// Acknowledged): one that covers a packet the peer sent in the current phase lets the
    /// peer update again (RFC 9001 §6.2). The acknowledged path's marks say whether it does.
    pub(super) fn on_acks_sent(&mut self, acks: &[(u64, u64)]) {
        let Some(epoch) = self.shared.one_rtt.as_ref().map(|k| k.epoch()) else { return };
        for &(acked_path, largest) in acks {
            let Some(qi) = self.path_index(acked_path) else { continue };
            if self.paths[qi].key_marks.ack_covers_remote_phase(epoch, largest) {
                if let Some(k) = self.shared.one_rtt.as_mut() {
                    k.on_remote_phase_acked();
                }
            }
        }
    }
}
