//! The ACK frame of a connection that uses one packet number space for all paths (the
//! single-space experiment, `conn/single_space.rs`): it reports what arrived on every path.

use std::time::Duration;

use smallvec::SmallVec;

use crate::frame;
use crate::time::Instant;

use super::super::mail::AckCarried;
use super::super::path::PathState;
use super::super::space::SentFrames;
use super::lease::AckSlots;
use super::side::BatchSide;

impl PathState {
    /// Writes the ACK frame this packet owes with one packet number space for all paths.
    ///
    /// It goes out when the packet would have carried an ACK with a space per path (`placed`:
    /// this path's own pending ACK, or another path's under the ACK policy), and reports the
    /// union of every path's received numbers (this path's and the others' ACK offers, which
    /// every path publishes while the mode is on), as one ACK frame, the highest ranges
    /// first up to the range limit (seed 003's receiver). It counts as sent for each path
    /// whose pending ACK it stands for; the others learn by mail, as for a carried PATH_ACK.
    /// No ECN counts: they are per path, and a single space has one set for all of them.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_single_space_ack(
        &mut self,
        side: &mut BatchSide<'_, '_>,
        now: Instant,
        buf: &mut Vec<u8>,
        payload_end: usize,
        send_data: bool,
        frames: &mut SentFrames,
        carried: &mut super::Carried,
        placed: &AckSlots,
    ) {
        let (exponent, max_ack_delay, max_ranges) =
            (side.cfg().ack_delay_exponent, side.cfg().max_ack_delay, side.cfg().max_ack_ranges);
        let (carrier, my_slot) = (self.id, side.slot());
        let own_due = self.data.ack_pending
            && !self.data.ack_carried_on.contains(&carrier)
            && (self.own_ack_due(now, max_ack_delay) || send_data);
        let own = placed.iter().find(|(j, _)| *j == my_slot).map(|(_, ids)| ids.clone()).filter(|_| own_due);
        // Which pending ACKs this packet carries, decided before any range is copied: most
        // packets owe none.
        let mut others: SmallVec<[(usize, AckCarried); 4]> = SmallVec::new();
        if let Some(host) = side.host_ref() {
            for (j, ids) in placed.iter().filter(|(j, _)| *j != my_slot) {
                let Some(offer) = host.board.offer(*j) else { continue };
                if offer.pending && !self.carried_offer(offer) && (offer.due(now, max_ack_delay) || send_data) {
                    let notice = AckCarried {
                        owner: offer.path_id,
                        carrier,
                        version: offer.version,
                        at: now,
                        carriers: ids.clone(),
                        largest: offer.ranges.max(),
                    };
                    others.push((*j, notice));
                }
            }
        }
        if own.is_none() && others.is_empty() {
            return;
        }
        // The frame reports what every path received: ours and every other path's offer.
        let mut ranges = self.data.received.ranges().clone();
        let mut largest = self.data.received.largest();
        if let Some(host) = side.host_ref() {
            for (j, _) in host.board.iter().filter(|&(j, _)| j != my_slot) {
                let Some(offer) = host.board.offer(j) else { continue };
                for r in offer.ranges.iter() {
                    ranges.insert(r);
                }
                if offer.largest.map(|(pn, _)| pn) > largest.map(|(pn, _)| pn) {
                    largest = offer.largest;
                }
            }
        }
        let delay = largest.map_or(Duration::ZERO, |(_, t)| now - t).as_micros() as u64 >> exponent;
        let room = payload_end.saturating_sub(buf.len());
        let Some(n) = frame::encode_ack_bounded(buf, None, &ranges, delay, None, room, max_ranges) else { return };
        self.stats.acks_sent += 1;
        self.stats.ack_ranges_sent += n as u64;
        if let Some(ids) = own {
            self.on_own_ack_written(now, &ids, frames);
            self.publish_own_offer(side);
        }
        for (j, notice) in others {
            if let Some(l) = notice.largest {
                frames.acks.push((notice.owner, l));
            }
            carried.push((j, notice));
        }
    }
}
