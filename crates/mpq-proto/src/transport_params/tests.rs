//! Transport parameter codec tests.

use super::*;
use crate::coding::VARINT_MAX;
use crate::error::TransportErrorCode;
use proptest::prelude::*;

fn param(out: &mut Vec<u8>, pid: u64, val: &[u8]) {
    write_param(out, pid, val);
}

fn vparam(pid: u64, v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    write_varint_param(&mut out, pid, v);
    out
}

fn err(sender: Side, bytes: &[u8]) -> TransportErrorCode {
    TransportParameters::decode(sender, bytes).unwrap_err().code
}

const TPE: TransportErrorCode = TransportErrorCode::TRANSPORT_PARAMETER_ERROR;

#[test]
fn defaults() {
    let d = TransportParameters::default();
    assert_eq!(d.max_udp_payload_size, 65527);
    assert_eq!(d.ack_delay_exponent, 3);
    assert_eq!(d.max_ack_delay, 25);
    assert_eq!(d.active_connection_id_limit, 2);
    assert_eq!(d.initial_max_data, 0);
    assert_eq!(d.initial_max_path_id, None);
    let mut out = Vec::new();
    d.encode(&mut out);
    assert!(out.is_empty());
    assert_eq!(TransportParameters::decode(Side::Client, &[]).unwrap(), d);
}

#[test]
fn known_encoding() {
    let tp = TransportParameters {
        max_idle_timeout: 30_000,
        initial_max_data: 1 << 20,
        initial_source_connection_id: Some(ConnectionId::new(&[1, 2, 3, 4])),
        disable_active_migration: true,
        initial_max_path_id: Some(3),
        ..Default::default()
    };
    let mut out = Vec::new();
    tp.encode(&mut out);
    let want = [
        &[0x01, 4, 0x80, 0x00, 0x75, 0x30][..], // max_idle_timeout 30000
        &[0x04, 4, 0x80, 0x10, 0x00, 0x00],     // initial_max_data 2^20
        &[0x0c, 0],                             // disable_active_migration
        &[0x0f, 4, 1, 2, 3, 4],                 // initial_source_connection_id
        &[0x3e, 1, 3],                          // initial_max_path_id
    ]
    .concat();
    assert_eq!(out, want);
    assert_eq!(TransportParameters::decode(Side::Client, &out).unwrap(), tp);
}

#[test]
fn unknown_and_grease_ignored() {
    let mut out = Vec::new();
    param(&mut out, 0x1234, &[1, 2, 3]);
    param(&mut out, 31 * 5 + 27, &[]);
    write_varint_param(&mut out, id::INITIAL_MAX_DATA, 7);
    let tp = TransportParameters::decode(Side::Client, &out).unwrap();
    assert_eq!(tp.initial_max_data, 7);

    let tp = TransportParameters { initial_max_data: 9, ..Default::default() };
    let mut out = Vec::new();
    tp.encode_with_grease(&mut out, u64::MAX, &[1, 2, 3]);
    assert_eq!(TransportParameters::decode(Side::Server, &out).unwrap(), tp);
}

#[test]
fn version_information_and_grease_quic_bit_round_trip() {
    let tp = TransportParameters {
        version_information: Some(VersionInformation {
            chosen: crate::VERSION_2,
            available: vec![crate::VERSION_2, crate::VERSION_1, 0x1a2a_3a4a],
        }),
        grease_quic_bit: true,
        ..Default::default()
    };
    let mut out = Vec::new();
    tp.encode(&mut out);
    assert!(out.windows(3).any(|w| w == [0x6a, 0xb2, 0]), "grease_quic_bit: 2-byte ID, empty value");
    assert_eq!(TransportParameters::decode(Side::Server, &out).unwrap(), tp);
    // RFC 9287 §3: grease_quic_bit with a value is a TRANSPORT_PARAMETER_ERROR.
    let mut bad = Vec::new();
    param(&mut bad, id::GREASE_QUIC_BIT, &[0]);
    assert_eq!(err(Side::Client, &bad), TPE);
    // RFC 9368 §3: a chosen version of 0 is a parsing failure.
    let mut bad = Vec::new();
    param(&mut bad, id::VERSION_INFORMATION, &[0, 0, 0, 0, 0, 0, 0, 1]);
    assert_eq!(err(Side::Server, &bad), TPE);
}

#[test]
fn duplicates_rejected() {
    let mut out = vparam(id::INITIAL_MAX_DATA, 1);
    out.extend(vparam(id::INITIAL_MAX_DATA, 1));
    assert_eq!(err(Side::Client, &out), TPE);
    let mut out = Vec::new();
    param(&mut out, 0x1234, &[]);
    param(&mut out, 0x1234, &[]);
    assert_eq!(err(Side::Client, &out), TPE);
}

#[test]
fn server_only_from_client() {
    let cid = [1u8; 8];
    let pa = PreferredAddress {
        address_v4: Some(SocketAddrV4::new(Ipv4Addr::new(1, 2, 3, 4), 443)),
        address_v6: None,
        connection_id: ConnectionId::new(&cid),
        stateless_reset_token: [2; 16],
    };
    let mut pa_bytes = Vec::new();
    pa.encode(&mut pa_bytes);
    for (pid, val) in [
        (id::ORIGINAL_DESTINATION_CONNECTION_ID, &cid[..]),
        (id::STATELESS_RESET_TOKEN, &[0; 16][..]),
        (id::PREFERRED_ADDRESS, &pa_bytes[..]),
        (id::RETRY_SOURCE_CONNECTION_ID, &cid[..]),
    ] {
        let mut out = Vec::new();
        param(&mut out, pid, val);
        assert_eq!(err(Side::Client, &out), TPE, "0x{pid:x}");
        assert!(TransportParameters::decode(Side::Server, &out).is_ok(), "0x{pid:x}");
    }
}

#[test]
fn out_of_range_values() {
    let cases = [
        (id::MAX_UDP_PAYLOAD_SIZE, 1199, 1200),
        (id::ACK_DELAY_EXPONENT, 21, 20),
        (id::MAX_ACK_DELAY, 1 << 14, (1 << 14) - 1),
        (id::ACTIVE_CONNECTION_ID_LIMIT, 1, 2),
        (id::INITIAL_MAX_STREAMS_BIDI, (1 << 60) + 1, 1 << 60),
        (id::INITIAL_MAX_STREAMS_UNI, (1 << 60) + 1, 1 << 60),
        (id::INITIAL_MAX_PATH_ID, 1 << 32, (1 << 32) - 1),
    ];
    for (pid, bad, good) in cases {
        assert_eq!(err(Side::Server, &vparam(pid, bad)), TPE, "0x{pid:x} = {bad}");
        assert!(TransportParameters::decode(Side::Server, &vparam(pid, good)).is_ok(), "0x{pid:x} = {good}");
    }
    assert_eq!(err(Side::Server, &vparam(id::ACTIVE_CONNECTION_ID_LIMIT, 0)), TPE);
}

#[test]
fn malformed_values() {
    let mut cases: Vec<Vec<u8>> = vec![
        vec![0x04],                   // truncated length
        vec![0x04, 2, 0x40],          // truncated value
        vec![0x40],                   // truncated id
        vec![0x04, 2, 5, 0],          // varint value shorter than its length field
        vec![0x04, 1, 0x40],          // varint value longer than its length field
        vec![0x04, 0],                // empty varint value
        vec![0x0c, 1, 0],             // disable_active_migration with a value
        vec![0x02, 15],               // stateless_reset_token of 15 bytes (server)
        vec![0x0f, 21],               // CID of 21 bytes
        vec![0x04, 0x80, 0xff, 0xff], // huge length: must not allocate
    ];
    cases[7].extend_from_slice(&[0; 15]);
    cases[8].extend_from_slice(&[0; 21]);
    for b in &cases {
        assert_eq!(err(Side::Server, b), TPE, "{b:?}");
    }
}

fn pa_bytes(cid_len: u8, extra: usize) -> Vec<u8> {
    let mut v = vec![1, 2, 3, 4, 1, 187];
    v.extend_from_slice(&[0; 18]);
    v.push(cid_len);
    v.extend(std::iter::repeat_n(7, usize::from(cid_len)));
    v.extend_from_slice(&[9; 16]);
    v.extend(std::iter::repeat_n(0, extra));
    v
}

#[test]
fn preferred_address() {
    let mut out = Vec::new();
    param(&mut out, id::PREFERRED_ADDRESS, &pa_bytes(4, 0));
    let tp = TransportParameters::decode(Side::Server, &out).unwrap();
    let pa = tp.preferred_address.unwrap();
    assert_eq!(pa.address_v4, Some(SocketAddrV4::new(Ipv4Addr::new(1, 2, 3, 4), 443)));
    assert_eq!(pa.address_v6, None);
    assert_eq!(&*pa.connection_id, &[7; 4]);
    assert_eq!(pa.stateless_reset_token, [9; 16]);
    let mut re = Vec::new();
    tp.encode(&mut re);
    assert_eq!(re, out);

    for bad in [pa_bytes(0, 0), pa_bytes(21, 0), pa_bytes(4, 1)] {
        let mut out = Vec::new();
        param(&mut out, id::PREFERRED_ADDRESS, &bad);
        assert_eq!(err(Side::Server, &out), TPE);
    }
    let good = pa_bytes(4, 0);
    for n in 0..good.len() {
        let mut out = Vec::new();
        param(&mut out, id::PREFERRED_ADDRESS, &good[..n]);
        assert_eq!(err(Side::Server, &out), TPE);
    }
}

fn cid() -> impl Strategy<Value = ConnectionId> {
    proptest::collection::vec(any::<u8>(), 0..=20).prop_map(|v| ConnectionId::new(&v))
}

fn varint() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..64, 0u64..16384, 0..=VARINT_MAX]
}

fn preferred() -> impl Strategy<Value = PreferredAddress> {
    (
        proptest::option::of((1u32.., any::<u16>())),
        proptest::option::of((any::<u128>(), 1u16..)),
        proptest::collection::vec(any::<u8>(), 1..=20),
        any::<[u8; 16]>(),
    )
        .prop_map(|(v4, v6, c, t)| PreferredAddress {
            address_v4: v4.map(|(ip, port)| SocketAddrV4::new(Ipv4Addr::from(ip), port)),
            address_v6: v6.map(|(ip, port)| SocketAddrV6::new(Ipv6Addr::from(ip), port, 0, 0)),
            connection_id: ConnectionId::new(&c),
            stateless_reset_token: t,
        })
}

fn params() -> impl Strategy<Value = TransportParameters> {
    let a = (
        proptest::option::of(cid()),
        varint(),
        proptest::option::of(any::<[u8; 16]>()),
        1200..=VARINT_MAX,
        [varint(), varint(), varint(), varint()],
        [0..=MAX_STREAMS_LIMIT, 0..=MAX_STREAMS_LIMIT],
    );
    let b = (
        0u64..=20,
        0u64..(1 << 14),
        any::<bool>(),
        proptest::option::of(preferred()),
        2..=VARINT_MAX,
        proptest::option::of(cid()),
        proptest::option::of(cid()),
        varint(),
        proptest::option::of(0..=MAX_PATH_ID),
    );
    (a, b).prop_map(|((odcid, idle, token, udp, data, streams), (ade, mad, dam, pa, acl, iscid, rscid, dg, mp))| {
        TransportParameters {
            original_destination_connection_id: odcid,
            max_idle_timeout: idle,
            stateless_reset_token: token,
            max_udp_payload_size: udp,
            initial_max_data: data[0],
            initial_max_stream_data_bidi_local: data[1],
            initial_max_stream_data_bidi_remote: data[2],
            initial_max_stream_data_uni: data[3],
            initial_max_streams_bidi: streams[0],
            initial_max_streams_uni: streams[1],
            ack_delay_exponent: ade,
            max_ack_delay: mad,
            disable_active_migration: dam,
            preferred_address: pa,
            active_connection_id_limit: acl,
            initial_source_connection_id: iscid,
            retry_source_connection_id: rscid,
            max_datagram_frame_size: dg,
            initial_max_path_id: mp,
            // Covered by their own round-trip tests (version_info.rs, below).
            version_information: None,
            grease_quic_bit: dam,
            single_packet_number_space: mp.is_some_and(|m| m % 2 == 1),
        }
    })
}

proptest! {
    #[test]
    fn round_trip(tp in params()) {
        let mut out = Vec::new();
        tp.encode(&mut out);
        prop_assert_eq!(&TransportParameters::decode(Side::Server, &out).unwrap(), &tp);
        let server_only = tp.original_destination_connection_id.is_some()
            || tp.stateless_reset_token.is_some()
            || tp.preferred_address.is_some()
            || tp.retry_source_connection_id.is_some();
        let from_client = TransportParameters::decode(Side::Client, &out);
        if server_only {
            prop_assert_eq!(from_client.unwrap_err().code, TPE);
        } else {
            prop_assert_eq!(from_client.unwrap(), tp.clone());
        }
        // Prefixes either decode (cut at a parameter boundary) or fail; never panic.
        for n in 0..out.len() {
            if let Err(e) = TransportParameters::decode(Side::Server, &out[..n]) {
                prop_assert_eq!(e.code, TPE);
            }
        }
    }

    #[test]
    fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128), client in any::<bool>()) {
        let side = if client { Side::Client } else { Side::Server };
        if let Err(e) = TransportParameters::decode(side, &bytes) {
            prop_assert_eq!(e.code, TPE);
        }
    }

    #[test]
    fn never_panics_on_known_ids(
        items in proptest::collection::vec((0u64..0x11, proptest::collection::vec(any::<u8>(), 0..30)), 0..6),
    ) {
        let mut bytes = Vec::new();
        for (pid, val) in &items {
            param(&mut bytes, *pid, val);
        }
        if let Ok(tp) = TransportParameters::decode(Side::Server, &bytes) {
            // Whatever decodes re-encodes to something that decodes to the same value.
            let mut out = Vec::new();
            tp.encode(&mut out);
            prop_assert_eq!(TransportParameters::decode(Side::Server, &out).unwrap(), tp);
        }
    }
}

/// max_datagram_frame_size (RFC 9221 §3): 0x20 with a varint value, omitted at 0 (the
/// default: DATAGRAM unsupported), allowed from either side, malformed values refused.
#[test]
fn max_datagram_frame_size_parameter() {
    let tp = TransportParameters { max_datagram_frame_size: 1200, ..Default::default() };
    let mut out = Vec::new();
    tp.encode(&mut out);
    assert_eq!(out, [0x20, 0x02, 0x44, 0xb0]);
    for side in [Side::Client, Side::Server] {
        assert_eq!(TransportParameters::decode(side, &out).unwrap().max_datagram_frame_size, 1200);
    }
    let mut out = Vec::new();
    TransportParameters { max_datagram_frame_size: 0, ..Default::default() }.encode(&mut out);
    assert!(out.is_empty());
    // Two varints, or none, as the value.
    let mut bad = Vec::new();
    param(&mut bad, id::MAX_DATAGRAM_FRAME_SIZE, &[0x01, 0x02]);
    assert_eq!(err(Side::Client, &bad), TPE);
    let mut bad = Vec::new();
    param(&mut bad, id::MAX_DATAGRAM_FRAME_SIZE, &[]);
    assert_eq!(err(Side::Server, &bad), TPE);
    // Twice.
    let mut twice = vparam(id::MAX_DATAGRAM_FRAME_SIZE, 5);
    twice.extend(vparam(id::MAX_DATAGRAM_FRAME_SIZE, 5));
    assert_eq!(err(Side::Client, &twice), TPE);
}
