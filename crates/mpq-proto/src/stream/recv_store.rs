//! Where a receive stream keeps its data: as reference-counted chunks
//! ([`super::chunks::ChunkStore`]) while the peer sends sensible pieces, in the compact ring
//! ([`RecvBuffer`]) while it does not.
//!
//! Chunks let the one copy of each received byte happen where the packet is opened, on the
//! path's thread and outside the connection's lock, and let the application take the data
//! without another copy. Their cost grows with the number of pieces and with the buffers the
//! pieces keep alive, both of which the peer chooses; the ring's cost depends only on the span
//! of offsets held. So a stream whose chunks become wasteful
//! ([`ChunkStore::is_wasteful`]) moves its data into a ring and copies what arrives from then
//! on, and goes back to chunks once the ring is empty. What a peer can make a stream hold is
//! therefore the ring's bound (about 1.13 bytes per offset spanned, flow control bounding the
//! span) or the chunks' (at most 64 chunks averaging under 512 bytes, or twice the bytes held
//! plus 256 KiB of buffers), whichever mode it is in.

use bytes::Bytes;

use super::chunks::{Backing, ChunkStore};
use super::reassembly::RecvBuffer;

/// Stream data as a received frame carries it.
#[derive(Debug, Clone)]
pub enum StreamData<'a> {
    /// Bytes in a packet being processed: copied if kept.
    Slice(&'a [u8]),
    /// A slice of a buffer the data was already copied into (when its packet was opened),
    /// kept as it is.
    Shared(Bytes, Backing),
    /// This many bytes, accounted for now and stored later with the frames of the same
    /// stream that follow them in the batch ([`crate::stream::Streams::on_stream_piece`]).
    Deferred(usize),
}

impl StreamData<'_> {
    /// The bytes (none for [`StreamData::Deferred`]).
    pub fn as_slice(&self) -> &[u8] {
        match self {
            StreamData::Slice(s) => s,
            StreamData::Shared(b, _) => b,
            StreamData::Deferred(_) => &[],
        }
    }

    /// Their number.
    pub fn len(&self) -> usize {
        match self {
            StreamData::Deferred(n) => *n,
            d => d.as_slice().len(),
        }
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Debug)]
enum Mode {
    Chunks(ChunkStore),
    Ring(RecvBuffer),
}

/// A receive stream's reassembly: data received at arbitrary offsets, delivered in order.
#[derive(Debug)]
pub struct RecvStore {
    mode: Mode,
}

impl Default for RecvStore {
    fn default() -> Self {
        Self { mode: Mode::Chunks(ChunkStore::default()) }
    }
}

impl RecvStore {
    /// An empty store starting at offset 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Offset of the next byte the application will read.
    pub fn read_offset(&self) -> u64 {
        match &self.mode {
            Mode::Chunks(c) => c.read_offset(),
            Mode::Ring(r) => r.read_offset(),
        }
    }

    /// Every byte below this offset has been received.
    pub fn contiguous_end(&self) -> u64 {
        match &self.mode {
            Mode::Chunks(c) => c.contiguous_end(),
            Mode::Ring(r) => r.contiguous_end(),
        }
    }

    /// Bytes readable now.
    pub fn readable(&self) -> usize {
        match &self.mode {
            Mode::Chunks(c) => c.readable(),
            Mode::Ring(r) => r.readable(),
        }
    }

    /// Bytes held (readable and out of order).
    pub fn buffered(&self) -> usize {
        match &self.mode {
            Mode::Chunks(c) => c.buffered(),
            Mode::Ring(r) => r.buffered(),
        }
    }

    /// Runs of out-of-order bytes held (tests and diagnostics).
    pub fn segments(&self) -> usize {
        match &self.mode {
            Mode::Chunks(c) => c.segments(),
            Mode::Ring(r) => r.segments(),
        }
    }

    /// Heap memory held.
    pub fn memory(&self) -> usize {
        match &self.mode {
            Mode::Chunks(c) => c.memory(),
            Mode::Ring(r) => r.memory(),
        }
    }

    /// True while the data is kept in the ring (the peer's pieces made chunks wasteful).
    pub fn is_compacted(&self) -> bool {
        matches!(self.mode, Mode::Ring(_))
    }

    /// Stores `data` received at `offset`, ignoring what was already received or read.
    pub fn insert(&mut self, offset: u64, data: StreamData<'_>) {
        if let Mode::Ring(r) = &self.mode {
            if r.buffered() == 0 {
                // Drained: back to chunks.
                let at = r.read_offset();
                self.mode = Mode::Chunks(ChunkStore::starting_at(at));
            }
        }
        if let StreamData::Deferred(_) = data {
            return;
        }
        match &mut self.mode {
            Mode::Ring(r) => r.insert(offset, data.as_slice()),
            Mode::Chunks(c) => {
                match data {
                    StreamData::Shared(bytes, backing) => c.insert(offset, bytes, backing),
                    StreamData::Deferred(_) => {}
                    StreamData::Slice(s) => {
                        // Copy only what is new beyond the contiguous end.
                        let skip = c.contiguous_end().saturating_sub(offset).min(s.len() as u64) as usize;
                        if skip < s.len() {
                            let own = Bytes::copy_from_slice(&s[skip..]);
                            let backing = Backing::exact(&own);
                            c.insert(offset + skip as u64, own, backing);
                        }
                    }
                }
                if c.is_wasteful() {
                    self.compact();
                }
            }
        }
    }

    /// Moves the chunks into a ring.
    fn compact(&mut self) {
        let Mode::Chunks(c) = &mut self.mode else { return };
        let waste = c.waste();
        let mut ring = RecvBuffer::starting_at(c.read_offset());
        for (at, data) in c.drain() {
            ring.insert(at, &data);
        }
        tracing::debug!(
            held = ring.buffered(),
            ?waste,
            "stream data moved to a ring: the peer's pieces made chunks wasteful"
        );
        self.mode = Mode::Ring(ring);
    }

    /// Hands up to `max` readable bytes to `f`, in order, where they lie; they are consumed.
    /// Returns how many.
    pub fn read_with(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        match &mut self.mode {
            Mode::Chunks(c) => c.read_with(max, f),
            Mode::Ring(r) => r.read_with(max, f),
        }
    }

    /// Takes up to `max` readable bytes as one buffer: without a copy while the data is kept
    /// as chunks, copied out of the ring otherwise. None if nothing is readable.
    pub fn read_chunk(&mut self, max: usize) -> Option<Bytes> {
        match &mut self.mode {
            Mode::Chunks(c) => c.read_chunk(max),
            Mode::Ring(r) => {
                let n = max.min(r.readable());
                if n == 0 {
                    return None;
                }
                let mut out = Vec::with_capacity(n);
                r.read_with(n, &mut |p| out.extend_from_slice(p));
                Some(Bytes::from(out))
            }
        }
    }

    /// Discards everything and frees the memory.
    pub fn clear(&mut self) {
        match &mut self.mode {
            Mode::Chunks(c) => c.clear(),
            Mode::Ring(r) => {
                r.clear();
                let at = r.read_offset();
                self.mode = Mode::Chunks(ChunkStore::starting_at(at));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn shared(data: &[u8]) -> StreamData<'static> {
        let b = Bytes::copy_from_slice(data);
        let backing = Backing::exact(&b);
        StreamData::Shared(b, backing)
    }

    #[test]
    fn tiny_pieces_move_to_the_ring_and_back_once_read() {
        let data: Vec<u8> = (0..4000u32).map(|i| (i * 7) as u8).collect();
        let mut s = RecvStore::new();
        for off in (1..200).step_by(2) {
            s.insert(off as u64, StreamData::Slice(&data[off..off + 1]));
        }
        assert!(s.is_compacted(), "100 one-byte pieces are kept in the ring");
        assert_eq!(s.buffered(), 100);
        for off in (0..200).step_by(2) {
            s.insert(off as u64, shared(&data[off..off + 1]));
        }
        let mut out = Vec::new();
        s.read_with(usize::MAX, &mut |p| out.extend_from_slice(p));
        assert_eq!(out, &data[..200]);
        // Empty: the next data goes to chunks again.
        s.insert(200, shared(&data[200..4000]));
        assert!(!s.is_compacted());
        assert_eq!(&s.read_chunk(usize::MAX).expect("data")[..], &data[200..4000]);
    }

    proptest! {
        /// Random cuts, order, duplication and reads, with slices and shared buffers mixed,
        /// and tiny pieces that force the ring and back: always byte-exact, and the bytes held
        /// never exceed the distinct bytes above the read offset.
        #[test]
        fn reassembles_exactly_in_either_mode(
            data in proptest::collection::vec(any::<u8>(), 1..3000),
            cuts in proptest::collection::vec((any::<prop::sample::Index>(), 1usize..400, any::<bool>()), 1..120),
            order in any::<prop::sample::Index>(),
            read_sizes in proptest::collection::vec(1usize..700, 1..20),
        ) {
            let n = data.len();
            let mut pieces: Vec<(usize, usize, bool)> =
                cuts.iter().map(|(i, len, sh)| { let s = i.index(n); (s, (s + len).min(n), *sh) }).collect();
            let mut s = 0;
            while s < n { let e = (s + 211).min(n); pieces.push((s, e, s % 2 == 0)); s = e; }
            let rot = order.index(pieces.len());
            pieces.rotate_left(rot);
            for i in (1..pieces.len()).step_by(2) { pieces.swap(i, i - 1); }
            // Shared pieces are slices of one buffer, as a path's arena hands them out.
            let whole = Bytes::copy_from_slice(&data);
            let wb = Backing::exact(&whole);
            let mut store = RecvStore::new();
            let mut out = Vec::new();
            let mut r = 0;
            for (i, &(s, e, sh)) in pieces.iter().enumerate() {
                let d = if sh { StreamData::Shared(whole.slice(s..e), wb) } else { StreamData::Slice(&data[s..e]) };
                store.insert(s as u64, d);
                prop_assert!(store.buffered() <= n - store.read_offset() as usize);
                if i % 3 == 0 {
                    let want = read_sizes[r % read_sizes.len()];
                    r += 1;
                    if i % 2 == 0 {
                        if let Some(c) = store.read_chunk(want) { out.extend_from_slice(&c); }
                    } else {
                        store.read_with(want, &mut |p| out.extend_from_slice(p));
                    }
                }
            }
            while let Some(c) = store.read_chunk(usize::MAX) { out.extend_from_slice(&c); }
            prop_assert_eq!(out, data);
            prop_assert_eq!(store.buffered(), 0);
            // Nothing held: no buffer pinned, only the bounded bookkeeping of an idle store.
            prop_assert!(
                store.memory() <= crate::stream::chunks::IDLE_MEMORY_MAX,
                "memory {} with nothing held (ring: {})", store.memory(), store.is_compacted()
            );
        }
    }
}
