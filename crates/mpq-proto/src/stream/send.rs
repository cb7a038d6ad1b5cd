//! The sending half of a stream: send buffer and send state machine (RFC 9000 §3.1).

use super::flow::SendCredit;
pub use super::send_buffer::SendBuffer;

/// Send-side states (RFC 9000 §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendState {
    /// Nothing sent yet.
    Ready,
    /// Sending data.
    Send,
    /// FIN sent; waiting for acknowledgements.
    DataSent,
    /// All data and the FIN acknowledged. Terminal.
    DataRecvd,
    /// RESET_STREAM queued or sent.
    ResetSent,
    /// RESET_STREAM acknowledged. Terminal.
    ResetRecvd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fin {
    /// The application has not finished the stream.
    None,
    /// To send (first time or after loss).
    Pending,
    /// In flight.
    Sent,
    /// Acknowledged.
    Acked,
}

/// One chunk taken from a stream: `offset..offset+len`, possibly carrying the FIN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Stream offset.
    pub offset: u64,
    /// Payload length.
    pub len: u64,
    /// Whether the chunk carries the FIN.
    pub fin: bool,
}

/// The sending half of a stream.
#[derive(Debug)]
pub struct SendStream {
    pub(crate) buf: SendBuffer,
    /// Stream-level credit from the peer (used = write offset).
    pub(crate) credit: SendCredit,
    state: SendState,
    fin: Fin,
    /// `(error_code, final_size)` once reset.
    reset: Option<(u64, u64)>,
    /// Error code of a STOP_SENDING received from the peer.
    pub(crate) stop_code: Option<u64>,
    /// A write was refused or shortened: emit Writable when room appears.
    pub(crate) want_writable: bool,
}

impl SendStream {
    /// A send half with the peer's initial MAX_STREAM_DATA.
    pub fn new(max_data: u64) -> Self {
        Self {
            buf: SendBuffer::new(),
            credit: SendCredit::new(max_data),
            state: SendState::Ready,
            fin: Fin::None,
            reset: None,
            stop_code: None,
            want_writable: false,
        }
    }

    /// Current state.
    pub fn state(&self) -> SendState {
        self.state
    }

    /// `(error_code, final_size)` if the stream was reset.
    pub fn reset_info(&self) -> Option<(u64, u64)> {
        self.reset
    }

    /// True if the application may still write (not finished, not reset).
    pub fn is_open(&self) -> bool {
        self.fin == Fin::None && self.reset.is_none()
    }

    /// Appends application data (the caller checked the limits).
    pub fn write(&mut self, data: &[u8]) {
        debug_assert!(self.is_open());
        self.buf.write(data);
        self.credit.consume(data.len() as u64);
    }

    /// Appends application data without copying it (the caller checked the limits).
    pub fn write_bytes(&mut self, data: bytes::Bytes) {
        debug_assert!(self.is_open());
        self.credit.consume(data.len() as u64);
        self.buf.write_bytes(data);
    }

    /// Marks the end of the stream.
    pub fn finish(&mut self) {
        debug_assert!(self.is_open());
        self.fin = Fin::Pending;
    }

    /// Resets the stream: stops all (re)transmission. Returns the written bytes that will
    /// never be sent (their connection credit can be reused).
    pub fn reset(&mut self, error_code: u64) -> u64 {
        debug_assert!(self.reset.is_none());
        let final_size = self.buf.unsent();
        self.reset = Some((error_code, final_size));
        self.state = SendState::ResetSent;
        let unsent = self.buf.discard();
        self.credit.release(unsent);
        unsent
    }

    /// The RESET_STREAM frame was acknowledged.
    pub fn on_reset_acked(&mut self) {
        if self.state == SendState::ResetSent {
            self.state = SendState::ResetRecvd;
        }
    }

    /// True when lost data waits for retransmission.
    pub fn has_lost(&self) -> bool {
        self.reset.is_none() && self.buf.has_lost()
    }

    /// True when new data (within stream credit and `conn_avail`) or the FIN can be sent.
    pub fn has_new(&self, conn_avail: u64) -> bool {
        self.reset.is_none()
            && ((self.buf.has_unsent() && conn_avail > 0) || (self.fin == Fin::Pending && !self.buf.has_unsent()))
    }

    fn fin_for(&mut self, end: u64) -> bool {
        let fin = self.fin == Fin::Pending && end == self.buf.offset();
        if fin {
            self.fin = Fin::Sent;
            self.state = SendState::DataSent;
        }
        fin
    }

    /// Next retransmission of lost data, at most `max_len` bytes.
    pub fn next_retransmit(&mut self, max_len: u64) -> Option<Chunk> {
        if self.reset.is_some() {
            return None;
        }
        let r = self.buf.next_lost(max_len)?;
        let fin = self.fin_for(r.end);
        Some(Chunk { offset: r.start, len: r.end - r.start, fin })
    }

    /// Next new data (at most `max_len` bytes and `conn_avail` bytes of connection credit),
    /// or a FIN-only chunk. Returns the chunk; `len` new bytes were consumed from the credit.
    pub fn next_new(&mut self, max_len: u64, conn_avail: u64) -> Option<Chunk> {
        if !self.has_new(conn_avail) {
            return None;
        }
        let r = self.buf.next_new(max_len.min(conn_avail));
        let fin = self.fin_for(r.end);
        if r.is_empty() && !fin {
            return None;
        }
        if self.state == SendState::Ready {
            self.state = SendState::Send;
        }
        Some(Chunk { offset: r.start, len: r.end - r.start, fin })
    }

    /// Gives back the unused end of a send batch's lease (`conn/send/lease.rs`): new data
    /// from `from` on is unsent again, and the FIN pending again if `fin` (the lease held it
    /// and did not send it). `before`: the state before the lease, restored if the lease
    /// sent nothing at all. `to`: the end of the lease.
    ///
    /// Returns false if the bytes after the lease were leased or sent since (two paths'
    /// batches leased this stream one after the other and the earlier one came back last,
    /// as with a thread per path): they cannot count as unsent again, so the unused range
    /// is queued to be sent like lost data (its connection credit stays spent: it lies
    /// below the stream's highest offset sent).
    pub fn unlease(&mut self, from: u64, to: u64, fin: bool, before: SendState, sent_nothing: bool) -> bool {
        if self.buf.unsent() != to {
            debug_assert!(!fin, "a lease with the FIN is the stream's last");
            self.buf.on_lost(from..to);
            return false;
        }
        self.buf.unsend(from);
        if fin && self.fin == Fin::Sent {
            self.fin = Fin::Pending;
            if self.state == SendState::DataSent {
                self.state = SendState::Send;
            }
        }
        if sent_nothing && matches!(before, SendState::Ready | SendState::Send) {
            self.state = before;
        }
        true
    }

    /// Records an acknowledgement. Returns true when this completed the stream (all data and
    /// the FIN acknowledged: the state becomes DataRecvd).
    pub fn on_ack(&mut self, offset: u64, len: u64, fin: bool) -> bool {
        if self.reset.is_some() {
            return false;
        }
        self.buf.ack(offset..offset + len);
        if fin {
            self.fin = Fin::Acked;
        }
        if self.fin == Fin::Acked && self.buf.is_fully_acked() && !self.buf.has_unsent() {
            self.state = SendState::DataRecvd;
            return true;
        }
        false
    }

    /// Whether `len` bytes at `offset` (and the FIN, if `fin`) were acknowledged.
    pub fn is_acked(&self, offset: u64, len: u64, fin: bool) -> bool {
        (!fin || self.fin == Fin::Acked) && self.buf.is_acked(offset..offset.saturating_add(len))
    }

    /// Records a loss. Returns true if something must be retransmitted.
    pub fn on_lost(&mut self, offset: u64, len: u64, fin: bool) -> bool {
        if self.reset.is_some() || self.state == SendState::DataRecvd {
            return false;
        }
        self.buf.on_lost(offset..offset + len);
        if fin && self.fin == Fin::Sent {
            self.fin = Fin::Pending;
        }
        self.buf.has_lost() || self.fin == Fin::Pending
    }

    /// True once nothing more will be sent or retransmitted.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, SendState::DataRecvd | SendState::ResetRecvd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::range_set::RangeSet;
    use proptest::prelude::*;

    /// A chunk sent twice (on two paths): the copy is acknowledged and freed, then the
    /// original is declared lost. Nothing is resent and nothing panics.
    #[test]
    fn loss_of_a_range_freed_by_its_copy_is_ignored() {
        let mut b = SendBuffer::new();
        b.write(&[1u8; 3000]);
        assert_eq!(b.next_new(3000), 0..3000);
        b.ack(0..2000);
        b.on_lost(0..1000);
        b.on_lost(500..1500);
        assert!(!b.has_lost());
        b.on_lost(1500..2500);
        assert_eq!(b.next_lost(10_000), Some(2000..2500));
    }

    #[test]
    fn fin_only_and_fin_retransmit() {
        let mut s = SendStream::new(100);
        s.write(b"hello");
        assert_eq!(s.next_new(3, 100), Some(Chunk { offset: 0, len: 3, fin: false }));
        s.finish();
        assert_eq!(s.next_new(10, 100), Some(Chunk { offset: 3, len: 2, fin: true }));
        assert_eq!(s.state(), SendState::DataSent);
        assert!(s.on_lost(3, 2, true));
        assert!(!s.on_ack(0, 3, false));
        let c = s.next_retransmit(10).unwrap();
        assert_eq!(c, Chunk { offset: 3, len: 2, fin: true });
        assert!(s.on_ack(3, 2, true));
        assert!(s.is_closed());

        // FIN without data, lost, resent as a FIN-only chunk.
        let mut s = SendStream::new(0);
        s.finish();
        let c = s.next_new(0, 0).unwrap();
        assert_eq!(c, Chunk { offset: 0, len: 0, fin: true });
        assert!(s.on_lost(0, 0, true));
        assert!(s.has_new(0));
        assert_eq!(s.next_new(10, 0), Some(c));
        assert!(s.on_ack(0, 0, true));
    }

    #[test]
    fn reset_stops_retransmission() {
        let mut s = SendStream::new(100);
        s.write(&[7; 50]);
        let c = s.next_new(20, 100).unwrap();
        assert_eq!(s.reset(9), 30);
        assert_eq!(s.reset_info(), Some((9, 20)));
        assert!(!s.on_lost(c.offset, c.len, false));
        assert!(!s.has_lost() && !s.has_new(100));
        assert_eq!(s.next_new(100, 100), None);
        s.on_reset_acked();
        assert!(s.is_closed());
    }

    proptest! {
        /// Random ack/loss sequences: everything is eventually acknowledged, no acknowledged
        /// byte is sent again, and the bytes transmitted are the bytes written.
        #[test]
        fn send_buffer(
            data in proptest::collection::vec(any::<u8>(), 1..3000),
            writes in proptest::collection::vec(1usize..400, 1..20),
            events in proptest::collection::vec((0u8..3, 1u64..300, any::<prop::sample::Index>()), 1..200),
        ) {
            let mut s = SendStream::new(u64::MAX);
            let mut written = 0;
            let mut wi = 0;
            let mut in_flight: Vec<Chunk> = Vec::new();
            let mut received = vec![None::<u8>; data.len()];
            let mut acked = RangeSet::new();
            let mut fin_acked = false;
            let mut ei = 0;
            let mut steps = 0;
            while !s.is_closed() {
                steps += 1;
                prop_assert!(steps < 100_000);
                if written < data.len() {
                    let n = writes[wi % writes.len()].min(data.len() - written);
                    wi += 1;
                    s.write(&data[written..written + n]);
                    written += n;
                    if written == data.len() { s.finish(); }
                }
                let (mut kind, max_len, pick) = events[ei % events.len()];
                ei += 1;
                // Keep the process live: send when nothing is in flight.
                if in_flight.is_empty() {
                    kind = 0;
                } else if steps > 5_000 && kind == 2 {
                    kind = 1; // eventually the network delivers
                }
                match kind {
                    0 => {
                        let c = s.next_retransmit(max_len).or_else(|| s.next_new(max_len, u64::MAX));
                        if let Some(c) = c {
                            // Nothing acknowledged is sent again.
                            prop_assert_eq!(acked.intersecting(c.offset..c.offset + c.len).count(), 0);
                            prop_assert!(!(c.fin && fin_acked));
                            let mut out = Vec::new();
                            s.buf.copy(c.offset, c.len as usize, &mut out);
                            prop_assert_eq!(&out[..], &data[c.offset as usize..(c.offset + c.len) as usize]);
                            for (i, b) in out.iter().enumerate() { received[c.offset as usize + i] = Some(*b); }
                            in_flight.push(c);
                        }
                    }
                    _ if in_flight.is_empty() => {}
                    1 => {
                        let c = in_flight.swap_remove(pick.index(in_flight.len()));
                        s.on_ack(c.offset, c.len, c.fin);
                        acked.insert(c.offset..c.offset + c.len);
                        fin_acked |= c.fin;
                    }
                    _ => {
                        let c = in_flight.swap_remove(pick.index(in_flight.len()));
                        s.on_lost(c.offset, c.len, c.fin);
                    }
                }
                // Keep the process live: once everything is written and nothing is
                // sendable, declare the oldest in-flight chunk lost.
                if written == data.len() && !s.has_lost() && !s.has_new(u64::MAX) && !s.is_closed() {
                    if let Some(c) = in_flight.first().copied() {
                        in_flight.remove(0);
                        if ei % 2 == 0 { s.on_lost(c.offset, c.len, c.fin); } else {
                            s.on_ack(c.offset, c.len, c.fin);
                            acked.insert(c.offset..c.offset + c.len);
                            fin_acked |= c.fin;
                        }
                    }
                }
            }
            prop_assert!(fin_acked);
            prop_assert_eq!(acked.iter().collect::<Vec<_>>(), vec![0..data.len() as u64]);
            prop_assert_eq!(received.into_iter().map(|b| b.unwrap()).collect::<Vec<_>>(), data);
            prop_assert_eq!(s.buf.unacked_len(), 0);
        }
    }
}
