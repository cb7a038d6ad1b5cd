//! A path's PMTU probe (RFC 9000 §14.4, RFC 8899 §4.1): one 1-RTT packet holding a PING
//! and PADDING up to the probe size, sent on that path only. It is path-local (no frame of
//! the shared side), so a batch built alone writes it like one built with the host.

use crate::frame::Frame;
use crate::time::Instant;

use super::super::path::PathState;
use super::super::space::SentFrames;
use super::path_packet::BatchWritten;
use super::side::BatchSide;
use super::{end_packet, payload_room, Carried, TAG_LEN};

impl PathState {
    /// Writes the PMTU probe due on this path, if any, as the batch's only datagram.
    /// Returns true when the batch is over (a probe went out, or sealing must close the
    /// connection).
    pub(super) fn write_pmtu_probe(
        &mut self,
        side: &mut BatchSide<'_, '_>,
        now: Instant,
        buf: &mut Vec<u8>,
        out: &mut BatchWritten,
    ) -> bool {
        if side.host_ref().is_some_and(|h| h.shared.one_rtt.is_none() || !h.shared.handshake_confirmed) {
            return false;
        }
        let Some(size) = self.pmtu_probe_due(now) else { return false };
        let dg_start = buf.len();
        let Some(header) = self.write_1rtt_header(side, buf) else { return false };
        let Some(payload_end) = payload_room(buf, &header, dg_start + usize::from(size)) else { return false };
        // RFC 9000 §14.4: a probe is ack-eliciting (PING) and padded (PADDING frames are
        // zero bytes) to the size being probed; it carries nothing that would need to be
        // sent again if it is lost.
        Frame::Ping.encode(buf);
        buf.resize(payload_end, 0);
        let Some(mut p) = end_packet(
            buf,
            header,
            (SentFrames::default(), Carried::new()),
            true,
            false,
            payload_end,
            &mut self.data,
            false,
        ) else {
            return false;
        };
        p.padded = true;
        p.pmtu_probe = true;
        debug_assert_eq!(buf.len() + TAG_LEN - dg_start, usize::from(size));
        let after = self.seal_1rtt(side, now, buf, p);
        let written = buf.len() - dg_start;
        if written > 0 {
            out.count = 1;
            out.segment_size = Some(written);
        }
        if after.close.is_some() {
            out.close = after.close;
        }
        out.done = written > 0 || out.close.is_some();
        out.done
    }
}
