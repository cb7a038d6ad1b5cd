//! h3 over mpq end to end on loopback: requests with and without bodies, answered
//! byte-exact, concurrently, over one path and over two paths in the per-path runtime; a
//! status other than 200; the error mapping.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, Bytes};
use h3::quic::{ConnectionErrorIncoming, StreamErrorIncoming};
use mpq_api::{ConnectionError, Endpoint, Error, Options, Threads, TransportConfig};
use mpq_proto::stream::StreamError;

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("address")
}

/// `len` bytes that differ from request to request (`salt`) and along the body.
fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| ((i as u64).wrapping_mul(2_654_435_761) >> 7) as u8 ^ salt).collect()
}

/// The test server's answers: `GET /N` is `pattern(N, N % 251)`; `POST` echoes the body;
/// anything else is 404.
async fn serve(conn: mpq_api::Connection) {
    let mut h3 = h3::server::builder().build(crate::Connection::new(conn)).await.expect("h3 server");
    while let Ok(Some(resolver)) = h3.accept().await {
        tokio::spawn(async move {
            let (req, mut stream) = resolver.resolve_request().await.expect("request");
            let body = if req.method() == http::Method::POST {
                let mut body = Vec::new();
                while let Some(chunk) = stream.recv_data().await.expect("request body") {
                    body.extend_from_slice(chunk.chunk());
                }
                Some(body)
            } else {
                req.uri().path()[1..].parse::<usize>().ok().map(|n| pattern(n, (n % 251) as u8))
            };
            let status = if body.is_some() { http::StatusCode::OK } else { http::StatusCode::NOT_FOUND };
            stream
                .send_response(http::Response::builder().status(status).body(()).expect("response"))
                .await
                .expect("send response");
            if let Some(body) = body {
                // In pieces, as a file server sends.
                for piece in body.chunks(100_000) {
                    stream.send_data(Bytes::copy_from_slice(piece)).await.expect("send body");
                }
            }
            stream.finish().await.expect("finish");
        });
    }
}

/// A server endpoint on 127.0.0.1 answering with [`serve`], and the client configuration
/// that trusts it (ALPN h3).
fn server(threads: Threads) -> (SocketAddr, mpq_api::ClientConfig) {
    let transport = std::sync::Arc::new(TransportConfig {
        max_idle_timeout: Duration::from_secs(5),
        initial_max_path_id: Some(4),
        ..Default::default()
    });
    let (client_tls, server_tls) = mpq_proto::testing::tls_configs(crate::ALPN);
    let server_cfg = mpq_api::ServerConfig { tls: server_tls, transport: transport.clone() };
    let ep = Endpoint::server(&[addr("127.0.0.1:0")], server_cfg, Options { threads, ..Options::default() })
        .expect("server");
    let at = ep.local_addrs()[0];
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        rt.block_on(async move {
            while let Some(conn) = ep.accept().await {
                tokio::spawn(serve(conn));
            }
        });
    });
    (at, mpq_api::ClientConfig { tls: client_tls, transport })
}

/// Sends one request and returns the status and the body.
async fn fetch(
    send: &mut h3::client::SendRequest<crate::Opener, Bytes>,
    method: http::Method,
    path: &str,
    body: Option<Vec<u8>>,
) -> (http::StatusCode, Vec<u8>) {
    let req =
        http::Request::builder().method(method).uri(format!("https://localhost{path}")).body(()).expect("request");
    let mut stream = send.send_request(req).await.expect("send request");
    if let Some(body) = body {
        stream.send_data(Bytes::from(body)).await.expect("request body");
    }
    stream.finish().await.expect("finish request");
    let resp = stream.recv_response().await.expect("response");
    let mut out = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.expect("response body") {
        while chunk.has_remaining() {
            let c = chunk.chunk();
            out.extend_from_slice(c);
            let n = c.len();
            chunk.advance(n);
        }
    }
    (resp.status(), out)
}

/// Runs requests over a client of `paths` loopback addresses (each extra one a validated
/// path) and returns the connection's per-path bytes received.
fn run_client(threads: Threads, paths: u8) -> Vec<u64> {
    let (server, cfg) = server(threads);
    let locals: Vec<SocketAddr> = (1..=paths).map(|k| addr(&format!("127.0.0.{k}:0"))).collect();
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    rt.block_on(async move {
        let ep = Endpoint::client(&locals, Options { threads, ..Options::default() }).expect("client");
        let conn = ep.connect(server, "localhost", &cfg).expect("connect").await.expect("handshake");
        for &local in &ep.local_addrs()[1..] {
            conn.add_path(Some(local), server, false).await.expect("a validated path");
        }
        let (mut driver, send) = h3::client::new(crate::Connection::new(conn.clone())).await.expect("h3 client");
        let driving = tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
        // Concurrent requests of several sizes, one of them several megabytes.
        let mut tasks = Vec::new();
        for n in [0usize, 1, 1_000, 100_000, 4_000_000] {
            let mut send = send.clone();
            tasks.push(tokio::spawn(async move {
                let (status, body) = fetch(&mut send, http::Method::GET, &format!("/{n}"), None).await;
                assert_eq!(status, http::StatusCode::OK);
                assert!(body == pattern(n, (n % 251) as u8), "GET /{n}: {} bytes, not the ones sent", body.len());
            }));
        }
        for t in tasks {
            t.await.expect("request task");
        }
        let mut send2 = send.clone();
        let upload = pattern(700_000, 9);
        let (status, body) = fetch(&mut send2, http::Method::POST, "/echo", Some(upload.clone())).await;
        assert_eq!(status, http::StatusCode::OK);
        assert!(body == upload, "the POST's echo differs");
        let (status, body) = fetch(&mut send2, http::Method::GET, "/missing", None).await;
        assert_eq!(status, http::StatusCode::NOT_FOUND);
        assert!(body.is_empty());
        let rx = conn.path_stats().expect("stats").iter().map(|p| p.rx_bytes).collect();
        drop((send, send2));
        // No request sender left: h3 closes the connection with H3_NO_ERROR.
        let closed = driving.await.expect("driver task");
        assert!(closed.is_h3_no_error(), "the connection closed with {closed:?}");
        ep.wait_idle().await;
        rx
    })
}

#[test]
fn h3_requests_are_answered_byte_exact_over_one_path() {
    let rx = run_client(Threads::Single, 1);
    assert_eq!(rx.len(), 1);
}

#[test]
fn h3_requests_are_answered_byte_exact_over_two_paths_in_the_per_path_runtime() {
    let rx = run_client(Threads::PerPath, 2);
    assert_eq!(rx.len(), 2, "two paths");
    // The scheduler spreads the 5 MB of answers: each path carries some of it.
    assert!(rx.iter().all(|&b| b > 50_000), "bytes received per path: {rx:?}");
}

#[test]
fn errors_map_to_what_h3_expects() {
    let app = Error::Closed(ConnectionError::ApplicationClosed { code: 0x100, reason: String::new() });
    assert!(matches!(
        crate::errors::connection_error(app),
        ConnectionErrorIncoming::ApplicationClose { error_code: 0x100 }
    ));
    assert!(matches!(
        crate::errors::connection_error(Error::Closed(ConnectionError::TimedOut)),
        ConnectionErrorIncoming::Timeout
    ));
    assert!(matches!(crate::errors::connection_error(Error::Gone), ConnectionErrorIncoming::Undefined(_)));
    for e in [StreamError::Reset(0x10c), StreamError::Stopped(0x10c)] {
        assert!(matches!(
            crate::errors::stream_error(Error::Stream(e)),
            StreamErrorIncoming::StreamTerminated { error_code: 0x10c }
        ));
    }
    assert!(matches!(
        crate::errors::stream_error(Error::Closed(ConnectionError::TimedOut)),
        StreamErrorIncoming::ConnectionErrorIncoming { connection_error: ConnectionErrorIncoming::Timeout }
    ));
    assert!(matches!(
        crate::errors::stream_error(Error::Stream(StreamError::ClosedStream)),
        StreamErrorIncoming::Unknown(_)
    ));
}
