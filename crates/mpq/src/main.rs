//! The `mpq` command-line tool: file server and client (HTTP/0.9), perf tool, simulator, lab.

/// mimalloc instead of the system allocator: the application's threads fill stream buffers
/// that the runtime's threads free once acknowledged, and glibc's malloc answered that by
/// shrinking and regrowing its heap (brk, page faults) on every buffer: see docs/runtimes.md.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
mod testbed_cmd;
mod tls;

use clap::Parser;

/// mimalloc's `mi_option_purge_delay` (its `mi_option_e` in mimalloc.h, v2 and v3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Memory a thread freed goes back to the system after 10 s unused, not mimalloc's 1 s: with
/// a thread per path, buffers one thread fills and another frees left pages empty long
/// enough to be purged and faulted in again (transparent huge pages: 2 MB zeroed each), 1,000
/// to 1,800 faults in 3 s of an 8-path transfer, 4 % of its cycles; with 10 s, one.
/// `MIMALLOC_PURGE_DELAY` still overrides it.
fn tune_allocator() {
    // SAFETY: sets an option's default before it is read; mimalloc allows this at any time.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set_default(MI_OPTION_PURGE_DELAY, 10_000)
    };
}

fn main() {
    tune_allocator();
    let args = cli::Cli::parse();
    let verbose = match &args.command {
        cli::Command::Server(a) => a.common.verbose,
        cli::Command::Client(a) => a.common.verbose,
        cli::Command::Perf(cli::PerfCommand::Server(a)) => a.common.verbose,
        cli::Command::Perf(cli::PerfCommand::Client(a)) => a.common.verbose,
        cli::Command::Sim(_) | cli::Command::Lab(_) | cli::Command::Bench(_) => 0,
    };
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
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
