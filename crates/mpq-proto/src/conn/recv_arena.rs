//! The buffers a path copies its received stream data into (issue C2).
//!
//! A path opening a run of datagrams on its own thread, outside the connection's lock, copies
//! the data of each packet's STREAM frames out of the datagram into its arena; the receive
//! stream keeps the slices ([`crate::stream::StreamData::Shared`]) instead of copying the
//! bytes into its reassembly buffer under the lock, and the application can take them without
//! another copy. The arena belongs to the path, so it travels with the path to its thread.
//!
//! One buffer serves many packets: the bulk of a run goes into buffers of [`ARENA`] bytes,
//! which are used again rather than freed. With a thread per path the application frees what
//! a path's thread allocated, and glibc's allocator then handed the memory back to the kernel
//! and faulted it in again for the next buffer: a third of the receive work in `mpq bench
//! receive`. So a buffer leaves its run through a process-wide pool of at most [`POOL_MAX`]
//! buffers (8 MiB), from which the next run takes one whose slices have all been dropped
//! (it is reused in place: `BytesMut::try_reclaim`), or one with room left. A path holds no
//! buffer between runs, so idle connections hold none. The pool only recycles memory: what
//! a connection does never depends on it.

use std::sync::Mutex;

use bytes::{Bytes, BytesMut};

use crate::stream::Backing;

/// Size of the buffers that take a run's bulk: a GRO batch of up to 64 segments of 1.45 kB
/// (93 kB), and under glibc's default threshold for serving an allocation by mmap (128 KiB),
/// so that a buffer that has to be allocated comes from the heap.
pub(crate) const ARENA: usize = 96 * 1024;
/// Buffers waiting in the pool at most: 24 MiB, a receive window's worth of runs in flight.
const POOL_MAX: usize = 256;
/// A run bringing no more than this gets a buffer of its own size, not one of [`ARENA`].
const SMALL_RUN: usize = 16 * 1024;
/// A buffer goes back to the pool at the end of its run only with this much room left, or
/// to be reused once its slices are gone.
const MIN_ROOM: usize = 8 * 1024;

/// Buffers between runs: the rest of each (its taken part split off) and its identity.
#[derive(Debug)]
pub(crate) struct Pool(Mutex<Vec<(BytesMut, Backing)>>);

/// The process's pool.
static POOL: Pool = Pool::new();

impl Pool {
    const fn new() -> Self {
        Self(Mutex::new(Vec::new()))
    }

    /// A pooled buffer with room for `need` bytes: one whose slices are all gone (reclaimed
    /// whole), else one with room left.
    fn take(&self, need: usize) -> Option<(BytesMut, Backing)> {
        let mut pool = self.0.lock().ok()?;
        // Newest first: the most recently released buffers are the likeliest to have room,
        // the oldest to be free again. A free one is taken whole; else one with room.
        let mut with_room = None;
        for i in (0..pool.len()).rev() {
            let (buf, _) = &mut pool[i];
            if buf.try_reclaim(ARENA) {
                return Some(pool.swap_remove(i));
            }
            if with_room.is_none() && buf.capacity() >= need.max(MIN_ROOM) {
                with_room = Some(i);
            }
        }
        with_room.map(|i| pool.swap_remove(i))
    }

    /// Keeps a buffer for later runs, if there is room.
    fn put(&self, buf: BytesMut, backing: Backing) {
        if let Ok(mut pool) = self.0.lock() {
            if pool.len() < POOL_MAX {
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
    /// arena's current one. `hint` is how much more data the run may bring (the bytes of the
    /// datagrams not opened yet, this one included): a buffer taken anew is sized for it.
    pub(crate) fn take(&mut self, data: &[u8], hint: usize) -> (Bytes, Backing) {
        if self.cur.as_ref().is_some_and(|(b, _)| b.capacity() < data.len()) {
            self.release();
        }
        let pool = self.pool;
        let (buf, backing) = self.cur.get_or_insert_with(|| Self::fresh(pool, hint.max(data.len()).max(1), data.len()));
        // Within the buffer's room: growing it would move the data off the buffer `backing`
        // names.
        debug_assert!(buf.capacity() >= data.len());
        buf.extend_from_slice(data);
        (buf.split().freeze(), *backing)
    }

    /// A buffer with room for `need` bytes, sized for `want`: from the pool when the run is
    /// large, else its own size.
    fn fresh(pool: &Pool, want: usize, need: usize) -> (BytesMut, Backing) {
        if want > SMALL_RUN && want <= ARENA {
            if let Some(found) = pool.take(need) {
                return found;
            }
        }
        let cap = if want > SMALL_RUN { want.max(ARENA) } else { want };
        let buf = BytesMut::with_capacity(cap);
        let backing = Backing { id: buf.as_ptr() as usize, len: buf.capacity() };
        (buf, backing)
    }

    /// The run ended: the current buffer goes to the pool (or is dropped, its memory freed
    /// with its last slice), so that the path holds none while it receives nothing.
    pub(crate) fn release(&mut self) {
        let Some((buf, backing)) = self.cur.take() else { return };
        if backing.len == ARENA {
            self.pool.put(buf, backing);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_shares_one_buffer_until_it_is_full() {
        let mut a = RecvArena::default();
        let (x, bx) = a.take(&[1; 1000], 3000);
        let (y, by) = a.take(&[2; 1500], 2000);
        assert_eq!((&x[..], &y[..]), (&[1u8; 1000][..], &[2u8; 1500][..]));
        assert_eq!(bx, by, "both slices of the run's buffer");
        assert!(bx.len >= 3000);
        // The buffer cannot hold this one, and x and y are alive: another one.
        let (z, bz) = a.take(&[3; 1000], 1000);
        assert_ne!(bz.id, bx.id);
        assert_eq!(&z[..], &[3u8; 1000][..]);
        // The slices do not move when the arena moves on.
        assert_eq!(&x[..], &[1u8; 1000][..]);
        assert_eq!(&y[..], &[2u8; 1500][..]);
        a.release();
    }

    #[test]
    fn large_runs_use_pooled_buffers_again_once_their_slices_are_gone() {
        let pool: &'static Pool = Box::leak(Box::new(Pool::new()));
        let mut a = RecvArena { cur: None, pool };
        let (x, bx) = a.take(&[1; 60_000], 90_000);
        assert_eq!(bx.len, ARENA);
        a.release();
        // Its slice is alive and it has room: the next run goes on in it.
        let (y, by) = a.take(&[2; 20_000], 90_000);
        assert_eq!(by, bx);
        a.release();
        // Full and in use: a new one.
        let (z, bz) = a.take(&[3; 60_000], 90_000);
        assert_ne!(bz, bx);
        a.release();
        drop((x, y));
        // Free again: reused whole, from its start.
        let (w, bw) = a.take(&[4; 90_000], 90_000);
        assert_eq!(bw, bx);
        assert_eq!(&w[..], &[4u8; 90_000][..]);
        assert_eq!(&z[..], &[3u8; 60_000][..]);
        a.release();
    }

    #[test]
    fn small_runs_get_small_buffers_and_a_path_holds_none_between_runs() {
        let mut a = RecvArena::default();
        let (y, by) = a.take(&[2; 100], 100);
        assert_eq!(by.len, 100);
        assert_eq!(&y[..], &[2u8; 100][..]);
        a.release();
        assert!(a.cur.is_none());
    }
}
