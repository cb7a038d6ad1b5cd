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
