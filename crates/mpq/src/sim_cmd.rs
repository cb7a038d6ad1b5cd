//! `mpq sim`: one download or request/response run over a simulated topology, running the
//! real protocol code in virtual time (mpq-sim's `Scenario`).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use mpq_sim::bottleneck::Bottleneck;
use mpq_sim::scenario::{Progress, QlogFactory, RunHooks, Scenario, ScenarioError, Workload};
use mpq_sim::spec::{parse_duration, parse_size};
use mpq_sim::LinkConfig;

/// `mpq sim`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  mpq sim\n  mpq sim --link 50mbit/20ms --link 10mbit/180ms/loss=1%/queue=100ms \
--size 50MB --scheduler minrtt --cc olia\n  mpq sim --link 50mbit/15ms --link 50mbit/25ms --fail-link 0@3s \
--workload reqresp:750B@400ms --json")]
pub struct SimArgs {
    /// A path's link: RATE/RTT[/loss=P][/queue=TIME|BYTES][/jitter=TIME]..., e.g.
    /// 50mbit/20ms or 10mbit/180ms/loss=1%/queue=100ms. Repeat for more paths; the first
    /// carries the handshake. Default: 50mbit/20ms/queue=30ms and 20mbit/60ms/queue=90ms
    /// (queues of 1.5 × the bandwidth-delay product; a link without `queue=` has none and
    /// its RTT grows without bound under load).
    #[arg(long = "link", value_name = "SPEC")]
    pub links: Vec<String>,
    /// Bytes to download (B, KB, MB, GB, KiB, MiB, GiB).
    #[arg(long, default_value = "20MB")]
    pub size: String,
    /// Multipath scheduler: minrtt, round-robin, weighted, redundant, rtt-probe, ecf or pinned.
    #[arg(long, default_value = "minrtt")]
    pub scheduler: String,
    /// Congestion controller of every path: newreno, cubic, lia or olia.
    #[arg(long, default_value = "cubic")]
    pub cc: String,
    /// Standard slow start, without HyStart++ (RFC 9406), in every path's initial slow start.
    #[arg(long)]
    pub no_hystart: bool,
    /// Where PATH_ACKs go: same-path, lowest-rtt or all-paths.
    #[arg(long, default_value = "same-path")]
    pub ack_policy: String,
    /// Most ranges one ACK frame reports, the highest first (default: every range kept,
    /// 256); e.g. 4 to reproduce an ACK-range-limited receiver.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub ack_ranges: Option<u64>,
    /// One packet number space for all paths instead of one per path, both endpoints
    /// (seed 003's single-space experiment; not RFC 10069).
    #[arg(long)]
    pub single_pn_space: bool,
    /// Make link N lose everything from time T on, e.g. 0@3s (repeatable).
    #[arg(long = "fail-link", value_name = "N@T")]
    pub fail: Vec<String>,
    /// A bottleneck link (same form as --link) that every path crosses after its own link,
    /// which becomes an access link: a path's RTT is its link's plus the bottleneck's.
    #[arg(long, value_name = "SPEC")]
    pub bottleneck: Option<String>,
    /// With --bottleneck: a competing single-path CUBIC download crosses the bottleneck for
    /// the whole run (its goodput is reported).
    #[arg(long, requires = "bottleneck")]
    pub competitor: bool,
    /// download, or reqresp:SIZE@INTERVAL[xCOUNT] (interactive traffic, as in the handover
    /// experiment of "Multipath QUIC: Design and Evaluation", CoNEXT 2017), e.g.
    /// reqresp:750B@400ms.
    #[arg(long, default_value = "download")]
    pub workload: String,
    /// How long a request/response run lasts (the number of requests follows), e.g. 10s.
    #[arg(long, default_value = "10s")]
    pub duration: String,
    /// Seed of every random process (links, endpoints).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stop after this much virtual time (default: generous, from the workload).
    #[arg(long, value_name = "TIME")]
    pub max_time: Option<String>,
    /// Print one JSON object (the full result) instead of a summary.
    #[arg(long)]
    pub json: bool,
    /// Write client and server qlog files (JSON-SEQ) into this directory.
    #[arg(long, value_name = "DIR")]
    pub qlog_dir: Option<PathBuf>,
    /// QUIC version of the connection: v1 (RFC 9000) or v2 (RFC 9369, both endpoints
    /// speak only v2).
    #[arg(long, default_value = "v1", value_name = "VERSION", value_parser = mpq_proto::packet::version::parse)]
    pub quic_version: u32,
}

fn parse_workload(s: &str, duration: Duration) -> Result<Workload> {
    if s == "download" {
        return Ok(Workload::Download);
    }
    let spec = s
        .strip_prefix("reqresp:")
        .ok_or_else(|| anyhow!("unknown workload {s:?} (download or reqresp:SIZE@INTERVAL)"))?;
    let (size, rest) =
        spec.split_once('@').ok_or_else(|| anyhow!("reqresp needs SIZE@INTERVAL, e.g. reqresp:750B@400ms"))?;
    let (interval, count) = match rest.split_once('x') {
        Some((i, c)) => (i, Some(c.parse::<u64>().with_context(|| format!("bad request count {c:?}"))?)),
        None => (rest, None),
    };
    let size = parse_size(size).map_err(|e| anyhow!("{e}"))?;
    let interval = parse_duration(interval).map_err(|e| anyhow!("{e}"))?;
    if interval.is_zero() {
        bail!("the request interval must be positive");
    }
    let count = count.unwrap_or_else(|| (duration.as_secs_f64() / interval.as_secs_f64()).floor().max(1.0) as u64);
    Ok(Workload::ReqResp { size, interval, count })
}

fn parse_fail(s: &str) -> Result<(usize, Duration)> {
    let (n, t) = s.split_once('@').ok_or_else(|| anyhow!("--fail-link needs N@TIME, e.g. 0@3s"))?;
    let n = n.parse().with_context(|| format!("bad link index {n:?}"))?;
    Ok((n, parse_duration(t).map_err(|e| anyhow!("{e}"))?))
}

/// The scenario the arguments describe.
pub fn scenario(args: &SimArgs) -> Result<Scenario> {
    let specs: Vec<String> = if args.links.is_empty() {
        vec!["50mbit/20ms/queue=30ms".into(), "20mbit/60ms/queue=90ms".into()]
    } else {
        args.links.clone()
    };
    let links = specs
        .iter()
        .map(|s| s.parse::<LinkConfig>().map_err(|e| anyhow!("--link {s}: {e}")))
        .collect::<Result<Vec<_>>>()?;
    let duration = parse_duration(&args.duration).map_err(|e| anyhow!("--duration: {e}"))?;
    let mut s = Scenario::download(links, parse_size(&args.size).map_err(|e| anyhow!("--size: {e}"))?);
    s.workload = parse_workload(&args.workload, duration)?;
    s.scheduler = args.scheduler.parse().map_err(anyhow::Error::msg)?;
    s.cc = args.cc.parse().map_err(anyhow::Error::msg)?;
    s.hystart = !args.no_hystart;
    s.ack_policy = args.ack_policy.parse().map_err(anyhow::Error::msg)?;
    if let Some(n) = args.ack_ranges {
        s.ack_ranges = n as usize;
    }
    s.single_pn_space = args.single_pn_space;
    s.fail = args.fail.iter().map(|f| parse_fail(f)).collect::<Result<_>>()?;
    if let Some(b) = &args.bottleneck {
        let link = b.parse::<LinkConfig>().map_err(|e| anyhow!("--bottleneck {b}: {e}"))?;
        s.bottleneck = Some(Bottleneck { link, competitor: args.competitor });
    }
    s.seed = args.seed;
    s.quic_version = args.quic_version;
    if let Some(t) = &args.max_time {
        s.max_time = Some(parse_duration(t).map_err(|e| anyhow!("--max-time: {e}"))?);
    }
    Ok(s)
}

fn qlog_factory(dir: &PathBuf) -> Result<QlogFactory> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.clone();
    Ok(Rc::new(move |vantage: &str, odcid: &str| match mpq_sim::qlog_file::QlogFile::create(&dir, odcid, vantage) {
        Ok(f) => Some(Box::new(f) as Box<dyn mpq_proto::qlog::QlogSink>),
        Err(e) => {
            tracing::warn!(%e, "cannot create qlog file");
            None
        }
    }))
}

/// Runs `mpq sim`.
pub fn run(args: SimArgs) -> Result<()> {
    let s = scenario(&args)?;
    let bar = if args.json || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new(s.time_limit().as_millis() as u64);
        b.set_style(
            ProgressStyle::with_template("{bar:30} virtual {msg}").unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    };
    let mut on_progress = |p: &Progress| {
        bar.set_position(p.now.as_millis() as u64);
        bar.set_message(format!("{:.1} s, {} bytes", p.now.as_secs_f64(), p.bytes));
    };
    let hooks =
        RunHooks { qlog: args.qlog_dir.as_ref().map(qlog_factory).transpose()?, progress: Some(&mut on_progress) };
    let result = match s.run_with(hooks) {
        Ok(r) => r,
        Err(ScenarioError::CorruptData { offset, result }) => {
            bar.finish_and_clear();
            if args.json {
                crate::stdout::print_all(&(serde_json::to_string(&result)? + "\n"))?;
            }
            bail!("received data differs from what the server sent at byte {offset}");
        }
        Err(e) => return Err(e.into()),
    };
    bar.finish_and_clear();
    use std::fmt::Write as _;
    let mut out = String::new();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&result)?)?;
    } else {
        let completion = result.completion_s.map_or("did not complete".to_string(), |c| format!("{c:.3} s"));
        writeln!(
            out,
            "{} over {} link(s), scheduler {}, cc {}: {} bytes, {}, goodput {:.2} Mbit/s, multipath {}",
            result.workload,
            s.links.len(),
            s.scheduler,
            s.cc,
            result.bytes,
            completion,
            result.goodput_bps / 1e6,
            result.multipath
        )?;
        if let Some(c) = &result.competitor {
            writeln!(
                out,
                "competitor at the bottleneck: {} bytes, goodput {:.2} Mbit/s",
                c.bytes,
                c.goodput_bps / 1e6
            )?;
        }
        if let Some(d) = result.max_delay_ms {
            writeln!(
                out,
                "requests answered {}/{}, worst delay {d:.1} ms{}",
                result.requests_answered,
                result.requests_sent,
                result.max_delay_after_failure_ms.map_or(String::new(), |a| format!(", after the failure {a:.1} ms"))
            )?;
        }
        for p in &result.paths {
            writeln!(
                out,
                "  path {}: rx {} B, tx {} B, rtt {:.1} ms, lost {} packets, cwnd {} B, pmtu {} B, {}",
                p.path_id, p.rx_bytes, p.tx_bytes, p.rtt_ms, p.lost_packets, p.cwnd, p.pmtu, p.state
            )?;
        }
    }
    crate::stdout::print_all(&out)?;
    if !result.completed {
        bail!("the run did not complete within {:?} of virtual time", s.time_limit());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: SimArgs,
    }

    fn parse(args: &[&str]) -> Result<Scenario> {
        let t = T::try_parse_from(std::iter::once("sim").chain(args.iter().copied()))?;
        scenario(&t.a)
    }

    #[test]
    fn defaults_are_a_two_path_download() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.links.len(), 2);
        assert_eq!(s.size, 20_000_000);
        assert_eq!(s.workload, Workload::Download);
        assert_eq!(s.ack_ranges, mpq_proto::conn::DEFAULT_MAX_ACK_RANGES);
    }

    #[test]
    fn quic_version_reaches_the_scenario() {
        assert_eq!(parse(&[]).unwrap().quic_version, mpq_proto::VERSION_1);
        assert_eq!(parse(&["--quic-version", "v2"]).unwrap().quic_version, mpq_proto::VERSION_2);
        assert!(parse(&["--quic-version", "v9"]).is_err());
    }

    #[test]
    fn single_pn_space_reaches_the_scenario() {
        assert!(!parse(&[]).unwrap().single_pn_space);
        assert!(parse(&["--single-pn-space"]).unwrap().single_pn_space);
    }

    #[test]
    fn ack_ranges_limit_the_scenario_and_zero_is_refused() {
        assert_eq!(parse(&["--ack-ranges", "4"]).unwrap().ack_ranges, 4);
        let e = parse(&["--ack-ranges", "0"]).unwrap_err().to_string();
        assert!(e.contains("--ack-ranges") && e.contains("1..=256"), "{e}");
    }

    #[test]
    fn the_issue_example_parses() {
        let s = parse(&[
            "--link",
            "50mbit/20ms",
            "--link",
            "10mbit/180ms/loss=1%/queue=100ms",
            "--size",
            "50MB",
            "--scheduler",
            "minrtt",
            "--cc",
            "olia",
            "--fail-link",
            "0@3s",
            "--workload",
            "reqresp:750B@400ms",
            "--seed",
            "7",
        ])
        .unwrap();
        assert_eq!(s.fail, vec![(0, Duration::from_secs(3))]);
        assert_eq!(s.workload, Workload::ReqResp { size: 750, interval: Duration::from_millis(400), count: 25 });
        assert_eq!(s.seed, 7);
    }

    #[test]
    fn a_bottleneck_with_a_competitor_parses() {
        let s = parse(&["--bottleneck", "10mbit/20ms/queue=30ms", "--competitor"]).unwrap();
        let b = s.bottleneck.unwrap();
        assert_eq!(b.link.rate_bps, 10_000_000);
        assert!(b.competitor);
        assert!(!parse(&["--bottleneck", "10mbit/20ms"]).unwrap().bottleneck.unwrap().competitor);
        assert_eq!(parse(&[]).unwrap().bottleneck, None);
    }

    #[test]
    fn bad_input_is_a_clear_error() {
        for args in [
            &["--link", "fast"][..],
            &["--size", "12"],
            &["--fail-link", "x@1s"],
            &["--workload", "reqresp:750B"],
            &["--cc", "bbr"],
            &["--scheduler", "magic"],
            &["--bottleneck", "10mbit/fast"],
            &["--competitor"],
        ] {
            assert!(parse(args).is_err(), "{args:?} accepted");
        }
    }
}
