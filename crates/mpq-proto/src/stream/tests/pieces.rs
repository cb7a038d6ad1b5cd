//! Stream data its path copied when it opened the packets (`Streams::on_stream_piece`):
//! checked frame by frame, stored once per run of consecutive pieces of one buffer.

use bytes::Bytes;

use super::*;

/// A buffer cut into consecutive pieces, as a path's arena hands them out for a run.
fn pieces(data: &[u8], cut: usize) -> Vec<BufferSlice> {
    let buf = Bytes::copy_from_slice(data);
    let backing = Backing { id: buf.as_ptr() as usize, len: buf.len() };
    let mut out = Vec::new();
    let mut at = 0;
    for c in data.chunks(cut) {
        out.push(BufferSlice { buf: buf.clone(), range: at..at + c.len(), backing });
        at += c.len();
    }
    out
}

fn read_all(s: &mut Streams, id: StreamId) -> Vec<u8> {
    let mut out = Vec::new();
    while let Ok((r, chunk)) = s.read_chunk(id, usize::MAX) {
        out.extend(chunk.iter().flat_map(|c| c.iter().copied()));
        if r.fin || r.len == 0 {
            break;
        }
    }
    out
}

#[test]
fn consecutive_pieces_are_stored_as_one_chunk() {
    let (_, mut s) = pair(&StreamsConfig::default());
    let id = cid(Dir::Uni, 0);
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
    let ps = pieces(&data, 1400);
    let mut at = 0u64;
    let n = ps.len();
    for (k, p) in ps.into_iter().enumerate() {
        let len = p.len() as u64;
        s.on_stream_piece(id, at, p, k + 1 == n).expect("in the window");
        at += len;
    }
    // Nothing is readable until the held-back data is stored.
    s.flush_pieces();
    let mut first = None;
    let (r, chunk) = s.read_chunk(id, usize::MAX).expect("readable");
    if let Some(c) = &chunk {
        first = Some(c.len());
    }
    assert_eq!(first, Some(data.len()), "one chunk for the whole run");
    assert!(r.fin);
    assert_eq!(chunk.expect("data")[..], data[..]);
}

#[test]
fn pieces_of_other_buffers_or_offsets_are_not_joined_but_all_arrive() {
    let (_, mut s) = pair(&StreamsConfig::default());
    let id = cid(Dir::Uni, 0);
    let data: Vec<u8> = (0..9000u32).map(|i| (i * 13) as u8).collect();
    let a = pieces(&data[..3000], 1000);
    let b = pieces(&data[3000..6000], 1000);
    let c = pieces(&data[6000..], 1000);
    // Out of order and from three buffers: c, then a, then b.
    for (k, p) in c.into_iter().enumerate() {
        s.on_stream_piece(id, 6000 + 1000 * k as u64, p, k == 2).expect("ok");
    }
    for (k, p) in a.into_iter().enumerate() {
        s.on_stream_piece(id, 1000 * k as u64, p, false).expect("ok");
    }
    for (k, p) in b.into_iter().enumerate() {
        s.on_stream_piece(id, 3000 + 1000 * k as u64, p, false).expect("ok");
    }
    s.flush_pieces();
    assert_eq!(read_all(&mut s, id), data);
}

#[test]
fn a_piece_beyond_the_window_fails_at_its_frame() {
    let cfg = StreamsConfig { stream_receive_window: 3000, ..StreamsConfig::default() };
    let (_, mut s) = pair(&cfg);
    let id = cid(Dir::Uni, 0);
    let data = vec![5u8; 4000];
    let ps = pieces(&data, 1000);
    let mut it = ps.into_iter();
    for k in 0..3u64 {
        s.on_stream_piece(id, 1000 * k, it.next().expect("piece"), false).expect("within the window");
    }
    // The fourth frame is the one beyond MAX_STREAM_DATA (RFC 9000 §4.1).
    let e = s.on_stream_piece(id, 3000, it.next().expect("piece"), false).expect_err("beyond");
    assert_eq!(e.code, Code::FLOW_CONTROL_ERROR);
    s.flush_pieces();
    assert_eq!(read_all(&mut s, id), vec![5u8; 3000], "the three accepted frames' data");
}

#[test]
fn a_reset_drops_data_held_back_before_it() {
    let (_, mut s) = pair(&StreamsConfig::default());
    let id = cid(Dir::Uni, 0);
    let ps = pieces(&[1u8; 2000], 1000);
    let mut at = 0;
    for p in ps {
        let len = p.len() as u64;
        s.on_stream_piece(id, at, p, false).expect("ok");
        at += len;
    }
    // As the receive batch does before any other frame.
    s.flush_pieces();
    s.on_reset_stream(id, 7, 2000).expect("reset");
    assert!(matches!(s.read_chunk(id, usize::MAX), Err(StreamError::Reset(7))));
}
