//! `mpq perf client --shard N`: seed 000's shardQUIC baseline. N independent connections,
//! each on a path of its own (the k-th from the k-th `--local` address to the k-th server
//! address, cycling) and on a thread of its own, share the measurement: each runs for the
//! duration, or downloads its share of `--bytes`. The goodput is their bytes over the time
//! from the first start to the last end.

use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use mpq_proto::conn::ClientConfig;
use serde_json::json;

use crate::cli::PerfClientArgs;
use crate::perf::cpu_seconds;
use crate::perf_client::{Measured, Measurement};

/// Runs the sharded measurement and prints the result.
pub fn client(args: &PerfClientArgs, config: ClientConfig, duration: Option<Duration>, n: usize) -> Result<()> {
    if args.idle_connections > 0 || args.datagrams {
        bail!(
            "--shard measures streams over N connections: it does not combine with --idle-connections or --datagrams"
        );
    }
    if args.bytes.is_some_and(|b| b < n as u64) {
        bail!("--bytes: give each of the --shard {n} connections at least a byte");
    }
    let locals = crate::runner::client_locals(&args.paths, args.connect)?;
    let mut servers = vec![args.connect];
    servers.extend(args.paths.server_addrs.iter().copied().filter(|a| *a != args.connect));
    // The endpoint's shard k starts its connections from the k-th --local address (its
    // sockets are on ports of their own), and its connection goes to the k-th server address.
    let executor = crate::api_runtime::executor()?;
    let ep = crate::api_runtime::endpoint(&locals, None, &args.common)?;
    let shards: Vec<Measurement> = (0..n)
        .map(|k| Measurement {
            ep: &ep,
            args,
            config: &config,
            server: servers[k % servers.len()],
            per_stream: match args.bytes {
                // The first `total % n` shards take a byte more.
                Some(total) => (total / n as u64 + u64::from((k as u64) < total % n as u64)).div_ceil(args.streams),
                None => u64::MAX,
            },
            duration,
            progress: false,
            one_path: true,
        })
        .collect();
    let cpu0 = cpu_seconds();
    let mut signals = crate::api_runtime::stop_signals()?;
    let done = executor.block_on(async {
        // (In order: the k-th connection made is shard k's.)
        match signals.or_stop(crate::api_client::join_all(shards.iter().map(|m| m.run()).collect())).await {
            Ok(done) => {
                crate::stop_signal::close_and_drain(&ep, 0, b"done").await;
                Ok(done)
            }
            Err(stop) => Err(crate::stop_signal::interrupted(&ep, 0, stop).await),
        }
    });
    drop(executor);
    let done = done?;
    drop(shards);
    let threads = crate::perf::endpoint_threads(ep);
    let cpu = cpu_seconds() - cpu0;
    let mut outcomes: Vec<Measured> = Vec::new();
    for (k, o) in done.into_iter().enumerate() {
        outcomes.push(o.map_err(|e| anyhow!("perf run failed on shard {k} (to {}): {e}", servers[k % servers.len()]))?);
    }
    let start = outcomes.iter().map(|o| o.start).min().ok_or_else(|| anyhow!("the measurement never started"))?;
    let end = outcomes.iter().map(|o| o.end).max().unwrap_or(start);
    let secs = (end - start).as_secs_f64().max(1e-9);
    let bytes: u64 = outcomes.iter().map(|o| o.bytes).sum();
    let goodput = bytes as f64 * 8.0 / secs;
    let (rx_datagrams, tx_calls) = crate::perf::io_counts(&threads);
    let shard_secs = |o: &Measured| (o.end - o.start).as_secs_f64().max(1e-9);
    if args.json {
        let per_shard: Vec<_> = outcomes
            .iter()
            .enumerate()
            .map(|(k, o)| {
                json!({
                    "shard": k,
                    "server": servers[k % servers.len()].to_string(),
                    "bytes": o.bytes,
                    "duration_s": shard_secs(o),
                    "goodput_bps": o.bytes as f64 * 8.0 / shard_secs(o),
                    "multipath": o.multipath,
                    "key_updates": o.stats.key_updates,
                    "paths": crate::report::paths_json(&o.stats),
                })
            })
            .collect();
        let out = json!({
            "goodput_bps": goodput,
            "duration_s": secs,
            "bytes": bytes,
            "streams": args.streams,
            "cpu_s": cpu,
            "cpu_util": cpu / secs,
            "key_updates": outcomes.iter().map(|o| o.stats.key_updates).sum::<u64>(),
            "multipath": false,
            "rx_datagrams": rx_datagrams,
            "tx_calls": tx_calls,
            // Every connection's paths, shard by shard (each `shards` entry has its own).
            "paths": outcomes.iter().flat_map(|o| crate::report::paths_json(&o.stats)).collect::<Vec<_>>(),
            "shards": per_shard,
            "threads": crate::perf::threads_json(&threads, cpu),
        });
        println!("{out}");
    } else {
        println!(
            "{bytes} bytes in {secs:.2} s over {n} connections: {:.1} Mbit/s, client CPU {:.0} %",
            goodput / 1e6,
            100.0 * cpu / secs
        );
        for (k, o) in outcomes.iter().enumerate() {
            let cpu = threads.iter().filter(|t| t.shard == Some(k)).map(|t| t.cpu.as_secs_f64()).sum::<f64>();
            println!(
                "  shard {k} (to {}): {:.1} MB, {:.1} Mbit/s, thread CPU {:.0} %",
                servers[k % servers.len()],
                o.bytes as f64 / 1e6,
                o.bytes as f64 * 8.0 / shard_secs(o) / 1e6,
                100.0 * cpu / secs
            );
        }
    }
    Ok(())
}
