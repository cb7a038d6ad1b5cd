//! Packet header parsing and header-protection removal must never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mpq_proto::packet::header::{parse_packet, peek_dcid};
use mpq_proto::packet::protect::remove_header_protection;
use mpq_proto::{ConnectionId, Side};

fuzz_target!(|data: &[u8]| {
    let _ = peek_dcid(data, 8);
    let mut buf = data.to_vec();
    let mut offset = 0;
    let keys = mpq_proto::crypto::initial::initial_keys(&ConnectionId::new(&[1; 8]), Side::Server);
    while offset < buf.len() {
        let Ok(p) = parse_packet(&buf[offset..], 8) else { break };
        let len = p.packet_len.min(buf.len() - offset);
        let pkt = &mut buf[offset..offset + len];
        let _ = remove_header_protection(pkt, p.pn_offset, &*keys.remote.header);
        offset += len.max(1);
    }
});
