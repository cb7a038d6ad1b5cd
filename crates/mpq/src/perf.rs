//! `mpq perf`: goodput measurement. The client opens N bidirectional streams and asks for a
//! number of bytes on each (8-byte big-endian request, `u64::MAX` for "until I close"); the
//! server sends that much from a static buffer.
//!
//! With `--datagrams` the client sends DATAGRAM frames (RFC 9221) instead for the duration,
//! then asks on a stream ([`DATAGRAM_REPORT`] as the request) how many the server received:
//! the answer is 16 bytes, the count and the payload bytes, big-endian.

use std::time::Duration;

use anyhow::{bail, Result};
use mpq_proto::conn::{ClientConfig, DatagramConfig};
use serde_json::json;

use crate::cli::PerfClientArgs;
use crate::perf_client::{Measured, Measurement};

/// What the server sends: zeros (the payload is encrypted anyway), handed to the stream
/// without copying ([`mpq_proto::conn::Connection::write_bytes`]).
pub(crate) static ZEROS: [u8; 1024 * 1024] = [0; 1024 * 1024];

/// The request a `--datagrams` client sends on a stream at the end: "how many of my
/// datagrams arrived".
pub const DATAGRAM_REPORT: u64 = u64::MAX - 1;

/// The median of `v` (0 when empty).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// CPU time used by this process (user + system), in seconds.
pub(crate) fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass.
    #[allow(unsafe_code)]
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// What each stream asks for: (bytes per stream, `u64::MAX` for a timed run; the run's
/// duration), from `--streams`, `--bytes` and `--duration`, checked.
fn workload(args: &PerfClientArgs) -> Result<(u64, Option<Duration>)> {
    if args.streams == 0 {
        bail!("--streams 0: at least one stream is needed");
    }
    Ok(match args.bytes {
        Some(0) => bail!("--bytes 0: nothing to measure; give a positive byte count"),
        Some(total) => (total.div_ceil(args.streams), None),
        None => {
            let d = crate::runner::seconds("--duration", args.duration)?;
            if d.is_zero() {
                bail!("--duration 0: give a positive number of seconds");
            }
            (u64::MAX, Some(d))
        }
    })
}

/// Runs one measurement and prints the result.
pub fn client(args: PerfClientArgs) -> Result<()> {
    if args.request_size.is_some() {
        if args.transport != crate::cli::Transport::Quic || args.common.shard.is_some() {
            bail!("--request-size runs over one QUIC connection: not with --transport tcp-tls/mptcp-tls or --shard");
        }
        if args.requests == 0 || !(args.request_interval >= 0.0 && args.request_interval.is_finite()) {
            bail!("--requests must be at least 1 and --request-interval a number of milliseconds >= 0");
        }
    }
    if args.transport != crate::cli::Transport::Quic {
        let (per_stream, duration) = workload(&args)?;
        return crate::perf_tcp::client(args, per_stream, duration);
    }
    let mut transport = crate::runner::transport_config(&args.common)?;
    if args.datagrams {
        transport.datagrams = DatagramConfig::enabled();
        if args.datagram_size == 0 {
            bail!("--datagram-size 0: give a positive payload size");
        }
    }
    let transport = crate::runner::shared(transport);
    let tls = crate::tls::client_config(&args.common, None, true, b"perf", args.zero_rtt)?;
    let streams = args.streams;
    let (per_stream, duration) = workload(&args)?;
    let config = ClientConfig { tls, transport };
    if let Some(n) = args.common.shard {
        if args.zero_rtt {
            bail!("--0rtt measures one resumed connection: not with --shard");
        }
        return crate::perf_shard::client(&args, config, duration, n as usize);
    }
    let locals = crate::runner::client_locals(&args.paths, args.connect)?;
    let executor = crate::api_runtime::executor()?;
    let ep = crate::api_runtime::endpoint(&locals, None, &args.common)?;
    // The idle connections and the measured one must fit under the endpoint's limit.
    ep.set_max_connections(args.idle_connections.saturating_add(2).max(4096))?;
    let cpu0 = cpu_seconds();
    let m = Measurement {
        ep: &ep,
        args: &args,
        config: &config,
        server: args.connect,
        per_stream,
        duration,
        progress: !args.json,
        one_path: false,
    };
    let launched = crate::perf_client::now();
    let mut signals = crate::api_runtime::stop_signals()?;
    let outcome = executor.block_on(async {
        let run = async {
            let idle = crate::perf_client::open_idle(&ep, &config, args.connect, args.idle_connections).await;
            let measured = match &idle {
                Ok(_) => m.run().await,
                Err(e) => Err(anyhow::anyhow!("{e}")),
            };
            let idle_lost = idle.map_or(0, |l| l.iter().filter(|c| c.final_report().is_some()).count());
            (measured, idle_lost)
        };
        match signals.or_stop(run).await {
            Ok((measured, idle_lost)) => {
                crate::stop_signal::close_and_drain(&ep, 0, b"done").await;
                Ok(measured.map(|m| (m, idle_lost)))
            }
            Err(stop) => Err(crate::stop_signal::interrupted(&ep, 0, stop).await),
        }
    });
    drop(executor);
    let outcome = outcome?;
    let threads = endpoint_threads(ep);
    let cpu = cpu_seconds() - cpu0;
    let (app, idle_lost) = outcome.map_err(|e| anyhow::anyhow!("perf run failed: {e}"))?;
    let (rx_datagrams, tx_calls) = io_counts(&threads);
    let Measured { start, end, .. } = app;
    let secs = (end - start).as_secs_f64().max(1e-9);
    let goodput = app.bytes as f64 * 8.0 / secs;
    let stats = &app.stats;
    let paths = crate::report::paths_json(stats);
    if let Some(d) = &app.dgram {
        let (received, received_bytes) = d.received;
        let c = &d.stats;
        let sent = c.total.sent;
        let lost = sent.saturating_sub(received);
        let loss = if sent > 0 { lost as f64 / sent as f64 } else { 0.0 };
        let per_path: serde_json::Map<String, serde_json::Value> = c
            .paths
            .iter()
            .map(|(id, p)| {
                (id.to_string(), json!({"sent": p.sent, "acked": p.acked, "lost": p.lost, "dropped": p.dropped_send}))
            })
            .collect();
        if args.json {
            let out = json!({
                "mode": "datagrams",
                "zero_rtt": app.zero_rtt.name(),
                "goodput_bps": goodput,
                "duration_s": secs,
                "bytes": received_bytes,
                "datagram_size": args.datagram_size,
                "datagram_path": args.datagram_path,
                "datagrams": {
                    "queued": d.queued,
                    "sent": sent,
                    "sent_0rtt": c.total.sent_0rtt,
                    "received": received,
                    "lost": lost,
                    "loss_ratio": loss,
                    "lost_detected": c.total.lost,
                    "acked": c.total.acked,
                    "dropped_send": c.total.dropped_send,
                    "echoed": d.echoed.0,
                    "echoed_bytes": d.echoed.1,
                    "paths": per_path,
                },
                "cpu_s": cpu,
                "cpu_util": cpu / secs,
                "multipath": app.multipath,
                "rx_datagrams": rx_datagrams,
                "tx_calls": tx_calls,
                "paths": paths,
                "threads": threads_json(&threads, cpu),
            });
            println!("{out}");
        } else {
            println!(
                "datagrams of {} bytes for {secs:.2} s: sent {sent}, received {received}, lost {lost} ({:.2} %), \
                 goodput {:.1} Mbit/s, client CPU {:.0} %",
                args.datagram_size,
                100.0 * loss,
                goodput / 1e6,
                100.0 * cpu / secs
            );
            if args.zero_rtt {
                println!("  0-RTT {}: {} datagrams in 0-RTT packets", app.zero_rtt.name(), c.total.sent_0rtt);
            }
            for (id, p) in &c.paths {
                println!(
                    "  path {id}: sent {}, acknowledged {}, lost {}, dropped {}",
                    p.sent, p.acked, p.lost, p.dropped_send
                );
            }
        }
        return path_result(&app);
    }
    if let Some(rr) = &app.reqs {
        let origin = launched;
        let (first, last) = rr.span().unwrap_or((start, end));
        let span = (last - first).as_secs_f64().max(1e-9);
        let mut out = rr.json(origin);
        if let Some(o) = out.as_object_mut() {
            o.insert("mode".into(), json!("reqresp"));
            o.insert("transport".into(), json!("quic"));
            o.insert("bytes".into(), json!(rr.bytes()));
            o.insert("duration_s".into(), json!(span));
            o.insert("goodput_bps".into(), json!(rr.bytes() as f64 * 8.0 / span));
            o.insert("cpu_s".into(), json!(cpu));
            o.insert("multipath".into(), json!(app.multipath));
            o.insert("zero_rtt".into(), json!(app.zero_rtt.name()));
            o.insert("paths".into(), json!(paths));
            o.insert("threads".into(), json!(threads_json(&threads, cpu)));
        }
        if args.json {
            println!("{out}");
        } else {
            let delays: Vec<f64> = out["requests"]
                .as_array()
                .map(|l| l.iter().filter_map(|r| r["delay_ms"].as_f64()).collect())
                .unwrap_or_default();
            let max = delays.iter().copied().fold(0.0, f64::max);
            println!(
                "{} of {} requests answered over {span:.2} s; delay median {:.1} ms, max {max:.1} ms",
                out["requests_answered"],
                out["requests_sent"],
                median(&delays)
            );
            crate::report::print_paths(stats, secs);
        }
        return path_result(&app);
    }
    if args.json {
        let out = json!({
            "transport": "quic",
            "zero_rtt": app.zero_rtt.name(),
            "goodput_bps": goodput,
            "duration_s": secs,
            "bytes": app.bytes,
            "streams": streams,
            "cpu_s": cpu,
            "cpu_util": cpu / secs,
            "key_updates": stats.key_updates,
            "multipath": app.multipath,
            "rx_datagrams": rx_datagrams,
            "idle_connections": args.idle_connections,
            "idle_connections_lost": idle_lost,
            "tx_calls": tx_calls,
            "paths": paths,
            "threads": threads_json(&threads, cpu),
        });
        println!("{out}");
    } else {
        println!(
            "{} bytes in {secs:.2} s: {:.1} Mbit/s, client CPU {:.0} %",
            app.bytes,
            goodput / 1e6,
            100.0 * cpu / secs
        );
        if args.zero_rtt {
            println!("0-RTT {} (the requests left in the first flight)", app.zero_rtt.name());
        }
        crate::report::print_paths(stats, secs);
        crate::report::print_threads(&threads, secs);
        if threads.len() > 1 {
            println!("  application thread: CPU {:.0} %", 100.0 * application_cpu(&threads, cpu) / secs);
        }
    }
    // After the summary, so that its statistics show what happened.
    path_result(&app)
}

/// The run's result after its summary: an abandonment or a migration asked for on the
/// command line that failed is its error.
fn path_result(m: &Measured) -> Result<()> {
    match &m.path_error {
        Some(e) => bail!("{e}"),
        None => Ok(()),
    }
}

/// Stops the endpoint's runtime: its threads' figures (none if a handle was still held,
/// which the commands do not do).
pub(crate) fn endpoint_threads(ep: mpq_api::Endpoint) -> Vec<mpq_io::path_threads::ThreadReport> {
    match ep.shutdown() {
        Some(Ok(t)) => t,
        Some(Err(e)) => {
            tracing::warn!(%e, "stopping the endpoint's runtime");
            Vec::new()
        }
        None => Vec::new(),
    }
}

/// The CPU seconds of the process's threads that are not the runtime's: the application's
/// (the executor of the measurement's tasks), out of the process's `cpu`.
fn application_cpu(threads: &[mpq_io::path_threads::ThreadReport], cpu: f64) -> f64 {
    (cpu - threads.iter().map(|t| t.cpu.as_secs_f64()).sum::<f64>()).max(0.0)
}

/// The JSON `threads` of a run: the runtime's threads, then the application's (role
/// `application`: the rest of the process's `cpu`).
pub(crate) fn threads_json(threads: &[mpq_io::path_threads::ThreadReport], cpu: f64) -> Vec<serde_json::Value> {
    let mut out = crate::report::threads_json(threads);
    out.push(json!({"role": "application", "cpu_s": application_cpu(threads, cpu)}));
    out
}

/// The datagrams received and the send calls made, over every thread.
pub(crate) fn io_counts(threads: &[mpq_io::path_threads::ThreadReport]) -> (u64, u64) {
    threads.iter().fold((0, 0), |(r, t), th| (r + th.io.rx_datagrams, t + th.io.tx_calls))
}
