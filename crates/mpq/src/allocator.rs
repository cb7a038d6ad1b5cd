//! The process's memory allocator and how it is tuned (`docs/bench-runtimes.md`: the per-path runtime's figures).

/// mimalloc instead of the system allocator: the application's threads fill stream buffers
/// that the runtime's threads free once acknowledged, and glibc's malloc answered that by
/// shrinking and regrowing its heap (brk, page faults) on every buffer: see docs/runtimes.md.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its `mi_option_e` in mimalloc.h, v2 and v3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Tunes the allocator; call first thing in `main`. Memory a thread freed goes back to the
/// system after 10 s unused, not mimalloc's 1 s: with a thread per path, buffers one thread
/// fills and another frees left pages empty long enough to be purged and faulted in again
/// (transparent huge pages: 2 MB zeroed each), 1,000 to 1,800 faults in 3 s of an 8-path
/// transfer, 4 % of its cycles; with 10 s, one. `MIMALLOC_PURGE_DELAY` still overrides it.
pub fn tune() {
    // SAFETY: sets an option's default before it is read; mimalloc allows this at any time.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set_default(MI_OPTION_PURGE_DELAY, 10_000)
    };
}

/// No transparent huge pages for the process from now on (`PR_SET_THP_DISABLE`), for the
/// endpoints (`mpq server|client|perf`). mimalloc asks for them (`MADV_HUGEPAGE`) on the
/// arenas it reserves, and each first touch of a 2 MB region then zeroes all of it. Over 8
/// loopback paths (2026-12-02) the sender's peak RSS went from 70-82 to 32 MB in the
/// per-path runtime (single: 30 to 19 MB), the receiver's from 70-88 to 54-57 MB; zeroing
/// huge pages had been 3 % of the per-path sender's cycles, mostly in its first second.
/// 5 s transfers over 8 paths, paired medians of 5: +1 % goodput and -2 % CPU per GB (both
/// runtimes); 15 s transfers, 1 or 4 paths: no difference beyond the noise. Not for `mpq
/// sim`, whose one process ran 5-7 % slower on small pages (`docs/lab.md`). With
/// `MIMALLOC_ALLOW_THP` set, mimalloc decides (1 keeps them, 0 turns them off itself).
pub fn small_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // SAFETY: prctl with integer arguments only; it changes the process's THP policy
        // (faults to come, in every mapping) and nothing Rust relies on. A kernel without
        // it (EINVAL) just keeps huge pages.
        #[allow(unsafe_code)]
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0)
        };
    }
}
