//! Quantities with units as experiment files write them (`10mbit`, `20ms`, `1%`, `2MB`,
//! `100p`), parsed with the simulator's own link-spec parsers so that a value means the same
//! in an experiment file and on the `mpq sim` command line.

use std::fmt;

use mpq_sim::spec::{parse_duration, parse_probability, parse_rate, parse_size};
use serde::Serialize;

/// The unit a [`Quantity`] is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// A rate, in bits per second.
    BitsPerSecond,
    /// A duration, in seconds.
    Seconds,
    /// A probability between 0 and 1.
    Fraction,
    /// A size, in bytes.
    Bytes,
    /// A count of packets (queue limits).
    Packets,
    /// No limit (an unlimited queue).
    Unlimited,
}

/// A number and its unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Quantity {
    /// The number, in [`unit`](Self::unit)s.
    pub value: f64,
    /// What it counts.
    pub unit: Unit,
}

/// What a key of an experiment file takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A rate: `10mbit`, `100kbit`, `1gbit`.
    Rate,
    /// A duration: `20ms`, `1.5s`, `0ms`.
    Time,
    /// A probability: `1%`, `0.01`, `0`.
    Probability,
    /// A size: `2MB`, `256KB`, `1MiB`.
    Size,
    /// A queue limit: a time (`100ms`, bytes = rate × time), a size (`64kb`), packets (`100p`)
    /// or `inf`.
    Queue,
}

impl Kind {
    /// What a value of this kind looks like, for error messages.
    pub fn expected(self) -> &'static str {
        match self {
            Kind::Rate => "a rate with a unit, such as 10mbit, 500kbit or 1gbit",
            Kind::Time => "a duration with a unit, such as 20ms or 1.5s",
            Kind::Probability => "a probability, such as 1%, 0.01 or 0",
            Kind::Size => "a size with a unit, such as 2MB, 256KB or 1MiB",
            Kind::Queue => "a queue limit: a time (100ms), a size (64kb), packets (100p) or inf",
        }
    }

    /// Parses `s` as a quantity of this kind.
    pub fn parse(self, s: &str) -> Result<Quantity, String> {
        let fail = |e: String| format!("{s:?} is not {}: {e}", self.expected());
        let q = |value: f64, unit| Quantity { value, unit };
        match self {
            Kind::Rate => parse_rate(s).map(|v| q(v as f64, Unit::BitsPerSecond)).map_err(|e| fail(e.reason)),
            Kind::Time => parse_duration(s).map(|d| q(d.as_secs_f64(), Unit::Seconds)).map_err(|e| fail(e.reason)),
            Kind::Probability => parse_probability(s).map(|p| q(p, Unit::Fraction)).map_err(|e| fail(e.reason)),
            Kind::Size => parse_size(s).map(|v| q(v as f64, Unit::Bytes)).map_err(|e| fail(e.reason)),
            Kind::Queue => {
                let l = s.trim().to_ascii_lowercase();
                if matches!(l.as_str(), "inf" | "unlimited" | "none") {
                    Ok(q(0.0, Unit::Unlimited))
                } else if let Some(n) = l.strip_suffix('p') {
                    match n.trim().parse::<u64>() {
                        Ok(n) => Ok(q(n as f64, Unit::Packets)),
                        Err(_) => Err(fail(format!("{n:?} is not a whole number of packets"))),
                    }
                } else if l.ends_with('s') {
                    Kind::Time.parse(s).map_err(|_| fail("bad duration".into()))
                } else {
                    Kind::Size.parse(s).map_err(|_| fail("bad size".into()))
                }
            }
        }
    }

    /// A bare number (no unit) as a quantity of this kind: only probabilities take one (and
    /// zero, which needs no unit, for rates, times and sizes).
    pub fn from_number(self, x: f64) -> Result<Quantity, String> {
        match self {
            Kind::Probability => self.parse(&x.to_string()),
            Kind::Rate | Kind::Time | Kind::Size if x == 0.0 => Ok(Quantity {
                value: 0.0,
                unit: match self {
                    Kind::Rate => Unit::BitsPerSecond,
                    Kind::Time => Unit::Seconds,
                    _ => Unit::Bytes,
                },
            }),
            _ => Err(format!("{x} has no unit; expected {}", self.expected())),
        }
    }
}

/// Formats `x` with at most `decimals` decimals and no trailing zeros.
fn trimmed(x: f64, decimals: usize) -> String {
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

impl Quantity {
    /// The value rounded to what the simulator can represent: whole bits per second, whole
    /// microseconds, probabilities to 1e-6, whole bytes and packets. Designs round every
    /// value they generate, so that what a row reports is exactly what ran.
    pub fn rounded(self) -> Quantity {
        let value = match self.unit {
            Unit::BitsPerSecond | Unit::Bytes | Unit::Packets => self.value.round(),
            Unit::Seconds => (self.value * 1e6).round() / 1e6,
            Unit::Fraction => (self.value * 1e6).round() / 1e6,
            Unit::Unlimited => 0.0,
        };
        Quantity { value, unit: self.unit }
    }

    /// The value in the unit the results use for it: Mbit/s, ms, %, bytes, packets.
    pub fn display_value(self) -> f64 {
        match self.unit {
            Unit::BitsPerSecond => self.value / 1e6,
            Unit::Seconds => self.value * 1e3,
            Unit::Fraction => self.value * 100.0,
            _ => self.value,
        }
    }
}

impl fmt::Display for Quantity {
    /// The link-spec form (`12.5mbit`, `20ms`, `1.5%`, `2000000b`, `100p`, `inf`), which
    /// [`Kind::parse`] and `mpq sim --link` read back to the same value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.unit {
            Unit::BitsPerSecond => write!(f, "{}mbit", trimmed(self.value / 1e6, 6)),
            Unit::Seconds => write!(f, "{}ms", trimmed(self.value * 1e3, 6)),
            Unit::Fraction => write!(f, "{}%", trimmed(self.value * 100.0, 6)),
            Unit::Bytes => write!(f, "{}b", trimmed(self.value, 0)),
            Unit::Packets => write!(f, "{}p", trimmed(self.value, 0)),
            Unit::Unlimited => f.write_str("inf"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_kind() {
        assert_eq!(Kind::Rate.parse("10mbit").unwrap(), Quantity { value: 1e7, unit: Unit::BitsPerSecond });
        assert_eq!(Kind::Time.parse("20ms").unwrap(), Quantity { value: 0.02, unit: Unit::Seconds });
        assert_eq!(Kind::Probability.parse("2.5%").unwrap().value, 0.025);
        assert_eq!(Kind::Size.parse("2MB").unwrap().value, 2e6);
        assert_eq!(Kind::Queue.parse("100p").unwrap().unit, Unit::Packets);
        assert_eq!(Kind::Queue.parse("2s").unwrap(), Quantity { value: 2.0, unit: Unit::Seconds });
        assert_eq!(Kind::Queue.parse("64kb").unwrap(), Quantity { value: 64e3, unit: Unit::Bytes });
        assert_eq!(Kind::Queue.parse("inf").unwrap().unit, Unit::Unlimited);
        assert_eq!(Kind::Probability.from_number(0.01).unwrap().value, 0.01);
        assert_eq!(Kind::Time.from_number(0.0).unwrap().unit, Unit::Seconds);
    }

    #[test]
    fn errors_say_what_was_expected() {
        let e = Kind::Rate.parse("10").unwrap_err();
        assert!(e.contains("\"10\" is not a rate with a unit"), "{e}");
        assert!(Kind::Time.from_number(20.0).unwrap_err().contains("has no unit"));
        assert!(Kind::Probability.parse("150%").unwrap_err().contains("at most 100%"));
        assert!(Kind::Queue.parse("12").is_err());
    }

    #[test]
    fn display_reads_back_exactly_after_rounding() {
        for (k, s) in [(Kind::Rate, "12.345678mbit"), (Kind::Time, "0.123ms"), (Kind::Probability, "1.2345%")] {
            let q = k.parse(s).unwrap().rounded();
            assert_eq!(k.parse(&q.to_string()).unwrap(), q, "{s} -> {q}");
        }
        let q = Quantity { value: 12_345_678.4, unit: Unit::BitsPerSecond }.rounded();
        assert_eq!(q.to_string(), "12.345678mbit");
        assert_eq!(q.display_value(), 12.345678);
        assert_eq!(Quantity { value: 0.0501, unit: Unit::Seconds }.to_string(), "50.1ms");
        assert_eq!(Quantity { value: 0.0, unit: Unit::Unlimited }.to_string(), "inf");
    }
}
