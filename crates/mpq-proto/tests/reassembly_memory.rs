//! Heap cost of stream reassembly under adversarial fragment patterns, measured with a
//! counting allocator (issue H.6: one-byte STREAM frames cost ~100 bytes of memory each).
//! Its own test binary, so that the allocator counts only this test's thread.
//!
//! The workspace denies `unsafe`; a global allocator cannot be written without it. It is
//! confined to this test binary and only forwards to the system allocator.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use mpq_proto::stream::RecvBuffer;

struct Counting;

thread_local! {
    /// Bytes currently allocated by this thread.
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is a
// const-initialised thread local, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LIVE.try_with(|l| l.set(l.get() + layout.size() as isize));
        // SAFETY: same layout the caller gave us.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = LIVE.try_with(|l| l.set(l.get() - layout.size() as isize));
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> isize {
    LIVE.with(|l| l.get())
}

/// One-byte frames at every other offset of a 1 MiB window, then the gaps: the heap held
/// at the peak stays within twice the window (it was ~50 bytes per frame, 25x the window,
/// with a heap allocation and a B-tree entry per fragment), and the bytes come out exact.
#[test]
fn one_byte_fragments_cost_at_most_twice_the_window() {
    const WINDOW: usize = 1 << 20;
    let data: Vec<u8> = (0..WINDOW).map(|i| (i * 7 + 3) as u8).collect();
    let before = live();
    let mut b = RecvBuffer::new();
    for off in (1..WINDOW).step_by(2) {
        b.insert(off as u64, &data[off..off + 1]);
    }
    let peak = live() - before;
    assert!(b.memory() as isize >= peak / 2, "memory() accounts for what is held");
    assert!(peak <= 2 * WINDOW as isize, "held {peak} bytes for a {WINDOW}-byte window");
    for off in (0..WINDOW).step_by(2) {
        b.insert(off as u64, &data[off..off + 1]);
    }
    let mut out = vec![0u8; WINDOW];
    assert_eq!(b.read(&mut out), WINDOW);
    assert_eq!(out, data);
    assert_eq!(b.segments(), 0);
}

/// The same through a receive stream's store (`RecvStore`), which keeps data as chunks while
/// the peer's pieces are sensible: one-byte frames make the chunks wasteful within a few
/// dozen, the data moves to the ring, and the heap stays within twice the window.
#[test]
fn one_byte_fragments_in_a_stream_store_cost_at_most_twice_the_window() {
    use mpq_proto::stream::{RecvStore, StreamData};
    const WINDOW: usize = 1 << 20;
    let data: Vec<u8> = (0..WINDOW).map(|i| (i * 7 + 3) as u8).collect();
    let before = live();
    let mut b = RecvStore::new();
    for off in (1..WINDOW).step_by(2) {
        b.insert(off as u64, StreamData::Slice(&data[off..off + 1]));
    }
    let peak = live() - before;
    assert!(b.is_compacted(), "one-byte pieces are kept in the ring");
    assert!(peak <= 2 * WINDOW as isize, "held {peak} bytes for a {WINDOW}-byte window");
    for off in (0..WINDOW).step_by(2) {
        b.insert(off as u64, StreamData::Slice(&data[off..off + 1]));
    }
    let mut out = Vec::with_capacity(WINDOW);
    b.read_with(usize::MAX, &mut |p| out.extend_from_slice(p));
    assert_eq!(out, data);
}

/// Large buffers each kept alive by a few bytes (a peer leaving one small piece of every
/// batch unfilled): the store moves the data to the ring once the buffers it pins exceed
/// twice what it holds plus 256 KiB, so the heap stays bounded by the data, not the buffers.
#[test]
fn buffers_pinned_by_small_pieces_are_let_go() {
    use bytes::Bytes;
    use mpq_proto::stream::{Backing, RecvStore, StreamData};
    const BUF: usize = 96 * 1024;
    const PIECES: usize = 200;
    let before = live();
    let mut b = RecvStore::new();
    for k in 0..PIECES {
        // A 96 KiB buffer of which one 600-byte slice is kept, with a gap before it.
        let buf = Bytes::from(vec![k as u8; BUF]);
        let backing = Backing::exact(&buf);
        b.insert(1 + (k * 1000) as u64, StreamData::Shared(buf.slice(0..600), backing));
    }
    let held = live() - before;
    assert!(b.is_compacted(), "the pinned buffers were let go");
    assert!(held <= 4 * (PIECES * 1000) as isize, "held {held} bytes for {} bytes of data", PIECES * 600);
}
