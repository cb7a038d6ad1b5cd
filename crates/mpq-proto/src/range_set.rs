//! A set of `u64` values stored as disjoint, non-adjacent half-open ranges.
//!
//! Used for received packet numbers (ACK ranges), received stream offsets (reassembly) and
//! acknowledged send offsets. Ranges are merged on insert, so memory grows with the number
//! of gaps, not with the number of values; callers bound the number of gaps they accept.

use std::collections::BTreeMap;
use std::ops::Range;

/// Disjoint half-open ranges, merged when they touch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    /// start -> end (exclusive)
    map: BTreeMap<u64, u64>,
}

impl RangeSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of disjoint ranges.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when the set holds no value.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// True if `v` is in the set.
    pub fn contains(&self, v: u64) -> bool {
        // The common case (packet numbers, in-order data) is at or past the last range.
        if let Some((&s, &e)) = self.map.last_key_value() {
            if v >= s {
                return v < e;
            }
        }
        self.map.range(..=v).next_back().is_some_and(|(_, &end)| v < end)
    }

    /// Smallest value in the set.
    pub fn min(&self) -> Option<u64> {
        self.map.keys().next().copied()
    }

    /// Largest value in the set.
    pub fn max(&self) -> Option<u64> {
        self.map.values().next_back().map(|e| e - 1)
    }

    /// The lowest range.
    pub fn first(&self) -> Option<Range<u64>> {
        self.map.iter().next().map(|(&s, &e)| s..e)
    }

    /// The highest range.
    pub fn last(&self) -> Option<Range<u64>> {
        self.map.iter().next_back().map(|(&s, &e)| s..e)
    }

    /// Inserts a single value; returns true if it was not present.
    pub fn insert_one(&mut self, v: u64) -> bool {
        self.insert(v..v.saturating_add(1))
    }

    /// Inserts `r`; returns true if any value in it was not already present.
    pub fn insert(&mut self, r: Range<u64>) -> bool {
        if r.start >= r.end {
            return false;
        }
        let (mut start, mut end) = (r.start, r.end);
        // At or past the start of the last range (in-order packet numbers and stream data):
        // only the last range is involved, and it is found without a search.
        if let Some(mut last) = self.map.last_entry() {
            let (s, e) = (*last.key(), *last.get());
            if start >= s {
                if end <= e {
                    return false;
                }
                if start <= e {
                    *last.get_mut() = end;
                } else {
                    self.map.insert(start, end);
                }
                return true;
            }
        }
        // Fully covered by an existing range?
        if let Some((&s, &e)) = self.map.range(..=start).next_back() {
            if e >= end {
                return false;
            }
            if e >= start {
                // Overlaps or touches the predecessor: merge into it.
                start = s;
                end = end.max(e);
                self.map.remove(&s);
            }
        }
        // Absorb every range that starts inside [start, end].
        while let Some((&s, &e)) = self.map.range(start..=end).next() {
            end = end.max(e);
            self.map.remove(&s);
        }
        self.map.insert(start, end);
        true
    }

    /// Removes every value in `r`; returns true if anything was removed.
    pub fn remove(&mut self, r: Range<u64>) -> bool {
        if r.start >= r.end {
            return false;
        }
        let mut changed = false;
        // A range that starts before r.start and reaches into it.
        if let Some((&s, &e)) = self.map.range(..r.start).next_back() {
            if e > r.start {
                self.map.insert(s, r.start);
                if e > r.end {
                    self.map.insert(r.end, e);
                }
                changed = true;
            }
        }
        while let Some((&s, &e)) = self.map.range(r.start..r.end).next() {
            self.map.remove(&s);
            if e > r.end {
                self.map.insert(r.end, e);
            }
            changed = true;
        }
        changed
    }

    /// Removes and returns the lowest range.
    pub fn pop_min(&mut self) -> Option<Range<u64>> {
        self.map.pop_first().map(|(s, e)| s..e)
    }

    /// Iterates over the ranges in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = Range<u64>> + '_ {
        self.map.iter().map(|(&s, &e)| s..e)
    }

    /// Ranges intersecting `r`, clipped to it, in ascending order.
    pub fn intersecting(&self, r: Range<u64>) -> impl Iterator<Item = Range<u64>> + '_ {
        // An empty or inverted range intersects nothing (and must not reach BTreeMap::range).
        let r = r.start..r.end.max(r.start);
        let first = self.map.range(..r.start).next_back().map(|(&s, &e)| s..e).filter(|x| x.end > r.start);
        let rest = self.map.range(r.start..r.end).map(|(&s, &e)| s..e);
        first.into_iter().chain(rest).map(move |x| x.start.max(r.start)..x.end.min(r.end))
    }

    /// Total number of values in the set.
    pub fn count(&self) -> u64 {
        self.map.iter().map(|(s, e)| e - s).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn merge_and_split() {
        let mut s = RangeSet::new();
        assert!(s.insert(0..2));
        assert!(s.insert(4..6));
        assert!(s.insert(2..4));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0..6]);
        assert!(!s.insert(1..3));
        assert!(s.remove(2..3));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0..2, 3..6]);
        assert_eq!(s.intersecting(1..4).collect::<Vec<_>>(), vec![1..2, 3..4]);
        assert_eq!(s.max(), Some(5));
        assert_eq!(s.min(), Some(0));
        assert!(s.contains(3) && !s.contains(2));
    }

    proptest! {
        #[test]
        fn matches_a_btreeset(ops in proptest::collection::vec((any::<bool>(), 0u64..64, 0u64..10), 0..60)) {
            let mut s = RangeSet::new();
            let mut model = BTreeSet::new();
            for (ins, start, len) in ops {
                let r = start..start + len;
                if ins {
                    let fresh = r.clone().any(|v| !model.contains(&v));
                    prop_assert_eq!(s.insert(r.clone()), fresh);
                    model.extend(r);
                } else {
                    let present = r.clone().any(|v| model.contains(&v));
                    prop_assert_eq!(s.remove(r.clone()), present);
                    for v in r { model.remove(&v); }
                }
                // Invariant: disjoint, non-adjacent, ascending.
                let ranges: Vec<_> = s.iter().collect();
                for w in ranges.windows(2) { prop_assert!(w[0].end < w[1].start); }
                let flat: BTreeSet<u64> = ranges.into_iter().flatten().collect();
                prop_assert_eq!(&flat, &model);
                prop_assert_eq!(s.count(), model.len() as u64);
                for v in 0..80 { prop_assert_eq!(s.contains(v), model.contains(&v)); }
            }
        }
    }
}
