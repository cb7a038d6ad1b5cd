//! The server's choice of version for a new connection (compatible version negotiation,
//! RFC 9368 §2.3): read the client's version_information from its first Initial, before the
//! connection and its TLS session exist.

use crate::conn::version::server_choice;
use crate::conn::TransportConfig;
use crate::crypto::client_hello;
use crate::crypto::initial::initial_keys;
use crate::frame::Frame;
use crate::packet::header::ParsedPacket;
use crate::packet::number::decode_pn;
use crate::packet::protect::{open_payload, remove_header_protection};
use crate::transport_params::TransportParameters;
use crate::types::Side;

/// The version the server continues the connection of the client Initial `parsed` (first
/// packet of `datagram`) in. A copy of the packet is opened to read the ClientHello (one
/// more decryption per new connection, small beside the handshake); if the ClientHello does
/// not fit in that packet (large key shares), or anything else fails, the connection stays
/// in the client's version, which is always a valid outcome. A server with one version has
/// nothing to choose.
pub(super) fn negotiated_version(datagram: &[u8], parsed: &ParsedPacket, config: &TransportConfig) -> u32 {
    if config.versions.len() < 2 {
        return parsed.version;
    }
    let info = first_flight_params(datagram, parsed).and_then(|tp| tp.version_information);
    server_choice(parsed.version, info.as_ref(), config)
}

/// The client's transport parameters, if its first Initial holds its whole ClientHello.
fn first_flight_params(datagram: &[u8], parsed: &ParsedPacket) -> Option<TransportParameters> {
    let keys = initial_keys(&parsed.dcid, Side::Server, parsed.version);
    let mut pkt = datagram.get(..parsed.packet_len)?.to_vec();
    let hdr = remove_header_protection(&mut pkt, parsed.pn_offset, &*keys.remote.header).ok()?;
    let pn = decode_pn(None, hdr.truncated_pn, hdr.pn_len);
    let payload = open_payload(&mut pkt, parsed.pn_offset, hdr.pn_len, pn, &*keys.remote.packet, None).ok()?;
    let mut r = crate::coding::Reader::new(payload);
    let mut crypto = Vec::new();
    while !r.is_empty() {
        match Frame::decode(&mut r).ok()? {
            Frame::Crypto { offset, data } => crypto.push((offset, data)),
            _ => continue,
        }
    }
    let stream = client_hello::contiguous_prefix(crypto);
    // Malformed parameters: the TLS session reports them later; here, no switch.
    TransportParameters::decode(Side::Client, client_hello::transport_parameters(&stream)?).ok()
}
