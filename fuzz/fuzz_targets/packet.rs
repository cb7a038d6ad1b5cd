//! Packet header parsing (v1 and v2, with and without a greased QUIC Bit), header-protection
//! removal, Retry verification and the ClientHello peek of compatible version negotiation
//! must never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mpq_proto::crypto::client_hello;
use mpq_proto::packet::header::{parse_packet_with, peek_dcid, verify_retry, PacketKind, ParseOptions};
use mpq_proto::packet::protect::remove_header_protection;
use mpq_proto::{ConnectionId, Side};

fuzz_target!(|data: &[u8]| {
    let _ = peek_dcid(data, 8);
    let _ = client_hello::transport_parameters(data);
    let cid = ConnectionId::new(&[1; 8]);
    for grease in [false, true] {
        let opts = ParseOptions { allow_grease_quic_bit: grease };
        let mut buf = data.to_vec();
        let mut offset = 0;
        while offset < buf.len() {
            let Ok(p) = parse_packet_with(&buf[offset..], 8, opts) else { break };
            let len = p.packet_len.min(buf.len() - offset);
            let pkt = &mut buf[offset..offset + len];
            if p.kind == PacketKind::Retry {
                let _ = verify_retry(pkt, &cid);
            }
            let keys = mpq_proto::crypto::initial::initial_keys(&cid, Side::Server, p.version);
            let _ = remove_header_protection(pkt, p.pn_offset, &*keys.remote.header);
            offset += len.max(1);
        }
    }
});
