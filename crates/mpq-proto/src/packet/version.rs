//! What differs between the QUIC versions this stack speaks: QUIC v1 (RFC 9000, RFC 9001) and
//! QUIC v2 (RFC 9369). Version 2 is version 1 with other constants, so that middleboxes
//! cannot ossify on v1's wire image (RFC 9369 §1): the version number, the long header packet
//! type bits, the Initial salt, the HKDF labels and the Retry integrity key and nonce
//! (RFC 9369 §3). Everything version-specific is chosen here, by version number.

use crate::packet::header::PacketKind;

/// QUIC version 1 (RFC 9000).
pub const VERSION_1: u32 = 0x0000_0001;
/// QUIC version 2 (RFC 9369 §3.1).
pub const VERSION_2: u32 = 0x6b33_43cf;

/// The versions whose packets this stack can parse and protect, in no particular order.
/// Which of them an endpoint uses is configuration ([`TransportConfig::versions`]).
///
/// [`TransportConfig::versions`]: crate::conn::TransportConfig::versions
pub const IMPLEMENTED: [u32; 2] = [VERSION_1, VERSION_2];

/// True for a version this stack implements (see [`IMPLEMENTED`]).
pub fn is_implemented(version: u32) -> bool {
    IMPLEMENTED.contains(&version)
}

/// True for a version of the reserved form `0x?a?a?a?a` (RFC 9000 §15), used to exercise
/// version negotiation: never a version anyone speaks.
pub fn is_reserved(version: u32) -> bool {
    version & 0x0f0f_0f0f == 0x0a0a_0a0a
}

/// The long header Packet Type bits (the first byte's bits 4-5) of `kind` in `version`.
/// RFC 9369 §3.2: v2 numbers Initial 0b01, 0-RTT 0b10, Handshake 0b11, Retry 0b00, where v1
/// numbers them 0 to 3 (RFC 9000 §17.2). `kind` must be a long header type.
pub fn long_type_bits(version: u32, kind: PacketKind) -> u8 {
    let v1 = match kind {
        PacketKind::Initial => 0,
        PacketKind::ZeroRtt => 1,
        PacketKind::Handshake => 2,
        PacketKind::Retry => 3,
        // Not long header types with type bits; callers never ask. 0 keeps this total.
        PacketKind::Short | PacketKind::VersionNegotiation => 0,
    };
    if version == VERSION_2 {
        (v1 + 1) & 0x03
    } else {
        v1
    }
}

/// The long header packet kind that the type `bits` (0 to 3) name in `version`: the inverse
/// of [`long_type_bits`].
pub fn long_kind(version: u32, bits: u8) -> PacketKind {
    let v1_bits = if version == VERSION_2 { bits.wrapping_sub(1) & 0x03 } else { bits & 0x03 };
    match v1_bits {
        0 => PacketKind::Initial,
        1 => PacketKind::ZeroRtt,
        2 => PacketKind::Handshake,
        _ => PacketKind::Retry,
    }
}

/// rustls's name for `version`, which picks the Initial salt and the "quic key"/"quicv2 key"
/// family of HKDF labels (RFC 9001 §5.1, RFC 9369 §3.3.1-§3.3.2). Versions other than v2 map
/// to v1; only implemented versions ever reach key derivation.
pub fn tls_version(version: u32) -> rustls::quic::Version {
    if version == VERSION_2 {
        rustls::quic::Version::V2
    } else {
        rustls::quic::Version::V1
    }
}

/// The fixed AES-128-GCM key and nonce of the Retry integrity tag: RFC 9001 §5.8 for v1,
/// RFC 9369 §3.3.3 for v2.
pub fn retry_key_nonce(version: u32) -> (&'static [u8; 16], &'static [u8; 12]) {
    const V1_KEY: [u8; 16] =
        [0xbe, 0x0c, 0x69, 0x0b, 0x9f, 0x66, 0x57, 0x5a, 0x1d, 0x76, 0x6b, 0x54, 0xe3, 0x68, 0xc8, 0x4e];
    const V1_NONCE: [u8; 12] = [0x46, 0x15, 0x99, 0xd3, 0x5d, 0x63, 0x2b, 0xf2, 0x23, 0x98, 0x25, 0xbb];
    const V2_KEY: [u8; 16] =
        [0x8f, 0xb4, 0xb0, 0x1b, 0x56, 0xac, 0x48, 0xe2, 0x60, 0xfb, 0xcb, 0xce, 0xad, 0x7c, 0xcc, 0x92];
    const V2_NONCE: [u8; 12] = [0xd8, 0x69, 0x69, 0xbc, 0x2d, 0x7c, 0x6d, 0x99, 0x90, 0xef, 0xb0, 0x4a];
    if version == VERSION_2 {
        (&V2_KEY, &V2_NONCE)
    } else {
        (&V1_KEY, &V1_NONCE)
    }
}

/// A short name for logs, qlog and the command line: "v1", "v2", or the number in hex.
pub fn name(version: u32) -> String {
    match version {
        VERSION_1 => "v1".into(),
        VERSION_2 => "v2".into(),
        v => format!("{v:#010x}"),
    }
}

/// Parses a version as the command line writes it: "v1", "1", "v2", "2" (the informal name,
/// RFC 9369 §1), or a hexadecimal number ("0x6b3343cf").
pub fn parse(s: &str) -> Result<u32, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "v1" | "1" | "quicv1" => Ok(VERSION_1),
        "v2" | "2" | "quicv2" => Ok(VERSION_2),
        other => other
            .strip_prefix("0x")
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| format!("unknown QUIC version {s:?} (expected v1, v2 or a hex number like 0x6b3343cf)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_bits_round_trip_and_differ_between_versions() {
        for kind in [PacketKind::Initial, PacketKind::ZeroRtt, PacketKind::Handshake, PacketKind::Retry] {
            for v in IMPLEMENTED {
                assert_eq!(long_kind(v, long_type_bits(v, kind)), kind);
            }
        }
        // RFC 9369 §3.2.
        assert_eq!(long_type_bits(VERSION_2, PacketKind::Initial), 0b01);
        assert_eq!(long_type_bits(VERSION_2, PacketKind::ZeroRtt), 0b10);
        assert_eq!(long_type_bits(VERSION_2, PacketKind::Handshake), 0b11);
        assert_eq!(long_type_bits(VERSION_2, PacketKind::Retry), 0b00);
        assert_eq!(long_type_bits(VERSION_1, PacketKind::Retry), 0b11);
    }

    #[test]
    fn names_parse_back() {
        for v in [VERSION_1, VERSION_2, 0x1a2a_3a4a] {
            assert_eq!(parse(&name(v)), Ok(v));
        }
        assert_eq!(parse("V2"), Ok(VERSION_2));
        assert!(parse("v3").is_err());
        assert!(parse("").is_err());
        assert!(is_reserved(0x1a2a_3a4a) && !is_reserved(VERSION_2));
    }
}
