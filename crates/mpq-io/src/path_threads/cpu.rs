//! Per-thread CPU time and pinning, through rustix's safe system-call wrappers.

use std::time::Duration;

/// CPU time the calling thread has used.
pub fn thread_cpu_time() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(ts.tv_sec.max(0) as u64, ts.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// Pins the calling thread to CPU `cpu`; a failure (no such CPU, not allowed) is logged and
/// the thread runs unpinned.
pub fn pin_current_thread(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        tracing::warn!(cpu, "no such CPU: the thread runs unpinned");
        return;
    }
    set.set(cpu);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        tracing::warn!(cpu, error = %e, "cannot pin a thread to this CPU: it runs unpinned");
    }
}

/// The CPUs the calling thread may run on, in order (empty if the kernel does not say).
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's CPU time grows with the work it does.
    #[test]
    fn thread_cpu_time_counts_work() {
        let t0 = thread_cpu_time();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let t1 = thread_cpu_time();
        assert!(t1 > t0, "work: {t0:?} -> {t1:?}");
    }

    /// The CPUs allowed include the one this thread runs on; pinned to the first of them,
    /// it is the only one left.
    #[test]
    fn allowed_cpus_lists_what_pinning_then_narrows() {
        std::thread::spawn(|| {
            let all = allowed_cpus();
            assert!(!all.is_empty());
            pin_current_thread(all[0]);
            assert_eq!(allowed_cpus(), vec![all[0]]);
        })
        .join()
        .expect("thread");
    }

    /// A thread pinned to the CPU it may use runs there (CPU 0 exists everywhere).
    #[test]
    fn a_thread_pinned_to_cpu_0_runs_there() {
        std::thread::spawn(|| {
            pin_current_thread(0);
            let set = rustix::thread::sched_getaffinity(None).expect("affinity");
            assert!(set.is_set(0));
            assert_eq!(set.count(), 1);
        })
        .join()
        .expect("thread");
    }
}
