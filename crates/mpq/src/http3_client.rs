//! `mpq client --http3`: the requests over HTTP/3 (RFC 9114, ALPN h3), the h3 crate on
//! mpq's application API; every request at once, each on its own stream (the connections:
//! `api_client`).

use std::io::Write;

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, Bytes};
use indicatif::ProgressBar;

use crate::client::Download;

/// HTTP/3 on `conn`: starts h3, sends every request and writes every body; then closes the
/// connection with H3_NO_ERROR (h3 does when the last request sender goes) after its
/// statistics were taken.
pub async fn h3_requests(
    conn: &mpq_api::Connection,
    downloads: Vec<Download>,
    bar: &ProgressBar,
) -> Result<crate::api_client::Fetched> {
    let (mut driver, send) = h3::client::new(mpq_h3::Connection::new(conn.clone()))
        .await
        .map_err(|e| anyhow!("HTTP/3 did not start: {e}"))?;
    let driving = tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    let clock = crate::progress::Stopwatch::start();
    let mut tasks = Vec::new();
    for d in downloads {
        let send = send.clone();
        let bar = bar.clone();
        tasks.push(tokio::spawn(async move { fetch(send, d, &bar).await }));
    }
    let fetched = crate::api_client::Fetched::collect(conn, &clock, tasks, None).await?;
    // The last request sender: h3 closes the connection once it is gone, so the statistics
    // were taken first.
    drop(send);
    let closed = driving.await.map_err(|e| anyhow!("HTTP/3 driver: {e}"))?;
    if !closed.is_h3_no_error() && fetched.failure.is_none() {
        tracing::info!("HTTP/3 connection ended: {closed}");
    }
    Ok(fetched)
}

/// GETs one URL and writes its body to its file; the body's length.
async fn fetch(
    mut send: h3::client::SendRequest<mpq_h3::Opener, Bytes>,
    mut d: Download,
    bar: &ProgressBar,
) -> Result<u64> {
    let path = d.url.path.clone();
    let authority = if d.url.host.contains(':') { format!("[{}]", d.url.host) } else { d.url.host.clone() };
    let req = http::Request::get(format!("https://{authority}:{}{path}", d.url.port)).body(())?;
    let mut stream = send.send_request(req).await.map_err(|e| anyhow!("GET {path}: {e}"))?;
    match stream.finish().await {
        Ok(()) => {}
        // RFC 9114 §4.1.2: a server that answered without needing the rest of the request may
        // stop it with H3_NO_ERROR, and "clients MUST NOT discard complete responses as a
        // result of having their request terminated abruptly" (quic-go's server answering
        // a 404 did, now and then, before the client's FIN left).
        Err(h3::error::StreamError::RemoteTerminate { code }) if code == h3::error::Code::H3_NO_ERROR => {}
        Err(e) => bail!("GET {path}: {e}"),
    }
    let response = stream.recv_response().await.map_err(|e| anyhow!("GET {path}: {e}"))?;
    if response.status() != http::StatusCode::OK {
        bail!("GET {path}: {}", response.status());
    }
    let mut received = 0u64;
    let mut file = crate::client::buffered(&mut d.file);
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| anyhow!("GET {path}: {e}"))? {
        while chunk.has_remaining() {
            let piece = chunk.chunk();
            file.write_all(piece).with_context(|| format!("GET {path}: writing the file"))?;
            let n = piece.len();
            received += n as u64;
            bar.inc(n as u64);
            chunk.advance(n);
        }
    }
    file.flush().with_context(|| format!("GET {path}: writing the file"))?;
    Ok(received)
}
