//! 0-RTT (RFC 9001 §4.6, RFC 9000 §7.4.1, §12.3, §17.2.3): a client that resumes a TLS
//! session whose ticket allows early data sends stream data in 0-RTT packets before the
//! handshake completes, within the limits the server gave it in the connection that issued
//! the ticket; a server whose TLS accepted the early data opens them.
//!
//! 0-RTT packets share the application data packet number space with 1-RTT (RFC 9000
//! §12.3): the client numbers and records them in the data space of its handshake path,
//! path 0 (RFC 10069: still-unacknowledged 0-RTT packets belong to path 0), so the 1-RTT
//! ACKs of an accepting server settle them like any 1-RTT packet. `docs/resumption.md`
//! describes the whole design.

use rustls::quic::DirectionalKeys;

use crate::error::TransportError;
use crate::frame;
use crate::packet::header::{write_long_header, LongType};
use crate::packet::number::encode_pn_len;
use crate::time::Instant;
use crate::transport_params::TransportParameters;
use crate::types::{Level, Side, SpaceId};

use super::recv::{EarlyPacket, Rx};
use super::send::{end_packet, payload_room, Carried, Header, OpenPacket};
use super::space::SentFrames;
use super::Connection;

/// Most 0-RTT packets a server holds while its TLS has not yet read the whole ClientHello
/// (a ClientHello with a post-quantum key share spans two Initial packets, and 0-RTT
/// packets can overtake the second), and their bytes: memory stays bounded whatever a
/// client sends.
const MAX_HELD_PACKETS: usize = 16;
const MAX_HELD_BYTES: usize = 32 * 1024;

/// What became of 0-RTT on this connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZeroRttState {
    /// No 0-RTT: a full handshake, a ticket without early data, early data not enabled in
    /// the TLS configuration, or (server) early data not offered or not accepted.
    #[default]
    NotAttempted,
    /// Client: 0-RTT keys are installed and stream data may go in 0-RTT packets; the
    /// server has not answered yet.
    Pending,
    /// The server accepted the early data: what went in 0-RTT packets is delivered (or
    /// retransmitted in 1-RTT if lost, like any packet).
    Accepted,
    /// Client: the server declined the early data. Everything sent in 0-RTT packets was
    /// treated as lost and is sent again in 1-RTT packets.
    Rejected,
}

impl ZeroRttState {
    /// Its name in logs and reports: "not attempted", "pending", "accepted", "rejected".
    pub fn name(self) -> &'static str {
        match self {
            ZeroRttState::NotAttempted => "not attempted",
            ZeroRttState::Pending => "pending",
            ZeroRttState::Accepted => "accepted",
            ZeroRttState::Rejected => "rejected",
        }
    }
}

/// The connection's 0-RTT state.
#[derive(Default)]
pub(crate) struct ZeroRtt {
    /// Client: the keys that seal 0-RTT packets, until the 1-RTT keys are installed;
    /// server: the keys that open them, until the first 1-RTT packet.
    keys: Option<DirectionalKeys>,
    /// What became of it.
    pub state: ZeroRttState,
    /// Client: the server's transport parameters remembered with the ticket
    /// (RFC 9000 §7.4.1), checked against the new ones when the server accepts.
    remembered: Option<TransportParameters>,
    /// Server: TLS has read the ClientHello, so the keys (or their absence) are final.
    /// (Crate-visible for the tests of the held packets.)
    pub(crate) decided: bool,
    /// Server: 0-RTT packets held until then.
    held: Vec<EarlyPacket>,
    /// Client: nothing is sent while the application writes its early data
    /// ([`Connection::hold_first_flight`]).
    pub(crate) flight_held: bool,
}

impl super::ConnShared {
    /// 0-RTT packets a server holds (tests of the bound).
    #[cfg(test)]
    pub(crate) fn zero_rtt_held(&self) -> usize {
        self.zero_rtt.held.len()
    }
}

impl ZeroRtt {
    /// The keys, while 0-RTT packets may be sealed (client) or opened (server).
    pub(crate) fn keys(&self) -> Option<&DirectionalKeys> {
        self.keys.as_ref()
    }
}

/// The server's limits a client remembers for 0-RTT and an accepting server must not
/// lower (RFC 9000 §7.4.1; max_datagram_frame_size: RFC 9221 §3). initial_max_path_id is
/// not among them: multipath's parameter must not be remembered (RFC 10069 §2.1).
fn remembered_limits(tp: &TransportParameters) -> [(&'static str, u64); 8] {
    [
        ("active_connection_id_limit", tp.active_connection_id_limit),
        ("initial_max_data", tp.initial_max_data),
        ("initial_max_stream_data_bidi_local", tp.initial_max_stream_data_bidi_local),
        ("initial_max_stream_data_bidi_remote", tp.initial_max_stream_data_bidi_remote),
        ("initial_max_stream_data_uni", tp.initial_max_stream_data_uni),
        ("initial_max_streams_bidi", tp.initial_max_streams_bidi),
        ("initial_max_streams_uni", tp.initial_max_streams_uni),
        ("max_datagram_frame_size", tp.max_datagram_frame_size),
    ]
}

/// RFC 9000 §7.4.1: a server that accepts 0-RTT MUST NOT reduce the remembered limits;
/// RFC 9221 §3: a smaller max_datagram_frame_size is a PROTOCOL_VIOLATION. The client
/// treats any reduction as one.
pub(crate) fn check_accepted_limits(
    remembered: &TransportParameters,
    new: &TransportParameters,
) -> Result<(), TransportError> {
    for ((name, old), (_, now)) in remembered_limits(remembered).into_iter().zip(remembered_limits(new)) {
        if now < old {
            return Err(TransportError::protocol_violation(format!(
                "0-RTT accepted but {name} reduced from {old} to {now}"
            )));
        }
    }
    Ok(())
}

impl Connection {
    /// Client: holds the first flight (`true`) or lets it go. While held the connection
    /// sends nothing (it still closes: CONNECTION_CLOSE goes), so an application whose
    /// runtime sends from another thread can open streams and write its early data first,
    /// and the requests leave in 0-RTT packets with the ClientHello; on a short path the
    /// handshake may otherwise complete before they were written. A runtime releases it
    /// at the application's first call that has something to send. Ignored on a server
    /// and once anything was sent.
    pub fn hold_first_flight(&mut self, hold: bool) {
        // (Nothing sent yet: the Initial space has numbered no packet.)
        let untouched =
            || self.shared.side == Side::Client && self.shared.initial.as_ref().is_some_and(|s| s.next_pn == 0);
        self.shared.zero_rtt.flight_held = hold && untouched();
    }

    /// The first flight is held ([`Connection::hold_first_flight`]).
    pub fn first_flight_held(&self) -> bool {
        self.shared.zero_rtt.flight_held
    }

    /// What became of 0-RTT on this connection (see [`ZeroRttState`]).
    pub fn zero_rtt_state(&self) -> ZeroRttState {
        self.shared.zero_rtt.state
    }

    /// Client, right after the ClientHello is written: if TLS offers early data (a ticket
    /// that allows it and `enable_early_data` in the rustls configuration), the 0-RTT keys
    /// are installed and the stream limits remembered with the ticket apply until the
    /// server's own parameters arrive (RFC 9000 §7.4.1).
    pub(crate) fn init_zero_rtt(&mut self) {
        if self.shared.side != Side::Client {
            return;
        }
        let Some(keys) = self.shared.tls.zero_rtt_keys() else { return };
        // No remembered parameters, no limits to send within: no 0-RTT.
        let Some(raw) = self.shared.tls.peer_transport_params() else { return };
        let Ok(tp) = TransportParameters::decode(Side::Server, raw) else { return };
        self.shared.apply_peer_stream_limits(&tp);
        let z = &mut self.shared.zero_rtt;
        z.keys = Some(keys);
        z.remembered = Some(tp);
        z.state = ZeroRttState::Pending;
        tracing::debug!("0-RTT keys installed");
    }

    /// Client, as the server's transport parameters arrive (with the 1-RTT keys): the end
    /// of 0-RTT. RFC 9001 §4.9.3: no 0-RTT packet after the 1-RTT keys, so the keys go. If
    /// the server accepted, its new limits must not be below the remembered ones; if it
    /// declined, every 0-RTT packet is lost and its stream data goes again in 1-RTT
    /// (RFC 9001 §4.6.2, RFC 9002 §6.4 for the bytes in flight).
    pub(crate) fn settle_zero_rtt(&mut self, new: &TransportParameters) -> Result<(), TransportError> {
        let z = &mut self.shared.zero_rtt;
        if self.shared.side != Side::Client || z.state != ZeroRttState::Pending {
            return Ok(());
        }
        z.keys = None;
        if self.shared.tls.is_early_data_accepted() {
            self.shared.zero_rtt.state = ZeroRttState::Accepted;
            if let Some(old) = self.shared.zero_rtt.remembered.take() {
                check_accepted_limits(&old, new)?;
            }
            tracing::debug!("0-RTT accepted");
        } else {
            self.shared.zero_rtt.state = ZeroRttState::Rejected;
            self.shared.zero_rtt.remembered = None;
            // Datagrams queued under the remembered limit that the new one does not allow
            // (RFC 9221 §3: never above the peer's max_datagram_frame_size).
            self.shared.datagrams.drop_above(new.max_datagram_frame_size);
            // (The 1-RTT keys were installed just now and nothing was sealed with them yet:
            // every packet of the data space is a 0-RTT one.)
            self.lose_data_space_packets();
            tracing::debug!("0-RTT rejected: its data goes again in 1-RTT");
        }
        Ok(())
    }

    /// Client: every packet in the data space (before the 1-RTT keys, 0-RTT packets only)
    /// is lost without a congestion signal: it leaves the flight and its frames return to
    /// the send queues. For a declined 0-RTT, and after a Retry (the server kept nothing).
    pub(crate) fn requeue_zero_rtt(&mut self) {
        if self.shared.side != Side::Client || self.shared.one_rtt.is_some() {
            return;
        }
        self.lose_data_space_packets();
    }

    /// Every packet in the primary path's data space leaves the flight without a congestion
    /// signal and its frames are lost: STREAM chunks go back to the send queues, DATAGRAM
    /// frames are counted lost (RFC 9221 §5.2).
    fn lose_data_space_packets(&mut self) {
        let pi = self.primary_path();
        let Some(path) = self.paths.get_mut(pi) else { return };
        let mut freed = 0u64;
        for (_, p) in path.data.loss.discard_all() {
            if p.in_flight {
                freed += u64::from(p.size);
            }
            self.shared.on_frames_lost(SpaceId::Data, p.frames);
        }
        path.bytes_in_flight = path.bytes_in_flight.saturating_sub(freed);
        self.paths.publish(pi);
    }

    /// Server, after TLS has produced its answer to the ClientHello: the 0-RTT keys, if it
    /// accepted early data. Then the 0-RTT packets held so far are opened (or dropped).
    pub(crate) fn note_zero_rtt_decision(&mut self) {
        let z = &mut self.shared.zero_rtt;
        if self.shared.side != Side::Server || z.decided || self.shared.handshake_keys.is_none() {
            return;
        }
        z.decided = true;
        z.keys = self.shared.tls.zero_rtt_keys();
        if z.keys.is_some() {
            z.state = ZeroRttState::Accepted;
            tracing::debug!("0-RTT accepted");
        }
    }

    /// Server: a 0-RTT packet arrived. `true`: open it now (the keys are there). Before TLS
    /// has decided, a bounded number are held; after, without keys, they are dropped.
    pub(super) fn take_zero_rtt(&mut self, rx: &Rx, pkt: &[u8], is_last: bool) -> bool {
        let z = &mut self.shared.zero_rtt;
        if self.shared.side == Side::Server && z.keys.is_some() {
            return true;
        }
        if self.shared.side == Side::Server && !z.decided && !self.shared.handshake_complete {
            let held: usize = z.held.iter().map(|p| p.bytes.len()).sum();
            if z.held.len() < MAX_HELD_PACKETS && held + pkt.len() <= MAX_HELD_BYTES {
                // (Its datagram counts for the amplification limit when it is opened.)
                z.held.push(EarlyPacket { rx: *rx, bytes: pkt.to_vec(), is_last });
                return false;
            }
        }
        // RFC 9000 §12.2 / RFC 9001 §4.6.2: a client never accepts 0-RTT; a server that
        // declined it drops the packets.
        self.shared.stats.dropped_packets += 1;
        false
    }

    /// Server: the 0-RTT packets held until TLS decided, once it has.
    pub(super) fn take_held_zero_rtt(&mut self) -> Vec<EarlyPacket> {
        if !self.shared.zero_rtt.decided {
            return Vec::new();
        }
        std::mem::take(&mut self.shared.zero_rtt.held)
    }

    /// Server: the first 1-RTT packet arrived. RFC 9001 §4.9.3 lets the server discard the
    /// 0-RTT keys then: a 0-RTT packet still on its way is lost to the client's recovery,
    /// which sends its data again in 1-RTT.
    pub(super) fn on_one_rtt_received(&mut self) {
        if self.shared.side == Side::Server {
            self.shared.zero_rtt.keys = None;
        }
    }

    /// Client in 0-RTT (keys installed, no 1-RTT keys yet): the server's
    /// max_datagram_frame_size remembered with the ticket (0: no DATAGRAM frames). RFC 9221
    /// §3 lets a client that stored it send DATAGRAM frames in 0-RTT packets. `None`
    /// outside 0-RTT.
    pub(crate) fn zero_rtt_datagram_limit(&self) -> Option<u64> {
        let z = &self.shared.zero_rtt;
        let in_zero_rtt = self.shared.side == Side::Client
            && z.state == ZeroRttState::Pending
            && z.keys.is_some()
            && self.shared.one_rtt.is_none();
        in_zero_rtt.then(|| z.remembered.as_ref().map_or(0, |tp| tp.max_datagram_frame_size))
    }

    /// Bytes a 0-RTT packet adds to its frames: the long header (RFC 9000 §17.2: first
    /// byte, version, both CIDs with their lengths, a 2-byte Length, a packet number of up
    /// to 4 bytes) and the AEAD tag.
    pub(crate) fn zero_rtt_overhead(&self) -> usize {
        let dcid = self.shared.peer_cids.get(&0).map_or(crate::cid::MAX_CID_LEN, |p| p.current().cid.len());
        1 + 4 + 1 + dcid + 1 + self.shared.long_header_scid().len() + 2 + 4 + 16
    }

    /// Client: stream data or datagrams wait and 0-RTT packets may carry them on path `pi`
    /// now. (Only path 0 exists in 0-RTT, so every queued datagram is for it.)
    pub(super) fn zero_rtt_wants_send(&self, pi: usize, cwnd_ok: bool, allow_data: bool) -> bool {
        self.shared.side == Side::Client
            && self.shared.one_rtt.is_none()
            && self.shared.zero_rtt.keys.is_some()
            && pi == self.primary_path()
            && cwnd_ok
            && allow_data
            && (self.shared.streams.has_stream_data() || !self.shared.datagrams.send_is_empty())
    }

    /// Client: a 0-RTT packet on path `pi` would carry something within `room` bytes (the
    /// rest of the datagram being built). When it would not (the next datagram is larger,
    /// say), the packet before it stays the datagram's last, so an Initial is still padded
    /// to 1200 bytes (RFC 9000 §14.1), and the 0-RTT packet goes in the next datagram.
    pub(super) fn zero_rtt_fits(&self, pi: usize, room: usize) -> bool {
        let Some(payload) = room.checked_sub(self.zero_rtt_overhead()) else { return false };
        let path_id = self.paths.get(pi).map_or(0, |p| p.id);
        (self.shared.streams.has_stream_data() && payload > frame::MAX_STREAM_HEADER_LEN)
            || self.shared.datagrams.next_frame_len(path_id, true).is_some_and(|len| len <= payload)
    }

    /// Client: writes a 0-RTT packet (RFC 9000 §17.2.3) of datagrams and stream data on
    /// path `pi`, its number from the path's data space, ending before `max_end`; `None` if
    /// nothing fit. Only DATAGRAM (RFC 9221 §4 allows them in 0-RTT) and STREAM frames go in
    /// it: flow control and stream control frames wait for 1-RTT, and ACK, CRYPTO and the
    /// frames §12.4 reserves for 1-RTT never go in 0-RTT.
    pub(super) fn write_0rtt_packet(&mut self, pi: usize, buf: &mut Vec<u8>, max_end: usize) -> Option<OpenPacket> {
        let dcid = self.shared.peer_cids.get(&0)?.current().cid;
        let scid = self.shared.long_header_scid();
        let path = self.paths.get(pi)?;
        let (path_id, mtu, space) = (path.id, path.mtu, &path.data);
        let pn = space.next_pn;
        let pn_len = encode_pn_len(pn, space.loss.largest_acked());
        let header_start = buf.len();
        let o = write_long_header(buf, LongType::ZeroRtt, self.shared.version.current, &dcid, &scid, &[], pn, pn_len);
        let header = Header {
            level: Level::ZeroRtt,
            header_start,
            pn_offset: o.pn_offset,
            pn_len,
            pn,
            len_offset: Some(o.len_offset),
        };
        let payload_end = payload_room(buf, &header, max_end)?;
        let mut frames = SentFrames::default();
        let mut eliciting = false;
        // Datagrams first: they were queued to go now, and stream data can wait for the
        // next packet. The frame limit is the path's packet (the remembered
        // max_datagram_frame_size was checked when each was queued).
        let max_frame = super::datagram::max_frame_for_mtu(mtu);
        while let Some(d) =
            self.shared.datagrams.take_for(path_id, true, payload_end.saturating_sub(buf.len()), max_frame)
        {
            frame::encode_datagram_header(buf, Some(d.len()));
            buf.extend_from_slice(&d);
            frames.push_datagram(path_id);
            self.shared.datagrams.on_sent(path_id, d.len(), true);
            eliciting = true;
        }
        while payload_end.saturating_sub(buf.len()) > frame::MAX_STREAM_HEADER_LEN {
            let max = payload_end - buf.len() - frame::MAX_STREAM_HEADER_LEN;
            let Some(chunk) = self.shared.streams.next_stream_chunk(max) else { break };
            frame::encode_stream_header(buf, chunk.id, chunk.offset, Some(chunk.len), chunk.fin);
            self.shared.streams.copy_stream_data(chunk.id, chunk.offset, chunk.len, buf);
            frames.stream.push(chunk);
            eliciting = true;
        }
        let space = &mut self.paths.get_mut(pi)?.data;
        end_packet(buf, header, (frames, Carried::new()), eliciting, false, payload_end, space, false)
    }

    /// The 0-RTT packets of the current batch of datagrams that a server held until its
    /// TLS decided, processed now.
    pub(super) fn process_held_zero_rtt(&mut self, now: Instant) {
        for mut p in self.take_held_zero_rtt() {
            let opts = self.shared.parse_options();
            let Ok(parsed) = crate::packet::header::parse_packet_with(&p.bytes, self.shared.local_cid_len, opts) else {
                continue;
            };
            self.handle_packet(now, &p.rx, &parsed, &mut p.bytes, p.is_last);
            if self.shared.state == super::State::Drained {
                return;
            }
        }
    }
}
