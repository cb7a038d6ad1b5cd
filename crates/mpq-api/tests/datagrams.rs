//! DATAGRAM frames (RFC 9221) through the application API over loopback, in every runtime
//! (single, per-path, two shards): a server that echoes every datagram on the path it came by, a client that sends a burst
//! and reads the echoes, the API's refusals, and datagrams sent in 0-RTT by a resumed client.

mod common;

use common::addr;

use std::net::SocketAddr;
use std::time::Duration;

use mpq_api::{
    ClientConfig, DatagramConfig, DatagramError, Endpoint, Error, Options, ServerConfig, Threads, TransportConfig,
    Wait, ZeroRttState,
};

const RUNTIMES: [Threads; 3] = [Threads::Single, Threads::PerPath, Threads::Shards(2)];

fn transport() -> TransportConfig {
    // Idle timeout: a lost datagram fails the test in seconds instead of hanging it.
    TransportConfig {
        datagrams: DatagramConfig::enabled(),
        max_idle_timeout: Duration::from_secs(5),
        ..TransportConfig::default()
    }
}

/// A server that sends every datagram back on the path it came by.
fn echo_server(threads: Threads, cfg: ServerConfig) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let server =
        Endpoint::server(&[addr("127.0.0.1:0")], cfg, Options { threads, ..Options::default() }).expect("server");
    let at = server.local_addrs()[0];
    let serving = std::thread::spawn(move || {
        while let Some(conn) = server.accept().wait() {
            std::thread::spawn(move || {
                while let Ok(d) = conn.read_datagram().wait() {
                    if conn.send_datagram(d.data, Some(d.path_id)).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (at, serving)
}

fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|k| (i * 31 + k) as u8).collect()
}

#[test]
fn datagrams_are_echoed_exactly() {
    for threads in RUNTIMES {
        let (client_cfg, server_cfg): (ClientConfig, ServerConfig) = mpq_proto::testing::configs(transport());
        let (server_addr, serving) = echo_server(threads, server_cfg);
        let ep = Endpoint::client(&[addr("127.0.0.1:0")], Options { threads, ..Options::default() }).expect("client");
        let conn = ep.connect(server_addr, "localhost", &client_cfg).expect("connect").wait().expect("handshake");
        let max =
            conn.max_datagram_size(None).expect("open").unwrap_or_else(|| panic!("{threads:?}: no datagram size"));
        assert!(matches!(
            conn.send_datagram(vec![0u8; max + 1], None),
            Err(Error::Datagram(DatagramError::TooLarge { .. }))
        ));
        assert!(matches!(conn.send_datagram(&b"x"[..], Some(9)), Err(Error::Datagram(DatagramError::UnknownPath))));
        // 40 datagrams, a few at a time (the echo's queue and the window stay small).
        let mut sent = Vec::new();
        let mut got = Vec::new();
        for round in 0..8 {
            for k in 0..5 {
                let i = round * 5 + k;
                let d = payload(i, 1 + i * 23 % max);
                if let Err(e) = conn.send_datagram(d.clone(), None) {
                    panic!(
                        "{threads:?}: send {i}: {e}; paths {:?}; stats {:?}",
                        conn.path_stats(),
                        conn.datagram_stats()
                    );
                }
                sent.push(d);
            }
            for _ in 0..5 {
                let d = conn.read_datagram().wait().expect("an echo (a lost datagram ends in the idle timeout)");
                assert_eq!(d.path_id, 0);
                got.push(d.data.to_vec());
            }
        }
        sent.sort();
        got.sort();
        assert!(got == sent, "{threads:?}: the echoes differ from what was sent");
        let s = conn.datagram_stats().expect("stats").total;
        assert_eq!((s.sent, s.received), (40, 40), "{threads:?}: {s:?}");
        conn.close(0, b"done");
        ep.wait_idle().wait();
        drop((conn, ep, serving));
    }
}

/// A resumed client in 0-RTT sends a datagram before its handshake completes (the ticket's
/// connection allowed them, RFC 9221 §3); the server echoes it.
#[test]
fn a_resumed_client_sends_datagrams_in_0rtt() {
    for threads in RUNTIMES {
        let (client_cfg, server_cfg) = mpq_proto::testing::zero_rtt_configs(transport());
        let (server_addr, serving) = echo_server(threads, server_cfg);
        let ep = Endpoint::client(&[addr("127.0.0.1:0")], Options { threads, ..Options::default() }).expect("client");
        // Without a ticket: nothing can be sent before the handshake.
        let connecting = ep.connect(server_addr, "localhost", &client_cfg).expect("connect");
        let first = match connecting.into_0rtt() {
            Ok(_) => panic!("0-RTT keys without a ticket"),
            Err(c) => c.wait().expect("handshake"),
        };
        first.send_datagram(&b"first"[..], None).expect("send");
        assert_eq!(&first.read_datagram().wait().expect("echo").data[..], b"first");
        first.close(0, b"done");
        let Ok(second) = ep.connect(server_addr, "localhost", &client_cfg).expect("connect").into_0rtt() else {
            panic!("{threads:?}: no 0-RTT keys for a resumed session")
        };
        // (Pending however long this thread was descheduled: `connect` held the first flight
        // until the application's first call that sends; reading the state is not one.)
        assert_eq!(second.zero_rtt().expect("state"), ZeroRttState::Pending, "{threads:?}");
        second.send_datagram(&b"early"[..], None).expect("a datagram in 0-RTT");
        assert_eq!(&second.read_datagram().wait().expect("echo").data[..], b"early");
        let second = second.established().wait().expect("handshake");
        assert_eq!(second.zero_rtt().expect("state"), ZeroRttState::Accepted, "{threads:?}");
        second.close(0, b"done");
        ep.wait_idle().wait();
        drop((first, second, ep, serving));
    }
}

/// `send_datagrams` queues a batch in order under one lock and stops at the first one
/// refused (how many were queued; the error only when the first was refused); the send
/// queue's length never exceeds its bound, and the echoes of a batch all come back.
#[test]
fn a_batch_of_datagrams_is_queued_until_the_first_refused() {
    for threads in RUNTIMES {
        let (client_cfg, server_cfg): (ClientConfig, ServerConfig) = mpq_proto::testing::configs(transport());
        let (server_addr, serving) = echo_server(threads, server_cfg);
        let ep = Endpoint::client(&[addr("127.0.0.1:0")], Options { threads, ..Options::default() }).expect("client");
        let conn = ep.connect(server_addr, "localhost", &client_cfg).expect("connect").wait().expect("handshake");
        // (Larger than any path's PMTU: `max_datagram_size` grows as PMTU discovery does.)
        let huge = 65_536;
        let batch: Vec<bytes::Bytes> = (0..5).map(|i| payload(i, 100 + i).into()).collect();
        assert_eq!(conn.send_datagrams(batch.clone(), None).expect("a batch"), 5, "{threads:?}");
        let mut got: Vec<Vec<u8>> = (0..5)
            .map(|_| conn.read_datagram().wait().expect("an echo (a lost one ends in the idle timeout)").data.to_vec())
            .collect();
        got.sort();
        let mut want: Vec<Vec<u8>> = batch.iter().map(|b| b.to_vec()).collect();
        want.sort();
        assert_eq!(got, want, "{threads:?}");
        // The second is too large: only the first goes.
        let mixed: Vec<bytes::Bytes> = vec![payload(7, 10).into(), vec![0u8; huge].into(), payload(8, 10).into()];
        assert_eq!(conn.send_datagrams(mixed, None).expect("the first of the batch"), 1, "{threads:?}");
        assert_eq!(&conn.read_datagram().wait().expect("echo").data[..], &payload(7, 10)[..]);
        assert!(matches!(
            conn.send_datagrams(vec![bytes::Bytes::from(vec![0u8; huge])], None),
            Err(Error::Datagram(DatagramError::TooLarge { .. }))
        ));
        assert!(matches!(
            conn.send_datagrams(vec![bytes::Bytes::from_static(b"x")], Some(9)),
            Err(Error::Datagram(DatagramError::UnknownPath))
        ));
        assert!(conn.datagram_send_queue_len().expect("open") <= DatagramConfig::enabled().send_queue_len);
        assert_eq!(conn.datagram_stats().expect("stats").total.sent, 6, "{threads:?}");
        conn.close(0, b"done");
        ep.wait_idle().wait();
        drop((conn, ep, serving));
    }
}
