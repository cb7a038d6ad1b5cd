//! The reassembly buffer of a receive stream (and of the CRYPTO streams): data received at
//! arbitrary offsets, delivered in order.

use std::collections::VecDeque;

/// Reassembles stream data received at arbitrary offsets into an in-order byte stream.
///
/// One ring buffer covers the offsets from the next byte to read up to the highest byte
/// received. Every byte is written once, at its place, whether it arrives in order or not
/// (multipath delivers whole batches out of order), and read from there: one copy in, and
/// none out with [`RecvBuffer::read_with`]. Which bytes beyond the contiguous end arrived is
/// kept as a short list of ranges, or, once the peer cut the data into many pieces, as a
/// bitmap of one bit per offset (`Presence`). Memory therefore depends only on the span of
/// offsets held, never on how the peer cut the data: at most about 1.13 bytes per offset
/// spanned (plus the ring's growth slack), not a heap allocation per frame. Overlapping and
/// duplicate data is simply written again (overlaps are assumed identical, as RFC 9000 §2.2
/// allows). The span is bounded by flow control: the caller rejects data beyond the
/// advertised limit, and the connection-level credit charges every stream's highest offset.
#[derive(Debug, Default)]
pub struct RecvBuffer {
    /// Ring storage (its length is its capacity; bytes not marked received are stale).
    ring: Vec<u8>,
    /// Ring position of `read_offset`.
    head: usize,
    /// Offset of the first byte not yet read by the application.
    read_offset: u64,
    /// Every byte below this offset has been received.
    contiguous_end: u64,
    /// One past the highest offset received.
    max_end: u64,
    /// Bytes received beyond `contiguous_end`.
    presence: Presence,
}

impl RecvBuffer {
    /// An empty buffer starting at offset 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty buffer whose next byte to read is at `offset` (data below it counts as read).
    pub fn starting_at(offset: u64) -> Self {
        Self { read_offset: offset, contiguous_end: offset, max_end: offset, ..Self::default() }
    }

    /// Offset of the next byte the application will read.
    pub fn read_offset(&self) -> u64 {
        self.read_offset
    }

    /// End of the contiguous prefix: every byte below it has been received.
    pub fn contiguous_end(&self) -> u64 {
        self.contiguous_end
    }

    /// Bytes readable now.
    pub fn readable(&self) -> usize {
        (self.contiguous_end - self.read_offset) as usize
    }

    /// Bytes held (readable and out-of-order).
    pub fn buffered(&self) -> usize {
        self.readable() + self.presence.marked
    }

    /// Runs of out-of-order bytes held (for tests and diagnostics; scans a bitmap).
    pub fn segments(&self) -> usize {
        self.presence.runs()
    }

    /// Heap memory this buffer holds: the ring and the presence record.
    pub fn memory(&self) -> usize {
        self.ring.capacity() + self.presence.memory()
    }

    /// Stores `data` received at `offset`, ignoring parts already received or read.
    pub fn insert(&mut self, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        let start = offset.max(self.contiguous_end);
        if start >= end {
            return;
        }
        self.reserve(end);
        self.write_at(start, &data[(start - offset) as usize..]);
        self.max_end = self.max_end.max(end);
        if start == self.contiguous_end {
            self.contiguous_end = self.presence.advance(end);
        } else {
            self.presence.mark(self.contiguous_end, start, end);
        }
    }

    /// Makes the ring hold offsets up to `end`. It doubles (amortised appends) but never
    /// past twice what it must hold, so one far write does not cost twice its span.
    fn reserve(&mut self, end: u64) {
        let need = (end - self.read_offset) as usize;
        let cap = self.ring.len();
        if need <= cap {
            return;
        }
        let new_cap = (cap * 2).clamp(need, need * 2).max(64);
        let mut ring = vec![0u8; new_cap];
        // Move the held span [read_offset, max_end) to the front.
        let held = (self.max_end - self.read_offset) as usize;
        let first = held.min(cap - self.head);
        ring[..first].copy_from_slice(&self.ring[self.head..self.head + first]);
        ring[first..held].copy_from_slice(&self.ring[..held - first]);
        self.ring = ring;
        self.head = 0;
    }

    /// Copies `data` to its place (the ring holds it: see `reserve`).
    fn write_at(&mut self, offset: u64, data: &[u8]) {
        let cap = self.ring.len();
        let at = (self.head + (offset - self.read_offset) as usize) % cap;
        let first = data.len().min(cap - at);
        self.ring[at..at + first].copy_from_slice(&data[..first]);
        self.ring[..data.len() - first].copy_from_slice(&data[first..]);
    }

    /// Copies readable bytes into `out`; returns how many.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let mut at = 0;
        self.read_with(out.len(), &mut |piece| {
            out[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
        })
    }

    /// Hands up to `max` readable bytes to `f`, in order and in at most two pieces, without
    /// copying them; they are consumed. Returns how many.
    pub fn read_with(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let n = max.min(self.readable());
        if n == 0 {
            return 0;
        }
        let cap = self.ring.len();
        let first = n.min(cap - self.head);
        f(&self.ring[self.head..self.head + first]);
        if n > first {
            f(&self.ring[..n - first]);
        }
        self.head = (self.head + n) % cap;
        self.read_offset += n as u64;
        n
    }

    /// Discards everything and frees the memory.
    pub fn clear(&mut self) {
        self.read_offset = self.contiguous_end;
        self.max_end = self.contiguous_end;
        self.ring = Vec::new();
        self.head = 0;
        self.presence = Presence::default();
    }
}

/// Beyond this many separate out-of-order ranges, presence is kept as a bitmap.
const MAX_RANGES: usize = 128;

/// Which bytes beyond the contiguous end were received: sorted, disjoint, non-adjacent
/// ranges while there are few (multipath reordering makes one or two), a bitmap of one bit
/// per offset once the peer cut the data into many pieces (bounded memory whatever the
/// cut), and back to ranges once the bitmap empties.
#[derive(Debug, Default)]
struct Presence {
    ranges: Vec<(u64, u64)>,
    /// Bit `i` of `bits[k]` is offset `64 * (bits_base + k) + i`; in use when non-empty.
    bits: VecDeque<u64>,
    bits_base: u64,
    /// Bytes recorded.
    marked: usize,
}

impl Presence {
    /// Records `[from, to)` (above `cend`, the contiguous end) as received.
    fn mark(&mut self, cend: u64, from: u64, to: u64) {
        if self.bits.is_empty() {
            // Index of the first range ending at or after `from` (touching counts).
            let i = self.ranges.partition_point(|r| r.1 < from);
            let mut j = i;
            let (mut s, mut e) = (from, to);
            while j < self.ranges.len() && self.ranges[j].0 <= to {
                s = s.min(self.ranges[j].0);
                e = e.max(self.ranges[j].1);
                self.marked -= (self.ranges[j].1 - self.ranges[j].0) as usize;
                j += 1;
            }
            self.ranges.splice(i..j, [(s, e)]);
            self.marked += (e - s) as usize;
            if self.ranges.len() > MAX_RANGES {
                self.switch_to_bits(cend);
            }
            return;
        }
        self.mark_bits(from, to);
    }

    /// Switches from ranges to the bitmap.
    fn switch_to_bits(&mut self, cend: u64) {
        self.bits_base = cend / 64;
        let ranges = std::mem::take(&mut self.ranges);
        self.marked = 0;
        for (s, e) in ranges {
            self.mark_bits(s, e);
        }
    }

    fn mark_bits(&mut self, from: u64, to: u64) {
        let need = ((to - 1) / 64 + 1 - self.bits_base) as usize;
        if self.bits.len() < need {
            self.bits.resize(need, 0);
        }
        let mut i = from;
        while i < to {
            let (w, b) = (i / 64, i % 64);
            let n = (64 - b).min(to - i);
            let mask = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << b };
            let word = &mut self.bits[(w - self.bits_base) as usize];
            self.marked += (mask & !*word).count_ones() as usize;
            *word |= mask;
            i += n;
        }
    }

    /// Everything below `to` has arrived: forgets what is recorded below it, and returns
    /// the new contiguous end (`to`, or further over received bytes that join it).
    fn advance(&mut self, to: u64) -> u64 {
        if self.marked == 0 {
            return to;
        }
        if self.bits.is_empty() {
            let mut end = to;
            let mut k = 0;
            while k < self.ranges.len() && self.ranges[k].0 <= end {
                let (s, e) = self.ranges[k];
                self.marked -= (e - s) as usize;
                end = end.max(e);
                k += 1;
            }
            self.ranges.drain(..k);
            return end;
        }
        self.clear_bits(0, to);
        let mut end = to;
        loop {
            let (w, b) = (end / 64, end % 64);
            let Some(&word) = w.checked_sub(self.bits_base).and_then(|k| self.bits.get(k as usize)) else {
                break;
            };
            let run = u64::from((word >> b).trailing_ones()).min(64 - b);
            if run == 0 {
                break;
            }
            self.clear_bits(end, end + run);
            end += run;
            if b + run < 64 {
                break;
            }
        }
        // Words wholly below the end hold no bit any more.
        while self.bits_base < end / 64 && !self.bits.is_empty() {
            self.bits.pop_front();
            self.bits_base += 1;
        }
        if self.marked == 0 {
            self.bits = VecDeque::new();
        }
        end
    }

    /// Clears the bits of `[from, to)`, counting the set ones off `marked`.
    fn clear_bits(&mut self, from: u64, to: u64) {
        let mut i = from.max(self.bits_base * 64);
        let limit = to.min((self.bits_base + self.bits.len() as u64) * 64);
        while i < limit {
            let (w, b) = (i / 64, i % 64);
            let n = (64 - b).min(limit - i);
            let mask = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << b };
            let word = &mut self.bits[(w - self.bits_base) as usize];
            self.marked -= (mask & *word).count_ones() as usize;
            *word &= !mask;
            i += n;
        }
    }

    fn runs(&self) -> usize {
        if self.bits.is_empty() {
            return self.ranges.len();
        }
        let mut runs = 0;
        let mut prev = false;
        for &w in &self.bits {
            for b in 0..64 {
                let on = w >> b & 1 == 1;
                runs += usize::from(on && !prev);
                prev = on;
            }
        }
        runs
    }

    fn memory(&self) -> usize {
        self.ranges.capacity() * 16 + self.bits.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn overlapping_segments() {
        let data: Vec<u8> = (0..100u8).collect();
        let mut b = RecvBuffer::new();
        b.insert(50, &data[50..60]);
        b.insert(70, &data[70..80]);
        b.insert(45, &data[45..85]);
        assert_eq!(b.segments(), 1, "the overlaps merged into one run");
        assert_eq!(b.buffered(), 40);
        b.insert(0, &data[0..50]);
        assert_eq!(b.readable(), 85);
        assert_eq!(b.segments(), 0);
        let mut out = [0u8; 100];
        assert_eq!(b.read(&mut out), 85);
        assert_eq!(&out[..85], &data[..85]);
        b.insert(10, &data[10..90]);
        assert_eq!(b.readable(), 5);
    }

    /// Deterministic xorshift for the adversarial patterns below.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn one_byte_fragments_cost_the_span_not_a_box_each() {
        // Every other byte of a 64 KiB window, highest first: 32768 fragments.
        let window = 64 * 1024;
        let data: Vec<u8> = (0..window).map(|i| i as u8).collect();
        let mut b = RecvBuffer::new();
        for off in (1..window).rev().step_by(2) {
            b.insert(off as u64, &data[off..off + 1]);
        }
        assert_eq!(b.segments(), window / 2);
        assert_eq!(b.buffered(), window / 2);
        assert!(b.memory() <= window * 5 / 4, "memory {} for a window of {window}", b.memory());
        // Duplicates and overlaps add nothing.
        b.insert(1, &data[1..2]);
        b.insert(1019, &data[1019..1029]);
        assert_eq!(b.buffered(), window / 2 + 5);
        b.insert(0, &data[..1]);
        for off in (2..window).step_by(2) {
            b.insert(off as u64, &data[off..off + 1]);
        }
        let mut out = vec![0u8; window];
        assert_eq!(b.read(&mut out), window);
        assert_eq!(out, data);
        assert_eq!((b.segments(), b.buffered()), (0, 0));
    }

    #[test]
    fn batches_out_of_order_read_back_in_place() {
        // Two paths' GSO batches arriving in the wrong order, as round-robin multipath
        // delivers them: each byte is written once and read where it lies.
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 13) as u8).collect();
        let mut b = RecvBuffer::new();
        for pair in data.chunks(2 * 16 * 1400).enumerate() {
            let (k, chunk) = pair;
            let base = k * 2 * 16 * 1400;
            let half = chunk.len().min(16 * 1400);
            for (i, pkt) in chunk[half..].chunks(1400).enumerate() {
                b.insert((base + half + i * 1400) as u64, pkt);
            }
            for (i, pkt) in chunk[..half].chunks(1400).enumerate() {
                b.insert((base + i * 1400) as u64, pkt);
            }
        }
        let mut out = Vec::new();
        b.read_with(usize::MAX, &mut |p| out.extend_from_slice(p));
        assert_eq!(out, data);
        assert_eq!(b.buffered(), 0);
    }

    proptest! {
        /// Whatever the fragment pattern within the window (tiny, overlapping, duplicated,
        /// any order), accounted memory stays within a small multiple of the window and the
        /// bytes come out exact.
        #[test]
        fn memory_bounded_by_window(
            window in 1usize..40_000,
            seed in 1u64..u64::MAX,
            max_len in 1usize..64,
            frames in 1usize..3000,
        ) {
            let data: Vec<u8> = (0..window).map(|i| (i * 31) as u8).collect();
            let mut state = seed;
            let mut b = RecvBuffer::new();
            let mut peak = 0;
            for _ in 0..frames {
                let s = (next(&mut state) % window as u64) as usize;
                let e = (s + 1 + (next(&mut state) % max_len as u64) as usize).min(window);
                b.insert(s as u64, &data[s..e]);
                peak = peak.max(b.memory());
            }
            // Fill whatever is missing, back to front.
            for s in (0..window).rev().step_by(97) {
                let e = (s + 97).min(window);
                b.insert(s as u64, &data[s..e]);
                peak = peak.max(b.memory());
            }
            let mut s = 0;
            while s < window {
                let e = (s + 97).min(window);
                b.insert(s as u64, &data[s..e]);
                s = e;
            }
            // The ring and the bitmap scale with the window; the range list is capped.
            prop_assert!(peak <= 3 * window + 2 * 16 * (MAX_RANGES + 1) + 1024, "peak {} for a window of {}", peak, window);
            let mut out = vec![0u8; window];
            prop_assert_eq!(b.read(&mut out), window);
            prop_assert_eq!(out, data);
            prop_assert_eq!(b.buffered(), 0);
        }
    }

    proptest! {
        /// Random chunking, reordering and duplication always reassembles byte-exact, and
        /// the bytes held never exceed the distinct bytes above the read offset.
        #[test]
        fn reassembly(
            data in proptest::collection::vec(any::<u8>(), 1..2000),
            cuts in proptest::collection::vec((any::<prop::sample::Index>(), 1usize..300), 1..60),
            order in any::<prop::sample::Index>(),
            read_sizes in proptest::collection::vec(1usize..500, 1..20),
        ) {
            let n = data.len();
            let mut chunks: Vec<(usize, usize)> =
                cuts.iter().map(|(i, len)| { let s = i.index(n); (s, (s + len).min(n)) }).collect();
            // Guarantee coverage with a second, sequential chunking.
            let mut s = 0;
            while s < n { let e = (s + 137).min(n); chunks.push((s, e)); s = e; }
            // Deterministic shuffle.
            let rot = order.index(chunks.len());
            chunks.rotate_left(rot);
            for i in (1..chunks.len()).step_by(2) { chunks.swap(i, i - 1); }
            let mut b = RecvBuffer::new();
            let mut out = Vec::new();
            let mut tmp = [0u8; 500];
            let mut r = 0;
            for (i, &(s, e)) in chunks.iter().enumerate() {
                b.insert(s as u64, &data[s..e]);
                prop_assert!(b.buffered() <= n - b.read_offset() as usize);
                if i % 3 == 0 {
                    let k = b.read(&mut tmp[..read_sizes[r % read_sizes.len()]]);
                    r += 1;
                    out.extend_from_slice(&tmp[..k]);
                }
            }
            loop {
                let k = b.read(&mut tmp);
                if k == 0 { break; }
                out.extend_from_slice(&tmp[..k]);
            }
            prop_assert_eq!(out, data);
            prop_assert_eq!(b.buffered(), 0);
        }
    }
}
