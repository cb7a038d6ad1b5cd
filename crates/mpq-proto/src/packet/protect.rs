//! Packet protection (RFC 9001 §5): AEAD over the payload, then header protection over the
//! first byte's low bits and the packet number.
//!
//! Sealing works in place on the datagram buffer being built; opening is split in two steps
//! ([`remove_header_protection`], then [`open_payload`]) because between them the caller must
//! rebuild the full packet number (from the largest received in that space) and pick the
//! packet key (from the Key Phase bit), neither of which this module knows.
//!
//! With `path_id: Some(id)` the AEAD nonce is the multipath one (RFC 10069
//! §2.4: IV XOR (path ID ‖ packet number)); with `None` it is RFC 9001's IV XOR packet number.

use rustls::quic::{HeaderProtectionKey, PacketKey};
use thiserror::Error;

use super::header::{MAX_LONG_LENGTH, MAX_PN_LEN};
use crate::coding::write_varint_fixed;

/// Why sealing or opening a packet failed. Opening errors mean "drop the packet"; sealing
/// errors are bugs in the caller's packet assembly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum ProtectError {
    /// Not enough bytes after the packet number offset for the header protection sample:
    /// when sealing, the caller must pad the payload to at least
    /// [`min_payload_len`]`(pn_len)` bytes.
    #[error("packet too short for header protection sample")]
    TooShort,
    /// A long packet longer than the 2-byte Length field can express.
    #[error("packet too long for its length field")]
    TooLong,
    /// The AEAD or header protection rejected the input: for opening, an authentication
    /// failure (count it against the integrity limit).
    #[error("packet protection failed")]
    Crypto,
}

/// Smallest payload (frames, before the tag) a packet with a `pn_len`-byte packet number
/// needs so that the header protection sample, taken 4 bytes after the packet number's
/// start, lies within the packet (RFC 9001 §5.4.2).
pub fn min_payload_len(pn_len: usize) -> usize {
    MAX_PN_LEN - pn_len
}

/// Protects the packet that occupies `packet[header_start..]`: the header, written by
/// [`write_long_header`](super::header::write_long_header) or
/// [`write_short_header`](super::header::write_short_header), then the plaintext frames.
///
/// 1. For long headers (`len_offset: Some(_)`) fills the 2-byte Length field in, counting
///    the tag about to be added;
/// 2. encrypts the payload in place and appends the tag (`packet` should have room for
///    `key.tag_len()` more bytes to avoid a reallocation);
/// 3. applies header protection with the sample at `pn_offset + 4`.
///
/// Offsets are absolute indices into `packet`, which may already hold earlier packets of a
/// coalesced datagram.
#[allow(clippy::too_many_arguments)] // every argument is a distinct piece of the packet
pub fn seal_packet(
    packet: &mut Vec<u8>,
    header_start: usize,
    len_offset: Option<usize>,
    pn_offset: usize,
    pn_len: usize,
    pn: u64,
    key: &dyn PacketKey,
    hp: &dyn HeaderProtectionKey,
    path_id: Option<u32>,
) -> Result<(), ProtectError> {
    debug_assert!(header_start < pn_offset && (1..=MAX_PN_LEN).contains(&pn_len));
    let payload_start = pn_offset + pn_len;
    let tag_len = key.tag_len();
    let sample_len = hp.sample_len();
    let end = packet.len() + tag_len;
    if end < pn_offset + MAX_PN_LEN + sample_len {
        return Err(ProtectError::TooShort);
    }
    if let Some(len_offset) = len_offset {
        let length = end - pn_offset;
        if length > MAX_LONG_LENGTH {
            return Err(ProtectError::TooLong);
        }
        write_varint_fixed(&mut packet[len_offset..], length as u64, 2);
    }

    let (header, payload) = packet[header_start..].split_at_mut(payload_start - header_start);
    let tag = match path_id {
        Some(id) => key.encrypt_in_place_for_path(id, pn, header, payload),
        None => key.encrypt_in_place(pn, header, payload),
    }
    .map_err(|_| ProtectError::Crypto)?;
    packet.extend_from_slice(tag.as_ref());
    apply_header_protection(packet, header_start, pn_offset, pn_len, hp)
}

/// Masks the first byte (at `header_start`) and the `pn_len` packet number bytes at
/// `pn_offset` (RFC 9001 §5.4.1), sampling the ciphertext after the packet number. The mask
/// is an XOR, so this also restores the protection [`remove_header_protection`] removed.
pub fn apply_header_protection(
    packet: &mut [u8],
    header_start: usize,
    pn_offset: usize,
    pn_len: usize,
    hp: &dyn HeaderProtectionKey,
) -> Result<(), ProtectError> {
    let sample_end = pn_offset + MAX_PN_LEN + hp.sample_len();
    if packet.len() < sample_end || pn_len > MAX_PN_LEN || header_start >= pn_offset {
        return Err(ProtectError::TooShort);
    }
    let (head, rest) = packet.split_at_mut(pn_offset + MAX_PN_LEN);
    let sample = &rest[..hp.sample_len()];
    let (before_pn, pn_field) = head.split_at_mut(pn_offset);
    hp.encrypt_in_place(sample, &mut before_pn[header_start], &mut pn_field[..pn_len]).map_err(|_| ProtectError::Crypto)
}

/// The header fields that header protection hid, once removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnprotectedHeader {
    /// The first byte in the clear: reserved bits, key phase and packet number length.
    pub first_byte: u8,
    /// Length of the packet number field, 1 to 4.
    pub pn_len: usize,
    /// The packet number as sent, before [`decode_pn`](super::number::decode_pn).
    pub truncated_pn: u64,
}

impl UnprotectedHeader {
    /// The Key Phase bit (short headers only; meaningless for long headers).
    pub fn key_phase(&self) -> bool {
        self.first_byte & 0x04 != 0
    }

    /// True if the reserved bits are set. RFC 9000 §17.2/§17.3.1 make that a
    /// PROTOCOL_VIOLATION, but only after the payload authenticated: before, the bits may
    /// simply be a forgery's random mask.
    pub fn reserved_bits_set(&self) -> bool {
        let mask = if self.first_byte & 0x80 != 0 { 0x0c } else { 0x18 };
        self.first_byte & mask != 0
    }
}

/// Removes header protection from `packet` (exactly one packet: from its first byte to
/// `packet_len` as returned by [`parse_packet`](super::header::parse_packet)) in place.
///
/// Afterwards `packet[0]` and the packet number bytes are in the clear; the bytes after the
/// packet number that the 4-byte window covered are left as they were (ciphertext).
pub fn remove_header_protection(
    packet: &mut [u8],
    pn_offset: usize,
    hp: &dyn HeaderProtectionKey,
) -> Result<UnprotectedHeader, ProtectError> {
    let sample_len = hp.sample_len();
    let sample_end = pn_offset.checked_add(MAX_PN_LEN + sample_len).ok_or(ProtectError::TooShort)?;
    if pn_offset == 0 || packet.len() < sample_end {
        return Err(ProtectError::TooShort);
    }
    let (head, rest) = packet.split_at_mut(pn_offset + MAX_PN_LEN);
    let sample = &rest[..sample_len];
    let (before_pn, pn_field) = head.split_at_mut(pn_offset);
    // All 4 bytes are passed: the key unmasks only as many as the unmasked first byte says.
    hp.decrypt_in_place(sample, &mut before_pn[0], pn_field).map_err(|_| ProtectError::Crypto)?;
    let first_byte = before_pn[0];
    let pn_len = usize::from(first_byte & 0x03) + 1;
    let truncated_pn = pn_field[..pn_len].iter().fold(0u64, |acc, b| acc << 8 | u64::from(*b));
    Ok(UnprotectedHeader { first_byte, pn_len, truncated_pn })
}

/// Decrypts the payload of `packet` (one packet, header protection already removed) in
/// place with the full packet number `pn`, and returns the plaintext frames.
///
/// On failure the packet must be dropped (RFC 9001 §5.5: no connection error) and counted
/// against the key's integrity limit.
pub fn open_payload<'a>(
    packet: &'a mut [u8],
    pn_offset: usize,
    pn_len: usize,
    pn: u64,
    key: &dyn PacketKey,
    path_id: Option<u32>,
) -> Result<&'a [u8], ProtectError> {
    let payload_start = pn_offset + pn_len;
    if packet.len() < payload_start + key.tag_len() {
        return Err(ProtectError::TooShort);
    }
    let (header, payload) = packet.split_at_mut(payload_start);
    let plain = match path_id {
        Some(id) => key.decrypt_in_place_for_path(id, pn, header, payload),
        None => key.decrypt_in_place(pn, header, payload),
    };
    plain.map_err(|_| ProtectError::Crypto)
}
