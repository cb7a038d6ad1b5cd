//! The `mpq` command-line tool: file server and client (HTTP/0.9), perf tool, simulator, lab.

mod allocator;
mod api_client;
mod api_paths;
mod api_runtime;
mod bench_cmd;
mod bench_copy;
mod bench_pair;
mod bench_recv;
mod bench_seal;
mod bench_send;
mod cli;
mod client;
mod http3_client;
mod http3_server;
mod kernel_stream;
mod lab_cmd;
mod mptcp_counters;
mod perf;
mod perf_client;
mod perf_reqresp;
mod perf_server;
mod perf_shard;
mod perf_tcp;
mod progress;
mod report;
mod runner;
mod server;
mod sim_cmd;
mod stdout;
mod stop_signal;
mod testbed_cmd;
mod tls;

use clap::Parser;

fn main() {
    allocator::tune();
    let args = cli::Cli::parse();
    let verbose = match &args.command {
        cli::Command::Server(a) => a.common.verbose,
        cli::Command::Client(a) => a.common.verbose,
        cli::Command::Perf(cli::PerfCommand::Server(a)) => a.common.verbose,
        cli::Command::Perf(cli::PerfCommand::Client(a)) => a.common.verbose,
        cli::Command::Sim(_) | cli::Command::Lab(_) | cli::Command::Bench(_) => 0,
    };
    if matches!(args.command, cli::Command::Server(_) | cli::Command::Client(_) | cli::Command::Perf(_)) {
        // An endpoint on real sockets (not the simulator's one process: `allocator.rs`).
        allocator::small_pages();
    }
    let level = match verbose {
        0 => "warn",
        1 => "debug",
        _ => "trace",
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colours only on a terminal: logs written to files stay greppable.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_max_level(level.parse::<tracing::Level>().unwrap_or(tracing::Level::WARN))
        .init();
    let result = match args.command {
        cli::Command::Server(a) => server::run(a),
        cli::Command::Client(a) => api_client::run(a),
        cli::Command::Perf(cli::PerfCommand::Server(a)) => perf_server::server(a),
        cli::Command::Perf(cli::PerfCommand::Client(a)) => perf::client(a),
        cli::Command::Sim(a) => sim_cmd::run(a),
        cli::Command::Lab(c) => lab_cmd::run_lab(c),
        cli::Command::Bench(c) => bench_cmd::run(c),
    };
    if let Err(e) = result {
        // (Written without `eprintln!`, which panics if stderr's reader is gone.)
        if let Some(stop_signal::Interrupted(stop)) = e.downcast_ref::<stop_signal::Interrupted>() {
            stop_signal::note(format_args!("{e}"));
            std::process::exit(stop.exit_status());
        }
        stop_signal::note(format_args!("error: {e:#}"));
        std::process::exit(1);
    }
}
