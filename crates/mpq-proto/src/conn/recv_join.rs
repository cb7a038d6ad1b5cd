//! Stream data of a run of packets joined by the path that opened them (issue C2).
//!
//! A path's run of datagrams usually carries one stream's bytes in order, each packet's
//! STREAM frame continuing the last, and the path copied them one after the other into its
//! run's buffer (`recv_arena.rs`). Applied frame by frame, each would cost the shared side a
//! stream lookup and its flow-control and state checks under the connection's lock; so the
//! path, before handing the run back and holding nothing of the connection, joins each such
//! frame's data to the frame it continues, and the shared side checks and stores the joined
//! piece once ([`crate::stream::Streams::on_stream_piece`]).
//!
//! Joining changes nothing the peer can observe but the order of effects within the run:
//!   - Only frames the shared side applies without parsing again are joined (packets whose
//!     frames the path walked whole, [`OwnFrames::fast`]: STREAM, PADDING, PING and the
//!     path's own ACKs); any other packet ends the joining, so a frame that acts on a stream
//!     (RESET_STREAM, STOP_SENDING, ...) sees every byte before it.
//!   - A frame joins the one before it only for the same stream, at the next offset, with a
//!     piece that continues the previous one in the same buffer, and never after a FIN: the
//!     joined piece holds exactly the bytes of its frames, with the last frame's FIN.
//!   - The stream's and connection's flow control and final size are checked on the joined
//!     piece: the same limits on the same bytes (RFC 9000 §4.5, §19.8), so a violation is
//!     found, at the latest, on the piece holding it, and closes the connection as before.

use super::path_frames::{OwnFrames, Walked, WalkedStream};

/// Joins, across `packets` in order (the packets of one run, their data attached), each
/// STREAM frame's data to that of the frame it continues; a joined frame keeps no data and
/// the shared side skips it. Returns how many frames were joined to an earlier one.
pub(super) fn join_stream_pieces<'a>(packets: impl IntoIterator<Item = &'a mut OwnFrames>) -> usize {
    let mut joined = 0;
    // The last STREAM frame kept, which the next may continue.
    let mut prev: Option<&'a mut WalkedStream> = None;
    for own in packets {
        let OwnFrames { fast, items, .. } = own;
        if !*fast {
            // Parsed again by the shared side: its frames may act on the stream.
            prev = None;
            continue;
        }
        for item in items.iter_mut() {
            let Walked::Stream(s) = item else { continue };
            if prev.as_deref().is_some_and(|p| continues(p, s)) {
                if let (Some(p), Some(data)) = (prev.as_deref_mut(), s.data.take()) {
                    if let Some(pd) = p.data.as_mut() {
                        pd.range.end = data.range.end;
                        p.fin = s.fin;
                        joined += 1;
                    }
                }
            } else {
                prev = Some(s);
            }
        }
    }
    joined
}

/// Whether `next` continues `p`: the same stream, the next offset, the next bytes of the
/// same buffer, and `p` not the stream's last.
fn continues(p: &WalkedStream, next: &WalkedStream) -> bool {
    match (&p.data, &next.data) {
        (Some(a), Some(b)) => {
            p.id == next.id && !p.fin && p.offset + a.len() as u64 == next.offset && a.is_continued_by(b)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use smallvec::smallvec;

    use super::*;
    use crate::stream::{Backing, BufferSlice};
    use crate::types::StreamId;

    const BUF_A: Backing = Backing { id: 0x1000, len: 4096 };
    const BUF_B: Backing = Backing { id: 0x9000, len: 4096 };

    fn buffer() -> Bytes {
        Bytes::from((0..4096u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>())
    }

    /// A STREAM frame of stream `id` at `offset` whose data lies at `at` in buffer `backing`.
    fn frame(id: u64, offset: u64, at: std::ops::Range<usize>, backing: Backing, fin: bool) -> Walked {
        Walked::Stream(WalkedStream {
            ty: 0x0e,
            id: StreamId(id),
            offset,
            fin,
            range: 0..at.len(),
            in_run: None,
            data: Some(BufferSlice { buf: buffer(), range: at, backing }),
        })
    }

    fn packet(items: Vec<Walked>, fast: bool) -> OwnFrames {
        OwnFrames { fast, items: items.into_iter().collect(), ..OwnFrames::default() }
    }

    /// A STREAM frame as the shared side gets it: stream, offset, buffer range, fin.
    type Piece = (u64, u64, std::ops::Range<usize>, bool);

    /// What each packet's STREAM frames hand the shared side (None for a joined frame).
    fn pieces(packets: &[OwnFrames]) -> Vec<Vec<Option<Piece>>> {
        packets
            .iter()
            .map(|p| {
                p.items
                    .iter()
                    .filter_map(|i| match i {
                        Walked::Stream(s) => Some(s.data.as_ref().map(|d| (s.id.0, s.offset, d.range.clone(), s.fin))),
                        Walked::Fates => None,
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_runs_consecutive_frames_join_into_the_first_with_the_last_fin() {
        let mut run = vec![
            packet(vec![frame(0, 0, 0..1000, BUF_A, false)], true),
            packet(vec![Walked::Fates, frame(0, 1000, 1000..2000, BUF_A, false)], true),
            packet(vec![frame(0, 2000, 2000..2500, BUF_A, true)], true),
        ];
        assert_eq!(join_stream_pieces(run.iter_mut()), 2);
        assert_eq!(pieces(&run), vec![vec![Some((0, 0, 0..2500, true))], vec![None], vec![None]]);
        // The fates stay where they stand.
        assert!(matches!(run[1].items[0], Walked::Fates));
    }

    #[test]
    fn frames_that_do_not_continue_the_last_are_kept_apart() {
        let mut run = vec![
            // Another stream between: each stream's frames join their own.
            packet(vec![frame(0, 0, 0..100, BUF_A, false), frame(4, 0, 100..200, BUF_A, false)], true),
            packet(vec![frame(4, 100, 200..300, BUF_A, false)], true),
            // Stream 4 again, but not at the next offset (a gap).
            packet(vec![frame(4, 250, 300..400, BUF_A, false)], true),
            // The next offset, but in another buffer.
            packet(vec![frame(4, 350, 0..100, BUF_B, false)], true),
            // The next offset and buffer, but not the next bytes of it.
            packet(vec![frame(4, 450, 200..300, BUF_B, true)], true),
            // After a FIN nothing joins (a final-size error for the shared side to find).
            packet(vec![frame(4, 550, 300..400, BUF_B, false)], true),
        ];
        assert_eq!(join_stream_pieces(run.iter_mut()), 1);
        assert_eq!(
            pieces(&run),
            vec![
                vec![Some((0, 0, 0..100, false)), Some((4, 0, 100..300, false))],
                vec![None],
                vec![Some((4, 250, 300..400, false))],
                vec![Some((4, 350, 0..100, false))],
                vec![Some((4, 450, 200..300, true))],
                vec![Some((4, 550, 300..400, false))],
            ]
        );
    }

    #[test]
    fn a_packet_the_shared_side_parses_again_ends_the_joining() {
        let mut run = vec![
            packet(vec![frame(0, 0, 0..100, BUF_A, false)], true),
            // Not walked whole (say a RESET_STREAM follows): nothing joins across it.
            packet(vec![], false),
            packet(vec![frame(0, 100, 100..200, BUF_A, false)], true),
            packet(vec![frame(0, 200, 200..300, BUF_A, false)], true),
        ];
        assert_eq!(join_stream_pieces(run.iter_mut()), 1);
        assert_eq!(
            pieces(&run),
            vec![vec![Some((0, 0, 0..100, false))], vec![], vec![Some((0, 100, 100..300, false))], vec![None]]
        );
    }

    #[test]
    fn an_empty_run_and_frames_without_data_join_nothing() {
        assert_eq!(join_stream_pieces(Vec::<&mut OwnFrames>::new()), 0);
        let mut run = [packet(vec![frame(0, 0, 0..100, BUF_A, false)], true), packet(vec![], true)];
        if let Walked::Stream(s) = &mut run[0].items[0] {
            s.data = None;
        }
        run[1].items = smallvec![frame(0, 100, 100..200, BUF_A, false)];
        assert_eq!(join_stream_pieces(run.iter_mut()), 0);
    }
}
