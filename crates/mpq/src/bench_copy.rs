//! The machine's own reference for `mpq bench receive|send`: how far a job that only moves
//! memory, in the benchmark's shape, speeds up with the same threads on the same CPUs.
//!
//! Receiving is memory-heavy: each datagram is read, decrypted in place and its stream data
//! copied into the path's buffer, about 3 MB per path per round. On the 2-vCPU machine this
//! project measures on, two cores copying such buffers at once moved 1.2-1.4x the bytes of one
//! (the memory the vCPUs share is the limit), so the speedup of the receive work cannot be read
//! without that of the machine beside it. The copy reference runs in the same invocation,
//! interleaved with the runs (`bench_cmd.rs`): each path has a source and a destination buffer
//! of a round's size, path k's copies go to thread k mod T, pinned as the path threads are, and
//! the same number of bytes is copied as the run carries.
//!
//! [`timed_on_threads`], the pinned threads that start together, is shared with the AEAD
//! reference (`bench_seal.rs`).

use std::sync::Barrier;
use std::time::Duration;

use crate::progress::Stopwatch;

/// Runs `work` on `threads` threads at once, thread t pinned to `cpus[t mod len]` unless
/// `cpus` is empty: each first makes its state with `prepare(t)` (not timed), all then start
/// together, and each times its `work`. Returns each thread's time and result, in thread
/// order (a thread that panicked is left out).
pub(crate) fn timed_on_threads<S, R: Send>(
    threads: usize,
    cpus: &[usize],
    prepare: impl Fn(usize) -> S + Sync,
    work: impl Fn(&mut S) -> R + Sync,
) -> Vec<(Duration, R)> {
    let start = Barrier::new(threads);
    let (start, prepare, work) = (&start, &prepare, &work);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    if let Some(&cpu) = (!cpus.is_empty()).then(|| &cpus[t % cpus.len()]) {
                        mpq_io::path_threads::pin_current_thread(cpu);
                    }
                    let mut state = prepare(t);
                    start.wait();
                    let clock = Stopwatch::start();
                    let r = work(&mut state);
                    (clock.elapsed(), r)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}

/// Copies `bytes` in all, `bytes / paths` for each path through its buffers of `buffer` bytes,
/// path k's on thread k mod `threads` (pinned to `cpus[k mod len]` unless `cpus` is empty).
/// Returns the wall time from the threads' common start to the last one's end, and the sum of
/// the destinations' bytes (so that no copy can be left out).
pub(crate) fn copy_run(paths: usize, threads: usize, cpus: &[usize], bytes: u64, buffer: usize) -> (Duration, u64) {
    let threads = threads.clamp(1, paths.max(1));
    let per_path = bytes / paths.max(1) as u64;
    let runs = timed_on_threads(
        threads,
        cpus,
        // This thread's paths' buffers, written before the clock (the receive run's
        // datagrams are written by the client before its clock too).
        |t| -> Vec<(Vec<u8>, Vec<u8>)> {
            (t..paths)
                .step_by(threads)
                .map(|k| ((0..buffer).map(|i| (i ^ k) as u8).collect(), vec![0u8; buffer]))
                .collect()
        },
        |mine| {
            for (src, dst) in mine.iter_mut() {
                let mut left = per_path;
                while left > 0 {
                    let n = (left as usize).min(buffer);
                    dst[..n].copy_from_slice(&src[..n]);
                    std::hint::black_box(&mut *dst);
                    left -= n as u64;
                }
            }
            mine.iter().map(|(_, d)| d.iter().map(|&b| u64::from(b)).sum::<u64>()).sum::<u64>()
        },
    );
    runs.into_iter().fold((Duration::ZERO, 0), |(t, s), (dt, ds)| (t.max(dt), s + ds))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path's buffer is copied whole whatever the thread count, so the destinations
    /// hold what the sources do.
    #[test]
    fn every_path_is_copied_on_one_or_several_threads() {
        let buffer = 4096;
        let expect: u64 = (0..3usize).map(|k| (0..buffer).map(|i| u64::from((i ^ k) as u8)).sum::<u64>()).sum();
        for threads in 1..=3 {
            let (took, sum) = copy_run(3, threads, &[], 3 * 10 * buffer as u64, buffer);
            assert_eq!(sum, expect, "{threads} thread(s)");
            assert!(took > Duration::ZERO);
        }
        // Fewer bytes than a buffer: only the first part is written.
        let (_, sum) = copy_run(1, 1, &[], 16, buffer);
        assert_eq!(sum, (0..16u64).sum::<u64>());
    }
}
