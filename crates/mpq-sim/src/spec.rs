//! The compact string form of a [`LinkConfig`], used by the command line.
//!
//! Grammar: `RATE[/RTT][/OPTION]...` where
//! - `RATE` is a number with a unit `bit`, `kbit`, `mbit`, `gbit` (or `bps`, `kbps`, `mbps`,
//!   `gbps`), or `0`/`inf`/`unlimited` for no rate limit;
//! - `RTT` is the path's round-trip propagation delay with a unit `ns`, `us`, `ms`, `s`; the
//!   link's one-way delay is **half** of it (`"50mbit/20ms"` → 10 ms each way);
//! - each `OPTION` is one of
//!   - `loss=P` (Bernoulli) or `loss=ge:P_GB,P_BG[,LOSS_BAD[,LOSS_GOOD]]` (Gilbert-Elliott;
//!     `LOSS_BAD` defaults to 100 %, `LOSS_GOOD` to 0 %),
//!   - `queue=SIZE` (`b`, `kb`, `mb`, `gb` = powers of 1000; `kib`, `mib` = powers of 1024),
//!     `queue=TIME` (bytes = rate × time), `queue=Np` (packets), or `queue=inf`; an idle
//!     link always takes one packet, so a queue smaller than one packet means no queueing
//!     beyond the packet being sent, not a link that drops everything,
//!   - `jitter=TIME`, `jitter_reorder` (let jitter reorder packets),
//!   - `dup=P` (or `duplicate=P`), `reorder=P[,TIME]` (extra delay, default 10 ms),
//!   - `mtu=BYTES`, `overhead=BYTES`.
//!
//! Probabilities are written `1%` or `0.01`. Example: `"10mbit/180ms/loss=1%/queue=100ms"`.

use std::str::FromStr;
use std::time::Duration;

use crate::link::{LinkConfig, LossModel, QueueLimit};

/// Error from parsing a [`LinkConfig`] string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid link spec {token:?}: {reason}")]
pub struct ParseLinkError {
    /// The offending part of the string.
    pub token: String,
    /// What is wrong with it.
    pub reason: String,
}

fn err<T>(token: &str, reason: impl Into<String>) -> Result<T, ParseLinkError> {
    Err(ParseLinkError { token: token.to_owned(), reason: reason.into() })
}

fn split_unit<'a>(s: &'a str, units: &[&'a str]) -> Option<(&'a str, &'a str)> {
    units.iter().find_map(|u| s.strip_suffix(u).map(|n| (n, *u)))
}

fn number(token: &str, n: &str) -> Result<f64, ParseLinkError> {
    match n.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => err(token, format!("{n:?} is not a non-negative number")),
    }
}

/// Parses a rate such as `50mbit` into bits per second (`0`, `inf`, `unlimited` → 0).
pub fn parse_rate(s: &str) -> Result<u64, ParseLinkError> {
    let l = s.trim().to_ascii_lowercase();
    if matches!(l.as_str(), "0" | "inf" | "unlimited") {
        return Ok(0);
    }
    const UNITS: [(&str, f64); 8] = [
        ("gbit", 1e9),
        ("mbit", 1e6),
        ("kbit", 1e3),
        ("bit", 1.0),
        ("gbps", 1e9),
        ("mbps", 1e6),
        ("kbps", 1e3),
        ("bps", 1.0),
    ];
    for (u, mult) in UNITS {
        if let Some(n) = l.strip_suffix(u) {
            return Ok((number(s, n)? * mult).round() as u64);
        }
    }
    err(s, "rate needs a unit: bit, kbit, mbit or gbit")
}

/// Parses a duration such as `20ms` (units `ns`, `us`, `ms`, `s`).
pub fn parse_duration(s: &str) -> Result<Duration, ParseLinkError> {
    let l = s.trim().to_ascii_lowercase();
    let Some((n, unit)) = split_unit(&l, &["ns", "us", "ms", "s"]) else {
        return err(s, "duration needs a unit: ns, us, ms or s");
    };
    let scale = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        _ => 1e9,
    };
    Ok(Duration::from_nanos((number(s, n)? * scale).round() as u64))
}

/// Parses a byte size such as `64kb` (`b`, `kb`, `mb`, `gb` decimal; `kib`, `mib`, `gib`
/// binary; any case).
pub fn parse_size(s: &str) -> Result<u64, ParseLinkError> {
    let l = s.trim().to_ascii_lowercase();
    let Some((n, unit)) = split_unit(&l, &["kib", "mib", "gib", "kb", "mb", "gb", "b"]) else {
        return err(s, "size needs a unit: b, kb, mb, gb, kib, mib or gib");
    };
    let mult = match unit {
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        _ => 1.0,
    };
    Ok((number(s, n)? * mult).round() as u64)
}

/// Parses a probability written `1%` or `0.01`.
pub fn parse_probability(s: &str) -> Result<f64, ParseLinkError> {
    let t = s.trim();
    let p = match t.strip_suffix('%') {
        Some(n) => number(s, n)? / 100.0,
        None => number(s, t)?,
    };
    if p > 1.0 {
        return err(s, "probability must be at most 100%");
    }
    Ok(p)
}

fn parse_count(token: &str, s: &str) -> Result<usize, ParseLinkError> {
    s.trim().parse().or_else(|_| err(token, format!("{s:?} is not a whole number")))
}

fn parse_queue(token: &str, v: &str) -> Result<QueueLimit, ParseLinkError> {
    let l = v.trim().to_ascii_lowercase();
    if matches!(l.as_str(), "inf" | "unlimited" | "none") {
        Ok(QueueLimit::Unlimited)
    } else if let Some(n) = l.strip_suffix('p') {
        Ok(QueueLimit::Packets(parse_count(token, n)?))
    } else if l.ends_with('s') {
        Ok(QueueLimit::Delay(parse_duration(v)?))
    } else if l.ends_with('b') {
        Ok(QueueLimit::Bytes(parse_size(v)?))
    } else {
        err(token, "queue must be a size (64kb), a time (100ms), packets (100p) or inf")
    }
}

/// Parses a loss model as `loss=` takes it: `P` (Bernoulli), `none`, or
/// `ge:P_GB,P_BG[,LOSS_BAD[,LOSS_GOOD]]` (Gilbert-Elliott).
pub fn parse_loss(s: &str) -> Result<LossModel, ParseLinkError> {
    loss_model(s, s)
}

fn loss_model(token: &str, v: &str) -> Result<LossModel, ParseLinkError> {
    let l = v.trim().to_ascii_lowercase();
    if l == "none" {
        return Ok(LossModel::None);
    }
    let Some(params) = l.strip_prefix("ge:") else {
        let p = parse_probability(v)?;
        return Ok(if p == 0.0 { LossModel::None } else { LossModel::Bernoulli(p) });
    };
    let ps = params.split(',').map(parse_probability).collect::<Result<Vec<_>, _>>()?;
    if !(2..=4).contains(&ps.len()) {
        return err(token, "expected loss=ge:P_GB,P_BG[,LOSS_BAD[,LOSS_GOOD]]");
    }
    Ok(LossModel::GilbertElliott {
        p_gb: ps[0],
        p_bg: ps[1],
        loss_bad: ps.get(2).copied().unwrap_or(1.0),
        loss_good: ps.get(3).copied().unwrap_or(0.0),
    })
}

impl FromStr for LinkConfig {
    type Err = ParseLinkError;

    /// Parses the compact form described in the [module docs](crate::spec); the RTT token is
    /// halved into the one-way [`LinkConfig::delay`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut tokens = s.split('/').map(str::trim);
        let mut cfg = LinkConfig::default();
        match tokens.next() {
            Some(r) if !r.is_empty() => cfg.rate_bps = parse_rate(r)?,
            _ => return err(s, "empty link spec; expected e.g. 50mbit/20ms"),
        }
        let mut positional = true;
        for tok in tokens {
            let Some((key, val)) = tok.split_once('=') else {
                if tok.eq_ignore_ascii_case("jitter_reorder") {
                    cfg.jitter_reorder = true;
                } else if positional {
                    cfg.delay = parse_duration(tok)? / 2;
                } else {
                    return err(tok, "expected key=value (the RTT must come right after the rate)");
                }
                positional = false;
                continue;
            };
            positional = false;
            match key.trim().to_ascii_lowercase().as_str() {
                "loss" => cfg.loss = loss_model(tok, val)?,
                "queue" => cfg.queue_limit = parse_queue(tok, val)?,
                "jitter" => cfg.jitter = parse_duration(val)?,
                "dup" | "duplicate" => cfg.duplicate = parse_probability(val)?,
                "reorder" => {
                    let (p, d) = match val.split_once(',') {
                        Some((p, d)) => (p, Some(d)),
                        None => (val, None),
                    };
                    cfg.reorder = parse_probability(p)?;
                    if let Some(d) = d {
                        cfg.reorder_delay = parse_duration(d)?;
                    }
                }
                "mtu" => cfg.mtu = parse_count(tok, val)?,
                "overhead" => cfg.overhead = parse_count(tok, val)?,
                _ => return err(tok, "unknown option; expected loss, queue, jitter, dup, reorder, mtu or overhead"),
            }
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn rtt_is_split_into_one_way_delay() {
        let c: LinkConfig = "50mbit/20ms".parse().unwrap();
        assert_eq!(c.rate_bps, 50_000_000);
        // "20ms" is the RTT: each direction gets 10 ms.
        assert_eq!(c.delay, ms(10));
        assert_eq!(c.queue_limit, QueueLimit::Unlimited);
        assert_eq!(c.loss, LossModel::None);
    }

    #[test]
    fn full_spec() {
        let c: LinkConfig = "10mbit/180ms/loss=1%/queue=100ms".parse().unwrap();
        assert_eq!(c.rate_bps, 10_000_000);
        assert_eq!(c.delay, ms(90));
        assert_eq!(c.loss, LossModel::Bernoulli(0.01));
        assert_eq!(c.queue_limit, QueueLimit::Delay(ms(100)));

        let c: LinkConfig =
            "1.5Mbit/5ms/queue=64kb/jitter=2ms/dup=0.1%/reorder=1%/mtu=1500/overhead=28".parse().unwrap();
        assert_eq!(c.rate_bps, 1_500_000);
        assert_eq!(c.delay, Duration::from_micros(2500));
        assert_eq!(c.queue_limit, QueueLimit::Bytes(64_000));
        assert_eq!(c.jitter, ms(2));
        assert!((c.duplicate - 0.001).abs() < 1e-12);
        assert!((c.reorder - 0.01).abs() < 1e-12);
        assert_eq!(c.reorder_delay, ms(10));
        assert_eq!(c.mtu, 1500);
        assert_eq!(c.overhead, 28);
        assert!(!c.jitter_reorder);

        let c: LinkConfig = "1gbit/queue=100p/reorder=0.5,3ms/jitter_reorder".parse().unwrap();
        assert_eq!(c.rate_bps, 1_000_000_000);
        assert_eq!(c.delay, Duration::ZERO);
        assert_eq!(c.queue_limit, QueueLimit::Packets(100));
        assert_eq!(c.reorder, 0.5);
        assert_eq!(c.reorder_delay, ms(3));
        assert!(c.jitter_reorder);

        let c: LinkConfig = "inf/1s/queue=2mib/loss=ge:1%,10%".parse().unwrap();
        assert_eq!(c.rate_bps, 0);
        assert_eq!(c.delay, ms(500));
        assert_eq!(c.queue_limit, QueueLimit::Bytes(2 * 1024 * 1024));
        assert_eq!(c.loss, LossModel::GilbertElliott { p_gb: 0.01, p_bg: 0.1, loss_good: 0.0, loss_bad: 1.0 });
        assert_eq!(parse_size("50MB"), Ok(50_000_000));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("750B"), Ok(750));
        let c: LinkConfig = "100kbit/300us/loss=0".parse().unwrap();
        assert_eq!((c.rate_bps, c.delay, c.loss), (100_000, Duration::from_micros(150), LossModel::None));
    }

    #[test]
    fn errors() {
        let bad = |s: &str| s.parse::<LinkConfig>().unwrap_err();
        assert!(bad("").reason.contains("empty"));
        assert!(bad("50/20ms").reason.contains("unit"));
        assert!(bad("50mbit/20").reason.contains("unit"));
        assert!(bad("fastmbit/20ms").reason.contains("number"));
        assert!(bad("50mbit/20ms/loss=150%").reason.contains("at most"));
        assert!(bad("50mbit/20ms/loss=-1%").reason.contains("number"));
        assert!(bad("50mbit/20ms/queue=12").reason.contains("queue must be"));
        assert!(bad("50mbit/20ms/queue=xp").reason.contains("whole number"));
        let e = bad("50mbit/20ms/colour=red");
        assert_eq!(e.token, "colour=red");
        assert!(e.reason.contains("unknown option"));
        assert!(bad("50mbit/20ms/30ms").reason.contains("key=value"));
        assert!(bad("50mbit/20ms/loss=ge:1%").reason.contains("ge:"));
        assert_eq!(
            bad("50mbit/20ms/mtu=big").to_string(),
            "invalid link spec \"mtu=big\": \"big\" is not a whole number"
        );
    }
}
