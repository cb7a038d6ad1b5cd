//! The `version_information` transport parameter (0x11, RFC 9368 §3): the version an
//! endpoint chose for the connection and the versions it is willing to use. It authenticates
//! the version negotiation, since transport parameters are covered by the TLS handshake.

use crate::error::TransportError;

/// Decoded `version_information` (RFC 9368 §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionInformation {
    /// The version the sender uses for this connection: for a client the version of its
    /// first Initial, for a server the negotiated version.
    pub chosen: u32,
    /// The versions the sender supports, in its order of preference. A client lists the
    /// versions it would accept to be upgraded to (its chosen version among them, RFC 9368
    /// §3); a server, every version it accepts. Either may add reserved versions to grease.
    pub available: Vec<u32>,
}

impl VersionInformation {
    /// Appends the parameter's value (without ID and length).
    pub fn encode_value(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.chosen.to_be_bytes());
        for v in &self.available {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }

    /// Length of the value written by [`VersionInformation::encode_value`].
    pub fn encoded_len(&self) -> usize {
        4 * (1 + self.available.len())
    }

    /// Decodes the parameter's value. RFC 9368 §3: a value that is not a non-empty multiple
    /// of 4 bytes, a Chosen Version of 0 or an Available Version of 0 MUST be treated as a
    /// parsing failure, i.e. a TRANSPORT_PARAMETER_ERROR (RFC 9000 §7.4).
    pub fn decode_value(val: &[u8]) -> Result<Self, TransportError> {
        if val.is_empty() || !val.len().is_multiple_of(4) {
            return Err(TransportError::transport_parameter("malformed version_information"));
        }
        let mut words = val.chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
        let chosen = words.next().unwrap_or(0);
        let available: Vec<u32> = words.collect();
        if chosen == 0 || available.contains(&0) {
            return Err(TransportError::transport_parameter("version 0 in version_information"));
        }
        Ok(Self { chosen, available })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TransportErrorCode;
    use proptest::prelude::*;

    #[test]
    fn known_encoding() {
        let vi = VersionInformation { chosen: crate::VERSION_1, available: vec![crate::VERSION_1, crate::VERSION_2] };
        let mut out = Vec::new();
        vi.encode_value(&mut out);
        assert_eq!(out, [0, 0, 0, 1, 0, 0, 0, 1, 0x6b, 0x33, 0x43, 0xcf]);
        assert_eq!(out.len(), vi.encoded_len());
        assert_eq!(VersionInformation::decode_value(&out), Ok(vi));
    }

    #[test]
    fn malformed_values_are_parameter_errors() {
        for bad in [&[][..], &[0, 0, 1][..], &[0, 0, 0, 1, 0][..], &[0, 0, 0, 0][..], &[0, 0, 0, 1, 0, 0, 0, 0][..]] {
            let e = VersionInformation::decode_value(bad).unwrap_err();
            assert_eq!(e.code, TransportErrorCode::TRANSPORT_PARAMETER_ERROR, "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn round_trips(chosen in 1u32.., available in proptest::collection::vec(1u32.., 0..16)) {
            let vi = VersionInformation { chosen, available };
            let mut out = Vec::new();
            vi.encode_value(&mut out);
            prop_assert_eq!(VersionInformation::decode_value(&out), Ok(vi));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(vi) = VersionInformation::decode_value(&bytes) {
                let mut out = Vec::new();
                vi.encode_value(&mut out);
                prop_assert_eq!(out, bytes);
            }
        }
    }
}
