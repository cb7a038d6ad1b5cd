//! The table of a connection's paths, by slot: a path keeps its slot from creation to
//! discard, so a slot number held anywhere (a loop over the paths, a runtime's thread, a
//! batch in progress) keeps meaning its path while other paths come and go. (A `Vec` with
//! `remove` shifted every later path down by one.) A slot is reused only after its path was
//! discarded.
//!
//! The table also holds the [`Board`]: each path's published view and its inbox, by slot.
//!
//! A path can be **checked out** ([`PathTable::check_out`]) for the work it does alone
//! (opening a run of received datagrams, building a send batch) and checked back in after:
//! the path's state then leaves the table, which keeps its slot, its view and its inbox. A
//! runtime with a thread per path (issue C2) hands the checked-out [`PathHalf`] to the
//! path's thread; until it is checked in, lookups and walks over the table do not see the
//! path (they see its view on the board), and mail to it waits in its inbox.

use smallvec::SmallVec;

use super::board::{Board, Inbox, PathView};
use super::mail::{AckOffer, Mail};
use super::path::PathState;

/// Live slots, copied out so that the caller may change the connection while it walks them.
pub(crate) type Slots = SmallVec<[usize; 8]>;

/// One slot of the table.
#[derive(Debug)]
enum Slot {
    /// No path.
    Free,
    /// A path, here.
    Here(Box<PathState>),
    /// A path checked out for work it does alone, with its statistics as it left (what
    /// `Connection::stats` reports for it meanwhile).
    Out(Box<super::path::PathStats>),
}

impl Slot {
    fn path(&self) -> Option<&PathState> {
        match self {
            Slot::Here(p) => Some(p),
            _ => None,
        }
    }

    fn path_mut(&mut self) -> Option<&mut PathState> {
        match self {
            Slot::Here(p) => Some(p),
            _ => None,
        }
    }
}

/// A path checked out of its connection's table ([`PathTable::check_out`]): its whole state,
/// owned, and its slot. It holds no reference into the connection, so it can go to another
/// thread while the connection serves the other paths.
#[derive(Debug)]
pub(crate) struct PathHalf {
    /// The path's slot (kept for it in the table).
    pub slot: usize,
    /// The path's state.
    pub path: Box<PathState>,
}

/// Paths by slot. A new path takes the lowest free slot; removing one frees only its own.
#[derive(Debug, Default)]
pub(crate) struct PathTable {
    slots: Vec<Slot>,
    live: usize,
    board: Board,
    /// Multipath is in use: paths publish ACK offers while there are several.
    multipath: bool,
}

impl PathTable {
    /// Puts `path` in the lowest free slot and returns that slot.
    pub fn insert(&mut self, path: PathState) -> usize {
        self.live += 1;
        let view = path.view();
        let path = Box::new(path);
        let slot = match self.slots.iter().position(|s| matches!(s, Slot::Free)) {
            Some(i) => {
                self.slots[i] = Slot::Here(path);
                i
            }
            None => {
                self.slots.push(Slot::Here(path));
                self.slots.len() - 1
            }
        };
        self.board.publish(slot, view);
        self.update_offers();
        // (A path sharing one packet number space offers its ranges, pending or not, from
        // the start.)
        self.publish_offer(slot);
        slot
    }

    /// Takes the path out of `slot`, which becomes free.
    ///
    /// # Panics
    /// If no path is here (a caller bug: slots come from this table, and a checked-out path
    /// is checked in before it can be discarded).
    pub fn remove(&mut self, slot: usize) -> PathState {
        let Slot::Here(path) = std::mem::replace(&mut self.slots[slot], Slot::Free) else {
            panic!("no path here in slot {slot}");
        };
        self.board.remove(slot);
        self.live -= 1;
        while self.slots.last().is_some_and(|s| matches!(s, Slot::Free)) {
            self.slots.pop();
        }
        self.update_offers();
        *path
    }

    /// Takes the path in `slot` out of the table for work it does alone; `None` if no path
    /// is here. The slot, the path's view and its inbox stay.
    pub fn check_out(&mut self, slot: usize) -> Option<PathHalf> {
        let s = self.slots.get_mut(slot)?;
        if !matches!(s, Slot::Here(_)) {
            return None;
        }
        let stats = match s {
            Slot::Here(p) => Box::new(p.snapshot()),
            _ => return None,
        };
        let Slot::Here(path) = std::mem::replace(s, Slot::Out(stats)) else { return None };
        Some(PathHalf { slot, path })
    }

    /// Puts a checked-out path back in its slot.
    ///
    /// # Panics
    /// If its slot does not wait for it (a caller bug).
    pub fn check_in(&mut self, half: PathHalf) {
        let s = &mut self.slots[half.slot];
        assert!(matches!(s, Slot::Out(_)), "slot {} does not wait for a checked-out path", half.slot);
        *s = Slot::Here(half.path);
        // ACK offers may have been switched on while it was out (a second path went live):
        // its offer is published now, as the switch did for the paths in the table.
        self.publish_offer(half.slot);
    }

    /// The path in `slot` is checked out (its mail waits for its check-in).
    pub fn is_out(&self, slot: usize) -> bool {
        matches!(self.slots.get(slot), Some(Slot::Out(_)))
    }

    /// Marks `slot` as having mail waiting again (it was checked out when the mail was
    /// delivered).
    pub fn keep_mail_waiting(&mut self, slot: usize) {
        self.board.keep_mail_waiting(slot);
    }

    /// Some path that is not checked out has mail waiting.
    pub fn has_mail_waiting_here(&self) -> bool {
        self.board.mail_waiting_slots().any(|s| !self.is_out(s))
    }

    /// Number of paths (checked out or not).
    pub fn len(&self) -> usize {
        self.live
    }

    /// The path in `slot`, if any.
    pub fn get(&self, slot: usize) -> Option<&PathState> {
        self.slots.get(slot).and_then(Slot::path)
    }

    /// The path in `slot`, if any, mutably.
    pub fn get_mut(&mut self, slot: usize) -> Option<&mut PathState> {
        self.slots.get_mut(slot).and_then(Slot::path_mut)
    }

    /// One past the highest slot in use: `0..slot_bound()` covers every path (check each
    /// with [`PathTable::get`]); cheaper than [`PathTable::slots`] on per-packet paths.
    pub fn slot_bound(&self) -> usize {
        self.slots.len()
    }

    /// The slots in use, in order.
    pub fn slots(&self) -> Slots {
        self.enumerate().map(|(i, _)| i).collect()
    }

    /// The statistics of the paths checked out (as they left), in slot order.
    pub fn out_stats(&self) -> impl Iterator<Item = &super::path::PathStats> + '_ {
        self.slots.iter().filter_map(|s| match s {
            Slot::Out(stats) => Some(&**stats),
            _ => None,
        })
    }

    /// The paths with their slots, in slot order.
    pub fn enumerate(&self) -> impl Iterator<Item = (usize, &PathState)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.path().map(|p| (i, p)))
    }

    /// The paths, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = &PathState> + '_ {
        self.slots.iter().filter_map(Slot::path)
    }

    /// The paths, mutably, in slot order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut PathState> + '_ {
        self.slots.iter_mut().filter_map(Slot::path_mut)
    }

    /// The path in `slot` publishes its current view on the board (after a change the
    /// other paths' decisions depend on). Nothing happens for a free slot.
    pub fn publish(&mut self, slot: usize) {
        if let Some(p) = self.get(slot) {
            let view = p.view();
            let offer = self.board.offers_on.then(|| p.ack_offer());
            self.board.publish(slot, view);
            if let Some(offer) = offer {
                self.board.publish_offer(slot, offer);
            }
        }
    }

    /// The path in `slot` publishes its ACK offer (after its received packets or its ACK
    /// state changed), while offers are on.
    pub fn publish_offer(&mut self, slot: usize) {
        if !self.board.offers_on {
            return;
        }
        if let Some(p) = self.get(slot) {
            let offer = p.ack_offer();
            self.board.publish_offer(slot, offer);
        }
    }

    /// Multipath is in use from now on: while there are several paths, each publishes its
    /// ACK offer for the others.
    pub fn enable_offers(&mut self) {
        self.multipath = true;
        self.update_offers();
    }

    /// Offers are published while multipath is in use and there is more than one path
    /// (a lone path's ACKs have no other carrier: copying its ranges would be waste).
    fn update_offers(&mut self) {
        let on = self.multipath && self.live > 1;
        if on == self.board.offers_on {
            return;
        }
        self.board.offers_on = on;
        for slot in self.slots() {
            if on {
                self.publish_offer(slot);
            } else {
                self.board.publish_offer(slot, None);
            }
        }
    }

    /// The ACK offer of the path in `slot`: its pending ACK, for a path that carries it.
    pub fn offer(&self, slot: usize) -> Option<&AckOffer> {
        let o = self.board.offer(slot);
        if cfg!(debug_assertions) && self.board.strict && self.board.offers_on {
            let now = self.get(slot).and_then(PathState::ack_offer);
            debug_assert_eq!(o, now.as_ref(), "stale ACK offer of slot {slot}");
        }
        o
    }

    /// Mail for the path in `slot`, to be filled (handled by `Connection::deliver_mail`).
    pub fn post(&mut self, slot: usize) -> &mut Mail {
        self.board.post(slot)
    }

    /// The next slot with mail waiting.
    pub fn take_mail_waiting(&mut self) -> Option<usize> {
        self.board.take_mail_waiting()
    }

    /// The path in `slot` sent a packet: publishes what that changes (flight, data sent,
    /// amplification room) without rebuilding the whole view.
    pub fn publish_sent(&mut self, slot: usize) {
        if let Some(p) = self.slots.get(slot).and_then(Slot::path) {
            self.board.publish_sent(slot, p);
        }
    }

    /// Every path publishes its view (after an operation that may touch several paths).
    pub fn publish_all(&mut self) {
        for slot in 0..self.slots.len() {
            self.publish(slot);
        }
    }

    /// The path in `slot` and the board, apart (a path building its packets reaches the
    /// other paths only through the board).
    pub fn path_and_board(&mut self, slot: usize) -> Option<(&mut PathState, &mut Board)> {
        let path = self.slots.get_mut(slot).and_then(Slot::path_mut)?;
        Some((path, &mut self.board))
    }

    /// The board, mutably (work on a `Host` publishes and posts through it).
    pub fn board_mut(&mut self) -> &mut Board {
        &mut self.board
    }

    /// The board (views, inboxes, offers), without the freshness checks of
    /// [`PathTable::view`].
    pub fn board(&self) -> &Board {
        &self.board
    }

    /// Debug builds, single thread: every published ACK offer is what its path would
    /// publish now (checked before a path builds a batch from the board alone).
    pub fn check_offers_fresh(&self) {
        if cfg!(debug_assertions) {
            for slot in self.slots() {
                let _ = self.offer(slot);
            }
        }
    }

    /// The published view of the path in `slot`.
    pub fn view(&self, slot: usize) -> Option<&PathView> {
        let v = self.board.get(slot);
        self.check_fresh(slot, v);
        v
    }

    /// The published views of the paths in the table with their slots, in slot order. A
    /// checked-out path is left out: what is decided from a view here (which path takes
    /// copies, which sends next) acts on the path at once, and it is not here to act on.
    pub fn views(&self) -> impl Iterator<Item = (usize, &PathView)> + '_ {
        self.board.iter().filter(|&(slot, _)| !self.is_out(slot)).inspect(|&(slot, v)| self.check_fresh(slot, Some(v)))
    }

    /// Debug builds: a view read must be what the path would publish now; a mismatch means a
    /// change was not followed by [`PathTable::publish`]. (A checked-out path's view is the
    /// one it published when it left: it publishes again at its check-in.)
    fn check_fresh(&self, slot: usize, v: Option<&PathView>) {
        if cfg!(debug_assertions) && self.board.strict && !self.is_out(slot) {
            let now = self.get(slot).map(PathState::view);
            debug_assert_eq!(v, now.as_ref(), "stale board view of slot {slot}");
        }
    }

    /// The inbox of the path in `slot`.
    ///
    /// # Panics
    /// If the slot was never used.
    pub fn inbox(&self, slot: usize) -> &Inbox {
        self.board.inbox(slot)
    }

    /// The inbox of the path in `slot`, mutably. Same panics as [`PathTable::inbox`].
    pub fn inbox_mut(&mut self, slot: usize) -> &mut Inbox {
        self.board.inbox_mut(slot)
    }
}

impl std::ops::Index<usize> for PathTable {
    type Output = PathState;

    fn index(&self, slot: usize) -> &PathState {
        self.slots[slot].path().expect("a path here in this slot")
    }
}

impl std::ops::IndexMut<usize> for PathTable {
    fn index_mut(&mut self, slot: usize) -> &mut PathState {
        self.slots[slot].path_mut().expect("a path here in this slot")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::config::TransportConfig;

    fn path(id: u64) -> PathState {
        PathState::new(id, "127.0.0.1:4433".parse().expect("addr"), &TransportConfig::default(), true)
    }

    #[test]
    fn slots_stay_put_when_other_paths_go() {
        let mut t = PathTable::default();
        let slots: Vec<usize> = (0..4).map(|id| t.insert(path(id))).collect();
        assert_eq!(slots, [0, 1, 2, 3]);
        assert_eq!(t.remove(1).id, 1);
        // Path 2 is still in slot 2 (a Vec would have moved it to index 1).
        assert_eq!((t[2].id, t[3].id, t.len()), (2, 3, 3));
        assert!(t.get(1).is_none());
        assert_eq!(t.slots().to_vec(), [0, 2, 3]);
        // A new path takes the freed slot; the others do not move.
        assert_eq!(t.insert(path(9)), 1);
        assert_eq!(t.iter().map(|p| p.id).collect::<Vec<_>>(), [0, 9, 2, 3]);
        // Trailing free slots are given back.
        t.remove(3);
        t.remove(2);
        assert_eq!(t.insert(path(10)), 2);
        assert_eq!(t.enumerate().map(|(i, p)| (i, p.id)).collect::<Vec<_>>(), [(0, 0), (1, 9), (2, 10)]);
    }

    /// A checked-out path leaves the table but keeps its slot, its view and its inbox; a
    /// new path does not take the slot; checked in, it is back where it was.
    #[test]
    fn a_checked_out_path_keeps_its_slot_view_and_inbox() {
        let mut t = PathTable::default();
        for id in 0..3 {
            t.insert(path(id));
        }
        let half = t.check_out(1).expect("path 1");
        assert_eq!((half.slot, half.path.id), (1, 1));
        assert!(t.get(1).is_none() && t.check_out(1).is_none(), "out of the table");
        assert_eq!(t.iter().map(|p| p.id).collect::<Vec<_>>(), [0, 2], "walks skip it");
        assert_eq!(t.board().slot_of(1), Some(1), "its view stays on the board");
        t.post(1).push_ack_acked(7);
        assert_eq!(t.len(), 3);
        assert_eq!(t.insert(path(5)), 3, "its slot is not free");
        // The path's state can go to another thread and come back.
        let half = std::thread::scope(|s| s.spawn(move || half).join().expect("thread"));
        t.check_in(half);
        assert_eq!(t[1].id, 1);
        assert_eq!(t.inbox(1).mail.acks_acked.as_slice(), &[7], "its mail waited");
        assert!(t.check_out(9).is_none(), "no path there");
    }
}
