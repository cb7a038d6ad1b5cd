//! The PATH_CHALLENGE to a peer's previous address after an apparent migration
//! (RFC 9000 §9.3.3). It goes in a packet of its own, to an address other than the path's.

use crate::frame::Frame;
use crate::time::Instant;
use crate::types::SpaceId;

use super::super::Transmit;
use super::{pad_for_sample, Connection, OpenPacket, SentFrames};

impl Connection {
    /// A datagram with the pending old-path challenge of some path, if any. The packet is
    /// kept out of congestion control and loss recovery (not counted in flight): the old
    /// address is usually gone after a NAT rebinding, and its loss says nothing about the
    /// path's new address.
    pub(super) fn poll_old_path_challenge(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let pi = self.paths.iter().position(|p| p.is_open() && p.old_challenge.is_some_and(|c| c.send_pending))?;
        let old = self.paths[pi].old_challenge?;
        if let Some(c) = self.paths[pi].old_challenge.as_mut() {
            c.send_pending = false;
        }
        let header = self.write_header(SpaceId::Data, pi, buf)?;
        self.space_mut(SpaceId::Data, pi)?.take_pn();
        Frame::PathChallenge(old.data).encode(buf);
        pad_for_sample(buf, &header);
        let open = OpenPacket {
            header,
            frames: SentFrames::default(),
            ack_eliciting: false,
            padded: false,
            probing_path: true,
        };
        let amp_sent = self.paths[pi].amp_sent;
        self.seal(now, buf, open, pi);
        // The old address was validated: this datagram is no part of what the new, not yet
        // validated address may receive (RFC 9000 §8.1).
        self.paths[pi].amp_sent = amp_sent;
        if buf.is_empty() {
            return None;
        }
        Some(Transmit {
            destination: old.remote,
            source: old.local,
            path_id: self.paths[pi].id,
            size: buf.len(),
            segment_size: None,
            ecn: None,
        })
    }
}
