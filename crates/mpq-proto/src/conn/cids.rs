//! Connection IDs of one connection (RFC 9000 §5.1): the ones we issued (so the endpoint can
//! route to us) and the ones the peer issued (so we can address it).

use std::collections::{BTreeMap, BTreeSet};

use crate::cid::ConnectionId;
use crate::error::{TransportError, TransportErrorCode};

/// A connection ID we issued, with its sequence number and reset token.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IssuedCid {
    pub cid: ConnectionId,
    pub reset_token: [u8; 16],
}

/// Connection IDs issued by us.
#[derive(Debug, Default)]
pub(crate) struct LocalCids {
    /// Active IDs by sequence number.
    pub active: BTreeMap<u64, IssuedCid>,
    /// Next sequence number to issue.
    pub next_seq: u64,
    /// Sequence numbers whose NEW_CONNECTION_ID must be (re)sent (a set: a loss and a
    /// PATH_CIDS_BLOCKED may both ask for the same one).
    pub to_advertise: BTreeSet<u64>,
    /// A (PATH_)NEW_CONNECTION_ID of this set has been sent at least once: the peer will
    /// hold an ID to address packets to us on this path ID (or, if it was lost, when it
    /// is sent again).
    pub advertised: bool,
    /// The peer acknowledged a (PATH_)NEW_CONNECTION_ID of this set: it can address packets
    /// to us on this path ID, and so answer a PATH_CHALLENGE there.
    pub acked: bool,
}

impl LocalCids {
    /// Registers a freshly generated ID; returns its sequence number.
    pub fn issue(&mut self, cid: ConnectionId, reset_token: [u8; 16], advertise: bool) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.active.insert(seq, IssuedCid { cid, reset_token });
        if advertise {
            self.to_advertise.insert(seq);
        }
        seq
    }

    /// The peer retired `seq` (RETIRE_CONNECTION_ID). Returns the retired ID, if active.
    ///
    /// RFC 9000 §19.16: retiring a sequence number never issued is a PROTOCOL_VIOLATION, and so
    /// is retiring the ID the frame's packet was sent to.
    pub fn retire(&mut self, seq: u64, packet_dcid: &ConnectionId) -> Result<Option<ConnectionId>, TransportError> {
        if seq >= self.next_seq {
            return Err(TransportError::protocol_violation("RETIRE_CONNECTION_ID for an unissued sequence number"));
        }
        match self.active.get(&seq) {
            Some(c) if c.cid == *packet_dcid => {
                Err(TransportError::protocol_violation("RETIRE_CONNECTION_ID names the packet's own CID"))
            }
            Some(_) => {
                self.to_advertise.remove(&seq);
                Ok(self.active.remove(&seq).map(|c| c.cid))
            }
            None => Ok(None),
        }
    }

    /// A (PATH_)NEW_CONNECTION_ID of ours for `seq` was lost: sent again while the ID is
    /// still active (RFC 9000 §13.3).
    pub fn on_advertisement_lost(&mut self, seq: u64) {
        if self.active.contains_key(&seq) {
            self.to_advertise.insert(seq);
        }
    }
}

/// Fewest RETIRE_CONNECTION_ID frames we let wait to be sent before treating more as an
/// error (RFC 9000 §5.1.2 asks for at least twice active_connection_id_limit).
const MIN_RETIRE_BACKLOG: u64 = 16;

/// A connection ID the peer issued to us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeerCid {
    pub cid: ConnectionId,
    pub reset_token: Option<[u8; 16]>,
}

/// Connection IDs issued by the peer.
#[derive(Debug)]
pub(crate) struct PeerCids {
    /// Unretired IDs by sequence number.
    pub active: BTreeMap<u64, PeerCid>,
    /// Sequence number of the ID we currently send to.
    pub current: u64,
    /// Largest Retire Prior To received.
    pub retire_prior_to: u64,
    /// RETIRE_CONNECTION_ID frames to send: a set, since the peer may repeat a
    /// NEW_CONNECTION_ID for a sequence number already retired.
    pub to_retire: BTreeSet<u64>,
    /// Our active_connection_id_limit (per path with multipath).
    limit: u64,
    /// The peer uses zero-length connection IDs: it cannot issue others (RFC 9000 §5.1.1).
    zero_len: bool,
}

impl PeerCids {
    /// Our (PATH_)RETIRE_CONNECTION_ID for `seq` was lost: it is sent again (RFC 9000 §13.3).
    pub fn on_retirement_lost(&mut self, seq: u64) {
        self.to_retire.insert(seq);
    }

    /// Starts with the peer's handshake CID as sequence number 0.
    pub fn new(initial: ConnectionId, limit: u64) -> Self {
        let mut active = BTreeMap::new();
        active.insert(0, PeerCid { cid: initial, reset_token: None });
        Self { active, current: 0, retire_prior_to: 0, to_retire: BTreeSet::new(), limit, zero_len: initial.is_empty() }
    }

    /// No ID yet: a multipath path ID whose first PATH_NEW_CONNECTION_ID has not arrived.
    pub fn empty(limit: u64) -> Self {
        Self {
            active: BTreeMap::new(),
            current: 0,
            retire_prior_to: 0,
            to_retire: BTreeSet::new(),
            limit,
            zero_len: false,
        }
    }

    /// True when an unretired ID is available to send to.
    pub fn has_cid(&self) -> bool {
        self.active.contains_key(&self.current) || !self.active.is_empty()
    }

    /// Moves to an active ID other than the current one and retires the current one (RFC
    /// 9000 §9.5: sending from a new local address needs an ID not used before). False when
    /// the peer has issued no spare ID. With zero-length IDs there is nothing to change.
    pub fn switch_to_unused(&mut self) -> bool {
        if self.zero_len {
            return true;
        }
        let old = self.current;
        let Some(&next) = self.active.keys().find(|&&s| s != old) else { return false };
        if self.active.remove(&old).is_some() {
            self.to_retire.insert(old);
        }
        self.current = next;
        true
    }

    /// Moves to the active ID `cid` (the one a server gave in preferred_address) and retires
    /// the current one; false if `cid` is not active. Already current: nothing to do.
    pub fn switch_to_cid(&mut self, cid: &ConnectionId) -> bool {
        let Some(&seq) = self.active.iter().find(|(_, c)| c.cid == *cid).map(|(s, _)| s) else { return false };
        let old = self.current;
        if seq != old {
            if self.active.remove(&old).is_some() {
                self.to_retire.insert(old);
            }
            self.current = seq;
        }
        true
    }

    /// The ID to put in packets we send.
    pub fn current(&self) -> PeerCid {
        self.active
            .get(&self.current)
            .or_else(|| self.active.values().next())
            .copied()
            .unwrap_or(PeerCid { cid: ConnectionId::EMPTY, reset_token: None })
    }

    /// Replaces sequence number 0 (the client learns the server's CID from its first Initial).
    pub fn set_initial(&mut self, cid: ConnectionId) {
        self.active.insert(0, PeerCid { cid, reset_token: None });
    }

    /// Records the reset token of sequence number 0 (from the server's transport parameters).
    pub fn set_initial_reset_token(&mut self, token: [u8; 16]) {
        if let Some(c) = self.active.get_mut(&0) {
            c.reset_token = Some(token);
        }
    }

    /// True if `token` is the reset token of any active peer ID (RFC 9000 §10.3.1).
    pub fn is_reset_token(&self, token: &[u8; 16]) -> bool {
        self.active.values().any(|c| c.reset_token.as_ref() == Some(token))
    }

    /// Handles NEW_CONNECTION_ID (RFC 9000 §19.15).
    pub fn on_new_cid(
        &mut self,
        seq: u64,
        retire_prior_to: u64,
        cid: ConnectionId,
        token: [u8; 16],
    ) -> Result<(), TransportError> {
        if self.zero_len {
            return Err(TransportError::protocol_violation("NEW_CONNECTION_ID while using zero-length CIDs"));
        }
        if let Some(existing) = self.active.get(&seq) {
            if existing.cid != cid || existing.reset_token != Some(token) {
                return Err(TransportError::protocol_violation("NEW_CONNECTION_ID reuses a sequence number"));
            }
            return Ok(());
        }
        if self.active.values().any(|c| c.cid == cid) {
            return Err(TransportError::protocol_violation("NEW_CONNECTION_ID reuses a connection ID"));
        }
        if seq < self.retire_prior_to {
            // Already retired by an earlier Retire Prior To: retire it straight away (§19.15).
            self.to_retire.insert(seq);
        } else {
            self.active.insert(seq, PeerCid { cid, reset_token: Some(token) });
            if !self.active.contains_key(&self.current) {
                self.current = seq;
            }
        }
        if retire_prior_to > self.retire_prior_to {
            self.retire_prior_to = retire_prior_to;
            let old: Vec<u64> = self.active.range(..retire_prior_to).map(|(s, _)| *s).collect();
            for s in old {
                self.active.remove(&s);
                self.to_retire.insert(s);
            }
            if self.current < retire_prior_to {
                self.current = self.active.keys().next().copied().unwrap_or(self.current);
            }
        }
        // RFC 9000 §5.1.2: retirements waiting to be sent may be limited (at least twice
        // the active_connection_id_limit); beyond that, CONNECTION_ID_LIMIT_ERROR. Without
        // it, NEW_CONNECTION_ID frames below a large Retire Prior To grow the set for good.
        if self.to_retire.len() as u64 > 2 * self.limit.max(MIN_RETIRE_BACKLOG / 2) {
            return Err(TransportError::new(
                TransportErrorCode::CONNECTION_ID_LIMIT_ERROR,
                "too many connection IDs waiting to be retired",
            ));
        }
        if self.active.len() as u64 > self.limit {
            return Err(TransportError::new(
                TransportErrorCode::CONNECTION_ID_LIMIT_ERROR,
                "peer exceeded active_connection_id_limit",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cid(b: u8) -> ConnectionId {
        ConnectionId::new(&[b; 8])
    }

    #[test]
    fn switching_to_an_unused_cid_retires_the_current_one() {
        let mut p = PeerCids::new(cid(0), 4);
        assert!(!p.switch_to_unused(), "no spare ID yet");
        p.on_new_cid(1, 0, cid(1), [1; 16]).unwrap();
        p.on_new_cid(2, 0, cid(2), [2; 16]).unwrap();
        assert!(p.switch_to_unused());
        assert_eq!(p.current().cid, cid(1));
        assert_eq!(p.to_retire, BTreeSet::from([0]));
        assert!(p.switch_to_unused());
        assert_eq!(p.current().cid, cid(2));
        assert_eq!(p.to_retire, BTreeSet::from([0, 1]));
        assert!(!p.switch_to_unused(), "the last ID stays");
        assert_eq!(p.current().cid, cid(2));
    }

    #[test]
    fn retire_prior_to_switches_the_current_cid() {
        let mut p = PeerCids::new(cid(0), 4);
        p.on_new_cid(1, 0, cid(1), [1; 16]).unwrap();
        p.on_new_cid(2, 2, cid(2), [2; 16]).unwrap();
        assert_eq!(p.current().cid, cid(2));
        assert_eq!(p.to_retire, BTreeSet::from([0, 1]));
        assert!(p.is_reset_token(&[2; 16]));
        // A late frame for a retired sequence number is retired at once, and only once
        // however often it is repeated.
        for _ in 0..3 {
            p.on_new_cid(1, 0, cid(9), [9; 16]).unwrap();
        }
        assert_eq!(p.to_retire, BTreeSet::from([0, 1]));
    }

    /// NEW_CONNECTION_ID frames for ever new sequence numbers below a large Retire Prior To
    /// each need a RETIRE_CONNECTION_ID: past the backlog RFC 9000 §5.1.2 allows, that is
    /// CONNECTION_ID_LIMIT_ERROR rather than a set growing without bound.
    #[test]
    fn retire_backlog_is_bounded() {
        let mut p = PeerCids::new(cid(0), 4);
        p.on_new_cid(1_000_000, 1_000_000, cid(1), [1; 16]).unwrap();
        let mut err = None;
        for seq in 1..1000u64 {
            if let Err(e) = p.on_new_cid(seq, 0, ConnectionId::new(&seq.to_be_bytes()), [2; 16]) {
                err = Some((seq, e));
                break;
            }
        }
        let (seq, e) = err.expect("no error after 1000 retirements");
        assert_eq!(e.code, TransportErrorCode::CONNECTION_ID_LIMIT_ERROR);
        assert!(seq <= 2 * MIN_RETIRE_BACKLOG, "error only at {seq}");
        assert!(p.to_retire.len() as u64 <= 2 * MIN_RETIRE_BACKLOG + 1);
    }

    #[test]
    fn limits_and_reuse_are_errors() {
        let mut p = PeerCids::new(cid(0), 2);
        p.on_new_cid(1, 0, cid(1), [1; 16]).unwrap();
        let e = p.on_new_cid(2, 0, cid(2), [2; 16]).unwrap_err();
        assert_eq!(e.code, TransportErrorCode::CONNECTION_ID_LIMIT_ERROR);
        let mut p = PeerCids::new(cid(0), 4);
        p.on_new_cid(1, 0, cid(1), [1; 16]).unwrap();
        assert!(p.on_new_cid(1, 0, cid(3), [1; 16]).is_err());
        assert!(p.on_new_cid(2, 0, cid(1), [2; 16]).is_err());
        let mut z = PeerCids::new(ConnectionId::EMPTY, 4);
        assert!(z.on_new_cid(1, 0, cid(1), [1; 16]).is_err());
    }

    #[test]
    fn local_retire_rules() {
        let mut l = LocalCids::default();
        l.issue(cid(0), [0; 16], false);
        l.issue(cid(1), [1; 16], true);
        assert!(l.retire(5, &cid(0)).is_err());
        assert!(l.retire(1, &cid(1)).is_err());
        assert_eq!(l.retire(1, &cid(0)).unwrap(), Some(cid(1)));
        assert_eq!(l.retire(1, &cid(0)).unwrap(), None);
        assert!(l.to_advertise.is_empty());
    }

    #[test]
    fn advertisement_fate() {
        let mut l = LocalCids::default();
        let s0 = l.issue(cid(1), [1; 16], true);
        let s1 = l.issue(cid(2), [2; 16], true);
        l.to_advertise.clear();
        // A lost advertisement of an active ID is sent again; of a retired one, not.
        l.on_advertisement_lost(s0);
        assert!(l.retire(s1, &cid(9)).expect("retire").is_some());
        l.on_advertisement_lost(s1);
        assert_eq!(l.to_advertise.iter().copied().collect::<Vec<_>>(), [s0]);
        let mut p = PeerCids::new(cid(3), 4);
        p.on_retirement_lost(7);
        assert!(p.to_retire.contains(&7));
    }
}
