//! Connection-wide control frames in a send batch's lease (issue C1): leased with the keys so
//! that the batch is built alone, carried whole, and handed back when no packet took them.

use std::time::Duration;

use crate::conn::tests::{client, confirm_handshake, run_upload};
use crate::conn::TransportConfig;
use crate::stream::{StreamError, StreamsConfig};
use crate::testing::Pair;
use crate::types::Dir;

/// A receiver with small flow-control windows hands out credit all through an upload. Its
/// MAX_DATA / MAX_STREAM_DATA frames are leased with its batches' keys, so the batches that
/// carry them are built by the path alone like the rest, and the upload (which needs dozens
/// of window updates) arrives intact.
#[test]
fn flow_control_credit_goes_out_in_batches_built_alone() {
    let streams = StreamsConfig {
        stream_receive_window: 32 * 1024,
        receive_window: 64 * 1024,
        max_stream_window: 32 * 1024,
        max_connection_window: 64 * 1024,
        ..StreamsConfig::default()
    };
    let mut pair = Pair::new(TransportConfig { streams, ..TransportConfig::default() });
    assert!(confirm_handshake(&mut pair));
    let h = pair.server.handles()[0];
    let before = pair.server.connection(h).expect("server").shared.touches;
    run_upload(&mut pair, 1_000_000, Duration::from_secs(30));
    let after = pair.server.connection(h).expect("server").shared.touches;
    let leases = after.send_control_leases - before.send_control_leases;
    let batches = after.send_path_batches - before.send_path_batches;
    let alone = after.send_alone_batches - before.send_alone_batches;
    let what = format!("{leases} control leases, {alone} of {batches} batches alone: {after:?}");
    // 1 MB through a 32 KB stream window: at least 30 updates, most in their own lease.
    assert!(leases >= 20, "{what}");
    // Every batch of the transfer, with credit to send or not, was built alone (without the
    // leased frames, each batch with credit needs the host: one in 25 here).
    assert!(alone + 2 >= batches, "{what}");
}

/// Control frames a lease took but no packet of its batch carried go back to their queues
/// when the lease returns, and a later batch sends them: here a RESET_STREAM, which the
/// peer then sees.
#[test]
fn leased_control_frames_no_packet_took_go_back_to_their_queues() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    let c = client(&mut pair);
    let id = c.open_stream(Dir::Uni).expect("stream");
    c.write(id, b"soon reset").expect("write");
    c.reset_stream(id, 7).expect("reset");
    assert!(c.shared.streams.has_control_pending(), "RESET_STREAM waits");
    let now = pair.now;
    let c = client(&mut pair);
    let pi = c.primary_path();
    c.paths[pi].in_batch = true;
    {
        let (path, mut host) = c.send_host(pi).expect("path");
        path.send_lease = host.lease_keys(path);
        host.lease_control(path, now);
        assert!(path.send_lease.as_ref().is_some_and(|l| l.has_control() && l.quiet), "the frame is leased");
    }
    assert!(!c.shared.streams.has_control_pending(), "taken from the stream table");
    // The batch ends without a packet.
    c.end_batch(now, pi);
    assert!(c.shared.streams.has_control_pending(), "back in the stream table");
    // The next batches send it: the server learns of the reset.
    let h = pair.server.handles()[0];
    let (mut sid, mut seen) = (None, None);
    pair.run_until(Duration::from_secs(2), |p| {
        let s = p.server.connection_mut(h).expect("server");
        if sid.is_none() {
            sid = s.accept_stream(Dir::Uni);
        }
        let Some(sid) = sid else { return false };
        let mut buf = [0u8; 64];
        loop {
            match s.read(sid, &mut buf) {
                Ok(r) if r.len > 0 => continue,
                Err(e @ StreamError::Reset(_)) => seen = Some(e),
                _ => {}
            }
            break;
        }
        seen.is_some()
    });
    assert_eq!(seen, Some(StreamError::Reset(7)));
}

/// Four streams upload at once over a lossy path: their batches lease a share of every
/// stream with data waiting, and the data lost to resend first, so nearly every batch is
/// built alone and nearly no chunk is taken from the stream table one by one; every stream
/// arrives intact.
#[test]
fn several_streams_and_resends_are_leased_seed_20() {
    let mut pair = Pair::new(TransportConfig { pacing: false, ..TransportConfig::default() });
    assert!(confirm_handshake(&mut pair));
    // Every 20th datagram to the server is lost: data to resend all through the transfer.
    pair.drop = Box::new(|n, to_server| to_server && n % 20 == 7);
    const LEN: usize = 300_000;
    let data = |k: usize| -> Vec<u8> { (0..LEN).map(|i| (i * 7 + k * 61) as u8).collect() };
    let c = client(&mut pair);
    let ids: Vec<_> = (0..4).map(|_| c.open_stream(Dir::Uni).expect("stream")).collect();
    let before = c.shared.touches;
    let mut sent = [0usize; 4];
    let mut got: Vec<Vec<u8>> = vec![Vec::new(); 4];
    let mut server_ids = Vec::new();
    let mut fins = 0;
    let done = pair.run_until(Duration::from_secs(30), |p| {
        let c = p.client.connection_mut(p.client_conn).expect("client");
        for (k, &id) in ids.iter().enumerate() {
            while sent[k] < LEN {
                match c.write(id, &data(k)[sent[k]..]) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sent[k] += n,
                }
            }
            if sent[k] == LEN {
                let _ = c.finish(id);
            }
        }
        while p.server.poll_event().is_some() {}
        let Some(h) = p.server.handles().first().copied() else { return false };
        let s = p.server.connection_mut(h).expect("server");
        while let Some(id) = s.accept_stream(Dir::Uni) {
            server_ids.push(id);
        }
        let mut buf = vec![0u8; 65536];
        for (k, &id) in server_ids.iter().enumerate() {
            while let Ok(r) = s.read(id, &mut buf) {
                got[k].extend_from_slice(&buf[..r.len]);
                if r.fin {
                    fins += 1;
                }
                if r.len == 0 || r.fin {
                    break;
                }
            }
        }
        fins == 4
    });
    assert!(done, "received {:?}", got.iter().map(Vec::len).collect::<Vec<_>>());
    // The server opened the streams in the client's order: stream k carries data(k).
    for (k, g) in got.iter().enumerate() {
        assert!(*g == data(k), "stream {k} corrupted ({} bytes)", g.len());
    }
    let after = client(&mut pair).shared.touches;
    let stats = client(&mut pair).stats();
    let lost = stats.paths[0].lost_packets;
    let batches = after.send_path_batches - before.send_path_batches;
    let alone = after.send_alone_batches - before.send_alone_batches;
    let one_by_one = after.send_chunks_unleased - before.send_chunks_unleased;
    let leased = after.send_leased - before.send_leased;
    let alone_packets = after.send_alone_packets - before.send_alone_packets;
    let what = format!(
        "{alone} of {batches} batches alone, {alone_packets} of {leased} packets in them, {one_by_one} chunks one by \
         one, {lost} lost"
    );
    assert!(lost >= 20, "data was resent: {what}");
    // (Batches that found nothing to send, their window full, are not counted alone.)
    eprintln!("{what}");
    assert!(alone_packets * 10 >= leased * 9, "{what}");
    assert!(one_by_one * 20 <= leased, "{what}");
}
