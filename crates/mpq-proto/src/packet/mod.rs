//! The packet layer: headers, packet numbers, protection and coalescing (RFC 9000 §12.2,
//! §17; RFC 9001 §5).

pub mod header;
pub mod number;
pub mod protect;
pub mod version;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_v2;

pub use header::{
    is_stateless_reset, parse_packet, parse_packet_with, peek_dcid, write_long_header, write_short_header, HeaderError,
    LongHeaderOffsets, LongType, PacketKind, ParseOptions, ParsedPacket,
};
pub use number::{decode_pn, encode_pn_len};
pub use protect::{open_payload, remove_header_protection, seal_packet, ProtectError, UnprotectedHeader};
