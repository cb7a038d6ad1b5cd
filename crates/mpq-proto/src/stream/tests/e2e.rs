//! Two stream tables driven against each other over a lossy, reordering "network", and a
//! property test of receive-side flow control.

use std::time::Duration;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{cid, events, pair, Code, RTT};
use crate::frame::Frame;
use crate::stream::*;
use crate::time::Instant;

/// Delivers a control frame to the peer's table.
fn deliver_control(to: &mut Streams, f: &Frame<'_>) -> Result<(), crate::TransportError> {
    match *f {
        Frame::MaxData(m) => to.on_max_data(m),
        Frame::MaxStreamData { id, max } => to.on_max_stream_data(id, max)?,
        Frame::MaxStreams { dir, count } => to.on_max_streams(dir, count),
        Frame::DataBlocked(l) => to.on_data_blocked(l),
        Frame::StreamDataBlocked { id, limit } => to.on_stream_data_blocked(id, limit)?,
        Frame::StreamsBlocked { dir, limit } => to.on_streams_blocked(dir, limit),
        Frame::ResetStream { id, error_code, final_size } => to.on_reset_stream(id, error_code, final_size)?,
        Frame::StopSending { id, error_code } => to.on_stop_sending(id, error_code)?,
        _ => unreachable!("not a stream-layer frame: {f:?}"),
    }
    Ok(())
}

enum Packet {
    Data(StreamChunk, Vec<u8>),
    Control(Frame<'static>),
}

/// Moves everything one endpoint wants to send into the network.
fn transmit(from: &mut Streams, now: Instant, rng: &mut ChaCha8Rng, net: &mut Vec<Packet>, budget: usize) {
    while let Some(f) = from.poll_control(now, RTT) {
        net.push(Packet::Control(f));
    }
    for _ in 0..budget {
        let Some(ch) = from.next_stream_chunk(rng.random_range(1..1400)) else {
            break;
        };
        let mut data = Vec::new();
        from.copy_stream_data(ch.id, ch.offset, ch.len, &mut data);
        assert_eq!(data.len(), ch.len);
        net.push(Packet::Data(ch, data));
    }
}

/// Delivers (in random order, with loss) the packets `from` sent to `to`.
fn deliver(from: &mut Streams, to: &mut Streams, net: &mut Vec<Packet>, rng: &mut ChaCha8Rng, loss: f64) {
    while !net.is_empty() {
        let p = net.swap_remove(rng.random_range(0..net.len()));
        let lost = rng.random_bool(loss);
        match p {
            Packet::Data(ch, _) if lost => from.on_stream_chunk_lost(&ch),
            Packet::Control(f) if lost => from.on_control_lost(&f),
            Packet::Data(ch, data) => {
                to.on_stream_frame(ch.id, ch.offset, &data, ch.fin).unwrap();
                from.on_stream_chunk_acked(&ch);
            }
            Packet::Control(f) => {
                deliver_control(to, &f).unwrap();
                from.on_control_acked(&f);
            }
        }
    }
}

#[test]
fn two_endpoints_move_a_megabyte() {
    let cfg = StreamsConfig {
        stream_receive_window: 64 * 1024,
        receive_window: 128 * 1024,
        send_buffer_limit: 100 * 1024,
        ..Default::default()
    };
    let (mut c, mut s) = pair(&cfg);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let payload: Vec<u8> = (0..1_000_000u32).map(|i| (i * 31 + i / 251) as u8).collect();
    let parts = [&payload[..400_000], &payload[400_000..700_000], &payload[700_000..]];
    let ids = [c.open(Dir::Bi).unwrap(), c.open(Dir::Uni).unwrap(), c.open(Dir::Bi).unwrap()];
    let mut written = [0usize; 3];
    let mut received: [Vec<u8>; 3] = Default::default();
    let mut done = [false; 3];
    let mut now = Instant::ZERO;
    let mut net = Vec::new();
    let mut buf = vec![0u8; 20_000];
    for _round in 0..20_000 {
        now += Duration::from_millis(1);
        for i in 0..3 {
            if written[i] < parts[i].len() {
                if let Ok(n) = c.write(ids[i], &parts[i][written[i]..]) {
                    written[i] += n;
                    if written[i] == parts[i].len() {
                        c.finish(ids[i]).unwrap();
                    }
                }
            }
        }
        transmit(&mut c, now, &mut rng, &mut net, 40);
        deliver(&mut c, &mut s, &mut net, &mut rng, 0.1);
        // Server application: accept, read everything, finish its bidi halves.
        while let Some(id) = s.accept(Dir::Bi) {
            s.finish(id).unwrap();
        }
        while s.accept(Dir::Uni).is_some() {}
        for i in 0..3 {
            while !done[i] {
                match s.read(ids[i], &mut buf[..rng.random_range(1..20_000)]) {
                    Ok(r) => {
                        received[i].extend_from_slice(&buf[..r.len]);
                        done[i] = r.fin;
                    }
                    Err(StreamError::Blocked) | Err(StreamError::ClosedStream) => break,
                    Err(e) => panic!("{e}"),
                }
            }
        }
        transmit(&mut s, now, &mut rng, &mut net, 40);
        deliver(&mut s, &mut c, &mut net, &mut rng, 0.1);
        for i in [0, 2] {
            let _ = c.read(ids[i], &mut buf);
        }
        if done.iter().all(|&d| d) && c.is_empty() && s.is_empty() {
            break;
        }
    }
    for i in 0..3 {
        assert!(done[i], "stream {i} incomplete: {} bytes", received[i].len());
        assert!(received[i] == parts[i], "stream {i} corrupted");
    }
    let ev = events(&mut c);
    for id in ids {
        assert!(ev.contains(&StreamEvent::Finished { id }));
    }
    assert!(c.is_empty() && s.is_empty(), "streams leaked: {} {}", c.len(), s.len());
    assert!(!c.has_pending_data() || c.next_stream_chunk(1400).is_none());
}

proptest! {
    /// Whatever a peer sends, every accepted frame is within the limits advertised so far, and
    /// every frame beyond them is a FLOW_CONTROL_ERROR.
    #[test]
    fn flow_control_never_exceeded(
        ops in proptest::collection::vec((0u64..3, 0u64..1500, 0usize..400, any::<bool>(), 0usize..600), 1..80),
    ) {
        let cfg = StreamsConfig {
            stream_receive_window: 500,
            receive_window: 1000,
            max_stream_window: 2000,
            max_connection_window: 3000,
            ..Default::default()
        };
        let (_, mut s) = pair(&cfg);
        let mut stream_limit = [500u64; 3];
        let mut conn_limit = 1000u64;
        let mut highest = [0u64; 3];
        let mut closed = [false; 3];
        let data = [0u8; 400];
        let mut buf = [0u8; 600];
        let mut now = Instant::ZERO;
        for (idx, offset, len, reset, read) in ops {
            now += Duration::from_millis(3);
            let id = cid(Dir::Uni, idx);
            if closed[idx as usize] {
                continue; // late frames for a closed stream are ignored
            }
            let end = offset + len as u64;
            let new_highest = highest[idx as usize].max(end);
            let total: u64 = highest.iter().sum::<u64>() - highest[idx as usize] + new_highest;
            let r = if reset {
                s.on_reset_stream(id, 0, end)
            } else {
                s.on_stream_frame(id, offset, &data[..len], false)
            };
            match r {
                Ok(()) => {
                    prop_assert!(new_highest <= stream_limit[idx as usize]);
                    prop_assert!(total <= conn_limit);
                    highest[idx as usize] = new_highest;
                }
                Err(e) if e.code == Code::FLOW_CONTROL_ERROR => {
                    prop_assert!(new_highest > stream_limit[idx as usize] || total > conn_limit);
                    return Ok(());
                }
                // Final size violations (a reset below data already received) end the run too.
                Err(e) => { prop_assert_eq!(e.code, Code::FINAL_SIZE_ERROR); return Ok(()); }
            }
            if let Err(StreamError::Reset(_)) = s.read(id, &mut buf[..read]) {
                closed[idx as usize] = true;
            }
            while let Some(f) = s.poll_control(now, RTT) {
                match f {
                    Frame::MaxData(m) => { prop_assert!(m >= conn_limit); conn_limit = m; }
                    Frame::MaxStreamData { id, max } => {
                        let i = id.index() as usize;
                        prop_assert!(max >= stream_limit[i]);
                        stream_limit[i] = max;
                    }
                    _ => {}
                }
            }
        }
    }
}
