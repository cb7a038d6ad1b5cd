//! A minimal server and client in one process, on the blocking API: the server echoes every
//! bidirectional stream back; the client connects over one or more loopback paths, sends
//! 4 MB, checks the echo byte for byte and prints what each path carried.
//!
//! ```sh
//! cargo run --release -p mpq-api --example echo -- [--paths N] [--threads single|per-path]
//! ```
//!
//! The certificate is a self-signed one for `localhost`, made at start
//! (`mpq_proto::testing::configs`); a real server loads its own (`ServerConfig::tls`).

use mpq_api::{Connection, Endpoint, Error, Options, Threads, TransportConfig, Wait};
use std::net::SocketAddr;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let paths: u8 = flag("--paths").and_then(|v| v.parse().ok()).unwrap_or(2).clamp(1, 8);
    let threads = match flag("--threads").as_deref() {
        Some("single") => Threads::Single,
        _ => Threads::PerPath,
    };
    let transport = TransportConfig { initial_max_path_id: Some(8), ..TransportConfig::default() };
    let (client_cfg, server_cfg) = mpq_proto::testing::configs(transport);
    let options = Options { threads, ..Options::default() };

    let server = Endpoint::server(&["127.0.0.1:0".parse().expect("addr")], server_cfg, options.clone())?;
    let server_addr = server.local_addrs()[0];
    let serving = std::thread::spawn(move || serve(server));

    // One local address per path: 127.0.0.1, 127.0.0.2, ...
    let locals: Vec<SocketAddr> = (1..=paths).map(|k| format!("127.0.0.{k}:0").parse().expect("addr")).collect();
    let client = Endpoint::client(&locals, options)?;
    let conn = client.connect(server_addr, "localhost", &client_cfg)?.wait()?;
    println!("connected to {server_addr} ({threads:?} runtime)");
    open_paths(&conn, &client.local_addrs()[1..], server_addr)?;

    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
    let (mut send, mut recv) = conn.open_bi().wait()?;
    // Write and read at once: the echo comes back while the rest is still being sent.
    let writer = {
        let data = data.clone();
        std::thread::spawn(move || -> Result<(), Error> {
            send.write_all(&data).wait()?;
            send.finish()
        })
    };
    let echoed = recv.read_to_end(data.len()).wait()?;
    writer.join().expect("writer thread")?;
    assert!(echoed == data, "the echo differs from what was sent");
    println!("{} bytes echoed intact", echoed.len());
    for p in conn.path_stats()? {
        println!(
            "  path {}: {} bytes sent, {} received, RTT {:.2} ms, {}",
            p.path_id, p.tx_bytes, p.rx_bytes, p.rtt_ms, p.state
        );
    }
    conn.close(0, b"done");
    client.wait_idle().wait();
    serving.join().expect("server thread")
}

/// Opens a path from each extra local address and waits until each is validated.
fn open_paths(conn: &Connection, locals: &[SocketAddr], server: SocketAddr) -> Result<(), Error> {
    for &local in locals {
        conn.add_path(Some(local), server, false).wait()?;
    }
    Ok(())
}

/// Accepts connections and echoes each of their bidirectional streams, until the client
/// closes its connection.
fn serve(server: Endpoint) -> Result<(), Error> {
    let conn = server.accept().wait().expect("a connection");
    loop {
        let (mut send, mut recv) = match conn.accept_bi().wait() {
            Ok(s) => s,
            // The client closed the connection: done.
            Err(Error::Closed(_)) | Err(Error::Gone) => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut buf = vec![0u8; 64 * 1024];
        while let Some(n) = recv.read(&mut buf).wait()? {
            send.write_all(&buf[..n]).wait()?;
        }
        send.finish()?;
    }
}
