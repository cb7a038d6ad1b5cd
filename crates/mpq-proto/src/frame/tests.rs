//! Cross-family tests: round trips, robustness on arbitrary input, truncation and the
//! permission table.

use proptest::prelude::*;

use super::*;
use crate::cid::ConnectionId;
use crate::coding::VARINT_MAX;
use crate::error::TransportErrorCode;
use crate::range_set::RangeSet;
use crate::types::{Dir, Level, StreamId};

/// Owned material a frame can borrow from.
#[derive(Debug, Clone)]
struct Spec {
    kind: u8,
    v: [u64; 3],
    flag: bool,
    data: Vec<u8>,
    cid: Vec<u8>,
    token: [u8; 16],
}

const KINDS: u8 = 26;

fn varint() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..64, 0u64..16384, 0u64..(1 << 30), 0..=VARINT_MAX]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        0..KINDS,
        [varint(), varint(), varint()],
        any::<bool>(),
        proptest::collection::vec(any::<u8>(), 0..40),
        proptest::collection::vec(any::<u8>(), 1..=20),
        any::<[u8; 16]>(),
    )
        .prop_map(|(kind, v, flag, data, cid, token)| Spec { kind, v, flag, data, cid, token })
}

fn dir(flag: bool) -> Dir {
    if flag {
        Dir::Uni
    } else {
        Dir::Bi
    }
}

fn path(flag: bool, p: u64) -> Option<u64> {
    flag.then_some(p)
}

/// Builds a valid frame of every non-ACK kind from a spec.
fn build(s: &Spec) -> Frame<'_> {
    let [a, b, c] = s.v;
    let data = &s.data[..];
    match s.kind {
        0 => Frame::Padding { len: data.len() + 1 },
        1 => Frame::Ping,
        2 => Frame::ResetStream { id: StreamId(a), error_code: b, final_size: c },
        3 => Frame::StopSending { id: StreamId(a), error_code: b },
        4 => Frame::Crypto { offset: b.min(VARINT_MAX - data.len() as u64), data },
        5 => Frame::NewToken { token: if data.is_empty() { &s.token } else { data } },
        6 => Frame::Stream { id: StreamId(a), offset: b.min(VARINT_MAX - data.len() as u64), fin: s.flag, data },
        7 => Frame::MaxData(a),
        8 => Frame::MaxStreamData { id: StreamId(a), max: b },
        9 => Frame::MaxStreams { dir: dir(s.flag), count: a % (MAX_STREAM_COUNT + 1) },
        10 => Frame::DataBlocked(a),
        11 => Frame::StreamDataBlocked { id: StreamId(a), limit: b },
        12 => Frame::StreamsBlocked { dir: dir(s.flag), limit: a % (MAX_STREAM_COUNT + 1) },
        13 => Frame::NewConnectionId(NewConnectionId {
            path_id: path(s.flag, c),
            seq: a.max(b),
            retire_prior_to: a.min(b),
            cid: ConnectionId::new(&s.cid),
            reset_token: s.token,
        }),
        14 => Frame::RetireConnectionId { path_id: path(s.flag, b), seq: a },
        15 => Frame::PathChallenge(s.token[..8].try_into().unwrap()),
        16 => Frame::PathResponse(s.token[8..].try_into().unwrap()),
        17 => Frame::ConnectionClose(ConnectionClose { error_code: a, frame_type: path(s.flag, b), reason: data }),
        18 => Frame::HandshakeDone,
        19 => Frame::Datagram { data },
        20 => Frame::PathAbandon { path_id: a, error_code: b },
        21 => Frame::PathStatus { path_id: a, seq: b, backup: s.flag },
        22 => Frame::MaxPathId(a),
        23 => Frame::PathsBlocked(a),
        24 => Frame::PathCidsBlocked { path_id: a, next_seq: b },
        _ => Frame::NewConnectionId(NewConnectionId {
            path_id: None,
            seq: a,
            retire_prior_to: 0,
            cid: ConnectionId::new(&s.cid),
            reset_token: s.token,
        }),
    }
}

fn range_set() -> impl Strategy<Value = RangeSet> {
    (prop_oneof![Just(0u64), 0..VARINT_MAX / 2], proptest::collection::vec((0u64..300, 0u64..300), 1..40)).prop_map(
        |(base, v)| {
            let mut s = RangeSet::new();
            for (start, len) in v {
                s.insert(base + start..base + start + len + 1);
            }
            s
        },
    )
}

fn encode(f: &Frame<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    f.encode(&mut out);
    out
}

/// Every strict prefix of `bytes` (an encoding of a non-PADDING frame) fails to decode.
fn assert_prefixes_fail(bytes: &[u8]) -> Result<(), TestCaseError> {
    for n in 0..bytes.len() {
        let res = Frame::decode(&mut Reader::new(&bytes[..n]));
        prop_assert!(res.is_err(), "prefix {} of {:?} decoded: {:?}", n, bytes, res);
        prop_assert_eq!(res.unwrap_err().code, TransportErrorCode::FRAME_ENCODING_ERROR);
    }
    Ok(())
}

proptest! {
    #[test]
    fn frame_round_trip(s in spec()) {
        let f = build(&s);
        let bytes = encode(&f);
        prop_assert_eq!(bytes.len(), f.encoded_len());
        let mut r = Reader::new(&bytes);
        let g = Frame::decode(&mut r).unwrap();
        prop_assert!(r.is_empty());
        prop_assert_eq!(&g, &f);
        prop_assert_eq!(g.ty(), f.ty());
        // The type written first is the one ty() reports.
        prop_assert_eq!(Reader::new(&bytes).varint().unwrap(), f.ty());
        if !matches!(f, Frame::Padding { .. }) {
            assert_prefixes_fail(&bytes)?;
        }
        // Followed by another frame, the frame still decodes exactly.
        let mut two = bytes.clone();
        Frame::Ping.encode(&mut two);
        let frames: Vec<_> = iter_frames(&two).collect::<Result<_, _>>().unwrap();
        if matches!(f, Frame::Padding { .. }) {
            prop_assert_eq!(frames.len(), 2);
        } else {
            prop_assert_eq!(frames, vec![f, Frame::Ping]);
        }
    }

    #[test]
    fn ack_round_trip(
        set in range_set(),
        path_id in proptest::option::of(varint()),
        delay in varint(),
        ecn in proptest::option::of((varint(), varint(), varint())),
        max_ranges in 1usize..50,
        max_bytes in 0usize..200,
    ) {
        let ecn = ecn.map(|(ect0, ect1, ce)| EcnCounts { ect0, ect1, ce });
        let mut out = Vec::new();
        let n = encode_ack(&mut out, path_id, &set, delay, ecn.as_ref(), max_ranges);
        prop_assert_eq!(n, out.len());
        prop_assert_eq!(n, ack_encoded_len(path_id, &set, delay, ecn.as_ref(), max_ranges));
        let f = Frame::decode(&mut Reader::new(&out)).unwrap();
        prop_assert_eq!(f.encoded_len(), out.len());
        prop_assert_eq!(encode(&f), out.clone());
        prop_assert!(f.ty() == out[0] as u64);
        let Frame::Ack(a) = &f else { panic!("not an ACK") };
        prop_assert_eq!((a.path_id, a.delay, a.ecn), (path_id, delay, ecn));
        let got: Vec<_> = a.iter().collect();
        let want: Vec<_> = set.iter().rev().take(max_ranges).collect();
        prop_assert_eq!(a.iter().len(), got.len());
        prop_assert_eq!(a.range_count() as usize, got.len());
        prop_assert_eq!(got, want);
        assert_prefixes_fail(&out)?;

        let mut out = vec![0xee];
        let ok = encode_ack_bounded(&mut out, path_id, &set, delay, ecn.as_ref(), max_bytes, usize::MAX).is_some();
        prop_assert!(out.len() - 1 <= max_bytes);
        if ok {
            let Frame::Ack(a) = Frame::decode(&mut Reader::new(&out[1..])).unwrap() else { panic!() };
            let got: Vec<_> = a.iter().collect();
            let want: Vec<_> = set.iter().rev().take(got.len()).collect();
            prop_assert_eq!(&got, &want);
            // Maximal: one more range would not have fit.
            if got.len() < set.len() {
                let more = ack_encoded_len(path_id, &set, delay, ecn.as_ref(), got.len() + 1);
                prop_assert!(more > max_bytes);
            }
        } else {
            prop_assert_eq!(out.len(), 1);
            prop_assert!(ack_encoded_len(path_id, &set, delay, ecn.as_ref(), 1) > max_bytes);
        }
    }

    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        check_arbitrary(&bytes)?;
    }

    #[test]
    fn decode_never_panics_on_plausible_frames(
        ty in prop_oneof![0u64..0x20, 0x30u64..0x32, 0x3eu64..0x40, 0x3e75u64..0x3e7d],
        body in proptest::collection::vec(prop_oneof![Just(0u8), Just(1), any::<u8>()], 0..48),
    ) {
        let mut bytes = Vec::new();
        crate::coding::write_varint(&mut bytes, ty);
        bytes.extend_from_slice(&body);
        check_arbitrary(&bytes)?;
    }
}

/// Decodes arbitrary input; every frame that decodes re-encodes to something decoding to
/// the same frame, with a consistent `encoded_len`.
fn check_arbitrary(bytes: &[u8]) -> Result<(), TestCaseError> {
    let mut errors = 0;
    for res in iter_frames(bytes) {
        match res {
            Ok(f) => {
                let enc = encode(&f);
                prop_assert_eq!(enc.len(), f.encoded_len());
                let g = Frame::decode(&mut Reader::new(&enc)).unwrap();
                prop_assert_eq!(g, f.clone());
                let _ = (f.is_ack_eliciting(), f.is_probing(), f.allowed_in(Level::Initial), f.to_string());
                if let Frame::Ack(a) = &f {
                    let v: Vec<_> = a.iter().collect();
                    prop_assert_eq!(v.len() as u64, a.range_count());
                    for w in v.windows(2) {
                        prop_assert!(w[1].end < w[0].start);
                    }
                }
            }
            Err(_) => errors += 1,
        }
    }
    prop_assert!(errors <= 1);
    Ok(())
}

#[test]
fn iter_stops_after_first_error() {
    let bytes = [0x01, 0x21, 0x01, 0x01];
    let v: Vec<_> = iter_frames(&bytes).collect();
    assert_eq!(v.len(), 2);
    assert_eq!(v[0], Ok(Frame::Ping));
    assert!(v[1].is_err());
    assert_eq!(iter_frames(&[]).count(), 0);
}

#[test]
fn every_kind_is_covered() {
    let mut seen = std::collections::BTreeSet::new();
    for kind in 0..KINDS {
        for flag in [false, true] {
            let s = Spec { kind, v: [1, 2, 3], flag, data: vec![1], cid: vec![1], token: [0; 16] };
            seen.insert(build(&s).ty());
        }
    }
    // Every type except ACK/PATH_ACK (covered by ack_round_trip), in its explicit-length form;
    // STREAM with a non-zero offset only here (0x0e, 0x0f).
    let want: std::collections::BTreeSet<u64> = [0x00, 0x01, 0x04, 0x05, 0x06, 0x07, 0x0e, 0x0f]
        .into_iter()
        .chain(0x10..=0x1e)
        .chain([0x31])
        .chain(0x3e75..=0x3e7c)
        .collect();
    assert_eq!(seen, want);
}

fn sample(ty: u64) -> Frame<'static> {
    let mut out = Vec::new();
    crate::coding::write_varint(&mut out, ty);
    out.extend_from_slice(&[0; 30]);
    // Fix up the fields zero is not valid for: NEW_TOKEN and CID lengths.
    match ty {
        ft::NEW_TOKEN => out[1] = 1,
        ft::NEW_CONNECTION_ID => out[3] = 4,
        ft::PATH_NEW_CONNECTION_ID => out[5] = 4,
        _ => {}
    }
    Frame::decode(&mut Reader::new(out.leak())).unwrap()
}

#[test]
fn permission_table() {
    use Level::*;
    // (type, Initial, 0-RTT, Handshake, 1-RTT) per RFC 9000 Table 3 + §17.2.3, RFC 9221,
    // and RFC 10069 §4 (1-RTT only).
    let table: &[(u64, [bool; 4])] = &[
        (ft::PADDING, [true, true, true, true]),
        (ft::PING, [true, true, true, true]),
        (ft::ACK, [true, false, true, true]),
        (ft::ACK_ECN, [true, false, true, true]),
        (ft::RESET_STREAM, [false, true, false, true]),
        (ft::STOP_SENDING, [false, true, false, true]),
        (ft::CRYPTO, [true, false, true, true]),
        (ft::NEW_TOKEN, [false, false, false, true]),
        (0x08, [false, true, false, true]),
        (0x0f, [false, true, false, true]),
        (ft::MAX_DATA, [false, true, false, true]),
        (ft::MAX_STREAM_DATA, [false, true, false, true]),
        (ft::MAX_STREAMS_BIDI, [false, true, false, true]),
        (ft::MAX_STREAMS_UNI, [false, true, false, true]),
        (ft::DATA_BLOCKED, [false, true, false, true]),
        (ft::STREAM_DATA_BLOCKED, [false, true, false, true]),
        (ft::STREAMS_BLOCKED_BIDI, [false, true, false, true]),
        (ft::STREAMS_BLOCKED_UNI, [false, true, false, true]),
        (ft::NEW_CONNECTION_ID, [false, true, false, true]),
        (ft::RETIRE_CONNECTION_ID, [false, false, false, true]),
        (ft::PATH_CHALLENGE, [false, true, false, true]),
        (ft::PATH_RESPONSE, [false, false, false, true]),
        (ft::CONNECTION_CLOSE, [true, true, true, true]),
        (ft::APPLICATION_CLOSE, [false, true, false, true]),
        (ft::HANDSHAKE_DONE, [false, false, false, true]),
        (ft::DATAGRAM, [false, true, false, true]),
        (ft::DATAGRAM_LEN, [false, true, false, true]),
        (ft::PATH_ACK, [false, false, false, true]),
        (ft::PATH_ACK_ECN, [false, false, false, true]),
        (ft::PATH_ABANDON, [false, false, false, true]),
        (ft::PATH_STATUS_BACKUP, [false, false, false, true]),
        (ft::PATH_STATUS_AVAILABLE, [false, false, false, true]),
        (ft::PATH_NEW_CONNECTION_ID, [false, false, false, true]),
        (ft::PATH_RETIRE_CONNECTION_ID, [false, false, false, true]),
        (ft::MAX_PATH_ID, [false, false, false, true]),
        (ft::PATHS_BLOCKED, [false, false, false, true]),
        (ft::PATH_CIDS_BLOCKED, [false, false, false, true]),
    ];
    for &(ty, allowed) in table {
        let f = sample(ty);
        for (level, ok) in [Initial, ZeroRtt, Handshake, OneRtt].into_iter().zip(allowed) {
            assert_eq!(f.allowed_in(level), ok, "type 0x{ty:x} in {level:?}");
        }
    }
}

#[test]
fn classification() {
    let non_eliciting = [ft::PADDING, ft::ACK, ft::ACK_ECN, ft::PATH_ACK, ft::PATH_ACK_ECN, ft::CONNECTION_CLOSE];
    let probing = [ft::PADDING, ft::PATH_CHALLENGE, ft::PATH_RESPONSE, ft::NEW_CONNECTION_ID];
    for ty in (0..=0x1e).chain([0x30, 0x31, 0x3e, 0x3f]).chain(0x3e75..=0x3e7c) {
        let f = sample(ty);
        let eliciting = !non_eliciting.contains(&ty) && ty != ft::APPLICATION_CLOSE;
        assert_eq!(f.is_ack_eliciting(), eliciting, "0x{ty:x}");
        let probe = probing.contains(&ty) || ty == ft::PATH_NEW_CONNECTION_ID;
        assert_eq!(f.is_probing(), probe, "0x{ty:x}");
    }
}

proptest! {
    /// DATAGRAM (RFC 9221 §4) in both forms: 0x31 round-trips whatever follows it; 0x30
    /// takes the rest of the packet (a frame after it is payload); every truncation of the
    /// length form is a FRAME_ENCODING_ERROR naming 0x31; a length beyond the packet too.
    #[test]
    fn datagram_frames_in_both_forms(
        data in proptest::collection::vec(any::<u8>(), 0..1500),
        extra in proptest::collection::vec(any::<u8>(), 1..8),
    ) {
        let f = Frame::Datagram { data: &data };
        let mut bytes = encode(&f);
        prop_assert_eq!(bytes.len(), f.encoded_len());
        prop_assert_eq!(bytes[0], 0x31);
        let mut r = Reader::new(&bytes);
        prop_assert_eq!(Frame::decode(&mut r).unwrap(), f.clone());
        prop_assert!(r.is_empty());
        assert_prefixes_fail(&bytes)?;
        for n in 1..bytes.len() {
            let e = Frame::decode(&mut Reader::new(&bytes[..n])).unwrap_err();
            prop_assert_eq!(e.frame_type, Some(0x31));
        }
        // Followed by PING: two frames.
        bytes.push(0x01);
        let frames: Vec<_> = iter_frames(&bytes).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(frames, vec![f, Frame::Ping]);

        // The form without a length runs to the end of the payload.
        let mut open = Vec::new();
        encode_datagram_header(&mut open, None);
        open.extend_from_slice(&data);
        open.extend_from_slice(&extra);
        let mut all = data.clone();
        all.extend_from_slice(&extra);
        let frames: Vec<_> = iter_frames(&open).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(frames, vec![Frame::Datagram { data: &all }]);
        prop_assert_eq!(datagram_header_len(None) + all.len(), open.len());

        // A length one beyond what is there.
        let mut long = Vec::new();
        encode_datagram_header(&mut long, Some(data.len() + 1));
        long.extend_from_slice(&data);
        let e = Frame::decode(&mut Reader::new(&long)).unwrap_err();
        prop_assert_eq!((e.code, e.frame_type), (TransportErrorCode::FRAME_ENCODING_ERROR, Some(0x31)));
    }
}
