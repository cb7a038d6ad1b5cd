//! The set of path IDs that were used and are gone (RFC 10069 §3.4:
//! a path ID is never reused).
//!
//! A peer can open and abandon paths for as long as the connection lives, so the set must
//! not cost more per lookup, or more memory, as it grows: IDs are mostly closed in order,
//! so everything below a low-water mark is closed, and the closed IDs above it are kept as
//! runs. A peer that keeps one low ID open while it cycles through later ones leaves one
//! run, not one entry per ID, and listing the open IDs below a limit costs a step per open
//! ID, not per closed one.

use std::collections::BTreeMap;

/// Closed path IDs: all of `1..below`, every run `start..end` of `runs` (all above
/// `below`, disjoint and never adjacent), and path 0 if `zero`.
#[derive(Debug, Default)]
pub(crate) struct ClosedPathIds {
    /// Every ID in `1..below` is closed.
    below: u64,
    /// Runs of closed IDs above `below`: start -> end (exclusive).
    runs: BTreeMap<u64, u64>,
    /// Path 0 is closed.
    zero: bool,
    /// How many IDs are closed.
    count: u64,
}

impl ClosedPathIds {
    /// Records `id` as closed.
    pub fn insert(&mut self, id: u64) {
        if id == 0 {
            self.count += u64::from(!self.zero);
            self.zero = true;
            return;
        }
        if self.contains(id) {
            return;
        }
        self.count += 1;
        let (mut start, mut end) = (id, id + 1);
        if let Some((&s, &e)) = self.runs.range(..id).next_back() {
            if e == id {
                start = s;
                self.runs.remove(&s);
            }
        }
        if let Some(e) = self.runs.remove(&end) {
            end = e;
        }
        if start <= self.below.max(1) {
            // The run continues the low-water mark.
            self.below = end;
        } else {
            self.runs.insert(start, end);
        }
    }

    /// The run of closed IDs holding `id` (1 or more), as its end.
    fn run_end(&self, id: u64) -> Option<u64> {
        if id < self.below {
            return Some(self.below);
        }
        self.runs.range(..=id).next_back().filter(|(_, &e)| id < e).map(|(_, &e)| e)
    }

    /// Whether `id` was closed.
    pub fn contains(&self, id: u64) -> bool {
        if id == 0 {
            return self.zero;
        }
        self.run_end(id).is_some()
    }

    /// How many IDs are closed.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// The open path IDs in `1..=limit`, lowest first (the candidates for new CIDs).
    pub fn open_ids(&self, limit: u64) -> impl Iterator<Item = u64> + '_ {
        let first = self.below.max(1);
        // Every ID up to `limit` may be closed already (the low-water mark passed it): an
        // empty range then, since `range(first..=limit)` panics when first > limit.
        let runs_in =
            move || if first <= limit { self.runs.range(first..=limit) } else { self.runs.range(first..first) };
        let mut next = first;
        let gaps = runs_in().map(move |(&s, &e)| {
            let gap = next..s;
            next = e;
            gap
        });
        // Each run ends a gap of open IDs; the IDs after the last run up to `limit` follow.
        let last_end = runs_in().next_back().map_or(first, |(_, &e)| e);
        gaps.flatten().chain(last_end..=limit)
    }

    /// The lowest ID at or above `from` that is not closed.
    pub fn next_open(&self, from: u64) -> u64 {
        if from == 0 && !self.zero {
            return 0;
        }
        let id = from.max(1);
        self.run_end(id).unwrap_or(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn in_order_closes_keep_nothing_stored() {
        let mut c = ClosedPathIds::default();
        for id in 1..=10_000 {
            c.insert(id);
        }
        assert!(c.runs.is_empty());
        assert_eq!(c.len(), 10_000);
        assert!(c.contains(1) && c.contains(10_000) && !c.contains(10_001) && !c.contains(0));
        assert_eq!(c.open_ids(10_003).collect::<Vec<_>>(), vec![10_001, 10_002, 10_003]);
    }

    /// Regression (found by the conn_frames fuzz target): with every ID up to the limit
    /// closed, listing the open ones panicked ("range start is greater than range end").
    #[test]
    fn no_open_ids_below_a_limit_under_the_low_water_mark() {
        let mut c = ClosedPathIds::default();
        for id in 1..=5 {
            c.insert(id);
        }
        c.insert(9);
        for limit in 0..=5 {
            assert_eq!(c.open_ids(limit).count(), 0, "limit {limit}");
        }
        assert_eq!(c.open_ids(10).collect::<Vec<_>>(), vec![6, 7, 8, 10]);
    }

    #[test]
    fn path_zero_and_gaps() {
        let mut c = ClosedPathIds::default();
        c.insert(0);
        c.insert(3);
        assert!(c.contains(0) && c.contains(3) && !c.contains(1));
        assert_eq!(c.open_ids(4).collect::<Vec<_>>(), vec![1, 2, 4]);
        assert_eq!(c.next_open(1), 1);
        c.insert(1);
        c.insert(2);
        assert_eq!(c.next_open(1), 4);
        assert_eq!(c.len(), 4);
    }

    /// One low ID stays open while thousands above it close: one run is stored, and the
    /// open IDs are listed without walking the closed ones.
    #[test]
    fn a_low_open_id_keeps_one_run() {
        let mut c = ClosedPathIds::default();
        for id in 2..=100_000 {
            c.insert(id);
        }
        assert_eq!(c.runs.len(), 1);
        assert_eq!(c.open_ids(100_003).collect::<Vec<_>>(), vec![1, 100_001, 100_002, 100_003]);
        assert_eq!(c.next_open(2), 100_001);
        c.insert(1);
        assert!(c.runs.is_empty());
        assert_eq!(c.len(), 100_000);
    }

    proptest! {
        #[test]
        fn behaves_like_a_set(ids in proptest::collection::vec(0u64..64, 0..80), probe in 0u64..70) {
            let mut c = ClosedPathIds::default();
            let mut s = BTreeSet::new();
            for id in ids {
                c.insert(id);
                s.insert(id);
            }
            prop_assert_eq!(c.contains(probe), s.contains(&probe));
            prop_assert_eq!(c.len(), s.len() as u64);
            let open: Vec<u64> = (1..=70).filter(|i| !s.contains(i)).collect();
            prop_assert_eq!(c.open_ids(70).collect::<Vec<_>>(), open);
            let from = probe.max(1);
            let want = (from..).find(|i| !s.contains(i)).unwrap();
            prop_assert_eq!(c.next_open(from), want);
        }
    }
}
