//! INSECURE hooks for the fuzz targets (cargo feature `fuzzing`, off by default).
//!
//! The state-machine fuzz targets inject packets of their own into a handshaken connection
//! pair. Sealing them under the real 1-RTT keys would need the TLS secrets; instead both
//! sides switch to the null cipher ([`crate::crypto::null`]) once the handshake is over, so a
//! target writes a short-header packet as plain bytes plus a zero tag. To keep the pair
//! consistent, a forged packet takes its packet number from the connection it impersonates
//! ([`Connection::fuzz_forge_slot`]): the peer's ACK of it is then an ACK of a packet that
//! connection "sent", not a protocol violation.

use std::net::SocketAddr;

use super::space::SentFrames;
use super::Connection;
use crate::cid::ConnectionId;
use crate::crypto::key_update::OneRttKeys;
use crate::recovery::sent::SentPacket;
use crate::time::Instant;

/// Where and how a fuzz target forges a 1-RTT packet as if this connection sent it.
#[derive(Debug, Clone, Copy)]
pub struct ForgeSlot {
    /// The DCID this connection currently sends to on the path.
    pub dcid: ConnectionId,
    /// A packet number this connection reserved (and recorded as sent) for the forgery.
    pub pn: u64,
    /// The path's local address (`None`: the runtime's default socket).
    pub local: Option<SocketAddr>,
    /// The path's peer address.
    pub remote: SocketAddr,
    /// The Key Phase bit this connection currently sends.
    pub key_phase: bool,
    /// The path ID that enters the nonce (RFC 10069 §2.4): the path's, or 0 (the plain
    /// nonce) with one packet number space for all paths.
    pub nonce_path_id: u64,
}

impl Connection {
    /// INSECURE, fuzzing only: replaces the 1-RTT keys (every generation, both directions)
    /// with the null cipher, in phase 0. Call it on both sides of a pair at the same moment,
    /// with no 1-RTT packet in flight, or those packets fail to open.
    pub fn insecure_use_null_one_rtt_keys(&mut self) {
        if self.shared.one_rtt.is_some() {
            self.shared.one_rtt = Some(OneRttKeys::new_insecure_null());
            self.shared.packets_in_phase = 0;
            self.shared.key_discard_at = None;
            self.shared.key_discard_pending = false;
            self.shared.phase_acked_at = None;
            // A PING each way, so that both sides acknowledge a packet of the new keys' phase
            // as after a real handshake: only then is a peer's key update legal (RFC 9001 §6.2).
            self.shared.ping_pending = true;
        }
    }

    /// Fuzzing only: makes a key update due, as if `key_update_interval` packets were sent in
    /// this phase; the next packet sent starts it where RFC 9001 §6.1 allows.
    pub fn fuzz_key_update_due(&mut self) {
        self.shared.packets_in_phase = self.shared.packets_in_phase.max(self.shared.config.key_update_interval.max(1));
    }

    /// Fuzzing only: IDs of the paths with state (open, closing or draining), in table order.
    pub fn fuzz_path_ids(&self) -> Vec<u64> {
        self.paths.iter().map(|p| p.id).collect()
    }

    /// Fuzzing only: reserves the next packet number of path `path_id` for a packet a fuzz
    /// target forges in this connection's name. The number is recorded as sent (no frames to
    /// retransmit, not ack-eliciting, not in flight) so that the peer may acknowledge it.
    /// `None` if the path or 1-RTT keys are missing.
    pub fn fuzz_forge_slot(&mut self, now: Instant, path_id: u64) -> Option<ForgeSlot> {
        let key_phase = self.shared.one_rtt.as_ref()?.key_phase();
        let dcid = self.shared.peer_cids.get(&path_id).filter(|c| c.has_cid())?.current().cid;
        let pi = self.path_index(path_id)?;
        let path = &mut self.paths[pi];
        let pn = path.data.take_pn();
        let sent = SentPacket {
            time_sent: now,
            size: 0,
            ack_eliciting: false,
            in_flight: false,
            ecn: false,
            pmtu_probe: false,
            frames: SentFrames::default(),
        };
        path.data.loss.on_packet_sent(pn, sent);
        let nonce_path_id = if path.data.single.is_some() { 0 } else { path_id };
        Some(ForgeSlot { dcid, pn, local: path.local, remote: path.remote, key_phase, nonce_path_id })
    }

    /// Fuzzing only: bytes held in receive buffers (stream reassembly and the 1-RTT CRYPTO
    /// stream) and entries in per-path tables, for memory invariants.
    pub fn fuzz_footprint(&self) -> Footprint {
        Footprint {
            paths: self.paths.len(),
            peer_cid_paths: self.shared.peer_cids.len(),
            local_cid_paths: self.shared.local_cids.len(),
            local_cids: self.shared.local_cids.values().map(|l| l.active.len()).sum(),
            peer_cids: self.shared.peer_cids.values().map(|p| p.active.len() + p.to_retire.len()).sum(),
            events: self.shared.events.len(),
            closed_paths: self.shared.closed_paths.len(),
        }
    }
}

/// Sizes of a connection's peer-driven tables (see [`Connection::fuzz_footprint`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Paths with state.
    pub paths: usize,
    /// Path IDs with a table of peer-issued CIDs.
    pub peer_cid_paths: usize,
    /// Path IDs with a table of CIDs we issued.
    pub local_cid_paths: usize,
    /// CIDs we issued and did not see retired.
    pub local_cids: usize,
    /// Peer-issued CIDs held or queued for retirement.
    pub peer_cids: usize,
    /// Undelivered application events.
    pub events: usize,
    /// Statistics of closed paths kept.
    pub closed_paths: usize,
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use crate::conn::{ClientConfig, ServerConfig, TransportConfig};
    use crate::crypto::{null_header_key, null_packet_key};
    use crate::packet::header::write_short_header;
    use crate::packet::protect::seal_packet;
    use crate::testing::Pair;
    use crate::types::Dir;

    pub(crate) fn null_pair() -> Pair {
        null_pair_with(false)
    }

    /// A null-cipher pair with two paths, sharing one packet number space if `single`.
    fn null_pair_with(single: bool) -> Pair {
        let transport = TransportConfig {
            initial_max_path_id: Some(4),
            single_packet_number_space: single,
            ..TransportConfig::default()
        };
        let (cc, sc): (ClientConfig, ServerConfig) = crate::testing::configs(transport);
        Pair::handshaken_null(&cc, sc, 1).expect("handshake")
    }

    /// Forges a 1-RTT packet in the client's name on its `index`-th path, delivers it.
    pub(crate) fn forge_to_server(pair: &mut Pair, index: usize, flip_phase: bool, frames: &[u8]) {
        let now = pair.now;
        let h = pair.client_conn;
        let conn = pair.client.connection_mut(h).expect("client");
        let path = conn.fuzz_path_ids()[index];
        let slot = conn.fuzz_forge_slot(now, path).expect("slot");
        let mut pkt = Vec::new();
        let pn_offset = write_short_header(&mut pkt, &slot.dcid, slot.key_phase ^ flip_phase, false, slot.pn, 4);
        pkt.extend_from_slice(frames);
        let (key, hp) = (null_packet_key(), null_header_key());
        let nonce = Some(slot.nonce_path_id as u32);
        seal_packet(&mut pkt, 0, None, pn_offset, 4, slot.pn, &*key, &*hp, nonce).expect("seal");
        let src = slot.local.unwrap_or(pair.client_addr);
        pair.inject(true, src, slot.remote, &mut pkt);
    }

    /// The fuzz targets' premise: packets forged on the null cipher with a reserved packet
    /// number are accepted on every path, a flipped Key Phase bit is a key update, and the
    /// pair carries on without error (the ACKs of forged packets are legal).
    #[test]
    fn forged_null_packets_are_accepted_on_every_path() {
        forged_null_packets_are_accepted_on_every_path_with(null_pair());
    }

    /// The same with one packet number space for all paths (the fuzz target's second half).
    #[test]
    fn forged_null_packets_are_accepted_on_every_path_of_one_space() {
        let pair = null_pair_with(true);
        let h = pair.client_conn;
        let slot_nonce = |pair: &mut Pair| {
            let now = pair.now;
            let c = pair.client.connection_mut(h).expect("client");
            let id = c.fuzz_path_ids()[1];
            c.fuzz_forge_slot(now, id).expect("slot").nonce_path_id
        };
        let mut pair = pair;
        assert_eq!(slot_nonce(&mut pair), 0, "the plain nonce on path 1");
        forged_null_packets_are_accepted_on_every_path_with(pair);
    }

    fn forged_null_packets_are_accepted_on_every_path_with(mut pair: Pair) {
        let h = pair.client_conn;
        assert_eq!(pair.client.connection(h).expect("client").fuzz_path_ids().len(), 2, "second path");
        // STREAM frame (type 0x0b: length, fin) on stream 0, then on stream 4 over path 1.
        forge_to_server(&mut pair, 0, false, &[0x0b, 0x00, 0x05, b'h', b'e', b'l', b'l', b'o']);
        forge_to_server(&mut pair, 1, false, &[0x0b, 0x04, 0x02, b'h', b'i']);
        let sh = pair.server.handles()[0];
        let server = pair.server.connection_mut(sh).expect("server");
        let mut got = Vec::new();
        while let Some(id) = server.accept_stream(Dir::Bi) {
            let mut buf = [0u8; 16];
            let r = server.read(id, &mut buf).expect("read");
            got.push(buf[..r.len].to_vec());
        }
        assert_eq!(got, vec![b"hello".to_vec(), b"hi".to_vec()]);
        let updates = server.stats().key_updates;
        // The peer may update only after we acknowledged a packet of the current phase
        // (RFC 9001 §6.2): let the ACKs of the null-key packets flow first.
        pair.run_until(Duration::from_millis(300), |_| false);
        forge_to_server(&mut pair, 0, true, &[0x01]); // PING in the next key phase
        let server = pair.server.connection_mut(sh).expect("server");
        assert_eq!(server.stats().key_updates, updates + 1);
        // The real client follows the server into the new phase (as the server initiating).
        pair.run_until(Duration::from_millis(300), |_| false);
        let client = pair.client.connection_mut(h).expect("client");
        assert!(client.error().is_none(), "{:?}", client.error());
        assert_eq!(client.stats().key_updates, 1);
        // And updates again by itself when one is due.
        client.fuzz_key_update_due();
        // It waits three PTOs after the last update (RFC 10069 §2.5), then goes with the
        // next packet sent: keep sending.
        pair.run_until(Duration::from_secs(2), |p| {
            let c = p.client.connection_mut(h).expect("client");
            if let Some(id) = c.open_stream(Dir::Uni) {
                let _ = c.write(id, b"tick");
                let _ = c.finish(id);
            }
            c.stats().key_updates >= 2
        });
        pair.run_until(Duration::from_millis(300), |_| false);
        let server = pair.server.connection(sh).expect("server");
        assert!(server.error().is_none(), "{:?}", server.error());
        let client = pair.client.connection(h).expect("client");
        assert!(client.error().is_none() && client.is_established(), "{:?}", client.error());
        assert_eq!(client.stats().key_updates, 2);
        assert_eq!(server.stats().key_updates, updates + 2);
    }
}
