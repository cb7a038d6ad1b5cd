//! One packet number space: the packet numbers we send, what we received (ACK state),
//! loss detection over what we sent, and the CRYPTO stream of the matching level.

use std::ops::Range;

use smallvec::SmallVec;

use crate::error::{TransportError, TransportErrorCode};
use crate::frame::Frame;
use crate::range_set::RangeSet;
use crate::recovery::loss::LossDetection;
use crate::recovery::received::ReceivedPackets;
use crate::stream::{RecvBuffer, StreamChunk};

/// Most CRYPTO bytes we buffer out of order at one level (RFC 9000 §7.5: at least 4096).
const MAX_CRYPTO_BUFFER: u64 = 64 * 1024;

/// What a sent packet carried that needs action when it is acknowledged or lost.
///
/// Kept small and allocation-free for the common case (one STREAM chunk or one ACK per
/// packet): every sent packet's record is moved into the ledger and out of it again, so its
/// size is paid per packet. CRYPTO ranges and control frames, rare after the handshake, sit
/// behind one pointer.
#[derive(Debug, Default)]
pub(crate) struct SentFrames {
    /// STREAM chunks.
    pub stream: SmallVec<[StreamChunk; 1]>,
    /// How many of the first chunks of `stream` are copies of data first sent in another
    /// packet (reinjection, redundant scheduling): their acknowledgement says whether they
    /// arrived first (`conn/send/copy_feedback.rs`).
    pub copies: u16,
    /// ACK / PATH_ACK frames in this packet: (path ID of the acknowledged packets, their
    /// Largest Acknowledged), for ack-of-ack pruning. Initial and Handshake use path 0.
    pub acks: SmallVec<[(u64, u64); 1]>,
    /// CRYPTO ranges and control frames, if any.
    rare: Option<Box<RareFrames>>,
}

/// The rarely present part of [`SentFrames`].
#[derive(Debug, Default)]
pub(crate) struct RareFrames {
    /// CRYPTO ranges at this packet's level.
    pub crypto: Vec<Range<u64>>,
    /// Retransmittable control frames.
    pub control: Vec<Control>,
    /// DATAGRAM frames (RFC 9221), never retransmitted: the path that sent them and how
    /// many, counted acknowledged or lost.
    pub datagrams: Option<(u64, u32)>,
}

impl SentFrames {
    /// The packet carries something of the application's or the connection's (STREAM,
    /// CRYPTO, control or DATAGRAM frames), not just ACKs and a PING.
    pub fn carries_data(&self) -> bool {
        !self.stream.is_empty() || self.rare.is_some()
    }

    /// Records a CRYPTO range sent in the packet.
    pub fn push_crypto(&mut self, r: Range<u64>) {
        self.rare.get_or_insert_with(Box::default).crypto.push(r);
    }

    /// Records a control frame sent in the packet.
    pub fn push_control(&mut self, c: Control) {
        self.rare.get_or_insert_with(Box::default).control.push(c);
    }

    /// Records a copy of a STREAM chunk first sent in another packet (before any chunk
    /// sent for the first time or retransmitted in this packet).
    pub fn push_copy(&mut self, chunk: StreamChunk) {
        debug_assert_eq!(self.stream.len(), usize::from(self.copies), "copies come first");
        self.stream.push(chunk);
        self.copies = self.copies.saturating_add(1);
    }

    /// Records a DATAGRAM frame sent in the packet on path `path_id`.
    pub fn push_datagram(&mut self, path_id: u64) {
        let d = &mut self.rare.get_or_insert_with(Box::default).datagrams;
        d.get_or_insert((path_id, 0)).1 += 1;
    }

    /// The DATAGRAM frames sent in the packet: (path ID, count).
    pub fn datagrams(&self) -> Option<(u64, u32)> {
        self.rare.as_ref().and_then(|r| r.datagrams)
    }

    /// The CRYPTO ranges sent in the packet.
    pub fn crypto(&self) -> &[Range<u64>] {
        self.rare.as_ref().map_or(&[], |r| &r.crypto)
    }

    /// The control frames sent in the packet (tests: qlog reads a packet's frames from its
    /// bytes).
    #[cfg(test)]
    pub fn control(&self) -> &[Control] {
        self.rare.as_ref().map_or(&[], |r| &r.control)
    }

    /// Adds the CRYPTO ranges and control frames of `other` (connection-wide frames leased
    /// for a batch, written into one of its packets).
    pub fn append(&mut self, other: &mut SentFrames) {
        let Some(theirs) = other.rare.take() else { return };
        let mine = self.rare.get_or_insert_with(Box::default);
        mine.crypto.extend(theirs.crypto);
        mine.control.extend(theirs.control);
        debug_assert!(theirs.datagrams.is_none(), "datagrams are never leased");
    }

    /// Takes the control frames out (to return them to their queues).
    pub fn take_control(&mut self) -> Vec<Control> {
        self.rare.as_mut().map(|r| std::mem::take(&mut r.control)).unwrap_or_default()
    }
}

/// Retransmittable control frames other than stream data.
#[derive(Debug, Clone)]
pub(crate) enum Control {
    /// Flow control, stream limits, resets and stop-sending, owned by the stream layer
    /// (from [`crate::stream::Streams::poll_control`]).
    Stream(Frame<'static>),
    /// HANDSHAKE_DONE (server).
    HandshakeDone,
    /// NEW_TOKEN (server); a fresh token is sealed if it must be sent again.
    NewToken,
    /// (PATH_)NEW_CONNECTION_ID: path ID and sequence number.
    NewCid(u64, u64),
    /// (PATH_)RETIRE_CONNECTION_ID: path ID and sequence number.
    RetireCid(u64, u64),
    /// PATH_ABANDON: path ID and error code.
    PathAbandon(u64, u64),
    /// PATH_STATUS_BACKUP / PATH_STATUS_AVAILABLE for this path ID, with this sequence number.
    PathStatus(u64, u64),
    /// MAX_PATH_ID with this value.
    MaxPathId(u64),
}

/// Sender and receiver state of the CRYPTO stream at one encryption level.
#[derive(Debug, Default)]
pub(crate) struct CryptoStream {
    /// Every byte written at this level (handshake flights are small, kept until discarded).
    send_buf: Vec<u8>,
    /// Offset of the next byte never sent.
    sent: u64,
    /// Ranges acknowledged by the peer.
    acked: RangeSet,
    /// Ranges to retransmit.
    lost: RangeSet,
    /// Received data not yet delivered to TLS. Its pages hold each offset once, however
    /// the peer cuts and repeats the data, so what it holds is bounded by the offset limit
    /// (spoofed Initials at offsets 1, 2, 3... once made one connection hold 22 MB).
    recv: RecvBuffer,
}

impl CryptoStream {
    /// Queues handshake bytes for sending.
    pub fn write(&mut self, data: &[u8]) {
        self.send_buf.extend_from_slice(data);
    }

    /// True when there is data to (re)send.
    pub fn has_pending(&self) -> bool {
        !self.lost.is_empty() || self.sent < self.send_buf.len() as u64
    }

    /// Returns the next range to send, at most `max_len` bytes: retransmissions first.
    pub fn next_range(&mut self, max_len: usize) -> Option<Range<u64>> {
        if max_len == 0 {
            return None;
        }
        if let Some(r) = self.lost.first() {
            let end = r.end.min(r.start + max_len as u64);
            self.lost.remove(r.start..end);
            return Some(r.start..end);
        }
        let total = self.send_buf.len() as u64;
        if self.sent < total {
            let end = total.min(self.sent + max_len as u64);
            let r = self.sent..end;
            self.sent = end;
            return Some(r);
        }
        None
    }

    /// Bytes of a range previously returned by `next_range`.
    pub fn data(&self, r: &Range<u64>) -> &[u8] {
        &self.send_buf[r.start as usize..r.end as usize]
    }

    /// A range was acknowledged.
    pub fn on_acked(&mut self, r: &Range<u64>) {
        self.acked.insert(r.clone());
        self.lost.remove(r.clone());
    }

    /// A range was lost: resend whatever of it was not acknowledged since.
    pub fn on_lost(&mut self, r: &Range<u64>) {
        self.lost.insert(r.clone());
        for a in self.acked.intersecting(r.clone()).collect::<SmallVec<[Range<u64>; 4]>>() {
            self.lost.remove(a);
        }
    }

    /// Some byte sent at this level is not acknowledged yet (in flight, or lost and
    /// waiting to be sent again).
    pub fn has_unacked(&self) -> bool {
        let sent = 0..self.sent;
        !sent.is_empty() && (self.acked.len() != 1 || self.acked.first() != Some(sent))
    }

    /// PTO fired: queue every unacknowledged byte for retransmission.
    pub fn retransmit_unacked(&mut self) {
        let sent = 0..self.sent;
        if sent.is_empty() {
            return;
        }
        self.on_lost(&sent);
    }

    /// Bytes written, and bytes received in order (tests).
    #[cfg(test)]
    pub fn offsets(&self) -> (u64, u64) {
        (self.send_buf.len() as u64, self.recv.read_offset())
    }

    /// True when every byte written has been acknowledged.
    #[cfg(test)]
    pub fn all_acked(&self) -> bool {
        let total = self.send_buf.len() as u64;
        total == 0 || (self.acked.len() == 1 && self.acked.first() == Some(0..total))
    }

    /// Stores received CRYPTO data (RFC 9000 §7.5); returns `CRYPTO_BUFFER_EXCEEDED` when
    /// the peer runs too far ahead of what TLS has consumed. Every offset is held once
    /// (overlaps and repeats are merged), so at most `MAX_CRYPTO_BUFFER` bytes are held.
    pub fn on_recv(&mut self, offset: u64, data: &[u8]) -> Result<(), TransportError> {
        let end = offset.saturating_add(data.len() as u64);
        let delivered = self.recv.read_offset();
        if end <= delivered {
            return Ok(()); // duplicate
        }
        if end - delivered > MAX_CRYPTO_BUFFER {
            return Err(TransportError::new(
                TransportErrorCode::CRYPTO_BUFFER_EXCEEDED,
                "too much out-of-order CRYPTO data",
            ));
        }
        self.recv.insert(offset, data);
        Ok(())
    }

    /// Bytes of received CRYPTO data held (not yet delivered to TLS).
    #[cfg(test)]
    pub fn recv_buffered(&self) -> usize {
        self.recv.buffered()
    }

    /// Takes the next contiguous received bytes, if any.
    pub fn take_contiguous(&mut self) -> Option<Vec<u8>> {
        let n = self.recv.readable();
        if n == 0 {
            return None;
        }
        let mut out = vec![0u8; n];
        self.recv.read(&mut out);
        Some(out)
    }
}

/// State of one packet number space.
#[derive(Debug)]
pub(crate) struct PacketSpace {
    /// Next packet number to send.
    pub next_pn: u64,
    /// Received packet numbers and ACK timing.
    pub received: ReceivedPackets,
    /// Sent packets awaiting acknowledgement, loss detection.
    pub loss: LossDetection<SentFrames>,
    /// CRYPTO stream at this space's level.
    pub crypto: CryptoStream,
    /// Probe packets to send because a PTO fired (they ignore the congestion window).
    pub probes: u8,
    /// Packets in this space were received since the last ACK we sent.
    pub ack_pending: bool,
    /// Path IDs whose packets already carried the pending ACK (multipath ACK placement can
    /// put one ACK on several paths).
    pub ack_carried_on: SmallVec<[u64; 4]>,
    /// Counts the packets recorded for acknowledgement: the version of the pending ACK that
    /// other paths carry (`conn/mail.rs`).
    pub ack_version: u64,
    /// The connection's packet number counter when one space serves all paths
    /// (`TransportConfig::single_packet_number_space`, negotiated); `None`: this space
    /// numbers its own packets.
    pub single: Option<SingleSpace>,
    /// `next_pn` was drawn from the single space's counter for a packet not sent yet.
    pn_reserved: bool,
}

/// The packet number counter one packet number space shares with the connection's other
/// paths (the single-space experiment): atomic, so that paths on different threads never
/// draw the same number, which would reuse an AEAD nonce (all paths seal with the plain
/// nonce then). A number drawn for a packet that is never sent is skipped, which QUIC
/// allows (RFC 9000 §12.3 only asks for increasing numbers).
pub(crate) type SingleSpace = std::sync::Arc<std::sync::atomic::AtomicU64>;

impl PacketSpace {
    /// A fresh space.
    pub fn new(ack_eliciting_threshold: u64) -> Self {
        let mut received = ReceivedPackets::new();
        received.set_ack_eliciting_threshold(ack_eliciting_threshold);
        Self {
            next_pn: 0,
            received,
            loss: LossDetection::new(),
            crypto: CryptoStream::default(),
            probes: 0,
            ack_pending: false,
            ack_carried_on: SmallVec::new(),
            ack_version: 0,
            single: None,
            pn_reserved: false,
        }
    }

    /// A packet was recorded in `received`: an ACK is pending, a new version of it that no
    /// path carried yet.
    pub fn on_packet_recorded(&mut self) {
        self.ack_pending = true;
        self.ack_carried_on.clear();
        self.ack_version += 1;
    }

    /// The number the next packet will take: `next_pn`, or, sharing one space with other
    /// paths, a number reserved from the shared counter (kept until taken).
    pub fn peek_pn(&mut self) -> u64 {
        if let Some(counter) = &self.single {
            if !self.pn_reserved {
                let drawn = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // Our numbers came from the counter too (`join_single_space` moved it past
                // the ones before), so they still increase; a number of our own instead of
                // the drawn one could be another path's too.
                debug_assert!(drawn >= self.next_pn, "the shared counter fell behind a path");
                self.next_pn = drawn;
                self.pn_reserved = true;
            }
        }
        self.next_pn
    }

    /// Takes the next packet number.
    pub fn take_pn(&mut self) -> u64 {
        let pn = self.peek_pn();
        self.pn_reserved = false;
        self.next_pn += 1;
        pn
    }

    /// From now on this space shares `counter` with the connection's other paths.
    pub fn join_single_space(&mut self, counter: SingleSpace) {
        counter.fetch_max(self.next_pn, std::sync::atomic::Ordering::Relaxed);
        self.single = Some(counter);
        self.pn_reserved = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crypto_reassembly_in_any_order() {
        let mut c = CryptoStream::default();
        c.on_recv(5, b"world").unwrap();
        assert!(c.take_contiguous().is_none());
        c.on_recv(0, b"hello").unwrap();
        c.on_recv(3, b"lowor").unwrap();
        assert_eq!(c.take_contiguous().unwrap(), b"helloworld");
        c.on_recv(0, b"hello").unwrap();
        assert!(c.take_contiguous().is_none());
    }

    #[test]
    fn crypto_buffer_is_bounded() {
        let mut c = CryptoStream::default();
        let e = c.on_recv(MAX_CRYPTO_BUFFER, b"x").unwrap_err();
        assert_eq!(e.code, TransportErrorCode::CRYPTO_BUFFER_EXCEEDED);
    }

    /// Spoofed or hostile CRYPTO frames at offsets 1, 2, 3... each nearly a packet long, and
    /// many repeats: the data held stays within the limit, in pages, not one copy per frame
    /// (the old store kept the longest chunk per offset: 20,000 chunks, 22 MB).
    #[test]
    fn crypto_overlapping_frames_hold_each_byte_once() {
        let mut c = CryptoStream::default();
        let data = vec![0x5a; 1100];
        for off in 1..20_000u64 {
            let off = off % (MAX_CRYPTO_BUFFER - 1100);
            c.on_recv(off.max(1), &data).unwrap();
            assert!(c.recv_buffered() as u64 <= MAX_CRYPTO_BUFFER);
        }
        assert!(c.recv.memory() as u64 <= MAX_CRYPTO_BUFFER * 5 / 4, "memory {}", c.recv.memory());
        assert!(c.take_contiguous().is_none(), "byte 0 is missing");
        // Beyond the limit: CRYPTO_BUFFER_EXCEEDED, even by a few bytes.
        let e = c.on_recv(MAX_CRYPTO_BUFFER - 2, b"abc").unwrap_err();
        assert_eq!(e.code, TransportErrorCode::CRYPTO_BUFFER_EXCEEDED);
        c.on_recv(0, b"\x5a").unwrap();
        // Frames at offsets 1..20_000, 1100 bytes each: bytes 0..21_099 come out, once.
        assert_eq!(c.take_contiguous().map(|v| v.len()), Some(21_099));
        assert_eq!(c.recv_buffered(), 0);
    }

    #[test]
    fn crypto_send_retransmits_lost_unacked_only() {
        let mut c = CryptoStream::default();
        c.write(&[7u8; 100]);
        let a = c.next_range(60).unwrap();
        let b = c.next_range(60).unwrap();
        assert_eq!((a.clone(), b.clone()), (0..60, 60..100));
        c.on_acked(&(0..30));
        c.on_lost(&a);
        assert_eq!(c.next_range(1000), Some(30..60));
        c.on_acked(&b);
        c.on_acked(&(30..60));
        assert!(c.all_acked());
        assert!(!c.has_pending());
    }
}

#[cfg(test)]
mod sent_frames_tests {
    use super::*;

    /// A sent packet's record is moved per packet (into the ledger, out of it): it must
    /// stay small. CRYPTO and control frames live behind one pointer. (80 bytes: smallvec's
    /// `union` feature keeps the two inline vectors without an enum tag each, 88 before the
    /// count of copies was added.)
    #[test]
    fn sent_packet_records_stay_small() {
        assert!(std::mem::size_of::<SentFrames>() <= 80, "{}", std::mem::size_of::<SentFrames>());
        let mut f = SentFrames::default();
        assert!(f.crypto().is_empty() && f.control().is_empty());
        f.push_crypto(0..10);
        f.push_control(Control::HandshakeDone);
        assert_eq!((f.crypto().len(), f.crypto().first()), (1, Some(&(0..10))));
        assert!(matches!(f.control(), [Control::HandshakeDone]));
        assert!(matches!(f.take_control()[..], [Control::HandshakeDone]));
        assert!(f.control().is_empty() && f.crypto().len() == 1);
    }
}
