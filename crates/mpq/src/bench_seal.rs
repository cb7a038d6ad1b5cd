//! The machine's compute reference for `mpq bench receive|send`: how far the work that
//! dominates both, AEAD over packets, speeds up with the same threads on the same CPUs when
//! nothing at all is shared between them.
//!
//! A path thread of the receive benchmark spends about half of its samples in AES-GCM (the
//! profile in `docs/bench-path-threads.md`). On a virtual machine, a lone busy vCPU can run faster than two busy
//! ones (the host's other tenants, its clock boost): `openssl speed -multi 2` sealed
//! 1.4-1.9x the bytes of one process on this project's 2-vCPU machine, minute to minute. So
//! the benchmark's speedup is read beside this one, taken in the same invocation right after
//! each run: every path's packets are sealed in place with the suite the benchmark's
//! connection negotiated (rustls's QUIC packet key, the provider the stack uses), path k's on
//! thread k mod T, pinned as the path threads are. Each thread seals one GRO batch of its own
//! buffers over and over (they stay in its core's cache), so the only thing the threads share
//! is the machine.

use std::time::Duration;

use anyhow::{Context, Result};
use mpq_proto::crypto::backend;
use rustls::quic::{PacketKey, Suite, Version};
use rustls::Side;

use crate::bench_copy::timed_on_threads;

/// Bytes of a sealed packet (the benchmark's datagrams: 1452 bytes of UDP payload).
const PACKET: usize = 1452;
/// Bytes of a 1-RTT packet's header ahead of the payload (first byte, 8-byte CID, 4-byte
/// packet number) authenticated with it.
const HEADER: usize = 13;
/// Bytes of the AEAD tag.
const TAG: usize = 16;
/// Payload bytes sealed per packet.
pub(crate) const PAYLOAD: usize = PACKET - HEADER - TAG;
/// A path's packet key and the packets it seals over and over.
type PathPackets = (Box<dyn PacketKey>, Vec<Vec<u8>>);

/// Packets each path cycles through (one GRO batch: 93 kB, within a core's L2 cache).
const POOL: usize = 64;

/// The QUIC suite of the stack's provider whose TLS name is `name` (as
/// [`mpq_proto::conn::HandshakeInfo::cipher_suite`] prints it, e.g.
/// `TLS13_AES_256_GCM_SHA384`).
pub(crate) fn suite_named(name: &str) -> Result<Suite> {
    backend::default_provider()
        .cipher_suites
        .iter()
        .find(|s| format!("{:?}", s.suite()) == name)
        .and_then(|s| s.tls13())
        .and_then(|s| s.quic_suite())
        .with_context(|| format!("the stack's provider has no QUIC suite named {name}"))
}

/// Seals `bytes` of payload in all, `bytes / paths` for each path in packets of [`PAYLOAD`]
/// bytes under a key of its own, path k's on thread k mod `threads` (pinned to
/// `cpus[k mod len]` unless `cpus` is empty). Returns the wall time from the threads' common
/// start to the last one's end, and a sum over every tag (the same for any thread count, so
/// that no packet can be left out).
pub(crate) fn seal_run(suite: &Suite, paths: usize, threads: usize, cpus: &[usize], bytes: u64) -> (Duration, u64) {
    let threads = threads.clamp(1, paths.max(1));
    let per_path = bytes / paths.max(1) as u64;
    let packets = per_path.div_ceil(PAYLOAD as u64);
    let runs = timed_on_threads(
        threads,
        cpus,
        // This thread's paths: a key (from a connection ID of the path's own) and a batch of
        // packets, made before the clock.
        |t| -> Vec<PathPackets> {
            (t..paths)
                .step_by(threads)
                .map(|k| {
                    let key = suite.keys(&[k as u8; 8], Side::Client, Version::V1).local.packet;
                    let pool = (0..POOL).map(|i| (0..PACKET).map(|b| (b ^ i ^ k) as u8).collect()).collect();
                    (key, pool)
                })
                .collect()
        },
        |mine| {
            let mut tags = 0u64;
            for (key, pool) in mine.iter_mut() {
                for pn in 0..packets {
                    let packet = &mut pool[pn as usize % POOL];
                    let (header, rest) = packet.split_at_mut(HEADER);
                    if let Ok(tag) = key.encrypt_in_place(pn, header, &mut rest[..PAYLOAD]) {
                        tags = tags.wrapping_add(tag.as_ref().iter().map(|&b| u64::from(b)).sum::<u64>());
                    }
                }
            }
            tags
        },
    );
    runs.into_iter().fold((Duration::ZERO, 0u64), |(t, s), (dt, ds)| (t.max(dt), s.wrapping_add(ds)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The suites the stack negotiates are found by their TLS names; others are refused.
    #[test]
    fn suites_are_found_by_name() {
        for name in ["TLS13_AES_128_GCM_SHA256", "TLS13_AES_256_GCM_SHA384", "TLS13_CHACHA20_POLY1305_SHA256"] {
            assert!(suite_named(name).is_ok(), "{name}");
        }
        assert!(suite_named("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256").is_err());
        assert!(suite_named("nonsense").is_err());
    }

    /// Every path's packets are sealed whatever the thread count: the tags sum the same on
    /// one, two or three threads, and change with the bytes sealed and with the suite.
    #[test]
    fn every_packet_is_sealed_on_one_or_several_threads() {
        let suite = suite_named("TLS13_AES_128_GCM_SHA256").expect("suite");
        let bytes = 3 * 100 * PAYLOAD as u64;
        let (took, one) = seal_run(&suite, 3, 1, &[], bytes);
        assert!(took > Duration::ZERO);
        assert_ne!(one, 0);
        for threads in 2..=3 {
            assert_eq!(seal_run(&suite, 3, threads, &[], bytes).1, one, "{threads} thread(s)");
        }
        assert_ne!(seal_run(&suite, 3, 1, &[], bytes - 3 * PAYLOAD as u64).1, one);
        let other = suite_named("TLS13_CHACHA20_POLY1305_SHA256").expect("suite");
        assert_ne!(seal_run(&other, 3, 2, &[], bytes).1, one);
    }
}
