//! A server `Endpoint` gets arbitrary datagrams from arbitrary source addresses, interleaved
//! with timeouts: raw bytes, Initial packets under the real Initial keys (with or without a
//! real ClientHello, with arbitrary frames), short-header packets to CIDs the server issued
//! or not, and the datagrams of real clients whose packets the fuzzer drops, delays or
//! re-addresses. Invariants: no panic, the connection limit holds, the server never sends an
//! unvalidated address more than three times what it received from it (RFC 9000 §8.1), and
//! the heap stays bounded.
#![no_main]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mpq_fuzz::{client_initial, initial_crypto_data, live_bytes, CountingAlloc, FuzzFrame};
use mpq_proto::conn::{ClientConfig, ServerConfig, TransportConfig};
use mpq_proto::endpoint::{Endpoint, EndpointConfig};
use mpq_proto::time::Instant;
use mpq_proto::{ConnectionId, VERSION_1};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Connections the fuzzed server holds at most (small, to reach the limit).
const MAX_CONNECTIONS: usize = 8;
/// Real clients per input (each costs a TLS handshake).
const MAX_CLIENTS: usize = 3;
/// Heap growth allowed: a few connections in handshake (TLS state, buffers) at most.
const HEAP_LIMIT: usize = 32 << 20;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Cid {
    /// One of a few 8-byte IDs (repeats reach the same connection).
    Small(u8),
    /// `len` bytes (0..=255: too short, too long).
    Len(u8, u8),
    /// A CID the server issued to one of its connections.
    Issued(u8),
}

#[derive(Arbitrary, Debug)]
enum Version {
    V1,
    Other(u32),
    /// QUIC v2 (RFC 9369): its own Initial keys and type bits; with a real ClientHello the
    /// server's compatible version negotiation reads its version_information.
    V2,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Raw {
        src: u8,
        data: Vec<u8>,
    },
    /// An Initial under the Initial keys of its DCID: a real ClientHello (`hello`), then
    /// `frames`, padded to 1200 bytes or not.
    Initial {
        src: u8,
        version: Version,
        dcid: Cid,
        scid: Cid,
        token: Vec<u8>,
        pn: u16,
        hello: bool,
        frames: Vec<FuzzFrame>,
        pad: bool,
    },
    /// A short-header packet of `len` bytes to a CID.
    Short {
        src: u8,
        dcid: Cid,
        len: u16,
        fill: u8,
    },
    /// A long-header packet of another type (0-RTT, Handshake, Retry) with a raw payload.
    Long {
        src: u8,
        ty: u8,
        dcid: Cid,
        scid: Cid,
        payload: Vec<u8>,
    },
    /// A real client connects from address `src`.
    Connect {
        src: u8,
    },
    /// The real clients' pending datagrams go to the server: dropped when the bit of
    /// `drop` for their index is set, from `rebind` instead of their address if given.
    Relay {
        drop: u8,
        rebind: Option<u8>,
    },
    /// Time passes; timers fire.
    Wait {
        ms: u16,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    ops: Vec<Op>,
}

struct Setup {
    client: ClientConfig,
    server: ServerConfig,
    hello: Vec<u8>,
}

fn setup() -> &'static Setup {
    static S: OnceLock<Setup> = OnceLock::new();
    S.get_or_init(|| {
        let (c, s) = mpq_proto::testing::tls_configs(mpq_proto::testing::TEST_ALPN);
        let mut c = (*c).clone();
        c.resumption = rustls::client::Resumption::disabled();
        let transport = Arc::new(TransportConfig { initial_max_path_id: Some(2), ..TransportConfig::default() });
        let client = ClientConfig { tls: Arc::new(c), transport: transport.clone() };
        let server = ServerConfig { tls: s, transport };
        // A real ClientHello, taken from a client's first datagram.
        let mut ep = Endpoint::new(EndpointConfig::with_seed(3), None);
        let addr: SocketAddr = "10.0.0.2:443".parse().expect("addr");
        ep.connect(Instant::ZERO, &client, addr, "localhost").expect("connect");
        let mut buf = Vec::new();
        let t = ep.poll_transmit(Instant::ZERO, &mut buf).expect("client Initial");
        let hello = initial_crypto_data(&buf[..t.size]);
        assert!(!hello.is_empty(), "no ClientHello captured");
        Setup { client, server, hello }
    })
}

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 1, n >> 4, n & 15], 1000 + u16::from(n)))
}

struct Harness {
    server: Endpoint,
    now: Instant,
    server_addr: SocketAddr,
    clients: Vec<(Endpoint, SocketAddr)>,
    /// Bytes received from and sent to each address.
    traffic: HashMap<SocketAddr, (u64, u64)>,
    buf: Vec<u8>,
}

impl Harness {
    fn cid(&self, c: Cid) -> ConnectionId {
        match c {
            Cid::Small(n) => ConnectionId::new(&[n % 4; 8]),
            Cid::Len(len, fill) => {
                let v = vec![fill; usize::from(len)];
                ConnectionId::try_from_slice(&v).unwrap_or(ConnectionId::EMPTY)
            }
            Cid::Issued(i) => {
                let all: Vec<ConnectionId> = self
                    .server
                    .handles()
                    .into_iter()
                    .filter_map(|h| self.server.connection(h))
                    .flat_map(|c| c.local_cids().collect::<Vec<_>>())
                    .collect();
                if all.is_empty() {
                    ConnectionId::new(&[0xee; 8])
                } else {
                    all[usize::from(i) % all.len()]
                }
            }
        }
    }

    /// Raw CID bytes for a header (lengths up to 255, beyond `ConnectionId`'s 20).
    fn cid_bytes(&self, c: Cid) -> Vec<u8> {
        match c {
            Cid::Len(len, fill) => vec![fill; usize::from(len)],
            other => self.cid(other).to_vec(),
        }
    }

    fn send(&mut self, src: SocketAddr, mut data: Vec<u8>) {
        if data.is_empty() {
            return;
        }
        self.traffic.entry(src).or_default().0 += data.len() as u64;
        self.server.handle_datagram(self.now, self.server_addr, src, None, &mut data);
        self.drain();
    }

    fn drain(&mut self) {
        let mut n = 0;
        while let Some(t) = self.server.poll_transmit(self.now, &mut self.buf) {
            assert!(t.size <= self.buf.len() && t.size <= 65527, "{t:?}");
            self.traffic.entry(t.destination).or_default().1 += t.size as u64;
            let seg = t.segment_size.unwrap_or(t.size).max(1);
            for c in self.clients.iter_mut().filter(|c| c.1 == t.destination) {
                for d in self.buf[..t.size].chunks(seg) {
                    let mut d = d.to_vec();
                    c.0.handle_datagram(self.now, t.source.unwrap_or(self.server_addr), c.1, None, &mut d);
                }
            }
            n += 1;
            assert!(n < 100_000, "poll_transmit never returns None");
        }
        while self.server.accept().is_some() {}
        while self.server.poll_event().is_some() {}
        for c in &mut self.clients {
            while c.0.poll_event().is_some() {}
        }
        assert!(self.server.len() <= MAX_CONNECTIONS, "{} connections", self.server.len());
    }

    fn relay(&mut self, drop: u8, rebind: Option<u8>) {
        let mut out = Vec::new();
        for (i, c) in self.clients.iter_mut().enumerate() {
            while let Some(t) = c.0.poll_transmit(self.now, &mut self.buf) {
                let seg = t.segment_size.unwrap_or(t.size).max(1);
                if drop >> i & 1 == 0 {
                    let src = rebind.map_or(c.1, addr);
                    for d in self.buf[..t.size].chunks(seg) {
                        out.push((src, d.to_vec()));
                    }
                }
            }
        }
        for (src, d) in out {
            self.send(src, d);
        }
    }

    fn check_amplification(&self) {
        for (a, (rx, tx)) in &self.traffic {
            // Real clients complete handshakes: their addresses become validated.
            if self.clients.iter().any(|c| c.1 == *a) {
                continue;
            }
            assert!(*tx <= 3 * *rx, "sent {tx} bytes to unvalidated {a}, received {rx}");
        }
    }
}

fuzz_target!(|input: Input| {
    let s = setup();
    let mut config = EndpointConfig::with_seed(11);
    config.max_connections = MAX_CONNECTIONS;
    let mut h = Harness {
        server: Endpoint::new(config, Some(s.server.clone())),
        now: Instant::ZERO,
        server_addr: "10.0.0.2:443".parse().expect("addr"),
        clients: Vec::new(),
        traffic: HashMap::new(),
        buf: Vec::new(),
    };
    let baseline = live_bytes();
    for op in input.ops.iter().take(128) {
        match op {
            Op::Raw { src, data } => h.send(addr(*src), data.clone()),
            Op::Initial { src, version, dcid, scid, token, pn, hello, frames, pad } => {
                let mut payload = Vec::new();
                if *hello {
                    mpq_proto::coding::write_varint(&mut payload, 0x06);
                    mpq_proto::coding::write_varint(&mut payload, 0);
                    mpq_proto::coding::write_varint(&mut payload, s.hello.len() as u64);
                    payload.extend_from_slice(&s.hello);
                }
                for f in frames {
                    if payload.len() > 4000 {
                        break; // an Initial's Length field (2 bytes here) caps it anyway
                    }
                    f.encode(&mut payload, 4000);
                }
                let v = match version {
                    Version::V1 => VERSION_1,
                    Version::Other(v) => *v,
                    Version::V2 => mpq_proto::VERSION_2,
                };
                let (d, sc) = (h.cid(*dcid), h.cid(*scid));
                let dgram = client_initial(v, &d, &sc, token, u64::from(*pn), &payload, if *pad { 1200 } else { 0 });
                h.send(addr(*src), dgram);
            }
            Op::Short { src, dcid, len, fill } => {
                let mut d = vec![0x40 | (fill & 0x3f)];
                d.extend_from_slice(&h.cid_bytes(*dcid));
                d.resize(d.len().max(usize::from(*len) % 1500), *fill);
                h.send(addr(*src), d);
            }
            Op::Long { src, ty, dcid, scid, payload } => {
                let mut d = vec![0xc0 | (ty & 3) << 4 | 3];
                d.extend_from_slice(&VERSION_1.to_be_bytes());
                let (dc, sc) = (h.cid_bytes(*dcid), h.cid_bytes(*scid));
                d.push(dc.len() as u8);
                d.extend_from_slice(&dc);
                d.push(sc.len() as u8);
                d.extend_from_slice(&sc);
                mpq_proto::coding::write_varint(&mut d, payload.len() as u64);
                d.extend_from_slice(payload);
                h.send(addr(*src), d);
            }
            Op::Connect { src } => {
                if h.clients.len() < MAX_CLIENTS && !h.clients.iter().any(|c| c.1 == addr(*src)) {
                    let mut ep = Endpoint::new(EndpointConfig::with_seed(100 + h.clients.len() as u64), None);
                    let _ = ep.connect(h.now, &s.client, h.server_addr, "localhost");
                    h.clients.push((ep, addr(*src)));
                }
            }
            Op::Relay { drop, rebind } => h.relay(*drop, *rebind),
            Op::Wait { ms } => {
                h.now += Duration::from_millis(u64::from(*ms));
                h.server.handle_timeout(h.now);
                for c in &mut h.clients {
                    c.0.handle_timeout(h.now);
                }
                h.drain();
            }
        }
        h.check_amplification();
        let grown = live_bytes().saturating_sub(baseline);
        assert!(grown <= HEAP_LIMIT, "heap grew by {grown} bytes after {op:?}");
    }
    // Time runs out: every connection times out (idle or handshake) and goes away.
    for _ in 0..64 {
        let Some(t) = h.server.poll_timeout() else { break };
        h.now = h.now.max(t);
        h.server.handle_timeout(h.now);
        h.drain();
        h.check_amplification();
    }
});
