//! 1-RTT keys and key updates (RFC 9001 §6), plus the AEAD usage limits (RFC 9001 §6.6).
//!
//! Keys come in generations ([`KeyGeneration`]: immutable and reference-counted, numbered by
//! an epoch whose lowest bit is the Key Phase bit), so that whoever seals or opens packets
//! (a path, later a path's thread) holds the generation for a whole batch without holding
//! this state. `OneRttKeys` holds the current generation in both directions,
//! the next generation pre-derived (so that a peer-initiated update, seen as a flipped Key
//! Phase bit, can be decrypted without deriving keys on the receive path, and so that timing
//! doesn't reveal a trial decryption), and the previous remote key for packets reordered
//! across an update. Header protection keys never change (RFC 9001 §6).
//!
//! With multipath (RFC 10069 §2.5) one key phase is shared by every path
//! while each path numbers its packets on its own, so every packet-number comparison below
//! is made within one path: the `*_path` methods take that path's [`PathKeyMarks`], which
//! the path owns.

use std::sync::Arc;

use rustls::quic::{HeaderProtectionKey, Keys, PacketKey, PacketKeySet, Secrets};

use super::null::null_packet_key;
use crate::{TransportError, TransportErrorCode};

/// Which remote key to try on a received 1-RTT packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteKeyChoice {
    /// The current key phase.
    Current,
    /// The next key phase: the peer may be initiating a key update.
    Next,
    /// The previous key phase: a packet sent before the last update, arriving late.
    Previous,
}

/// Where the keys of the following generations come from.
enum KeySource {
    Tls(Secrets),
    /// Secrets of a version the TLS session was not created for (a client upgraded by
    /// compatible version negotiation, see [`super::version_keys`]).
    Versioned(super::version_keys::NextSecrets),
    /// INSECURE: the null cipher of every generation, for simulations.
    Null,
}

impl KeySource {
    fn next_keys(&mut self) -> PacketKeySet {
        match self {
            KeySource::Tls(s) => s.next_packet_keys(),
            KeySource::Versioned(s) => s.next_packet_keys(),
            KeySource::Null => PacketKeySet { local: null_packet_key(), remote: null_packet_key() },
        }
    }
}

/// What one path records about the key phases: with multipath one key phase is shared by
/// every path while each path numbers its packets on its own (RFC 10069
/// §2.5), so these packet numbers are per path, and the path holds them ([`PathState`] in
/// the connection). They belong to the key epoch they name: marks of an older epoch read as
/// a key update left them (the largest number of the phase that ended becomes the previous
/// phase's; the rest is cleared), so an update needs no visit to every path.
///
/// [`PathState`]: crate::conn::path
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PathKeyMarks {
    epoch: u64,
    /// First packet number we sealed in the current phase.
    first_local_pn: Option<u64>,
    /// Smallest and largest packet numbers authenticated under the current remote key.
    first_remote_pn: Option<u64>,
    largest_remote_pn: Option<u64>,
    /// Largest packet number authenticated under the previous remote key.
    prev_largest_remote_pn: Option<u64>,
}

impl PathKeyMarks {
    /// Brings the marks to `epoch`.
    fn sync(&mut self, epoch: u64) {
        if self.epoch == epoch {
            return;
        }
        self.prev_largest_remote_pn = if epoch == self.epoch + 1 { self.largest_remote_pn } else { None };
        self.first_local_pn = None;
        self.first_remote_pn = None;
        self.largest_remote_pn = None;
        self.epoch = epoch;
    }

    /// Whether a packet was authenticated on this path under the remote key of `epoch`.
    pub fn heard_in(&self, epoch: u64) -> bool {
        self.epoch == epoch && self.first_remote_pn.is_some()
    }

    /// Packet `pn` authenticated under the current remote key of `epoch` (see
    /// [`OneRttKeys::on_remote_authenticated_path`]): a path records it without the
    /// connection's key state. KEY_UPDATE_ERROR when the previous key already opened a
    /// higher number on this path (RFC 9001 §6.4).
    pub fn on_current_authenticated(&mut self, epoch: u64, pn: u64) -> Result<(), TransportError> {
        self.sync(epoch);
        if self.prev_largest_remote_pn.is_some_and(|p| pn < p) {
            return Err(key_update_error("older packet number under newer keys"));
        }
        self.first_remote_pn = Some(self.first_remote_pn.map_or(pn, |f| f.min(pn)));
        self.largest_remote_pn = Some(self.largest_remote_pn.map_or(pn, |l| l.max(pn)));
        Ok(())
    }

    /// The peer acknowledged our packet `pn`: true if we sealed it in the phase of `epoch`
    /// (which confirms that phase, RFC 9001 §6.1).
    pub fn acks_local_phase(&mut self, epoch: u64, pn: u64) -> bool {
        self.sync(epoch);
        self.first_local_pn.is_some_and(|f| pn >= f)
    }

    /// An ACK whose Largest Acknowledged is `largest_acked` covers a packet the peer sent
    /// in the current phase (`epoch`): the peer may then update again (RFC 9001 §6.2).
    pub fn ack_covers_remote_phase(&mut self, epoch: u64, largest_acked: u64) -> bool {
        self.sync(epoch);
        self.first_remote_pn.is_some_and(|f| largest_acked >= f)
    }
}

/// One generation of 1-RTT packet keys, both directions (RFC 9001 §6). Immutable once
/// derived and shared by reference count.
pub struct KeyGeneration {
    /// 0 for the first 1-RTT keys, one more per key update.
    pub epoch: u64,
    /// Seals our packets.
    pub local: Box<dyn PacketKey>,
    /// Opens the peer's packets.
    pub remote: Box<dyn PacketKey>,
}

impl KeyGeneration {
    fn new(epoch: u64, keys: PacketKeySet) -> Arc<Self> {
        Arc::new(Self { epoch, local: keys.local, remote: keys.remote })
    }

    /// The Key Phase bit of packets protected with this generation (RFC 9001 §6.1).
    pub fn phase(&self) -> bool {
        self.epoch & 1 == 1
    }
}

impl std::fmt::Debug for KeyGeneration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyGeneration").field("epoch", &self.epoch).finish_non_exhaustive()
    }
}

/// The 1-RTT header protection keys (the same for every generation, RFC 9001 §6).
pub struct HeaderKeys {
    /// Protects our headers.
    pub local: Box<dyn HeaderProtectionKey>,
    /// Removes the protection of the peer's.
    pub remote: Box<dyn HeaderProtectionKey>,
}

/// The 1-RTT packet protection state of a connection.
pub struct OneRttKeys {
    header: Arc<HeaderKeys>,
    source: KeySource,
    /// The generation in use, both directions.
    current: Arc<KeyGeneration>,
    /// The generation after the current one, both directions.
    next: Arc<KeyGeneration>,
    /// The generation before the current one (only its remote key is used), until
    /// discarded.
    prev: Option<Arc<KeyGeneration>>,

    /// An acknowledgement arrived for a packet we sealed in the current phase: we may
    /// initiate the next update (RFC 9001 §6.1).
    local_phase_acked: bool,
    /// We sent, in the current phase, an ACK covering a packet the peer sent in the current
    /// phase: only then may the peer update again (RFC 9001 §6.2).
    acked_remote_phase: bool,

    sealed_in_phase: u64,
    decrypt_failures: u64,
    confidentiality_limit: u64,
    integrity_limit: u64,
    /// The marks of the single path of the tests' single-path methods.
    #[cfg(test)]
    test_marks: PathKeyMarks,
}

impl std::fmt::Debug for OneRttKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OneRttKeys")
            .field("epoch", &self.current.epoch)
            .field("has_previous", &self.prev.is_some())
            .field("sealed_in_phase", &self.sealed_in_phase)
            .field("decrypt_failures", &self.decrypt_failures)
            .finish_non_exhaustive()
    }
}

fn key_update_error(reason: &str) -> TransportError {
    TransportError::new(TransportErrorCode::KEY_UPDATE_ERROR, reason)
}

impl OneRttKeys {
    /// Builds the state from what rustls returns in `KeyChange::OneRtt { keys, next }`.
    pub fn new(keys: Keys, next: Secrets) -> Self {
        Self::build(keys, KeySource::Tls(next))
    }

    /// Keys of a version the TLS session was not created for, with the secrets of the next
    /// phases (see [`super::version_keys`]).
    pub fn new_versioned(keys: Keys, next: super::version_keys::NextSecrets) -> Self {
        Self::build(keys, KeySource::Versioned(next))
    }

    /// INSECURE: null keys in every generation ([`super::null`]), for simulations.
    pub fn new_insecure_null() -> Self {
        let keys = super::null::insecure_null_keys();
        Self::build(keys, KeySource::Null)
    }

    fn build(keys: Keys, mut source: KeySource) -> Self {
        let next = source.next_keys();
        let confidentiality_limit = keys.local.packet.confidentiality_limit();
        let integrity_limit = keys.remote.packet.integrity_limit();
        Self {
            header: Arc::new(HeaderKeys { local: keys.local.header, remote: keys.remote.header }),
            source,
            current: KeyGeneration::new(0, PacketKeySet { local: keys.local.packet, remote: keys.remote.packet }),
            next: KeyGeneration::new(1, next),
            prev: None,
            local_phase_acked: false,
            acked_remote_phase: false,
            sealed_in_phase: 0,
            decrypt_failures: 0,
            confidentiality_limit,
            integrity_limit,
            #[cfg(test)]
            test_marks: PathKeyMarks::default(),
        }
    }

    /// The Key Phase bit to put in the packets we send.
    pub fn key_phase(&self) -> bool {
        self.current.phase()
    }

    /// The generation in use: a sender holds it for a batch of packets.
    pub fn current(&self) -> &Arc<KeyGeneration> {
        &self.current
    }

    /// The header protection keys, for a batch.
    pub fn header_keys(&self) -> &Arc<HeaderKeys> {
        &self.header
    }

    /// The key to seal our packets with.
    pub fn local_key(&self) -> &dyn PacketKey {
        &*self.current.local
    }

    /// Our header protection key (the same for every generation).
    pub fn local_header_key(&self) -> &dyn HeaderProtectionKey {
        &*self.header.local
    }

    /// The peer's header protection key (the same for every generation).
    pub fn remote_header_key(&self) -> &dyn HeaderProtectionKey {
        &*self.header.remote
    }

    /// Chooses the key for a received packet of the path with `marks` from its Key Phase
    /// bit and its full packet number (RFC 9001 §6.3, §6.5). A flipped bit is the previous
    /// phase if we still hold that key and the packet is older than the path's first packet
    /// of the current phase, and the next phase otherwise.
    pub fn remote_key_for_path(&self, phase_bit: bool, marks: &mut PathKeyMarks, pn: u64) -> RemoteKeyChoice {
        marks.sync(self.current.epoch);
        if phase_bit == self.current.phase() {
            RemoteKeyChoice::Current
        } else if self.prev.is_some() && marks.first_remote_pn.is_none_or(|f| pn < f) {
            RemoteKeyChoice::Previous
        } else {
            RemoteKeyChoice::Next
        }
    }

    /// The key for `choice`, or `None` for [`RemoteKeyChoice::Previous`] once discarded (then
    /// drop the packet).
    pub fn remote_key(&self, choice: RemoteKeyChoice) -> Option<&dyn PacketKey> {
        match choice {
            RemoteKeyChoice::Current => Some(&*self.current.remote),
            RemoteKeyChoice::Next => Some(&*self.next.remote),
            RemoteKeyChoice::Previous => self.prev.as_deref().map(|g| &*g.remote),
        }
    }

    /// Records that packet `pn` of the path with `marks` authenticated under `choice`. For
    /// [`RemoteKeyChoice::Next`] this commits the peer's key update: the next generation
    /// becomes current in both directions (we answer in the new phase, RFC 9001 §6.2), the
    /// old remote key is kept as previous, and a new next generation is derived.
    ///
    /// KEY_UPDATE_ERROR (RFC 9001 §6.2, §6.4) when the packet's number contradicts the key
    /// order (a newer key for a lower number than an older key was used for), or when the
    /// peer updates again before we acknowledged a packet of its current phase.
    pub fn on_remote_authenticated_path(
        &mut self,
        choice: RemoteKeyChoice,
        marks: &mut PathKeyMarks,
        pn: u64,
    ) -> Result<(), TransportError> {
        marks.sync(self.current.epoch);
        match choice {
            RemoteKeyChoice::Current => marks.on_current_authenticated(self.current.epoch, pn)?,
            RemoteKeyChoice::Previous => {
                if marks.first_remote_pn.is_some_and(|f| pn > f) {
                    return Err(key_update_error("newer packet number under older keys"));
                }
                marks.prev_largest_remote_pn = Some(marks.prev_largest_remote_pn.map_or(pn, |p| p.max(pn)));
            }
            RemoteKeyChoice::Next => {
                if !self.acked_remote_phase {
                    return Err(key_update_error("consecutive key updates"));
                }
                if marks.largest_remote_pn.is_some_and(|l| pn < l) {
                    return Err(key_update_error("older packet number under newer keys"));
                }
                self.rotate();
                marks.sync(self.current.epoch);
                marks.first_remote_pn = Some(pn);
                marks.largest_remote_pn = Some(pn);
            }
        }
        Ok(())
    }

    /// Moves every key one generation forward.
    fn rotate(&mut self) {
        let after_next = KeyGeneration::new(self.next.epoch + 1, self.source.next_keys());
        let next = std::mem::replace(&mut self.next, after_next);
        self.prev = Some(std::mem::replace(&mut self.current, next));
        // The paths' marks follow lazily (`PathKeyMarks::sync`).
        self.acked_remote_phase = false;
        self.local_phase_acked = false;
        self.sealed_in_phase = 0;
    }

    /// True when RFC 9001 §6.1 allows us to initiate a key update: a packet we sent in the
    /// current phase has been acknowledged. (The caller also waits for handshake
    /// confirmation.)
    pub fn can_initiate(&self) -> bool {
        self.local_phase_acked
    }

    /// Starts a key update (RFC 9001 §6.1): from now on we send in the new phase and expect
    /// the peer to answer in it; its packets of the old phase open with the previous key.
    /// Returns false, changing nothing, if [`Self::can_initiate`] is false.
    pub fn initiate_update(&mut self) -> bool {
        if !self.can_initiate() {
            return false;
        }
        self.rotate();
        true
    }

    /// Discards the previous remote key, which RFC 9001 §6.5 suggests after three PTOs once
    /// a packet of the new phase arrived. Later old-phase packets are then dropped.
    pub fn discard_previous(&mut self) {
        self.prev = None;
    }

    /// True while the previous remote key is held.
    pub fn has_previous(&self) -> bool {
        self.prev.is_some()
    }

    /// Records that we sealed packet `pn` of the path with `marks` with [`Self::local_key`].
    /// AEAD_LIMIT_REACHED once the key exceeded its confidentiality limit (RFC 9001 §6.6: we
    /// must have updated before; see [`Self::should_update`]; the limit counts every path).
    pub fn on_packet_sealed_path(&mut self, marks: &mut PathKeyMarks, pn: u64) -> Result<(), TransportError> {
        self.on_packets_sealed_path(marks, pn, 1);
        if self.sealed_in_phase > self.confidentiality_limit {
            return Err(TransportError::new(TransportErrorCode::AEAD_LIMIT_REACHED, "confidentiality limit reached"));
        }
        Ok(())
    }

    /// [`Self::on_packet_sealed_path`] for a batch: `count` packets of the path with
    /// `marks` sealed with the current key, the first numbered `first_pn`. The caller sealed
    /// no more than [`Self::seal_allowance`] allowed.
    pub fn on_packets_sealed_path(&mut self, marks: &mut PathKeyMarks, first_pn: u64, count: u64) {
        if count == 0 {
            return;
        }
        marks.sync(self.current.epoch);
        marks.first_local_pn.get_or_insert(first_pn);
        self.sealed_in_phase += count;
    }

    /// How many more packets the current key may seal before its confidentiality limit
    /// (RFC 9001 §6.6).
    pub fn seal_allowance(&self) -> u64 {
        self.confidentiality_limit.saturating_sub(self.sealed_in_phase)
    }

    /// True when the local key has sealed three quarters of its confidentiality limit: time
    /// to initiate an update, leaving margin for the peer's acknowledgement of the current
    /// phase to arrive.
    pub fn should_update(&self) -> bool {
        self.sealed_in_phase >= self.confidentiality_limit - self.confidentiality_limit / 4
    }

    /// Records that the peer acknowledged our packet `pn` of the path with `marks`. An ack
    /// of a packet sealed in the current phase confirms our last update.
    pub fn on_packet_acked_path(&mut self, marks: &mut PathKeyMarks, pn: u64) {
        if marks.acks_local_phase(self.current.epoch, pn) {
            self.local_phase_acked = true;
        }
    }

    /// A path found ([`PathKeyMarks::acks_local_phase`]) that the peer acknowledged one of
    /// our packets sealed in the phase of `epoch`: if that is still the current phase, our
    /// last update is confirmed. (A path works out the ack alone and reports it here.)
    pub fn on_local_phase_acked(&mut self, epoch: u64) {
        if epoch == self.current.epoch {
            self.local_phase_acked = true;
        }
    }

    /// The current epoch (0 for the first 1-RTT keys).
    pub fn epoch(&self) -> u64 {
        self.current.epoch
    }

    /// We sent, in the current phase, an ACK covering a packet the peer sent in the current
    /// phase ([`PathKeyMarks::ack_covers_remote_phase`]): the peer may update again.
    pub fn on_remote_phase_acked(&mut self) {
        self.acked_remote_phase = true;
    }

    /// Records a packet that failed authentication. AEAD_LIMIT_REACHED once the failures of
    /// the connection, across all keys, exceed the integrity limit (RFC 9001 §6.6).
    pub fn on_decrypt_failed(&mut self) -> Result<(), TransportError> {
        self.decrypt_failures += 1;
        if self.decrypt_failures > self.integrity_limit {
            return Err(TransportError::new(TransportErrorCode::AEAD_LIMIT_REACHED, "integrity limit reached"));
        }
        Ok(())
    }

    /// Packets sealed with the current local key.
    pub fn sealed_in_phase(&self) -> u64 {
        self.sealed_in_phase
    }

    /// Packets that failed authentication over the connection's lifetime.
    pub fn decrypt_failures(&self) -> u64 {
        self.decrypt_failures
    }

    /// The AEAD's confidentiality limit, in packets per key.
    pub fn confidentiality_limit(&self) -> u64 {
        self.confidentiality_limit
    }

    /// Single-path conveniences for the tests: the methods above on one path's marks.
    #[cfg(test)]
    pub(crate) fn remote_key_for(&mut self, phase_bit: bool, pn: u64) -> RemoteKeyChoice {
        let mut m = std::mem::take(&mut self.test_marks);
        let c = self.remote_key_for_path(phase_bit, &mut m, pn);
        self.test_marks = m;
        c
    }

    /// See [`Self::remote_key_for`].
    #[cfg(test)]
    pub(crate) fn on_remote_authenticated(&mut self, choice: RemoteKeyChoice, pn: u64) -> Result<(), TransportError> {
        let mut m = std::mem::take(&mut self.test_marks);
        let r = self.on_remote_authenticated_path(choice, &mut m, pn);
        self.test_marks = m;
        r
    }

    /// See [`Self::remote_key_for`].
    #[cfg(test)]
    pub(crate) fn on_packet_sealed(&mut self, pn: u64) -> Result<(), TransportError> {
        let mut m = std::mem::take(&mut self.test_marks);
        let r = self.on_packet_sealed_path(&mut m, pn);
        self.test_marks = m;
        r
    }

    /// See [`Self::remote_key_for`].
    #[cfg(test)]
    pub(crate) fn on_packet_acked(&mut self, pn: u64) {
        let mut m = std::mem::take(&mut self.test_marks);
        self.on_packet_acked_path(&mut m, pn);
        self.test_marks = m;
    }

    /// See [`Self::remote_key_for`].
    #[cfg(test)]
    pub(crate) fn on_ack_sent(&mut self, largest_acked: u64) {
        let epoch = self.current.epoch;
        if self.test_marks.ack_covers_remote_phase(epoch, largest_acked) {
            self.acked_remote_phase = true;
        }
    }

    /// Lowers the confidentiality limit (tests of what happens when it is reached).
    #[cfg(test)]
    pub(crate) fn set_confidentiality_limit(&mut self, limit: u64) {
        self.confidentiality_limit = limit;
    }

    /// The AEAD's integrity limit, in failed packets per connection.
    pub fn integrity_limit(&self) -> u64 {
        self.integrity_limit
    }
}
