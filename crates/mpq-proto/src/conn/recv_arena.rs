//! The buffers a path copies its received stream data into (issue C2).
//!
//! A path opening a run of datagrams on its own thread, outside the connection's lock, copies
//! the data of each packet's STREAM frames out of the datagram into its arena; the receive
//! stream keeps the slices ([`crate::stream::StreamData::Shared`]) instead of copying the
//! bytes into its reassembly buffer under the lock, and the application can take them without
//! another copy. The arena belongs to the path, so it travels with the path to its thread.
//!
//! A run's data goes into one buffer sized for the run (the bytes of its datagrams, rounded
//! up to one of a few sizes, so at most twice what it needs), and the buffer belongs to that
//! run alone: what a buffer keeps alive beyond its data is bounded by its run, which the
//! receive stream's accounting relies on (`stream/chunks.rs`). Buffers are used again
//! rather than freed: with a thread per path the application frees what a path's thread
//! allocated, and glibc's allocator then handed the memory back to the kernel and faulted it
//! in again for the next buffer, a third of the receive work in `mpq bench receive`. So a
//! buffer leaves its run through a process-wide pool (at most [`POOL_MAX`] buffers of each
//! size, 17 MiB in all), and a later run takes one whose slices have all been dropped,
//! reused in place (`BytesMut::try_reclaim`). A path holds no buffer between runs, so idle
//! connections hold none. The pool only recycles memory: what a connection does never
//! depends on it.

use std::sync::Mutex;

use bytes::BytesMut;

use crate::stream::Backing;

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

/// Buffers between runs, by size: each the rest of a buffer whose taken part was split off,
/// with its identity, waiting for its slices to go.
#[derive(Debug)]
pub(crate) struct Pool([Mutex<Vec<(BytesMut, Backing)>>; SIZES.len()]);

/// The process's pool.
static POOL: Pool = Pool::new();

impl Pool {
    const fn new() -> Self {
        Self([const { Mutex::new(Vec::new()) }; SIZES.len()])
    }

    /// A pooled buffer of size `SIZES[k]` whose slices are all gone, reclaimed whole.
    fn take(&self, k: usize) -> Option<(BytesMut, Backing)> {
        let mut pool = self.0[k].lock().ok()?;
        // Oldest first: the likeliest to have been read.
        let i = pool.iter_mut().position(|(buf, _)| buf.try_reclaim(SIZES[k]))?;
        Some(pool.swap_remove(i))
    }

    /// Keeps a buffer of size `SIZES[k]` for later runs, if there is room.
    fn put(&self, k: usize, buf: BytesMut, backing: Backing) {
        if let Ok(mut pool) = self.0[k].lock() {
            if pool.len() < POOL_MAX[k] {
                pool.push((buf, backing));
            }
        }
    }
}

/// Stream data copied out of a path's datagrams.
#[derive(Debug)]
pub(crate) struct RecvArena {
    /// The rest of the current buffer and the buffer's identity.
    cur: Option<(BytesMut, Backing)>,
    pool: &'static Pool,
}

impl Default for RecvArena {
    fn default() -> Self {
        Self { cur: None, pool: &POOL }
    }
}

impl RecvArena {
    /// Copies `data` into the arena and returns it as a buffer of its own, a slice of the
    /// arena's current one, right after the previous slice when the buffer had room (so the
    /// receive stream can join consecutive slices without a copy: `BytesMut::unsplit`).
    /// `hint` is how much more data the run may bring (the bytes of the datagrams not opened
    /// yet, this one included): a buffer taken anew is sized for it.
    pub(crate) fn take(&mut self, data: &[u8], hint: usize) -> (BytesMut, Backing) {
        if self.cur.as_ref().is_some_and(|(b, _)| b.capacity() < data.len()) {
            self.release();
        }
        let pool = self.pool;
        let (buf, backing) = self.cur.get_or_insert_with(|| Self::fresh(pool, hint.max(data.len()).max(1)));
        // Within the buffer's room: growing it would move the data off the buffer `backing`
        // names.
        debug_assert!(buf.capacity() >= data.len());
        buf.extend_from_slice(data);
        (buf.split(), *backing)
    }

    /// A buffer for `want` bytes: pooled (the smallest size that holds them, or the largest)
    /// when the run is large, else its own size.
    fn fresh(pool: &Pool, want: usize) -> (BytesMut, Backing) {
        let buf = if want < SMALL_RUN {
            BytesMut::with_capacity(want)
        } else {
            let k = SIZES.iter().position(|&s| s >= want).unwrap_or(SIZES.len() - 1);
            if let Some(found) = pool.take(k) {
                return found;
            }
            BytesMut::with_capacity(SIZES[k])
        };
        let backing = Backing { id: buf.as_ptr() as usize, len: buf.capacity() };
        (buf, backing)
    }

    /// The run ended: the current buffer goes to the pool, to be used again once its slices
    /// are gone (or is dropped, its memory freed with its last slice), so that the path
    /// holds none while it receives nothing.
    pub(crate) fn release(&mut self) {
        let Some((buf, backing)) = self.cur.take() else { return };
        if let Some(k) = SIZES.iter().position(|&s| s == backing.len) {
            self.pool.put(k, buf, backing);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arena() -> RecvArena {
        let pool: &'static Pool = Box::leak(Box::new(Pool::new()));
        RecvArena { cur: None, pool }
    }

    #[test]
    fn a_run_shares_one_buffer_sized_for_it() {
        let mut a = arena();
        let (x, bx) = a.take(&[1; 1000], 3000);
        let (y, by) = a.take(&[2; 1500], 2000);
        assert_eq!((&x[..], &y[..]), (&[1u8; 1000][..], &[2u8; 1500][..]));
        assert_eq!(bx, by, "both slices of the run's buffer");
        assert_eq!(bx.len, 3000, "a small run's buffer is its own size");
        // The buffer cannot hold this one, and x and y are alive: another one.
        let (z, bz) = a.take(&[3; 1000], 1000);
        assert_ne!(bz.id, bx.id);
        assert_eq!(&z[..], &[3u8; 1000][..]);
        // The slices do not move when the arena moves on.
        assert_eq!(&x[..], &[1u8; 1000][..]);
        assert_eq!(&y[..], &[2u8; 1500][..]);
        a.release();
        // A large run: the smallest pooled size that holds it.
        let (_, bw) = a.take(&[4; 1000], 20_000);
        assert_eq!(bw.len, 24 * 1024);
        let (_, bv) = a.take(&[4; 1000], 200_000);
        assert_eq!(bv.len, 24 * 1024, "the run goes on in its buffer while it has room");
        a.release();
        let (_, bu) = a.take(&[4; 1000], 200_000);
        assert_eq!(bu.len, 96 * 1024, "larger than every size: the largest");
        a.release();
    }

    #[test]
    fn pooled_buffers_are_used_again_once_their_slices_are_gone() {
        let mut a = arena();
        let (x, bx) = a.take(&[1; 60_000], 90_000);
        assert_eq!(bx.len, 96 * 1024);
        a.release();
        // Its slice is alive: the next run gets another buffer, never the rest of this one.
        let (y, by) = a.take(&[2; 20_000], 90_000);
        assert_ne!(by, bx);
        a.release();
        drop(x);
        // Free again: reused whole, from its start.
        let (w, bw) = a.take(&[4; 90_000], 90_000);
        assert_eq!(bw, bx);
        assert_eq!(&w[..], &[4u8; 90_000][..]);
        assert_eq!(&y[..], &[2u8; 20_000][..]);
        a.release();
    }

    #[test]
    fn a_path_holds_no_buffer_between_runs() {
        let mut a = arena();
        let (y, by) = a.take(&[2; 100], 100);
        assert_eq!(by.len, 100);
        assert_eq!(&y[..], &[2u8; 100][..]);
        a.release();
        assert!(a.cur.is_none());
    }
}
