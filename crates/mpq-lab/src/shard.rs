//! `--shard I/N`: one of N slices of a plan, for spreading an experiment over machines.
//! Scenario `k` (0-based, in plan order) belongs to slice `k mod N + 1`, so every slice gets
//! a mix of classes and sizes. A scenario's runs (its baselines included) stay together.

use std::fmt;
use std::str::FromStr;

/// Slice `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which slice, 1..=count.
    pub index: usize,
    /// How many slices.
    pub count: usize,
}

impl Shard {
    /// Whether scenario `k` (0-based plan position) is in this slice.
    pub fn contains(&self, k: usize) -> bool {
        k % self.count + 1 == self.index
    }
}

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("bad shard {s:?}: expected I/N with 1 <= I <= N, e.g. 2/8");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) =
            (i.trim().parse::<usize>().map_err(|_| bad())?, n.trim().parse::<usize>().map_err(|_| bad())?);
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert_eq!("2/8".parse::<Shard>(), Ok(Shard { index: 2, count: 8 }));
        for bad in ["0/4", "5/4", "1/0", "x/2", "3", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert_eq!(Shard { index: 3, count: 4 }.to_string(), "3/4");
    }

    #[test]
    fn slices_partition_the_plan() {
        let n = 4;
        let shards: Vec<Shard> = (1..=n).map(|i| Shard { index: i, count: n }).collect();
        for k in 0..103 {
            assert_eq!(shards.iter().filter(|s| s.contains(k)).count(), 1, "scenario {k}");
        }
        let sizes: Vec<usize> = shards.iter().map(|s| (0..103).filter(|&k| s.contains(k)).count()).collect();
        assert_eq!(sizes, [26, 26, 26, 25]);
    }
}
