//! The emulator checked against itself: for each rate, a one-path testbed `RATE/RTT/queue=RTT`
//! whose measured RTT (idle UDP echo), delivered rate (a UDP blast above the rate), loss
//! (a blast at half the rate after `loss=` is set at run time) and TCP goodput are compared
//! with the configured values. `mpq lab testbed selfcheck` prints the table.

use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;

use mpq_sim::LinkConfig;
use serde::Serialize;

use super::control;
use super::lifecycle::{self, Launcher, UpOptions};
use super::probe::{self, UDP_OVERHEAD};
use super::sys;

/// What to sweep.
#[derive(Debug, Clone)]
pub struct Options {
    /// The testbed's name while the check runs.
    pub name: String,
    /// Link rates, bit/s.
    pub rates: Vec<u64>,
    /// The path's RTT.
    pub rtt: Duration,
    /// The Bernoulli loss of the loss step.
    pub loss: f64,
    /// Seconds of traffic for the rate and TCP steps.
    pub seconds: f64,
    /// Datagrams of the loss step.
    pub loss_packets: u64,
    /// Also check a Gilbert-Elliott loss model at the first rate (`loss=ge:...` spec).
    pub gilbert_elliott: Option<String>,
    /// Run the emulator in the real-time scheduling class.
    pub realtime: bool,
    /// Paths in the testbed; the rate step loads all of them at once.
    pub paths: usize,
    /// The paths' MTU; the rate step's packets fill it.
    pub mtu: usize,
}

/// One rate's results.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The link spec.
    pub link: String,
    /// Paths loaded at once in the rate step.
    pub paths: usize,
    /// Configured rate, bit/s.
    pub rate_bps: u64,
    /// The RTT the model gives a 64-byte probe (propagation and serialization both ways), ms.
    pub rtt_expected_ms: f64,
    /// Median measured RTT, ms.
    pub rtt_median_ms: f64,
    /// Smallest measured RTT, ms.
    pub rtt_min_ms: f64,
    /// The rate the blast offered, bit/s on the link (the lowest of the paths).
    pub offered_bps: f64,
    /// The rate the sink measured, bit/s on the link (the lowest of the paths).
    pub rate_measured_bps: f64,
    /// Configured loss.
    pub loss_configured: f64,
    /// Loss the sink measured.
    pub loss_measured: f64,
    /// Loss the emulator's model decided (its own counters): measured minus this is loss
    /// that happened outside the model.
    pub loss_model: f64,
    /// Datagrams in the loss step.
    pub loss_packets: u64,
    /// The loss model (for the Gilbert-Elliott row: `ge`).
    pub loss_kind: String,
    /// TCP goodput, bit/s.
    pub tcp_bps: f64,
    /// Packets the kernel dropped before the emulator read them (should be 0).
    pub kernel_drops: u64,
    /// The emulator's CPU use during the rate step (1.0 = one core; all its threads).
    pub emulator_cpu: f64,
    /// Datagrams of the rate step the emulator delivered that the sink did not get (lost
    /// in the receiver's namespace, e.g. a full socket buffer): not the link's doing.
    pub lost_after_emulator: u64,
}

/// `rate` (bit/s) as a spec writes it: `1gbit`, `500mbit`, `1.5mbit`, `64kbit`.
pub fn rate_spec(rate: u64) -> String {
    for (unit, m) in [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)] {
        if rate as f64 >= m {
            return format!("{}{unit}", rate as f64 / m);
        }
    }
    format!("{rate}bit")
}

/// CPU seconds (user + system) process `pid` has used.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    let Some((_, rest)) = s.rsplit_once(')') else { return 0.0 };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat (utime, stime); `rest` starts at field 3.
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// Runs the sweep; `progress` gets each finished row.
pub fn run(opts: &Options, launcher: &Launcher, mut progress: impl FnMut(&Row)) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (i, &rate) in opts.rates.iter().enumerate() {
        if sys::stop_requested() {
            return Err("interrupted".into());
        }
        let rtt_ms = opts.rtt.as_secs_f64() * 1e3;
        let mut link = format!("{}/{rtt_ms}ms/queue={rtt_ms}ms", rate_spec(rate));
        if opts.mtu != 1500 {
            link.push_str(&format!("/mtu={}", opts.mtu));
        }
        let row = check_one(opts, launcher, &link, LossStep::Bernoulli(opts.loss))?;
        progress(&row);
        rows.push(row);
        if i == 0 {
            if let Some(ge) = &opts.gilbert_elliott {
                let row = check_one(opts, launcher, &link, LossStep::Spec(ge.clone()))?;
                progress(&row);
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

enum LossStep {
    Bernoulli(f64),
    Spec(String),
}

/// Takes the testbed down when dropped.
struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        if let Err(e) = lifecycle::down(&self.0) {
            eprintln!("taking down testbed {}: {e}", self.0);
        }
    }
}

fn io(e: std::io::Error) -> String {
    e.to_string()
}

fn check_one(opts: &Options, launcher: &Launcher, link: &str, loss: LossStep) -> Result<Row, String> {
    let cfg: LinkConfig = link.parse().map_err(|e| format!("{e}"))?;
    let up = UpOptions {
        name: opts.name.clone(),
        links: vec![link.to_owned(); opts.paths.max(1)],
        bottleneck: None,
        events: vec![],
        seed: 1,
        realtime: opts.realtime,
    };
    let state = lifecycle::up(&up, launcher)?;
    let _down = Down(opts.name.clone());
    let (cns, sns) = (state.client_ns.clone(), state.server_ns.clone());
    let addrs = state
        .paths
        .iter()
        .map(|p| Ok((p.client.parse()?, p.server.parse()?)))
        .collect::<Result<Vec<(std::net::Ipv4Addr, std::net::Ipv4Addr)>, std::net::AddrParseError>>()
        .map_err(|e| e.to_string())?;
    let (client, server) = addrs[0];
    let pid = state.emulator_pid.unwrap_or(0);

    // RTT: 64-byte probes every 10 ms on the idle link.
    let echo_addr = SocketAddr::V4(SocketAddrV4::new(server, 7000));
    let echo = probe::echo(&sns, echo_addr).map_err(io)?;
    let r =
        probe::rtt(&cns, client, echo_addr, 200, Duration::from_millis(10), 64, Duration::from_secs(2)).map_err(io)?;
    drop(echo);
    let ser = cfg.serialization_time(64 + UDP_OVERHEAD).as_secs_f64() * 1e3;
    let rtt_expected_ms = cfg.delay.as_secs_f64() * 2e3 + 2.0 * ser;

    // Rate: datagrams filling the MTU (1472 bytes in 1500-byte packets) at 1.25 times the
    // rate, on every path at once; the slowest path counts.
    let rate = cfg.rate_bps as f64;
    let mtu = opts.mtu;
    let count = ((rate * 1.25 * opts.seconds) / (mtu as f64 * 8.0)).ceil() as u64;
    let sinks = addrs
        .iter()
        .map(|&(_, s)| probe::sink(&sns, SocketAddr::V4(SocketAddrV4::new(s, 7001)), Duration::from_millis(500), false))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(io)?;
    let rate0 = control::stats(&opts.name).map_err(io)?;
    let cpu0 = cpu_seconds(pid);
    let blasts: Vec<_> = addrs
        .iter()
        .map(|&(c, s)| {
            let cns = cns.clone();
            std::thread::spawn(move || {
                probe::blast(
                    &cns,
                    c,
                    SocketAddr::V4(SocketAddrV4::new(s, 7001)),
                    mtu - UDP_OVERHEAD,
                    rate * 1.25,
                    count,
                )
            })
        })
        .collect();
    let mut b = Vec::new();
    for t in blasts {
        b.push(t.join().map_err(|_| "a blast thread panicked".to_owned())?.map_err(io)?);
    }
    let duration = b.iter().map(|x| x.duration_s).fold(0.0, f64::max);
    let offered_bps = b.iter().map(|x| x.offered_bps).fold(f64::INFINITY, f64::min);
    let mut got = Vec::new();
    for s in sinks {
        got.push(s.finish_within(Duration::from_secs(10)).map_err(io)?);
    }
    let emulator_cpu = (cpu_seconds(pid) - cpu0) / duration.max(1e-9);
    let rate1 = control::stats(&opts.name).map_err(io)?;
    let rate_measured_bps = got.iter().map(|g| g.rate_bps).fold(f64::INFINITY, f64::min);
    let lost_after_emulator = rate1
        .paths
        .iter()
        .zip(&rate0.paths)
        .zip(&got)
        .map(|((a, b), g)| (a.c2s.delivered_packets - b.c2s.delivered_packets).saturating_sub(g.unique))
        .sum();

    // Loss: small datagrams at half the rate (at most 20,000 a second), the loss set now.
    let (loss_configured, kind) = match &loss {
        LossStep::Bernoulli(p) => {
            control::event(&opts.name, &format!("0.c2s:loss={p}")).map_err(io)?;
            (*p, "bernoulli".to_owned())
        }
        LossStep::Spec(ge) => {
            control::event(&opts.name, &format!("0.c2s:loss={ge}")).map_err(io)?;
            let m = mpq_sim::spec::parse_loss(ge).map_err(|e| e.to_string())?;
            (m.mean_loss(), "gilbert-elliott".to_owned())
        }
    };
    let before = control::stats(&opts.name).map_err(io)?.paths[0].c2s.clone();
    let pps = (rate * 0.5 / ((100 + UDP_OVERHEAD) * 8) as f64).min(20_000.0);
    let bits = ((100 + UDP_OVERHEAD) * 8) as f64;
    let lsink_addr = SocketAddr::V4(SocketAddrV4::new(server, 7002));
    let lsink = probe::sink(&sns, lsink_addr, Duration::from_millis(500), false).map_err(io)?;
    let lb = probe::blast(&cns, client, lsink_addr, 100, pps * bits, opts.loss_packets).map_err(io)?;
    let ls = lsink.finish_within(Duration::from_secs(10)).map_err(io)?;
    let after = control::stats(&opts.name).map_err(io)?;
    let c2s = &after.paths[0].c2s;
    let offered = c2s.sent_packets - before.sent_packets;
    let model_lost = (c2s.dropped_loss - before.dropped_loss) + (c2s.dropped_queue - before.dropped_queue);
    control::event(&opts.name, "0.c2s:loss=none").map_err(io)?;

    // TCP: one connection for the same time as the rate step.
    let tcp_addr = SocketAddr::V4(SocketAddrV4::new(server, 7003));
    let tsink = probe::tcp_sink(&sns, tcp_addr).map_err(io)?;
    let bytes = (rate * opts.seconds / 8.0) as u64;
    probe::tcp_send(&cns, client, tcp_addr, bytes, Duration::from_secs_f64(opts.seconds * 4.0 + 10.0)).map_err(io)?;
    let t = tsink.stop().map_err(io)?;
    let kernel_drops = after.paths.iter().map(|p| p.kernel_drops).sum();

    Ok(Row {
        link: link.to_owned(),
        paths: addrs.len(),
        rate_bps: cfg.rate_bps,
        rtt_expected_ms,
        rtt_median_ms: r.median_ms,
        rtt_min_ms: r.min_ms,
        offered_bps,
        rate_measured_bps,
        loss_configured,
        loss_measured: 1.0 - ls.unique as f64 / lb.sent.max(1) as f64,
        loss_model: model_lost as f64 / offered.max(1) as f64,
        loss_packets: lb.sent,
        loss_kind: kind,
        tcp_bps: t.goodput_bps,
        kernel_drops,
        emulator_cpu,
        lost_after_emulator,
    })
}

/// The table `mpq lab testbed selfcheck` prints.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| link | RTT model / measured (median, min) | rate configured / measured (offered) | loss configured / measured / model (packets) | TCP goodput | emulator CPU | dropped before / after the emulator |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in rows {
        s.push_str(&line(r));
        s.push('\n');
    }
    s
}

/// One row of [`table`].
pub fn line(r: &Row) -> String {
    let mbit = |b: f64| format!("{:.1}", b / 1e6);
    let pct = |x: f64| format!("{:.2} %", x * 100.0);
    // A sender that could not offer more than the link's rate (the machine is busy) leaves
    // the rate unchecked: the link was not full.
    let short = if r.offered_bps < r.rate_bps as f64 * 1.1 { ", sender short: not full" } else { "" };
    format!(
        "| {} | {:.2} / {:.2} ({:.2}) ms ({:+.1} %) | {} / {} ({}) Mbit/s ({:+.1} %{short}) | {} {} / {} / {} ({}) | {} Mbit/s | {:.0} % | {} / {} |",
        if r.paths > 1 { format!("{} x {}", r.paths, r.link) } else { r.link.clone() },
        r.rtt_expected_ms,
        r.rtt_median_ms,
        r.rtt_min_ms,
        (r.rtt_median_ms / r.rtt_expected_ms - 1.0) * 100.0,
        mbit(r.rate_bps as f64),
        mbit(r.rate_measured_bps),
        mbit(r.offered_bps),
        (r.rate_measured_bps / r.rate_bps as f64 - 1.0) * 100.0,
        r.loss_kind,
        pct(r.loss_configured),
        pct(r.loss_measured),
        pct(r.loss_model),
        r.loss_packets,
        mbit(r.tcp_bps),
        r.emulator_cpu * 100.0,
        r.kernel_drops,
        r.lost_after_emulator,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_written_as_specs() {
        assert_eq!(rate_spec(1_000_000_000), "1gbit");
        assert_eq!(rate_spec(500_000_000), "500mbit");
        assert_eq!(rate_spec(1_500_000), "1.5mbit");
        assert_eq!(rate_spec(64_000), "64kbit");
        assert_eq!(rate_spec(999), "999bit");
        for r in [1_000_000_000, 1_500_000, 999] {
            assert_eq!(mpq_sim::spec::parse_rate(&rate_spec(r)), Ok(r));
        }
    }
}
