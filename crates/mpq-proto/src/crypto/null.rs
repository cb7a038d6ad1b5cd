//! A null cipher for simulation runs where encryption costs time but proves nothing.
//!
//! It keeps the wire format: payloads stay in the clear, a 16-byte all-zero tag is appended
//! (so packet sizes and the header protection sample position match real runs) and header
//! protection is the identity. Never use it on a network: it has no confidentiality and no
//! integrity.

use rustls::quic::{DirectionalKeys, HeaderProtectionKey, Keys, PacketKey, Tag};

use crate::packet::header::{SAMPLE_LEN, TAG_LEN};

/// Packet "protection" that leaves the payload in the clear and appends a zero tag.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullPacketKey;

/// Header "protection" that applies no mask.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullHeaderKey;

impl PacketKey for NullPacketKey {
    fn encrypt_in_place(&self, _pn: u64, _hdr: &[u8], _payload: &mut [u8]) -> Result<Tag, rustls::Error> {
        Ok(Tag::from(&[0u8; TAG_LEN][..]))
    }

    fn encrypt_in_place_for_path(
        &self,
        _path_id: u32,
        pn: u64,
        hdr: &[u8],
        payload: &mut [u8],
    ) -> Result<Tag, rustls::Error> {
        self.encrypt_in_place(pn, hdr, payload)
    }

    fn decrypt_in_place<'a>(&self, _pn: u64, _hdr: &[u8], payload: &'a mut [u8]) -> Result<&'a [u8], rustls::Error> {
        // Checking the zero tag catches truncation and gross corruption in simulations.
        let plain_len = payload.len().checked_sub(TAG_LEN).ok_or(rustls::Error::DecryptError)?;
        if payload[plain_len..].iter().any(|b| *b != 0) {
            return Err(rustls::Error::DecryptError);
        }
        Ok(&payload[..plain_len])
    }

    fn decrypt_in_place_for_path<'a>(
        &self,
        _path_id: u32,
        pn: u64,
        hdr: &[u8],
        payload: &'a mut [u8],
    ) -> Result<&'a [u8], rustls::Error> {
        self.decrypt_in_place(pn, hdr, payload)
    }

    fn tag_len(&self) -> usize {
        TAG_LEN
    }

    fn confidentiality_limit(&self) -> u64 {
        u64::MAX
    }

    fn integrity_limit(&self) -> u64 {
        u64::MAX
    }
}

impl HeaderProtectionKey for NullHeaderKey {
    fn encrypt_in_place(&self, sample: &[u8], _first: &mut u8, pn: &mut [u8]) -> Result<(), rustls::Error> {
        check_sizes(sample, pn)
    }

    fn decrypt_in_place(&self, sample: &[u8], _first: &mut u8, pn: &mut [u8]) -> Result<(), rustls::Error> {
        check_sizes(sample, pn)
    }

    fn sample_len(&self) -> usize {
        SAMPLE_LEN
    }
}

/// Same argument checks as the real keys, so that a caller bug shows up in simulation too.
fn check_sizes(sample: &[u8], pn: &[u8]) -> Result<(), rustls::Error> {
    if sample.len() != SAMPLE_LEN || pn.len() > 4 {
        return Err(rustls::Error::General("bad header protection input".into()));
    }
    Ok(())
}

/// A boxed [`NullPacketKey`].
pub fn null_packet_key() -> Box<dyn PacketKey> {
    Box::new(NullPacketKey)
}

/// A boxed [`NullHeaderKey`].
pub fn null_header_key() -> Box<dyn HeaderProtectionKey> {
    Box::new(NullHeaderKey)
}

/// INSECURE: a full set of null keys for one level, for simulation runs only.
pub fn insecure_null_keys() -> Keys {
    let dir = || DirectionalKeys { header: null_header_key(), packet: null_packet_key() };
    Keys { local: dir(), remote: dir() }
}
