//! The lock protocol of path threads (issue C2 item 4), explored with shuttle: a server
//! connection behind one lock, two path threads each taking its path out to open a run of
//! received datagrams (`begin_recv_run`, `RecvRun::open`, `end_recv_run`), and a third
//! thread doing connection-wide work at the same time: sending, a timer, abandoning a path,
//! closing. Shuttle runs many random interleavings of the lock acquisitions; in each, nothing
//! may panic (debug assertions included), every path must be back in its slot at the end,
//! and, unless the connection was closed, the transfer must then complete byte for byte.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use shuttle::sync::Mutex;

use super::tests_multipath::server;
use super::tests_threads::{finish, two_paths_and_an_upload};
use crate::endpoint::{ConnectionHandle, Endpoint, EndpointConfig};
use crate::testing::Pair;

/// What the third thread does while the paths open their runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Other {
    /// `poll_transmit` until nothing is left (ACKs, and batches of the paths still in).
    Send,
    /// `handle_timeout` a second later (loss timers, PTO, the paths' timers).
    Timer,
    /// Abandons the second path.
    Abandon,
    /// Closes the connection.
    Close,
    /// The first path builds a send batch alone (checked out with its lease), its receive
    /// run then finding it out.
    SendAlone,
    /// Nothing; but the client updates its keys after its first batch, so the runs hold
    /// datagrams of two key phases: a run stops at the new phase, which the connection takes up the
    /// general way while the other path may still be opening the old one.
    KeyUpdate,
}

/// One path's run: (path ID, client address, server address, datagrams).
type Run = (u64, SocketAddr, SocketAddr, Vec<Vec<u8>>);

/// The client's next datagrams, by path; with `update_keys`, the client updates its keys
/// after the first batch.
fn datagrams_by_path(pair: &mut Pair, update_keys: bool) -> Vec<Run> {
    let now = pair.now;
    let mut runs: Vec<Run> = Vec::new();
    let mut buf = Vec::new();
    let mut batches = 0;
    while let Some(t) = pair.client.poll_transmit(now, &mut buf) {
        batches += 1;
        if update_keys && batches == 1 {
            assert!(super::tests::client(pair).initiate_key_update(now), "a key update");
        }
        let seg = t.segment_size.unwrap_or(t.size);
        let src = t.source.unwrap_or(pair.client_addr);
        let datagrams = buf[..t.size].chunks(seg).map(<[u8]>::to_vec);
        match runs.iter_mut().find(|r| r.0 == t.path_id) {
            Some(r) => r.3.extend(datagrams),
            None => runs.push((t.path_id, src, t.destination, datagrams.collect())),
        }
    }
    runs
}

/// One interleaving: the two runs and `other`, on three threads.
fn interleave(other: Other) {
    let (mut pair, second, mut up) = two_paths_and_an_upload();
    let updates_before = server(&mut pair).stats().key_updates;
    let runs = datagrams_by_path(&mut pair, other == Other::KeyUpdate);
    assert_eq!(runs.len(), 2, "data on both paths");
    let now = pair.now;
    let h: ConnectionHandle = pair.server.handles()[0];
    // The server endpoint goes behind the lock the threads share (a placeholder stays).
    let ep = std::mem::replace(&mut pair.server, Endpoint::new(EndpointConfig::with_seed(9), None));
    let ep = Arc::new(Mutex::new(ep));
    let mut threads = Vec::new();
    for (path, src, dst, mut datagrams) in runs {
        let ep = Arc::clone(&ep);
        threads.push(shuttle::thread::spawn(move || {
            let run = ep.lock().expect("lock").connection_mut(h).and_then(|c| c.begin_recv_run(path, src, None));
            let mut slices: Vec<&mut [u8]> = datagrams.iter_mut().map(Vec::as_mut_slice).collect();
            let Some(mut run) = run else {
                // The path was gone or the connection closed first: the general way.
                if let Some(c) = ep.lock().expect("lock").connection_mut(h) {
                    c.handle_datagrams(now, dst, src, None, &mut slices);
                }
                return;
            };
            run.open(now, &mut slices);
            let mut guard = ep.lock().expect("lock");
            let c = guard.connection_mut(h).expect("the connection stays while a path is out");
            let spent = c.end_recv_run(now, dst, run, &mut slices);
            drop(guard);
            drop(spent);
        }));
    }
    let third = Arc::clone(&ep);
    threads.push(shuttle::thread::spawn(move || {
        let mut guard = third.lock().expect("lock");
        match other {
            Other::Send => {
                let mut buf = Vec::new();
                while guard.poll_transmit(now, &mut buf).is_some() {}
            }
            Other::Timer => guard.handle_timeout(now + Duration::from_secs(1)),
            Other::Abandon => {
                if let Some(c) = guard.connection_mut(h) {
                    let _ = c.abandon_path(now, second, 0);
                }
            }
            Other::Close => {
                if let Some(c) = guard.connection_mut(h) {
                    c.close(now, 0, b"done");
                }
            }
            Other::KeyUpdate => {}
            Other::SendAlone => {
                let Some(c) = guard.connection_mut(h) else { return };
                let Some(pi) = c.path_index(0).filter(|&pi| c.paths.get(pi).is_some()) else { return };
                c.paths[pi].in_batch = true;
                let batch = c.begin_alone_batch(now, pi, true);
                drop(guard);
                let Some(mut batch) = batch else {
                    third.lock().expect("lock").connection_mut(h).expect("connection").end_batch(now, pi);
                    return;
                };
                let mut buf = Vec::new();
                batch.build(now, &mut buf);
                let mut guard = third.lock().expect("lock");
                let c = guard.connection_mut(h).expect("connection");
                c.end_alone_batch(batch);
                c.end_batch(now, pi);
            }
        }
    }));
    for t in threads {
        t.join().expect("a thread panicked");
    }
    let Ok(ep) = Arc::try_unwrap(ep).map(|m| m.into_inner().expect("lock")) else { panic!("threads gone") };
    pair.server = ep;
    let s = server(&mut pair);
    for slot in s.paths.slots() {
        assert!(!s.paths.is_out(slot), "slot {slot} still out");
    }
    s.debug_assert_mail_delivered();
    if other == Other::KeyUpdate {
        assert!(s.stats().key_updates > updates_before, "the server followed a key update");
    }
    if other != Other::Close {
        pair.now = pair.now.max(now);
        finish(&mut pair, &mut up);
    }
}

#[test]
fn path_threads_and_connection_wide_work_interleave_safely() {
    let all = [Other::Send, Other::Timer, Other::Abandon, Other::Close, Other::SendAlone, Other::KeyUpdate];
    for other in all {
        // Shuttle runs threads as coroutines; the handshake in debug builds needs more
        // than its default stack.
        let mut config = shuttle::Config::new();
        config.stack_size = 8 << 20;
        let runner = shuttle::Runner::new(shuttle::scheduler::RandomScheduler::new(24), config);
        runner.run(move || interleave(other));
    }
}
