//! Command-line definitions.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// mpq: a multicore multipath QUIC stack and its lab tools.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve files over HTTP/0.9 (ALPN hq-interop), or HTTP/3 with --http3.
    ///
    /// Runs until Ctrl-C, SIGTERM or SIGHUP, which close every connection (each client
    /// learns why) and wait at most 3 s for them to drain before the server exits.
    Server(ServerArgs),
    /// Download URLs over HTTP/0.9 (ALPN hq-interop), or HTTP/3 with --http3.
    Client(ClientArgs),
    /// Throughput measurement (server sends, client measures goodput).
    #[command(subcommand)]
    Perf(PerfCommand),
    /// Simulate a download (or request/response traffic) over given links in virtual time,
    /// running the real protocol code. With no arguments: a two-path example.
    Sim(crate::sim_cmd::SimArgs),
    /// Experiments from YAML files (designs over link parameters, protocol factors,
    /// single-path baselines), run in the simulator in parallel: plan, run, merge.
    #[command(subcommand)]
    Lab(crate::lab_cmd::LabCommand),
    /// In-process benchmarks of the protocol core: `mpq bench receive` measures how one
    /// connection's receive work scales with the threads driving its paths.
    #[command(subcommand)]
    Bench(crate::bench_cmd::BenchCommand),
}

/// `mpq perf` subcommands.
// (Parsed once per process: the size of the larger variant costs nothing.)
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum PerfCommand {
    /// Answer perf clients with as much data as they ask for.
    ///
    /// Runs until Ctrl-C, SIGTERM or SIGHUP, which close every QUIC connection (each client
    /// learns why) and wait at most 3 s for them to drain before the server exits (the
    /// kernel's transports, --transport tcp-tls|mptcp-tls, end at once).
    Server(PerfServerArgs),
    /// Connect to a perf server and measure goodput.
    Client(PerfClientArgs),
}

/// Options shared by every subcommand.
#[derive(Debug, Args, Clone)]
pub struct Common {
    /// Write one qlog file (JSON-SEQ) per connection into this directory.
    #[arg(long, value_name = "DIR")]
    pub qlog_dir: Option<PathBuf>,
    /// Append TLS secrets to this file (NSS key log format, for Wireshark). SSLKEYLOGFILE is
    /// honoured too.
    #[arg(long, value_name = "FILE")]
    pub keylog: Option<PathBuf>,
    /// Congestion controller of each path: newreno, cubic, or the coupled lia / olia.
    #[arg(long, default_value = "cubic")]
    pub cc: String,
    /// Standard slow start, without HyStart++ (RFC 9406), in every path's initial slow start.
    #[arg(long)]
    pub no_hystart: bool,
    /// Multipath scheduler: minrtt, round-robin, weighted, redundant, rtt-probe, ecf or pinned.
    #[arg(long, default_value = "minrtt")]
    pub scheduler: String,
    /// Where multipath ACKs go: same-path, lowest-rtt or all-paths.
    #[arg(long, default_value = "same-path")]
    pub ack_policy: String,
    /// Most ranges one ACK frame reports, the highest first (default: every range kept,
    /// 256); a smaller limit makes smaller ACKs after losses.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub ack_ranges: Option<u64>,
    /// Number the packets of all paths from one packet number space instead of one per
    /// path (seed 003's single-space experiment; not RFC 10069: used only when the peer
    /// is mpq with this switch too).
    #[arg(long)]
    pub single_pn_space: bool,
    /// Largest path ID offered to the peer (initial_max_path_id; multipath is offered by
    /// default and used when the peer offers it too).
    #[arg(long, default_value_t = 7, value_name = "N")]
    pub max_path_id: u64,
    /// Do not offer multipath (plain RFC 9000 QUIC).
    #[arg(long)]
    pub no_multipath: bool,
    /// Restrict TLS to one cipher suite: aes128gcm, aes256gcm or chacha20.
    #[arg(long)]
    pub cipher: Option<String>,
    /// Largest UDP payload to send: the ceiling of each path's PMTU discovery (default
    /// 1472, an Ethernet MTU over IPv4), also advertised as the largest we receive. With
    /// --no-pmtud it is used on trust (default 1200 then): raise it only on paths known to
    /// carry it.
    #[arg(long, value_name = "BYTES")]
    pub mtu: Option<u16>,
    /// Do not run PMTU discovery (RFC 8899): every path sends --mtu-sized datagrams from the
    /// end of the handshake, without probing.
    #[arg(long)]
    pub no_pmtud: bool,
    /// Send one datagram per system call: no UDP GSO batches (seed 001's offload
    /// comparison; QUIC only).
    #[arg(long)]
    pub no_gso: bool,
    /// Receive one datagram per system call: UDP GRO off on every socket (QUIC only).
    #[arg(long)]
    pub no_gro: bool,
    /// Fix the receive flow-control windows at BYTES: the connection's (initial_max_data)
    /// and each stream's (initial_max_stream_data_*), without auto-tuning them up (seed
    /// 001's window sweep; default: 1.25 MB per stream and 2 MB per connection to start, tuned up to 16 MiB and 24
    /// MiB per connection as the transfer needs; QUIC only).
    #[arg(long, value_name = "BYTES")]
    pub window: Option<u64>,
    /// Initiate a key update every N packets (RFC 9001 §6).
    #[arg(long, value_name = "N")]
    pub key_update_every: Option<u64>,
    /// Idle timeout in seconds.
    #[arg(long, default_value_t = 30)]
    pub idle_timeout: u64,
    /// Give up on a handshake that has not completed after this many seconds (a client
    /// then reports "no answer from ADDR"); 0 leaves only the idle timeout.
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub handshake_timeout: f64,
    /// QUIC version to use: v1 (RFC 9000) or v2 (RFC 9369). A client sends its first
    /// Initial in it (default v1, which every server speaks); a server accepts only it.
    /// --versions widens what either accepts.
    #[arg(long, value_name = "VERSION", value_parser = mpq_proto::packet::version::parse)]
    pub quic_version: Option<u32>,
    /// QUIC versions accepted, most preferred first, e.g. v2,v1 (default: v1,v2), for
    /// compatible version negotiation (RFC 9368), which changes version without a round
    /// trip. A client still starts in v1 if the list has it (or in --quic-version) and
    /// offers the list in this order, so a server may move it to v2. A server answers
    /// other versions with Version Negotiation and moves each connection to the first
    /// version of this list that the client offers; without the flag a server follows the
    /// client's order (and supports v1 and v2).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = mpq_proto::packet::version::parse)]
    pub versions: Option<Vec<u32>>,
    /// Client: stay on the server's handshake address even if it offers a preferred_address
    /// (by default a connection without multipath validates the preferred address and moves
    /// there, RFC 9000 §9.6.1).
    #[arg(long)]
    pub no_preferred_address: bool,
    /// Do not advertise grease_quic_bit (RFC 9287): keep the QUIC Bit set in every packet
    /// and drop packets without it.
    #[arg(long)]
    pub no_grease_quic_bit: bool,
    /// Runtime: single (every path of every connection on one event loop) or per-path (a
    /// thread per path, each with a socket connected to the path's peer, meeting the
    /// connection's shared state once per batch).
    #[arg(long, default_value = "single", value_name = "RUNTIME")]
    pub threads: Threads,
    /// Shard runtime: N independent endpoints, each with its own sockets and thread (seed
    /// 000's shardQUIC baseline). A client opens one single-path connection per shard, the
    /// i-th from the i-th --local address (on a port of its shard's) to the i-th server
    /// address (cycling) and shares the work out among them; a server's shards share its listening addresses
    /// (SO_REUSEPORT), the kernel delivering each datagram to the shard of its connection ID
    /// (a connection's first Initial to the a-th of N addresses goes to shard a).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256), conflicts_with = "threads")]
    pub shard: Option<u64>,
    /// Kernel receive buffer of every UDP socket, in bytes (SO_RCVBUF; default 8 MiB as
    /// far as net.core.rmem_max allows).
    #[arg(long, value_name = "BYTES")]
    pub rcvbuf: Option<usize>,
    /// The kernel's TCP congestion control of every TCP or MPTCP socket
    /// (`--transport tcp-tls|mptcp-tls` only; TCP_CONGESTION), e.g. cubic, reno, bbr: one of
    /// `sysctl net.ipv4.tcp_available_congestion_control`. Default: the kernel's
    /// (net.ipv4.tcp_congestion_control), which the JSON summary reports as tcp_cc.
    #[arg(long, value_name = "NAME")]
    pub tcp_cc: Option<String>,
    /// Kernel send buffer of every UDP socket, in bytes (SO_SNDBUF; default 8 MiB as far as
    /// net.core.wmem_max allows).
    #[arg(long, value_name = "BYTES")]
    pub sndbuf: Option<usize>,
    /// With --threads per-path: how many path threads the endpoint's paths share: `cores`
    /// (as many as the CPUs it may use, or those of --cpus), `paths` (a thread per path,
    /// however many) or a number. Past the limit, each new path joins the thread that
    /// drives the fewest: with more paths than cores, a thread per path costs CPU in
    /// switches and cache misses.
    #[arg(long, value_name = "N|cores|paths", default_value = "cores")]
    pub path_threads: mpq_io::path_threads::PathThreadLimit,
    /// Pin the runtime's threads to these CPUs in turn, e.g. 0,1: the main thread to the
    /// first, each path thread (or shard) to the next (cycling).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub cpus: Vec<usize>,
    /// More logging (-v debug, -vv trace).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// The runtimes `--threads` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Threads {
    /// Every path on one event loop.
    #[default]
    Single,
    /// A thread per path.
    PerPath,
}

/// What `mpq perf` measures over (`--transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Transport {
    /// mpq's QUIC over UDP: multipath when both ends offer it, every path from --local.
    #[default]
    Quic,
    /// TLS 1.3 (rustls, the same suites and ALPN as QUIC) over one kernel TCP connection
    /// per stream: the single-path baseline.
    TcpTls,
    /// TLS 1.3 (rustls) over kernel MPTCP (IPPROTO_MPTCP): the kernel's path manager adds
    /// subflows from its endpoints (`ip mptcp endpoint ... subflow`, which `mpq lab testbed
    /// up` configures), and the client reports how many joined.
    MptcpTls,
}

impl Transport {
    /// The name on the command line and in the reports (`quic`, `tcp-tls`, `mptcp-tls`).
    pub fn name(self) -> &'static str {
        match self {
            Transport::Quic => "quic",
            Transport::TcpTls => "tcp-tls",
            Transport::MptcpTls => "mptcp-tls",
        }
    }
}

/// How a client spreads paths over addresses (multipath).
#[derive(Debug, Args, Clone)]
pub struct PathArgs {
    /// Local address to open a path from (repeat for several; the first carries the
    /// handshake), e.g. --local 10.0.1.1:0 --local 10.0.2.1:0.
    #[arg(long = "local", value_name = "ADDR")]
    pub locals: Vec<SocketAddr>,
    /// Another address of the server to open paths to (repeatable).
    #[arg(long = "server-addr", value_name = "ADDR")]
    pub server_addrs: Vec<SocketAddr>,
    /// How local and server addresses combine: mesh (every pair) or pairs (i-th with i-th).
    #[arg(long, default_value = "mesh")]
    pub path_mode: String,
    /// Most paths at once, the handshake path included.
    #[arg(long, default_value_t = 8)]
    pub max_paths: usize,
    /// Ask the server to use the extra paths only as backups (PATH_STATUS_BACKUP).
    #[arg(long)]
    pub backup_paths: bool,
    /// Abandon the extra paths (PATH_ABANDON) this many milliseconds after the first of them
    /// was validated, and do not reopen them (tests handover to path 0).
    #[arg(long, value_name = "MS")]
    pub abandon_after_ms: Option<u64>,
    /// Migrate the connection (RFC 9000 §9) this many milliseconds after the handshake is
    /// confirmed: its one path moves to the second --local address, with a new connection
    /// ID. For connections without multipath (--no-multipath, or a server without it).
    #[arg(long, value_name = "MS")]
    pub migrate_after_ms: Option<u64>,
}

/// `mpq server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Address to listen on (repeat to listen on several, e.g. one per interface).
    #[arg(long, default_value = "[::]:4433")]
    pub listen: Vec<SocketAddr>,
    /// Directory whose files are served.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    /// Certificate chain (PEM). Without it a self-signed certificate for localhost is made.
    #[arg(long, requires = "key")]
    pub cert: Option<PathBuf>,
    /// Private key (PEM, PKCS#8, SEC1 or PKCS#1).
    #[arg(long, requires = "cert")]
    pub key: Option<PathBuf>,
    /// Validate client addresses with a Retry before creating connection state (RFC 9000
    /// §8.1.2): never, auto (only while many handshakes are in progress, e.g. under a flood
    /// of spoofed Initials) or always (one more round trip for every new client).
    #[arg(long, default_value = "auto", value_name = "MODE")]
    pub retry: mpq_proto::token::RetryMode,
    /// Decline 0-RTT: session tickets still allow resumption, but not early data
    /// (by default tickets allow it and 0-RTT is accepted, each ticket once).
    #[arg(long = "no-0rtt")]
    pub no_0rtt: bool,
    /// Offer this address to clients in preferred_address (RFC 9000 §9.6), at most one IPv4
    /// and one IPv6 address; the server also listens there. A client that moves there
    /// (after validating it) is followed. E.g. --listen 127.0.0.1:4433
    /// --preferred-address 127.0.0.2:4434.
    #[arg(long = "preferred-address", value_name = "ADDR")]
    pub preferred_address: Vec<SocketAddr>,
    /// Serve HTTP/3 (RFC 9114, ALPN h3) instead of HTTP/0.9: GET and HEAD of the files
    /// under --root, 404 for the rest. Runs on the application API (mpq-api) and the h3
    /// crate, in any runtime (--threads single or per-path, or --shard N: the API's shards
    /// share the listening addresses, each connection steered to its shard by its ID).
    #[arg(long)]
    pub http3: bool,
    /// Shared options.
    #[command(flatten)]
    pub common: Common,
}

/// `mpq client`.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// URLs to fetch, e.g. https://127.0.0.1:4433/file (all from the same server).
    #[arg(required = true)]
    pub urls: Vec<String>,
    /// Directory to write the files to.
    #[arg(long, default_value = ".")]
    pub output: PathBuf,
    /// Trust this CA certificate (PEM) instead of none.
    #[arg(long, conflicts_with = "insecure")]
    pub ca: Option<PathBuf>,
    /// Do not verify the server certificate (tests only).
    #[arg(long)]
    pub insecure: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// End with one JSON summary object on stdout (bytes, duration_s, goodput_bps,
    /// multipath, paths).
    #[arg(long)]
    pub json: bool,
    /// Session resumption: fetch the first URL in a first connection, then the others in
    /// a second connection that resumes its TLS session with a ticket the server sent
    /// (RFC 8446 §2.2). Needs at least two URLs.
    #[arg(long)]
    pub resume: bool,
    /// Like --resume, and send the second connection's requests in 0-RTT packets when the
    /// ticket allows early data (RFC 9001 §4.6). If the server declines, they go again
    /// in 1-RTT packets.
    #[arg(long = "0rtt")]
    pub zero_rtt: bool,
    /// Fetch over HTTP/3 (RFC 9114, ALPN h3) instead of HTTP/0.9: a GET per URL, all at
    /// once; a status other than 200 is an error. Runs on the application API (mpq-api)
    /// and the h3 crate, in any runtime (with --shard N: N single-path connections, one per
    /// shard, sharing the URLs out); with --resume and --0rtt the second connection's
    /// requests go as HTTP/3 (in 0-RTT with --0rtt).
    #[arg(long)]
    pub http3: bool,
    /// Multipath addresses.
    #[command(flatten)]
    pub paths: PathArgs,
    /// Shared options.
    #[command(flatten)]
    pub common: Common,
}

/// `mpq perf server`.
#[derive(Debug, Args)]
pub struct PerfServerArgs {
    /// Address to listen on (repeatable).
    #[arg(long, default_value = "[::]:4433")]
    pub listen: Vec<SocketAddr>,
    /// Most connections held at once; Initials beyond it are dropped.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_connections: u64,
    /// Validate client addresses with a Retry before creating connection state (RFC 9000
    /// §8.1.2): never, auto (only while many handshakes are in progress, e.g. under a flood
    /// of spoofed Initials) or always (one more round trip for every new client).
    #[arg(long, default_value = "auto", value_name = "MODE")]
    pub retry: mpq_proto::token::RetryMode,
    /// What to serve over: quic (mpq, UDP), tcp-tls (rustls over kernel TCP) or mptcp-tls
    /// (rustls over kernel MPTCP; it also accepts plain TCP clients, which fall back). A
    /// client must use the same.
    #[arg(long, default_value = "quic", value_name = "TRANSPORT")]
    pub transport: Transport,
    /// Shared options.
    #[command(flatten)]
    pub common: Common,
}

/// `mpq perf client`.
#[derive(Debug, Args)]
pub struct PerfClientArgs {
    /// Server address.
    #[arg(long)]
    pub connect: SocketAddr,
    /// Parallel streams.
    #[arg(long, default_value_t = 1)]
    pub streams: u64,
    /// Measure for this many seconds.
    #[arg(long, default_value_t = 10.0, conflicts_with = "bytes")]
    pub duration: f64,
    /// Download exactly this many bytes in total instead of running for a duration.
    #[arg(long)]
    pub bytes: Option<u64>,
    /// End with one JSON summary object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Before measuring, open this many more connections to the server and leave them idle
    /// (what a busy server holds); they need the server's --max-connections above it.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub idle_connections: usize,
    /// Measure datagram throughput instead of streams: send unreliable DATAGRAM frames
    /// (RFC 9221) for --duration seconds, as fast as congestion control lets them out, and
    /// ask the server how many arrived. Reports datagrams sent, received and lost, and the
    /// goodput of the payload received. Datagrams are never retransmitted.
    #[arg(long, conflicts_with = "bytes")]
    pub datagrams: bool,
    /// With --datagrams: payload bytes per datagram. It must fit one packet (the error
    /// names the largest size the path and the server allow: about --mtu minus 45).
    #[arg(long, default_value_t = 1000, value_name = "BYTES", requires = "datagrams")]
    pub datagram_size: usize,
    /// With --datagrams: send every datagram on this path ID (0 is the handshake path,
    /// 1, 2... the paths --path opens, in order); datagrams wait until it is open and are
    /// dropped if it fails. Default: the scheduler places each datagram (with the default
    /// min-RTT scheduler, the fastest path with room in its congestion window).
    #[arg(long, value_name = "PATH_ID", requires = "datagrams")]
    pub datagram_path: Option<u64>,
    /// Measure a resumed connection that starts in 0-RTT: a first connection completes its
    /// handshake and takes the server's session tickets, then the measured one resumes and
    /// sends its requests (with --datagrams: its datagrams, RFC 9221 §3) from its first
    /// flight in 0-RTT packets. The summary says whether the server accepted (`zero_rtt`)
    /// and, with --datagrams, how many went in 0-RTT (`sent_0rtt`).
    #[arg(long = "0rtt")]
    pub zero_rtt: bool,
    /// Request/response instead of a bulk download (seed 002 §4.3, seed 004): every
    /// --request-interval send a request of this many bytes on a new stream, which the
    /// server answers with as many bytes; --requests of them. Reports each request's delay
    /// (from its slot in the schedule to the last byte of its answer) and its slot in
    /// seconds since the client started. QUIC only, not with --shard.
    #[arg(long, value_name = "BYTES", conflicts_with_all = ["bytes", "datagrams"])]
    pub request_size: Option<u64>,
    /// With --request-size: milliseconds between requests.
    #[arg(long, value_name = "MS", default_value_t = 400.0, requires = "request_size")]
    pub request_interval: f64,
    /// With --request-size: how many requests.
    #[arg(long, value_name = "N", default_value_t = 30, requires = "request_size")]
    pub requests: u64,
    /// What to measure over: quic (mpq, UDP; multipath over every --local), tcp-tls (TLS
    /// 1.3 over a kernel TCP connection per stream, from the first --local) or mptcp-tls
    /// (TLS 1.3 over kernel MPTCP: the initial subflow from the first --local, more from
    /// the kernel's subflow endpoints; with several --local the client reports
    /// mptcp_subflows_joined and warns if none joined). The server must use the same.
    /// TCP's congestion control is the kernel's default (sysctl
    /// net.ipv4.tcp_congestion_control) unless --tcp-cc names one; --cipher, --rcvbuf,
    /// --sndbuf and --handshake-timeout apply to both.
    #[arg(long, default_value = "quic", value_name = "TRANSPORT")]
    pub transport: Transport,
    /// Multipath addresses.
    #[command(flatten)]
    pub paths: PathArgs,
    /// Shared options.
    #[command(flatten)]
    pub common: Common,
}
