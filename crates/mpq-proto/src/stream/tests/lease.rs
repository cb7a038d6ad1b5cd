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
    /// rooms, bytes included, with some of them lost and resent; after the rest is returned, the table goes on exactly as if
    /// the lease never happened (same chunks, FIN, pending state, queued bytes).
    #[test]
    fn a_lease_cuts_what_the_table_would_and_returns_the_rest(
        writes in proptest::collection::vec((1usize..3000, any::<bool>()), 0..6),
        fin in any::<bool>(),
        cap in 0u64..9000,
        rooms in proptest::collection::vec((1usize..1600, proptest::bool::weighted(0.2)), 0..24),
        after in 1usize..1500,
    ) {
        let (mut plain, _) = table(&writes, fin);
        let (mut leased, _) = table(&writes, fin);
        // As a send batch does: chunks from the lease; a lease that cannot give one is
        // returned and a new one taken; failing that, one by one from the table.
        let mut lease = leased.lease_stream_data(cap, 0, &|_| true);
        let mut in_flight = Vec::new();
        for &(room, lose) in &rooms {
            let mut c = lease.as_mut().and_then(|l| l.take(room)).map(|c| (c, true));
            if c.is_none() {
                if let Some(l) = lease.take() {
                    leased.return_stream_data(l);
                }
                lease = leased.lease_stream_data(cap, 0, &|_| true);
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
                (true, Some(l)) => l.copy(&c, &mut a),
                _ => leased.copy_stream_data(c.id, c.offset, c.len, &mut a),
            }
            plain.copy_stream_data(c.id, c.offset, c.len, &mut b);
            prop_assert_eq!(a, b);
            in_flight.push(c);
            if lose {
                // An ACK arrives between batches (the lease returns first): every other
                // chunk in flight is lost, leaving gaps; the rest is acknowledged. Both
                // tables then resend, lost data first, range by range.
                if let Some(l) = lease.take() {
                    leased.return_stream_data(l);
                }
                for (i, c) in in_flight.drain(..).enumerate() {
                    if i % 2 == 0 {
                        leased.on_stream_chunk_lost(&c);
                        plain.on_stream_chunk_lost(&c);
                    } else {
                        leased.on_stream_chunk_acked(&c);
                        plain.on_stream_chunk_acked(&c);
                    }
                }
            }
        }
        if let Some(lease) = lease {
            leased.return_stream_data(lease);
        }
        prop_assert_eq!(leased.has_pending_data(), plain.has_pending_data());
        prop_assert_eq!(leased.queued_bytes(), plain.queued_bytes());
        prop_assert_eq!(drain(&mut leased, after), drain(&mut plain, after));
    }
}

/// With several streams waiting, a lease takes a share of each, round-robin chunk by chunk
/// as the table would; lost data is leased first, alone for its stream; a stream this path
/// may not carry is left alone.
#[test]
fn a_lease_covers_several_streams_and_data_to_resend() {
    let (mut c, a) = table(&[(1000, false)], false);
    let b = c.open(Dir::Uni).expect("stream");
    c.write(b, &[1; 100]).expect("write");
    let mut l = c.lease_stream_data(5000, 1200, &|_| true).expect("two streams");
    let cut: Vec<_> = std::iter::from_fn(|| l.take(400)).map(|x| (x.id, x.offset, x.len)).collect();
    assert_eq!(cut, [(a, 0, 400), (b, 0, 100), (a, 400, 400), (a, 800, 200)]);
    c.return_stream_data(l);
    assert!(!c.has_pending_data());

    let (mut c, a2) = table(&[(3000, false)], false);
    let first = c.next_stream_chunk(1000).expect("chunk");
    c.on_stream_chunk_lost(&first);
    let mut l = c.lease_stream_data(5000, 1200, &|_| true).expect("a loss to resend");
    let cut: Vec<_> = std::iter::from_fn(|| l.take(600)).map(|x| (x.offset, x.len)).collect();
    assert_eq!(cut, [(0, 600), (600, 400), (1000, 600), (1600, 600), (2200, 600), (2800, 200)], "resend, then new");
    c.return_stream_data(l);
    assert!(!c.has_pending_data());

    // Two lost ranges: both go before the new data; with a share too small for both, the
    // new data waits for a later lease.
    let (mut c, _) = table(&[(5000, false)], false);
    let sent: Vec<_> = (0..4).map(|_| c.next_stream_chunk(1000).expect("chunk")).collect();
    c.on_stream_chunk_lost(&sent[0]);
    c.on_stream_chunk_lost(&sent[2]);
    let mut l = c.lease_stream_data(10_000, 0, &|_| true).expect("lease");
    let cut: Vec<_> = std::iter::from_fn(|| l.take(1000)).map(|x| x.offset).collect();
    assert_eq!(cut, [0, 2000, 4000]);
    c.return_stream_data(l);
    c.on_stream_chunk_lost(&sent[1]);
    c.on_stream_chunk_lost(&sent[3]);
    let mut l = c.lease_stream_data(1500, 0, &|_| true).expect("lease");
    assert_eq!(l.take(1000).map(|x| (x.offset, x.len)), Some((1000, 1000)));
    // The share ends within the second range: a room it cannot fill waits for a new lease
    // (the table would cut a longer chunk), a smaller one is served.
    assert!(l.take(1000).is_none(), "capped");
    assert_eq!(l.take(500).map(|x| (x.offset, x.len)), Some((3000, 500)));
    c.return_stream_data(l);
    assert_eq!(c.next_stream_chunk(1000).map(|x| (x.offset, x.len)), Some((3500, 500)), "the rest of it next");
    let _ = a2;

    // A stream's ranges go out in order, each one whole before the next, as from the table.
    let (mut c, _) = table(&[(5000, false)], false);
    let sent: Vec<_> = (0..4).map(|_| c.next_stream_chunk(1000).expect("chunk")).collect();
    for k in [0, 1, 3] {
        c.on_stream_chunk_lost(&sent[k]);
    }
    let mut l = c.lease_stream_data(10_000, 0, &|_| true).expect("lease");
    let cut: Vec<_> = std::iter::from_fn(|| l.take(1500)).map(|x| (x.offset, x.len)).collect();
    assert_eq!(cut, [(0, 1500), (1500, 500), (3000, 1000), (4000, 1000)]);

    // Unused bytes to resend are lost again when the lease returns.
    let (mut c, _) = table(&[(3000, false)], false);
    let first = c.next_stream_chunk(1000).expect("chunk");
    c.on_stream_chunk_lost(&first);
    let mut l = c.lease_stream_data(5000, 1200, &|_| true).expect("a loss to resend");
    assert_eq!(l.take(300).map(|x| (x.offset, x.len)), Some((0, 300)));
    c.return_stream_data(l);
    assert_eq!(c.next_stream_chunk(5000).map(|x| (x.offset, x.len)), Some((300, 700)));

    let (mut c, id) = table(&[(10, false)], false);
    assert!(c.lease_stream_data(5000, 1200, &|x| x != id).is_none());
    assert!(c.has_pending_data(), "still queued");
    let l = c.lease_stream_data(5000, 1200, &|_| true).expect("lease");
    assert_eq!((l.parts[0].id, l.parts[0].start, l.parts[0].end), (id, 0, 10));
}

/// The byte at `offset` of stream number `k` in the several-streams property.
fn pattern(k: usize, offset: u64) -> u8 {
    (offset as usize * 7 + k * 13) as u8
}

proptest! {
    /// Several streams, chunks cut from leases (renewed when they cannot serve a room, else
    /// taken one by one), some lost and resent: every byte of every stream is acknowledged
    /// with the right contents, each stream's FIN too, and the table ends with nothing
    /// queued and its connection credit intact.
    #[test]
    fn leases_over_several_streams_deliver_every_byte(
        lens in proptest::collection::vec(0usize..4000, 1..5),
        fin in any::<bool>(),
        cap in 1u64..9000,
        min_share in 0u64..1500,
        rooms in proptest::collection::vec((1usize..1600, any::<bool>()), 1..40),
    ) {
        let (mut c, _) = pair(&StreamsConfig::default());
        let mut ids = Vec::new();
        for (k, &len) in lens.iter().enumerate() {
            let id = c.open(Dir::Uni).expect("stream");
            let data: Vec<u8> = (0..len as u64).map(|o| pattern(k, o)).collect();
            c.write(id, &data).expect("write");
            if fin {
                c.finish(id).expect("finish");
            }
            ids.push(id);
        }
        let mut acked: Vec<Vec<bool>> = lens.iter().map(|&l| vec![false; l]).collect();
        let mut fin_acked = vec![false; lens.len()];
        let mut lease: Option<BatchData> = None;
        let mut check = |c: &mut Streams, ch: StreamChunk, bytes: &[u8], lost: bool| {
            let k = ids.iter().position(|&i| i == ch.id).expect("a stream of the test");
            for (j, &b) in bytes.iter().enumerate() {
                assert_eq!(b, pattern(k, ch.offset + j as u64), "stream {k} offset {}", ch.offset + j as u64);
            }
            if lost {
                c.on_stream_chunk_lost(&ch);
            } else {
                acked[k][ch.offset as usize..ch.offset as usize + ch.len].iter_mut().for_each(|x| *x = true);
                fin_acked[k] |= ch.fin;
                c.on_stream_chunk_acked(&ch);
            }
        };
        for &(room, lost) in &rooms {
            let mut got = lease.as_mut().and_then(|l| l.take(room));
            if got.is_none() {
                if let Some(l) = lease.take() {
                    c.return_stream_data(l);
                }
                lease = c.lease_stream_data(cap, min_share, &|_| true);
                got = lease.as_mut().and_then(|l| l.take(room));
            }
            let mut bytes = Vec::new();
            let ch = match got {
                Some(ch) => {
                    lease.as_ref().expect("lease").copy(&ch, &mut bytes);
                    ch
                }
                None => {
                    let Some(ch) = c.next_stream_chunk(room) else { continue };
                    c.copy_stream_data(ch.id, ch.offset, ch.len, &mut bytes);
                    ch
                }
            };
            check(&mut c, ch, &bytes, lost);
        }
        if let Some(l) = lease.take() {
            c.return_stream_data(l);
        }
        while let Some(ch) = c.next_stream_chunk(1000) {
            let mut bytes = Vec::new();
            c.copy_stream_data(ch.id, ch.offset, ch.len, &mut bytes);
            check(&mut c, ch, &bytes, false);
        }
        for (k, a) in acked.iter().enumerate() {
            prop_assert!(a.iter().all(|&x| x), "stream {} has bytes never acknowledged", k);
            prop_assert_eq!(fin_acked[k], fin, "stream {} FIN", k);
        }
        prop_assert!(!c.has_pending_data());
        prop_assert_eq!(c.queued_bytes(), 0);
    }
}

/// Two batches lease one stream one after the other (two paths' threads) and the earlier one
/// comes back last with bytes unused: those cannot count as unsent again (the later lease
/// holds the bytes after them), so they are resent like lost data, their connection credit
/// still spent; every byte still goes out exactly once more and the stream ends intact.
#[test]
fn an_earlier_lease_returned_after_a_later_one_resends_its_unused_bytes() {
    let (mut c, id) = table(&[(5000, false)], true);
    let mut first = c.lease_stream_data(2000, 0, &|_| true).expect("first lease");
    let second = c.lease_stream_data(2000, 0, &|_| true).expect("second lease");
    let (f, s2) = (&first.parts[0], &second.parts[0]);
    assert_eq!((f.start, f.end, s2.start, s2.end), (0, 2000, 2000, 4000));
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

/// Chunks that continue each other are absorbed; a gap, another stream or a FIN ends the run.
#[test]
fn chunks_absorb_only_what_continues_them() {
    let (id, other) = (cid(Dir::Uni, 0), cid(Dir::Uni, 1));
    let mut r = StreamChunk { id, offset: 10, len: 5, fin: false };
    assert!(r.absorb(&StreamChunk { id, offset: 15, len: 7, fin: false }));
    assert_eq!(r, StreamChunk { id, offset: 10, len: 12, fin: false });
    assert!(!r.absorb(&StreamChunk { id, offset: 23, len: 1, fin: false }), "a gap");
    assert!(!r.absorb(&StreamChunk { id, offset: 21, len: 1, fin: false }), "an overlap");
    assert!(!r.absorb(&StreamChunk { id: other, offset: 22, len: 1, fin: false }), "another stream");
    assert!(r.absorb(&StreamChunk { id, offset: 22, len: 0, fin: true }));
    assert_eq!(r, StreamChunk { id, offset: 10, len: 12, fin: true });
    assert!(!r.absorb(&StreamChunk { id, offset: 22, len: 0, fin: false }), "after the FIN");
    let mut huge = StreamChunk { id, offset: 0, len: usize::MAX, fin: false };
    assert!(!huge.absorb(&StreamChunk { id, offset: usize::MAX as u64, len: 1, fin: false }), "overflow");
}

proptest! {
    /// Acknowledging runs of absorbed chunks (`AckedRun`) leaves a stream as acknowledging
    /// every chunk would: after each ACK the same events and the same state (ended or not),
    /// and the same end once everything is acknowledged.
    #[test]
    fn acknowledging_absorbed_runs_equals_acknowledging_each_chunk(
        writes in proptest::collection::vec(1usize..3000, 1..6),
        fin in any::<bool>(),
        max in 1usize..1500,
        order in proptest::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        let sizes: Vec<(usize, bool)> = writes.iter().map(|&l| (l, false)).collect();
        let (mut each, id) = table(&sizes, fin);
        let (mut runs, _) = table(&sizes, fin);
        let mut chunks = Vec::new();
        while let Some(c) = each.next_stream_chunk(max) {
            prop_assert_eq!(runs.next_stream_chunk(max), Some(c));
            chunks.push(c);
        }
        // Acknowledge in an order of the test's choosing: a chosen chunk and the next few
        // after it, as one ACK of consecutive packets would.
        let mut acked = vec![false; chunks.len()];
        for (k, ix) in order.iter().enumerate() {
            if chunks.is_empty() { break; }
            let start = ix.index(chunks.len());
            let picked: Vec<StreamChunk> =
                (start..chunks.len()).take(1 + k % 4).filter(|&i| !acked[i]).map(|i| chunks[i]).collect();
            acked.iter_mut().skip(start).take(1 + k % 4).for_each(|a| *a = true);
            let mut run = AckedRun::default();
            for c in &picked {
                each.on_stream_chunk_acked(c);
                run.push(&mut runs, c);
            }
            run.finish(&mut runs);
            let (e1, e2) = (events(&mut each), events(&mut runs));
            prop_assert_eq!(e1.contains(&StreamEvent::Finished { id }), e2.contains(&StreamEvent::Finished { id }));
            prop_assert_eq!(each.is_empty(), runs.is_empty());
        }
        // What is left to acknowledge, the rest acknowledged one by one at both.
        for c in chunks.iter().zip(&acked).filter(|(_, a)| !**a).map(|(c, _)| c) {
            each.on_stream_chunk_acked(c);
            runs.on_stream_chunk_acked(c);
        }
        prop_assert_eq!(events(&mut each).contains(&StreamEvent::Finished { id }), events(&mut runs).contains(&StreamEvent::Finished { id }));
        prop_assert_eq!(each.is_empty(), runs.is_empty());
        prop_assert_eq!(each.is_empty(), fin, "every byte acknowledged: the stream ends iff it was finished");
    }
}
