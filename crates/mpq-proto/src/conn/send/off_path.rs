//! Packets to an address a path does not use: the PATH_CHALLENGE to a peer's previous
//! address after an apparent migration (RFC 9000 §9.3.3), and the PATH_RESPONSE to a
//! probing packet from another address (§8.2.2: it goes back where the challenge came
//! from; §9.3: the probe does not move the path). Each goes in a packet of its own.

use std::net::SocketAddr;

use crate::cid::ConnectionId;

use crate::frame::Frame;
use crate::time::Instant;
use crate::types::SpaceId;

use super::super::Transmit;
use super::{pad_for_sample, Connection, OpenPacket, SentFrames, TAG_LEN};

impl Connection {
    /// A datagram to an address other than its path's, if one is pending. These packets
    /// are kept out of congestion control, loss recovery and the path's amplification
    /// budget (not counted in flight): the path's own address is not where they go.
    pub(super) fn poll_off_path(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        // A client validating the server's preferred address (RFC 9000 §9.6.1): from the
        // path's local address, with the preferred_address's connection ID, expanded to 1200
        // bytes (§8.2.1).
        if let Some((pi, remote, cid, data)) = self.take_preferred_probe(now) {
            let local = self.paths[pi].local;
            let frame = Frame::PathChallenge(data);
            let t = self.write_off_path(now, buf, pi, frame, (remote, local, Some(cid)), crate::MIN_INITIAL_SIZE);
            if t.is_some() {
                return t;
            }
        }
        for pi in 0..self.paths.slot_bound() {
            if !self.paths.get(pi).is_some_and(|p| p.is_open()) {
                continue;
            }
            if let Some(old) = self.paths[pi].old_challenge.filter(|c| c.send_pending) {
                if let Some(c) = self.paths[pi].old_challenge.as_mut() {
                    c.send_pending = false;
                }
                let t =
                    self.write_off_path(now, buf, pi, Frame::PathChallenge(old.data), (old.remote, old.local, None), 0);
                if t.is_some() {
                    return t;
                }
            }
            while !self.paths[pi].off_path_responses.is_empty() {
                let r = self.paths[pi].off_path_responses.remove(0);
                // RFC 9000 §8.2.1: expanded to 1200 bytes, unless the unvalidated address's
                // amplification limit forbids.
                let pad_to = r.budget.min(crate::MIN_INITIAL_SIZE);
                let to = (r.remote, Some(r.local), None);
                let t = self.write_off_path(now, buf, pi, Frame::PathResponse(r.data), to, pad_to);
                if t.as_ref().is_some_and(|t| t.size <= r.budget) {
                    return t;
                }
                buf.clear();
            }
        }
        None
    }

    /// One packet of path `pi` holding `frame`, padded to `pad_to` bytes, to `remote` from
    /// `local`, with the destination connection ID `dcid` if given (else the path's).
    fn write_off_path(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        pi: usize,
        frame: Frame<'_>,
        (remote, local, dcid): (SocketAddr, Option<SocketAddr>, Option<ConnectionId>),
        pad_to: usize,
    ) -> Option<Transmit> {
        buf.clear();
        let mut header = self.write_header(SpaceId::Data, pi, buf)?;
        if let Some(cid) = dcid {
            // A short header is the first byte, the DCID and the packet number (RFC 9000
            // §17.3.1): the DCID is swapped in place.
            let pn = buf[header.pn_offset..].to_vec();
            buf.truncate(header.header_start + 1);
            buf.extend_from_slice(&cid);
            header.pn_offset = buf.len();
            buf.extend_from_slice(&pn);
        }
        self.space_mut(SpaceId::Data, pi)?.take_pn();
        frame.encode(buf);
        pad_for_sample(buf, &header);
        if buf.len() + TAG_LEN < pad_to {
            buf.resize(pad_to - TAG_LEN, 0);
        }
        let open = OpenPacket {
            header,
            frames: SentFrames::default(),
            ack_eliciting: false,
            padded: false,
            probing_path: true,
            pmtu_probe: false,
            carried: Default::default(),
        };
        let amp_sent = self.paths[pi].amp_sent;
        self.seal(now, buf, open, pi);
        self.paths[pi].amp_sent = amp_sent;
        self.paths.publish(pi);
        if buf.is_empty() {
            return None;
        }
        Some(Transmit {
            destination: remote,
            source: local,
            path_id: self.paths[pi].id,
            size: buf.len(),
            segment_size: None,
            ecn: None,
        })
    }
}
