//! Sending in the closing state: CONNECTION_CLOSE at every level we have keys for, on a
//! path that can still be addressed (RFC 9000 §10.2, RFC 10069 §2.6).

use crate::frame::{self, Frame};
use crate::time::Instant;
use crate::types::{Level, Side, SpaceId};

use super::super::{CloseFrame, Connection, State, Transmit};
use super::{pad_for_sample, OpenPacket, SentFrames, MIN_PACKET_ROOM};

impl Connection {
    /// In the closing state: one datagram with CONNECTION_CLOSE at every level we have
    /// keys for, each time a packet arrives (RFC 9000 §10.2.1, §10.2.3).
    pub(super) fn poll_close(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let State::Closing { close, send_pending, .. } = &mut self.shared.state else { return None };
        if !*send_pending {
            return None;
        }
        *send_pending = false;
        let close = close.clone();
        // CONNECTION_CLOSE may go on any open path (RFC 10069 §2.6).
        let pi = self.close_path()?;
        let limit = (usize::from(self.paths[pi].mtu) as u64).min(self.paths[pi].amplification_budget()) as usize;
        let mut open: Option<OpenPacket> = None;
        for space_id in [SpaceId::Initial, SpaceId::Handshake, SpaceId::Data] {
            if !self.has_keys(space_id)
                || (space_id == SpaceId::Data && !self.shared.handshake_complete && self.shared.side == Side::Client)
            {
                continue;
            }
            if limit.saturating_sub(buf.len()) < MIN_PACKET_ROOM + close.reason.len() {
                break;
            }
            if let Some(p) = open.take() {
                self.seal(now, buf, p, pi);
            }
            open = self.write_close_packet(space_id, pi, buf, &close);
        }
        if let Some(p) = open {
            self.seal(now, buf, p, pi);
        }
        if buf.is_empty() {
            return None;
        }
        Some(Transmit {
            destination: self.paths[pi].remote,
            source: self.paths[pi].local,
            path_id: self.paths[pi].id,
            size: buf.len(),
            segment_size: None,
            ecn: None,
        })
    }

    /// The path CONNECTION_CLOSE goes on: the primary one if it can be addressed, else
    /// any open one that can; `None` if no path is left.
    pub(super) fn close_path(&self) -> Option<usize> {
        let addressable =
            |i: usize| self.paths.get(i).and_then(|p| self.shared.peer_cids.get(&p.id)).is_some_and(|c| c.has_cid());
        let primary = self.primary_path();
        self.paths.get(primary)?;
        if addressable(primary) {
            return Some(primary);
        }
        Some(self.paths.enumerate().find(|&(i, p)| p.is_open() && addressable(i)).map_or(primary, |(i, _)| i))
    }

    pub(super) fn write_close_packet(
        &mut self,
        space_id: SpaceId,
        pi: usize,
        buf: &mut Vec<u8>,
        close: &CloseFrame,
    ) -> Option<OpenPacket> {
        let header = self.write_header(space_id, pi, buf)?;
        self.space_mut(space_id, pi)?.take_pn();
        // RFC 9000 §10.2.3: an application close cannot be sent in Initial or Handshake
        // packets; it becomes APPLICATION_ERROR without a reason there.
        let f = match (header.level, close.frame_type) {
            (Level::OneRtt, _) | (_, Some(_)) => frame::ConnectionClose {
                error_code: close.error_code,
                frame_type: close.frame_type,
                reason: &close.reason,
            },
            _ => frame::ConnectionClose {
                error_code: crate::error::TransportErrorCode::APPLICATION_ERROR.0,
                frame_type: Some(0),
                reason: &[],
            },
        };
        Frame::ConnectionClose(f).encode(buf);
        pad_for_sample(buf, &header);
        Some(OpenPacket {
            header,
            frames: SentFrames::default(),
            ack_eliciting: false,
            padded: false,
            probing_path: false,
            pmtu_probe: false,
            carried: Default::default(),
        })
    }
}
