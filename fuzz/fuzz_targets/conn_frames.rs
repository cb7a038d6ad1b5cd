//! A handshaken client/server pair (multipath negotiated, two paths, null 1-RTT cipher) gets
//! arbitrary frame sequences in 1-RTT packets forged in either side's name, on any of its
//! paths (or to any CID the receiver issued, on unknown path IDs), from the path's address
//! or a new one, with the Key Phase bit as sent or flipped, under each ACK placement policy,
//! with a packet number space per path or one for all paths (seed 003's experiment); interleaved with application
//! writes, datagrams (RFC 9221: advertised under two of the three ACK policies, pinned to a
//! path or placed by the scheduler), path opening / abandoning, key updates and the passing of time. After each input the
//! pair runs until it is quiet (at most 3 s of virtual time). Invariants: no panic, bytes in flight within the congestion window,
//! bounded per-path tables and bounded heap growth.
#![no_main]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mpq_fuzz::{live_bytes, null_one_rtt_packet, packetize, CountingAlloc, FuzzFrame};
use mpq_proto::conn::{AckPolicy, ClientConfig, Connection, DatagramConfig, PathStatus, ServerConfig, TransportConfig};
use mpq_proto::endpoint::{ConnectionHandle, Endpoint};
use mpq_proto::stream::StreamsConfig;
use mpq_proto::testing::Pair;
use mpq_proto::{ConnectionId, Dir, StreamId};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Forged payload bytes per input, all ops together (keeps one run short).
const FORGE_BUDGET: usize = 1 << 20;
/// Application bytes written per input.
const WRITE_BUDGET: usize = 512 * 1024;
/// Heap growth allowed over the freshly handshaken pair. The receive windows are 256 KiB per
/// connection (64 KiB per stream), CRYPTO buffering is 64 KiB: a sound implementation stays
/// far below this whatever the peer sends.
const HEAP_LIMIT: usize = 8 << 20;

#[derive(Arbitrary, Debug)]
enum Src {
    /// The address of the path the packet is forged on.
    Path,
    /// Another address (NAT rebinding, migration, or a spoofer).
    Other(u8),
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// Frames in packets forged in the name of the client (`to_server`) or the server, on
    /// its `path`-th path, with its packet numbers.
    Forge { to_server: bool, path: u8, flip_phase: bool, spin: bool, src: Src, frames: Vec<FuzzFrame> },
    /// Frames in a packet to the `cid`-th CID the receiver issued (any path ID, opened or
    /// not), with a packet number of the fuzzer's choosing.
    ForgeToCid { to_server: bool, cid: u8, pn: u32, path_id: u8, flip_phase: bool, frames: Vec<FuzzFrame> },
    /// Arbitrary bytes as a datagram.
    Raw { to_server: bool, data: Vec<u8> },
    /// Let the pair run for a while.
    Run { ms: u16 },
    /// Application data on the `stream`-th stream this side opened (opened on demand).
    Write { client: bool, stream: u8, uni: bool, len: u16, fin: bool },
    /// The client opens a path from a new address.
    OpenPath { addr: u8, backup: bool },
    /// Either side abandons one of its paths.
    AbandonPath { client: bool, path: u8, code: u16 },
    /// Either side changes a path's status.
    SetStatus { client: bool, path: u8, backup: bool },
    /// Either side starts a key update with its next packet (where RFC 9001 §6.1 allows).
    KeyUpdate { client: bool },
    /// Either side queues `count` datagrams (RFC 9221) of `len` bytes, pinned to its
    /// `path`-th path or placed by the scheduler.
    Datagrams { client: bool, path: Option<u8>, len: u16, count: u8 },
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// Where both sides place their PATH_ACKs (same path, lowest RTT, all paths): the last
    /// two carry ACKs for other paths, through their ACK offers and mail; from 3 on, the
    /// same with one packet number space for all paths.
    ack_policy: u8,
    ops: Vec<Op>,
}

/// The pair's configurations for ACK policy `policy % 3`, with one packet number space for
/// all paths when `policy % 6 >= 3`.
fn configs(policy: u8) -> &'static (ClientConfig, ServerConfig) {
    static C: [OnceLock<(ClientConfig, ServerConfig)>; 6] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let which = usize::from(policy % 6);
    let (policy, single) = (which % 3, which >= 3);
    C[which].get_or_init(|| {
        let (c, s) = mpq_proto::testing::tls_configs(mpq_proto::testing::TEST_ALPN);
        let mut c = (*c).clone();
        // Every input starts from a full handshake: no resumption across inputs.
        c.resumption = rustls::client::Resumption::disabled();
        let transport = Arc::new(TransportConfig {
            initial_max_path_id: Some(4),
            streams: StreamsConfig {
                stream_receive_window: 64 * 1024,
                receive_window: 256 * 1024,
                max_stream_window: 64 * 1024,
                max_connection_window: 256 * 1024,
                ..StreamsConfig::default()
            },
            ack_policy: [AckPolicy::SamePath, AckPolicy::LowestRtt, AckPolicy::AllPaths][policy],
            single_packet_number_space: single,
            // DATAGRAM (RFC 9221) advertised under two of the policies (frames up to 1200
            // bytes; forged ones above that, or any under the first policy, are violations).
            datagrams: if policy == 0 {
                DatagramConfig::default()
            } else {
                DatagramConfig { max_frame_size: 1200, ..DatagramConfig::enabled() }
            },
            ..TransportConfig::default()
        });
        (ClientConfig { tls: Arc::new(c), transport: transport.clone() }, ServerConfig { tls: s, transport })
    })
}

struct Harness {
    pair: Pair,
    server_conn: ConnectionHandle,
    streams: [Vec<StreamId>; 2],
    accepted: [Vec<StreamId>; 2],
    forged: usize,
    written: usize,
    scratch: Vec<u8>,
    /// Largest congestion window and PTO count seen per (client?, path ID).
    cc_seen: HashMap<(bool, u64), (u64, u64)>,
}

impl Harness {
    fn endpoint(&mut self, client: bool) -> (&mut Endpoint, ConnectionHandle) {
        if client {
            (&mut self.pair.client, self.pair.client_conn)
        } else {
            (&mut self.pair.server, self.server_conn)
        }
    }

    fn conn(&mut self, client: bool) -> Option<&mut Connection> {
        let (ep, h) = self.endpoint(client);
        ep.connection_mut(h)
    }

    fn default_addr(&self, client: bool) -> SocketAddr {
        if client {
            self.pair.client_addr
        } else {
            self.pair.server_addr
        }
    }

    fn deliver(&mut self, to_server: bool, src: SocketAddr, dst: SocketAddr, mut pkt: Vec<u8>) {
        self.pair.inject(to_server, src, dst, &mut pkt);
    }

    fn forge(&mut self, to_server: bool, path: u8, flip: bool, spin: bool, src: &Src, frames: &[FuzzFrame]) {
        let sender = to_server; // the client forges towards the server
        let budget = FORGE_BUDGET.saturating_sub(self.forged);
        let payloads = packetize(frames, 1150, budget);
        let now = self.pair.now;
        let default_src = self.default_addr(sender);
        // The packets of one op arrive together, in one receive batch (as a GRO batch).
        let mut batch: Vec<Vec<u8>> = Vec::new();
        let mut batch_addrs = None;
        for payload in payloads {
            self.forged += payload.len();
            let Some(conn) = self.conn(sender) else { return };
            let ids = conn.fuzz_path_ids();
            if ids.is_empty() {
                return;
            }
            let pid = ids[usize::from(path) % ids.len()];
            let Some(slot) = conn.fuzz_forge_slot(now, pid) else { return };
            let from = match src {
                Src::Path => slot.local.unwrap_or(default_src),
                Src::Other(n) => SocketAddr::from(([10, 0, 2 + u8::from(!sender), *n], 5000 + u16::from(*n))),
            };
            let dst = slot.remote;
            let pkt = null_one_rtt_packet(&slot.dcid, slot.key_phase ^ flip, spin, slot.pn, slot.nonce_path_id, &payload);
            if batch_addrs.is_some_and(|a| a != (from, dst)) {
                self.flush_batch(to_server, batch_addrs, &mut batch);
            }
            batch_addrs = Some((from, dst));
            batch.push(pkt);
        }
        self.flush_batch(to_server, batch_addrs, &mut batch);
    }

    fn flush_batch(&mut self, to_server: bool, addrs: Option<(SocketAddr, SocketAddr)>, batch: &mut Vec<Vec<u8>>) {
        if let Some((src, dst)) = addrs.filter(|_| !batch.is_empty()) {
            self.pair.inject_batch(to_server, src, dst, batch);
        }
        batch.clear();
    }

    fn forge_to_cid(&mut self, to_server: bool, cid: u8, pn: u32, path_id: u8, flip: bool, frames: &[FuzzFrame]) {
        let receiver = !to_server;
        let Some(conn) = self.conn(receiver) else { return };
        let cids: Vec<ConnectionId> = conn.local_cids().collect();
        if cids.is_empty() {
            return;
        }
        let dcid = cids[usize::from(cid) % cids.len()];
        let budget = FORGE_BUDGET.saturating_sub(self.forged);
        let src = self.default_addr(to_server);
        let dst = self.default_addr(!to_server);
        for (i, payload) in packetize(frames, 1150, budget).into_iter().enumerate() {
            self.forged += payload.len();
            let pkt = null_one_rtt_packet(&dcid, flip, false, u64::from(pn) + i as u64, u64::from(path_id), &payload);
            self.deliver(to_server, src, dst, pkt);
        }
    }

    fn write(&mut self, client: bool, stream: u8, uni: bool, len: u16, fin: bool) {
        let side = usize::from(!client);
        let len = usize::from(len).min(WRITE_BUDGET.saturating_sub(self.written));
        self.written += len;
        let idx = usize::from(stream);
        let id = if idx < self.streams[side].len() {
            self.streams[side][idx]
        } else {
            let dir = if uni { Dir::Uni } else { Dir::Bi };
            let Some(conn) = self.conn(client) else { return };
            let Some(id) = conn.open_stream(dir) else { return };
            self.streams[side].push(id);
            id
        };
        let data = vec![0x5a; len];
        let Some(conn) = self.conn(client) else { return };
        let _ = conn.write(id, &data);
        if fin {
            let _ = conn.finish(id);
        }
    }

    /// What an application does between inputs: drain events, accept and read streams.
    fn app_step(&mut self) {
        while self.pair.client.poll_event().is_some() {}
        while self.pair.server.poll_event().is_some() {}
        let mut scratch = std::mem::take(&mut self.scratch);
        for client in [true, false] {
            let side = usize::from(!client);
            let (ep, h) = if client {
                (&mut self.pair.client, self.pair.client_conn)
            } else {
                (&mut self.pair.server, self.server_conn)
            };
            let Some(conn) = ep.connection_mut(h) else { continue };
            // The client reads its datagrams; the server never does (its receive queue
            // stays within its bounds).
            while client && conn.recv_datagram().is_some() {}
            let mut new = Vec::new();
            for dir in [Dir::Bi, Dir::Uni] {
                while let Some(id) = conn.accept_stream(dir) {
                    new.push(id);
                }
            }
            for &id in self.accepted[side].iter().chain(&new) {
                while let Ok(r) = conn.read(id, &mut scratch) {
                    if r.len == 0 {
                        break;
                    }
                }
            }
            self.accepted[side].extend(new);
        }
        self.scratch = scratch;
    }

    /// Steps the pair until `dur` of virtual time passed or `max_steps` steps ran; with
    /// `until_quiet`, stops early once the link is empty and neither side has a packet in
    /// flight (everything sent was acknowledged or declared lost).
    fn run(&mut self, dur: Duration, max_steps: usize, until_quiet: bool) {
        let deadline = self.pair.now + dur;
        for _ in 0..max_steps {
            self.app_step();
            if !self.pair.step(deadline) {
                break;
            }
            self.check();
            if until_quiet && self.quiet() {
                break;
            }
        }
        self.app_step();
    }

    /// Nothing on the link and nothing in flight on any path of either side.
    fn quiet(&mut self) -> bool {
        if self.pair.in_flight_len() != 0 {
            return false;
        }
        [true, false]
            .into_iter()
            .all(|client| self.conn(client).is_none_or(|c| c.stats().paths.iter().all(|p| p.bytes_in_flight == 0)))
    }

    fn check(&mut self) {
        for client in [true, false] {
            let Some(conn) = self.conn(client) else { continue };
            let fp = conn.fuzz_footprint();
            // Bounded per-path state whatever the peer sends (RFC 10069
            // §2.1: path IDs up to our initial_max_path_id, which is 4 here; closed paths
            // linger for 3 PTOs, §3.4).
            assert!(fp.paths <= 16, "{client}: {fp:?}");
            assert!(fp.local_cid_paths <= 64 && fp.peer_cid_paths <= 64, "{client}: {fp:?}");
            assert!(fp.local_cids <= 512 && fp.peer_cids <= 1024, "{client}: {fp:?}");
            assert!(fp.closed_paths <= 1024, "{client}: {fp:?}");
            for p in conn.stats().paths {
                // RFC 9002 §7: the sender stays within the window, except for PTO probes (at
                // most two datagrams per PTO, never blocked by the window, §7.5) and one
                // packet's overshoot. The window may shrink below what is in flight (a loss)
                // and grow within one step before it is seen here: compare with twice the
                // largest window and PTO count seen on the path.
                let seen = self.cc_seen.entry((client, p.path_id)).or_default();
                seen.0 = seen.0.max(p.cwnd);
                seen.1 = seen.1.max(p.pto_count);
                let bound = 2 * seen.0 + (2 * seen.1 + 4) * 1500;
                assert!(
                    p.bytes_in_flight <= bound,
                    "{client}: path {} in flight {} > {bound} (cwnd {}, {} PTOs)",
                    p.path_id,
                    p.bytes_in_flight,
                    p.cwnd,
                    p.pto_count
                );
            }
        }
    }
}

fuzz_target!(|input: Input| {
    let (cc, sc) = configs(input.ack_policy);
    let Some(mut pair) = Pair::handshaken_null(cc, sc.clone(), 1) else {
        panic!("handshake did not complete");
    };
    // The link delivers what arrives within a millisecond in one receive batch.
    pair.gro = Some(Duration::from_millis(1));
    let server_conn = pair.server.handles()[0];
    let mut h = Harness {
        pair,
        server_conn,
        streams: [Vec::new(), Vec::new()],
        accepted: [Vec::new(), Vec::new()],
        forged: 0,
        written: 0,
        scratch: vec![0; 64 * 1024],
        cc_seen: HashMap::new(),
    };
    let baseline = live_bytes();
    for op in input.ops.iter().take(64) {
        match op {
            Op::Forge { to_server, path, flip_phase, spin, src, frames } => {
                h.forge(*to_server, *path, *flip_phase, *spin, src, frames)
            }
            Op::ForgeToCid { to_server, cid, pn, path_id, flip_phase, frames } => {
                h.forge_to_cid(*to_server, *cid, *pn, *path_id, *flip_phase, frames)
            }
            Op::Raw { to_server, data } => {
                let src = h.default_addr(*to_server);
                let dst = h.default_addr(!*to_server);
                h.deliver(*to_server, src, dst, data.clone());
            }
            Op::Run { ms } => h.run(Duration::from_millis(u64::from(*ms)), 200, false),
            Op::Write { client, stream, uni, len, fin } => h.write(*client, *stream, *uni, *len, *fin),
            Op::OpenPath { addr, backup } => {
                let now = h.pair.now;
                let remote = h.pair.server_addr;
                let status = if *backup { PathStatus::Backup } else { PathStatus::Available };
                if let Some(c) = h.conn(true) {
                    let _ = c.open_path(now, Some(SocketAddr::from(([10, 0, 3, *addr], 4433))), remote, status);
                }
            }
            Op::AbandonPath { client, path, code } => {
                let now = h.pair.now;
                if let Some(c) = h.conn(*client) {
                    let ids = c.path_ids();
                    if !ids.is_empty() {
                        let _ = c.abandon_path(now, ids[usize::from(*path) % ids.len()], u64::from(*code));
                    }
                }
            }
            Op::KeyUpdate { client } => {
                if let Some(c) = h.conn(*client) {
                    c.fuzz_key_update_due();
                }
            }
            Op::Datagrams { client, path, len, count } => {
                if let Some(c) = h.conn(*client) {
                    let ids = c.path_ids();
                    let path = path.filter(|_| !ids.is_empty()).map(|p| ids[usize::from(p) % ids.len()]);
                    for _ in 0..*count {
                        let _ = c.send_datagram(vec![0xd9; usize::from(*len % 1400)], path);
                    }
                }
            }
            Op::SetStatus { client, path, backup } => {
                let now = h.pair.now;
                let status = if *backup { PathStatus::Backup } else { PathStatus::Available };
                if let Some(c) = h.conn(*client) {
                    let ids = c.path_ids();
                    if !ids.is_empty() {
                        let _ = c.set_path_status(now, ids[usize::from(*path) % ids.len()], status);
                    }
                }
            }
        }
        h.check();
        let grown = live_bytes().saturating_sub(baseline);
        assert!(grown <= HEAP_LIMIT, "heap grew by {grown} bytes after {op:?}");
    }
    // Let the pair exchange packets until it is quiet (or for a bounded time): retransmissions,
    // ACKs, CID replenishment, path validation, key updates. Timer-driven state further out
    // (path and idle timeouts) is reached through `Op::Run`; running it after every input
    // made this target three times slower.
    h.run(Duration::from_secs(3), 2000, true);
    let grown = live_bytes().saturating_sub(baseline);
    assert!(grown <= HEAP_LIMIT, "heap grew by {grown} bytes");
});
