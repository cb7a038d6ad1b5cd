//! A path's own frames in a receive batch (issue C1): while it opens a packet, the path
//! walks its frames and handles those that concern only itself, without the connection's
//! shared state: its own ACK or PATH_ACK (loss detection, RTT, congestion control, through
//! [`PathState::on_path_ack`]), PATH_CHALLENGE (its answer is queued on the path), PING and
//! PADDING. What that leaves for the shared side, the acknowledged and lost packets' frames,
//! travels with the opened packet as [`PacketFates`] and is applied in packet and frame
//! order, where the ACK frame stands, so the shared state sees the same sequence as before.
//!
//! The walk stops at the first frame it cannot vouch for (a malformed frame, an ACK that
//! fails, a CONNECTION_CLOSE): the shared side handles that frame and everything after it
//! the general way, so errors and their frame types are exactly the general path's.

use std::ops::Range;

use bytes::Bytes;
use smallvec::SmallVec;

use crate::coding::Reader;
use crate::frame::{frame_type as ft, AckFrame, Frame, StreamFrame};
use crate::stream::{Backing, BufferSlice};
use crate::time::Instant;
use crate::types::StreamId;

use super::board::Seat;
use super::path::PathState;
use super::path_ack::{AckParams, PacketFates};

/// Most PATH_RESPONSE payloads a path keeps waiting (newest win).
pub(crate) const MAX_PENDING_PATH_RESPONSES: usize = 4;

/// What a path did with the frames of one packet it opened.
#[derive(Debug, Default)]
pub(crate) struct OwnFrames {
    /// Bytes of the payload walked: the path's own frames before this offset are handled
    /// (their fates below, in order); the frame here and all after it are not.
    pub walked: usize,
    /// Every frame of the packet was the path's own and handled: the shared side has only
    /// the fates to apply and the packet to record.
    pub only_own: bool,
    /// A frame walked is ack-eliciting (meaningful with `only_own`).
    pub ack_eliciting: bool,
    /// The fates of the own ACK frames walked, in frame order.
    pub fates: SmallVec<[PacketFates; 1]>,
    /// Every frame was walked and is the path's own, PADDING, PING or STREAM: the shared
    /// side applies `items` in order and parses nothing again.
    pub fast: bool,
    /// With `fast`: the frames the shared side applies, in frame order.
    pub items: SmallVec<[Walked; 1]>,
    /// The path recorded the packet for acknowledgement while opening it (with `fast`).
    pub recorded: bool,
}

/// A frame of a packet walked by its path that the shared side applies.
#[derive(Debug)]
pub(crate) enum Walked {
    /// One of the path's own ACK frames: the next entry of [`OwnFrames::fates`].
    Fates,
    /// A STREAM frame.
    Stream(WalkedStream),
}

/// A STREAM frame walked by its path.
#[derive(Debug)]
pub(crate) struct WalkedStream {
    /// The frame's type byte (for errors).
    pub ty: u8,
    /// Stream ID.
    pub id: StreamId,
    /// Offset of its first byte.
    pub offset: u64,
    /// The last byte of the stream.
    pub fin: bool,
    /// Where the data lies in the packet's payload.
    pub range: Range<usize>,
    /// Where the path copied the data in its run's buffers when it opened the packet
    /// (`recv_arena.rs`).
    pub in_run: Option<super::recv_arena::InRun>,
    /// The data in that buffer, once the run has ended ([`OwnFrames::attach_run`]).
    pub data: Option<BufferSlice>,
}

impl OwnFrames {
    /// The run this packet was opened in ended with `bufs` as its buffers: the STREAM frames
    /// whose data the path copied there get their slices of them.
    pub(crate) fn attach_run(&mut self, bufs: &[(Bytes, Backing)]) {
        for item in &mut self.items {
            if let Walked::Stream(s) = item {
                if let Some(at) = s.in_run.take() {
                    s.data = super::recv_arena::RecvArena::slice(bufs, at);
                    debug_assert!(s.data.is_some(), "a frame's data outside its run's buffers");
                }
            }
        }
    }
}

impl PathState {
    /// Queues the answer to a PATH_CHALLENGE that arrived on this path from its own address
    /// (RFC 9000 §8.2.2), keeping the newest few.
    pub(crate) fn queue_path_response(&mut self, data: [u8; 8]) {
        if self.path_responses.len() >= MAX_PENDING_PATH_RESPONSES {
            self.path_responses.remove(0);
        }
        self.path_responses.push(data);
    }

    /// True if an ACK frame naming `acked` (None: a plain ACK, path 0 with multipath,
    /// RFC 10069 §2.3) is this path's own.
    pub(crate) fn owns_ack(&self, acked: Option<u64>, multipath: bool) -> bool {
        if self.data.single.is_some() {
            // One packet number space for all paths: every ACK frame is every path's, which
            // the connection hands to each (`Host::on_single_space_ack`).
            return false;
        }
        match acked {
            None => self.id == 0 || !multipath,
            Some(id) => multipath && id == self.id,
        }
    }

    /// Walks the frames of a 1-RTT packet this path opened in a receive batch (the path is
    /// validated and the packet came from its address) and handles its own ones.
    pub(crate) fn walk_own_frames(
        &mut self,
        now: Instant,
        payload: &[u8],
        params: &AckParams,
        multipath: bool,
        seat: &mut Seat,
    ) -> OwnFrames {
        let mut own = OwnFrames { only_own: !payload.is_empty(), fast: !payload.is_empty(), ..Default::default() };
        let mut r = Reader::new(payload);
        let stopped_at = loop {
            let at = r.position();
            let Some(&byte) = r.peek_rest().first() else { break None };
            if StreamFrame::is_stream_type(byte) {
                let _ = r.u8();
                let Ok(f) = StreamFrame::decode(u64::from(byte), &mut r) else {
                    break Some(at);
                };
                own.only_own = false;
                own.ack_eliciting = true;
                if own.fast {
                    let end = r.position();
                    own.items.push(Walked::Stream(WalkedStream {
                        ty: byte,
                        id: f.id,
                        offset: f.offset,
                        fin: f.fin,
                        range: end - f.data.len()..end,
                        in_run: None,
                        data: None,
                    }));
                }
                continue;
            }
            match u64::from(byte) {
                ft::PADDING => {
                    let n = r.peek_rest().iter().take_while(|b| **b == 0).count();
                    let _ = r.bytes(n);
                }
                ft::PING => {
                    let _ = r.u8();
                    own.ack_eliciting = true;
                }
                ty @ (ft::ACK | ft::ACK_ECN | ft::PATH_ACK | ft::PATH_ACK_ECN) => {
                    let _ = r.u8();
                    let path = matches!(ty, ft::PATH_ACK | ft::PATH_ACK_ECN);
                    let Ok(ack) = AckFrame::decode(&mut r, path, matches!(ty, ft::ACK_ECN | ft::PATH_ACK_ECN)) else {
                        break Some(at);
                    };
                    if !self.owns_ack(ack.path_id, multipath) {
                        own.only_own = false;
                        own.fast = false;
                        continue;
                    }
                    match self.on_path_ack(now, &ack, params, seat) {
                        Ok(f) => {
                            own.fates.push(f);
                            own.items.push(Walked::Fates);
                        }
                        // Nothing changed; the shared side meets the frame again and closes.
                        Err(_) => break Some(at),
                    }
                }
                ft::CONNECTION_CLOSE | ft::APPLICATION_CLOSE => break Some(at),
                _ => match Frame::decode(&mut r) {
                    Ok(Frame::PathChallenge(data)) => {
                        own.ack_eliciting = true;
                        self.queue_path_response(data);
                    }
                    Ok(f) => {
                        own.ack_eliciting |= f.is_ack_eliciting();
                        own.only_own = false;
                        own.fast = false;
                    }
                    Err(_) => break Some(at),
                },
            }
        };
        match stopped_at {
            Some(at) => {
                own.walked = at;
                own.only_own = false;
                own.fast = false;
            }
            None => own.walked = payload.len(),
        }
        if !own.fast {
            own.items.clear();
        }
        own
    }
}
