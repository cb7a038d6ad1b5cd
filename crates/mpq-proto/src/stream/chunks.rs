//! Stream data held as reference-counted chunks (issue C2): a receive stream keeps the
//! slices of the buffers its packets' data was copied into when they were opened, instead of
//! copying every byte into a ring under the connection's lock. Opening runs on the path's
//! thread without the lock, so the one copy of each received byte runs in parallel on as many
//! threads as there are paths; inserting a chunk under the lock costs a B-tree insert, and the
//! application can take the chunks themselves ([`ChunkStore::read_chunk`]) and copy or use
//! them outside the lock.
//!
//! The chunks are disjoint and keyed by their first offset. Data that overlaps what is held is
//! trimmed to the gaps it fills (RFC 9000 §2.2: overlaps are assumed identical). What a peer
//! can make this hold is bounded by [`ChunkStore::is_wasteful`], which the owner
//! ([`super::recv_store::RecvStore`]) checks after every insert and answers by moving the data
//! to the compact ring ([`super::reassembly::RecvBuffer`]): many small chunks (a peer cutting
//! its data into tiny frames, each chunk costing a B-tree entry and a reference) or buffers
//! pinned by a few bytes each (a peer leaving one small piece of every batch unfilled).

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use rustc_hash::FxHashMap;

/// The buffer a chunk is a slice of: what holding the chunk keeps allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backing {
    /// Identifies the buffer among those alive (its address: it cannot be reused while a
    /// chunk of it is held).
    pub id: usize,
    /// Its size in bytes.
    pub len: usize,
}

impl Backing {
    /// The backing of `data` when it is a whole allocation of its own.
    pub fn exact(data: &Bytes) -> Self {
        Self { id: data.as_ptr() as usize, len: data.len() }
    }
}

/// Received stream data where its path copied it (`conn/recv_arena.rs`): the buffer of the
/// run of packets it came in, which the run's frames share, and this data's place in it.
#[derive(Debug, Clone)]
pub struct BufferSlice {
    /// The whole buffer.
    pub buf: Bytes,
    /// Where the data lies in it.
    pub range: std::ops::Range<usize>,
    /// The buffer's identity and size.
    pub backing: Backing,
}

impl BufferSlice {
    /// Bytes of data.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// True for no data (a frame carrying only a FIN).
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// Whether `next` is the data right after this one in the same buffer. (The same
    /// identity is the same buffer: an address is not reused while this slice holds it.)
    pub fn is_continued_by(&self, next: &Self) -> bool {
        self.backing == next.backing && self.range.end == next.range.start
    }

    /// The data alone, as a chunk of the buffer (no copy, no reference count touched).
    pub fn into_bytes(self) -> Bytes {
        let mut b = self.buf;
        b.truncate(self.range.end);
        bytes::Buf::advance(&mut b, self.range.start);
        b
    }
}

/// Beyond this many chunks, their average size must stay above [`MIN_AVERAGE_CHUNK`].
const SMALL_CHUNKS_ALLOWED: usize = 64;
/// Chunks smaller than this on average cost more in bookkeeping (a B-tree entry and a
/// reference, about 64 bytes) than a ring would.
const MIN_AVERAGE_CHUNK: usize = 512;
/// Buffers pinned beyond twice the bytes held: the partly read buffer at the front of what
/// is held and a run's buffer per path (each at most twice its data), about 2.5 of the
/// largest (96 KiB). With less, two paths over loopback moved a stream to the ring several
/// times a second.
const PIN_SLACK: usize = 256 * 1024;
/// A piece kept from a larger slice (the rest overlapped data already held) is copied into a
/// buffer of its own when it is less than this fraction (1/N) of the slice it came from, so a
/// small piece never keeps a large buffer alive.
const TRIM_COPY_RATIO: usize = 2;

/// A slice of received data and the buffer it keeps alive.
#[derive(Debug)]
struct Piece {
    data: Bytes,
    backing: Backing,
}

/// Pieces that follow each other without a gap: a path's packets in order append to one run,
/// so a packet costs no B-tree insert.
#[derive(Debug, Default)]
struct Run {
    pieces: VecDeque<Piece>,
    /// Bytes in the pieces.
    len: u64,
    /// One past the run's last offset. The run starts at `end - len`; its key in the map is
    /// where it started when created (reads take pieces off the front of the first run
    /// without moving it in the map).
    end: u64,
}

impl Run {
    fn start(&self) -> u64 {
        self.end - self.len
    }
}

/// In-order delivery of stream data received as chunks at arbitrary offsets.
#[derive(Debug, Default)]
pub struct ChunkStore {
    /// Disjoint runs at or above `read_offset`, by the offset each started at.
    runs: BTreeMap<u64, Run>,
    /// Pieces in all runs.
    pieces: usize,
    read_offset: u64,
    /// Every byte below this offset has been received.
    contiguous_end: u64,
    /// One past the highest offset held (or `contiguous_end` if higher).
    max_end: u64,
    /// Bytes held.
    held: usize,
    /// Bytes of the distinct buffers the held pieces keep alive.
    pinned: usize,
    /// Pieces held per buffer.
    backings: FxHashMap<usize, (usize, u32)>,
    /// Empty piece lists of runs read to their end or joined to another, for the next new
    /// runs: with two paths a stream's data arrives as interleaved runs, one new run per
    /// batch, and each took an allocation under the connection's lock (a path thread's) that
    /// another thread freed. At most [`SPARE_LISTS`] lists of at most [`SPARE_MAX`] pieces
    /// in all.
    spare: Vec<VecDeque<Piece>>,
}

#[cfg(test)]
thread_local! {
    /// Pieces moved by [`ChunkStore::join`] on this thread (for tests).
    static JOIN_MOVES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Empty piece lists kept for reuse at most.
const SPARE_LISTS: usize = 4;
/// Pieces' room in all the piece lists kept for reuse, at most: 3 kB. (Counted over all
/// of them, not per list: four lists of 64 held 12 kB for a stream with nothing in it.)
const SPARE_MAX: usize = 64;
/// Room for this many buffers' entries stays in `backings` once it is empty; a table grown
/// larger (a stream that held many buffers at once) is freed then.
const BACKINGS_KEPT: usize = 28;
/// What [`ChunkStore::memory`] counts at most for a store that holds nothing: the spare
/// piece lists and the empty table of buffers. An idle stream costs no more than that
/// (the tests check it; the code keeps it by the two bounds above).
#[cfg(test)]
pub(crate) const IDLE_MEMORY_MAX: usize = SPARE_MAX * PIECE_COST + BACKINGS_KEPT * BACKING_COST;
/// Bytes [`ChunkStore::memory`] counts per piece and per entry of the buffer table.
const PIECE_COST: usize = 48;
const BACKING_COST: usize = 32;

impl ChunkStore {
    /// An empty store whose next byte to read is at `offset`.
    pub fn starting_at(offset: u64) -> Self {
        Self { read_offset: offset, contiguous_end: offset, max_end: offset, ..Self::default() }
    }

    /// Offset of the next byte to read.
    pub fn read_offset(&self) -> u64 {
        self.read_offset
    }

    /// Every byte below this offset has been received.
    pub fn contiguous_end(&self) -> u64 {
        self.contiguous_end
    }

    /// Bytes readable now.
    pub fn readable(&self) -> usize {
        (self.contiguous_end - self.read_offset) as usize
    }

    /// Bytes held (readable and out of order).
    pub fn buffered(&self) -> usize {
        self.held
    }

    /// Runs of out-of-order bytes held (for tests and diagnostics; walks the runs).
    pub fn segments(&self) -> usize {
        let mut segments = 0;
        let mut end = self.contiguous_end;
        for r in self.runs.values().filter(|r| r.end > self.contiguous_end) {
            segments += usize::from(r.start() != end);
            end = r.end;
        }
        segments
    }

    /// Heap memory held: the pinned buffers and the bookkeeping of the pieces and runs.
    pub fn memory(&self) -> usize {
        let spare: usize = self.spare.iter().map(|l| l.capacity() * PIECE_COST).sum();
        self.pinned
            + self.pieces * PIECE_COST
            + self.runs.len() * (64 + 4 * PIECE_COST)
            + self.backings.capacity() * BACKING_COST
            + spare
    }

    /// True when holding the data as chunks costs clearly more than a ring would: many small
    /// pieces, or buffers kept alive by much less data than they hold.
    pub fn is_wasteful(&self) -> bool {
        (self.pieces > SMALL_CHUNKS_ALLOWED && self.held < self.pieces * MIN_AVERAGE_CHUNK)
            || self.pinned > 2 * self.held + PIN_SLACK
    }

    /// What the waste rules read: (pieces, runs, bytes held, bytes pinned).
    pub fn waste(&self) -> (usize, usize, usize, usize) {
        (self.pieces, self.runs.len(), self.held, self.pinned)
    }

    /// Stores `data` received at `offset`, a slice of `backing`, keeping only the parts not
    /// already received or read.
    pub fn insert(&mut self, offset: u64, data: Bytes, backing: Backing) {
        let end = offset + data.len() as u64;
        let mut start = offset.max(self.contiguous_end);
        if start >= end {
            return;
        }
        let whole = data.len();
        let cut = |data: &Bytes, s: u64, e: u64| {
            if s == offset && e == end {
                data.clone()
            } else {
                data.slice((s - offset) as usize..(e - offset) as usize)
            }
        };
        if start >= self.max_end {
            // Beyond everything held (a path's data in order, the usual case): no overlap.
            self.put_cut(start, cut(&data, start, end), whole, backing);
        } else {
            if let Some(r) = self.runs.range(..=start).next_back().map(|(_, r)| r) {
                start = start.max(r.end);
            }
            if start >= end {
                return;
            }
            // The gaps of [start, end) between the runs already held.
            let mut gaps: smallvec::SmallVec<[(u64, u64); 2]> = smallvec::SmallVec::new();
            let mut cursor = start;
            for r in self.runs.range(start..end).map(|(_, r)| r) {
                if r.start() > cursor {
                    gaps.push((cursor, r.start()));
                }
                cursor = cursor.max(r.end);
            }
            if cursor < end {
                gaps.push((cursor, end));
            }
            for (s, e) in gaps {
                self.put_cut(s, cut(&data, s, e), whole, backing);
            }
        }
        self.max_end = self.max_end.max(end);
        // Over every run that now joins the contiguous data.
        while let Some(r) = self.runs.range(..=self.contiguous_end).next_back().map(|(_, r)| r) {
            if r.end <= self.contiguous_end {
                break;
            }
            self.contiguous_end = r.end;
        }
    }

    /// Puts `piece`, cut from a received slice of `whole` bytes, at offset `at` (a gap):
    /// copied into a buffer of its own when it is a small part of that slice, so that it does
    /// not keep the slice's buffer alive for little.
    fn put_cut(&mut self, at: u64, piece: Bytes, whole: usize, backing: Backing) {
        if piece.len() * TRIM_COPY_RATIO < whole {
            let own = Bytes::copy_from_slice(&piece);
            let b = Backing::exact(&own);
            self.put(at, own, b);
        } else {
            self.put(at, piece, backing);
        }
    }

    /// Puts `data` at offset `at`, a gap: appended to the run that ends there, else a run of
    /// its own; and a run that starts where the data ends joins it. So the runs are the
    /// stretches between gaps: with two paths, whose batches interleave and fill each other's
    /// gaps, a handful instead of one per batch, and every lookup under the connection's lock
    /// stays in a small map.
    fn put(&mut self, at: u64, data: Bytes, backing: Backing) {
        if data.is_empty() {
            return;
        }
        let len = data.len() as u64;
        let end = at + len;
        self.held += data.len();
        self.pieces += 1;
        self.pin(backing);
        let piece = Piece { data, backing };
        // The run that starts where the data ends, if any: none when the data reaches past
        // everything held (a path's data in order, the usual case), so no lookup then. (A
        // run's key is where it starts, but for the first run read from: `at` is above it.)
        let next = if end < self.max_end { self.runs.remove(&end) } else { None };
        let before = self.runs.range_mut(..at).next_back().map(|(_, r)| r).filter(|r| r.end == at);
        match (before, next) {
            (Some(r), next) => {
                r.pieces.push_back(piece);
                r.len += len;
                r.end = end;
                if let Some(n) = next {
                    let freed = Self::join(r, n);
                    self.keep_spare(freed);
                }
            }
            (None, Some(mut n)) => {
                // The run after the data now starts at it.
                n.pieces.push_front(piece);
                n.len += len;
                self.runs.insert(at, n);
            }
            (None, None) => {
                let mut pieces = self.spare.pop().unwrap_or_else(|| VecDeque::with_capacity(4));
                pieces.push_back(piece);
                self.runs.insert(at, Run { pieces, len, end });
            }
        }
    }

    /// Joins `next`, which starts where `run` ends, to `run`. The shorter piece list moves
    /// into the longer, so that a piece moves at most log2(pieces) times however the peer
    /// orders its data. Returns the list left empty.
    fn join(run: &mut Run, next: Run) -> VecDeque<Piece> {
        let Run { pieces: mut moved, len, end } = next;
        #[cfg(test)]
        JOIN_MOVES.with(|m| m.set(m.get() + moved.len().min(run.pieces.len())));
        if run.pieces.len() >= moved.len() {
            run.pieces.append(&mut moved);
        } else {
            while let Some(p) = run.pieces.pop_back() {
                moved.push_front(p);
            }
            std::mem::swap(&mut run.pieces, &mut moved);
        }
        run.len += len;
        run.end = end;
        moved
    }

    /// Keeps an emptied piece list for a next new run, if small and there is room.
    fn keep_spare(&mut self, list: VecDeque<Piece>) {
        debug_assert!(list.is_empty());
        let kept: usize = self.spare.iter().map(VecDeque::capacity).sum();
        if self.spare.len() < SPARE_LISTS && kept + list.capacity() <= SPARE_MAX {
            self.spare.push(list);
        }
    }

    fn pin(&mut self, b: Backing) {
        let e = self.backings.entry(b.id).or_insert((b.len, 0));
        if e.1 == 0 {
            self.pinned += b.len;
        }
        e.1 += 1;
    }

    fn unpin(&mut self, b: Backing) {
        if let Some(e) = self.backings.get_mut(&b.id) {
            e.1 -= 1;
            if e.1 == 0 {
                self.pinned -= e.0;
                self.backings.remove(&b.id);
                if self.backings.is_empty() && self.backings.capacity() > BACKINGS_KEPT {
                    self.backings = FxHashMap::default();
                }
            }
        }
    }

    /// Takes up to `max` readable bytes as one chunk, without copying; None if nothing is
    /// readable (or `max` is 0).
    pub fn read_chunk(&mut self, max: usize) -> Option<Bytes> {
        if max == 0 || self.readable() == 0 {
            return None;
        }
        let mut entry = self.runs.first_entry()?;
        let run = entry.get_mut();
        debug_assert_eq!(run.start(), self.read_offset, "a readable byte is always held");
        let front = run.pieces.front_mut()?;
        let (out, gone) = if front.data.len() <= max {
            let p = run.pieces.pop_front()?;
            (p.data, Some(p.backing))
        } else {
            (front.data.split_to(max), None)
        };
        run.len -= out.len() as u64;
        if run.pieces.is_empty() {
            let pieces = entry.remove().pieces;
            self.keep_spare(pieces);
        }
        if let Some(b) = gone {
            self.pieces -= 1;
            self.unpin(b);
        }
        self.held -= out.len();
        self.read_offset += out.len() as u64;
        Some(out)
    }

    /// Hands up to `max` readable bytes to `f`, in order, where they lie; they are consumed.
    /// Returns how many.
    pub fn read_with(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let mut n = 0;
        while n < max {
            let Some(chunk) = self.read_chunk(max - n) else { break };
            f(&chunk);
            n += chunk.len();
        }
        n
    }

    /// Every piece held, in offset order, consuming the store (to move them elsewhere).
    pub fn drain(&mut self) -> impl Iterator<Item = (u64, Bytes)> {
        self.held = 0;
        self.pinned = 0;
        self.pieces = 0;
        self.backings.clear();
        std::mem::take(&mut self.runs).into_values().flat_map(|r| {
            let mut at = r.start();
            r.pieces.into_iter().map(move |p| {
                let here = at;
                at += p.data.len() as u64;
                (here, p.data)
            })
        })
    }

    /// Discards everything held; the read offset moves to the contiguous end.
    pub fn clear(&mut self) {
        let _ = self.drain();
        self.read_offset = self.contiguous_end;
        self.max_end = self.contiguous_end;
        self.backings = FxHashMap::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arena(data: &[u8]) -> (Bytes, Backing) {
        let b = Bytes::copy_from_slice(data);
        let backing = Backing::exact(&b);
        (b, backing)
    }

    fn read_all(s: &mut ChunkStore) -> Vec<u8> {
        let mut out = Vec::new();
        s.read_with(usize::MAX, &mut |p| out.extend_from_slice(p));
        out
    }

    #[test]
    fn slices_of_one_buffer_share_it_and_release_it_when_read() {
        let data: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let (buf, backing) = arena(&data);
        let mut s = ChunkStore::default();
        // Two packets' data out of order, both slices of the run's buffer.
        s.insert(1500, buf.slice(1500..3000), backing);
        assert_eq!((s.readable(), s.buffered(), s.segments()), (0, 1500, 1));
        assert_eq!(s.pinned, 3000, "one buffer pinned once");
        s.insert(0, buf.slice(0..1500), backing);
        assert_eq!((s.readable(), s.segments()), (3000, 0));
        assert_eq!(s.pinned, 3000);
        let first = s.read_chunk(1000).expect("readable");
        assert_eq!(&first[..], &data[..1000]);
        assert_eq!(first.as_ptr(), buf.as_ptr(), "handed out without a copy");
        assert_eq!(read_all(&mut s), &data[1000..]);
        assert_eq!((s.pinned, s.buffered(), s.backings.len()), (0, 0, 0));
    }

    #[test]
    fn overlaps_fill_only_the_gaps_and_small_pieces_are_copied() {
        let data: Vec<u8> = (0..100u8).collect();
        let mut s = ChunkStore::default();
        let (a, ab) = arena(&data[10..20]);
        s.insert(10, a, ab);
        let (b, bb) = arena(&data[30..40]);
        s.insert(30, b, bb);
        // Covers both and the gaps around them: only [5,10), [20,30) and [40,45) are new.
        let (c, cb) = arena(&data[5..45]);
        s.insert(5, c.clone(), cb);
        assert_eq!(s.buffered(), 40);
        assert_eq!(s.segments(), 1);
        // Every piece kept from `c` is under half of it: each was copied, so `c` is not pinned.
        assert!(!s.backings.contains_key(&cb.id));
        let (d, db) = arena(&data[0..5]);
        s.insert(0, d, db);
        assert_eq!(read_all(&mut s), &data[..45]);
        // Data below what was read is ignored.
        let (e, eb) = arena(&data[0..45]);
        s.insert(0, e, eb);
        assert_eq!((s.buffered(), s.readable()), (0, 0));
    }

    #[test]
    fn tiny_chunks_are_wasteful_beyond_a_few() {
        let mut s = ChunkStore::default();
        for k in 0..SMALL_CHUNKS_ALLOWED as u64 {
            let (b, bb) = arena(&[7]);
            s.insert(1 + 2 * k, b, bb);
        }
        assert!(!s.is_wasteful());
        let (b, bb) = arena(&[7]);
        s.insert(1000, b, bb);
        assert!(s.is_wasteful());
    }

    #[test]
    fn a_large_buffer_pinned_by_a_small_piece_is_wasteful() {
        let big = Bytes::from(vec![1u8; 4 * PIN_SLACK]);
        let backing = Backing::exact(&big);
        let mut s = ChunkStore::default();
        s.insert(100, big.slice(0..1000), backing);
        assert!(s.is_wasteful(), "held {} pinned {}", s.held, s.pinned);
    }

    #[test]
    fn reading_splits_a_chunk_and_keeps_the_rest() {
        let data: Vec<u8> = (0..50u8).collect();
        let (b, bb) = arena(&data);
        let mut s = ChunkStore::starting_at(1000);
        s.insert(1000, b, bb);
        assert_eq!(&s.read_chunk(20).expect("data")[..], &data[..20]);
        assert_eq!(s.read_offset(), 1020);
        assert_eq!(s.buffered(), 30);
        assert_eq!(&s.read_chunk(100).expect("data")[..], &data[20..]);
        assert!(s.read_chunk(100).is_none());
    }

    /// Two paths' data interleaved (a new run per batch): the piece list of a run read to
    /// its end serves the next new run, and the data comes out whole and in order.
    #[test]
    fn a_run_read_to_its_end_lends_its_piece_list_to_the_next() {
        let data: Vec<u8> = (0..6000u32).map(|i| (i % 251) as u8).collect();
        let mut s = ChunkStore::default();
        let mut out = Vec::new();
        for k in 0..3 {
            // This round's two batches: the second path's first (a gap), then the first's.
            let (a, ab) = arena(&data[k * 2000..k * 2000 + 1000]);
            let (b, bb) = arena(&data[k * 2000 + 1000..k * 2000 + 2000]);
            s.insert((k * 2000 + 1000) as u64, b, bb);
            if k > 0 {
                assert!(s.spare.is_empty(), "round {k}: the new run took the spare list");
            }
            s.insert((k * 2000) as u64, a, ab);
            out.extend(read_all(&mut s));
            assert_eq!(s.spare.len(), 1, "round {k}: the run read to its end leaves its list");
            assert!(s.runs.is_empty());
        }
        assert_eq!(out, data);
        // A list grown past the bound is not kept.
        let mut s = ChunkStore::default();
        for k in 0..(2 * SPARE_MAX) {
            let (b, bb) = arena(&data[k..k + 1]);
            s.put(k as u64, b, bb);
        }
        s.contiguous_end = 2 * SPARE_MAX as u64;
        assert_eq!(read_all(&mut s).len(), 2 * SPARE_MAX);
        assert!(s.spare.is_empty());
    }

    /// A store read to its end after holding many runs and buffers at once keeps at most
    /// [`IDLE_MEMORY_MAX`]: the spare lists are bounded in all, and a grown table of buffers
    /// is freed. (Four lists of 64 pieces and a 56-entry table were 5,824 bytes: a
    /// property test's case, 2026-12-02.)
    #[test]
    fn a_drained_store_keeps_only_bounded_bookkeeping() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let mut s = ChunkStore::default();
        // 100 runs with gaps between them, each of its own buffer, then the gaps.
        for k in 0..100 {
            let at = k * 200 + 100;
            let (b, bb) = arena(&data[at..at + 100]);
            s.insert(at as u64, b, bb);
        }
        assert!(s.backings.capacity() > BACKINGS_KEPT);
        for k in 0..100 {
            let at = k * 200;
            let (b, bb) = arena(&data[at..at + 100]);
            s.insert(at as u64, b, bb);
        }
        assert_eq!(read_all(&mut s), data);
        assert_eq!((s.buffered(), s.pinned), (0, 0));
        assert!(s.memory() <= IDLE_MEMORY_MAX, "{} bytes with nothing held", s.memory());
        assert!(s.spare.iter().map(VecDeque::capacity).sum::<usize>() <= SPARE_MAX);
    }

    /// Two paths whose batches interleave and arrive in any order: runs that come to touch
    /// are joined, so the store holds one run per stretch between gaps (one once every gap
    /// is filled), and the data comes out whole and in order.
    #[test]
    fn runs_that_come_to_touch_are_joined() {
        let data: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        let mut s = ChunkStore::default();
        // Path A carries the even 1000-byte pieces, path B the odd ones; B lags by three.
        let piece = |k: usize| {
            let (b, bb) = arena(&data[k * 1000..(k + 1) * 1000]);
            (k as u64 * 1000, b, bb)
        };
        let mut order = Vec::new();
        for k in 0..20 {
            order.push(2 * k);
            if k >= 3 {
                order.push(2 * (k - 3) + 1);
            }
        }
        order.extend([35, 37, 39]);
        for (n, &k) in order.iter().enumerate() {
            let (at, b, bb) = piece(k);
            s.insert(at, b, bb);
            // Never more runs than gaps plus one.
            assert!(s.runs.len() <= s.segments() + 1, "after {} pieces: {} runs", n + 1, s.runs.len());
        }
        assert_eq!(s.runs.len(), 1, "every gap filled: one run");
        assert_eq!(read_all(&mut s), data);
        // Descending order: each piece starts the run after it, nothing moves.
        let mut s = ChunkStore::default();
        JOIN_MOVES.with(|m| m.set(0));
        for k in (0..40).rev() {
            let (at, b, bb) = piece(k);
            s.insert(at, b, bb);
            assert_eq!(s.runs.len(), 1);
        }
        assert_eq!(JOIN_MOVES.with(std::cell::Cell::get), 0);
        assert_eq!(read_all(&mut s), data);
    }

    /// However a peer orders its pieces, joining moves the shorter list into the longer, so
    /// a piece moves at most log2(pieces) times: here every other piece first, then the gaps
    /// filled from the top down and from the middle out, each join between lists of equal
    /// length.
    #[test]
    fn joining_moves_each_piece_a_logarithmic_number_of_times() {
        let n = 1usize << 12;
        let mut s = ChunkStore::default();
        JOIN_MOVES.with(|m| m.set(0));
        // Bit-reversed order: each insert joins two runs of equal size once the lower bits
        // are in, the worst case for joining.
        let bits = n.trailing_zeros();
        for k in 0..n {
            let at = (k.reverse_bits() >> (usize::BITS - bits)) as u64 * 600;
            let (b, bb) = arena(&[7u8; 600]);
            s.insert(at, b, bb);
        }
        assert_eq!(s.runs.len(), 1);
        assert_eq!(s.readable(), n * 600);
        let moves = JOIN_MOVES.with(std::cell::Cell::get);
        assert!(moves <= n * bits as usize, "{moves} moves for {n} pieces");
        assert!(moves > 0, "the order did make runs join");
    }
}
