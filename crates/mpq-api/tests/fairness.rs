//! A task that reads or writes a stream whose data (or room) is always there still lets the
//! other tasks of its executor run: the handles yield after a run of ready answers
//! (`src/coop.rs`). Driven here by tokio's one-thread runtime, which runs a task until it
//! returns `Pending`; without the yields the spawned task below never ran during the reads,
//! the writes, or the datagram reads.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::addr;
use mpq_api::{DatagramConfig, Endpoint, Options, TransportConfig, Wait};

/// More ready answers than a handle gives in a row (its budget is 64).
const READS: usize = 65;

/// Spawns a task on the current one-thread runtime that only marks that it ran.
fn observer() -> Arc<AtomicBool> {
    let ran = Arc::new(AtomicBool::new(false));
    let mark = ran.clone();
    tokio::spawn(async move { mark.store(true, Ordering::Release) });
    ran
}

#[test]
fn reads_and_writes_that_never_wait_let_other_tasks_run() {
    let transport = TransportConfig { datagrams: DatagramConfig::enabled(), ..TransportConfig::default() };
    let (client_cfg, server_cfg) = mpq_proto::testing::configs(transport);
    let server = Endpoint::server(&[addr("127.0.0.1:0")], server_cfg, Options::default()).expect("server");
    let server_addr = server.local_addrs()[0];
    let ep = Endpoint::client(&[addr("127.0.0.1:0")], Options::default()).expect("client");
    let conn = ep.connect(server_addr, "localhost", &client_cfg).expect("connect").wait().expect("handshake");
    let served = server.accept().wait().expect("a connection");
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    rt.block_on(async {
        // Writes of a byte each into a send buffer with room for them all: never waiting.
        let mut small = conn.open_uni().await.expect("open_uni");
        let ran = observer();
        for _ in 0..READS {
            assert_eq!(small.write(b"x").await.expect("write"), 1);
        }
        assert!(ran.load(Ordering::Acquire), "{READS} writes that did not wait starved the other task");
        small.finish().expect("finish");
        // A stream written at once goes in full packets.
        let mut large = conn.open_uni().await.expect("open_uni");
        large.write_all(&vec![7u8; 100_000]).await.expect("write");
        large.finish().expect("finish");
        let mut first = served.accept_uni().await.expect("accept_uni");
        assert_eq!(first.read_to_end(READS).await.expect("read"), vec![b'x'; READS]);
        // Reads of a byte each: after the first, the handle holds a packet's data or more,
        // and the next ones are answered from it without waiting.
        let mut recv = served.accept_uni().await.expect("accept_uni");
        assert_eq!(recv.read_chunk(1).await.expect("read").expect("data").len(), 1);
        let ran = observer();
        for _ in 0..READS {
            assert_eq!(recv.read_chunk(1).await.expect("read").expect("data").len(), 1);
        }
        assert!(ran.load(Ordering::Acquire), "{READS} reads that did not wait starved the other task");
        // And the rest of the stream is all there.
        let mut rest = 0;
        let mut buf = [0u8; 3];
        while let Some(n) = recv.read(&mut buf).await.expect("read") {
            assert!(buf[..n].iter().all(|&b| b == 7));
            rest += n;
        }
        assert_eq!(1 + READS + rest, 100_000, "every byte written is read once");
        // Datagrams: sent in one go, they arrive together and wait in the connection's queue.
        let sent = conn.send_datagrams((0..2 * READS as u8).map(|i| bytes::Bytes::from(vec![i; 100])), None);
        assert_eq!(sent.expect("datagrams"), 2 * READS);
        assert_eq!(served.read_datagram().await.expect("datagram").data[0], 0);
        let ran = observer();
        for i in 1..=READS {
            assert_eq!(served.read_datagram().await.expect("datagram").data[0], i as u8);
        }
        assert!(ran.load(Ordering::Acquire), "{READS} datagram reads that did not wait starved the other task");
    });
    conn.close(0, b"done");
    ep.wait_idle().wait();
}
