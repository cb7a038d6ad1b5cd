//! The sent-packet ledger of one packet number space: indexed by packet number, cheap for
//! monotonic insertion and removal from the front (the common case at a million packets a
//! second).

use std::collections::VecDeque;

use crate::time::Instant;

/// A packet in flight or awaiting acknowledgement, with what it carried (`F`).
#[derive(Debug)]
pub struct SentPacket<F> {
    /// When it was sent.
    pub time_sent: Instant,
    /// Bytes on the wire (UDP payload share).
    pub size: u32,
    /// Contains a frame other than ACK, PADDING or CONNECTION_CLOSE.
    pub ack_eliciting: bool,
    /// Counts towards bytes in flight (ack-eliciting or padded).
    pub in_flight: bool,
    /// Sent marked ECT(0) (RFC 9000 §13.4).
    pub ecn: bool,
    /// A PMTU probe (RFC 9000 §14.4): its loss is no sign of congestion.
    pub pmtu_probe: bool,
    /// What must happen when it is acknowledged or lost.
    pub frames: F,
}

impl<F> SentPacket<F> {
    /// Its bytes if it counts in flight, else 0.
    pub fn flight_bytes(&self) -> u64 {
        if self.in_flight {
            u64::from(self.size)
        } else {
            0
        }
    }
}

#[cfg(test)]
impl<F> SentPacket<F> {
    /// Tests: an ack-eliciting packet in flight, of `size` bytes, sent at `time_sent`,
    /// carrying `frames`.
    pub(crate) fn eliciting(time_sent: Instant, size: u32, frames: F) -> Self {
        Self { time_sent, size, ack_eliciting: true, in_flight: true, ecn: false, pmtu_probe: false, frames }
    }
}

/// Sent packets by packet number.
#[derive(Debug)]
pub struct SentPackets<F> {
    /// Packet number of `slots[0]`.
    base: u64,
    slots: VecDeque<Option<SentPacket<F>>>,
    len: usize,
}

impl<F> Default for SentPackets<F> {
    fn default() -> Self {
        Self { base: 0, slots: VecDeque::new(), len: 0 }
    }
}

impl<F> SentPackets<F> {
    /// Records a sent packet; numbers must increase (gaps are allowed).
    pub fn insert(&mut self, pn: u64, p: SentPacket<F>) {
        if self.slots.is_empty() {
            self.base = pn;
        }
        debug_assert!(pn >= self.base + self.slots.len() as u64, "packet numbers must increase");
        while self.base + (self.slots.len() as u64) < pn {
            self.slots.push_back(None);
        }
        self.slots.push_back(Some(p));
        self.len += 1;
    }

    /// Removes a packet.
    pub fn remove(&mut self, pn: u64) -> Option<SentPacket<F>> {
        let idx = pn.checked_sub(self.base)? as usize;
        let p = self.slots.get_mut(idx)?.take()?;
        self.len -= 1;
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.base += 1;
        }
        Some(p)
    }

    /// A packet by number.
    pub fn get(&self, pn: u64) -> Option<&SentPacket<F>> {
        let idx = pn.checked_sub(self.base)? as usize;
        self.slots.get(idx)?.as_ref()
    }

    /// Lowest packet number held (or the next one if empty).
    pub fn first_pn(&self) -> u64 {
        self.base
    }

    /// One past the highest packet number ever inserted and still tracked.
    pub fn end_pn(&self) -> u64 {
        self.base + self.slots.len() as u64
    }

    /// Number of packets held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Packets with numbers in `[from, to)`, ascending.
    pub fn iter_range(&self, from: u64, to: u64) -> impl DoubleEndedIterator<Item = (u64, &SentPacket<F>)> {
        let start = from.saturating_sub(self.base).min(self.slots.len() as u64) as usize;
        let end = to.saturating_sub(self.base).min(self.slots.len() as u64) as usize;
        let base = self.base;
        self.slots
            .range(start..end.max(start))
            .enumerate()
            .filter_map(move |(i, s)| s.as_ref().map(|p| (base + (start + i) as u64, p)))
    }

    /// Removes everything, ascending.
    pub fn drain(&mut self) -> Vec<(u64, SentPacket<F>)> {
        let base = self.base;
        let out = self.slots.drain(..).enumerate().filter_map(|(i, s)| s.map(|p| (base + i as u64, p))).collect();
        self.len = 0;
        out
    }
}
