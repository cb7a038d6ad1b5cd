//! The echo of `echo.rs` on tokio: the streams are tokio `AsyncRead` / `AsyncWrite` (the
//! `tokio` feature), and the API's futures run on tokio's executor like any other.
//!
//! ```sh
//! cargo run --release -p mpq-api --features tokio --example tokio_echo
//! ```

use mpq_api::{Endpoint, Error, Options, TransportConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let (client_cfg, server_cfg) = mpq_proto::testing::configs(TransportConfig::default());
    let server = Endpoint::server(&["127.0.0.1:0".parse().expect("addr")], server_cfg, Options::default())?;
    let addr = server.local_addrs()[0];
    let serving = tokio::spawn(async move {
        let conn = server.accept().await.expect("a connection");
        let (mut send, mut recv) = conn.accept_bi().await?;
        tokio::io::copy(&mut recv, &mut send).await?;
        AsyncWriteExt::shutdown(&mut send).await?;
        conn.closed().await;
        Ok::<(), Error>(())
    });
    let client = Endpoint::client(&["127.0.0.1:0".parse().expect("addr")], Options::default())?;
    let conn = client.connect(addr, "localhost", &client_cfg)?.await?;
    let (mut send, mut recv) = conn.open_bi().await?;
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
    let sent = data.clone();
    let writer = tokio::spawn(async move {
        // (Through the tokio traits: the streams' own `write_all` is the API's future.)
        AsyncWriteExt::write_all(&mut send, &sent).await?;
        AsyncWriteExt::shutdown(&mut send).await?;
        Ok::<(), std::io::Error>(())
    });
    let mut echoed = Vec::new();
    AsyncReadExt::read_to_end(&mut recv, &mut echoed).await?;
    writer.await.expect("writer task")?;
    assert!(echoed == data, "the echo differs from what was sent");
    println!("{} bytes echoed intact over tokio", echoed.len());
    conn.close(0, b"done");
    client.wait_idle().await;
    serving.await.expect("server task")
}
