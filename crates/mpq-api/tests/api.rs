//! The application API end to end over loopback, in every runtime (single, per-path, two
//! shards): byte-exact transfers over one to four paths, many streams from many threads at once, the errors a program sees
//! (a server that never answers, a reset stream, a closed endpoint), a path abandoned in the
//! middle of a transfer, and the runtime's per-thread figures.

mod common;

use common::{addr, echo, echo_streams};

use std::net::SocketAddr;
use std::time::Duration;

use mpq_api::{
    ClientConfig, Connection, ConnectionError, Endpoint, Error, Options, PathThreadLimit, Threads, TransportConfig,
    Wait,
};

const RUNTIMES: [Threads; 3] = [Threads::Single, Threads::PerPath, Threads::Shards(2)];

/// A server that echoes every bidirectional stream and, for every unidirectional stream,
/// answers on a new unidirectional stream with the length it read (8 bytes, big-endian).
/// Idle timeout of the tests' connections: a stall fails in seconds, not half a minute.
const IDLE: Duration = Duration::from_secs(5);

fn echo_server(
    threads: Threads,
    transport: TransportConfig,
) -> (SocketAddr, ClientConfig, std::thread::JoinHandle<()>) {
    let transport = TransportConfig { max_idle_timeout: IDLE, ..transport };
    let (client_cfg, server_cfg) = mpq_proto::testing::configs(transport);
    let server = Endpoint::server(&[addr("127.0.0.1:0")], server_cfg, Options { threads, ..Options::default() })
        .expect("server endpoint");
    let server_addr = server.local_addrs()[0];
    let serving = std::thread::spawn(move || {
        while let Some(conn) = server.accept().wait() {
            echo_streams(conn.clone());
            std::thread::spawn(move || {
                while let Ok(mut recv) = conn.accept_uni().wait() {
                    let conn = conn.clone();
                    std::thread::spawn(move || {
                        let Ok(data) = recv.read_to_end(64 << 20).wait() else { return };
                        let Ok(mut send) = conn.open_uni().wait() else { return };
                        let _ = send.write_all(&(data.len() as u64).to_be_bytes()).wait();
                        let _ = send.finish();
                    });
                }
            });
        }
    });
    (server_addr, client_cfg, serving)
}

/// `MPQ_TEST_LOG=1`: the runtime's and the protocol's debug log on stderr.
fn log() {
    if std::env::var_os("MPQ_TEST_LOG").is_some() {
        let _ = tracing_subscriber::fmt().with_max_level(tracing::Level::DEBUG).with_test_writer().try_init();
    }
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| ((i as u64).wrapping_mul(2_654_435_761) >> 7) as u8 ^ salt).collect()
}

/// A client over `paths` loopback addresses, connected, with every extra path validated.
fn client(threads: Threads, paths: u8, server: SocketAddr, cfg: &ClientConfig) -> (Endpoint, Connection) {
    client_with(Options { threads, ..Options::default() }, paths, server, cfg)
}

/// [`client`] with these options.
fn client_with(options: Options, paths: u8, server: SocketAddr, cfg: &ClientConfig) -> (Endpoint, Connection) {
    let locals: Vec<SocketAddr> = (1..=paths).map(|k| addr(&format!("127.0.0.{k}:0"))).collect();
    let ep = Endpoint::client(&locals, options).expect("client endpoint");
    let conn = ep.connect(server, "localhost", cfg).expect("connect").wait().expect("handshake");
    for &local in &ep.local_addrs()[1..] {
        conn.add_path(Some(local), server, false).wait().expect("a validated path");
    }
    (ep, conn)
}

#[test]
fn echo_is_byte_exact_over_1_2_and_4_paths_in_both_runtimes() {
    log();
    for threads in RUNTIMES {
        let transport = TransportConfig { initial_max_path_id: Some(8), ..TransportConfig::default() };
        let (server, cfg, _serving) = echo_server(threads, transport);
        for paths in [1u8, 2, 4] {
            eprintln!("echo: {threads:?}, {paths} paths");
            let (ep, conn) = client(threads, paths, server, &cfg);
            let data = pattern(3_000_000, paths);
            assert!(echo(&conn, &data) == data, "{threads:?}, {paths} paths: the echo differs");
            let ids = conn.path_ids().expect("paths");
            assert_eq!(ids.len(), usize::from(paths), "{threads:?}: {ids:?}");
            conn.close(0, b"done");
            ep.wait_idle().wait();
            drop(conn);
            let reports = ep.shutdown().expect("the last handle").expect("a clean stop");
            let driving: Vec<&Vec<u64>> = reports.iter().map(|r| &r.paths).filter(|p| !p.is_empty()).collect();
            match threads {
                Threads::Single | Threads::Shards(_) => assert!(driving.is_empty(), "{driving:?}"),
                Threads::PerPath => {
                    // Every path had a thread; a thread of its own up to the CPUs' count.
                    let cores = std::thread::available_parallelism().map_or(1, usize::from);
                    assert!(ids.iter().all(|id| driving.iter().any(|p| p.contains(id))), "{ids:?} {driving:?}");
                    assert!(driving.len() <= cores, "{cores} CPUs: {driving:?}");
                    assert!(driving.len() >= usize::from(paths).min(cores), "{paths} paths: {driving:?}");
                }
            }
        }
    }
}

/// The path threads' limit ([`PathThreadLimit`]): by default paths share as many threads as
/// there are CPUs, `PerPath` gives each its own, `Most(1)` puts all on one; every way the
/// echo is byte-exact.
#[test]
fn the_path_thread_limit_sets_how_many_threads_four_paths_get() {
    log();
    let transport = TransportConfig { initial_max_path_id: Some(8), ..TransportConfig::default() };
    let (server, cfg, _serving) = echo_server(Threads::Single, transport);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    for (limit, want) in
        [(PathThreadLimit::Cores, cores.min(4)), (PathThreadLimit::PerPath, 4), (PathThreadLimit::Most(1), 1)]
    {
        let options = Options { threads: Threads::PerPath, path_threads: limit, ..Options::default() };
        let (ep, conn) = client_with(options, 4, server, &cfg);
        let data = pattern(2_000_000, 4);
        assert!(echo(&conn, &data) == data, "{limit:?}: the echo differs");
        let ids = conn.path_ids().expect("paths");
        conn.close(0, b"done");
        ep.wait_idle().wait();
        drop(conn);
        let reports = ep.shutdown().expect("the last handle").expect("a clean stop");
        let driving: Vec<&Vec<u64>> = reports.iter().map(|r| &r.paths).filter(|p| !p.is_empty()).collect();
        assert_eq!(driving.len(), want, "{limit:?}: {driving:?}");
        for id in &ids {
            assert_eq!(driving.iter().filter(|p| p.contains(id)).count(), 1, "{limit:?}: path {id} in {driving:?}");
        }
    }
}

/// The echo read back with `read_chunk` over two paths: the buffers come out in order and
/// whole (no byte lost or repeated between them) and the stream ends with `None`.
#[test]
fn read_chunk_hands_out_the_data_in_order_over_two_paths() {
    log();
    for threads in RUNTIMES {
        let transport = TransportConfig { initial_max_path_id: Some(8), ..TransportConfig::default() };
        let (server, cfg, _serving) = echo_server(threads, transport);
        let (ep, conn) = client(threads, 2, server, &cfg);
        let data = pattern(2_000_000, 9);
        let (mut send, mut recv) = conn.open_bi().wait().expect("open_bi");
        let out = data.clone();
        let writer = std::thread::spawn(move || {
            send.write_all(&out).wait().expect("write");
            send.finish().expect("finish");
        });
        let mut back = Vec::new();
        let mut chunks = 0;
        while let Some(chunk) = recv.read_chunk(64 * 1024).wait().expect("read_chunk") {
            assert!(!chunk.is_empty() && chunk.len() <= 64 * 1024, "a chunk of {} bytes", chunk.len());
            back.extend_from_slice(&chunk);
            chunks += 1;
        }
        writer.join().expect("writer");
        assert!(back == data, "{threads:?}: the data read in chunks differs");
        assert!(chunks > 1, "{threads:?}: {chunks} chunks");
        assert!(recv.read_chunk(1).wait().expect("after the end").is_none(), "the end is the end");
        conn.close(0, b"done");
        ep.wait_idle().wait();
    }
}

/// Reads of every size interleaved (`read` into 1, 7 and 5000 bytes, `read_chunk` of 100
/// and of a megabyte) of data written with `write_chunk`: a read takes a batch of chunks
/// from the connection ahead and hands it out piece by piece, and the pieces join up to the
/// data sent, each byte once, then the end.
#[test]
fn reads_of_mixed_sizes_see_every_byte_once() {
    log();
    for threads in [Threads::Single, Threads::PerPath] {
        let (server, cfg, _serving) = echo_server(threads, TransportConfig::default());
        let (ep, conn) = client(threads, 1, server, &cfg);
        let data = pattern(1_500_000, 3);
        let (mut send, mut recv) = conn.open_bi().wait().expect("open_bi");
        // Written without a copy, in pieces that do not match the reads'.
        let out = bytes::Bytes::from(data.clone());
        let writer = std::thread::spawn(move || {
            for piece in [out.slice(..333_333), out.slice(333_333..)] {
                send.write_chunk(piece).wait().expect("write_chunk");
            }
            send.finish().expect("finish");
        });
        let mut back = Vec::new();
        let mut buf = vec![0u8; 5000];
        for turn in 0usize.. {
            let piece = match turn % 5 {
                0 => recv.read(&mut buf[..1]).wait().expect("read").map(|n| buf[..n].to_vec()),
                1 => recv.read(&mut buf[..7]).wait().expect("read").map(|n| buf[..n].to_vec()),
                2 => recv.read(&mut buf).wait().expect("read").map(|n| buf[..n].to_vec()),
                3 => recv.read_chunk(100).wait().expect("read_chunk").map(|c| c.to_vec()),
                _ => recv.read_chunk(1 << 20).wait().expect("read_chunk").map(|c| c.to_vec()),
            };
            let Some(piece) = piece else { break };
            assert!(!piece.is_empty(), "{threads:?}: an empty read before the end");
            back.extend_from_slice(&piece);
        }
        writer.join().expect("writer");
        assert_eq!(back.len(), data.len(), "{threads:?}");
        assert!(back == data, "{threads:?}: the data read in pieces differs");
        assert_eq!(recv.read(&mut buf).wait().expect("after the end"), None, "the end is the end");
        conn.close(0, b"done");
        ep.wait_idle().wait();
    }
}

/// Eight threads each open their own unidirectional stream on one connection and send a
/// different amount; each gets its own length back on a stream the server opens.
#[test]
fn many_streams_from_many_threads_at_once() {
    log();
    for threads in RUNTIMES {
        let transport = TransportConfig { initial_max_path_id: Some(8), ..TransportConfig::default() };
        let (server, cfg, _serving) = echo_server(threads, transport);
        let (_ep, conn) = client(threads, 2, server, &cfg);
        let senders: Vec<_> = (0..8usize)
            .map(|k| {
                let conn = conn.clone();
                std::thread::spawn(move || {
                    let mut s = conn.open_uni().wait().expect("open_uni");
                    s.write_all(&pattern(100_000 + 37_000 * k, k as u8)).wait().expect("write");
                    s.finish().expect("finish");
                })
            })
            .collect();
        for s in senders {
            s.join().expect("sender");
        }
        let mut lengths = Vec::new();
        for _ in 0..8 {
            let mut r = conn.accept_uni().wait().expect("an answer stream");
            let b = r.read_to_end(8).wait().expect("read");
            lengths.push(u64::from_be_bytes(b.try_into().expect("8 bytes")));
        }
        lengths.sort_unstable();
        let want: Vec<u64> = (0..8u64).map(|k| 100_000 + 37_000 * k).collect();
        assert_eq!(lengths, want, "{threads:?}");
    }
}

#[test]
fn a_server_that_never_answers_ends_the_handshake_with_its_timeout() {
    log();
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let transport =
        TransportConfig { handshake_timeout: Some(Duration::from_millis(300)), ..TransportConfig::default() };
    let (cfg, _) = mpq_proto::testing::configs(transport);
    for threads in RUNTIMES {
        let ep = Endpoint::client(&[addr("127.0.0.1:0")], Options { threads, ..Options::default() }).expect("endpoint");
        let r = ep.connect(silent.local_addr().expect("addr"), "localhost", &cfg).expect("connect").wait();
        assert!(
            matches!(r, Err(Error::Closed(ConnectionError::HandshakeTimeout { peer_answered: false }))),
            "{threads:?}: {r:?}"
        );
    }
}

/// A stream the peer resets reads as an error with the peer's code; a connection the peer
/// closed says so to every call; an endpoint closed accepts nothing more.
#[test]
fn resets_closes_and_a_closed_endpoint_are_reported() {
    log();
    let (client_cfg, server_cfg) = mpq_proto::testing::configs(TransportConfig::default());
    let server = Endpoint::server(&[addr("127.0.0.1:0")], server_cfg, Options::default()).expect("server");
    let server_addr = server.local_addrs()[0];
    let accepting = {
        let server = server.clone();
        std::thread::spawn(move || {
            let conn = server.accept().wait().expect("a connection");
            let mut s = conn.open_uni().wait().expect("open_uni");
            s.write_all(b"partial").wait().expect("write");
            s.reset(77).expect("reset");
            // Closed by the client: every call says so.
            let why = conn.closed().wait();
            assert!(matches!(why, Error::Closed(ConnectionError::ApplicationClosed { code: 5, .. })), "{why:?}");
            assert!(matches!(conn.open_uni().wait(), Err(Error::Closed(_))));
        })
    };
    let ep = Endpoint::client(&[addr("127.0.0.1:0")], Options::default()).expect("client");
    let conn = ep.connect(server_addr, "localhost", &client_cfg).expect("connect").wait().expect("handshake");
    let mut r = conn.accept_uni().wait().expect("the server's stream");
    let got = r.read_to_end(1 << 20).wait();
    assert!(matches!(got, Err(Error::Stream(mpq_proto::stream::StreamError::Reset(77)))), "{got:?}");
    conn.close(5, b"bye");
    accepting.join().expect("server side");
    server.close(0, b"");
    assert!(server.accept().wait().is_none(), "a closed endpoint accepts nothing");
}

/// A server endpoint in runtime `threads` that does nothing by itself (the test accepts),
/// its address, and a client configuration for it; idle timeout [`IDLE`].
fn bare_server(threads: Threads) -> (Endpoint, SocketAddr, ClientConfig) {
    let transport = TransportConfig { max_idle_timeout: IDLE, ..TransportConfig::default() };
    let (client_cfg, server_cfg) = mpq_proto::testing::configs(transport);
    let server = Endpoint::server(&[addr("127.0.0.1:0")], server_cfg, Options { threads, ..Options::default() })
        .expect("server");
    let server_addr = server.local_addrs()[0];
    (server, server_addr, client_cfg)
}

/// A stream call made after the connection closed and drained (its protocol state gone)
/// still says why it closed: it answered "the connection is gone" instead whenever the
/// reading task came late, e.g. a sharded `mpq client` stopped by its server.
#[test]
fn calls_after_the_drain_still_say_why_the_connection_closed() {
    log();
    for threads in RUNTIMES {
        let (server, server_addr, client_cfg) = bare_server(threads);
        let (ep, conn) = client(threads, 1, server_addr, &client_cfg);
        let (mut send, mut recv) = conn.open_bi().wait().expect("open_bi");
        send.write_all(b"hello").wait().expect("write");
        let accepted = server.accept().wait().expect("a connection");
        let (_, mut theirs) = accepted.accept_bi().wait().expect("the client's stream");
        let mut hello = [0u8; 5];
        let mut got = 0;
        while got < hello.len() {
            got += theirs.read(&mut hello[got..]).wait().expect("read").expect("not the stream's end");
        }
        accepted.close(9, b"going away");
        let why = |e: &Error| matches!(e, Error::Closed(ConnectionError::ApplicationClosed { code: 9, .. }));
        let closed = conn.closed().wait();
        assert!(why(&closed), "{threads:?}: {closed:?}");
        // Drained: the connection's protocol state is gone from the endpoint.
        ep.wait_idle().wait();
        let mut buf = [0u8; 16];
        let read = recv.read(&mut buf).wait();
        assert!(read.as_ref().is_err_and(why), "{threads:?}: read after the drain: {read:?}");
        let write = send.write_all(b"more").wait();
        assert!(write.as_ref().is_err_and(why), "{threads:?}: write after the drain: {write:?}");
        let open = conn.open_uni().wait();
        assert!(open.as_ref().is_err_and(why), "{threads:?}: open after the drain: {:?}", open.err());
        server.close(0, b"");
    }
}

/// A client that connects after the server's endpoint was closed is told so at once, instead
/// of completing a handshake nobody accepts and learning nothing until its idle timeout (a
/// stopping `mpq server` drains for up to 3 s, and clients kept coming).
#[test]
fn a_closed_server_turns_new_clients_away() {
    log();
    for threads in RUNTIMES {
        let (server, server_addr, client_cfg) = bare_server(threads);
        server.close(0, b"shutting down");
        let ep = Endpoint::client(&[addr("127.0.0.1:0")], Options { threads, ..Options::default() }).expect("client");
        // (Closed during its handshake, the client sees the transport's APPLICATION_ERROR,
        // RFC 9000 §10.2.3; after it, the application's close.)
        let why = match ep.connect(server_addr, "localhost", &client_cfg).expect("connect").wait() {
            Ok(conn) => conn.closed().wait(),
            Err(e) => e,
        };
        assert!(
            matches!(
                why,
                Error::Closed(ConnectionError::ConnectionClosed(_) | ConnectionError::ApplicationClosed { .. })
            ),
            "{threads:?}: {why:?}"
        );
    }
}

/// A server's connection, once the client closed it, reports why and its figures then
/// (`final_report`: the peer, multipath, both paths' bytes); none while it is open.
#[test]
fn a_closed_connection_keeps_its_final_report() {
    log();
    for threads in RUNTIMES {
        let transport =
            TransportConfig { max_idle_timeout: IDLE, initial_max_path_id: Some(8), ..TransportConfig::default() };
        let (client_cfg, server_cfg) = mpq_proto::testing::configs(transport);
        let server = Endpoint::server(&[addr("127.0.0.1:0")], server_cfg, Options { threads, ..Options::default() })
            .expect("server");
        let server_addr = server.local_addrs()[0];
        let accepting = {
            let server = server.clone();
            std::thread::spawn(move || {
                let conn = server.accept().wait().expect("a connection");
                assert!(conn.final_report().is_none(), "a report before the close");
                echo_streams(conn.clone());
                conn.closed().wait();
                conn.final_report().expect("a report once closed")
            })
        };
        let (ep, conn) = client(threads, 2, server_addr, &client_cfg);
        let data = pattern(200_000, 9);
        assert!(echo(&conn, &data) == data, "{threads:?}: echo differs");
        conn.close(5, b"bye");
        let report = accepting.join().expect("server side");
        assert!(
            matches!(report.error, ConnectionError::ApplicationClosed { code: 5, .. }),
            "{threads:?}: {:?}",
            report.error
        );
        assert!(ep.local_addrs().contains(&report.remote), "{threads:?}: {} is none of the client's", report.remote);
        let sent: u64 = report.stats.paths.iter().map(|p| p.tx_bytes).sum();
        assert!(sent >= data.len() as u64, "{threads:?}: the report counts {sent} bytes sent");
        assert!(report.multipath && report.stats.paths.len() == 2, "{threads:?}: {:?}", report.stats.paths);
        server.close(0, b"");
        drop(ep);
    }
}

/// A connection's path threads end once it is gone, at both ends, with nothing else
/// happening on the endpoint (a server's used to wait, sockets and all, until the next
/// connection woke them).
#[test]
#[allow(clippy::disallowed_methods)] // (the wait's bound is wall-clock time)
fn path_threads_end_with_their_connection() {
    log();
    let transport =
        TransportConfig { max_idle_timeout: IDLE, initial_max_path_id: Some(8), ..TransportConfig::default() };
    let (client_cfg, server_cfg) = mpq_proto::testing::configs(transport);
    let options = Options { threads: Threads::PerPath, ..Options::default() };
    let server = Endpoint::server(&[addr("127.0.0.1:0")], server_cfg, options.clone()).expect("server");
    let server_addr = server.local_addrs()[0];
    let accepting = {
        let server = server.clone();
        std::thread::spawn(move || {
            let conn = server.accept().wait().expect("a connection");
            echo_streams(conn.clone());
            conn.closed().wait();
            // (Kept: dropping a handle, like any call into the runtime, wakes its threads.)
            conn
        })
    };
    let (ep, conn) = client(Threads::PerPath, 2, server_addr, &client_cfg);
    let data = pattern(100_000, 5);
    assert!(echo(&conn, &data) == data, "echo differs");
    assert_eq!((ep.runtime_threads(), server.runtime_threads()), (3, 3), "the runtime's thread and one per path");
    conn.close(0, b"");
    let _closed = accepting.join().expect("server side");
    ep.wait_idle().wait();
    // Bounded: the connections drain in three PTOs (milliseconds on loopback) and their
    // threads end at the wake that follows; the server's application makes no call that
    // would wake them.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while (ep.runtime_threads(), server.runtime_threads()) != (1, 1) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!((ep.runtime_threads(), server.runtime_threads()), (1, 1), "path threads outlived their connection");
}

/// A path manager set on a client's connection opens the second address pair's path by
/// itself once multipath is in use, and opens one again after the path is abandoned.
#[test]
fn the_path_manager_opens_and_reopens_paths() {
    log();
    for threads in RUNTIMES {
        let transport = TransportConfig { initial_max_path_id: Some(8), ..TransportConfig::default() };
        let (server, cfg, _serving) = echo_server(threads, transport);
        let locals = [addr("127.0.0.1:0"), addr("127.0.0.2:0")];
        let ep = Endpoint::client(&locals, Options { threads, ..Options::default() }).expect("client");
        let conn = ep.connect(server, "localhost", &cfg).expect("connect").wait().expect("handshake");
        let second = ep.local_addrs()[1];
        let config = mpq_api::PathManagerConfig {
            locals: vec![None, Some(second)],
            remotes: vec![server],
            mode: mpq_api::PathMode::Mesh,
            max_paths: 2,
            reopen_backoff: Duration::from_millis(20),
            status: mpq_api::PathStatus::Available,
        };
        conn.set_path_manager(Some(config)).expect("a path manager");
        let validated = |conn: &Connection| loop {
            match conn.path_event().wait().expect("a path event") {
                mpq_api::PathEvent::Validated { id } if id != 0 => return id,
                _ => {}
            }
        };
        let first = validated(&conn);
        conn.abandon_path(first, 0).expect("abandon");
        let again = validated(&conn);
        assert!(again > first, "{threads:?}: path {again} after {first}");
        let data = pattern(500_000, 3);
        assert!(echo(&conn, &data) == data, "{threads:?}: echo differs");
        conn.set_path_manager(None).expect("stop");
        conn.close(0, b"");
        ep.wait_idle().wait();
    }
}

/// A path abandoned in the middle of an echo: the rest goes over the other path, intact.
#[test]
fn a_path_abandoned_mid_transfer_loses_nothing() {
    log();
    for threads in RUNTIMES {
        eprintln!("abandon: {threads:?}");
        let transport = TransportConfig { initial_max_path_id: Some(8), ..TransportConfig::default() };
        let (server, cfg, _serving) = echo_server(threads, transport);
        let (_ep, conn) = client(threads, 2, server, &cfg);
        let data = pattern(8_000_000, 3);
        let (mut send, mut recv) = conn.open_bi().wait().expect("open_bi");
        let out = data.clone();
        let writer = std::thread::spawn(move || {
            send.write_all(&out).wait().expect("write");
            send.finish().expect("finish");
        });
        // Once a quarter is back, path 1 goes.
        let mut back = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut abandoned = false;
        while let Some(n) = recv.read(&mut buf).wait().expect("read") {
            back.extend_from_slice(&buf[..n]);
            if !abandoned && back.len() > data.len() / 4 {
                conn.abandon_path(1, 0).expect("abandon path 1");
                abandoned = true;
            }
        }
        writer.join().expect("writer");
        assert!(abandoned, "{threads:?}: the transfer ended before a quarter was back");
        assert!(back == data, "{threads:?}: {} bytes back of {}", back.len(), data.len());
        let ids = conn.path_ids().expect("paths");
        assert!(!ids.contains(&1), "{threads:?}: path 1 is still open: {ids:?}");
    }
}

/// The scheduler is switched by name on a live two-path connection (an unknown name is
/// refused with the names it takes), and the connection goes on byte-exact.
#[test]
fn the_scheduler_is_switched_by_name_on_a_live_connection() {
    log();
    for threads in RUNTIMES {
        let transport = TransportConfig { initial_max_path_id: Some(8), ..TransportConfig::default() };
        let (server, cfg, _serving) = echo_server(threads, transport);
        let (ep, conn) = client(threads, 2, server, &cfg);
        conn.set_scheduler("round-robin").expect("a known scheduler");
        match conn.set_scheduler("fastest") {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("expected minrtt, round-robin"), "{m}"),
            other => panic!("an unknown scheduler was not refused: {other:?}"),
        }
        let data = pattern(1_000_000, 2);
        assert!(echo(&conn, &data) == data, "{threads:?}: the echo differs after the switch");
        conn.close(0, b"done");
        ep.wait_idle().wait();
    }
}

/// A connection without multipath migrates to the endpoint's second address between two
/// transfers and goes on byte-exact; the path now sends from there.
#[test]
fn a_connection_migrates_to_another_local_address() {
    log();
    for server_threads in RUNTIMES {
        migrates_with_the_server_in(server_threads);
    }
}

fn migrates_with_the_server_in(server_threads: Threads) {
    let (server, cfg, _serving) = echo_server(server_threads, TransportConfig::default());
    let locals = [addr("127.0.0.1:0"), addr("127.0.0.2:0")];
    let ep = Endpoint::client(&locals, Options { threads: Threads::Single, ..Options::default() }).expect("client");
    let conn = ep.connect(server, "localhost", &cfg).expect("connect").wait().expect("handshake");
    let data = pattern(300_000, 3);
    // After a first echo the handshake is confirmed and the server has issued spare IDs.
    assert!(echo(&conn, &data) == data);
    let to = ep.local_addrs()[1];
    conn.migrate(to).expect("migrate");
    assert!(echo(&conn, &data) == data, "the echo differs after the migration");
    let paths = conn.path_stats().expect("stats");
    assert_eq!(paths.len(), 1, "still one path");
    conn.close(0, b"done");
    ep.wait_idle().wait();
}

/// Session resumption and 0-RTT through the API, in both runtimes: a second connection with
/// the same `ClientConfig` resumes the first one's session, is handed out before its
/// handshake completes (`into_0rtt`), and its request, written then, reaches the echo server
/// in 0-RTT packets and comes back exactly; the server accepted the early data.
#[test]
fn a_resumed_connection_sends_its_request_in_0rtt() {
    log();
    for threads in RUNTIMES {
        let transport = TransportConfig { max_idle_timeout: IDLE, ..TransportConfig::default() };
        let (client_cfg, server_cfg) = mpq_proto::testing::zero_rtt_configs(transport);
        let server = Endpoint::server(&[addr("127.0.0.1:0")], server_cfg, Options { threads, ..Options::default() })
            .expect("server endpoint");
        let server_addr = server.local_addrs()[0];
        let serving = std::thread::spawn(move || {
            while let Some(conn) = server.accept().wait() {
                std::thread::spawn(move || {
                    while let Ok((mut send, mut recv)) = conn.accept_bi().wait() {
                        let Ok(data) = recv.read_to_end(1 << 20).wait() else { return };
                        let _ = send.write_all(&data).wait();
                        let _ = send.finish();
                    }
                });
            }
        });
        let ep = Endpoint::client(&[addr("127.0.0.1:0")], Options { threads, ..Options::default() }).expect("client");
        // The first connection: a full handshake; an echo gives the tickets time to arrive.
        let first = ep.connect(server_addr, "localhost", &client_cfg).expect("connect").wait().expect("handshake");
        assert!(echo(&first, b"first") == b"first");
        assert!(first.handshake_info().expect("info").is_some_and(|i| !i.resumed));
        first.close(0, b"done");
        // The second: resumed, early.
        let connecting = ep.connect(server_addr, "localhost", &client_cfg).expect("connect");
        let Ok(second) = connecting.into_0rtt() else { panic!("{threads:?}: no 0-RTT keys for a resumed session") };
        // (Pending however long this thread was descheduled: `connect` held the first flight
        // until the application's first call that sends; reading the state is not one.)
        assert_eq!(second.zero_rtt().expect("state"), mpq_api::ZeroRttState::Pending, "{threads:?}");
        let request = pattern(3000, 5);
        let (mut send, mut recv) = second.open_bi().wait().expect("open_bi before the handshake");
        send.write_all(&request).wait().expect("write in 0-RTT");
        send.finish().expect("finish");
        let back = recv.read_to_end(request.len()).wait().expect("read");
        assert!(back == request, "{threads:?}: the echo of the early request differs");
        let second = second.established().wait().expect("the handshake completes");
        let info = second.handshake_info().expect("info").expect("done");
        assert!(info.resumed, "{threads:?}: {info}");
        assert_eq!(second.zero_rtt().expect("state"), mpq_api::ZeroRttState::Accepted, "{threads:?}");
        second.close(0, b"done");
        ep.wait_idle().wait();
        drop((first, second, ep));
        drop(serving);
    }
}
