//! What `mpq lab testbed up` is told: one link per path, in the `mpq sim --link` syntax, for
//! both directions or one spec per direction, and scripted link events.
//!
//! - A path: `SPEC` (both directions get it) or `C2S|S2C` (client to server, then server to
//!   client), each in the simulator's syntax ([`mpq_sim::spec`]), e.g.
//!   `50mbit/20ms/queue=10ms/loss=1%` or `10mbit/40ms|50mbit/40ms`. As in the simulator,
//!   the time after the rate is an RTT and each direction's one-way delay is half of it, so
//!   a per-direction pair's RTT is the mean of its two tokens.
//! - An event: `PATH[.DIR]@TIME:ACTION` with `DIR` `c2s` or `s2c` (default: both), `TIME`
//!   counted from the emulator's start, and `ACTION` one of `down`, `up`, `blackhole`,
//!   `rate=RATE`, `loss=LOSS` (as in a spec: `1%`, `ge:...`, `none`), `rtt=TIME` (sets the
//!   one-way delay to half of it, as a spec does), `delay=TIME` (one-way) or `mtu=BYTES`
//!   ([`mpq_sim::LinkEvent`]). At run time the same form without `@TIME` applies at once.
//!   `mpq sim`'s `--fail-link N@T` is `N@T:blackhole`.

use std::fmt;
use std::time::Duration;

use mpq_sim::spec::{parse_duration, parse_loss, parse_rate};
use mpq_sim::{LinkConfig, LinkEvent};
use serde::{Deserialize, Serialize};

/// A direction of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client to server.
    C2s,
    /// Server to client.
    S2c,
}

impl Direction {
    /// Both directions, client to server first.
    pub const BOTH: [Direction; 2] = [Direction::C2s, Direction::S2c];

    /// 0 for client to server, 1 for server to client.
    pub fn index(self) -> usize {
        self as usize
    }

    /// `c2s` or `s2c`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::C2s => "c2s",
            Direction::S2c => "s2c",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A bad `--link` or `--event` argument, with what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{arg:?}: {reason}")]
pub struct SpecError {
    /// The argument as given.
    pub arg: String,
    /// What is wrong with it.
    pub reason: String,
}

fn bad<T>(arg: &str, reason: impl Into<String>) -> Result<T, SpecError> {
    Err(SpecError { arg: arg.to_owned(), reason: reason.into() })
}

/// The smallest MTU a veth (and IPv4) takes.
pub const MIN_MTU: usize = 68;
/// The largest MTU a veth takes.
pub const MAX_MTU: usize = 65535;
/// A path's MTU when its spec has no `mtu=`: Ethernet's.
pub const DEFAULT_MTU: usize = 1500;

/// One path's two links.
#[derive(Debug, Clone, PartialEq)]
pub struct PathSpec {
    /// The argument as given (kept in the state file; the emulator parses it again).
    pub text: String,
    /// Client to server.
    pub c2s: LinkConfig,
    /// Server to client.
    pub s2c: LinkConfig,
}

impl PathSpec {
    /// Parses `SPEC` or `C2S|S2C`.
    pub fn parse(arg: &str) -> Result<Self, SpecError> {
        let parse_one = |s: &str| {
            s.trim().parse::<LinkConfig>().map_err(|e| {
                let mut reason = e.to_string();
                if s.contains(',') {
                    // "50mbit/20ms,queue=10ms" is a common slip: commas only separate the
                    // values of one option (loss=ge:..., reorder=P,TIME).
                    reason.push_str(
                        " (options are separated by '/', as in `mpq sim --link`: 50mbit/20ms/queue=10ms/loss=1%)",
                    );
                }
                SpecError { arg: arg.into(), reason }
            })
        };
        let (c2s, s2c) = match arg.split_once('|') {
            Some((_, b)) if b.contains('|') => return bad(arg, "at most two specs: C2S|S2C"),
            Some((a, b)) => (parse_one(a)?, parse_one(b)?),
            None => {
                let c = parse_one(arg)?;
                (c.clone(), c)
            }
        };
        let spec = PathSpec { text: arg.trim().to_owned(), c2s, s2c };
        spec.mtu().map(|_| spec)
    }

    /// The link of direction `d`.
    pub fn link(&self, d: Direction) -> &LinkConfig {
        match d {
            Direction::C2s => &self.c2s,
            Direction::S2c => &self.s2c,
        }
    }

    /// The MTU of the path's interfaces: the smaller `mtu=` of the two directions, else
    /// [`DEFAULT_MTU`]. A veth has one MTU for both directions.
    pub fn mtu(&self) -> Result<usize, SpecError> {
        let m = self.c2s.mtu.min(self.s2c.mtu);
        if m == usize::MAX {
            return Ok(DEFAULT_MTU);
        }
        if !(MIN_MTU..=MAX_MTU).contains(&m) {
            return bad(&self.text, format!("mtu={m}: a path's MTU must be between {MIN_MTU} and {MAX_MTU}"));
        }
        Ok(m)
    }
}

/// A change to a path's links, at a time or (at run time) at once.
#[derive(Debug, Clone, PartialEq)]
pub struct EventSpec {
    /// The path (0-based, in `--link` order).
    pub path: usize,
    /// The directions it applies to.
    pub dirs: Vec<Direction>,
    /// When, from the emulator's start; `None` for "now" (run-time events).
    pub at: Option<Duration>,
    /// What happens.
    pub event: LinkEvent,
}

impl EventSpec {
    /// Parses `PATH[.DIR]@TIME:ACTION` (a scripted event).
    pub fn parse_scripted(arg: &str) -> Result<Self, SpecError> {
        let Some((target, rest)) = arg.split_once('@') else {
            return bad(arg, "expected PATH[.DIR]@TIME:ACTION, e.g. 0@3s:down or 1.c2s@2s:rate=10mbit");
        };
        let Some((time, action)) = rest.split_once(':') else {
            return bad(arg, "expected PATH[.DIR]@TIME:ACTION; the action is missing");
        };
        let at = parse_duration(time).map_err(|e| SpecError { arg: arg.into(), reason: e.to_string() })?;
        let mut e = Self::target_and_action(arg, target, action)?;
        e.at = Some(at);
        Ok(e)
    }

    /// Parses `PATH[.DIR]:ACTION` (an event applied at once).
    pub fn parse_now(arg: &str) -> Result<Self, SpecError> {
        let Some((target, action)) = arg.split_once(':') else {
            return bad(arg, "expected PATH[.DIR]:ACTION, e.g. 0:down or 1.s2c:loss=5%");
        };
        Self::target_and_action(arg, target, action)
    }

    /// `mpq sim --fail-link N@T`: path N loses everything from T on.
    pub fn parse_fail_link(arg: &str) -> Result<Self, SpecError> {
        let Some((n, t)) = arg.split_once('@') else {
            return bad(arg, "--fail-link needs N@TIME, e.g. 0@3s");
        };
        Self::parse_scripted(&format!("{n}@{t}:blackhole")).map_err(|e| SpecError { arg: arg.into(), reason: e.reason })
    }

    fn target_and_action(arg: &str, target: &str, action: &str) -> Result<Self, SpecError> {
        let (path, dirs) = match target.split_once('.') {
            Some((p, "c2s")) => (p, vec![Direction::C2s]),
            Some((p, "s2c")) => (p, vec![Direction::S2c]),
            Some((_, d)) => return bad(arg, format!("direction {d:?}: expected c2s or s2c")),
            None => (target, Direction::BOTH.to_vec()),
        };
        let Ok(path) = path.trim().parse::<usize>() else {
            return bad(arg, format!("path {path:?} is not a path index (0, 1, ...)"));
        };
        let event = parse_action(arg, action.trim())?;
        Ok(EventSpec { path, dirs, at: None, event })
    }
}

fn parse_action(arg: &str, action: &str) -> Result<LinkEvent, SpecError> {
    let wrap = |e: mpq_sim::ParseLinkError| SpecError { arg: arg.into(), reason: e.to_string() };
    let event = match action.split_once('=') {
        None => match action {
            "down" => LinkEvent::Down,
            "up" => LinkEvent::Up,
            "blackhole" => LinkEvent::Blackhole,
            _ => return bad(arg, format!("unknown action {action:?}; expected {ACTIONS}")),
        },
        Some(("rate", v)) => LinkEvent::SetRate(parse_rate(v).map_err(wrap)?),
        Some(("loss", v)) => LinkEvent::SetLoss(parse_loss(v).map_err(wrap)?),
        Some(("rtt", v)) => LinkEvent::SetDelay(parse_duration(v).map_err(wrap)? / 2),
        Some(("delay", v)) => LinkEvent::SetDelay(parse_duration(v).map_err(wrap)?),
        Some(("mtu", v)) => match v.trim().parse::<usize>() {
            Ok(m) => LinkEvent::SetMtu(m),
            Err(_) => return bad(arg, format!("mtu {v:?} is not a whole number of bytes")),
        },
        Some((k, _)) => return bad(arg, format!("unknown action {k:?}; expected {ACTIONS}")),
    };
    Ok(event)
}

const ACTIONS: &str = "down, up, blackhole, rate=RATE, loss=LOSS, rtt=TIME, delay=TIME or mtu=BYTES";

#[cfg(test)]
mod tests {
    use super::*;
    use mpq_sim::LossModel;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn one_spec_serves_both_directions() {
        let p = PathSpec::parse("50mbit/20ms/queue=10ms,loss=1%").unwrap_err();
        // The simulator's separator is '/', not ','.
        assert!(p.reason.contains("separated by '/'"), "{p}");
        let p = PathSpec::parse("50mbit/20ms/queue=10ms/loss=1%").unwrap();
        assert_eq!(p.c2s, p.s2c);
        assert_eq!(p.c2s.rate_bps, 50_000_000);
        assert_eq!(p.c2s.delay, ms(10));
        assert_eq!(p.c2s.loss, LossModel::Bernoulli(0.01));
        assert_eq!(p.mtu(), Ok(DEFAULT_MTU));
    }

    #[test]
    fn a_spec_per_direction() {
        let p = PathSpec::parse("10mbit/40ms/mtu=1400 | 50mbit/60ms/loss=ge:1%,10%").unwrap();
        assert_eq!(p.c2s.rate_bps, 10_000_000);
        assert_eq!(p.s2c.rate_bps, 50_000_000);
        assert_eq!((p.c2s.delay, p.s2c.delay), (ms(20), ms(30)));
        assert!(matches!(p.s2c.loss, LossModel::GilbertElliott { .. }));
        assert_eq!(p.mtu(), Ok(1400));
        assert_eq!(p.link(Direction::S2c).rate_bps, 50_000_000);
    }

    #[test]
    fn bad_paths_say_why() {
        assert!(PathSpec::parse("fast").unwrap_err().reason.contains("unit"));
        assert!(PathSpec::parse("1mbit|2mbit|3mbit").unwrap_err().reason.contains("two"));
        assert!(PathSpec::parse("1mbit/mtu=40").unwrap_err().reason.contains("between"));
        assert!(PathSpec::parse("1mbit|").unwrap_err().reason.contains("empty"));
    }

    #[test]
    fn scripted_events() {
        let e = EventSpec::parse_scripted("0@3s:down").unwrap();
        assert_eq!((e.path, e.at, e.event), (0, Some(Duration::from_secs(3)), LinkEvent::Down));
        assert_eq!(e.dirs, Direction::BOTH);
        let e = EventSpec::parse_scripted("1.c2s@2.5s:rate=10mbit").unwrap();
        assert_eq!((e.path, e.at, e.event), (1, Some(ms(2500)), LinkEvent::SetRate(10_000_000)));
        assert_eq!(e.dirs, [Direction::C2s]);
        let e = EventSpec::parse_scripted("2.s2c@100ms:loss=ge:1%,10%").unwrap();
        assert!(matches!(e.event, LinkEvent::SetLoss(LossModel::GilbertElliott { .. })));
        assert_eq!(EventSpec::parse_scripted("0@1s:rtt=40ms").unwrap().event, LinkEvent::SetDelay(ms(20)));
        assert_eq!(EventSpec::parse_scripted("0@1s:delay=40ms").unwrap().event, LinkEvent::SetDelay(ms(40)));
        assert_eq!(EventSpec::parse_scripted("0@1s:mtu=1280").unwrap().event, LinkEvent::SetMtu(1280));
        assert_eq!(EventSpec::parse_scripted("0@1s:loss=none").unwrap().event, LinkEvent::SetLoss(LossModel::None));
        let f = EventSpec::parse_fail_link("1@3s").unwrap();
        assert_eq!((f.path, f.at, f.event), (1, Some(Duration::from_secs(3)), LinkEvent::Blackhole));
        let n = EventSpec::parse_now("0.s2c:up").unwrap();
        assert_eq!((n.at, n.dirs, n.event), (None, vec![Direction::S2c], LinkEvent::Up));
    }

    #[test]
    fn bad_events_say_why() {
        let r = |s: &str| EventSpec::parse_scripted(s).unwrap_err().reason;
        assert!(r("0:down").contains("PATH[.DIR]@TIME:ACTION"));
        assert!(r("0@3s").contains("action is missing"));
        assert!(r("0@3:down").contains("unit"));
        assert!(r("x@3s:down").contains("path index"));
        assert!(r("0.up@3s:down").contains("c2s or s2c"));
        assert!(r("0@3s:explode").contains("unknown action"));
        assert!(r("0@3s:colour=red").contains("unknown action"));
        assert!(r("0@3s:rate=fast").contains("unit"));
        assert!(r("0@3s:mtu=big").contains("whole number"));
        assert!(EventSpec::parse_now("0").unwrap_err().reason.contains("PATH[.DIR]:ACTION"));
        assert!(EventSpec::parse_fail_link("0").unwrap_err().reason.contains("N@TIME"));
    }
}
