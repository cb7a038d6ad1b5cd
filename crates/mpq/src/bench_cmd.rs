//! `mpq bench`: in-process benchmarks of the protocol core. `mpq bench receive` and `mpq
//! bench send` measure how one connection's receive or send work scales with the threads
//! driving its paths (`bench_recv.rs`, `bench_send.rs`), runs interleaved over the thread
//! counts, repeated, medians reported.

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use serde::Serialize;

use std::time::Duration;

use crate::bench_copy;
use crate::bench_pair::{self, BufferPool};
use crate::bench_recv;
use crate::bench_seal;
use crate::bench_send;

/// `mpq bench` subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Receive-side scaling: one connection over N paths, its receive work (decryption,
    /// frame parsing, reassembly, reading, ACKs) driven by 1..N path threads in this process.
    Receive(BenchArgs),
    /// Send-side scaling: one connection over N paths, its send work (the application's
    /// write, frames chosen, packets written and sealed, sent packets recorded) driven by
    /// 1..N path threads in this process.
    Send(BenchArgs),
}

/// Options of `mpq bench receive` and `mpq bench send`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Paths of the connection.
    #[arg(long, default_value_t = 2)]
    pub paths: usize,
    /// Thread counts to compare, comma-separated (each at most the number of paths).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
    /// Megabytes (10^6 bytes) of stream data per run.
    #[arg(long, default_value_t = 400)]
    pub megabytes: u64,
    /// Repetitions; the thread counts are interleaved within each (after one warm-up run of
    /// each count, not counted: it fills the buffers the measured runs reuse).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// CPUs to pin to, comma-separated: path thread k runs on the k-th (cycling through the
    /// list), as the per-path runtime's `--cpus` does, and the harness's thread (with one
    /// thread, the work itself) on the first. Default: every CPU this process may use.
    #[arg(long, value_delimiter = ',', conflicts_with = "no_pin")]
    pub cpus: Vec<usize>,
    /// Leave every thread to the kernel's scheduler (unpinned). Unpinned, two path threads
    /// woken together often shared one CPU for milliseconds on this 2-vCPU machine, and
    /// the measured speedup wandered (docs/bench-path-threads.md).
    #[arg(long)]
    pub no_pin: bool,
    /// Receive: GRO batches of 64 datagrams the client sends per path and round at most; the
    /// receiving application reads, and its ACKs go back, once a round. Smaller rounds keep
    /// less data between the receive work and the application's read (docs/bench-path-threads.md).
    #[arg(long, default_value_t = bench_recv::DEFAULT_ROUND_BATCHES)]
    pub round_batches: usize,
    /// Check every byte the receiving application reads (outside the timed work).
    #[arg(long)]
    pub verify: bool,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The medians for one thread count.
#[derive(Debug, Serialize)]
struct ThreadsResult {
    threads: usize,
    /// Median goodput of the receive work, Gbit/s (stream bytes over busy time).
    gbit_per_s: f64,
    /// Median datagrams per second of busy time.
    packets_per_s: f64,
    /// Goodput relative to the first thread count (ratio of the medians).
    speedup: f64,
    /// The median over repetitions of this count's run over the first count's run of the
    /// same repetition: the runs of a repetition follow each other within seconds, so the
    /// machine's drift over minutes (one thread at anything from 6 to 12 Gbit/s on this
    /// project's 2-vCPU machine) cancels out of each ratio.
    paired_speedup: f64,
    /// Median share of the busy time the threads spent outside the connection's lock
    /// (opening datagrams, or building send batches), summed over threads (0 with one
    /// thread).
    outside_lock_share: f64,
    /// Median share of the busy time the threads spent taking and holding the lock, summed
    /// over threads (0 with one thread).
    locked_share: f64,
    /// Receive: median share of the busy time spent after the datagrams on one thread (the
    /// application's read, the ACKs); 0 for send.
    after_share: f64,
    /// Receive: median share of the busy time the path threads spent waiting for the
    /// round's slowest (the harness's rounds; a runtime's threads do not wait for each
    /// other), summed over threads; 0 for send and with one thread.
    waiting_share: f64,
    /// Receive: the paired speedup had the path threads not waited for each other at each
    /// round's end (the same runs, their busy time with the rounds' path phases replaced by
    /// the busiest thread's summed work: derived, not a separate run); for send, the paired
    /// speedup.
    paired_speedup_without_round_waits: f64,
    /// Every run's goodput, Gbit/s, in order.
    runs_gbit_per_s: Vec<f64>,
    /// The machine's reference, run right after each run with the same threads on the same
    /// CPUs: median Gbit/s of copying as many bytes through each path's round-sized
    /// buffers (`bench_copy.rs`).
    copy_gbit_per_s: f64,
    /// The copy reference relative to its first thread count: what the machine's shared
    /// memory lets a memory-bound job gain from the threads.
    copy_speedup: f64,
    /// Every copy reference's Gbit/s, in order (each right after the run of the same index).
    copy_runs_gbit_per_s: Vec<f64>,
    /// The machine's compute reference, run right after each run (after the copy reference)
    /// with the same threads on the same CPUs: median Gbit/s of sealing as many bytes in
    /// packets with the suite the connection negotiated, each thread on buffers of its own
    /// (`bench_seal.rs`).
    aead_gbit_per_s: f64,
    /// The AEAD reference relative to its first thread count: what the machine gives work
    /// that shares nothing between the threads (the receive and send work is mostly AEAD).
    aead_speedup: f64,
    /// Every AEAD reference's Gbit/s, in order (each right after the run of the same index).
    aead_runs_gbit_per_s: Vec<f64>,
    /// The median over repetitions of this count's run over the AEAD reference's speedup of
    /// the same repetition (both relative to the first count's): the share of the machine's
    /// own parallel gain the connection's threads realise.
    paired_speedup_over_aead: f64,
}

/// The report of `mpq bench receive` or `send`.
#[derive(Debug, Serialize)]
struct BenchReport {
    /// "receive" or "send".
    work: &'static str,
    paths: usize,
    megabytes: u64,
    reps: usize,
    /// The CPUs the threads were pinned to (empty: unpinned).
    cpus: Vec<usize>,
    /// Receive: GRO batches per path and round at most.
    round_batches: usize,
    /// The cipher suite the connection negotiated, which the AEAD reference seals with.
    cipher_suite: String,
    results: Vec<ThreadsResult>,
}

/// Runs a `mpq bench` subcommand.
pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Receive(a) => bench("receive", a),
        BenchCommand::Send(a) => bench("send", a),
    }
}

/// One run's figures, whichever side was measured.
#[derive(Debug, Clone, Copy)]
struct Sample {
    bytes: u64,
    datagrams: u64,
    busy: Duration,
    outside_lock: Duration,
    locked: Duration,
    after: Duration,
    waiting: Duration,
    /// The busy time had the path threads not waited for each other at each round's end
    /// (`RecvRunResult::busy_without_round_waits`); the busy time for send.
    busy_without_round_waits: Duration,
}

/// Runs `f` (one run); with `cpus`, on a thread pinned to the first of them (the harness's
/// thread, and with one thread the receive or send work itself, then stays on one core as
/// path threads do).
fn on_first_cpu(cpus: &[usize], f: impl FnOnce() -> Result<Sample> + Send) -> Result<Sample> {
    let Some(&first) = cpus.first() else { return f() };
    std::thread::scope(|s| {
        s.spawn(|| {
            mpq_io::path_threads::pin_current_thread(first);
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the benchmark's thread panicked")))
    })
}

/// One run, its buffers from `pools`, kept for this thread count ([`BufferPool`]).
fn run_here(
    work: &str,
    a: &BenchArgs,
    threads: usize,
    cpus: &[usize],
    bytes: u64,
    pools: &mut Vec<BufferPool>,
) -> Result<Sample> {
    Ok(if work == "send" {
        let r = bench_send::run(a.paths, threads, cpus, bytes, a.verify, pools)?;
        Sample {
            bytes: r.bytes,
            datagrams: r.datagrams,
            busy: r.busy,
            outside_lock: r.build_outside_lock,
            locked: r.locked,
            after: Duration::ZERO,
            waiting: Duration::ZERO,
            busy_without_round_waits: r.busy,
        }
    } else {
        if pools.is_empty() {
            pools.push(BufferPool::default());
        }
        Sample::from(bench_recv::run(a.paths, threads, cpus, bytes, a.round_batches, a.verify, &mut pools[0])?)
    })
}

impl From<bench_recv::RecvRunResult> for Sample {
    fn from(r: bench_recv::RecvRunResult) -> Self {
        Self {
            busy_without_round_waits: r.busy_without_round_waits(),
            bytes: r.bytes,
            datagrams: r.datagrams,
            busy: r.busy,
            outside_lock: r.open_outside_lock,
            locked: r.locked,
            after: r.after,
            waiting: r.waiting,
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn bench(work: &'static str, a: BenchArgs) -> Result<()> {
    if a.paths == 0 || a.paths > 16 {
        bail!("--paths must be between 1 and 16 (got {})", a.paths);
    }
    if a.threads.is_empty() || a.threads.iter().any(|&t| t == 0 || t > a.paths) {
        bail!("--threads takes counts between 1 and --paths ({}), e.g. --threads 1,2", a.paths);
    }
    if a.reps == 0 || a.megabytes == 0 || a.round_batches == 0 {
        bail!("--reps, --megabytes and --round-batches must be at least 1");
    }
    let cpus = if a.no_pin {
        Vec::new()
    } else if a.cpus.is_empty() {
        mpq_io::path_threads::allowed_cpus()
    } else {
        let allowed = mpq_io::path_threads::allowed_cpus();
        if let Some(c) = a.cpus.iter().find(|c| !allowed.contains(c)) {
            bail!("--cpus: this process may not run on CPU {c} (it may use {allowed:?}); pick from those or pass --no-pin");
        }
        a.cpus.clone()
    };
    let bytes = a.megabytes * 1_000_000;
    let mut runs: Vec<Vec<Sample>> = vec![Vec::new(); a.threads.len()];
    let mut copies: Vec<Vec<f64>> = vec![Vec::new(); a.threads.len()];
    let mut seals: Vec<Vec<f64>> = vec![Vec::new(); a.threads.len()];
    let cipher_suite = bench_pair::negotiated_suite_name()?;
    let suite = bench_seal::suite_named(&cipher_suite)?;
    // The copy reference's buffers: a receive round's datagrams on one path.
    let copy_buffer = bench_recv::round_bytes(a.round_batches);
    // A reference's Gbit/s: the run's bytes over its time.
    let rate = |took: Duration| bytes as f64 * 8.0 / took.as_secs_f64().max(1e-9) / 1e9;
    // The send (and ACK) buffers, kept for the whole invocation as a runtime keeps its
    // sockets' buffers, per thread count and thread: a first run of each count, not counted,
    // fills them, so that no measured run faults in fresh pages for them (`bench_send`).
    let mut pools: Vec<Vec<BufferPool>> = a.threads.iter().map(|_| Vec::new()).collect();
    for (k, &t) in a.threads.iter().enumerate() {
        eprintln!("warm-up run (not counted): {work}, {} path(s), {t} thread(s)...", a.paths);
        let pool = &mut pools[k];
        on_first_cpu(&cpus, || run_here(work, &a, t, &cpus, bytes, pool))?;
    }
    for rep in 0..a.reps {
        for (k, &t) in a.threads.iter().enumerate() {
            eprintln!("rep {}/{}: {work}, {} path(s), {t} thread(s)...", rep + 1, a.reps, a.paths);
            let pool = &mut pools[k];
            runs[k].push(on_first_cpu(&cpus, || run_here(work, &a, t, &cpus, bytes, pool))?);
            copies[k].push(rate(bench_copy::copy_run(a.paths, t, &cpus, bytes, copy_buffer).0));
            seals[k].push(rate(bench_seal::seal_run(&suite, a.paths, t, &cpus, bytes).0));
        }
    }
    let copy_base = median(copies[0].clone());
    let aead_base = median(seals[0].clone());
    let share = |d: Duration, r: &Sample| d.as_secs_f64() / r.busy.as_secs_f64().max(1e-9);
    let gbit = |r: &Sample| r.bytes as f64 * 8.0 / r.busy.as_secs_f64().max(1e-9) / 1e9;
    // (The same arithmetic as `gbit`: with one thread the two are equal to the last bit.)
    let gbit_without_round_waits =
        |r: &Sample| r.bytes as f64 * 8.0 / r.busy_without_round_waits.as_secs_f64().max(1e-9) / 1e9;
    let base = median(runs[0].iter().map(gbit).collect());
    let results: Vec<ThreadsResult> = a
        .threads
        .iter()
        .zip(runs.iter().zip(copies).zip(&seals))
        .map(|(&threads, ((rs, cs), ss))| {
            let g = median(rs.iter().map(gbit).collect());
            let copy = median(cs.clone());
            let aead = median(ss.clone());
            // Each repetition's run over the first count's run of the same repetition.
            let paired: Vec<f64> = rs.iter().zip(&runs[0]).map(|(r, first)| gbit(r) / gbit(first).max(1e-12)).collect();
            ThreadsResult {
                threads,
                gbit_per_s: g,
                packets_per_s: median(rs.iter().map(|r| r.datagrams as f64 / r.busy.as_secs_f64().max(1e-9)).collect()),
                speedup: g / base.max(1e-12),
                paired_speedup: median(paired.clone()),
                outside_lock_share: median(rs.iter().map(|r| share(r.outside_lock, r)).collect()),
                locked_share: median(rs.iter().map(|r| share(r.locked, r)).collect()),
                after_share: median(rs.iter().map(|r| share(r.after, r)).collect()),
                waiting_share: median(rs.iter().map(|r| share(r.waiting, r)).collect()),
                paired_speedup_without_round_waits: median(
                    rs.iter()
                        .zip(&runs[0])
                        .map(|(r, first)| gbit_without_round_waits(r) / gbit(first).max(1e-12))
                        .collect(),
                ),
                runs_gbit_per_s: rs.iter().map(gbit).collect(),
                copy_gbit_per_s: copy,
                copy_speedup: copy / copy_base.max(1e-12),
                copy_runs_gbit_per_s: cs,
                aead_gbit_per_s: aead,
                aead_speedup: aead / aead_base.max(1e-12),
                aead_runs_gbit_per_s: ss.clone(),
                paired_speedup_over_aead: median(
                    paired
                        .iter()
                        .zip(ss.iter().zip(&seals[0]))
                        .map(|(p, (s, s_first))| p / (s / s_first.max(1e-12)).max(1e-12))
                        .collect(),
                ),
            }
        })
        .collect();
    let report = BenchReport {
        work,
        paths: a.paths,
        megabytes: a.megabytes,
        reps: a.reps,
        cpus,
        round_batches: a.round_batches,
        cipher_suite,
        results,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "{work} work of one connection over {} path(s), {} MB per run, medians of {}, {}:",
        report.paths,
        report.megabytes,
        report.reps,
        if report.cpus.is_empty() {
            "threads unpinned".to_string()
        } else {
            format!("threads pinned to CPUs {:?}", report.cpus)
        }
    );
    let (after, waiting, no_wait) = if work == "send" { ("", "", "") } else { ("read+ACKs", "waiting", "no-wait") };
    println!(
        "{:>8} {:>10} {:>12} {:>9} {:>9} {:>10} {:>8} {:>8} {:>8} {:>10} {:>10} {:>10} {:>11}",
        "threads",
        "Gbit/s",
        "packets/s",
        "speedup",
        "paired",
        "unlocked",
        "locked",
        waiting,
        no_wait,
        after,
        "copy ref",
        "AEAD ref",
        "paired/AEAD"
    );
    let receive_only = |s: String| if work == "send" { String::new() } else { s };
    for r in &report.results {
        println!(
            "{:>8} {:>10.2} {:>12.0} {:>8.2}x {:>8.2}x {:>9.0}% {:>7.0}% {:>8} {:>8} {:>10} {:>9.2}x {:>9.2}x {:>10.0}%",
            r.threads,
            r.gbit_per_s,
            r.packets_per_s,
            r.speedup,
            r.paired_speedup,
            r.outside_lock_share * 100.0,
            r.locked_share * 100.0,
            // (Receive only: send has no rounds to wait in, and no work after its batches.)
            receive_only(format!("{:.0}%", r.waiting_share * 100.0)),
            receive_only(format!("{:.2}x", r.paired_speedup_without_round_waits)),
            receive_only(format!("{:.0}%", r.after_share * 100.0)),
            r.copy_speedup,
            r.aead_speedup,
            r.paired_speedup_over_aead * 100.0
        );
    }
    println!("(speedup: of the medians; paired: the median of each repetition's run over its run on the first count)");
    println!(
        "(copy ref: the machine's reference, run after each run with the same threads on the same CPUs: \
         the speedup of copying as many bytes through each path's round-sized buffers, a job bound by \
         the memory the cores share)"
    );
    println!(
        "(AEAD ref: the machine's compute reference, run after each run with the same threads on the same \
         CPUs: the speedup of sealing as many bytes in packets with the connection's suite ({}), each thread \
         on buffers of its own, nothing shared; paired/AEAD: the median of each repetition's paired speedup \
         over the AEAD reference's, the share of the machine's parallel gain the threads realise)",
        report.cipher_suite
    );
    if work == "send" {
        println!(
            "(unlocked, locked: time the path threads spent building batches outside the connection's \
             lock, and taking and holding it, summed over threads; shares of the busy time)"
        );
    } else {
        println!(
            "(unlocked, locked: time the path threads spent outside the connection's lock (opening \
             datagrams, building their paths' ACKs), and taking and holding it, summed over threads; \
             waiting: for the round's slowest path thread, summed over threads (the harness's rounds: a \
             runtime's path threads do not wait for each other); no-wait: the paired speedup of the same \
             runs had their path threads not waited (each run's busy time with its rounds' path phases \
             replaced by its busiest thread's summed work: derived, not measured apart); read+ACKs: after the datagrams, on one thread (the application's read, and the ACKs with one \
             thread); shares of the busy time)"
        );
    }
    Ok(())
}
