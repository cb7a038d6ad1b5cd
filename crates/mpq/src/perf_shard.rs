//! `mpq perf client --shard N`: seed 000's shardQUIC baseline. N independent connections,
//! each on a path of its own (the k-th from the k-th `--local` address to the k-th server
//! address, cycling) and on a thread of its own, share the measurement: each runs for the
//! duration, or downloads its share of `--bytes`. The goodput is their bytes over the time
//! from the first start to the last end.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Result};
use mpq_proto::conn::ClientConfig;
use serde_json::json;

use crate::cli::{PathArgs, PerfClientArgs, Threads};
use crate::perf::{cpu_seconds, PerfClient};
use crate::runner;

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
    let locals = runner::client_locals(&args.paths, args.connect)?;
    let mut servers = vec![args.connect];
    servers.extend(args.paths.server_addrs.iter().copied().filter(|a| *a != args.connect));
    // Each connection has a socket of its own: bound plainly (a fixed --local port used by
    // two shards is refused), not shared as a server's shards are.
    let mut own = args.common.clone();
    own.shard = None;
    own.threads = Threads::Single;
    let mut sockets = Vec::new();
    let mut shards = Vec::new();
    for (k, endpoint) in runner::endpoints(None, &args.common).into_iter().enumerate() {
        let server = servers[k % servers.len()];
        let socket = runner::bind(&[locals[k % locals.len()]], &own)?;
        let bound: Vec<SocketAddr> = socket.iter().map(|s| s.local_addr()).collect();
        let one_path = PathArgs { locals: Vec::new(), server_addrs: Vec::new(), max_paths: 1, ..args.paths.clone() };
        let paths = runner::ClientPaths::new(&one_path, &bound, server)?;
        let per_stream = match args.bytes {
            // The first `total % n` shards take a byte more.
            Some(total) => (total / n as u64 + u64::from((k as u64) < total % n as u64)).div_ceil(args.streams),
            None => u64::MAX,
        };
        shards.push((endpoint, PerfClient::new(args, config.clone(), paths, server, per_stream, duration)));
        sockets.push(socket);
    }
    let cpu0 = cpu_seconds();
    let done = crate::shard_run::run(sockets, shards, &args.common)?;
    let cpu = cpu_seconds() - cpu0;
    let outcomes: Vec<_> = done.iter().map(|(app, _)| app.outcome()).collect();
    for (k, o) in outcomes.iter().enumerate() {
        if let Some(e) = &o.error {
            bail!("perf run failed on shard {k} (to {}): {e}", servers[k % servers.len()]);
        }
    }
    let start = outcomes.iter().filter_map(|o| o.start).min();
    let end = outcomes.iter().filter_map(|o| o.end).max();
    let (Some(start), Some(end)) = (start, end) else { bail!("the measurement never started") };
    if outcomes.iter().any(|o| o.start.is_none() || o.end.is_none()) {
        bail!("a shard's measurement never started");
    }
    let secs = (end - start).as_secs_f64().max(1e-9);
    let bytes: u64 = outcomes.iter().map(|o| o.bytes).sum();
    let goodput = bytes as f64 * 8.0 / secs;
    let threads: Vec<_> = done.iter().flat_map(|(_, run)| run.threads.iter().cloned()).collect();
    let rx_datagrams: u64 = done.iter().map(|(_, run)| run.io.rx_datagrams).sum();
    let tx_calls: u64 = done.iter().map(|(_, run)| run.io.tx_calls).sum();
    let shard_secs = |o: &crate::perf::ClientOutcome| match (o.start, o.end) {
        (Some(s), Some(e)) => (e - s).as_secs_f64().max(1e-9),
        _ => secs,
    };
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
            "threads": crate::report::threads_json(&threads),
        });
        println!("{out}");
    } else {
        println!(
            "{bytes} bytes in {secs:.2} s over {n} connections: {:.1} Mbit/s, client CPU {:.0} %",
            goodput / 1e6,
            100.0 * cpu / secs
        );
        for (k, (o, (_, run))) in outcomes.iter().zip(&done).enumerate() {
            let cpu = run.threads.iter().map(|t| t.cpu.as_secs_f64()).sum::<f64>();
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
