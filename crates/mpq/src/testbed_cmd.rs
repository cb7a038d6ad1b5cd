//! `mpq lab testbed`: the kernel testbed (network namespaces joined by paths through a
//! user-space link emulator running the simulator's link model; mpq-lab's `testbed`
//! module and docs/lab-testbed.md).

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use mpq_lab::testbed::lifecycle::{self, Launcher, UpOptions};
use mpq_lab::testbed::spec::EventSpec;
use mpq_lab::testbed::{control, emulator, selfcheck};
use mpq_sim::spec::{parse_duration, parse_probability, parse_rate};

/// `mpq lab testbed` subcommands.
#[derive(Debug, Subcommand)]
pub enum TestbedCommand {
    /// Build client, server and router namespaces joined by one path per --link, start the
    /// link emulator, and print one JSON object: client_ns, server_ns and paths
    /// ([{"client": IP, "server": IP, ...}]). Run anything over it with
    /// `ip netns exec <client_ns|server_ns> ...`. When the kernel has MPTCP, every client
    /// address is also an MPTCP subflow endpoint (`"mptcp": true`), so MPTCP connections use
    /// every path. With --bottleneck every path also crosses one shared link, and one more
    /// path, the competitor's (`"competitor": {"client": IP, "server": IP}`), crosses only
    /// that link: run competing traffic between its addresses. Needs root.
    #[command(
        after_help = "Examples:\n  mpq lab testbed up --link 50mbit/20ms/queue=20ms --link 10mbit/80ms/loss=1%\n  \
mpq lab testbed up --name b --link '10mbit/40ms|50mbit/40ms' --event 0@5s:down --event 0@8s:up\n  \
mpq lab testbed up --name s --link 100mbit/10ms --link 100mbit/30ms --bottleneck 20mbit/20ms/queue=30ms\n  \
ip netns exec mpqlab-tb-server iperf3 -s -D && ip netns exec mpqlab-tb-client iperf3 -c 10.1.2.2 -B 10.1.1.2\n\n\
A path's link is the `mpq sim --link` syntax (RATE/RTT[/queue=..][/loss=..][/jitter=..]...), or C2S|S2C\n\
for a spec per direction. Path i joins client 10.(i+1).1.2 and server 10.(i+1).2.2; a path is its\n\
client address (traffic from or to it crosses path i whatever the server address). With\n\
--bottleneck, a path's RTT is its own plus the bottleneck's (client to server: its link, then the\n\
bottleneck; server to client: the bottleneck, then its link), and the competitor's path is path n.\n\
Events: PATH[.c2s|.s2c]@TIME:ACTION, ACTION down, up, blackhole, rate=RATE, loss=LOSS, rtt=TIME,\n\
delay=TIME (one-way) or mtu=BYTES; TIME counts from the emulator's start (started_unix_ns)."
    )]
    Up(UpArgs),
    /// Remove a testbed: stop every process in its namespaces (the emulator and anything
    /// started there), delete the namespaces (with their veths and TUN devices) and its
    /// files. Works on half-built testbeds and without a state file.
    Down(DownArgs),
    /// List the testbeds (and namespaces left without a state file).
    List,
    /// Print a testbed's link counters and current configuration as JSON.
    Stats(NameArg),
    /// Apply a link event now, e.g. `0:down`, `1.s2c:loss=5%`, `0:rate=10mbit`.
    Event(EventArgs),
    /// Check the emulator against itself: per rate, configured against measured RTT, rate,
    /// loss and TCP goodput on a one-path (or --paths N) testbed (about 15 s per rate).
    /// Needs root.
    Selfcheck(SelfcheckArgs),
    /// Run a testbed's emulator (started by `up` inside the router namespace).
    #[command(hide = true)]
    Emulator(NameArg),
}

/// A testbed's name.
#[derive(Debug, Args)]
pub struct NameArg {
    /// The testbed's name (namespaces mpqlab-NAME-client, -server, -router).
    #[arg(long, default_value = "tb")]
    pub name: String,
}

/// `mpq lab testbed up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// The testbed's name (namespaces mpqlab-NAME-client, -server, -router).
    #[arg(long, default_value = "tb")]
    pub name: String,
    /// A path's link (repeat per path): the `mpq sim --link` syntax, or C2S|S2C.
    #[arg(long = "link", value_name = "SPEC", required = true)]
    pub links: Vec<String>,
    /// A link every path crosses after its own (the `mpq sim --bottleneck` syntax, both
    /// directions alike, with a rate): the paths' links become access links into it. Adds the
    /// competitor's path, which crosses only the bottleneck.
    #[arg(long, value_name = "SPEC")]
    pub bottleneck: Option<String>,
    /// A scripted link event, PATH[.DIR]@TIME:ACTION (repeatable).
    #[arg(long = "event", value_name = "EVENT")]
    pub events: Vec<String>,
    /// Path N loses everything from TIME on, as `mpq sim --fail-link` (= N@TIME:blackhole).
    #[arg(long = "fail-link", value_name = "N@TIME")]
    pub fail: Vec<String>,
    /// Seed of the links' random processes (loss, jitter, duplication, reordering).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run the emulator in the real-time scheduling class (SCHED_FIFO): it keeps up at
    /// high rates on a busy machine, ahead of every ordinary process.
    #[arg(long)]
    pub realtime: bool,
}

/// `mpq lab testbed down`.
#[derive(Debug, Args)]
pub struct DownArgs {
    /// The testbed's name.
    #[arg(long, default_value = "tb", conflicts_with = "all")]
    pub name: String,
    /// Every testbed (every state file and every mpqlab-* namespace).
    #[arg(long)]
    pub all: bool,
}

/// `mpq lab testbed event`.
#[derive(Debug, Args)]
pub struct EventArgs {
    /// The testbed's name.
    #[arg(long, default_value = "tb")]
    pub name: String,
    /// PATH[.DIR]:ACTION, e.g. 0:down or 1.c2s:rate=5mbit.
    pub event: String,
}

/// `mpq lab testbed selfcheck`.
#[derive(Debug, Args)]
pub struct SelfcheckArgs {
    /// Link rates to check, comma-separated.
    #[arg(long, default_value = "10mbit,100mbit,500mbit,1gbit", value_delimiter = ',')]
    pub rates: Vec<String>,
    /// The path's RTT (its queue holds as much).
    #[arg(long, default_value = "20ms")]
    pub rtt: String,
    /// Bernoulli loss of the loss step.
    #[arg(long, default_value = "1%")]
    pub loss: String,
    /// Also check this Gilbert-Elliott loss at the first rate ("none" to skip).
    #[arg(long, default_value = "ge:1%,10%")]
    pub ge: String,
    /// Seconds of traffic in the rate and TCP steps.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Datagrams in the loss step.
    #[arg(long, default_value_t = 50_000)]
    pub loss_packets: u64,
    /// The testbed's name while it runs.
    #[arg(long, default_value = "selfcheck")]
    pub name: String,
    /// Print the rows as JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Run the emulator in the real-time scheduling class (as `up --realtime`).
    #[arg(long)]
    pub realtime: bool,
    /// Paths of the testbed: the rate step loads all of them at once (the table gives the
    /// slowest path's rate), to check the emulator's threads side by side.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=8))]
    pub paths: u64,
    /// The paths' MTU: the rate step's packets fill it (the emulator's cost is per packet).
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u64).range(576..=65535))]
    pub mtu: u64,
}

fn launcher() -> Result<Launcher> {
    Ok(Launcher {
        program: std::env::current_exe()?,
        args: ["lab", "testbed", "emulator", "--name"].map(String::from).to_vec(),
    })
}

/// Runs `mpq lab testbed ...`.
pub fn run(cmd: TestbedCommand) -> Result<()> {
    match cmd {
        TestbedCommand::Up(a) => up(a),
        TestbedCommand::Down(a) => down(a),
        TestbedCommand::List => {
            for n in lifecycle::all_names() {
                println!("{}", lifecycle::describe(&n));
            }
            Ok(())
        }
        TestbedCommand::Stats(a) => {
            let r = control::stats(&a.name)?;
            println!("{}", serde_json::to_string_pretty(&r)?);
            Ok(())
        }
        TestbedCommand::Event(a) => {
            EventSpec::parse_now(&a.event).map_err(|e| anyhow!("{e}"))?;
            control::event(&a.name, &a.event)?;
            Ok(())
        }
        TestbedCommand::Selfcheck(a) => selfcheck_cmd(a),
        TestbedCommand::Emulator(a) => emulator::run::run(&a.name, &mut std::io::stdout()).map_err(anyhow::Error::msg),
    }
}

fn up(a: UpArgs) -> Result<()> {
    let mut events = a.events;
    for f in &a.fail {
        EventSpec::parse_fail_link(f).map_err(|e| anyhow!("--fail-link {e}"))?;
        events.push(format!("{f}:blackhole"));
    }
    let opts = UpOptions {
        name: a.name,
        links: a.links,
        bottleneck: a.bottleneck,
        events,
        seed: a.seed,
        realtime: a.realtime,
    };
    let state = lifecycle::up(&opts, &launcher()?).map_err(anyhow::Error::msg)?;
    println!("{}", lifecycle::summary(&state));
    Ok(())
}

fn down(a: DownArgs) -> Result<()> {
    mpq_lab::testbed::host::preflight().map_err(anyhow::Error::msg)?;
    let names = if a.all { lifecycle::all_names() } else { vec![a.name] };
    let mut failed = Vec::new();
    for n in names {
        match lifecycle::down(&n) {
            Ok(r) if r.namespaces.is_empty() && !r.state_file => eprintln!("testbed {n}: nothing to remove"),
            Ok(r) => eprintln!(
                "testbed {n}: removed {} namespace(s), stopped {} process(es)",
                r.namespaces.len(),
                r.processes.len()
            ),
            Err(e) => failed.push(format!("testbed {n}: {e}")),
        }
    }
    if !failed.is_empty() {
        bail!("{}", failed.join("\n"));
    }
    Ok(())
}

fn selfcheck_cmd(a: SelfcheckArgs) -> Result<()> {
    let rates =
        a.rates.iter().map(|r| parse_rate(r)).collect::<Result<Vec<_>, _>>().map_err(|e| anyhow!("--rates: {e}"))?;
    if rates.is_empty() || rates.contains(&0) {
        bail!("--rates: give finite rates, e.g. 10mbit,100mbit");
    }
    if !(a.seconds > 0.0 && a.seconds <= 600.0) {
        bail!("--seconds must be between 0 and 600");
    }
    let opts = selfcheck::Options {
        name: a.name,
        rates,
        rtt: parse_duration(&a.rtt).map_err(|e| anyhow!("--rtt: {e}"))?,
        loss: parse_probability(&a.loss).map_err(|e| anyhow!("--loss: {e}"))?,
        seconds: a.seconds,
        loss_packets: a.loss_packets.max(1),
        gilbert_elliott: (a.ge != "none").then_some(a.ge),
        realtime: a.realtime,
        paths: a.paths as usize,
        mtu: a.mtu as usize,
    };
    if let Some(ge) = &opts.gilbert_elliott {
        mpq_sim::spec::parse_loss(ge).map_err(|e| anyhow!("--ge: {e}"))?;
    }
    if !a.json {
        print!("{}", selfcheck::table(&[]));
    }
    let json = a.json;
    selfcheck::run(&opts, &launcher()?, |row| {
        if json {
            println!("{}", serde_json::to_string(row).unwrap_or_default());
        } else {
            println!("{}", selfcheck::line(row));
        }
    })
    .map_err(anyhow::Error::msg)?;
    Ok(())
}
