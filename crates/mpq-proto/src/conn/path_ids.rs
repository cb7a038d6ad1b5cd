//! The set of path IDs that were used and are gone (draft-ietf-quic-multipath-21 §2.2:
//! a path ID is never reused).
//!
//! A peer can open and abandon paths for as long as the connection lives, so the set must
//! not cost more per lookup, or more memory, as it grows: IDs are mostly closed in order,
//! so everything below a low-water mark is closed and only the IDs above it are stored.

use std::collections::BTreeSet;

/// Closed path IDs: all of `1..below`, plus the members of `above` (all `>= below`).
/// Path 0 is tracked in `above` like any other ID above the mark.
#[derive(Debug, Default)]
pub(crate) struct ClosedPathIds {
    /// Every ID in `1..below` is closed.
    below: u64,
    /// Closed IDs at or above `below` (and path 0).
    above: BTreeSet<u64>,
}

impl ClosedPathIds {
    /// Records `id` as closed.
    pub fn insert(&mut self, id: u64) {
        if id != 0 && id < self.below {
            return;
        }
        self.above.insert(id);
        // Fold the run that now continues the low-water mark into it.
        let start = self.below.max(1);
        let mut next = start;
        while self.above.remove(&next) {
            next += 1;
        }
        self.below = next;
    }

    /// Whether `id` was closed.
    pub fn contains(&self, id: u64) -> bool {
        (id != 0 && id < self.below) || self.above.contains(&id)
    }

    /// How many IDs are closed.
    pub fn len(&self) -> u64 {
        self.below.saturating_sub(1) + self.above.len() as u64
    }

    /// The open path IDs in `1..=limit`, lowest first (the candidates for new CIDs).
    pub fn open_ids(&self, limit: u64) -> impl Iterator<Item = u64> + '_ {
        (self.below.max(1)..=limit).filter(move |id| !self.above.contains(id))
    }

    /// The lowest ID at or above `from` that is not closed.
    pub fn next_open(&self, from: u64) -> u64 {
        let mut id = from.max(if from == 0 { 0 } else { self.below.max(1) });
        while self.contains(id) {
            id += 1;
        }
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn in_order_closes_keep_nothing_stored() {
        let mut c = ClosedPathIds::default();
        for id in 1..=10_000 {
            c.insert(id);
        }
        assert!(c.above.is_empty());
        assert_eq!(c.len(), 10_000);
        assert!(c.contains(1) && c.contains(10_000) && !c.contains(10_001) && !c.contains(0));
        assert_eq!(c.open_ids(10_003).collect::<Vec<_>>(), vec![10_001, 10_002, 10_003]);
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
