//! A parameter of an experiment file that is either fixed or varied: `rate: 10mbit`,
//! `rate: [1mbit, 10mbit]` (a list of values) or `rate: {min: 0.1mbit, max: 100mbit,
//! scale: log}` (a range). Every list or range is a dimension of the experiment's design.
//!
//! Values are checked while the file is read, so that a bad value is reported with its line.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::quantity::{Kind, Quantity, Unit};

/// How a range maps the design's unit interval onto its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// Evenly spaced values (the default).
    #[default]
    Linear,
    /// Evenly spaced logarithms (the minimum must be above zero).
    Log,
}

/// A range of values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// Smallest value.
    pub min: Quantity,
    /// Largest value.
    pub max: Quantity,
    /// Linear or logarithmic.
    pub scale: Scale,
    /// Number of levels in a grid design (evenly spaced on the scale, ends included).
    pub levels: Option<u32>,
}

impl Range {
    /// The value at position `u` in [0, 1] (rounded, see [`Quantity::rounded`]).
    pub fn at(&self, u: f64) -> Quantity {
        let u = u.clamp(0.0, 1.0);
        let (a, b) = (self.min.value, self.max.value);
        let value = match self.scale {
            Scale::Linear => a + u * (b - a),
            Scale::Log => (a.ln() + u * (b.ln() - a.ln())).exp(),
        };
        Quantity { value: value.clamp(a, b), unit: self.min.unit }.rounded()
    }
}

/// What a [`Param`] holds.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    /// One value for every scenario.
    Fixed(Quantity),
    /// A choice among values (a discrete dimension).
    Values(Vec<Quantity>),
    /// A continuous dimension.
    Range(Range),
}

impl ParamValue {
    /// The value at position `u` in [0, 1] of this dimension (the fixed value if fixed).
    pub fn at(&self, u: f64) -> Quantity {
        match self {
            ParamValue::Fixed(q) => *q,
            ParamValue::Values(v) => v[((u.clamp(0.0, 1.0) * v.len() as f64) as usize).min(v.len() - 1)],
            ParamValue::Range(r) => r.at(u),
        }
    }

    /// Whether the value varies (a dimension of the design).
    pub fn varies(&self) -> bool {
        !matches!(self, ParamValue::Fixed(_))
    }
}

/// Marks which [`Kind`] of quantity a [`Param`] takes.
pub trait ParamKind {
    /// The kind.
    const KIND: Kind;
}

macro_rules! kinds {
    ($($(#[$m:meta])* $name:ident => $kind:ident),* $(,)?) => {
        $( $(#[$m])* #[derive(Debug, Clone, Copy, PartialEq)] pub struct $name;
           impl ParamKind for $name { const KIND: Kind = Kind::$kind; } )*
    };
}

kinds! {
    /// Rates.
    RateKind => Rate,
    /// Durations.
    TimeKind => Time,
    /// Probabilities.
    ProbabilityKind => Probability,
    /// Sizes.
    SizeKind => Size,
    /// Queue limits.
    QueueKind => Queue,
}

/// A fixed or varied quantity of kind `K`; see the [module docs](self).
#[derive(Debug, Clone, PartialEq)]
pub struct Param<K> {
    /// The value(s).
    pub value: ParamValue,
    kind: PhantomData<K>,
}

impl<K> Param<K> {
    /// A fixed value.
    pub fn fixed(q: Quantity) -> Self {
        Param { value: ParamValue::Fixed(q), kind: PhantomData }
    }
}

/// A number or a string with a unit.
enum Scalar {
    Str(String),
    Num(f64),
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a value with a unit")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(v.to_owned()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Num(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Num(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::Num(v as f64))
            }
        }
        d.deserialize_any(V)
    }
}

impl Scalar {
    fn parse(self, kind: Kind) -> Result<Quantity, String> {
        match self {
            Scalar::Str(s) => kind.parse(&s),
            Scalar::Num(x) => kind.from_number(x),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeRaw {
    min: Scalar,
    max: Scalar,
    #[serde(default)]
    scale: Scale,
    levels: Option<u32>,
}

fn range(raw: RangeRaw, kind: Kind) -> Result<Range, String> {
    let min = raw.min.parse(kind).map_err(|e| format!("min: {e}"))?;
    let max = raw.max.parse(kind).map_err(|e| format!("max: {e}"))?;
    if min.unit != max.unit {
        return Err(format!("min ({min}) and max ({max}) must be in the same unit"));
    }
    if matches!(min.unit, Unit::Unlimited) {
        return Err("a range needs numbers, not inf".into());
    }
    if min.value > max.value {
        return Err(format!("min ({min}) is above max ({max})"));
    }
    if raw.scale == Scale::Log && min.value <= 0.0 {
        return Err(format!("a log scale needs a min above zero, not {min}"));
    }
    if raw.levels == Some(0) {
        return Err("levels must be at least 1".into());
    }
    Ok(Range { min, max, scale: raw.scale, levels: raw.levels })
}

impl<'de, K: ParamKind> Deserialize<'de> for Param<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<K>(PhantomData<K>);
        impl<'de, K: ParamKind> Visitor<'de> for V<K> {
            type Value = ParamValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}, a list of them, or a range {{min: .., max: .., scale: linear|log}}", K::KIND.expected())
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ParamValue, E> {
                K::KIND.parse(v).map(ParamValue::Fixed).map_err(E::custom)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ParamValue, E> {
                K::KIND.from_number(v).map(ParamValue::Fixed).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ParamValue, E> {
                self.visit_f64(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ParamValue, E> {
                self.visit_f64(v as f64)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ParamValue, A::Error> {
                let mut out = Vec::new();
                while let Some(s) = seq.next_element::<Scalar>()? {
                    out.push(s.parse(K::KIND).map_err(de::Error::custom)?.rounded());
                }
                if out.is_empty() {
                    return Err(de::Error::custom(format!("an empty list; expected {}", K::KIND.expected())));
                }
                Ok(ParamValue::Values(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ParamValue, A::Error> {
                let raw = RangeRaw::deserialize(de::value::MapAccessDeserializer::new(map))?;
                range(raw, K::KIND).map(ParamValue::Range).map_err(de::Error::custom)
            }
        }
        Ok(Param { value: d.deserialize_any(V::<K>(PhantomData))?, kind: PhantomData })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<K: ParamKind>(yaml: &str) -> Result<ParamValue, String> {
        serde_norway::from_str::<Param<K>>(yaml).map(|p| p.value).map_err(|e| e.to_string())
    }

    #[test]
    fn fixed_list_and_range() {
        assert_eq!(parse::<RateKind>("10mbit").unwrap(), ParamValue::Fixed(Kind::Rate.parse("10mbit").unwrap()));
        let ParamValue::Values(v) = parse::<TimeKind>("[10ms, 20ms]").unwrap() else { panic!() };
        assert_eq!(v.len(), 2);
        let ParamValue::Range(r) = parse::<RateKind>("{min: 0.1mbit, max: 100mbit, scale: log}").unwrap() else {
            panic!()
        };
        assert_eq!(r.scale, Scale::Log);
        assert_eq!(r.at(0.0).value, 100_000.0);
        assert_eq!(r.at(1.0).value, 100_000_000.0);
        // Half way on a log scale from 0.1 to 100 Mbit/s: sqrt(10) Mbit/s.
        assert_eq!(r.at(0.5).value, 3_162_278.0);
        let ParamValue::Range(r) = parse::<ProbabilityKind>("{min: 0, max: 2.5%}").unwrap() else { panic!() };
        assert_eq!(r.at(0.5).value, 0.0125);
    }

    #[test]
    fn values_pick_by_position() {
        let p = parse::<TimeKind>("[10ms, 20ms, 30ms]").unwrap();
        assert_eq!([0.0, 0.34, 0.99, 1.0].map(|u| p.at(u).value * 1e3), [10.0, 20.0, 30.0, 30.0]);
    }

    #[test]
    fn bad_values_are_reported() {
        assert!(parse::<RateKind>("10").unwrap_err().contains("has no unit"));
        assert!(parse::<RateKind>("{min: 1mbit, max: 10mbit, scale: cubic}").unwrap_err().contains("unknown variant"));
        assert!(parse::<RateKind>("{min: 1mbit, max: 10mbit, step: 1}").unwrap_err().contains("unknown field `step`"));
        assert!(parse::<RateKind>("{min: 10mbit, max: 1mbit}").unwrap_err().contains("is above max"));
        assert!(parse::<RateKind>("{min: 0mbit, max: 1mbit, scale: log}").unwrap_err().contains("above zero"));
        assert!(parse::<QueueKind>("{min: 10ms, max: 64kb}").unwrap_err().contains("same unit"));
        assert!(parse::<TimeKind>("[]").unwrap_err().contains("empty list"));
        assert!(parse::<TimeKind>("[10ms, fast]").unwrap_err().contains("\"fast\" is not a duration"));
    }
}
