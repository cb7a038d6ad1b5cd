//! Debug builds' counts of how often the batch seams met a connection's shared state
//! (issues C1 and C2), kept apart from the connection they count.

/// Debug builds: how often the batch seams met the shared state (issue C1), so that tests
/// can hold a steady transfer to a constant number of meetings per batch.
#[cfg(debug_assertions)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TouchCounts {
    /// Receive batches ([`crate::conn::Connection::handle_datagrams`] calls).
    pub recv_batches: u64,
    /// Times opened packets were applied to the shared state.
    pub recv_applies: u64,
    /// Datagrams opened by their path alone.
    pub recv_opened: u64,
    /// Datagrams that took the general, per-packet way.
    pub recv_general: u64,
    /// Seats a path took at the board to open a run of datagrams alone.
    pub recv_seats: u64,
    /// Stream data pieces the shared side checked and kept from packets opened alone
    /// (fewer than their STREAM frames: a run's frames are joined, `recv_join.rs`).
    pub recv_stream_pieces: u64,
    /// Send batches that leased the 1-RTT keys.
    pub send_leases: u64,
    /// Send batches a path started alone, holding nothing of the connection
    /// (`SendHost::try_alone`).
    pub send_alone_batches: u64,
    /// Send batches a path built by itself (`PathState::build_batch`), not coalescing
    /// Initial or Handshake packets.
    pub send_path_batches: u64,
    /// 1-RTT packets sealed under a lease.
    pub send_leased: u64,
    /// Of those, packets sealed by batches built alone.
    pub send_alone_packets: u64,
    /// 1-RTT packets sealed with the connection's key state directly.
    pub send_unleased: u64,
    /// Send batches whose lease took the connection-wide control frames waiting.
    pub send_control_leases: u64,
    /// Stream data leases taken by send batches.
    pub send_data_leases: u64,
    /// STREAM chunks taken from the shared stream table one by one (not from a lease).
    pub send_chunks_unleased: u64,
    /// Packets whose connection-wide frames were written from the shared state (the
    /// batch's lease was not quiet, or it had none).
    pub send_connection_frames: u64,
    /// ACK frames (and loss timers) whose packets' fate the shared side applied.
    pub fates_applied: u64,
    /// ACK frames a path handled alone while opening a receive batch.
    pub acks_in_batch: u64,
}

/// Counts a meeting of a seam with the shared state (debug builds only).
macro_rules! touch {
    ($conn:expr, $field:ident) => {
        #[cfg(debug_assertions)]
        {
            $conn.shared.touches.$field += 1;
        }
    };
}
pub(crate) use touch;
