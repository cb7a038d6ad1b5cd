//! QUIC v2 packet protection against the test vectors of RFC 9369 Appendix A: the v2 long
//! header type bits (§3.2), Initial salt and "quicv2" labels (§3.3.1, §3.3.2).

use super::header::*;
use super::number::*;
use super::protect::*;
use super::tests::seal_long;
use crate::crypto::initial_keys;
use crate::{ConnectionId, Side, VERSION_1, VERSION_2};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn rfc_dcid() -> ConnectionId {
    ConnectionId::new(&hex("8394c8f03e515708"))
}

/// RFC 9369 A.3: the server's Initial (the payload is the same ServerHello as RFC 9001 A.3).
const A3_PAYLOAD: &str = "
02000000000600405a020000560303eefce7f7b37ba1d1632e96677825ddf73988cfc79825df566dc5430b9a04
5a1200130100002e00330024001d00209d3c940d89690b84d08a60993c144eca684d1081287c834d5311bcf32b
b9da1a002b00020304";
const A3_PROTECTED: &str = "
dc6b3343cf0008f067a5502a4262b5004075d92faaf16f05d8a4398c47089698baeea26b91eb761d9b89237bbf
87263017915358230035f7fd3945d88965cf17f9af6e16886c61bfc703106fbaf3cb4cfa52382dd16a393e4275
75076980 75b2c984c707f0a0812d8cd5a6881eaf21ceda98f4bd23f6fe1a3e2c43edd9ce7ca84bed8521e2e140";

#[test]
fn rfc9369_a3_server_initial_v2() {
    let keys = initial_keys(&rfc_dcid(), Side::Server, VERSION_2);
    let mut pkt = vec![];
    let off = write_long_header(
        &mut pkt,
        LongType::Initial,
        VERSION_2,
        &ConnectionId::EMPTY,
        &ConnectionId::new(&hex("f067a5502a4262b5")),
        &[],
        1,
        2,
    );
    // RFC 9369 §3.2: a v2 Initial has type bits 0b01 (0xd1 with a 2-byte packet number).
    assert_eq!(pkt[0], 0xd1);
    pkt.extend(hex(A3_PAYLOAD));
    seal_long(&mut pkt, &off, 2, 1, &keys);
    assert_eq!(pkt, hex(A3_PROTECTED));

    // The client opens it with its v2 keys and only with them.
    let h = parse_packet(&pkt, 0).unwrap();
    assert_eq!((h.kind, h.version), (PacketKind::Initial, VERSION_2));
    let v1 = initial_keys(&rfc_dcid(), Side::Client, VERSION_1);
    let mut copy = pkt.clone();
    let opened_v1 = remove_header_protection(&mut copy, h.pn_offset, &*v1.remote.header).ok().and_then(|u| {
        let pn = decode_pn(None, u.truncated_pn, u.pn_len);
        open_payload(&mut copy, h.pn_offset, u.pn_len, pn, &*v1.remote.packet, None).ok().map(|_| ())
    });
    assert!(opened_v1.is_none(), "v1 keys must not open a v2 packet");
    let client = initial_keys(&rfc_dcid(), Side::Client, VERSION_2);
    let u = remove_header_protection(&mut pkt, h.pn_offset, &*client.remote.header).unwrap();
    let pn = decode_pn(None, u.truncated_pn, u.pn_len);
    assert_eq!(pn, 1);
    let plain = open_payload(&mut pkt, h.pn_offset, u.pn_len, pn, &*client.remote.packet, None).unwrap();
    assert_eq!(plain, &hex(A3_PAYLOAD)[..]);
}

/// RFC 9369 A.2: the client's Initial header, unprotected ("d36b3343cf...") and protected.
#[test]
fn rfc9369_a2_client_initial_header_v2() {
    let keys = initial_keys(&rfc_dcid(), Side::Client, VERSION_2);
    let mut pkt = Vec::with_capacity(1200);
    let off = write_long_header(&mut pkt, LongType::Initial, VERSION_2, &rfc_dcid(), &ConnectionId::EMPTY, &[], 2, 4);
    // The CRYPTO frame of RFC 9001 A.2 (the same ClientHello), padded to 1200 bytes.
    pkt.extend(hex(super::tests::A2_CRYPTO_FRAME));
    pkt.resize(off.pn_offset + 4 + 1162, 0);
    let mut hdr = pkt[..off.pn_offset + 4].to_vec();
    crate::coding::write_varint_fixed(&mut hdr[off.len_offset..], 1182, 2);
    assert_eq!(hdr, hex("d36b3343cf088394c8f03e5157080000449e00000002"));
    let plain = pkt[off.pn_offset + 4..].to_vec();
    seal_long(&mut pkt, &off, 4, 2, &keys);
    assert_eq!(pkt.len(), 1200);
    assert_eq!(&pkt[..22], &hex("d76b3343cf088394c8f03e5157080000449ea0c95e82")[..]);
    // The server reads it back.
    let server = initial_keys(&rfc_dcid(), Side::Server, VERSION_2);
    let h = parse_packet(&pkt, 8).unwrap();
    assert_eq!((h.kind, h.version), (PacketKind::Initial, VERSION_2));
    let u = remove_header_protection(&mut pkt, h.pn_offset, &*server.remote.header).unwrap();
    let pn = decode_pn(None, u.truncated_pn, u.pn_len);
    let opened = open_payload(&mut pkt, h.pn_offset, u.pn_len, pn, &*server.remote.packet, None).unwrap();
    assert_eq!(opened, &plain[..]);
}

/// Every long header type parses back as written, in both versions, and the v2 type bits
/// differ from v1's (RFC 9369 §3.2), so a v1 parser reading them would misname the type.
#[test]
fn long_types_round_trip_in_both_versions() {
    for version in [VERSION_1, VERSION_2] {
        for (ty, kind) in [
            (LongType::Initial, PacketKind::Initial),
            (LongType::ZeroRtt, PacketKind::ZeroRtt),
            (LongType::Handshake, PacketKind::Handshake),
        ] {
            let mut pkt = Vec::new();
            let token: &[u8] = if ty == LongType::Initial { b"t" } else { b"" };
            write_long_header(&mut pkt, ty, version, &rfc_dcid(), &rfc_dcid(), token, 0, 4);
            pkt.resize(pkt.len() + 40, 0);
            let len = pkt.len();
            // Length: everything after the packet number offset.
            let pn_offset = parse_packet(&pkt, 8).map(|h| h.pn_offset).unwrap_or(len - 44);
            crate::coding::write_varint_fixed(&mut pkt[pn_offset - 2..], (len - pn_offset) as u64, 2);
            let h = parse_packet(&pkt, 8).unwrap();
            assert_eq!((h.kind, h.version), (kind, version));
        }
    }
}
