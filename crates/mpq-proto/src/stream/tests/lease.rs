//! Send batches' data leases (`stream/lease.rs`): leasing, cutting chunks from the lease and
//! returning the rest must be indistinguishable from taking the same chunks one by one.

use proptest::prelude::*;

use super::*;

/// A client stream table with one uni stream holding `writes` (copied or zero-copy) and
/// the FIN if `fin`.
fn table(writes: &[(usize, bool)], fin: bool) -> (Streams, StreamId) {
    let (mut c, _) = pair(&StreamsConfig::default());
    let id = c.open(Dir::Uni).expect("stream");
    let mut n = 0u8;
    for &(len, zero_copy) in writes {
        let data: Vec<u8> = (0..len)
            .map(|_| {
                n = n.wrapping_add(1);
                n
            })
            .collect();
        if zero_copy {
            c.write_bytes(id, &bytes::Bytes::from(data)).expect("write");
        } else {
            c.write(id, &data).expect("write");
        }
    }
    if fin {
        c.finish(id).expect("finish");
    }
    (c, id)
}

/// Drains every chunk one by one with `max` room, with its bytes.
fn drain(s: &mut Streams, max: usize) -> Vec<(StreamChunk, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(c) = s.next_stream_chunk(max) {
        let mut b = Vec::new();
        s.copy_stream_data(c.id, c.offset, c.len, &mut b);
        out.push((c, b));
    }
    out
}

proptest! {
    /// Chunks cut from a lease equal the chunks the table hands out one by one for the same
    /// rooms, bytes included; after the rest is returned, the table goes on exactly as if
    /// the lease never happened (same chunks, FIN, pending state, queued bytes).
    #[test]
    fn a_lease_cuts_what_the_table_would_and_returns_the_rest(
        writes in proptest::collection::vec((1usize..3000, any::<bool>()), 0..6),
        fin in any::<bool>(),
        cap in 0u64..9000,
        rooms in proptest::collection::vec(1usize..1600, 0..12),
        after in 1usize..1500,
    ) {
        let (mut plain, _) = table(&writes, fin);
        let (mut leased, _) = table(&writes, fin);
        // As a send batch does: chunks from the lease; a lease that cannot give one is
        // returned and a new one taken; failing that, one by one from the table.
        let mut lease = leased.lease_stream_data(cap, &|_| true);
        for &room in &rooms {
            let mut c = lease.as_mut().and_then(|l| l.take(room)).map(|c| (c, true));
            if c.is_none() {
                if let Some(l) = lease.take() {
                    leased.return_stream_data(l);
                }
                lease = leased.lease_stream_data(cap, &|_| true);
                c = lease.as_mut().and_then(|l| l.take(room)).map(|c| (c, true));
                if c.is_none() {
                    // The new lease cannot serve this room either: give it back.
                    if let Some(l) = lease.take() {
                        leased.return_stream_data(l);
                    }
                }
            }
            let c = c.or_else(|| leased.next_stream_chunk(room).map(|c| (c, false)));
            let p = plain.next_stream_chunk(room);
            prop_assert_eq!(c.map(|(c, _)| c), p);
            let Some((c, from_lease)) = c else { continue };
            let (mut a, mut b) = (Vec::new(), Vec::new());
            match (from_lease, lease.as_ref()) {
                (true, Some(l)) => l.copy(c.offset, c.len, &mut a),
                _ => leased.copy_stream_data(c.id, c.offset, c.len, &mut a),
            }
            plain.copy_stream_data(c.id, c.offset, c.len, &mut b);
            prop_assert_eq!(a, b);
        }
        if let Some(lease) = lease {
            leased.return_stream_data(lease);
        }
        prop_assert_eq!(leased.has_pending_data(), plain.has_pending_data());
        prop_assert_eq!(leased.queued_bytes(), plain.queued_bytes());
        prop_assert_eq!(drain(&mut leased, after), drain(&mut plain, after));
    }
}

/// No lease when the one-stream fast path does not apply: two streams waiting (their
/// round-robin is per chunk), or lost data to resend first.
#[test]
fn no_lease_with_two_streams_or_data_to_resend() {
    let (mut c, a) = table(&[(1000, false)], false);
    let b = c.open(Dir::Uni).expect("stream");
    c.write(b, &[1; 100]).expect("write");
    assert!(c.lease_stream_data(5000, &|_| true).is_none(), "two streams");
    let (mut c, a2) = table(&[(3000, false)], false);
    let first = c.next_stream_chunk(1000).expect("chunk");
    c.on_stream_chunk_lost(&first);
    assert!(c.lease_stream_data(5000, &|_| true).is_none(), "a loss to resend");
    // Resent, then leasable again.
    assert_eq!(c.next_stream_chunk(1000).map(|x| x.offset), Some(0));
    let l = c.lease_stream_data(5000, &|_| true).expect("lease");
    assert_eq!((l.id, l.start, l.end), (a2, 1000, 3000));
    // A stream this path may not carry is left alone.
    let (mut c, id) = table(&[(10, false)], false);
    assert!(c.lease_stream_data(5000, &|x| x != id).is_none());
    let l = c.lease_stream_data(5000, &|_| true).expect("lease");
    assert_eq!((l.id, l.start, l.end, a), (id, 0, 10, id));
}

/// Two batches lease one stream one after the other (two paths' threads) and the earlier one
/// comes back last with bytes unused: those cannot count as unsent again (the later lease
/// holds the bytes after them), so they are resent like lost data, their connection credit
/// still spent; every byte still goes out exactly once more and the stream ends intact.
#[test]
fn an_earlier_lease_returned_after_a_later_one_resends_its_unused_bytes() {
    let (mut c, id) = table(&[(5000, false)], true);
    let mut first = c.lease_stream_data(2000, &|_| true).expect("first lease");
    let second = c.lease_stream_data(2000, &|_| true).expect("second lease");
    assert_eq!((first.start, first.end, second.start, second.end), (0, 2000, 2000, 4000));
    let used = first.take(500).expect("a chunk of the first lease");
    assert_eq!((used.offset, used.len), (0, 500));
    let queued = c.queued_bytes();
    c.return_stream_data(first);
    assert_eq!(c.queued_bytes(), queued + 1500, "the unused bytes wait to be resent");
    c.return_stream_data(second);
    // The second lease's bytes are unsent again (it was the tail); the first's unused
    // bytes go out as a resend, then the rest of the stream.
    let mut got: Vec<(u64, usize, bool)> =
        drain(&mut c, 1200).into_iter().map(|(ch, _)| (ch.offset, ch.len, ch.fin)).collect();
    got.sort_unstable();
    let mut next = 500;
    for &(offset, len, _) in &got {
        assert_eq!(offset, next, "every byte once, in {got:?}");
        next += len as u64;
    }
    assert_eq!(next, 5000);
    assert!(got.last().is_some_and(|&(_, _, fin)| fin), "the FIN goes with the last bytes");
    assert!(!c.has_pending_data(), "{id:?} drained");
}
