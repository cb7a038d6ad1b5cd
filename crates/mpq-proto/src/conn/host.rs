//! The shared half of a connection as a path's work sees it: [`Host`], the shared state and
//! the board, without the path table (issue C1).
//!
//! Whatever runs on a `Host` cannot reach another path's state: it reads the paths' published
//! views, posts them mail (`conn/mail.rs`) and, where it works for one path (the frames of a
//! packet that path received), gets that path's state as an argument. The compiler proves
//! it. The frames of a received packet ([`Host::process_frames`]) and the connection-wide
//! rules they trigger (closing, connection IDs, multipath control, acknowledged and lost
//! frames) run here, so that a runtime with a thread per path (issue C2) can apply a path's
//! receive batch holding that path and the shared half, while the other paths are with
//! their own threads.
//!
//! What only the whole connection can do (TLS progress that may install keys or complete the
//! handshake, mail delivery, discarding a path) is left in [`Host::followups`] for the
//! connection to do after the packet.

use crate::time::Instant;

use super::board::{Board, PathView};
use super::mail::Mail;
use super::{ConnShared, Connection};

/// The shared half and the board, lent to work done for one path (or for none).
pub(crate) struct Host<'a> {
    /// The shared half.
    pub shared: &'a mut ConnShared,
    /// The paths' views, inboxes and ACK offers.
    pub board: &'a mut Board,
}

/// Work a [`Host`] leaves to the whole connection, done after the packet that asked for it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Followups {
    /// CRYPTO data went to TLS: pull its answers and key changes (`Connection::drive_tls`).
    pub drive_tls: bool,
}

impl Host<'_> {
    /// The slot of the path with ID `id`, found on the board.
    pub fn path_slot(&self, id: u64) -> Option<usize> {
        self.board.slot_of(id)
    }

    /// The published view of the path in `slot`.
    pub fn view(&self, slot: usize) -> Option<&PathView> {
        self.board.get(slot)
    }

    /// The published views with their slots, in slot order.
    pub fn views(&self) -> impl Iterator<Item = (usize, &PathView)> + '_ {
        self.board.iter()
    }

    /// Number of paths (each has a view on the board).
    pub fn path_count(&self) -> usize {
        self.board.iter().count()
    }

    /// The slot of the primary path ([`Board::primary_slot`]).
    pub fn primary_slot(&self) -> Option<usize> {
        self.board.primary_slot()
    }

    /// Mail for the path in `slot`, delivered by the connection after the work at hand.
    pub fn post(&mut self, slot: usize) -> &mut Mail {
        self.board.post(slot)
    }
}

impl Connection {
    /// After work on a [`Host`]: the mail it posted is delivered and its follow-ups done
    /// (one thread: at once).
    pub(crate) fn finish_host_work(&mut self, now: Instant) {
        self.deliver_mail_or_close(now);
        let followups = std::mem::take(&mut self.shared.followups);
        if followups.drive_tls {
            if let Err(e) = self.drive_tls(now) {
                self.host().close_with_error(now, e);
            }
            self.deliver_mail_or_close(now);
        }
    }
}

/// A host reads and changes the shared half directly (`host.streams`, `host.check_mp()`...).
impl std::ops::Deref for Host<'_> {
    type Target = ConnShared;

    fn deref(&self) -> &ConnShared {
        self.shared
    }
}

impl std::ops::DerefMut for Host<'_> {
    fn deref_mut(&mut self) -> &mut ConnShared {
        self.shared
    }
}
