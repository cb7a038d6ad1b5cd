//! A send batch a path builds alone, as a runtime drives it (issue C1's seam for a thread
//! per path, issue C2): [`Connection::begin_alone_batch`] leases what the batch needs
//! and checks the path out of the table (with the connection: under its lock, with
//! threads); [`AloneBatch::build`] writes, seals and records the batch holding nothing of
//! the connection (on the path's thread); [`Connection::end_alone_batch`] checks the path
//! back in and hands over what the batch changed for the others (with the connection
//! again). The single-thread event loop and the simulator go through the same three steps
//! in `Connection::poll_transmit`.

use crate::time::Instant;

use super::super::path_table::PathHalf;
use super::super::Connection;
use super::path_packet::BatchWritten;
use super::side::BatchSide;

/// A path checked out with its lease to build a send batch alone. Holds nothing of the
/// connection: it may go to another thread.
pub(crate) struct AloneBatch {
    /// The path.
    half: PathHalf,
    /// What it has of the connection: nothing but the batch settings and the effects to
    /// hand over.
    side: BatchSide<'static, 'static>,
    /// May carry new data.
    allow_data: bool,
    /// What the batch wrote so far.
    pub written: BatchWritten,
}

impl std::fmt::Debug for AloneBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AloneBatch").field("slot", &self.half.slot).field("path", &self.half.path.id).finish()
    }
}

impl AloneBatch {
    /// The path's ID.
    pub fn path_id(&self) -> u64 {
        self.half.path.id
    }

    /// The path's slot.
    pub fn slot(&self) -> usize {
        self.half.slot
    }

    /// Writes the batch into `buf` (appended: a batch of several GSO segments of one size).
    pub fn build(&mut self, now: Instant, buf: &mut Vec<u8>) {
        self.half.path.build_batch(&mut self.side, now, buf, self.allow_data, &mut self.written);
    }
}

impl Connection {
    /// The path in slot `pi`, in a batch (`PathState::in_batch`), leases what a batch built
    /// alone needs and leaves the table, when it can ([`super::host::SendHost::try_alone`]);
    /// `None`: the batch is built with the host.
    pub(crate) fn begin_alone_batch(&mut self, now: Instant, pi: usize, allow_data: bool) -> Option<AloneBatch> {
        let (path, mut host) = self.send_host(pi)?;
        let side = host.try_alone(path, now, allow_data)?;
        let half = self.paths.check_out(pi)?;
        Some(AloneBatch { half, side, allow_data, written: BatchWritten::default() })
    }

    /// A batch built alone comes back: its path is checked in and what the batch changed
    /// for the others (its view, its ACK offer, ACKs it carried) is published. Returns what
    /// it wrote; unless `done`, the batch goes on with the host.
    pub(crate) fn end_alone_batch(&mut self, batch: AloneBatch) -> BatchWritten {
        let pi = batch.slot();
        let AloneBatch { half, side, written, .. } = batch;
        self.paths.check_in(half);
        if let Some((path, mut host)) = self.send_host(pi) {
            host.take_back(path, side.alone);
        }
        written
    }
}
