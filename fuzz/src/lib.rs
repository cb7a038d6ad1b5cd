//! Shared pieces of the state-machine fuzz targets: a heap-counting allocator (memory
//! invariants), structured frames built with `arbitrary` (so mutations stay meaningful), and
//! packet writers (Initial packets under the real Initial keys, 1-RTT packets under the null
//! cipher of a pair from `Pair::handshaken_null`).
#![allow(missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use arbitrary::Arbitrary;
use mpq_proto::coding::write_varint;
use mpq_proto::frame::frame_type as ft;
use mpq_proto::packet::header::{write_long_header, write_short_header, LongType};
use mpq_proto::packet::protect::seal_packet;
use mpq_proto::{ConnectionId, Side};

/// System allocator that counts live heap bytes, for memory-bound invariants.
pub struct CountingAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts sizes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            LIVE.fetch_add(l.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            LIVE.fetch_add(l.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            LIVE.fetch_sub(l.size(), Ordering::Relaxed);
            LIVE.fetch_add(new, Ordering::Relaxed);
        }
        q
    }
}

/// Live heap bytes (only meaningful in a binary that installs [`CountingAlloc`]).
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// A stream ID from its parts (RFC 9000 §2.1): small indexes, both initiators, both kinds.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct Sid {
    pub index: u8,
    pub uni: bool,
    pub server: bool,
}

impl Sid {
    pub fn id(self) -> u64 {
        u64::from(self.index) << 2 | u64::from(self.uni) << 1 | u64::from(self.server)
    }
}

/// One frame, with fields sized to hit interesting values often (small path IDs, sequence
/// numbers and packet numbers) and payloads given as length + fill byte so that a few input
/// bytes make a large frame. `Raw` and `Varints` reach everything else.
#[derive(Arbitrary, Debug, Clone)]
pub enum FuzzFrame {
    Padding(u8),
    Ping,
    Ack {
        path: Option<u8>,
        largest: u16,
        delay: u16,
        first: u8,
        ranges: Vec<(u8, u8)>,
        ecn: Option<(u16, u16, u16)>,
    },
    ResetStream {
        id: Sid,
        code: u16,
        final_size: u32,
    },
    StopSending {
        id: Sid,
        code: u16,
    },
    Crypto {
        offset: u32,
        len: u16,
        fill: u8,
    },
    NewToken {
        len: u8,
    },
    Stream {
        id: Sid,
        offset: u32,
        len: u16,
        fin: bool,
        fill: u8,
        explicit_len: bool,
    },
    MaxData(u32),
    MaxStreamData {
        id: Sid,
        max: u32,
    },
    MaxStreams {
        uni: bool,
        count: u16,
    },
    DataBlocked(u32),
    StreamDataBlocked {
        id: Sid,
        limit: u32,
    },
    StreamsBlocked {
        uni: bool,
        limit: u16,
    },
    NewConnectionId {
        path: Option<u8>,
        seq: u8,
        retire_prior_to: u8,
        cid_len: u8,
        cid_seed: u8,
        token_seed: u8,
    },
    RetireConnectionId {
        path: Option<u8>,
        seq: u8,
    },
    PathChallenge([u8; 8]),
    PathResponse([u8; 8]),
    ConnectionClose {
        app: bool,
        code: u16,
        frame_type: u8,
        reason_len: u8,
    },
    HandshakeDone,
    Datagram {
        len: u16,
        explicit_len: bool,
    },
    PathAbandon {
        path: u8,
        code: u16,
    },
    PathStatus {
        path: u8,
        seq: u16,
        backup: bool,
    },
    MaxPathId(u8),
    PathsBlocked(u8),
    PathCidsBlocked {
        path: u8,
        next_seq: u8,
    },
    /// A frame type followed by arbitrary varints (huge values, wrong field counts).
    Varints {
        ty: u16,
        vals: Vec<u64>,
    },
    Raw(Vec<u8>),
    /// `count` copies of a frame, the n-th with its offset / sequence number / path ID
    /// moved by n * `stride`: floods of fragments, CIDs, path IDs from a few input bytes.
    Repeat {
        count: u16,
        stride: u16,
        frame: Box<FuzzFrame>,
    },
}

fn fill(out: &mut Vec<u8>, len: usize, b: u8) {
    out.resize(out.len() + len, b);
}

/// Most copies one `Repeat` makes.
const MAX_REPEAT: u64 = 8192;

impl FuzzFrame {
    /// The frame a `Repeat` copies: a nested `Repeat` counts as one copy of its frame, so that
    /// the expansion stays linear in the input.
    fn inner(&self) -> &FuzzFrame {
        match self {
            FuzzFrame::Repeat { frame, .. } => frame.inner(),
            f => f,
        }
    }

    /// Appends the encoding; `Repeat` expands to at most `budget` more bytes.
    pub fn encode(&self, out: &mut Vec<u8>, budget: usize) {
        self.encode_shifted(out, 0, budget);
    }

    fn encode_shifted(&self, out: &mut Vec<u8>, shift: u64, budget: usize) {
        let v = |out: &mut Vec<u8>, x: u64| write_varint(out, x.min((1 << 62) - 1));
        match self {
            FuzzFrame::Padding(n) => fill(out, usize::from(*n) + 1, 0),
            FuzzFrame::Ping => v(out, ft::PING),
            FuzzFrame::Ack { path, largest, delay, first, ranges, ecn } => {
                let ty = match (path, ecn) {
                    (None, None) => ft::ACK,
                    (None, Some(_)) => ft::ACK_ECN,
                    (Some(_), None) => ft::PATH_ACK,
                    (Some(_), Some(_)) => ft::PATH_ACK_ECN,
                };
                v(out, ty);
                if let Some(p) = path {
                    v(out, u64::from(*p) + shift);
                }
                v(out, u64::from(*largest) + shift);
                v(out, u64::from(*delay));
                v(out, ranges.len() as u64);
                v(out, u64::from(*first));
                for (gap, len) in ranges {
                    v(out, u64::from(*gap));
                    v(out, u64::from(*len));
                }
                if let Some((a, b, c)) = ecn {
                    v(out, u64::from(*a));
                    v(out, u64::from(*b));
                    v(out, u64::from(*c));
                }
            }
            FuzzFrame::ResetStream { id, code, final_size } => {
                v(out, ft::RESET_STREAM);
                v(out, id.id() + 4 * shift);
                v(out, u64::from(*code));
                v(out, u64::from(*final_size));
            }
            FuzzFrame::StopSending { id, code } => {
                v(out, ft::STOP_SENDING);
                v(out, id.id() + 4 * shift);
                v(out, u64::from(*code));
            }
            FuzzFrame::Crypto { offset, len, fill: b } => {
                v(out, ft::CRYPTO);
                v(out, u64::from(*offset) + shift);
                v(out, u64::from(*len));
                fill(out, usize::from(*len), *b);
            }
            FuzzFrame::NewToken { len } => {
                v(out, ft::NEW_TOKEN);
                v(out, u64::from(*len));
                fill(out, usize::from(*len), 0x7e);
            }
            FuzzFrame::Stream { id, offset, len, fin, fill: b, explicit_len } => {
                let off = u64::from(*offset) + shift;
                let ty = ft::STREAM | u64::from(off != 0) << 2 | u64::from(*explicit_len) << 1 | u64::from(*fin);
                v(out, ty);
                v(out, id.id());
                if off != 0 {
                    v(out, off);
                }
                if *explicit_len {
                    v(out, u64::from(*len));
                }
                fill(out, usize::from(*len), *b);
            }
            FuzzFrame::MaxData(x) => {
                v(out, ft::MAX_DATA);
                v(out, u64::from(*x) + shift);
            }
            FuzzFrame::MaxStreamData { id, max } => {
                v(out, ft::MAX_STREAM_DATA);
                v(out, id.id());
                v(out, u64::from(*max) + shift);
            }
            FuzzFrame::MaxStreams { uni, count } => {
                v(out, if *uni { ft::MAX_STREAMS_UNI } else { ft::MAX_STREAMS_BIDI });
                v(out, u64::from(*count) + shift);
            }
            FuzzFrame::DataBlocked(x) => {
                v(out, ft::DATA_BLOCKED);
                v(out, u64::from(*x));
            }
            FuzzFrame::StreamDataBlocked { id, limit } => {
                v(out, ft::STREAM_DATA_BLOCKED);
                v(out, id.id());
                v(out, u64::from(*limit));
            }
            FuzzFrame::StreamsBlocked { uni, limit } => {
                v(out, if *uni { ft::STREAMS_BLOCKED_UNI } else { ft::STREAMS_BLOCKED_BIDI });
                v(out, u64::from(*limit));
            }
            FuzzFrame::NewConnectionId { path, seq, retire_prior_to, cid_len, cid_seed, token_seed } => {
                v(out, if path.is_some() { ft::PATH_NEW_CONNECTION_ID } else { ft::NEW_CONNECTION_ID });
                if let Some(p) = path {
                    v(out, u64::from(*p));
                }
                v(out, u64::from(*seq) + shift);
                v(out, u64::from(*retire_prior_to));
                let len = *cid_len % 22;
                out.push(len);
                // Distinct CIDs per copy of a Repeat, so that they are not duplicates.
                let s = shift.to_le_bytes();
                for i in 0..usize::from(len) {
                    out.push(cid_seed.wrapping_add(i as u8) ^ s[i % 8]);
                }
                for i in 0..16u8 {
                    out.push(token_seed.wrapping_mul(31).wrapping_add(i) ^ s[usize::from(i) % 8]);
                }
            }
            FuzzFrame::RetireConnectionId { path, seq } => {
                v(out, if path.is_some() { ft::PATH_RETIRE_CONNECTION_ID } else { ft::RETIRE_CONNECTION_ID });
                if let Some(p) = path {
                    v(out, u64::from(*p));
                }
                v(out, u64::from(*seq) + shift);
            }
            FuzzFrame::PathChallenge(d) => {
                v(out, ft::PATH_CHALLENGE);
                out.extend_from_slice(d);
            }
            FuzzFrame::PathResponse(d) => {
                v(out, ft::PATH_RESPONSE);
                out.extend_from_slice(d);
            }
            FuzzFrame::ConnectionClose { app, code, frame_type, reason_len } => {
                v(out, if *app { ft::APPLICATION_CLOSE } else { ft::CONNECTION_CLOSE });
                v(out, u64::from(*code));
                if !*app {
                    v(out, u64::from(*frame_type));
                }
                v(out, u64::from(*reason_len));
                fill(out, usize::from(*reason_len), b'x');
            }
            FuzzFrame::HandshakeDone => v(out, ft::HANDSHAKE_DONE),
            FuzzFrame::Datagram { len, explicit_len } => {
                v(out, if *explicit_len { ft::DATAGRAM_LEN } else { ft::DATAGRAM });
                if *explicit_len {
                    v(out, u64::from(*len));
                }
                fill(out, usize::from(*len), 0xd);
            }
            FuzzFrame::PathAbandon { path, code } => {
                v(out, ft::PATH_ABANDON);
                v(out, u64::from(*path) + shift);
                v(out, u64::from(*code));
            }
            FuzzFrame::PathStatus { path, seq, backup } => {
                v(out, if *backup { ft::PATH_STATUS_BACKUP } else { ft::PATH_STATUS_AVAILABLE });
                v(out, u64::from(*path) + shift);
                v(out, u64::from(*seq) + shift);
            }
            FuzzFrame::MaxPathId(p) => {
                v(out, ft::MAX_PATH_ID);
                v(out, u64::from(*p) + shift);
            }
            FuzzFrame::PathsBlocked(p) => {
                v(out, ft::PATHS_BLOCKED);
                v(out, u64::from(*p));
            }
            FuzzFrame::PathCidsBlocked { path, next_seq } => {
                v(out, ft::PATH_CIDS_BLOCKED);
                v(out, u64::from(*path) + shift);
                v(out, u64::from(*next_seq));
            }
            FuzzFrame::Varints { ty, vals } => {
                v(out, u64::from(*ty));
                for x in vals {
                    v(out, *x);
                }
            }
            FuzzFrame::Raw(b) => out.extend_from_slice(b),
            FuzzFrame::Repeat { count, stride, frame } => {
                let start = out.len();
                for i in 0..u64::from(*count).min(MAX_REPEAT) {
                    let before = out.len();
                    if before - start > budget {
                        break;
                    }
                    frame.inner().encode_shifted(out, shift + i * u64::from(*stride), budget);
                    if out.len() == before {
                        break; // nothing to repeat
                    }
                }
            }
        }
    }
}

/// Encodes frames and cuts them into packet payloads of at most `max` bytes at frame
/// boundaries (a larger single frame gets a payload of its own); `budget` caps the total.
pub fn packetize(frames: &[FuzzFrame], max: usize, budget: usize) -> Vec<Vec<u8>> {
    fn add(one: &[u8], cur: &mut Vec<u8>, out: &mut Vec<Vec<u8>>, max: usize) {
        if !cur.is_empty() && cur.len() + one.len() > max {
            out.push(std::mem::take(cur));
        }
        cur.extend_from_slice(one);
    }
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut total = 0usize;
    let mut one = Vec::new();
    for f in frames {
        if total > budget {
            break;
        }
        if let FuzzFrame::Repeat { count, stride, frame } = f {
            // A Repeat is spread over packets copy by copy.
            for i in 0..u64::from(*count).min(MAX_REPEAT) {
                if total > budget {
                    break;
                }
                one.clear();
                frame.inner().encode_shifted(&mut one, i * u64::from(*stride), budget - total);
                if one.is_empty() {
                    break;
                }
                total += one.len();
                add(&one, &mut cur, &mut out, max);
            }
        } else {
            one.clear();
            f.encode(&mut one, budget - total);
            total += one.len();
            add(&one, &mut cur, &mut out, max);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A 1-RTT packet under the null cipher: short header with a 4-byte packet number.
pub fn null_one_rtt_packet(
    dcid: &ConnectionId,
    key_phase: bool,
    spin: bool,
    pn: u64,
    path_id: u64,
    payload: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 64);
    let pn_offset = write_short_header(&mut out, dcid, key_phase, spin, pn, 4);
    out.extend_from_slice(payload);
    let key = mpq_proto::crypto::null_packet_key();
    let hp = mpq_proto::crypto::null_header_key();
    let path = u32::try_from(path_id).ok();
    if seal_packet(&mut out, 0, None, pn_offset, 4, pn, &*key, &*hp, path).is_err() {
        out.clear();
    }
    out
}

/// A client Initial packet protected with the Initial keys of `dcid` (RFC 9001 §5.2),
/// payload padded with PADDING frames to `pad_to` bytes of datagram.
pub fn client_initial(
    version: u32,
    dcid: &ConnectionId,
    scid: &ConnectionId,
    token: &[u8],
    pn: u64,
    payload: &[u8],
    pad_to: usize,
) -> Vec<u8> {
    let keys = mpq_proto::crypto::initial::initial_keys(dcid, Side::Client, version);
    let mut out = Vec::with_capacity(pad_to.max(payload.len() + 100));
    let h = write_long_header(&mut out, LongType::Initial, version, dcid, scid, token, pn, 4);
    out.extend_from_slice(payload);
    let tag = keys.local.packet.tag_len();
    while out.len() + tag < pad_to || out.len() < h.pn_offset + 8 {
        out.push(0);
    }
    if seal_packet(
        &mut out,
        h.header_start,
        Some(h.len_offset),
        h.pn_offset,
        4,
        pn,
        &*keys.local.packet,
        &*keys.local.header,
        None,
    )
    .is_err()
    {
        out.clear();
    }
    out
}

/// The plaintext CRYPTO data (offset 0 onwards, contiguous) of the client Initial packets in
/// `datagram`, decrypted with the Initial keys: a real ClientHello to put in forged Initials.
pub fn initial_crypto_data(datagram: &[u8]) -> Vec<u8> {
    use mpq_proto::frame::{iter_frames, Frame};
    use mpq_proto::packet::header::{parse_packet, PacketKind};
    use mpq_proto::packet::number::decode_pn;
    use mpq_proto::packet::protect::{open_payload, remove_header_protection};
    let mut buf = datagram.to_vec();
    let mut chunks: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut off = 0;
    while off < buf.len() {
        let Ok(p) = parse_packet(&buf[off..], 8) else { break };
        let len = p.packet_len.min(buf.len() - off);
        if p.kind == PacketKind::Initial {
            let keys = mpq_proto::crypto::initial::initial_keys(&p.dcid, Side::Server, p.version);
            let pkt = &mut buf[off..off + len];
            if let Ok(h) = remove_header_protection(pkt, p.pn_offset, &*keys.remote.header) {
                let pn = decode_pn(None, h.truncated_pn, h.pn_len);
                if let Ok(plain) = open_payload(pkt, p.pn_offset, h.pn_len, pn, &*keys.remote.packet, None) {
                    for f in iter_frames(plain) {
                        let Ok(f) = f else { break };
                        if let Frame::Crypto { offset, data } = f {
                            chunks.push((offset, data.to_vec()));
                        }
                    }
                }
            }
        }
        off += len.max(1);
    }
    chunks.sort_by_key(|c| c.0);
    let mut out = Vec::new();
    for (o, d) in chunks {
        if o == out.len() as u64 {
            out.extend_from_slice(&d);
        }
    }
    out
}
