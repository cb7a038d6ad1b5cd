//! The buffers a path copies its received stream data into (issue C2).
//!
//! A path opening a run of datagrams on its own thread, outside the connection's lock, copies
//! the data of each packet's STREAM frames out of the datagram into its arena; the receive
//! stream keeps slices of the arena's buffers ([`crate::stream::StreamData::Shared`]) instead
//! of copying the bytes into its reassembly buffer under the lock, and the application can
//! take them without another copy. The arena belongs to the path, so it travels with the path
//! to its thread.
//!
//! A run's data goes into a plain buffer sized for the run (the bytes of its datagrams,
//! rounded up to one of a few sizes, so at most twice what it needs; a run larger than the
//! largest size goes on in another), and the buffer belongs to that run alone: what a buffer keeps alive beyond its data is bounded by its run, which the
//! receive stream's accounting relies on (`stream/chunks.rs`). While the run is opened a frame
//! only notes where its bytes lie ([`RecvArena::take`]); when the run ends the buffer becomes
//! one shared, reference-counted [`Bytes`] ([`RecvArena::finish`]) that the run's frames
//! share ([`BufferSlice`]). So a packet costs no atomic operation on a count the application's
//! thread also changes as it drops what it read (cut per packet from a `BytesMut`, every
//! packet took one), and the count lives in a block of its own ([`RunBuffer`]'s alignment),
//! not next to the counts of older buffers.
//!
//! Buffers are used again rather than freed: with a thread per path the application frees
//! what a path's thread allocated, and glibc's allocator then handed the memory back to the
//! kernel and faulted it in again for the next buffer, a third of the receive work in
//! `mpq bench receive`. So a buffer whose last slice is dropped goes to a process-wide pool
//! (at most [`POOL_MAX`] buffers of each size, 17 MiB in all), from which later runs take it.
//! A path holds no buffer between runs, so idle connections hold none. The pool only
//! recycles memory: what a connection does never depends on it.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Mutex;

use bytes::Bytes;

use crate::stream::{Backing, BufferSlice};

/// The sizes of pooled buffers. The largest holds a GRO batch of 64 segments of 1.45 kB
/// (93 kB) and stays under glibc's default threshold for serving an allocation by mmap
/// (128 KiB), so that a buffer that has to be allocated comes from the heap.
pub(crate) const SIZES: [usize; 4] = [12 * 1024, 24 * 1024, 48 * 1024, 96 * 1024];
/// Buffers of each size waiting in the pool at most (index as [`SIZES`]): the largest
/// size's limit covers a 24 MiB receive window in flight (an application that reads only now
/// and then: `mpq bench receive` reads once a round).
const POOL_MAX: [usize; SIZES.len()] = [128, 128, 128, 384];
/// A run bringing less than this gets a buffer of its own size, not a pooled one.
const SMALL_RUN: usize = 4 * 1024;

/// Free buffers, by size (index as [`SIZES`]), empty and ready for a run.
#[derive(Debug)]
pub(crate) struct Pool([Mutex<VecDeque<Vec<u8>>>; SIZES.len()]);

/// The process's pool.
static POOL: Pool = Pool::new();

impl Pool {
    const fn new() -> Self {
        Self([const { Mutex::new(VecDeque::new()) }; SIZES.len()])
    }

    /// A free buffer of size `SIZES[k]`: the one freed last, the likeliest to be still in a
    /// cache. (Its lines are asked for ahead of the copies anyway: [`RecvArena::take`].)
    fn take(&self, k: usize) -> Option<Vec<u8>> {
        self.0[k].lock().ok()?.pop_back()
    }

    /// Keeps `buf` for later runs if it has one of the pooled sizes and there is room.
    fn put(&self, mut buf: Vec<u8>) {
        let Some(k) = SIZES.iter().position(|&s| s == buf.capacity()) else { return };
        buf.clear();
        if let Ok(mut pool) = self.0[k].lock() {
            if pool.len() < POOL_MAX[k] {
                pool.push_back(buf);
            }
        }
    }

    /// Buffers waiting, over all sizes (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.iter().map(|p| p.lock().map_or(0, |p| p.len())).sum()
    }
}

/// A run's buffer once its data is written, owned by the [`Bytes`] its frames share: back
/// to its pool when the last of them is dropped.
///
/// Aligned to two cache lines (the prefetcher pulls lines in pairs) so that the reference
/// count `Bytes::from_owner` keeps in front of it shares its lines with nothing else.
#[repr(align(128))]
struct RunBuffer {
    buf: Vec<u8>,
    pool: &'static Pool,
}

impl AsRef<[u8]> for RunBuffer {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for RunBuffer {
    fn drop(&mut self) {
        self.pool.put(std::mem::take(&mut self.buf));
    }
}

/// Where a frame's data lies in its run: which of the run's buffers, and where in it.
pub(crate) type InRun = (usize, Range<usize>);

/// Stream data copied out of a path's datagrams.
#[derive(Debug)]
pub(crate) struct RecvArena {
    /// The buffer the current run's data goes into.
    cur: Option<Vec<u8>>,
    /// The current run's buffers filled before it, each shared by its frames' slices.
    done: Vec<(Bytes, Backing)>,
    pool: &'static Pool,
    /// Offset in `cur` up to which its lines were asked for ahead of the copies.
    prefetched: usize,
}

impl Default for RecvArena {
    fn default() -> Self {
        Self { cur: None, done: Vec::new(), pool: &POOL, prefetched: 0 }
    }
}

impl RecvArena {
    /// Copies `data` into the current run's buffer and returns where it lies: right after the
    /// previous frame's data when the buffer has room for it (so that the receive stream can
    /// join consecutive frames' data without a copy), else at the start of another buffer.
    /// `hint` is how much more data the run may bring (the bytes of the datagrams not opened
    /// yet, this one included): a buffer taken anew is sized for it.
    pub(crate) fn take(&mut self, data: &[u8], hint: usize) -> InRun {
        if self.cur.as_ref().is_some_and(|b| b.capacity() - b.len() < data.len()) {
            // Full: the next buffer. (Never grown: a copy of everything so far, and memory
            // the pool's sizes do not fit.)
            if let Some(full) = self.cur.take() {
                self.done.push(self.freeze(full));
            }
            self.prefetched = 0;
        }
        let pool = self.pool;
        let buf = self.cur.get_or_insert_with(|| Self::fresh(pool, hint.max(data.len()).max(1)));
        debug_assert!(buf.capacity() - buf.len() >= data.len());
        let start = buf.len();
        buf.extend_from_slice(data);
        // The next two pieces' place, asked for while the next packets are decrypted: the
        // buffer was written a window of data ago, so its lines are rarely in this core's
        // cache, and each store would wait for its line (`prefetch.rs`).
        let want = (buf.len() + 2 * data.len()).min(buf.capacity());
        crate::prefetch::spare_lines_up_to(buf, &mut self.prefetched, want);
        (self.done.len(), start..buf.len())
    }

    /// A buffer for `want` bytes: pooled (the smallest size that holds them, or the largest)
    /// when the run is large, else its own size.
    fn fresh(pool: &Pool, want: usize) -> Vec<u8> {
        if want < SMALL_RUN {
            return Vec::with_capacity(want);
        }
        let k = SIZES.iter().position(|&s| s >= want).unwrap_or(SIZES.len() - 1);
        pool.take(k).unwrap_or_else(|| Vec::with_capacity(SIZES[k]))
    }

    /// A filled buffer as the shared `Bytes` its frames' slices keep alive.
    fn freeze(&self, buf: Vec<u8>) -> (Bytes, Backing) {
        let backing = Backing { id: buf.as_ptr() as usize, len: buf.capacity() };
        (Bytes::from_owner(RunBuffer { buf, pool: self.pool }), backing)
    }

    /// The run ended: `attach` gets its buffers, in the order [`InRun`] numbers them (not
    /// called if the run took nothing). The path holds no buffer until the next run.
    pub(crate) fn finish(&mut self, attach: impl FnOnce(&[(Bytes, Backing)])) {
        if let Some(last) = self.cur.take() {
            self.done.push(self.freeze(last));
        }
        self.prefetched = 0;
        if !self.done.is_empty() {
            attach(&self.done);
            self.done.clear();
        }
    }

    /// A frame's data as a slice of its run's buffers (`bufs`: what [`RecvArena::finish`]
    /// gave; `at`: what [`RecvArena::take`] gave). None if `at` names no buffer (a bug).
    pub(crate) fn slice(bufs: &[(Bytes, Backing)], (k, range): InRun) -> Option<BufferSlice> {
        let (buf, backing) = bufs.get(k)?;
        debug_assert!(range.end <= buf.len());
        Some(BufferSlice { buf: buf.clone(), range, backing: *backing })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arena() -> RecvArena {
        let pool: &'static Pool = Box::leak(Box::new(Pool::new()));
        RecvArena { cur: None, done: Vec::new(), pool, prefetched: 0 }
    }

    /// The run's buffers.
    fn finish(a: &mut RecvArena) -> Vec<(Bytes, Backing)> {
        let mut out = Vec::new();
        a.finish(|bufs| out = bufs.to_vec());
        out
    }

    /// The bytes of `at` in the run's buffers.
    fn bytes(bufs: &[(Bytes, Backing)], at: InRun) -> Bytes {
        RecvArena::slice(bufs, at).expect("in a buffer").into_bytes()
    }

    #[test]
    fn a_run_shares_one_buffer_sized_for_it() {
        let mut a = arena();
        let x = a.take(&[1; 1000], 3000);
        let y = a.take(&[2; 1500], 2000);
        assert_eq!((x.clone(), y.clone()), ((0, 0..1000), (0, 1000..2500)), "one after the other");
        let run = finish(&mut a);
        assert_eq!(run.len(), 1);
        assert_eq!(run[0].1.len, 3000, "a small run's buffer is its own size");
        let (sx, sy) = (RecvArena::slice(&run, x).expect("x"), RecvArena::slice(&run, y).expect("y"));
        assert!(sx.is_continued_by(&sy), "consecutive data of one buffer");
        assert!(!sy.is_continued_by(&sx));
        assert_eq!(&sx.into_bytes()[..], &[1u8; 1000][..]);
        assert_eq!(&sy.into_bytes()[..], &[2u8; 1500][..]);
        assert!(RecvArena::slice(&run, (1, 0..1)).is_none(), "no such buffer");
        // A large run: the smallest pooled size that holds it, or the largest.
        a.take(&[4; 1000], 20_000);
        assert_eq!(finish(&mut a)[0].1.len, 24 * 1024);
        a.take(&[4; 1000], 200_000);
        assert_eq!(finish(&mut a)[0].1.len, 96 * 1024, "larger than every size: the largest");
    }

    #[test]
    fn a_run_larger_than_its_buffer_goes_on_in_another() {
        let mut a = arena();
        let data: Vec<Vec<u8>> = (0..80u8).map(|k| vec![k; 1400]).collect();
        let ats: Vec<InRun> = data
            .iter()
            .map(|d| {
                let at = a.take(d, 80 * 1400);
                let cur = a.cur.as_ref().expect("a buffer");
                // Asked ahead for two more pieces, never past the buffer.
                assert_eq!(a.prefetched, (cur.len() + 2 * 1400).min(cur.capacity()));
                at
            })
            .collect();
        let run = finish(&mut a);
        assert_eq!(a.prefetched, 0, "the next run's buffer starts afresh");
        assert_eq!(run.len(), 2, "112 kB in 96 KiB buffers");
        assert!(run.iter().all(|(b, k)| k.len == 96 * 1024 && b.len() <= k.len), "never grown");
        // 70 frames of 1400 bytes fill 98 000 of 98 304 bytes.
        assert_eq!(ats[69], (0, 69 * 1400..70 * 1400));
        assert_eq!(ats[70], (1, 0..1400), "the frame that did not fit starts the next buffer");
        for (d, at) in data.iter().zip(ats) {
            assert_eq!(&bytes(&run, at)[..], &d[..]);
        }
        let (a69, a70) = (RecvArena::slice(&run, (0, 69 * 1400..70 * 1400)), RecvArena::slice(&run, (1, 0..1400)));
        assert!(!a69.expect("69").is_continued_by(&a70.expect("70")), "another buffer: not joined");
    }

    #[test]
    fn a_buffer_goes_back_to_the_pool_with_its_last_slice() {
        let mut a = arena();
        let r = a.take(&[1; 60_000], 90_000);
        let run = finish(&mut a);
        assert_eq!(run[0].1.len, 96 * 1024);
        let x = bytes(&run, r);
        drop(run);
        assert_eq!(a.pool.len(), 0, "a slice is alive");
        // The next run gets another buffer.
        let r2 = a.take(&[2; 20_000], 90_000);
        let run2 = finish(&mut a);
        assert_ne!(run2[0].1.id, x.as_ptr() as usize);
        let y = bytes(&run2, r2);
        drop(run2);
        let first = x.as_ptr() as usize;
        drop(x);
        assert_eq!(a.pool.len(), 1, "the first buffer is free");
        // Used again, from its start.
        let r3 = a.take(&[4; 90_000], 90_000);
        let run3 = finish(&mut a);
        assert_eq!(run3[0].1.id, first);
        assert_eq!(&bytes(&run3, r3)[..], &[4u8; 90_000][..]);
        assert_eq!(&y[..], &[2u8; 20_000][..]);
        drop(run3);
        drop(y);
        assert_eq!(a.pool.len(), 2);
        // A small run's buffer is freed, not pooled.
        a.take(&[5; 100], 100);
        drop(finish(&mut a));
        assert_eq!(a.pool.len(), 2);
    }

    #[test]
    fn a_path_holds_no_buffer_between_runs() {
        let mut a = arena();
        assert!(finish(&mut a).is_empty(), "a run that took nothing has no buffer");
        let y = a.take(&[2; 100], 100);
        let run = finish(&mut a);
        assert_eq!(run[0].1.len, 100);
        assert_eq!(&bytes(&run, y)[..], &[2u8; 100][..]);
        assert!(a.cur.is_none() && a.done.is_empty());
    }
}
